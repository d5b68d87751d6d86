/*
** search.c: the one search code path of clipdb (the CLI, `clipdb serve` and the C
** library all call cdb_engine_search).
**
**  1. The query becomes one vector: every text term (the query language, query.c) and
**     "not" text is encoded by the text tower, every example image by the image tower,
**     every "more like this" id gives its stored vector; cdb_index_query_combine sums
**     them with their weights (each normalized first) and normalizes. A raw embedding
**     alone is searched as given.
**  2. The vector set's search state (below) gives the index, when there is one, and
**     the "overlay": the vectors the index does not cover (all of them when there is
**     no index). cdb_index_search takes the index's candidates, scores the overlay
**     exactly, re-ranks everything exactly in fp32 from the stored fp16 vectors.
**  3. The metadata filters (taken after/before, camera, near, has GPS) select the photos
**     that pass first, and the index searches within them (include_ids): exact, not a
**     filter after ranking. Hits whose file is gone meanwhile are dropped; `under` /
**     `unders` filter after ranking (asking for 4x more until enough pass or everything
**     was seen); offset pages; sort=time (file time) and taken / taken-asc (capture time)
**     order the page's hits, or (sort_window) the best hits of a window that every page
**     of the query cuts from.
**  4. A text query to a model with a logit bias (SigLIP) gives each hit the model's
**     probability too, from its fp32 cosine (set_probabilities).
**  5. With collapse, copies (the exact and near groups `duplicates` finds) become one hit
**     with the others as its copies, before paging (collapse.c). Over several databases
**     (pages.c) the groups are those of all their files, and the merged hits are
**     collapsed by them.
**
** Freshness (engine.h): the search state of a vector set is the loaded index (with the
** identity of its file: device, inode, size, mtime) and the overlay as of a database
** generation. Each search stats the index file and reads the generation (two cheap
** calls): a new index file is loaded and the overlay recomputed; a new generation
** updates the overlay from the removal and addition logs since the last one (a delta,
** not a reread). The vector snapshot beside the index (snapshot.c), when usable, is
** mapped with the state (its file's identity kept and compared likewise): the flat plan
** scans it in place, and every fetch reads from it the ids not dirty since its
** watermark. A state is immutable once published and reference counted, so
** searches in flight keep theirs while the next one is built. A one-shot search (the
** CLI) builds the state once: exactly what it used to compute.
*/
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/search/search.h"

/* ---- the search state of a vector set ------------------------------------------------- */

typedef struct eng_ix { /* a loaded index, shared by the states built on it */
    atomic_int refs;
    cdb_index *ix;
} eng_ix;

typedef struct eng_snap { /* a mapped vector snapshot (snapshot.c), shared likewise */
    atomic_int refs;
    cdb_index_snap *s;
} eng_snap;

struct eng_vset {
    atomic_int refs;
    eng_ix *ix;          /* NULL: no usable index */
    int ix_file;         /* an index file existed when this state was built */
    struct stat ix_st;   /* its identity then */
    int64_t gen;         /* the generation the overlay reflects */
    int64_t *ids;        /* overlay, ascending ids */
    uint16_t *vecs;      /* n * dim fp16 */
    size_t n;
    int dim;
    int borrowed;        /* ids and vecs are snap's mapping (read only), not heap */
    eng_snap *snap;      /* NULL: vectors are fetched from the shards */
    int snap_file;       /* a snapshot file existed when this state was built */
    struct stat snap_st; /* its identity then */
    int64_t *dirty;      /* ids written or removed since snap's watermark, up to gen */
    size_t n_dirty;
    int partial;           /* its overlay left out a missing or damaged shard's vectors:
                              never reused, so a restored shard is seen by the next search */
    atomic_int unreadable; /* a search met vectors in a missing or damaged shard */
    atomic_int warned;     /* and said so (once per state) */
};

static void ix_unref(eng_ix *x) {
    if (x && atomic_fetch_sub(&x->refs, 1) == 1) {
        cdb_index_free(x->ix);
        free(x);
    }
}

static void snap_unref(eng_snap *x) {
    if (x && atomic_fetch_sub(&x->refs, 1) == 1) {
        cdb_index_snap_close(x->s);
        free(x);
    }
}

static void vset_free(eng_vset *v) {
    ix_unref(v->ix);
    snap_unref(v->snap);
    if (!v->borrowed) free(v->ids), free(v->vecs);
    free(v->dirty);
    free(v);
}

static void vset_unref(eng_vset *v) {
    if (v && atomic_fetch_sub(&v->refs, 1) == 1) vset_free(v);
}

/* Every vector set's search state. */
static void search_states_free(cdb_engine *e) {
    for (eng_search_state *s = e->searches, *next; s; s = next) {
        next = s->next;
        vset_unref(s->cur);
        cdb_eng_groups_unref(s->groups);
        cdb_eng_groups_unref(s->many);
        cdb_eng_copy_index_unref(s->copy_index);
        pthread_mutex_destroy(&s->mu);
        free(s);
    }
    e->searches = NULL;
}

static eng_search_state *search_state(cdb_engine *e, int64_t model_id) {
    eng_search_state *s;
    pthread_mutex_lock(&e->mu);
    for (s = e->searches; s && s->model_id != model_id; s = s->next) {
    }
    if (!s && (s = calloc(1, sizeof *s))) {
        s->model_id = model_id;
        pthread_mutex_init(&s->mu, NULL);
        s->next = e->searches;
        e->searches = s;
    }
    pthread_mutex_unlock(&e->mu);
    return s;
}

static int same_stat(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Keeps the entries of ids/vecs whose `found` is set, in place. */
static size_t compact_found(int64_t *ids, uint16_t *vecs, const uint8_t *found, size_t n, int dim) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (found[i]) {
            if (k != i) {
                ids[k] = ids[i];
                memmove(vecs + k * (size_t)dim, vecs + i * (size_t)dim, sizeof *vecs * (size_t)dim);
            }
            k++;
        }
    return k;
}

/* The fetch context of state v (its snapshot, when it has one). */
static eng_fetch_ctx fetch_ctx(cdb_db *db, int64_t model_id, const eng_vset *v) {
    eng_fetch_ctx fc = {db, model_id, v->dim, 0, NULL, NULL, 0};
    if (v->snap) fc.snap = v->snap->s, fc.dirty = v->dirty, fc.n_dirty = v->n_dirty;
    return fc;
}

/* The stored vectors of ids[n] (sorted), those still stored kept: *vecs heap. Through
** v's snapshot (v may be NULL: the shards). */
static cdb_status fetch_kept(cdb_db *db, int64_t model_id, int dim, const eng_vset *v,
                             int64_t *ids, size_t *n, uint16_t **vecs, int *n_unreadable) {
    eng_fetch_ctx fc = {db, model_id, dim, 0, NULL, NULL, 0};
    uint8_t *found = NULL;
    cdb_status st = CDB_OK;
    *vecs = NULL;
    if (v) fc = fetch_ctx(db, model_id, v);
    if (!*n) return CDB_OK;
    *vecs = malloc(sizeof **vecs * *n * (size_t)dim);
    found = malloc(*n);
    if (!*vecs || !found) st = cdb_seterr(CDB_NOMEM, "out of memory");
    else st = cdb_eng_fetch_vectors(&fc, ids, *n, *vecs, found);
    if (st == CDB_OK) *n = compact_found(ids, *vecs, found, *n, dim);
    *n_unreadable += fc.n_unreadable;
    free(found);
    return st;
}

/* Attaches the vector set's snapshot to the new state v, with the ids dirty since its
** watermark. One that cannot be used leaves v without (its vectors come from the shards;
** the next refresh writes it again), and so does a shard missing or damaged: searches
** then say what they leave out, as without a snapshot. That check opens the shards'
** iterator (*it, when it could: free it), which warns about each such shard
** (*n_unreadable) and reads every vector left when the snapshot is not used. */
static void snap_attach(cdb_db *db, int64_t model_id, eng_vset *v, cdb_db_iter **it,
                        int *n_unreadable) {
    char path[4096];
    cdb_index_snap *s = NULL;
    cdb_eng_snap_path(db, model_id, path, sizeof path);
    if (!(v->snap_file = stat(path, &v->snap_st) == 0)) return;
    if (cdb_db_iter_new_skipping(db, model_id, n_unreadable, it) != CDB_OK || *n_unreadable)
        return;
    if (cdb_eng_snap_open(db, model_id, v->dim, 0, &s) != CDB_OK) {
        CDB_LOG_DEBUG("engine: the snapshot is not used: %s", cdb_errmsg());
        return;
    }
    if (cdb_eng_snap_dirty(db, model_id, (int64_t)cdb_index_snap_watermark(s), &v->dirty,
                           &v->n_dirty) != CDB_OK ||
        !(v->snap = calloc(1, sizeof *v->snap))) {
        free(v->dirty);
        v->dirty = NULL, v->n_dirty = 0;
        cdb_index_snap_close(s);
        return;
    }
    atomic_init(&v->snap->refs, 1);
    v->snap->s = s;
}

/* The flat plan's overlay from v's snapshot: its entries that are not dirty and the
** vectors written since its watermark (those still stored, from the shards), in id
** order. Nothing dirty: the overlay is the mapping itself, read in place. */
static cdb_status overlay_from_snap(cdb_db *db, int64_t model_id, eng_vset *v, int *unread) {
    const cdb_index_snap *s = v->snap->s;
    const int64_t *sids = cdb_index_snap_ids(s);
    const uint16_t *svecs = cdb_index_snap_vecs(s);
    size_t ns = (size_t)cdb_index_snap_count(s), row = (size_t)v->dim, i = 0, j = 0, o = 0;
    int64_t *added = NULL;
    size_t n_added = 0;
    uint16_t *avecs = NULL;
    cdb_status rc;
    if (!v->n_dirty) {
        /* const dropped for the overlay's type only: a borrowed overlay is never written */
        v->ids = (int64_t *)sids, v->vecs = (uint16_t *)svecs, v->n = ns, v->borrowed = 1;
        return CDB_OK;
    }
    rc = cdb_eng_ids_since(db, model_id, (int64_t)cdb_index_snap_watermark(s), 0, &added,
                           &n_added);
    if (rc == CDB_OK) rc = fetch_kept(db, model_id, v->dim, NULL, added, &n_added, &avecs, unread);
    if (rc == CDB_OK && (!(v->ids = malloc(sizeof *v->ids * (ns + n_added + 1))) ||
                         !(v->vecs = malloc(sizeof *v->vecs * (ns + n_added + 1) * row))))
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
    while (rc == CDB_OK && (i < ns || j < n_added)) { /* merge, both ascending */
        if (j >= n_added || (i < ns && sids[i] < added[j])) {
            if (!cdb_index_ids_have(v->dirty, v->n_dirty, sids[i])) {
                v->ids[o] = sids[i];
                memcpy(v->vecs + o++ * row, svecs + i * row, sizeof *v->vecs * row);
            }
            i++;
        } else {
            i += i < ns && sids[i] == added[j]; /* replaced by its newer vector */
            v->ids[o] = added[j];
            memcpy(v->vecs + o++ * row, avecs + j++ * row, sizeof *v->vecs * row);
        }
    }
    v->n = o;
    free(added);
    free(avecs);
    return rc;
}

/* A state built from nothing: the index file (if usable) and what it does not cover,
** with the snapshot (if usable) that searches fetch from. */
static cdb_status vset_fresh(cdb_engine *e, eng_search_state *ss, cdb_db *db, int dim,
                             const char *path, const struct stat *st, int have_file, int64_t gen,
                             eng_vset **out) {
    eng_vset *v = calloc(1, sizeof *v);
    cdb_index *ix = NULL;
    cdb_db_iter *it = NULL;
    cdb_status rc = CDB_OK;
    int unread = 0;
    *out = NULL;
    if (!v) return cdb_seterr(CDB_NOMEM, "out of memory");
    v->dim = dim;
    v->gen = gen;
    v->ix_file = have_file;
    if (have_file) v->ix_st = *st;
    snap_attach(db, ss->model_id, v, &it, &unread);
    /* A flat index ("IDMap,Flat", the plan under 20,000 vectors) holds the stored
    ** vectors again, in fp32: it is not even loaded, and the state searches the fp16
    ** store itself, which is exact and about 10x faster than FAISS's flat scan
    ** (Debian's generic FAISS build scores with its scalar reference loop: bench_index
    ** at 25,000 vectors, one query at a time, 556 against 58 queries/s), in half the
    ** memory. A file whose header cannot be read goes to cdb_index_load for its error. */
    cdb_index_kind kind = CDB_INDEX_AUTO;
    if (have_file && cdb_index_file_kind(path, &kind) == CDB_OK && kind == CDB_INDEX_FLAT)
        rc = CDB_NOTFOUND;
    else
        rc = have_file ? cdb_index_load(path, &ix) : CDB_NOTFOUND;
    if (rc == CDB_OK && cdb_index_dim(ix) != dim) {
        cdb_index_free(ix);
        ix = NULL;
        rc = CDB_NOTFOUND;
    }
    if (rc != CDB_OK) {
        int64_t n = 0;
        if (rc != CDB_NOTFOUND && !ss->warned_ix) {
            cdb_eng_warn(&e->p.events, "the index %s is unusable (%s); searching without it", path,
                     cdb_errmsg());
            ss->warned_ix = 1; /* once per state: a rebuilt file is a new state */
        }
        ix = NULL;
        /* no index: every stored vector is searched exactly (the snapshot's, mapped) */
        if (v->snap) rc = overlay_from_snap(db, ss->model_id, v, &unread);
        else if (it) rc = cdb_eng_read_iter_vectors(it, dim, &v->ids, &v->vecs, &n);
        else rc = cdb_eng_read_all_vectors(db, ss->model_id, dim, &v->ids, &v->vecs, &n,
                                           &unread);
        v->n = v->snap ? v->n : (size_t)n;
        cdb_db_iter_free(it);
        if (rc != CDB_OK) {
            vset_free(v);
            return cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "cannot read the stored vectors");
        }
    } else {
        /* vectors stored since the index was built are searched exactly */
        cdb_db_iter_free(it);
        if (!(v->ix = calloc(1, sizeof *v->ix))) {
            cdb_index_free(ix);
            vset_free(v);
            return cdb_seterr(CDB_NOMEM, "out of memory");
        }
        atomic_init(&v->ix->refs, 1);
        v->ix->ix = ix;
        rc = cdb_eng_ids_since(db, ss->model_id, (int64_t)cdb_index_watermark(ix), 0, &v->ids,
                               &v->n);
        if (rc == CDB_OK)
            rc = fetch_kept(db, ss->model_id, dim, v, v->ids, &v->n, &v->vecs, &unread);
        if (rc != CDB_OK) {
            vset_free(v);
            return cdb_eng_fail(rc, CDB_ENGINE_E_NONE,
                            "cannot read the vectors added since the index was built");
        }
    }
    v->partial = unread > 0;
    atomic_init(&v->unreadable, unread > 0);
    atomic_init(&v->refs, 1);
    *out = v;
    return CDB_OK;
}

/* old's dirty ids with removed[nr] and added[na] (each sorted, distinct): heap. */
static cdb_status merge_dirty(const eng_vset *old, const int64_t *removed, size_t nr,
                              const int64_t *added, size_t na, int64_t **out, size_t *n_out) {
    const int64_t *src[3] = {old->dirty, removed, added};
    size_t len[3] = {old->n_dirty, nr, na}, at[3] = {0, 0, 0}, o = 0;
    int64_t *m = malloc(sizeof *m * (old->n_dirty + nr + na + 1));
    if (!m) return cdb_seterr(CDB_NOMEM, "out of memory");
    for (;;) { /* the smallest head of the three, once */
        int64_t x = INT64_MAX;
        int any = 0;
        for (int k = 0; k < 3; k++)
            if (at[k] < len[k] && (!any || src[k][at[k]] < x)) x = src[k][at[k]], any = 1;
        if (!any) break;
        for (int k = 0; k < 3; k++) at[k] += at[k] < len[k] && src[k][at[k]] == x;
        m[o++] = x;
    }
    *out = m;
    *n_out = o;
    return CDB_OK;
}

/* old's overlay brought from old->gen to gen: entries removed or rewritten since are
** dropped, vectors written since (still stored) merged in, in id order. The index is
** shared with old. */
static cdb_status vset_delta(cdb_db *db, int64_t model_id, const eng_vset *old, int64_t gen,
                             eng_vset **out) {
    int64_t *removed = NULL, *added = NULL;
    size_t n_removed = 0, n_added = 0, o = 0, i = 0, j = 0;
    uint16_t *avecs = NULL;
    eng_vset *v = NULL;
    int dim = old->dim, unread = 0;
    cdb_status rc;
    *out = NULL;
    if ((rc = cdb_eng_ids_since(db, model_id, old->gen, 1, &removed, &n_removed)) != CDB_OK ||
        (rc = cdb_eng_ids_since(db, model_id, old->gen, 0, &added, &n_added)) != CDB_OK)
        goto done;
    {
        /* fetch_kept compacts: keep the full list of changed ids for the drop test */
        int64_t *kept = malloc(sizeof *kept * (n_added ? n_added : 1));
        size_t n_kept = n_added;
        if (!kept) {
            rc = cdb_seterr(CDB_NOMEM, "out of memory");
            goto done;
        }
        memcpy(kept, added, sizeof *kept * n_added);
        if ((rc = fetch_kept(db, model_id, dim, NULL, kept, &n_kept, &avecs, &unread)) !=
            CDB_OK) {
            free(kept);
            goto done;
        }
        if (!(v = calloc(1, sizeof *v)) ||
            !(v->ids = malloc(sizeof *v->ids * (old->n + n_kept + 1))) ||
            !(v->vecs = malloc(sizeof *v->vecs * (old->n + n_kept + 1) * (size_t)dim))) {
            free(kept);
            rc = cdb_seterr(CDB_NOMEM, "out of memory");
            goto done;
        }
        while (i < old->n || j < n_kept) { /* merge, both ascending */
            int take_old = j >= n_kept || (i < old->n && old->ids[i] < kept[j]);
            if (take_old) {
                int64_t id = old->ids[i];
                if (!cdb_index_ids_have(removed, n_removed, id) &&
                    !cdb_index_ids_have(added, n_added, id)) {
                    v->ids[o] = id;
                    memcpy(v->vecs + o * (size_t)dim, old->vecs + i * (size_t)dim,
                           sizeof *v->vecs * (size_t)dim);
                    o++;
                }
                i++;
            } else {
                if (i < old->n && old->ids[i] == kept[j]) i++; /* replaced by the new vector */
                v->ids[o] = kept[j];
                memcpy(v->vecs + o * (size_t)dim, avecs + j * (size_t)dim,
                       sizeof *v->vecs * (size_t)dim);
                o++;
                j++;
            }
        }
        free(kept);
    }
    v->n = o;
    v->dim = dim;
    v->gen = gen;
    v->partial = unread > 0;
    atomic_init(&v->unreadable, unread > 0);
    v->ix_file = old->ix_file;
    v->ix_st = old->ix_st;
    if ((v->ix = old->ix)) atomic_fetch_add(&v->ix->refs, 1);
    v->snap_file = old->snap_file;
    v->snap_st = old->snap_st;
    if (old->snap &&
        (rc = merge_dirty(old, removed, n_removed, added, n_added, &v->dirty, &v->n_dirty)) ==
            CDB_OK) {
        v->snap = old->snap;
        atomic_fetch_add(&v->snap->refs, 1);
    }
    atomic_init(&v->refs, 1);
done:
    if (rc != CDB_OK && v) {
        vset_free(v);
        v = NULL;
        cdb_eng_fail(rc, CDB_ENGINE_E_NONE,
                     "cannot read the vectors changed since the last search");
    }
    free(removed);
    free(added);
    free(avecs);
    *out = v;
    return rc;
}

/* Whether v holds at least as many vectors as the catalog (through db) says the
** set has: the index's covered ids plus the overlay's ids it does not cover. A state
** short of that missed a commit (a snapshot read under a live writer) and is built
** again. Ids the index covers but that were removed since make this an upper bound
** only: it catches missing vectors, not extra ones (searches drop those). */
static int vset_complete(const eng_vset *v, cdb_db *db, int64_t model_id) {
    int64_t have = (int64_t)v->n, n_vectors = 0;
    if (cdb_db_count_vectors(db, model_id, &n_vectors) != CDB_OK) return 1; /* cannot tell */
    if (v->ix) {
        cdb_index_info in;
        cdb_index_get_info(v->ix->ix, &in);
        have += in.n_covered;
        for (size_t i = 0; i < v->n; i++) have -= cdb_index_covers(v->ix->ix, v->ids[i]) != 0;
    }
    return have >= n_vectors;
}

/* The current state of model_id's vector set (a reference: vset_unref it), read
** through rd. A state built while a writer committed is used for this search only and
** not published: rd may have read a shard as a snapshot from before the commit while
** the catalog it read was already past it (the new vectors listed, not found), and a
** published state with that generation would miss them for good. */
static cdb_status vset_get(cdb_engine *e, eng_reader *rd, int64_t model_id, int dim,
                           eng_vset **out) {
    cdb_db *db = rd->db;
    eng_search_state *ss = search_state(e, model_id);
    char path[4096], spath[4096];
    struct stat st, sst;
    int have_file, have_snap;
    int64_t gen = 0;
    eng_vset *v = NULL;
    cdb_status rc = CDB_OK;
    *out = NULL;
    if (!ss) return cdb_seterr(CDB_NOMEM, "out of memory");
    cdb_eng_index_path(db, model_id, path, sizeof path);
    pthread_mutex_lock(&ss->mu);
    if ((rc = cdb_db_generation(db, &gen)) != CDB_OK) {
        rc = cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "cannot read the database's generation");
        goto done;
    }
    have_file = stat(path, &st) == 0;
    cdb_eng_snap_path(db, model_id, spath, sizeof spath);
    have_snap = stat(spath, &sst) == 0;
    if (ss->cur && !ss->cur->partial && ss->cur->ix_file == have_file &&
        (!have_file || same_stat(&st, &ss->cur->ix_st)) && ss->cur->snap_file == have_snap &&
        (!have_snap || same_stat(&sst, &ss->cur->snap_st))) {
        if (ss->cur->gen != gen && /* same index, newer commits: a delta */
            (rc = vset_delta(db, model_id, ss->cur, gen, &v)) != CDB_OK)
            goto done;
    } else {
        if (ss->cur) ss->warned_ix = 0; /* another file: warn about it once more */
        if ((rc = vset_fresh(e, ss, db, dim, path, &st, have_file, gen, &v)) != CDB_OK) goto done;
    }
    /* a partial state (a shard left out) is short by what it could not read, and is
    ** never reused (each search builds it afresh): building it again here would only
    ** read every vector and warn about the shard a second time */
    if (v && !v->partial && !vset_complete(v, db, model_id)) {
        CDB_LOG_DEBUG("engine: a search state missed vectors the catalog lists: built again");
        vset_unref(v);
        v = NULL;
        if ((rc = vset_fresh(e, ss, db, dim, path, &st, have_file, gen, &v)) != CDB_OK) goto done;
        if (!vset_complete(v, db, model_id)) {
            *out = v; /* this search only; the next one tries again */
            goto done;
        }
    }
    if (v && cdb_eng_reader_changed(e, rd)) {
        CDB_LOG_DEBUG("engine: a commit while the search state was read: not kept");
        *out = v; /* this search's own reference */
        goto done;
    }
    if (v) {
        vset_unref(ss->cur);
        ss->cur = v;
    }
    atomic_fetch_add(&ss->cur->refs, 1);
    *out = ss->cur;
done:
    pthread_mutex_unlock(&ss->mu);
    return rc;
}

/* Top `want` hits for q over the state v (fetching from db for the re-rank). */
/* The photos a metadata filter passes (include_ids of cdb_index_search_opts): ids NULL
** when no filter is set. */
typedef struct eng_include {
    const int64_t *ids;
    size_t n;
} eng_include;

static cdb_status search_vector(eng_vset *v, cdb_db *db, int64_t model_id, const float *q,
                                int want, float min_score, const eng_include *inc, cdb_hit *out,
                                int *n_out) {
    eng_fetch_ctx fc = fetch_ctx(db, model_id, v);
    cdb_index_search_opts so = cdb_index_search_opts_default();
    cdb_status st;
    so.k = want;
    so.min_score = min_score;
    so.fetch = cdb_eng_fetch_vectors;
    so.fetch_ctx = &fc;
    so.extra_ids = v->ids;
    so.extra_vecs = v->vecs;
    so.n_extra = v->n;
    so.include_ids = inc->ids;
    so.n_include = inc->n;
    if ((st = cdb_index_search(v->ix ? v->ix->ix : NULL, q, v->dim, &so, out, n_out)) != CDB_OK)
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "search failed");
    if (fc.n_unreadable) atomic_store(&v->unreadable, 1);
    return CDB_OK;
}

/* ---- recent query vectors ------------------------------------------------------------
** A text query's vector depends only on the model, the thread count it is encoded with
** and its terms: the last few are kept per model slot, so paging through the hits of
** one query (the page's infinite scroll) encodes it once. Images, "more like this" and
** raw embeddings are not kept (their inputs are large or change). */

#define QCACHE_N 64

typedef struct qcache_entry {
    char *key;
    float *q;
    uint64_t used;
} qcache_entry;

struct eng_qcache {
    pthread_mutex_t mu;
    qcache_entry e[QCACHE_N];
    uint64_t clock;
    int dim;
};

/* "t<literal>\x1f<text>\x1f<not>\x1f<not>..." for a text-only query, else NULL. */
static char *qcache_key(const cdb_engine_query *q) {
    size_t n = 4;
    char *k, *o;
    if (q->n_image_paths || q->image_bytes || q->n_like_ids || q->vector) return NULL;
    n += q->text ? strlen(q->text) + 1 : 0;
    for (int i = 0; i < q->n_nots; i++) n += strlen(q->nots[i]) + 1;
    if (!(k = malloc(n))) return NULL;
    o = k + sprintf(k, "t%d\x1f", q->text_literal ? 1 : 0);
    if (q->text) o += sprintf(o, "%s", q->text);
    for (int i = 0; i < q->n_nots; i++) o += sprintf(o, "\x1f%s", q->nots[i]);
    return k;
}

static void qcache_free(struct eng_qcache *c) {
    if (!c) return;
    for (int i = 0; i < QCACHE_N; i++) {
        free(c->e[i].key);
        free(c->e[i].q);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void cdb_eng_search_release(cdb_engine *e) {
    search_states_free(e);
    for (eng_model *m = e->models; m; m = m->next) {
        qcache_free(m->qcache);
        m->qcache = NULL;
    }
}

static struct eng_qcache *qcache_of(cdb_engine *e, eng_model *m, int dim) {
    pthread_mutex_lock(&e->mu);
    if (!m->qcache && (m->qcache = calloc(1, sizeof *m->qcache))) {
        pthread_mutex_init(&m->qcache->mu, NULL);
        m->qcache->dim = dim;
    }
    pthread_mutex_unlock(&e->mu);
    return m->qcache && m->qcache->dim == dim ? m->qcache : NULL;
}

static int qcache_get(struct eng_qcache *c, const char *key, float *q) {
    int hit = 0;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < QCACHE_N && !hit; i++)
        if (c->e[i].key && !strcmp(c->e[i].key, key)) {
            memcpy(q, c->e[i].q, sizeof *q * (size_t)c->dim);
            c->e[i].used = ++c->clock;
            hit = 1;
        }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

static void qcache_put(struct eng_qcache *c, const char *key, const float *q) {
    int v = 0;
    char *k = strdup(key);
    float *copy = malloc(sizeof *copy * (size_t)c->dim);
    if (!k || !copy) {
        free(k);
        free(copy);
        return;
    }
    memcpy(copy, q, sizeof *copy * (size_t)c->dim);
    pthread_mutex_lock(&c->mu);
    for (int i = 1; i < QCACHE_N; i++) /* the least recently used (an empty one first) */
        if (!c->e[v].key ? 0 : !c->e[i].key || c->e[i].used < c->e[v].used) v = i;
    free(c->e[v].key);
    free(c->e[v].q);
    c->e[v].key = k;
    c->e[v].q = copy;
    c->e[v].used = ++c->clock;
    pthread_mutex_unlock(&c->mu);
}

/* ---- the query vector --------------------------------------------------------------- */

/* An example image in memory, preprocessed for the model and encoded. */
static cdb_status encode_image_bytes(cdb_model *m, const void *buf, size_t n, int no_exif,
                                     float *out) {
    const cdb_preprocess_params *pp = &cdb_model_get_info(m)->preprocess;
    cdb_image_params ip = cdb_image_params_default();
    cdb_image *img = NULL;
    float *px = malloc(sizeof *px * 3 * (size_t)pp->size * (size_t)pp->size);
    cdb_status rc;
    ip.apply_exif = !no_exif;
    if (!px) return cdb_seterr(CDB_NOMEM, "out of memory");
    if ((rc = cdb_image_decode(buf, n, &ip, &img)) == CDB_OK &&
        (rc = cdb_image_preprocess(img, pp, px, NULL)) == CDB_OK)
        rc = cdb_encode_pixels(m, px, 1, 1, out);
    cdb_image_free(img);
    free(px);
    return rc;
}

/* q (dim floats): the weighted sum of every part of the query, normalized. */
static cdb_status build_query(cdb_db *db, eng_model *mod, const cdb_engine_query *qu,
                              const cdb_engine_term *terms, int n_terms, int dim, float *q) {
    int n_img = qu->n_image_paths + (qu->image_bytes > 0);
    int n_vec = qu->vector ? 1 : 0;
    int n = n_terms + qu->n_nots + n_img + qu->n_like_ids + n_vec, r;
    float *emb = NULL, *w = NULL;
    const char **texts = NULL;
    cdb_image_params ip = cdb_image_params_default();
    cdb_status st = CDB_OK;
    if (qu->vector && qu->vector_dim != dim)
        return cdb_eng_code(cdb_seterr(CDB_DIM_MISMATCH,
                                       "the embedding has %d dimensions, the model %d",
                                       qu->vector_dim, dim),
                            CDB_ENGINE_E_QUERY);
    if (n == n_vec) { /* a raw embedding alone: as given (the search normalizes it) */
        memcpy(q, qu->vector, sizeof *q * (size_t)dim);
        if ((st = cdb_index_query_check(q, dim)) != CDB_OK)
            return cdb_eng_fail(st, CDB_ENGINE_E_QUERY_ZERO, "cannot use the embedding");
        return CDB_OK;
    }
    emb = calloc((size_t)n * (size_t)dim, sizeof *emb);
    w = calloc((size_t)n, sizeof *w);
    texts = calloc((size_t)(n_terms + qu->n_nots + 1), sizeof *texts);
    if (!emb || !w || !texts) {
        st = cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot build the query");
        goto done;
    }
    /* The sum is normalized, so only the weights' ratios matter: all are scaled by the
    ** power of two that brings the largest magnitude into [0.5, 1) before they become
    ** floats. "1e308*a + 1e308*b" is then "a + b", not two infinite weights, and
    ** "1e-50*a" is "a", not a weight of 0; a power of two changes no other bit of the
    ** query (ordinary weights give the same floats as before, halved exactly). */
    double wmax = n_terms < n ? 1.0 : 0.0, wone; /* --not texts, images, ids: weight 1 */
    int wexp = 0;
    for (int i = 0; i < n_terms; i++)
        if (fabs(terms[i].weight) > wmax) wmax = fabs(terms[i].weight);
    frexp(wmax, &wexp);
    wone = ldexp(1.0, -wexp);
    for (int i = 0; i < n_terms; i++) {
        texts[i] = terms[i].text;
        w[i] = (float)ldexp(terms[i].weight, -wexp);
    }
    for (int i = 0; i < qu->n_nots; i++) {
        texts[n_terms + i] = qu->nots[i];
        w[n_terms + i] = (float)-wone;
    }
    if (n_terms + qu->n_nots &&
        (st = cdb_eng_encode_texts(mod, texts, n_terms + qu->n_nots, emb)) != CDB_OK) {
        st = cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot encode the query text");
        goto done;
    }
    r = n_terms + qu->n_nots;
    ip.apply_exif = !qu->no_exif;
    for (int i = 0; i < qu->n_image_paths; i++, r++) {
        if ((st = cdb_encode_image_file(mod->m, qu->image_paths[i], &ip, 1,
                                        emb + (size_t)r * dim)) != CDB_OK) {
            /* the decoder's message names the file: cdb_eng_fail says it once */
            st = cdb_eng_fail(st, CDB_ENGINE_E_QUERY_IMAGE, "cannot use the query image %s",
                              qu->image_paths[i]);
            goto done;
        }
        w[r] = (float)wone;
    }
    if (qu->image_bytes > 0) {
        if ((st = encode_image_bytes(mod->m, qu->image, qu->image_bytes, qu->no_exif,
                                     emb + (size_t)r * dim)) != CDB_OK) {
            st = cdb_eng_fail(st, CDB_ENGINE_E_QUERY_IMAGE, "cannot use the query image");
            goto done;
        }
        w[r++] = (float)wone;
    }
    if (qu->n_like_ids) {
        uint8_t *found = malloc((size_t)qu->n_like_ids);
        if (!found) {
            st = cdb_seterr(CDB_NOMEM, "out of memory");
            goto done;
        }
        st = cdb_db_vectors_get(db, mod->model_id, qu->like_ids, qu->n_like_ids,
                                emb + (size_t)r * dim, found);
        for (int i = 0; st == CDB_OK && i < qu->n_like_ids; i++)
            if (!found[i])
                st = cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_UNKNOWN_ID,
                               "no photo of the database has that id", "unknown id %lld",
                               (long long)qu->like_ids[i]);
        free(found);
        if (st != CDB_OK) {
            if (cdb_engine_errcode() != CDB_ENGINE_E_UNKNOWN_ID)
                st = cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot read the example's vector");
            goto done;
        }
        for (int i = 0; i < qu->n_like_ids; i++) w[r++] = (float)wone;
    }
    if (qu->vector) {
        memcpy(emb + (size_t)r * dim, qu->vector, sizeof *emb * (size_t)dim);
        w[r++] = (float)wone;
    }
    if ((st = cdb_index_query_combine(emb, w, n, dim, q)) != CDB_OK)
        st = cdb_eng_fail(st, st == CDB_INVALID ? CDB_ENGINE_E_QUERY_ZERO : CDB_ENGINE_E_NONE,
                      "cannot combine the query terms");
done:
    free(emb);
    free(w);
    free(texts);
    return st;
}

/* ---- the search ------------------------------------------------------------------------ */

cdb_engine_search_params cdb_engine_search_params_default(void) {
    return (cdb_engine_search_params){.k = 10, .min_score = -1.0f};
}

void cdb_eng_hit_clear(cdb_engine_hit *h) {
    cdb_free(h->path);
    free(h->copies);
    free(h->copies_db);
    h->path = NULL;
    h->copies = NULL;
    h->copies_db = NULL;
    h->n_copies = 0;
}

void cdb_engine_result_free(cdb_engine_result *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) cdb_eng_hit_clear(&r->hits[i]);
    free(r->hits);
    memset(r, 0, sizeof *r);
}

static int passes_one(const char *p, const char *under, int folder) {
    size_t len = strlen(under);
    if (strncmp(p, under, len)) return 0;
    return !folder || p[len] == '/' || p[len] == '\0' || under[len - 1] == '/';
}

/* 1 when p limits the hits to some places (`under`, `unders`). */
static int has_under(const cdb_engine_search_params *p) { return p->under || p->n_unders > 0; }

/* 1 when path lies under `under` or any of `unders` (or nothing limits the hits). */
static int passes_under(const char *path, const cdb_engine_search_params *p) {
    if (!has_under(p)) return 1;
    if (p->under && passes_one(path, p->under, p->under_folder)) return 1;
    for (int i = 0; i < p->n_unders; i++)
        if (passes_one(path, p->unders[i].path, p->unders[i].folder)) return 1;
    return 0;
}

/* Total bytes of query text, as the CLI counts them (each word or text plus one). */
static size_t query_bytes(const cdb_engine_query *q) {
    size_t total = q->text ? strlen(q->text) + 1 : 0;
    for (int i = 0; i < q->n_nots; i++) total += strlen(q->nots[i]) + 1;
    return total;
}

/* What no search can run with: k and offset out of range, too much text. CDB_OK, or
** CDB_INVALID with E_QUERY. */
static cdb_status check_limits(const cdb_engine_query *qu, const cdb_engine_search_params *p) {
    size_t total;
    if (p->k < 1 || p->offset < 0 || (int64_t)p->k + p->offset > 1000000)
        return cdb_eng_code(
            cdb_seterr(CDB_INVALID, "k must be in [1, 1000000] with k + offset too"),
            CDB_ENGINE_E_QUERY);
    if (p->sort_window < 0 || p->sort_window > 1000000)
        return cdb_eng_code(cdb_seterr(CDB_INVALID, "sort_window must be in [0, 1000000]"),
                            CDB_ENGINE_E_QUERY);
    if ((total = query_bytes(qu)) > CDB_ENGINE_QUERY_MAX_BYTES)
        return cdb_eng_code(
            cdb_seterr(CDB_INVALID,
                       "query too long: %zu bytes of text (the limit is %d bytes, 64 KiB)", total,
                       CDB_ENGINE_QUERY_MAX_BYTES),
            CDB_ENGINE_E_QUERY);
    return CDB_OK;
}

static cdb_status empty_under(void) {
    return cdb_eng_code(cdb_seterr(CDB_INVALID, "an empty 'under' path"), CDB_ENGINE_E_QUERY);
}

/* The places to search under: each a non-empty path. CDB_OK, or CDB_INVALID with
** E_QUERY. */
static cdb_status check_unders(const cdb_engine_search_params *p) {
    if (p->n_unders < 0 || (p->n_unders && !p->unders))
        return cdb_eng_code(cdb_seterr(CDB_INVALID, "bad 'unders'"), CDB_ENGINE_E_QUERY);
    for (int i = 0; i < p->n_unders; i++)
        if (!p->unders[i].path || !*p->unders[i].path) return empty_under();
    return p->under && !*p->under ? empty_under() : CDB_OK;
}

/* The query's text terms: qu->text as one term (text_literal), else parsed by the query
** language; none without text. *terms: free with cdb_engine_terms_free. */
static cdb_status query_terms(const cdb_engine_query *qu, cdb_engine_term **terms /* OUT */,
                              int *n_terms /* OUT */) {
    *terms = NULL;
    *n_terms = 0;
    if (!qu->text) return CDB_OK;
    if (!qu->text_literal) return cdb_engine_query_parse(qu->text, terms, n_terms);
    {
        const char *t = qu->text;
        while (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r') t++;
        if (!*t) return CDB_OK;
    }
    if (!(*terms = calloc(1, sizeof **terms)) || !((*terms)[0].text = strdup(qu->text))) {
        free(*terms);
        *terms = NULL;
        return cdb_seterr(CDB_NOMEM, "out of memory");
    }
    (*terms)[0].weight = 1.0;
    *n_terms = 1;
    return CDB_OK;
}

/* The query's vector (dim floats into q): from the model's query cache when it holds
** this query, else built (and cached). */
static cdb_status query_vector(cdb_engine *e, cdb_db *db, eng_model *mod,
                               const cdb_engine_query *qu, const cdb_engine_term *terms,
                               int n_terms, int threads, int dim, float *q /* OUT */) {
    cdb_status st = CDB_OK;
    char *key = qcache_key(qu);
    struct eng_qcache *qc = key ? qcache_of(e, mod, dim) : NULL;
    if (!qc || !qcache_get(qc, key, q)) {
        cdb_eng_bind_threads(threads);
        if (threads != 1) pthread_mutex_lock(&mod->encode_mu);
        st = build_query(db, mod, qu, terms, n_terms, dim, q);
        if (threads != 1) pthread_mutex_unlock(&mod->encode_mu);
        if (st == CDB_OK && qc) qcache_put(qc, key, q);
    }
    free(key);
    return st;
}

/* One hit for file id with score: its path and file fields. CDB_OK, CDB_NOTFOUND when
** the file is gone meanwhile, its vector is no longer claimed (a forget or move cut
** short is taking it away: cdb_db_file_hit) or it lies outside p's places (h
** untouched), CDB_NOMEM. */
static cdb_status make_hit(cdb_db *db, int64_t model_id, int64_t id, float score,
                           const cdb_engine_search_params *p, cdb_engine_hit *h /* OUT */) {
    char *path = NULL;
    cdb_db_file f;
    cdb_db_photo ph;
    cdb_status rc = cdb_db_file_hit(db, id, model_id, &f, &path, &ph); /* one statement */
    if (rc == CDB_NOMEM) return rc;
    if (rc != CDB_OK) return CDB_NOTFOUND;
    cdb_db_file_clear(&f);
    if (!passes_under(path, p)) {
        cdb_free(path);
        return CDB_NOTFOUND;
    }
    memset(h, 0, sizeof *h);
    h->id = id;
    h->score = score;
    h->path = path; /* cdb_malloc'd: freed with the results */
    h->mtime_ns = f.meta.mtime_ns;
    h->size = f.meta.size;
    h->width = f.meta.width;
    h->height = f.meta.height;
    cdb_eng_photo_from_db(&ph, &h->photo);
    return CDB_OK;
}

/* The best `need` hits of q (fewer when fewer pass) into *hits (heap, *n_hits of them,
** best first by cdb_engine_hit_cmp_score). A search limited to some places, or one
** that met vectors the catalog no longer claims, asks for 4x more each round until
** enough pass or every vector has been seen, so that the hits are the best `need`
** among the photos that are there. Hits scoring the same as the last one kept are
** all collected (more asked for while the index's answer ends in them) and the tie
** broken by path: a page's hits never depend on the ids of equal-scoring photos. */
static cdb_status collect_hits(cdb_engine *e, eng_vset *vs, cdb_db *db, int64_t model_id,
                               const float *q, const cdb_engine_search_params *p,
                               const eng_include *inc, int need,
                               cdb_engine_hit **hits /* OUT */, int *n_hits /* OUT */) {
    cdb_hit *raw = NULL;
    int n_raw = 0, want, dropped = 0, tied = 0;
    cdb_status st = CDB_OK;
    *hits = NULL;
    *n_hits = 0;
    /* one more than needed: whether the answer goes on past the last hit at its score */
    for (want = has_under(p) ? need * 4 : need + 1;; want *= 4, dropped = 0, tied = 0) {
        int i, at_need = -1; /* raw index of the need-th hit */
        cdb_hit *nr = realloc(raw, sizeof *raw * (size_t)want);
        cdb_engine_hit *nh = realloc(*hits, sizeof **hits * (size_t)want);
        if (nr) raw = nr;
        if (nh) *hits = nh;
        if (!nr || !nh) {
            st = cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot search");
            break;
        }
        for (i = 0; i < *n_hits; i++) cdb_eng_hit_clear(&(*hits)[i]);
        *n_hits = 0;
        if ((st = search_vector(vs, db, model_id, q, want, p->min_score, inc, raw, &n_raw)) !=
            CDB_OK)
            break;
        if (atomic_load(&vs->unreadable) && !atomic_exchange(&vs->warned, 1))
            cdb_eng_warn(&e->p.events,
                         "some photos are in a shard that is missing or damaged and are left out "
                         "of the results: run 'clipdb verify', then 'clipdb reindex --repair'");
        for (i = 0; i < n_raw && st == CDB_OK; i++) {
            if (*n_hits >= need && raw[i].score != (*hits)[need - 1].score) break;
            st = make_hit(db, model_id, raw[i].id, raw[i].score, p, &(*hits)[*n_hits]);
            if (st == CDB_OK) {
                if (++*n_hits == need) at_need = i;
            } else if (st == CDB_NOTFOUND) { /* gone meanwhile, unclaimed, or elsewhere */
                dropped = 1;
                st = CDB_OK;
            }
        }
        /* the answer ended among hits that score as the need-th: more may follow */
        tied = *n_hits >= need && i == n_raw &&
               (at_need == n_raw - 1 || raw[n_raw - 1].score == (*hits)[need - 1].score);
        if (st != CDB_OK || n_raw < want || want > 1000000) break;
        if ((!dropped || *n_hits >= need) && !tied) break;
    }
    if (*n_hits > 1) qsort(*hits, (size_t)*n_hits, sizeof **hits, cdb_eng_by_score);
    for (int i = need; i < *n_hits; i++) cdb_eng_hit_clear(&(*hits)[i]);
    if (*n_hits > need) *n_hits = need;
    free(raw);
    return st;
}

/* What db's part of the copy groups is built for: its generation and its files without
** a stored phash (the key's dir is e->dir, borrowed). */
cdb_status cdb_eng_groups_key(cdb_engine *e, cdb_db *db, int64_t gen, eng_groups_key *key) {
    int64_t *missing = NULL, n_missing = 0;
    cdb_status st = cdb_db_photos_missing(db, 0, &missing, &n_missing);
    cdb_free(missing);
    if (st != CDB_OK) return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot group the copies");
    key->dir = e->dir;
    key->gen = gen;
    key->n_missing = n_missing;
    return CDB_OK;
}

/* The copy groups over parts[0..n) (collapse.c), cached in the search state of e's
** vector set model_id (*slot: its groups of one database, or of several): the cached
** ones while they were built for the parts' keys, else built anew (and cached).
** *out: cdb_eng_groups_unref. */
cdb_status cdb_eng_groups_cached(cdb_engine *e, int64_t model_id, int many,
                                 const eng_groups_part *parts, int n, int dim, eng_groups **out) {
    eng_search_state *ss = search_state(e, model_id);
    eng_groups_key *keys = malloc(sizeof *keys * (size_t)n);
    cdb_status st = CDB_OK;
    *out = NULL;
    if (!ss || !keys) {
        free(keys);
        return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot search");
    }
    for (int i = 0; i < n; i++) keys[i] = parts[i].key;
    pthread_mutex_lock(&ss->mu);
    eng_groups **slot = many ? &ss->many : &ss->groups;
    if (!cdb_eng_groups_current(*slot, keys, n)) {
        eng_groups *g = NULL;
        if ((st = cdb_eng_groups_build(parts, n, dim, &g)) == CDB_OK) {
            cdb_eng_groups_unref(*slot);
            *slot = g;
        }
    }
    if (st == CDB_OK) *out = cdb_eng_groups_ref(*slot);
    pthread_mutex_unlock(&ss->mu);
    free(keys);
    return st;
}

/* The copy groups of the vector set for this search: NULL (*out) for the first search of
** the set on e that collapses copies, which groups its hits alone (collect_groups: a
** one-shot search, the CLI's, reads no more); from the second on, the groups of the whole
** set, cached while the generation and the count of files without a phash are those they
** were built for (a server's searches share them). */
static cdb_status groups_get(cdb_engine *e, cdb_db *db, int64_t model_id, int dim, int64_t gen,
                             eng_groups **out) {
    eng_search_state *ss = search_state(e, model_id);
    eng_groups_part part = {db, model_id, {NULL, 0, 0}};
    int first;
    cdb_status st;
    *out = NULL;
    if (!ss) return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot search");
    pthread_mutex_lock(&ss->mu);
    first = !ss->collapsed;
    ss->collapsed = 1;
    pthread_mutex_unlock(&ss->mu);
    if (first) return CDB_OK;
    st = cdb_eng_groups_key(e, db, gen, &part.key);
    return st == CDB_OK ? cdb_eng_groups_cached(e, model_id, 0, &part, 1, dim, out) : st;
}

/* Collapses hits[0..*n) of db's vector set model_id by g, or (g NULL) by the groups of
** these hits alone (cdb_eng_groups_build_page: the same groups). */
static cdb_status collapse_hits(cdb_db *db, int64_t model_id, int dim, const eng_groups *g,
                                cdb_engine_hit *hits, int *n) {
    eng_groups_part part = {db, model_id, {NULL, 0, 0}};
    eng_groups *pg = NULL;
    int64_t *ids = g ? NULL : malloc(sizeof *ids * (size_t)(*n ? *n : 1));
    cdb_status st = CDB_OK;
    if (!g && !ids) return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory",
                                         "cannot collapse the copies");
    for (int i = 0; !g && i < *n; i++) ids[i] = hits[i].id;
    if (!g) st = cdb_eng_groups_build_page(&part, dim, ids, *n, &pg);
    if (st == CDB_OK) st = cdb_eng_collapse(g ? g : pg, hits, n);
    cdb_eng_groups_unref(pg);
    free(ids);
    return st;
}

cdb_status cdb_eng_copy_index_get(cdb_engine *e, cdb_db *db, int64_t model_id,
                                  eng_copy_index **out) {
    eng_search_state *ss = search_state(e, model_id);
    eng_groups_part part = {db, model_id, {NULL, 0, 0}};
    int64_t gen = 0;
    cdb_status st;
    *out = NULL;
    if (!ss) return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot search");
    if ((st = cdb_db_generation(db, &gen)) != CDB_OK)
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot read the database's generation");
    if ((st = cdb_eng_groups_key(e, db, gen, &part.key)) != CDB_OK) return st;
    pthread_mutex_lock(&ss->mu);
    if (!cdb_eng_copy_index_current(ss->copy_index, &part.key)) {
        eng_copy_index *x = NULL;
        if ((st = cdb_eng_copy_index_build(&part, &x)) == CDB_OK) {
            cdb_eng_copy_index_unref(ss->copy_index);
            ss->copy_index = x;
        }
    }
    if (st == CDB_OK) *out = cdb_eng_copy_index_ref(ss->copy_index);
    pthread_mutex_unlock(&ss->mu);
    return st;
}

/* The best `need` hits of q as collect_hits gives them, with copies collapsed when
** p->collapse is set (by g, or NULL: collapse_hits): hits are fetched 4x more each round
** until `need` groups are found or every hit was seen, so that the collapsed list is the
** same one ordering for every page; at most need (the time window sorts exactly the best
** sort_window groups). */
static cdb_status collect_groups(cdb_engine *e, eng_vset *vs, cdb_db *db, int64_t model_id,
                                 const float *q, const cdb_engine_search_params *p,
                                 const eng_include *inc, int need, const eng_groups *g,
                                 cdb_engine_hit **hits /* OUT */, int *n_hits /* OUT */) {
    cdb_status st = CDB_OK;
    for (int64_t fetch = need;; fetch *= 4) {
        int got;
        if ((st = collect_hits(e, vs, db, model_id, q, p, inc, (int)fetch, hits, n_hits)) !=
                CDB_OK ||
            !p->collapse)
            break;
        got = *n_hits;
        if ((st = collapse_hits(db, model_id, vs->dim, g, *hits, n_hits)) != CDB_OK ||
            *n_hits >= need ||
            got < fetch || fetch * 4 > INT32_MAX / 4)
            break;
        for (int i = 0; i < *n_hits; i++) cdb_eng_hit_clear(&(*hits)[i]);
        free(*hits);
        *hits = NULL;
        *n_hits = 0;
    }
    /* a round that fetched more may hold more groups than need: a time window is need */
    for (int i = need; st == CDB_OK && i < *n_hits; i++) cdb_eng_hit_clear(&(*hits)[i]);
    if (st == CDB_OK && *n_hits > need) *n_hits = need;
    return st;
}

int cdb_engine_under_resolve(const char *given, char *abs, size_t cap, int *folder) {
    char real[PATH_MAX], cwd[PATH_MAX];
    struct stat sb;
    int exists = realpath(given, real) != NULL;
    *folder = 0;
    if (exists) {
        *folder = stat(real, &sb) == 0 && S_ISDIR(sb.st_mode);
        snprintf(abs, cap, "%s", real);
    } else if (given[0] != '/' && getcwd(cwd, sizeof cwd)) {
        snprintf(abs, cap, "%.*s/%s", PATH_MAX / 2, cwd, given);
    } else {
        snprintf(abs, cap, "%s", given);
    }
    return exists;
}

/* The model's probability for each hit (cdb_engine_result.has_probability says when):
** a model with a logit bias, and a query of text alone (its towers are loaded then). */
void cdb_eng_set_probabilities(const eng_model *mod, const cdb_engine_query *qu, int n_terms,
                               cdb_engine_hit *hits, int n, cdb_engine_result *out) {
    const cdb_model_info *mi = mod->m ? cdb_model_get_info(mod->m) : NULL;
    int text_only = n_terms + qu->n_nots > 0 && !qu->n_image_paths && !qu->image_bytes &&
                    !qu->n_like_ids && !qu->vector;
    out->has_probability = text_only && mi && mi->has_logit_scale && mi->has_logit_bias;
    for (int i = 0; out->has_probability && i < n; i++)
        cdb_model_match_probability(mi, hits[i].score, &hits[i].probability);
}

/* The query's model: the towers that the query needs, with the encode threads of the
** engine's rule. */
static cdb_status open_model_for(cdb_engine *e, eng_reader *rd, const cdb_engine_query *qu,
                                 int n_terms, const cdb_engine_search_params *p,
                                 eng_model **mod /* OUT */, int *threads /* OUT */) {
    int vision = qu->n_image_paths > 0 || qu->image_bytes > 0;
    int text = n_terms + qu->n_nots > 0;
    *threads = cdb_eng_search_threads(e, rd->db, p->model, vision);
    if (p->model && *p->model && !vision && !text) text = 1; /* its hash names its set */
    return cdb_eng_model_get(e, rd->db, p->model, vision, text, *threads, mod);
}

/* The model of a handle after the first (its vector set that p names, no tower
** loaded) and the shared query vector copied into *q: CDB_INVALID with
** E_MODEL_MISMATCH when its weights are not those the query was made with. */
static cdb_status shared_model(cdb_engine *e, eng_reader *rd, const cdb_engine_search_params *p,
                               const eng_shared_q *sq, eng_model **mod /* OUT */,
                               float **q /* OUT */, int *dim /* OUT */) {
    cdb_status st = cdb_eng_model_get(e, rd->db, p->model, 0, 0, -1, mod);
    if (st != CDB_OK) return st;
    if (strcmp((*mod)->dm.weights_hash, sq->weights_hash) || (*mod)->dm.dim != sq->dim)
        return cdb_eng_code(
            cdb_seterr(CDB_INVALID,
                       "cannot search %s and %s together (their vector sets are of different "
                       "models: %s, %.12s... and %s, %.12s...)",
                       sq->db, e->dir, sq->mod->dm.name, sq->weights_hash, (*mod)->dm.name,
                       (*mod)->dm.weights_hash),
            CDB_ENGINE_E_MODEL_MISMATCH);
    *dim = sq->dim;
    if (!(*q = malloc(sizeof **q * (size_t)sq->dim)))
        return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot search");
    memcpy(*q, sq->q, sizeof **q * (size_t)sq->dim);
    return CDB_OK;
}

/* The model the query needs and the query vector (*q heap, *dim floats): made by this
** handle's model, or (sq given, holding one) the shared one; a shared one still empty
** gets a copy of this one's. */
static cdb_status model_and_vector(cdb_engine *e, eng_reader *rd, const cdb_engine_query *qu,
                                   const cdb_engine_term *terms, int n_terms,
                                   const cdb_engine_search_params *p, eng_shared_q *sq,
                                   eng_model **mod /* OUT */, float **q /* OUT */,
                                   int *dim /* OUT */) {
    int threads = 1;
    cdb_status st;
    if (sq && sq->q) return shared_model(e, rd, p, sq, mod, q, dim);
    if ((st = open_model_for(e, rd, qu, n_terms, p, mod, &threads)) != CDB_OK) return st;
    *dim = (*mod)->dm.dim;
    if ((*mod)->m) *dim = cdb_model_get_info((*mod)->m)->embed_dim;
    if (!(*q = malloc(sizeof **q * (size_t)*dim)))
        return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot search");
    st = query_vector(e, rd->db, *mod, qu, terms, n_terms, threads, *dim, *q);
    if (st != CDB_OK || !sq) return st;
    if (!(sq->q = malloc(sizeof *sq->q * (size_t)*dim)))
        return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot search");
    memcpy(sq->q, *q, sizeof *sq->q * (size_t)*dim);
    sq->dim = *dim;
    snprintf(sq->weights_hash, sizeof sq->weights_hash, "%s", (*mod)->dm.weights_hash);
    sq->db = e->dir;
    sq->mod = *mod;
    return CDB_OK;
}

static cdb_status search_once(cdb_engine *e, const cdb_engine_query *qu,
                              const cdb_engine_term *terms, int n_terms,
                              const cdb_engine_search_params *p, eng_shared_q *sq,
                              cdb_engine_result *out, int *reader_changed) {
    int dim = 0, n_hits = 0;
    eng_reader *rd = NULL;
    eng_model *mod = NULL;
    eng_vset *vs = NULL;
    float *q = NULL;
    cdb_engine_hit *hits = NULL;
    cdb_db_photo_filter pf;
    int64_t *pass = NULL, none = 0;
    eng_include inc = {NULL, 0};
    eng_groups *groups = NULL;
    cdb_status st;
    cdb_eng_clear();
    memset(out, 0, sizeof *out);
    memset(&pf, 0, sizeof pf);
    if (!n_terms && !qu->n_nots && !qu->n_image_paths && !qu->image_bytes && !qu->n_like_ids &&
        !qu->vector) {
        st = cdb_eng_code(cdb_seterr(CDB_INVALID, "empty query"), CDB_ENGINE_E_QUERY);
        goto done;
    }
    if ((st = check_unders(p)) != CDB_OK) goto done;
    if ((st = cdb_eng_photo_filter(p->taken_after, p->taken_before, p->camera, p->near,
                                   p->has_gps, &pf)) != CDB_OK)
        goto done;
    if ((st = cdb_eng_reader_get(e, &rd)) != CDB_OK) goto done;
    if ((st = model_and_vector(e, rd, qu, terms, n_terms, p, sq, &mod, &q, &dim)) != CDB_OK)
        goto done;
    if (cdb_eng_reader_changed(e, rd)) {
        /* a writer committed while the query was encoded (waiting for a batch, or an
        ** image): the search reads the store through a reader opened after it */
        cdb_eng_reader_put(e, rd);
        rd = NULL;
        if ((st = cdb_eng_reader_get(e, &rd)) != CDB_OK) goto done;
    }
    if ((st = vset_get(e, rd, mod->model_id, dim, &vs)) != CDB_OK) goto done;
    out->generation = vs->gen;
    /* A metadata filter: the index searches within the photos that pass. */
    if (cdb_db_photo_filter_active(&pf)) {
        int64_t n_pass = 0;
        if ((st = cdb_db_photos_select(rd->db, &pf, &pass, &n_pass)) != CDB_OK) {
            st = cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot filter the photos (%s)",
                              cdb_errmsg());
            goto done;
        }
        inc.ids = pass ? pass : &none;
        inc.n = (size_t)n_pass;
    }
    if (p->collapse &&
        (st = groups_get(e, rd->db, mod->model_id, dim, vs->gen, &groups)) != CDB_OK)
        goto done;
    if ((st = collect_groups(e, vs, rd->db, mod->model_id, q, p, &inc, cdb_eng_hits_needed(p),
                             groups, &hits, &n_hits)) != CDB_OK)
        goto done;
    cdb_eng_page_hits(hits, &n_hits, p);
    if (!sq) cdb_eng_set_probabilities(mod, qu, n_terms, hits, n_hits, out);
    out->hits = hits;
    out->n = n_hits;
    hits = NULL;
    n_hits = 0;
    snprintf(out->model, sizeof out->model, "%s",
             mod->m ? cdb_model_get_info(mod->m)->name : mod->dm.name);
    out->model_id = mod->model_id;
done:
    for (int i = 0; i < n_hits; i++) cdb_eng_hit_clear(&hits[i]);
    free(hits);
    free(q);
    cdb_free(pass);
    cdb_eng_groups_unref(groups);
    vset_unref(vs);
    /* a failure a snapshot read can explain (a malformed page, an example's vector or
    ** file not found) on a reader that may hold one: tried again on a new reader */
    *reader_changed = rd && st != CDB_OK &&
                      (cdb_eng_reader_changed(e, rd) || st == CDB_CORRUPT ||
                       cdb_engine_errcode() == CDB_ENGINE_E_UNKNOWN_ID);
    if (*reader_changed) cdb_eng_reader_discard(rd);
    else cdb_eng_reader_put(e, rd);
    return st;
}

/* A search whose reader saw a writer commit while it ran, or failed in a way a
** snapshot read explains (a shard read as a snapshot the writer was changing
** underneath: a malformed page, an example's vector not there), is run once more on
** a newly opened reader. */
cdb_status cdb_eng_search_retried(cdb_engine *e, const cdb_engine_query *qu,
                                  const cdb_engine_term *terms, int n_terms,
                                  const cdb_engine_search_params *p, eng_shared_q *sq,
                                  cdb_engine_result *out) {
    int changed = 0;
    cdb_status st = search_once(e, qu, terms, n_terms, p, sq, out, &changed);
    if (st != CDB_OK && changed) {
        CDB_LOG_DEBUG("engine: a search failed while the database was written (%s): again",
                      cdb_errmsg());
        cdb_engine_result_free(out);
        st = search_once(e, qu, terms, n_terms, p, sq, out, &changed);
    }
    return st;
}

/* The limits checked and the text parsed once (or by the caller), not per attempt:
** *terms the caller's or *parsed (free with cdb_engine_terms_free(*parsed, *n_terms)). */
cdb_status cdb_eng_prepare_query(const cdb_engine_query *qu, const cdb_engine_search_params *p,
                                 const cdb_engine_term **terms /* OUT */,
                                 cdb_engine_term **parsed /* OUT */, int *n_terms /* OUT */) {
    cdb_status st;
    *terms = qu->terms;
    *parsed = NULL;
    *n_terms = qu->n_terms;
    if ((st = check_limits(qu, p)) != CDB_OK) return st;
    if (!*terms && (st = query_terms(qu, parsed, n_terms)) != CDB_OK) return st;
    if (!*terms) *terms = *parsed;
    return CDB_OK;
}

cdb_status cdb_engine_search(cdb_engine *e, const cdb_engine_query *qu,
                             const cdb_engine_search_params *p, cdb_engine_result *out) {
    cdb_engine_search_params defaults = cdb_engine_search_params_default();
    cdb_engine_term *parsed = NULL;
    const cdb_engine_term *terms;
    int n_terms;
    cdb_status st;
    cdb_eng_clear();
    memset(out, 0, sizeof *out);
    if (!p) p = &defaults;
    if ((st = cdb_eng_prepare_query(qu, p, &terms, &parsed, &n_terms)) == CDB_OK)
        st = cdb_eng_search_retried(e, qu, terms, n_terms, p, NULL, out);
    cdb_engine_terms_free(parsed, parsed ? n_terms : 0);
    return st;
}
