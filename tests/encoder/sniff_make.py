#!/usr/bin/python3
"""Files for test_sniff, and the truth about each from PIL (Debian's python3-pil).

usage: sniff_make.py DIR SEED

Writes images of every format PIL can write and clipdb decodes (JPEG, PNG, GIF, BMP,
PPM/PGM, TGA, TIFF, WebP), each under a name with no extension, and files that are no
image: random bytes, and text that begins like an image ("BM", "P2", "GIF8", "\\x89PN").
Prints one line per file: NAME<TAB>FORMAT<TAB>MIME, where FORMAT is what PIL's
Image.open() says the file is (its own sniffing, by content) or "-" when PIL cannot
open it, and MIME is PIL's Image.MIME for that format ("-" when none).
"""
import io
import os
import random
import sys

from PIL import Image

out, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
files = []


def put(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
    files.append(name)


for i in range(3):
    w, h = rng.randint(1, 40), rng.randint(1, 40)
    img = Image.new("RGB", (w, h), tuple(rng.randrange(256) for _ in range(3)))
    for fmt, mode, kw in [("JPEG", "RGB", {}), ("PNG", "RGBA", {}), ("GIF", "P", {}),
                          ("BMP", "RGB", {}), ("PPM", "RGB", {}), ("PPM", "L", {}),
                          ("TGA", "RGB", {}), ("TGA", "RGB", {"compression": "tga_rle"}),
                          ("TIFF", "RGB", {}), ("TIFF", "RGB", {"compression": "tiff_lzw"}),
                          ("WEBP", "RGB", {"lossless": bool(i % 2)})]:
        b = io.BytesIO()
        img.convert(mode).save(b, fmt, **kw)
        put("img_%s_%s_%d" % (fmt.lower(), mode, len(files)), b.getvalue())

for i in range(40):
    put("random_%d" % i, bytes(rng.randrange(256) for _ in range(rng.randint(0, 64))))
for head in [b"BM", b"BMP files", b"P2", b"P2 ", b"P7 hello", b"GIF8", b"\x89PN", b"II*",
             b"RIFF\x00\x00\x00\x00WEBX", b"\xff\xd8", b"8BP"]:
    put("text_%d" % len(files), head + b" is how this text file begins\n")

for name in files:
    path = os.path.join(out, name)
    try:
        with Image.open(path) as im:
            fmt = im.format
    except Exception:
        fmt = None
    print("%s\t%s\t%s" % (name, fmt or "-", Image.MIME.get(fmt, "-") if fmt else "-"))
