#!/usr/bin/python3
"""rclip_loop.py: the PyTorch side of bench_photos' whole-ingest comparison.

    rclip_loop.py WEIGHTS LIST [--batch 32] [--threads 2] [--db FILE]

An rclip-style indexing loop, as a Python user would write it with OpenAI CLIP's
code: for each batch of --batch paths from LIST (one path per line), PIL's
Image.open + OpenAI's _transform (Resize(224, BICUBIC), CenterCrop(224),
convert("RGB"), ToTensor, Normalize), torch.stack, model.encode_image under
torch.inference_mode, L2 normalization, and one SQLite insert per image of the
fp16 vector with its path, size and mtime (as rclip stores its features), committed
once per batch. torch.set_num_threads(--threads); decoding runs in the loop's own
thread, as in rclip.

WEIGHTS: ViT-B/32-shaped safetensors (bench/encoder_baseline.py --make-weights),
loaded into scripts/clip_torch.py's CLIP (OpenAI's architecture, fp32).

Prints machine-readable lines:
    rclip_load_s=<model load seconds>
    rclip_ingest_s=<wall seconds of the loop, model load excluded>
    rclip_files=<images encoded>
    rclip_cpu_s=<process CPU seconds of the loop>
Debian's python3-torch, python3-torchvision and python3-pil; exit 77 when missing.
"""
import argparse
import os
import sqlite3
import sys
import time

try:
    import torch
    from PIL import Image
    from torchvision import transforms as T
except ImportError as e:
    print("rclip_loop: %s" % e, file=sys.stderr)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import clip_torch  # noqa: E402

Image.MAX_IMAGE_PIXELS = None
MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)
BIC = T.InterpolationMode.BICUBIC
transform = T.Compose([T.Resize(224, interpolation=BIC), T.CenterCrop(224),
                       lambda im: im.convert("RGB"), T.ToTensor(), T.Normalize(MEAN, STD)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("weights")
    ap.add_argument("list")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--db", default=":memory:")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    t = time.perf_counter()
    sd = clip_torch.load_safetensors(a.weights)
    model = clip_torch.CLIP().eval()
    model.load_state_dict(sd)
    del sd
    print("rclip_load_s=%.3f" % (time.perf_counter() - t), flush=True)
    paths = [l.strip() for l in open(a.list) if l.strip()]
    db = sqlite3.connect(a.db)
    db.execute("CREATE TABLE IF NOT EXISTS images (path TEXT PRIMARY KEY, size INTEGER, "
               "mtime REAL, vector BLOB)")
    t, c = time.perf_counter(), time.process_time()
    n = 0
    with torch.inference_mode():
        for i in range(0, len(paths), a.batch):
            chunk = paths[i:i + a.batch]
            x = torch.stack([transform(Image.open(p)) for p in chunk])
            f = model.encode_image(x)
            f = f / f.norm(dim=-1, keepdim=True)
            f16 = f.to(torch.float16)
            for p, v in zip(chunk, f16):
                st = os.stat(p)
                db.execute("INSERT OR REPLACE INTO images VALUES (?, ?, ?, ?)",
                           (p, st.st_size, st.st_mtime, v.numpy().tobytes()))
            db.commit()
            n += len(chunk)
    print("rclip_ingest_s=%.3f" % (time.perf_counter() - t))
    print("rclip_files=%d" % n)
    print("rclip_cpu_s=%.3f" % (time.process_time() - c), flush=True)


if __name__ == "__main__":
    main()
