#!/usr/bin/env python3
"""bench_gpu_torch.py: the PyTorch baseline for bench/bench_gpu.c.

Builds OpenAI CLIP's VisionTransformer (the reference model.py structure: conv1,
class + positional embedding, ln_pre, pre-LN residual blocks with
nn.MultiheadAttention and QuickGELU MLPs, ln_post on the class token, proj) with
the image tower's weights of the model `bench_gpu --write-model DIR` wrote (OpenAI's
layout, F16: the file clipdb itself opens), and times it at batch 256 under
torch.autocast(float16) on the GPU, inputs already on the device.

usage: bench_gpu_torch.py MODEL.safetensors [--batch 256] [--iters 10] [--check FILE]
prints: torch_ips=<images per second>
--check FILE also writes 8 seeded random inputs and PyTorch's fp32 embeddings of
them (int32 n, then n*3*size*size pixels, then n*embed floats) for
`bench_gpu --torch-check FILE`, which compares its GPU output with them.
"""
import argparse
import sys
import time
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn


class LayerNorm(nn.LayerNorm):
    """OpenAI CLIP's LayerNorm: computed in fp32, returned in the input's dtype."""

    def forward(self, x):
        orig = x.dtype
        return super().forward(x.type(torch.float32)).type(orig)


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class Block(nn.Module):
    def __init__(self, width, heads, mlp):
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads)
        self.ln_1 = LayerNorm(width)
        self.mlp = nn.Sequential(OrderedDict([("c_fc", nn.Linear(width, mlp)), ("gelu", QuickGELU()),
                                              ("c_proj", nn.Linear(mlp, width))]))
        self.ln_2 = LayerNorm(width)

    def forward(self, x):
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class VisionTransformer(nn.Module):
    def __init__(self, size, patch, width, layers, heads, mlp, embed):
        super().__init__()
        g = size // patch
        self.conv1 = nn.Conv2d(3, width, patch, patch, bias=False)
        self.class_embedding = nn.Parameter(torch.zeros(width))
        self.positional_embedding = nn.Parameter(torch.zeros(g * g + 1, width))
        self.ln_pre = LayerNorm(width)
        self.transformer = nn.Sequential(*[Block(width, heads, mlp) for _ in range(layers)])
        self.ln_post = LayerNorm(width)
        self.proj = nn.Parameter(torch.zeros(width, embed))

    def forward(self, x):
        x = self.conv1(x)
        x = x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)
        cls = self.class_embedding.to(x.dtype) + torch.zeros(x.shape[0], 1, x.shape[-1],
                                                              dtype=x.dtype, device=x.device)
        x = torch.cat([cls, x], dim=1)
        x = x + self.positional_embedding.to(x.dtype)
        x = self.ln_pre(x)
        x = x.permute(1, 0, 2)
        x = self.transformer(x)
        x = x.permute(1, 0, 2)
        x = self.ln_post(x[:, 0, :])
        return x @ self.proj


def load(path):
    """The image tower of an OpenAI-layout .safetensors file (bench_gpu --write-model
    writes one; F16 or F32), read with numpy: the header's JSON, then each tensor."""
    import json
    with open(path, "rb") as f:
        hl = int.from_bytes(f.read(8), "little")
        hdr = json.loads(f.read(hl))
        data = f.read()
    dt = {"F16": np.float16, "F32": np.float32}
    sd = {}
    for name, e in hdr.items():
        if not name.startswith("visual."):
            continue
        a, b = e["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype=dt[e["dtype"]]).astype(np.float32)
        key = name[len("visual."):].replace("transformer.resblocks.", "transformer.")
        sd[key] = torch.from_numpy(arr.reshape(e["shape"]))
    conv = sd["conv1.weight"]
    width, patch = conv.shape[0], conv.shape[2]
    g = int(round((sd["positional_embedding"].shape[0] - 1) ** 0.5))
    layers = 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("transformer."))
    mlp = sd["transformer.0.mlp.c_fc.weight"].shape[0]
    embed = sd["proj"].shape[1]
    m = VisionTransformer(g * patch, patch, width, layers, width // 64, mlp, embed)
    m.load_state_dict(sd, strict=True)
    return m, g * patch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("weights")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--check")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("skip: torch sees no GPU")
        return 77
    m, size = load(a.weights)
    m = m.cuda().eval()
    if a.check:
        torch.backends.cuda.matmul.allow_tf32 = False  # a true fp32 reference
        torch.backends.cudnn.allow_tf32 = False
        g = torch.Generator().manual_seed(7)
        px = torch.randn(8, 3, size, size, generator=g)
        with torch.no_grad():
            emb = m(px.cuda()).float().cpu()
        with open(a.check, "wb") as f:
            f.write(np.array([8], dtype=np.int32).tobytes())
            f.write(px.numpy().astype(np.float32).tobytes())
            f.write(emb.numpy().astype(np.float32).tobytes())
    x = torch.randn(a.batch, 3, size, size, device="cuda")
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
        for _ in range(3):
            m(x)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.iters):
            m(x)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
    ips = a.batch * a.iters / (t1 - t0)
    print("torch_version=%s device=%s" % (torch.__version__, torch.cuda.get_device_name(0)))
    print("torch_ms_per_batch=%.3f" % ((t1 - t0) * 1e3 / a.iters))
    print("torch_ips=%.1f" % ips)
    return 0


if __name__ == "__main__":
    sys.exit(main())
