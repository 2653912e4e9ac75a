#!/usr/bin/env python3
"""Writes small PNGs of every colour type, bit depth and transparency kind
into a folder (tests/data/png/ and fuzz/corpus/png/ hold the output): the
mask reader's test cases and the PNG fuzz target's seeds. Pure Python (zlib,
struct), so the bytes do not depend on an image library's version.

Usage: python3 scripts/tools/make_png_cases.py OUT_DIR
"""
import os
import struct
import sys
import zlib

SIZE = 32  # the embedded default model's image size


def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def png(color_type, depth, rows, plte=None, trns=None, interlace=0):
    """rows: a list of byte strings, one per row, already packed."""
    ihdr = struct.pack(">IIBBBBB", SIZE, SIZE, depth, color_type, 0, 0, interlace)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
    if plte is not None:
        out += chunk(b"PLTE", plte)
    if trns is not None:
        out += chunk(b"tRNS", trns)
    if interlace:
        raw = adam7(rows, color_type, depth)
    else:
        raw = b"".join(b"\x00" + r for r in rows)
    return out + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def channels(color_type):
    return {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color_type]


def pack(values, depth):
    """Packs sample values (ints) of `depth` bits into bytes, MSB first."""
    if depth == 16:
        return b"".join(struct.pack(">H", v) for v in values)
    if depth == 8:
        return bytes(values)
    out, acc, n = bytearray(), 0, 0
    for v in values:
        acc = (acc << depth) | v
        n += depth
        if n == 8:
            out.append(acc)
            acc, n = 0, 0
    if n:
        out.append(acc << (8 - n))
    return bytes(out)


def samples(x, y, color_type, depth):
    """A white square (the repainted part) on black, in each colour type."""
    top = (1 << depth) - 1
    inside = 8 <= x < 24 and 8 <= y < 24
    if color_type == 3:  # palette index: 1 is white, 0 black
        return [1 if inside else 0]
    v = top if inside else 0
    return {0: [v], 2: [v, v, v], 4: [v, top], 6: [v, v, v, top]}[color_type]


def image_rows(color_type, depth, xs, ys):
    return [pack([s for x in xs for s in samples(x, y, color_type, depth)], depth) for y in ys]


def adam7(rows_unused, color_type, depth):
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    raw = b""
    for x0, y0, dx, dy in passes:
        xs, ys = list(range(x0, SIZE, dx)), list(range(y0, SIZE, dy))
        if xs and ys:
            raw += b"".join(b"\x00" + r for r in image_rows(color_type, depth, xs, ys))
    return raw


def make(color_type, depth, **kw):
    full = list(range(SIZE))
    return png(color_type, depth, image_rows(color_type, depth, full, full), **kw)


CASES = {
    # The heap overflow of issue 42: a palette with a tRNS chunk (what PIL
    # writes for a transparent palette image) expands to 4 bytes a pixel.
    "palette_trns.png": lambda: make(3, 8, plte=b"\x00\x00\x00\xff\xff\xff", trns=b"\x00\xff"),
    "palette_trns_interlaced.png": lambda: make(3, 8, plte=b"\x00\x00\x00\xff\xff\xff", trns=b"\x80", interlace=1),
    "palette.png": lambda: make(3, 8, plte=b"\x00\x00\x00\xff\xff\xff"),
    "palette_1bit_trns.png": lambda: make(3, 1, plte=b"\x00\x00\x00\xff\xff\xff", trns=b"\x00"),
    "palette_4bit.png": lambda: make(3, 4, plte=b"\x00\x00\x00\xff\xff\xff"),
    "grey_1bit.png": lambda: make(0, 1),
    "grey_2bit_trns.png": lambda: make(0, 2, trns=struct.pack(">H", 0)),
    "grey_8bit.png": lambda: make(0, 8),
    "grey_8bit_trns.png": lambda: make(0, 8, trns=struct.pack(">H", 0)),
    "grey_alpha.png": lambda: make(4, 8),
    "rgb.png": lambda: make(2, 8),
    "rgb_trns.png": lambda: make(2, 8, trns=struct.pack(">HHH", 0, 0, 0)),
    "rgba.png": lambda: make(6, 8),
    "grey_16bit.png": lambda: make(0, 16),
    "rgb_16bit.png": lambda: make(2, 16),
    "rgba_16bit.png": lambda: make(6, 16),
}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, build in CASES.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(build())


if __name__ == "__main__":
    main()
