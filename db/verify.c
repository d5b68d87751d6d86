/*
** verify.c: consistency checks between the catalog and the shards, and repair.
** The quick check looks at the shard files only (exist, not truncated, ours);
** the full check reads every vector (size, finite, unit norm in fp32) and matches
** the shards against the catalog's vector directory both ways. Files that are
** pending are work for the next run, not problems (a crash leaves them so).
** Repair turns every problem into pending work for the next ingest.
*/
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/db_int.h"
#include "kernels/kernels.h"

#define MAX_LISTED 1000

cdb_status cdb_db_report_new(cdb_db_report **out) {
    *out = cdb_calloc(1, sizeof **out);
    return *out ? CDB_OK : cdb_seterr(CDB_NOMEM, "out of memory");
}

void cdb_db_report_free(cdb_db_report *r) {
    if (!r) return;
    cdb_free(r->problems);
    cdb_free(r);
}

void cdb_db_report_add(cdb_db_report *r, cdb_db_problem_kind kind, int32_t shard, int64_t model,
                       int64_t file, const char *fmt, ...) {
    r->n_problems++;
    if (r->n_listed >= MAX_LISTED) return;
    if (r->n_listed % 64 == 0) {
        cdb_db_problem *p = cdb_realloc(r->problems, (size_t)(r->n_listed + 64) * sizeof *p);
        if (!p) return; /* counted, not listed */
        r->problems = p;
    }
    cdb_db_problem *p = &r->problems[r->n_listed++];
    va_list ap;
    p->kind = kind;
    p->shard = shard;
    p->model_id = model;
    p->file_id = file;
    va_start(ap, fmt);
    vsnprintf(p->msg, sizeof p->msg, fmt, ap);
    va_end(ap);
}

/* Shard ids of problems of kind SHARD_*; bad[id] = 1. */
static int shard_is_bad(const cdb_db_report *r, int32_t id) {
    for (int i = 0; i < r->n_listed; i++)
        if ((r->problems[i].kind == CDB_DB_SHARD_MISSING ||
             r->problems[i].kind == CDB_DB_SHARD_DAMAGED) &&
            r->problems[i].shard == id)
            return 1;
    return 0;
}

static cdb_status check_shards_into(cdb_db *db, cdb_db_report *r) {
    sqlite3_stmt *st = NULL;
    char msg[512];
    cdb_status rc = cdb_sql_prepare(db->cat, "SELECT id FROM shards ORDER BY id", &st);
    if (rc != CDB_OK) return rc;
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        int32_t id = sqlite3_column_int(st, 0);
        int kind = cdb_shard_check_file(db, id, msg, sizeof msg);
        if (kind) {
            cdb_shard_close_one(db, id);
            cdb_db_report_add(r, (cdb_db_problem_kind)kind, id, 0, 0, "%s", msg);
            continue;
        }
        db_shard *sh = NULL;
        if (cdb_shard_get(db, id, &sh) != CDB_OK)
            cdb_db_report_add(r, CDB_DB_SHARD_DAMAGED, id, 0, 0, "%s", cdb_errmsg());
    }
    if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "list shards");
    sqlite3_finalize(st);
    if (rc != CDB_OK) return rc;
    /* Files pointing at a shard the catalog does not list. */
    if ((rc = cdb_sql_prepare(db->cat,
                         "SELECT DISTINCT shard FROM files WHERE shard IS NOT NULL AND shard NOT IN"
                         " (SELECT id FROM shards)",
                         &st)) != CDB_OK)
        return rc;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        int32_t id = sqlite3_column_int(st, 0);
        cdb_db_report_add(r, CDB_DB_SHARD_MISSING, id, 0, 0,
                   "files refer to shard %04d, which the catalog does not list", (int)id);
    }
    if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "check shard references");
    sqlite3_finalize(st);
    return rc;
}

cdb_status cdb_db_check_shards(cdb_db *db, cdb_db_report **out) {
    cdb_status rc = cdb_db_report_new(out);
    if (rc == CDB_OK && (rc = check_shards_into(db, *out)) != CDB_OK) {
        cdb_db_report_free(*out);
        *out = NULL;
    }
    return rc;
}

typedef struct model_dim {
    int64_t id;
    int dim;
} model_dim;

typedef struct model_list {
    model_dim m[CDB_DB_MAX_MODELS];
    int n;
    int64_t default_id;
} model_list;

static int collect_model(const cdb_db_model *m, void *ud) {
    model_list *l = ud;
    if (l->n < CDB_DB_MAX_MODELS) l->m[l->n++] = (model_dim){m->id, m->dim};
    if (m->is_default) l->default_id = m->id;
    return 0;
}

static int dim_of(const model_list *l, int64_t id) {
    for (int i = 0; i < l->n; i++)
        if (l->m[i].id == id) return l->m[i].dim;
    return 0;
}

/* Pass A: every vector in shard id, checked and matched to the directory. */
static cdb_status verify_shard(cdb_db *db, int32_t id, const model_list *ml, cdb_db_report *r) {
    db_shard *sh = NULL;
    sqlite3_stmt *rd = NULL, *look = NULL;
    cdb_status rc = cdb_shard_get(db, id, &sh);
    if (rc != CDB_OK) {
        cdb_db_report_add(r, CDB_DB_SHARD_DAMAGED, id, 0, 0, "%s", cdb_errmsg());
        return CDB_OK;
    }
    if ((rc = cdb_sql_prepare(sh->conn, "SELECT model_id, file_id, vec FROM vectors", &rd)) != CDB_OK)
        goto done;
    if ((rc = cdb_sql_prepare(
             db->cat,
             "SELECT f.shard, f.state, EXISTS(SELECT 1 FROM vectors v WHERE v.model_id=?1"
             " AND v.file_id=f.id) FROM files f WHERE f.id=?2",
             &look)) != CDB_OK)
        goto done;
    int s;
    while ((s = sqlite3_step(rd)) == SQLITE_ROW) {
        int64_t model = sqlite3_column_int64(rd, 0), file = sqlite3_column_int64(rd, 1);
        const void *blob = sqlite3_column_blob(rd, 2);
        int len = sqlite3_column_bytes(rd, 2), dim = dim_of(ml, model);
        r->n_vectors_checked++;
        if (!dim) {
            cdb_db_report_add(r, CDB_DB_VECTOR_ORPHAN, id, model, file, "vector of unknown model %lld",
                       (long long)model);
            continue;
        }
        if (len != dim * 2) {
            cdb_db_report_add(r, CDB_DB_VECTOR_BAD, id, model, file, "vector has %d bytes, want %d", len,
                       dim * 2);
        } else {
            /* Decode (alignment-safe), then finiteness and norm in fp32. */
            float acc[8] = {0}, chunk[256];
            int finite = 1;
            const uint8_t *p = blob;
            for (int i = 0; i < dim; i += 256) {
                int n = dim - i < 256 ? dim - i : 256;
                cdb_shard_decode_blob(p + (size_t)i * 2, n, chunk);
                for (int j = 0; j < n; j++) {
                    finite &= isfinite(chunk[j]) != 0;
                    acc[j & 7] += chunk[j] * chunk[j];
                }
            }
            float nrm = sqrtf(((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                              ((acc[4] + acc[5]) + (acc[6] + acc[7])));
            if (!finite || !(fabsf(nrm - 1.0f) <= 1e-3f))
                cdb_db_report_add(r, CDB_DB_VECTOR_BAD, id, model, file, "vector %s (norm %.6g)",
                           finite ? "is not unit length" : "has NaN/Inf", (double)nrm);
        }
        sqlite3_reset(look);
        sqlite3_bind_int64(look, 1, model);
        sqlite3_bind_int64(look, 2, file);
        int t = sqlite3_step(look);
        if (t == SQLITE_DONE) {
            cdb_db_report_add(r, CDB_DB_VECTOR_ORPHAN, id, model, file, "vector of unrecorded file %lld",
                       (long long)file);
        } else if (t == SQLITE_ROW) {
            int fshard = sqlite3_column_int(look, 0), state = sqlite3_column_int(look, 1);
            int in_dir = sqlite3_column_int(look, 2);
            if (fshard != id)
                cdb_db_report_add(r, CDB_DB_VECTOR_ORPHAN, id, model, file,
                           "vector of file %lld, which lives in shard %04d", (long long)file,
                           fshard);
            else if (!in_dir && state != CDB_DB_PENDING)
                cdb_db_report_add(r, CDB_DB_VECTOR_ORPHAN, id, model, file,
                           "vector of %s file %lld without a catalog entry",
                           cdb_db_file_state_str((cdb_db_file_state)state), (long long)file);
        } else {
            rc = cdb_sql_err(db->cat, t, "verify lookup");
            goto done;
        }
    }
    if (s != SQLITE_DONE) {
        /* A damaged shard file reads as SQLITE_CORRUPT part way through. */
        cdb_db_report_add(r, CDB_DB_SHARD_DAMAGED, id, 0, 0, "shard %04d unreadable: %s", (int)id,
                   sqlite3_errmsg(sh->conn));
    }
done:
    sqlite3_finalize(rd);
    sqlite3_finalize(look);
    return rc;
}

/* Pass B: every directory entry has its vector in its file's shard. */
static cdb_status verify_directory(cdb_db *db, cdb_db_report *r) {
    sqlite3_stmt *st = NULL;
    int64_t last_lost_file = 0;
    cdb_status rc = cdb_sql_prepare(db->cat,
                               "SELECT v.model_id, v.file_id, f.shard, f.state, f.relpath FROM vectors v"
                               " LEFT JOIN files f ON f.id = v.file_id ORDER BY f.shard, v.file_id",
                               &st);
    if (rc != CDB_OK) return rc;
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t model = sqlite3_column_int64(st, 0), file = sqlite3_column_int64(st, 1);
        int32_t shard = sqlite3_column_int(st, 2);
        int state = sqlite3_column_int(st, 3);
        if (state != CDB_DB_OK && state != CDB_DB_PENDING) {
            cdb_db_report_add(r, CDB_DB_VECTOR_ORPHAN, shard, model, file,
                       "catalog lists a vector for %s file %lld",
                       state ? cdb_db_file_state_str((cdb_db_file_state)state) : "unrecorded",
                       (long long)file);
            continue;
        }
        if (shard <= 0) {
            cdb_db_report_add(r, CDB_DB_VECTOR_MISSING, 0, model, file, "file %lld has no shard",
                       (long long)file);
            continue;
        }
        if (shard_is_bad(r, shard)) {
            /* The shard is reported as such; each vector it held is lost too, and
            ** listed, so the report says exactly what a repair re-encodes. The rows
            ** come by shard then file: a file's vectors are consecutive. */
            const char *rel = (const char *)sqlite3_column_text(st, 4);
            r->n_lost++;
            r->n_lost_files += file != last_lost_file;
            last_lost_file = file;
            cdb_db_report_add(r, CDB_DB_VECTOR_MISSING, shard, model, file,
                       "file %lld (%.100s): vector for model %lld lost with shard %04d",
                       (long long)file, rel ? rel : "?", (long long)model, (int)shard);
            continue;
        }
        db_shard *sh = NULL;
        if ((rc = cdb_shard_get(db, shard, &sh)) != CDB_OK) break;
        sqlite3_reset(sh->st_get);
        sqlite3_bind_int64(sh->st_get, 1, model);
        sqlite3_bind_int64(sh->st_get, 2, file);
        int t = sqlite3_step(sh->st_get);
        sqlite3_reset(sh->st_get);
        if (t == SQLITE_DONE && state == CDB_DB_OK)
            cdb_db_report_add(r, CDB_DB_VECTOR_MISSING, shard, model, file,
                       "file %lld: vector for model %lld missing from shard %04d", (long long)file,
                       (long long)model, (int)shard);
        else if (t != SQLITE_ROW && t != SQLITE_DONE)
            cdb_db_report_add(r, CDB_DB_SHARD_DAMAGED, shard, 0, 0, "shard %04d unreadable: %s",
                       (int)shard, sqlite3_errmsg(sh->conn));
    }
    if (rc == CDB_OK && s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "verify directory");
    sqlite3_finalize(st);
    return rc;
}

cdb_status cdb_db_verify(cdb_db *db, cdb_db_report **out) {
    cdb_db_report *r = NULL;
    sqlite3_stmt *st = NULL;
    model_list ml;
    int32_t *ids = NULL;
    int n_ids = 0;
    memset(&ml, 0, sizeof ml);
    *out = NULL;
    cdb_status rc = cdb_db_report_new(&r);
    if (rc == CDB_OK) rc = check_shards_into(db, r);
    if (rc == CDB_OK) rc = cdb_db_models_foreach(db, collect_model, &ml);
    if (rc == CDB_OK) rc = cdb_sql_prepare(db->cat, "SELECT id FROM shards ORDER BY id", &st);
    if (rc == CDB_OK) {
        int s;
        while ((s = sqlite3_step(st)) == SQLITE_ROW) {
            int32_t *n = cdb_realloc(ids, (size_t)(n_ids + 1) * sizeof *n);
            if (!n) {
                rc = cdb_seterr(CDB_NOMEM, "out of memory");
                break;
            }
            ids = n;
            ids[n_ids++] = sqlite3_column_int(st, 0);
        }
        if (rc == CDB_OK && s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "list shards");
        sqlite3_finalize(st);
        st = NULL;
    }
    for (int i = 0; i < n_ids && rc == CDB_OK; i++)
        if (!shard_is_bad(r, ids[i])) rc = verify_shard(db, ids[i], &ml, r);
    if (rc == CDB_OK) rc = verify_directory(db, r);
    if (rc == CDB_OK && ml.default_id > 0) {
        rc = cdb_sql_prepare(db->cat,
                        "SELECT id FROM files WHERE state=2 AND id NOT IN"
                        " (SELECT file_id FROM vectors WHERE model_id=?1) ORDER BY id",
                        &st);
        if (rc == CDB_OK) {
            sqlite3_bind_int64(st, 1, ml.default_id);
            int s;
            while ((s = sqlite3_step(st)) == SQLITE_ROW)
                cdb_db_report_add(r, CDB_DB_FILE_NO_VECTOR, 0, ml.default_id, sqlite3_column_int64(st, 0),
                           "ok file %lld has no vector for the default model",
                           (long long)sqlite3_column_int64(st, 0));
            if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "verify files");
            sqlite3_finalize(st);
        }
    }
    if (rc == CDB_OK) {
        cdb_db_counts c;
        if ((rc = cdb_db_get_counts(db, 0, &c)) == CDB_OK) {
            r->n_files_ok = c.files[CDB_DB_OK];
            r->n_files_pending = c.files[CDB_DB_PENDING];
        }
    }
    cdb_free(ids);
    if (rc != CDB_OK) {
        cdb_db_report_free(r);
        return rc;
    }
    *out = r;
    return CDB_OK;
}

/* ---- repair ----------------------------------------------------------------------------- */

/* Marks file pending (if it was ok) and drops its directory entries for model
** (all models when model == 0), logging removals. In the caller's catalog txn. */
static cdb_status requeue_file(cdb_db *db, int64_t file_id, int64_t model, int clear_shard,
                               int64_t *gen) {
    sqlite3_stmt *st = NULL;
    char sql[256];
    snprintf(
        sql, sizeof sql,
        "INSERT INTO removed(seq, model_id, file_id) SELECT ?3 + row_number() OVER (), model_id,"
        " file_id FROM vectors WHERE file_id=?1 AND (?2 = 0 OR model_id=?2)");
    cdb_status rc = cdb_sql_prepare(db->cat, sql, &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, file_id);
    sqlite3_bind_int64(st, 2, model);
    sqlite3_bind_int64(st, 3, *gen);
    int s = sqlite3_step(st);
    sqlite3_finalize(st);
    if (s != SQLITE_DONE) return cdb_sql_err(db->cat, s, "repair");
    *gen += sqlite3_changes(db->cat);
    if ((rc =
             cdb_sql_prepare(db->cat, "DELETE FROM vectors WHERE file_id=?1 AND (?2 = 0 OR model_id=?2)",
                        &st)) != CDB_OK)
        return rc;
    sqlite3_bind_int64(st, 1, file_id);
    sqlite3_bind_int64(st, 2, model);
    s = sqlite3_step(st);
    sqlite3_finalize(st);
    if (s != SQLITE_DONE) return cdb_sql_err(db->cat, s, "repair");
    snprintf(sql, sizeof sql,
             "UPDATE files SET state=CASE state WHEN 2 THEN 1 ELSE state END%s WHERE id=?1",
             clear_shard ? ", shard=NULL" : "");
    if ((rc = cdb_sql_prepare(db->cat, sql, &st)) != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, file_id);
    s = sqlite3_step(st);
    sqlite3_finalize(st);
    return s == SQLITE_DONE ? CDB_OK : cdb_sql_err(db->cat, s, "repair");
}

/* Moves a bad shard file (and its -wal/-shm) aside as NNNN.db.damaged-STAMP and
** creates an empty shard with the same id; all its files become pending with no
** shard. The copy aside only keeps the bytes while the catalog transaction may still
** roll back: cdb_db_repair removes it once the transaction committed, and
** cdb_db_drop_damaged removes one a killed repair left. */
static cdb_status repair_shard(cdb_db *db, int32_t id, int64_t *gen, int64_t *n_fixed) {
    char path[4096], aside[4200];
    sqlite3_stmt *st = NULL;
    static const char *const sfx[] = {"", "-wal", "-shm"};
    cdb_shard_close_one(db, id);
    cdb_shard_path(db, id, path, sizeof path);
    int64_t stamp = cdb_sql_wall_ns();
    for (int i = 0; i < 3; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        snprintf(aside, sizeof aside, "%s.damaged-%lld%s", path, (long long)stamp, sfx[i]);
        if (access(p, F_OK) == 0 && rename(p, aside) != 0)
            return cdb_seterr(CDB_IO, "repair: cannot move %s aside", p);
    }
    cdb_status rc = cdb_shard_create(db, id);
    if (rc == CDB_OK) rc = cdb_sql_prepare(db->cat, "SELECT id FROM files WHERE shard=?1", &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int(st, 1, id);
    int64_t *files = NULL;
    size_t n = 0;
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t *nf = cdb_realloc(files, (n + 1) * sizeof *nf);
        if (!nf) {
            rc = cdb_seterr(CDB_NOMEM, "out of memory");
            break;
        }
        files = nf;
        files[n++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    for (size_t i = 0; i < n && rc == CDB_OK; i++) rc = requeue_file(db, files[i], 0, 1, gen);
    *n_fixed += (int64_t)n;
    cdb_free(files);
    return rc;
}

cdb_status cdb_db_drop_damaged(cdb_db *db) {
    char dir[4096];
    DIR *d;
    struct dirent *e;
    cdb_status rc = cdb_sql_need_writer(db, "repair");
    if (rc != CDB_OK) return rc;
    snprintf(dir, sizeof dir, "%s/shards", db->dir);
    if (!(d = opendir(dir))) return CDB_OK; /* no shards yet: nothing to drop */
    while (rc == CDB_OK && (e = readdir(d))) {
        char p[4400];
        if (!strstr(e->d_name, ".db.damaged-")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0 && errno != ENOENT)
            rc = cdb_seterr(CDB_IO, "repair: cannot remove %s: %s", p, strerror(errno));
    }
    closedir(d);
    return rc;
}

cdb_status cdb_db_repair(cdb_db *db, const cdb_db_report *r, int64_t *n_fixed) {
    int64_t gen = 0;
    cdb_status rc = cdb_sql_need_writer(db, "repair");
    *n_fixed = 0;
    if (rc != CDB_OK) return rc;
    if ((rc = cdb_sql_begin(db->cat)) != CDB_OK) return rc;
    rc = cdb_sql_meta_get_int(db, "generation", &gen);
    for (int i = 0; i < r->n_listed && rc == CDB_OK; i++) {
        const cdb_db_problem *p = &r->problems[i];
        switch (p->kind) {
        case CDB_DB_SHARD_MISSING:
        case CDB_DB_SHARD_DAMAGED: rc = repair_shard(db, p->shard, &gen, n_fixed); break;
        case CDB_DB_VECTOR_MISSING:
        case CDB_DB_VECTOR_BAD:
        case CDB_DB_FILE_NO_VECTOR:
            /* the vectors of a bad shard: repair_shard requeues its files */
            if (p->kind == CDB_DB_VECTOR_MISSING && p->shard > 0 && shard_is_bad(r, p->shard))
                break;
            rc = requeue_file(db, p->file_id, p->model_id, 0, &gen);
            (*n_fixed)++;
            break;
        case CDB_DB_FILE_CHANGED:
        case CDB_DB_VECTOR_MISMATCH:
            /* the file is read and encoded again (its stale vector, if any, is
            ** replaced by the redo's upsert) */
            rc = requeue_file(db, p->file_id, p->kind == CDB_DB_FILE_CHANGED ? 0 : p->model_id, 0,
                              &gen);
            (*n_fixed)++;
            break;
        case CDB_DB_VECTOR_ORPHAN: {
            /* Catalog side only for entries of files that are no longer ok/pending. */
            sqlite3_stmt *st = NULL;
            if ((rc = cdb_sql_prepare(
                     db->cat,
                     "DELETE FROM vectors WHERE model_id=?1 AND file_id=?2 AND file_id NOT IN"
                     " (SELECT id FROM files WHERE state IN (1, 2))",
                     &st)) != CDB_OK)
                break;
            sqlite3_bind_int64(st, 1, p->model_id);
            sqlite3_bind_int64(st, 2, p->file_id);
            if (sqlite3_step(st) != SQLITE_DONE)
                rc = cdb_sql_err(db->cat, sqlite3_errcode(db->cat), "repair");
            sqlite3_finalize(st);
            break;
        }
        }
    }
    if (rc == CDB_OK) rc = cdb_sql_meta_set_int(db, "generation", gen);
    if (rc == CDB_OK)
        rc = cdb_sql_commit(db->cat);
    else
        cdb_sql_rollback(db->cat);
    if (rc != CDB_OK) return cdb_errctx(rc, "repair");
    /* committed: the damaged copies hold nothing the repair will not re-encode */
    if ((rc = cdb_db_drop_damaged(db)) != CDB_OK) return rc;
    /* Shard side after the catalog: bad vectors (their files are pending now) and
    ** orphans are deleted; a crash in between leaves only pending work. */
    for (int i = 0; i < r->n_listed && rc == CDB_OK; i++) {
        const cdb_db_problem *p = &r->problems[i];
        if ((p->kind != CDB_DB_VECTOR_ORPHAN && p->kind != CDB_DB_VECTOR_BAD) || p->shard <= 0 ||
            shard_is_bad(r, p->shard))
            continue;
        db_shard *sh = NULL;
        sqlite3_stmt *st = NULL;
        if ((rc = cdb_shard_get(db, p->shard, &sh)) != CDB_OK) break;
        if ((rc = cdb_sql_prepare(sh->conn, "DELETE FROM vectors WHERE model_id=?1 AND file_id=?2",
                             &st)) != CDB_OK)
            break;
        sqlite3_bind_int64(st, 1, p->model_id);
        sqlite3_bind_int64(st, 2, p->file_id);
        int s = sqlite3_step(st);
        sqlite3_finalize(st);
        if (s != SQLITE_DONE) rc = cdb_sql_err(sh->conn, s, "repair: delete vector");
        sh->unsynced = 1; /* made durable by cdb_db_flush */
        if (p->kind == CDB_DB_VECTOR_ORPHAN) (*n_fixed)++;
    }
    return rc;
}
