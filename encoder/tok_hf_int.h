/*
** tok_hf_int.h: the Hugging Face tokenizer.json backend of encoder/ (docs/tokenizer.md,
** "tokenizer.json"). Private to encoder/: the tokenizer dispatch (cdb_tok) includes the
** first section; the second section is shared only by the three tok_hf*.c files:
**   tok_hf.c        loading the file, added tokens, the encode pipeline, post-processors
**   tok_hf_text.c   UTF-8 helpers, regular expressions (PCRE2), normalizers and
**                   pre-tokenizers
**   tok_hf_model.c  the string map, and the BPE, Unigram and WordPiece models
** The reference is npm's @huggingface/tokenizers (a pure-JS implementation): every step
** reproduces what it does, quirks included; where it differs from the Rust crate, the
** docs say so. A component type it does not know, or one clipdb does not implement,
** fails cdb_tok_hf_open with CDB_UNSUPPORTED naming it (never silently other ids).
*/
#ifndef CDB_TOK_HF_INT_H
#define CDB_TOK_HF_INT_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

/* ==== the backend's interface (used by the cdb_tok dispatch) ==================== */

typedef struct cdb_tok_hf cdb_tok_hf; /* immutable after open; thread-safe */

/* Opens a tokenizer.json file. CDB_NOTFOUND / CDB_IO when it cannot be read,
** CDB_CORRUPT when it is not the format (the key or token named), CDB_UNSUPPORTED for
** a component type or option not implemented (named), CDB_NOMEM. *out: free with
** cdb_tok_hf_free. */
cdb_status cdb_tok_hf_open(const char *path, cdb_tok_hf **out /* OUT */);

/* The ids of text (len bytes of UTF-8) after the added tokens, normalizer,
** pre-tokenizer, model and post-processor, with add_special_tokens = true, as the
** reference's encode(text). Ill-formed UTF-8 becomes U+FFFD per maximal subpart (as
** JS's TextDecoder and Rust's from_utf8_lossy decode bytes). *ids: cdb_malloc'd
** (non-NULL even when *n == 0), the caller cdb_frees it. No truncation, no padding
** (see cdb_tok_hf_truncation / _padding). Safe to call from several threads. */
cdb_status cdb_tok_hf_encode(const cdb_tok_hf *h, const char *text, size_t len,
                             int32_t **ids /* OUT */, size_t *n /* OUT */);

/* cdb_tok_hf_encode with the reference's truncation to max_len ids (0: none), as the
** Rust crate's TruncationParams {max_length, direction Right} and transformers'
** truncation=True apply it: the model's tokens are cut to max_len minus the number of
** special tokens the post-processor adds, then the post-processor runs, so its start
** and end tokens stay. *truncated (may be NULL): 1 when tokens were cut. CDB_INVALID
** when max_len cannot hold the special tokens. */
cdb_status cdb_tok_hf_encode_max(const cdb_tok_hf *h, const char *text, size_t len,
                                 size_t max_len, int32_t **ids /* OUT */, size_t *n /* OUT */,
                                 int *truncated /* OUT */);
/* The id of the special token the post-processor puts just before / just after the
** text of a single sequence; -1 where it puts none there. */
int cdb_tok_hf_sot_id(const cdb_tok_hf *h);
int cdb_tok_hf_eot_id(const cdb_tok_hf *h);
/* How many special tokens the post-processor puts before and after that text. */
void cdb_tok_hf_n_specials(const cdb_tok_hf *h, size_t *before /* OUT */,
                           size_t *after /* OUT */);
/* The id of a token string (the model's vocabulary or an added token), -1 if absent. */
int cdb_tok_hf_token_id(const cdb_tok_hf *h, const char *token);
/* One more than the largest id (vocabulary and added tokens). */
int cdb_tok_hf_vocab_size(const cdb_tok_hf *h);
/* The token string of id (borrowed, lives as long as h), NULL for an id no token has. */
const char *cdb_tok_hf_token_str(const cdb_tok_hf *h, int id);
/* The file's "truncation" and "padding" sections as compact JSON text (borrowed), or
** NULL where the file has null or nothing. clipdb's callers decide what to apply. */
const char *cdb_tok_hf_truncation(const cdb_tok_hf *h);
const char *cdb_tok_hf_padding(const cdb_tok_hf *h);
void cdb_tok_hf_free(cdb_tok_hf *h);

/* cdb_tok_hf_open through the tokenizer cache (tokcache.c; the contract of
** cdb_tok_bpe_open_cached in tok_int.h), keyed by the XXH3-128 of the file's bytes. */
cdb_status cdb_tok_hf_open_cached(const char *path, const char *dir, cdb_tok_hf **out /* OUT */,
                                  char *status, size_t status_size);
/* The cache's two sides (tokcache.c; cdb_tc_sects in tok_int.h). cdb_tok_hf_sects: h's
** tables (borrowed from h), in the order cdb_tok_hf_from_sects takes them; -1 when h
** cannot be written (it was itself read from a file). cdb_tok_hf_from_sects: a
** tokenizer over the sections of a mapped file (read only), after checking every bound
** the encoder relies on (counts, hash table sizes with an empty slot, string offsets
** and terminators, every id below the vocabulary size), so that no table content can
** make it read out of bounds, loop forever or hand out an id past the vocabulary; the
** normalizer, pre-tokenizer and post-processor are built again from the file's JSON of
** them. On success *out owns map (munmap'ed by cdb_tok_hf_free). CDB_CORRUPT (which
** bound), CDB_NOMEM, or what building the components from their JSON says. */
typedef struct cdb_tc_sects cdb_tc_sects;
int cdb_tok_hf_sects(const cdb_tok_hf *h, cdb_tc_sects *out);
cdb_status cdb_tok_hf_from_sects(cdb_tc_sects *in, void *map, size_t map_size,
                                 cdb_tok_hf **out /* OUT */);

/* ==== private to tok_hf*.c ======================================================= */

/* A growable byte string; oom is sticky (checked once at the end of a step). */
typedef struct hf_buf {
    char *p;
    size_t n, cap;
    int oom;
} hf_buf;

/* A list of strings stored back to back: piece i is s.p[off[i] .. off[i+1]). */
typedef struct hf_list {
    hf_buf s;
    size_t *off; /* n + 1 entries once n > 0 */
    size_t n, cap;
    int oom;
} hf_list;

void hf_buf_add(hf_buf *b, const char *s, size_t n);
void hf_buf_add_cp(hf_buf *b, uint32_t cp); /* as UTF-8 */
void hf_buf_free(hf_buf *b);
void hf_list_add(hf_list *l, const char *s, size_t n);
void hf_list_free(hf_list *l);
#define HF_PIECE(l, i) ((l)->s.p + (l)->off[i])
#define HF_PLEN(l, i) ((l)->off[(i) + 1] - (l)->off[i])

/* Decodes the code point at s[0..n) of well-formed UTF-8; returns its byte length. */
size_t hf_utf8_next(const char *s, size_t n, uint32_t *cp /* OUT */);
/* text as well-formed UTF-8, ill-formed bytes replaced by U+FFFD per maximal subpart. */
void hf_utf8_lossy(const char *text, size_t len, hf_buf *out);
/* JavaScript's \s and String.prototype.trim() set (WhiteSpace + LineTerminator). */
int hf_js_space(uint32_t cp);
/* JS trim: the span of s[0..n) without leading (left) / trailing (right) JS spaces. */
void hf_js_trim(const char *s, size_t n, int left, int right, size_t *a /* OUT */,
                size_t *b /* OUT */);

/* A string -> int32 map (open addressing, keys copied into an arena). */
typedef struct hf_map {
    struct hf_ent *ents;
    size_t n, cap; /* cap: a power of two */
    char *arena;
    size_t arena_n, arena_cap;
    int borrowed; /* ents and arena are a cache file's (read only) */
} hf_map;
/* Sets key -> val (replacing). Returns -1 when out of memory (or m is borrowed). */
int hf_map_set(hf_map *m, const char *key, size_t n, int32_t val);
/* Returns 1 and *val when present, else 0. */
int hf_map_get(const hf_map *m, const char *key, size_t n, int32_t *val /* OUT */);
void hf_map_free(hf_map *m);
/* The cache's sides of a map (cdb_tok_hf_sects / _from_sects): hf_map_put puts m's
** counts, entries and arena; hf_map_take borrows them back into m after checking its
** bounds (a power-of-two size with an empty slot, every key inside the arena, every
** value in [lo, hi]). -1 on a bad bound. */
void hf_map_put(const hf_map *m, cdb_tc_sects *s);
int hf_map_take(hf_map *m, cdb_tc_sects *s, int64_t lo, int64_t hi);

/* A pattern of a Replace or Split: {"String": s} (literal) or {"Regex": r} (Oniguruma
** syntax, translated to PCRE2 the way the reference translates it to JS). */
typedef struct hf_pattern hf_pattern;
/* *out NULL with CDB_OK when the pattern object is neither (the reference ignores it). */
cdb_status hf_pattern_new(const char *string, const char *regex, int capture_literal,
                          hf_pattern **out /* OUT */);
void hf_pattern_free(hf_pattern *p);

/* A step of the text's way through the tokenizer, as tokenizer.json writes one:
** {"type": NAME, ...}. What normalizers, pre-tokenizers and post-processors share:
** the type (an index into its kind's names), a Sequence's steps, a Replace's pattern
** and content. Each kind's struct starts with it. */
typedef struct hf_step {
    int type;
    struct hf_step **kids;
    size_t n_kids;
    hf_pattern *pat;
    char *content;
} hf_step;

struct json_t;
/* A kind of step: how its JSON is read. */
typedef struct hf_kind {
    const char *what;         /* "normalizer": for messages */
    const char *const *names; /* the "type" values, in the order of the kind's enum */
    int n_names;
    int seq, replace;         /* the Sequence and the Replace types (-1: none) */
    const char *seq_key;      /* the key of a Sequence's list: "normalizers" */
    size_t size;              /* the kind's struct */
    /* the fields of the other types (NULL: none), freed by clear (NULL: nothing) */
    cdb_status (*fill)(struct json_t *cfg, hf_step *s);
    void (*clear)(hf_step *s);
} hf_kind;
/* The step cfg describes, or *out NULL with CDB_OK where cfg is null or absent;
** CDB_UNSUPPORTED names a type the kind does not have. */
cdb_status hf_step_new(const hf_kind *k, struct json_t *cfg, hf_step **out /* OUT */);
void hf_step_free(const hf_kind *k, hf_step *s);

/* Normalizers and pre-tokenizers are built from the file's JSON (jansson) by
** tok_hf_text.c; their trees are opaque to the other files. */
typedef struct hf_norm hf_norm;
typedef struct hf_pretok hf_pretok;
cdb_status hf_norm_new(struct json_t *cfg, hf_norm **out /* OUT */);
void hf_norm_free(hf_norm *n);
/* Appends the normalized text of s[0..n) to out (out's old content kept). */
void hf_norm_apply(const hf_norm *nm, const char *s, size_t n, hf_buf *out);
cdb_status hf_pretok_new(struct json_t *cfg, hf_pretok **out /* OUT */);
void hf_pretok_free(hf_pretok *p);
/* Pre-tokenizes s[0..n) (section_index as the reference's option), appending pieces. */
void hf_pretok_apply(const hf_pretok *pt, const char *s, size_t n, int section_index, hf_list *out);

/* The model (tok_hf_model.c). tokens: the tokenizer's token -> id map (model vocabulary
** plus added tokens), borrowed, filled before the first encode. */
typedef struct hf_model hf_model;
cdb_status hf_model_new(struct json_t *cfg, hf_map *tokens, hf_model **out /* OUT */);
/* The model's vocabulary as (token, id) pairs, for the id -> string table; the
** token is not NUL-terminated (len bytes). */
size_t hf_model_vocab_len(const hf_model *m);
const char *hf_model_vocab_at(const hf_model *m, size_t i, int32_t *id /* OUT */,
                              size_t *len /* OUT */);
/* The unknown token's id, -1 when the model has none. */
int32_t hf_model_unk_id(const hf_model *m);
/* Called once the added tokens are in the map (Unigram resolves its pieces' ids). */
cdb_status hf_model_finish(hf_model *m);
/* Appends the model's token strings for the pre-tokens in (fuse_unk applied). */
void hf_model_apply(const hf_model *m, const hf_list *in, hf_list *out);
void hf_model_free(hf_model *m);
/* The model's tables as the cache holds them (after hf_model_finish); take checks its
** bounds (CDB_CORRUPT) and borrows them; tokens as hf_model_new's. */
void hf_model_put(const hf_model *m, cdb_tc_sects *s);
cdb_status hf_model_take(cdb_tc_sects *s, hf_map *tokens, hf_model **out /* OUT */);

#endif /* CDB_TOK_HF_INT_H */
