#!/usr/bin/python3
"""pil_photos.py: the PIL + OpenAI CLIP side of bench_photos (and test_photos' reference).

    pil_photos.py LIST [--reps N] [--crops DIR]

LIST: one image path per line. For each file (bytes read before timing) prints
"ms INDEX MILLISECONDS": the best of N thread-CPU times of Image.open + OpenAI CLIP's
_transform as torchvision runs it (Resize(224, BICUBIC), CenterCrop(224),
convert("RGB"), ToTensor, Normalize) on one thread. --crops DIR also writes DIR/INDEX.rgb,
the uint8 224x224x3 crop (PIL's pixels, before ToTensor), and for JPEGs
DIR/INDEX.fast.rgb, the same after Image.draft("RGB", (224, 224)).
Debian's python3-pil and python3-torchvision; exit 77 when they are missing.
"""
import io
import os
import sys
import time

try:
    import numpy as np
    import torch
    from PIL import Image
    from torchvision import transforms as T
except ImportError as e:
    print("pil_photos: %s" % e, file=sys.stderr)
    sys.exit(77)

Image.MAX_IMAGE_PIXELS = None
torch.set_num_threads(1)
MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)
BIC = T.InterpolationMode.BICUBIC
transform = T.Compose([T.Resize(224, interpolation=BIC), T.CenterCrop(224),
                       lambda im: im.convert("RGB"), T.ToTensor(), T.Normalize(MEAN, STD)])
crop_only = T.Compose([T.Resize(224, interpolation=BIC), T.CenterCrop(224), lambda im: im.convert("RGB")])


def main():
    args = sys.argv[1:]
    reps, crops = 1, None
    if "--reps" in args:
        i = args.index("--reps")
        reps = int(args[i + 1])
        del args[i:i + 2]
    if "--crops" in args:
        i = args.index("--crops")
        crops = args[i + 1]
        del args[i:i + 2]
        os.makedirs(crops, exist_ok=True)
    paths = [l.strip() for l in open(args[0]) if l.strip()]
    for idx, p in enumerate(paths):
        data = open(p, "rb").read()
        best = 1e30
        for _ in range(reps):
            t0 = time.thread_time()
            x = transform(Image.open(io.BytesIO(data)))
            best = min(best, time.thread_time() - t0)
        assert x.shape == (3, 224, 224)
        print("ms %d %.3f" % (idx, best * 1e3), flush=True)
        if crops:
            im = Image.open(io.BytesIO(data))
            np.asarray(crop_only(im), dtype=np.uint8).tofile(os.path.join(crops, "%d.rgb" % idx))
            im = Image.open(io.BytesIO(data))
            if im.format == "JPEG":
                im.draft("RGB", (224, 224))
                np.asarray(crop_only(im), dtype=np.uint8).tofile(os.path.join(crops, "%d.fast.rgb" % idx))


if __name__ == "__main__":
    main()
