#!/usr/bin/python3
"""Makes photos with random metadata, and the truth about them, for test_photo_meta.

usage: photo_meta_make.py OUTDIR SEED COUNT

Independent of clipdb: Debian's python3-pil makes plain images (heif-enc, from
libheif-examples, turns one into HEIC), Debian's exiftool (libimage-exiftool-perl) writes
the metadata into every format and reads it back. Writes OUTDIR/manifest.json: one entry
per file with what a reader must find, following the rules clipdb documents
(encoder.h, docs/images.md "Metadata"):
  taken:  DateTimeOriginal (+ SubSecTimeOriginal, OffsetTimeOriginal), else CreateDate
          (+ SubSecTimeDigitized, OffsetTimeDigitized), else XMP exif:DateTimeOriginal;
          invalid dates ("0000:00:00 00:00:00", February 30) are skipped for the next source;
          as ISO 8601 "YYYY-MM-DDTHH:MM:SS[.mmm][+HH:MM|Z]", null when none;
  make, model, lens: the strings written, trimmed; "" when absent;
  gps:    [lat, lon] as exiftool -n reads the stored rationals back (its Composite tags,
          signed by the refs; null when none),
  alt:    metres, negative below sea level, the same way (null when none).
"""
import json
import os
import random
import struct
import subprocess
import sys

from PIL import Image

FORMATS = ["jpg", "png", "webp", "tif", "heic"]
WORDS = ["Canon", "NIKON CORPORATION", "Apple", "iPhone 12 mini", "Pixel 7", "ILCE-7M3",
         "Café Noir", "Zoë 3000", "  padded  ", "EF24-70mm f/2.8L II USM", "FE 35mm F1.8",
         "X100V", "Ω-lens 50/1.4"]


def iso(y, mo, d, h, mi, s, ms, off):
    t = "%04d-%02d-%02dT%02d:%02d:%02d" % (y, mo, d, h, mi, s)
    if ms:
        t += ".%03d" % ms
    if off is not None:
        t += "Z" if off == 0 else "%s%02d:%02d" % ("-" if off < 0 else "+", abs(off) // 60,
                                                   abs(off) % 60)
    return t


def off_str(off):
    return "%s%02d:%02d" % ("-" if off < 0 else "+", abs(off) // 60, abs(off) % 60)


def random_time(rng):
    y, mo = rng.randint(1990, 2035), rng.randint(1, 12)
    d = rng.randint(1, 28)
    h, mi, s = rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59)
    sub = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 6))) \
        if rng.random() < 0.5 else None
    ms = int((sub + "00")[:3]) if sub else 0
    off = rng.choice([-480, -300, -210, 0, 60, 120, 330, 345, 540, 780]) \
        if rng.random() < 0.5 else None
    return (y, mo, d, h, mi, s), sub, ms, off


def make_image(path, fmt, rng):
    w, h = (220, 160) if fmt == "tif" and rng.random() < 0.5 else (24, 16)
    im = Image.new("RGB", (w, h), tuple(rng.randint(0, 255) for _ in range(3)))
    if fmt == "heic":
        png = path + ".png"
        im.save(png)
        subprocess.run(["heif-enc", "-q", "50", "-o", path, png], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.unlink(png)
    else:
        im.save(path, {"jpg": "JPEG", "png": "PNG", "webp": "WEBP", "tif": "TIFF"}[fmt])


# -GROUP:Tag=value arguments as TIFF entries: (IFD, tag id, type); 2 ASCII, 1 BYTE, 5 RATIONAL
LATE_TAGS = {
    "EXIF:Make": (0, 0x10F, 2), "EXIF:Model": (0, 0x110, 2), "EXIF:LensModel": (1, 0xA434, 2),
    "EXIF:DateTimeOriginal": (1, 0x9003, 2), "EXIF:SubSecTimeOriginal": (1, 0x9291, 2),
    "EXIF:OffsetTimeOriginal": (1, 0x9011, 2), "EXIF:CreateDate": (1, 0x9004, 2),
    "EXIF:SubSecTimeDigitized": (1, 0x9292, 2), "EXIF:OffsetTimeDigitized": (1, 0x9012, 2),
    "GPS:GPSLatitudeRef": (2, 1, 2), "GPS:GPSLatitude": (2, 2, 5),
    "GPS:GPSLongitudeRef": (2, 3, 2), "GPS:GPSLongitude": (2, 4, 5),
    "GPS:GPSAltitudeRef": (2, 5, 1), "GPS:GPSAltitude": (2, 6, 5),
}


def late_tiff(path, w, h, rgb, args):
    """A TIFF whose IFDs all lie after 100 KiB of pixels (as libtiff writes them, and
    past the 64 KiB libexif would read), with the metadata of `args` in IFD0, the Exif
    IFD and the GPS IFD; exiftool (which moves IFDs to the front when it writes) reads
    it back for the GPS truth. False when args hold a tag it cannot write (XMP)."""
    ifds = [[], [], []]
    for a in args:
        name, value = a[1:].split("=", 1)
        if name not in LATE_TAGS:
            return False
        ifd, tag, typ = LATE_TAGS[name]
        if typ == 2:
            data, count = value.encode() + b"\0", len(value.encode()) + 1
        elif typ == 1:
            data, count = bytes([int(value)]), 1
        elif tag in (2, 4):  # degrees as D/1 M/1 S/10000
            v = float(value)
            deg, mnt = int(v), int((v - int(v)) * 60)
            sec = round(((v - deg) * 60 - mnt) * 60 * 10000)
            data, count = struct.pack("<6I", deg, 1, mnt, 1, sec, 10000), 3
        else:
            data, count = struct.pack("<2I", round(float(value) * 100), 100), 1
        ifds[ifd].append((tag, typ, count, data))
    pix = bytes(rgb) * (w * h)
    out = bytearray(b"II*\0\0\0\0\0" + pix)
    base = [(256, 3, 1, struct.pack("<H", w)), (257, 3, 1, struct.pack("<H", h)),
            (258, 3, 3, struct.pack("<3H", 8, 8, 8)), (259, 3, 1, struct.pack("<H", 1)),
            (262, 3, 1, struct.pack("<H", 2)), (273, 4, 1, struct.pack("<I", 8)),
            (277, 3, 1, struct.pack("<H", 3)), (278, 3, 1, struct.pack("<H", h)),
            (279, 4, 1, struct.pack("<I", len(pix)))]
    order = [0, 1, 2]
    offsets = {}

    def emit(entries):  # one IFD at the end of out, its long values after it
        entries = sorted(entries)
        if len(out) % 2:
            out.append(0)
        at = len(out)
        vals = at + 2 + 12 * len(entries) + 4
        blob = bytearray()
        out.extend(struct.pack("<H", len(entries)))
        for tag, typ, count, data in entries:
            if len(data) <= 4:
                out.extend(struct.pack("<HHI", tag, typ, count) + data.ljust(4, b"\0"))
            else:
                out.extend(struct.pack("<HHII", tag, typ, count, vals + len(blob)))
                blob.extend(data + (b"\0" if len(data) % 2 else b""))
        out.extend(struct.pack("<I", 0))
        out.extend(blob)
        return at

    for k in order[1:]:
        if ifds[k]:
            offsets[k] = emit(ifds[k])
    ifd0 = base + ifds[0]
    if 1 in offsets:
        ifd0.append((0x8769, 4, 1, struct.pack("<I", offsets[1])))
    if 2 in offsets:
        ifd0.append((0x8825, 4, 1, struct.pack("<I", offsets[2])))
    out[4:8] = struct.pack("<I", emit(ifd0))
    with open(path, "wb") as f:
        f.write(out)
    return True


# Where EXIF records a capture time (its date, subseconds and offset tags), and the
# source clipdb reports for it (1 original, 2 created).
EXIF_TIMES = {"original": ("DateTimeOriginal", "SubSecTimeOriginal", "OffsetTimeOriginal", 1),
              "created": ("CreateDate", "SubSecTimeDigitized", "OffsetTimeDigitized", 2)}


def one(outdir, i, rng):
    fmt = FORMATS[i % len(FORMATS)]
    path = os.path.join(outdir, "p%04d.%s" % (i, fmt))
    make_image(path, fmt, rng)
    args, truth = [], {"file": os.path.basename(path), "taken": None, "source": 0}
    (y, mo, d, h, mi, s), sub, ms, off = random_time(rng)
    exif_dt = "%04d:%02d:%02d %02d:%02d:%02d" % (y, mo, d, h, mi, s)
    where = rng.choice(["original", "original", "created", "xmp", "none", "bad"])
    if where == "bad":  # an invalid DateTimeOriginal, a valid CreateDate behind it
        args += ["-EXIF:DateTimeOriginal=" + rng.choice(["0000:00:00 00:00:00",
                                                    "2021:02:30 10:00:00"])]
        where = "created"
    if where in EXIF_TIMES:
        date, subsec, offset, truth["source"] = EXIF_TIMES[where]
        args += ["-EXIF:%s=%s" % (date, exif_dt)]
        if sub:
            args += ["-EXIF:%s=%s" % (subsec, sub)]
        if off is not None:
            args += ["-EXIF:%s=%s" % (offset, off_str(off))]
    elif where == "xmp":
        v = iso(y, mo, d, h, mi, s, ms, off).replace("-", ":", 2).replace("T", " ")
        args += ["-XMP-exif:DateTimeOriginal=" + v]
        truth["source"] = 3
    if truth["source"]:
        truth["taken"] = iso(y, mo, d, h, mi, s, ms, off)
    for tag, key in (("EXIF:Make", "make"), ("EXIF:Model", "model"), ("EXIF:LensModel", "lens")):
        truth[key] = ""
        if rng.random() < 0.6:
            v = rng.choice(WORDS)
            args += ["-%s=%s" % (tag, v)]
            truth[key] = v.strip()
    if rng.random() < 0.6:
        lat, lon = rng.uniform(-90, 90), rng.uniform(-180, 180)
        args += ["-GPS:GPSLatitude=%.7f" % abs(lat), "-GPS:GPSLatitudeRef=" + ("S" if lat < 0 else "N"),
                 "-GPS:GPSLongitude=%.7f" % abs(lon), "-GPS:GPSLongitudeRef=" + ("W" if lon < 0 else "E")]
    if rng.random() < 0.4:
        alt = round(rng.uniform(-400, 8000), 2)
        args += ["-GPS:GPSAltitude=%s" % abs(alt), "-GPS:GPSAltitudeRef=%d" % (1 if alt < 0 else 0)]
    if fmt == "tif" and i % 2 and late_tiff(path, 220, 160, [i % 256, 80, 160], args):
        args = []  # written by late_tiff, not exiftool
    return path, args, truth


def main():
    outdir, seed, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    files, truths, argfile = [], [], []
    for i in range(count):
        path, args, truth = one(outdir, i, rng)
        files.append(path)
        truths.append(truth)
        if args:  # one exiftool process writes every file: -execute separates the commands
            argfile += ["-q", "-q", "-m", "-overwrite_original", "-charset", "exif=utf8"]
            argfile += args + [path, "-execute"]
    with open(os.path.join(outdir, "exiftool.args"), "w") as f:
        f.write("\n".join(argfile) + "\n")
    subprocess.run(["exiftool", "-@", os.path.join(outdir, "exiftool.args")], check=True)
    # GPS and altitude as the stored rationals give them (exiftool -n: signed decimals)
    out = subprocess.run(["exiftool", "-j", "-n", "-Composite:GPSLatitude",
                          "-Composite:GPSLongitude", "-Composite:GPSAltitude"] + files,
                         check=True, capture_output=True, text=True).stdout
    read = {os.path.basename(e["SourceFile"]): e for e in json.loads(out)}
    for t in truths:
        e = read[t["file"]]
        t["gps"] = [e["GPSLatitude"], e["GPSLongitude"]] if "GPSLatitude" in e else None
        t["alt"] = None
        if "GPSAltitude" in e:
            t["alt"] = e["GPSAltitude"]
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(truths, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
