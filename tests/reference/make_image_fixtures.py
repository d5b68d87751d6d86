#!/usr/bin/python3
"""make_image_fixtures.py: golden fixtures for clipdb's image decode + preprocess.

Writes tests/golden/images/: input files in many formats and modes (made with
PIL 9.4 + numpy from a fixed seed), and for each test case the uint8 RGB centre
crop that the reference transform produces, as gzipped .npy. The reference is OpenAI
CLIP's _transform as torchvision runs it on PIL images, written out here because
torchvision is not a Debian package:

    Resize(size, BICUBIC)   short side -> size, long side int(size * long / short)
    CenterCrop(size)        offsets int(round((dim - size) / 2.0))
    convert("RGB")
    ToTensor                torch uint8 -> float32, .div(255)
    Normalize(mean, std)    .sub(mean).div(std) in float32

ToTensor + Normalize act per element, so norm_lut.npy.gz (float32 [3][256], computed
with torch exactly as above) is the reference for every crop value; two cases
also store their full normalized CHW tensor.

Run with Debian's python3 (PIL 9.4, numpy, torch), from anywhere:
    /usr/bin/python3 tests/reference/make_image_fixtures.py
It rewrites tests/golden/images/ completely. See tests/golden/README.md.
"""
import gzip
import io
import os
import shutil
import struct
import subprocess
import tempfile
import zlib

import numpy as np
import PIL
import torch
from PIL import Image, ImageOps

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "golden", "images")
MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)
rng = np.random.default_rng(20261129)


# ---- reference transform ---------------------------------------------------------

def resized_size(w, h, size):
    # torchvision _compute_resized_output_size for an int size (max_size None)
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = size, int(size * long / short)
    return (new_short, new_long) if w <= h else (new_long, new_short)


def reference_crop(im, size, interp=Image.BICUBIC):
    w, h = im.size
    nw, nh = resized_size(w, h, size)
    if (nw, nh) != (w, h):  # torchvision returns the image unchanged otherwise
        im = im.resize((nw, nh), interp)
    top = int(round((nh - size) / 2.0))
    left = int(round((nw - size) / 2.0))
    im = im.crop((left, top, left + size, top + size))
    im = im.convert("RGB")
    arr = np.array(im, dtype=np.uint8)
    assert arr.shape == (size, size, 3)
    return arr


def to_tensor_normalize(arr):
    t = torch.from_numpy(arr.copy()).permute(2, 0, 1).contiguous()
    t = t.to(dtype=torch.float32).div(255)
    mean = torch.as_tensor(MEAN, dtype=torch.float32)[:, None, None]
    std = torch.as_tensor(STD, dtype=torch.float32)[:, None, None]
    return t.sub(mean).div(std).numpy()


# ---- synthetic content -------------------------------------------------------------

def photo_like(w, h, noise=3):
    """Smooth colour field + shapes + mild noise: realistic and compressible."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.zeros((h, w, 3))
    for c in range(3):
        fx, fy, ph = rng.uniform(0.5, 3.0), rng.uniform(0.5, 3.0), rng.uniform(0, 6.28)
        img[..., c] = 127 + 100 * np.sin(fx * 6.28 * xx / max(w, 1) + ph) * np.cos(fy * 6.28 * yy / max(h, 1))
    for _ in range(4):  # hard-edged discs
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(0.05, 0.3) * max(w, h)
        m = (xx - cx) ** 2 + (yy - cy) ** 2 < r * r
        img[m] = rng.uniform(0, 255, 3)
    img[: max(1, h // 8), : max(1, w // 4)] = (250, 20, 20)  # asymmetric marker (EXIF tests)
    img += rng.normal(0, noise, img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def noise(w, h, c):
    shape = (h, w) if c == 1 else (h, w, c)
    return rng.integers(0, 256, shape, dtype=np.uint8)


def png_raw(w, h, depth, ctype, rows, interlace=0):
    """A minimal PNG writer for what PIL cannot save (16-bit RGB, low bit depths,
    Adam7 interlacing). rows: packed scanlines; interlace=1 needs depth >= 8."""
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    if interlace:
        bpp = len(rows[0]) // w
        raw = b""
        for xs, ys, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4),
                               (1, 0, 2, 2), (0, 1, 1, 2)):
            if xs >= w or ys >= h:
                continue
            for y in range(ys, h, dy):
                raw += b"\x00" + b"".join(rows[y][x * bpp:(x + 1) * bpp] for x in range(xs, w, dx))
    else:
        raw = b"".join(b"\x00" + r for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


# ---- cases ---------------------------------------------------------------------------

cases = []  # (name, file, size, apply_exif, interp, kind, crop_file, tensor_file)
inputs = {}


def add_input(fname, data):
    inputs[fname] = data
    with open(os.path.join(OUT, fname), "wb") as f:
        f.write(data)


def save(im, fname, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    add_input(fname, b.getvalue())
    return b.getvalue()


def save_npy_gz(fname, arr):
    b = io.BytesIO()
    np.save(b, arr)
    with open(os.path.join(OUT, fname), "wb") as f:  # mtime 0: reproducible bytes
        f.write(gzip.compress(b.getvalue(), 9, mtime=0))


def add_case(name, fname, size, kind="exact", apply_exif=0, interp=0, tensor=False, ref_image=None,
             ref_oriented=False):
    im = ref_image if ref_image is not None else Image.open(io.BytesIO(inputs[fname]))
    if kind == "fast":  # clipdb's fast decode mode is PIL's draft (JPEG DCT scaling)
        assert im.format == "JPEG"
        im.draft("RGB", (size, size))
    if apply_exif and not ref_oriented:
        im = ImageOps.exif_transpose(im)
    arr = reference_crop(im, size, Image.BILINEAR if interp == 1 else Image.BICUBIC)
    crop_file = name + ".crop.npy.gz"
    save_npy_gz(crop_file, arr)
    tensor_file = "-"
    if tensor:
        tensor_file = name + ".tensor.npy.gz"
        save_npy_gz(tensor_file, to_tensor_normalize(arr).astype(np.float32))
    cases.append((name, fname, size, apply_exif, interp, kind, crop_file, tensor_file))


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)

    # Lossless RGB: tiny, extreme aspect, down- and upscaling, two sizes.
    save(Image.fromarray(noise(1, 1, 3)), "rgb_1x1.png", "PNG")
    add_case("rgb_1x1_s64", "rgb_1x1.png", 64)
    add_case("rgb_1x1_s224", "rgb_1x1.png", 224)
    save(Image.fromarray(noise(7, 5, 3)), "rgb_7x5.png", "PNG")
    add_case("rgb_7x5_s64", "rgb_7x5.png", 64, tensor=True)
    save(Image.fromarray(photo_like(1000, 10)), "rgb_1000x10.png", "PNG")
    add_case("rgb_1000x10_s64", "rgb_1000x10.png", 64)
    add_case("rgb_1000x10_s224", "rgb_1000x10.png", 224)
    save(Image.fromarray(photo_like(10, 333)), "rgb_10x333.png", "PNG")
    add_case("rgb_10x333_s64", "rgb_10x333.png", 64)
    save(Image.fromarray(photo_like(320, 241)), "rgb_320x241.png", "PNG")
    add_case("rgb_320x241_s224", "rgb_320x241.png", 224)
    add_case("rgb_320x241_s64", "rgb_320x241.png", 64, tensor=True)
    add_case("rgb_320x241_s64_bilinear", "rgb_320x241.png", 64, interp=1)
    save(Image.fromarray(noise(97, 64, 3)), "rgb_97x64_noise.png", "PNG")
    add_case("rgb_97x64_noise_s64", "rgb_97x64_noise.png", 64)      # crop only (short side == size)
    add_case("rgb_97x64_noise_s50", "rgb_97x64_noise.png", 50)      # odd crop offsets
    add_case("rgb_97x64_noise_s65", "rgb_97x64_noise.png", 65)

    # Gray, 1-bit, palette, palette + tRNS.
    save(Image.fromarray(photo_like(150, 110)[..., 1], "L"), "gray_150x110.png", "PNG")
    add_case("gray_150x110_s64", "gray_150x110.png", 64)
    save(Image.fromarray(noise(45, 37, 1) > 127).convert("1"), "bw_45x37.png", "PNG")
    add_case("bw_45x37_s64", "bw_45x37.png", 64)
    pal = Image.fromarray(photo_like(120, 90)).quantize(colors=48)
    save(pal, "pal_120x90.png", "PNG")
    add_case("pal_120x90_s64", "pal_120x90.png", 64)
    add_case("pal_120x90_s224", "pal_120x90.png", 224)
    palt = Image.fromarray(photo_like(53, 71)).quantize(colors=16)
    save(palt, "pal_trns_53x71.png", "PNG", transparency=3)
    add_case("pal_trns_53x71_s64", "pal_trns_53x71.png", 64)

    # 16-bit: RGB (PIL keeps the high byte) and gray (documented deviation: we take
    # the high byte too, PIL's convert("RGB") would saturate everything to white).
    a16 = (photo_like(80, 60).astype(np.uint16) * 257 + rng.integers(0, 257, (60, 80, 3))).astype(">u2")
    add_input("rgb16_80x60.png", png_raw(80, 60, 16, 2, [a16[y].tobytes() for y in range(60)]))
    add_case("rgb16_80x60_s64", "rgb16_80x60.png", 64)
    g16 = (photo_like(70, 90)[..., 0].astype(np.uint16) * 257 + rng.integers(0, 257, (90, 70))).astype(np.uint16)
    save(Image.fromarray(g16), "gray16_70x90.png", "PNG")
    assert Image.open(io.BytesIO(inputs["gray16_70x90.png"])).mode == "I"
    as_l = Image.fromarray((np.array(Image.open(io.BytesIO(inputs["gray16_70x90.png"]))) >> 8).astype(np.uint8), "L")
    add_case("gray16_70x90_s64", "gray16_70x90.png", 64, ref_image=as_l)

    # Alpha: premultiplied resize, fully transparent pixels end black.
    rgba = np.dstack([photo_like(130, 100), noise(130, 100, 1)])
    rgba[10:40, 20:90, 3] = 0
    rgba[50:70, :, 3] = 255
    rgba[80:, 100:, 3] = rng.integers(1, 8, (20, 30))
    save(Image.fromarray(rgba, "RGBA"), "rgba_130x100.png", "PNG")
    add_case("rgba_130x100_s64", "rgba_130x100.png", 64)
    add_case("rgba_130x100_s224", "rgba_130x100.png", 224)
    add_case("rgba_130x100_s100", "rgba_130x100.png", 100)  # no resize: no premultiply round trip
    la = np.dstack([photo_like(61, 77)[..., 2], noise(61, 77, 1)])
    la[:20, :30, 1] = 0
    save(Image.fromarray(la, "LA"), "la_61x77.png", "PNG")
    add_case("la_61x77_s64", "la_61x77.png", 64)

    # Other lossless formats.
    save(Image.fromarray(photo_like(90, 70)), "rgb_90x70.bmp", "BMP")
    add_case("bmp24_s64", "rgb_90x70.bmp", 64)
    save(Image.fromarray(rgba[:50, :60].copy(), "RGBA"), "rgba_60x50.bmp", "BMP")  # PIL reads BGRX
    add_case("bmp32_s64", "rgba_60x50.bmp", 64)
    save(pal.crop((0, 0, 70, 50)), "pal_70x50.bmp", "BMP")
    add_case("bmp8_pal_s64", "pal_70x50.bmp", 64)
    save(Image.fromarray(photo_like(66, 40)[..., 0], "L"), "gray_66x40.bmp", "BMP")
    add_case("bmp8_gray_s64", "gray_66x40.bmp", 64)
    gif = Image.fromarray(photo_like(75, 55)).quantize(colors=32)
    save(gif, "pal_75x55.gif", "GIF", transparency=5)
    add_case("gif_s64", "pal_75x55.gif", 64)
    save(Image.fromarray(photo_like(57, 83)), "rgb_57x83.tga", "TGA")
    add_case("tga24_s64", "rgb_57x83.tga", 64)
    save(Image.fromarray(rgba[:40, :50].copy(), "RGBA"), "rgba_50x40.tga", "TGA")
    add_case("tga32_s64", "rgba_50x40.tga", 64)
    save(Image.fromarray(photo_like(44, 70)), "rgb_44x70.ppm", "PPM")
    add_case("ppm_s64", "rgb_44x70.ppm", 64)
    save(Image.fromarray(photo_like(70, 44)[..., 1], "L"), "gray_70x44.pgm", "PPM")
    add_case("pgm_s64", "gray_70x44.pgm", 64)

    # PNM maxval != 255: PIL rescales with round(v / maxval * out_max).
    g = photo_like(40, 30)[..., 0]
    add_input("gray_40x30_max100.pgm", b"P5\n40 30\n100\n" + (g.astype(np.uint32) * 100 // 255).astype(np.uint8).tobytes())
    add_case("pgm_max100_s64", "gray_40x30_max100.pgm", 64)
    c = photo_like(30, 40)
    add_input("rgb_30x40_max1000.ppm", b"P6\n30 40\n1000\n" + (c.astype(np.uint32) * 1000 // 255).astype(">u2").tobytes())
    add_case("ppm_max1000_s64", "rgb_30x40_max1000.ppm", 64)
    add_input("gray_40x30_max1000.pgm", b"P5\n40 30\n1000\n" + (g.astype(np.uint32) * 1000 // 255 + 3).astype(">u2").tobytes())
    pim = Image.open(io.BytesIO(inputs["gray_40x30_max1000.pgm"]))
    assert pim.mode == "I"
    add_case("pgm16_max1000_s64", "gray_40x30_max1000.pgm", 64,
             ref_image=Image.fromarray((np.array(pim) >> 8).astype(np.uint8), "L"))

    # Low bit depths, 16-bit with alpha, RLE TGA, 1-bit BMP, GIF without transparency.
    for depth in (2, 4):
        v = rng.integers(0, 1 << depth, (21, 35))
        rows = []
        for y in range(21):
            bits = "".join(format(int(x), "0%db" % depth) for x in v[y])
            bits += "0" * (-len(bits) % 8)
            rows.append(int(bits, 2).to_bytes(len(bits) // 8, "big"))
        add_input("gray%d_35x21.png" % depth, png_raw(35, 21, depth, 0, rows))
        add_case("gray%d_35x21_s64" % depth, "gray%d_35x21.png" % depth, 64)
    r16 = (rgba[:45, :60].astype(np.uint16) * 257 + rng.integers(0, 257, (45, 60, 4))).astype(">u2")
    r16[:10, :10, 3] = 0
    add_input("rgba16_60x45.png", png_raw(60, 45, 16, 6, [r16[y].tobytes() for y in range(45)]))
    add_case("rgba16_60x45_s64", "rgba16_60x45.png", 64)
    la16 = r16[:, :, [0, 3]].copy()
    add_input("la16_60x45.png", png_raw(60, 45, 16, 4, [la16[y].tobytes() for y in range(45)]))
    add_case("la16_60x45_s64", "la16_60x45.png", 64)
    save(Image.fromarray(photo_like(50, 40)).quantize(colors=2), "pal1_50x40.png", "PNG")
    add_case("pal1_50x40_s64", "pal1_50x40.png", 64)
    save(Image.fromarray(rgba[:60, :80].copy(), "RGBA"), "rgba_80x60_rle.tga", "TGA", compression="tga_rle")
    add_case("tga_rle_s64", "rgba_80x60_rle.tga", 64)
    save(Image.fromarray(noise(37, 29, 1) > 100).convert("1"), "bw_37x29.bmp", "BMP")
    add_case("bmp1_s64", "bw_37x29.bmp", 64)
    save(Image.fromarray(photo_like(66, 48)).quantize(colors=64), "pal_66x48.gif", "GIF")
    add_case("gif_opaque_s64", "pal_66x48.gif", 64)
    il = photo_like(43, 29)
    add_input("rgb_43x29_interlaced.png", png_raw(43, 29, 8, 2, [il[y].tobytes() for y in range(29)], interlace=1))
    assert Image.open(io.BytesIO(inputs["rgb_43x29_interlaced.png"])).info.get("interlace") == 1
    add_case("png_interlaced_s64", "rgb_43x29_interlaced.png", 64)
    save(Image.fromarray(photo_like(600, 450, noise=0)), "rgb_600x450.png", "PNG")
    add_case("rgb_600x450_s64", "rgb_600x450.png", 64)   # 7x reduction: wide antialias support

    # JPEG through libjpeg-turbo: PIL's pixels exactly.
    photo = Image.fromarray(photo_like(320, 240, noise=2))
    save(photo, "photo_320x240.jpg", "JPEG", quality=90)
    add_case("jpeg_s224", "photo_320x240.jpg", 224, kind="exact")
    add_case("jpeg_s64", "photo_320x240.jpg", 64, kind="exact")
    save(photo, "photo_320x240_prog.jpg", "JPEG", quality=90, progressive=True)
    add_case("jpeg_prog_s64", "photo_320x240_prog.jpg", 64, kind="exact")
    save(photo.convert("L"), "photo_gray_320x240.jpg", "JPEG", quality=90)
    add_case("jpeg_gray_s64", "photo_gray_320x240.jpg", 64, kind="exact")
    save(photo.resize((160, 120)).convert("CMYK"), "photo_cmyk_160x120.jpg", "JPEG", quality=95)
    assert Image.open(io.BytesIO(inputs["photo_cmyk_160x120.jpg"])).mode == "CMYK"
    add_case("jpeg_cmyk_s64", "photo_cmyk_160x120.jpg", 64, kind="exact")
    small = Image.fromarray(photo_like(96, 64, noise=1))
    for o in range(1, 9):
        ex = Image.Exif()
        ex[0x0112] = o
        fname = "exif_o%d_96x64.jpg" % o
        save(small, fname, "JPEG", quality=95, exif=ex.tobytes())
        add_case("exif%d_s64" % o, fname, 64, kind="exact", apply_exif=1)
    add_case("exif6_noexif_s64", "exif_o6_96x64.jpg", 64, kind="exact", apply_exif=0)
    add_case("exif6_s100", "exif_o6_96x64.jpg", 100, kind="exact", apply_exif=1)  # upscale
    add_case("exif8_s40", "exif_o8_96x64.jpg", 40, kind="exact", apply_exif=1)    # downscale
    add_case("exif5_s40", "exif_o5_96x64.jpg", 40, kind="exact", apply_exif=1)
    # Big-endian ("MM") TIFF block with a LONG-free minimal IFD0: orientation 6.
    tiff = b"MM\x00\x2a\x00\x00\x00\x08" + struct.pack(">HHHIHH", 1, 0x0112, 3, 1, 6, 0) + b"\x00" * 4
    save(small, "exif_o6_be_96x64.jpg", "JPEG", quality=95, exif=b"Exif\x00\x00" + tiff)
    assert ImageOps.exif_transpose(Image.open(io.BytesIO(inputs["exif_o6_be_96x64.jpg"]))).size == (64, 96)
    add_case("exif6_be_s64", "exif_o6_be_96x64.jpg", 64, kind="exact", apply_exif=1)
    # PNG eXIf chunk (PIL writes it from exif=, and exif_transpose reads it back).
    for o in (3, 6, 8):
        ex = Image.Exif()
        ex[0x0112] = o
        fname = "png_exif_o%d_96x64.png" % o
        save(small, fname, "PNG", exif=ex.tobytes())
        assert b"eXIf" in inputs[fname]
        assert Image.open(io.BytesIO(inputs[fname])).getexif().get(0x0112) == o
        add_case("png_exif%d_s64" % o, fname, 64, kind="exact", apply_exif=1)
    add_case("png_exif6_noexif_s64", "png_exif_o6_96x64.png", 64, kind="exact", apply_exif=0)

    more_jpeg()
    psd_cases()
    webp_cases()
    tiff_cases()
    heif_cases()
    raw_cases()

    # ToTensor + Normalize for every byte value, per channel.
    lut = np.stack([to_tensor_normalize(np.full((1, 1, 3), v, np.uint8))[:, 0, 0] for v in range(256)], axis=1)
    save_npy_gz("norm_lut.npy.gz", lut.astype(np.float32))

    with open(os.path.join(OUT, "manifest.txt"), "w") as f:
        f.write("# generated by tests/reference/make_image_fixtures.py (PIL %s, numpy %s, torch %s)\n"
                % (PIL.__version__, np.__version__, torch.__version__))
        f.write("# name input size apply_exif interp(0 bicubic,1 bilinear) kind(exact|fast) crop.npy.gz tensor.npy.gz|-\n")
        for c in cases:
            f.write("%s %s %d %d %d %s %s %s\n" % c)
    total = sum(os.path.getsize(os.path.join(OUT, p)) for p in os.listdir(OUT))
    print("%d cases, %d files, %d bytes in %s" % (len(cases), len(os.listdir(OUT)), total, OUT))


def tool(*args, stdin=None):
    subprocess.run(args, input=stdin, check=True, stdout=subprocess.DEVNULL)


def helper():
    """tests/reference/make_fixture_files.c, compiled once (libjpeg YCCK, libheif)."""
    exe = os.path.join(tempfile.gettempdir(), "clipdb_make_fixture_files")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libheif", "libjpeg"],
                           check=True, capture_output=True, text=True).stdout.split()
    tool("gcc", "-O1", "-o", exe, os.path.join(HERE, "make_fixture_files.c"), *flags)
    return exe


def jpegtran(src, dst, *opts):
    """jpegtran (libjpeg-turbo-progs) re-encodes the same coefficients losslessly."""
    with tempfile.TemporaryDirectory() as d:
        a, b = os.path.join(d, "a.jpg"), os.path.join(d, "b.jpg")
        with open(a, "wb") as f:
            f.write(inputs[src])
        tool("jpegtran", *opts, "-outfile", b, a)
        with open(b, "rb") as f:
            add_input(dst, f.read())


def more_jpeg():
    # Qualities x subsamplings on a size that is not a multiple of any MCU.
    base = Image.fromarray(photo_like(203, 157, noise=4))
    for q in (50, 75, 95):
        for sub, tag in ((0, "444"), (1, "422"), (2, "420")):
            fname = "jpeg_q%d_%s_203x157.jpg" % (q, tag)
            save(base, fname, "JPEG", quality=q, subsampling=sub)
            add_case("jpeg_q%d_%s_s64" % (q, tag), fname, 64)
    save(base, "jpeg_prog444_203x157.jpg", "JPEG", quality=85, subsampling=0, progressive=True)
    add_case("jpeg_prog444_s64", "jpeg_prog444_203x157.jpg", 64)
    # Restart markers, arithmetic coding (sequential and progressive): jpegtran.
    jpegtran("jpeg_q75_420_203x157.jpg", "jpeg_restart_203x157.jpg", "-restart", "2B")
    assert b"\xff\xdd" in inputs["jpeg_restart_203x157.jpg"]
    add_case("jpeg_restart_s64", "jpeg_restart_203x157.jpg", 64)
    jpegtran("jpeg_q75_420_203x157.jpg", "jpeg_arith_203x157.jpg", "-arithmetic")
    assert b"\xff\xc9" in inputs["jpeg_arith_203x157.jpg"]
    add_case("jpeg_arith_s64", "jpeg_arith_203x157.jpg", 64)
    jpegtran("jpeg_q75_420_203x157.jpg", "jpeg_arith_prog_203x157.jpg", "-arithmetic", "-progressive")
    add_case("jpeg_arith_prog_s64", "jpeg_arith_prog_203x157.jpg", 64)
    # Adobe YCCK (libjpeg: CMYK in, YCCK stored); PIL decodes to CMYK and inverts.
    cmyk = Image.fromarray(photo_like(120, 90)).convert("CMYK")
    exe = helper()
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "y.jpg")
        tool(exe, "ycck", "120", "90", "90", out, stdin=cmyk.tobytes())
        with open(out, "rb") as f:
            add_input("jpeg_ycck_120x90.jpg", f.read())
    assert Image.open(io.BytesIO(inputs["jpeg_ycck_120x90.jpg"])).info.get("adobe_transform") == 2
    add_case("jpeg_ycck_s64", "jpeg_ycck_120x90.jpg", 64)
    add_case("jpeg_ycck_s224", "jpeg_ycck_120x90.jpg", 224)
    # Fast mode = PIL's draft: scale 8 (800x600 at 64), 2 (200x150 at 64), 4, CMYK, EXIF.
    big = Image.fromarray(photo_like(800, 600, noise=3))
    save(big, "photo_800x600.jpg", "JPEG", quality=90)
    add_case("fast8_s64", "photo_800x600.jpg", 64, kind="fast")
    add_case("fast4_s150", "photo_800x600.jpg", 150, kind="fast")
    add_case("fast2_s224", "photo_800x600.jpg", 224, kind="fast")
    add_case("fast1_s400", "photo_800x600.jpg", 400, kind="fast")  # no reduction possible
    save(big, "photo_800x600_prog.jpg", "JPEG", quality=90, progressive=True, subsampling=1)
    add_case("fast_prog_s64", "photo_800x600_prog.jpg", 64, kind="fast")
    # 1/8 on progressive files decodes without the full-resolution AC scans: 4:2:0 (chroma
    # keeps its AC: libjpeg-turbo gives it a 2x2 IDCT) and 4:4:4 (everything dropped)
    for sub, tag in ((2, "420"), (0, "444")):
        fname = "photo_800x600_prog%s.jpg" % tag
        save(big, fname, "JPEG", quality=85, progressive=True, subsampling=sub)
        add_case("fast_prog%s_s64" % tag, fname, 64, kind="fast")
        add_case("fast_prog%s_s100" % tag, fname, 100, kind="fast")  # 1/4: whole file
    add_case("fast_cmyk_s40", "photo_cmyk_160x120.jpg", 40, kind="fast")
    add_case("fast_ycck_s40", "jpeg_ycck_120x90.jpg", 40, kind="fast")
    add_case("fast_exif6_s30", "exif_o6_96x64.jpg", 30, kind="fast", apply_exif=1)
    add_case("fast_gray_s64", "photo_gray_320x240.jpg", 64, kind="fast")


def psd_bytes(arr, rle=False):
    """A minimal Photoshop file: header, empty colour-mode/resources/layer sections,
    the merged image as planes (raw, or PackBits rows of literal runs)."""
    h, w, c = arr.shape
    out = b"8BPS" + struct.pack(">H6xHIIHH", 1, c, h, w, 8, 3) + struct.pack(">III", 0, 0, 0)
    if not rle:
        return out + struct.pack(">H", 0) + b"".join(arr[..., k].tobytes() for k in range(c))
    rows = []
    for k in range(c):
        for y in range(h):
            r, row = arr[y, :, k].tobytes(), b""
            for i in range(0, len(r), 128):
                part = r[i:i + 128]
                row += bytes([len(part) - 1]) + part
            rows.append(row)
    return out + struct.pack(">H", 1) + b"".join(struct.pack(">H", len(r)) for r in rows) + b"".join(rows)


def psd_cases():
    add_input("psd_rgb_150x97.psd", psd_bytes(photo_like(150, 97)))
    assert Image.open(io.BytesIO(inputs["psd_rgb_150x97.psd"])).mode == "RGB"
    add_case("psd_rgb_s64", "psd_rgb_150x97.psd", 64)
    add_input("psd_rle_150x97.psd", psd_bytes(photo_like(150, 97), rle=True))
    add_case("psd_rle_s64", "psd_rle_150x97.psd", 64)


def tiff_ifd(entries, base, next_ifd=0):
    """One little-endian TIFF IFD at file offset `base`, its out-of-line values right
    after it. entries: (tag, type, values) sorted by tag; types 1 BYTE, 2 ASCII,
    3 SHORT, 4 LONG, 10 SRATIONAL (values: pairs)."""
    ifd_len = 2 + 12 * len(entries) + 4
    out, extra = struct.pack("<H", len(entries)), b""
    for tag, typ, vals in entries:
        if typ == 2:
            data, count = vals.encode() + b"\0", len(vals) + 1
        elif typ == 10:
            data, count = struct.pack("<" + "i" * (2 * len(vals)), *[x for v in vals for x in v]), len(vals)
        else:
            data = struct.pack("<" + {1: "B", 3: "H", 4: "I"}[typ] * len(vals), *vals)
            count = len(vals)
        if len(data) <= 4:
            out += struct.pack("<HHI", tag, typ, count) + data.ljust(4, b"\0")
        else:
            out += struct.pack("<HHII", tag, typ, count, base + ifd_len + len(extra))
            extra += data + b"\0" * (len(data) % 2)
    return out + struct.pack("<I", next_ifd) + extra


def dng_bytes(raw, preview=None, orient=1):
    """A minimal DNG 1.4: IFD0 = an uncompressed RGB preview (or a 1x1 one when
    preview is None, too small to be used), SubIFD = the 16-bit RGGB CFA image."""
    if preview is None:
        preview = np.zeros((1, 1, 3), np.uint8)
    ph, pw, _ = preview.shape
    rh, rw = raw.shape
    cm = [(8000, 10000), (-2000, 10000), (-1000, 10000), (-3000, 10000), (11000, 10000),
          (2000, 10000), (-500, 10000), (1500, 10000), (6000, 10000)]

    def build(raw_ifd_off, prev_off, raw_off):
        ifd0 = [(254, 4, [1]), (256, 4, [pw]), (257, 4, [ph]), (258, 3, [8, 8, 8]), (259, 3, [1]),
                (262, 3, [2]), (271, 2, "clipdb"), (272, 2, "fixture"), (273, 4, [prev_off]),
                (274, 3, [orient]), (277, 3, [3]), (278, 4, [ph]), (279, 4, [pw * ph * 3]),
                (284, 3, [1]), (330, 4, [raw_ifd_off]), (50706, 1, [1, 4, 0, 0]),
                (50708, 2, "clipdb fixture"), (50721, 10, cm), (50778, 3, [21])]
        sub = [(254, 4, [0]), (256, 4, [rw]), (257, 4, [rh]), (258, 3, [16]), (259, 3, [1]),
               (262, 3, [32803]), (273, 4, [raw_off]), (277, 3, [1]), (278, 4, [rh]),
               (279, 4, [rw * rh * 2]), (33421, 3, [2, 2]), (33422, 1, [0, 1, 1, 2]),
               (50717, 4, [4095])]
        a = tiff_ifd(ifd0, 8)
        b = tiff_ifd(sub, 8 + len(a))
        return a, b

    a, b = build(0, 0, 0)
    raw_ifd_off = 8 + len(a)
    prev_off = raw_ifd_off + len(b)
    raw_off = prev_off + pw * ph * 3 + (pw * ph * 3) % 2
    a, b = build(raw_ifd_off, prev_off, raw_off)
    pad = b"\0" * ((pw * ph * 3) % 2)
    return (b"II*\0" + struct.pack("<I", 8) + a + b + preview.tobytes() + pad +
            raw.astype("<u2").tobytes())


def raw_cases():
    """Camera RAW (DNG written above): a full-size embedded preview is what clipdb
    decodes, so its reference is the preview itself through PIL's transform."""
    prev = photo_like(160, 120, noise=2)
    bayer = (rng.integers(200, 4000, (120, 160))).astype(np.uint16)
    add_input("dng_preview_160x120.dng", dng_bytes(bayer, prev))
    add_case("dng_preview_s64", "dng_preview_160x120.dng", 64, ref_image=Image.fromarray(prev))
    add_input("dng_preview_o6_160x120.dng", dng_bytes(bayer, prev, orient=6))
    add_case("dng_preview_o6_s64", "dng_preview_o6_160x120.dng", 64,
             ref_image=Image.fromarray(prev).transpose(Image.Transpose.ROTATE_270))
    # no usable preview: libraw's half-size demosaic (checked for size and source only)
    add_input("dng_nopreview_160x120.dng", dng_bytes(bayer))


def webp_cases():
    im = Image.fromarray(photo_like(150, 110, noise=3))
    save(im, "webp_lossy_150x110.webp", "WEBP", quality=80)
    add_case("webp_lossy_s64", "webp_lossy_150x110.webp", 64)
    save(im, "webp_lossless_150x110.webp", "WEBP", lossless=True)
    add_case("webp_lossless_s64", "webp_lossless_150x110.webp", 64)
    rgba = np.dstack([photo_like(97, 71), noise(97, 71, 1)])
    rgba[:20, :30, 3] = 0
    save(Image.fromarray(rgba, "RGBA"), "webp_alpha_97x71.webp", "WEBP", quality=90)
    add_case("webp_alpha_s64", "webp_alpha_97x71.webp", 64)
    save(Image.fromarray(rgba, "RGBA"), "webp_alpha_lossless_97x71.webp", "WEBP", lossless=True)
    add_case("webp_alpha_lossless_s64", "webp_alpha_lossless_97x71.webp", 64)
    f1, f2 = Image.fromarray(photo_like(80, 60)), Image.fromarray(photo_like(80, 60))
    b = io.BytesIO()
    f1.save(b, "WEBP", save_all=True, append_images=[f2], duration=100, quality=85)
    add_input("webp_anim_80x60.webp", b.getvalue())
    assert Image.open(io.BytesIO(b.getvalue())).n_frames == 2
    add_case("webp_anim_s64", "webp_anim_80x60.webp", 64)  # PIL: the first frame
    ex = Image.Exif()
    ex[0x0112] = 6
    small = Image.fromarray(photo_like(96, 64, noise=1))
    save(small, "webp_exif6_96x64.webp", "WEBP", quality=90, exif=ex.tobytes())
    add_case("webp_exif6_s64", "webp_exif6_96x64.webp", 64, apply_exif=1)
    add_case("webp_exif6_noexif_s64", "webp_exif6_96x64.webp", 64, apply_exif=0)


def tiff_cases():
    im = Image.fromarray(photo_like(130, 90, noise=3))
    save(im, "tiff_rgb_130x90.tif", "TIFF")
    add_case("tiff_rgb_s64", "tiff_rgb_130x90.tif", 64)
    save(im, "tiff_lzw_130x90.tif", "TIFF", compression="tiff_lzw")
    add_case("tiff_lzw_s64", "tiff_lzw_130x90.tif", 64)
    save(im, "tiff_jpeg_130x90.tif", "TIFF", compression="jpeg", quality=85)
    add_case("tiff_jpeg_s64", "tiff_jpeg_130x90.tif", 64)
    rgba = np.dstack([photo_like(70, 50), noise(70, 50, 1)])
    save(Image.fromarray(rgba, "RGBA"), "tiff_rgba_70x50.tif", "TIFF", compression="tiff_adobe_deflate")
    add_case("tiff_rgba_s64", "tiff_rgba_70x50.tif", 64)
    save(im.convert("L"), "tiff_gray_130x90.tif", "TIFF", compression="packbits")
    add_case("tiff_gray_s64", "tiff_gray_130x90.tif", 64)
    save(Image.fromarray(noise(77, 51, 1) > 127).convert("1"), "tiff_bw_77x51.tif", "TIFF",
         compression="group4")
    add_case("tiff_bw_s64", "tiff_bw_77x51.tif", 64)
    save(im.quantize(colors=40), "tiff_pal_130x90.tif", "TIFF")
    add_case("tiff_pal_s64", "tiff_pal_130x90.tif", 64)
    save(im.convert("CMYK"), "tiff_cmyk_130x90.tif", "TIFF")
    add_case("tiff_cmyk_s64", "tiff_cmyk_130x90.tif", 64)
    save(im, "tiff_orient6_130x90.tif", "TIFF", tiffinfo={274: 6})
    # PIL 9.4 applies a TIFF's Orientation tag when it loads the file (load_end), so the
    # reference pipeline sees the rotated image; exif_transpose would rotate a second
    # time (a PIL bug): clipdb applies it once, with or without apply_exif. The reference
    # is the loaded image: before load() PIL reports the unrotated size, so a transform
    # run on a freshly opened TIFF would resize to the wrong aspect ratio (PIL quirk).
    oim = Image.open(io.BytesIO(inputs["tiff_orient6_130x90.tif"]))
    oim.load()
    assert oim.size == (90, 130)
    add_case("tiff_orient6_s64", "tiff_orient6_130x90.tif", 64, apply_exif=0, ref_image=oim)
    add_case("tiff_orient6_exif_s64", "tiff_orient6_130x90.tif", 64, apply_exif=1, ref_image=oim,
             ref_oriented=True)
    # tiled and planar-separate layouts: libtiff's tiffcp
    with tempfile.TemporaryDirectory() as d:
        a = os.path.join(d, "a.tif")
        with open(a, "wb") as f:
            f.write(inputs["tiff_rgb_130x90.tif"])
        for name, opts in (("tiff_tiled_130x90.tif", ["-t", "-w", "32", "-l", "32", "-c", "zip"]),
                           ("tiff_planar_130x90.tif", ["-p", "separate", "-c", "lzw"])):
            b = os.path.join(d, name)
            tool("tiffcp", *opts, a, b)
            with open(b, "rb") as f:
                add_input(name, f.read())
    add_case("tiff_tiled_s64", "tiff_tiled_130x90.tif", 64)
    add_case("tiff_planar_s64", "tiff_planar_130x90.tif", 64)


def heif_cases():
    """HEIC (x265) / AVIF (aom) written with libheif's encoder; the reference is
    libheif's own decoder tool, heif-convert (default colour conversion and irot/imir),
    whose PNG then goes through PIL's transform."""
    exe = helper()
    with tempfile.TemporaryDirectory() as d:
        for fmt, orient, alpha, w, h in (("heic", 1, 0, 120, 90), ("heic", 6, 0, 120, 90),
                                         ("avif", 1, 0, 120, 90), ("avif", 3, 0, 120, 90),
                                         ("avif", 1, 1, 64, 48)):
            px = photo_like(w, h, noise=2)
            if alpha:
                px = np.dstack([px, noise(w, h, 1)])
            fname = "%s_o%d%s_%dx%d.%s" % (fmt, orient, "_alpha" if alpha else "", w, h, fmt)
            path = os.path.join(d, fname)
            args = [exe, "heif", str(w), str(h), "85", str(orient), fmt, path] + (["alpha"] if alpha else [])
            tool(*args, stdin=px.tobytes())
            with open(path, "rb") as f:
                add_input(fname, f.read())
            png = path + ".png"
            tool("heif-convert", path, png)
            ref = Image.open(png)
            ref.load()
            add_case(fname.rsplit(".", 1)[0] + "_s64", fname, 64, ref_image=ref)


if __name__ == "__main__":
    main()
