/*
** kill_util.h: what the kill -9 tests (tests/cli: test_cli_kill, test_cli_writes) and
** the fault-injection tests (tests/fault, through fault_util.h) share: their random
** choices (xorshift64*, reproducible from a printed seed), small file helpers (write,
** remove a tree), a private copy of the model, and the end state of a database read straight from
** its SQLite files (catalog.db and every shards/NNNN.db, never through clipdb),
** compared with a reference's: the same paths in the same states, each ok file with
** exactly one vector per model, its default model's byte-identical, no vector without
** an ok file.
*/
#ifndef CDB_TEST_KILL_UTIL_H
#define CDB_TEST_KILL_UTIL_H

#include <dirent.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli_run.h"

/* xorshift64*: the kill points, reproducible from the printed seed */
static uint64_t g_rng;
static inline double rnd01(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (double)((g_rng * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
}

static inline void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

/* Removes path and, for a folder, all below it; a symbolic link is removed, never
** followed (a test's tree may hold links to outside it). */
static inline void rm_rf(const char *path) {
    DIR *d;
    struct dirent *e;
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) {
        unlink(path);
        return;
    }
    if ((d = opendir(path))) {
        while ((e = readdir(d))) {
            size_t n = strlen(path) + strlen(e->d_name) + 2;
            char *p;
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            if (!(p = malloc(n))) continue;
            snprintf(p, n, "%s/%s", path, e->d_name);
            rm_rf(p);
            free(p);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* ---- the end state, read from the SQLite files ------------------------------------- */

typedef struct fentry {
    char *path;      /* root path + "/" + relpath */
    int64_t id;
    int state;       /* CDB_DB_* values: 1 pending, 2 ok, 3 error, 4 deleted */
    int n_vec;       /* vectors found for it, over all shards and models */
    int claimed;     /* vectors the catalog's directory claims for it (the default model) */
    unsigned char *vec; /* its default model's vector (the one searches use) */
    int vec_bytes;
} fentry;

typedef struct dbstate {
    fentry *f;
    int n;
    int n_vec_rows;  /* rows in all shards */
    int n_orphans;   /* vectors whose file is not ok (or unknown) */
    int n_pending;
    int n_models;    /* the models the catalog registers: the vectors of an ok file */
    char excludes[1024]; /* what the roots leave out (root_excludes, schema 7), one
                            "root kind base pattern" per line in id order; "" before v7 */
    int n_meta;      /* photo_meta rows (schema 8); -1 before v8. Not compared by
                        compare(): an ingest may leave some to the next reindex */
    char err[1800];  /* set when the files could not be read */
} dbstate;

static inline void dbstate_free(dbstate *s) {
    for (int i = 0; i < s->n; i++) free(s->f[i].path), free(s->f[i].vec);
    free(s->f);
    memset(s, 0, sizeof *s);
}

static inline int by_path(const void *a, const void *b) {
    return strcmp(((const fentry *)a)->path, ((const fentry *)b)->path);
}

static inline fentry *find_id(dbstate *s, int64_t id) {
    for (int i = 0; i < s->n; i++)
        if (s->f[i].id == id) return &s->f[i];
    return NULL;
}

/* Read-only: never checkpoints, so the state a killed run left is what the next
** run finds. */
static inline sqlite3 *open_ro(const char *path) {
    sqlite3 *h = NULL;
    if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(h);
        return NULL;
    }
    sqlite3_busy_timeout(h, 5000);
    return h;
}

static inline int read_state(const char *db, dbstate *s) {
    char p[1200];
    sqlite3 *h;
    sqlite3_stmt *st = NULL;
    DIR *d;
    struct dirent *e;
    int64_t def_model = 0; /* 0: unknown (any model's vector) */
    memset(s, 0, sizeof *s);
    snprintf(p, sizeof p, "%s/catalog.db", db);
    if (!(h = open_ro(p))) return snprintf(s->err, sizeof s->err, "cannot open %s", p), -1;
    if (sqlite3_prepare_v2(h,
                           "SELECT f.id, r.path, f.relpath, f.state FROM files f"
                           " JOIN roots r ON r.id = f.root_id",
                           -1, &st, NULL) != SQLITE_OK) {
        snprintf(s->err, sizeof s->err, "catalog: %s", sqlite3_errmsg(h));
        sqlite3_close(h);
        return -1;
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
        fentry *nf = realloc(s->f, sizeof *s->f * (size_t)(s->n + 1)), *f;
        const char *root = (const char *)sqlite3_column_blob(st, 1);
        const char *rel = (const char *)sqlite3_column_blob(st, 2);
        int nr = sqlite3_column_bytes(st, 1), nl = sqlite3_column_bytes(st, 2);
        if (!nf) break;
        s->f = nf;
        f = &s->f[s->n++];
        memset(f, 0, sizeof *f);
        f->id = sqlite3_column_int64(st, 0);
        f->state = sqlite3_column_int(st, 3);
        f->path = malloc((size_t)nr + (size_t)nl + 2);
        memcpy(f->path, root, (size_t)nr);
        f->path[nr] = '/';
        if (nl) memcpy(f->path + nr + 1, rel, (size_t)nl); /* a file root's file: "" (NULL blob) */
        f->path[nr + 1 + nl] = '\0';
        if (f->state == 1) s->n_pending++;
    }
    sqlite3_finalize(st);
    s->n_models = 1; /* a catalog without a models table: one model, as before it */
    if (sqlite3_prepare_v2(h, "SELECT count(*), max(CASE is_default WHEN 1 THEN id END)"
                              " FROM models", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) {
            s->n_models = sqlite3_column_int(st, 0);
            def_model = sqlite3_column_int64(st, 1);
        }
        sqlite3_finalize(st);
    }
    if (sqlite3_prepare_v2(h, "SELECT r.path, x.kind, x.base, x.pattern FROM root_excludes x"
                              " JOIN roots r ON r.id = x.root_id ORDER BY x.id", -1, &st,
                           NULL) == SQLITE_OK) {
        size_t at = 0;
        while (sqlite3_step(st) == SQLITE_ROW && at < sizeof s->excludes)
            at += (size_t)snprintf(s->excludes + at, sizeof s->excludes - at, "%s %d %s %s\n",
                                   (const char *)sqlite3_column_text(st, 0),
                                   sqlite3_column_int(st, 1),
                                   (const char *)sqlite3_column_text(st, 2),
                                   (const char *)sqlite3_column_text(st, 3));
        sqlite3_finalize(st);
    }
    s->n_meta = -1;
    if (sqlite3_prepare_v2(h, "SELECT count(*) FROM photo_meta", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) s->n_meta = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    /* the vector directory of the default model: what search, export and stats count */
    if (sqlite3_prepare_v2(h, "SELECT file_id FROM vectors WHERE ?1 = 0 OR model_id = ?1", -1,
                           &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, def_model);
        while (sqlite3_step(st) == SQLITE_ROW) {
            fentry *f = find_id(s, sqlite3_column_int64(st, 0));
            if (f) f->claimed++;
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(h);

    snprintf(p, sizeof p, "%s/shards", db);
    if ((d = opendir(p))) {
        while ((e = readdir(d))) {
            size_t L = strlen(e->d_name);
            char sp[1600];
            if (L < 4 || strcmp(e->d_name + L - 3, ".db")) continue;
            snprintf(sp, sizeof sp, "%s/%s", p, e->d_name);
            if (!(h = open_ro(sp))) {
                snprintf(s->err, sizeof s->err, "cannot open %s", sp);
                continue;
            }
            if (sqlite3_prepare_v2(h, "SELECT file_id, vec, model_id FROM vectors", -1, &st,
                                   NULL) !=
                SQLITE_OK) {
                /* a shard created but never written has no table yet: that is fine */
                sqlite3_close(h);
                continue;
            }
            while (sqlite3_step(st) == SQLITE_ROW) {
                fentry *f = find_id(s, sqlite3_column_int64(st, 0));
                s->n_vec_rows++;
                if (!f || f->state != 2) {
                    s->n_orphans++;
                    /* a pending file keeps its other models' vectors while a model is
                    ** being added (ingest --model): search finds it by them */
                    if (!f || f->state != 1) continue;
                }
                f->n_vec++;
                if (!f->vec && (def_model == 0 || sqlite3_column_int64(st, 2) == def_model)) {
                    f->vec_bytes = sqlite3_column_bytes(st, 1);
                    f->vec = malloc((size_t)f->vec_bytes + 1);
                    memcpy(f->vec, sqlite3_column_blob(st, 1), (size_t)f->vec_bytes);
                }
            }
            sqlite3_finalize(st);
            sqlite3_close(h);
        }
        closedir(d);
    }
    if (s->n > 1) qsort(s->f, (size_t)s->n, sizeof *s->f, by_path); /* qsort(NULL, 0) is UB */
    return s->err[0] ? -1 : 0;
}

/* Compares s with the reference; prints up to a few differences and returns how
** many it found. */
static inline int compare(const dbstate *ref, const dbstate *s, const char *what) {
    int bad = 0, i = 0, j = 0;
#define DIFF(...)                                                    \
    do {                                                             \
        if (bad++ < 6) {                                             \
            fprintf(stderr, "    %s: ", what);                       \
            fprintf(stderr, __VA_ARGS__);                            \
            fprintf(stderr, "\n");                                   \
        }                                                            \
    } while (0)
    if (s->err[0]) DIFF("%s", s->err);
    if (s->n_pending) DIFF("%d files left pending", s->n_pending);
    if (s->n_orphans) DIFF("%d vectors without an ok file", s->n_orphans);
    if (s->n_models != ref->n_models) DIFF("%d models, reference %d", s->n_models, ref->n_models);
    if (strcmp(s->excludes, ref->excludes))
        DIFF("left out:\n%s, reference:\n%s", s->excludes, ref->excludes);
    while (i < ref->n || j < s->n) {
        int c = i >= ref->n ? 1 : j >= s->n ? -1 : strcmp(ref->f[i].path, s->f[j].path);
        if (c < 0) {
            DIFF("missing file %s", ref->f[i].path);
            i++;
        } else if (c > 0) {
            DIFF("extra file %s", s->f[j].path);
            j++;
        } else {
            const fentry *a = &ref->f[i++], *b = &s->f[j++];
            if (j >= 2 && !strcmp(s->f[j - 2].path, b->path)) DIFF("file row twice: %s", b->path);
            if (a->state != b->state)
                DIFF("%s: state %d, reference %d", b->path, b->state, a->state);
            else if (b->state == 2 && b->n_vec != s->n_models)
                DIFF("%s: %d vectors for %d models", b->path, b->n_vec, s->n_models);
            else if (b->state == 2 && (a->vec_bytes != b->vec_bytes ||
                                       memcmp(a->vec, b->vec, (size_t)a->vec_bytes)))
                DIFF("%s: vector differs from the reference", b->path);
        }
    }
    if (bad > 6) fprintf(stderr, "    %s: ... %d differences in all\n", what, bad);
#undef DIFF
    return bad;
}

/* A copy of the model folder in tmp/model (the test's own: a training job may rewrite
** the bundled one in place while the test runs); returns its path (static). */
static inline const char *kill_copy_model(const char *model, const char *tmp) {
    static char copy[700];
    DIR *d = opendir(model);
    struct dirent *e;
    snprintf(copy, sizeof copy, "%s/model", tmp);
    mkdir(copy, 0755);
    while (d && (e = readdir(d))) {
        char from[5000], to[1000];
        size_t n = 0;
        char *b;
        if (e->d_name[0] == '.') continue;
        snprintf(from, sizeof from, "%s/%s", model, e->d_name);
        snprintf(to, sizeof to, "%s/%s", copy, e->d_name);
        if ((b = cli_read_file(from, &n))) write_file(to, b, n);
        free(b);
    }
    if (d) closedir(d);
    return copy;
}

#endif
