/*
** batch.c: the write path. Vectors are normalized in fp32 (kernels' one
** normalization: any finite magnitude works), rounded to fp16 and validated when staged;
** a commit applies the staged file updates with the crash-safe write order:
**   step 1  catalog txn: resolve/insert the file rows, mark them pending, assign
**           shards (creating the next shard when the current one is full), and
**           take back the directory's claims to the vectors step 2 deletes or
**           replaces with other content (a claim never outlives its vector);
**   step 2  one txn per touched shard: upsert / delete the vectors;
**   step 3  catalog txn: final states (ok / error / deleted / moved / touched),
**           the vector directory with fresh sequence numbers, the removal log.
** A crash between steps leaves the batch's files pending with at most their new
** vectors already in the shard; redoing them repeats idempotent upserts.
** See db/README.md for why this order is safe and what power loss changes.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db_int.h"
#include "kernels/kernels.h"

/* OP_ERROR covers both failures: `retry` says which (pending vs error). */
enum { OP_PUT = 1, OP_ERROR, OP_DELETE, OP_MOVE, OP_TOUCH };

typedef struct batch_op {
    int kind;
    int64_t root_id; /* PUT/ERROR */
    char *relpath;   /* PUT/ERROR: the path; MOVE: the new path */
    cdb_db_file_meta meta;
    char *reason;    /* ERROR */
    int retry;       /* ERROR: a transient failure (final state pending, not error) */
    int64_t new_root;/* MOVE: the root it moves to (0: its own) */
    int64_t file_id; /* given (DELETE/MOVE/TOUCH) or resolved in step 1 */
    int32_t shard;   /* resolved in step 1; 0 = none */
    int drop_others; /* PUT: content changed, other models' vectors are stale */
    int check_claims;/* PUT of a pending file: its other claims are checked in step 1 */
    int inserted;    /* PUT/ERROR: row created by this commit's step 1 */
    size_t vec;      /* PUT: index into b->vecs (in vectors) */
} batch_op;

struct cdb_db_batch {
    cdb_db *db;
    int64_t model_id;
    int dim;
    batch_op *ops;
    int n_ops, cap_ops;
    uint16_t *vecs; /* staged fp16 vectors, dim each */
    size_t n_vecs, cap_vecs;
};

/* ---- vector encoding --------------------------------------------------------------- */

/* The vector as stored: the one normalization (kernels/cpu/normalize.c: any finite
** magnitude, fp32) rounded once to fp16, then checked: nothing that rounds to an
** infinity, and a norm within 1e-3 of 1 after the rounding. */
cdb_status cdb_db_encode_vector(const float *vec, int dim, uint16_t *out) {
    cdb_status rc;
    float n2;
    if (dim <= 0) return cdb_seterr(CDB_INVALID, "vector dim %d", dim);
    if ((rc = cdb_k_normalize_to_f16(vec, (size_t)dim, out)) != CDB_OK) return rc;
    for (int i = 0; i < dim; i++)
        if ((out[i] & 0x7c00) == 0x7c00)
            return cdb_seterr(CDB_INVALID, "vector element %d is not finite after rounding", i);
    n2 = cdb_k_l2norm_f16(out, (size_t)dim);
    if (!(fabsf(n2 - 1.0f) <= 1e-3f))
        return cdb_seterr(CDB_INVALID, "vector norm after fp16 rounding is %.6g, not 1 +- 1e-3",
                          (double)n2);
    return CDB_OK;
}

/* ---- staging ---------------------------------------------------------------------- */

cdb_status cdb_db_batch_new(cdb_db *db, int64_t model_id, cdb_db_batch **out) {
    cdb_db_model m;
    cdb_status rc;
    *out = NULL;
    if ((rc = cdb_sql_need_writer(db, "write batch")) != CDB_OK) return rc;
    if ((rc = cdb_db_model_get(db, model_id, &m)) != CDB_OK) return rc;
    if ((rc = cdb_shard_ckpt_attach(db, db->cat)) != CDB_OK) return rc; /* checkpoints off the writer */
    /* Memory flat whatever the library's size: a writer's working set in the
    ** catalog (the rightmost leaves, hkeys_new) is far below 2 MiB; pages it
    ** wrote once are not worth keeping (default 16 MiB, sql.c). */
    if ((rc = cdb_sql_exec(db->cat, "PRAGMA cache_size=-2048")) != CDB_OK) return rc;
    cdb_db_batch *b = cdb_calloc(1, sizeof *b);
    if (!b) return cdb_seterr(CDB_NOMEM, "out of memory");
    b->db = db;
    b->model_id = model_id;
    b->dim = m.dim;
    *out = b;
    return CDB_OK;
}

static void batch_clear(cdb_db_batch *b) {
    for (int i = 0; i < b->n_ops; i++) {
        cdb_free(b->ops[i].relpath);
        cdb_free(b->ops[i].reason);
    }
    b->n_ops = 0;
    b->n_vecs = 0;
}

void cdb_db_batch_free(cdb_db_batch *b) {
    if (!b) return;
    batch_clear(b);
    cdb_free(b->ops);
    cdb_free(b->vecs);
    cdb_free(b);
}

int cdb_db_batch_count(const cdb_db_batch *b) { return b->n_ops; }

static cdb_status push_op(cdb_db_batch *b, int kind, const char *relpath,
                          const cdb_db_file_meta *meta, batch_op **out) {
    if (b->n_ops == b->cap_ops) {
        int cap = b->cap_ops ? b->cap_ops * 2 : 64;
        batch_op *n = cdb_realloc(b->ops, (size_t)cap * sizeof *n);
        if (!n) return cdb_seterr(CDB_NOMEM, "out of memory");
        b->ops = n;
        b->cap_ops = cap;
    }
    batch_op *op = &b->ops[b->n_ops];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    if (meta) op->meta = *meta;
    /* "" is a file root's file (db.h) */
    if (relpath && !(op->relpath = cdb_strdup(relpath))) return cdb_seterr(CDB_NOMEM, "out of memory");
    b->n_ops++;
    *out = op;
    return CDB_OK;
}

/* A slot for one more staged vector: *out points at its dim fp16 values. */
static cdb_status vec_slot(cdb_db_batch *b, uint16_t **out) {
    if (b->n_vecs == b->cap_vecs) {
        size_t cap = b->cap_vecs ? b->cap_vecs * 2 : 64;
        uint16_t *n = cdb_realloc(b->vecs, cap * (size_t)b->dim * sizeof *n);
        if (!n) return cdb_seterr(CDB_NOMEM, "out of memory");
        b->vecs = n;
        b->cap_vecs = cap;
    }
    *out = b->vecs + b->n_vecs * (size_t)b->dim;
    return CDB_OK;
}

/* Stages the PUT of the vector just written into the next slot. */
static cdb_status stage_put(cdb_db_batch *b, int64_t root_id, const char *relpath,
                            const cdb_db_file_meta *meta) {
    batch_op *op = NULL;
    cdb_status rc = push_op(b, OP_PUT, relpath, meta, &op);
    if (rc != CDB_OK) return rc;
    op->root_id = root_id;
    op->vec = b->n_vecs++;
    return CDB_OK;
}

cdb_status cdb_db_batch_put(cdb_db_batch *b, int64_t root_id, const char *relpath,
                            const cdb_db_file_meta *meta, const float *vec, int dim) {
    uint16_t *slot = NULL;
    cdb_status rc;
    if (!relpath || !meta || !vec) return cdb_seterr(CDB_INVALID, "batch put: NULL argument");
    if (dim != b->dim)
        return cdb_seterr(CDB_DIM_MISMATCH, "batch put %s: vector dim %d != model dim %d", relpath,
                          dim, b->dim);
    if ((rc = vec_slot(b, &slot)) != CDB_OK) return rc;
    if ((rc = cdb_db_encode_vector(vec, dim, slot)) != CDB_OK)
        return cdb_errctx(rc, "refused vector for %s", relpath);
    return stage_put(b, root_id, relpath, meta);
}

cdb_status cdb_db_batch_put_f16(cdb_db_batch *b, int64_t root_id, const char *relpath,
                                const cdb_db_file_meta *meta, const uint16_t *v16, int dim) {
    uint16_t *slot = NULL;
    cdb_status rc;
    float n2;
    if (!relpath || !meta || !v16) return cdb_seterr(CDB_INVALID, "batch put: NULL argument");
    if (dim != b->dim)
        return cdb_seterr(CDB_DIM_MISMATCH, "batch put %s: vector dim %d != model dim %d", relpath,
                          dim, b->dim);
    for (int i = 0; i < dim; i++)
        if ((v16[i] & 0x7c00) == 0x7c00)
            return cdb_seterr(CDB_INVALID, "refused vector for %s: element %d is not finite",
                              relpath, i);
    n2 = cdb_k_l2norm_f16(v16, (size_t)dim);
    if (!(fabsf(n2 - 1.0f) <= 1e-3f))
        return cdb_seterr(CDB_INVALID, "refused vector for %s: norm %.6g, not 1 +- 1e-3", relpath,
                          (double)n2);
    if ((rc = vec_slot(b, &slot)) != CDB_OK) return rc;
    memcpy(slot, v16, sizeof *v16 * (size_t)dim);
    return stage_put(b, root_id, relpath, meta);
}

static cdb_status stage_failure(cdb_db_batch *b, int64_t root_id, const char *relpath,
                                const cdb_db_file_meta *meta, const char *reason, int retry) {
    batch_op *op = NULL;
    if (!relpath || !meta) return cdb_seterr(CDB_INVALID, "batch put_error: NULL argument");
    cdb_status rc = push_op(b, OP_ERROR, relpath, meta, &op);
    if (rc != CDB_OK) return rc;
    op->root_id = root_id;
    op->retry = retry;
    op->reason = cdb_strdup(reason && *reason ? reason : "unknown error");
    if (!op->reason) return cdb_seterr(CDB_NOMEM, "out of memory");
    if (strlen(op->reason) > 500) op->reason[500] = '\0';
    for (char *p = op->reason; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t') *p = ' ';
    return CDB_OK;
}

cdb_status cdb_db_batch_put_error(cdb_db_batch *b, int64_t root_id, const char *relpath,
                                  const cdb_db_file_meta *meta, const char *reason) {
    return stage_failure(b, root_id, relpath, meta, reason, 0);
}

cdb_status cdb_db_batch_put_retry(cdb_db_batch *b, int64_t root_id, const char *relpath,
                                  const cdb_db_file_meta *meta, const char *reason) {
    return stage_failure(b, root_id, relpath, meta, reason, 1);
}

cdb_status cdb_db_batch_delete(cdb_db_batch *b, int64_t file_id) {
    batch_op *op = NULL;
    cdb_status rc = push_op(b, OP_DELETE, NULL, NULL, &op);
    if (rc == CDB_OK) op->file_id = file_id;
    return rc;
}

cdb_status cdb_db_batch_move_to(cdb_db_batch *b, int64_t file_id, int64_t new_root_id,
                                const char *new_relpath, const cdb_db_file_meta *meta) {
    batch_op *op = NULL;
    if (!new_relpath || !meta) return cdb_seterr(CDB_INVALID, "batch move: NULL argument");
    cdb_status rc = push_op(b, OP_MOVE, new_relpath, meta, &op);
    if (rc == CDB_OK) {
        op->file_id = file_id;
        op->new_root = new_root_id;
    }
    return rc;
}

cdb_status cdb_db_batch_move(cdb_db_batch *b, int64_t file_id, const char *new_relpath,
                             const cdb_db_file_meta *meta) {
    return cdb_db_batch_move_to(b, file_id, 0, new_relpath, meta);
}

cdb_status cdb_db_batch_touch(cdb_db_batch *b, int64_t file_id, const cdb_db_file_meta *meta) {
    batch_op *op = NULL;
    if (!meta) return cdb_seterr(CDB_INVALID, "batch touch: NULL argument");
    cdb_status rc = push_op(b, OP_TOUCH, NULL, meta, &op);
    if (rc == CDB_OK) op->file_id = file_id;
    return rc;
}

/* ---- commit -------------------------------------------------------------------------- */

/* Binds size, mtime, hash, width, height at i_size.. and hkey at DB_P_HKEY. */
static void bind_meta(sqlite3_stmt *st, const cdb_db_file_meta *m, int i_size) {
    sqlite3_bind_int64(st, i_size, m->size);
    sqlite3_bind_int64(st, i_size + 1, m->mtime_ns);
    if (m->has_hash) {
        sqlite3_bind_blob(st, i_size + 2, m->hash, CDB_DB_HASH_BYTES, SQLITE_STATIC);
        sqlite3_bind_int64(st, DB_P_HKEY, cdb_sql_hash_key(m->hash));
    } else {
        sqlite3_bind_null(st, i_size + 2);
        sqlite3_bind_null(st, DB_P_HKEY);
    }
    sqlite3_bind_int(st, i_size + 3, m->width);
    sqlite3_bind_int(st, i_size + 4, m->height);
    if (m->ino) {
        sqlite3_bind_int64(st, DB_P_DEV, (int64_t)m->dev);
        sqlite3_bind_int64(st, DB_P_DEV + 1, (int64_t)m->ino);
        sqlite3_bind_int64(st, DB_P_DEV + 2, m->ctime_ns);
    } else {
        sqlite3_bind_null(st, DB_P_DEV);
        sqlite3_bind_null(st, DB_P_DEV + 1);
        sqlite3_bind_null(st, DB_P_DEV + 2);
    }
}

static cdb_status step_stmt(cdb_db *db, sqlite3_stmt *st, const char *what) {
    int s = sqlite3_step(st);
    sqlite3_reset(st);
    return s == SQLITE_DONE ? CDB_OK : cdb_sql_err(sqlite3_db_handle(st), s, what);
}

/* Removes directory entries of file (all models, or all but keep_model when
** keep_model > 0, or only only_model when only_model > 0), logging each removal. */
static cdb_status dir_remove(cdb_db *db, int64_t file_id, int64_t keep_model, int64_t only_model,
                             int64_t *gen) {
    int64_t models[CDB_DB_MAX_MODELS];
    int n = 0;
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_stmt(db, ST_DIR_OF_FILE, &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, file_id);
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW && n < CDB_DB_MAX_MODELS) {
        int64_t m = sqlite3_column_int64(st, 0);
        if ((keep_model > 0 && m == keep_model) || (only_model > 0 && m != only_model)) continue;
        models[n++] = m;
    }
    sqlite3_reset(st);
    if (s != SQLITE_ROW && s != SQLITE_DONE) return cdb_sql_err(db->cat, s, "read vector directory");
    for (int i = 0; i < n && rc == CDB_OK; i++) {
        if ((rc = cdb_sql_stmt(db, ST_TOMB_PUT, &st)) != CDB_OK) break;
        sqlite3_bind_int64(st, 1, ++*gen);
        sqlite3_bind_int64(st, 2, models[i]);
        sqlite3_bind_int64(st, 3, file_id);
        if ((rc = step_stmt(db, st, "log removal")) != CDB_OK) break;
        if ((rc = cdb_sql_stmt(db, ST_DIR_DEL, &st)) != CDB_OK) break;
        sqlite3_bind_int64(st, 1, models[i]);
        sqlite3_bind_int64(st, 2, file_id);
        rc = step_stmt(db, st, "remove from vector directory");
    }
    return rc;
}

/* Step 1 for one op: resolve the row (inserting new files), mark pending, assign a
** shard, and take back the directory's claims to every vector step 2 deletes or
** replaces with other content (logged as removals, *gen), so that no crash or full
** disk after step 1 can leave a claim without its vector. */
static cdb_status step1_op(cdb_db_batch *b, batch_op *op, int64_t now, db_shard_alloc *alloc,
                           int64_t *gen) {
    /* A retried commit re-resolves everything from the catalog. */
    op->inserted = op->drop_others = op->check_claims = 0;
    if (op->kind == OP_PUT || op->kind == OP_ERROR) op->shard = 0;
    cdb_db *db = b->db;
    sqlite3_stmt *st = NULL;
    cdb_status rc;
    int exists = 0, state = 0, old_has_hash = 0;
    uint8_t old_hash[CDB_DB_HASH_BYTES];
    int64_t need = (int64_t)b->dim * 2 + DB_VEC_OVERHEAD;
    if (op->kind == OP_PUT || op->kind == OP_ERROR) {
        /* Most staged paths are new: try the insert first (pending, with its meta
        ** and, for a PUT, its shard); only a path already recorded (the UNIQUE
        ** (root_id, relpath) conflict) takes the lookup below. */
        if (op->kind == OP_PUT && (rc = cdb_shard_for_new(db, alloc, need, &op->shard)) != CDB_OK)
            return rc;
        if ((rc = cdb_sql_stmt(db, ST_FILE_INSERT, &st)) != CDB_OK) return rc;
        sqlite3_bind_int64(st, 1, op->root_id);
        sqlite3_bind_blob(st, 2, op->relpath, (int)strlen(op->relpath), SQLITE_STATIC);
        bind_meta(st, &op->meta, 3);
        if (op->shard > 0)
            sqlite3_bind_int(st, 8, op->shard);
        else
            sqlite3_bind_null(st, 8);
        sqlite3_bind_int64(st, 9, now);
        if ((rc = step_stmt(db, st, "insert file")) != CDB_OK) return rc;
        if (sqlite3_changes(db->cat) == 1) {
            op->file_id = sqlite3_last_insert_rowid(db->cat);
            op->inserted = 1;
            return CDB_OK;
        }
        if (op->shard > 0) { /* recorded already: give the reservation back */
            alloc->used -= need;
            alloc->pending -= need;
            op->shard = 0;
        }
        if ((rc = cdb_sql_stmt(db, ST_FILE_BY_PATH, &st)) != CDB_OK) return rc;
        sqlite3_bind_int64(st, 1, op->root_id);
        sqlite3_bind_blob(st, 2, op->relpath, (int)strlen(op->relpath), SQLITE_STATIC);
    } else {
        if ((rc = cdb_sql_stmt(db, ST_FILE_BY_ID, &st)) != CDB_OK) return rc;
        sqlite3_bind_int64(st, 1, op->file_id);
    }
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW) {
        exists = 1;
        op->file_id = sqlite3_column_int64(st, 0);
        state = sqlite3_column_int(st, 1);
        if (sqlite3_column_bytes(st, 2) == CDB_DB_HASH_BYTES) {
            memcpy(old_hash, sqlite3_column_blob(st, 2), CDB_DB_HASH_BYTES);
            old_has_hash = 1;
        }
        op->shard = sqlite3_column_int(st, 3);
    } else if (s != SQLITE_DONE) {
        return cdb_sql_err(db->cat, s, "look up file");
    }
    sqlite3_reset(st);
    if (!exists && op->kind != OP_DELETE)
        return cdb_seterr(CDB_ERROR, "file %s: neither inserted nor found", op->relpath);

    if (op->kind == OP_MOVE || op->kind == OP_TOUCH) {
        if (!exists || state != CDB_DB_OK)
            return cdb_seterr(CDB_INVALID, "%s file %lld: it is %s, not ok",
                              op->kind == OP_MOVE ? "move" : "touch", (long long)op->file_id,
                              exists ? cdb_db_file_state_str((cdb_db_file_state)state)
                                     : "not recorded");
        return CDB_OK; /* catalog-only: applied in step 3 */
    }
    if (!exists && op->kind == OP_DELETE)
        return cdb_seterr(CDB_NOTFOUND, "delete file %lld: not recorded", (long long)op->file_id);
    if (op->kind == OP_PUT) {
        /* The old meta stays until step 3, so a redo after a crash sees the same
        ** hash change again and drops the stale vectors again. */
        op->drop_others = old_has_hash && op->meta.has_hash &&
                          memcmp(old_hash, op->meta.hash, CDB_DB_HASH_BYTES) != 0;
    }
    if (op->kind == OP_PUT) {
        if (op->shard <= 0) {
            if ((rc = cdb_shard_for_new(db, alloc, need, &op->shard)) != CDB_OK) return rc;
        } else {
            int has = 0;
            if ((rc = cdb_db_file_has_vector(db, b->model_id, op->file_id, &has)) != CDB_OK)
                return rc;
            if (!has) {
                if ((rc = cdb_sql_stmt(db, ST_SHARD_RESERVE, &st)) != CDB_OK) return rc;
                sqlite3_bind_int(st, 1, op->shard);
                sqlite3_bind_int64(st, 2, need);
                if ((rc = step_stmt(db, st, "reserve shard space")) != CDB_OK) return rc;
            }
        }
        /* New content: step 2 replaces this model's vector and drops the others. The
        ** same content on a pending row: what an interrupted commit left of the other
        ** models' vectors is checked (step1_check_claims). */
        if (op->drop_others && (rc = dir_remove(db, op->file_id, 0, 0, gen)) != CDB_OK) return rc;
        op->check_claims = !op->drop_others && state == CDB_DB_PENDING;
    } else if ((rc = dir_remove(db, op->file_id, 0, 0, gen)) != CDB_OK) { /* ERROR, DELETE */
        return rc;
    }
    if ((rc = cdb_sql_stmt(db, ST_FILE_SET_PENDING, &st)) != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, op->file_id);
    if (op->shard > 0)
        sqlite3_bind_int(st, 2, op->shard);
    else
        sqlite3_bind_null(st, 2);
    sqlite3_bind_int64(st, 3, now);
    return step_stmt(db, st, "mark file pending");
}

/* Step 1, after the ops: the PUTs of pending files keep their other models' claims
** only where the shard still holds the vector (checked in one read per shard). A
** commit of this clipdb never leaves a claim without its vector (step1_op), but one
** interrupted by an older clipdb (which took claims back in step 3) may have: the
** file becomes ok again here, and a claim it kept would hide a hole in that set. */
static cdb_status step1_check_claims(cdb_db_batch *b, int64_t *gen) {
    cdb_db *db = b->db;
    db_claim *c = NULL;
    size_t n = 0, cap = 0;
    cdb_status rc = CDB_OK;
    for (int i = 0; i < b->n_ops && rc == CDB_OK; i++) {
        const batch_op *op = &b->ops[i];
        sqlite3_stmt *st = NULL;
        int s;
        if (!op->check_claims) continue;
        if ((rc = cdb_sql_stmt(db, ST_DIR_OF_FILE, &st)) != CDB_OK) break;
        sqlite3_bind_int64(st, 1, op->file_id);
        while ((s = sqlite3_step(st)) == SQLITE_ROW) {
            int64_t m = sqlite3_column_int64(st, 0);
            if (m == b->model_id) continue; /* replaced by this commit anyway */
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 64;
                db_claim *g = cdb_realloc(c, nc * sizeof *g);
                if (!g) {
                    rc = cdb_seterr(CDB_NOMEM, "out of memory");
                    break;
                }
                c = g;
                cap = nc;
            }
            c[n].shard = op->shard;
            c[n].model_id = m;
            c[n++].file_id = op->file_id;
        }
        sqlite3_reset(st);
        if (rc == CDB_OK && s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "read vector directory");
    }
    if (rc == CDB_OK) rc = cdb_shard_check_claims(db, c, n, DB_UNREADABLE_FAIL);
    for (size_t i = 0; i < n && rc == CDB_OK; i++)
        if (!c[i].present) rc = dir_remove(db, c[i].file_id, 0, c[i].model_id, gen);
    cdb_free(c);
    return rc;
}

/* Step 2: one transaction per shard touched, in shard order. */
static cdb_status step2(cdb_db_batch *b) {
    cdb_db *db = b->db;
    cdb_status rc = CDB_OK;
    int32_t done_upto = 0;
    for (;;) {
        int32_t cur = 0; /* smallest shard id above done_upto used by the batch */
        for (int i = 0; i < b->n_ops; i++) {
            const batch_op *op = &b->ops[i];
            if ((op->kind == OP_PUT || op->kind == OP_ERROR || op->kind == OP_DELETE) &&
                op->shard > done_upto && (!cur || op->shard < cur))
                cur = op->shard;
        }
        if (!cur) return CDB_OK;
        db_shard *sh = NULL;
        if ((rc = cdb_shard_get(db, cur, &sh)) != CDB_OK) return rc;
        if ((rc = cdb_sql_begin(sh->conn)) != CDB_OK) return rc;
        for (int i = 0; i < b->n_ops && rc == CDB_OK; i++) {
            const batch_op *op = &b->ops[i];
            if (op->shard != cur) continue;
            if (op->kind == OP_PUT) {
                sqlite3_bind_int64(sh->st_put, 1, b->model_id);
                sqlite3_bind_int64(sh->st_put, 2, op->file_id);
                sqlite3_bind_blob(sh->st_put, 3, b->vecs + op->vec * (size_t)b->dim, b->dim * 2,
                                  SQLITE_STATIC);
                rc = step_stmt(db, sh->st_put, "store vector");
                if (rc == CDB_OK && op->drop_others) {
                    sqlite3_bind_int64(sh->st_del, 1, op->file_id);
                    sqlite3_bind_int64(sh->st_del, 2, b->model_id);
                    rc = step_stmt(db, sh->st_del, "drop stale vectors");
                }
            } else if (op->kind == OP_ERROR || op->kind == OP_DELETE) {
                sqlite3_bind_int64(sh->st_del, 1, op->file_id);
                sqlite3_bind_int64(sh->st_del, 2, 0);
                rc = step_stmt(db, sh->st_del, "remove vectors");
            }
        }
        if (rc == CDB_OK)
            rc = cdb_sql_commit(sh->conn);
        else
            cdb_sql_rollback(sh->conn);
        if (rc != CDB_OK) return cdb_errctx(rc, "shard %04d", (int)cur);
        sh->unsynced = 1;
        /* Vectors are written once: keeping their pages cached would only make
        ** the writer's memory grow with the library (up to cache_size). */
        sqlite3_db_release_memory(sh->conn);
        done_upto = cur;
    }
}

/* (hkey, file) into the move-detection index when the meta has a hash (schema v4:
** an ok file's current key must be there; an old key may stay). */
static cdb_status hkey_put(cdb_db *db, int64_t file_id, const cdb_db_file_meta *m) {
    sqlite3_stmt *st = NULL;
    if (!m->has_hash) return CDB_OK;
    cdb_status rc = cdb_sql_stmt(db, ST_HKEY_PUT, &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, cdb_sql_hash_key(m->hash));
    sqlite3_bind_int64(st, 2, file_id);
    return step_stmt(db, st, "index file hash");
}

static cdb_status step3_move(cdb_db *db, batch_op *op, int64_t now) {
    sqlite3_stmt *st = NULL;
    cdb_status rc =
        cdb_sql_prepare(db->cat,
                   "SELECT t.id, t.state FROM files f JOIN files t ON t.root_id ="
                   " (CASE WHEN ?3 > 0 THEN ?3 ELSE f.root_id END)"
                   " AND t.relpath = ?2 WHERE f.id = ?1",
                   &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, op->file_id);
    sqlite3_bind_blob(st, 2, op->relpath, (int)strlen(op->relpath), SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, op->new_root);
    int s = sqlite3_step(st);
    int64_t other = s == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    int other_state = s == SQLITE_ROW ? sqlite3_column_int(st, 1) : 0;
    sqlite3_finalize(st);
    if (s != SQLITE_ROW && s != SQLITE_DONE) return cdb_sql_err(db->cat, s, "move file");
    if (other && other != op->file_id) {
        if (other_state != CDB_DB_DELETED && other_state != CDB_DB_ERROR)
            return cdb_seterr(CDB_INVALID,
                              "move file %lld to %s: that path is tracked as file %lld (%s)",
                              (long long)op->file_id, op->relpath, (long long)other,
                              cdb_db_file_state_str((cdb_db_file_state)other_state));
        /* A deleted/error row has no vectors (invariant): it can simply go. */
        if ((rc = cdb_sql_prepare(db->cat, "DELETE FROM files WHERE id=?1", &st)) != CDB_OK) return rc;
        sqlite3_bind_int64(st, 1, other);
        s = sqlite3_step(st);
        sqlite3_finalize(st);
        if (s != SQLITE_DONE) return cdb_sql_err(db->cat, s, "move file");
    }
    if ((rc = cdb_sql_stmt(db, ST_FILE_MOVE, &st)) != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, op->file_id);
    sqlite3_bind_blob(st, 2, op->relpath, (int)strlen(op->relpath), SQLITE_STATIC);
    bind_meta(st, &op->meta, 3);
    sqlite3_bind_int64(st, 8, now);
    sqlite3_bind_int64(st, 9, op->new_root);
    if ((rc = step_stmt(db, st, "move file")) != CDB_OK) return rc;
    return hkey_put(db, op->file_id, &op->meta);
}

static cdb_status step3_op(cdb_db_batch *b, batch_op *op, int64_t now, int64_t *gen) {
    cdb_db *db = b->db;
    sqlite3_stmt *st = NULL;
    cdb_status rc = CDB_OK;
    switch (op->kind) {
    case OP_PUT:
        if (op->inserted) {
            if ((rc = cdb_sql_stmt(db, ST_FILE_SET_OK_NEW, &st)) != CDB_OK) return rc;
            sqlite3_bind_int64(st, 1, op->file_id);
            sqlite3_bind_int64(st, 2, now);
        } else {
            if ((rc = cdb_sql_stmt(db, ST_FILE_SET_OK, &st)) != CDB_OK) return rc;
            sqlite3_bind_int64(st, 1, op->file_id);
            bind_meta(st, &op->meta, 2);
            sqlite3_bind_int64(st, 7, now);
        }
        if ((rc = step_stmt(db, st, "mark file ok")) != CDB_OK) return rc;
        if ((rc = hkey_put(db, op->file_id, &op->meta)) != CDB_OK) return rc;
        if (op->inserted) goto dir_put; /* a new file has no directory entries */
        /* A replaced vector is logged as removed, so an index drops the old one. */
        if ((rc = dir_remove(db, op->file_id, 0, b->model_id, gen)) != CDB_OK) return rc;
        if (op->drop_others && (rc = dir_remove(db, op->file_id, b->model_id, 0, gen)) != CDB_OK)
            return rc;
    dir_put:
        if ((rc = cdb_sql_stmt(db, ST_DIR_PUT, &st)) != CDB_OK) return rc;
        sqlite3_bind_int64(st, 1, b->model_id);
        sqlite3_bind_int64(st, 2, op->file_id);
        sqlite3_bind_int64(st, 3, ++*gen);
        return step_stmt(db, st, "record vector");
    case OP_ERROR:
        if ((rc = cdb_sql_stmt(db, ST_FILE_SET_ERROR, &st)) != CDB_OK) return rc;
        sqlite3_bind_int64(st, 1, op->file_id);
        bind_meta(st, &op->meta, 2);
        sqlite3_bind_int64(st, 7, now);
        sqlite3_bind_text(st, 8, op->reason, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 9, op->retry ? CDB_DB_PENDING : CDB_DB_ERROR);
        if ((rc = step_stmt(db, st, "mark file error")) != CDB_OK) return rc;
        return dir_remove(db, op->file_id, 0, 0, gen);
    case OP_DELETE:
        if ((rc = cdb_sql_stmt(db, ST_FILE_SET_DELETED, &st)) != CDB_OK) return rc;
        sqlite3_bind_int64(st, 1, op->file_id);
        sqlite3_bind_int64(st, 2, now);
        if ((rc = step_stmt(db, st, "mark file deleted")) != CDB_OK) return rc;
        return dir_remove(db, op->file_id, 0, 0, gen);
    case OP_MOVE: return step3_move(db, op, now);
    case OP_TOUCH:
        if ((rc = cdb_sql_stmt(db, ST_FILE_TOUCH, &st)) != CDB_OK) return rc;
        sqlite3_bind_int64(st, 1, op->file_id);
        bind_meta(st, &op->meta, 2);
        sqlite3_bind_int64(st, 7, now);
        if ((rc = step_stmt(db, st, "update file")) != CDB_OK) return rc;
        return hkey_put(db, op->file_id, &op->meta);
    }
    return cdb_seterr(CDB_ERROR, "bad batch op %d", op->kind);
}

/* Length of the run of ops from i on that are PUTs of files inserted by this
** commit's step 1 with consecutive ids (a batch of new files is one run). */
static int new_run(const cdb_db_batch *b, int i) {
    int n = 0;
    while (i + n < b->n_ops) {
        const batch_op *op = &b->ops[i + n];
        if (op->kind != OP_PUT || !op->inserted) break;
        if (n && op->file_id != b->ops[i].file_id + n) break;
        n++;
    }
    return n;
}

/* Step 3 for a run of n new files (ids lo..lo+n-1): the same rows and sequence
** numbers as n step3_op calls (seq gen+1.. in id order), in three statements. */
static cdb_status step3_new_run(cdb_db_batch *b, int i, int n, int64_t now, int64_t *gen) {
    cdb_db *db = b->db;
    sqlite3_stmt *st = NULL;
    int64_t lo = b->ops[i].file_id, hi = lo + n - 1;
    cdb_status rc = cdb_sql_stmt(db, ST_FILE_RUN_OK, &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, lo);
    sqlite3_bind_int64(st, 2, hi);
    sqlite3_bind_int64(st, 3, now);
    if ((rc = step_stmt(db, st, "mark files ok")) != CDB_OK) return rc;
    if (sqlite3_changes(db->cat) != n)
        return cdb_seterr(CDB_ERROR, "mark files %lld..%lld ok: %d rows changed, want %d",
                          (long long)lo, (long long)hi, sqlite3_changes(db->cat), n);
    if ((rc = cdb_sql_stmt(db, ST_DIR_PUT_RUN, &st)) != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, b->model_id);
    sqlite3_bind_int64(st, 2, lo);
    sqlite3_bind_int64(st, 3, hi);
    sqlite3_bind_int64(st, 4, *gen + 1 - lo);
    if ((rc = step_stmt(db, st, "record vectors")) != CDB_OK) return rc;
    if ((rc = cdb_sql_stmt(db, ST_HKEY_PUT_RUN, &st)) != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, lo);
    sqlite3_bind_int64(st, 2, hi);
    if ((rc = step_stmt(db, st, "index file hashes")) != CDB_OK) return rc;
    *gen += n;
    return CDB_OK;
}

/* Bound of the recent level of the move-detection index (schema v4, catalog.c).
** With n files, commits of about B new files and e keys per page, keeping up to T
** keys in hkeys_new costs ~T/(e B) page writes per file, and a merge every T
** files ~n/(e T) plus a second B-tree insert per key. T = max(4096, 32 sqrt(n))
** (the optimum sqrt(n B) for B = 1,024; measured best for batches of 256 and
** 1,000 alike): 100,000 files, ~10,000 keys, ~0.05-0.2 page per file instead of
** 0.5 (batches of 1,000) to 1 (256) with one index on files. */
static cdb_status hkeys_maybe_merge(cdb_db *db) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_stmt(db, ST_HKEYS_LEVELS, &st);
    if (rc != CDB_OK) return rc;
    int s = sqlite3_step(st);
    double n_new = s == SQLITE_ROW ? (double)sqlite3_column_int64(st, 0) : 0;
    double n_files = s == SQLITE_ROW ? (double)sqlite3_column_int64(st, 1) : 0;
    sqlite3_reset(st);
    if (s != SQLITE_ROW) return cdb_sql_err(db->cat, s, "size the hash index");
    if (n_new < 4096 || n_new * n_new < 1024.0 * n_files) return CDB_OK; /* T above */
    return cdb_sql_exec(db->cat, "INSERT OR IGNORE INTO hkeys(hkey, file_id)"
                            " SELECT hkey, file_id FROM hkeys_new ORDER BY hkey, file_id;"
                            "DELETE FROM hkeys_new;");
}

cdb_status cdb_db_batch_commit(cdb_db_batch *b, int64_t *file_ids) {
    cdb_db *db = b->db;
    cdb_status rc;
    int64_t now = cdb_sql_wall_ns(), gen = 0;
    if (b->n_ops == 0) return CDB_OK;
    if (db->hook) db->hook(0, db->hook_ud);

    /* step 1: pending + shard assignment */
    db_shard_alloc alloc;
    int64_t gen0 = 0;
    memset(&alloc, 0, sizeof alloc);
    if ((rc = cdb_sql_begin(db->cat)) != CDB_OK) return rc;
    rc = cdb_sql_meta_get_int(db, "generation", &gen0);
    gen = gen0;
    for (int i = 0; i < b->n_ops && rc == CDB_OK; i++)
        rc = step1_op(b, &b->ops[i], now, &alloc, &gen);
    if (rc == CDB_OK) rc = step1_check_claims(b, &gen);
    if (rc == CDB_OK && gen != gen0) rc = cdb_sql_meta_set_int(db, "generation", gen);
    if (rc == CDB_OK) rc = cdb_shard_alloc_flush(db, &alloc);
    if (rc == CDB_OK)
        rc = cdb_sql_commit(db->cat);
    else
        cdb_sql_rollback(db->cat);
    if (rc != CDB_OK) return cdb_errctx(rc, "commit (step 1, catalog)");
    if (db->hook) db->hook(1, db->hook_ud);

    /* step 2: vectors */
    if ((rc = step2(b)) != CDB_OK) return cdb_errctx(rc, "commit (step 2, shards)");
    if (db->hook) db->hook(2, db->hook_ud);

    /* step 3: final states + directory */
    if ((rc = cdb_sql_begin(db->cat)) != CDB_OK) return rc;
    rc = cdb_sql_meta_get_int(db, "generation", &gen);
    for (int i = 0; i < b->n_ops && rc == CDB_OK;) {
        int n = new_run(b, i);
        if (n >= 2) {
            rc = step3_new_run(b, i, n, now, &gen);
            i += n;
        } else {
            rc = step3_op(b, &b->ops[i++], now, &gen);
        }
    }
    if (rc == CDB_OK) rc = cdb_sql_meta_set_int(db, "generation", gen);
    if (rc == CDB_OK) rc = hkeys_maybe_merge(db);
    if (rc == CDB_OK)
        rc = cdb_sql_commit(db->cat);
    else
        cdb_sql_rollback(db->cat);
    if (rc != CDB_OK) return cdb_errctx(rc, "commit (step 3, catalog)");

    if (file_ids)
        for (int i = 0; i < b->n_ops; i++) file_ids[i] = b->ops[i].file_id;
    batch_clear(b);
    return CDB_OK;
}
