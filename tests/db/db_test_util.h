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

/* A new database writer in a fresh temporary directory: dir receives <tmp>/db. */
static inline cdb_status tu_db_create(char *dir, size_t cap, const char *tag, cdb_db **db) {
    cdb_db_params p = cdb_db_params_default();
    tu_tmpdir(dir, cap, tag);
    if (!dir[0] || strlen(dir) + 4 > cap) return cdb_seterr(CDB_IO, "no temporary directory");
    strcat(dir, "/db");
    p.create = 1;
    return cdb_db_open(dir, &p, db);
}

/* Closes db (NULL is fine) and removes the temporary directory tu_db_create made. */
static inline void tu_db_destroy(const char *dir, cdb_db *db) {
    char parent[512];
    cdb_db_close(db);
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash) *slash = '\0';
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
