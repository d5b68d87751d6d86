/*
** collapse.c: search results with copies collapsed into one hit (issue 28). The copy
** groups are those of `clipdb duplicates` (exact: the same content hash; near: phash AND
** cosine, never two distinct shots: dupes/dupes.h decides, cdb_dupes_find over the whole
** vector set, its exact and near groups joined), never bursts or RAW+JPEG pairs. What it
** groups by comes from the catalog alone: files' content hash, and photo_meta's phash,
** camera and capture time (schema 9; a file without a stored phash is never a near copy,
** only an exact one: ingest stores the phash where its decode is the phash's, duplicates
** or a reindex the others). Only the files with a
** phash within the near bound of another one, and not crowded (dupes.h), have their
** vectors read; a crowded file is near nothing, here and in a peer's answers.
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
**
** Across servers (serve --peer: no server reads another's catalog) the same groups are
** made from what each file's catalog row and vector say (cdb_engine_copy_facts): a
** front ranks the gathered hits (cdb_engine_hits_rank), asks every server for the files
** its groups join to them (cdb_engine_copies_of: the closure of the pairwise tests over
** one database, which the front repeats across servers), and groups the hits with those
** files by the same rule (cdb_engine_hits_collapse: cdb_dupes_find, joined as above).
*/
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
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

/* What dupes groups each file by, from the catalog (borrowed strings live in cf). */
typedef struct facts {
    cdb_dupes_item *it;
    cdb_engine_copy_facts *cf;
    float *vecs;           /* dim floats for each file that needs its vector */
    eng_member *ids;       /* ascending (db, id): the parts are read in turn */
    size_t n, cap;
    int part;              /* the part being read */
    int oom;
} facts;

static void facts_free(facts *f) {
    free(f->it);
    free(f->cf);
    free(f->vecs);
    free(f->ids);
}

/* The copy facts of a photo row (exact by hash always, near only with a phash). */
static void facts_of_row(const cdb_db_photo *r, cdb_engine_copy_facts *cf) {
    memset(cf, 0, sizeof *cf);
    memcpy(cf->hash, r->hash, CDB_DUPES_HASH_BYTES);
    cf->has_hash = 1;
    cf->has_phash = r->read && r->has_phash;
    cf->phash = r->phash;
    snprintf(cf->camera, sizeof cf->camera, "%s%s%s", r->make, *r->make ? " " : "", r->model);
    /* FILE: photos_get's mtime stand-in, not a capture time */
    cf->has_shot = r->read && r->taken_source != CDB_DB_TAKEN_FILE;
    cf->shot_ms = r->taken.wall_ms;
}

/* The dupes item of file id from its facts (the camera borrowed from cf; no vector). */
static void item_of_facts(const cdb_engine_copy_facts *cf, int64_t id, cdb_dupes_item *it) {
    memset(it, 0, sizeof *it);
    it->id = id;
    memcpy(it->hash, cf->hash, CDB_DUPES_HASH_BYTES);
    it->has_hash = cf->has_hash;
    it->has_phash = cf->has_phash;
    it->phash = cf->phash;
    it->camera = cf->camera;
    it->has_taken = cf->has_shot;
    it->taken_ms = cf->shot_ms;
}

/* Room for one more file in f. 0, or -1 out of memory (f->oom set). */
static int facts_grow(facts *f) {
    if (f->n < f->cap) return 0;
    size_t nc = f->cap ? f->cap * 2 : 1024;
    cdb_dupes_item *it = realloc(f->it, sizeof *it * nc);
    cdb_engine_copy_facts *cf = it ? realloc(f->cf, sizeof *cf * nc) : NULL;
    eng_member *ids = cf ? realloc(f->ids, sizeof *ids * nc) : NULL;
    if (it) f->it = it;
    if (cf) f->cf = cf;
    if (ids) f->ids = ids;
    if (!it || !cf || !ids) return -(f->oom = 1);
    f->cap = nc;
    return 0;
}

/* Appends one ok file's facts. */
static int add_fact(const cdb_db_photo *r, void *ud) {
    facts *f = ud;
    if (facts_grow(f)) return 1;
    f->ids[f->n] = (eng_member){r->file_id, f->part};
    facts_of_row(r, &f->cf[f->n]);
    f->cf[f->n].id = r->file_id;
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
    for (size_t i = 0; rc == CDB_OK && i < f->n; i++)
        item_of_facts(&f->cf[i], f->ids[i].id, &f->it[i]);
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

/* g's groups of the files of f: the dupes rule (exact and near groups), joined. */
static cdb_status groups_of(const facts *f, int dim, eng_groups *g) {
    cdb_dupes_groups *dg = NULL;
    cdb_status rc = cdb_dupes_find(f->it, f->n, dim, NULL, &dg);
    if (rc == CDB_OK) rc = join_groups(f, dg, g);
    cdb_dupes_groups_free(dg);
    return rc;
}

cdb_status cdb_eng_groups_build(const eng_groups_part *parts, int n_parts, int dim,
                                eng_groups **out) {
    facts f;
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
    if (rc == CDB_OK) rc = groups_of(&f, dim, g);
    facts_free(&f);
    if (g) atomic_init(&g->refs, 1);
    if (rc != CDB_OK) {
        cdb_eng_groups_unref(g);
        return cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "cannot group the copies to collapse");
    }
    *out = g;
    return CDB_OK;
}

/* ---- the groups of a page's hits ------------------------------------------------------- */

/* A page's closure over one database: every ok file's copy keys, and what is known of
** the few files the closure asks about. */
typedef struct page {
    const eng_groups_part *pt;
    int dim, bits;
    float min_cosine;
    cdb_db_copy_key *k;  /* n: every ok file, ascending ids */
    size_t n;
    unsigned char *in;   /* n: 0 not joined, 1 joined and not asked about yet, 2 asked */
    signed char *crowd;  /* n: -1 not counted yet, else 1 when crowded */
    unsigned char *got;  /* n: 1 when its vector was read (vec[i] NULL: it has none) */
    float **vec;         /* n: dim floats (heap) for the files whose vector was read */
} page;

static void page_free(page *pg) {
    for (size_t i = 0; pg->vec && i < pg->n; i++) free(pg->vec[i]);
    cdb_free(pg->k);
    free(pg->in);
    free(pg->crowd);
    free(pg->got);
    free(pg->vec);
}

/* 1 when file i's phash (it has one) is crowded among every file's: more than
** CDB_DUPES_CROWD others within the near bound (cdb_dupes_phash_crowded's rule, which
** mark_near applies through cdb_dupes_phash_pairs), counted by comparing it with each. */
static int page_crowded(page *pg, size_t i) {
    if (pg->crowd[i] < 0) {
        int deg = 0;
        for (size_t j = 0; j < pg->n && deg <= CDB_DUPES_CROWD; j++)
            deg += j != i && pg->k[j].has_phash &&
                   __builtin_popcountll(pg->k[i].phash ^ pg->k[j].phash) <= pg->bits;
        pg->crowd[i] = deg > CDB_DUPES_CROWD;
    }
    return pg->crowd[i];
}

/* Reads the vectors of files idx[0..m) not read yet (read_vectors' call, 256 at a time). */
static cdb_status page_vectors(page *pg, const size_t *idx, size_t m) {
    size_t d = (size_t)pg->dim, at = 0;
    int64_t ids[256];
    size_t of[256];
    uint8_t found[256];
    float *v = malloc(sizeof *v * 256 * d);
    cdb_status rc = v ? CDB_OK : cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    while (rc == CDB_OK && at < m) {
        int c = 0;
        for (; at < m && c < 256; at++)
            if (!pg->got[idx[at]]) {
                pg->got[idx[at]] = 1;
                of[c] = idx[at];
                ids[c++] = pg->k[idx[at]].file_id;
            }
        if (c) rc = cdb_db_vectors_get(pg->pt->db, pg->pt->model_id, ids, c, v, found);
        for (int j = 0; rc == CDB_OK && j < c; j++) {
            if (!found[j]) continue;
            if (!(pg->vec[of[j]] = malloc(sizeof *v * d)))
                rc = cdb_seterr(CDB_NOMEM, "collapse: out of memory");
            else
                memcpy(pg->vec[of[j]], v + (size_t)j * d, sizeof *v * d);
        }
    }
    free(v);
    return rc;
}

/* Keeps, of idx[0..*m), the files that can have a near edge: a phash that is not
** crowded and a vector (read here). */
static cdb_status page_near_only(page *pg, size_t *idx, size_t *m) {
    size_t k = 0;
    cdb_status rc;
    for (size_t a = 0; a < *m; a++)
        if (pg->k[idx[a]].has_phash && !page_crowded(pg, idx[a])) idx[k++] = idx[a];
    rc = page_vectors(pg, idx, k);
    *m = 0;
    for (size_t a = 0; rc == CDB_OK && a < k; a++)
        if (pg->vec[idx[a]]) idx[(*m)++] = idx[a];
    return rc;
}

static int key_hash_cmp(const void *a, const void *b) {
    return memcmp(a, b, CDB_DUPES_HASH_BYTES);
}

/* 1 when files i and j have a near edge (both page_near_only): phashes within the
** bound and a cosine of at least the minimum, as cdb_dupes_find decides it. */
static int page_near(const page *pg, size_t i, size_t j) {
    return __builtin_popcountll(pg->k[i].phash ^ pg->k[j].phash) <= pg->bits &&
           cdb_dupes_cosine(pg->vec[i], pg->vec[j], pg->dim) >= pg->min_cosine;
}

/* One step of the closure: the files joined last (in 1, then 2) are asked about; every
** file not joined with the content hash of one of them joins (an exact edge), and every
** one with a near edge to one (page_near). *n_new: how many joined. */
static cdb_status page_step(page *pg, size_t *n_new) {
    size_t nq = 0, m = 0, nc = 0;
    *n_new = 0;
    for (size_t i = 0; i < pg->n; i++) nq += pg->in[i] == 1;
    size_t *q = malloc(sizeof *q * (nq ? nq : 1)), *cand = malloc(sizeof *cand * (pg->n + 1));
    uint8_t(*h)[CDB_DUPES_HASH_BYTES] = malloc(sizeof *h * (nq ? nq : 1));
    cdb_status rc = q && cand && h ? CDB_OK : cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    for (size_t i = 0; rc == CDB_OK && i < pg->n; i++)
        if (pg->in[i] == 1) {
            pg->in[i] = 2;
            memcpy(h[m], pg->k[i].hash, sizeof h[m]);
            q[m++] = i;
        }
    if (rc == CDB_OK) qsort(h, m, sizeof *h, key_hash_cmp);
    for (size_t j = 0; rc == CDB_OK && j < pg->n; j++) /* exact */
        if (!pg->in[j] && bsearch(pg->k[j].hash, h, m, sizeof *h, key_hash_cmp))
            pg->in[j] = 1, ++*n_new;
    if (rc == CDB_OK) rc = page_near_only(pg, q, &m);
    for (size_t j = 0; rc == CDB_OK && m && j < pg->n; j++) { /* near: the phash first */
        if (pg->in[j] || !pg->k[j].has_phash) continue;
        for (size_t a = 0; a < m; a++)
            if (__builtin_popcountll(pg->k[j].phash ^ pg->k[q[a]].phash) <= pg->bits) {
                cand[nc++] = j;
                break;
            }
    }
    if (rc == CDB_OK) rc = page_near_only(pg, cand, &nc);
    for (size_t c = 0; rc == CDB_OK && c < nc; c++)
        for (size_t a = 0; a < m; a++)
            if (page_near(pg, cand[c], q[a])) {
                pg->in[cand[c]] = 1, ++*n_new;
                break;
            }
    free(q);
    free(cand);
    free(h);
    return rc;
}

/* The facts of the closure's files (in 2), ascending ids, as read_facts and read_vectors
** give them: a vector where a near edge is possible. */
static cdb_status page_facts(page *pg, facts *f) {
    size_t m = 0, k = 0;
    for (size_t i = 0; i < pg->n; i++) m += pg->in[i] != 0;
    int64_t *ids = malloc(sizeof *ids * (m ? m : 1));
    size_t *at = malloc(sizeof *at * (m ? m : 1));
    cdb_db_photo *rows = malloc(sizeof *rows * (m ? m : 1));
    uint8_t *found = malloc(m ? m : 1);
    cdb_status rc = ids && at && rows && found ? CDB_OK
                                               : cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    for (size_t i = 0; rc == CDB_OK && i < pg->n; i++)
        if (pg->in[i]) at[k] = i, ids[k++] = pg->k[i].file_id;
    if (rc == CDB_OK && m > INT32_MAX) rc = cdb_seterr(CDB_NOMEM, "collapse: too many copies");
    if (rc == CDB_OK) rc = cdb_db_photos_get(pg->pt->db, ids, (int)m, rows, found);
    for (k = 0; rc == CDB_OK && k < m; k++) {
        if (!found[k]) continue; /* gone since the keys were read */
        if (facts_grow(f)) {
            rc = cdb_seterr(CDB_NOMEM, "collapse: out of memory");
            break;
        }
        f->ids[f->n] = (eng_member){ids[k], 0};
        facts_of_row(&rows[k], &f->cf[f->n]);
        f->cf[f->n].id = ids[k];
        item_of_facts(&f->cf[f->n], ids[k], &f->it[f->n]);
        /* read when a near edge is possible (page_near_only), so NULL or the vector */
        if (f->it[f->n].has_phash) f->it[f->n].vec = pg->vec[at[k]];
        f->n++;
    }
    free(ids);
    free(at);
    free(rows);
    free(found);
    return rc;
}

static int key_id_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = ((const cdb_db_copy_key *)b)->file_id;
    return (x > y) - (x < y);
}

cdb_status cdb_eng_groups_build_page(const eng_groups_part *part, int dim, const int64_t *ids,
                                     int n, eng_groups **out) {
    cdb_dupes_params p = cdb_dupes_params_default();
    page pg = {part, dim, p.phash_bits, p.min_cosine, NULL, 0, NULL, NULL, NULL, NULL};
    facts f;
    size_t n_new = 1;
    eng_groups *g = calloc(1, sizeof *g);
    memset(&f, 0, sizeof f);
    *out = NULL;
    cdb_status rc = g && (g->key = calloc(1, sizeof *g->key))
                        ? cdb_db_copy_keys(part->db, &pg.k, &pg.n)
                        : cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    if (g) g->n_parts = 1, atomic_init(&g->refs, 1);
    size_t m = pg.n ? pg.n : 1;
    if (rc == CDB_OK && (!(pg.in = calloc(m, 1)) || !(pg.crowd = malloc(m)) ||
                         !(pg.got = calloc(m, 1)) || !(pg.vec = calloc(m, sizeof *pg.vec))))
        rc = cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    if (rc == CDB_OK) memset(pg.crowd, -1, m);
    for (int i = 0; rc == CDB_OK && i < n; i++) { /* the hits: the first to ask about */
        cdb_db_copy_key *k = bsearch(&ids[i], pg.k, pg.n, sizeof *pg.k, key_id_cmp);
        if (k) pg.in[k - pg.k] = 1;
    }
    while (rc == CDB_OK && n_new) rc = page_step(&pg, &n_new);
    if (rc == CDB_OK) rc = page_facts(&pg, &f);
    if (rc == CDB_OK) rc = groups_of(&f, dim, g);
    facts_free(&f);
    page_free(&pg);
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

/* ---- copies collapsed across answers (a front server over its peers) ------------------ */

static int copy_index_crowded(const eng_copy_index *x, int64_t id);

cdb_status cdb_engine_copy_facts_get(cdb_engine *e, const char *model, const int64_t *ids,
                                     int n, cdb_engine_copy_facts *out, uint16_t **vecs,
                                     int *dim) {
    eng_reader *rd = NULL;
    eng_model *mod = NULL;
    eng_copy_index *x = NULL;
    cdb_db_photo *rows = NULL;
    uint8_t *found = NULL, *vfound = NULL;
    cdb_status st;
    cdb_eng_clear();
    *vecs = NULL;
    *dim = 0;
    if (n < 0 || (n > 0 && (!ids || !out)))
        return cdb_eng_fail(CDB_INVALID, CDB_ENGINE_E_NONE, "copy_facts_get: bad arguments");
    if ((st = cdb_eng_reader_get(e, &rd)) != CDB_OK) return st;
    if ((st = cdb_eng_model_get(e, rd->db, model, 0, 0, -1, &mod)) != CDB_OK ||
        (st = cdb_eng_copy_index_get(e, rd->db, mod->model_id, &x)) != CDB_OK)
        goto done;
    *dim = mod->dm.dim;
    rows = malloc(sizeof *rows * (size_t)(n ? n : 1));
    found = malloc((size_t)(n ? n : 1));
    vfound = malloc((size_t)(n ? n : 1));
    *vecs = malloc(sizeof **vecs * (size_t)(n ? n : 1) * (size_t)*dim);
    if (!rows || !found || !vfound || !*vecs) {
        st = cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot read copy facts");
        goto done;
    }
    if ((st = cdb_db_photos_get(rd->db, ids, n, rows, found)) != CDB_OK ||
        (st = cdb_db_vectors_get_f16(rd->db, mod->model_id, ids, n, *vecs, vfound)) != CDB_OK) {
        st = cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot read copy facts");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        if (found[i]) facts_of_row(&rows[i], &out[i]);
        if (out[i].has_phash && copy_index_crowded(x, ids[i])) out[i].has_phash = 0;
        out[i].id = ids[i];
        if (out[i].has_phash && vfound[i] == 1) out[i].vec = *vecs + (size_t)i * (size_t)*dim;
    }
done:
    if (st != CDB_OK) {
        free(*vecs);
        *vecs = NULL;
    }
    cdb_eng_copy_index_unref(x);
    free(rows);
    free(found);
    free(vfound);
    cdb_eng_reader_put(e, rd);
    return st;
}

/* dim halves as fp32 (exact) into v: 0, or -1 when one is not finite (no vector then). */
static int vec_of_halves(const uint16_t *h, int dim, float *v) {
    for (int j = 0; j < dim; j++)
        if (!isfinite(v[j] = cdb_k_f16_to_f32_1(h[j]))) return -1;
    return 0;
}


/* The pairs (a < m_files <= b) of the hashes ph[0..m_files) (files) and ph[m_files..m)
** (queries) within bits, each once: every query against every file while that is at
** most 2^26 comparisons (a page's queries), else through cdb_dupes_phash_pairs over all
** m (which also pairs files with files: the multi-index's cost, not its answer). *out:
** free(). */
static cdb_status cross_pairs(const uint64_t *ph, size_t m_files, size_t m, int bits,
                              cdb_dupes_pair **out, size_t *n_out) {
    cdb_dupes_pair *all = NULL;
    size_t n_all = 0, n = 0;
    cdb_status rc = CDB_OK;
    *out = NULL;
    *n_out = 0;
    if ((m - m_files) * m_files <= ((size_t)1 << 26)) { /* every query against every file */
        for (size_t j = m_files; j < m; j++)
            for (size_t i = 0; i < m_files; i++) n += __builtin_popcountll(ph[i] ^ ph[j]) <= bits;
        if (!(*out = malloc(sizeof **out * (n ? n : 1))))
            return cdb_seterr(CDB_NOMEM, "out of memory");
        for (size_t j = m_files; j < m; j++)
            for (size_t i = 0; i < m_files; i++)
                if (__builtin_popcountll(ph[i] ^ ph[j]) <= bits)
                    (*out)[(*n_out)++] = (cdb_dupes_pair){i, j, 0};
        return CDB_OK;
    }
    if ((rc = cdb_dupes_phash_pairs(ph, m, bits, &all, &n_all)) != CDB_OK) return rc;
    if (!(*out = malloc(sizeof **out * (n_all ? n_all : 1)))) {
        cdb_free(all);
        return cdb_seterr(CDB_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < n_all; k++) /* a < b: a file and a query when a < m_files <= b */
        if (all[k].a < m_files && all[k].b >= m_files) (*out)[(*n_out)++] = all[k];
    cdb_free(all);
    return CDB_OK;
}

/* ---- the copy index: what cdb_engine_copies_of looks files up in ----------------------- */

struct eng_copy_index {
    atomic_int refs;
    eng_groups_key key;                    /* what it was built for (dir owned) */
    size_t n;                              /* every ok file of the database */
    int64_t *ids;                          /* n, ascending */
    uint8_t (*hash)[CDB_DUPES_HASH_BYTES]; /* n */
    uint64_t *phash;                       /* n */
    unsigned char *has;                    /* n: 1 a hash, 2 a phash, 4 a crowded one */
    size_t *by_hash, n_hash;               /* the files with a hash, by hash */
};

void cdb_eng_copy_index_unref(eng_copy_index *x) {
    if (!x || atomic_fetch_sub(&x->refs, 1) != 1) return;
    free(x->key.dir);
    free(x->ids);
    free(x->hash);
    free(x->phash);
    free(x->has);
    free(x->by_hash);
    free(x);
}

eng_copy_index *cdb_eng_copy_index_ref(eng_copy_index *x) {
    if (x) atomic_fetch_add(&x->refs, 1);
    return x;
}

int cdb_eng_copy_index_current(const eng_copy_index *x, const eng_groups_key *key) {
    return x && x->key.gen == key->gen && x->key.n_missing == key->n_missing &&
           !strcmp(x->key.dir, key->dir ? key->dir : "");
}

static int by_hash_cmp(const void *a, const void *b, void *ctx) {
    const eng_copy_index *x = ctx;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = memcmp(x->hash[i], x->hash[j], CDB_DUPES_HASH_BYTES);
    return c ? c : (i > j) - (i < j);
}

/* A crowded phash (dupes.h, CDB_DUPES_CROWD, among the database's files) names no
** picture: such a file is never a near copy here, as in the database's own groups
** (mark_near), so its phash bit gives way to the crowded one. */
static cdb_status mark_crowded(eng_copy_index *x) {
    size_t m = 0;
    size_t *idx = malloc(sizeof *idx * (x->n ? x->n : 1));
    uint64_t *ph = malloc(sizeof *ph * (x->n ? x->n : 1));
    unsigned char *crowded = malloc(x->n ? x->n : 1);
    cdb_status rc = idx && ph && crowded ? CDB_OK : cdb_seterr(CDB_NOMEM, "out of memory");
    for (size_t i = 0; rc == CDB_OK && i < x->n; i++)
        if (x->has[i] & 2) idx[m] = i, ph[m++] = x->phash[i];
    if (rc == CDB_OK) rc = cdb_dupes_phash_crowded(ph, m, cdb_dupes_params_default().phash_bits,
                                                   crowded);
    for (size_t k = 0; rc == CDB_OK && k < m; k++)
        if (crowded[k]) x->has[idx[k]] = (unsigned char)((x->has[idx[k]] & ~2u) | 4u);
    free(idx);
    free(ph);
    free(crowded);
    return rc;
}

/* 1 when file id is crowded in x (mark_crowded). */
static int copy_index_crowded(const eng_copy_index *x, int64_t id) {
    size_t lo = 0, hi = x->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (x->ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < x->n && x->ids[lo] == id && (x->has[lo] & 4);
}

cdb_status cdb_eng_copy_index_build(const eng_groups_part *part, eng_copy_index **out) {
    facts f;
    eng_copy_index *x = calloc(1, sizeof *x);
    cdb_status rc = x ? CDB_OK : cdb_seterr(CDB_NOMEM, "out of memory");
    memset(&f, 0, sizeof f);
    *out = NULL;
    if (rc == CDB_OK) {
        atomic_init(&x->refs, 1);
        x->key = part->key;
        if (!(x->key.dir = strdup(part->key.dir ? part->key.dir : "")))
            rc = cdb_seterr(CDB_NOMEM, "out of memory");
    }
    if (rc == CDB_OK) rc = read_facts(part, 1, &f);
    size_t m = f.n ? f.n : 1;
    if (rc == CDB_OK && (!(x->ids = malloc(sizeof *x->ids * m)) ||
                         !(x->hash = malloc(sizeof *x->hash * m)) ||
                         !(x->phash = malloc(sizeof *x->phash * m)) ||
                         !(x->has = malloc(m)) || !(x->by_hash = malloc(sizeof *x->by_hash * m))))
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
    for (size_t i = 0; rc == CDB_OK && i < f.n; i++) {
        x->ids[i] = f.ids[i].id;
        memcpy(x->hash[i], f.cf[i].hash, CDB_DUPES_HASH_BYTES);
        x->phash[i] = f.cf[i].phash;
        x->has[i] = (unsigned char)((f.cf[i].has_hash ? 1 : 0) | (f.cf[i].has_phash ? 2 : 0));
        if (f.cf[i].has_hash) x->by_hash[x->n_hash++] = i;
    }
    if (rc == CDB_OK) {
        x->n = f.n;
        if (x->n_hash > 1) qsort_r(x->by_hash, x->n_hash, sizeof *x->by_hash, by_hash_cmp, x);
        rc = mark_crowded(x);
    }
    facts_free(&f);
    if (rc != CDB_OK) {
        cdb_eng_copy_index_unref(x);
        return cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "cannot index the copy facts");
    }
    *out = x;
    return CDB_OK;
}

/* The first of x's files by hash whose hash is h, or x->n_hash when none. */
static size_t hash_lower_bound(const eng_copy_index *x, const uint8_t *h) {
    size_t lo = 0, hi = x->n_hash;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (memcmp(x->hash[x->by_hash[mid]], h, CDB_DUPES_HASH_BYTES) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < x->n_hash && !memcmp(x->hash[x->by_hash[lo]], h, CDB_DUPES_HASH_BYTES)
               ? lo
               : x->n_hash;
}

/* One step of the closure: marks (hit[i] = 1) the files of x not yet hit with the hash
** of a query, or a phash within the near bound of one and a cosine at least the near
** minimum (the queries' vectors qv, NULL rows: none). *n_new: how many. */
static cdb_status closure_step(const eng_groups_part *pt, int dim, const eng_copy_index *x,
                               unsigned char *hit, const cdb_engine_copy_facts *q,
                               float *const *qv, size_t n_q, size_t *n_new) {
    cdb_dupes_params p = cdb_dupes_params_default();
    size_t m = 0, n_pairs = 0;
    size_t *idx = malloc(sizeof *idx * (x->n + n_q + 1));
    uint64_t *ph = malloc(sizeof *ph * (x->n + n_q + 1));
    cdb_dupes_pair *pairs = NULL;
    int64_t *ids = NULL;
    uint16_t *h = NULL;
    float *v = NULL;
    uint8_t *found = NULL;
    cdb_status rc = idx && ph ? CDB_OK : cdb_seterr(CDB_NOMEM, "out of memory");
    *n_new = 0;
    for (size_t k = 0; rc == CDB_OK && k < n_q; k++) /* exact: the same hash */
        for (size_t at = q[k].has_hash ? hash_lower_bound(x, q[k].hash) : x->n_hash;
             at < x->n_hash && !memcmp(x->hash[x->by_hash[at]], q[k].hash, CDB_DUPES_HASH_BYTES);
             at++)
            if (!hit[x->by_hash[at]]) hit[x->by_hash[at]] = 1, ++*n_new;
    /* near: the pairs of a file (first m_files) and a query (after), phash first */
    for (size_t i = 0; rc == CDB_OK && i < x->n; i++)
        if (!hit[i] && (x->has[i] & 2)) idx[m] = i, ph[m++] = x->phash[i];
    size_t m_files = m;
    for (size_t k = 0; rc == CDB_OK && k < n_q; k++)
        if (q[k].has_phash && qv[k]) idx[m] = k, ph[m++] = q[k].phash;
    if (rc == CDB_OK && m > m_files && m_files)
        rc = cross_pairs(ph, m_files, m, p.phash_bits, &pairs, &n_pairs);
    if (rc == CDB_OK && (!(ids = malloc(sizeof *ids * (n_pairs ? n_pairs : 1))) ||
                         !(h = malloc(sizeof *h * (n_pairs ? n_pairs : 1) * (size_t)dim)) ||
                         !(v = malloc(sizeof *v * (size_t)dim)) ||
                         !(found = malloc(n_pairs ? n_pairs : 1))))
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
    for (size_t k = 0; rc == CDB_OK && k < n_pairs; k++) ids[k] = x->ids[idx[pairs[k].a]];
    if (rc == CDB_OK && n_pairs)
        rc = cdb_db_vectors_get_f16(pt->db, pt->model_id, ids, (int)n_pairs, h, found);
    for (size_t c = 0; rc == CDB_OK && c < n_pairs; c++) {
        size_t file = idx[pairs[c].a], k = idx[pairs[c].b];
        if (hit[file] || found[c] != 1 || vec_of_halves(h + c * (size_t)dim, dim, v)) continue;
        if (cdb_dupes_cosine(v, qv[k], dim) >= p.min_cosine) hit[file] = 1, ++*n_new;
    }
    free(idx);
    free(ph);
    free(pairs);
    free(ids);
    free(h);
    free(v);
    free(found);
    return rc;
}

/* The queries of the next step: the files of x marked new (hit[i] == 1; then 2), their
** hashes and phashes, and their vectors (halves in hv, floats in fv; NULL rows: none). */
static cdb_status closure_queries(const eng_groups_part *pt, int dim, const eng_copy_index *x,
                                  unsigned char *hit, cdb_engine_copy_facts **q, float ***qv,
                                  uint16_t **hv, float **fv, size_t *n_q) {
    size_t n = 0, k = 0;
    for (size_t i = 0; i < x->n; i++) n += hit[i] == 1;
    int64_t *ids = malloc(sizeof *ids * (n ? n : 1));
    uint8_t *found = malloc(n ? n : 1);
    free(*q), free(*qv), free(*hv), free(*fv);
    *q = calloc(n ? n : 1, sizeof **q);
    *qv = calloc(n ? n : 1, sizeof **qv);
    *hv = malloc(sizeof **hv * (n ? n : 1) * (size_t)dim);
    *fv = malloc(sizeof **fv * (n ? n : 1) * (size_t)dim);
    *n_q = 0;
    cdb_status rc = ids && found && *q && *qv && *hv && *fv
                        ? CDB_OK
                        : cdb_seterr(CDB_NOMEM, "out of memory");
    for (size_t i = 0; rc == CDB_OK && i < x->n; i++)
        if (hit[i] == 1) {
            hit[i] = 2;
            memcpy((*q)[k].hash, x->hash[i], CDB_DUPES_HASH_BYTES);
            (*q)[k].has_hash = x->has[i] & 1;
            (*q)[k].phash = x->phash[i];
            (*q)[k].has_phash = (x->has[i] & 2) != 0;
            ids[k++] = x->ids[i];
        }
    if (rc == CDB_OK && n)
        rc = cdb_db_vectors_get_f16(pt->db, pt->model_id, ids, (int)n, *hv, found);
    for (k = 0; rc == CDB_OK && k < n; k++)
        if ((*q)[k].has_phash && found[k] == 1 &&
            !vec_of_halves(*hv + k * (size_t)dim, dim, *fv + k * (size_t)dim))
            (*qv)[k] = *fv + k * (size_t)dim;
    if (rc == CDB_OK) *n_q = n;
    free(ids);
    free(found);
    return rc;
}

cdb_status cdb_engine_copies_of(cdb_engine *e, const char *model,
                                const cdb_engine_copy_facts *items, int n,
                                cdb_engine_copy_facts **out, int *n_out, uint16_t **vecs,
                                int *dim) {
    eng_reader *rd = NULL;
    eng_model *mod = NULL;
    eng_copy_index *x = NULL;
    unsigned char *hit = NULL;
    cdb_engine_copy_facts *q = NULL;
    float **qv = NULL, *fv = NULL;
    uint16_t *hv = NULL;
    int64_t *ids = NULL;
    size_t n_q = (size_t)n, n_new = 1, n_hit = 0;
    eng_groups_part pt;
    cdb_status st;
    cdb_eng_clear();
    *out = NULL;
    *n_out = 0;
    *vecs = NULL;
    *dim = 0;
    if (n < 0 || (n > 0 && !items))
        return cdb_eng_fail(CDB_INVALID, CDB_ENGINE_E_NONE, "copies_of: bad arguments");
    if ((st = cdb_eng_reader_get(e, &rd)) != CDB_OK) return st;
    if ((st = cdb_eng_model_get(e, rd->db, model, 0, 0, -1, &mod)) != CDB_OK ||
        (st = cdb_eng_copy_index_get(e, rd->db, mod->model_id, &x)) != CDB_OK)
        goto done;
    pt = (eng_groups_part){rd->db, mod->model_id, {NULL, 0, 0}};
    *dim = mod->dm.dim;
    q = malloc(sizeof *q * (size_t)(n ? n : 1));
    qv = calloc((size_t)(n ? n : 1), sizeof *qv);
    fv = malloc(sizeof *fv * (size_t)(n ? n : 1) * (size_t)*dim);
    hit = calloc(x->n ? x->n : 1, 1);
    if (!q || !qv || !fv || !hit) {
        st = cdb_seterr(CDB_NOMEM, "out of memory");
        goto done;
    }
    for (int k = 0; k < n; k++) { /* the items' vectors: of this set's dim, finite */
        q[k] = items[k];
        if (items[k].vec && !vec_of_halves(items[k].vec, *dim, fv + (size_t)k * (size_t)*dim))
            qv[k] = fv + (size_t)k * (size_t)*dim;
    }
    while (st == CDB_OK && n_new) { /* the files just found are the next step's queries */
        if ((st = closure_step(&pt, *dim, x, hit, q, qv, n_q, &n_new)) == CDB_OK)
            st = closure_queries(&pt, *dim, x, hit, &q, &qv, &hv, &fv, &n_q);
    }
    for (size_t i = 0; st == CDB_OK && i < x->n; i++) n_hit += hit[i] != 0;
    ids = st == CDB_OK ? malloc(sizeof *ids * (n_hit ? n_hit : 1)) : NULL;
    *out = st == CDB_OK ? malloc(sizeof **out * (n_hit ? n_hit : 1)) : NULL;
    if (st == CDB_OK && (!ids || !*out)) st = cdb_seterr(CDB_NOMEM, "out of memory");
    for (size_t i = 0, k = 0; st == CDB_OK && i < x->n; i++)
        if (hit[i]) ids[k++] = x->ids[i];
    cdb_eng_reader_put(e, rd); /* the facts, with vectors, through the one reader of them */
    rd = NULL;
    if (st == CDB_OK) st = cdb_engine_copy_facts_get(e, model, ids, (int)n_hit, *out, vecs, dim);
    if (st == CDB_OK) *n_out = (int)n_hit;
done:
    if (st != CDB_OK) {
        free(*out);
        *out = NULL;
        st = cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot find the copies asked for");
    }
    cdb_eng_copy_index_unref(x);
    free(ids);
    free(hit);
    free(q);
    free(qv);
    free(hv);
    free(fv);
    if (rd) cdb_eng_reader_put(e, rd);
    return st;
}

/* A gathered hit with its facts, sorted together. */
typedef struct ranked {
    cdb_engine_hit h;
    cdb_engine_copy_facts f;
} ranked;

static int ranked_cmp(const void *a, const void *b) {
    return cdb_engine_hit_cmp_score(&((const ranked *)a)->h, &((const ranked *)b)->h);
}

cdb_status cdb_engine_hits_rank(cdb_engine_hit *hits, cdb_engine_copy_facts *facts, int *n,
                                const unsigned char *truncated, int *more) {
    ranked *r = malloc(sizeof *r * (size_t)(*n > 0 ? *n : 1));
    unsigned char *seen = NULL;
    int cut = *n, max_part = 0;
    cdb_eng_clear();
    *more = 0;
    if (!r) return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot merge");
    for (int i = 0; i < *n; i++) {
        r[i].h = hits[i];
        r[i].f = facts[i];
        if (facts[i].part > max_part) max_part = facts[i].part;
    }
    if (*n > 1) qsort(r, (size_t)*n, sizeof *r, ranked_cmp);
    for (int i = 0; i < *n; i++) {
        hits[i] = r[i].h;
        facts[i] = r[i].f;
    }
    free(r);
    if (truncated && !(seen = calloc((size_t)max_part + 1, 1)))
        return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot merge");
    for (int i = *n - 1; truncated && i >= 0; i--) { /* each truncated answer's last hit */
        int d = facts[i].part;
        if (d < 0 || !truncated[d] || seen[d]) continue;
        seen[d] = 1;
        *more = 1;
        if (i + 1 < cut) cut = i + 1;
    }
    free(seen);
    for (int i = cut; i < *n; i++) cdb_eng_hit_clear(&hits[i]);
    *n = cut;
    return CDB_OK;
}

/* A file of the collapse and where its facts are (at < n_hits: a hit's). */
typedef struct named {
    eng_member m; /* (src, id) */
    int at;
} named;

static int named_cmp(const void *a, const void *b) {
    const named *x = a, *y = b;
    int c = member_cmp(&x->m, y->m.db, y->m.id);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* The groups of the files of cf[0..n) (each once, by (src, id), the first kept) by their
** facts, the vectors (dim halves) converted to fp32 exactly; one with a half that is
** not finite is not used. */
static cdb_status groups_of_files(const cdb_engine_copy_facts *const *cf, int n, int dim,
                                  eng_groups *g) {
    facts f;
    named *by = malloc(sizeof *by * (size_t)(n ? n : 1));
    cdb_status rc = CDB_OK;
    memset(&f, 0, sizeof f);
    f.vecs = malloc(sizeof *f.vecs * (size_t)(n ? n : 1) * (size_t)dim);
    if (!by || !f.vecs) rc = cdb_seterr(CDB_NOMEM, "collapse: out of memory");
    for (int i = 0; rc == CDB_OK && i < n; i++) by[i] = (named){{cf[i]->id, cf[i]->src}, i};
    if (rc == CDB_OK && n > 1) qsort(by, (size_t)n, sizeof *by, named_cmp);
    for (int k = 0; rc == CDB_OK && k < n; k++) {
        if (k > 0 && !member_cmp(&by[k - 1].m, by[k].m.db, by[k].m.id)) continue; /* twice */
        if (facts_grow(&f)) {
            rc = cdb_seterr(CDB_NOMEM, "collapse: out of memory");
            break;
        }
        float *v = f.vecs + f.n * (size_t)dim;
        f.ids[f.n] = by[k].m;
        f.cf[f.n] = *cf[by[k].at];
        item_of_facts(&f.cf[f.n], by[k].m.id, &f.it[f.n]);
        if (f.cf[f.n].vec && !vec_of_halves(f.cf[f.n].vec, dim, v)) f.it[f.n].vec = v;
        f.n++;
    }
    if (rc == CDB_OK) rc = groups_of(&f, dim, g);
    free(by);
    facts_free(&f);
    return rc;
}

cdb_status cdb_engine_hits_collapse(cdb_engine_hit *hits, cdb_engine_copy_facts *facts, int *n,
                                    const cdb_engine_copy_facts *others, int n_others, int dim) {
    eng_groups *g = calloc(1, sizeof *g);
    const cdb_engine_copy_facts **all = NULL;
    unsigned char *seen = NULL;
    int kept = 0, oom = 0;
    cdb_status rc = CDB_OK;
    cdb_eng_clear();
    if (*n < 0 || n_others < 0 || dim <= 0 || (*n > 0 && (!hits || !facts)) ||
        (n_others > 0 && !others)) {
        free(g);
        return cdb_eng_fail(CDB_INVALID, CDB_ENGINE_E_NONE, "hits_collapse: bad arguments");
    }
    if (!g) return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory",
                                 "cannot collapse the copies");
    atomic_init(&g->refs, 1);
    g->n_parts = 2; /* every member named by its src */
    if (!(all = malloc(sizeof *all * (size_t)(*n + n_others + 1)))) {
        rc = cdb_seterr(CDB_NOMEM, "collapse: out of memory");
        goto done;
    }
    for (int i = 0; i < *n; i++) all[i] = &facts[i];
    for (int i = 0; i < n_others; i++) all[*n + i] = &others[i];
    if ((rc = groups_of_files(all, *n + n_others, dim, g)) != CDB_OK) goto done;
    if (!(seen = calloc(g->n_groups ? g->n_groups : 1, 1))) {
        rc = cdb_seterr(CDB_NOMEM, "collapse: out of memory");
        goto done;
    }
    for (int i = 0; i < *n; i++) {
        cdb_engine_hit h = hits[i];
        long q = group_of(g, facts[i].src, facts[i].id);
        if (q >= 0 && seen[q]) { /* a copy of a better-ranked hit */
            cdb_eng_hit_clear(&h);
            continue;
        }
        free(h.copies); /* each answer's own collapse, redone over all of them */
        free(h.copies_db);
        h.copies = NULL;
        h.copies_db = NULL;
        h.n_copies = 0;
        if (q >= 0) {
            seen[q] = 1;
            h.db = facts[i].src; /* set_copies names the hit by (src, id) */
            oom |= set_copies(g, q, &h);
            h.db = hits[i].db;
        }
        hits[kept] = h;
        facts[kept++] = facts[i];
    }
    *n = kept;
    if (oom) rc = cdb_seterr(CDB_NOMEM, "collapse: out of memory");
done:
    free(all);
    free(seen);
    cdb_eng_groups_unref(g);
    if (rc != CDB_OK) return cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "cannot collapse the copies");
    return CDB_OK;
}

/* ---- crowdedness over several servers (issue 28: a front over its peers) --------------- */

_Static_assert(CDB_ENGINE_CROWD == CDB_DUPES_CROWD, "engine.h's crowd is dupes.h's");

cdb_status cdb_engine_phash_near_counts(cdb_engine *e, const char *model, const uint64_t *ph,
                                        int n, int *counts) {
    eng_reader *rd = NULL;
    eng_model *mod = NULL;
    eng_copy_index *x = NULL;
    int bits = cdb_dupes_params_default().phash_bits;
    cdb_status st;
    cdb_eng_clear();
    if (n < 0 || (n > 0 && (!ph || !counts)))
        return cdb_eng_fail(CDB_INVALID, CDB_ENGINE_E_NONE, "phash_near_counts: bad arguments");
    if ((st = cdb_eng_reader_get(e, &rd)) != CDB_OK) return st;
    if ((st = cdb_eng_model_get(e, rd->db, model, 0, 0, -1, &mod)) == CDB_OK &&
        (st = cdb_eng_copy_index_get(e, rd->db, mod->model_id, &x)) == CDB_OK)
        for (int i = 0; i < n; i++) { /* every file with a phash, crowded here or not */
            int k = 0;
            for (size_t j = 0; j < x->n && k < CDB_ENGINE_CROWD_COUNT_MAX; j++)
                k += (x->has[j] & 6) && __builtin_popcountll(x->phash[j] ^ ph[i]) <= bits;
            counts[i] = k;
        }
    cdb_eng_copy_index_unref(x);
    cdb_eng_reader_put(e, rd);
    return st;
}
