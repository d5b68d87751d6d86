/*
** db_test_util.h: helpers shared by the db/ tests: temporary database
** directories (removed afterwards), a deterministic PRNG for vectors, and the
** reference normalization (in double) the stored fp16 vectors are checked against.
*/
#ifndef CDB_DB_TEST_UTIL_H
#define CDB_DB_TEST_UTIL_H

#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "db/db.h"

static inline uint64_t tu_splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static inline float tu_uniform(uint64_t *s) {
    return (float)((double)(tu_splitmix(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static inline void tu_vec(uint64_t seed, float scale, float *v, int dim) {
    uint64_t s = seed * 7919 + 17;
    for (int i = 0; i < dim; i++) v[i] = tu_uniform(&s) * scale;
}

static inline int tu_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f) {
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p);
}

static inline void tu_rmtree(const char *dir) { nftw(dir, tu_rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

/* A fresh temporary directory path (the directory itself) in buf. */
static inline void tu_tmpdir(char *buf, size_t len, const char *tag) {
    snprintf(buf, len, "/tmp/cdb_%s_XXXXXX", tag);
    if (!mkdtemp(buf)) buf[0] = '\0';
}

/* Runs sql on the SQLite file at path (a catalog or a shard, edited behind clipdb's back);
** SQLite's result code. */
static inline int tu_sql_exec_cb(const char *path, const char *sql,
                                 int (*row)(void *, int, char **, char **), void *ud) {
    sqlite3 *c = NULL;
    int rc = sqlite3_open(path, &c);
    if (rc == SQLITE_OK) rc = sqlite3_exec(c, sql, row, ud, NULL);
    sqlite3_close(c);
    return rc;
}
static inline int tu_sql_exec(const char *path, const char *sql) {
    return tu_sql_exec_cb(path, sql, NULL, NULL);
}

static inline int tu_first_int_(void *ud, int n, char **v, char **names) {
    (void)names;
    *(int64_t *)ud = n > 0 && v[0] ? strtoll(v[0], NULL, 10) : -1;
    return 1; /* the first row is enough */
}
/* The integer the first row of the query sql answers in the SQLite file at path (a
** count), or -1. */
static inline int64_t tu_sql_int(const char *path, const char *sql) {
    int64_t n = -1;
    tu_sql_exec_cb(path, sql, tu_first_int_, &n);
    return n;
}

/* Creates a database at a fresh temporary folder + "/db" (its path in dir) with the
** params p (create is set), open in *db. */
static inline cdb_status tu_create(char *dir, size_t size, const char *tag, cdb_db_params p,
                                   cdb_db **db) {
    tu_tmpdir(dir, size, tag);
    if (!dir[0] || strlen(dir) + 4 > size - 1) return cdb_seterr(CDB_IO, "no temporary folder");
    strcat(dir, "/db");
    p.create = 1;
    return cdb_db_open(dir, &p, db);
}

/* tu_create with the default params, then the model `name` of dimension dim (weights
** hash "hash-NAME") registered; its id in *model. */
static inline cdb_status tu_create_with_model(char *dir, size_t size, const char *tag,
                                              const char *name, int dim, cdb_db **db,
                                              int64_t *model) {
    char hash[64];
    cdb_status rc = tu_create(dir, size, tag, cdb_db_params_default(), db);
    snprintf(hash, sizeof hash, "hash-%s", name);
    return rc != CDB_OK ? rc : cdb_db_model_register(*db, hash, name, dim, NULL, model);
}

/* Closes *db (set to NULL) and removes the temporary folder its directory dir is in
** (tu_tmpdir's folder + "/db"). */
static inline void tu_close_rm(cdb_db **db, const char *dir) {
    char parent[256];
    char *slash;
    cdb_db_close(*db);
    *db = NULL;
    snprintf(parent, sizeof parent, "%s", dir);
    if ((slash = strrchr(parent, '/'))) *slash = '\0';
    tu_rmtree(parent);
}

static inline cdb_db_file_meta tu_meta(int64_t size, int64_t mtime, uint64_t content_seed) {
    cdb_db_file_meta m;
    memset(&m, 0, sizeof m);
    m.size = size;
    m.mtime_ns = mtime;
    m.has_hash = 1;
    cdb_db_hash_buf(&content_seed, sizeof content_seed, m.hash);
    m.width = 640;
    m.height = 480;
    return m;
}

#endif /* CDB_DB_TEST_UTIL_H */
