#!/usr/bin/python3
"""make_image_seeds.py: tiny seeds for fuzz_image in the formats behind libjpeg-turbo's
less common paths, libwebp, libtiff, libheif and stb's PSD reader (the older seeds
are small files from tests/golden/images). Deterministic; run from anywhere with
Debian's python3 (PIL), jpegtran, tiffcp and gcc + libheif-dev (for HEIC/AVIF):

    /usr/bin/python3 tests/fuzz/make_image_seeds.py
"""
import io
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "fuzz_image")
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import make_image_fixtures as fx  # noqa: E402  (psd_bytes, helper)

rng = np.random.default_rng(7)


def img(w, h, c=3):
    a = rng.integers(0, 256, (h, w, c), dtype=np.uint8)
    a[h // 2:, :w // 2] = 200
    return a


def put(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def pil(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def main():
    rgb = Image.fromarray(img(12, 9))
    put("tiny_lossy_12x9.webp", pil(rgb, "WEBP", quality=50))
    put("tiny_lossless_12x9.webp", pil(rgb, "WEBP", lossless=True))
    put("tiny_alpha_12x9.webp", pil(Image.fromarray(img(12, 9, 4), "RGBA"), "WEBP", quality=50))
    b = io.BytesIO()
    rgb.save(b, "WEBP", save_all=True, append_images=[Image.fromarray(img(12, 9))], quality=40)
    put("tiny_anim_12x9.webp", b.getvalue())
    put("tiny_lzw_12x9.tif", pil(rgb, "TIFF", compression="tiff_lzw"))
    put("tiny_cmyk_12x9.tif", pil(rgb.convert("CMYK"), "TIFF"))
    put("tiny_pal_12x9.tif", pil(rgb.quantize(8), "TIFF", compression="packbits"))
    put("tiny_bw_12x9.tif", pil(rgb.convert("1"), "TIFF", compression="group4"))
    put("tiny_raw_9x7.psd", fx.psd_bytes(img(9, 7)))
    bayer = rng.integers(100, 4000, (12, 16)).astype(np.uint16)
    put("tiny_preview_16x12.dng", fx.dng_bytes(bayer, img(16, 12)))
    put("tiny_nopreview_16x12.dng", fx.dng_bytes(bayer))
    put("tiny_rle_9x7.psd", fx.psd_bytes(img(9, 7), rle=True))
    jpg = pil(rgb, "JPEG", quality=70)
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "a.jpg")
        with open(src, "wb") as f:
            f.write(jpg)
        for name, opts in (("tiny_arith_12x9.jpg", ["-arithmetic"]),
                           ("tiny_restart_12x9.jpg", ["-restart", "1B"])):
            dst = os.path.join(d, name)
            subprocess.run(["jpegtran", *opts, "-outfile", dst, src], check=True)
            with open(dst, "rb") as f:
                put(name, f.read())
        tiled = os.path.join(d, "t.tif")
        with open(os.path.join(d, "s.tif"), "wb") as f:
            f.write(pil(rgb, "TIFF"))
        subprocess.run(["tiffcp", "-t", "-w", "16", "-l", "16", os.path.join(d, "s.tif"), tiled], check=True)
        with open(tiled, "rb") as f:
            put("tiny_tiled_12x9.tif", f.read())
        exe = fx.helper()
        for fmt, orient in (("heic", 6), ("avif", 1)):
            dst = os.path.join(d, "x." + fmt)
            subprocess.run([exe, "heif", "16", "12", "30", str(orient), fmt, dst], check=True,
                           input=img(16, 12).tobytes())
            with open(dst, "rb") as f:
                put("tiny_o%d_16x12.%s" % (orient, fmt), f.read())
        dst = os.path.join(d, "y.jpg")
        subprocess.run([exe, "ycck", "12", "9", "60", dst], check=True, input=img(12, 9, 4).tobytes())
        with open(dst, "rb") as f:
            put("tiny_ycck_12x9.jpg", f.read())


if __name__ == "__main__":
    main()
