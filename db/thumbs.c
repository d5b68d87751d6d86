/*
** thumbs.c: thumbnails, a cache of small JPEGs of the ok files, in their own SQLite
** file beside the shards (<dir>/thumbs.db, WAL) so that the catalog never depends on
** them: a thumbnail lost or stale is made again by the next run, and nothing about
** vectors or the write order changes. One row per file id, with the content hash and
** the size setting it was made from: a row whose hash is not the file's current
** hash, or whose file is no longer ok, is stale (cdb_db_thumbs_prune drops those).
** The setting (long side in pixels, 0 = off) is the catalog's meta key thumb_size.
**
** Readers open thumbs.db read-only like every other file (cdb_sql_open_conn), and only
** when it exists: a database from before thumbnails simply has none.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/db_int.h"

/* Steps a reused statement expecting DONE (it is reset by the caller). */
static cdb_status step(sqlite3 *c, sqlite3_stmt *st, const char *what) {
    int s = sqlite3_step(st);
    return s == SQLITE_DONE || s == SQLITE_ROW ? CDB_OK : cdb_sql_err(c, s, what);
}

static void thumbs_path(const cdb_db *db, char *buf, size_t size) {
    snprintf(buf, size, "%s/thumbs.db", db->dir);
}

/* The connection, opened (a writer creates the file) on first use. CDB_NOTFOUND on a
** reader when the file does not exist. */
static cdb_status thumbs_conn(cdb_db *db, sqlite3 **out) {
    char path[4200];
    cdb_status rc;
    *out = NULL;
    if (db->thumbs) {
        *out = db->thumbs;
        return CDB_OK;
    }
    thumbs_path(db, path, sizeof path);
    if (db->readonly && access(path, F_OK) != 0)
        return cdb_seterr(CDB_NOTFOUND, "no thumbnails in %s", db->dir);
    if ((rc = cdb_sql_open_conn(db, path, !db->readonly, &db->thumbs)) != CDB_OK ||
        (rc = cdb_sql_configure_conn(db, db->thumbs)) != CDB_OK)
        goto fail;
    if (!db->readonly &&
        ((rc = cdb_sql_exec(db->thumbs, "PRAGMA journal_mode=WAL")) != CDB_OK ||
         (rc = cdb_sql_exec(db->thumbs, "CREATE TABLE IF NOT EXISTS thumbs(file_id INTEGER PRIMARY KEY, "
                                   "hash BLOB NOT NULL, px INTEGER NOT NULL, width INTEGER NOT NULL, "
                                   "height INTEGER NOT NULL, jpeg BLOB NOT NULL)")) != CDB_OK))
        goto fail;
    *out = db->thumbs;
    return CDB_OK;
fail:
    rc = cdb_errctx(rc, "thumbnails %s", path);
    cdb_thumbs_close(db);
    return rc;
}

void cdb_thumbs_close(cdb_db *db) {
    sqlite3_finalize(db->thumbs_current);
    sqlite3_finalize(db->thumbs_range);
    db->thumbs_current = db->thumbs_range = NULL;
    if (db->thumbs) sqlite3_close_v2(db->thumbs);
    db->thumbs = NULL;
}

cdb_status cdb_db_thumb_size(cdb_db *db, int *px) {
    int64_t v = CDB_DB_THUMB_DEFAULT;
    cdb_status rc = cdb_sql_meta_get_int(db, "thumb_size", &v);
    if (rc == CDB_NOTFOUND) {
        v = CDB_DB_THUMB_DEFAULT;
        rc = CDB_OK;
    }
    if (rc != CDB_OK) return rc;
    *px = v < 0 ? 0 : v > CDB_DB_THUMB_MAX ? CDB_DB_THUMB_MAX : (int)v;
    return CDB_OK;
}

cdb_status cdb_db_set_thumb_size(cdb_db *db, int px) {
    cdb_status rc;
    if ((rc = cdb_sql_need_writer(db, "set_thumb_size")) != CDB_OK) return rc;
    if (px < 0 || px > CDB_DB_THUMB_MAX || (px > 0 && px < CDB_DB_THUMB_MIN))
        return cdb_seterr(CDB_INVALID, "thumbnail size %d: 0 (off) or %d..%d pixels", px,
                          CDB_DB_THUMB_MIN, CDB_DB_THUMB_MAX);
    return cdb_sql_meta_set_int(db, "thumb_size", px);
}

cdb_status cdb_db_thumbs_put(cdb_db *db, const cdb_db_thumb *t, int n) {
    sqlite3 *c;
    sqlite3_stmt *st = NULL;
    cdb_status rc;
    if ((rc = cdb_sql_need_writer(db, "thumbs_put")) != CDB_OK) return rc;
    if (n <= 0) return CDB_OK;
    if ((rc = thumbs_conn(db, &c)) != CDB_OK) return rc;
    if ((rc = cdb_sql_begin(c)) != CDB_OK) return rc;
    rc = cdb_sql_prepare(c, "INSERT OR REPLACE INTO thumbs(file_id, hash, px, width, height, jpeg) "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6)", &st);
    for (int i = 0; rc == CDB_OK && i < n; i++) {
        if (t[i].file_id <= 0 || !t[i].jpeg || t[i].n_bytes == 0) {
            rc = cdb_seterr(CDB_INVALID, "thumbs_put: thumbnail %d has no file id or bytes", i);
            break;
        }
        sqlite3_bind_int64(st, 1, t[i].file_id);
        sqlite3_bind_blob(st, 2, t[i].hash, CDB_DB_HASH_BYTES, SQLITE_STATIC);
        sqlite3_bind_int(st, 3, t[i].px);
        sqlite3_bind_int(st, 4, t[i].width);
        sqlite3_bind_int(st, 5, t[i].height);
        sqlite3_bind_blob64(st, 6, t[i].jpeg, (sqlite3_uint64)t[i].n_bytes, SQLITE_STATIC);
        rc = step(c, st, "store a thumbnail");
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return cdb_sql_end(c, rc);
}

cdb_status cdb_db_thumb_get(cdb_db *db, int64_t file_id, cdb_db_thumb *out) {
    sqlite3 *c;
    sqlite3_stmt *st = NULL;
    cdb_status rc;
    int s;
    memset(out, 0, sizeof *out);
    if ((rc = thumbs_conn(db, &c)) != CDB_OK) return rc;
    if ((rc = cdb_sql_prepare(c, "SELECT hash, px, width, height, jpeg FROM thumbs WHERE file_id=?1",
                         &st)) != CDB_OK)
        return rc;
    sqlite3_bind_int64(st, 1, file_id);
    s = sqlite3_step(st);
    if (s == SQLITE_ROW) {
        const void *h = sqlite3_column_blob(st, 0), *j = sqlite3_column_blob(st, 4);
        int hn = sqlite3_column_bytes(st, 0), jn = sqlite3_column_bytes(st, 4);
        void *copy = jn > 0 ? cdb_malloc((size_t)jn) : NULL;
        if (jn > 0 && !copy) {
            rc = cdb_seterr(CDB_NOMEM, "out of memory");
        } else {
            out->file_id = file_id;
            if (h && hn == CDB_DB_HASH_BYTES) memcpy(out->hash, h, CDB_DB_HASH_BYTES);
            out->px = sqlite3_column_int(st, 1);
            out->width = sqlite3_column_int(st, 2);
            out->height = sqlite3_column_int(st, 3);
            if (copy) memcpy(copy, j, (size_t)jn);
            out->jpeg = copy;
            out->n_bytes = (size_t)(jn > 0 ? jn : 0);
        }
    } else if (s == SQLITE_DONE) {
        rc = cdb_seterr(CDB_NOTFOUND, "no thumbnail for file %lld", (long long)file_id);
    } else {
        rc = cdb_sql_err(c, s, "read a thumbnail");
    }
    sqlite3_finalize(st);
    return rc;
}

void cdb_db_thumb_clear(cdb_db_thumb *t) {
    if (!t) return;
    cdb_free((void *)t->jpeg);
    memset(t, 0, sizeof *t);
}

/* ---- read snapshots (db.h): here, since they span the thumbnails' connection too ---- */

cdb_status cdb_db_read_begin(cdb_db *db) {
    sqlite3 *c = NULL;
    cdb_status rc;
    if (!db->readonly) return cdb_seterr(CDB_INVALID, "read_begin: a reader handle's call");
    cdb_db_read_end(db);
    if ((rc = cdb_sql_exec(db->cat, "BEGIN")) != CDB_OK) return rc;
    /* BEGIN defers the snapshot to the first read: take it now, for both files alike */
    if ((rc = cdb_sql_exec(db->cat, "SELECT 1 FROM meta LIMIT 1")) != CDB_OK) goto fail;
    rc = thumbs_conn(db, &c);
    if (rc == CDB_NOTFOUND) { /* a database without thumbnails yet */
        cdb_clearerr();
        return CDB_OK;
    }
    if (rc == CDB_OK) rc = cdb_sql_exec(c, "BEGIN");
    if (rc == CDB_OK) return CDB_OK;
fail:
    cdb_db_read_end(db);
    return rc;
}

void cdb_db_read_end(cdb_db *db) {
    if (!db || !db->readonly) return;
    if (!sqlite3_get_autocommit(db->cat)) sqlite3_exec(db->cat, "COMMIT", NULL, NULL, NULL);
    if (db->thumbs && !sqlite3_get_autocommit(db->thumbs))
        sqlite3_exec(db->thumbs, "COMMIT", NULL, NULL, NULL);
}

cdb_status cdb_db_thumb_current(cdb_db *db, int64_t file_id, const uint8_t hash[CDB_DB_HASH_BYTES],
                                int px, int *current) {
    sqlite3 *c;
    sqlite3_stmt *st = NULL;
    cdb_status rc;
    int s;
    *current = 0;
    rc = thumbs_conn(db, &c);
    if (rc == CDB_NOTFOUND) return CDB_OK; /* a reader of a database without any */
    if (rc != CDB_OK) return rc;
    /* a rescan asks this of every unchanged file: prepared once per handle */
    if (!db->thumbs_current &&
        (rc = cdb_sql_prepare(c, "SELECT hash, px FROM thumbs WHERE file_id=?1",
                              &db->thumbs_current)) != CDB_OK)
        return rc;
    st = db->thumbs_current;
    sqlite3_bind_int64(st, 1, file_id);
    s = sqlite3_step(st);
    if (s == SQLITE_ROW)
        *current = sqlite3_column_bytes(st, 0) == CDB_DB_HASH_BYTES &&
                   !memcmp(sqlite3_column_blob(st, 0), hash, CDB_DB_HASH_BYTES) &&
                   sqlite3_column_int(st, 1) == px;
    else if (s != SQLITE_DONE)
        rc = cdb_sql_err(c, s, "look up a thumbnail");
    sqlite3_reset(st);
    return rc;
}

/* The rows' ids in id order, for a merge with the thumbnails' range. */
typedef struct id_at {
    int64_t id;
    int64_t at; /* index in rows */
} id_at;

static int cmp_id_at(const void *a, const void *b) {
    int64_t x = ((const id_at *)a)->id, y = ((const id_at *)b)->id;
    return x < y ? -1 : x > y;
}

/* A folder's ids are usually close together (its files were ingested together): one
** range read over them costs less than a statement per file, as long as the range holds
** few other files' thumbnails. Further apart, each is looked up on its own. */
#define RANGE_SLACK(k) (4 * (k) + 1024)

cdb_status cdb_thumbs_mark_current(cdb_db *db, int px, cdb_db_folder_row *rows, int64_t n) {
    sqlite3 *c = NULL;
    id_at *ix = NULL;
    int64_t k = 0, i = 0;
    int s;
    cdb_status rc = CDB_OK;
    for (int64_t r = 0; r < n; r++) {
        rows[r].thumb_current = 0;
        k += rows[r].f.state == CDB_DB_OK && rows[r].f.meta.has_hash;
    }
    if (!k) return CDB_OK;
    rc = thumbs_conn(db, &c);
    if (rc == CDB_NOTFOUND) { /* a reader of a database without any */
        cdb_clearerr();
        return CDB_OK;
    }
    if (rc != CDB_OK) return rc;
    if (!(ix = cdb_malloc(sizeof *ix * (size_t)k))) return cdb_seterr(CDB_NOMEM, "out of memory");
    for (int64_t r = 0, j = 0; r < n; r++)
        if (rows[r].f.state == CDB_DB_OK && rows[r].f.meta.has_hash)
            ix[j].id = rows[r].f.id, ix[j++].at = r;
    qsort(ix, (size_t)k, sizeof *ix, cmp_id_at);
    if (ix[k - 1].id - ix[0].id > RANGE_SLACK(k)) {
        for (int64_t j = 0; j < k && rc == CDB_OK; j++) {
            cdb_db_folder_row *r = &rows[ix[j].at];
            rc = cdb_db_thumb_current(db, r->f.id, r->f.meta.hash, px, &r->thumb_current);
        }
        cdb_free(ix);
        return rc;
    }
    if (!db->thumbs_range &&
        (rc = cdb_sql_prepare(c, "SELECT file_id, hash, px FROM thumbs WHERE file_id BETWEEN ?1"
                                 " AND ?2 ORDER BY file_id",
                              &db->thumbs_range)) != CDB_OK) {
        cdb_free(ix);
        return rc;
    }
    sqlite3_bind_int64(db->thumbs_range, 1, ix[0].id);
    sqlite3_bind_int64(db->thumbs_range, 2, ix[k - 1].id);
    while ((s = sqlite3_step(db->thumbs_range)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(db->thumbs_range, 0);
        while (i < k && ix[i].id < id) i++;
        if (i == k) break;
        if (ix[i].id != id) continue;
        cdb_db_folder_row *r = &rows[ix[i].at];
        r->thumb_current = sqlite3_column_bytes(db->thumbs_range, 1) == CDB_DB_HASH_BYTES &&
                           !memcmp(sqlite3_column_blob(db->thumbs_range, 1), r->f.meta.hash,
                                   CDB_DB_HASH_BYTES) &&
                           sqlite3_column_int(db->thumbs_range, 2) == px;
    }
    if (s != SQLITE_ROW && s != SQLITE_DONE) rc = cdb_sql_err(c, s, "look up thumbnails");
    sqlite3_reset(db->thumbs_range);
    cdb_free(ix);
    return rc;
}

cdb_status cdb_db_thumbs_prune(cdb_db *db, int64_t *n_dropped) {
    sqlite3 *c;
    sqlite3_stmt *st = NULL, *ok = NULL, *del = NULL;
    int64_t *drop = NULL, n = 0, cap = 0;
    int px = 0, s;
    cdb_status rc;
    if (n_dropped) *n_dropped = 0;
    if ((rc = cdb_sql_need_writer(db, "thumbs_prune")) != CDB_OK) return rc;
    if ((rc = cdb_db_thumb_size(db, &px)) != CDB_OK) return rc;
    if ((rc = thumbs_conn(db, &c)) != CDB_OK) return rc;
    if (px == 0) { /* thumbnails off: none is kept */
        if ((rc = cdb_sql_exec(c, "DELETE FROM thumbs")) == CDB_OK && n_dropped)
            *n_dropped = sqlite3_changes(c);
        return rc;
    }
    /* every reindex asks this of every thumbnail: a merge of the thumbnails and the ok
    ** files, both read in id order (one sequential scan each, in one read transaction),
    ** not a lookup per thumbnail */
    if ((rc = cdb_sql_prepare(c, "SELECT file_id, hash FROM thumbs ORDER BY file_id", &st)) !=
        CDB_OK)
        return rc;
    if ((rc = cdb_sql_prepare(db->cat, "SELECT id, hash FROM files WHERE state=2 ORDER BY id",
                              &ok)) != CDB_OK) {
        sqlite3_finalize(st);
        return rc;
    }
    int snap = sqlite3_get_autocommit(db->cat) && cdb_sql_exec(db->cat, "BEGIN") == CDB_OK;
    int fs = sqlite3_step(ok); /* ok is on the first ok file whose id is not below the thumb's */
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        while (fs == SQLITE_ROW && sqlite3_column_int64(ok, 0) < id) fs = sqlite3_step(ok);
        if (fs != SQLITE_ROW && fs != SQLITE_DONE) break;
        int keep = fs == SQLITE_ROW && sqlite3_column_int64(ok, 0) == id &&
                   sqlite3_column_bytes(ok, 1) == CDB_DB_HASH_BYTES &&
                   sqlite3_column_bytes(st, 1) == CDB_DB_HASH_BYTES &&
                   !memcmp(sqlite3_column_blob(st, 1), sqlite3_column_blob(ok, 1),
                           CDB_DB_HASH_BYTES);
        if (keep) continue;
        if (n == cap) {
            int64_t nc = cap ? cap * 2 : 256;
            int64_t *p = realloc(drop, sizeof *p * (size_t)nc);
            if (!p) {
                rc = cdb_seterr(CDB_NOMEM, "out of memory");
                break;
            }
            drop = p;
            cap = nc;
        }
        drop[n++] = id;
    }
    if (rc == CDB_OK && fs != SQLITE_ROW && fs != SQLITE_DONE)
        rc = cdb_sql_err(db->cat, fs, "list the ok files");
    else if (rc == CDB_OK && s != SQLITE_DONE)
        rc = cdb_sql_err(c, s, "list the thumbnails");
    sqlite3_finalize(st);
    sqlite3_finalize(ok);
    if (snap) sqlite3_exec(db->cat, "COMMIT", NULL, NULL, NULL);
    if (rc == CDB_OK && n) {
        if ((rc = cdb_sql_begin(c)) == CDB_OK &&
            (rc = cdb_sql_prepare(c, "DELETE FROM thumbs WHERE file_id=?1", &del)) == CDB_OK) {
            for (int64_t i = 0; rc == CDB_OK && i < n; i++) {
                sqlite3_bind_int64(del, 1, drop[i]);
                rc = step(c, del, "drop a thumbnail");
                sqlite3_reset(del);
            }
        }
        sqlite3_finalize(del);
        if (rc == CDB_OK) rc = cdb_sql_commit(c);
        else cdb_sql_rollback(c);
    }
    if (rc == CDB_OK && n_dropped) *n_dropped = n;
    free(drop);
    return rc;
}

cdb_status cdb_thumbs_vacuum(cdb_db *db, int64_t *freed) {
    char path[4200];
    sqlite3 *c;
    cdb_status rc;
    if ((rc = cdb_sql_need_writer(db, "thumbs_vacuum")) != CDB_OK) return rc;
    thumbs_path(db, path, sizeof path);
    if (access(path, F_OK) != 0) return CDB_OK;
    if ((rc = thumbs_conn(db, &c)) != CDB_OK) return rc;
    return cdb_sql_vacuum(c, path, freed);
}
