"""Image decoding for the ImageDecoder op (signal.py).

Pillow, when installed, decodes every format. Without it, the simple formats are decoded here
with NumPy and zlib (BMP, PNM, non-interlaced PNG, uncompressed or PackBits TIFF); JPEG, JPEG 2000,
WebP and the rarer variants raise a GraphError naming Pillow. As ONNX specifies, a stream that is
recognised but cannot be decoded (truncated, corrupt) or is no image at all gives an empty image.
"""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np

from ..errors import GraphError

_NEEDS_PIL = ("ImageDecoder: decoding {} images needs the Pillow library (pip install pillow), "
              "which is not installed")


class _Corrupt(Exception):
    """The stream is malformed: ImageDecoder returns an empty image."""


def decode(data: np.ndarray, pixel_format: str) -> np.ndarray:
    channels = 1 if pixel_format == "Grayscale" else 3
    raw = np.asarray(data, np.uint8).reshape(-1).tobytes()
    try:
        img = _decode_pil(raw, pixel_format)
        if img is not None:
            return img
        rgb = _decode_builtin(raw)
    except (_Corrupt, struct.error, zlib.error, IndexError, ValueError):
        return np.zeros((0, 0, channels), np.uint8)
    if pixel_format == "BGR":
        return np.ascontiguousarray(rgb[:, :, ::-1])
    if pixel_format == "Grayscale":
        # ITU-R 601 luma in Pillow's fixed point, so both paths agree.
        r, g, b = (rgb[:, :, i].astype(np.uint32) for i in range(3))
        return ((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16).astype(np.uint8)[:, :, None]
    return rgb


def _decode_pil(raw: bytes, pixel_format: str):
    try:
        from PIL import Image
    except ImportError:
        return None
    try:
        img = Image.open(io.BytesIO(raw))
        if pixel_format == "Grayscale":
            return np.asarray(img.convert("L"), np.uint8)[:, :, None]
        rgb = np.asarray(img.convert("RGB"), np.uint8)
    except Exception as e:  # noqa: BLE001 - Pillow raises many types for bad data
        raise _Corrupt from e
    return np.ascontiguousarray(rgb[:, :, ::-1]) if pixel_format == "BGR" else rgb


def _decode_builtin(raw: bytes) -> np.ndarray:
    """[H, W, 3] uint8 RGB."""
    if raw[:2] == b"BM":
        return _bmp(raw)
    if raw[:1] == b"P" and raw[1:2] in b"123456" and len(raw) > 2:
        return _pnm(raw)
    if raw[:8] == b"\x89PNG\r\n\x1a\n":
        return _png(raw)
    if raw[:4] in (b"II*\x00", b"MM\x00*"):
        return _tiff(raw)
    if raw[:3] == b"\xff\xd8\xff":
        raise GraphError(_NEEDS_PIL.format("JPEG"))
    if raw[:12] == b"\x00\x00\x00\x0cjP  \r\n\x87\n" or raw[:4] == b"\xff\x4f\xff\x51":
        raise GraphError(_NEEDS_PIL.format("JPEG 2000"))
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        raise GraphError(_NEEDS_PIL.format("WebP"))
    raise _Corrupt


def _gray_to_rgb(g: np.ndarray) -> np.ndarray:
    return np.repeat(g[:, :, None], 3, axis=2)


def _scale(v: np.ndarray, maxval: int) -> np.ndarray:
    """Samples in [0, maxval] to uint8, rounding."""
    if maxval == 255:
        return v.astype(np.uint8)
    return ((v.astype(np.uint32) * 255 + maxval // 2) // maxval).astype(np.uint8)


def _unpack_bits(buf: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first `count` big-endian `bits`-wide samples of a byte row."""
    if bits == 8:
        return buf[:count]
    shifts = np.arange(8 - bits, -1, -bits, dtype=np.uint8)
    return ((buf[:, None] >> shifts) & ((1 << bits) - 1)).reshape(-1)[:count].astype(np.uint8)


# -- BMP -------------------------------------------------------------------------------------------
def _bmp(raw: bytes) -> np.ndarray:
    offset, dib = struct.unpack_from("<II", raw, 10)
    if dib == 12:
        w, h, _, bpp = struct.unpack_from("<HHHH", raw, 18)
        comp, colors, pal_size = 0, 0, 3
    else:
        w, h, _, bpp, comp = struct.unpack_from("<iiHHI", raw, 18)
        colors = struct.unpack_from("<I", raw, 46)[0] if dib >= 40 else 0
        pal_size = 4
    if comp not in (0, 3) or bpp not in (1, 4, 8, 24, 32) or (comp == 3 and bpp != 32):
        raise GraphError(_NEEDS_PIL.format(f"compressed or {bpp}-bit BMP"))
    top_down, h = h < 0, abs(h)
    stride = (w * bpp + 31) // 32 * 4
    if w <= 0 or offset + stride * h > len(raw):
        raise _Corrupt
    rows = np.frombuffer(raw, np.uint8, stride * h, offset).reshape(h, stride)
    if not top_down:
        rows = rows[::-1]
    if bpp >= 24:
        px = rows[:, : w * (bpp // 8)].reshape(h, w, bpp // 8)
        return np.ascontiguousarray(px[:, :, 2::-1])  # stored B, G, R(, X)
    n = colors or 1 << bpp
    pal = np.frombuffer(raw, np.uint8, n * pal_size, 14 + dib).reshape(n, pal_size)[:, 2::-1]
    idx = np.stack([_unpack_bits(r, bpp, w) for r in rows])
    if idx.max(initial=0) >= n:
        raise _Corrupt
    return pal[idx]


# -- PNM -------------------------------------------------------------------------------------------
def _pnm(raw: bytes) -> np.ndarray:
    kind = raw[1] - ord("0")
    tokens, pos = [], 2
    need = 2 if kind in (1, 4) else 3
    while len(tokens) < need:
        while pos < len(raw) and raw[pos:pos + 1].isspace():
            pos += 1
        if raw[pos:pos + 1] == b"#":
            pos = raw.index(b"\n", pos)
            continue
        start = pos
        while pos < len(raw) and not raw[pos:pos + 1].isspace() and raw[pos:pos + 1] != b"#":
            pos += 1
        if start == pos:
            raise _Corrupt
        tokens.append(int(raw[start:pos]))
    w, h = tokens[0], tokens[1]
    maxval = tokens[2] if need == 3 else 1
    ch = 3 if kind in (3, 6) else 1
    if not 0 < maxval < 65536:
        raise _Corrupt
    if kind <= 3:  # plain (ASCII) samples
        if kind == 1:  # digits need no separators
            vals = np.array([c - 48 for c in raw[pos:] if c in b"01"], np.int64)
        else:
            vals = np.array([int(t) for t in raw[pos:].split()], np.int64)
        vals = vals[: w * h * ch]
    elif kind == 4:
        stride = (w + 7) // 8
        rows = np.frombuffer(raw, np.uint8, stride * h, pos + 1).reshape(h, stride)
        vals = np.stack([_unpack_bits(r, 1, w) for r in rows]).reshape(-1)
    else:
        wide = maxval > 255
        vals = np.frombuffer(raw, ">u2" if wide else np.uint8, w * h * ch, pos + 1)
    if vals.size != w * h * ch:
        raise _Corrupt
    if kind in (1, 4):  # bitmaps: 1 is black
        img = np.where(vals.reshape(h, w) == 1, 0, 255).astype(np.uint8)
        return _gray_to_rgb(img)
    img = _scale(vals.reshape(h, w, ch), maxval)
    return img if ch == 3 else _gray_to_rgb(img[:, :, 0])


# -- PNG -------------------------------------------------------------------------------------------
def _png(raw: bytes) -> np.ndarray:
    pos, idat, pal, hdr = 8, [], None, None
    while pos + 8 <= len(raw):
        n, kind = struct.unpack_from(">I4s", raw, pos)
        body = raw[pos + 8: pos + 8 + n]
        if len(body) != n:
            raise _Corrupt
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"PLTE":
            pal = np.frombuffer(body, np.uint8).reshape(-1, 3)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + n
    if hdr is None or not idat:
        raise _Corrupt
    w, h, depth, color, _, _, interlace = hdr
    if interlace:
        raise GraphError(_NEEDS_PIL.format("interlaced PNG"))
    ch = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}.get(color)
    if ch is None:
        raise _Corrupt
    data = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8)
    row_bytes = (w * ch * depth + 7) // 8
    if data.size < h * (row_bytes + 1):
        raise _Corrupt
    rows = _png_unfilter(data[: h * (row_bytes + 1)].reshape(h, row_bytes + 1),
                         max(1, ch * depth // 8))
    if depth == 16:
        samples = rows.reshape(h, w * ch, 2)[:, :, 0]  # the high byte, as Pillow keeps
    else:
        samples = np.stack([_unpack_bits(r, depth, w * ch) for r in rows])
    px = samples.reshape(h, w, ch)
    if color == 3:
        if pal is None or px.max(initial=0) >= len(pal):
            raise _Corrupt
        return pal[px[:, :, 0]]
    if depth < 8:
        px = _scale(px, (1 << depth) - 1)
    return np.ascontiguousarray(px[:, :, :3]) if ch >= 3 else _gray_to_rgb(px[:, :, 0])


def _png_unfilter(rows: np.ndarray, bpp: int) -> np.ndarray:
    out = np.zeros((rows.shape[0], rows.shape[1] - 1), np.uint8)
    prev = np.zeros(rows.shape[1] - 1, np.int64)
    for y, row in enumerate(rows):
        f, line = row[0], row[1:].astype(np.int64)
        if f == 1:  # Sub: add the byte one pixel to the left
            cur = line.copy()
            for i in range(bpp, len(cur)):
                cur[i] = (cur[i] + cur[i - bpp]) & 0xFF
        elif f == 2:  # Up
            cur = (line + prev) & 0xFF
        elif f == 3:  # Average of left and up
            cur = line.copy()
            for i in range(len(cur)):
                left = cur[i - bpp] if i >= bpp else 0
                cur[i] = (cur[i] + (left + prev[i]) // 2) & 0xFF
        elif f == 4:  # Paeth predictor
            cur = line.copy()
            for i in range(len(cur)):
                a = cur[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        elif f == 0:
            cur = line
        else:
            raise _Corrupt
        out[y] = cur
        prev = cur
    return out


# -- TIFF ------------------------------------------------------------------------------------------
_TIFF_TYPES = {1: "B", 3: "H", 4: "I", 16: "Q"}


def _tiff(raw: bytes) -> np.ndarray:
    e = "<" if raw[:2] == b"II" else ">"
    ifd = struct.unpack_from(e + "I", raw, 4)[0]
    (count,) = struct.unpack_from(e + "H", raw, ifd)
    tags = {}
    for k in range(count):
        tag, typ, n = struct.unpack_from(e + "HHI", raw, ifd + 2 + 12 * k)
        code = _TIFF_TYPES.get(typ)
        if code is None:
            continue
        size = struct.calcsize(code) * n
        at = ifd + 2 + 12 * k + 8
        if size > 4:
            at = struct.unpack_from(e + "I", raw, at)[0]
        tags[tag] = list(struct.unpack_from(e + code * n, raw, at))
    w, h = tags[256][0], tags[257][0]
    bits = tags.get(258, [1])
    comp, photo = tags.get(259, [1])[0], tags.get(262, [1])[0]
    spp = tags.get(277, [1])[0]
    if (comp not in (1, 32773) or 322 in tags or tags.get(284, [1])[0] != 1
            or tags.get(317, [1])[0] != 1 or set(bits) != {8} or photo not in (0, 1, 2)):
        raise GraphError(_NEEDS_PIL.format("compressed, tiled or non-8-bit TIFF"))
    strips = b"".join(raw[o:o + c] for o, c in zip(tags[273], tags[279]))
    if comp == 32773:
        strips = _packbits(strips)
    if len(strips) < w * h * spp:
        raise _Corrupt
    px = np.frombuffer(strips, np.uint8, w * h * spp).reshape(h, w, spp)
    if photo == 2:
        return np.ascontiguousarray(px[:, :, :3])
    gray = px[:, :, 0] if photo == 1 else 255 - px[:, :, 0]
    return _gray_to_rgb(gray)


def _packbits(data: bytes) -> bytes:
    out, i = bytearray(), 0
    while i < len(data):
        n = data[i] - 256 if data[i] > 127 else data[i]
        i += 1
        if n >= 0:
            out += data[i:i + n + 1]
            i += n + 1
        elif n != -128:
            out += data[i:i + 1] * (1 - n)
            i += 1
    return bytes(out)
