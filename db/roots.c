/*
** roots.c: the roots of the library model (db.h, DESIGN.md): a root is a folder or
** a single file, recorded by its normalized path, with its walk settings and the
** outcome of its last scan. Here: recording and reading roots, folding a root into
** the folder root that contains it (adopt), forgetting a root with everything
** under it, compacting the files afterwards, and the walk problems kept per root.
** Operations that remove vectors go through batches, so the write order of
** batch.c keeps them crash-safe; the rest is one catalog transaction each.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "db/db_int.h"

static cdb_status exec_id(cdb_db *db, const char *sql, int64_t id, const char *what);

#define ROOT_COLS \
    "id, path, kind, follow_symlinks, dev, scanned_ns, status, no_exif, fsid, fstype, ino, btime_ns"

/* Fills r from a ROOT_COLS row; path/status borrowed from the statement. */
static void root_from_row(sqlite3_stmt *st, cdb_db_root *r) {
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    r->path = (const char *)sqlite3_column_text(st, 1);
    r->kind = sqlite3_column_int(st, 2) == CDB_DB_ROOT_FILE ? CDB_DB_ROOT_FILE : CDB_DB_ROOT_FOLDER;
    r->follow_symlinks = sqlite3_column_int(st, 3) != 0;
    r->dev = (uint64_t)sqlite3_column_int64(st, 4);
    r->scanned_ns = sqlite3_column_int64(st, 5);
    r->status = (const char *)sqlite3_column_text(st, 6);
    r->no_exif = sqlite3_column_int(st, 7) != 0;
    r->ident.fsid = (uint64_t)sqlite3_column_int64(st, 8);
    r->ident.fstype = (uint64_t)sqlite3_column_int64(st, 9);
    r->ident.ino = (uint64_t)sqlite3_column_int64(st, 10);
    r->ident.btime_ns = sqlite3_column_int64(st, 11);
}

void cdb_db_root_clear(cdb_db_root *r) {
    if (!r) return;
    cdb_free((void *)r->path);
    cdb_free((void *)r->status);
    r->path = r->status = NULL;
}

cdb_status cdb_db_root_info(cdb_db *db, int64_t root_id, cdb_db_root *out) {
    sqlite3_stmt *st = NULL;
    memset(out, 0, sizeof *out);
    cdb_status rc = cdb_sql_prepare(db->cat, "SELECT " ROOT_COLS " FROM roots WHERE id=?1", &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, root_id);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW) {
        cdb_db_root r;
        root_from_row(st, &r);
        *out = r;
        out->path = cdb_sql_column_strdup(st, 1);
        out->status = r.status ? cdb_strdup(r.status) : NULL;
        if (!out->path || (r.status && !out->status)) {
            cdb_db_root_clear(out);
            rc = cdb_seterr(CDB_NOMEM, "out of memory");
        }
    } else if (s == SQLITE_DONE) {
        rc = cdb_seterr(CDB_NOTFOUND, "root %lld is not recorded", (long long)root_id);
    } else {
        rc = cdb_sql_err(db->cat, s, "get root");
    }
    sqlite3_finalize(st);
    return rc;
}

cdb_status cdb_db_root_get(cdb_db *db, int64_t root_id, char **path) {
    cdb_db_root r;
    cdb_status rc = cdb_db_root_info(db, root_id, &r);
    *path = NULL;
    if (rc != CDB_OK) return rc;
    *path = (char *)r.path;
    cdb_free((void *)r.status);
    return CDB_OK;
}

cdb_status cdb_db_root_find(cdb_db *db, const char *path, int64_t *root_id) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_prepare(db->cat, "SELECT id FROM roots WHERE path=?1", &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_blob(st, 1, path, (int)strlen(path), SQLITE_STATIC);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW)
        *root_id = sqlite3_column_int64(st, 0);
    else if (s == SQLITE_DONE)
        rc = cdb_seterr(CDB_NOTFOUND, "root %s is not recorded", path);
    else
        rc = cdb_sql_err(db->cat, s, "find root");
    sqlite3_finalize(st);
    return rc;
}

cdb_status cdb_db_root_create(cdb_db *db, const char *path, cdb_db_root_kind kind,
                              int follow_symlinks, int64_t *root_id) {
    sqlite3_stmt *st = NULL;
    cdb_status rc;
    if ((rc = cdb_sql_need_writer(db, "add root")) != CDB_OK) return rc;
    if (!path || !*path) return cdb_seterr(CDB_INVALID, "add root: empty path");
    rc = cdb_db_root_find(db, path, root_id);
    if (rc == CDB_OK) {
        cdb_db_root r;
        if ((rc = cdb_db_root_info(db, *root_id, &r)) != CDB_OK) return rc;
        int other = r.kind != kind;
        cdb_db_root_clear(&r);
        if (other)
            return cdb_seterr(CDB_INVALID, "%s is recorded as a %s, not a %s", path,
                              kind == CDB_DB_ROOT_FILE ? "folder" : "file",
                              kind == CDB_DB_ROOT_FILE ? "file" : "folder");
        return CDB_OK;
    }
    if (rc != CDB_NOTFOUND) return rc;
    cdb_clearerr();
    if ((rc = cdb_sql_prepare(db->cat,
                         "INSERT INTO roots(path, created_ns, kind, follow_symlinks)"
                         " VALUES(?1, ?2, ?3, ?4)",
                         &st)) != CDB_OK)
        return rc;
    sqlite3_bind_blob(st, 1, path, (int)strlen(path), SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, cdb_sql_wall_ns());
    sqlite3_bind_int(st, 3, (int)kind);
    sqlite3_bind_int(st, 4, follow_symlinks != 0);
    if ((rc = cdb_sql_step_done(db->cat, st, "add root")) == CDB_OK)
        *root_id = sqlite3_last_insert_rowid(db->cat);
    return rc;
}

cdb_status cdb_db_root_add(cdb_db *db, const char *path, int64_t *root_id) {
    return cdb_db_root_create(db, path, CDB_DB_ROOT_FOLDER, 0, root_id);
}

cdb_status cdb_db_roots_foreach(cdb_db *db, cdb_db_root_fn fn, void *ud) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_prepare(db->cat, "SELECT " ROOT_COLS " FROM roots ORDER BY id", &st);
    if (rc != CDB_OK) return rc;
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        cdb_db_root r;
        root_from_row(st, &r);
        if (!r.path) { /* a damaged catalog: never hand the callback a NULL path */
            rc = cdb_seterr(CDB_CORRUPT, "catalog: root %lld has no path", (long long)r.id);
            s = SQLITE_DONE;
            break;
        }
        if (fn(&r, ud)) {
            s = SQLITE_DONE;
            break;
        }
    }
    if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "list roots");
    sqlite3_finalize(st);
    return rc;
}

/* One UPDATE of a root row; CDB_NOTFOUND when no row changed. */
static cdb_status root_update(cdb_db *db, sqlite3_stmt *st, const char *what) {
    cdb_status rc = cdb_sql_step_done(db->cat, st, what);
    if (rc == CDB_OK && sqlite3_changes(db->cat) == 0)
        rc = cdb_seterr(CDB_NOTFOUND, "%s: no such root", what);
    return rc;
}

cdb_status cdb_db_root_set_options(cdb_db *db, int64_t root_id, int follow_symlinks, int no_exif) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_need_writer(db, "set root options");
    if (rc == CDB_OK)
        rc = cdb_sql_prepare(db->cat,
                        "UPDATE roots SET follow_symlinks=CASE WHEN ?2 < 0 THEN follow_symlinks"
                        " ELSE ?2 END, no_exif=CASE WHEN ?3 < 0 THEN no_exif ELSE ?3 END"
                        " WHERE id=?1",
                        &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, root_id);
    sqlite3_bind_int(st, 2, follow_symlinks < 0 ? -1 : follow_symlinks != 0);
    sqlite3_bind_int(st, 3, no_exif < 0 ? -1 : no_exif != 0);
    return root_update(db, st, "set root options");
}

cdb_status cdb_db_root_set_scan(cdb_db *db, int64_t root_id, uint64_t dev,
                                const cdb_db_root_ident *ident, const char *status) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_need_writer(db, "record scan");
    if (rc == CDB_OK)
        rc = cdb_sql_prepare(db->cat,
                        "UPDATE roots SET dev=CASE WHEN ?2 = 0 THEN dev ELSE ?2 END,"
                        " scanned_ns=?3, status=?4,"
                        " fsid=CASE WHEN ?5 THEN ?6 ELSE fsid END,"
                        " fstype=CASE WHEN ?5 THEN ?7 ELSE fstype END,"
                        " ino=CASE WHEN ?5 THEN ?8 ELSE ino END,"
                        " btime_ns=CASE WHEN ?5 THEN ?9 ELSE btime_ns END WHERE id=?1",
                        &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, root_id);
    sqlite3_bind_int64(st, 2, (int64_t)dev);
    sqlite3_bind_int64(st, 3, cdb_sql_wall_ns());
    sqlite3_bind_text(st, 4, status ? status : "ok", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 5, ident != NULL);
    if (ident) {
        sqlite3_bind_int64(st, 6, (int64_t)ident->fsid);
        sqlite3_bind_int64(st, 7, (int64_t)ident->fstype);
        sqlite3_bind_int64(st, 8, (int64_t)ident->ino);
        sqlite3_bind_int64(st, 9, ident->btime_ns);
    }
    return root_update(db, st, "record scan");
}

cdb_status cdb_db_root_set_path(cdb_db *db, int64_t root_id, const char *new_path) {
    sqlite3_stmt *st = NULL;
    int64_t other = 0;
    cdb_status rc = cdb_sql_need_writer(db, "move root");
    if (rc != CDB_OK) return rc;
    if (!new_path || !*new_path) return cdb_seterr(CDB_INVALID, "move root: empty path");
    rc = cdb_db_root_find(db, new_path, &other);
    if (rc == CDB_OK && other != root_id)
        return cdb_seterr(CDB_INVALID, "%s is already recorded (root %lld)", new_path,
                          (long long)other);
    if (rc == CDB_OK) return CDB_OK; /* already there */
    if (rc != CDB_NOTFOUND) return rc;
    cdb_clearerr();
    /* what the last scan said (missing, its problems) was about the old place */
    if ((rc = cdb_sql_begin(db->cat)) != CDB_OK) return rc;
    rc = cdb_sql_prepare(db->cat,
                         "UPDATE roots SET path=?2, dev=NULL, status=NULL, fsid=NULL,"
                         " fstype=NULL, ino=NULL, btime_ns=NULL WHERE id=?1", &st);
    if (rc == CDB_OK) {
        sqlite3_bind_int64(st, 1, root_id);
        sqlite3_bind_blob(st, 2, new_path, (int)strlen(new_path), SQLITE_STATIC);
        rc = root_update(db, st, "move root");
    }
    if (rc == CDB_OK)
        rc = exec_id(db, "DELETE FROM walk_problems WHERE root_id=?1", root_id, "move root");
    return cdb_sql_end(db->cat, rc);
}

cdb_status cdb_db_relpaths_under(cdb_db *db, int64_t root_id, const char *prefix,
                                 unsigned state_mask, cdb_db_relpath_fn fn, void *ud) {
    sqlite3_stmt *st = NULL;
    size_t np = strlen(prefix);
    char *lo = NULL;
    int s;
    /* prefix + "/" <= relpath < prefix + "0" ('0' follows '/'): exactly the rows below */
    cdb_status rc = cdb_sql_prepare(
        db->cat,
        np ? "SELECT relpath FROM files WHERE root_id = ?1 AND relpath >= ?3 AND relpath < ?4"
             " AND ((?2 >> state) & 1) ORDER BY relpath"
           : "SELECT relpath FROM files WHERE root_id = ?1 AND ((?2 >> state) & 1)"
             " ORDER BY relpath",
        &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, root_id);
    sqlite3_bind_int64(st, 2, (int64_t)state_mask);
    if (np) {
        if (!(lo = malloc(np + 1))) {
            sqlite3_finalize(st);
            return cdb_seterr(CDB_NOMEM, "out of memory");
        }
        memcpy(lo, prefix, np);
        lo[np] = '/';
        sqlite3_bind_blob(st, 3, lo, (int)np + 1, SQLITE_TRANSIENT);
        lo[np] = '0';
        sqlite3_bind_blob(st, 4, lo, (int)np + 1, SQLITE_TRANSIENT);
    }
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        const char *rel = (const char *)sqlite3_column_text(st, 0);
        if (rel && fn(rel, (size_t)sqlite3_column_bytes(st, 0), ud)) {
            s = SQLITE_DONE;
            break;
        }
    }
    if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "list the files of a folder");
    sqlite3_finalize(st);
    free(lo);
    return rc;
}

cdb_status cdb_db_root_count_live(cdb_db *db, int64_t root_id, int64_t *n) {
    return cdb_sql_count(db, "SELECT count(*) FROM files WHERE root_id=?1 AND state<>4", root_id, n);
}

cdb_status cdb_db_root_get_counts(cdb_db *db, int64_t root_id, int64_t model_id,
                                  cdb_db_root_counts *out) {
    sqlite3_stmt *st = NULL;
    memset(out, 0, sizeof *out);
    cdb_status rc = cdb_sql_exec(db->cat, "BEGIN");
    if (rc != CDB_OK) return rc;
    rc = cdb_sql_prepare(db->cat,
                    "SELECT state, count(*), count(error) FROM files WHERE root_id=?1 GROUP BY state",
                    &st);
    if (rc == CDB_OK) {
        int s;
        sqlite3_bind_int64(st, 1, root_id);
        while ((s = sqlite3_step(st)) == SQLITE_ROW) {
            int k = sqlite3_column_int(st, 0);
            if (k >= 1 && k <= 4) out->files[k] = sqlite3_column_int64(st, 1);
            if (k == CDB_DB_PENDING) out->n_retry = sqlite3_column_int64(st, 2);
        }
        if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "count files");
        sqlite3_finalize(st);
    }
    if (rc == CDB_OK && (rc = cdb_sql_prepare(db->cat,
                                         "SELECT count(*) FROM vectors v JOIN files f ON f.id ="
                                         " v.file_id WHERE f.root_id=?1 AND v.model_id = (CASE"
                                         " WHEN ?2 > 0 THEN ?2 ELSE (SELECT id FROM models"
                                         " WHERE is_default=1) END)",
                                         &st)) == CDB_OK) {
        sqlite3_bind_int64(st, 1, root_id);
        sqlite3_bind_int64(st, 2, model_id);
        if (sqlite3_step(st) == SQLITE_ROW) out->n_vectors = sqlite3_column_int64(st, 0);
        else rc = cdb_sql_err(db->cat, sqlite3_errcode(db->cat), "count vectors");
        sqlite3_finalize(st);
    }
    if (rc == CDB_OK)
        rc = cdb_sql_count(db, "SELECT count(*) FROM walk_problems WHERE root_id=?1", root_id,
                          &out->n_walk_problems);
    sqlite3_exec(db->cat, "COMMIT", NULL, NULL, NULL);
    return rc;
}

/* ---- adopt ----------------------------------------------------------------------- */

/* The relpath a child root's row gets inside the parent: prefix, then "/" + relpath
** unless relpath is empty (a file root's file). Heap (cdb_free). */
static char *adopted_relpath(const char *prefix, const void *rel, int rel_len) {
    size_t pl = strlen(prefix);
    char *s = cdb_malloc(pl + (size_t)rel_len + 2);
    if (!s) return NULL;
    memcpy(s, prefix, pl);
    if (rel_len > 0) {
        s[pl] = '/';
        memcpy(s + pl + 1, rel, (size_t)rel_len);
    }
    s[pl + (rel_len > 0 ? (size_t)rel_len + 1 : 0)] = '\0';
    return s;
}

typedef struct adopt_row {
    int64_t id;
    int state;
    char *newrel;
    int64_t clash_id; /* the parent's row at newrel (0: none) */
    int clash_state;
} adopt_row;

static void adopt_rows_free(adopt_row *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) cdb_free(v[i].newrel);
    cdb_free(v);
}

static int is_live(int state) { return state == CDB_DB_OK || state == CDB_DB_PENDING; }

/* Every row of child with its relpath in parent and the parent's row already there. */
static cdb_status adopt_plan(cdb_db *db, int64_t parent_id, int64_t child_id, const char *prefix,
                             adopt_row **out, int64_t *n_out) {
    sqlite3_stmt *st = NULL, *clash = NULL;
    adopt_row *v = NULL;
    int64_t n = 0, cap = 0;
    cdb_status rc = cdb_sql_prepare(db->cat, "SELECT id, state, relpath FROM files WHERE root_id=?1"
                                        " ORDER BY id", &st);
    if (rc == CDB_OK)
        rc = cdb_sql_prepare(db->cat, "SELECT id, state FROM files WHERE root_id=?1 AND relpath=?2",
                        &clash);
    if (rc == CDB_OK) sqlite3_bind_int64(st, 1, child_id);
    int s = SQLITE_DONE;
    while (rc == CDB_OK && (s = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            int64_t nc = cap ? cap * 2 : 64;
            adopt_row *p = cdb_realloc(v, (size_t)nc * sizeof *p);
            if (!p) {
                rc = cdb_seterr(CDB_NOMEM, "out of memory");
                break;
            }
            v = p;
            cap = nc;
        }
        adopt_row *r = &v[n];
        memset(r, 0, sizeof *r);
        r->id = sqlite3_column_int64(st, 0);
        r->state = sqlite3_column_int(st, 1);
        r->newrel = adopted_relpath(prefix, sqlite3_column_blob(st, 2), sqlite3_column_bytes(st, 2));
        if (!r->newrel) {
            rc = cdb_seterr(CDB_NOMEM, "out of memory");
            break;
        }
        n++;
        sqlite3_reset(clash);
        sqlite3_bind_int64(clash, 1, parent_id);
        sqlite3_bind_blob(clash, 2, r->newrel, (int)strlen(r->newrel), SQLITE_STATIC);
        int c = sqlite3_step(clash);
        if (c == SQLITE_ROW) {
            r->clash_id = sqlite3_column_int64(clash, 0);
            r->clash_state = sqlite3_column_int(clash, 1);
        } else if (c != SQLITE_DONE) {
            rc = cdb_sql_err(db->cat, c, "adopt root");
        }
    }
    if (rc == CDB_OK && s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "adopt root");
    sqlite3_finalize(st);
    sqlite3_finalize(clash);
    if (rc != CDB_OK) {
        adopt_rows_free(v, n);
        return rc;
    }
    *out = v;
    *n_out = n;
    return CDB_OK;
}

/* Step A: where both rows of a clash have vectors, the child's is deleted through a
** batch (the write order takes its vectors out of its shard). */
static cdb_status adopt_drop_live_clashes(cdb_db *db, int64_t model_id, adopt_row *v, int64_t n) {
    cdb_db_batch *b = NULL;
    cdb_status rc = CDB_OK;
    for (int64_t i = 0; i < n && rc == CDB_OK; i++) {
        if (!v[i].clash_id || !is_live(v[i].state) || !is_live(v[i].clash_state)) continue;
        if (!b && (rc = cdb_db_batch_new(db, model_id, &b)) != CDB_OK) break;
        rc = cdb_db_batch_delete(b, v[i].id);
        if (rc == CDB_OK) v[i].state = CDB_DB_DELETED;
        if (rc == CDB_OK && cdb_db_batch_count(b) >= 256) rc = cdb_db_batch_commit(b, NULL);
    }
    if (rc == CDB_OK && b) rc = cdb_db_batch_commit(b, NULL);
    cdb_db_batch_free(b);
    return rc;
}

static cdb_status exec_id(cdb_db *db, const char *sql, int64_t id, const char *what) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_prepare(db->cat, sql, &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, id);
    return cdb_sql_step_done(db->cat, st, what);
}

/* Step B, one transaction: of each clash the row without vectors goes (the child's
** when it has none, else the parent's, which then has none: error or deleted rows
** never have vectors), the child's rows move under the parent, the child goes. */
static cdb_status adopt_apply(cdb_db *db, int64_t parent_id, int64_t child_id, adopt_row *v,
                              int64_t n, const char *prefix) {
    sqlite3_stmt *up = NULL;
    cdb_status rc = cdb_sql_begin(db->cat);
    if (rc != CDB_OK) return rc;
    rc = cdb_sql_prepare(db->cat, "UPDATE files SET root_id=?2, relpath=?3 WHERE id=?1", &up);
    for (int64_t i = 0; i < n && rc == CDB_OK; i++) {
        if (v[i].clash_id) {
            int child_wins = is_live(v[i].state) && !is_live(v[i].clash_state);
            rc = exec_id(db, "DELETE FROM files WHERE id=?1", child_wins ? v[i].clash_id : v[i].id,
                         "adopt root");
            if (!child_wins || rc != CDB_OK) continue;
        }
        sqlite3_reset(up);
        sqlite3_bind_int64(up, 1, v[i].id);
        sqlite3_bind_int64(up, 2, parent_id);
        sqlite3_bind_blob(up, 3, v[i].newrel, (int)strlen(v[i].newrel), SQLITE_STATIC);
        int s = sqlite3_step(up);
        if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "adopt root");
    }
    sqlite3_finalize(up);
    up = NULL;
    if (rc == CDB_OK) /* the child's exclusions apply below its folder in the parent */
        rc = cdb_sql_prepare(db->cat,
                             "UPDATE OR IGNORE root_excludes SET root_id=?2, base=?3 ||"
                             " CASE WHEN base = '' THEN '' ELSE '/' || base END"
                             " WHERE root_id=?1", &up);
    if (rc == CDB_OK) {
        sqlite3_bind_int64(up, 1, child_id);
        sqlite3_bind_int64(up, 2, parent_id);
        sqlite3_bind_text(up, 3, prefix, -1, SQLITE_STATIC);
        rc = cdb_sql_step_done(db->cat, up, "adopt root");
    }
    if (rc == CDB_OK) /* those the parent had already */
        rc = exec_id(db, "DELETE FROM root_excludes WHERE root_id=?1", child_id, "adopt root");
    if (rc == CDB_OK)
        rc = exec_id(db, "DELETE FROM walk_problems WHERE root_id=?1", child_id, "adopt root");
    if (rc == CDB_OK) /* the parent's next scan meets them again */
        rc = exec_id(db, "DELETE FROM ignore_files WHERE root_id=?1", child_id, "adopt root");
    if (rc == CDB_OK) rc = exec_id(db, "DELETE FROM roots WHERE id=?1", child_id, "adopt root");
    return cdb_sql_end(db->cat, rc);
}

cdb_status cdb_db_root_adopt(cdb_db *db, int64_t model_id, int64_t parent_id, int64_t child_id,
                             int64_t *n_files) {
    cdb_db_root parent, child;
    adopt_row *v = NULL;
    int64_t n = 0;
    cdb_status rc = cdb_sql_need_writer(db, "adopt root");
    if (n_files) *n_files = 0;
    if (rc != CDB_OK) return rc;
    if ((rc = cdb_db_root_info(db, parent_id, &parent)) != CDB_OK) return rc;
    if ((rc = cdb_db_root_info(db, child_id, &child)) != CDB_OK) {
        cdb_db_root_clear(&parent);
        return rc;
    }
    size_t pl = strlen(parent.path);
    if (parent.kind != CDB_DB_ROOT_FOLDER || parent_id == child_id ||
        strncmp(child.path, parent.path, pl) != 0 || child.path[pl] != '/' || !child.path[pl + 1]) {
        rc = cdb_seterr(CDB_INVALID, "adopt root: %s is not inside the folder %s", child.path,
                        parent.path);
        goto done;
    }
    if ((rc = adopt_plan(db, parent_id, child_id, child.path + pl + 1, &v, &n)) != CDB_OK) goto done;
    if ((rc = adopt_drop_live_clashes(db, model_id, v, n)) != CDB_OK) goto done;
    if ((rc = adopt_apply(db, parent_id, child_id, v, n, child.path + pl + 1)) != CDB_OK)
        goto done;
    if (n_files) *n_files = n;
done:
    adopt_rows_free(v, n);
    cdb_db_root_clear(&parent);
    cdb_db_root_clear(&child);
    return rc;
}

/* ---- forget ---------------------------------------------------------------------- */

typedef struct id_vec {
    int64_t *v;
    int64_t n, cap;
    int oom;
} id_vec;

static int collect_id(const cdb_db_file *f, void *ud) {
    id_vec *l = ud;
    if (l->n == l->cap) {
        int64_t nc = l->cap ? l->cap * 2 : 256;
        int64_t *p = cdb_realloc(l->v, (size_t)nc * sizeof *p);
        if (!p) return l->oom = 1;
        l->v = p;
        l->cap = nc;
    }
    l->v[l->n++] = f->id;
    return 0;
}

/* Marks the files ids[0..n) deleted in batches: the write order removes their vectors
** and logs the removals for the index. */
static cdb_status delete_files(cdb_db *db, int64_t model_id, const id_vec *live) {
    cdb_db_batch *b = NULL;
    cdb_status rc = CDB_OK;
    for (int64_t i = 0; i < live->n && rc == CDB_OK; i++) {
        if (!b && (rc = cdb_db_batch_new(db, model_id, &b)) != CDB_OK) break;
        rc = cdb_db_batch_delete(b, live->v[i]);
        if (rc == CDB_OK && cdb_db_batch_count(b) >= 256) rc = cdb_db_batch_commit(b, NULL);
    }
    if (rc == CDB_OK && b) rc = cdb_db_batch_commit(b, NULL);
    cdb_db_batch_free(b);
    return rc;
}

cdb_status cdb_db_root_forget(cdb_db *db, int64_t model_id, int64_t root_id, int64_t *n_files) {
    id_vec live = {0};
    cdb_status rc = cdb_sql_need_writer(db, "forget root");
    if (n_files) *n_files = 0;
    if (rc != CDB_OK) return rc;
    rc = cdb_db_files_foreach(db, root_id, CDB_DB_MASK_OK | CDB_DB_MASK_PENDING | CDB_DB_MASK_ERROR,
                              collect_id, &live);
    if (rc == CDB_OK && live.oom) rc = cdb_seterr(CDB_NOMEM, "out of memory");
    if (rc == CDB_OK) rc = delete_files(db, model_id, &live);
    cdb_free(live.v);
    if (rc != CDB_OK) return cdb_errctx(rc, "forget root");
    /* Everything under the root is deleted now (no vectors): the rows can go. */
    if ((rc = cdb_sql_begin(db->cat)) != CDB_OK) return rc;
    rc = exec_id(db, "DELETE FROM files WHERE root_id=?1", root_id, "forget root");
    if (rc == CDB_OK)
        rc = exec_id(db, "DELETE FROM walk_problems WHERE root_id=?1", root_id, "forget root");
    if (rc == CDB_OK)
        rc = exec_id(db, "DELETE FROM root_excludes WHERE root_id=?1", root_id, "forget root");
    if (rc == CDB_OK)
        rc = exec_id(db, "DELETE FROM ignore_files WHERE root_id=?1", root_id, "forget root");
    if (rc == CDB_OK) rc = exec_id(db, "DELETE FROM roots WHERE id=?1", root_id, "forget root");
    if (rc == CDB_OK) rc = cdb_sql_commit(db->cat);
    else cdb_sql_rollback(db->cat);
    if (rc == CDB_OK && n_files) *n_files = live.n;
    return rc;
}

/* Runs sql with ?1 the root, ?2..?3 the relpath range of the rows below the folder
** prefix ([prefix "/", prefix "0"): '0' follows '/') and ?4 the prefix itself (each
** bound when the statement has it). The ids of a SELECT's rows (column 0) go to ids,
** when given. */
static cdb_status exec_under(cdb_db *db, const char *sql, int64_t root_id, const char *prefix,
                             id_vec *ids, const char *what) {
    sqlite3_stmt *st = NULL;
    size_t np = strlen(prefix);
    char *lo = malloc(np + 1);
    int s;
    cdb_status rc = lo ? cdb_sql_prepare(db->cat, sql, &st) : cdb_seterr(CDB_NOMEM, "out of memory");
    if (rc != CDB_OK) {
        free(lo);
        return rc;
    }
    memcpy(lo, prefix, np);
    sqlite3_bind_int64(st, 1, root_id);
    lo[np] = '/';
    sqlite3_bind_blob(st, 2, lo, (int)np + 1, SQLITE_TRANSIENT);
    lo[np] = '0';
    sqlite3_bind_blob(st, 3, lo, (int)np + 1, SQLITE_TRANSIENT);
    sqlite3_bind_blob(st, 4, prefix, (int)np, SQLITE_STATIC);
    while ((s = sqlite3_step(st)) == SQLITE_ROW && ids) {
        cdb_db_file f = {0};
        f.id = sqlite3_column_int64(st, 0);
        if (collect_id(&f, ids)) {
            s = SQLITE_NOMEM;
            break;
        }
    }
    rc = s == SQLITE_DONE ? CDB_OK
         : s == SQLITE_NOMEM ? cdb_seterr(CDB_NOMEM, "%s: out of memory", what)
                             : cdb_sql_err(db->cat, s, what);
    sqlite3_finalize(st);
    free(lo);
    return rc;
}

cdb_status cdb_db_root_forget_under(cdb_db *db, int64_t model_id, int64_t root_id,
                                    const char *prefix, int64_t *n_files) {
    static const char what[] = "forget folder";
    id_vec live = {0};
    size_t np = prefix ? strlen(prefix) : 0;
    cdb_status rc = cdb_sql_need_writer(db, what);
    if (n_files) *n_files = 0;
    if (rc != CDB_OK) return rc;
    if (!np || prefix[0] == '/' || prefix[np - 1] == '/')
        return cdb_seterr(CDB_INVALID, "%s: '%s' is no folder inside a root", what,
                          prefix ? prefix : "(null)");
    rc = exec_under(db, "SELECT id FROM files WHERE root_id=?1 AND relpath>=?2 AND relpath<?3"
                    " AND state IN (1, 2, 3)" /* pending, ok, error */, root_id, prefix, &live, what);
    if (rc == CDB_OK) rc = delete_files(db, model_id, &live);
    cdb_free(live.v);
    if (rc != CDB_OK) return cdb_errctx(rc, what);
    /* Everything below the folder is deleted now (no vectors): the rows can go. */
    if ((rc = cdb_sql_begin(db->cat)) != CDB_OK) return rc;
    rc = exec_under(db, "DELETE FROM photo_meta WHERE file_id IN (SELECT id FROM files WHERE"
                    " root_id=?1 AND relpath>=?2 AND relpath<?3)",
                    root_id, prefix, NULL, what);
    if (rc == CDB_OK)
        rc = exec_under(db, "DELETE FROM files WHERE root_id=?1 AND relpath>=?2 AND relpath<?3",
                        root_id, prefix, NULL, what);
    if (rc == CDB_OK)
        rc = exec_under(db, "DELETE FROM walk_problems WHERE root_id=?1 AND (relpath=?4 OR"
                        " (relpath>=?2 AND relpath<?3))", root_id, prefix, NULL, what);
    if (rc == CDB_OK)
        rc = exec_under(db, "DELETE FROM ignore_files WHERE root_id=?1 AND (relpath=?4 OR"
                        " (relpath>=?2 AND relpath<?3))", root_id, prefix, NULL, what);
    if (rc == CDB_OK) rc = cdb_sql_commit(db->cat);
    else cdb_sql_rollback(db->cat);
    if (rc == CDB_OK && n_files) *n_files = live.n;
    return rc;
}

/* ---- compact --------------------------------------------------------------------- */

cdb_status cdb_db_compact(cdb_db *db, int64_t *bytes_freed) {
    sqlite3_stmt *st = NULL;
    int64_t freed = 0;
    char path[4200];
    cdb_status rc = cdb_sql_need_writer(db, "compact");
    if (bytes_freed) *bytes_freed = 0;
    if (rc != CDB_OK) return rc;
    if ((rc = cdb_sql_prepare(db->cat, "SELECT id FROM shards ORDER BY id", &st)) != CDB_OK) return rc;
    int s;
    while (rc == CDB_OK && (s = sqlite3_step(st)) == SQLITE_ROW) {
        int32_t id = sqlite3_column_int(st, 0);
        db_shard *sh = NULL;
        if ((rc = cdb_shard_get(db, id, &sh)) != CDB_OK) break;
        cdb_shard_path(db, id, path, sizeof path);
        rc = cdb_sql_vacuum(sh->conn, path, &freed);
        if (rc == CDB_OK) sh->unsynced = 1;
    }
    sqlite3_finalize(st);
    if (rc != CDB_OK) return rc;
    snprintf(path, sizeof path, "%s/catalog.db", db->dir);
    if ((rc = cdb_sql_vacuum(db->cat, path, &freed)) != CDB_OK) return rc;
    /* thumbs.db: a cache, so its space not given back is a warning, never a failure */
    if (cdb_thumbs_vacuum(db, &freed) != CDB_OK)
        CDB_LOG_WARN("the thumbnails' space was not given back: %s", cdb_errmsg());
    if (bytes_freed) *bytes_freed = freed > 0 ? freed : 0;
    return cdb_db_flush(db);
}

cdb_status cdb_db_catalog_checkpoint(cdb_db *db) {
    cdb_status rc = cdb_sql_need_writer(db, "checkpoint");
    return rc == CDB_OK ? cdb_sql_exec(db->cat, "PRAGMA wal_checkpoint(TRUNCATE)") : rc;
}

/* ---- walk problems --------------------------------------------------------------- */

cdb_status cdb_db_walk_problems_set(cdb_db *db, int64_t root_id, const char *under,
                                    const cdb_db_walk_problem *p, int n) {
    sqlite3_stmt *ins = NULL;
    cdb_status rc = cdb_sql_need_writer(db, "record walk problems");
    if (rc != CDB_OK) return rc;
    if ((rc = cdb_sql_begin(db->cat)) != CDB_OK) return rc;
    rc = cdb_sql_delete_under(db, "walk_problems", root_id, under, "record walk problems");
    if (rc == CDB_OK)
        rc = cdb_sql_prepare(db->cat,
                        "INSERT INTO walk_problems(root_id, relpath, reason, seen_ns)"
                        " VALUES(?1, ?2, ?3, ?4)",
                        &ins);
    for (int i = 0; i < n && rc == CDB_OK; i++) {
        sqlite3_reset(ins);
        sqlite3_bind_int64(ins, 1, root_id);
        sqlite3_bind_blob(ins, 2, p[i].relpath ? p[i].relpath : "",
                          (int)(p[i].relpath ? strlen(p[i].relpath) : 0), SQLITE_STATIC);
        sqlite3_bind_text(ins, 3, p[i].reason ? p[i].reason : "unreadable", -1, SQLITE_STATIC);
        sqlite3_bind_int64(ins, 4, p[i].seen_ns ? p[i].seen_ns : cdb_sql_wall_ns());
        rc = cdb_sql_step_row(db->cat, ins, "record walk problems");
    }
    sqlite3_finalize(ins);
    return cdb_sql_end(db->cat, rc);
}

cdb_status cdb_db_walk_problems_foreach(cdb_db *db, int64_t root_id, cdb_db_walk_problem_fn fn,
                                        void *ud) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_prepare(db->cat,
                               "SELECT root_id, relpath, reason, seen_ns FROM walk_problems"
                               " WHERE ?1 = 0 OR root_id=?1 ORDER BY root_id, relpath",
                               &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, root_id);
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        cdb_db_walk_problem p;
        p.root_id = sqlite3_column_int64(st, 0);
        p.relpath = (const char *)sqlite3_column_text(st, 1);
        p.reason = (const char *)sqlite3_column_text(st, 2);
        p.seen_ns = sqlite3_column_int64(st, 3);
        if (!p.relpath) p.relpath = "";
        if (!p.reason) p.reason = "";
        if (fn(&p, ud)) {
            s = SQLITE_DONE;
            break;
        }
    }
    if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "list walk problems");
    sqlite3_finalize(st);
    return rc;
}
