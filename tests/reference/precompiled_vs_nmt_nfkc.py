#!/usr/bin/python3
"""How far the Precompiled normalizer of npm's @huggingface/tokenizers (which clipdb's
tokenizer.json backend follows, encoder/tok_hf_text.c) is from SentencePiece's own
nmt_nfkc charsmap (what the Rust tokenizers crate and SentencePiece apply; SigLIP's and
T5's normalization). Developers only (docs/tokenizer.md quotes its output):

    /usr/bin/python3 tests/reference/precompiled_vs_nmt_nfkc.py

Trains a tiny SentencePiece model with normalization_rule_name=nmt_nfkc (Debian's
python3-sentencepiece), then for every assigned code point c compares the text "a" c "b"
normalized both ways (SentencePiece's: its pieces joined, whitespace collapsed as both
do for single characters). Python's unicodedata stands in for JS's String.normalize.
"""
import collections, os, re, sys, tempfile, unicodedata

import sentencepiece as spm

DROP = set(range(1, 9)) | {0xB} | set(range(0xE, 0x20)) | {0x7F, 0x8F, 0x9F}
SPACE = {9, 0xA, 0xC, 0xD, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x2581, 0x3000,
         0xFEFF, 0xFFFD} | set(range(0x2000, 0x2010))


def js_precompiled(t):
    t = "".join("" if ord(c) in DROP else " " if ord(c) in SPACE else c for c in t)
    return "\uff5e".join(unicodedata.normalize("NFKC", p) for p in t.split("\uff5e"))


def main():
    tmp = tempfile.mkdtemp()
    corpus = os.path.join(tmp, "c.txt")
    with open(corpus, "w") as f:
        f.write("\n".join(["a photo of a dog on a beach", "hello world", "cafe"] * 50))
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(tmp, "m"),
                                   vocab_size=40, normalization_rule_name="nmt_nfkc",
                                   hard_vocab_limit=False, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(tmp, "m.model"))
    canon = lambda s: re.sub(" +", " ", s).strip()
    n, diff = 0, []
    for cp in range(0x20, 0x30000):
        c = chr(cp)
        if 0xD800 <= cp <= 0xDFFF or unicodedata.category(c) == "Cn":
            continue
        n += 1
        t = "a" + c + "b"
        a = canon(js_precompiled(t))
        b = canon("".join(sp.encode(t, out_type=str)).replace("\u2581", " "))
        if a != b:
            diff.append((cp, a, b))
    print(f"{n} code points (Unicode {unicodedata.unidata_version}), {len(diff)} differ")
    print(collections.Counter(unicodedata.category(chr(d[0])) for d in diff).most_common())
    for cp, a, b in diff[:10]:
        print(f"U+{cp:04X} {unicodedata.name(chr(cp), '?')}: JS {a!r} SentencePiece {b!r}")


if __name__ == "__main__":
    sys.exit(main())
