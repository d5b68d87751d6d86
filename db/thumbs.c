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
    db->thumbs_current = NULL;
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

cdb_status cdb_db_thumbs_prune(cdb_db *db, int64_t *n_dropped) {
    sqlite3 *c;
    sqlite3_stmt *st = NULL, *del = NULL;
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
    if ((rc = cdb_sql_prepare(c, "SELECT file_id, hash FROM thumbs", &st)) != CDB_OK) return rc;
    /* every reindex asks this of every thumbnail: the catalog's rows read in one read
    ** transaction, not one per row (a point query is cheap, a transaction's locks are not) */
    int snap = sqlite3_get_autocommit(db->cat) && cdb_sql_exec(db->cat, "BEGIN") == CDB_OK;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        cdb_db_file f;
        int keep = 0;
        memset(&f, 0, sizeof f);
        if (cdb_db_file_get(db, id, &f) == CDB_OK)
            keep = f.state == CDB_DB_OK && f.meta.has_hash &&
                   sqlite3_column_bytes(st, 1) == CDB_DB_HASH_BYTES &&
                   !memcmp(sqlite3_column_blob(st, 1), f.meta.hash, CDB_DB_HASH_BYTES);
        cdb_db_file_clear(&f);
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
    if (rc == CDB_OK && s != SQLITE_DONE) rc = cdb_sql_err(c, s, "list the thumbnails");
    sqlite3_finalize(st);
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
