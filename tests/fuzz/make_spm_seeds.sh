#!/bin/bash
# Regenerates tests/fuzz/corpus/fuzz_spm/: text seeds (first byte 0x01) and two small
# .model files (first byte 0x00) trained by Debian's spm_train on the test corpus's
# first lines: a unigram vocabulary with the identity normalizer (a nmt_nfkc one
# carries a 240 KB charsmap) and a BPE one with byte fallback, as Gemma's.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$here/tests/fuzz/corpus/fuzz_spm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -n 20 "$here/tests/encoder/data/spm_corpus.txt" >"$work/c.txt"
common=(--input="$work/c.txt" --hard_vocab_limit=false --minloglevel=2 --character_coverage=1)
spm_train "${common[@]}" --model_prefix="$work/u" --model_type=unigram --vocab_size=80 \
  --normalization_rule_name=identity --pad_id=0 --eos_id=1 --unk_id=2 --bos_id=-1
spm_train "${common[@]}" --model_prefix="$work/b" --model_type=bpe --vocab_size=400 \
  --byte_fallback=true --normalization_rule_name=identity --add_dummy_prefix=false \
  --pad_id=0 --eos_id=1 --bos_id=2 --unk_id=3 --pad_piece='<pad>' --eos_piece='<eos>' \
  --bos_piece='<bos>'
mkdir -p "$out"
{ printf '\x00'; cat "$work/u.model"; } >"$out/model_unigram"
{ printf '\x00'; cat "$work/b.model"; } >"$out/model_bpe"
printf '\x01a photo of a dog on a beach' >"$out/text_plain"
printf '\x01A_B, C! \xe2\x96\x81 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 cafe\xcc\x81' >"$out/text_mixed"
printf '\x01\xff\x80 \xc0\xaf \xed\xa0\x80 \xe4\xb8 <unk> </s> \x00 &amp;' >"$out/text_invalid"
{ printf '\x01'; for i in $(seq 200); do printf 'word%d ' "$i"; done; } >"$out/text_long"
