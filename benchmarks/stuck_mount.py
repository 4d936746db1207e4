"""A FUSE mount whose one file never answers: a process that opens it sleeps in the kernel in
uninterruptible sleep (D state), and SIGKILL cannot end it until the mount answers. That is how a
container becomes one Docker cannot stop ("tried to kill container, but did not receive an exit
event"), the way a GPU or storage hang does it on a real host.

The kernel's FUSE client waits out a request the daemon has already read, fatal signals
included (fs/fuse/dev.c, request_wait_answer), so reading the request and holding the answer back
is enough. Raw /dev/fuse protocol (no libfuse): root is an empty directory, LOOKUP of
``STUCK`` is held, everything else answers at once. ``release()`` answers the held requests
(ENOENT), the stuck processes then take their pending SIGKILL and exit.

Linux only, as root.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import threading
import time

STUCK = b"stuck"
# opcodes (include/uapi/linux/fuse.h)
LOOKUP, FORGET, GETATTR, OPENDIR, READDIR, RELEASEDIR, INIT, INTERRUPT, DESTROY, BATCH_FORGET = (
    1, 2, 3, 27, 28, 29, 26, 36, 38, 42,
)  # fmt: skip
IN_HEADER = struct.Struct("<IIQQIIII")  # len, opcode, unique, nodeid, uid, gid, pid, padding
OUT_HEADER = struct.Struct("<IiQ")  # len, error, unique
MNT_DETACH = 2
MS_NOSUID, MS_NODEV = 2, 4


def _attr_out() -> bytes:
    # fuse_attr_out: attr_valid, attr_valid_nsec, dummy, then fuse_attr of the root directory
    attr = struct.pack("<QQQQQQIIIIIIIIII", 1, 0, 0, 0, 0, 0, 0, 0, 0, 0o40555, 2, 0, 0, 0, 4096, 0)
    return struct.pack("<QII", 1, 0, 0) + attr


class StuckMount:
    def __init__(self, path: str) -> None:
        self.path = path
        self.held: list[tuple[int, int]] = []  # (unique, pid) of the requests held back
        self._fd = -1
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._libc = ctypes.CDLL(None, use_errno=True)

    def mount(self) -> StuckMount:
        os.makedirs(self.path, exist_ok=True)
        self._fd = os.open("/dev/fuse", os.O_RDWR)
        opts = f"fd={self._fd},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
        if self._libc.mount(b"vf-stuck", self.path.encode(), b"fuse", MS_NOSUID | MS_NODEV, opts) != 0:
            err = ctypes.get_errno()
            os.close(self._fd)
            raise OSError(err, f"mount fuse on {self.path}: {os.strerror(err)}")
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        return self

    def _reply(self, unique: int, error: int = 0, data: bytes = b"") -> None:
        try:
            os.write(self._fd, OUT_HEADER.pack(OUT_HEADER.size + len(data), -error, unique) + data)
        except OSError:
            pass  # the request is gone (interrupted, or the mount was aborted)

    def _serve(self) -> None:
        while True:
            try:
                buf = os.read(self._fd, 1 << 17)
            except OSError as exc:
                if exc.errno in (errno.EINTR, errno.EAGAIN, errno.ENOENT):
                    continue
                return  # ENODEV: unmounted
            length, opcode, unique, nodeid, _uid, _gid, pid, _ = IN_HEADER.unpack_from(buf)
            body = buf[IN_HEADER.size : length]
            if opcode == INIT:
                _major, _minor, readahead, _flags = struct.unpack_from("<IIII", body)
                out = struct.pack("<IIIIHHIIHHI", 7, 31, readahead, 0, 12, 9, 4096, 1, 1, 0, 0)
                self._reply(unique, 0, out + b"\0" * 28)
            elif opcode == LOOKUP and body.rstrip(b"\0") == STUCK:
                with self._lock:
                    self.held.append((unique, pid))
            elif opcode == LOOKUP:
                self._reply(unique, errno.ENOENT)
            elif opcode == GETATTR:
                self._reply(unique, 0, _attr_out())
            elif opcode == OPENDIR:
                self._reply(unique, 0, struct.pack("<QII", 0, 0, 0))
            elif opcode in (READDIR,):
                self._reply(unique)  # empty: the end of the directory
            elif opcode == RELEASEDIR:
                self._reply(unique)
            elif opcode in (FORGET, BATCH_FORGET, INTERRUPT):
                pass  # no answer expected; an INTERRUPT of a held request is ignored on purpose
            elif opcode == DESTROY:
                self._reply(unique)
                return
            else:
                self._reply(unique, errno.ENOSYS)

    def killed(self) -> list[int]:
        """The stuck processes with a SIGKILL pending: someone tried to kill them."""
        out = []
        with self._lock:
            pids = [pid for _, pid in self.held]
        for pid in pids:
            try:
                status = open(f"/proc/{pid}/status").read()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16) & (1 << 8):
                    out.append(pid)
                    break
        return out

    def release(self) -> None:
        with self._lock:
            held, self.held = self.held, []
        for unique, _ in held:
            self._reply(unique, errno.ENOENT)

    def unmount(self) -> None:
        self.release()
        self._libc.umount2(self.path.encode(), MNT_DETACH)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def wait_for(predicate, timeout: float, step: float = 1.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False
