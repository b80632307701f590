"""Time-ordered identifiers (UUIDv7).

Random uuid4 ids under a UNIQUE index cut batched inserts about 3x; UUIDv7
keeps the index append-mostly.
"""

from __future__ import annotations

import os
import threading
import time

_lock = threading.Lock()
_last_ms = 0
_counter = 0


def uuid7() -> str:
    """A UUIDv7 string, monotonic within this process."""
    global _last_ms, _counter
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            ms = _last_ms
            _counter += 1
            if _counter > 0xFFF:
                ms += 1
                _counter = 0
        else:
            _counter = 0
        _last_ms = ms
        counter = _counter
    rand = int.from_bytes(os.urandom(8), "big") & 0x3FFFFFFFFFFFFFFF
    value = (ms << 80) | (0x7 << 76) | (counter << 64) | (0b10 << 62) | rand
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def short_id(prefix: str) -> str:
    """A readable id like `run_1710543210_ab12cd` (seed 000's run id shape)."""
    return f"{prefix}_{int(time.time())}_{os.urandom(3).hex()}"
