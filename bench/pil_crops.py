#!/usr/bin/python3
"""pil_crops.py: test_photos' reference crops with Debian's python3-pil alone (no torch).

    pil_crops.py DIR

DIR is a folder bench/fetch_photos filled (DIR/candidates.txt). Writes DIR/list.txt,
the photos bench_photos selects (select_photos in bench_photos.c: at least 1 MP, and of
a wallpaper's per-resolution copies, "WxH.ext", only the largest per folder), and
DIR/pil_crops/INDEX.rgb, the uint8 224x224x3 crop of each, with for JPEGs
DIR/pil_crops/INDEX.fast.rgb, the same after Image.draft("RGB", (224, 224)).

The crop is what bench/pil_photos.py writes with torchvision (Resize(224, BICUBIC),
CenterCrop(224), convert("RGB"), OpenAI CLIP's _transform up to ToTensor), spelled out
in the PIL calls torchvision 0.14 makes on a PIL image: the short side to 224 and the
long side to int(224 * long / short), Image.resize(BICUBIC), then a crop at
int(round((side - 224) / 2.0)). Exit 77 when PIL is missing.
"""
import os
import re
import sys

try:
    from PIL import Image
except ImportError as e:
    print("pil_crops: %s" % e, file=sys.stderr)
    sys.exit(77)

Image.MAX_IMAGE_PIXELS = None
SZ = 224
RES_NAME = re.compile(r"^[0-9]+x[0-9]+\.")


def pixels(path):
    try:
        with Image.open(path) as im:
            w, h = im.size
            return w * h
    except Exception:  # not an image PIL reads: bench_photos' probe skips it as well
        return 0


def select(candidates):
    """select_photos of bench_photos.c, line for line (the same list, in its order)."""
    out, best, best_px, best_dir = [], "", 0, None
    for path in candidates:
        n = pixels(path)
        if n < 1000000:
            continue
        folder, base = os.path.split(path)
        if RES_NAME.match(base):
            if folder != best_dir:
                if best:
                    out.append(best)
                best_dir, best, best_px = folder, "", 0
            if n > best_px:
                best, best_px = path, n
            continue
        out.append(path)
    if best:
        out.append(best)
    return out


def crop(im):
    """torchvision 0.14: Resize(224, BICUBIC) + CenterCrop(224) on a PIL image, + RGB."""
    w, h = im.size
    short, long_ = (w, h) if w <= h else (h, w)
    new_long = int(SZ * long_ / short)
    size = (SZ, new_long) if w <= h else (new_long, SZ)
    if size != (w, h):
        im = im.resize(size, Image.BICUBIC)
    w, h = im.size
    top, left = int(round((h - SZ) / 2.0)), int(round((w - SZ) / 2.0))
    return im.crop((left, top, left + SZ, top + SZ)).convert("RGB")


def write(path, im):
    with open(path, "wb") as f:
        f.write(im.tobytes())  # RGB: rows of R, G, B bytes, as numpy's HWC uint8


def main():
    if len(sys.argv) != 2:
        print("usage: pil_crops.py DIR", file=sys.stderr)
        return 2
    d = sys.argv[1]
    with open(os.path.join(d, "candidates.txt")) as f:
        paths = select([l.rstrip("\n") for l in f if l.strip()])
    crops = os.path.join(d, "pil_crops")
    os.makedirs(crops, exist_ok=True)
    for idx, p in enumerate(paths):
        with Image.open(p) as im:
            write(os.path.join(crops, "%d.rgb" % idx), crop(im))
        with Image.open(p) as im:
            if im.format == "JPEG":
                im.draft("RGB", (SZ, SZ))
                write(os.path.join(crops, "%d.fast.rgb" % idx), crop(im))
    # list.txt last: its presence says the crops are complete
    with open(os.path.join(d, "list.txt.tmp"), "w") as f:
        f.writelines(p + "\n" for p in paths)
    os.replace(os.path.join(d, "list.txt.tmp"), os.path.join(d, "list.txt"))
    print("pil_crops: %d photos, crops in %s" % (len(paths), crops), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
