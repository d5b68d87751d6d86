#!/usr/bin/python3
"""Reference ids for test_tok_spm: python3-sentencepiece plus the text steps of the
reference code, transcribed here (not from clipdb) so that the C pipeline is checked
against an independent implementation.

Usage: tok_spm_oracle.py PIPELINE MODEL CONTEXT CASES OUT [GOLDEN]
  PIPELINE  siglip_hf | gemma_hf | openclip
  MODEL     the .model file (tokenizer_config.json beside it is read as transformers
            would for gemma_hf: add_bos_token / add_eos_token)
  CASES     one case per line, the text's UTF-8 bytes in hex (any bytes: the C test
            sends invalid UTF-8 too); for openclip, a golden case id instead
  OUT       one line per case: CONTEXT ids, space-separated
  GOLDEN    openclip only: tests/golden/tokenizer/tokenizer_golden.json

The references, step by step:

siglip_hf: transformers' SiglipTokenizer (models/siglip/tokenization_siglip.py)
  - get_spm_processor: the model proto with normalizer_spec.add_dummy_prefix = False
    merged in (done here with the protobuf module, as transformers does);
  - tokenize: SPIECE_UNDERLINE + text.replace(SPIECE_UNDERLINE, " "), lowercased by
    PreTrainedTokenizer.tokenize (do_lower_case=True);
  - _tokenize: canonicalize_text (remove string.punctuation, re.sub(r"\\s+", " "),
    strip), then sp.encode(unk_token + text) minus the first len(sp.encode(unk_token))
    pieces;
  - build_inputs_with_special_tokens appends </s>; truncation=True keeps
    max_length - 1 text ids; padding="max_length" with pad_token "</s>".
gemma_hf: GemmaTokenizerFast as SigLIP2 repositories configure it: the text as given,
  [<bos> if add_bos_token] + ids + [<eos> if add_eos_token] (tokenizer_config.json;
  without one, SigLIP2's: no bos, eos), truncated to max_length minus those, padded
  with <pad>.
openclip: open_clip/tokenizer.py HFTokenizer(clean='canonicalize'): canonicalize_text(
  basic_clean(text)) (basic_clean = ftfy.fix_text, html.unescape twice, strip;
  canonicalize_text = replace("_", " "), remove string.punctuation, lower,
  " ".join(split()), strip), then the model's own normalizer, </s> appended,
  truncation to max_length - 1, padded with </s> (T5TokenizerFast over spiece.model,
  pad_token "</s>" as big_vision). ftfy is not in Debian, so the basic_clean step is
  taken from the golden file's "cleaned" field, computed by the real ftfy 6.3.1:
  cleaned = lower(strip(regex.sub(r"\\s+", " ", basic_clean(t)))), and
  canonicalize_text(cleaned) == canonicalize_text(basic_clean(t)) because lower is
  idempotent and commutes with removing ASCII punctuation, and every `regex` \\s is a
  str.isspace() character, so the extra collapse and strip change nothing that
  canonicalize_text's own collapse and strip would not.

Input bytes become text the way clipdb documents for invalid UTF-8 (the references
take a str, which cannot hold invalid bytes): each byte that does not start a
well-formed sequence becomes U+FFFD.
"""
import json
import os
import re
import string
import sys

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as model_pb2

SPIECE_UNDERLINE = "\u2581"
PUNCT = str.maketrans("", "", string.punctuation)


def decode_per_byte(b):
    out, i = [], 0
    while i < len(b):
        lead = b[i]
        k = 1 if lead < 0x80 else 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF \
            else 4 if 0xF0 <= lead <= 0xF4 else 0
        if k:
            try:
                out.append(b[i:i + k].decode("utf-8"))
                i += k
                continue
            except UnicodeDecodeError:
                pass
        out.append("\ufffd")
        i += 1
    return "".join(out)


def load(path, no_dummy_prefix):
    sp = spm.SentencePieceProcessor()
    data = open(path, "rb").read()
    if no_dummy_prefix:  # SiglipTokenizer.get_spm_processor
        model = model_pb2.ModelProto.FromString(data)
        ns = model_pb2.NormalizerSpec()
        ns.add_dummy_prefix = False
        model.normalizer_spec.MergeFrom(ns)
        data = model.SerializeToString()
    sp.LoadFromSerializedProto(data)
    return sp


def pad_to(ids, ctx, pad):
    return ids + [pad] * (ctx - len(ids))


def siglip_hf(sp, text, ctx):
    text = (SPIECE_UNDERLINE + text.replace(SPIECE_UNDERLINE, " ")).lower()
    text = text.translate(PUNCT)
    text = re.sub(r"\s+", " ", text).strip()
    unk_len = len(sp.encode("<unk>", out_type=str))
    pieces = sp.encode("<unk>" + text, out_type=str)
    pieces = pieces[unk_len:] if len(pieces) >= unk_len else pieces
    ids = [sp.piece_to_id(p) for p in pieces][:ctx - 1] + [sp.piece_to_id("</s>")]
    return pad_to(ids, ctx, sp.piece_to_id("</s>"))


def gemma_hf(sp, text, ctx, add_bos, add_eos):
    ids = sp.encode(text)[:ctx - add_bos - add_eos]
    ids = ([sp.piece_to_id("<bos>")] if add_bos else []) + ids
    ids += [sp.piece_to_id("<eos>")] if add_eos else []
    return pad_to(ids, ctx, sp.piece_to_id("<pad>"))


def openclip(sp, cleaned, ctx):
    text = cleaned.replace("_", " ").translate(PUNCT).lower()
    text = " ".join(text.split()).strip()
    ids = sp.encode(text)[:ctx - 1] + [sp.piece_to_id("</s>")]
    return pad_to(ids, ctx, sp.piece_to_id("</s>"))


def main():
    pipeline, model, ctx, cases, out = sys.argv[1:6]
    ctx = int(ctx)
    sp = load(model, pipeline == "siglip_hf")
    lines = open(cases).read().split("\n")[:-1]
    res = []
    if pipeline == "openclip":
        golden = {c["id"]: c for c in json.load(open(sys.argv[6]))["cases"]}
        for cid in lines:
            res.append(openclip(sp, golden[cid]["cleaned"], ctx))
    else:
        add_bos, add_eos = 0, 1
        cfg_path = os.path.join(os.path.dirname(model), "tokenizer_config.json")
        if pipeline == "gemma_hf" and os.path.exists(cfg_path):
            cfg = json.load(open(cfg_path))
            add_bos = int(cfg.get("add_bos_token", True))
            add_eos = int(cfg.get("add_eos_token", False))
        for h in lines:
            text = decode_per_byte(bytes.fromhex(h))
            if pipeline == "siglip_hf":
                res.append(siglip_hf(sp, text, ctx))
            else:
                res.append(gemma_hf(sp, text, ctx, add_bos, add_eos))
    with open(out, "w") as f:
        for ids in res:
            assert len(ids) == ctx
            f.write(" ".join(map(str, ids)) + "\n")


if __name__ == "__main__":
    main()
