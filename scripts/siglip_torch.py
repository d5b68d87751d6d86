#!/usr/bin/python3
"""siglip_torch.py: plain-PyTorch reference forwards of SigLIP / SigLIP2 FixRes in the two
layouts people download, for clipdb's fixtures (scripts/make_siglip_fixtures.py). Neither
transformers, timm nor open_clip is a Debian package (bookworm), so the forwards are
re-written here, module for module and with the same parameter names, from:

  Hugging Face layout: transformers src/transformers/models/siglip/modeling_siglip.py
    (commit 00b2065): SiglipVisionEmbeddings, SiglipTextEmbeddings, SiglipAttention (the
    "eager" implementation), SiglipMLP, SiglipEncoderLayer, SiglipTextTransformer,
    SiglipVisionTransformer, SiglipMultiheadAttentionPoolingHead, SiglipModel;
    activations from transformers' ACT2FN ("gelu_pytorch_tanh" = GELU(approximate='tanh')).
  OpenCLIP layout: open_clip's CustomTextCLIP with a TimmModel image tower
    (timm_pool "map", timm_proj "none") and its TextTransformer (no_causal_mask, pool_type
    "last", proj_bias): timm's timm/models/vision_transformer.py VisionTransformer
    (class_token=False, global_pool='map'; Block, Attention, Mlp; LayerNorm eps 1e-6) and
    timm/layers/attention_pool.py AttentionPoolLatent (huggingface/pytorch-image-models
    aa4b585); open_clip's transformer.py ResidualAttentionBlock / TextTransformer.

State dict keys equal the real checkpoints' (vision_model.*, text_model.*, logit_scale,
logit_bias; visual.trunk.*, text.*). Also save_safetensors (clip_torch's writer).
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clip_torch import save_safetensors  # noqa: E402,F401


def act_fn(name):
    if name == "gelu_pytorch_tanh":
        return nn.GELU(approximate="tanh")
    if name == "gelu":
        return nn.GELU()
    raise ValueError(name)


# ---- Hugging Face: modeling_siglip.py ------------------------------------------------

class SiglipVisionEmbeddings(nn.Module):
    def __init__(self, width, image_size, patch):
        super().__init__()
        self.patch_embedding = nn.Conv2d(3, width, kernel_size=patch, stride=patch, padding="valid")
        self.num_positions = (image_size // patch) ** 2
        self.position_embedding = nn.Embedding(self.num_positions, width)

    def forward(self, pixel_values):
        patch_embeds = self.patch_embedding(pixel_values)
        embeddings = patch_embeds.flatten(2).transpose(1, 2)
        ids = torch.arange(self.num_positions).unsqueeze(0)
        return embeddings + self.position_embedding(ids)


class SiglipTextEmbeddings(nn.Module):
    def __init__(self, vocab, width, ctx):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, width)
        self.position_embedding = nn.Embedding(ctx, width)

    def forward(self, input_ids):
        ids = torch.arange(input_ids.shape[-1]).unsqueeze(0)
        return self.token_embedding(input_ids) + self.position_embedding(ids)


class SiglipAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.num_heads, self.head_dim = heads, width // heads
        self.scale = self.head_dim ** -0.5
        self.k_proj = nn.Linear(width, width)
        self.v_proj = nn.Linear(width, width)
        self.q_proj = nn.Linear(width, width)
        self.out_proj = nn.Linear(width, width)

    def forward(self, hidden_states):
        b, q_len, w = hidden_states.size()
        q = self.q_proj(hidden_states).view(b, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(b, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(b, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) * self.scale
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=attn_weights.dtype)
        attn_output = torch.matmul(attn_weights, v).transpose(1, 2).contiguous()
        return self.out_proj(attn_output.reshape(b, q_len, w))


class SiglipMLP(nn.Module):
    def __init__(self, width, mlp, act):
        super().__init__()
        self.activation_fn = act_fn(act)
        self.fc1 = nn.Linear(width, mlp)
        self.fc2 = nn.Linear(mlp, width)

    def forward(self, x):
        return self.fc2(self.activation_fn(self.fc1(x)))


class SiglipEncoderLayer(nn.Module):
    def __init__(self, width, heads, mlp, act, eps):
        super().__init__()
        self.self_attn = SiglipAttention(width, heads)
        self.layer_norm1 = nn.LayerNorm(width, eps=eps)
        self.mlp = SiglipMLP(width, mlp, act)
        self.layer_norm2 = nn.LayerNorm(width, eps=eps)

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = residual + self.self_attn(self.layer_norm1(hidden_states))
        residual = hidden_states
        return residual + self.mlp(self.layer_norm2(hidden_states))


class Blocks(nn.Module):
    """Blocks run in turn, kept under the attribute the checkpoint's keys name (Hugging
    Face's "layers", OpenCLIP's "resblocks")."""
    def __init__(self, attr, blocks):
        super().__init__()
        self.attr = attr
        setattr(self, attr, nn.ModuleList(blocks))

    def forward(self, x):
        for block in getattr(self, self.attr):
            x = block(x)
        return x


class SiglipEncoder(Blocks):
    def __init__(self, width, layers, heads, mlp, act, eps):
        super().__init__("layers", [SiglipEncoderLayer(width, heads, mlp, act, eps)
                                    for _ in range(layers)])


class SiglipMultiheadAttentionPoolingHead(nn.Module):
    def __init__(self, width, heads, mlp, act, eps):
        super().__init__()
        self.probe = nn.Parameter(torch.randn(1, 1, width))
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.layernorm = nn.LayerNorm(width, eps=eps)
        self.mlp = SiglipMLP(width, mlp, act)

    def forward(self, hidden_state):
        probe = self.probe.repeat(hidden_state.shape[0], 1, 1)
        hidden_state = self.attention(probe, hidden_state, hidden_state)[0]
        residual = hidden_state
        hidden_state = residual + self.mlp(self.layernorm(hidden_state))
        return hidden_state[:, 0]


class SiglipVisionTransformer(nn.Module):
    def __init__(self, image_size, patch, width, layers, heads, mlp, act, eps):
        super().__init__()
        self.embeddings = SiglipVisionEmbeddings(width, image_size, patch)
        self.encoder = SiglipEncoder(width, layers, heads, mlp, act, eps)
        self.post_layernorm = nn.LayerNorm(width, eps=eps)
        self.head = SiglipMultiheadAttentionPoolingHead(width, heads, mlp, act, eps)

    def forward(self, pixel_values):
        x = self.post_layernorm(self.encoder(self.embeddings(pixel_values)))
        return self.head(x)


class SiglipTextTransformer(nn.Module):
    def __init__(self, vocab, ctx, width, layers, heads, mlp, act, eps, proj):
        super().__init__()
        self.embeddings = SiglipTextEmbeddings(vocab, width, ctx)
        self.encoder = SiglipEncoder(width, layers, heads, mlp, act, eps)
        self.final_layer_norm = nn.LayerNorm(width, eps=eps)
        self.head = nn.Linear(width, proj)

    def forward(self, input_ids):
        x = self.final_layer_norm(self.encoder(self.embeddings(input_ids)))
        return self.head(x[:, -1, :])  # "sticky" EOS: the last position


class SiglipModel(nn.Module):
    """get_image_features / get_text_features of transformers' SiglipModel (no mask)."""

    def __init__(self, v, t, act, eps):
        super().__init__()
        self.text_model = SiglipTextTransformer(t["vocab"], t["ctx"], t["width"], t["layers"],
                                                t["heads"], t["mlp"], act, eps, v["width"])
        self.vision_model = SiglipVisionTransformer(v["image"], v["patch"], v["width"],
                                                    v["layers"], v["heads"], v["mlp"], act, eps)
        self.logit_scale = nn.Parameter(torch.randn(1))
        self.logit_bias = nn.Parameter(torch.randn(1))

    def encode_image(self, pixels):
        return self.vision_model(pixels)

    def encode_text(self, ids):
        return self.text_model(ids)


def hf_config(v, t, act, eps):
    """config.json of a Hugging Face SiglipModel with these towers (as google/siglip-*)."""
    return {"architectures": ["SiglipModel"], "model_type": "siglip",
            "text_config": {"model_type": "siglip_text_model", "hidden_act": act,
                            "hidden_size": t["width"], "intermediate_size": t["mlp"],
                            "num_attention_heads": t["heads"], "num_hidden_layers": t["layers"],
                            "vocab_size": t["vocab"], "max_position_embeddings": t["ctx"],
                            "layer_norm_eps": eps, "projection_size": v["width"]},
            "vision_config": {"model_type": "siglip_vision_model", "hidden_act": act,
                              "hidden_size": v["width"], "intermediate_size": v["mlp"],
                              "num_attention_heads": v["heads"], "num_hidden_layers": v["layers"],
                              "image_size": v["image"], "patch_size": v["patch"],
                              "layer_norm_eps": eps}}


def hf_preprocessor(size):
    """preprocessor_config.json of SiglipImageProcessor: bicubic squash to size x size,
    rescale by 1/255, mean = std = 0.5."""
    return {"do_normalize": True, "do_rescale": True, "do_resize": True,
            "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
            "image_processor_type": "SiglipImageProcessor", "processor_class": "SiglipProcessor",
            "resample": 3, "rescale_factor": 0.00392156862745098,
            "size": {"height": size, "width": size}}


# ---- OpenCLIP + timm ---------------------------------------------------------------------

class TimmMlp(nn.Module):  # timm.layers.Mlp
    def __init__(self, width, hidden, act):
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.act = act
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class TimmAttention(nn.Module):  # timm.models.vision_transformer.Attention (fused_attn off)
    def __init__(self, dim, heads):
        super().__init__()
        self.num_heads, self.head_dim = heads, dim // heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q = q * self.scale
        attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        x = attn @ v
        return self.proj(x.transpose(1, 2).reshape(b, n, c))


class TimmBlock(nn.Module):
    def __init__(self, dim, heads, mlp, act):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = TimmAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = TimmMlp(dim, mlp, act)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class AttentionPoolLatent(nn.Module):  # timm.layers.attention_pool (fused_attn off)
    def __init__(self, dim, heads, mlp, act):
        super().__init__()
        self.num_heads, self.head_dim = heads, dim // heads
        self.scale = self.head_dim ** -0.5
        self.latent = nn.Parameter(torch.zeros(1, 1, dim))
        self.q = nn.Linear(dim, dim, bias=True)
        self.kv = nn.Linear(dim, dim * 2, bias=True)
        self.proj = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = TimmMlp(dim, mlp, act)

    def forward(self, x):
        b, n, c = x.shape
        q_latent = self.latent.expand(b, -1, -1)
        q = self.q(q_latent).reshape(b, 1, self.num_heads, self.head_dim).transpose(1, 2)
        kv = self.kv(x).reshape(b, n, 2, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        k, v = kv.unbind(0)
        q = q * self.scale
        attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(b, 1, c)
        x = self.proj(x)
        x = x + self.mlp(self.norm(x))
        return x[:, 0]


class PatchEmbed(nn.Module):
    def __init__(self, patch, dim):
        super().__init__()
        self.proj = nn.Conv2d(3, dim, kernel_size=patch, stride=patch, bias=True)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class TimmSiglipViT(nn.Module):  # VisionTransformer(class_token=False, global_pool='map')
    def __init__(self, image_size, patch, width, layers, heads, mlp, act):
        super().__init__()
        self.patch_embed = PatchEmbed(patch, width)
        self.pos_embed = nn.Parameter(torch.randn(1, (image_size // patch) ** 2, width) * .02)
        self.blocks = nn.Sequential(*[TimmBlock(width, heads, mlp, act) for _ in range(layers)])
        self.norm = nn.LayerNorm(width, eps=1e-6)
        self.attn_pool = AttentionPoolLatent(width, heads, mlp, act)

    def forward(self, x):
        x = self.patch_embed(x) + self.pos_embed  # _pos_embed, no prefix tokens
        x = self.norm(self.blocks(x))
        return self.attn_pool(x)  # then fc_norm, head: Identity


class TimmModel(nn.Module):  # open_clip.timm_model.TimmModel, proj "none": trunk only
    def __init__(self, **kw):
        super().__init__()
        self.trunk = TimmSiglipViT(**kw)

    def forward(self, x):
        return self.trunk(x)


class ResidualAttentionBlock(nn.Module):  # open_clip.transformer
    def __init__(self, width, heads, mlp, act, eps):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width, eps=eps)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(width, eps=eps)
        self.mlp = nn.Sequential()
        self.mlp.add_module("c_fc", nn.Linear(width, mlp))
        self.mlp.add_module("gelu", act)
        self.mlp.add_module("c_proj", nn.Linear(mlp, width))

    def forward(self, x):
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False, attn_mask=None)[0]
        return x + self.mlp(self.ln_2(x))


class Transformer(Blocks):  # open_clip.transformer
    def __init__(self, width, layers, heads, mlp, act, eps):
        super().__init__("resblocks", [ResidualAttentionBlock(width, heads, mlp, act, eps)
                                       for _ in range(layers)])


class TextTransformer(nn.Module):  # no_causal_mask, pool_type "last", proj_bias
    def __init__(self, vocab, ctx, width, layers, heads, mlp, act, eps, out):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, width)
        self.positional_embedding = nn.Parameter(torch.empty(ctx, width))
        self.transformer = Transformer(width, layers, heads, mlp, act, eps)
        self.ln_final = nn.LayerNorm(width, eps=eps)
        self.text_projection = nn.Linear(width, out, bias=True)

    def forward(self, text):
        x = self.token_embedding(text) + self.positional_embedding[:text.shape[1]]
        x = self.ln_final(self.transformer(x))
        return self.text_projection(x[:, -1])  # text_global_pool(x, pool_type='last')


class CustomTextCLIP(nn.Module):
    def __init__(self, v, t, vision_act, text_act, text_eps):
        super().__init__()
        self.visual = TimmModel(image_size=v["image"], patch=v["patch"], width=v["width"],
                                layers=v["layers"], heads=v["heads"], mlp=v["mlp"], act=vision_act)
        self.text = TextTransformer(t["vocab"], t["ctx"], t["width"], t["layers"], t["heads"],
                                    t["mlp"], text_act, text_eps, v["width"])
        self.logit_scale = nn.Parameter(torch.ones([]) * math.log(10.0))
        self.logit_bias = nn.Parameter(torch.ones([]) * -10.0)

    def encode_image(self, pixels):
        return self.visual(pixels)

    def encode_text(self, ids):
        return self.text(ids)
