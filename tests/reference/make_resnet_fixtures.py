#!/usr/bin/python3
"""make_resnet_fixtures.py: golden fixtures for clipdb's ModifiedResNet image tower
(tests/encoder/test_resnet.c), computed by the independent PyTorch reference in
scripts/clip_torch.py (ModifiedResNet, AttentionPool2d, Bottleneck), in float64.

Three tiny ResNet CLIPs of RN50's structure (3-convolution stem, anti-aliased
Bottlenecks with stride-2 average pools, attention pooling; OpenAI naming), with
BatchNorm running statistics calibrated on random images (so every layer's output
is O(1), as in a trained network, rather than vanishing or exploding) and then
perturbed, random BatchNorm gains/shifts and biases (a dropped or swapped one
shows), the attention pool's q_proj scaled so that its scores have a standard
deviation of 1.5 (neither uniform nor one-hot: the query token matters), and the
text MLPs scaled up so that the text activation is measurable:
  rn_qgelu/   image 64 (2x2 grid), width 8, blocks 1-2-1-1 (attention pool 256 wide,
              4 heads of 64), text width 64, F32, open_clip_config.json with
              quick_gelu (OpenCLIP's RN50-quickgelu), num_batches_tracked I64 buffers
  rn_gelu/    image 96 (3x3 grid), width 6, blocks 2-1-2-1 (pool 192 wide),
              head_width 32 in open_clip_config.json (6 heads, not 192 / 64), text
              width 64 (2 heads of 32), F32, no quick_gelu (OpenCLIP's RN50: GELU)
  rn_openai_f16.safetensors  one file as OpenAI's released checkpoints converted:
              convolutions, linear layers and projections F16, BatchNorms and
              positional embeddings F32; image 64, width 8, blocks 1-1-1-1, text
              width 64; no config (QuickGELU and 64-wide heads assumed)
For the F16 file the reference runs on the stored (rounded) weights.

Inputs: tests/golden/models/tokens.i32 (read, not rewritten) and new
rn_pixels64.f32 / rn_pixels96.f32 (3 x 3 x S x S standard normal). Outputs:
<name>.text.f32 (6 x embed), <name>.image.f32 (3 x embed), raw float32.

Usage: /usr/bin/python3 tests/reference/make_resnet_fixtures.py [OUT_DIR]
Deterministic (fixed seeds); touches no other file. See tests/golden/README.md.
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import clip_torch  # noqa: E402
import make_model_fixtures  # noqa: E402  (its perturb(): the same random gains and biases)

VOCAB, CTX, TL = 300, 77, 2
MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]

# name, seed, image, width, blocks, text width, head width, act, dtype, config
SPECS = [
    ("rn_qgelu", 21, 64, 8, (1, 2, 1, 1), 64, 64, "quick_gelu", "f32", "openclip"),
    ("rn_gelu", 22, 96, 6, (2, 1, 2, 1), 64, 32, "gelu", "f32", "openclip"),
    ("rn_openai_f16", 23, 64, 8, (1, 1, 1, 1), 64, 64, "quick_gelu", "openai_f16", None),
]


def calibrate(visual, size, seed):
    """BatchNorm running statistics = the batch statistics of random images
    (cumulative average), then perturbed so that folding them is exercised."""
    g = torch.Generator().manual_seed(seed)
    for mod in visual.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.reset_running_stats()
            mod.momentum = None
    visual.train()
    with torch.no_grad():
        for _ in range(4):
            visual(torch.randn(8, 3, size, size, generator=g))
    visual.eval()
    with torch.no_grad():
        for mod in visual.modules():
            if isinstance(mod, nn.BatchNorm2d):
                n = mod.num_features
                mod.running_var.mul_(torch.empty(n).uniform_(0.8, 1.25, generator=g))
                mod.running_mean.add_(0.1 * torch.randn(n, generator=g) *
                                      mod.running_var.sqrt())
                mod.weight.copy_(torch.empty(n).uniform_(0.5, 1.5, generator=g))
                mod.bias.copy_(0.2 * torch.randn(n, generator=g))


def build(seed, image, width, blocks, text_width, head_width, act):
    torch.manual_seed(seed)
    m = clip_torch.CLIP(embed_dim=48, image_size=image, vision_width=width,
                        vision_layers=blocks, context_length=CTX, vocab_size=VOCAB,
                        text_width=text_width, text_layers=TL, act=act, head_width=head_width)
    assert m.visual.attnpool.num_heads == width * 32 // head_width
    make_model_fixtures.perturb(m, skip_prefix="visual.")  # the text tower as the ViT fixtures
    with torch.no_grad():
        ap = m.visual.attnpool
        for lin in (ap.q_proj, ap.k_proj, ap.v_proj, ap.c_proj):
            lin.bias.normal_(0.0, 0.1)
    calibrate(m.visual, image, seed + 1000)
    temper_attention(m.visual, image, seed + 2000)
    return m.eval()


def temper_attention(visual, size, seed, target=1.5):
    """Scale q_proj so that the attention pool's scores have a standard deviation of
    `target` on random images: the residual stream grows to O(100) through the
    blocks, and with raw random projections the softmax is one-hot, so which token
    queries (and the softmax itself) would not show in the embeddings."""
    g = torch.Generator().manual_seed(seed)
    ap = visual.attnpool
    with torch.no_grad():
        x = torch.randn(8, 3, size, size, generator=g)
        v = visual
        x = F.relu(v.bn1(v.conv1(x)))
        x = F.relu(v.bn2(v.conv2(x)))
        x = v.avgpool(F.relu(v.bn3(v.conv3(x))))
        x = v.layer4(v.layer3(v.layer2(v.layer1(x))))
        t = x.flatten(2).permute(2, 0, 1)
        t = torch.cat([t.mean(0, keepdim=True), t]) + ap.positional_embedding[:, None, :]
        S, N, C = t.shape
        H = ap.num_heads
        q = ap.q_proj(t[:1]).reshape(1, N, H, C // H)
        k = ap.k_proj(t).reshape(S, N, H, C // H)
        scores = torch.einsum("qnhd,snhd->nhs", q, k) / (C // H) ** 0.5
        f = target / scores.std().item()
        ap.q_proj.weight.mul_(f)
        ap.q_proj.bias.mul_(f)


def openai_f16(sd):
    """OpenAI's convert_weights: Conv2d / Linear weights and biases, attention
    in_proj and the two projections in fp16; BatchNorms, embeddings and positional
    tables stay fp32."""
    out = {}
    for k, v in sd.items():
        conv_or_linear = (k.endswith(".weight") or k.endswith(".bias")) and (
            ".conv" in k or "downsample.0" in k or "_proj." in k or "c_fc" in k)
        if conv_or_linear or "in_proj_" in k or k in ("text_projection", "visual.proj"):
            out[k] = v.half()
        else:
            out[k] = v
    return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "golden", "models")
    gold = os.path.join(HERE, "..", "golden", "models")
    tokens = np.fromfile(os.path.join(gold, "tokens.i32"), dtype=np.int32).reshape(-1, CTX)
    os.makedirs(out, exist_ok=True)
    pixels = {}
    for size, seed in ((64, 64064), (96, 96096)):
        rng = np.random.default_rng(seed)
        pixels[size] = rng.standard_normal((3, 3, size, size)).astype(np.float32)
        pixels[size].tofile(os.path.join(out, f"rn_pixels{size}.f32"))

    for name, seed, image, width, blocks, tw, hw, act, dtype, cfg in SPECS:
        m = build(seed, image, width, blocks, tw, hw, act)
        sd = {k: v.detach().clone() for k, v in m.state_dict().items()}
        if dtype == "openai_f16":
            sd = openai_f16(sd)
            sd = {k: v for k, v in sd.items() if not k.endswith("num_batches_tracked")}
            with torch.no_grad():  # the reference runs on the weights as stored
                m.load_state_dict({k: v.float() if v.is_floating_point() else v
                                   for k, v in sd.items()}, strict=False)
        meta = {"description": f"clipdb test fixture {name}"}
        if cfg is None:
            clip_torch.save_safetensors(sd, os.path.join(out, name + ".safetensors"), meta)
        else:
            d = os.path.join(out, name)
            os.makedirs(d, exist_ok=True)
            clip_torch.save_safetensors(sd, os.path.join(d, "open_clip_model.safetensors"), meta)
            vcfg = {"image_size": image, "layers": list(blocks), "width": width,
                    "patch_size": None}
            if hw != 64:
                vcfg["head_width"] = hw
            mc = {"embed_dim": 48, "vision_cfg": vcfg,
                  "text_cfg": {"context_length": CTX, "vocab_size": VOCAB, "width": tw,
                               "heads": tw // hw, "layers": TL}}
            if act == "quick_gelu":
                mc["quick_gelu"] = True
            with open(os.path.join(d, "open_clip_config.json"), "w") as f:
                json.dump({"model_cfg": mc, "preprocess_cfg": {"mean": MEAN, "std": STD}}, f,
                          indent=1)
        px = torch.from_numpy(pixels[image])
        md = m.double()
        with torch.no_grad():
            t = md.encode_text(torch.from_numpy(tokens.astype(np.int64))).numpy()
            i = md.encode_image(px.double()).numpy()
        t.astype(np.float32).tofile(os.path.join(out, name + ".text.f32"))
        i.astype(np.float32).tofile(os.path.join(out, name + ".image.f32"))
        m.float()
        with torch.no_grad():
            i32 = m.encode_image(px).numpy()
        cos32 = (i32 * i).sum(1) / np.linalg.norm(i32, axis=1) / np.linalg.norm(i, axis=1)
        # how far the other text activation moves the text embeddings
        other = "gelu" if act == "quick_gelu" else "quick_gelu"
        for blk in m.transformer.resblocks:
            blk.mlp.gelu = clip_torch.QuickGELU() if other == "quick_gelu" else nn.GELU()
        with torch.no_grad():
            t2 = m.double().encode_text(torch.from_numpy(tokens.astype(np.int64))).numpy()
        cos = (t * t2).sum(1) / np.linalg.norm(t, axis=1) / np.linalg.norm(t2, axis=1)
        print(f"{name}: image {i.shape} (|e| {np.linalg.norm(i, axis=1).mean():.3g}), text "
              f"{t.shape}; fp32-vs-fp64 image 1-cos max {1 - cos32.min():.2g}; with {other} "
              f"text 1-cos min {1 - cos.max():.2g}")


if __name__ == "__main__":
    main()
