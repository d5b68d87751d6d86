/*
** indexing.c: the glue between db/ (where vectors live) and index/ (FAISS + exact
** re-rank): where a model's index file is, building it from the store, bringing
** it up to date after an ingest (add or rebuild, as cdb_index_refresh_decide
** says), and the callbacks a search uses to fetch stored vectors and to find the
** vectors the index does not cover yet.
**
** Index files: <db>/index/model_<model id>.cdbidx, replaced atomically by
** cdb_index_save. The index's watermark is the database generation read *before*
** the vectors were read, so anything written meanwhile shows up as "added since"
** and is searched exactly until the next refresh.
*/
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/search/search.h"
#include "kernels/kernels.h"

void cdb_eng_index_path(cdb_db *db, int64_t model_id, char *buf, size_t size) {
    snprintf(buf, size, "%s/index/model_%lld.cdbidx", cdb_db_dir(db), (long long)model_id);
}

/* ---- fetch: stored fp16 vectors by id ------------------------------------------------ */

cdb_status cdb_eng_fetch_vectors(void *ctx, const int64_t *ids, size_t n, uint16_t *vecs,
                             uint8_t *found) {
    eng_fetch_ctx *c = ctx;
    if (n == 0) return CDB_OK;
    return c->snap ? cdb_eng_snap_fetch(c, ids, n, vecs, found)
                   : cdb_eng_store_fetch(c, ids, n, vecs, found);
}

cdb_status cdb_eng_store_fetch(eng_fetch_ctx *c, const int64_t *ids, size_t n, uint16_t *vecs,
                               uint8_t *found) {
    cdb_status rc;
    if (n == 0) return CDB_OK;
    /* the stored fp16 bits as they are (no decode and re-encode on the way) */
    rc = cdb_db_vectors_get_f16(c->db, c->model_id, ids, (int)n, vecs, found);
    for (size_t i = 0; rc == CDB_OK && i < n; i++)
        if (found[i] == CDB_DB_FOUND_UNREADABLE) {
            found[i] = 0;
            c->n_unreadable++;
        }
    return rc;
}

/* ---- reading the whole store ------------------------------------------------------------ */

cdb_status cdb_eng_read_all_vectors(cdb_db *db, int64_t model_id, int dim, int64_t **ids,
                                uint16_t **vecs, int64_t *n, int *n_unreadable) {
    cdb_db_iter *it = NULL;
    cdb_status rc = n_unreadable ? cdb_db_iter_new_skipping(db, model_id, n_unreadable, &it)
                                 : cdb_db_iter_new(db, model_id, &it);
    *ids = NULL;
    *vecs = NULL;
    *n = 0;
    if (rc == CDB_OK) rc = cdb_eng_read_iter_vectors(it, dim, ids, vecs, n);
    cdb_db_iter_free(it);
    return rc;
}

cdb_status cdb_eng_read_iter_vectors(cdb_db_iter *it, int dim, int64_t **ids, uint16_t **vecs,
                                     int64_t *n) {
    int64_t cap = 0, len = 0, *I = NULL;
    uint16_t *V = NULL;
    cdb_status rc = CDB_OK;
    const int chunk = 4096;
    *ids = NULL;
    *vecs = NULL;
    *n = 0;
    while (rc == CDB_OK) {
        int got = 0;
        if (len + chunk > cap) {
            int64_t nc = cap ? cap * 2 : 16384;
            int64_t *ni = realloc(I, sizeof *I * (size_t)nc);
            uint16_t *nv;
            if (ni) I = ni;
            nv = ni ? realloc(V, sizeof *V * (size_t)nc * (size_t)dim) : NULL;
            if (!ni || !nv) {
                rc = cdb_seterr(CDB_NOMEM, "out of memory reading %lld vectors", (long long)nc);
                break;
            }
            V = nv;
            cap = nc;
        }
        rc = cdb_db_iter_read(it, chunk, I + len, NULL, V + (size_t)len * (size_t)dim, &got);
        if (rc != CDB_OK || got == 0) break;
        len += got;
    }
    if (rc != CDB_OK) {
        free(I);
        free(V);
        return rc;
    }
    *ids = I;
    *vecs = V;
    *n = len;
    return CDB_OK;
}

/* ---- ids added / removed since a watermark ------------------------------------------------ */

typedef struct id_list {
    int64_t *v;
    size_t n, cap;
} id_list;

static int push_id(int64_t id, int64_t seq, void *ud) {
    id_list *l = ud;
    (void)seq;
    if (cdb_eng_grow((void **)&l->v, &l->cap, l->n, sizeof *l->v) != 0) return 1;
    l->v[l->n++] = id;
    return 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorts and removes duplicates. */
static void uniq(id_list *l) {
    size_t o = 0;
    if (!l->n) return;
    qsort(l->v, l->n, sizeof *l->v, cmp_i64);
    for (size_t i = 0; i < l->n; i++)
        if (!o || l->v[o - 1] != l->v[i]) l->v[o++] = l->v[i];
    l->n = o;
}

cdb_status cdb_eng_ids_since(cdb_db *db, int64_t model_id, int64_t since, int removed,
                         int64_t **ids, size_t *n) {
    id_list l = {0};
    cdb_status rc = removed ? cdb_db_removed_since(db, model_id, since, push_id, &l)
                            : cdb_db_added_since(db, model_id, since, push_id, &l);
    if (rc != CDB_OK) {
        free(l.v);
        return rc;
    }
    uniq(&l);
    *ids = l.v;
    *n = l.n;
    return CDB_OK;
}

/* ---- the store as an index source, streamed -----------------------------------------
** cdb_index_build reads a training sample at increasing positions, then everything from
** position 0 in chunks: the store's ordered iterator serves both, skipping forward
** between sample runs and starting again for the second pass (after a first that
** counts them). Memory: one chunk, where the build read the whole store into memory
** before (10 GB at 10^7 512-d vectors). */

typedef struct store_src {
    cdb_db *db;
    int64_t model_id, at; /* the iterator's next position */
    int dim;
    cdb_db_iter *it;
    int64_t *skip_ids;
    uint16_t *skip_vecs;
} store_src;

#define STORE_SKIP_CHUNK 4096

static cdb_status store_src_read(void *ctx, int64_t pos, int64_t n, int64_t *ids,
                                 uint16_t *vecs) {
    store_src *s = ctx;
    cdb_status rc = CDB_OK;
    if (!s->it || pos < s->at) {
        cdb_db_iter_free(s->it);
        s->it = NULL;
        s->at = 0;
        if ((rc = cdb_db_iter_new(s->db, s->model_id, &s->it)) != CDB_OK) return rc;
    }
    while (s->at < pos) { /* forward to pos */
        int got = 0, want = pos - s->at < STORE_SKIP_CHUNK ? (int)(pos - s->at)
                                                           : STORE_SKIP_CHUNK;
        if ((rc = cdb_db_iter_read(s->it, want, s->skip_ids, NULL, s->skip_vecs, &got)) !=
            CDB_OK)
            return rc;
        if (got == 0) break;
        s->at += got;
    }
    for (int64_t done = 0; s->at == pos + done && done < n;) {
        int got = 0, want = n - done < INT32_MAX ? (int)(n - done) : INT32_MAX;
        rc = cdb_db_iter_read(s->it, want, ids + done, NULL,
                              vecs + (size_t)done * (size_t)s->dim, &got);
        if (rc != CDB_OK || got == 0) break;
        done += got;
        s->at += got;
    }
    if (rc == CDB_OK && s->at != pos + n)
        rc = cdb_seterr(CDB_BUSY, "the store changed while the index was being built "
                                  "(%lld vectors expected): build it again",
                        (long long)(pos + n));
    return rc;
}

/* The vectors the iterator yields (a first pass: the catalog's count may differ from
** what the shards hold, and the source must have exactly as many as it says). */
static cdb_status store_src_count(store_src *s, int64_t *n) {
    cdb_status rc = CDB_OK;
    int got = 1;
    *n = 0;
    if ((rc = cdb_db_iter_new(s->db, s->model_id, &s->it)) != CDB_OK) return rc;
    while (rc == CDB_OK && got > 0) {
        rc = cdb_db_iter_read(s->it, STORE_SKIP_CHUNK, s->skip_ids, NULL, s->skip_vecs, &got);
        *n += rc == CDB_OK ? got : 0;
    }
    cdb_db_iter_free(s->it);
    s->it = NULL;
    return rc;
}

cdb_status cdb_eng_store_source_open(cdb_db *db, int64_t model_id, int dim,
                                     cdb_index_source *src) {
    store_src *ss = calloc(1, sizeof *ss);
    cdb_status rc;
    memset(src, 0, sizeof *src);
    if (!ss) return cdb_seterr(CDB_NOMEM, "index source");
    ss->db = db, ss->model_id = model_id, ss->dim = dim;
    ss->skip_ids = malloc(sizeof *ss->skip_ids * STORE_SKIP_CHUNK);
    ss->skip_vecs = malloc(sizeof *ss->skip_vecs * STORE_SKIP_CHUNK * (size_t)dim);
    src->read = store_src_read, src->ctx = ss;
    if (!ss->skip_ids || !ss->skip_vecs) rc = cdb_seterr(CDB_NOMEM, "index source buffers");
    else rc = store_src_count(ss, &src->n);
    if (rc != CDB_OK) cdb_eng_store_source_close(src);
    return rc;
}

void cdb_eng_store_source_close(cdb_index_source *src) {
    store_src *ss = src ? src->ctx : NULL;
    if (!ss) return;
    cdb_db_iter_free(ss->it);
    free(ss->skip_ids);
    free(ss->skip_vecs);
    free(ss);
    src->ctx = NULL;
}

/* ---- build and refresh ------------------------------------------------------------------- */

/* The snapshot after the index (cdb_eng_snap_refresh): a cache, so a failure to write
** it (a full disk) is warned about and leaves searches reading the shards. */
static void snap_write_or_warn(cdb_db *db, int64_t model_id, int dim, int force) {
    if (cdb_eng_snap_refresh(db, model_id, dim, force) != CDB_OK)
        CDB_LOG_WARN("the vector snapshot of model %lld was not written (%s); searches read "
                     "the shards", (long long)model_id, cdb_errmsg());
}

/* Deletes the model's inverted-list files in dir other than keep (NULL: all). */
static void remove_lists_files(const char *dir, int64_t model_id, const char *keep) {
    char prefix[64], full[4400];
    size_t np;
    DIR *d = opendir(dir);
    struct dirent *de;
    const char *kb = keep ? strrchr(keep, '/') : NULL;
    if (!d) return;
    np = (size_t)snprintf(prefix, sizeof prefix, "model_%lld.ivfdata.", (long long)model_id);
    while ((de = readdir(d)))
        if (!strncmp(de->d_name, prefix, np) && !(kb && !strcmp(de->d_name, kb + 1))) {
            snprintf(full, sizeof full, "%s/%s", dir, de->d_name);
            unlink(full);
        }
    closedir(d);
}

/* ix's lists moved to a new file in dir (absolute), named into lists (4096 bytes). */
static cdb_status lists_to_disk(cdb_index *ix, const char *dir, int64_t model_id, int64_t gen,
                                char *lists) {
    char abs[PATH_MAX];
    if (!realpath(dir, abs))
        return cdb_seterr(cdb_errno_status(errno), "%s: %s", dir, strerror(errno));
    if (snprintf(lists, 4096, "%s/model_%lld.ivfdata.%lld.%ld", abs, (long long)model_id,
                 (long long)gen, (long)getpid()) >= 4096)
        return cdb_seterr(CDB_INVALID, "%s: path too long", abs);
    unlink(lists); /* a file of a dead build of the same pid and generation */
    return cdb_index_lists_to_disk(ix, lists);
}

cdb_status cdb_eng_index_build(cdb_db *db, int64_t model_id, int dim, int kind, int on_disk,
                               eng_index_result *res) {
    char path[4096], dir[4096], lists[4096] = "";
    int64_t gen = 0;
    cdb_index *ix = NULL;
    cdb_index_params p = cdb_index_params_default();
    cdb_index_source src;
    cdb_status rc;
    int64_t t0 = cdb_now_ns();
    memset(res, 0, sizeof *res);
    p.dim = dim;
    p.kind = (cdb_index_kind)kind;
    if ((rc = cdb_db_generation(db, &gen)) != CDB_OK) return rc;
    if ((rc = cdb_eng_store_source_open(db, model_id, dim, &src)) != CDB_OK) return rc;
    if (src.n == 0)
        rc = cdb_seterr(CDB_NOTFOUND, "no vectors to index yet (ingest some photos first)");
    else
        rc = cdb_index_build(&p, &src, &ix);
    cdb_eng_store_source_close(&src);
    if (rc != CDB_OK) return rc;
    cdb_index_set_watermark(ix, (uint64_t)gen);
    snprintf(dir, sizeof dir, "%s/index", cdb_db_dir(db));
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        cdb_index_free(ix);
        return cdb_seterr(cdb_errno_status(errno), "mkdir %s: %s", dir, strerror(errno));
    }
    cdb_eng_index_path(db, model_id, path, sizeof path);
    if (on_disk != ENG_LISTS_MEMORY) {
        rc = lists_to_disk(ix, dir, model_id, gen, lists);
        if (rc == CDB_UNSUPPORTED && on_disk == ENG_LISTS_DISK_IF_IVF) rc = CDB_OK, *lists = 0;
        else if (rc == CDB_UNSUPPORTED) {
            cdb_index_get_info(ix, &res->info);
            rc = cdb_seterr(rc, "lists on disk need an IVF index (ivf-sq, ivf-pq, "
                                "ivf-hnsw-pq); this one is %s",
                            cdb_index_kind_name(res->info.kind));
        }
    }
    if (rc == CDB_OK) rc = cdb_index_save(ix, path);
    if (rc == CDB_OK) remove_lists_files(dir, model_id, *lists ? lists : NULL);
    else if (*lists) unlink(lists);
    if (rc == CDB_OK) snap_write_or_warn(db, model_id, dim, 1);
    if (rc == CDB_OK) {
        res->on_disk = *lists != 0;
        res->action = 2;
        res->n_vectors = cdb_index_count(ix);
        cdb_index_get_info(ix, &res->info);
    }
    res->seconds = (double)(cdb_now_ns() - t0) / 1e9;
    cdb_index_free(ix);
    return rc;
}

/* Adds the vectors of ids[n] that the index does not cover and the store still has. */
static cdb_status add_uncovered(cdb_db *db, int64_t model_id, int dim, cdb_index *ix,
                                const int64_t *ids, size_t n, int64_t *n_added) {
    uint16_t *vecs = malloc(sizeof *vecs * (n ? n : 1) * (size_t)dim);
    uint8_t *found = malloc(n ? n : 1);
    int64_t *keep = malloc(sizeof *keep * (n ? n : 1)), *want = malloc(sizeof *want * (n ? n : 1));
    size_t nw = 0, nk = 0;
    eng_fetch_ctx fc = {db, model_id, dim, 0, NULL, NULL, 0};
    cdb_status rc = CDB_OK;
    *n_added = 0;
    if (!vecs || !found || !keep || !want)
        rc = cdb_seterr(CDB_NOMEM, "out of memory refreshing the index");
    for (size_t i = 0; rc == CDB_OK && i < n; i++)
        if (!cdb_index_covers(ix, ids[i])) want[nw++] = ids[i];
    if (rc == CDB_OK && nw) rc = cdb_eng_fetch_vectors(&fc, want, nw, vecs, found);
    if (rc == CDB_OK && fc.n_unreadable) /* the index must not move past what it lacks */
        rc = cdb_seterr(CDB_CORRUPT, "%d vector%s in a shard that is missing or damaged: "
                        "run `clipdb verify`",
                        fc.n_unreadable, fc.n_unreadable == 1 ? " is" : "s are");
    if (rc == CDB_OK && nw) {
        for (size_t i = 0; i < nw; i++) /* compact to the ids still stored */
            if (found[i]) {
                if (nk != i)
                    memmove(vecs + nk * (size_t)dim, vecs + i * (size_t)dim,
                            sizeof *vecs * (size_t)dim);
                keep[nk++] = want[i];
            }
        rc = cdb_index_add(ix, keep, vecs, (int64_t)nk);
        if (rc == CDB_OK) *n_added = (int64_t)nk;
    }
    free(vecs);
    free(found);
    free(keep);
    free(want);
    return rc;
}

/* 1 when dir holds an inverted-lists file of the model's (an index whose lists are on
** disk, or one a killed build left): its index is loaded to be judged, never vouched for
** by its head alone, which says nothing of the lists. */
static int has_lists_file(const char *dir, int64_t model_id) {
    char prefix[64];
    size_t np;
    int found = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    if (!d) return 0;
    np = (size_t)snprintf(prefix, sizeof prefix, "model_%lld.ivfdata.", (long long)model_id);
    while (!found && (de = readdir(d))) found = !strncmp(de->d_name, prefix, np);
    closedir(d);
    return found;
}

/* 1 when the index at path is current, learnt from its head alone (cdb_index_head_current:
** stamped, refreshed at generation gen, covering the n_vectors stored, of the kind the
** plan picks), so it is not loaded: a no-change reindex reads a few hundred bytes of it
** instead of all of it. res: filled as a refresh that found nothing to do. */
static int current_unloaded(cdb_db *db, int64_t model_id, const char *path,
                            const cdb_index_params *p, int64_t n_vectors, int64_t gen,
                            eng_index_result *res) {
    char dir[4096];
    cdb_index_head h;
    if (n_vectors <= 0 || gen < 0 || cdb_index_file_head(path, &h) != CDB_OK) {
        cdb_clearerr();
        return 0;
    }
    snprintf(dir, sizeof dir, "%s/index", cdb_db_dir(db));
    if (!cdb_index_head_current(&h, p, n_vectors, (uint64_t)gen, res->why, sizeof res->why) ||
        has_lists_file(dir, model_id))
        return 0;
    res->action = 0;
    res->n_vectors = h.n_covered;
    res->info.kind = h.kind;
    res->info.dim = h.dim;
    res->info.nlist = h.nlist;
    res->info.watermark = h.watermark;
    res->info.n_covered = h.n_covered;
    return 1;
}

cdb_status cdb_eng_index_refresh(cdb_db *db, int64_t model_id, int dim, int force_rebuild,
                             eng_index_result *res) {
    char path[4096], dir[4096];
    cdb_index *ix = NULL;
    cdb_index_params p = cdb_index_params_default();
    cdb_index_refresh_action act = CDB_INDEX_REFRESH_REBUILD;
    int64_t n_vectors = 0;
    int64_t *added = NULL, *removed = NULL, gen = 0, n_uncov = 0, n_stale = 0;
    size_t n_added = 0, n_removed = 0;
    uint64_t wm;
    cdb_status rc;
    int on_disk;
    int64_t t0 = cdb_now_ns();
    memset(res, 0, sizeof *res);
    p.dim = dim;
    cdb_eng_index_path(db, model_id, path, sizeof path);
    /* the stored vectors only (not cdb_db_get_counts: its count of the ok files without a
    ** vector reads the whole catalog, a tenth of a no-change reindex) */
    if ((rc = cdb_db_count_vectors(db, model_id, &n_vectors)) != CDB_OK) goto done;
    if ((rc = cdb_db_generation(db, &gen)) != CDB_OK) goto done;
    if (!force_rebuild && current_unloaded(db, model_id, path, &p, n_vectors, gen, res)) {
        snap_write_or_warn(db, model_id, dim, 0); /* when missing, unusable or 1% dirty */
        goto done;
    }
    rc = cdb_index_load(path, &ix);
    if (rc != CDB_OK && rc != CDB_NOTFOUND) {
        /* a damaged index is rebuilt, never fatal: the store is the truth */
        CDB_LOG_WARN("index %s unusable (%s); rebuilding", path, cdb_errmsg());
        ix = NULL;
    }
    rc = CDB_OK;
    on_disk = ix && cdb_index_on_disk(ix); /* kept by the refresh */
    if (n_vectors == 0 && !ix) {
        res->action = 0;
        snprintf(res->why, sizeof res->why, "no vectors yet");
        goto done;
    }
    if (n_vectors == 0) { /* everything was deleted or forgotten */
        char stamp[4200];
        if (remove(path) != 0 && errno != ENOENT) {
            rc = cdb_seterr(CDB_IO, "remove %s: %s", path, strerror(errno));
            goto done;
        }
        if (cdb_stamp_path(path, stamp, sizeof stamp) == 0) unlink(stamp);
        cdb_eng_snap_remove(db, model_id);
        snprintf(dir, sizeof dir, "%s/index", cdb_db_dir(db));
        remove_lists_files(dir, model_id, NULL);
        res->action = 2;
        snprintf(res->why, sizeof res->why, "no vectors left: index removed");
        goto done;
    }
    wm = ix ? cdb_index_watermark(ix) : 0;
    if (ix && !force_rebuild) {
        if ((rc = cdb_eng_ids_since(db, model_id, (int64_t)wm, 0, &added, &n_added)) != CDB_OK ||
            (rc = cdb_eng_ids_since(db, model_id, (int64_t)wm, 1, &removed, &n_removed)) != CDB_OK)
            goto done;
        for (size_t i = 0; i < n_added; i++) /* new, or changed (removed, then added back) */
            if (!cdb_index_covers(ix, added[i]) ||
                bsearch(&added[i], removed, n_removed, sizeof *removed, cmp_i64))
                n_uncov++;
        for (size_t i = 0; i < n_removed; i++)
            if (cdb_index_covers(ix, removed[i])) n_stale++;
        rc = cdb_index_refresh_decide(ix, &p, n_vectors, n_uncov, n_stale, &act, res->why,
                                      sizeof res->why);
        if (rc != CDB_OK) goto done;
        if (act == CDB_INDEX_REFRESH_ADD && on_disk) {
            /* lists in a mapped file are not changed in place (a reader maps them, and a
            ** kill must leave the old ones whole): the changes are searched exactly from
            ** the store until they pass 1% of the vectors, then the index is rebuilt */
            act = (n_uncov + n_stale) * 100 <= n_vectors ? CDB_INDEX_REFRESH_NONE
                                                         : CDB_INDEX_REFRESH_REBUILD;
            snprintf(res->why, sizeof res->why, "lists on disk: %lld changes %s",
                     (long long)(n_uncov + n_stale),
                     act == CDB_INDEX_REFRESH_NONE ? "searched exactly until they pass 1%"
                                                   : "passed 1% of the vectors: rebuilt");
        }
    } else {
        snprintf(res->why, sizeof res->why, "%s",
                 force_rebuild ? "full rebuild asked" : "no index yet");
    }
    if (act == CDB_INDEX_REFRESH_NONE) {
        /* read whole and current: the next refresh need not read it again to learn so */
        if (!on_disk) cdb_index_stamp(ix, path);
        snap_write_or_warn(db, model_id, dim, 0); /* when missing, unusable or 1% dirty */
        res->action = 0;
        res->on_disk = on_disk;
        res->n_vectors = cdb_index_count(ix);
        cdb_index_get_info(ix, &res->info);
    } else if (act == CDB_INDEX_REFRESH_ADD) {
        /* deleted and changed ids out first (a changed id is in both lists: its new
        ** vector goes back in below), then whatever the index does not cover */
        int64_t before = cdb_index_count(ix);
        if ((rc = cdb_index_remove(ix, removed, (int64_t)n_removed)) == CDB_OK)
            rc = add_uncovered(db, model_id, dim, ix, added, n_added, &res->n_added);
        if (rc == CDB_OK) {
            cdb_index_set_watermark(ix, (uint64_t)gen);
            rc = cdb_index_save(ix, path);
        }
        if (rc == CDB_OK) snap_write_or_warn(db, model_id, dim, 0);
        res->action = 1;
        res->n_removed = before - (cdb_index_count(ix) - res->n_added);
        res->n_vectors = cdb_index_count(ix);
        cdb_index_get_info(ix, &res->info);
    } else {
        char why[256];
        snprintf(why, sizeof why, "%s", res->why);
        rc = cdb_eng_index_build(db, model_id, dim, CDB_INDEX_AUTO,
                                 on_disk ? ENG_LISTS_DISK_IF_IVF : ENG_LISTS_MEMORY, res);
        snprintf(res->why, sizeof res->why, "%s", why);
    }
done:
    if (!res->seconds) res->seconds = (double)(cdb_now_ns() - t0) / 1e9;
    cdb_index_free(ix);
    free(added);
    free(removed);
    return rc;
}

/* ---- after files went away ----------------------------------------------------------------- */

typedef struct model_list {
    cdb_db_model m[CDB_DB_MAX_MODELS];
    int n;
} model_list;

static int add_model(const cdb_db_model *m, void *ud) {
    model_list *l = ud;
    if (l->n < CDB_DB_MAX_MODELS) l->m[l->n++] = *m;
    return 0;
}

int cdb_eng_refresh_all_indexes(cdb_db *db, const cdb_engine_events *ev) {
    model_list l;
    cdb_status st;
    l.n = 0;
    if ((st = cdb_db_models_foreach(db, add_model, &l)) != CDB_OK) {
        cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot list the models");
        return -1;
    }
    for (int i = 0; i < l.n; i++) {
        eng_index_result res;
        if ((st = cdb_eng_index_refresh(db, l.m[i].id, l.m[i].dim, 0, &res)) != CDB_OK) {
            cdb_eng_warn(
                ev,
                "the index of model '%s' could not be refreshed (%s); searches stay correct, "
                "'clipdb index build' rebuilds it",
                l.m[i].name, cdb_errmsg());
            return 1;
        }
    }
    return 0;
}

/* ---- the public calls --------------------------------------------------------------------- */

/* The model at model_path (loaded with its text tower to learn its weights hash) or the
** default one, without loading weights when none is named. */
static cdb_status pick_model(cdb_engine *e, const char *model_path, cdb_db_model *out) {
    eng_model *m = NULL;
    cdb_status st = cdb_eng_model_get(e, e->db, model_path, 0, model_path && *model_path, -1, &m);
    if (st == CDB_OK) *out = m->dm;
    return st;
}

cdb_status cdb_engine_index_build(cdb_engine *e, const char *model_path,
                                  const cdb_engine_index_params *p,
                                  cdb_engine_index_report *out) {
    cdb_db_model dm;
    eng_index_result res;
    cdb_status st;
    cdb_eng_clear();
    memset(out, 0, sizeof *out);
    if ((st = cdb_eng_check_writable(e->dir, 1)) != CDB_OK) return st; /* a reader writes index/ */
    if ((st = pick_model(e, model_path, &dm)) != CDB_OK) return st;
    cdb_eng_index_path(e->db, dm.id, out->path, sizeof out->path);
    snprintf(out->model, sizeof out->model, "%s", dm.name);
    if ((st = cdb_eng_index_build(e->db, dm.id, dm.dim, p ? (int)p->kind : CDB_INDEX_AUTO,
                                  p && p->on_disk ? ENG_LISTS_DISK : ENG_LISTS_MEMORY, &res)) !=
        CDB_OK)
        return cdb_eng_fail(st, st == CDB_NOTFOUND ? CDB_ENGINE_E_NO_VECTORS : CDB_ENGINE_E_NONE,
                        "cannot build the index");
    out->action = res.action;
    out->n_vectors = res.n_vectors;
    out->seconds = res.seconds;
    out->on_disk = res.on_disk;
    snprintf(out->kind, sizeof out->kind, "%s", cdb_index_kind_name(res.info.kind));
    snprintf(out->factory, sizeof out->factory, "%s", res.info.factory);
    return CDB_OK;
}

cdb_status cdb_engine_index_describe(cdb_engine *e, const char *model_path,
                                     cdb_engine_index_info *out) {
    cdb_db_model dm;
    cdb_index *ix = NULL;
    cdb_index_info info;
    cdb_db_counts counts;
    int64_t *added = NULL;
    size_t n_added = 0;
    struct stat sb;
    cdb_status st;
    cdb_eng_clear();
    memset(out, 0, sizeof *out);
    if ((st = pick_model(e, model_path, &dm)) != CDB_OK) return st;
    snprintf(out->model, sizeof out->model, "%s", dm.name);
    cdb_eng_index_path(e->db, dm.id, out->path, sizeof out->path);
    st = cdb_index_load(out->path, &ix);
    if (st == CDB_NOTFOUND) return CDB_OK;
    if (st != CDB_OK)
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot read the index %s", out->path);
    out->has_index = 1;
    cdb_index_get_info(ix, &info);
    memset(&counts, 0, sizeof counts);
    cdb_db_get_counts(e->db, dm.id, &counts);
    if (cdb_eng_ids_since(e->db, dm.id, (int64_t)info.watermark, 0, &added, &n_added) == CDB_OK)
        for (size_t i = 0; i < n_added; i++)
            if (!cdb_index_covers(ix, added[i])) out->not_covered++;
    free(added);
    snprintf(out->kind, sizeof out->kind, "%s", cdb_index_kind_name(info.kind));
    snprintf(out->factory, sizeof out->factory, "%s", info.factory);
    out->dim = info.dim;
    out->covered = info.n_covered;
    out->stored = counts.n_vectors;
    out->watermark = (int64_t)info.watermark;
    out->generation = counts.generation;
    out->nlist = info.nlist;
    out->nprobe = info.nprobe;
    out->ef_search = info.ef_search;
    out->rerank_factor = info.rerank_factor;
    out->bytes = stat(out->path, &sb) == 0 ? (int64_t)sb.st_size : 0;
    out->on_disk = cdb_index_on_disk(ix);
    cdb_index_info_format(&info, out->text, sizeof out->text);
    cdb_index_free(ix);
    return CDB_OK;
}
