"""clip_torch.py: a plain PyTorch CLIP (ViT image tower + causal text tower), the
reference clipdb's C encoder is tested against and the model the bundled default is
trained as.

The module structure and parameter names follow OpenAI CLIP's model.py (and so
OpenCLIP's state_dict naming): visual.conv1, visual.class_embedding,
visual.positional_embedding, visual.ln_pre, visual.transformer.resblocks.N.{ln_1,
attn.in_proj_weight, attn.in_proj_bias, attn.out_proj, ln_2, mlp.c_fc, mlp.c_proj},
visual.ln_post, visual.proj; token_embedding, positional_embedding,
transformer.resblocks.N..., ln_final, text_projection, logit_scale.

Also: to_hf_state_dict() (Hugging Face CLIPModel naming) and save_safetensors() /
load_safetensors() (the format is a JSON header + raw little-endian tensors, written
here directly since Debian has no python3-safetensors).

Only for fixtures and training; clipdb never needs Python.
"""
import json
import struct
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, width, heads, act, attn_mask=None):
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads)
        self.ln_1 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(OrderedDict([
            ("c_fc", nn.Linear(width, width * 4)),
            ("gelu", QuickGELU() if act == "quick_gelu" else nn.GELU()),
            ("c_proj", nn.Linear(width * 4, width)),
        ]))
        self.ln_2 = nn.LayerNorm(width)
        self.attn_mask = attn_mask

    def forward(self, x):  # x: (seq, batch, width)
        mask = None
        if self.attn_mask is not None:
            n = x.shape[0]
            mask = self.attn_mask[:n, :n].to(dtype=x.dtype, device=x.device)
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, need_weights=False, attn_mask=mask)[0]
        x = x + self.mlp(self.ln_2(x))
        return x


class Transformer(nn.Module):
    def __init__(self, width, layers, heads, act, attn_mask=None):
        super().__init__()
        self.resblocks = nn.Sequential(
            *[ResidualAttentionBlock(width, heads, act, attn_mask) for _ in range(layers)])

    def forward(self, x):
        return self.resblocks(x)


class VisionTransformer(nn.Module):
    def __init__(self, image_size, patch, width, layers, heads, embed_dim, act):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, kernel_size=patch, stride=patch, bias=False)
        scale = width ** -0.5
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(
            scale * torch.randn((image_size // patch) ** 2 + 1, width))
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = Transformer(width, layers, heads, act)
        self.ln_post = nn.LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, embed_dim))

    def forward(self, x):  # x: (batch, 3, H, W), normalized
        x = self.conv1(x)
        x = x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)
        cls = self.class_embedding.to(x.dtype) + torch.zeros(
            x.shape[0], 1, x.shape[-1], dtype=x.dtype, device=x.device)
        x = torch.cat([cls, x], dim=1) + self.positional_embedding.to(x.dtype)
        x = self.ln_pre(x).permute(1, 0, 2)
        x = self.transformer(x).permute(1, 0, 2)
        return self.ln_post(x[:, 0, :]) @ self.proj


class CLIP(nn.Module):
    def __init__(self, embed_dim=512, image_size=224, vision_patch=32, vision_width=768,
                 vision_layers=12, context_length=77, vocab_size=49408, text_width=512,
                 text_layers=12, act="quick_gelu", head_width=64):
        super().__init__()
        self.context_length = context_length
        self.act = act
        self.visual = VisionTransformer(image_size, vision_patch, vision_width, vision_layers,
                                        vision_width // head_width, embed_dim, act)
        mask = torch.full((context_length, context_length), float("-inf")).triu_(1)
        self.transformer = Transformer(text_width, text_layers, text_width // head_width, act,
                                       attn_mask=mask)
        self.token_embedding = nn.Embedding(vocab_size, text_width)
        self.positional_embedding = nn.Parameter(torch.empty(context_length, text_width))
        self.ln_final = nn.LayerNorm(text_width)
        self.text_projection = nn.Parameter(torch.empty(text_width, embed_dim))
        self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))
        self.init_parameters(text_width, text_layers)

    def init_parameters(self, width, layers):
        # as OpenAI CLIP's initialize_parameters
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.positional_embedding, std=0.01)
        proj_std = (width ** -0.5) * ((2 * layers) ** -0.5)
        attn_std = width ** -0.5
        fc_std = (2 * width) ** -0.5
        for block in self.transformer.resblocks:
            nn.init.normal_(block.attn.in_proj_weight, std=attn_std)
            nn.init.normal_(block.attn.out_proj.weight, std=proj_std)
            nn.init.normal_(block.mlp.c_fc.weight, std=fc_std)
            nn.init.normal_(block.mlp.c_proj.weight, std=proj_std)
        nn.init.normal_(self.text_projection, std=width ** -0.5)

    def encode_image(self, pixels):
        return self.visual(pixels)

    def encode_text(self, ids):
        """ids: (batch, context) int64, padded with 0. Pools at the first end token,
        which is the highest id (argmax), as OpenAI CLIP does."""
        x = self.token_embedding(ids) + self.positional_embedding
        x = self.transformer(x.permute(1, 0, 2)).permute(1, 0, 2)
        x = self.ln_final(x)
        return x[torch.arange(x.shape[0]), ids.argmax(dim=-1)] @ self.text_projection


# ---- naming --------------------------------------------------------------------

def to_hf_state_dict(sd, vision_layers, text_layers):
    """OpenAI-named state_dict -> Hugging Face CLIPModel naming (q/k/v split,
    projections stored as Linear weights, i.e. transposed)."""
    out = {}

    def block(src, dst):
        w, b = sd[src + "attn.in_proj_weight"], sd[src + "attn.in_proj_bias"]
        for i, n in enumerate(("q", "k", "v")):
            d = w.shape[0] // 3
            out[dst + f"self_attn.{n}_proj.weight"] = w[i * d:(i + 1) * d]
            out[dst + f"self_attn.{n}_proj.bias"] = b[i * d:(i + 1) * d]
        out[dst + "self_attn.out_proj.weight"] = sd[src + "attn.out_proj.weight"]
        out[dst + "self_attn.out_proj.bias"] = sd[src + "attn.out_proj.bias"]
        for a, b2 in (("ln_1", "layer_norm1"), ("ln_2", "layer_norm2")):
            out[dst + b2 + ".weight"] = sd[src + a + ".weight"]
            out[dst + b2 + ".bias"] = sd[src + a + ".bias"]
        for a, b2 in (("mlp.c_fc", "mlp.fc1"), ("mlp.c_proj", "mlp.fc2")):
            out[dst + b2 + ".weight"] = sd[src + a + ".weight"]
            out[dst + b2 + ".bias"] = sd[src + a + ".bias"]

    v = "vision_model."
    out[v + "embeddings.patch_embedding.weight"] = sd["visual.conv1.weight"]
    out[v + "embeddings.class_embedding"] = sd["visual.class_embedding"]
    out[v + "embeddings.position_embedding.weight"] = sd["visual.positional_embedding"]
    out[v + "pre_layrnorm.weight"] = sd["visual.ln_pre.weight"]
    out[v + "pre_layrnorm.bias"] = sd["visual.ln_pre.bias"]
    out[v + "post_layernorm.weight"] = sd["visual.ln_post.weight"]
    out[v + "post_layernorm.bias"] = sd["visual.ln_post.bias"]
    for i in range(vision_layers):
        block(f"visual.transformer.resblocks.{i}.", v + f"encoder.layers.{i}.")
    out["visual_projection.weight"] = sd["visual.proj"].t().contiguous()
    t = "text_model."
    out[t + "embeddings.token_embedding.weight"] = sd["token_embedding.weight"]
    out[t + "embeddings.position_embedding.weight"] = sd["positional_embedding"]
    out[t + "final_layer_norm.weight"] = sd["ln_final.weight"]
    out[t + "final_layer_norm.bias"] = sd["ln_final.bias"]
    for i in range(text_layers):
        block(f"transformer.resblocks.{i}.", t + f"encoder.layers.{i}.")
    out["text_projection.weight"] = sd["text_projection"].t().contiguous()
    out["logit_scale"] = sd["logit_scale"]
    return out


# ---- safetensors -----------------------------------------------------------------

_DT = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
       torch.int64: "I64", torch.int32: "I32"}
_DT_INV = {v: k for k, v in _DT.items()}


def save_safetensors(tensors, path, metadata=None):
    """tensors: name -> torch.Tensor. Writes the safetensors format: u64 header
    length, JSON header (dtype, shape, data_offsets), then the raw bytes."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        if t.dtype == torch.bfloat16:
            raw = t.view(torch.int16).numpy().tobytes()
        else:
            raw = t.numpy().tobytes()
        header[name] = {"dtype": _DT[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        dt = _DT_INV[info["dtype"]]
        if dt == torch.bfloat16:
            t = torch.frombuffer(bytearray(data[a:b]), dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.frombuffer(bytearray(data[a:b]), dtype=dt)
        out[name] = t.reshape(info["shape"]).clone()
    return out
