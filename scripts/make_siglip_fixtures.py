#!/usr/bin/python3
"""make_siglip_fixtures.py: golden fixtures for clipdb's SigLIP / SigLIP2 FixRes support
(tests/encoder/test_siglip.c), computed by the plain-PyTorch reference forwards of
scripts/siglip_torch.py in float64 on the weights as stored, and PIL 9.4 for the images.

Writes (see tests/golden/README.md, "models/siglip_*" and "siglip_preprocess/"):
  tests/golden/models/siglip_hf/       Hugging Face layout: config.json (SiglipModel,
      gelu_pytorch_tanh, layer_norm_eps 1e-6), preprocessor_config.json (squash 48x48,
      bicubic, rescale 1/255, mean = std = 0.5), the weights F32 in two shards
      (model-0000N-of-00002.safetensors + model.safetensors.index.json)
  tests/golden/models/siglip_oc/       OpenCLIP hub layout: open_clip_config.json
      (timm vit_base_patch16_siglip_224's exact GELU image tower, a text tower with
      act_kwargs approximate tanh as SigLIP2's, norm_kwargs eps 1e-6, preprocess_cfg
      squash / bilinear) + open_clip_model.safetensors in F16
  tests/golden/models/siglip_{tokens.i32, pixels.f32, photo.png}
  tests/golden/models/siglip_{hf,oc}.{text,image,photo}.f32: raw embeddings
  tests/golden/siglip_preprocess/: PNG inputs and PIL's squash-resized RGB bytes

Sizes: image 48, patch 8 (36 tokens, no class token), vision width 64, 2 layers, 4 heads,
MLP 176; text vocab 300, context 16, width 48, 2 layers, 3 heads, MLP 96, head to 64.
Every LayerNorm gain/bias and every bias is perturbed away from its initial value; the MLP
biases are shifted (inputs around -2) and outputs scaled up so that exact vs tanh GELU
moves the embeddings visibly (printed).

Usage: /usr/bin/python3 scripts/make_siglip_fixtures.py   (from the repository root)
Deterministic: fixed seeds; a rerun on the same torch / PIL gives identical bytes.
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import siglip_torch as st  # noqa: E402

ROOT = os.path.join(HERE, "..")
GOLD = os.path.join(ROOT, "tests", "golden", "models")
PRE = os.path.join(ROOT, "tests", "golden", "siglip_preprocess")
V = dict(image=48, patch=8, width=64, layers=2, heads=4, mlp=176)
T = dict(vocab=300, ctx=16, width=48, layers=2, heads=3, mlp=96)
N_TEXTS = 5


def perturb(m):
    torch.manual_seed(1234)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("bias") or "norm" in name or ".ln_" in name:
                p.add_(0.1 * torch.randn_like(p))
            # the MLPs' inputs mostly in x ~ -3..-1, where tanh GELU differs from exact
            # GELU by up to 10 %, and their outputs large: the activation shows
            if name.endswith(("fc1.bias", "c_fc.bias")):
                p.sub_(2.0)
            if name.endswith(("fc2.weight", "c_proj.weight")):
                p.mul_(6.0)
            if "probe" in name or "latent" in name:
                p.normal_(0, 1)
            if name.endswith(("position_embedding.weight", "pos_embed", "positional_embedding")):
                p.normal_(0, 0.5)


def tokens():
    rng = np.random.default_rng(4242)
    ids = np.ones((N_TEXTS, T["ctx"]), dtype=np.int32)  # pad id 1 (SigLIP's pad is 1)
    for i, n in enumerate((3, 16, 0, 9, 15)):
        ids[i, :n] = rng.integers(2, T["vocab"], n)
        if 0 < n < T["ctx"]:
            ids[i, n - 1] = 1 if i == 3 else ids[i, n - 1]
    ids[4, :] = rng.integers(0, T["vocab"], T["ctx"])  # every id, up to the last position
    return ids


def photo():
    """A 70x45 RGB PNG: smooth gradients plus noise (deterministic)."""
    rng = np.random.default_rng(99)
    y, x = np.mgrid[0:45, 0:70]
    img = np.stack([x * 3.5, y * 5.0, (x + y) * 2.2], -1) + rng.normal(0, 20, (45, 70, 3))
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")


def hf_pixels(img, size, resample, factor, mean, std):
    """SiglipImageProcessor (slow, PIL): resize to (size, size), rescale in float64 then
    float32, normalize in float32, CHW."""
    a = np.asarray(img.convert("RGB").resize((size, size), resample=resample))
    a = (a.astype(np.float64) * factor).astype(np.float32)
    a = (a - np.array(mean, np.float32)) / np.array(std, np.float32)
    return a.transpose(2, 0, 1).copy()


def oc_pixels(img, size, resample, mean, std):
    """OpenCLIP's squash transform: Resize((size, size)) on the PIL image, convert RGB,
    ToTensor (float32 v / 255), Normalize."""
    a = np.asarray(img.resize((size, size), resample=resample).convert("RGB"))
    t = torch.from_numpy(a.copy()).permute(2, 0, 1).float().div(255)
    m = torch.tensor(mean, dtype=torch.float32)[:, None, None]
    s = torch.tensor(std, dtype=torch.float32)[:, None, None]
    return t.sub(m).div(s).numpy()


def cos_min(a, b):
    c = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return c.min()


def run(m, ids, px, ph):
    md = m.double().eval()
    with torch.no_grad():
        t = md.encode_text(torch.from_numpy(ids.astype(np.int64))).numpy()
        i = md.encode_image(torch.from_numpy(px).double()).numpy()
        p = md.encode_image(torch.from_numpy(ph[None]).double()).numpy()
    return t, i, p


def swap_act(m):
    for mod in m.modules():
        for name, ch in list(mod.named_children()):
            if isinstance(ch, nn.GELU):
                setattr(mod, name, nn.GELU(approximate="none" if ch.approximate == "tanh" else "tanh"))


def write_shards(sd, d, meta):
    names = sorted(sd)
    half = len(names) // 2
    index = {"metadata": {"total_size": sum(v.numel() * v.element_size() for v in sd.values())},
             "weight_map": {}}
    for k, part in enumerate((names[:half], names[half:])):
        fn = f"model-{k + 1:05d}-of-00002.safetensors"
        st.save_safetensors({n: sd[n] for n in part}, os.path.join(d, fn), meta)
        for n in part:
            index["weight_map"][n] = fn
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=1)


def make_hf(ids, px, img):
    torch.manual_seed(21)
    m = st.SiglipModel(V, T, "gelu_pytorch_tanh", 1e-6)
    perturb(m)
    with torch.no_grad():
        m.logit_scale.fill_(float(np.log(10.0)) + 0.25)
        m.logit_bias.fill_(-10.0 + 0.5)
    d = os.path.join(GOLD, "siglip_hf")
    os.makedirs(d, exist_ok=True)
    sd = {k: v.detach().clone().float() for k, v in m.state_dict().items()}
    write_shards(sd, d, {"format": "pt", "description": "clipdb test fixture siglip_hf"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(st.hf_config(V, T, "gelu_pytorch_tanh", 1e-6), f, indent=1)
    with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
        json.dump(st.hf_preprocessor(V["image"]), f, indent=1)
    ph = hf_pixels(img, V["image"], Image.BICUBIC, 0.00392156862745098, [0.5] * 3, [0.5] * 3)
    return m, ph


def make_oc(ids, px, img):
    torch.manual_seed(22)
    m = st.CustomTextCLIP(V, T, nn.GELU(), nn.GELU(approximate="tanh"), 1e-6)
    for mod in m.modules():  # nn.Embedding / empty Parameters: defined values first
        if isinstance(mod, st.TextTransformer):
            nn.init.normal_(mod.positional_embedding, std=0.01)
    perturb(m)
    with torch.no_grad():  # the reference runs on the weights as stored (F16)
        for p in m.parameters():
            p.copy_(p.half().float())
    d = os.path.join(GOLD, "siglip_oc")
    os.makedirs(d, exist_ok=True)
    sd = {k: v.detach().clone().half() for k, v in m.state_dict().items()}
    st.save_safetensors(sd, os.path.join(d, "open_clip_model.safetensors"),
                        {"description": "clipdb test fixture siglip_oc"})
    cfg = {"model_cfg": {"embed_dim": V["width"], "init_logit_bias": -10, "custom_text": True,
                         "vision_cfg": {"image_size": V["image"],
                                        "timm_model_name": "vit_base_patch16_siglip_224",
                                        "timm_model_pretrained": False, "timm_pool": "map",
                                        "timm_proj": "none",
                                        "heads": V["heads"]},
                         "text_cfg": {"context_length": T["ctx"], "vocab_size": T["vocab"],
                                      "hf_tokenizer_name": "", "tokenizer_kwargs": {"clean": "canonicalize"},
                                      "width": T["width"], "heads": T["heads"], "layers": T["layers"],
                                      "no_causal_mask": True, "proj_bias": True, "pool_type": "last",
                                      "norm_kwargs": {"eps": 1e-6},
                                      "act_kwargs": {"approximate": "tanh"}}},
           "preprocess_cfg": {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5],
                              "interpolation": "bilinear", "resize_mode": "squash"}}
    with open(os.path.join(d, "open_clip_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    ph = oc_pixels(img, V["image"], Image.BILINEAR, [0.5] * 3, [0.5] * 3)
    return m, ph


def make_preprocess():
    """PIL's squash resize (OpenCLIP order: resize in the image's mode, then RGB)."""
    os.makedirs(PRE, exist_ok=True)
    rng = np.random.default_rng(7)
    imgs = {
        "rgb_61x37": Image.fromarray(rng.integers(0, 256, (37, 61, 3), dtype=np.uint8), "RGB"),
        "rgb_48x30": Image.fromarray(rng.integers(0, 256, (30, 48, 3), dtype=np.uint8), "RGB"),
        "rgb_200x150": photo().resize((200, 150), Image.NEAREST),
        "gray_100x100": Image.fromarray(rng.integers(0, 256, (100, 100), dtype=np.uint8), "L"),
        "rgba_20x90": Image.fromarray(rng.integers(0, 256, (90, 20, 4), dtype=np.uint8), "RGBA"),
        "pal_33x47": Image.fromarray(rng.integers(0, 256, (47, 33, 3), dtype=np.uint8),
                                     "RGB").quantize(16),
    }
    lines = []
    for name, im in imgs.items():
        im.save(os.path.join(PRE, name + ".png"))
        for size in (48, 64):
            for interp, res in ((0, Image.BICUBIC), (1, Image.BILINEAR)):
                if im.mode == "P":
                    res = Image.NEAREST  # PIL forces NEAREST for "P"
                a = np.asarray(im.resize((size, size), resample=res).convert("RGB"))
                out = f"{name}_s{size}_{'bicubic' if interp == 0 else 'bilinear'}.u8"
                a.astype(np.uint8).tofile(os.path.join(PRE, out))
                lines.append(f"{name}.png {size} {interp} {out}")
    with open(os.path.join(PRE, "manifest.txt"), "w") as f:
        f.write("# input size interp(0 bicubic, 1 bilinear) expected_rgb_bytes (HxWx3)\n")
        f.write("\n".join(lines) + "\n")
    # the two float paths on one image: HF's rescale and torchvision's ToTensor
    im = imgs["rgb_61x37"]
    hf_pixels(im, 48, Image.BICUBIC, 0.00392156862745098, [0.5] * 3, [0.5] * 3).tofile(
        os.path.join(PRE, "rgb_61x37_s48_hf.f32"))
    oc_pixels(im, 48, Image.BICUBIC, [0.5] * 3, [0.5] * 3).tofile(
        os.path.join(PRE, "rgb_61x37_s48_oc.f32"))


def main():
    os.makedirs(GOLD, exist_ok=True)
    ids = tokens()
    ids.tofile(os.path.join(GOLD, "siglip_tokens.i32"))
    px = np.random.default_rng(5).standard_normal((3, 3, V["image"], V["image"])).astype(np.float32)
    px.tofile(os.path.join(GOLD, "siglip_pixels.f32"))
    img = photo()
    img.save(os.path.join(GOLD, "siglip_photo.png"))
    for name, mk in (("siglip_hf", make_hf), ("siglip_oc", make_oc)):
        m, ph = mk(ids, px, img)
        t, i, p = run(m, ids, px, ph)
        for what, a in (("text", t), ("image", i), ("photo", p)):
            a.astype(np.float32).tofile(os.path.join(GOLD, f"{name}.{what}.f32"))
        # sanity: PyTorch fp32 against the fp64 reference
        mf = m.float()
        with torch.no_grad():
            t32 = mf.encode_text(torch.from_numpy(ids.astype(np.int64))).numpy()
            i32 = mf.encode_image(torch.from_numpy(px)).numpy()
        # how far the other GELU moves them (the C test must tell them apart)
        swap_act(m)
        t2, i2, _ = run(m, ids, px, ph)
        print(f"{name}: fp32 vs fp64 1-cos text {1 - cos_min(t, t32):.2g} image "
              f"{1 - cos_min(i, i32):.2g}; other GELU: 1-cos text {1 - cos_min(t, t2):.2g} "
              f"image {1 - cos_min(i, i2):.2g}; logit_scale {float(m.logit_scale):.6g} "
              f"bias {float(m.logit_bias):.6g}")
    make_preprocess()


if __name__ == "__main__":
    main()
