"""A small RGB raster canvas and PNG encoder (standard library only: zlib + struct).

Enough to draw report charts: lines of any width (solid or dashed), filled rectangles,
markers and 5x7 bitmap text, written as an 8-bit RGB PNG.
"""

from __future__ import annotations

import struct
import zlib

from . import font5x7

Color = tuple[int, int, int]

WHITE: Color = (255, 255, 255)
BLACK: Color = (0, 0, 0)


class Canvas:
    """A width x height RGB image, origin at the top left."""

    def __init__(self, width: int, height: int, background: Color = WHITE) -> None:
        if width <= 0 or height <= 0:
            raise ValueError(f"canvas size must be positive, got {width}x{height}")
        self.width = width
        self.height = height
        self._rows = [bytearray(bytes(background) * width) for _ in range(height)]

    def pixel(self, x: int, y: int) -> Color:
        row = self._rows[y]
        return row[3 * x], row[3 * x + 1], row[3 * x + 2]

    def set(self, x: int, y: int, color: Color) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            row = self._rows[y]
            row[3 * x : 3 * x + 3] = bytes(color)

    def fill_rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """Fill the rectangle with corners (x0, y0) and (x1, y1), both inclusive."""
        xa, xb = max(0, min(x0, x1)), min(self.width - 1, max(x0, x1))
        ya, yb = max(0, min(y0, y1)), min(self.height - 1, max(y0, y1))
        if xa > xb or ya > yb:
            return
        span = bytes(color) * (xb - xa + 1)
        for y in range(ya, yb + 1):
            self._rows[y][3 * xa : 3 * (xb + 1)] = span

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color, width: int = 1) -> None:
        for i in range(width):
            self.line(x0 + i, y0 + i, x1 - i, y0 + i, color)
            self.line(x0 + i, y1 - i, x1 - i, y1 - i, color)
            self.line(x0 + i, y0 + i, x0 + i, y1 - i, color)
            self.line(x1 - i, y0 + i, x1 - i, y1 - i, color)

    def line(
        self,
        x0: float,
        y0: float,
        x1: float,
        y1: float,
        color: Color,
        width: int = 1,
        dash: tuple[int, int] | None = None,
    ) -> None:
        """Bresenham line; ``width`` > 1 stamps a square brush; ``dash`` = (on, off) pixels."""
        ix0, iy0, ix1, iy1 = round(x0), round(y0), round(x1), round(y1)
        dx, dy = abs(ix1 - ix0), -abs(iy1 - iy0)
        sx = 1 if ix0 < ix1 else -1
        sy = 1 if iy0 < iy1 else -1
        err = dx + dy
        step = 0
        half = (width - 1) // 2
        while True:
            if dash is None or step % (dash[0] + dash[1]) < dash[0]:
                if width == 1:
                    self.set(ix0, iy0, color)
                else:
                    self.fill_rect(
                        ix0 - half, iy0 - half, ix0 - half + width - 1, iy0 - half + width - 1, color
                    )
            if ix0 == ix1 and iy0 == iy1:
                break
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                ix0 += sx
            if e2 <= dx:
                err += dx
                iy0 += sy
            step += 1

    def marker(self, x: float, y: float, color: Color, shape: str = "circle", size: int = 4) -> None:
        """A filled marker centred on (x, y): circle, square, triangle or diamond."""
        cx, cy = round(x), round(y)
        for dy in range(-size, size + 1):
            for dx in range(-size, size + 1):
                if shape == "square":
                    inside = True
                elif shape == "diamond":
                    inside = abs(dx) + abs(dy) <= size
                elif shape == "triangle":
                    inside = dy >= -size and abs(dx) * 2 <= (dy + size)
                else:
                    inside = dx * dx + dy * dy <= size * size + size
                if inside:
                    self.set(cx + dx, cy + dy, color)

    def text(self, x: int, y: int, text: str, color: Color = BLACK, scale: int = 2) -> int:
        """Draw ``text`` with its top-left corner at (x, y); returns the x after the last glyph."""
        for char in text:
            rows = font5x7.glyph(char)
            for gy, row in enumerate(rows):
                for gx, cell in enumerate(row):
                    if cell == "#":
                        self.fill_rect(
                            x + gx * scale,
                            y + gy * scale,
                            x + gx * scale + scale - 1,
                            y + gy * scale + scale - 1,
                            color,
                        )
            x += (font5x7.WIDTH + 1) * scale
        return x

    def text_vertical(self, x: int, y: int, text: str, color: Color = BLACK, scale: int = 2) -> None:
        """Draw ``text`` rotated 90 degrees counter-clockwise, reading bottom to top from (x, y)."""
        for char in text:
            rows = font5x7.glyph(char)
            for gy, row in enumerate(rows):
                for gx, cell in enumerate(row):
                    if cell == "#":
                        px, py = x + gy * scale, y - gx * scale
                        self.fill_rect(px, py - scale + 1, px + scale - 1, py, color)
            y -= (font5x7.WIDTH + 1) * scale

    def to_png(self) -> bytes:
        return encode_png(self.width, self.height, self._rows)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def encode_png(width: int, height: int, rows: list[bytearray]) -> bytes:
    """8-bit RGB PNG of ``rows`` (each ``width`` x 3 bytes), filter type 0 on every scanline."""
    if len(rows) != height or any(len(r) != width * 3 for r in rows):
        raise ValueError("rows do not match the image size")
    raw = b"".join(b"\x00" + bytes(r) for r in rows)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(raw, 9))
        + _chunk(b"IEND", b"")
    )


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode a PNG written by :func:`encode_png` (8-bit RGB, filter 0): (width, height, rows).

    Used to check rendered charts; not a general PNG reader.
    """
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    pos, width, height, idat = 8, 0, 0, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            raise ValueError(f"bad CRC in {kind!r} chunk")
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            if (depth, ctype) != (8, 2):
                raise ValueError("only 8-bit RGB PNGs are supported")
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * 3 + 1
    rows = []
    for y in range(height):
        line = raw[y * stride : (y + 1) * stride]
        if line[0] != 0:
            raise ValueError("only filter type 0 is supported")
        rows.append(line[1:])
    return width, height, rows
