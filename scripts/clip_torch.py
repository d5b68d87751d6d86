"""clip_torch.py: a plain PyTorch CLIP (ViT or ModifiedResNet image tower + causal
text tower), the reference clipdb's C encoder is tested against and the model the
bundled default is trained as.

The module structure and parameter names follow OpenAI CLIP's model.py (and so
OpenCLIP's state_dict naming): visual.conv1, visual.class_embedding,
visual.positional_embedding, visual.ln_pre, visual.transformer.resblocks.N.{ln_1,
attn.in_proj_weight, attn.in_proj_bias, attn.out_proj, ln_2, mlp.c_fc, mlp.c_proj},
visual.ln_post, visual.proj; token_embedding, positional_embedding,
transformer.resblocks.N..., ln_final, text_projection, logit_scale.

The ResNet image tower (RN50, RN101, RN50x4, RN50x16, RN50x64 when vision_layers is
a tuple of four block counts) is OpenAI's ModifiedResNet, written out here from its
description: visual.{conv1,bn1,conv2,bn2,conv3,bn3} (3-convolution stem, ReLU, 2x2
average pool), visual.layerS.B.{conv1,bn1,conv2,bn2,conv3,bn3,downsample.0,
downsample.1} (anti-aliased Bottlenecks: the stride is an average pool after the 3x3
convolution, and in the shortcut before its 1x1 convolution), visual.attnpool.
{positional_embedding,q_proj,k_proj,v_proj,c_proj} (attention pooling: the spatial
mean prepended as a query token, multi-head attention, that token's output).

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


class Bottleneck(nn.Module):
    """ModifiedResNet's block: 1x1 -> 3x3 -> (avg pool when strided) -> 1x1 (x4
    channels), BatchNorm + ReLU after each convolution (the last ReLU after the
    residual sum). The shortcut, when the shape changes: avg pool (identity at stride
    1), 1x1 convolution, BatchNorm. Keys downsample.0 / downsample.1 as OpenAI's
    ("-1" is the parameterless pool)."""
    expansion = 4

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.avgpool = nn.AvgPool2d(stride) if stride > 1 else nn.Identity()
        self.conv3 = nn.Conv2d(planes, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.downsample = None
        if stride > 1 or inplanes != planes * self.expansion:
            self.downsample = nn.Sequential(OrderedDict([
                ("-1", nn.AvgPool2d(stride)),
                ("0", nn.Conv2d(inplanes, planes * self.expansion, 1, stride=1, bias=False)),
                ("1", nn.BatchNorm2d(planes * self.expansion)),
            ]))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(self.avgpool(out)))
        identity = self.downsample(x) if self.downsample is not None else x
        return F.relu(out + identity)


class AttentionPool2d(nn.Module):
    """The mean of the grid's tokens is prepended, positional embeddings added, and
    multi-head attention (q/k/v/c_proj, scaled dot product) run with that token as
    the only query; its output (c_proj's width: the embedding) is the result."""

    def __init__(self, grid, width, heads, output_dim):
        super().__init__()
        self.positional_embedding = nn.Parameter(torch.randn(grid * grid + 1, width) /
                                                 width ** 0.5)
        self.k_proj = nn.Linear(width, width)
        self.q_proj = nn.Linear(width, width)
        self.v_proj = nn.Linear(width, width)
        self.c_proj = nn.Linear(width, output_dim)
        self.num_heads = heads

    def forward(self, x):  # (batch, width, grid, grid)
        x = x.flatten(start_dim=2).permute(2, 0, 1)  # (grid^2, batch, width)
        x = torch.cat([x.mean(dim=0, keepdim=True), x], dim=0)
        x = x + self.positional_embedding[:, None, :].to(x.dtype)
        x, _ = F.multi_head_attention_forward(
            query=x[:1], key=x, value=x, embed_dim_to_check=x.shape[-1],
            num_heads=self.num_heads, q_proj_weight=self.q_proj.weight,
            k_proj_weight=self.k_proj.weight, v_proj_weight=self.v_proj.weight,
            in_proj_weight=None,
            in_proj_bias=torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]),
            bias_k=None, bias_v=None, add_zero_attn=False, dropout_p=0.0,
            out_proj_weight=self.c_proj.weight, out_proj_bias=self.c_proj.bias,
            use_separate_proj_weight=True, training=False, need_weights=False)
        return x.squeeze(0)


class ModifiedResNet(nn.Module):
    """OpenAI CLIP's ResNet image tower. layers: blocks per stage (RN50: 3, 4, 6, 3);
    width: the stem / first stage width (64 for RN50); image_size: a multiple of 32
    (the attention pool sees an image_size / 32 square grid)."""

    def __init__(self, layers, output_dim, heads, image_size=224, width=64):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width // 2, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width // 2)
        self.conv2 = nn.Conv2d(width // 2, width // 2, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width // 2)
        self.conv3 = nn.Conv2d(width // 2, width, 3, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(width)
        self.avgpool = nn.AvgPool2d(2)
        self._inplanes = width
        self.layer1 = self._make_layer(width, layers[0])
        self.layer2 = self._make_layer(width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(width * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(width * 8, layers[3], stride=2)
        self.attnpool = AttentionPool2d(image_size // 32, width * 32, heads, output_dim)

    def _make_layer(self, planes, blocks, stride=1):
        out = [Bottleneck(self._inplanes, planes, stride)]
        self._inplanes = planes * Bottleneck.expansion
        out += [Bottleneck(self._inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*out)

    def forward(self, x):  # (batch, 3, H, W), normalized
        x = x.to(self.conv1.weight.dtype)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = self.avgpool(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.attnpool(x)


class CLIP(nn.Module):
    """vision_layers: an int for a ViT image tower, a tuple of four block counts for a
    ModifiedResNet one (then vision_width is its base width, vision_patch is unused
    and the image tower has vision_width * 32 / head_width heads, as OpenAI's)."""

    def __init__(self, embed_dim=512, image_size=224, vision_patch=32, vision_width=768,
                 vision_layers=12, context_length=77, vocab_size=49408, text_width=512,
                 text_layers=12, act="quick_gelu", head_width=64):
        super().__init__()
        self.context_length = context_length
        self.act = act
        if isinstance(vision_layers, (tuple, list)):
            self.visual = ModifiedResNet(vision_layers, embed_dim,
                                         vision_width * 32 // head_width, image_size,
                                         vision_width)
        else:
            self.visual = VisionTransformer(image_size, vision_patch, vision_width,
                                            vision_layers, vision_width // head_width,
                                            embed_dim, act)
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
        if isinstance(self.visual, ModifiedResNet):
            ap = self.visual.attnpool
            std = ap.c_proj.in_features ** -0.5
            for lin in (ap.q_proj, ap.k_proj, ap.v_proj, ap.c_proj):
                nn.init.normal_(lin.weight, std=std)
            for stage in (self.visual.layer1, self.visual.layer2, self.visual.layer3,
                          self.visual.layer4):
                for name, p in stage.named_parameters():
                    if name.endswith("bn3.weight"):
                        nn.init.zeros_(p)
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

    renames = {  # Hugging Face name: OpenAI name, for the tensors that only change name
        "vision_model.embeddings.patch_embedding.weight": "visual.conv1.weight",
        "vision_model.embeddings.class_embedding": "visual.class_embedding",
        "vision_model.embeddings.position_embedding.weight": "visual.positional_embedding",
        "vision_model.pre_layrnorm.weight": "visual.ln_pre.weight",
        "vision_model.pre_layrnorm.bias": "visual.ln_pre.bias",
        "vision_model.post_layernorm.weight": "visual.ln_post.weight",
        "vision_model.post_layernorm.bias": "visual.ln_post.bias",
        "text_model.embeddings.token_embedding.weight": "token_embedding.weight",
        "text_model.embeddings.position_embedding.weight": "positional_embedding",
        "text_model.final_layer_norm.weight": "ln_final.weight",
        "text_model.final_layer_norm.bias": "ln_final.bias",
        "logit_scale": "logit_scale",
    }
    out.update((hf, sd[oa]) for hf, oa in renames.items())
    for i in range(vision_layers):
        block(f"visual.transformer.resblocks.{i}.", f"vision_model.encoder.layers.{i}.")
    for i in range(text_layers):
        block(f"transformer.resblocks.{i}.", f"text_model.encoder.layers.{i}.")
    out["visual_projection.weight"] = sd["visual.proj"].t().contiguous()
    out["text_projection.weight"] = sd["text_projection"].t().contiguous()
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
