#!/usr/bin/python3
"""rn50_precision.py: the PyTorch side of bench/bench_rn50_precision (run by it), for
docs/models.md's answer to "why do OpenAI's CLIP and OpenCLIP give slightly different
RN50 embeddings for the same image?".

  rn50_precision.py --f16-copy SRC DST
      writes DST: SRC's tensors with OpenAI's convert_weights applied (Conv2d / Linear
      weights and biases, attention in_proj, text_projection and visual.proj in fp16;
      BatchNorms, embeddings and positional tables fp32), i.e. a released checkpoint
  rn50_precision.py --run W32 W16 PIXELS N OUTDIR [--threads 2]
      W32: F32 weights, W16: their --f16-copy; PIXELS: N x 3 x 224 x 224 float32.
      Writes OUTDIR/<case>.f32 (N x 1024 raw image embeddings) for:
        fp64        W32 in float64 (ground truth)
        fp32        W32, PyTorch eager fp32
        w16_fp32    W16 (fp16 weights as released) computed in fp32: what
                    OpenCLIP (precision "fp32", the default) and OpenAI's clip on the
                    CPU (clip.load calls model.float() there) compute
        w16_fp16    the same weights computed as OpenAI's clip computes on a GPU
                    (the model in fp16): every activation stored in fp16, products
                    accumulated in fp32 (cuDNN / cuBLAS tensor cores), BatchNorm and
                    softmax computed in fp32 and stored in fp16. An emulation on the
                    CPU: no GPU here
        w16_tf32    the weights rounded to fp16, computed in fp32 except the
                    convolutions, whose inputs and weights are rounded to TF32 (10-bit
                    mantissa): OpenCLIP fp32 on an Ampere or newer GPU, where PyTorch's
                    default torch.backends.cudnn.allow_tf32 is True (matmuls stay fp32:
                    allow_tf32 for cuBLAS defaults to False). Also an emulation
Only the image tower; the rounding is written out op by op below.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import clip_torch  # noqa: E402

RN50 = dict(embed_dim=1024, image_size=224, vision_width=64, vision_layers=(3, 4, 6, 3),
            text_width=512, text_layers=12)


def f16_copy(src, dst):
    sd = clip_torch.load_safetensors(src)
    out = {}
    for k, v in sd.items():
        lin = (k.endswith(".weight") or k.endswith(".bias")) and (
            ".conv" in k or "downsample.0" in k or "_proj." in k or "c_fc" in k)
        out[k] = v.half() if lin or "in_proj_" in k or k in ("text_projection",
                                                             "visual.proj") else v
    clip_torch.save_safetensors(out, dst, {"description": "RN50-shaped CLIP, fp16 as released"})


def ident(t):
    return t


def to_f16(t):
    return t.half().to(t.dtype)


def to_tf32(t):
    """Round to nearest (ties away) at 10 mantissa bits, as cuDNN's TF32 inputs."""
    i = t.float().contiguous().view(torch.int32)
    i = (i + 0x1000) & ~0x1FFF
    return i.view(torch.float32).to(t.dtype)


def image_forward(v, x, conv_in, store, lin_in):
    """ModifiedResNet.forward with rounding points: conv_in on each convolution's
    input and weight, lin_in on each linear layer's input / weight / bias, store on
    every activation written to memory."""
    def cbn(x, conv, bn):
        y = store(F.conv2d(conv_in(x), conv_in(conv.weight), None, conv.stride, conv.padding))
        y = F.batch_norm(y, bn.running_mean, bn.running_var, bn.weight, bn.bias, False, 0.0,
                         bn.eps)
        return store(y)

    def lin(x, l):
        return store(F.linear(lin_in(x), lin_in(l.weight), lin_in(l.bias)))

    x = store(x)
    x = F.relu(cbn(x, v.conv1, v.bn1))
    x = F.relu(cbn(x, v.conv2, v.bn2))
    x = F.relu(cbn(x, v.conv3, v.bn3))
    x = store(F.avg_pool2d(x, 2))
    for stage in (v.layer1, v.layer2, v.layer3, v.layer4):
        for b in stage:
            out = F.relu(cbn(x, b.conv1, b.bn1))
            out = F.relu(cbn(out, b.conv2, b.bn2))
            if stride(b) > 1:
                out = store(F.avg_pool2d(out, stride(b)))
            out = cbn(out, b.conv3, b.bn3)
            idn = x
            if b.downsample is not None:
                xi = store(F.avg_pool2d(x, stride(b))) if stride(b) > 1 else x
                idn = cbn(xi, b.downsample[1], b.downsample[2])
            x = F.relu(store(out + idn))
    ap = v.attnpool
    t = x.flatten(start_dim=2).permute(2, 0, 1)  # (hw, n, c)
    t = store(torch.cat([store(t.mean(dim=0, keepdim=True)), t], dim=0))
    t = store(t + store(ap.positional_embedding[:, None, :]))
    S, N, C = t.shape
    H = ap.num_heads
    D = C // H
    q = lin(t[:1], ap.q_proj)
    k = lin(t, ap.k_proj)
    val = lin(t, ap.v_proj)
    q = store(q * D ** -0.5).reshape(1, N * H, D).transpose(0, 1)
    k = k.reshape(S, N * H, D).transpose(0, 1)
    val = val.reshape(S, N * H, D).transpose(0, 1)
    s = store(torch.bmm(lin_in(q), lin_in(k).transpose(1, 2)))
    p = store(torch.softmax(s.float(), dim=-1).to(s.dtype))
    o = store(torch.bmm(lin_in(p), lin_in(val)))
    o = o.transpose(0, 1).reshape(1, N, C)
    return lin(o, ap.c_proj).squeeze(0)


def load(path):
    sd = clip_torch.load_safetensors(path)
    m = clip_torch.CLIP(**RN50).eval()
    m.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in sd.items()})
    return m


def stride(b):
    return b.avgpool.kernel_size if isinstance(b.avgpool, torch.nn.AvgPool2d) else 1


def run(args):
    w32, w16, pixels, n, out = args.run
    torch.set_num_threads(args.threads)
    px = torch.from_numpy(np.fromfile(pixels, dtype=np.float32).reshape(n, 3, 224, 224))
    with torch.no_grad():
        m = load(w32)
        ref = m.encode_image(px)
        mine = image_forward(m.visual, px, ident, ident, ident)
        cos = F.cosine_similarity(ref.double(), mine.double()).min().item()
        assert cos > 1 - 1e-9, f"the op-by-op forward differs from the module's: {cos}"
        ref.numpy().tofile(os.path.join(out, "fp32.f32"))
        m.double()
        m.visual.attnpool.positional_embedding.data = \
            m.visual.attnpool.positional_embedding.data.double()
        m.encode_image(px.double()).float().numpy().tofile(os.path.join(out, "fp64.f32"))
        del m
        m = load(w16)  # the released checkpoint's values, widened
        m.encode_image(px).numpy().tofile(os.path.join(out, "w16_fp32.f32"))
        image_forward(m.visual, px, to_f16, to_f16, to_f16).numpy().tofile(
            os.path.join(out, "w16_fp16.f32"))
        image_forward(m.visual, px, to_tf32, ident, ident).numpy().tofile(
            os.path.join(out, "w16_tf32.f32"))
    print("ok", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--f16-copy", nargs=2)
    ap.add_argument("--run", nargs=5, metavar=("W32", "W16", "PIXELS", "N", "OUTDIR"))
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if args.f16_copy:
        f16_copy(*args.f16_copy)
    if args.run:
        args.run[3] = int(args.run[3])
        run(args)


if __name__ == "__main__":
    main()
