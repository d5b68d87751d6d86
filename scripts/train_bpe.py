"""train_bpe.py: trains a small byte-level BPE vocabulary with OpenAI CLIP's scheme
on the shapes world's captions, and writes it in the Hugging Face layout
(vocab.json + merges.txt) that clipdb's tokenizer (and CLIPTokenizer) read.

The scheme, as CLIP's simple_tokenizer.py builds its 49,408-token vocabulary:
  - text is cleaned (whitespace collapsed, lowercased) and split with CLIP's
    pattern (letters runs, single digits, runs of other non-space characters);
  - each word is UTF-8 bytes mapped through bytes_to_unicode(), and its last symbol
    carries the "</w>" end-of-word marker;
  - the vocabulary is the 256 byte symbols, the same 256 with "</w>", one token per
    merge (in merge order), then <|startoftext|> and <|endoftext|> as the last two
    ids, so the end token is the highest id (the text tower pools at argmax).
Merges are learned greedily: the most frequent adjacent pair over the word counts
(ties broken by the pair's text, so the result is deterministic).

Also usable as a module: ClipBPE(folder).encode(text) / .tokenize(texts, context)
mirror simple_tokenizer for the training script.

  /usr/bin/python3 scripts/train_bpe.py --manifest LIB/manifest.jsonl --out DIR
"""
import argparse
import collections
import json
import os
import re

# CLIP's pattern with \p{L} -> [a-z] and \p{N} -> [0-9]: Python's re has no Unicode
# classes and the generated world's text is ASCII. Non-ASCII input still tokenizes
# (as bytes) in clipdb; it is only never seen in training.
PAT = re.compile(r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[a-z]+|[0-9]|[^\sa-z0-9]+",
                 re.IGNORECASE)
SOT, EOT = "<|startoftext|>", "<|endoftext|>"


def bytes_to_unicode():
    """CLIP's (and GPT-2's) reversible byte -> printable unicode map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def clean(text):
    return re.sub(r"\s+", " ", text).strip().lower()


def words_of(text, byte_encoder):
    for tok in PAT.findall(clean(text)):
        yield "".join(byte_encoder[b] for b in tok.encode("utf-8"))


def train(texts, vocab_size):
    byte_encoder = bytes_to_unicode()
    counts = collections.Counter()
    for t in texts:
        counts.update(words_of(t, byte_encoder))
    words = {tuple(w[:-1]) + (w[-1] + "</w>",): c for w, c in counts.items()}
    n_merges = vocab_size - 512 - 2
    merges = []
    while len(merges) < n_merges:
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break  # every word is one token
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0][0] + " " + kv[0][1]))[0]
        merges.append(best)
        merged = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + c
        words = merged
    vocab = list(byte_encoder.values())
    vocab += [v + "</w>" for v in vocab]
    vocab += ["".join(m) for m in merges]
    vocab += [SOT, EOT]
    return {tok: i for i, tok in enumerate(vocab)}, merges


def write(folder, vocab, merges):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{a} {b}\n")


def bpe_word(token, ranks):
    """CLIP's BPE of one word (its last symbol marked "</w>"): merge the best-ranked
    adjacent pair, every occurrence left to right, until no pair has a rank; the
    symbols as a tuple. Also bench/encoder_baseline.py's."""
    word = tuple(token[:-1]) + (token[-1] + "</w>",)
    while len(word) > 1:
        pairs = set(zip(word, word[1:]))
        bigram = min(pairs, key=lambda p: ranks.get(p, float("inf")))
        if bigram not in ranks:
            break
        first, second = bigram
        new, i = [], 0
        while i < len(word):
            try:
                j = word.index(first, i)
            except ValueError:
                new.extend(word[i:])
                break
            new.extend(word[i:j])
            i = j
            if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                new.append(first + second)
                i += 2
            else:
                new.append(word[i])
                i += 1
        word = tuple(new)
    return word


class ClipBPE:
    """simple_tokenizer's encode, over a vocab.json + merges.txt folder."""

    def __init__(self, folder):
        with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as f:
            self.encoder = json.load(f)
        with open(os.path.join(folder, "merges.txt"), encoding="utf-8") as f:
            lines = f.read().split("\n")
        merges = [tuple(l.split()) for l in lines[1:] if l.strip()]
        self.ranks = dict(zip(merges, range(len(merges))))
        self.byte_encoder = bytes_to_unicode()
        self.sot, self.eot = self.encoder[SOT], self.encoder[EOT]
        self.cache = {SOT: SOT, EOT: EOT}

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = bpe_word(token, self.ranks)
        out = " ".join(word)
        self.cache[token] = out
        return out

    def encode(self, text):
        ids = []
        for w in words_of(text, self.byte_encoder):
            ids.extend(self.encoder[t] for t in self.bpe(w).split(" "))
        return ids

    def tokenize(self, text, context_length):
        """[sot, ids..., eot] padded with 0; truncated as clip.tokenize(truncate=True)."""
        ids = [self.sot] + self.encode(text) + [self.eot]
        if len(ids) > context_length:
            ids = ids[:context_length]
            ids[-1] = self.eot
        return ids + [0] * (context_length - len(ids))


def manifest_texts(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            out.append(r["caption"])
            out.extend(v["text"] for v in r.get("variants", []))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--manifest", action="append", required=True,
                    help="manifest.jsonl of a generated library (repeatable)")
    ap.add_argument("--extra", action="append", default=[], help="a text file, one caption a line")
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab-size", type=int, default=1000)
    a = ap.parse_args()
    texts = []
    for m in a.manifest:
        texts += manifest_texts(m)
    for e in a.extra:
        with open(e, encoding="utf-8") as f:
            texts += [l.strip() for l in f if l.strip()]
    vocab, merges = train(texts, a.vocab_size)
    write(a.out, vocab, merges)
    print(f"train_bpe: {len(texts)} texts -> {len(vocab)} tokens ({len(merges)} merges) in {a.out}")


if __name__ == "__main__":
    main()
