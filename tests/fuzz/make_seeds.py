#!/usr/bin/env python3
"""Regenerates the model seeds of the fuzz targets (deterministic; stdlib only):

  corpus/fuzz_safetensors/*   tiny CLIP models in both key namings and dtypes (ViT and
                              OpenAI's ModifiedResNet image towers), plus
                              edge cases of the file format (empty header, metadata,
                              header length past the end, offsets past the end, ...)
  corpus/fuzz_model_config/*  config.json \\0 open_clip_config.json \\0
                              preprocessor_config.json, as fuzz_model_config reads them
  data/clip_w64_f16.safetensors  the fixed model fuzz_model_config loads (width 64, so
                              the number of heads may also come from no config at all)

Run from anywhere: /usr/bin/python3 tests/fuzz/make_seeds.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
DT = {"F32": 4, "F16": 2, "BF16": 2}


def clip_tensors(naming, W, layers=1, patch=2, grid=2, vocab=16, ctx=4, embed=4, mlp=8,
                 vision=True, text=True):
    t = []
    def blk(pre):
        if naming == "hf":
            ln1, ln2, outp, fc, pj = "layer_norm1", "layer_norm2", "self_attn.out_proj", "mlp.fc1", "mlp.fc2"
        else:
            ln1, ln2, outp, fc, pj = "ln_1", "ln_2", "attn.out_proj", "mlp.c_fc", "mlp.c_proj"
        for ln in (ln1, ln2):
            t.append((f"{pre}{ln}.weight", [W]))
            t.append((f"{pre}{ln}.bias", [W]))
        if naming == "hf":
            for q in "qkv":
                t.append((f"{pre}self_attn.{q}_proj.weight", [W, W]))
                t.append((f"{pre}self_attn.{q}_proj.bias", [W]))
        else:
            t.append((f"{pre}attn.in_proj_weight", [3 * W, W]))
            t.append((f"{pre}attn.in_proj_bias", [3 * W]))
        t.append((f"{pre}{outp}.weight", [W, W]))
        t.append((f"{pre}{outp}.bias", [W]))
        t.append((f"{pre}{fc}.weight", [mlp, W]))
        t.append((f"{pre}{fc}.bias", [mlp]))
        t.append((f"{pre}{pj}.weight", [W, mlp]))
        t.append((f"{pre}{pj}.bias", [W]))
    hf = naming == "hf"

    def tower(rows, blocks):
        """rows: (HF name, OpenAI name, shape[, OpenAI shape]), in the naming's order; then
        the tower's layers, each a block under prefix blocks[0] (HF) or blocks[1] (OpenAI)."""
        for r in rows:
            t.append((r[0], r[2]) if hf else (r[1], r[3] if len(r) > 3 else r[2]))
        for i in range(layers):
            blk(f"{blocks[0 if hf else 1]}{i}.")
    if vision:
        tower([("vision_model.embeddings.patch_embedding.weight", "visual.conv1.weight",
                [W, 3, patch, patch]),
               ("vision_model.embeddings.position_embedding.weight", "visual.positional_embedding",
                [grid * grid + 1, W]),
               ("vision_model.embeddings.class_embedding", "visual.class_embedding", [W]),
               ("vision_model.pre_layrnorm.weight", "visual.ln_pre.weight", [W]),
               ("vision_model.pre_layrnorm.bias", "visual.ln_pre.bias", [W]),
               ("vision_model.post_layernorm.weight", "visual.ln_post.weight", [W]),
               ("vision_model.post_layernorm.bias", "visual.ln_post.bias", [W]),
               ("visual_projection.weight", "visual.proj", [embed, W], [W, embed])],
              ("vision_model.encoder.layers.", "visual.transformer.resblocks."))
    if text:
        tower([("text_model.embeddings.token_embedding.weight", "token_embedding.weight",
                [vocab, W]),
               ("text_model.embeddings.position_embedding.weight", "positional_embedding",
                [ctx, W]),
               ("text_model.final_layer_norm.weight", "ln_final.weight", [W]),
               ("text_model.final_layer_norm.bias", "ln_final.bias", [W]),
               ("text_projection.weight", "text_projection", [embed, W], [W, embed])],
              ("text_model.encoder.layers.", "transformer.resblocks."))
    return t


def resnet_tensors(W, grid=2, embed=4, text_w=8, vocab=16, ctx=4):
    """OpenAI's ModifiedResNet naming: a stem of three convs, four stages of one
    Bottleneck each (planes W, 2W, 4W, 8W; expansion 4; a downsample in each), the
    attention pool over grid*grid + 1 positions (width 32W), and the text tower."""
    t = []
    def bn(pre, c):
        for k in ("weight", "bias", "running_mean", "running_var"):
            t.append((f"{pre}.{k}", [c]))
    t += [("visual.conv1.weight", [W // 2, 3, 3, 3]), ("visual.conv2.weight", [W // 2, W // 2, 3, 3]),
          ("visual.conv3.weight", [W, W // 2, 3, 3])]
    bn("visual.bn1", W // 2); bn("visual.bn2", W // 2); bn("visual.bn3", W)
    inp = W
    for i in range(4):
        planes = W << i
        pre = f"visual.layer{i + 1}.0"
        t += [(f"{pre}.conv1.weight", [planes, inp, 1, 1]), (f"{pre}.conv2.weight", [planes, planes, 3, 3]),
              (f"{pre}.conv3.weight", [planes * 4, planes, 1, 1]),
              (f"{pre}.downsample.0.weight", [planes * 4, inp, 1, 1])]
        bn(f"{pre}.bn1", planes); bn(f"{pre}.bn2", planes); bn(f"{pre}.bn3", planes * 4)
        bn(f"{pre}.downsample.1", planes * 4)
        inp = planes * 4
    E = W * 32
    t.append(("visual.attnpool.positional_embedding", [grid * grid + 1, E]))
    for q in "qkv":
        t += [(f"visual.attnpool.{q}_proj.weight", [E, E]), (f"visual.attnpool.{q}_proj.bias", [E])]
    t += [("visual.attnpool.c_proj.weight", [embed, E]), ("visual.attnpool.c_proj.bias", [embed])]
    t += [x for x in clip_tensors("openai", text_w, vision=False, vocab=vocab, ctx=ctx, embed=embed)]
    return t


def safetensors(tensors, dtype="F32", metadata=None, fill=0x3c):
    header, off, data = {}, 0, bytearray()
    for name, shape in tensors:
        n = DT[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        data += bytes([fill]) * n
        off += n
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + bytes(data)


def raw(header_obj, data=b"", hlen=None):
    h = json.dumps(header_obj, separators=(",", ":")).encode() if not isinstance(header_obj, bytes) else header_obj
    return struct.pack("<Q", len(h) if hlen is None else hlen) + h + data


def write(path, b):
    with open(os.path.join(HERE, path), "wb") as f:
        f.write(b)


S = "corpus/fuzz_safetensors/"
write(S + "openai_w8_f32.safetensors", safetensors(clip_tensors("openai", 8), "F32",
                                                   {"description": "tiny seed"}))
write(S + "hf_w8_bf16.safetensors", safetensors(clip_tensors("hf", 8), "BF16"))
write(S + "openai_w8_f16_2layers.safetensors", safetensors(clip_tensors("openai", 8, layers=2), "F16"))
write(S + "hf_text_only_w8.safetensors", safetensors(clip_tensors("hf", 8, vision=False), "F32"))
write(S + "openai_vision_only_w8.safetensors", safetensors(clip_tensors("openai", 8, text=False), "F16"))
write(S + "empty_header.safetensors", raw({}))
write(S + "one_u8.safetensors", raw({"x": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]}}, b"abc"))
write(S + "scalar_and_empty.safetensors",
      raw({"s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]},
           "e": {"dtype": "F16", "shape": [0, 5], "data_offsets": [4, 4]},
           "__metadata__": {"format": "pt"}}, b"\0\0\x80\x3f"))
write(S + "offsets_past_end.safetensors",
      raw({"x": {"dtype": "F32", "shape": [1000], "data_offsets": [0, 4000]}}, b"\0" * 16))
write(S + "header_len_past_end.safetensors", raw({"x": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}},
                                                 b"\0", hlen=1 << 40))
write(S + "overlap.safetensors",
      raw({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
           "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}, b"\0" * 6))
write(S + "dup_keys.safetensors",
      raw(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\0"))
write(S + "huge_shape.safetensors",
      raw({"a": {"dtype": "F32", "shape": [1 << 40, 1 << 40], "data_offsets": [0, 0]}}))
write(S + "openai_rn_w2_f16.safetensors", safetensors(resnet_tensors(2, text_w=64), "F16"))
write(S + "resnet_keys.safetensors", raw({"visual.layer1.0.conv1.weight": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4))

# fixed model for fuzz_model_config: width 64 (default heads = 1), F16, zero-ish weights
write("data/clip_w64_f16.safetensors", safetensors(clip_tensors("openai", 64, mlp=4), "F16"))

C = "corpus/fuzz_model_config/"
def cfg(name, hf=None, oc=None, pp=None):
    parts = [json.dumps(x).encode() if x is not None else b"" for x in (hf, oc, pp)]
    write(C + name, b"\0".join(parts))
cfg("none")
cfg("hf_gelu", hf={"vision_config": {"hidden_act": "gelu", "num_attention_heads": 2},
                   "text_config": {"hidden_act": "gelu", "num_attention_heads": 4}})
cfg("hf_quick", hf={"vision_config": {"hidden_act": "quick_gelu"}, "text_config": {"hidden_act": "quick_gelu"}},
    pp={"image_mean": [0.5, 0.5, 0.5], "image_std": [0.25, 0.25, 0.25], "resample": 2})
cfg("hf_mixed_act", hf={"vision_config": {"hidden_act": "gelu"}, "text_config": {"hidden_act": "quick_gelu"}})
cfg("hf_bad_act", hf={"vision_config": {"hidden_act": "relu"}})
cfg("open_clip", oc={"model_cfg": {"quick_gelu": True, "vision_cfg": {"head_width": 32},
                                   "text_cfg": {"heads": 8}},
                     "preprocess_cfg": {"mean": [0.4, 0.4, 0.4], "std": [0.2, 0.2, 0.2],
                                        "interpolation": "bilinear"}})
cfg("open_clip_flat", oc={"quick_gelu": False, "vision_cfg": {"heads": 3}, "text_cfg": {"head_width": 0}})
cfg("pp_bad", pp={"image_mean": [0, 0], "image_std": [0, 0, 0], "resample": "x"})
cfg("not_objects", hf=[1, 2], oc="str", pp=3)
write(C + "bad_json", b'{"vision_config": {\0{"a":\0nul')
