#!/usr/bin/python3
"""make_model_fixtures.py: golden fixtures for clipdb's model loading and forward
pass (tests/encoder/test_model.c), computed by the independent PyTorch reference
CLIP in scripts/clip_torch.py.

Writes tests/golden/models/:
  tokens.i32          6 x 77 int32 token ids (sot = vocab-2, eot = vocab-1 = argmax;
                      one row has non-zero junk after its end token)
  pixels.f32          3 x 3 x 40 x 40 float32 "preprocessed" pixels (standard normal)
  <name>/ or <name>.safetensors   the model (folder with configs, or a single file)
  <name>.text.f32     6 x embed_dim raw text embeddings   (reference in float64)
  <name>.image.f32    3 x embed_dim raw image embeddings  (reference in float64)

Models (tiny random-weight ViT CLIPs: image 40, patch 8, vision width 64, 2 layers;
text 2 layers, vocab 300, context 77; embed dim 48):
  openai_qgelu/   OpenAI naming, F32, QuickGELU; open_clip_config.json (quick_gelu,
                  head_width 16 -> 4 vision heads, text heads 2, mean/std)
  hf_gelu/        Hugging Face naming, F32, exact GELU; config.json (hidden_act,
                  num_attention_heads), preprocessor_config.json
  openai_f16.safetensors  single file, OpenAI naming, F16, text width 64, no config
                  (QuickGELU and heads = width/64 assumed)
  hf_bf16/        Hugging Face naming, BF16, quick_gelu via config.json

For F16/BF16 the reference runs on the weights as stored (rounded, then widened).
Usage: /usr/bin/python3 tests/reference/make_model_fixtures.py [OUT_DIR]
Deterministic (fixed seeds); see tests/golden/README.md.
"""
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import clip_torch  # noqa: E402

IMAGE, PATCH, VW, VL, TL, VOCAB, CTX, EMBED = 40, 8, 64, 2, 2, 300, 77, 48
MEAN, STD = [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]


def make_tokens(rng):
    sot, eot = VOCAB - 2, VOCAB - 1
    rows = []
    for n, junk in ((0, False), (3, False), (10, False), (75, False), (20, False), (5, True)):
        ids = [sot] + list(rng.integers(1, VOCAB - 2, size=n)) + [eot]
        if junk:
            ids += list(rng.integers(1, VOCAB - 2, size=CTX - len(ids)))
        ids += [0] * (CTX - len(ids))
        rows.append(ids)
    return np.array(rows, dtype=np.int32)


def build(seed, text_width, head_width, act):
    torch.manual_seed(seed)
    m = clip_torch.CLIP(embed_dim=EMBED, image_size=IMAGE, vision_patch=PATCH, vision_width=VW,
                        vision_layers=VL, context_length=CTX, vocab_size=VOCAB,
                        text_width=text_width, text_layers=TL, act=act, head_width=head_width)
    perturb(m)
    return m.eval()


def perturb(m, c_proj_gain=20.0, skip_prefix=None):
    """Random LayerNorm gains/biases and MHA/MLP biases too (defaults are 1/0, which
    would hide a swapped gamma/beta or a dropped bias), and an MLP that dominates the
    residual stream, so that QuickGELU vs GELU (which differ by at most ~0.02) moves
    the embeddings measurably (cosine ~0.9999 between the two) and a test can tell them
    apart. Parameters named with skip_prefix are left alone. Draws from torch's RNG in
    parameter order (the other fixture makers use it too: their fixtures depend on it)."""
    with torch.no_grad():
        for name, p in m.named_parameters():
            if skip_prefix and name.startswith(skip_prefix):
                continue
            if name.endswith("bias") or "ln" in name:
                p.add_(0.1 * torch.randn_like(p))
            if "mlp.c_fc.weight" in name:
                p.mul_(2.0)
            if "mlp.c_proj.weight" in name:
                p.mul_(c_proj_gain)


def round_to(m, dtype):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.to(dtype).to(torch.float32))


def reference(m, tokens, pixels):
    md = m.double()
    with torch.no_grad():
        t = md.encode_text(torch.from_numpy(tokens.astype(np.int64)))
        i = md.encode_image(torch.from_numpy(pixels).double())
    m.float()
    return t.numpy().astype(np.float32), i.numpy().astype(np.float32)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "golden", "models")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(1234)
    tokens = make_tokens(rng)
    pixels = rng.standard_normal((3, 3, IMAGE, IMAGE)).astype(np.float32)
    tokens.tofile(os.path.join(out, "tokens.i32"))
    pixels.tofile(os.path.join(out, "pixels.f32"))

    specs = [
        # name, seed, text width, head width, act, naming, dtype, single file
        ("openai_qgelu", 1, 32, 16, "quick_gelu", "openai", torch.float32, False),
        ("hf_gelu", 2, 32, 16, "gelu", "hf", torch.float32, False),
        ("openai_f16", 3, 64, 64, "quick_gelu", "openai", torch.float16, True),
        ("hf_bf16", 4, 32, 16, "quick_gelu", "hf", torch.bfloat16, False),
    ]
    for name, seed, tw, hw, act, naming, dtype, single in specs:
        m = build(seed, tw, hw, act)
        if dtype != torch.float32:
            round_to(m, dtype)
        sd = {k: v.detach().clone() for k, v in m.state_dict().items()}
        if naming == "hf":
            sd = clip_torch.to_hf_state_dict(sd, VL, TL)
        sd = {k: v.to(dtype) for k, v in sd.items()}
        meta = {"description": f"clipdb test fixture {name}"}
        if single:
            clip_torch.save_safetensors(sd, os.path.join(out, name + ".safetensors"), meta)
        else:
            d = os.path.join(out, name)
            os.makedirs(d, exist_ok=True)
            clip_torch.save_safetensors(sd, os.path.join(d, "model.safetensors"), meta)
            if naming == "openai":
                cfg = {"model_cfg": {"embed_dim": EMBED, "quick_gelu": act == "quick_gelu",
                                     "vision_cfg": {"image_size": IMAGE, "layers": VL,
                                                    "width": VW, "patch_size": PATCH,
                                                    "head_width": hw},
                                     "text_cfg": {"context_length": CTX, "vocab_size": VOCAB,
                                                  "width": tw, "heads": tw // hw, "layers": TL}},
                       "preprocess_cfg": {"mean": MEAN, "std": STD}}
                with open(os.path.join(d, "open_clip_config.json"), "w") as f:
                    json.dump(cfg, f, indent=1)
            else:
                cfg = {"architectures": ["CLIPModel"], "projection_dim": EMBED,
                       "vision_config": {"hidden_act": act, "hidden_size": VW,
                                         "num_attention_heads": VW // hw,
                                         "num_hidden_layers": VL, "image_size": IMAGE,
                                         "patch_size": PATCH},
                       "text_config": {"hidden_act": act, "hidden_size": tw,
                                       "num_attention_heads": tw // hw,
                                       "num_hidden_layers": TL, "vocab_size": VOCAB,
                                       "max_position_embeddings": CTX}}
                with open(os.path.join(d, "config.json"), "w") as f:
                    json.dump(cfg, f, indent=1)
                pp = {"crop_size": IMAGE, "size": IMAGE, "resample": 3,
                      "image_mean": MEAN, "image_std": STD}
                with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
                    json.dump(pp, f, indent=1)
        t, i = reference(m, tokens, pixels)
        t.tofile(os.path.join(out, name + ".text.f32"))
        i.tofile(os.path.join(out, name + ".image.f32"))
        # fp32 PyTorch vs fp64 reference, for the README's provenance line
        with torch.no_grad():
            t32 = m.encode_text(torch.from_numpy(tokens.astype(np.int64))).numpy()
        cos = (t32 * t).sum(1) / np.linalg.norm(t32, axis=1) / np.linalg.norm(t, axis=1)
        print(f"{name}: text {t.shape} image {i.shape}; fp32-vs-fp64 text cos min {cos.min():.9f}")


if __name__ == "__main__":
    main()
