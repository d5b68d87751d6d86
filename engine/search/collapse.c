/*
** collapse.c: search results with copies collapsed into one hit (issue 28). The copy
** groups are those of `clipdb duplicates` (exact: the same content hash; near: phash AND
** cosine, never two distinct shots: dupes/dupes.h decides, cdb_dupes_find over the whole
** vector set, its exact and near groups joined), never bursts or RAW+JPEG pairs. What it
** groups by comes from the catalog alone: files' content hash, and photo_meta's phash,
** camera and capture time (schema 9; a file without a stored phash is never a near copy,
** only an exact one: duplicates or a reindex stores the phashes). Only the files with a
** phash within the near bound of another one have their vectors read.
**
** The groups are built once per (generation, files without a phash) and shared by the
** searches of a vector set (search.c keeps them with its search state; reference
** counted, immutable once built). Cost per rebuild: a catalog scan, and the near phash
** pairs found through a multi-index (cdb_dupes_phash_pairs), not every two files.
**
** A collapsed result keeps, of each group, the best-ranked hit that passed the query's
** filters, in rank order, and lists the group's other files (the whole library's, as
** `duplicates` shows them) as its copies; so the collapsed list is one ordering (the
** first hit of each group, by rank) that offset and k page through.
*/
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dupes/dupes.h"
#include "engine/search/search.h"

struct eng_groups {
    atomic_int refs;
    int64_t gen, n_missing; /* what it was built for (eng_groups_key) */
    int64_t *ids;           /* n: the files in some group, ascending */
    uint32_t *grp;          /* n: their group */
    size_t n;
    size_t *start;          /* n_groups + 1: group g is mem[start[g] .. start[g + 1]) */
    int64_t *mem;           /* ascending ids within each group */
    size_t n_groups;
};

void cdb_eng_groups_unref(eng_groups *g) {
    if (!g || atomic_fetch_sub(&g->refs, 1) != 1) return;
    free(g->ids);
    free(g->grp);
    free(g->start);
    free(g->mem);
    free(g);
}

eng_groups *cdb_eng_groups_ref(eng_groups *g) {
    if (g) atomic_fetch_add(&g->refs, 1);
    return g;
}

int cdb_eng_groups_current(const eng_groups *g, int64_t gen, int64_t n_missing) {
    return g && g->gen == gen && g->n_missing == n_missing;
}

/* ---- building -------------------------------------------------------------------------- */

/* What dupes groups each file by, from the catalog (borrowed strings live in cam). */
typedef struct facts {
    cdb_dupes_item *it;
    char (*cam)[130];
    float *vecs;           /* dim floats for each file that needs its vector */
    int64_t *ids;
    size_t n, cap;
    int oom;
} facts;

static void facts_free(facts *f) {
    free(f->it);
    free(f->cam);
    free(f->vecs);
    free(f->ids);
}

/* Appends one ok file's facts (photo row: exact by hash always, near only with a phash). */
static int add_fact(const cdb_db_photo *r, void *ud) {
    facts *f = ud;
    if (f->n == f->cap) {
        size_t nc = f->cap ? f->cap * 2 : 1024;
        cdb_dupes_item *it = realloc(f->it, sizeof *it * nc);
        char(*cam)[130] = it ? realloc(f->cam, sizeof *cam * nc) : NULL;
        int64_t *ids = cam ? realloc(f->ids, sizeof *ids * nc) : NULL;
        if (it) f->it = it;
        if (cam) f->cam = cam;
        if (ids) f->ids = ids;
        if (!it || !cam || !ids) return f->oom = 1;
        f->cap = nc;
    }
    cdb_dupes_item *it = &f->it[f->n];
    memset(it, 0, sizeof *it);
    f->ids[f->n] = r->file_id;
    it->id = r->file_id;
    memcpy(it->hash, r->hash, CDB_DUPES_HASH_BYTES);
    it->has_hash = 1;
    it->has_phash = r->read && r->has_phash;
    it->phash = r->phash;
    snprintf(f->cam[f->n], sizeof f->cam[0], "%s%s%s", r->make, *r->make ? " " : "", r->model);
    /* FILE: photos_get's mtime stand-in, not a capture time */
    it->has_taken = r->read && r->taken_source != CDB_DB_TAKEN_FILE;
    it->taken_ms = r->taken.wall_ms;
    f->n++;
    return 0;
}

/* The facts of every ok file, in one read of the catalog (a point query per file cost a
** one-shot search of 10,000 photos 50 ms). */
static cdb_status read_facts(cdb_db *db, facts *f) {
    cdb_status rc = cdb_db_photos_foreach(db, 0, add_fact, f);
    if (rc == CDB_OK && f->oom) rc = cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    for (size_t i = 0; rc == CDB_OK && i < f->n; i++) f->it[i].camera = f->cam[i];
    return rc;
}

/* need[i] = 1 for each file with a phash within max_bits of another one's. */
static cdb_status mark_near(const facts *f, int max_bits, unsigned char *need) {
    size_t m = 0, n_pairs = 0;
    size_t *idx = malloc(sizeof *idx * (f->n ? f->n : 1));
    uint64_t *h = malloc(sizeof *h * (f->n ? f->n : 1));
    cdb_dupes_pair *pairs = NULL;
    cdb_status rc = idx && h ? CDB_OK : cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    for (size_t i = 0; rc == CDB_OK && i < f->n; i++)
        if (f->it[i].has_phash) {
            idx[m] = i;
            h[m++] = f->it[i].phash;
        }
    if (rc == CDB_OK) rc = cdb_dupes_phash_pairs(h, m, max_bits, &pairs, &n_pairs);
    for (size_t k = 0; rc == CDB_OK && k < n_pairs; k++)
        need[idx[pairs[k].a]] = need[idx[pairs[k].b]] = 1;
    free(idx);
    free(h);
    cdb_free(pairs);
    return rc;
}

/* The vectors of the files with a phash within the near bound of another one's (the
** only ones a near edge can join); the rest keep vec NULL (never near). */
static cdb_status read_vectors(cdb_db *db, int64_t model_id, int dim, facts *f) {
    cdb_dupes_params p = cdb_dupes_params_default();
    unsigned char *need = calloc(f->n ? f->n : 1, 1);
    size_t n_need = 0;
    cdb_status rc = need ? CDB_OK : cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    if (rc == CDB_OK) rc = mark_near(f, p.phash_bits, need);
    for (size_t i = 0; i < f->n && need; i++) n_need += need[i];
    int64_t *sub = malloc(sizeof *sub * (n_need ? n_need : 1));
    uint8_t *found = malloc(n_need ? n_need : 1);
    f->vecs = malloc(sizeof *f->vecs * (n_need ? n_need : 1) * (size_t)dim);
    if (rc == CDB_OK && (!sub || !found || !f->vecs))
        rc = cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    size_t k = 0;
    for (size_t i = 0; rc == CDB_OK && i < f->n; i++)
        if (need[i]) sub[k++] = f->ids[i];
    for (size_t at = 0; rc == CDB_OK && at < n_need; at += 256) {
        int m = n_need - at < 256 ? (int)(n_need - at) : 256;
        rc = cdb_db_vectors_get(db, model_id, sub + at, m, f->vecs + at * (size_t)dim,
                                found + at);
    }
    k = 0;
    for (size_t i = 0; rc == CDB_OK && i < f->n; i++)
        if (need[i]) {
            if (found[k]) f->it[i].vec = f->vecs + k * (size_t)dim;
            k++;
        }
    free(need);
    free(sub);
    free(found);
    return rc;
}

static size_t find_root(size_t *parent, size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
}

/* g's groups from dupes' exact and near groups, joined where they share a file (a near
** group holds the exact copies of its pictures too). */
static cdb_status join_groups(const facts *f, const cdb_dupes_groups *dg, eng_groups *g) {
    size_t *parent = malloc(sizeof *parent * (f->n ? f->n : 1));
    size_t *gid = malloc(sizeof *gid * (f->n ? f->n : 1));
    cdb_status rc = parent && gid ? CDB_OK : cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    for (size_t i = 0; rc == CDB_OK && i < f->n; i++) parent[i] = i;
    for (size_t k = 0; rc == CDB_OK && k < dg->n_groups; k++) {
        if (dg->kind[k] != CDB_DUPES_EXACT && dg->kind[k] != CDB_DUPES_NEAR) continue;
        size_t a = find_root(parent, dg->member[dg->start[k]]);
        for (size_t m = dg->start[k] + 1; m < dg->start[k + 1]; m++) {
            size_t b = find_root(parent, dg->member[m]);
            if (a == b) continue;
            if (b < a) {
                size_t t = a;
                a = b, b = t;
            }
            parent[b] = a;
        }
    }
    /* size each root's set; the files of sets of two or more, in id order */
    size_t *count = rc == CDB_OK ? calloc(f->n ? f->n : 1, sizeof *count) : NULL;
    if (rc == CDB_OK && !count) rc = cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    for (size_t i = 0; rc == CDB_OK && i < f->n; i++) count[find_root(parent, i)]++;
    for (size_t i = 0; rc == CDB_OK && i < f->n; i++) {
        gid[i] = (size_t)-1;
        if (count[find_root(parent, i)] >= 2) g->n++;
    }
    for (size_t i = 0; rc == CDB_OK && i < f->n; i++)
        if (find_root(parent, i) == i && count[i] >= 2) gid[i] = g->n_groups++;
    g->ids = malloc(sizeof *g->ids * (g->n ? g->n : 1));
    g->grp = malloc(sizeof *g->grp * (g->n ? g->n : 1));
    g->mem = malloc(sizeof *g->mem * (g->n ? g->n : 1));
    g->start = calloc(g->n_groups + 1, sizeof *g->start);
    if (rc == CDB_OK && (!g->ids || !g->grp || !g->mem || !g->start))
        rc = cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    for (size_t i = 0, k = 0; rc == CDB_OK && i < f->n; i++) {
        size_t r = find_root(parent, i);
        if (count[r] < 2) continue;
        g->ids[k] = f->ids[i]; /* f->ids ascend (photos_foreach reads in id order) */
        g->grp[k++] = (uint32_t)gid[r];
        g->start[gid[r] + 1]++;
    }
    for (size_t q = 0; rc == CDB_OK && q < g->n_groups; q++) g->start[q + 1] += g->start[q];
    if (rc == CDB_OK) { /* members by group, ascending ids within each (a counting sort) */
        size_t *fill = calloc(g->n_groups ? g->n_groups : 1, sizeof *fill);
        if (!fill) rc = cdb_seterr(CDB_NOMEM, "collapse: out of memory");
        for (size_t k = 0; fill && k < g->n; k++)
            g->mem[g->start[g->grp[k]] + fill[g->grp[k]]++] = g->ids[k];
        free(fill);
    }
    free(count);
    free(parent);
    free(gid);
    return rc;
}

cdb_status cdb_eng_groups_build(cdb_db *db, int64_t model_id, int dim, int64_t gen,
                                int64_t n_missing, eng_groups **out) {
    facts f;
    cdb_dupes_groups *dg = NULL;
    eng_groups *g = calloc(1, sizeof *g);
    memset(&f, 0, sizeof f);
    *out = NULL;
    cdb_status rc = g ? read_facts(db, &f) : cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    if (rc == CDB_OK) rc = read_vectors(db, model_id, dim, &f);
    if (rc == CDB_OK) rc = cdb_dupes_find(f.it, f.n, dim, NULL, &dg);
    if (rc == CDB_OK) rc = join_groups(&f, dg, g);
    cdb_dupes_groups_free(dg);
    facts_free(&f);
    if (rc != CDB_OK) {
        if (g) atomic_init(&g->refs, 1);
        cdb_eng_groups_unref(g);
        return cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "cannot group the copies to collapse");
    }
    atomic_init(&g->refs, 1);
    g->gen = gen;
    g->n_missing = n_missing;
    *out = g;
    return CDB_OK;
}

/* ---- collapsing ----------------------------------------------------------------------- */

/* The group of id, or -1 (bsearch over the ascending ids). */
static long group_of(const eng_groups *g, int64_t id) {
    size_t lo = 0, hi = g->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g->ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < g->n && g->ids[lo] == id ? (long)g->grp[lo] : -1;
}

cdb_status cdb_eng_collapse(const eng_groups *g, cdb_engine_hit *hits, int *n) {
    unsigned char *seen = calloc(g->n_groups ? g->n_groups : 1, 1);
    int kept = 0;
    if (!seen) return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory",
                                    "cannot collapse the copies");
    for (int i = 0; i < *n; i++) {
        cdb_engine_hit h = hits[i];
        long q = group_of(g, h.id);
        if (q >= 0 && seen[q]) { /* a copy of a better-ranked hit */
            cdb_eng_hit_clear(&h);
            continue;
        }
        if (q >= 0) {
            size_t m = g->start[q + 1] - g->start[q];
            seen[q] = 1;
            h.copies = malloc(sizeof *h.copies * (m - 1));
            for (size_t k = 0; h.copies && k < m; k++) {
                int64_t id = g->mem[g->start[q] + k];
                if (id != h.id) h.copies[h.n_copies++] = id;
            }
            if (!h.copies) h.n_copies = -1; /* out of memory: the count unknown */
        }
        hits[kept++] = h;
    }
    free(seen);
    *n = kept;
    for (int i = 0; i < kept; i++)
        if (hits[i].n_copies < 0) {
            hits[i].n_copies = 0;
            return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory",
                                 "cannot collapse the copies");
        }
    return CDB_OK;
}
