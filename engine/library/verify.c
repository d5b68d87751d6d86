/*
** verify.c: the database's health and size. cdb_engine_verify runs cdb_db_verify (every
** vector against the catalog and the shards, both ways), optionally the deep check
** (deep.c: the photos themselves), and checks the default model's index against the
** store: it may cover no id that is neither stored nor removed since it was built,
** and must have the model's dimension; and that no file is recorded twice, under a root
** and a root inside it (check_twice); unfinished work (a forget or move, files pending)
** is reported apart, as no damage (unfinished). cdb_engine_stats_get counts files by state,
** roots, shards and each vector set, with its index when asked.
*/
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/library/library.h"

/* ---- stats ------------------------------------------------------------------------- */

int64_t cdb_eng_disk_bytes(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int64_t total = 0;
    if (!d) return 0;
    while ((e = readdir(d))) {
        char p[4096];
        struct stat st;
        size_t n = strlen(e->d_name);
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (n > 4 && !strcmp(e->d_name + n - 4, "-shm")) continue; /* SQLite's shared memory */
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (lstat(p, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) total += cdb_eng_disk_bytes(p);
        else if (S_ISREG(st.st_mode)) total += (int64_t)st.st_size;
    }
    closedir(d);
    return total;
}

typedef struct stats_ud {
    cdb_db *db;
    unsigned what;
    cdb_engine_stats *s;
    cdb_status rc;
} stats_ud;

static int on_model_stats(const cdb_db_model *m, void *ud_) {
    stats_ud *ud = ud_;
    cdb_db_counts c;
    cdb_engine_model_stats *ms, *grown;
    if (!(grown = realloc(ud->s->models, sizeof *grown * (size_t)(ud->s->n_models + 1)))) {
        ud->rc = cdb_seterr(CDB_NOMEM, "out of memory");
        return 1;
    }
    ud->s->models = grown;
    ms = &grown[ud->s->n_models++];
    memset(ms, 0, sizeof *ms);
    cdb_eng_model_to_public(m, &ms->model);
    memset(&c, 0, sizeof c);
    cdb_db_get_counts(ud->db, m->id, &c);
    ms->n_vectors = c.n_vectors;
    ms->files_without_vector = c.n_missing;
    if (ud->what & CDB_ENGINE_STATS_INDEX) {
        char path[4096];
        cdb_index *ix = NULL;
        cdb_eng_index_path(ud->db, m->id, path, sizeof path);
        if (cdb_index_load(path, &ix) == CDB_OK) {
            cdb_index_info info;
            cdb_index_get_info(ix, &info);
            ms->has_index = 1;
            snprintf(ms->index_kind, sizeof ms->index_kind, "%s", cdb_index_kind_name(info.kind));
            ms->index_covered = info.n_covered;
            cdb_index_free(ix);
        }
    }
    return 0;
}

void cdb_engine_stats_free(cdb_engine_stats *s) {
    if (!s) return;
    free(s->models);
    s->models = NULL;
    s->n_models = 0;
}

cdb_status cdb_engine_stats_get(cdb_engine *e, unsigned what, cdb_engine_stats *out) {
    eng_reader *r = NULL;
    cdb_db_counts c;
    stats_ud ud;
    cdb_status st;
    cdb_eng_clear();
    memset(out, 0, sizeof *out);
    if ((st = cdb_eng_reader_get(e, &r)) != CDB_OK) return st;
    memset(&c, 0, sizeof c);
    if ((st = cdb_db_get_counts(r->db, 0, &c)) != CDB_OK) {
        st = cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot count");
        goto done;
    }
    memcpy(out->files, c.files, sizeof out->files);
    out->n_retry = c.n_retry;
    out->n_roots = c.n_roots;
    out->n_walk_problems = c.n_walk_problems;
    out->n_shards = c.n_shards;
    out->generation = c.generation;
    {
        cdb_db_report *rep = NULL; /* stat and header of each shard: no vector is read */
        if (cdb_db_check_shards(r->db, &rep) == CDB_OK) out->n_shards_unreadable = rep->n_problems;
        cdb_db_report_free(rep);
    }
    if (what & CDB_ENGINE_STATS_DISK) out->disk_bytes = cdb_eng_disk_bytes(e->dir);
    if (cdb_db_thumb_size(r->db, &out->thumb_size) != CDB_OK) out->thumb_size = 0;
    if (cdb_db_real_photos(r->db, &out->real_photos) != CDB_OK) out->real_photos = 0;
    ud.db = r->db;
    ud.what = what;
    ud.s = out;
    ud.rc = CDB_OK;
    st = cdb_db_models_foreach(r->db, on_model_stats, &ud);
    if (st == CDB_OK) st = ud.rc;
    if (st != CDB_OK) st = cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot list the models");
done:
    cdb_eng_reader_put(e, r);
    if (st != CDB_OK) cdb_engine_stats_free(out);
    return st;
}

/* ---- verify ------------------------------------------------------------------------ */

/* p's message past its "file N: " or "file N (relpath): " (the database's way of
** naming the file), for a problem listed with the file's path: the file is named once
** ("vector-missing: /photos/a.jpg: vector for model 1 lost with shard 0001"). */
static const char *past_file(const cdb_db_problem *p) {
    char head[40];
    const char *m = p->msg, *rest;
    size_t n = (size_t)snprintf(head, sizeof head, "file %lld", (long long)p->file_id);
    if (strncmp(m, head, n)) return m;
    if (!strncmp(m + n, ": ", 2)) return m + n + 2;
    /* the relpath may hold "): " itself; what follows it is "vector ..." */
    if (!strncmp(m + n, " (", 2) && (rest = strstr(m + n, "): vector "))) return rest + 3;
    return m;
}

static const char *problem_name(int kind) {
    switch (kind) {
    case CDB_DB_SHARD_MISSING: return "shard-missing";
    case CDB_DB_SHARD_DAMAGED: return "shard-damaged";
    case CDB_DB_VECTOR_MISSING: return "vector-missing";
    case CDB_DB_VECTOR_BAD: return "vector-bad";
    case CDB_DB_VECTOR_ORPHAN: return "vector-orphan";
    case CDB_DB_FILE_NO_VECTOR: return "file-without-vector";
    case CDB_DB_FILE_CHANGED: return "file-changed";
    case CDB_DB_VECTOR_MISMATCH: return "vector-mismatch";
    default: return "problem";
    }
}

void cdb_engine_verify_report_free(cdb_engine_verify_report *r) {
    if (!r) return;
    for (int i = 0; i < r->n_listed; i++) {
        free(r->problems[i].path);
        free(r->problems[i].msg);
    }
    free(r->problems);
    r->problems = NULL;
    r->n_listed = 0;
    cdb_free(r->unfinished_forget);
    cdb_free(r->unfinished_move);
    r->unfinished_forget = r->unfinished_move = NULL;
}

/* out's unfinished work: the notes a killed forget or move left, and the files pending
** without a failure. */
static cdb_status unfinished(cdb_db *db, cdb_engine_verify_report *out) {
    cdb_db_counts c;
    cdb_status st = cdb_eng_leftovers(db, &out->unfinished_forget, &out->unfinished_move);
    memset(&c, 0, sizeof c);
    if (st == CDB_OK) st = cdb_db_get_counts(db, 0, &c);
    out->n_files_unfinished = c.files[CDB_DB_PENDING] - c.n_retry;
    return st;
}

/* Files in state pending that the index covers: a commit killed between removing
** their vectors (step 2) and logging the removal (step 3) leaves such ids neither
** stored nor logged as removed, and nothing is lost (the next run redoes them). */
typedef struct inflight_ud {
    const cdb_index *ix;
    const int64_t *stored, *removed; /* sorted */
    int64_t n_stored, n_removed, n;
} inflight_ud;

static int cmp_id(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int count_inflight(const cdb_db_file *f, void *ud_) {
    inflight_ud *ud = ud_;
    if (cdb_index_covers(ud->ix, f->id) &&
        !(ud->n_stored &&
          bsearch(&f->id, ud->stored, (size_t)ud->n_stored, sizeof f->id, cmp_id)) &&
        !(ud->n_removed &&
          bsearch(&f->id, ud->removed, (size_t)ud->n_removed, sizeof f->id, cmp_id)))
        ud->n++;
    return 0;
}

/* The default model's index and vector snapshot against the store: up to 8 messages
** into msg[]. */
static int check_index(cdb_db *db, char msg[8][256]) {
    cdb_db_model dm;
    int n_msg = 0;
    char path[4096];
    cdb_index *ix = NULL;
    cdb_status st;
    if (cdb_db_model_default(db, &dm) != CDB_OK) return 0;
    cdb_eng_index_path(db, dm.id, path, sizeof path);
    st = cdb_index_load(path, &ix);
    if (st == CDB_OK) {
        int64_t *ids = NULL, *removed = NULL;
        uint16_t *vecs = NULL;
        int64_t n = 0, n_covered_stored = 0;
        size_t n_removed = 0;
        if (cdb_eng_read_all_vectors(db, dm.id, dm.dim, &ids, &vecs, &n, NULL) == CDB_OK) {
            for (int64_t i = 0; i < n; i++) n_covered_stored += cdb_index_covers(ix, ids[i]);
            cdb_eng_ids_since(db, dm.id, (int64_t)cdb_index_watermark(ix), 1, &removed, &n_removed);
            /* covered ids that are not stored must have been removed since, or belong
            ** to pending files (a commit cut short: their removal is not logged yet) */
            inflight_ud fl = {ix, ids, removed, n, (int64_t)n_removed, 0};
            if (n) qsort(ids, (size_t)n, sizeof *ids, cmp_id);
            if (n_removed) qsort(removed, n_removed, sizeof *removed, cmp_id);
            if (cdb_db_files_foreach(db, 0, CDB_DB_MASK_PENDING, count_inflight, &fl) != CDB_OK)
                fl.n = 0;
            int64_t n_extra = cdb_index_count(ix) - n_covered_stored - (int64_t)n_removed - fl.n;
            if (n_extra > 0)
                snprintf(msg[n_msg++], 256,
                         "index covers %lld id%s not stored and not removed since it was built",
                         (long long)n_extra, n_extra == 1 ? "" : "s");
            if (cdb_index_dim(ix) != dm.dim)
                snprintf(msg[n_msg++], 256, "index dim %d != model dim %d", cdb_index_dim(ix),
                         dm.dim);
        }
        free(ids);
        free(vecs);
        free(removed);
        cdb_index_free(ix);
    } else if (st != CDB_NOTFOUND) {
        snprintf(msg[n_msg++], 256, "index unreadable: %.200s", cdb_errmsg());
    }
    return n_msg + cdb_eng_snap_check(db, dm.id, dm.dim, msg + n_msg, 8 - n_msg);
}

/* Files recorded twice: a root inside another folder root (nothing records both now;
** an older merge did) holds rows whose path the outer root holds too, each photo under
** two ids. All counted; the first TWICE_LISTED listed (heap strings). */
#define TWICE_LISTED 8

typedef struct twice_ud {
    cdb_db *db;
    const eng_root *outer, *inner;
    char *rel;
    size_t cap;
    int64_t n;
    int n_listed;
    int64_t id[TWICE_LISTED];
    char *path[TWICE_LISTED], *msg[TWICE_LISTED];
    cdb_status rc;
} twice_ud;

static int on_inner_file(const cdb_db_file *f, void *ud_) {
    twice_ud *ud = ud_;
    const char *in = ud->inner->path, *out = ud->outer->path;
    size_t need = strlen(in) + strlen(f->relpath) + 2;
    const char *below = in + strlen(out) + (out[strlen(out) - 1] == '/' ? 0 : 1);
    cdb_db_file o;
    char *q;
    if (need > ud->cap) {
        if (!(q = realloc(ud->rel, need))) {
            ud->rc = cdb_seterr(CDB_NOMEM, "out of memory");
            return 1;
        }
        ud->rel = q;
        ud->cap = need;
    }
    snprintf(ud->rel, ud->cap, "%s%s%s", below, f->relpath[0] ? "/" : "", f->relpath);
    ud->rc = cdb_db_file_lookup(ud->db, ud->outer->id, ud->rel, &o);
    if (ud->rc == CDB_NOTFOUND) {
        cdb_clearerr();
        ud->rc = CDB_OK;
        return 0;
    }
    if (ud->rc != CDB_OK) return 1;
    if (o.state != CDB_DB_DELETED && ud->n++ < TWICE_LISTED) {
        int k = ud->n_listed++;
        char m[512];
        snprintf(m, sizeof m, "recorded twice, as file %lld under the root %s and as file %lld "
                 "under the root %s inside it ('clipdb reindex' folds them into one)",
                 (long long)o.id, out, (long long)f->id, in);
        ud->id[k] = f->id;
        ud->msg[k] = strdup(m);
        ud->path[k] = malloc(strlen(out) + strlen(ud->rel) + 2);
        if (ud->path[k]) sprintf(ud->path[k], "%s/%s", out, ud->rel);
    }
    cdb_db_file_clear(&o);
    return 0;
}

/* Counts (and lists the first of) the files of every root inside another folder root
** that the outer one records too. */
static cdb_status check_twice(cdb_db *db, twice_ud *ud) {
    eng_library lib;
    cdb_status rc = cdb_eng_library_load(db, &lib);
    const unsigned live = CDB_DB_MASK_OK | CDB_DB_MASK_PENDING | CDB_DB_MASK_ERROR;
    memset(ud, 0, sizeof *ud);
    ud->db = db;
    for (int i = 0; i < lib.n && rc == CDB_OK; i++)
        for (int k = 0; k < lib.n && rc == CDB_OK; k++) {
            if (lib.r[k].kind != CDB_DB_ROOT_FOLDER ||
                !cdb_eng_path_under(lib.r[i].path, lib.r[k].path, 1))
                continue;
            ud->outer = &lib.r[k];
            ud->inner = &lib.r[i];
            rc = cdb_db_files_foreach(db, lib.r[i].id, live, on_inner_file, ud);
            if (rc == CDB_OK) rc = ud->rc;
        }
    free(ud->rel);
    ud->rel = NULL;
    cdb_eng_library_free(&lib);
    return rc;
}

cdb_status cdb_engine_verify(cdb_engine *e, int deep, double sample,
                             cdb_engine_verify_report *out) {
    cdb_db_report *r = NULL;
    cdb_model *m = NULL;
    cdb_db_model dm;
    eng_deep_info di;
    twice_ud tw;
    char idx_msg[8][256];
    int n_idx;
    cdb_status st;
    cdb_eng_clear();
    memset(out, 0, sizeof *out);
    memset(&di, 0, sizeof di);
    memset(&tw, 0, sizeof tw);
    if (deep) { /* the default model's image tower, on the CPU */
        cdb_k_device dev = e->p.device;
        if ((st = cdb_db_model_default(e->db, &dm)) != CDB_OK)
            return cdb_eng_failw(
                st, st == CDB_NOTFOUND ? CDB_ENGINE_E_NOT_INITIALIZED : CDB_ENGINE_E_NONE,
                st == CDB_NOTFOUND ? "it has no model" : cdb_errmsg(),
                st == CDB_NOTFOUND ? "the database is not initialized"
                                   : "cannot read the database's model");
        e->p.device.kind = CDB_K_DEVICE_CPU;
        e->p.device.index = 0;
        st = cdb_eng_load_db_model(e, e->db, &dm, 1, 0, 0, &m);
        e->p.device = dev;
        if (st != CDB_OK) return st;
    }
    if ((st = cdb_db_verify(e->db, &r)) != CDB_OK ||
        (deep &&
         (st = cdb_eng_deep_check(e->db, m, dm.id, sample, r, &e->p.events, &di)) != CDB_OK)) {
        st = cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot verify the database");
        goto done;
    }
    n_idx = check_index(e->db, idx_msg);
    if ((st = check_twice(e->db, &tw)) != CDB_OK || (st = unfinished(e->db, out)) != CDB_OK) {
        st = cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot verify the database");
        goto done;
    }
    out->n_problems = r->n_problems + n_idx + tw.n;
    out->n_more = r->n_problems - r->n_listed + tw.n - tw.n_listed;
    out->n_vectors_checked = r->n_vectors_checked;
    out->n_files_ok = r->n_files_ok;
    out->n_files_pending = r->n_files_pending;
    if (!(out->problems = calloc((size_t)(r->n_listed + n_idx + tw.n_listed + 1),
                                 sizeof *out->problems))) {
        st = cdb_seterr(CDB_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < r->n_listed; i++) {
        const cdb_db_problem *p = &r->problems[i];
        cdb_engine_problem *q = &out->problems[out->n_listed++];
        char *path = NULL;
        q->kind = problem_name(p->kind);
        q->shard = p->shard;
        q->model_id = p->model_id;
        q->file_id = p->file_id;
        if (p->file_id > 0 && cdb_db_file_path(e->db, p->file_id, &path) == CDB_OK)
            q->path = strdup(path);
        q->msg = strdup(q->path ? past_file(p) : p->msg);
        cdb_free(path);
    }
    /* vectors lost with missing/damaged shards, all of them (not only those listed):
    ** what 'reindex --repair' re-encodes */
    out->n_lost = r->n_lost;
    out->n_lost_files = r->n_lost_files;
    for (int i = 0; i < n_idx; i++) {
        cdb_engine_problem *q = &out->problems[out->n_listed++];
        q->kind = "index";
        q->msg = strdup(idx_msg[i]);
    }
    for (int i = 0; i < tw.n_listed; i++) {
        cdb_engine_problem *q = &out->problems[out->n_listed++];
        q->kind = "file-twice";
        q->file_id = tw.id[i];
        q->path = tw.path[i];
        q->msg = tw.msg[i];
        tw.path[i] = tw.msg[i] = NULL;
    }
    out->deep = deep;
    out->n_files = di.n_files;
    out->n_hashed = di.n_hashed;
    out->n_encoded = di.n_encoded;
    out->n_stale = di.n_stale;
    out->n_gone = di.n_gone;
    out->n_unreadable = di.n_unreadable;
    out->max_ulp = di.max_ulp;
done:
    for (int i = 0; i < tw.n_listed; i++) {
        free(tw.path[i]);
        free(tw.msg[i]);
    }
    if (st != CDB_OK) cdb_engine_verify_report_free(out);
    cdb_db_report_free(r);
    cdb_model_close(m);
    return st;
}
