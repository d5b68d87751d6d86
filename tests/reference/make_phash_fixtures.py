#!/usr/bin/python3
"""The perceptual hash's golden values (tests/golden/phash/phash.txt).

An independent reference of cdb_image_phash (encoder/encoder.h): PIL decodes each
golden image (with ImageOps.exif_transpose), numpy computes the luma, the 32x32 box
reduction and the 2-D DCT-II through an FFT (not the direct cosine sums phash.c uses),
and the bits as imagehash.phash sets them (coefficient above the median of the 8x8
lowest frequencies by more than 1e-9 of the DC term; bit v*8+u). Images PIL
cannot open here (HEIC, AVIF) and DNG (PIL sees a TIFF thumbnail in it) are left out.

Run from the repository root: /usr/bin/python3 tests/reference/make_phash_fixtures.py
"""
import os
import sys

import numpy as np
from PIL import Image, ImageOps

SIDE, LOW = 32, 8
IMAGES = "tests/golden/images"
OUT = "tests/golden/phash/phash.txt"


def luma(img):
    """float64 luma 0..255 as phash.c reads the decoded image (alpha ignored)."""
    if img.mode in ("I;16", "I;16B", "I"):
        a = np.asarray(img, dtype=np.float64)
        return a / 257.0 if a.max() > 255 else a
    if img.mode in ("L", "LA", "1", "P", "PA"):
        if img.mode in ("1", "P", "PA"):
            img = img.convert("RGBA" if "transparency" in img.info or img.mode == "PA"
                              else "RGB")
        else:
            return np.asarray(img, dtype=np.float64)[..., 0] if img.mode == "LA" else \
                np.asarray(img, dtype=np.float64)
    if img.mode == "CMYK":
        a = np.asarray(img, dtype=np.float64)
        k = 255.0 - a[..., 3]
        rgb = (255.0 - a[..., :3]) * k[..., None] / 255.0
    else:
        a = np.asarray(img.convert("RGBA") if img.mode not in ("RGB", "RGBA") else img,
                       dtype=np.float64)
        rgb = a[..., :3]
    return rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114


def reduce(g):
    h, w = g.shape
    out = np.zeros((SIDE, SIDE))
    for y in range(SIDE):
        y0, y1 = y * h // SIDE, (y + 1) * h // SIDE
        y1 = max(y1, y0 + 1)
        for x in range(SIDE):
            x0, x1 = x * w // SIDE, (x + 1) * w // SIDE
            x1 = max(x1, x0 + 1)
            out[y, x] = g[y0:y1, x0:x1].mean()
    return out


def dct2_fft(v, axis):
    """Unnormalized DCT-II along axis through an FFT of the even extension."""
    v = np.moveaxis(v, axis, -1)
    n = v.shape[-1]
    ext = np.concatenate([v, v[..., ::-1]], axis=-1)
    f = np.fft.fft(ext, axis=-1)[..., :n]
    k = np.arange(n)
    out = np.real(f * np.exp(-1j * np.pi * k / (2 * n))) / 2
    return np.moveaxis(out, -1, axis)


def phash(path):
    img = Image.open(path)
    img.load()  # PIL's TIFF plugin applies the orientation tag at load (libtiff)
    if img.format != "TIFF":
        img = ImageOps.exif_transpose(img)
    px = reduce(luma(img))
    c = dct2_fft(dct2_fft(px, 1), 0)[:LOW, :LOW]
    med = np.median(c)
    # "above" by more than rounding: a flat image's coefficients are all at the median
    bits = (c > med + 1e-9 * abs(c[0, 0])).flatten()
    return sum(1 << i for i, b in enumerate(bits) if b)


def main():
    rows = []
    for name in sorted(os.listdir(IMAGES)):
        if name.endswith((".gz", ".txt", ".dng")):
            continue  # DNG: PIL reads a TIFF thumbnail, not the camera's image
        try:
            h = phash(os.path.join(IMAGES, name))
        except Exception as e:  # PIL has no decoder for it here
            print(f"skip {name}: {e}", file=sys.stderr)
            continue
        rows.append(f"{name} {h:016x}")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write("# file phash (tests/reference/make_phash_fixtures.py)\n")
        f.write("\n".join(rows) + "\n")
    print(f"{len(rows)} hashes -> {OUT}")


if __name__ == "__main__":
    main()
