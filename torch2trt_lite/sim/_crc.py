"""CRC-32 (zlib's) of large buffers, computed in pieces on several threads.

zlib releases the GIL while it checksums a buffer, so pieces of one plan are checksummed in
parallel and their CRCs joined with ``combine`` (zlib's ``crc32_combine``, which Python's zlib
module does not expose): the result is the same number ``zlib.crc32`` gives for the whole buffer.
"""

from __future__ import annotations

import zlib
from concurrent.futures import ThreadPoolExecutor

import torch

_POLY = 0xEDB88320  # CRC-32 polynomial, bit-reflected (x^0 is bit 31)
_PIECE = 8 << 20  # no piece smaller than this (a thread costs ~0.1 ms, 8 MiB ~3 ms of CRC)
_MAX_THREADS = 8


def _mulmod(a: int, b: int) -> int:
    """a(x) * b(x) modulo the CRC polynomial, both bit-reflected."""
    m = 1 << 31
    p = 0
    while a:
        if a & m:
            p ^= b
            a ^= m
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
    return p


def _powers() -> list[int]:
    """x^(2^k) modulo the polynomial for k = 0..31."""
    out = [1 << 30]  # x^1
    for _ in range(31):
        out.append(_mulmod(out[-1], out[-1]))
    return out


_X2N = _powers()


def combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC-32 of A + B from crc1 = crc32(A), crc2 = crc32(B) and len2 = len(B) in bytes."""
    p = 1 << 31  # x^0
    n, k = len2, 3  # multiply crc1 by x^(8 * len2)
    while n:
        if n & 1:
            p = _mulmod(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return _mulmod(p, crc1) ^ crc2


def crc32(data: memoryview, threads: int | None = None) -> int:
    """``zlib.crc32(data)``; buffers of several ``_PIECE`` bytes are split over up to ``threads``
    threads (default: torch's intra-op thread count, at most 8)."""
    n = len(data)
    if threads is None:
        threads = min(torch.get_num_threads(), _MAX_THREADS)
    k = max(1, min(threads, n // _PIECE))
    if k == 1:
        return zlib.crc32(data)
    bounds = [n * i // k for i in range(k + 1)]
    pieces = [data[bounds[i] : bounds[i + 1]] for i in range(k)]
    with ThreadPoolExecutor(max_workers=k - 1, thread_name_prefix="t2t-crc") as pool:
        others = pool.map(zlib.crc32, pieces[1:])  # submitted now, while this thread does piece 0
        crc = zlib.crc32(pieces[0])
        rest = list(others)
    for piece, c in zip(pieces[1:], rest, strict=True):
        crc = combine(crc, c, len(piece))
    return crc
