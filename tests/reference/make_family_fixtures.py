#!/usr/bin/python3
"""make_family_fixtures.py: golden fixtures for the forward-graph features the big
ViT CLIPs need (tests/encoder/test_model_families.c), computed by the independent
PyTorch reference CLIP in scripts/clip_torch.py, in float64.

The small fixtures of make_model_fixtures.py all have head width 16/64, MLP width
4 * width, patch 8 and a 40-pixel input. Real families differ: ViT-H/14 has head
width 80 and ViT-bigG/14 104 (16 heads, not width / 64), bigG's image MLP is 8192 =
int(1664 * 4.9231) wide, the /14 models have patch 14 and ViT-L/14-336 a 336-pixel
input (577 positions). These two models have all of that in small:
  image 56, patch 14 (4 x 4 + 1 = 17 positions), vision width 40, 2 layers, 2 heads
  (head width 20), MLP 196 = int(40 * 4.9231); text width 48, 2 layers, 6 heads (head
  width 8), MLP 160; vocab 300, context 77; embed dim 24.
  fam_openclip/  OpenAI naming, F16, GELU; open_clip_config.json (head_width 20,
                 mlp_ratio 4.9231, text heads 6; no quick_gelu, as LAION's H/bigG)
  fam_hf/        Hugging Face naming, BF16, QuickGELU; config.json (num_attention_heads,
                 intermediate_size, hidden_act) + preprocessor_config.json

clip_torch.CLIP has one head width for both towers and 4x MLPs, so after building it
this script replaces the attention and MLP modules of each block with ones of the
wanted heads / widths (same parameter names: the state_dict keeps OpenAI naming).
Inputs: the existing tests/golden/models/tokens.i32 (read, not rewritten) and a new
fam_pixels.f32 (3 x 3 x 56 x 56 standard normal). Outputs: <name>.text.f32 (6 x 24),
<name>.image.f32 (3 x 24), raw float32 embeddings.

Usage: /usr/bin/python3 tests/reference/make_family_fixtures.py [OUT_DIR]
Deterministic (fixed seeds); touches no other file. See tests/golden/README.md.
"""
import json
import os
import sys
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import clip_torch  # noqa: E402
import make_model_fixtures  # noqa: E402  (its perturb(): the same random gains and biases)

IMAGE, PATCH, VW, VL, VHEADS, VMLP = 56, 14, 40, 2, 2, int(40 * 4.9231)
TW, TL, THEADS, TMLP = 48, 2, 6, 160
VOCAB, CTX, EMBED = 300, 77, 24
MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]


def reshape_blocks(transformer, width, heads, mlp, act):
    for blk in transformer.resblocks:
        blk.attn = nn.MultiheadAttention(width, heads)
        blk.mlp = nn.Sequential(OrderedDict([
            ("c_fc", nn.Linear(width, mlp)),
            ("gelu", clip_torch.QuickGELU() if act == "quick_gelu" else nn.GELU()),
            ("c_proj", nn.Linear(mlp, width)),
        ]))
        nn.init.normal_(blk.attn.in_proj_weight, std=width ** -0.5)
        nn.init.normal_(blk.attn.out_proj.weight, std=width ** -0.5)
        nn.init.normal_(blk.mlp.c_fc.weight, std=(2 * width) ** -0.5)
        nn.init.normal_(blk.mlp.c_proj.weight, std=mlp ** -0.5)


def build(seed, act):
    torch.manual_seed(seed)
    m = clip_torch.CLIP(embed_dim=EMBED, image_size=IMAGE, vision_patch=PATCH, vision_width=VW,
                        vision_layers=VL, context_length=CTX, vocab_size=VOCAB, text_width=TW,
                        text_layers=TL, act=act, head_width=8)
    reshape_blocks(m.visual.transformer, VW, VHEADS, VMLP, act)
    reshape_blocks(m.transformer, TW, THEADS, TMLP, act)
    assert m.visual.transformer.resblocks[0].attn.head_dim == 20
    assert m.transformer.resblocks[0].attn.head_dim == 8
    make_model_fixtures.perturb(m, c_proj_gain=10.0)
    return m.eval()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "golden", "models")
    gold = os.path.join(HERE, "..", "golden", "models")
    tokens = np.fromfile(os.path.join(gold, "tokens.i32"), dtype=np.int32).reshape(-1, CTX)
    rng = np.random.default_rng(5678)
    pixels = rng.standard_normal((3, 3, IMAGE, IMAGE)).astype(np.float32)
    os.makedirs(out, exist_ok=True)
    pixels.tofile(os.path.join(out, "fam_pixels.f32"))

    for name, seed, act, naming, dtype in (
            ("fam_openclip", 11, "gelu", "openai", torch.float16),
            ("fam_hf", 12, "quick_gelu", "hf", torch.bfloat16)):
        m = build(seed, act)
        with torch.no_grad():  # the reference runs on the weights as stored
            for p in m.parameters():
                p.copy_(p.to(dtype).to(torch.float32))
        sd = {k: v.detach().clone() for k, v in m.state_dict().items()}
        if naming == "hf":
            sd = clip_torch.to_hf_state_dict(sd, VL, TL)
        sd = {k: v.to(dtype) for k, v in sd.items()}
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        meta = {"description": f"clipdb test fixture {name}"}
        if naming == "openai":
            clip_torch.save_safetensors(sd, os.path.join(d, "open_clip_model.safetensors"), meta)
            cfg = {"model_cfg": {"embed_dim": EMBED,
                                 "vision_cfg": {"image_size": IMAGE, "layers": VL, "width": VW,
                                                "head_width": VW // VHEADS, "mlp_ratio": 4.9231,
                                                "patch_size": PATCH},
                                 "text_cfg": {"context_length": CTX, "vocab_size": VOCAB,
                                              "width": TW, "heads": THEADS, "layers": TL,
                                              "mlp_ratio": TMLP / TW}},
                   "preprocess_cfg": {"mean": MEAN, "std": STD}}
            with open(os.path.join(d, "open_clip_config.json"), "w") as f:
                json.dump(cfg, f, indent=1)
        else:
            clip_torch.save_safetensors(sd, os.path.join(d, "model.safetensors"), meta)
            cfg = {"architectures": ["CLIPModel"], "model_type": "clip", "projection_dim": EMBED,
                   "vision_config": {"hidden_act": act, "hidden_size": VW,
                                     "intermediate_size": VMLP, "num_attention_heads": VHEADS,
                                     "num_hidden_layers": VL, "image_size": IMAGE,
                                     "patch_size": PATCH},
                   "text_config": {"hidden_act": act, "hidden_size": TW,
                                   "intermediate_size": TMLP, "num_attention_heads": THEADS,
                                   "num_hidden_layers": TL, "vocab_size": VOCAB,
                                   "max_position_embeddings": CTX}}
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(cfg, f, indent=1)
            pp = {"crop_size": IMAGE, "size": IMAGE, "resample": 3, "image_mean": MEAN,
                  "image_std": STD}
            with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
                json.dump(pp, f, indent=1)
        md = m.double()
        with torch.no_grad():
            t = md.encode_text(torch.from_numpy(tokens.astype(np.int64))).numpy()
            i = md.encode_image(torch.from_numpy(pixels).double()).numpy()
        t.astype(np.float32).tofile(os.path.join(out, name + ".text.f32"))
        i.astype(np.float32).tofile(os.path.join(out, name + ".image.f32"))
        # how far the other activation would move them (the test must tell them apart)
        m.float()
        other = "gelu" if act == "quick_gelu" else "quick_gelu"
        for tr in (m.visual.transformer, m.transformer):
            for blk in tr.resblocks:
                blk.mlp.gelu = clip_torch.QuickGELU() if other == "quick_gelu" else nn.GELU()
        with torch.no_grad():
            i2 = m.double().encode_image(torch.from_numpy(pixels).double()).numpy()
        cos = (i * i2).sum(1) / np.linalg.norm(i, axis=1) / np.linalg.norm(i2, axis=1)
        print(f"{name}: text {t.shape} image {i.shape}; with {other} instead: image 1-cos "
              f"min {1 - cos.max():.2g}")


if __name__ == "__main__":
    main()
