/*
** fault_util.h: shared set-up of the fault-injection tests: a generated library,
** a private copy of the model, clipdb runs with the fault shim preloaded (and the
** child's peak memory), and the state of a database read through db/db.h (paths,
** states and the exact fp16 bytes of every default-model vector) to compare a
** database that went through a fault with one that did not.
*/
#ifndef CDB_TEST_FAULT_UTIL_H
#define CDB_TEST_FAULT_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli_run.h"
#include "kill_util.h"
#include "library/lib_util.h"
#include "db/db.h"
#include "world/world.h"

#ifndef CDB_FAULT_SHIM
#define CDB_FAULT_SHIM ""
#endif

static char g_tmp[512];   /* the test's scratch folder */
static char g_model[700]; /* private copy of the model */

/* The scratch folder (canonical path: the shim compares canonical paths), the
** model copy, and a library of n images (seed) in <tmp>/<name>. 0 on success;
** 77 when there is no model or no binary (the caller skips). */
static inline int fu_setup(void) {
    const char *model = cli_find_model();
    char raw[512], *canon;
    if (g_tmp[0]) return 0; /* made by an earlier test of the program */
    if (!model || access(CLIPDB_BIN, X_OK) != 0) return 77;
    if (!cli_tmpdir(raw, sizeof raw)) return -1;
    if (!(canon = realpath(raw, NULL))) return -1;
    snprintf(g_tmp, sizeof g_tmp, "%s", canon);
    free(canon);
    /* a private copy: a training job may rewrite the bundled model while we run */
    snprintf(g_model, sizeof g_model, "%s", kill_copy_model(model, g_tmp));
    return 0;
}

/* fu_setup in a test: skips it without a model or a clipdb binary. */
#define FU_NEED_SETUP()                                                      \
    do {                                                                     \
        int s_ = fu_setup();                                                 \
        if (s_ == 77) CDB_SKIP("no model or no clipdb binary");              \
        CHECK_EQ_INT(s_, 0);                                                 \
    } while (0)

static inline int fu_library(const char *dir, uint64_t seed, int n) {
    cdb_world_library_params lp = cdb_world_library_params_default();
    char p[4200];
    lp.n_threads = 2;
    if (cdb_world_generate(dir, seed, 0, n, &lp) != CDB_OK) return -1;
    snprintf(p, sizeof p, "%s/manifest.jsonl", dir);
    remove(p);
    return 0;
}

/* lu_run_env (lib_util.h: it lets the fault shim into a sanitized clipdb), printing
** stderr when the exit code is not `want`; returns the code. */
static inline int fu_run_expect(const char *const *args, const char *const *env, int want,
                                cli_run_result *r) {
    int rc = lu_run_env(args, env, r);
    if (rc != want)
        fprintf(stderr, "    clipdb %s %s: exit %d (want %d)\n    stdout: %.600s\n    stderr: %.1200s\n",
                args[0], args[1] ? args[1] : "", rc, want, r->out, r->err);
    return rc;
}

static inline int fu_init(const char *db) {
    cli_run_result r;
    int rc = fu_run_expect((const char *[]){"init", "--db", db, "--model", g_model, "--quiet", NULL},
                           NULL, 0, &r);
    cli_run_free(&r);
    return rc;
}

/* ingest with batches of one (the CPU encoder is bit-exact per image only then:
** see test_cli_kill.c) and two reader threads. */
#define FU_INGEST(db, lib) \
    (const char *[]) { "ingest", "--db", db, lib, "--batch", "1", "--threads", "2", "--device", "cpu", "--quiet", NULL }

/* ---- database state ------------------------------------------------------------------ */

typedef struct fu_file {
    char *path;
    int64_t id;
    int state;
    char *error;
    uint16_t *vec; /* default model's vector (dim), NULL when none */
} fu_file;

typedef struct fu_state {
    fu_file *f;
    int n, dim, n_vec, n_pending;
} fu_state;

static inline void fu_state_free(fu_state *s) {
    for (int i = 0; i < s->n; i++) free(s->f[i].path), free(s->f[i].error), free(s->f[i].vec);
    free(s->f);
    memset(s, 0, sizeof *s);
}

typedef struct fu_walk {
    cdb_db *db;
    fu_state *s;
} fu_walk;

static inline int fu_on_file(const cdb_db_file *f, void *ud) {
    fu_walk *w = ud;
    fu_file *nf = realloc(w->s->f, sizeof *nf * (size_t)(w->s->n + 1)), *x;
    char *p = NULL;
    if (!nf) return 1;
    w->s->f = nf;
    x = &nf[w->s->n++];
    memset(x, 0, sizeof *x);
    x->id = f->id;
    x->state = (int)f->state;
    if (f->error) x->error = strdup(f->error);
    if (cdb_db_file_path(w->db, f->id, &p) == CDB_OK) {
        x->path = strdup(p);
        cdb_free(p);
    } else {
        x->path = strdup("?");
    }
    if (f->state == CDB_DB_PENDING) w->s->n_pending++;
    return 0;
}

static inline int fu_by_path(const void *a, const void *b) {
    return strcmp(((const fu_file *)a)->path, ((const fu_file *)b)->path);
}

/* Reads the catalog and every default-model vector (read-only handle). 0 on success. */
static inline int fu_state_read(const char *dir, fu_state *s) {
    cdb_db_params p = cdb_db_params_default();
    cdb_db *db = NULL;
    cdb_db_model m;
    cdb_db_iter *it = NULL;
    fu_walk w;
    int rc = -1;
    memset(s, 0, sizeof *s);
    p.readonly = 1;
    if (cdb_db_open(dir, &p, &db) != CDB_OK) return -1;
    w.db = db, w.s = s;
    if (cdb_db_files_foreach(db, 0, CDB_DB_MASK_ALL, fu_on_file, &w) != CDB_OK) goto done;
    if (cdb_db_model_default(db, &m) != CDB_OK) goto done;
    s->dim = m.dim;
    if (cdb_db_iter_new(db, m.id, &it) != CDB_OK) goto done;
    for (;;) {
        int64_t ids[64];
        uint16_t *v = malloc(sizeof *v * 64 * (size_t)m.dim);
        int got = 0;
        if (!v || cdb_db_iter_read(it, 64, ids, NULL, v, &got) != CDB_OK) {
            free(v);
            goto done;
        }
        for (int i = 0; i < got; i++) {
            for (int k = 0; k < s->n; k++) {
                if (s->f[k].id != ids[i]) continue;
                free(s->f[k].vec);
                s->f[k].vec = malloc(sizeof *v * (size_t)m.dim);
                if (s->f[k].vec) memcpy(s->f[k].vec, v + (size_t)i * (size_t)m.dim, sizeof *v * (size_t)m.dim);
                s->n_vec++;
            }
        }
        free(v);
        if (got == 0) break;
    }
    if (s->n) qsort(s->f, (size_t)s->n, sizeof *s->f, fu_by_path);
    rc = 0;
done:
    cdb_db_iter_free(it);
    cdb_db_close(db);
    return rc;
}

static inline const fu_file *fu_find(const fu_state *s, const char *path) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->f[i].path, path)) return &s->f[i];
    return NULL;
}

/* 0 when a and b hold the same paths, states and fp16 bytes; else prints the first
** difference and returns -1. Files whose path contains `except` (may be NULL)
** are not compared. */
static inline int fu_state_same(const fu_state *a, const fu_state *b, const char *except) {
    int na = 0, nb = 0;
    if (a->dim != b->dim) {
        fprintf(stderr, "    dims differ: %d vs %d\n", a->dim, b->dim);
        return -1;
    }
    for (int i = 0; i < a->n; i++) {
        const fu_file *x = &a->f[i], *y;
        if (except && strstr(x->path, except)) continue;
        na++;
        if (!(y = fu_find(b, x->path))) {
            fprintf(stderr, "    %s: only in the first database\n", x->path);
            return -1;
        }
        if (x->state != y->state || !x->vec != !y->vec ||
            (x->vec && memcmp(x->vec, y->vec, sizeof *x->vec * (size_t)a->dim))) {
            fprintf(stderr, "    %s: state %d/%d, vector %s/%s%s\n", x->path, x->state, y->state,
                    x->vec ? "yes" : "no", y->vec ? "yes" : "no",
                    x->vec && y->vec ? " (bytes differ)" : "");
            return -1;
        }
    }
    for (int i = 0; i < b->n; i++)
        if (!(except && strstr(b->f[i].path, except))) nb++;
    if (na != nb) {
        fprintf(stderr, "    %d files vs %d files\n", na, nb);
        return -1;
    }
    return 0;
}

static inline int fu_count_lines(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* The outputs of `clipdb search --db DB -k K --device cpu Q` for every query, one
** after the other (heap; NULL when a search fails). */
static inline char *fu_search_all(const char *db, const char *const *queries, int n_queries,
                                  const char *k) {
    char *all = calloc(1, 1);
    size_t n = 0;
    for (int i = 0; i < n_queries; i++) {
        cli_run_result r;
        if (fu_run_expect((const char *[]){"search", "--db", db, "-k", k, "--device", "cpu", queries[i], NULL},
                          NULL, 0, &r) != 0) {
            cli_run_free(&r);
            free(all);
            return NULL;
        }
        cli_run_append_(&all, &n, r.out, r.out_len);
        cli_run_free(&r);
    }
    return all;
}

#endif /* CDB_TEST_FAULT_UTIL_H */
