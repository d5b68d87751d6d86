/*
** fuzz_spm.c: libFuzzer target for the SentencePiece tokenizers (encoder/tok.c over
** encoder/tok_spm.cc): loading .model files and encoding arbitrary text.
**
** Input: the first byte picks what the rest is.
** - even: a .model file. Loaded from memory (with and without the dummy-prefix edit)
**   and, when that works, written as spiece.model / tokenizer.model and opened with
**   cdb_tok_open, then a fixed multilingual text is tokenized.
** - odd: text, tokenized by three tokenizers trained at start-up with spm_train on
**   tests/encoder/data/spm_corpus.txt (SigLIP-like unigram through SIGLIP_HF and
**   OPENCLIP, Gemma-like BPE with byte fallback through GEMMA_HF).
**
** Invariants beyond "no crash / no sanitizer report / no leak": every id lies in the
** vocabulary; tokenize fills the context as [bos?] ids [eos?] pad... with the end token
** at *eot_index; the truncation flag agrees with encode's count, and tokenize's text
** ids are encode's first ones.
** libsentencepiece itself is not instrumented (Debian's build): a crash inside it
** still stops the run, but coverage feedback comes from clipdb's side only.
*/
#include <stdint.h>
#include <string.h>

#include "encoder/encoder.h"
#include "encoder/tok_spm_int.h"
#include "fuzz_util.h"

#define CTX 64

static cdb_tok *g_tok[3];
static char g_dir[256];

static void train(const char *dir, const char *file, const char *flags) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cd '%s' && spm_train --input='%s/tests/encoder/"
             "data/spm_corpus.txt' --hard_vocab_limit=false --minloglevel=2 --model_prefix=m "
             "%s >train.log 2>&1 && mv m.model '%s'", dir, dir, fuzz_source_dir(), flags, file);
    if (system(cmd) != 0) {
        fprintf(stderr, "fuzz_spm: spm_train failed (Debian's sentencepiece): %s\n", dir);
        abort();
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    char d[512], p[600];
    (void)argc, (void)argv;
    fuzz_quiet();
    snprintf(g_dir, sizeof g_dir, "%s", fuzz_tmpdir("spm"));
    snprintf(d, sizeof d, "%s/uni", g_dir);
    train(d, "spiece.model", "--model_type=unigram --vocab_size=400 --character_coverage=0.98 "
          "--pad_id=0 --eos_id=1 --unk_id=2 --bos_id=-1");
    snprintf(p, sizeof p, "%s/spiece.model", d);
    if (cdb_tok_open_pipeline(p, CDB_TOK_PIPE_SIGLIP_HF, &g_tok[0]) != CDB_OK ||
        cdb_tok_open_pipeline(p, CDB_TOK_PIPE_OPENCLIP, &g_tok[1]) != CDB_OK)
        abort();
    snprintf(d, sizeof d, "%s/gemma", g_dir);
    train(d, "tokenizer.model", "--model_type=bpe --vocab_size=900 --byte_fallback=true "
          "--character_coverage=0.98 --pad_id=0 --eos_id=1 --bos_id=2 --unk_id=3 "
          "--pad_piece='<pad>' --eos_piece='<eos>' --bos_piece='<bos>' "
          "--normalization_rule_name=identity --add_dummy_prefix=false "
          "--remove_extra_whitespaces=false --split_digits=true");
    snprintf(p, sizeof p, "%s/tokenizer.model", d);
    if (cdb_tok_open(p, &g_tok[2]) != CDB_OK) abort();
    return 0;
}

static void check_tokenize(const cdb_tok *tok, const char *text, size_t n) {
    int32_t ids[CTX], enc[CTX];
    int eot = -1, trunc = -1, n_ids = -1;
    const int vocab = cdb_tok_vocab_size(tok), bos = cdb_tok_sot_id(tok),
              eos = cdb_tok_eot_id(tok), pad = cdb_tok_pad_id(tok);
    if (cdb_tok_tokenize(tok, text, n, CTX, ids, &eot, &trunc) != CDB_OK) return; // OOM only
    for (int i = 0; i < CTX; i++) FUZZ_CHECK(ids[i] >= 0 && ids[i] < vocab, "id %d", ids[i]);
    FUZZ_CHECK(eot >= 0 && eot < CTX, "eot_index %d", eot);
    if (eos >= 0) FUZZ_CHECK(ids[eot] == eos, "ids[%d] = %d", eot, ids[eot]);
    for (int i = eot + 1; i < CTX; i++) FUZZ_CHECK(ids[i] == pad, "ids[%d] = %d", i, ids[i]);
    int first = bos >= 0;
    if (first) FUZZ_CHECK(ids[0] == bos, "ids[0] = %d", ids[0]);
    if (cdb_tok_encode(tok, text, n, enc, CTX, &n_ids) != CDB_OK) return;
    int room = CTX - first - (eos >= 0), used = eot + (eos < 0) - first;
    if (n_ids == 0 && eos < 0) used = 0;
    FUZZ_CHECK(trunc == (n_ids > room), "trunc %d with %d ids", trunc, n_ids);
    FUZZ_CHECK(used == (n_ids < room ? n_ids : room), "used %d of %d", used, n_ids);
    FUZZ_CHECK(!memcmp(ids + first, enc, sizeof *enc * (size_t)used), "prefix differs");
}

static void check_model(const uint8_t *data, size_t n) {
    static const char k_text[] = "A photo of a dog \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 "
                                 "caf\xc3\xa9 \xff";
    char path[600];
    for (int nodummy = 0; nodummy < 2; nodummy++) {
        cdb_spm *s = NULL;
        if (cdb_spm_open_mem(data, n, nodummy, "fuzz", &s) != CDB_OK) return;
        int32_t *ids = NULL;
        size_t k = 0;
        if (cdb_spm_encode(s, k_text, sizeof k_text - 1, &ids, &k) == CDB_OK)
            for (size_t i = 0; i < k; i++)
                FUZZ_CHECK(ids[i] >= 0 && ids[i] < cdb_spm_vocab_size(s), "id %d", ids[i]);
        cdb_free(ids);
        cdb_spm_free(s);
    }
    for (int gemma = 0; gemma < 2; gemma++) {
        cdb_tok *tok = NULL;
        snprintf(path, sizeof path, "%s/%s", g_dir, gemma ? "tokenizer.model" : "spiece.model");
        if (fuzz_write_file(path, data, n) != 0) abort();
        if (cdb_tok_open(path, &tok) == CDB_OK) check_tokenize(tok, k_text, sizeof k_text - 1);
        cdb_tok_free(tok);
        remove(path);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n == 0) return 0;
    if (data[0] & 1) {
        for (int i = 0; i < 3; i++) check_tokenize(g_tok[i], (const char *)data + 1, n - 1);
    } else {
        check_model(data + 1, n - 1);
    }
    cdb_clearerr();
    return 0;
}
