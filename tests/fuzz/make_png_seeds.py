#!/usr/bin/python3
"""make_png_seeds.py: seeds for fuzz_png, the plain-PNG decoder (encoder/image_png.c):
small 8-bit gray, gray+alpha, RGB and RGBA PNGs written by PIL with optimize=True
(which tries every row filter) and at zlib levels 0, 1 and 9, so that the seeds hold
stored, fixed-Huffman and dynamic-Huffman blocks and all five filter types.
Deterministic; run with Debian's python3 (PIL, numpy):

    /usr/bin/python3 tests/fuzz/make_png_seeds.py
"""
import io
import os

import numpy as np
from PIL import Image

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_png")
rng = np.random.default_rng(11)


def picture(w, h, c):
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([(x * 9 + y * 3 + k * 40) % 256 for k in range(c)], axis=-1).astype(np.uint8)
    a[h // 3:, w // 2:] = rng.integers(0, 256, a[h // 3:, w // 2:].shape, dtype=np.uint8)
    return a[:, :, 0] if c == 1 else a


def main():
    os.makedirs(OUT, exist_ok=True)
    for mode, c in (("L", 1), ("LA", 2), ("RGB", 3), ("RGBA", 4)):
        im = Image.fromarray(picture(13, 9, c), mode)
        for tag, kw in (("opt", {"optimize": True}), ("l0", {"compress_level": 0}),
                        ("l1", {"compress_level": 1}), ("l9", {"compress_level": 9})):
            b = io.BytesIO()
            im.save(b, "PNG", **kw)
            with open(os.path.join(OUT, "%s_%s_13x9.png" % (mode.lower(), tag)), "wb") as f:
                f.write(b.getvalue())


if __name__ == "__main__":
    main()
