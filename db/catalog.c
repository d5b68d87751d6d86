/*
** catalog.c: the catalog's read/write calls that are not batch writes: models
** (default model by weights hash), roots, file lookups for change detection
** (by path, by id, by content hash), the vector directory's generations for
** incremental index updates, counts, and the runs history.
** Tables and invariants: db/README.md.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db_int.h"

const char *cdb_db_file_state_str(cdb_db_file_state s) {
    switch (s) {
    case CDB_DB_PENDING: return "pending";
    case CDB_DB_OK: return "ok";
    case CDB_DB_ERROR: return "error";
    case CDB_DB_DELETED: return "deleted";
    }
    return "unknown";
}

static void copy_text(char *dst, size_t cap, const unsigned char *src) {
    snprintf(dst, cap, "%s", src ? (const char *)src : "");
}

/* ---- models ---------------------------------------------------------------------------- */

#define MODEL_COLS "id, weights_hash, name, dim, is_default, decode, decode_settled"

static void model_from_row(sqlite3_stmt *st, cdb_db_model *m) {
    memset(m, 0, sizeof *m);
    m->id = sqlite3_column_int64(st, 0);
    copy_text(m->weights_hash, sizeof m->weights_hash, sqlite3_column_text(st, 1));
    copy_text(m->name, sizeof m->name, sqlite3_column_text(st, 2));
    m->dim = sqlite3_column_int(st, 3);
    m->is_default = sqlite3_column_int(st, 4);
    m->decode = sqlite3_column_int(st, 5);
    m->decode_settled = sqlite3_column_int(st, 6);
}

/* One model row selected by sql with ?1 bound to an int64 or text. */
static cdb_status model_query(cdb_db *db, const char *sql, int64_t id, const char *text,
                              cdb_db_model *out, const char *what) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_prepare(db->cat, sql, &st);
    if (rc != CDB_OK) return rc;
    if (text)
        sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
    else
        sqlite3_bind_int64(st, 1, id);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW)
        model_from_row(st, out);
    else if (s == SQLITE_DONE)
        rc = cdb_seterr(CDB_NOTFOUND, "%s: no such model", what);
    else
        rc = cdb_sql_err(db->cat, s, what);
    sqlite3_finalize(st);
    return rc;
}

cdb_status cdb_db_model_get(cdb_db *db, int64_t model_id, cdb_db_model *out) {
    cdb_status rc = model_query(db, "SELECT " MODEL_COLS " FROM models WHERE id=?1", model_id, NULL,
                                out, "model");
    if (rc == CDB_NOTFOUND)
        return cdb_seterr(rc, "model %lld is not registered", (long long)model_id);
    return rc;
}

cdb_status cdb_db_model_find(cdb_db *db, const char *weights_hash, cdb_db_model *out) {
    return model_query(db, "SELECT " MODEL_COLS " FROM models WHERE weights_hash=?1", 0,
                       weights_hash, out, "find model");
}

cdb_status cdb_db_model_default(cdb_db *db, cdb_db_model *out) {
    cdb_status rc = model_query(db, "SELECT " MODEL_COLS " FROM models WHERE is_default=1 LIMIT ?1",
                                1, NULL, out, "default model");
    if (rc == CDB_NOTFOUND) return cdb_seterr(rc, "database %s has no model yet", db->dir);
    return rc;
}

cdb_status cdb_db_model_register(cdb_db *db, const char *weights_hash, const char *name, int dim,
                                 const char *info_json, int64_t *model_id) {
    cdb_db_model m;
    sqlite3_stmt *st = NULL;
    cdb_status rc;
    if ((rc = cdb_sql_need_writer(db, "register model")) != CDB_OK) return rc;
    if (!weights_hash || !*weights_hash || strlen(weights_hash) >= sizeof m.weights_hash)
        return cdb_seterr(CDB_INVALID, "register model: bad weights hash");
    if (dim <= 0 || dim > 65536) return cdb_seterr(CDB_INVALID, "register model: bad dim %d", dim);
    rc = cdb_db_model_find(db, weights_hash, &m);
    if (rc == CDB_OK) {
        if (m.dim != dim)
            return cdb_seterr(CDB_DIM_MISMATCH, "model %s is registered with dim %d, not %d",
                              weights_hash, m.dim, dim);
        *model_id = m.id;
        return CDB_OK;
    }
    if (rc != CDB_NOTFOUND) return rc;
    int64_t n_models = 0;
    if ((rc = cdb_sql_count(db, "SELECT count(*) FROM models", 0, &n_models)) != CDB_OK) return rc;
    if (n_models >= CDB_DB_MAX_MODELS)
        return cdb_seterr(CDB_UNSUPPORTED, "register model: a database holds at most %d models",
                          CDB_DB_MAX_MODELS);
    if ((rc = cdb_sql_begin(db->cat)) != CDB_OK) return rc;
    rc = cdb_sql_prepare(db->cat,
                    "INSERT INTO models(weights_hash, name, dim, info, is_default, created_ns)"
                    " VALUES(?1, ?2, ?3, ?4, NOT EXISTS(SELECT 1 FROM models), ?5)",
                    &st);
    if (rc == CDB_OK) {
        sqlite3_bind_text(st, 1, weights_hash, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, name ? name : "", -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 3, dim);
        if (info_json) sqlite3_bind_text(st, 4, info_json, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, cdb_sql_wall_ns());
        rc = cdb_sql_step_done(db->cat, st, "register model");
    }
    if (rc == CDB_OK) {
        *model_id = sqlite3_last_insert_rowid(db->cat);
        rc = cdb_sql_commit(db->cat);
    } else {
        cdb_sql_rollback(db->cat);
    }
    return rc;
}

cdb_status cdb_db_model_set_default(cdb_db *db, int64_t model_id) {
    cdb_db_model m;
    sqlite3_stmt *st = NULL;
    cdb_status rc;
    if ((rc = cdb_sql_need_writer(db, "set default model")) != CDB_OK) return rc;
    if ((rc = cdb_db_model_get(db, model_id, &m)) != CDB_OK) return rc;
    if ((rc = cdb_sql_prepare(db->cat, "UPDATE models SET is_default=(id=?1)", &st)) != CDB_OK)
        return rc;
    sqlite3_bind_int64(st, 1, model_id);
    return cdb_sql_step_done(db->cat, st, "set default model");
}

cdb_status cdb_db_model_set_decode(cdb_db *db, int64_t model_id, int decode, int settled) {
    sqlite3_stmt *st = NULL;
    cdb_status rc;
    if ((rc = cdb_sql_need_writer(db, "set decode mode")) != CDB_OK) return rc;
    if ((rc = cdb_sql_prepare(db->cat, "UPDATE models SET decode=?2, decode_settled=?3 WHERE id=?1",
                         &st)) != CDB_OK)
        return rc;
    sqlite3_bind_int64(st, 1, model_id);
    sqlite3_bind_int(st, 2, decode);
    sqlite3_bind_int(st, 3, settled != 0);
    return cdb_sql_step_done(db->cat, st, "set decode mode");
}

cdb_status cdb_db_model_info(cdb_db *db, int64_t model_id, char **json) {
    sqlite3_stmt *st = NULL;
    *json = NULL;
    cdb_status rc = cdb_sql_prepare(db->cat, "SELECT info FROM models WHERE id=?1", &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, model_id);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        if (t && !(*json = cdb_strdup((const char *)t)))
            rc = cdb_seterr(CDB_NOMEM, "out of memory");
    } else if (s == SQLITE_DONE) {
        rc = cdb_seterr(CDB_NOTFOUND, "model %lld is not registered", (long long)model_id);
    } else {
        rc = cdb_sql_err(db->cat, s, "model info");
    }
    sqlite3_finalize(st);
    return rc;
}

cdb_status cdb_db_models_foreach(cdb_db *db, cdb_db_model_fn fn, void *ud) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_prepare(db->cat, "SELECT " MODEL_COLS " FROM models ORDER BY id", &st);
    if (rc != CDB_OK) return rc;
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        cdb_db_model m;
        model_from_row(st, &m);
        if (fn(&m, ud)) {
            s = SQLITE_DONE;
            break;
        }
    }
    if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "list models");
    sqlite3_finalize(st);
    return rc;
}

/* ---- files ---------------------------------------------------------------------------- */

/* Fills f from a FILE_COLS row; relpath/error borrowed from the statement. */
static void file_from_row(sqlite3_stmt *st, cdb_db_file *f) {
    memset(f, 0, sizeof *f);
    f->id = sqlite3_column_int64(st, 0);
    f->root_id = sqlite3_column_int64(st, 1);
    f->relpath = (const char *)sqlite3_column_text(st, 2); /* BLOB -> NUL-terminated bytes */
    if (!f->relpath) f->relpath = "";                      /* a file root's file */
    f->meta.size = sqlite3_column_int64(st, 3);
    f->meta.mtime_ns = sqlite3_column_int64(st, 4);
    if (sqlite3_column_bytes(st, 5) == CDB_DB_HASH_BYTES) {
        memcpy(f->meta.hash, sqlite3_column_blob(st, 5), CDB_DB_HASH_BYTES);
        f->meta.has_hash = 1;
    }
    f->meta.width = sqlite3_column_int(st, 6);
    f->meta.height = sqlite3_column_int(st, 7);
    f->state = (cdb_db_file_state)sqlite3_column_int(st, 8);
    f->error = (const char *)sqlite3_column_text(st, 9);
    f->shard = sqlite3_column_int(st, 10);
    f->created_ns = sqlite3_column_int64(st, 11);
    f->updated_ns = sqlite3_column_int64(st, 12);
    f->meta.dev = (uint64_t)sqlite3_column_int64(st, 13); /* NULL reads as 0: unknown */
    f->meta.ino = (uint64_t)sqlite3_column_int64(st, 14);
    f->meta.ctime_ns = sqlite3_column_int64(st, 15);
}

/* Runs a FILE_COLS query expected to give at most one row; heap-copies the strings. */
/* The row st steps to (NOTFOUND when none) into *out; st is finalized unless cached
** (a statement of cdb_sql_stmt's, reset by its next use). */
static cdb_status file_one(cdb_db *db, sqlite3_stmt *st, int cached, cdb_db_file *out,
                           const char *what) {
    cdb_status rc = CDB_OK;
    int s = sqlite3_step(st);
    memset(out, 0, sizeof *out);
    if (s == SQLITE_ROW) {
        cdb_db_file f;
        file_from_row(st, &f);
        *out = f;
        out->relpath = cdb_sql_column_strdup(st, 2);
        out->error = f.error ? cdb_strdup(f.error) : NULL;
        if (!out->relpath || (f.error && !out->error)) {
            cdb_db_file_clear(out);
            rc = cdb_seterr(CDB_NOMEM, "out of memory");
        }
    } else if (s == SQLITE_DONE) {
        rc = cdb_seterr(CDB_NOTFOUND, "%s: no such file", what);
    } else {
        rc = cdb_sql_err(db->cat, s, what);
    }
    if (!cached) sqlite3_finalize(st);
    return rc;
}

void cdb_db_file_clear(cdb_db_file *f) {
    if (!f) return;
    cdb_free((void *)f->relpath);
    cdb_free((void *)f->error);
    f->relpath = f->error = NULL;
}

cdb_status cdb_db_file_lookup(cdb_db *db, int64_t root_id, const char *relpath, cdb_db_file *out) {
    /* Prepared once per handle: a rescan asks this of every file, and parsing the SQL
    ** each time was a tenth of a no-change reindex's CPU (perf, bench_reindex). */
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_stmt(db, ST_FILE_LOOKUP, &st);
    memset(out, 0, sizeof *out);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, root_id);
    sqlite3_bind_blob(st, 2, relpath, (int)strlen(relpath), SQLITE_STATIC);
    rc = file_one(db, st, 1, out, "look up file");
    sqlite3_reset(st); /* the row is copied: let go of the read (and of relpath) */
    return rc;
}

cdb_status cdb_db_file_hit(cdb_db *db, int64_t file_id, int64_t model_id, cdb_db_file *out,
                           char **path, cdb_db_photo *photo) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_stmt(db, ST_FILE_GET, &st);
    memset(out, 0, sizeof *out);
    if (path) *path = NULL;
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, file_id);
    sqlite3_bind_int64(st, 2, model_id);
    rc = file_one(db, st, 1, out, "get file");
    if (rc == CDB_OK && path) {
        const char *root = (const char *)sqlite3_column_text(st, FILE_NCOLS);
        if (!root || !(*path = cdb_db_path_join(root, out->relpath))) {
            cdb_db_file_clear(out);
            rc = root ? cdb_seterr(CDB_NOMEM, "out of memory")
                      : cdb_seterr(CDB_CORRUPT, "file %lld has no root", (long long)file_id);
        }
    }
    if (rc == CDB_OK && photo) cdb_photos_read_row(st, FILE_NCOLS + 1, photo);
    sqlite3_reset(st); /* the borrowed columns are copied: let go of the read */
    if (rc == CDB_NOTFOUND && model_id)
        return cdb_seterr(rc, "file %lld has no vector of model %lld", (long long)file_id,
                          (long long)model_id);
    if (rc == CDB_NOTFOUND) return cdb_seterr(rc, "file %lld is not recorded", (long long)file_id);
    return rc;
}

cdb_status cdb_db_file_get(cdb_db *db, int64_t file_id, cdb_db_file *out) {
    return cdb_db_file_hit(db, file_id, 0, out, NULL, NULL);
}

char *cdb_db_path_join(const char *root, const char *relpath) {
    size_t rl = strlen(root), pl = relpath ? strlen(relpath) : 0;
    char *s = cdb_malloc(rl + pl + 2);
    if (!s) return NULL;
    memcpy(s, root, rl);
    if (pl) {
        s[rl] = '/';
        memcpy(s + rl + 1, relpath, pl);
    }
    s[rl + (pl ? pl + 1 : 0)] = '\0';
    return s;
}

cdb_status cdb_db_file_path(cdb_db *db, int64_t file_id, char **path) {
    sqlite3_stmt *st = NULL;
    *path = NULL;
    cdb_status rc = cdb_sql_prepare(db->cat,
                               "SELECT r.path, f.relpath FROM files f"
                               " JOIN roots r ON r.id = f.root_id WHERE f.id=?1",
                               &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, file_id);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW) {
        char *root = cdb_sql_column_strdup(st, 0), *rel = cdb_sql_column_strdup(st, 1);
        if (!root || !rel || !(*path = cdb_db_path_join(root, rel)))
            rc = cdb_seterr(CDB_NOMEM, "out of memory");
        cdb_free(root);
        cdb_free(rel);
    } else if (s == SQLITE_DONE) {
        rc = cdb_seterr(CDB_NOTFOUND, "file %lld is not recorded", (long long)file_id);
    } else {
        rc = cdb_sql_err(db->cat, s, "file path");
    }
    sqlite3_finalize(st);
    return rc;
}

cdb_status cdb_db_files_by_hash(cdb_db *db, int64_t root_id, const uint8_t hash[CDB_DB_HASH_BYTES],
                                int64_t *ids, int cap, int *n_out) {
    sqlite3_stmt *st = NULL;
    *n_out = 0;
    cdb_status rc = cdb_sql_prepare(db->cat,
                               "SELECT id FROM files WHERE id IN (SELECT file_id FROM hkeys"
                               " WHERE hkey=?4 UNION ALL SELECT file_id FROM hkeys_new WHERE"
                               " hkey=?4) AND (?1 = 0 OR root_id=?1) AND hash=?2 AND state=2"
                               " ORDER BY id LIMIT ?3",
                               &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, root_id);
    sqlite3_bind_blob(st, 2, hash, CDB_DB_HASH_BYTES, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, cap);
    sqlite3_bind_int64(st, 4, cdb_sql_hash_key(hash));
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) ids[(*n_out)++] = sqlite3_column_int64(st, 0);
    if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "find files by hash");
    sqlite3_finalize(st);
    return rc;
}

/* fn on every row of st (FILE_COLS; bound), until it returns nonzero; then finalizes st.
** what: for the error message. */
static cdb_status each_file(cdb_db *db, sqlite3_stmt *st, cdb_db_file_fn fn, void *ud,
                            const char *what) {
    cdb_status rc = CDB_OK;
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        cdb_db_file f;
        file_from_row(st, &f);
        if (fn(&f, ud)) {
            s = SQLITE_DONE;
            break;
        }
    }
    if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, what);
    sqlite3_finalize(st);
    return rc;
}

cdb_status cdb_db_files_foreach(cdb_db *db, int64_t root_id, unsigned state_mask, cdb_db_file_fn fn,
                                void *ud) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_prepare(db->cat,
                               "SELECT " FILE_COLS " FROM files f WHERE (?1 = 0 OR root_id = ?1)"
                               " AND ((?2 >> state) & 1) ORDER BY id",
                               &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, root_id);
    sqlite3_bind_int64(st, 2, (int64_t)state_mask);
    return each_file(db, st, fn, ud, "list files");
}

cdb_status cdb_db_files_same_identity(cdb_db *db, cdb_db_file_fn fn, void *ud) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_prepare(
        db->cat,
        "SELECT " FILE_COLS " FROM files f JOIN (SELECT ino AS g_ino, size AS g_size,"
        " hash AS g_hash FROM files WHERE state = ?1 AND ino IS NOT NULL AND ino != 0"
        " AND hash IS NOT NULL GROUP BY ino, size, hash HAVING count(*) > 1)"
        " ON f.ino = g_ino AND f.size = g_size AND f.hash = g_hash WHERE f.state = ?1"
        " ORDER BY f.ino, f.size, f.hash, f.id",
        &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int(st, 1, CDB_DB_OK);
    return each_file(db, st, fn, ud, "list files recorded twice");
}

/* ---- files in walk order ------------------------------------------------------------- */

/* cdb_db_walk_cmp over counted bytes (a collation's arguments are not NUL-terminated). */
static int walk_cmp_n(const unsigned char *a, int na, const unsigned char *b, int nb) {
    for (int i = 0;; i++) {
        int ca = i < na ? a[i] : -1, cb = i < nb ? b[i] : -1; /* -1: the end */
        if (ca == cb) {
            if (ca < 0) return 0;
            continue;
        }
        if (ca < 0 || ca == '/') return -1;
        if (cb < 0 || cb == '/') return 1;
        return ca < cb ? -1 : 1;
    }
}

int cdb_db_walk_cmp(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    return walk_cmp_n((const unsigned char *)a, na < INT32_MAX ? (int)na : INT32_MAX,
                      (const unsigned char *)b, nb < INT32_MAX ? (int)nb : INT32_MAX);
}

static int walk_collate(void *ud, int na, const void *a, int nb, const void *b) {
    (void)ud;
    return walk_cmp_n(a, na, b, nb);
}

struct cdb_db_files_cursor {
    cdb_db *db;
    sqlite3_stmt *st;
};

cdb_status cdb_db_files_cursor_open(cdb_db *db, int64_t root_id, unsigned state_mask,
                                    cdb_db_files_cursor **out) {
    cdb_db_files_cursor *c;
    cdb_status rc;
    *out = NULL;
    if (!db->walk_collation) {
        int s = sqlite3_create_collation_v2(db->cat, "cdb_walk", SQLITE_UTF8, NULL, walk_collate,
                                            NULL);
        if (s != SQLITE_OK) return cdb_sql_err(db->cat, s, "walk order");
        /* the sorter keeps cache_size in memory and spills the rest to files; with
        ** temp_store=MEMORY (sql.c's default) its "files" would be memory too */
        if ((rc = cdb_sql_exec(db->cat, "PRAGMA temp_store=FILE")) != CDB_OK) return rc;
        db->walk_collation = 1;
    }
    if (!(c = cdb_calloc(1, sizeof *c))) return cdb_seterr(CDB_NOMEM, "out of memory");
    c->db = db;
    /* relpath is a BLOB, which collations never see: read as TEXT, its bytes unchanged */
    rc = cdb_sql_prepare(db->cat,
                         "SELECT " FILE_COLS " FROM files f WHERE root_id = ?1"
                         " AND ((?2 >> state) & 1) ORDER BY CAST(relpath AS TEXT) COLLATE cdb_walk",
                         &c->st);
    if (rc != CDB_OK) {
        cdb_free(c);
        return rc;
    }
    sqlite3_bind_int64(c->st, 1, root_id);
    sqlite3_bind_int64(c->st, 2, (int64_t)state_mask);
    *out = c;
    return CDB_OK;
}

cdb_status cdb_db_files_cursor_next(cdb_db_files_cursor *c, cdb_db_file *f, int *has) {
    int s = sqlite3_step(c->st);
    *has = s == SQLITE_ROW;
    if (s == SQLITE_ROW) file_from_row(c->st, f);
    else memset(f, 0, sizeof *f);
    if (s != SQLITE_ROW && s != SQLITE_DONE) return cdb_sql_err(c->db->cat, s, "list files");
    return CDB_OK;
}

void cdb_db_files_cursor_close(cdb_db_files_cursor *c) {
    if (!c) return;
    sqlite3_finalize(c->st);
    cdb_free(c);
}

cdb_status cdb_db_max_file_id(cdb_db *db, int64_t *id) {
    *id = 0;
    return cdb_sql_count(db, "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name='files'),"
                            " (SELECT max(id) FROM files), 0)",
                        0, id);
}

cdb_status cdb_db_root_file_ids(cdb_db *db, int64_t root_id, int (*fn)(int64_t id, void *ud),
                                void *ud) {
    sqlite3_stmt *st = NULL;
    int s;
    cdb_status rc = cdb_sql_prepare(db->cat, "SELECT id FROM files WHERE root_id = ?1", &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, root_id);
    while ((s = sqlite3_step(st)) == SQLITE_ROW)
        if (fn(sqlite3_column_int64(st, 0), ud)) {
            s = SQLITE_DONE;
            break;
        }
    if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "list a root's files");
    sqlite3_finalize(st);
    return rc;
}

cdb_status cdb_db_file_has_vector(cdb_db *db, int64_t model_id, int64_t file_id, int *has) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_stmt(db, ST_DIR_GET, &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, model_id);
    sqlite3_bind_int64(st, 2, file_id);
    int s = sqlite3_step(st);
    *has = s == SQLITE_ROW;
    if (s != SQLITE_ROW && s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "look up vector");
    sqlite3_reset(st);
    return rc;
}

int cdb_db_same_stat(const cdb_db_file_meta *row, const cdb_db_file_meta *st) {
    if (row->size != st->size || row->mtime_ns != st->mtime_ns) return 0;
    if (!row->ino) return 1; /* no identity recorded (schema < 5) */
    return row->dev == st->dev && row->ino == st->ino && row->ctime_ns == st->ctime_ns;
}

cdb_db_change cdb_db_change_of(const cdb_db_file *row, int has_vector,
                               const cdb_db_file_meta *st) {
    if (!row) return CDB_DB_CHANGE_NEW;
    int same = cdb_db_same_stat(&row->meta, st);
    switch (row->state) {
    case CDB_DB_DELETED: return CDB_DB_CHANGE_NEW;
    case CDB_DB_PENDING: return CDB_DB_CHANGE_REDO;
    case CDB_DB_ERROR: return same ? CDB_DB_CHANGE_QUARANTINED : CDB_DB_CHANGE_RETRY;
    case CDB_DB_OK:
    default:
        if (!same) return CDB_DB_CHANGE_MODIFIED;
        return !has_vector     ? CDB_DB_CHANGE_NEEDS_VECTOR
               : row->meta.ino ? CDB_DB_CHANGE_SAME
                               : CDB_DB_CHANGE_RESTAT;
    }
}

cdb_status cdb_db_classify(cdb_db *db, int64_t model_id, int64_t root_id, const char *relpath,
                           const cdb_db_file_meta *stat_meta, cdb_db_change *change,
                           cdb_db_file *out) {
    cdb_db_file f;
    int has = 0;
    cdb_status rc = cdb_db_file_lookup(db, root_id, relpath, &f);
    if (out) memset(out, 0, sizeof *out);
    if (rc == CDB_NOTFOUND) {
        *change = CDB_DB_CHANGE_NEW;
        cdb_clearerr();
        return CDB_OK;
    }
    if (rc != CDB_OK) return rc;
    /* the vector directory is read only when the answer depends on it */
    if (f.state == CDB_DB_OK && cdb_db_same_stat(&f.meta, stat_meta))
        rc = cdb_db_file_has_vector(db, model_id, f.id, &has);
    if (rc == CDB_OK) *change = cdb_db_change_of(&f, has, stat_meta);
    if (rc == CDB_OK && out)
        *out = f;
    else
        cdb_db_file_clear(&f);
    return rc;
}

/* ---- generations ---------------------------------------------------------------------- */

cdb_status cdb_db_generation(cdb_db *db, int64_t *gen) {
    return cdb_sql_meta_get_int(db, "generation", gen);
}

static cdb_status seq_query(cdb_db *db, const char *sql, int64_t model_id, int64_t since,
                            cdb_db_seq_fn fn, void *ud) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_prepare(db->cat, sql, &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, model_id);
    sqlite3_bind_int64(st, 2, since);
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW)
        if (fn(sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), ud)) {
            s = SQLITE_DONE;
            break;
        }
    if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "changes since");
    sqlite3_finalize(st);
    return rc;
}

cdb_status cdb_db_added_since(cdb_db *db, int64_t model_id, int64_t since, cdb_db_seq_fn fn,
                              void *ud) {
    return seq_query(db,
                     "SELECT file_id, seq FROM vectors WHERE model_id=?1 AND seq>?2 ORDER BY seq",
                     model_id, since, fn, ud);
}

cdb_status cdb_db_removed_since(cdb_db *db, int64_t model_id, int64_t since, cdb_db_seq_fn fn,
                                void *ud) {
    return seq_query(db,
                     "SELECT file_id, seq FROM removed WHERE model_id=?1 AND seq>?2 ORDER BY seq",
                     model_id, since, fn, ud);
}

cdb_status cdb_db_prune_removed(cdb_db *db, int64_t upto) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_need_writer(db, "prune removal log");
    if (rc == CDB_OK) rc = cdb_sql_prepare(db->cat, "DELETE FROM removed WHERE seq<=?1", &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, upto);
    return cdb_sql_step_done(db->cat, st, "prune removal log");
}

/* ---- counts ---------------------------------------------------------------------------- */

/* Claims (rows: shard, file_id) of model_id (?1) listed by sql (?2 = the file state)
** whose vector is not in the shard: *n_stale. Checked in chunks of up to 4,096
** claims, each chunk one read per shard it touches, so memory stays flat. */
static cdb_status count_stale(cdb_db *db, const char *sql, int64_t model_id, int state,
                              int unreadable, int64_t *n_stale) {
    enum { CHUNK = 4096 };
    sqlite3_stmt *st = NULL;
    db_claim *c = NULL;
    size_t n = 0;
    int s = SQLITE_DONE;
    cdb_status rc = cdb_sql_prepare(db->cat, sql, &st);
    *n_stale = 0;
    if (rc != CDB_OK) return rc;
    if (!(c = cdb_malloc(CHUNK * sizeof *c))) rc = cdb_seterr(CDB_NOMEM, "out of memory");
    sqlite3_bind_int64(st, 1, model_id);
    sqlite3_bind_int(st, 2, state);
    while (rc == CDB_OK) {
        if (n < CHUNK && (s = sqlite3_step(st)) == SQLITE_ROW) {
            c[n].shard = sqlite3_column_int(st, 0);
            c[n].model_id = model_id;
            c[n++].file_id = sqlite3_column_int64(st, 1);
            continue;
        }
        if (s != SQLITE_ROW && s != SQLITE_DONE) {
            rc = cdb_sql_err(db->cat, s, "read vector directory");
            break;
        }
        if ((rc = cdb_shard_check_claims(db, c, n, unreadable)) != CDB_OK) break;
        for (size_t i = 0; i < n; i++) *n_stale += !c[i].present;
        n = 0;
        if (s == SQLITE_DONE) break;
    }
    cdb_free(c);
    sqlite3_finalize(st);
    return rc;
}

#define CLAIMS_OF_STATE                                                                           \
    "SELECT f.shard, f.id FROM files f JOIN vectors v ON v.file_id = f.id AND v.model_id = ?1"   \
    " WHERE f.state = ?2"

static cdb_status model_or_default(cdb_db *db, int64_t model_id, int64_t *id) {
    *id = model_id;
    if (model_id > 0) return CDB_OK;
    return cdb_sql_count(db, "SELECT coalesce((SELECT id FROM models WHERE is_default=1), 0)", 0,
                         id);
}

cdb_status cdb_db_count_stale_claims(cdb_db *db, int64_t model_id, int64_t *n_stale) {
    int64_t id = 0;
    cdb_status rc = model_or_default(db, model_id, &id);
    *n_stale = 0;
    if (rc != CDB_OK || id <= 0) return rc;
    if ((rc = cdb_sql_exec(db->cat, "BEGIN")) != CDB_OK) return rc;
    rc = count_stale(db, CLAIMS_OF_STATE, id, CDB_DB_OK, DB_UNREADABLE_ABSENT, n_stale);
    sqlite3_exec(db->cat, "COMMIT", NULL, NULL, NULL);
    return rc;
}

/* The vectors of model_id (0: the default model) the catalog claims; with pending files,
** less the claims of theirs that the shards do not hold. */
static cdb_status count_vectors(cdb_db *db, int64_t model_id, int64_t n_pending, int64_t *n) {
    int64_t id = 0, stale = 0;
    cdb_status rc = model_or_default(db, model_id, &id);
    *n = 0;
    if (rc != CDB_OK || id <= 0) return rc;
    rc = cdb_sql_count(db, "SELECT count(*) FROM vectors WHERE model_id=?1", id, n);
    /* an ok file's claims are trusted (the write order keeps them true); a pending
    ** file's may be an interrupted older clipdb's: checked */
    if (rc == CDB_OK && n_pending)
        rc = count_stale(db, CLAIMS_OF_STATE, id, CDB_DB_PENDING, DB_UNREADABLE_PRESENT, &stale);
    *n -= stale;
    return rc;
}

cdb_status cdb_db_count_vectors(cdb_db *db, int64_t model_id, int64_t *n) {
    int64_t n_pending = 0;
    cdb_status rc = cdb_sql_exec(db->cat, "BEGIN"); /* one read: the two counts agree */
    if (rc != CDB_OK) return rc;
    rc = cdb_sql_count(db, "SELECT count(*) FROM files WHERE state=1", 0, &n_pending);
    if (rc == CDB_OK) rc = count_vectors(db, model_id, n_pending, n);
    sqlite3_exec(db->cat, "COMMIT", NULL, NULL, NULL);
    return rc;
}

static int count_one(int64_t id, void *ud) {
    (void)id;
    ++*(int64_t *)ud;
    return 0;
}

/* The ok files without a vector of model_id (0: the default model): the files and the
** model's claims merged in id order (the claims' primary key is (file_id, model_id)). */
static cdb_status count_missing(cdb_db *db, int64_t model_id, int64_t *n) {
    sqlite3_stmt *have = NULL;
    int64_t id = 0;
    cdb_status rc = model_or_default(db, model_id, &id);
    *n = 0;
    /* +model_id: the primary key's order, not vectors_seq's and a sort */
    if (rc == CDB_OK)
        rc = cdb_sql_prepare(db->cat, "SELECT file_id, NULL, 1 FROM vectors WHERE +model_id = ?1"
                                      " ORDER BY file_id", &have);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(have, 1, id);
    rc = cdb_sql_ok_files_lacking(db, 0, have, 0, count_one, n);
    sqlite3_finalize(have);
    return rc;
}

cdb_status cdb_db_count_missing(cdb_db *db, int64_t model_id, int64_t *n) {
    cdb_status rc = cdb_sql_exec(db->cat, "BEGIN"); /* one read: the two scans agree */
    if (rc != CDB_OK) return rc;
    rc = count_missing(db, model_id, n);
    sqlite3_exec(db->cat, "COMMIT", NULL, NULL, NULL);
    return rc;
}

cdb_status cdb_db_get_counts(cdb_db *db, int64_t model_id, cdb_db_counts *out) {
    sqlite3_stmt *st = NULL;
    memset(out, 0, sizeof *out);
    /* One read transaction so the numbers agree with each other. */
    cdb_status rc = cdb_sql_exec(db->cat, "BEGIN");
    if (rc != CDB_OK) return rc;
    /* files_notok indexes every state but ok: ok = all - the others. */
    if ((rc = cdb_sql_prepare(db->cat,
                         "SELECT state, count(*) FROM files WHERE state<>2 GROUP BY state", &st)) ==
        CDB_OK) {
        int s;
        while ((s = sqlite3_step(st)) == SQLITE_ROW) {
            int k = sqlite3_column_int(st, 0);
            if (k >= 1 && k <= 4) out->files[k] = sqlite3_column_int64(st, 1);
        }
        if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "count files");
        sqlite3_finalize(st);
    }
    int64_t n_all = 0;
    if (rc == CDB_OK) rc = cdb_sql_count(db, "SELECT count(*) FROM files", 0, &n_all);
    if (rc == CDB_OK)
        out->files[CDB_DB_OK] =
            n_all - out->files[CDB_DB_PENDING] - out->files[CDB_DB_ERROR] - out->files[CDB_DB_DELETED];
    if (rc == CDB_OK) rc = cdb_sql_count(db, "SELECT count(*) FROM roots", 0, &out->n_roots);
    if (rc == CDB_OK) rc = cdb_sql_count(db, "SELECT count(*) FROM models", 0, &out->n_models);
    if (rc == CDB_OK) rc = cdb_sql_count(db, "SELECT count(*) FROM shards", 0, &out->n_shards);
    if (rc == CDB_OK) rc = count_vectors(db, model_id, out->files[CDB_DB_PENDING], &out->n_vectors);
    if (rc == CDB_OK) rc = cdb_sql_meta_get_int(db, "generation", &out->generation);
    if (rc == CDB_OK)
        rc = cdb_sql_count(db, "SELECT count(*) FROM files WHERE state=1 AND error IS NOT NULL", 0,
                          &out->n_retry);
    if (rc == CDB_OK) rc = count_missing(db, model_id, &out->n_missing);
    if (rc == CDB_OK)
        rc = cdb_sql_count(db, "SELECT count(*) FROM walk_problems", 0, &out->n_walk_problems);
    sqlite3_exec(db->cat, "COMMIT", NULL, NULL, NULL);
    return rc;
}

/* ---- runs ------------------------------------------------------------------------------ */

cdb_status cdb_db_run_begin(cdb_db *db, const char *kind, int64_t *run_id) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_need_writer(db, "record run");
    if (rc == CDB_OK)
        rc = cdb_sql_prepare(db->cat, "INSERT INTO runs(kind, started_ns) VALUES(?1, ?2)", &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_text(st, 1, kind ? kind : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, cdb_sql_wall_ns());
    if ((rc = cdb_sql_step_done(db->cat, st, "record run")) == CDB_OK)
        *run_id = sqlite3_last_insert_rowid(db->cat);
    return rc;
}

cdb_status cdb_db_run_finish(cdb_db *db, int64_t run_id, const char *status,
                             const char *summary_json) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_need_writer(db, "finish run");
    if (rc == CDB_OK)
        rc = cdb_sql_prepare(db->cat,
                        "UPDATE runs SET status=?2, summary=?3, finished_ns=?4 WHERE id=?1", &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_text(st, 2, status ? status : "", -1, SQLITE_STATIC);
    if (summary_json) sqlite3_bind_text(st, 3, summary_json, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, cdb_sql_wall_ns());
    rc = cdb_sql_step_done(db->cat, st, "finish run");
    if (rc == CDB_OK && sqlite3_changes(db->cat) == 0)
        rc = cdb_seterr(CDB_NOTFOUND, "run %lld is not recorded", (long long)run_id);
    /* A finished run is durable whatever the sync mode (power-safe). */
    if (rc == CDB_OK) rc = cdb_db_flush(db);
    return rc;
}

cdb_status cdb_db_runs_foreach(cdb_db *db, int limit, cdb_db_run_fn fn, void *ud) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_prepare(db->cat,
                               "SELECT id, kind, status, summary, started_ns, finished_ns FROM runs"
                               " ORDER BY id DESC LIMIT ?1",
                               &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int(st, 1, limit > 0 ? limit : -1);
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        cdb_db_run r;
        r.id = sqlite3_column_int64(st, 0);
        r.kind = (const char *)sqlite3_column_text(st, 1);
        r.status = (const char *)sqlite3_column_text(st, 2);
        r.summary_json = (const char *)sqlite3_column_text(st, 3);
        r.started_ns = sqlite3_column_int64(st, 4);
        r.finished_ns = sqlite3_column_int64(st, 5);
        if (fn(&r, ud)) {
            s = SQLITE_DONE;
            break;
        }
    }
    if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "list runs");
    sqlite3_finalize(st);
    return rc;
}
