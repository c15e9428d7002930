"""andrea's tensor streams (andrea-stream(5)) as NumPy arrays.

A stream is records, each one named array with key=value attributes, then
an end record; its payload is cut into chunks, each deflated (raw
deflate) or stored, optionally byte-shuffled first, each with its own
CRC32.  records() reads them one at a time, decoding only those asked
for; Writer writes them.
"""
import struct
import sys
import zlib
from collections import namedtuple

import numpy as np

__all__ = ["FormatError", "Record", "records", "load", "find", "Writer",
           "save"]

_MAGIC = b"ATSR"
_TENSOR, _END = 1, 2
_SHUFFLE = 1
_DTYPES = {1: np.dtype("<f4"), 2: np.dtype("<i4"), 3: np.dtype("u1")}
_CODES = {v: k for k, v in _DTYPES.items()}
_MAX_RANK, _MAX_DIM, _MAX_CHUNK = 8, 1 << 40, 4 << 20
_CHUNK = 1 << 20
_MAX_ATTR_BYTES, _MAX_ATTRS, _MAX_KEY, _MAX_VALUE = 4096, 32, 63, 127
_END_RECORD = _MAGIC + bytes([1, _END]) + bytes(10)
_END_RECORD += struct.pack("<I", zlib.crc32(_END_RECORD))
_KEY = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                 b"0123456789_.-")


class FormatError(Exception):
    """A stream that andrea-stream(5) does not allow."""


# index: the record's number, from 1; array: None where it was skipped
Record = namedtuple("Record", "index name attrs array")


class _Input:
    """A binary file read n bytes at a time whatever each read() hands out
    (an unbuffered pipe gives less), with bytes put back after a peek."""

    def __init__(self, f):
        self.f, self.head = f, b""

    def read(self, n):
        out, self.head = self.head[:n], self.head[n:]
        while len(out) < n:
            more = self.f.read(n - len(out))
            if not more:
                break
            out += more
        return out

    def unread(self, data):
        self.head = data + self.head


def _read(f, n, what):
    data = f.read(n)
    if len(data) != n:
        raise FormatError(f"input ended inside {what}")
    return data


def _attrs(block, where):
    attrs = {}
    if block and not block.endswith(b"\n"):
        raise FormatError(f"{where}: attribute block does not end in a newline")
    lines = block.split(b"\n")[:-1] if block else []
    if len(lines) > _MAX_ATTRS:
        raise FormatError(f"{where}: more than {_MAX_ATTRS} attributes")
    for line in lines:
        key, eq, value = line.partition(b"=")
        if not eq or not 1 <= len(key) <= _MAX_KEY or not set(key) <= _KEY \
                or len(value) > _MAX_VALUE \
                or any(c < 0x20 or c > 0x7E for c in value):
            raise FormatError(f"{where}: bad attribute line {line[:80]!r}")
        k = key.decode()
        if k in attrs:
            raise FormatError(f"{where}: attribute '{k}' given twice")
        attrs[k] = value.decode()
    return attrs


def _unshuffle(data, size):
    if size == 1:
        return data
    n = len(data) // size
    return np.frombuffer(data, np.uint8).reshape(size, n).T.tobytes()


def _shuffle(data, size):
    if size == 1:
        return data
    n = len(data) // size
    return np.frombuffer(data, np.uint8).reshape(n, size).T.tobytes()


def _open(source, mode):
    if source == "-":
        return (sys.stdin.buffer if "r" in mode else sys.stdout.buffer), False
    if hasattr(source, "read" if "r" in mode else "write"):
        return source, False
    return open(source, mode), True


def records(source, names=None, max_bytes=8 << 30):
    """Yields each record of the stream at source (a path, "-" or a
    binary file object) as a Record, in order; a record whose name is
    not in names (when given) comes with array None, its chunks checked
    but not decompressed.  Raises FormatError."""
    yield from _records_of(source, lambda name, attrs: names is None or
                           name in names, max_bytes)


def _records_of(source, wanted, max_bytes):
    """records(), decoding a record where wanted(name, attrs) is true."""
    f, own = _open(source, "rb")
    try:
        yield from _records(_Input(f), wanted, max_bytes)
    finally:
        if own:
            f.close()


def _records(f, wanted, max_bytes):
    index = 0
    while True:
        fixed = f.read(16)
        if not fixed:
            raise FormatError("stream has no end record: did an earlier "
                              "stage fail?")
        if len(fixed) < 16:
            raise FormatError("input ended inside a record header")
        magic, version, kind, code, rank, flags, nlen, alen, chunk = \
            struct.unpack("<4sBBBBBBHI", fixed)
        if magic != _MAGIC or version != 1:
            raise FormatError(f"record {index + 1}: not an andrea stream "
                              f"(magic {magic!r}, version {version})")
        if kind == _END:
            crc = _read(f, 4, "the end record")
            if fixed + crc != _END_RECORD:
                raise FormatError("a damaged end record")
            peek = f.read(1)
            if not peek:
                return
            f.unread(peek)  # another stream follows (cat a b)
            continue
        index += 1
        where = f"record {index}"
        if kind != _TENSOR or code not in _DTYPES or rank > _MAX_RANK \
                or flags & ~_SHUFFLE or not 1 <= nlen or alen > _MAX_ATTR_BYTES:
            raise FormatError(f"{where}: bad header (kind {kind}, dtype "
                              f"{code}, rank {rank}, flags {flags})")
        dt = _DTYPES[code]
        if not 1 <= chunk <= _MAX_CHUNK or chunk % dt.itemsize:
            raise FormatError(f"{where}: bad chunk size {chunk}")
        var = _read(f, 8 * rank + nlen + alen + 4, f"{where}'s header")
        dims = struct.unpack(f"<{rank}Q", var[:8 * rank])
        name = var[8 * rank:8 * rank + nlen]
        if any(c <= 0x20 or c == 0x7F for c in name):
            raise FormatError(f"{where}: bad name {name!r}")
        name = name.decode("utf-8", "surrogateescape")
        where = f"record {index} '{name}'"
        (crc,) = struct.unpack("<I", var[-4:])
        if zlib.crc32(fixed + var[:-4]) != crc:
            raise FormatError(f"{where}: header CRC mismatch")
        attrs = _attrs(var[8 * rank + nlen:-4], where)
        if any(d > _MAX_DIM for d in dims):
            raise FormatError(f"{where}: a dimension exceeds 2^40")
        count = 1
        for d in dims:
            count *= d
        nbytes = count * dt.itemsize
        want = wanted(name, attrs)
        if want and nbytes > max_bytes:
            raise FormatError(f"{where}: {nbytes} bytes exceed the cap of "
                              f"{max_bytes}")
        parts = []
        for k in range((nbytes + chunk - 1) // chunk):
            head = _read(f, 16, f"{where}, chunk {k}")
            raw_len, stored, data_crc, head_crc = struct.unpack("<IIII", head)
            if zlib.crc32(head[:12]) != head_crc:
                raise FormatError(f"{where}, chunk {k}: header CRC mismatch")
            if raw_len != min(chunk, nbytes - k * chunk) or \
                    not 1 <= stored <= raw_len:
                raise FormatError(f"{where}, chunk {k}: bad lengths")
            body = _read(f, stored, f"{where}, chunk {k}")
            if not want:
                continue
            if stored < raw_len:
                d = zlib.decompressobj(-15)
                try:
                    body = d.decompress(body, raw_len + 1)
                except zlib.error as e:
                    raise FormatError(f"{where}, chunk {k}: {e}") from None
                if len(body) != raw_len or not d.eof or d.unused_data:
                    raise FormatError(f"{where}, chunk {k}: deflate data "
                                      f"does not inflate to {raw_len} bytes")
            if flags & _SHUFFLE:
                body = _unshuffle(body, dt.itemsize)
            if zlib.crc32(body) != data_crc:
                raise FormatError(f"{where}, chunk {k}: data CRC mismatch")
            parts.append(body)
        array = np.frombuffer(b"".join(parts), dt).reshape(dims) if want \
            else None
        yield Record(index, name, attrs, array)


def load(source):
    """{name: array} of every record (a later record of a name wins)."""
    return {r.name: r.array for r in records(source)}


def find(source, name, **attrs):
    """The first record called name whose attributes include attrs (as
    strings), or None; the records before it are not decompressed."""
    want = {k: str(v) for k, v in attrs.items()}

    def wanted(n, a):
        return n == name and all(a.get(k) == v for k, v in want.items())
    for r in _records_of(source, wanted, 8 << 30):
        if r.array is not None:
            return r
    return None


def _as_stored(array, cast):
    a = np.asarray(array)
    if a.dtype in (np.float64, np.int64) and cast:
        if a.dtype == np.int64 and a.size and (a.min() < -2**31 or
                                               a.max() >= 2**31):
            raise ValueError("cast: values outside int32")
        with np.errstate(over="ignore"):
            b = a.astype(np.float32 if a.dtype == np.float64 else np.int32)
        if a.dtype == np.float64 and np.any(np.isfinite(a) & ~np.isfinite(b)):
            raise ValueError("cast: finite values beyond float32's range")
        a = b
    dt = a.dtype.newbyteorder("<") if a.dtype.itemsize > 1 else a.dtype
    if dt not in _CODES:
        raise ValueError(f"dtype {a.dtype}: streams hold float32, int32 and "
                         "uint8 (cast=True takes float64 and int64)")
    return a.astype(dt, order="C", copy=False)  # 0-d stays 0-d


class Writer:
    """Writes records to a path (atomically is the caller's business), "-"
    or a binary file object; close() (or the with block's end) writes the
    end record.  level: 0 stores every chunk, 1..9 deflates at that zlib
    level (a chunk that does not shrink is stored); shuffle: byte-shuffle
    4-byte elements before deflating."""

    def __init__(self, dest, level=1, shuffle=True, chunk=_CHUNK, cast=False):
        if not 4 <= chunk <= _MAX_CHUNK:
            raise ValueError(f"chunk {chunk}: 4 to {_MAX_CHUNK} bytes")
        if not 0 <= level <= 9:
            raise ValueError(f"level {level}: 0 to 9")
        self.f, self.own = _open(dest, "wb")
        self.level, self.shuffle, self.chunk, self.cast = level, shuffle, chunk, cast

    def write(self, name, array, attrs=None, **more):
        a = _as_stored(array, self.cast)
        attrs = {**(attrs or {}), **more}
        block = b"".join(f"{k}={v}\n".encode() for k, v in attrs.items())
        _attrs(block, f"'{name}'")  # the same checks as reading
        if len(block) > _MAX_ATTR_BYTES:
            raise ValueError(f"'{name}': attributes of {len(block)} bytes "
                             f"exceed {_MAX_ATTR_BYTES}")
        raw_name = name.encode("utf-8", "surrogateescape")
        if not 1 <= len(raw_name) <= 255 or any(c <= 0x20 or c == 0x7F
                                                for c in raw_name):
            raise ValueError(f"bad record name {name!r}")
        if a.ndim > _MAX_RANK:
            raise ValueError(f"rank {a.ndim} exceeds {_MAX_RANK}")
        if any(d > _MAX_DIM for d in a.shape):
            raise ValueError(f"shape {a.shape}: a dimension exceeds 2^40")
        size = a.dtype.itemsize
        shuffle = self.shuffle and self.level > 0 and size > 1
        chunk = self.chunk - self.chunk % size
        head = struct.pack("<4sBBBBBBHI", _MAGIC, 1, _TENSOR, _CODES[a.dtype],
                           a.ndim, _SHUFFLE if shuffle else 0, len(raw_name),
                           len(block), chunk)
        head += struct.pack(f"<{a.ndim}Q", *a.shape) + raw_name + block
        out = [head, struct.pack("<I", zlib.crc32(head))]
        data = a.tobytes()
        for k in range(0, len(data), chunk):
            raw = data[k:k + chunk]
            body = _shuffle(raw, size) if shuffle else raw
            if self.level > 0:
                c = zlib.compressobj(self.level, zlib.DEFLATED, -15)
                packed = c.compress(body) + c.flush()
                if len(packed) < len(body):
                    body = packed
            ch = struct.pack("<III", len(raw), len(body), zlib.crc32(raw))
            out += [ch, struct.pack("<I", zlib.crc32(ch)), body]
        self.f.write(b"".join(out))

    def close(self):
        if self.f is None:
            return
        self.f.write(_END_RECORD)
        self.f.flush()
        if self.own:
            self.f.close()
        self.f = None

    def __enter__(self):
        return self

    def __exit__(self, kind, *_):
        if kind is None:
            self.close()
        elif self.own:  # no end record: a reader sees the failure
            self.f.close()
            self.f = None


def save(dest, items, **options):
    """Writes [(name, array), (name, array, attrs), ...] as one stream."""
    with Writer(dest, **options) as w:
        for item in items:
            w.write(item[0], item[1], item[2] if len(item) > 2 else None)
