"""Random version-4 UUIDs made in batches: one `os.urandom` call per 256 ids.

`uuid.uuid4()` reads 16 bytes with `os.urandom` per id, a syscall that releases the GIL
(with many worker threads each id could hand the GIL to another thread), and `str()`
formats it again each time it is read. Here one call makes 256 ids, their version and
variant bits set for all at once on one big integer. A batch is dropped in a forked
child, so parent and child never hand out the same ids.
"""

from __future__ import annotations

import os

__all__ = ["IDS_PER_BATCH", "Uuid4Texts", "uuid4_hex_batch"]

IDS_PER_BATCH = 256
"""Ids made per `os.urandom` call."""

# Version 4, RFC 4122 variant, as `uuid.uuid4()`: in each id's 16 big-endian bytes, the
# high nibble of byte 6 is 4 and the top two bits of byte 8 are 10.
_KEEP = int.from_bytes(bytes.fromhex("ffffffffffff0fff3fffffffffffffff") * IDS_PER_BATCH)
_SET = int.from_bytes(bytes.fromhex("00000000000040008000000000000000") * IDS_PER_BATCH)


def uuid4_hex_batch() -> str:
    """`IDS_PER_BATCH` random version-4 UUIDs as one string of 32 hex digits each."""
    bits = int.from_bytes(os.urandom(16 * IDS_PER_BATCH)) & _KEEP | _SET
    return f"{bits:0{32 * IDS_PER_BATCH}x}"


class Uuid4Texts:
    """`str(uuid.uuid4())`, made in batches (see the module); thread-safe, fork-aware."""

    def __init__(self) -> None:
        self._reset()
        if hasattr(os, "register_at_fork"):  # POSIX; elsewhere there is no fork
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._texts: list[str] = []

    def __call__(self) -> str:
        # No lock: `list.pop` is atomic, so each id goes to one caller. Threads that find
        # the batch empty at once each make one; the last one installed serves the next
        # callers, the others' rest is dropped.
        try:
            return self._texts.pop()
        except IndexError:
            digits = uuid4_hex_batch()
            texts = [
                f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
                for h in (digits[i : i + 32] for i in range(0, len(digits), 32))
            ]
            made = texts.pop()
            self._texts = texts
            return made
