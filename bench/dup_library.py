#!/usr/bin/python3
"""The generated library of bench_duplicates: distinct scenes, derived copies, bursts.

Usage: /usr/bin/python3 bench/dup_library.py DIR [N_SCENES] [SEED]

Writes into DIR (Debian's python3-pil and python3-numpy):
- orig/sNNN_fK.jpg: scene NNN, frame K (q95, EXIF Make/Model/DateTimeOriginal). Frame 0
  is the scene; a third of the scenes are bursts: frames 1, 2 with one object moved,
  each one second after the previous, same camera.
- copies/sNNN_<how>.<ext>: copies of frame 0: an exact byte copy (dup), a 50% resize
  (half), JPEG q=60 (q60), WebP q=80 (webp), a 2% crop (crop), EXIF stripped (noexif),
  the pixels rotated 90 degrees with EXIF orientation 6 so it displays upright (rot).
- truth.tsv: path, scene, frame, role: the oracle. Two files are copies of one another
  exactly when scene and frame are equal; a burst is the frames of one scene.
Deterministic for a seed. Scenes are shapes on a gradient, the bundled model's world.
"""
import os
import random
import shutil
import sys

from PIL import Image, ImageDraw

W, H = 640, 480
CAMERAS = [("Canon", "EOS R5"), ("NIKON CORPORATION", "NIKON Z 6"), ("Apple", "iPhone 13")]


def scene_spec(rnd):
    bg0 = tuple(rnd.randrange(256) for _ in range(3))
    bg1 = tuple(rnd.randrange(256) for _ in range(3))
    shapes = []
    for _ in range(rnd.randrange(3, 7)):
        kind = rnd.choice(["ellipse", "rectangle", "triangle"])
        s = rnd.randrange(50, 200)
        x, y = rnd.randrange(0, W - s), rnd.randrange(0, H - s)
        color = tuple(rnd.randrange(256) for _ in range(3))
        shapes.append([kind, x, y, s, color])
    return bg0, bg1, shapes


def draw(spec):
    bg0, bg1, shapes = spec
    im = Image.new("RGB", (W, H))
    px = ImageDraw.Draw(im)
    for y in range(H):  # vertical gradient
        t = y / (H - 1)
        px.line([(0, y), (W, y)], fill=tuple(int(a + (b - a) * t) for a, b in zip(bg0, bg1)))
    for kind, x, y, s, color in shapes:
        if kind == "ellipse":
            px.ellipse([x, y, x + s, y + s], fill=color)
        elif kind == "rectangle":
            px.rectangle([x, y, x + s, y + s * 2 // 3], fill=color)
        else:
            px.polygon([(x, y + s), (x + s // 2, y), (x + s, y + s)], fill=color)
    return im


def exif_bytes(camera, when, orientation=1):
    ex = Image.Exif()
    ex[0x010F], ex[0x0110] = camera
    ex[0x0132] = when
    if orientation != 1:
        ex[0x0112] = orientation
    ex[0x8769] = {0x9003: when}  # the Exif IFD: DateTimeOriginal
    return ex.tobytes()


def stamp(t):
    """EXIF date-time of t seconds after 2024-05-01 08:00:00."""
    d, s = divmod(8 * 3600 + t, 86400)
    return "2024:05:%02d %02d:%02d:%02d" % (1 + d, s // 3600, s // 60 % 60, s % 60)


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    rnd = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 28)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "orig"))
    os.makedirs(os.path.join(out, "copies"))
    truth = []
    for i in range(n):
        spec = scene_spec(rnd)
        camera = CAMERAS[rnd.randrange(len(CAMERAS))]
        t0 = i * 600 + rnd.randrange(300)
        frames = 3 if i % 3 == 0 else 1
        for k in range(frames):
            if k:  # a burst frame: one object moved
                obj = spec[2][rnd.randrange(len(spec[2]))]
                dx = rnd.choice([-1, 1]) * rnd.randrange(30, 70)
                dy = rnd.choice([-1, 1]) * rnd.randrange(20, 50)
                # the other way where this way leaves the frame: it always moves
                obj[1] += dx if 0 <= obj[1] + dx <= W - obj[3] else -dx
                obj[2] += dy if 0 <= obj[2] + dy <= H - obj[3] else -dy
            im = draw(spec)
            ex = exif_bytes(camera, stamp(t0 + k))
            rel = "orig/s%03d_f%d.jpg" % (i, k)
            im.save(os.path.join(out, rel), "JPEG", quality=95, exif=ex)
            truth.append((rel, i, k, "burst" if frames > 1 else "orig"))
            if k:
                continue
            orig, base = im, "copies/s%03d_" % i
            copies = {
                "dup.jpg": None,
                "half.jpg": (orig.resize((W // 2, H // 2), Image.LANCZOS), "JPEG",
                             dict(quality=90, exif=ex)),
                "q60.jpg": (orig, "JPEG", dict(quality=60, exif=ex)),
                "webp.webp": (orig, "WEBP", dict(quality=80, exif=ex)),
                "crop.jpg": (orig.crop((6, 5, W - 7, H - 5)), "JPEG", dict(quality=90, exif=ex)),
                "noexif.jpg": (orig, "JPEG", dict(quality=90)),
                "rot.jpg": (orig.transpose(Image.ROTATE_90), "JPEG",
                            dict(quality=90, exif=exif_bytes(camera, stamp(t0), 6))),
            }
            for how, what in copies.items():
                path = os.path.join(out, base + how)
                if what is None:
                    shutil.copyfile(os.path.join(out, rel), path)
                else:
                    what[0].save(path, what[1], **what[2])
                truth.append((base + how, i, 0, how.split(".")[0]))
    with open(os.path.join(out, "truth.tsv"), "w") as f:
        for row in truth:
            f.write("%s\t%d\t%d\t%s\n" % row)
    print("%d files, %d scenes -> %s" % (len(truth), n, out))


if __name__ == "__main__":
    main()
