/*
** tokenizer.c: CLIP's byte-level BPE tokenizer, identical to OpenAI CLIP's
** simple_tokenizer.py (the cleaning step lives in text_clean.c).
**
** Vocabularies: OpenAI's bpe_simple_vocab_16e6.txt.gz (a header line, then merges;
** only lines 1..48894 are used, as `merges[1:49152-256-2+1]`; the vocabulary is
** the 256 byte symbols, the same with "</w>", one token per merge, then
** <|startoftext|> and <|endoftext|>), or the Hugging Face layout vocab.json +
** merges.txt (ids and special tokens from vocab.json).
**
** Encoding: cleaned, lowercased text -> the pre-tokenization pattern
**   <\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+
** (IGNORECASE) -> UTF-8 bytes mapped through bytes_to_unicode -> BPE merges by
** rank with "</w>" on the last symbol -> ids. BPE runs on symbol ids with pairs
** bucketed by rank, merging one rank at a time left to right exactly as the
** reference's "merge every occurrence of the best pair" loop does, in about
** O(n log n) per word instead of the reference's quadratic time.
**
** A cdb_tok_bpe is immutable after cdb_tok_bpe_open (no per-word cache), so threads may
** share it without locks.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <jansson.h>
#include <zlib.h>

#include "encoder/tok_int.h"

/* merges[1:49152-256-2+1]: OpenAI's and Hugging Face's CLIP both stop here. */
#define TOK_MAX_MERGES (49152 - 256 - 2)
#define TOK_SOT "<|startoftext|>"
#define TOK_EOT "<|endoftext|>"

/* An id with no string (a hole in a vocab.json's ids). */
#define TOK_HOLE UINT32_MAX

/* Every table is a flat array, so that the tokenizer cache (tokcache.c) can keep them in
** a file and an open can map them instead of building them (cdb_tok_bpe_from_tables). */
struct cdb_tok_bpe {
    cdb_tok_bpe_dims d; /* counts, special and byte ids, table sizes (d.arena_bytes: once
                           built) */
    uint32_t *str;     /* id -> offset of its NUL-terminated string in arena, or TOK_HOLE */
    char *arena;       /* storage of the strings */
    size_t arena_used, arena_cap;
    uint32_t *hslot;   /* string hash: id + 1, 0 = empty */
    uint32_t *hfull;   /* the string's hash, per slot (skips most strcmp) */
    uint64_t *mkey;    /* merge hash: (left id << 32 | right id) + 1, 0 = empty */
    int32_t *mrank, *mres;
    int borrowed;      /* the tables are not ours (cdb_tok_bpe_from_tables) */
    void *map;         /* ... and live in this mapping, munmap'ed at free (or NULL) */
    size_t map_size;
};

/* ---- small helpers ------------------------------------------------------------ */

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c *= 2;
    return c;
}

/* bytes_to_unicode(): byte b -> code point, and the order of the first 256 ids. */
static void bytes_to_unicode(uint32_t cp_of[256], int order[256]) {
    int n = 0, extra = 0;
    for (int b = '!'; b <= '~'; b++) order[n++] = b;
    for (int b = 0xA1; b <= 0xAC; b++) order[n++] = b;
    for (int b = 0xAE; b <= 0xFF; b++) order[n++] = b;
    for (int b = 0; b < 256; b++) cp_of[b] = (uint32_t)b;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        if (!printable) {
            order[n++] = b;
            cp_of[b] = 256u + (uint32_t)extra++;
        }
    }
}

static int tok_lookup(const cdb_tok_bpe *t, const char *s, size_t n) {
    uint64_t full = cdb_fnv1a64(s, n);
    size_t mask = t->d.hcap - 1, h = (size_t)full & mask;
    for (;;) {
        uint32_t v = t->hslot[h];
        if (!v) return -1;
        if (t->hfull[h] == (uint32_t)(full >> 32)) {
            const char *c = t->arena + t->str[v - 1];
            if (!memcmp(c, s, n) && c[n] == 0) return (int)v - 1;
        }
        h = (h + 1) & mask;
    }
}

/* Inserts id for its string; a later id with the same string wins, as in
** Python's dict(zip(vocab, range(len(vocab)))). */
static void tok_insert(cdb_tok_bpe *t, int id) {
    const char *s = t->arena + t->str[id];
    size_t n = strlen(s), mask = t->d.hcap - 1;
    uint64_t full = cdb_fnv1a64(s, n);
    size_t h = (size_t)full & mask;
    for (;;) {
        uint32_t v = t->hslot[h];
        if (!v || (t->hfull[h] == (uint32_t)(full >> 32) && !strcmp(t->arena + t->str[v - 1], s))) {
            t->hslot[h] = (uint32_t)id + 1;
            t->hfull[h] = (uint32_t)(full >> 32);
            return;
        }
        h = (h + 1) & mask;
    }
}

/* The offset of a copy of s[0..n) in the arena (sized up front by tok_alloc). */
static uint32_t arena_add(cdb_tok_bpe *t, const char *s, size_t n) {
    uint32_t at = (uint32_t)t->arena_used;
    memcpy(t->arena + at, s, n);
    t->arena[at + n] = 0;
    t->arena_used += n + 1;
    return at;
}

static void merge_insert(cdb_tok_bpe *t, int a, int b, int rank, int res) {
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t mask = t->d.mcap - 1, h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & mask;
    for (;;) {
        if (!t->mkey[h] || t->mkey[h] == key) { // later duplicates win, as in dict()
            t->mkey[h] = key;
            t->mrank[h] = rank;
            t->mres[h] = res;
            return;
        }
        h = (h + 1) & mask;
    }
}

/* Rank and result of merging ids (a, b); 0 when there is no such merge. */
static int merge_find(const cdb_tok_bpe *t, int a, int b, int32_t *rank, int32_t *res) {
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t mask = t->d.mcap - 1, h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & mask;
    for (;;) {
        uint64_t k = t->mkey[h];
        if (!k) return 0;
        if (k == key) {
            *rank = t->mrank[h];
            *res = t->mres[h];
            return 1;
        }
        h = (h + 1) & mask;
    }
}

void cdb_tok_bpe_free(cdb_tok_bpe *t) {
    if (!t) return;
    if (t->borrowed) {
        if (t->map) munmap(t->map, t->map_size);
        cdb_free(t);
        return;
    }
    cdb_free(t->str);
    cdb_free(t->arena);
    cdb_free(t->hslot);
    cdb_free(t->hfull);
    cdb_free(t->mkey);
    cdb_free(t->mrank);
    cdb_free(t->mres);
    cdb_free(t);
}

/* ---- reading files ------------------------------------------------------------ */

/* Reads a (possibly gzip-compressed) file, stopping once max_lines newlines have
** been read (0: whole file). *out is NUL-terminated; cdb_free it. */
static cdb_status read_text(const char *path, size_t max_lines, char **out, size_t *n_out) {
    cdb_status rc = CDB_OK;
    size_t cap = 1 << 20, n = 0, lines = 0;
    char *buf = NULL;
    struct stat st;
    gzFile gz = NULL;
    *out = NULL;
    if (stat(path, &st) != 0)
        return cdb_seterr(errno == ENOENT ? CDB_NOTFOUND : CDB_IO, "tokenizer: %s: %s", path,
                          strerror(errno));
    if (S_ISDIR(st.st_mode)) return cdb_seterr(CDB_INVALID, "tokenizer: %s is a directory", path);
    gz = gzopen(path, "rb"); // reads plain files transparently
    if (!gz) return cdb_seterr(CDB_IO, "tokenizer: cannot open %s: %s", path, strerror(errno));
    gzbuffer(gz, 1 << 17);
    if (!(buf = cdb_malloc(cap + 1))) goto nomem;
    for (;;) {
        if (cap - n < (1 << 16)) {
            char *nb = cdb_realloc(buf, cap * 2 + 1);
            if (!nb) goto nomem;
            buf = nb;
            cap *= 2;
        }
        int got = gzread(gz, buf + n, (unsigned)(cap - n < (1u << 30) ? cap - n : (1u << 30)));
        if (got < 0) {
            int e = 0;
            const char *m = gzerror(gz, &e);
            rc = cdb_seterr(CDB_CORRUPT, "tokenizer: %s: %s", path, m ? m : "read error");
            goto done;
        }
        if (got == 0) break;
        if (max_lines) {
            for (size_t i = n; i < n + (size_t)got; i++)
                if (buf[i] == '\n' && ++lines >= max_lines) {
                    n = i + 1;
                    goto enough;
                }
        }
        n += (size_t)got;
    }
    // zlib reports a gzip stream cut short as Z_BUF_ERROR after handing out the
    // data it had, so a clean-looking end of file must be checked here.
    int zerr = Z_OK;
    gzerror(gz, &zerr);
    if (!gzeof(gz) || zerr != Z_OK) {
        rc = cdb_seterr(CDB_CORRUPT, "tokenizer: %s: truncated or corrupt gzip data", path);
        goto done;
    }
enough:
    buf[n] = 0;
    *out = buf;
    *n_out = n;
    buf = NULL;
    goto done;
nomem:
    rc = cdb_seterr(CDB_NOMEM, "tokenizer: out of memory reading %s", path);
done:
    if (gz) gzclose(gz);
    cdb_free(buf);
    return rc;
}

/* ---- building a tokenizer ---------------------------------------------------- */

typedef struct merge_line {
    const char *a, *b; /* NUL-terminated, inside the file buffer */
    size_t la, lb;
} merge_line;

/* Splits merge lines in place; skip_first drops the header line. Lines beyond
** TOK_MAX_MERGES are ignored. Returns the merges in *out (cdb_free). */
static cdb_status parse_merges(char *buf, size_t n, const char *path, int skip_first,
                               merge_line **out, int *n_out) {
    merge_line *m = NULL;
    int nm = 0, line = 0;
    size_t pos = 0;
    if (!(m = cdb_malloc(sizeof *m * TOK_MAX_MERGES)))
        return cdb_seterr(CDB_NOMEM, "tokenizer: out of memory");
    while (pos < n && nm < TOK_MAX_MERGES) {
        char *s = buf + pos, *e = memchr(s, '\n', n - pos);
        size_t len = e ? (size_t)(e - s) : n - pos;
        pos += len + 1;
        line++;
        if (line == 1 && skip_first) continue;
        if (len && s[len - 1] == '\r') len--;
        s[len] = 0;
        if (len == 0) {
            if (pos >= n) break; // trailing newline at the end of the file
            cdb_free(m);
            return cdb_seterr(CDB_CORRUPT, "tokenizer: %s line %d: empty merge line", path, line);
        }
        char *sp = memchr(s, ' ', len);
        if (!sp || sp == s || sp == s + len - 1 || memchr(sp + 1, ' ', (size_t)(s + len - sp - 1))) {
            cdb_free(m);
            return cdb_seterr(CDB_CORRUPT, "tokenizer: %s line %d: expected \"left right\"",
                              path, line);
        }
        *sp = 0;
        m[nm].a = s;
        m[nm].la = (size_t)(sp - s);
        m[nm].b = sp + 1;
        m[nm].lb = len - m[nm].la - 1;
        nm++;
    }
    *out = m;
    *n_out = nm;
    return CDB_OK;
}

static cdb_status tok_alloc(cdb_tok_bpe *t, int n_vocab, size_t arena_bytes, int n_merges) {
    t->d.n_vocab = n_vocab;
    if (arena_bytes > TOK_HOLE)
        return cdb_seterr(CDB_CORRUPT, "tokenizer: over 4 GB of token strings");
    t->str = cdb_malloc((size_t)n_vocab * sizeof *t->str);
    if (t->str) memset(t->str, 0xff, (size_t)n_vocab * sizeof *t->str); /* TOK_HOLE */
    t->arena_cap = arena_bytes;
    t->arena = cdb_malloc(arena_bytes);
    t->d.hcap = pow2_at_least((size_t)n_vocab * 2);
    t->hslot = cdb_calloc(t->d.hcap, sizeof *t->hslot);
    t->hfull = cdb_malloc(t->d.hcap * sizeof *t->hfull);
    t->d.mcap = pow2_at_least((size_t)n_merges * 2 + 2);
    t->mkey = cdb_calloc(t->d.mcap, sizeof *t->mkey);
    t->mrank = cdb_malloc(t->d.mcap * sizeof *t->mrank);
    t->mres = cdb_malloc(t->d.mcap * sizeof *t->mres);
    if (!t->str || !t->arena || !t->hslot || !t->hfull || !t->mkey || !t->mrank || !t->mres)
        return cdb_seterr(CDB_NOMEM, "tokenizer: out of memory");
    return CDB_OK;
}

/* Byte symbols (with and without "</w>"), merges, special tokens: ids by string
** lookup, so both layouts share this. Every symbol BPE can produce must exist. */
static cdb_status tok_link(cdb_tok_bpe *t, const merge_line *m, int nm, const char *path) {
    uint32_t cp_of[256];
    int order[256];
    char sym[16];
    bytes_to_unicode(cp_of, order);
    for (int b = 0; b < 256; b++) {
        size_t k = cdb_tok_utf8_put(cp_of[b], sym);
        t->d.byte_id[b] = tok_lookup(t, sym, k);
        memcpy(sym + k, "</w>", 4);
        t->d.byte_id_w[b] = tok_lookup(t, sym, k + 4);
        if (t->d.byte_id[b] < 0 || t->d.byte_id_w[b] < 0)
            return cdb_seterr(CDB_CORRUPT, "tokenizer: %s: vocabulary lacks the symbol for byte 0x%02x",
                              path, b);
    }
    char *cat = NULL;
    size_t cat_cap = 0;
    for (int r = 0; r < nm; r++) {
        size_t need = m[r].la + m[r].lb + 1;
        if (need > cat_cap) {
            char *nc = cdb_realloc(cat, need * 2);
            if (!nc) {
                cdb_free(cat);
                return cdb_seterr(CDB_NOMEM, "tokenizer: out of memory");
            }
            cat = nc;
            cat_cap = need * 2;
        }
        memcpy(cat, m[r].a, m[r].la);
        memcpy(cat + m[r].la, m[r].b, m[r].lb);
        int a = tok_lookup(t, m[r].a, m[r].la), b = tok_lookup(t, m[r].b, m[r].lb);
        int res = tok_lookup(t, cat, m[r].la + m[r].lb);
        if (res < 0) {
            cat[m[r].la + m[r].lb] = 0;
            cdb_status rc = cdb_seterr(CDB_CORRUPT,
                                       "tokenizer: %s: merge %d (\"%s %s\") gives \"%s\", which "
                                       "is not in the vocabulary", path, r + 1, m[r].a, m[r].b, cat);
            cdb_free(cat);
            return rc;
        }
        // A merge whose halves are not tokens can never apply; skip it.
        if (a >= 0 && b >= 0) merge_insert(t, a, b, r, res);
    }
    cdb_free(cat);
    t->d.n_merges = nm;
    t->d.sot = tok_lookup(t, TOK_SOT, strlen(TOK_SOT));
    t->d.eot = tok_lookup(t, TOK_EOT, strlen(TOK_EOT));
    if (t->d.sot < 0 || t->d.eot < 0)
        return cdb_seterr(CDB_CORRUPT, "tokenizer: %s: vocabulary lacks %s or %s", path, TOK_SOT,
                          TOK_EOT);
    return CDB_OK;
}

/* OpenAI layout: the vocabulary is implied by the merges. */
static cdb_status open_bpe_file(const char *path, cdb_tok_bpe *t) {
    char *buf = NULL;
    size_t n = 0;
    merge_line *m = NULL;
    int nm = 0;
    cdb_status rc;
    uint32_t cp_of[256];
    int order[256];
    char sym[16];
    if ((rc = read_text(path, TOK_MAX_MERGES + 1, &buf, &n)) != CDB_OK) goto done;
    if ((rc = parse_merges(buf, n, path, 1, &m, &nm)) != CDB_OK) goto done;
    if (nm == 0) {
        rc = cdb_seterr(CDB_CORRUPT, "tokenizer: %s: no merges (not a BPE merges file?)", path);
        goto done;
    }
    size_t arena = 512 * 8 + 64;
    for (int r = 0; r < nm; r++) arena += m[r].la + m[r].lb + 1;
    if ((rc = tok_alloc(t, 512 + nm + 2, arena, nm)) != CDB_OK) goto done;
    bytes_to_unicode(cp_of, order);
    for (int i = 0; i < 256; i++) {
        size_t k = cdb_tok_utf8_put(cp_of[order[i]], sym);
        t->str[i] = arena_add(t, sym, k);
        memcpy(sym + k, "</w>", 4);
        t->str[256 + i] = arena_add(t, sym, k + 4);
    }
    for (int r = 0; r < nm; r++) {
        char *d = t->arena + t->arena_used;
        memcpy(d, m[r].a, m[r].la);
        memcpy(d + m[r].la, m[r].b, m[r].lb);
        d[m[r].la + m[r].lb] = 0;
        t->str[512 + r] = (uint32_t)t->arena_used;
        t->arena_used += m[r].la + m[r].lb + 1;
    }
    t->str[512 + nm] = arena_add(t, TOK_SOT, strlen(TOK_SOT));
    t->str[513 + nm] = arena_add(t, TOK_EOT, strlen(TOK_EOT));
    for (int i = 0; i < t->d.n_vocab; i++) tok_insert(t, i);
    rc = tok_link(t, m, nm, path);
done:
    cdb_free(m);
    cdb_free(buf);
    return rc;
}

/* Hugging Face layout: vocab.json (token -> id) + merges.txt. */
static cdb_status open_hf(const char *vocab_path, const char *merges_path, cdb_tok_bpe *t) {
    char *mbuf = NULL;
    size_t mn = 0;
    merge_line *m = NULL;
    int nm = 0, max_id = -1;
    cdb_status rc = CDB_OK;
    json_error_t jerr;
    json_t *root = json_load_file(vocab_path, 0, &jerr);
    const char *key;
    json_t *val;
    if (!root) {
        struct stat st;
        if (stat(vocab_path, &st) != 0)
            return cdb_seterr(errno == ENOENT ? CDB_NOTFOUND : CDB_IO, "tokenizer: %s: %s",
                              vocab_path, strerror(errno));
        return cdb_seterr(CDB_CORRUPT, "tokenizer: %s line %d: %s", vocab_path, jerr.line,
                          jerr.text);
    }
    if (!json_is_object(root) || json_object_size(root) == 0) {
        rc = cdb_seterr(CDB_CORRUPT, "tokenizer: %s: expected a non-empty {token: id} object",
                        vocab_path);
        goto done;
    }
    size_t arena = 64;
    json_object_foreach(root, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 ||
            json_integer_value(val) >= (1 << 24)) {
            rc = cdb_seterr(CDB_CORRUPT, "tokenizer: %s: token \"%s\" has no valid id", vocab_path,
                            key);
            goto done;
        }
        if ((int)json_integer_value(val) > max_id) max_id = (int)json_integer_value(val);
        arena += strlen(key) + 1;
    }
    if ((rc = read_text(merges_path, 0, &mbuf, &mn)) != CDB_OK) goto done;
    // HF skips the "#version: 0.2" header line; a file without one loses nothing.
    if ((rc = parse_merges(mbuf, mn, merges_path, mn > 0 && mbuf[0] == '#', &m, &nm)) != CDB_OK)
        goto done;
    if ((rc = tok_alloc(t, max_id + 1, arena, nm)) != CDB_OK) goto done;
    json_object_foreach(root, key, val) {
        int id = (int)json_integer_value(val);
        if (t->str[id] != TOK_HOLE) {
            rc = cdb_seterr(CDB_CORRUPT, "tokenizer: %s: id %d used twice", vocab_path, id);
            goto done;
        }
        t->str[id] = arena_add(t, key, strlen(key));
    }
    for (int i = 0; i < t->d.n_vocab; i++)
        if (t->str[i] != TOK_HOLE) tok_insert(t, i);
    rc = tok_link(t, m, nm, merges_path);
done:
    json_decref(root);
    cdb_free(m);
    cdb_free(mbuf);
    return rc;
}

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int cdb_tok_bpe_sources(const char *path, char files[2][4096], int *n) {
    struct stat st;
    size_t len = strlen(path);
    *n = 0;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(files[0], 4096, "%s/vocab.json", path);
        if (file_exists(files[0])) {
            *n = 2;
            return snprintf(files[1], 4096, "%s/merges.txt", path) >= 4096 ? -1 : 0;
        }
        *n = 1;
        if (snprintf(files[0], 4096, "%s/bpe_simple_vocab_16e6.txt.gz", path) >= 4096) return -1;
        return file_exists(files[0]) ? 0 : -1;
    }
    if (len >= 5 && !strcmp(path + len - 5, ".json")) {
        const char *slash = strrchr(path, '/');
        int dir = slash ? (int)(slash - path) : 0;
        *n = 2;
        if (snprintf(files[0], 4096, "%s", path) >= 4096) return -1;
        if (slash) return snprintf(files[1], 4096, "%.*s/merges.txt", dir, path) >= 4096 ? -1 : 0;
        snprintf(files[1], 4096, "merges.txt");
        return 0;
    }
    *n = 1;
    return snprintf(files[0], 4096, "%s", path) >= 4096 ? -1 : 0;
}

cdb_status cdb_tok_bpe_open(const char *path, cdb_tok_bpe **out) {
    cdb_status rc;
    cdb_tok_bpe *t = NULL;
    char files[2][4096];
    int n = 0;
    if (!out) return cdb_seterr(CDB_INVALID, "cdb_tok_open: out is NULL");
    *out = NULL;
    if (!path || !*path) return cdb_seterr(CDB_INVALID, "cdb_tok_open: empty path");
    if (cdb_tok_bpe_sources(path, files, &n) != 0) {
        if (n == 1 && strlen(path) < 4000)
            return cdb_seterr(CDB_NOTFOUND, "tokenizer: %s has neither vocab.json + merges.txt "
                              "nor bpe_simple_vocab_16e6.txt.gz", path);
        return cdb_seterr(CDB_INVALID, "tokenizer: path too long: %.200s...", path);
    }
    if (!(t = cdb_calloc(1, sizeof *t))) return cdb_seterr(CDB_NOMEM, "tokenizer: out of memory");
    rc = n == 2 ? open_hf(files[0], files[1], t) : open_bpe_file(files[0], t);
    if (rc != CDB_OK) cdb_tok_bpe_free(t);
    else *out = t;
    return rc;
}

void cdb_tok_bpe_tables_of(const cdb_tok_bpe *t, cdb_tok_bpe_tables *out) {
    out->d = t->d;
    out->d.arena_bytes = t->arena_used;
    out->str = t->str;
    out->arena = t->arena;
    out->hslot = t->hslot;
    out->hfull = t->hfull;
    out->mkey = t->mkey;
    out->mrank = t->mrank;
    out->mres = t->mres;
}

static int is_pow2_in(uint64_t v, uint64_t lo, uint64_t hi) {
    return v >= lo && v <= hi && (v & (v - 1)) == 0;
}

static int is_id(const cdb_tok_bpe_tables *tb, int64_t id) {
    return id >= 0 && id < tb->d.n_vocab;
}

/* Every bound the encoder relies on (see cdb_tok_bpe_from_tables in tok_int.h); proven:
** only those that cost no pass over a table. */
static const char *tables_invalid(const cdb_tok_bpe_tables *tb, int proven) {
    size_t empty = 0;
    if (tb->d.n_vocab < 1 || tb->d.n_vocab > (1 << 24) || tb->d.n_merges < 0) return "counts";
    if (tb->d.arena_bytes < 1 || tb->d.arena_bytes >= TOK_HOLE ||
        tb->arena[tb->d.arena_bytes - 1])
        return "string arena";
    if (!is_pow2_in(tb->d.hcap, 16, 1u << 26) || !is_pow2_in(tb->d.mcap, 16, 1u << 26))
        return "hash table sizes";
    if (!is_id(tb, tb->d.sot) || !is_id(tb, tb->d.eot)) return "special tokens";
    for (int b = 0; b < 256; b++)
        if (!is_id(tb, tb->d.byte_id[b]) || !is_id(tb, tb->d.byte_id_w[b])) return "byte symbols";
    if (proven) return NULL;
    for (int i = 0; i < tb->d.n_vocab; i++)
        if (tb->str[i] != TOK_HOLE && tb->str[i] >= tb->d.arena_bytes) return "string offsets";
    for (uint64_t h = 0; h < tb->d.hcap; h++) {
        uint32_t v = tb->hslot[h];
        if (!v) empty++;
        else if (v > (uint32_t)tb->d.n_vocab || tb->str[v - 1] == TOK_HOLE) return "token hash";
    }
    if (!empty) return "token hash (full)"; /* a lookup would never end */
    empty = 0;
    for (uint64_t h = 0; h < tb->d.mcap; h++) {
        if (!tb->mkey[h]) empty++;
        else if (!is_id(tb, tb->mres[h])) return "merge hash";
    }
    return empty ? NULL : "merge hash (full)";
}

cdb_status cdb_tok_bpe_from_tables(const cdb_tok_bpe_tables *tb, int proven, void *map,
                                   size_t map_size, cdb_tok_bpe **out) {
    const char *bad = tables_invalid(tb, proven);
    cdb_tok_bpe *t;
    *out = NULL;
    if (bad) return cdb_seterr(CDB_CORRUPT, "tokenizer tables: bad %s", bad);
    if (!(t = cdb_calloc(1, sizeof *t))) return cdb_seterr(CDB_NOMEM, "tokenizer: out of memory");
    t->d = tb->d;
    /* borrowed, read-only: nothing writes a table after an open */
    t->str = (uint32_t *)tb->str;
    t->arena = (char *)tb->arena;
    t->arena_used = t->arena_cap = (size_t)tb->d.arena_bytes;
    t->hslot = (uint32_t *)tb->hslot;
    t->hfull = (uint32_t *)tb->hfull;
    t->mkey = (uint64_t *)tb->mkey;
    t->mrank = (int32_t *)tb->mrank;
    t->mres = (int32_t *)tb->mres;
    t->borrowed = 1;
    t->map = map;
    t->map_size = map_size;
    *out = t;
    return CDB_OK;
}

int cdb_tok_bpe_vocab_size(const cdb_tok_bpe *t) { return t ? t->d.n_vocab : 0; }
int cdb_tok_bpe_sot_id(const cdb_tok_bpe *t) { return t ? t->d.sot : -1; }
int cdb_tok_bpe_eot_id(const cdb_tok_bpe *t) { return t ? t->d.eot : -1; }
const char *cdb_tok_bpe_token_str(const cdb_tok_bpe *t, int id) {
    return t && id >= 0 && id < t->d.n_vocab && t->str[id] != TOK_HOLE ? t->arena + t->str[id]
                                                                     : NULL;
}

/* ---- BPE --------------------------------------------------------------------- */

/* Work space of bpe_word, reused across the words of one encode call. Symbols form
** a doubly linked list over the word's bytes (a merged symbol keeps its left
** index). Each adjacency with a merge is recorded in the bucket of its rank, in
** creation order; a small heap orders the buckets by rank. A pass takes the bucket
** of the lowest rank, sorts its positions and merges them left to right, exactly
** as the reference merges every occurrence of its best pair; pairs created by the
** pass land in other buckets and wait for later passes, as in the reference. */
typedef struct bpe_bucket {
    int32_t rank, head, tail; /* list of nodes, -1 terminated */
    int32_t queued;           /* in the heap */
} bpe_bucket;

typedef struct bpe_node {
    int32_t pos, next;
} bpe_node;

typedef struct bpe_ws {
    int32_t *id, *next, *prev;
    size_t cap;
    bpe_node *node;
    size_t n_node, cap_node;
    bpe_bucket *bk;
    size_t n_bk, cap_bk;
    int32_t *slot; /* rank hash: bucket index + 1, 0 = empty */
    size_t cap_slot, n_slot; /* allocated; used by the current word (power of 2) */
    int32_t *heap; /* bucket indices, min-heap by rank */
    size_t n_heap, cap_heap;
    int32_t *batch; /* positions of the current pass */
    size_t cap_batch;
} bpe_ws;

int cdb_tok_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = cdb_realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static void heap_push(bpe_ws *w, int32_t b) {
    size_t i = w->n_heap++;
    int32_t r = w->bk[b].rank;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (w->bk[w->heap[p]].rank <= r) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = b;
}

static int32_t heap_pop(bpe_ws *w) {
    int32_t top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    int32_t r = w->bk[last].rank;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && w->bk[w->heap[c + 1]].rank < w->bk[w->heap[c]].rank) c++;
        if (w->bk[w->heap[c]].rank >= r) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

/* Records the pair that starts at symbol p, if it has a merge. */
static int note_pair(const cdb_tok_bpe *t, bpe_ws *w, int32_t p) {
    int32_t q = w->next[p], rank, res;
    if (q < 0 || !merge_find(t, w->id[p], w->id[q], &rank, &res)) return 0;
    size_t mask = w->n_slot - 1, h = ((uint32_t)rank * 2654435761u) & mask;
    while (w->slot[h] && w->bk[w->slot[h] - 1].rank != rank) h = (h + 1) & mask;
    int32_t b = w->slot[h] - 1;
    if (b < 0) {
        if (cdb_tok_grow((void **)&w->bk, &w->cap_bk, w->n_bk + 1, sizeof *w->bk) ||
            cdb_tok_grow((void **)&w->heap, &w->cap_heap, w->n_bk + 1, sizeof *w->heap))
            return -1;
        b = (int32_t)w->n_bk++;
        w->bk[b] = (bpe_bucket){rank, -1, -1, 0};
        w->slot[h] = b + 1;
    }
    if (cdb_tok_grow((void **)&w->node, &w->cap_node, w->n_node + 1, sizeof *w->node)) return -1;
    int32_t nd = (int32_t)w->n_node++;
    w->node[nd] = (bpe_node){p, -1};
    if (w->bk[b].tail >= 0) w->node[w->bk[b].tail].next = nd;
    else w->bk[b].head = nd;
    w->bk[b].tail = nd;
    if (!w->bk[b].queued) {
        w->bk[b].queued = 1;
        heap_push(w, b);
    }
    return 0;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* BPE of one pre-token (its UTF-8 bytes); appends the ids (counting past max_ids). */
static int bpe_word(const cdb_tok_bpe *t, bpe_ws *w, const uint8_t *bytes, size_t n,
                    int32_t *ids, int max_ids, int *count) {
    // Distinct ranks <= pairs ever formed <= 2n; keep the rank hash at most half full.
    size_t slots = 16;
    while (slots < 4 * n) slots *= 2;
    if (cdb_tok_grow((void **)&w->id, &w->cap, n, sizeof *w->id)) return -1;
    size_t cap = w->cap;
    int32_t *a = cdb_realloc(w->next, cap * sizeof *a);
    if (!a) return -1;
    w->next = a;
    if (!(a = cdb_realloc(w->prev, cap * sizeof *a))) return -1;
    w->prev = a;
    if (slots > w->cap_slot) {
        cdb_free(w->slot);
        if (!(w->slot = cdb_malloc(slots * sizeof *w->slot))) {
            w->cap_slot = 0;
            return -1;
        }
        w->cap_slot = slots;
    }
    w->n_slot = slots; // not cap_slot: a short word after a long one stays cheap
    memset(w->slot, 0, slots * sizeof *w->slot);
    w->n_node = w->n_bk = w->n_heap = 0;
    for (size_t i = 0; i < n; i++) {
        w->id[i] = i + 1 == n ? t->d.byte_id_w[bytes[i]] : t->d.byte_id[bytes[i]];
        w->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        w->prev[i] = (int32_t)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++)
        if (note_pair(t, w, (int32_t)i)) return -1;
    while (w->n_heap) {
        int32_t b = heap_pop(w);
        size_t k = 0;
        int sorted = 1;
        for (int32_t nd = w->bk[b].head; nd >= 0; nd = w->node[nd].next) {
            if (cdb_tok_grow((void **)&w->batch, &w->cap_batch, k + 1, sizeof *w->batch)) return -1;
            w->batch[k] = w->node[nd].pos;
            if (k && w->batch[k] < w->batch[k - 1]) sorted = 0;
            k++;
        }
        w->bk[b].head = w->bk[b].tail = -1;
        w->bk[b].queued = 0;
        if (!sorted) qsort(w->batch, k, sizeof *w->batch, cmp_i32);
        int32_t rank = w->bk[b].rank, r, res;
        for (size_t j = 0; j < k; j++) {
            int32_t p = w->batch[j], q = w->id[p] >= 0 ? w->next[p] : -1;
            // stale: p was merged away, or its pair is no longer this rank's pair
            if (q < 0 || !merge_find(t, w->id[p], w->id[q], &r, &res) || r != rank) continue;
            w->id[p] = res;
            w->next[p] = w->next[q];
            if (w->next[q] >= 0) w->prev[w->next[q]] = p;
            w->id[q] = -1;
            if (w->prev[p] >= 0 && note_pair(t, w, w->prev[p])) return -1;
            if (note_pair(t, w, p)) return -1;
        }
    }
    for (int32_t p = 0; p >= 0; p = w->next[p]) {
        if (*count < max_ids) ids[*count] = w->id[p];
        (*count)++;
    }
    return 0;
}

static void bpe_ws_free(bpe_ws *w) {
    cdb_free(w->id);
    cdb_free(w->next);
    cdb_free(w->prev);
    cdb_free(w->node);
    cdb_free(w->bk);
    cdb_free(w->slot);
    cdb_free(w->heap);
    cdb_free(w->batch);
}

/* ---- pre-tokenization + encode ----------------------------------------------- */

/* IGNORECASE comparison with an ASCII lowercase pattern letter (simple case
** folding: U+017F LONG S folds to 's'; the text is already lowercased). */
static int ci_eq(uint32_t c, char p) {
    if (c == (uint32_t)p || (c >= 'A' && c <= 'Z' && c + 32 == (uint32_t)p)) return 1;
    return p == 's' && c == 0x17F;
}

static size_t match_lit(const uint32_t *s, size_t n, size_t i, const char *lit) {
    size_t k = 0;
    for (; lit[k]; k++)
        if (i + k >= n || !ci_eq(s[i + k], lit[k])) return 0;
    return k;
}

/* Encodes; stops early (count > max_ids known) when full == 0. */
static cdb_status encode_impl(const cdb_tok_bpe *t, const char *text, size_t len, int32_t *ids,
                              int max_ids, int full, int *n_ids) {
    static const char *const contractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    uint32_t *s = NULL;
    size_t n = 0;
    uint8_t *bytes = NULL;
    size_t bcap = 0;
    bpe_ws w = {0};
    int count = 0;
    cdb_status rc = cdb_tok_clean32(text, len, &s, &n);
    if (rc != CDB_OK) return rc;
    for (size_t i = 0; i < n && (full || count <= max_ids);) {
        size_t j = 0;
        int special = -1;
        uint32_t c = s[i];
        if (c == '<') {
            if ((j = match_lit(s, n, i, TOK_SOT))) special = t->d.sot;
            else if ((j = match_lit(s, n, i, TOK_EOT))) special = t->d.eot;
            // Only the exact lowercase spelling is in the reference's BPE cache;
            // a case-folded match (U+017F) is BPE-encoded like any word.
            if (special >= 0)
                for (size_t k = 0; k < j; k++)
                    if (s[i + k] >= 0x80) special = -1;
        } else if (c == '\'') {
            for (size_t k = 0; k < sizeof contractions / sizeof *contractions && !j; k++)
                j = match_lit(s, n, i, contractions[k]);
        }
        if (!j) {
            if (cdb_tok_is_letter(c)) {
                j = 1;
                while (i + j < n && cdb_tok_is_letter(s[i + j])) j++;
            } else if (cdb_tok_is_number(c)) {
                j = 1;
            } else if (!cdb_tok_is_space(c)) {
                j = 1;
                while (i + j < n && !cdb_tok_is_space(s[i + j]) && !cdb_tok_is_letter(s[i + j]) &&
                       !cdb_tok_is_number(s[i + j]))
                    j++;
            } else {
                i++; // whitespace between tokens
                continue;
            }
        }
        if (special >= 0) {
            if (count < max_ids) ids[count] = special;
            count++;
        } else {
            if (j * 4 > bcap) {
                bcap = j * 8;
                uint8_t *nb = cdb_realloc(bytes, bcap);
                if (!nb) goto nomem;
                bytes = nb;
            }
            size_t nb = 0;
            for (size_t k = 0; k < j; k++) nb += cdb_tok_utf8_put(s[i + k], (char *)bytes + nb);
            if (bpe_word(t, &w, bytes, nb, ids, max_ids, &count)) goto nomem;
        }
        i += j;
    }
    *n_ids = count;
    goto done;
nomem:
    rc = cdb_seterr(CDB_NOMEM, "cdb_tok_encode: out of memory");
done:
    bpe_ws_free(&w);
    cdb_free(bytes);
    cdb_free(s);
    return rc;
}

cdb_status cdb_tok_bpe_encode(const cdb_tok_bpe *t, const char *text, size_t len, int32_t *ids,
                          int max_ids, int *n_ids) {
    if (!t || !n_ids || (!text && len) || max_ids < 0 || (max_ids > 0 && !ids))
        return cdb_seterr(CDB_INVALID, "cdb_tok_encode: invalid argument");
    *n_ids = 0;
    return encode_impl(t, text ? text : "", len, ids, max_ids, 1, n_ids);
}

cdb_status cdb_tok_bpe_tokenize(const cdb_tok_bpe *t, const char *text, size_t len, int context_len,
                            int32_t *ids, int *eot_index, int *truncated) {
    int n = 0, keep = context_len - 2;
    cdb_status rc;
    if (!t || !ids || (!text && len))
        return cdb_seterr(CDB_INVALID, "cdb_tok_tokenize: invalid argument");
    if (context_len < 2)
        return cdb_seterr(CDB_INVALID, "cdb_tok_tokenize: context_len %d < 2", context_len);
    for (int i = 0; i < context_len; i++) ids[i] = 0;
    rc = encode_impl(t, text ? text : "", len, ids + 1, keep, 0, &n);
    if (rc != CDB_OK) return rc;
    int used = n < keep ? n : keep;
    ids[0] = t->d.sot;
    ids[used + 1] = t->d.eot;
    if (truncated) *truncated = n > keep;
    if (eot_index) {
        int e = used + 1;
        for (int i = 0; i <= used; i++)
            if (ids[i] == t->d.eot) {
                e = i;
                break;
            }
        *eot_index = e;
    }
    return CDB_OK;
}
