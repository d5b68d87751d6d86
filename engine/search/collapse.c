/*
** collapse.c: search results with copies collapsed into one hit (issue 28). The copy
** groups are those of `clipdb duplicates` (exact: the same content hash; near: phash AND
** cosine, never two distinct shots: dupes/dupes.h decides, cdb_dupes_find over the whole
** vector set, its exact and near groups joined), never bursts or RAW+JPEG pairs. What it
** groups by comes from the catalog alone: files' content hash, and photo_meta's phash,
** camera and capture time (schema 9; a file without a stored phash is never a near copy,
** only an exact one: ingest stores the phash where its decode is the phash's, duplicates
** or a reindex the others). Only the files with a
** phash within the near bound of another one have their vectors read.
**
** Over several databases (cdb_engine_search_many) the groups are those of the union of
** their files, each file named by (database, id), as one database holding them all
** would group them: copies in two databases are one group.
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

/* A file of the groups: its database (the part's index) and its id there. */
typedef struct eng_member {
    int64_t id;
    int db;
} eng_member;

struct eng_groups {
    atomic_int refs;
    int n_parts;
    eng_groups_key *key;  /* n_parts: what it was built for (dirs owned) */
    eng_member *ids;      /* n: the files in some group, ascending (db, id) */
    uint32_t *grp;        /* n: their group */
    size_t n;
    size_t *start;        /* n_groups + 1: group g is mem[start[g] .. start[g + 1]) */
    eng_member *mem;      /* ascending (db, id) within each group */
    size_t n_groups;
};

void cdb_eng_groups_unref(eng_groups *g) {
    if (!g || atomic_fetch_sub(&g->refs, 1) != 1) return;
    for (int i = 0; g->key && i < g->n_parts; i++) free(g->key[i].dir);
    free(g->key);
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

int cdb_eng_groups_current(const eng_groups *g, const eng_groups_key *key, int n) {
    if (!g || g->n_parts != n) return 0;
    for (int i = 0; i < n; i++)
        if (g->key[i].gen != key[i].gen || g->key[i].n_missing != key[i].n_missing ||
            strcmp(g->key[i].dir ? g->key[i].dir : "", key[i].dir ? key[i].dir : ""))
            return 0;
    return 1;
}

static int member_cmp(const eng_member *a, int db, int64_t id) {
    if (a->db != db) return a->db < db ? -1 : 1;
    return (a->id > id) - (a->id < id);
}

/* ---- building -------------------------------------------------------------------------- */

/* What dupes groups each file by, from the catalog (borrowed strings live in cam). */
typedef struct facts {
    cdb_dupes_item *it;
    char (*cam)[130];
    float *vecs;           /* dim floats for each file that needs its vector */
    eng_member *ids;       /* ascending (db, id): the parts are read in turn */
    size_t n, cap;
    int part;              /* the part being read */
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
        eng_member *ids = cam ? realloc(f->ids, sizeof *ids * nc) : NULL;
        if (it) f->it = it;
        if (cam) f->cam = cam;
        if (ids) f->ids = ids;
        if (!it || !cam || !ids) return f->oom = 1;
        f->cap = nc;
    }
    cdb_dupes_item *it = &f->it[f->n];
    memset(it, 0, sizeof *it);
    f->ids[f->n] = (eng_member){r->file_id, f->part};
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

/* The facts of every ok file of every part, in one read of each catalog (a point query
** per file cost a one-shot search of 10,000 photos 50 ms). */
static cdb_status read_facts(const eng_groups_part *parts, int n_parts, facts *f) {
    cdb_status rc = CDB_OK;
    for (f->part = 0; rc == CDB_OK && f->part < n_parts; f->part++)
        rc = cdb_db_photos_foreach(parts[f->part].db, 0, add_fact, f);
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
** only ones a near edge can join), each from its part's vector set; the rest keep vec
** NULL (never near). */
static cdb_status read_vectors(const eng_groups_part *parts, int dim, facts *f) {
    cdb_dupes_params p = cdb_dupes_params_default();
    unsigned char *need = calloc(f->n ? f->n : 1, 1);
    size_t n_need = 0;
    cdb_status rc = need ? CDB_OK : cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    if (rc == CDB_OK) rc = mark_near(f, p.phash_bits, need);
    for (size_t i = 0; i < f->n && need; i++) n_need += need[i];
    int64_t *sub = malloc(sizeof *sub * (n_need ? n_need : 1));
    size_t *at_of = malloc(sizeof *at_of * (n_need ? n_need : 1));
    uint8_t *found = malloc(n_need ? n_need : 1);
    f->vecs = malloc(sizeof *f->vecs * (n_need ? n_need : 1) * (size_t)dim);
    if (rc == CDB_OK && (!sub || !at_of || !found || !f->vecs))
        rc = cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    size_t k = 0;
    for (size_t i = 0; rc == CDB_OK && i < f->n; i++)
        if (need[i]) sub[k] = f->ids[i].id, at_of[k++] = i;
    /* runs of one part (the facts come part by part), 256 at a time */
    for (size_t at = 0, m; rc == CDB_OK && at < n_need; at += m) {
        const eng_groups_part *pt = &parts[f->ids[at_of[at]].db];
        for (m = 1; m < 256 && at + m < n_need && f->ids[at_of[at + m]].db == f->ids[at_of[at]].db;)
            m++;
        rc = cdb_db_vectors_get(pt->db, pt->model_id, sub + at, (int)m,
                                f->vecs + at * (size_t)dim, found + at);
    }
    for (k = 0; rc == CDB_OK && k < n_need; k++)
        if (found[k]) f->it[at_of[k]].vec = f->vecs + k * (size_t)dim;
    free(need);
    free(sub);
    free(at_of);
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
        g->ids[k] = f->ids[i]; /* f->ids ascend (parts in turn, each in id order) */
        g->grp[k++] = (uint32_t)gid[r];
        g->start[gid[r] + 1]++;
    }
    for (size_t q = 0; rc == CDB_OK && q < g->n_groups; q++) g->start[q + 1] += g->start[q];
    if (rc == CDB_OK) { /* members by group, ascending (db, id) within each (a counting sort) */
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

cdb_status cdb_eng_groups_build(const eng_groups_part *parts, int n_parts, int dim,
                                eng_groups **out) {
    facts f;
    cdb_dupes_groups *dg = NULL;
    eng_groups *g = calloc(1, sizeof *g);
    memset(&f, 0, sizeof f);
    *out = NULL;
    cdb_status rc = g && (g->key = calloc((size_t)n_parts, sizeof *g->key))
                        ? CDB_OK
                        : cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    for (int i = 0; rc == CDB_OK && i < n_parts; i++, g->n_parts++) {
        g->key[i] = parts[i].key;
        if (!(g->key[i].dir = strdup(parts[i].key.dir ? parts[i].key.dir : "")))
            rc = cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    }
    if (rc == CDB_OK) rc = read_facts(parts, n_parts, &f);
    if (rc == CDB_OK) rc = read_vectors(parts, dim, &f);
    if (rc == CDB_OK) rc = cdb_dupes_find(f.it, f.n, dim, NULL, &dg);
    if (rc == CDB_OK) rc = join_groups(&f, dg, g);
    cdb_dupes_groups_free(dg);
    facts_free(&f);
    if (g) atomic_init(&g->refs, 1);
    if (rc != CDB_OK) {
        cdb_eng_groups_unref(g);
        return cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "cannot group the copies to collapse");
    }
    *out = g;
    return CDB_OK;
}

/* ---- collapsing ----------------------------------------------------------------------- */

/* The group of (db, id), or -1 (bsearch over the ascending members). */
static long group_of(const eng_groups *g, int db, int64_t id) {
    size_t lo = 0, hi = g->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (member_cmp(&g->ids[mid], db, id) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < g->n && !member_cmp(&g->ids[lo], db, id) ? (long)g->grp[lo] : -1;
}

/* h's copies: the other members of group q (with their databases when the groups span
** several). 0, or -1 out of memory. */
static int set_copies(const eng_groups *g, long q, cdb_engine_hit *h) {
    size_t m = g->start[q + 1] - g->start[q];
    h->copies = malloc(sizeof *h->copies * (m - 1));
    if (g->n_parts > 1) h->copies_db = malloc(sizeof *h->copies_db * (m - 1));
    if (!h->copies || (g->n_parts > 1 && !h->copies_db)) return -1;
    for (size_t k = 0; k < m; k++) {
        const eng_member *c = &g->mem[g->start[q] + k];
        if (c->id == h->id && c->db == h->db) continue;
        if (h->copies_db) h->copies_db[h->n_copies] = c->db;
        h->copies[h->n_copies++] = c->id;
    }
    return 0;
}

cdb_status cdb_eng_collapse(const eng_groups *g, cdb_engine_hit *hits, int *n) {
    unsigned char *seen = calloc(g->n_groups ? g->n_groups : 1, 1);
    int kept = 0, oom = 0;
    if (!seen) return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory",
                                    "cannot collapse the copies");
    for (int i = 0; i < *n; i++) {
        cdb_engine_hit h = hits[i];
        long q = group_of(g, g->n_parts > 1 ? h.db : 0, h.id);
        if (q >= 0 && seen[q]) { /* a copy of a better-ranked hit */
            cdb_eng_hit_clear(&h);
            continue;
        }
        if (q >= 0) {
            seen[q] = 1;
            free(h.copies); /* a part's own collapse, redone over every part */
            free(h.copies_db);
            h.copies = NULL;
            h.copies_db = NULL;
            h.n_copies = 0;
            oom |= set_copies(g, q, &h);
        }
        hits[kept++] = h;
    }
    free(seen);
    *n = kept;
    if (oom)
        return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory",
                             "cannot collapse the copies");
    return CDB_OK;
}
