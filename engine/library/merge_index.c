/*
** merge_index.c: the index of a merged database, built in parts (issue 29 part 4's
** "build per part from one trained quantizer and merge the inverted lists").
**
** When the plan for the store's size is an IVF kind, one index is trained on the
** sample a single build trains on (cdb_index_train_source over the whole store), then
** cdb_index_build_parts fills a copy of it per part, each with the vectors whose rows
** came from that part (the database's ids; a last group holds the vectors no part
** brought this time: rows of earlier merges), and moves the copies' inverted lists into
** one index, so no vector is added twice. An IVF entry (its list and its code) is a
** function of the vector and the shared quantizer alone, so the result holds the
** entries a single build holds, in another order within lists: a search after the
** exact re-rank gives the same hits and scores (test_merge_index checks it against a
** single build and against brute force). Other kinds (flat, HNSW: no inverted lists)
** are built as `clipdb index build` builds them.
**
** With a trained index file and the parts' own indexes (part_index.c: made by a cluster's
** tasks from that file, under the parts' file ids), a part's lists come from its index
** instead: its ids renamed to the database's (the merge's map from the part's ids), then
** checked to be exactly the ids whose rows came from that part, and the part's generation
** to be the index's watermark (nothing changed since it was added). A part that fails
** either is added the old way, with a warning saying why, so a wrong id never reaches the
** index: a photo could otherwise return another photo's hit.
**
** Memory: the ids of each part (8 bytes per vector) besides the index itself; the
** vectors are read a chunk at a time, by id, from the store.
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/library/library.h"

#define SPLIT_CHUNK 4096

typedef struct id_group {
    int64_t *ids;
    int64_t n, cap;
} id_group;

/* A group's vectors as an index source: positions are places in its id list. */
typedef struct part_src {
    cdb_db *db;
    int64_t model_id;
    int dim;
    const id_group *g;
} part_src;

static cdb_status part_src_read(void *ctx, int64_t pos, int64_t n, int64_t *ids,
                                uint16_t *vecs) {
    part_src *s = ctx;
    uint8_t found[SPLIT_CHUNK];
    cdb_status rc = CDB_OK;
    for (int64_t done = 0; done < n && rc == CDB_OK;) {
        int k = n - done < SPLIT_CHUNK ? (int)(n - done) : SPLIT_CHUNK;
        const int64_t *want = s->g->ids + pos + done;
        rc = cdb_db_vectors_get_f16(s->db, s->model_id, want, k,
                                    vecs + (size_t)done * (size_t)s->dim, found);
        for (int i = 0; i < k && rc == CDB_OK; i++)
            if (found[i] != 1) /* the iterator gave it a moment ago: the store changed */
                rc = cdb_seterr(CDB_BUSY, "the vector of file %lld is %s: the store changed "
                                          "while the index was built: build it again",
                                (long long)want[i], found[i] ? "unreadable" : "gone");
        if (rc == CDB_OK) memcpy(ids + done, want, sizeof *ids * (size_t)k);
        done += k;
    }
    return rc;
}

/* The stored ids of the model (those the store's iterator yields, which a single build
** indexes) into groups: part_of[id] - 1 for ids below n_part_of with a part, else the
** last group (n_parts). */
static cdb_status group_ids(cdb_db *db, int64_t model_id, const uint8_t *part_of,
                            int64_t n_part_of, int n_parts, id_group *g) {
    cdb_db_iter *it = NULL;
    int64_t *chunk = malloc(sizeof *chunk * SPLIT_CHUNK);
    cdb_status rc = chunk ? cdb_db_iter_new(db, model_id, &it) : cdb_seterr(CDB_NOMEM, "ids");
    for (int got = 1; rc == CDB_OK && got > 0;) {
        if ((rc = cdb_db_iter_read(it, SPLIT_CHUNK, chunk, NULL, NULL, &got)) != CDB_OK) break;
        for (int i = 0; i < got; i++) {
            int64_t id = chunk[i];
            int k = id >= 0 && id < n_part_of && part_of[id] ? part_of[id] - 1 : n_parts;
            id_group *q = &g[k < n_parts ? k : n_parts];
            if (q->n == q->cap) {
                int64_t nc = q->cap ? q->cap * 2 : 1024;
                int64_t *p = realloc(q->ids, sizeof *p * (size_t)nc);
                if (!p) {
                    rc = cdb_seterr(CDB_NOMEM, "out of memory grouping %lld ids", (long long)nc);
                    break;
                }
                q->ids = p;
                q->cap = nc;
            }
            q->ids[q->n++] = id;
        }
    }
    cdb_db_iter_free(it);
    free(chunk);
    return rc;
}

/* The trained index: what cdb_index_build makes before it adds (the plan for n, the
** sample of the whole store). */
static cdb_status train(cdb_db *db, int64_t model_id, const cdb_index_params *p, int64_t n,
                        cdb_index **out) {
    cdb_index_source src;
    cdb_status rc = cdb_eng_store_source_open(db, model_id, p->dim, &src);
    *out = NULL;
    if (rc != CDB_OK) return rc;
    if ((rc = cdb_index_new(p, n, out)) == CDB_OK) rc = cdb_index_train_source(*out, &src);
    cdb_eng_store_source_close(&src);
    if (rc != CDB_OK) {
        cdb_index_free(*out);
        *out = NULL;
    }
    return rc;
}

static int is_ivf_kind(cdb_index_kind k) {
    return k == CDB_INDEX_IVF_SQ || k == CDB_INDEX_IVF_PQ || k == CDB_INDEX_IVF_HNSW_PQ;
}

/* Saves ix as the model's index (the index/ folder made when absent). */
static cdb_status save(cdb_db *db, int64_t model_id, const cdb_index *ix) {
    char path[4096], dir[4096];
    snprintf(dir, sizeof dir, "%s/index", cdb_db_dir(db));
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return cdb_seterr(cdb_errno_status(errno), "mkdir %s: %s", dir, strerror(errno));
    cdb_eng_index_path(db, model_id, path, sizeof path);
    return cdb_index_save(ix, path);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The trained index at path when it is usable for vectors of dim (its stamp into stamp),
** else NULL (a warning unless it is absent). */
static cdb_index *load_trained(const char *path, int dim, char stamp[17]) {
    cdb_index *ix = NULL;
    cdb_index_info info;
    cdb_status rc = cdb_index_load(path, &ix);
    if (rc == CDB_NOTFOUND) {
        CDB_LOG_INFO("no trained index at %s: the index is trained on the merged store", path);
        cdb_clearerr();
        return NULL;
    }
    if (rc == CDB_OK) {
        cdb_index_get_info(ix, &info);
        if (!is_ivf_kind(info.kind) || info.dim != dim || !cdb_index_is_trained(ix))
            rc = cdb_seterr(CDB_INVALID, "a %s index of dim %d, not a trained IVF one of dim %d",
                            cdb_index_kind_name(info.kind), info.dim, dim);
    }
    if (rc == CDB_OK) rc = cdb_eng_trained_stamp(path, stamp);
    if (rc != CDB_OK) {
        CDB_LOG_WARN("the trained index %s is not used (%s): the index is trained on the "
                     "merged store", path, cdb_errmsg());
        cdb_clearerr();
        cdb_index_free(ix);
        return NULL;
    }
    return ix;
}

/* Part pi's own index, its ids renamed to the database's, when it holds exactly group g
** (the database's ids whose rows came from that part) as of the part's generation now;
** else NULL, with why. */
static cdb_index *load_part(const eng_part_index *pi, const char *stamp, const id_group *g,
                            char *why, size_t why_size) {
    char path[4300];
    cdb_index *ix = NULL;
    cdb_index_info info;
    int64_t gen = 0, *want = NULL;
    cdb_status rc;
    cdb_eng_part_index_path(pi->dir, stamp, path, sizeof path);
    rc = cdb_index_load(path, &ix);
    if (rc == CDB_NOTFOUND) {
        snprintf(why, why_size, "it has no index from this training (index/part.%s.cdbidx)",
                 stamp);
        goto fail;
    }
    if (rc != CDB_OK) {
        snprintf(why, why_size, "its index: %s", cdb_errmsg());
        goto fail;
    }
    if ((rc = cdb_db_generation(pi->db, &gen)) != CDB_OK ||
        cdb_index_watermark(ix) != (uint64_t)gen) {
        snprintf(why, why_size, "its index is stale (the part's vectors changed since: "
                 "generation %lld, the index's %llu)", (long long)gen,
                 (unsigned long long)cdb_index_watermark(ix));
        goto fail;
    }
    if ((rc = cdb_index_remap_ids(ix, pi->from, pi->to, pi->n)) != CDB_OK) {
        snprintf(why, why_size, "renaming its ids: %s", cdb_errmsg());
        goto fail;
    }
    /* the renamed index must hold exactly the ids the merge took from this part, once */
    cdb_index_get_info(ix, &info);
    if (cdb_index_count(ix) != g->n || info.n_indexed != g->n ||
        !(want = malloc(sizeof *want * (size_t)(g->n + 1)))) {
        snprintf(why, why_size, "its index holds %lld entries (%lld ids) for the %lld rows "
                 "the merge took from the part", (long long)info.n_indexed,
                 (long long)cdb_index_count(ix), (long long)g->n);
        goto fail;
    }
    memcpy(want, g->ids, sizeof *want * (size_t)g->n);
    qsort(want, (size_t)g->n, sizeof *want, cmp_i64);
    for (int64_t i = 0; i < g->n; i++)
        if (!cdb_index_covers(ix, want[i])) {
            snprintf(why, why_size, "its index lacks the vector of file %lld",
                     (long long)want[i]);
            goto fail;
        }
    free(want);
    return ix;
fail:
    cdb_clearerr();
    free(want);
    cdb_index_free(ix);
    return NULL;
}

cdb_status cdb_eng_index_build_split(cdb_db *db, int64_t model_id, int dim, int kind,
                                     const uint8_t *part_of, int64_t n_part_of, int n_parts,
                                     const char *trained_path, const eng_part_index *pi,
                                     eng_index_result *res, eng_split_result *split) {
    cdb_index_params p = cdb_index_params_default();
    cdb_index_info plan;
    cdb_index *trained = NULL, *ix = NULL, **filled = NULL;
    cdb_index_source *srcs = NULL;
    part_src *ps = NULL;
    id_group *g = NULL;
    int64_t gen = 0, n = 0, t0 = cdb_now_ns();
    int n_src = 0, n_filled = 0;
    char stamp[17] = "";
    cdb_status rc;
    memset(res, 0, sizeof *res);
    memset(split, 0, sizeof *split);
    p.dim = dim;
    p.kind = (cdb_index_kind)kind;
    if (n_parts < 1) return cdb_seterr(CDB_INVALID, "index in parts: no parts");
    if ((rc = cdb_db_generation(db, &gen)) != CDB_OK) return rc; /* before the reads */
    if (!(g = calloc((size_t)n_parts + 1, sizeof *g)))
        return cdb_seterr(CDB_NOMEM, "out of memory");
    if ((rc = group_ids(db, model_id, part_of, n_part_of, n_parts, g)) != CDB_OK) goto done;
    for (int i = 0; i <= n_parts; i++) n += g[i].n;
    if (n == 0) {
        rc = cdb_seterr(CDB_NOTFOUND, "no vectors to index yet");
        goto done;
    }
    if (trained_path && (trained = load_trained(trained_path, dim, stamp)))
        split->trained_file = 1;
    if ((rc = cdb_index_plan(n, &p, &plan)) != CDB_OK) goto done;
    if (!trained && !is_ivf_kind(plan.kind)) { /* no inverted lists to build in parts */
        rc = cdb_eng_index_build(db, model_id, dim, kind, ENG_LISTS_MEMORY, res);
        goto done;
    }
    srcs = calloc((size_t)n_parts + 1, sizeof *srcs);
    ps = calloc((size_t)n_parts + 1, sizeof *ps);
    filled = calloc((size_t)n_parts + 1, sizeof *filled);
    if (!srcs || !ps || !filled) {
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i <= n_parts; i++) {
        char why[600];
        if (!g[i].n) continue;
        if (trained && pi && i < n_parts) {
            if ((filled[n_filled] = load_part(&pi[i], stamp, &g[i], why, sizeof why))) {
                n_filled++;
                continue;
            }
            CDB_LOG_WARN("part %s: %s: its %lld vectors are added again", pi[i].dir, why,
                         (long long)g[i].n);
        }
        ps[n_src] = (part_src){db, model_id, dim, &g[i]};
        srcs[n_src] = (cdb_index_source){g[i].n, part_src_read, &ps[n_src]};
        n_src++;
    }
    if (!trained && (rc = train(db, model_id, &p, n, &trained)) != CDB_OK) goto done;
    rc = cdb_index_build_parts_with(trained, filled, n_filled, srcs, n_src, NULL, &ix);
    if (rc != CDB_OK) goto done;
    cdb_index_set_watermark(ix, (uint64_t)gen);
    if ((rc = save(db, model_id, ix)) != CDB_OK) goto done;
    res->action = 2;
    split->built_in = n_src + n_filled;
    split->from_files = n_filled;
    res->n_vectors = cdb_index_count(ix);
    cdb_index_get_info(ix, &res->info);
    snprintf(res->why, sizeof res->why,
             "built in %d part%s from one trained quantizer, %d from the parts' own indexes",
             split->built_in, split->built_in == 1 ? "" : "s", n_filled);
done:
    if (!res->seconds) res->seconds = (double)(cdb_now_ns() - t0) / 1e9;
    for (int i = 0; g && i <= n_parts; i++) free(g[i].ids);
    for (int i = 0; filled && i < n_filled; i++) cdb_index_free(filled[i]);
    free(g);
    free(srcs);
    free(ps);
    free(filled);
    cdb_index_free(trained);
    cdb_index_free(ix);
    return rc;
}
