"""An independent reader and writer of the andrea stream format.

Written from man/man5/andrea-stream.5 with nothing but struct and zlib, so
the tests can check the C library against a second implementation: streams
written here must read in C and the other way round, and a stream the C
reader rejects must be rejected here with the same message.

The writer takes every header field as an optional override (rank,
name_len, attr_len, flags, version, kind, crc ...), so a test can craft
invalid streams whose CRCs are still right, or deliberately wrong.
"""
import struct
import zlib

MAGIC = b"ATSR"
VERSION = 1
KIND_TENSOR = 1
KIND_END = 2
FLAG_SHUFFLE = 1

# code: (name, element size); bf16 and f16 are reserved (refused on read)
DTYPES = {1: ("f32", 4), 2: ("i32", 4), 3: ("u8", 1), 4: ("bf16", 2),
          5: ("f16", 2)}
CODES = {name: code for code, (name, _) in DTYPES.items()}
RESERVED = {"bf16", "f16"}

MAX_RANK = 8
MAX_DIM = 1 << 40
MAX_CHUNK = 4 << 20
DEFAULT_CHUNK = 1 << 20
MAX_NAME = 255
MAX_ATTR_BYTES = 4096
MAX_ATTRS = 32
MAX_KEY = 63
MAX_VALUE = 127
DEFAULT_MAX_BYTES = 8 << 30

KEY_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                      b"0123456789_.-")


class FormatError(Exception):
    """A stream the format does not allow; str() is the reader's message
    without the leading input label."""


def crc32(data):
    return zlib.crc32(data) & 0xFFFFFFFF


def dtype_code(dtype):
    return dtype if isinstance(dtype, int) else CODES[dtype]


def elem_size(dtype):
    return DTYPES[dtype_code(dtype)][1]


def shuffle(raw, size):
    """Byte b of element i moves to position b*n + i."""
    if size <= 1:
        return bytes(raw)
    return b"".join(bytes(raw[b::size]) for b in range(size))


def unshuffle(data, size):
    if size <= 1:
        return bytes(data)
    n = len(data) // size
    out = bytearray(len(data))
    for b in range(size):
        out[b::size] = data[b * n:(b + 1) * n]
    return bytes(out)


def attr_block(attrs):
    """attrs: bytes (taken as is), a dict or a sequence of (key, value)."""
    if isinstance(attrs, (bytes, bytearray)):
        return bytes(attrs)
    items = attrs.items() if isinstance(attrs, dict) else attrs
    return b"".join(f"{k}={v}\n".encode() for k, v in items)


def header(name, dtype, dims, attrs=b"", flags=0, chunk=DEFAULT_CHUNK, *,
           magic=MAGIC, version=VERSION, kind=KIND_TENSOR, rank=None,
           name_len=None, attr_len=None, crc=None):
    """The bytes of a tensor record header.  Every field can be forced;
    the CRC32 is computed over what was built unless crc is given."""
    name = name.encode() if isinstance(name, str) else bytes(name)
    block = attr_block(attrs)
    fixed = magic + struct.pack(
        "<BBBBBBHI", version, kind, dtype_code(dtype),
        len(dims) if rank is None else rank, flags,
        len(name) if name_len is None else name_len,
        len(block) if attr_len is None else attr_len, chunk)
    body = fixed + b"".join(struct.pack("<Q", d) for d in dims) + name + block
    return body + struct.pack("<I", crc32(body) if crc is None else crc)


def end_record(crc=None, fill=b"\0" * 10):
    body = MAGIC + bytes([VERSION, KIND_END]) + fill
    return body + struct.pack("<I", crc32(body) if crc is None else crc)


def chunk_bytes(raw_len, stored, data_crc, hdr_crc=None, stored_len=None):
    """A chunk from its parts, any of which may lie."""
    head = struct.pack("<III", raw_len,
                       len(stored) if stored_len is None else stored_len,
                       data_crc)
    return head + struct.pack("<I", crc32(head) if hdr_crc is None
                              else hdr_crc) + stored


def deflate(data, level):
    strategy = zlib.Z_RLE if level == 1 else zlib.Z_DEFAULT_STRATEGY
    c = zlib.compressobj(level, zlib.DEFLATED, -15, 8, strategy)
    return c.compress(data) + c.flush()


def encode_chunk(raw, elem, level, shuffled):
    src = shuffle(raw, elem) if shuffled else bytes(raw)
    stored = src
    if level > 0:
        packed = deflate(src, level)
        if len(packed) < len(raw):
            stored = packed
    return chunk_bytes(len(raw), stored, crc32(raw))


def record(name, dtype, dims, payload, attrs=b"", level=1, shuffled=True,
           chunk=DEFAULT_CHUNK):
    """A whole tensor record the way the andrea writer makes one: the
    shuffle flag only for multi-byte elements at a level above 0, the
    chunk size rounded down to a multiple of the element size."""
    elem = elem_size(dtype)
    chunk -= chunk % elem
    flags = FLAG_SHUFFLE if shuffled and level > 0 and elem > 1 else 0
    out = [header(name, dtype, dims, attrs, flags, chunk)]
    payload = bytes(payload)
    for off in range(0, len(payload), chunk):
        out.append(encode_chunk(payload[off:off + chunk], elem, level,
                                bool(flags)))
    return b"".join(out)


def stream(*records):
    return b"".join(records) + end_record()


class Record:
    """One tensor record as read: name (str), dtype (str), dims (tuple),
    attrs (list of (key, value) str pairs), flags, chunk, payload (bytes,
    row-major little-endian), offset and header_len in the input, and
    chunks: a list of (offset, raw_len, stored_len) per chunk."""

    def __repr__(self):
        return f"Record({self.name!r}, {self.dtype}, {self.dims})"


def parse_attrs(block):
    pairs, pos = [], 0
    while pos < len(block):
        nl = block.find(b"\n", pos)
        if nl < 0:
            raise FormatError(f"attribute {len(pairs) + 1} has no newline")
        line = block[pos:nl]
        eq = line.find(b"=")
        if eq < 0:
            raise FormatError(f"attribute {len(pairs) + 1} has no '='")
        key, value = line[:eq], line[eq + 1:]
        if (not 1 <= len(key) <= MAX_KEY or not set(key) <= KEY_CHARS
                or len(value) > MAX_VALUE
                or any(c < 0x20 or c > 0x7E for c in value)):
            raise FormatError(f"attribute {len(pairs) + 1} has a bad key "
                              "or value")
        if len(pairs) == MAX_ATTRS:
            raise FormatError(f"more than {MAX_ATTRS} attributes")
        if any(k == key.decode() for k, _ in pairs):
            raise FormatError(f"attribute '{key.decode()}' appears twice")
        pairs.append((key.decode(), value.decode()))
        pos = nl + 1
    return pairs


def name_ok(name):
    return 1 <= len(name) <= MAX_NAME and all(c > 0x20 and c != 0x7F
                                              for c in name)


def decode_chunk(stored, raw_len, elem, shuffled, want_crc):
    if len(stored) == raw_len:
        data = stored
    else:
        d = zlib.decompressobj(-15)
        try:
            data = d.decompress(stored, raw_len)
        except zlib.error:
            data = None
        if (data is None or len(data) != raw_len or not d.eof
                or d.unused_data or d.unconsumed_tail):
            raise FormatError("corrupt deflate data")
    raw = unshuffle(data, elem) if shuffled and elem > 1 else bytes(data)
    if crc32(raw) != want_crc:
        raise FormatError("CRC32 mismatch: the data is damaged")
    return raw


def read(data, max_bytes=DEFAULT_MAX_BYTES, label="<stdin>"):
    """Reads a whole stream; returns the list of Records or raises
    FormatError with the message the man page gives (prefixed by label)."""
    try:
        return _read(memoryview(bytes(data)), max_bytes)
    except FormatError as e:
        raise FormatError(f"{label}: {e}") from None


def _read(buf, max_bytes):
    out, pos, n, seen_end = [], 0, 0, False

    def rec_err(msg, name=None):
        if name is None:
            return FormatError(f"record {n + 1}: {msg}")
        return FormatError(f"record {n + 1} '{name[:64]}': {msg}")

    while True:
        if pos == len(buf):
            if pos == 0:
                raise FormatError("empty input: not an andrea stream")
            if seen_end:
                return out
            raise FormatError(f"stream has no end record after record {n}: "
                              "did an earlier stage fail?")
        fixed = bytes(buf[pos:pos + 16])
        k = min(len(fixed), 4)
        if fixed[:k] != MAGIC[:k]:
            if seen_end:
                raise FormatError("trailing garbage after the end record")
            if pos == 0:
                raise FormatError("not an andrea stream (bad magic)")
            raise rec_err("bad magic: not a record header")
        if len(fixed) < 16 and len(fixed) > 5 and fixed[5] == KIND_END:
            raise FormatError("input ended inside the end record")
        if len(fixed) <= 5:  # before the kind: a record or the end record
            raise FormatError(
                "input ended inside the first header" if pos == 0 else
                f"input ended inside the header after record {n}" if n else
                "input ended inside a header after the end record")
        if len(fixed) < 16:
            raise rec_err("input ended inside the record")
        version, kind, code, rank, flags, name_len, attr_len, chunk = \
            struct.unpack("<BBBBBBHI", fixed[4:])
        if version != VERSION:
            raise rec_err(f"unsupported format version {version}")
        if kind == KIND_END:
            tail = bytes(buf[pos + 16:pos + 20])
            if len(tail) < 4:
                raise FormatError("input ended inside the end record")
            if struct.unpack("<I", tail)[0] != crc32(fixed):
                raise FormatError(f"end record after record {n}: header "
                                  "CRC32 mismatch")
            if any(fixed[6:]):
                raise FormatError(f"end record after record {n}: nonzero "
                                  "field")
            pos += 20
            seen_end = True
            continue
        if kind != KIND_TENSOR:
            raise rec_err(f"unknown record kind {kind}")
        if code not in DTYPES:
            raise rec_err(f"unknown dtype code {code}")
        dname, elem = DTYPES[code]
        if dname in RESERVED:
            raise rec_err(f"dtype {dname} is reserved and not supported "
                          "by this version")
        if rank > MAX_RANK:
            raise rec_err(f"rank {rank} exceeds the maximum of {MAX_RANK}")
        if flags & ~FLAG_SHUFFLE:
            raise rec_err(f"unknown flags 0x{flags:02x}")
        if name_len == 0:
            raise rec_err("empty record name")
        if attr_len > MAX_ATTR_BYTES:
            raise rec_err(f"attribute block of {attr_len} bytes exceeds "
                          f"{MAX_ATTR_BYTES}")
        hlen = 16 + 8 * rank + name_len + attr_len + 4
        head = bytes(buf[pos:pos + hlen])
        if len(head) < hlen:
            raise rec_err("input ended inside the record")
        if struct.unpack("<I", head[-4:])[0] != crc32(head[:-4]):
            raise rec_err("header CRC32 mismatch")
        dims = struct.unpack(f"<{rank}Q", head[16:16 + 8 * rank])
        raw_name = head[16 + 8 * rank:16 + 8 * rank + name_len]
        if not name_ok(raw_name):
            raise rec_err("record name contains whitespace or control bytes")
        name = raw_name.decode("utf-8", "surrogateescape")
        try:
            attrs = parse_attrs(head[16 + 8 * rank + name_len:-4])
        except FormatError as e:
            raise rec_err(str(e), name) from None
        for i, d in enumerate(dims):
            if d > MAX_DIM:
                raise rec_err(f"dimension {i} of {d} exceeds the cap of "
                              f"{MAX_DIM}", name)
        numel = 1
        for d in dims:
            numel *= d
        if numel >= 1 << 64:
            raise rec_err("element count overflows 64 bits", name)
        if numel > max_bytes // elem:
            raise rec_err(f"tensor of {float(numel * elem):.0f} bytes exceeds "
                          f"the cap of {max_bytes} bytes (ANDREA_MAX_BYTES)",
                          name)
        if chunk == 0 or chunk > MAX_CHUNK or chunk % elem:
            raise rec_err(f"chunk size {chunk} is not a multiple of {elem} "
                          f"in 1..{MAX_CHUNK}", name)
        r = Record()
        r.name, r.dtype, r.dims, r.attrs = name, dname, tuple(dims), attrs
        r.flags, r.chunk, r.offset, r.header_len = flags, chunk, pos, hlen
        r.chunks = []
        pos += hlen
        nbytes = numel * elem
        parts = []
        for k in range((nbytes + chunk - 1) // chunk):
            ch = bytes(buf[pos:pos + 16])
            if len(ch) < 16:
                raise rec_err("input ended inside the record", name)
            raw_len, stored_len, data_crc, hcrc = struct.unpack("<IIII", ch)
            if hcrc != crc32(ch[:12]):
                raise rec_err(f"chunk {k}: header CRC32 mismatch", name)
            want = min(chunk, nbytes - k * chunk)
            if raw_len != want:
                raise rec_err(f"chunk {k}: raw length {raw_len}, expected "
                              f"{want}", name)
            if not 1 <= stored_len <= raw_len:
                raise rec_err(f"chunk {k}: stored length {stored_len} not "
                              f"in 1..{raw_len}", name)
            stored = buf[pos + 16:pos + 16 + stored_len]
            if len(stored) < stored_len:
                raise rec_err("input ended inside the record", name)
            try:
                parts.append(decode_chunk(bytes(stored), raw_len, elem,
                                          flags & FLAG_SHUFFLE, data_crc))
            except FormatError as e:
                raise rec_err(f"chunk {k}: {e}", name) from None
            r.chunks.append((pos, raw_len, stored_len))
            pos += 16 + stored_len
        r.payload = b"".join(parts)
        out.append(r)
        n += 1
        seen_end = False
