/*
** snapshot.c: the vector snapshot of a vector set (index/index.h, cdb_index_snap) beside
** its index file: <db>/index/model_<id>.snap, written when the index is built or
** refreshed, mapped by searches for the flat scan and the re-rank's fetch.
**
** The truth stays in the shards. A snapshot holds the vectors as of its watermark, the
** database generation read before they were read; every id written or removed after it
** (cdb_db_added_since / cdb_db_removed_since: a replaced vector is in both) is "dirty"
** and read from the shards, as is any id the snapshot lacks. A removal the logs no
** longer list (cdb_db_prune_removed) would still be caught by a hit's claim check
** (search.c, make_hit: cdb_db_file_hit), which drops files whose vector the catalog no
** longer claims. A snapshot that fails any check (index/snapshot.c) is not used, and the
** next refresh writes it again.
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/search/search.h"

/* Rewrite a usable snapshot once this many of its ids are dirty (or 1% of them). */
#define SNAP_DIRTY_REWRITE 4096

void cdb_eng_snap_path(cdb_db *db, int64_t model_id, char *buf, size_t size) {
    snprintf(buf, size, "%s/index/model_%lld.snap", cdb_db_dir(db), (long long)model_id);
}

cdb_status cdb_eng_snap_dirty(cdb_db *db, int64_t model_id, int64_t since, int64_t **ids,
                              size_t *n) {
    int64_t *a = NULL, *r = NULL, *m = NULL;
    size_t na = 0, nr = 0, i = 0, j = 0, o = 0;
    cdb_status rc = cdb_eng_ids_since(db, model_id, since, 0, &a, &na);
    if (rc == CDB_OK) rc = cdb_eng_ids_since(db, model_id, since, 1, &r, &nr);
    if (rc == CDB_OK && !(m = malloc(sizeof *m * (na + nr + 1))))
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
    while (rc == CDB_OK && (i < na || j < nr)) { /* both sorted and distinct: merge */
        int64_t x = j >= nr || (i < na && a[i] <= r[j]) ? a[i] : r[j];
        i += i < na && a[i] == x;
        j += j < nr && r[j] == x;
        m[o++] = x;
    }
    free(a);
    free(r);
    if (rc != CDB_OK) {
        free(m);
        return rc;
    }
    *ids = m;
    *n = o;
    return CDB_OK;
}

/* The snapshot's owner number for db: FNV-1a of its uuid, never 0 (what files written
** before owners were recorded hold): another database's file, copied in, is refused. */
static uint32_t owner_of(cdb_db *db) {
    const char *uuid = cdb_db_uuid(db);
    uint64_t h = cdb_fnv1a64(uuid, strlen(uuid));
    uint32_t o = (uint32_t)(h ^ (h >> 32));
    return o ? o : 1u;
}

cdb_status cdb_eng_snap_open(cdb_db *db, int64_t model_id, int dim, unsigned flags,
                             cdb_index_snap **out) {
    char path[4096];
    int64_t gen = 0;
    cdb_status rc;
    cdb_eng_snap_path(db, model_id, path, sizeof path);
    if ((rc = cdb_index_snap_open(path, model_id, dim, flags, out)) != CDB_OK) return rc;
    if (cdb_index_snap_owner(*out) != owner_of(db))
        rc = cdb_seterr(CDB_CORRUPT, "%s: another database's vector snapshot", path);
    /* a watermark past the generation: a file restored from a later state */
    else if ((rc = cdb_db_generation(db, &gen)) == CDB_OK &&
             cdb_index_snap_watermark(*out) > (uint64_t)gen)
        rc = cdb_seterr(CDB_CORRUPT, "%s: made at generation %llu, the database is at %lld",
                        path, (unsigned long long)cdb_index_snap_watermark(*out),
                        (long long)gen);
    if (rc != CDB_OK) {
        cdb_index_snap_close(*out);
        *out = NULL;
    }
    return rc;
}

cdb_status cdb_eng_snap_write(cdb_db *db, int64_t model_id, int dim) {
    char path[4096], dir[4096];
    int64_t gen = 0;
    cdb_index_source src;
    cdb_status rc;
    snprintf(dir, sizeof dir, "%s/index", cdb_db_dir(db));
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return cdb_seterr(cdb_errno_status(errno), "mkdir %s: %s", dir, strerror(errno));
    cdb_eng_snap_path(db, model_id, path, sizeof path);
    /* the generation first: what is written meanwhile is dirty, read from the shards */
    if ((rc = cdb_db_generation(db, &gen)) != CDB_OK) return rc;
    if ((rc = cdb_eng_store_source_open(db, model_id, dim, &src)) != CDB_OK) return rc;
    rc = cdb_index_snap_write_owned(path, model_id, dim, (uint64_t)gen, owner_of(db), &src);
    cdb_eng_store_source_close(&src);
    return rc;
}

cdb_status cdb_eng_snap_refresh(cdb_db *db, int64_t model_id, int dim, int force) {
    cdb_index_snap *s = NULL;
    int64_t *dirty = NULL;
    size_t n_dirty = 0;
    cdb_status rc = CDB_OK;
    int rewrite = force;
    if (!rewrite && cdb_eng_snap_open(db, model_id, dim, CDB_INDEX_SNAP_STAMP, &s) != CDB_OK)
        rewrite = 1; /* absent, damaged, foreign or stale */
    if (!rewrite) {
        rc = cdb_eng_snap_dirty(db, model_id, (int64_t)cdb_index_snap_watermark(s), &dirty,
                                &n_dirty);
        rewrite = rc == CDB_OK && (n_dirty >= SNAP_DIRTY_REWRITE ||
                                   (n_dirty && (int64_t)n_dirty * 100 >= cdb_index_snap_count(s)));
    }
    cdb_index_snap_close(s);
    free(dirty);
    if (rc == CDB_OK && rewrite) rc = cdb_eng_snap_write(db, model_id, dim);
    return rc;
}

void cdb_eng_snap_remove(cdb_db *db, int64_t model_id) {
    char path[4096], stamp[4200];
    cdb_eng_snap_path(db, model_id, path, sizeof path);
    snprintf(stamp, sizeof stamp, "%s.ok", path);
    unlink(path);
    unlink(stamp);
}

/* ---- fetch ---------------------------------------------------------------------------- */

cdb_status cdb_eng_snap_fetch(eng_fetch_ctx *c, const int64_t *ids, size_t n, uint16_t *vecs,
                              uint8_t *found) {
    size_t row = (size_t)c->dim, n_miss = 0;
    size_t *at = NULL;
    int64_t *mids = NULL;
    uint16_t *mvecs = NULL;
    uint8_t *mfound = NULL;
    cdb_status rc = CDB_OK;
    for (size_t i = 0; i < n; i++) {
        const uint16_t *v = NULL;
        if (!cdb_index_ids_have(c->dirty, c->n_dirty, ids[i]))
            v = cdb_index_snap_find(c->snap, ids[i]);
        found[i] = v != NULL;
        if (v) memcpy(vecs + i * row, v, row * sizeof *vecs);
        else n_miss++;
    }
    if (!n_miss) return CDB_OK;
    /* what the snapshot lacks or has stale: from the shards, in one call */
    if (!(at = malloc(sizeof *at * n_miss)) || !(mids = malloc(sizeof *mids * n_miss)) ||
        !(mvecs = malloc(sizeof *mvecs * n_miss * row)) || !(mfound = malloc(n_miss))) {
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0, k = 0; i < n; i++)
        if (!found[i]) at[k] = i, mids[k++] = ids[i];
    if ((rc = cdb_eng_store_fetch(c, mids, n_miss, mvecs, mfound)) != CDB_OK) goto done;
    for (size_t k = 0; k < n_miss; k++) {
        found[at[k]] = mfound[k];
        if (mfound[k]) memcpy(vecs + at[k] * row, mvecs + k * row, row * sizeof *vecs);
    }
done:
    free(at);
    free(mids);
    free(mvecs);
    free(mfound);
    return rc;
}

/* ---- verify ----------------------------------------------------------------------------- */

/* Counts, over the stored vectors (iterated in id order) and the snapshot's entries, the
** ids not dirty where the two disagree: one has it and the other not, or the bytes
** differ. A shard missing or damaged is left out (cdb_db_verify reports it), and with it
** the snapshot's entries the shards do not show. */
static cdb_status count_disagreements(cdb_db *db, int64_t model_id, int dim,
                                      const cdb_index_snap *s, const int64_t *dirty,
                                      size_t n_dirty, int64_t *n_bad) {
    const int64_t *sids = cdb_index_snap_ids(s);
    size_t ns = (size_t)cdb_index_snap_count(s), at = 0, row = (size_t)dim;
    int64_t *ids = malloc(sizeof *ids * 4096);
    uint16_t *vecs = malloc(sizeof *vecs * 4096 * row);
    cdb_db_iter *it = NULL;
    int n_unreadable = 0;
    int64_t n_only = 0; /* in the snapshot only */
    cdb_status rc = ids && vecs ? cdb_db_iter_new_skipping(db, model_id, &n_unreadable, &it)
                                : cdb_seterr(CDB_NOMEM, "out of memory");
    *n_bad = 0;
    for (int got = 1; rc == CDB_OK && got > 0;) {
        if ((rc = cdb_db_iter_read(it, 4096, ids, NULL, vecs, &got)) != CDB_OK) break;
        for (int i = 0; i < got; i++) {
            for (; at < ns && sids[at] < ids[i]; at++)
                n_only += !cdb_index_ids_have(dirty, n_dirty, sids[at]);
            if (cdb_index_ids_have(dirty, n_dirty, ids[i])) continue;
            if (at < ns && sids[at] == ids[i])
                *n_bad += memcmp(cdb_index_snap_vecs(s) + at++ * row, vecs + (size_t)i * row,
                                 row * sizeof *vecs) != 0;
            else
                (*n_bad)++; /* stored, and not in the snapshot */
        }
    }
    for (; rc == CDB_OK && at < ns; at++) n_only += !cdb_index_ids_have(dirty, n_dirty, sids[at]);
    if (!n_unreadable) *n_bad += n_only;
    cdb_db_iter_free(it);
    free(ids);
    free(vecs);
    return rc;
}

int cdb_eng_snap_check(cdb_db *db, int64_t model_id, int dim, char (*msg)[256], int max) {
    cdb_index_snap *s = NULL;
    int64_t *dirty = NULL, n_bad = 0;
    size_t n_dirty = 0;
    cdb_status st = cdb_eng_snap_open(db, model_id, dim, CDB_INDEX_SNAP_VERIFY, &s);
    int n = 0;
    if (max < 1 || st == CDB_NOTFOUND) return 0;
    if (st != CDB_OK) {
        snprintf(msg[n++], 256, "vector snapshot unusable (rewritten by the next index "
                 "refresh): %.160s", cdb_errmsg());
        return n;
    }
    st = cdb_eng_snap_dirty(db, model_id, (int64_t)cdb_index_snap_watermark(s), &dirty, &n_dirty);
    if (st == CDB_OK) st = count_disagreements(db, model_id, dim, s, dirty, n_dirty, &n_bad);
    if (st != CDB_OK)
        snprintf(msg[n++], 256, "vector snapshot not checked: %.200s", cdb_errmsg());
    else if (n_bad)
        snprintf(msg[n++], 256, "vector snapshot disagrees with the shards on %lld vector%s",
                 (long long)n_bad, n_bad == 1 ? "" : "s");
    free(dirty);
    cdb_index_snap_close(s);
    return n;
}
