#!/usr/bin/env python3
"""bench_gpu_torch.py: the PyTorch baseline for bench/bench_gpu.c.

Builds OpenAI CLIP's VisionTransformer (the reference model.py structure: conv1,
class + positional embedding, ln_pre, pre-LN residual blocks with
nn.MultiheadAttention and QuickGELU MLPs, ln_post on the class token, proj) with
the weights bench_gpu --dump-weights wrote, and times the image tower at batch 256
under torch.autocast(float16) on the GPU, inputs already on the device.

usage: bench_gpu_torch.py WEIGHTS [--batch 256] [--iters 10] [--check FILE]
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
    raw = np.fromfile(path, dtype=np.float32)
    hdr = raw[:8].view(np.int32)
    if hdr[0] != 0x43444257:
        sys.exit("bench_gpu_torch: %s is not a bench_gpu weight file" % path)
    size, patch, width, layers, heads, mlp, embed = (int(v) for v in hdr[1:])
    m = VisionTransformer(size, patch, width, layers, heads, mlp, embed)
    off = [8]

    def take(n, shape):
        a = raw[off[0]:off[0] + n]
        off[0] += n
        return torch.from_numpy(a.copy()).reshape(shape)

    g, w, k = size // patch, width, 3 * patch * patch
    with torch.no_grad():
        m.conv1.weight.copy_(take(w * k, (w, 3, patch, patch)))
        m.class_embedding.copy_(take(w, (w,)))
        m.positional_embedding.copy_(take((g * g + 1) * w, (g * g + 1, w)))
        m.ln_pre.weight.copy_(take(w, (w,)))
        m.ln_pre.bias.copy_(take(w, (w,)))
        for b in m.transformer:
            b.ln_1.weight.copy_(take(w, (w,)))
            b.ln_1.bias.copy_(take(w, (w,)))
            b.attn.in_proj_weight.copy_(take(3 * w * w, (3 * w, w)))
            b.attn.in_proj_bias.copy_(take(3 * w, (3 * w,)))
            b.attn.out_proj.weight.copy_(take(w * w, (w, w)))
            b.attn.out_proj.bias.copy_(take(w, (w,)))
            b.ln_2.weight.copy_(take(w, (w,)))
            b.ln_2.bias.copy_(take(w, (w,)))
            b.mlp.c_fc.weight.copy_(take(mlp * w, (mlp, w)))
            b.mlp.c_fc.bias.copy_(take(mlp, (mlp,)))
            b.mlp.c_proj.weight.copy_(take(w * mlp, (w, mlp)))
            b.mlp.c_proj.bias.copy_(take(w, (w,)))
        m.ln_post.weight.copy_(take(w, (w,)))
        m.ln_post.bias.copy_(take(w, (w,)))
        m.proj.copy_(take(embed * w, (embed, w)).t())
    if off[0] != raw.size:
        sys.exit("bench_gpu_torch: %d trailing floats in %s" % (raw.size - off[0], path))
    return m, size


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
