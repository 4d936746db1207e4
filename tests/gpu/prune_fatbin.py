"""Zero the payloads of non-sm_90 cubins in a shared library's ``.nv_fatbin`` section.

The layout (headers, offsets, sizes) is unchanged, so the library loads as before; the CUDA driver only
loads the sm_90 images on Hopper (or JIT-compiles the PTX kept up to compute_90), and zeroed payloads
compress to nothing. Usage: ``python3 prune_fatbin.py LIB.so [LIB.so ...]`` (needs pyelftools).
"""

import struct
import sys

from elftools.elf.elffile import ELFFile

KEEP_SM = {90}
FATBIN_MAGIC = 0xBA55ED50
KIND_PTX = 1
KIND_CUBIN = 2


def prune(path):
    with open(path, "rb") as f:
        elf = ELFFile(f)
        sections = [
            (s["sh_offset"], s["sh_size"])
            for s in elf.iter_sections()
            if s.name in (".nv_fatbin", "__nv_relfatbin") and s["sh_type"] != "SHT_NOBITS"
        ]
    if not sections:
        print(path, "no .nv_fatbin")
        return
    with open(path, "rb") as f:
        buf = bytearray(f.read())
    zeroed = kept = 0
    for off0, size in sections:
        data = memoryview(buf)[off0 : off0 + size]
        p = 0
        while p + 16 <= len(data):
            magic, _ver, hsize, fsize = struct.unpack_from("<IHHQ", data, p)
            if magic != FATBIN_MAGIC:
                p += 8
                continue
            q = p + hsize
            end = q + fsize
            while q < end:
                kind, _ev, ehsize, psize = struct.unpack_from("<HHIQ", data, q)
                arch = struct.unpack_from("<I", data, q + 28)[0]
                drop = (kind == KIND_CUBIN and arch not in KEEP_SM) or (
                    kind == KIND_PTX and arch > max(KEEP_SM)
                )
                if drop:
                    data[q + ehsize : q + ehsize + psize] = bytes(psize)
                    zeroed += psize
                else:
                    kept += psize
                q += ehsize + psize
            p = end
    with open(path, "wb") as f:
        f.write(buf)
    print(f"{path}: zeroed {zeroed / 2**20:.1f} MiB, kept {kept / 2**20:.1f} MiB")


if __name__ == "__main__":
    for a in sys.argv[1:]:
        prune(a)
