/*
** tok_hf_model.c: the string map and the three models of the tokenizer.json backend
** (tok_hf_int.h), as @huggingface/tokenizers 0.2.0 runs them:
** - BPE: a word's code points (end_of_word_suffix on the last), merged by the lowest
**   rank first, leftmost among equal ranks (the reference's heap scores rank +
**   position / length, which orders the same way), then pieces missing from the
**   vocabulary become <0xXX> byte tokens (byte_fallback) or the unknown token;
** - Unigram: the reference's lattice and Viterbi, node order and tie rules included
**   (first best wins; scores in double precision; the unknown piece scores the minimum
**   minus 10);
** - WordPiece: greedy longest match with the continuing-subword prefix, words longer
**   than max_input_chars_per_word (code points) become the unknown token.
** Then fuse_unk (always on for Unigram) joins runs of unknown pieces as the reference
** does. Lookups use the tokenizer's map (model vocabulary + added tokens), as the
** reference's tokens_to_ids is by the time it encodes.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "encoder/tok_hf_int.h"
#include "encoder/tok_int.h"

/* ---- the string map ------------------------------------------------------------------ */

typedef struct hf_ent {
    size_t off; /* key in the arena */
    uint32_t len, hash;
    int32_t val;
    int used;
} hf_ent;

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static hf_ent *map_slot(const hf_map *m, const char *key, size_t n, uint32_t h) {
    size_t mask = m->cap - 1, i = h & mask;
    while (m->ents[i].used) {
        hf_ent *e = &m->ents[i];
        if (e->hash == h && e->len == n && !memcmp(m->arena + e->off, key, n)) return e;
        i = (i + 1) & mask;
    }
    return &m->ents[i];
}

static int map_grow(hf_map *m) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    hf_ent *ents = cdb_calloc(cap, sizeof *ents);
    if (!ents) return -1;
    hf_map t = *m;
    t.ents = ents;
    t.cap = cap;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->ents[i].used) continue;
        size_t j = m->ents[i].hash & (cap - 1);
        while (ents[j].used) j = (j + 1) & (cap - 1);
        ents[j] = m->ents[i];
    }
    cdb_free(m->ents);
    *m = t;
    return 0;
}

int hf_map_set(hf_map *m, const char *key, size_t n, int32_t val) {
    if (n > UINT32_MAX || m->borrowed) return -1;
    if ((m->n + 1) * 2 > m->cap && map_grow(m)) return -1;
    uint32_t h = hash_bytes(key, n);
    hf_ent *e = map_slot(m, key, n, h);
    if (e->used) {
        e->val = val;
        return 0;
    }
    if (m->arena_n + n > m->arena_cap) {
        size_t cap = m->arena_cap ? m->arena_cap : 4096;
        while (cap < m->arena_n + n) cap *= 2;
        char *a = cdb_realloc(m->arena, cap);
        if (!a) return -1;
        m->arena = a;
        m->arena_cap = cap;
    }
    if (n) memcpy(m->arena + m->arena_n, key, n);
    e->off = m->arena_n;
    e->len = (uint32_t)n;
    e->hash = h;
    e->val = val;
    e->used = 1;
    m->arena_n += n;
    m->n++;
    return 0;
}

int hf_map_get(const hf_map *m, const char *key, size_t n, int32_t *val) {
    if (!m->cap) return 0;
    hf_ent *e = map_slot(m, key, n, hash_bytes(key, n));
    if (!e->used) return 0;
    *val = e->val;
    return 1;
}

void hf_map_free(hf_map *m) {
    if (!m->borrowed) {
        cdb_free(m->ents);
        cdb_free(m->arena);
    }
    memset(m, 0, sizeof *m);
}

/* A map's counts in the cache file. */
typedef struct map_dims {
    uint64_t n, cap, arena_n;
} map_dims;

_Static_assert(sizeof(hf_ent) == 24, "hf_ent has no padding (its bytes go in a file)");

void hf_map_put(const hf_map *m, cdb_tc_sects *s) {
    map_dims *d = cdb_tc_scratch(s, sizeof *d);
    if (!d) return;
    *d = (map_dims){m->n, m->cap, m->arena_n};
    cdb_tc_put(s, d, sizeof *d);
    cdb_tc_put(s, m->ents, m->cap * sizeof *m->ents);
    cdb_tc_put(s, m->arena, m->arena_n);
}

int hf_map_take(hf_map *m, cdb_tc_sects *s, int64_t lo, int64_t hi) {
    const map_dims *d = cdb_tc_take_n(s, sizeof *d, 1);
    uint64_t used = 0;
    memset(m, 0, sizeof *m);
    if (!d || d->cap > ((uint64_t)1 << 28) || (d->cap & (d->cap - 1)) || d->n >= d->cap + !d->cap)
        return -1;
    const hf_ent *e = cdb_tc_take_n(s, sizeof *e, d->cap);
    const char *arena = cdb_tc_take_n(s, 1, d->arena_n);
    if (!e || !arena) return -1;
    for (uint64_t i = 0; i < d->cap && !s->proven; i++) {
        if (!e[i].used) continue;
        if (e[i].used != 1 || e[i].off > d->arena_n || e[i].len > d->arena_n - e[i].off ||
            e[i].val < lo || e[i].val > hi)
            return -1;
        used++;
    }
    if (!s->proven && used != d->n) return -1; /* n < cap: a probe meets an empty slot */
    m->ents = (hf_ent *)e; /* read only: hf_map_set refuses a borrowed map */
    m->arena = (char *)arena;
    m->cap = (size_t)d->cap;
    m->n = (size_t)d->n;
    m->arena_n = m->arena_cap = (size_t)d->arena_n;
    m->borrowed = 1;
    return 0;
}

/* ---- the models ------------------------------------------------------------------------ */

enum { M_BPE, M_UNIGRAM, M_WORDPIECE };

/* A merge: (left symbol, right symbol) -> rank and the merged symbol. */
typedef struct pair_ent {
    uint64_t key; /* left << 32 | right, + 1 so that 0 means empty */
    int32_t rank, res;
} pair_ent;
_Static_assert(sizeof(pair_ent) == 16, "pair_ent has no padding (its bytes go in a file)");

struct hf_model {
    int type;
    hf_map *tokens; /* the tokenizer's token -> id map (borrowed) */
    hf_list vocab;  /* the model's own (token, id) pairs */
    int32_t *vocab_id;
    char *unk;      /* the unknown token's string, NULL if none */
    int32_t unk_id; /* its id in the model vocabulary, -1 if none */
    int fuse_unk;
    /* BPE */
    hf_map syms; /* every string of a merge -> symbol */
    pair_ent *pairs;
    size_t pair_cap;
    char *eow, *csw; /* end_of_word_suffix, continuing_subword_suffix */
    int byte_fallback, ignore_merges;
    /* Unigram */
    double *scores; /* by vocabulary index */
    size_t n_scores;
    double unk_score;
    hf_map prefixes; /* every prefix of a piece -> -1, or the piece's id (-2: unresolved) */
    /* WordPiece */
    char *prefix;
    int max_chars;
    int borrowed; /* pairs and scores are a cache file's (hf_model_take) */
};

static char *jdup(json_t *v) {
    if (!json_is_string(v)) return NULL;
    size_t n = json_string_length(v);
    char *d = cdb_malloc(n + 1);
    if (d) memcpy(d, json_string_value(v), n + 1);
    return d;
}

static uint64_t pair_key(int32_t a, int32_t b) {
    return (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
}

static pair_ent *pair_slot(const hf_model *m, uint64_t key) {
    size_t mask = m->pair_cap - 1, i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & mask;
    while (m->pairs[i].key && m->pairs[i].key != key) i = (i + 1) & mask;
    return &m->pairs[i];
}

static int32_t sym_of(hf_model *m, const char *s, size_t n, cdb_status *rc) {
    int32_t v;
    if (hf_map_get(&m->syms, s, n, &v)) return v;
    v = (int32_t)m->syms.n;
    if (hf_map_set(&m->syms, s, n, v)) *rc = cdb_seterr(CDB_NOMEM, "out of memory");
    return v;
}

static cdb_status bpe_merges(hf_model *m, json_t *merges) {
    cdb_status rc = CDB_OK;
    size_t n = json_array_size(merges);
    m->pair_cap = 1024;
    while (m->pair_cap < n * 2 + 2) m->pair_cap *= 2;
    m->pairs = cdb_calloc(m->pair_cap, sizeof *m->pairs);
    if (!m->pairs) return cdb_seterr(CDB_NOMEM, "out of memory");
    int arrays = n > 0 && json_is_array(json_array_get(merges, 0));
    hf_buf cat = {0};
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *e = json_array_get(merges, i);
        const char *a, *b;
        size_t an, bn;
        if (arrays) { // the key is the whole array: only [a, b] can ever match a pair
            if (!json_is_array(e)) return cdb_seterr(CDB_CORRUPT, "merge %zu is not an array", i);
            if (json_array_size(e) != 2) continue;
            json_t *x = json_array_get(e, 0), *y = json_array_get(e, 1);
            if (!json_is_string(x) || !json_is_string(y)) continue;
            a = json_string_value(x), an = json_string_length(x);
            b = json_string_value(y), bn = json_string_length(y);
        } else { // "a b": split(" ", 2) keeps the first two parts
            if (!json_is_string(e)) return cdb_seterr(CDB_CORRUPT, "merge %zu is not a string", i);
            const char *s = json_string_value(e), *sp = strchr(s, ' ');
            if (!sp) continue;
            a = s, an = (size_t)(sp - s);
            b = sp + 1;
            const char *sp2 = strchr(b, ' ');
            bn = sp2 ? (size_t)(sp2 - b) : strlen(b);
        }
        if (!an || !bn) continue; // symbols are never empty
        cat.n = 0;
        hf_buf_add(&cat, a, an);
        hf_buf_add(&cat, b, bn);
        if (cat.oom) rc = cdb_seterr(CDB_NOMEM, "out of memory");
        int32_t sa = sym_of(m, a, an, &rc), sb = sym_of(m, b, bn, &rc);
        int32_t sr = rc ? 0 : sym_of(m, cat.p, cat.n, &rc);
        if (rc) break;
        pair_ent *pe = pair_slot(m, pair_key(sa, sb));
        pe->key = pair_key(sa, sb);
        pe->rank = (int32_t)i; // a repeated pair keeps its last rank, as a JS Map does
        pe->res = sr;
    }
    hf_buf_free(&cat);
    return rc;
}

static cdb_status vocab_object(hf_model *m, json_t *vocab) {
    const char *key;
    json_t *v;
    json_object_foreach(vocab, key, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return cdb_seterr(CDB_CORRUPT, "vocab: the id of '%.40s' is not an integer >= 0", key);
        size_t n = strlen(key);
        int32_t id = (int32_t)json_integer_value(v);
        hf_list_add(&m->vocab, key, n);
        if (hf_map_set(m->tokens, key, n, id)) m->vocab.oom = 1;
    }
    return m->vocab.oom ? cdb_seterr(CDB_NOMEM, "out of memory") : CDB_OK;
}

static cdb_status model_bpe(hf_model *m, json_t *cfg) {
    json_t *vocab = json_object_get(cfg, "vocab"), *merges = json_object_get(cfg, "merges");
    if (!json_is_object(vocab)) return cdb_seterr(CDB_CORRUPT, "BPE: 'vocab' is not an object");
    if (!json_is_array(merges)) return cdb_seterr(CDB_CORRUPT, "BPE: 'merges' is not an array");
    json_t *csp = json_object_get(cfg, "continuing_subword_prefix");
    if (json_is_string(csp) && json_string_length(csp) > 0)
        return cdb_seterr(CDB_UNSUPPORTED, "BPE continuing_subword_prefix (the JS reference "
                                           "ignores it, the Rust one does not)");
    if (json_is_true(json_object_get(cfg, "dropout")) ||
        json_is_number(json_object_get(cfg, "dropout")))
        if (json_number_value(json_object_get(cfg, "dropout")) > 0)
            return cdb_seterr(CDB_UNSUPPORTED, "BPE dropout");
    cdb_status rc = vocab_object(m, vocab);
    if (rc) return rc;
    m->unk = jdup(json_object_get(cfg, "unk_token"));
    m->eow = jdup(json_object_get(cfg, "end_of_word_suffix"));
    m->csw = jdup(json_object_get(cfg, "continuing_subword_suffix"));
    m->byte_fallback = json_is_true(json_object_get(cfg, "byte_fallback"));
    m->ignore_merges = json_is_true(json_object_get(cfg, "ignore_merges"));
    m->fuse_unk = json_is_true(json_object_get(cfg, "fuse_unk"));
    if (m->eow && !*m->eow) cdb_free(m->eow), m->eow = NULL; // falsy in JS
    if (m->csw && !*m->csw) cdb_free(m->csw), m->csw = NULL;
    return bpe_merges(m, merges);
}

static cdb_status model_wordpiece(hf_model *m, json_t *cfg) {
    json_t *vocab = json_object_get(cfg, "vocab"),
           *mx = json_object_get(cfg, "max_input_chars_per_word");
    if (!json_is_object(vocab))
        return cdb_seterr(CDB_CORRUPT, "WordPiece: 'vocab' is not an object");
    m->prefix = jdup(json_object_get(cfg, "continuing_subword_prefix"));
    if (!m->prefix)
        return cdb_seterr(CDB_UNSUPPORTED, "WordPiece without continuing_subword_prefix");
    m->max_chars = json_is_integer(mx) ? (int)json_integer_value(mx) : 100;
    m->unk = jdup(json_object_get(cfg, "unk_token"));
    m->fuse_unk = json_is_true(json_object_get(cfg, "fuse_unk"));
    return vocab_object(m, vocab);
}

static cdb_status model_unigram(hf_model *m, json_t *cfg) {
    json_t *vocab = json_object_get(cfg, "vocab"), *uid = json_object_get(cfg, "unk_id");
    if (!json_is_array(vocab) || json_array_size(vocab) == 0)
        return cdb_seterr(CDB_CORRUPT, "Unigram: 'vocab' is not a non-empty array");
    size_t n = json_array_size(vocab);
    if (!json_is_integer(uid) || json_integer_value(uid) < 0 ||
        (size_t)json_integer_value(uid) >= n)
        return cdb_seterr(CDB_UNSUPPORTED, "Unigram without a valid unk_id");
    m->scores = cdb_malloc(n * sizeof *m->scores);
    if (!m->scores) return cdb_seterr(CDB_NOMEM, "out of memory");
    m->n_scores = n;
    double mn = INFINITY;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(vocab, i), *p = json_array_get(e, 0), *s = json_array_get(e, 1);
        if (!json_is_string(p) || !json_is_number(s))
            return cdb_seterr(CDB_CORRUPT, "Unigram: vocab entry %zu is not [piece, score]", i);
        m->scores[i] = json_number_value(s);
        if (m->scores[i] < mn) mn = m->scores[i];
        const char *ps = json_string_value(p);
        size_t pn = json_string_length(p);
        hf_list_add(&m->vocab, ps, pn);
        if (hf_map_set(m->tokens, ps, pn, (int32_t)i))
            return cdb_seterr(CDB_NOMEM, "out of memory");
        for (size_t k = 1; k <= pn; k++) { // every prefix ending on a code point boundary
            if (k < pn && ((uint8_t)ps[k] & 0xC0) == 0x80) continue;
            int32_t old;
            if (k < pn && hf_map_get(&m->prefixes, ps, k, &old)) continue;
            if (hf_map_set(&m->prefixes, ps, k, k == pn ? -2 : -1))
                return cdb_seterr(CDB_NOMEM, "out of memory");
        }
    }
    if (m->vocab.oom) return cdb_seterr(CDB_NOMEM, "out of memory");
    m->unk_id = (int32_t)json_integer_value(uid);
    m->unk_score = mn - 10;
    m->scores[m->unk_id] = m->unk_score;
    m->fuse_unk = 1;
    size_t un = HF_PLEN(&m->vocab, (size_t)m->unk_id);
    m->unk = cdb_malloc(un + 1);
    if (!m->unk) return cdb_seterr(CDB_NOMEM, "out of memory");
    memcpy(m->unk, HF_PIECE(&m->vocab, (size_t)m->unk_id), un);
    m->unk[un] = 0;
    return CDB_OK;
}

cdb_status hf_model_new(json_t *cfg, hf_map *tokens, hf_model **out) {
    *out = NULL;
    if (!json_is_object(cfg)) return cdb_seterr(CDB_CORRUPT, "'model' is not an object");
    const char *type = json_string_value(json_object_get(cfg, "type"));
    hf_model *m = cdb_calloc(1, sizeof *m);
    if (!m) return cdb_seterr(CDB_NOMEM, "out of memory");
    m->tokens = tokens;
    m->unk_id = -1;
    cdb_status rc;
    if (type && !strcmp(type, "BPE"))
        m->type = M_BPE, rc = model_bpe(m, cfg);
    else if (type && !strcmp(type, "Unigram"))
        m->type = M_UNIGRAM, rc = model_unigram(m, cfg);
    else if (type && !strcmp(type, "WordPiece"))
        m->type = M_WORDPIECE, rc = model_wordpiece(m, cfg);
    else
        rc = cdb_seterr(CDB_UNSUPPORTED, "model type '%s'", type ? type : "(none)");
    if (!rc && m->type != M_UNIGRAM && m->unk) { // the vocabulary's id, before added tokens
        int32_t v;
        if (hf_map_get(tokens, m->unk, strlen(m->unk), &v)) m->unk_id = v;
    }
    if (!rc) {
        m->vocab_id = cdb_malloc((m->vocab.n + 1) * sizeof *m->vocab_id);
        if (!m->vocab_id) rc = cdb_seterr(CDB_NOMEM, "out of memory");
        for (size_t i = 0; !rc && i < m->vocab.n; i++) {
            if (m->type == M_UNIGRAM)
                m->vocab_id[i] = (int32_t)i;
            else
                hf_map_get(tokens, HF_PIECE(&m->vocab, i), HF_PLEN(&m->vocab, i), &m->vocab_id[i]);
        }
    }
    if (rc) {
        hf_model_free(m);
        return rc;
    }
    *out = m;
    return CDB_OK;
}

cdb_status hf_model_finish(hf_model *m) {
    if (m->type != M_UNIGRAM) return CDB_OK;
    for (size_t i = 0; i < m->vocab.n; i++) { // a piece's id as the map says now
        int32_t id;
        const char *p = HF_PIECE(&m->vocab, i);
        size_t n = HF_PLEN(&m->vocab, i);
        if (hf_map_get(m->tokens, p, n, &id) && hf_map_set(&m->prefixes, p, n, id))
            return cdb_seterr(CDB_NOMEM, "out of memory");
    }
    return CDB_OK;
}

size_t hf_model_vocab_len(const hf_model *m) { return m->vocab.n; }

const char *hf_model_vocab_at(const hf_model *m, size_t i, int32_t *id, size_t *len) {
    *id = m->vocab_id[i];
    *len = HF_PLEN(&m->vocab, i);
    return HF_PIECE(&m->vocab, i);
}

int32_t hf_model_unk_id(const hf_model *m) { return m->unk_id; }

void hf_model_free(hf_model *m) {
    if (!m) return;
    hf_list_free(&m->vocab);
    cdb_free(m->vocab_id);
    cdb_free(m->unk);
    hf_map_free(&m->syms);
    if (!m->borrowed) cdb_free(m->pairs);
    cdb_free(m->eow);
    cdb_free(m->csw);
    if (!m->borrowed) cdb_free(m->scores);
    hf_map_free(&m->prefixes);
    cdb_free(m->prefix);
    cdb_free(m);
}

/* ---- the model in the tokenizer cache ---------------------------------------------------- */

/* The model's scalars in the cache file. */
typedef struct model_dims {
    int32_t type, unk_id, fuse_unk, byte_fallback, ignore_merges, max_chars;
    uint64_t pair_cap, n_scores;
    double unk_score;
} model_dims;

static void put_str(cdb_tc_sects *s, const char *str) {
    cdb_tc_put(s, str, str ? strlen(str) + 1 : 0);
}

/* A copy of the next section's string (NULL for an empty section); -1 when it is not
** one NUL-terminated string or out of memory. */
static int take_str(cdb_tc_sects *s, char **out) {
    uint64_t n;
    const char *p = cdb_tc_take(s, 1, &n);
    *out = NULL;
    if (!p) return -1;
    if (!n) return 0;
    if (memchr(p, 0, (size_t)n) != p + n - 1 || !(*out = cdb_malloc((size_t)n))) return -1;
    memcpy(*out, p, (size_t)n);
    return 0;
}

void hf_model_put(const hf_model *m, cdb_tc_sects *s) {
    model_dims *d = cdb_tc_scratch(s, sizeof *d);
    if (!d) return;
    *d = (model_dims){m->type,          m->unk_id,    m->fuse_unk, m->byte_fallback,
                      m->ignore_merges, m->max_chars, m->pair_cap, m->n_scores,
                      m->unk_score};
    cdb_tc_put(s, d, sizeof *d);
    put_str(s, m->unk);
    put_str(s, m->eow);
    put_str(s, m->csw);
    put_str(s, m->prefix);
    hf_map_put(&m->syms, s);
    cdb_tc_put(s, m->pairs, m->pair_cap * sizeof *m->pairs);
    cdb_tc_put(s, m->scores, m->n_scores * sizeof *m->scores);
    hf_map_put(&m->prefixes, s);
}

/* The bounds each model's encode relies on (see hf_model_take); proven: only those that
** need no pass over a table. */
static const char *model_invalid(const hf_model *m, int proven) {
    size_t empty = proven;
    if (m->type == M_BPE) {
        if (!m->pair_cap || (m->pair_cap & (m->pair_cap - 1))) return "merge table size";
        for (size_t i = 0; i < m->pair_cap && !proven; i++) empty += !m->pairs[i].key;
        if (!empty) return "merge table (full)"; /* a lookup would never end */
    } else if (m->type == M_UNIGRAM) {
        if (!m->n_scores || m->unk_id < 0 || (uint64_t)m->unk_id >= m->n_scores || !m->unk)
            return "unigram counts";
    } else if (m->type == M_WORDPIECE) {
        if (!m->prefix) return "wordpiece prefix";
    } else {
        return "model type";
    }
    return NULL;
}

cdb_status hf_model_take(cdb_tc_sects *s, hf_map *tokens, hf_model **out) {
    const model_dims *d = cdb_tc_take_n(s, sizeof *d, 1);
    hf_model *m = cdb_calloc(1, sizeof *m);
    const char *bad = "counts";
    *out = NULL;
    if (!m) return cdb_seterr(CDB_NOMEM, "out of memory");
    m->tokens = tokens;
    m->borrowed = 1;
    if (!d || d->pair_cap > ((uint64_t)1 << 28) || d->n_scores > ((uint64_t)1 << 28)) goto fail;
    m->type = d->type, m->unk_id = d->unk_id, m->fuse_unk = d->fuse_unk;
    m->byte_fallback = d->byte_fallback, m->ignore_merges = d->ignore_merges;
    m->max_chars = d->max_chars, m->unk_score = d->unk_score;
    m->pair_cap = (size_t)d->pair_cap, m->n_scores = (size_t)d->n_scores;
    bad = "strings";
    if (take_str(s, &m->unk) || take_str(s, &m->eow) || take_str(s, &m->csw) ||
        take_str(s, &m->prefix))
        goto fail;
    bad = "symbol map";
    if (hf_map_take(&m->syms, s, INT32_MIN, INT32_MAX)) goto fail;
    bad = "merge table";
    if (!(m->pairs = (pair_ent *)cdb_tc_take_n(s, sizeof *m->pairs, d->pair_cap))) goto fail;
    bad = "scores";
    if (!(m->scores = (double *)cdb_tc_take_n(s, sizeof *m->scores, d->n_scores))) goto fail;
    bad = "prefix map";
    if (hf_map_take(&m->prefixes, s, -2, INT32_MAX)) goto fail;
    if ((bad = model_invalid(m, s->proven)) != NULL) goto fail;
    *out = m;
    return CDB_OK;
fail:
    hf_model_free(m);
    return cdb_seterr(CDB_CORRUPT, "tokenizer tables: bad %s", bad);
}

static int has_token(const hf_model *m, const char *s, size_t n) {
    int32_t v;
    return hf_map_get(m->tokens, s, n, &v);
}

/* ---- BPE ------------------------------------------------------------------------------- */

typedef struct bpe_node {
    size_t a, b;        /* bytes of the word */
    int32_t sym;        /* -1: a string no merge knows */
    int32_t prev, next; /* -1: none */
    int alive;
} bpe_node;

typedef struct bpe_cand {
    int32_t rank, left, right, lsym, rsym;
    uint32_t pos;
} bpe_cand;

static int cand_less(const bpe_cand *x, const bpe_cand *y) {
    return x->rank != y->rank ? x->rank < y->rank : x->pos < y->pos;
}

typedef struct bpe_heap {
    bpe_cand *h;
    size_t n, cap;
    int oom;
} bpe_heap;

static void heap_push(bpe_heap *q, bpe_cand c) {
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        bpe_cand *h = cdb_realloc(q->h, cap * sizeof *h);
        if (!h) {
            q->oom = 1;
            return;
        }
        q->h = h, q->cap = cap;
    }
    size_t i = q->n++;
    while (i > 0 && cand_less(&c, &q->h[(i - 1) / 2])) {
        q->h[i] = q->h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    q->h[i] = c;
}

static bpe_cand heap_pop(bpe_heap *q) {
    bpe_cand top = q->h[0], last = q->h[--q->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, s = i;
        const bpe_cand *best = &last;
        if (l < q->n && cand_less(&q->h[l], best)) s = l, best = &q->h[l];
        if (l + 1 < q->n && cand_less(&q->h[l + 1], best)) s = l + 1;
        if (s == i) break;
        q->h[i] = q->h[s];
        i = s;
    }
    if (q->n) q->h[i] = last;
    return top;
}

/* The symbol of word bytes [a, b) (+ the suffix when b is the word's end). */
static int32_t word_sym(const hf_model *m, const char *w, size_t wn, size_t a, size_t b,
                        hf_buf *tmp) {
    int32_t v;
    tmp->n = 0;
    hf_buf_add(tmp, w + a, b - a);
    if (b == wn && m->eow) hf_buf_add(tmp, m->eow, strlen(m->eow));
    return !tmp->oom && hf_map_get(&m->syms, tmp->p, tmp->n, &v) ? v : -1;
}

static void add_cand(const hf_model *m, bpe_heap *q, const bpe_node *nd, int32_t l) {
    int32_t r = nd[l].next;
    if (r < 0 || nd[l].sym < 0 || nd[r].sym < 0) return;
    pair_ent *pe = pair_slot(m, pair_key(nd[l].sym, nd[r].sym));
    if (!pe->key) return;
    bpe_cand c = {pe->rank, l, r, nd[l].sym, nd[r].sym, (uint32_t)l};
    heap_push(q, c);
}

/* The reference's bpe(token): appends the word's pieces (with suffixes) to out. */
static void bpe_word(const hf_model *m, const char *w, size_t wn, hf_list *out) {
    hf_buf tmp = {0};
    bpe_heap q = {0};
    size_t nc = 0;
    for (size_t i = 0; i < wn; nc++) {
        uint32_t c;
        i += hf_utf8_next(w + i, wn - i, &c);
    }
    bpe_node *nd = nc ? cdb_malloc(nc * sizeof *nd) : NULL;
    if (nc && !nd) {
        out->oom = 1;
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < wn; k++) {
        uint32_t c;
        size_t len = hf_utf8_next(w + i, wn - i, &c);
        nd[k] = (bpe_node){i,
                           i + len,
                           word_sym(m, w, wn, i, i + len, &tmp),
                           (int32_t)k - 1,
                           k + 1 < nc ? (int32_t)k + 1 : -1,
                           1};
        i += len;
    }
    for (size_t i = 0; i + 1 < nc; i++) add_cand(m, &q, nd, (int32_t)i);
    while (q.n && !q.oom) {
        bpe_cand c = heap_pop(&q);
        bpe_node *l = &nd[c.left];
        if (!l->alive || l->next != c.right || !nd[c.right].alive || l->sym != c.lsym ||
            nd[c.right].sym != c.rsym)
            continue;
        pair_ent *pe = pair_slot(m, pair_key(c.lsym, c.rsym));
        bpe_node *r = &nd[c.right];
        l->b = r->b;
        l->sym = pe->res;
        l->next = r->next;
        r->alive = 0;
        if (r->next >= 0) nd[r->next].prev = c.left;
        if (l->prev >= 0) add_cand(m, &q, nd, l->prev);
        add_cand(m, &q, nd, c.left);
    }
    for (int32_t i = nc ? 0 : -1; i >= 0; i = nd[i].next) {
        tmp.n = 0;
        hf_buf_add(&tmp, w + nd[i].a, nd[i].b - nd[i].a);
        if (nd[i].b == wn && m->eow) hf_buf_add(&tmp, m->eow, strlen(m->eow));
        if (nd[i].next >= 0 && m->csw) hf_buf_add(&tmp, m->csw, strlen(m->csw));
        hf_list_add(out, tmp.p ? tmp.p : "", tmp.n);
    }
    out->oom |= tmp.oom | q.oom;
    hf_buf_free(&tmp);
    cdb_free(q.h);
    cdb_free(nd);
}

static void bpe_encode(const hf_model *m, const char *s, size_t n, hf_list *out) {
    hf_list pieces = {0};
    if (m->ignore_merges && has_token(m, s, n)) {
        hf_list_add(out, s, n);
        return;
    }
    if (n == 0) return;
    bpe_word(m, s, n, &pieces);
    for (size_t i = 0; i < pieces.n; i++) {
        const char *t = HF_PIECE(&pieces, i);
        size_t tn = HF_PLEN(&pieces, i);
        if (has_token(m, t, tn)) {
            hf_list_add(out, t, tn);
            continue;
        }
        if (m->byte_fallback) {
            int all = 1;
            char name[8];
            for (size_t j = 0; j < tn && all; j++) {
                snprintf(name, sizeof name, "<0x%02X>", (uint8_t)t[j]);
                all = has_token(m, name, 6);
            }
            if (all) {
                for (size_t j = 0; j < tn; j++) {
                    snprintf(name, sizeof name, "<0x%02X>", (uint8_t)t[j]);
                    hf_list_add(out, name, 6);
                }
                continue;
            }
        }
        if (m->unk) hf_list_add(out, m->unk, strlen(m->unk));
    }
    out->oom |= pieces.oom;
    hf_list_free(&pieces);
}

/* ---- Unigram --------------------------------------------------------------------------- */

typedef struct lnode {
    size_t pos, len; /* in code points */
    int32_t id;
    double score, bt; /* its score; the best path score ending with it */
    int32_t prev;     /* the best node before it, -1 for the start */
} lnode;

/* Appends a lattice node; -1 when out of memory. */
static int lat_push(lnode **nd, size_t *nn, size_t *cap, lnode x) {
    if (*nn == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        lnode *t = cdb_realloc(*nd, c * sizeof *t);
        if (!t) return -1;
        *nd = t;
        *cap = c;
    }
    (*nd)[(*nn)++] = x;
    return 0;
}

static void unigram_encode(const hf_model *m, const char *s, size_t n, hf_list *out) {
    size_t nc = 0;
    for (size_t i = 0; i < n; nc++) {
        uint32_t c;
        i += hf_utf8_next(s + i, n - i, &c);
    }
    size_t *at = cdb_malloc((nc + 1) * sizeof *at); /* byte offset of each code point */
    lnode *nd = NULL;
    size_t nn = 0, cap = 0, *begin = NULL, *ecount = NULL, *eidx = NULL;
    int oom = !at;
    for (size_t i = 0, k = 0; !oom && i <= n; k++) {
        at[k] = i;
        if (i == n) break;
        uint32_t c;
        i += hf_utf8_next(s + i, n - i, &c);
    }
    begin = cdb_calloc(nc + 2, sizeof *begin);
    oom |= !begin;
    for (size_t p = 0; !oom && p < nc; p++) { // populate_nodes
        int single = 0;
        begin[p] = nn;
        for (size_t e = p + 1; e <= nc; e++) {
            int32_t v;
            if (!hf_map_get(&m->prefixes, s + at[p], at[e] - at[p], &v)) break;
            if (v == -1) continue;
            double sc = v >= 0 && (size_t)v < m->n_scores ? m->scores[v] : NAN;
            if (lat_push(&nd, &nn, &cap, (lnode){p, e - p, v, sc, 0, -1})) {
                oom = 1;
                break;
            }
            if (e - p == 1) single = 1;
        }
        if (!oom && !single)
            oom = lat_push(&nd, &nn, &cap, (lnode){p, 1, m->unk_id, m->unk_score, 0, -1});
    }
    if (!oom) begin[nc] = begin[nc + 1] = nn;
    // end_nodes[p], in insertion order: counting sort by end position
    ecount = cdb_calloc(nc + 2, sizeof *ecount);
    eidx = cdb_malloc((nn + 1) * sizeof *eidx);
    oom |= !ecount || !eidx;
    for (size_t i = 0; !oom && i < nn; i++) ecount[nd[i].pos + nd[i].len + 1]++;
    for (size_t p = 1; !oom && p <= nc + 1; p++) ecount[p] += ecount[p - 1];
    for (size_t i = 0; !oom && i < nn; i++) eidx[ecount[nd[i].pos + nd[i].len]++] = i;
    // ecount[p] is now the end of end_nodes[p]; its start is ecount[p - 1] (0 for p = 0)
    int32_t eos_prev = -1;
    for (size_t p = 0; !oom && p <= nc; p++) { // viterbi: rnode = each node beginning at p
        size_t e0 = p ? ecount[p - 1] : 0, e1 = ecount[p];
        size_t r0 = p < nc ? begin[p] : 0, r1 = p < nc ? begin[p + 1] : 1;
        for (size_t r = r0; r < r1; r++) {
            double rs = p < nc ? nd[r].score : 0, best = 0;
            int32_t bi = -2; /* -2: none yet, -1: the start node */
            if (p == 0) best = 0 + rs, bi = -1;
            for (size_t j = e0; j < e1; j++) {
                double sc = nd[eidx[j]].bt + rs;
                if (bi == -2 || sc > best) best = sc, bi = (int32_t)eidx[j];
            }
            if (p == nc)
                eos_prev = bi; // the end node
            else
                nd[r].prev = bi, nd[r].bt = best;
        }
    }
    if (!oom) {
        size_t cnt = 0;
        for (int32_t i = eos_prev; i >= 0; i = nd[i].prev) cnt++;
        size_t *path = cdb_malloc((cnt + 1) * sizeof *path);
        if (!path) oom = 1;
        size_t k = cnt;
        for (int32_t i = eos_prev; path && i >= 0; i = nd[i].prev) path[--k] = (size_t)i;
        for (size_t i = 0; path && i < cnt; i++) {
            const lnode *x = &nd[path[i]];
            hf_list_add(out, s + at[x->pos], at[x->pos + x->len] - at[x->pos]);
        }
        cdb_free(path);
    }
    if (oom) out->oom = 1;
    cdb_free(at);
    cdb_free(nd);
    cdb_free(begin);
    cdb_free(ecount);
    cdb_free(eidx);
}

/* ---- WordPiece ------------------------------------------------------------------------- */

static void wordpiece_encode(const hf_model *m, const char *s, size_t n, hf_list *out) {
    size_t nc = 0;
    for (size_t i = 0; i < n; nc++) {
        uint32_t c;
        i += hf_utf8_next(s + i, n - i, &c);
    }
    if ((long)nc > m->max_chars) {
        hf_list_add(out, m->unk ? m->unk : "", m->unk ? strlen(m->unk) : 0);
        return;
    }
    hf_list sub = {0};
    hf_buf t = {0};
    size_t pn = strlen(m->prefix), start = 0;
    int unknown = 0;
    while (start < n) {
        size_t end = n, found = 0;
        while (end > start) {
            t.n = 0;
            if (start > 0) hf_buf_add(&t, m->prefix, pn);
            hf_buf_add(&t, s + start, end - start);
            if (!t.oom && has_token(m, t.p, t.n)) {
                found = 1;
                break;
            }
            do end--;
            while (end > start && ((uint8_t)s[end] & 0xC0) == 0x80);
        }
        if (!found) {
            unknown = 1;
            break;
        }
        hf_list_add(&sub, t.p, t.n);
        start = end;
    }
    if (unknown)
        hf_list_add(out, m->unk ? m->unk : "", m->unk ? strlen(m->unk) : 0);
    else
        for (size_t i = 0; i < sub.n; i++) hf_list_add(out, HF_PIECE(&sub, i), HF_PLEN(&sub, i));
    out->oom |= sub.oom | t.oom;
    hf_list_free(&sub);
    hf_buf_free(&t);
}

/* ---- the model step ---------------------------------------------------------------------- */

#define ABSENT INT64_MIN

static int64_t id_or_absent(const hf_model *m, const char *s, size_t n) {
    int32_t v;
    return hf_map_get(m->tokens, s, n, &v) ? v : ABSENT;
}

/* The reference's fuse_unk: a run of unknown pieces joins the first of them (or is
** dropped after a piece that is the unknown token itself). */
static void fuse_unk(const hf_model *m, const hf_list *in, hf_list *out) {
    int64_t unk = m->unk_id >= 0 ? m->unk_id : ABSENT;
    hf_buf cur = {0};
    size_t i = 0;
    while (i < in->n) {
        cur.n = 0;
        hf_buf_add(&cur, HF_PIECE(in, i), HF_PLEN(in, i));
        int64_t id = id_or_absent(m, HF_PIECE(in, i), HF_PLEN(in, i));
        if (id == ABSENT) id = unk;
        if (id != unk) {
            hf_list_add(out, cur.p, cur.n);
            i++;
            continue;
        }
        while (++i < in->n) {
            int64_t nx = id_or_absent(m, HF_PIECE(in, i), HF_PLEN(in, i));
            if ((nx == ABSENT ? unk : nx) != unk) break;
            if (id_or_absent(m, cur.p ? cur.p : "", cur.n) != unk)
                hf_buf_add(&cur, HF_PIECE(in, i), HF_PLEN(in, i));
        }
        hf_list_add(out, cur.p ? cur.p : "", cur.n);
    }
    out->oom |= cur.oom;
    hf_buf_free(&cur);
}

void hf_model_apply(const hf_model *m, const hf_list *in, hf_list *out) {
    hf_list t = {0};
    hf_list *dst = m->fuse_unk ? &t : out;
    for (size_t i = 0; i < in->n; i++) {
        const char *s = HF_PIECE(in, i);
        size_t n = HF_PLEN(in, i);
        if (m->type == M_BPE)
            bpe_encode(m, s, n, dst);
        else if (m->type == M_UNIGRAM)
            unigram_encode(m, s, n, dst);
        else
            wordpiece_encode(m, s, n, dst);
    }
    if (m->fuse_unk) {
        fuse_unk(m, &t, out);
        out->oom |= t.oom;
        hf_list_free(&t);
    }
}
