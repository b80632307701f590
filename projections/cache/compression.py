"""How projections.db compresses what it stores: every blob (the interval versions' blocks, each
projection's latest state, its snapshots) is one Zstandard frame at one level.

A compression context is costly to set up (~14 µs, against ~1 µs to compress a small block with
one already made) and is not safe to share between threads: whoever compresses or decompresses
many blobs asks for one context here and keeps it for all of them.
"""

from __future__ import annotations

from collections.abc import Callable

import zstandard

#: Zstandard's fastest positive level. On the version blocks: as small as zlib's level 6, seven
#: times faster to write (a rebuild compresses every version), twice as fast to read. On the
#: stored states of a 1,000,000-event memory (351 MB of JSON): 32.0 MB in 0.29 s of CPU and read
#: back in 0.19 s, where zlib level 1 took 1.13 + 1.09 s for 44.7 MB; levels 2, 3 and 5 were
#: both slower and larger (33.1-34.4 MB), level -1 as fast but 45.9 MB
LEVEL = 1
#: what decompressing a blob that is not one whole frame of ours raises
ERRORS = (zstandard.ZstdError, TypeError, ValueError)

Transform = Callable[[bytes], bytes]


def packer() -> Transform:
    """A compressor with a context of its own, to keep for every blob one owner writes."""
    return zstandard.ZstdCompressor(level=LEVEL).compress


def unpacker() -> Transform:
    """A decompressor with a context of its own, to keep for every blob one owner reads."""
    return zstandard.ZstdDecompressor().decompress
