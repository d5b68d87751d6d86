/*
** folder.c: a folder's recorded rows, for a rescan's merge join (db.h, cdb_db_folder_read).
**
** One range query over the catalog's (root_id, relpath) index reads the rows whose
** relpath starts with the folder's "dir/". The rows of a subfolder ("dir/sub/...") lie
** together in that range: on meeting the first of them the query starts again just after
** them (at "dir/sub0", '0' being the byte after '/'), so each row is read once whatever
** the depth of the tree, and the cost per folder is one seek per subfolder that has rows.
** Each row comes with whether the model asked about has a vector of it (a probe of the
** vector directory in the same statement), and its thumbnail's currency is read for the
** whole folder at once (thumbs.c).
**
** The rows are in relpath order: bytes compared as memcmp, the shorter first on a tie,
** which for the names of one folder (no '/') is strcmp's order, the walk's.
*/
#include <stdlib.h>
#include <string.h>

#include "db/db_int.h"

struct cdb_db_folder {
    cdb_db_folder_row *rows;
    int64_t n, cap;
    char *names;          /* the rows' whole relpaths, NUL-terminated, back to back */
    size_t names_len, names_cap;
    int64_t cursor;       /* cdb_db_folder_find: rows before it were passed */
};

void cdb_db_folder_free(cdb_db_folder *d) {
    if (!d) return;
    cdb_free(d->rows);
    cdb_free(d->names);
    cdb_free(d);
}

/* Appends the row st is on (relpath of rl bytes at rel); its relpath is kept as an
** offset into names until the listing is complete (names may move as it grows). */
static cdb_status add_row(cdb_db_folder *d, sqlite3_stmt *st, const char *rel, size_t rl) {
    if (d->n == d->cap) {
        int64_t nc = d->cap ? d->cap * 2 : 64;
        cdb_db_folder_row *r = cdb_realloc(d->rows, sizeof *r * (size_t)nc);
        if (!r) return cdb_seterr(CDB_NOMEM, "out of memory");
        d->rows = r;
        d->cap = nc;
    }
    if (d->names_len + rl + 1 > d->names_cap) {
        size_t nc = d->names_cap ? d->names_cap * 2 : 4096;
        while (nc < d->names_len + rl + 1) nc *= 2;
        char *s = cdb_realloc(d->names, nc);
        if (!s) return cdb_seterr(CDB_NOMEM, "out of memory");
        d->names = s;
        d->names_cap = nc;
    }
    cdb_db_folder_row *r = &d->rows[d->n++];
    memset(r, 0, sizeof *r);
    r->f.id = sqlite3_column_int64(st, 0);
    r->f.relpath = (const char *)(uintptr_t)d->names_len; /* an offset until the end */
    memcpy(d->names + d->names_len, rel, rl);
    d->names[d->names_len + rl] = '\0';
    d->names_len += rl + 1;
    r->f.meta.size = sqlite3_column_int64(st, 2);
    r->f.meta.mtime_ns = sqlite3_column_int64(st, 3);
    if (sqlite3_column_bytes(st, 4) == CDB_DB_HASH_BYTES) {
        memcpy(r->f.meta.hash, sqlite3_column_blob(st, 4), CDB_DB_HASH_BYTES);
        r->f.meta.has_hash = 1;
    }
    r->f.meta.width = sqlite3_column_int(st, 5);
    r->f.meta.height = sqlite3_column_int(st, 6);
    r->f.state = (cdb_db_file_state)sqlite3_column_int(st, 7);
    r->f.shard = sqlite3_column_int(st, 8);
    r->f.meta.dev = (uint64_t)sqlite3_column_int64(st, 9); /* NULL reads as 0: unknown */
    r->f.meta.ino = (uint64_t)sqlite3_column_int64(st, 10);
    r->f.meta.ctime_ns = sqlite3_column_int64(st, 11);
    r->has_vector = sqlite3_column_int(st, 12);
    return CDB_OK;
}

/* The rows of the folder whose relpaths start with prefix (pl bytes: "dir/", or "" for
** the root's own folder), jumping over each subfolder's rows. */
static cdb_status read_rows(cdb_db *db, int64_t root_id, int64_t model_id, const char *prefix,
                            size_t pl, cdb_db_folder *d) {
    sqlite3_stmt *st = NULL;
    char *lo = NULL;
    size_t lo_len = pl;
    cdb_status rc = cdb_sql_stmt(db, ST_FOLDER_ROWS, &st);
    if (rc != CDB_OK) return rc;
    if (!(lo = cdb_malloc(pl + 1))) return cdb_seterr(CDB_NOMEM, "out of memory");
    memcpy(lo, prefix, pl);
    for (int again = 1; again && rc == CDB_OK;) {
        int s;
        again = 0;
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, root_id);
        sqlite3_bind_blob(st, 2, lo, (int)lo_len, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, model_id);
        while ((s = sqlite3_step(st)) == SQLITE_ROW) {
            const char *rel = sqlite3_column_blob(st, 1);
            size_t rl = (size_t)sqlite3_column_bytes(st, 1);
            if (rl < pl || (pl && memcmp(rel, prefix, pl))) break; /* past the folder */
            const char *slash = memchr(rel + pl, '/', rl - pl);
            if (slash) { /* a subfolder's first row: on from just after its last */
                size_t jl = (size_t)(slash - rel) + 1;
                char *nl = cdb_realloc(lo, jl);
                if (!nl) {
                    rc = cdb_seterr(CDB_NOMEM, "out of memory");
                    break;
                }
                lo = nl;
                memcpy(lo, rel, jl - 1);
                lo[jl - 1] = '/' + 1;
                lo_len = jl;
                again = 1;
                break;
            }
            if ((rc = add_row(d, st, rel, rl)) != CDB_OK) break;
        }
        if (rc == CDB_OK && s != SQLITE_ROW && s != SQLITE_DONE)
            rc = cdb_sql_err(db->cat, s, "read a folder's files");
    }
    sqlite3_reset(st);
    cdb_free(lo);
    return rc;
}

cdb_status cdb_db_folder_read(cdb_db *db, int64_t root_id, const char *dir, int64_t model_id,
                              int thumb_px, cdb_db_folder **out) {
    cdb_db_folder *d;
    char *prefix;
    size_t dl = dir ? strlen(dir) : 0;
    cdb_status rc;
    *out = NULL;
    if (!(d = cdb_calloc(1, sizeof *d)) || !(prefix = cdb_malloc(dl + 2))) {
        cdb_free(d);
        return cdb_seterr(CDB_NOMEM, "out of memory");
    }
    memcpy(prefix, dir ? dir : "", dl);
    prefix[dl] = '/';
    rc = read_rows(db, root_id, model_id, prefix, dl ? dl + 1 : 0, d);
    cdb_free(prefix);
    for (int64_t i = 0; rc == CDB_OK && i < d->n; i++)
        d->rows[i].f.relpath = d->names + (uintptr_t)d->rows[i].f.relpath;
    if (rc == CDB_OK && thumb_px > 0 &&
        cdb_thumbs_mark_current(db, thumb_px, d->rows, d->n) != CDB_OK) {
        /* thumbnails are a cache: one that cannot be read (thumbs.db left by a killed
        ** writer, unreadable) never fails the rescan, and is not made again now */
        CDB_LOG_DEBUG("db: thumbnails not checked: %s", cdb_errmsg());
        cdb_clearerr();
        for (int64_t i = 0; i < d->n; i++) d->rows[i].thumb_current = 1;
    }
    if (rc != CDB_OK) {
        cdb_db_folder_free(d);
        return rc;
    }
    *out = d;
    return CDB_OK;
}

/* The name of a row: its relpath after the last '/'. */
static const char *row_name(const cdb_db_folder_row *r) {
    const char *s = strrchr(r->f.relpath, '/');
    return s ? s + 1 : r->f.relpath;
}

const cdb_db_folder_row *cdb_db_folder_find(cdb_db_folder *d, const char *name) {
    int c = 1;
    if (d->cursor > 0 && strcmp(row_name(&d->rows[d->cursor - 1]), name) >= 0)
        d->cursor = 0; /* asked out of order: from the start again */
    while (d->cursor < d->n && (c = strcmp(row_name(&d->rows[d->cursor]), name)) < 0) d->cursor++;
    if (d->cursor < d->n && c == 0) return &d->rows[d->cursor++];
    return NULL;
}

int64_t cdb_db_folder_count(const cdb_db_folder *d) { return d ? d->n : 0; }
