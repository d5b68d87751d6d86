/*
** copies.c: copies collapsed across `clipdb serve --peer` servers (issue 28 over issue
** 29's peers). Search results collapse copies as one database of every server's files
** would: the groups are those of `clipdb duplicates` over all of them (exact: the same
** content hash; near: phash AND the cosine of the stored vectors, never two shots).
**
** - A peer asked with "copy_facts": true gives each hit what the groups are decided by
**   (cdb_srv_copy_facts_json: content hash, phash, camera, capture time, and the stored
**   fp16 vector in base64, little-endian: the front computes the cosine in fp32 from the
**   same halves as the peer would).
** - POST /api/copies_of {"items": [facts...]} answers {"files": [{"id", "db",
**   "copy_facts"}], "near_counts": [...]}: every file of the server's databases that the
**   groups join to an item, directly or through its other files (cdb_engine_copies_of),
**   and per item the server's files whose phash is within the near bound of its own.
** - The front (cdb_srv_copies_closure): after the merge of the peers' hits, asks its own
**   databases and every peer for the copies of the hits' files, then of the files found,
**   until none is new (at most SRV_COPIES_ROUNDS rounds and SRV_COPIES_MAX_FILES files
**   past the hits; a peer is asked about that many at a time; stopped at one of them with
**   files not asked about, the answer says which: "copies_truncated", "copies_bound");
**   the hits and the files found are then grouped together
**   (cdb_engine_hits_collapse). A file that is no hit (another filter's, or ranked
**   lower) can join two hits and is a copy as one database would list it. A phash that
**   is crowded only over all the servers' files (the near counts summed, each file's
**   asked once; those left by a bound in a last, count-only request) is near nothing,
**   as in one database of them all; a peer's own closure may have joined through it:
**   the front's grouping, which drops its near pairs, decides.
**
** What a peer answers is untrusted: facts that are not well formed are dropped (the file
** is then never joined), vectors of another length or with a half that is not finite
** are not used, at most SRV_COPIES_MAX_FILES items are read from a request and kept from
** answers. Cost per collapsed search: one /api/copies_of per peer per round (each within
** the peer timeout; its body the facts of the files asked about, about 1.4 KB per file
** of a 512-d model), and on each server a look-up in its copy index (cdb_engine_copies_of).
*/
#include <stdlib.h>
#include <string.h>

#include "serve/serve_int.h"

/* ---- copy facts as JSON ------------------------------------------------------------- */

static void hex_of(const uint8_t *b, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

/* The n bytes of the 2n hex digits s (len chars): 0, or -1. */
static int bytes_of_hex(const char *s, size_t len, uint8_t *b, size_t n) {
    if (len != 2 * n) return -1;
    for (size_t i = 0; i < 2 * n; i++) {
        int c = s[i], v = c >= '0' && c <= '9'   ? c - '0'
                          : c >= 'a' && c <= 'f' ? c - 'a' + 10
                          : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                 : -1;
        if (v < 0) return -1;
        b[i / 2] = (uint8_t)(i % 2 ? b[i / 2] | v : v << 4);
    }
    return 0;
}

json_t *cdb_srv_copy_facts_json(const cdb_engine_copy_facts *f, int dim) {
    json_t *x = json_object();
    char hex[40], *b64;
    uint8_t ph[8], *le;
    if (f->has_hash) {
        hex_of(f->hash, sizeof f->hash, hex);
        json_object_set_new(x, "hash", json_string(hex));
    }
    for (int i = 0; i < 8; i++) ph[i] = (uint8_t)(f->phash >> (56 - 8 * i));
    hex_of(ph, 8, hex);
    json_object_set_new(x, "phash", f->has_phash ? json_string(hex) : json_null());
    json_object_set_new(x, "camera", cdb_srv_json_bytes(f->camera));
    json_object_set_new(x, "shot_ms", f->has_shot ? json_integer(f->shot_ms) : json_null());
    le = f->vec && dim > 0 ? malloc((size_t)dim * 2) : NULL;
    b64 = le ? malloc(cdb_out_base64_len((size_t)dim * 2) + 1) : NULL;
    for (int i = 0; b64 && i < dim; i++) { /* little-endian halves, as the shards keep them */
        le[2 * i] = (uint8_t)(f->vec[i] & 0xff);
        le[2 * i + 1] = (uint8_t)(f->vec[i] >> 8);
    }
    json_object_set_new(x, "vec", b64 ? json_string(cdb_out_base64(le, (size_t)dim * 2, b64))
                                      : json_null());
    free(le);
    free(b64);
    return x;
}

void cdb_srv_copy_facts_parse(json_t *o, cdb_engine_copy_facts *f, uint16_t **vec, int *vec_n) {
    json_t *h = json_object_get(o, "hash"), *ph = json_object_get(o, "phash"),
           *cam = json_object_get(o, "camera"), *shot = json_object_get(o, "shot_ms"),
           *v = json_object_get(o, "vec");
    uint8_t b[8];
    size_t n = 0;
    unsigned char *raw;
    memset(f, 0, sizeof *f);
    *vec = NULL;
    *vec_n = 0;
    if (!json_is_object(o)) return;
    f->has_hash = json_is_string(h) && !bytes_of_hex(json_string_value(h), json_string_length(h),
                                                     f->hash, sizeof f->hash);
    if (json_is_string(ph) && !bytes_of_hex(json_string_value(ph), json_string_length(ph), b, 8)) {
        f->has_phash = 1;
        for (int i = 0; i < 8; i++) f->phash = f->phash << 8 | b[i];
    }
    if (json_is_string(cam) && json_string_length(cam) < sizeof f->camera &&
        strlen(json_string_value(cam)) == json_string_length(cam))
        memcpy(f->camera, json_string_value(cam), json_string_length(cam) + 1);
    if (json_is_integer(shot)) f->has_shot = 1, f->shot_ms = (int64_t)json_integer_value(shot);
    if (!json_is_string(v) || json_string_length(v) > SRV_PEER_MAX_VEC_B64) return;
    raw = cdb_out_base64_decode(json_string_value(v), json_string_length(v), &n);
    if (raw && n >= 2 && n % 2 == 0 && (*vec = malloc(n))) {
        *vec_n = (int)(n / 2);
        for (int i = 0; i < *vec_n; i++) {
            (*vec)[i] = (uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8);
            if (((*vec)[i] & 0x7c00) == 0x7c00) { /* an infinity or a NaN */
                free(*vec);
                *vec = NULL;
                *vec_n = 0;
                break;
            }
        }
    }
    free(raw);
}

/* ---- a set of files with their facts ----------------------------------------------- */

/* Files by (src, id), each once, with the vectors their facts point into. */
typedef struct file_set {
    cdb_engine_copy_facts *f;
    int *cnt; /* n: the servers' files within the near bound of f[i]'s phash, summed */
    int n, cap;
    void **mem; /* the vectors' blocks (heap) */
    int n_mem, cap_mem;
} file_set;

static void set_free(file_set *s) {
    for (int i = 0; i < s->n_mem; i++) free(s->mem[i]);
    free(s->mem);
    free(s->f);
    free(s->cnt);
    memset(s, 0, sizeof *s);
}

static int set_has(const file_set *s, int src, int64_t id) {
    for (int i = 0; i < s->n; i++)
        if (s->f[i].src == src && s->f[i].id == id) return 1;
    return 0;
}

/* Adds f unless (src, id) is in s: 1 added, 0 not, -1 no memory. */
static int set_add(file_set *s, const cdb_engine_copy_facts *f) {
    if (set_has(s, f->src, f->id)) return 0;
    if (s->n == s->cap) {
        int nc = s->cap ? 2 * s->cap : 64;
        cdb_engine_copy_facts *nf = realloc(s->f, sizeof *nf * (size_t)nc);
        int *ncnt;
        if (!nf) return -1;
        s->f = nf;
        if (!(ncnt = realloc(s->cnt, sizeof *ncnt * (size_t)nc))) return -1;
        s->cnt = ncnt;
        s->cap = nc;
    }
    s->cnt[s->n] = 0;
    s->f[s->n++] = *f;
    return 1;
}

/* Keeps block p (heap) until the set is freed; frees it and returns -1 without memory. */
static int set_keep(file_set *s, void *p) {
    if (!p) return 0;
    if (s->n_mem == s->cap_mem) {
        int nc = s->cap_mem ? 2 * s->cap_mem : 64;
        void **nm = realloc(s->mem, sizeof *nm * (size_t)nc);
        if (!nm) {
            free(p);
            return -1;
        }
        s->mem = nm;
        s->cap_mem = nc;
    }
    s->mem[s->n_mem++] = p;
    return 0;
}

/* Adds this server's counts of files within the near bound of the phashes of
** s->f[from..to) (cdb_engine_phash_near_counts, over all its databases) into s->cnt. */
static cdb_status local_counts(srv_ctx *c, file_set *s, int from, int to) {
    int n_es = c->n_es > 1 ? c->n_es : 1, m = to - from;
    uint64_t *ph = malloc(sizeof *ph * (size_t)(m > 0 ? m : 1));
    int *k = malloc(sizeof *k * (size_t)(m > 0 ? m : 1));
    cdb_status st = ph && k ? CDB_OK : cdb_seterr(CDB_NOMEM, "out of memory");
    for (int i = 0; st == CDB_OK && i < m; i++) ph[i] = s->f[from + i].phash;
    for (int d = 0; st == CDB_OK && d < n_es; d++) {
        st = cdb_engine_phash_near_counts(n_es > 1 ? c->es[d] : c->e, NULL, ph, m, k);
        for (int i = 0; st == CDB_OK && i < m; i++)
            if (s->f[from + i].has_phash) s->cnt[from + i] += k[i];
    }
    free(ph);
    free(k);
    return st;
}

/* ---- a peer's side: POST /api/copies_of ---------------------------------------------- */

/* The vector set's dim on this server (its first database's default model), or 0. */
static int local_dim(srv_ctx *c) {
    cdb_engine_copy_facts none;
    uint16_t *v = NULL;
    int dim = 0;
    if (cdb_engine_copy_facts_get(c->e, NULL, NULL, 0, &none, &v, &dim) != CDB_OK) dim = 0;
    free(v);
    return dim;
}

void cdb_srv_copies_of(srv_ctx *c, const srv_req *r, srv_resp *o) {
    json_t *doc = cdb_srv_body_object(r, JSON_REJECT_DUPLICATES, o), *items, *files, *counts;
    file_set q;
    int dim = local_dim(c), n_es = c->n_es > 1 ? c->n_es : 1, count_only;
    memset(&q, 0, sizeof q);
    if (!doc) return;
    items = json_object_get(doc, "items");
    if (!json_is_array(items) || json_array_size(items) > SRV_COPIES_MAX_FILES) {
        cdb_srv_error(o, 400, "bad_request", "items: a list of at most %d copy facts",
                      SRV_COPIES_MAX_FILES);
        json_decref(doc);
        return;
    }
    for (size_t i = 0; i < json_array_size(items); i++) {
        cdb_engine_copy_facts f;
        uint16_t *vec;
        int vec_n;
        cdb_srv_copy_facts_parse(json_array_get(items, i), &f, &vec, &vec_n);
        f.vec = vec_n == dim ? vec : NULL;
        f.id = (int64_t)i + 1; /* each item its own */
        if (set_keep(&q, vec) < 0 || set_add(&q, &f) < 0) goto oom; /* kept first: freed */
    }
    count_only = json_is_true(json_object_get(doc, "count_only"));
    if (local_counts(c, &q, 0, q.n) != CDB_OK) {
        cdb_srv_engine_error(o);
        goto done;
    }
    files = json_array();
    for (int d = 0; !count_only && d < n_es; d++) {
        cdb_engine_copy_facts *found = NULL;
        uint16_t *vecs = NULL;
        int n = 0, fdim = 0;
        if (cdb_engine_copies_of(n_es > 1 ? c->es[d] : c->e, NULL, q.f, q.n, &found, &n, &vecs,
                                 &fdim) != CDB_OK) {
            json_decref(files);
            cdb_srv_engine_error(o);
            goto done;
        }
        for (int j = 0; j < n; j++) {
            json_t *x = json_object();
            json_object_set_new(x, "id", json_integer(found[j].id));
            json_object_set_new(x, "db", json_integer(d));
            json_object_set_new(x, "copy_facts", cdb_srv_copy_facts_json(&found[j], fdim));
            json_array_append_new(files, x);
        }
        free(found);
        free(vecs);
    }
    counts = json_array();
    for (int i = 0; i < q.n; i++) json_array_append_new(counts, json_integer(q.cnt[i]));
    {
        json_t *res = json_object();
        json_object_set_new(res, "files", files);
        json_object_set_new(res, "near_counts", counts);
        cdb_srv_json(o, 200, res);
        o->cache = "no-store";
    }
    goto done;
oom:
    cdb_srv_error(o, 503, "busy", "out of memory");
done:
    set_free(&q);
    json_decref(doc);
}

/* ---- the front's side: the closure -------------------------------------------------- */

/* The body of /api/copies_of for files q->f[from..to) (heap, NULL without memory); with
** count_only, only their phashes' near counts are asked for. */
static char *copies_body(const file_set *q, int from, int to, int dim, int count_only) {
    json_t *b = json_object(), *items = json_array();
    char *s;
    for (int i = from; i < to; i++)
        json_array_append_new(items, cdb_srv_copy_facts_json(&q->f[i], dim));
    json_object_set_new(b, "items", items);
    if (count_only) json_object_set_new(b, "count_only", json_true());
    s = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return s;
}

/* The files of a peer's answer (n bytes) not yet in found into it (src: base + its db
** there) while found holds fewer than limit, and its "near_counts" for the m files asked
** about added to counts[0..m) (each at most CDB_ENGINE_CROWD_COUNT_MAX; read before any
** file is added, so counts may point into found). 0, or -1 when it is not such an answer
** (or no memory). */
static int take_answer(const char *body, size_t n, int base, int dim, int limit, int *counts,
                       int m, file_set *found) {
    json_error_t err;
    json_t *doc = json_loadb(body, n, JSON_REJECT_DUPLICATES, &err), *files, *near;
    int rc = -1;
    if (!json_is_object(doc) || !json_is_array(files = json_object_get(doc, "files"))) goto done;
    near = json_object_get(doc, "near_counts");
    for (int i = 0; i < m && i < (int)json_array_size(near); i++) {
        json_int_t k = json_integer_value(json_array_get(near, (size_t)i));
        counts[i] += k < 0 ? 0 : k > CDB_ENGINE_CROWD_COUNT_MAX ? CDB_ENGINE_CROWD_COUNT_MAX
                                                                 : (int)k;
    }
    for (size_t i = 0; i < json_array_size(files); i++) {
        json_t *x = json_array_get(files, i), *id = json_object_get(x, "id"),
               *db = json_object_get(x, "db");
        cdb_engine_copy_facts f;
        uint16_t *vec;
        int vec_n;
        if (found->n >= limit) break;
        if (!json_is_integer(id) || json_integer_value(id) <= 0 || !json_is_integer(db) ||
            json_integer_value(db) < 0 || json_integer_value(db) >= CDB_SERVE_MAX_DBS)
            continue;
        cdb_srv_copy_facts_parse(json_object_get(x, "copy_facts"), &f, &vec, &vec_n);
        f.id = (int64_t)json_integer_value(id);
        f.src = base + (int)json_integer_value(db);
        f.vec = vec_n == dim ? vec : NULL;
        /* the vector kept before its facts are added: a failure never leaves them dangling */
        if (set_keep(found, vec) < 0 || set_add(found, &f) < 0) goto done;
    }
    rc = 0;
done:
    json_decref(doc);
    return rc;
}

int cdb_srv_copies_answer_parse(const char *body, size_t n, int base, int dim, int n_asked,
                                int *counts, cdb_engine_copy_facts **files, int *n_files,
                                void **keep) {
    file_set *s = calloc(1, sizeof *s);
    *keep = s;
    *files = NULL;
    *n_files = 0;
    for (int i = 0; i < n_asked; i++) counts[i] = 0;
    if (!s || take_answer(body, n, base, dim, SRV_COPIES_MAX_FILES, counts, n_asked, s))
        return -1;
    *files = s->f;
    *n_files = s->n;
    return 0;
}

/* This server's databases' files joined to found->f[from..) into found (src: the db; its
** own files: trusted, not bounded). */
static cdb_status local_round(srv_ctx *c, int from, int dim, file_set *found) {
    int n_es = c->n_es > 1 ? c->n_es : 1;
    for (int d = 0; d < n_es; d++) {
        cdb_engine_copy_facts *f = NULL;
        uint16_t *vecs = NULL;
        int n = 0, fdim = 0;
        cdb_status st = cdb_engine_copies_of(n_es > 1 ? c->es[d] : c->e, NULL, found->f + from,
                                             found->n - from, &f, &n, &vecs, &fdim);
        if (st != CDB_OK) return st;
        if (set_keep(found, vecs) < 0) st = CDB_NOMEM; /* before the facts pointing in */
        for (int j = 0; st == CDB_OK && j < n; j++) {
            f[j].src = d;
            if (fdim != dim) f[j].vec = NULL;
            if (set_add(found, &f[j]) < 0) st = CDB_NOMEM;
        }
        free(f);
        if (st != CDB_OK) return cdb_seterr(CDB_NOMEM, "out of memory");
    }
    return CDB_OK;
}

/* A bound: def, or the test's lower value of environment variable env (1 .. def). */
static int copies_bound(const char *env, int def) {
    const char *v = getenv(env);
    long x = v && *v ? strtol(v, NULL, 10) : 0;
    return x >= 1 && x < def ? (int)x : def;
}

/* Asks every peer not missing about found->f[from..to), SRV_COPIES_MAX_FILES at a time:
** the files their groups join to them into found (while it holds fewer than limit) and
** their near counts; with count_only, the counts alone. A peer that does not answer usably
** is missing from then on. answers, lens: the peers' scratch. */
static cdb_status ask_peers(srv_ctx *c, file_set *found, int from, int to, int dim, int limit,
                            int count_only, srv_peer_answers *ans, char **answers,
                            size_t *lens) {
    int np = cdb_srv_peers_count(c->peers), nd = c->n_es > 1 ? c->n_es : 1;
    for (int at = from; np && at < to; at += SRV_COPIES_MAX_FILES) {
        int end = to - at > SRV_COPIES_MAX_FILES ? at + SRV_COPIES_MAX_FILES : to;
        char *body = copies_body(found, at, end, dim, count_only);
        if (!body) return cdb_seterr(CDB_NOMEM, "out of memory");
        /* a peer already missing is not waited on again (it hung, or was not asked) */
        cdb_srv_peers_post(c->peers, "/api/copies_of", body, ans->missing, ans->used_ms,
                           answers, lens);
        free(body);
        for (int p = 0; p < np; p++) {
            if (ans->missing && ans->missing[p]) continue;
            if (!answers[p] || take_answer(answers[p], lens[p], nd + p * CDB_SERVE_MAX_DBS, dim,
                                           count_only ? 0 : limit, found->cnt + at, end - at,
                                           found))
                cdb_srv_peer_missing(ans, p);
            free(answers[p]);
            answers[p] = NULL;
        }
    }
    return CDB_OK;
}

/* A phash is crowded over all the servers' files (engine.h, cdb_engine_phash_near_counts):
** such a file is near nothing, as in one database of them all (each server decides only
** over its own files). Clears has_phash of those in found and among hits[0..n_hits). */
static void mark_crowded(file_set *found, cdb_engine_copy_facts *hits, int n_hits) {
    for (int i = 0; i < found->n; i++) {
        cdb_engine_copy_facts *f = &found->f[i];
        if (!f->has_phash || found->cnt[i] - 1 <= CDB_ENGINE_CROWD) continue; /* - its own */
        f->has_phash = 0;
        for (int j = 0; j < n_hits; j++)
            if (hits[j].src == f->src && hits[j].id == f->id) hits[j].has_phash = 0;
    }
}

cdb_status cdb_srv_copies_closure(srv_ctx *c, cdb_engine_copy_facts *hits, int n_hits, int dim,
                                  srv_peer_answers *ans, cdb_engine_copy_facts **others,
                                  int *n_others, void **keep) {
    file_set *found = calloc(1, sizeof *found);
    int np = cdb_srv_peers_count(c->peers), from = 0;
    char **answers = calloc((size_t)np + 1, sizeof *answers);
    size_t *lens = calloc((size_t)np + 1, sizeof *lens);
    cdb_status st = found && answers && lens ? CDB_OK : cdb_seterr(CDB_NOMEM, "out of memory");
    *others = NULL;
    *n_others = 0;
    *keep = found;
    /* round 0 asks about the hits: found starts as them, then they are taken out */
    for (int i = 0; st == CDB_OK && i < n_hits; i++)
        if (set_add(found, &hits[i]) < 0) st = cdb_seterr(CDB_NOMEM, "out of memory");
    int n_first = st == CDB_OK ? found->n : 0;
    int rounds = copies_bound("CLIPDB_TEST_COPIES_ROUNDS", SRV_COPIES_ROUNDS);
    /* the hits, and files found past them */
    int limit = n_first + copies_bound("CLIPDB_TEST_COPIES_FILES", SRV_COPIES_MAX_FILES);
    ans->copies_bound = 0;
    for (int round = 0; st == CDB_OK && round < rounds && from < found->n; round++) {
        int to = found->n;
        if ((st = local_round(c, from, dim, found)) != CDB_OK ||
            (st = local_counts(c, found, from, to)) != CDB_OK ||
            (st = ask_peers(c, found, from, to, dim, limit, 0, ans, answers, lens)) != CDB_OK)
            break;
        from = to;
        if (found->n >= limit) break;
    }
    if (st == CDB_OK && from < found->n) { /* files whose copies were not asked about */
        ans->copies_bound = found->n >= limit ? SRV_COPIES_BOUND_FILES : SRV_COPIES_BOUND_ROUNDS;
        if ((st = local_counts(c, found, from, found->n)) == CDB_OK) /* their crowds, still */
            st = ask_peers(c, found, from, found->n, dim, 0, 1, ans, answers, lens);
    }
    if (st == CDB_OK) { /* the files found that are no hits */
        mark_crowded(found, hits, n_hits);
        *others = found->f + n_first;
        *n_others = found->n - n_first;
    }
    free(answers);
    free(lens);
    return st;
}

void cdb_srv_copies_free(void *keep) {
    if (!keep) return;
    set_free(keep);
    free(keep);
}
