/*
** tok.c: the public cdb_tok of encoder.h: picks a backend from the file and runs
** the text pipeline of the backend's reference.
**
** Backends: CLIP's byte-level BPE (tokenizer.c, with its own pipeline), SentencePiece
** (tok_spm.cc, libsentencepiece) and Hugging Face tokenizer.json (tok_hf*.c, its
** internal header tok_hf_int.h). For SentencePiece and tokenizer.json the pipeline is
** here: the reference's cleaning (text_clean.c, cdb_tok_clean32_mode), the encode, the
** start / end tokens (SentencePiece: from the configs; tokenizer.json: its own
** post-processor), truncation and padding to the full context. The references and
** where they differ: docs/tokenizer.md. A backend plugs in as one more cdb_tok_kind:
** a handle in struct cdb_tok, a case in open_dir()/cdb_tok_open_pipeline(), and a
** case in each switch below (the "kind" ones).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "encoder/encoder.h"
#include "encoder/tok_hf_int.h"
#include "encoder/tok_int.h"
#include "encoder/tok_spm_int.h"

struct cdb_tok {
    cdb_tok_kind kind;
    cdb_tok_bpe *bpe; /* CDB_TOK_KIND_CLIP_BPE */
    cdb_spm *spm;     /* CDB_TOK_KIND_SENTENCEPIECE */
    cdb_tok_hf *hf;   /* CDB_TOK_KIND_HF_JSON */
    /* SentencePiece and tokenizer.json (pipe, clean, pad; bos / eos: the
    ** post-processor's start / end tokens for tokenizer.json): */
    cdb_tok_pipeline pipe;
    cdb_tok_clean_mode clean;
    int bos, eos, pad;  /* ids; bos / eos -1 when the pipeline adds none */
    char *unk_prefix;   /* SIGLIP_HF: the unk token the text is encoded after */
    size_t unk_len;     /* ... and how many ids it encodes to (dropped) */
    int cached;         /* open through the tokenizer cache (cdb_tok_open_cached) */
    const char *cache_dir; /* during the open only */
    char cache_status[320];
};

/* CLIP's BPE, through the tokenizer cache when the open asks for it. */
static cdb_status open_bpe(cdb_tok *t, const char *path) {
    t->kind = CDB_TOK_KIND_CLIP_BPE;
    if (!t->cached) return cdb_tok_bpe_open(path, &t->bpe);
    return cdb_tok_bpe_open_cached(path, t->cache_dir, &t->bpe, t->cache_status,
                                   sizeof t->cache_status);
}

/* ---- the special tokens of a SentencePiece folder ------------------------------ */

typedef struct spm_specials {
    int add_bos, add_eos; /* -1: not said */
    char bos[64], eos[64], pad[64], unk[64];
    int have_config;      /* tokenizer_config.json was read */
} spm_specials;

/* A token entry: "<pad>" or {"content": "<pad>", ...} (AddedToken's serialization). */
static void token_field(json_t *root, const char *key, char *dst, size_t cap) {
    json_t *v = json_object_get(root, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (json_is_string(v) && strlen(json_string_value(v)) < cap)
        snprintf(dst, cap, "%s", json_string_value(v));
}

/* Reads dir/name if it is there; a file that is there but broken is an error (a
** silently wrong pad or eos would change every id sequence). */
static cdb_status read_specials(const char *dir, const char *name, spm_specials *sp,
                                int *found) {
    char path[4096];
    struct stat st;
    json_error_t jerr;
    *found = 0;
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return cdb_seterr(CDB_INVALID, "tokenizer: path too long: %s", dir);
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return CDB_OK;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root || !json_is_object(root)) {
        json_decref(root);
        return cdb_seterr(CDB_CORRUPT, "tokenizer: %s: %s", path,
                          root ? "not a JSON object" : jerr.text);
    }
    *found = 1;
    json_t *b = json_object_get(root, "add_bos_token"), *e = json_object_get(root, "add_eos_token");
    if (json_is_boolean(b)) sp->add_bos = json_is_true(b);
    if (json_is_boolean(e)) sp->add_eos = json_is_true(e);
    token_field(root, "bos_token", sp->bos, sizeof sp->bos);
    token_field(root, "eos_token", sp->eos, sizeof sp->eos);
    token_field(root, "pad_token", sp->pad, sizeof sp->pad);
    token_field(root, "unk_token", sp->unk, sizeof sp->unk);
    json_decref(root);
    return CDB_OK;
}

/* The folder of a file path, for the configs beside it. */
static void dir_of(const char *path, char *dir, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, cap, ".");
    else if (slash == path) snprintf(dir, cap, "/");
    else snprintf(dir, cap, "%.*s", (int)(slash - path), path);
}

static int special_id(cdb_tok *t, const char *piece, const char *path, cdb_status *rc) {
    int id = cdb_spm_piece_id(t->spm, piece);
    if (id < 0 && *rc == CDB_OK)
        *rc = cdb_seterr(CDB_CORRUPT, "tokenizer: %s: the vocabulary has no %s token", path,
                         piece);
    return id;
}

/* Settles which special tokens the pipeline adds and pads with. The defaults are
** those of the references' classes: SiglipTokenizer (</s> appended, pad </s>),
** GemmaTokenizerFast (add_bos_token true, add_eos_token false, pad <pad>) read
** through tokenizer_config.json, and where a folder has no tokenizer_config.json at
** all, SigLIP2's published settings (no <bos>, <eos> appended). OpenCLIP's
** AutoTokenizer is T5TokenizerFast for a spiece.model (</s> appended; pad </s> as
** big_vision trained SigLIP) and Gemma's for a tokenizer.model. */
static cdb_status spm_specials_setup(cdb_tok *t, const char *path, int gemma) {
    spm_specials sp = {.add_bos = -1, .add_eos = -1};
    char dir[4096];
    int found = 0;
    cdb_status rc;
    dir_of(path, dir, sizeof dir);
    snprintf(sp.bos, sizeof sp.bos, "%s", gemma ? "<bos>" : "<s>");
    snprintf(sp.eos, sizeof sp.eos, "%s", gemma ? "<eos>" : "</s>");
    snprintf(sp.pad, sizeof sp.pad, "%s", gemma ? "<pad>" : "</s>");
    snprintf(sp.unk, sizeof sp.unk, "%s", "<unk>");
    // transformers reads special_tokens_map.json after tokenizer_config.json: its
    // entries win; the add_* flags only live in tokenizer_config.json.
    if ((rc = read_specials(dir, "tokenizer_config.json", &sp, &sp.have_config)) != CDB_OK ||
        (rc = read_specials(dir, "special_tokens_map.json", &sp, &found)) != CDB_OK)
        return rc;
    int add_bos = 0, add_eos = 1;
    if (gemma) {
        add_bos = sp.add_bos >= 0 ? sp.add_bos : sp.have_config ? 1 : 0;
        add_eos = sp.add_eos >= 0 ? sp.add_eos : sp.have_config ? 0 : 1;
    }
    rc = CDB_OK;
    t->bos = add_bos ? special_id(t, sp.bos, path, &rc) : -1;
    t->eos = add_eos ? special_id(t, sp.eos, path, &rc) : -1;
    t->pad = special_id(t, sp.pad, path, &rc);
    if (rc != CDB_OK) return rc;
    if (t->pipe == CDB_TOK_PIPE_SIGLIP_HF) {
        int32_t *ids = NULL;
        if (!(t->unk_prefix = cdb_malloc(strlen(sp.unk) + 1)))
            return cdb_seterr(CDB_NOMEM, "tokenizer: out of memory");
        strcpy(t->unk_prefix, sp.unk);
        if ((rc = cdb_spm_encode(t->spm, sp.unk, strlen(sp.unk), &ids, &t->unk_len)) != CDB_OK)
            return rc;
        cdb_free(ids);
    }
    return CDB_OK;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static cdb_status open_spm(cdb_tok *t, const char *path, cdb_tok_pipeline pipe) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    int gemma = strcmp(base, "spiece.model") != 0;
    cdb_status rc;
    if (pipe == CDB_TOK_PIPE_AUTO) pipe = gemma ? CDB_TOK_PIPE_GEMMA_HF : CDB_TOK_PIPE_SIGLIP_HF;
    t->kind = CDB_TOK_KIND_SENTENCEPIECE;
    t->pipe = pipe;
    t->clean = pipe == CDB_TOK_PIPE_SIGLIP_HF   ? CDB_TOK_CLEAN_SIGLIP_HF
               : pipe == CDB_TOK_PIPE_OPENCLIP ? CDB_TOK_CLEAN_CANONICALIZE
                                               : CDB_TOK_CLEAN_NONE;
    if ((rc = cdb_spm_open(path, pipe == CDB_TOK_PIPE_SIGLIP_HF, &t->spm)) != CDB_OK) return rc;
    return spm_specials_setup(t, path, gemma);
}

/* The pad id of a tokenizer.json, as transformers settles it for padding="max_length"
** (PreTrainedTokenizerFast): pad_token from tokenizer_config.json, then
** special_tokens_map.json, beside the file; else the file's own padding section
** (pad_id); else, where transformers would refuse to pad, clipdb's fallback: an added
** or vocabulary token "<pad>", else the end token the post-processor appends (as
** big_vision padded SigLIP with </s>). */
static cdb_status hf_pad_setup(cdb_tok *t, const char *path) {
    spm_specials sp = {.add_bos = -1, .add_eos = -1};
    char dir[4096];
    int found = 0;
    cdb_status rc;
    dir_of(path, dir, sizeof dir);
    if ((rc = read_specials(dir, "tokenizer_config.json", &sp, &found)) != CDB_OK ||
        (rc = read_specials(dir, "special_tokens_map.json", &sp, &found)) != CDB_OK)
        return rc;
    if (sp.pad[0]) {
        if ((t->pad = cdb_tok_hf_token_id(t->hf, sp.pad)) < 0)
            return cdb_seterr(CDB_CORRUPT, "tokenizer: %s: the vocabulary has no %s token "
                              "(the configs' pad_token)", path, sp.pad);
        return CDB_OK;
    }
    const char *pad_sec = cdb_tok_hf_padding(t->hf);
    json_t *pj = pad_sec ? json_loads(pad_sec, 0, NULL) : NULL;
    json_t *pid = json_object_get(pj, "pad_id");
    t->pad = json_is_integer(pid) ? (int)json_integer_value(pid) : -1;
    json_decref(pj);
    if (t->pad >= 0) {
        if (t->pad >= cdb_tok_hf_vocab_size(t->hf))
            return cdb_seterr(CDB_CORRUPT, "tokenizer: %s: padding.pad_id %d is past the "
                              "vocabulary", path, t->pad);
        return CDB_OK;
    }
    if ((t->pad = cdb_tok_hf_token_id(t->hf, "<pad>")) >= 0) return CDB_OK;
    if ((t->pad = t->eos) >= 0) return CDB_OK;
    return cdb_seterr(CDB_CORRUPT, "tokenizer: %s: no pad token (no pad_token in the configs, "
                      "no padding section, no <pad> token, no end token)", path);
}

/* A tokenizer.json: the file's own normalizer, pre-tokenizer, model and post-processor;
** OPENCLIP cleans the text first (canonicalize, as open_clip's HFTokenizer). */
static cdb_status open_hf(cdb_tok *t, const char *path, cdb_tok_pipeline pipe) {
    cdb_status rc;
    t->kind = CDB_TOK_KIND_HF_JSON;
    t->pipe = pipe == CDB_TOK_PIPE_OPENCLIP ? CDB_TOK_PIPE_OPENCLIP : CDB_TOK_PIPE_AUTO;
    t->clean = pipe == CDB_TOK_PIPE_OPENCLIP ? CDB_TOK_CLEAN_CANONICALIZE : CDB_TOK_CLEAN_NONE;
    rc = t->cached ? cdb_tok_hf_open_cached(path, t->cache_dir, &t->hf, t->cache_status,
                                            sizeof t->cache_status)
                   : cdb_tok_hf_open(path, &t->hf);
    if (rc != CDB_OK) {
        char msg[1024]; /* a copy: cdb_seterr formats into the buffer cdb_errmsg reads */
        snprintf(msg, sizeof msg, "%s", cdb_errmsg());
        return cdb_seterr(rc, "tokenizer: %s", msg); /* msg starts with the path */
    }
    t->bos = cdb_tok_hf_sot_id(t->hf);
    t->eos = cdb_tok_hf_eot_id(t->hf);
    return hf_pad_setup(t, path);
}

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* A model folder: CLIP's files first (a folder that has them is a CLIP one), then
** SigLIP's spiece.model, then Gemma's tokenizer.model, then tokenizer.json. The .model
** files go before tokenizer.json because transformers' SiglipTokenizer (slow) reads
** spiece.model, and because both give the same ids where a folder has both
** (GemmaTokenizerFast's tokenizer.json is converted from tokenizer.model). */
static cdb_status open_dir(cdb_tok *t, const char *dir, cdb_tok_pipeline pipe) {
    char p[4096];
    static const char *const clip_files[] = {"vocab.json", "bpe_simple_vocab_16e6.txt.gz"};
    static const char *const spm_files[] = {"spiece.model", "tokenizer.model"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, clip_files[i]);
        if (is_file(p)) return open_bpe(t, dir);
    }
    for (size_t i = 0; i < 2; i++) {
        if (snprintf(p, sizeof p, "%s/%s", dir, spm_files[i]) >= (int)sizeof p)
            return cdb_seterr(CDB_INVALID, "tokenizer: path too long: %s", dir);
        if (is_file(p)) return open_spm(t, p, pipe);
    }
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    if (is_file(p)) return open_hf(t, p, pipe);
    return cdb_seterr(CDB_NOTFOUND, "tokenizer: %s has neither vocab.json + merges.txt, "
                      "bpe_simple_vocab_16e6.txt.gz, spiece.model, tokenizer.model nor "
                      "tokenizer.json", dir);
}

/* cdb_tok_open_pipeline, through the tokenizer cache in cache_dir when cached. */
static cdb_status open_any(const char *path, cdb_tok_pipeline pipeline, int cached,
                           const char *cache_dir, cdb_tok **out) {
    cdb_status rc;
    struct stat st;
    if (!out) return cdb_seterr(CDB_INVALID, "cdb_tok_open: out is NULL");
    *out = NULL;
    if (!path || !*path) return cdb_seterr(CDB_INVALID, "cdb_tok_open: empty path");
    if (pipeline < CDB_TOK_PIPE_AUTO || pipeline > CDB_TOK_PIPE_OPENCLIP)
        return cdb_seterr(CDB_INVALID, "cdb_tok_open: unknown pipeline %d", (int)pipeline);
    cdb_tok *t = cdb_calloc(1, sizeof *t);
    if (!t) return cdb_seterr(CDB_NOMEM, "tokenizer: out of memory");
    t->cached = cached;
    t->cache_dir = cache_dir;
    snprintf(t->cache_status, sizeof t->cache_status, "off");
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        rc = open_dir(t, path, pipeline);
    } else if (ends_with(path, ".model")) {
        rc = open_spm(t, path, pipeline);
    } else if (ends_with(path, "tokenizer.json")) {
        rc = open_hf(t, path, pipeline);
    } else {
        rc = open_bpe(t, path);
    }
    t->cache_dir = NULL;
    if (rc != CDB_OK) {
        cdb_tok_free(t);
        return rc;
    }
    *out = t;
    return CDB_OK;
}

cdb_status cdb_tok_open_pipeline(const char *path, cdb_tok_pipeline pipeline, cdb_tok **out) {
    return open_any(path, pipeline, 0, NULL, out);
}

cdb_status cdb_tok_open_cached(const char *path, cdb_tok_pipeline pipeline,
                               const char *cache_dir, cdb_tok **out) {
    return open_any(path, pipeline, 1, cache_dir, out);
}

const char *cdb_tok_cache_status(const cdb_tok *t) { return t ? t->cache_status : "off"; }

cdb_status cdb_tok_open(const char *path, cdb_tok **out) {
    return cdb_tok_open_pipeline(path, CDB_TOK_PIPE_AUTO, out);
}

void cdb_tok_free(cdb_tok *t) {
    if (!t) return;
    cdb_tok_bpe_free(t->bpe);
    cdb_spm_free(t->spm);
    cdb_tok_hf_free(t->hf);
    cdb_free(t->unk_prefix);
    cdb_free(t);
}

/* ---- queries (kind) ------------------------------------------------------------ */

cdb_tok_kind cdb_tok_kind_of(const cdb_tok *t) { return t ? t->kind : CDB_TOK_KIND_CLIP_BPE; }

cdb_tok_pipeline cdb_tok_pipeline_of(const cdb_tok *t) {
    return t && t->kind != CDB_TOK_KIND_CLIP_BPE ? t->pipe : CDB_TOK_PIPE_AUTO;
}

int cdb_tok_vocab_size(const cdb_tok *t) {
    if (!t) return 0;
    switch (t->kind) {
    case CDB_TOK_KIND_CLIP_BPE: return cdb_tok_bpe_vocab_size(t->bpe);
    case CDB_TOK_KIND_SENTENCEPIECE: return cdb_spm_vocab_size(t->spm);
    case CDB_TOK_KIND_HF_JSON: return cdb_tok_hf_vocab_size(t->hf);
    }
    return 0;
}

int cdb_tok_sot_id(const cdb_tok *t) {
    if (!t) return -1;
    return t->kind == CDB_TOK_KIND_CLIP_BPE ? cdb_tok_bpe_sot_id(t->bpe) : t->bos;
}

int cdb_tok_eot_id(const cdb_tok *t) {
    if (!t) return -1;
    return t->kind == CDB_TOK_KIND_CLIP_BPE ? cdb_tok_bpe_eot_id(t->bpe) : t->eos;
}

int cdb_tok_pad_id(const cdb_tok *t) {
    if (!t) return -1;
    return t->kind == CDB_TOK_KIND_CLIP_BPE ? 0 : t->pad;
}

const char *cdb_tok_token_str(const cdb_tok *t, int id) {
    if (!t) return NULL;
    switch (t->kind) {
    case CDB_TOK_KIND_CLIP_BPE: return cdb_tok_bpe_token_str(t->bpe, id);
    case CDB_TOK_KIND_SENTENCEPIECE: return cdb_spm_piece(t->spm, id);
    case CDB_TOK_KIND_HF_JSON: return cdb_tok_hf_token_str(t->hf, id);
    }
    return NULL;
}

/* ---- the SentencePiece pipeline --------------------------------------------------- */

/* Cleaned text as UTF-8, after `prefix` (NULL for none). *out: cdb_free. */
static cdb_status clean_utf8(const char *text, size_t len, cdb_tok_clean_mode mode,
                             const char *prefix, char **out, size_t *n_out) {
    uint32_t *cp = NULL;
    size_t n = 0, k = prefix ? strlen(prefix) : 0;
    cdb_status rc = cdb_tok_clean32_mode(text, len, mode, &cp, &n);
    if (rc != CDB_OK) return rc;
    char *s = cdb_malloc(k + n * 4 + 1);
    if (!s) {
        cdb_free(cp);
        return cdb_seterr(CDB_NOMEM, "tokenizer: out of memory (%zu bytes of text)", len);
    }
    if (k) memcpy(s, prefix, k);
    for (size_t i = 0; i < n; i++) k += cdb_tok_utf8_put(cp[i], s + k);
    s[k] = 0;
    cdb_free(cp);
    *out = s;
    *n_out = k;
    return CDB_OK;
}

/* The ids of the text between the special tokens. SIGLIP_HF encodes
** unk_token + text and drops the unk token's own ids, as SiglipTokenizer._tokenize
** does (with the dummy prefix off, a leading "\u2581" would otherwise be lost). */
static cdb_status spm_ids(const cdb_tok *t, const char *text, size_t len, int32_t **ids,
                          size_t *n) {
    char *s = NULL;
    size_t ns = 0;
    cdb_status rc = clean_utf8(text, len, t->clean, t->unk_prefix, &s, &ns);
    if (rc != CDB_OK) return rc;
    rc = cdb_spm_encode(t->spm, s, ns, ids, n);
    cdb_free(s);
    if (rc != CDB_OK || !t->unk_prefix || *n < t->unk_len) return rc;
    memmove(*ids, *ids + t->unk_len, (*n - t->unk_len) * sizeof **ids);
    *n -= t->unk_len;
    return CDB_OK;
}

static cdb_status spm_tokenize(const cdb_tok *t, const char *text, size_t len, int ctx,
                               int32_t *out, int *eot_index, int *truncated) {
    int32_t *ids = NULL;
    size_t n = 0;
    cdb_status rc = spm_ids(t, text, len, &ids, &n);
    if (rc != CDB_OK) return rc;
    int bos = t->bos >= 0, eos = t->eos >= 0, pos = 0;
    size_t keep = (size_t)(ctx - bos - eos);
    size_t used = n < keep ? n : keep;
    if (bos) out[pos++] = t->bos;
    for (size_t i = 0; i < used; i++) out[pos++] = ids[i];
    if (eos) out[pos++] = t->eos;
    if (eot_index) *eot_index = pos > 0 ? pos - 1 : 0;
    while (pos < ctx) out[pos++] = t->pad;
    if (truncated) *truncated = n > keep;
    cdb_free(ids);
    return CDB_OK;
}

/* ---- the tokenizer.json pipeline ------------------------------------------------- */

/* The file's ids of the cleaned text, truncated to max_len as the reference truncates
** (0: not truncated; the post-processor's specials stay). */
static cdb_status hf_ids(const cdb_tok *t, const char *text, size_t len, size_t max_len,
                         int32_t **ids, size_t *n, int *truncated) {
    char *s = NULL;
    size_t ns = 0;
    cdb_status rc;
    if (t->clean == CDB_TOK_CLEAN_NONE)
        return cdb_tok_hf_encode_max(t->hf, text, len, max_len, ids, n, truncated);
    if ((rc = clean_utf8(text, len, t->clean, NULL, &s, &ns)) != CDB_OK) return rc;
    rc = cdb_tok_hf_encode_max(t->hf, s, ns, max_len, ids, n, truncated);
    cdb_free(s);
    return rc;
}

static cdb_status hf_tokenize(const cdb_tok *t, const char *text, size_t len, int ctx,
                              int32_t *out, int *eot_index, int *truncated) {
    int32_t *ids = NULL;
    size_t n = 0;
    int cut = 0, pos;
    cdb_status rc = hf_ids(t, text, len, (size_t)ctx, &ids, &n, &cut);
    if (rc != CDB_OK) return rc;
    for (pos = 0; pos < (int)n; pos++) out[pos] = ids[pos];
    if (eot_index) *eot_index = pos > 0 ? pos - 1 : 0;
    while (pos < ctx) out[pos++] = t->pad;
    if (truncated) *truncated = cut;
    cdb_free(ids);
    return CDB_OK;
}

/* The ids without the post-processor's specials (those it puts around the text). */
static cdb_status hf_encode(const cdb_tok *t, const char *text, size_t len, int32_t **ids,
                            size_t *n) {
    size_t before = 0, after = 0;
    cdb_status rc = hf_ids(t, text, len, 0, ids, n, NULL);
    if (rc != CDB_OK) return rc;
    cdb_tok_hf_n_specials(t->hf, &before, &after);
    if (*n < before + after) return CDB_OK; /* not the layout (cannot happen) */
    memmove(*ids, *ids + before, (*n - before - after) * sizeof **ids);
    *n -= before + after;
    return CDB_OK;
}

/* ---- encoding (kind) ---------------------------------------------------------------- */

cdb_status cdb_tok_clean_for(const cdb_tok *t, const char *text, size_t len, char **out) {
    size_t n = 0;
    if (!t || !out || (!text && len)) return cdb_seterr(CDB_INVALID, "cdb_tok_clean_for: "
                                                        "invalid argument");
    if (t->kind == CDB_TOK_KIND_CLIP_BPE) return cdb_tok_clean(text, len, out);
    return clean_utf8(text ? text : "", len, t->clean, NULL, out, &n);
}

cdb_status cdb_tok_encode(const cdb_tok *t, const char *text, size_t len, int32_t *ids,
                          int max_ids, int *n_ids) {
    if (!t || !n_ids || (!text && len) || max_ids < 0 || (max_ids > 0 && !ids))
        return cdb_seterr(CDB_INVALID, "cdb_tok_encode: invalid argument");
    if (t->kind == CDB_TOK_KIND_CLIP_BPE)
        return cdb_tok_bpe_encode(t->bpe, text, len, ids, max_ids, n_ids);
    int32_t *all = NULL;
    size_t n = 0;
    *n_ids = 0;
    cdb_status rc = t->kind == CDB_TOK_KIND_HF_JSON
                        ? hf_encode(t, text ? text : "", len, &all, &n)
                        : spm_ids(t, text ? text : "", len, &all, &n);
    if (rc != CDB_OK) return rc;
    if (n > (size_t)1 << 30) {
        cdb_free(all);
        return cdb_seterr(CDB_INVALID, "cdb_tok_encode: %zu ids", n);
    }
    for (size_t i = 0; i < n && i < (size_t)max_ids; i++) ids[i] = all[i];
    *n_ids = (int)n;
    cdb_free(all);
    return CDB_OK;
}

cdb_status cdb_tok_tokenize(const cdb_tok *t, const char *text, size_t len, int context_len,
                            int32_t *ids, int *eot_index, int *truncated) {
    if (!t || !ids || (!text && len))
        return cdb_seterr(CDB_INVALID, "cdb_tok_tokenize: invalid argument");
    if (context_len < 2)
        return cdb_seterr(CDB_INVALID, "cdb_tok_tokenize: context_len %d < 2", context_len);
    if (t->kind == CDB_TOK_KIND_CLIP_BPE)
        return cdb_tok_bpe_tokenize(t->bpe, text, len, context_len, ids, eot_index, truncated);
    if (t->kind == CDB_TOK_KIND_HF_JSON)
        return hf_tokenize(t, text ? text : "", len, context_len, ids, eot_index, truncated);
    return spm_tokenize(t, text ? text : "", len, context_len, ids, eot_index, truncated);
}
