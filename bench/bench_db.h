/*
** bench_db.h: the benches' stand-in libraries: a database that `clipdb init` made,
** filled through db/db.h with n files and random vectors (bench_search, bench_serve),
** so that a search bench need not encode n photos first.
*/
#ifndef CDB_BENCH_DB_H
#define CDB_BENCH_DB_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "db/db.h"

/* Creates files_root/rel (a few bytes) and puts its identity (size, times, device,
** inode) in meta, as an ingest records it: a walk then finds it unchanged. 0 or -1. */
static inline int bench_db_real_file(const char *files_root, const char *rel,
                                     cdb_db_file_meta *meta) {
    char full[4096], sub[4096];
    struct stat st;
    FILE *f;
    snprintf(sub, sizeof sub, "%s/%s", files_root, rel);
    *strrchr(sub, '/') = '\0';
    mkdir(sub, 0777);
    snprintf(full, sizeof full, "%s/%s", files_root, rel);
    if (!(f = fopen(full, "wb"))) return -1;
    fprintf(f, "stand-in %s\n", rel);
    fclose(f);
    if (stat(full, &st) != 0) return -1;
    meta->size = (int64_t)st.st_size;
    meta->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    meta->ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
    meta->dev = (uint64_t)st.st_dev;
    meta->ino = (uint64_t)st.st_ino;
    return 0;
}

/* Records n files in the database at dir (made by `clipdb init`) for its default model:
** NNN/img_NNNNNNN.jpg under files_root (created there, see bench_db_real_file) or, when
** files_root is NULL, under the root /bench/photos that does not exist; each with a
** unique hash, 640 x 480, and a vector of draw()s. 0 on success; else the reason on
** stderr, after who. */
static inline int bench_db_fill(const char *dir, int64_t n, const char *files_root,
                                float (*draw)(void), const char *who) {
    cdb_db *db = NULL;
    cdb_db_batch *b = NULL;
    cdb_db_model dm;
    cdb_db_params p = cdb_db_params_default();
    int64_t root = 0;
    float *v = NULL;
    int rc = -1;
    p.sync = CDB_DB_SYNC_NORMAL;
    if (cdb_db_open(dir, &p, &db) != CDB_OK || cdb_db_model_default(db, &dm) != CDB_OK ||
        cdb_db_root_add(db, files_root ? files_root : "/bench/photos", &root) != CDB_OK ||
        cdb_db_batch_new(db, dm.id, &b) != CDB_OK || !(v = malloc(sizeof *v * (size_t)dm.dim)))
        goto done;
    for (int64_t i = 0; i < n; i++) {
        char rel[64];
        cdb_db_file_meta meta;
        memset(&meta, 0, sizeof meta);
        snprintf(rel, sizeof rel, "%03lld/img_%07lld.jpg", (long long)(i / 1000), (long long)i);
        meta.size = 100000 + i;
        meta.mtime_ns = 1700000000000000000LL + i;
        meta.has_hash = 1;
        memcpy(meta.hash, &i, sizeof i); /* unique */
        meta.width = 640;
        meta.height = 480;
        if (files_root && bench_db_real_file(files_root, rel, &meta) != 0) goto done;
        for (int d = 0; d < dm.dim; d++) v[d] = draw();
        if (cdb_db_batch_put(b, root, rel, &meta, v, dm.dim) != CDB_OK) goto done;
        if (cdb_db_batch_count(b) >= 1000 && cdb_db_batch_commit(b, NULL) != CDB_OK) goto done;
    }
    if (cdb_db_batch_commit(b, NULL) != CDB_OK) goto done;
    rc = 0;
done:
    if (rc) fprintf(stderr, "%s: cannot fill %s: %s\n", who, dir, cdb_errmsg());
    free(v);
    cdb_db_batch_free(b);
    cdb_db_close(db);
    return rc;
}

#endif /* CDB_BENCH_DB_H */
