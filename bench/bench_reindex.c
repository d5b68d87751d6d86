/*
** bench_reindex.c: the nightly reindex at scale (issue 29 part 5), printed.
**
**   bench_reindex [N] [--keep DIR]       (default N = 1,000,000)
**   CLIPDB_BENCH_BIN=PATH bench_reindex ...  rescans with another build's clipdb (the
**   main branch's, for a before/after on one kept database)
**
** A database made by `clipdb init` (the bundled model) and filled through db/ with N
** files that exist: tiny stand-ins under a files root, 1,000 per folder, each recorded
** with its real identity (size, mtime, ctime, device, inode; bench_db.h), so a rescan
** finds them unchanged; the vectors are random (nothing is encoded to fill it), and each
** has a stand-in thumbnail and metadata row, as an ingest leaves them. Then:
** - the baseline: bare stat() of the same N paths, in the same run, twice (the second,
**   with the inodes cached, is the one compared);
** - `clipdb reindex` (a whole process) that finds nothing changed, twice (the second
**   compared), and its time per file as a ratio to stat()'s;
** - `clipdb reindex` after 1% of the files were rewritten (another size and mtime: they
**   are stand-ins, not images, so each is read, fails to decode and is recorded as
**   unusable: the changed path short of the encoder's work).
** The goal: a no-change rescan bound by stat(), not SQLite. At 10^7 the files need 10^7
** inodes (and the shards ~12 GB): `df -i` says whether the filesystem has them.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli_run.h"
#include "db/db.h"
#include "bench_db.h"
#include "bench_util.h"

/* clipdb args... as a whole process; *s: its wall time in seconds. */
static int run(const char *const *args, int show, double *s) {
    double ms = 0;
    int rc = bench_clipdb_run(args, show, &ms);
    if (s) *s = ms / 1e3;
    return rc;
}

/* ---- what an ingest stores besides the rows: a thumbnail and photo metadata per file ----
** Without them every rescan would read every file again (to make the thumbnail, to read
** the metadata: scan.c's needs_thumb / needs_photo), which is not the no-change path a
** real library takes. Stand-in thumbnails (a few bytes) at the database's size setting;
** metadata rows with a perceptual hash (a row without one counts as missing). */

#define EXTRAS_BATCH 1000

typedef struct extras_ud {
    cdb_db *db;
    int px;
    cdb_db_thumb t[EXTRAS_BATCH];
    cdb_db_photo ph[EXTRAS_BATCH];
    int n;
    cdb_status rc;
} extras_ud;

static cdb_status extras_flush(extras_ud *x) {
    cdb_status rc = x->n ? cdb_db_thumbs_put(x->db, x->t, x->n) : CDB_OK;
    if (rc == CDB_OK && x->n) rc = cdb_db_photos_put(x->db, x->ph, x->n);
    x->n = 0;
    return rc;
}

static int extras_one(const cdb_db_file *f, void *ud) {
    static const uint8_t jpeg[] = {0xFF, 0xD8, 0xFF, 0xD9}; /* stand-in bytes */
    extras_ud *x = ud;
    cdb_db_thumb *t = &x->t[x->n];
    cdb_db_photo *ph = &x->ph[x->n];
    memset(t, 0, sizeof *t);
    memset(ph, 0, sizeof *ph);
    t->file_id = ph->file_id = f->id;
    memcpy(t->hash, f->meta.hash, CDB_DB_HASH_BYTES);
    memcpy(ph->hash, f->meta.hash, CDB_DB_HASH_BYTES);
    t->px = x->px;
    t->width = t->height = 1;
    t->jpeg = jpeg;
    t->n_bytes = sizeof jpeg;
    ph->has_phash = 1;
    ph->phash = (uint64_t)f->id;
    ph->phash_format = 2;
    ph->phash_width = f->meta.width;
    ph->phash_height = f->meta.height;
    if (++x->n == EXTRAS_BATCH && (x->rc = extras_flush(x)) != CDB_OK) return 1;
    return 0;
}

/* A thumbnail and a metadata row for every ok file of the database at dir. */
static int fill_extras(const char *dir) {
    extras_ud *x = calloc(1, sizeof *x);
    cdb_db_params p = cdb_db_params_default();
    cdb_status rc;
    if (!x) return -1;
    p.sync = CDB_DB_SYNC_NORMAL;
    rc = cdb_db_open(dir, &p, &x->db);
    if (rc == CDB_OK) rc = cdb_db_thumb_size(x->db, &x->px);
    if (rc == CDB_OK) rc = cdb_db_files_foreach(x->db, 0, CDB_DB_MASK_OK, extras_one, x);
    if (rc == CDB_OK) rc = x->rc;
    if (rc == CDB_OK) rc = extras_flush(x);
    if (rc != CDB_OK) fprintf(stderr, "bench_reindex: thumbnails, metadata: %s\n", cdb_errmsg());
    cdb_db_close(x->db);
    free(x);
    return rc == CDB_OK ? 0 : -1;
}

/* bench_db_fill's relative path of file i. */
static void rel_of(int64_t i, char *buf, size_t size) {
    snprintf(buf, size, "%03lld/img_%07lld.jpg", (long long)(i / 1000), (long long)i);
}

/* Seconds to stat() the n files under root (every path built as the fill named it). */
static double stat_all(const char *root, int64_t n) {
    char path[4096];
    struct stat st;
    int64_t missing = 0;
    size_t len = (size_t)snprintf(path, sizeof path, "%s/", root);
    double t0 = now_s();
    for (int64_t i = 0; i < n; i++) {
        rel_of(i, path + len, sizeof path - len);
        missing += stat(path, &st) != 0;
    }
    if (missing) fprintf(stderr, "bench_reindex: %lld files missing\n", (long long)missing);
    return now_s() - t0;
}

/* Rewrites every 100th file with other contents (size and mtime change). */
static int64_t change_one_percent(const char *root, int64_t n) {
    char path[4096];
    int64_t changed = 0;
    for (int64_t i = 0; i < n; i += 100) {
        FILE *f;
        int len = snprintf(path, sizeof path, "%s/", root);
        rel_of(i, path + len, sizeof path - (size_t)len);
        if (!(f = fopen(path, "wb"))) continue;
        fprintf(f, "changed stand-in number %lld, longer than before\n", (long long)i);
        fclose(f);
        changed++;
    }
    return changed;
}

int main(int argc, char **argv) {
    int64_t n = 1000000;
    const char *keep = NULL, *model = cli_find_model();
    char tmp[] = "/tmp/clipdb-bench-reindex-XXXXXX", dir[4200], db[4300], files[4300];
    double t_stat, t_re, t, per_stat, per_re;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--keep") && i + 1 < argc) keep = argv[++i];
        else n = atoll(argv[i]);
    }
    if (!model) {
        printf("bench_reindex: skipped (no model: models/<name>/ with weights)\n");
        return 0;
    }
    if (keep) snprintf(dir, sizeof dir, "%s", keep);
    else if (mkdtemp(tmp)) snprintf(dir, sizeof dir, "%s", tmp);
    else return perror("mkdtemp"), 1;
    mkdir(dir, 0777);
    snprintf(db, sizeof db, "%s/db", dir);
    snprintf(files, sizeof files, "%s/files", dir);
    printf("bench_reindex: N=%lld files, model %s, in %s\n", (long long)n, model, dir);
    fflush(stdout);
    if (!file_exists(db)) {
        t = now_s();
        mkdir(files, 0777);
        if (run((const char *[]){"init", "--db", db, "--model", model, NULL}, 1, NULL) != 0 ||
            bench_db_fill(db, n, files, bench_rnd_normal, "bench_reindex") != 0)
            return 1;
        printf("filled: %lld files created and catalogued in %.1f s\n", (long long)n,
               now_s() - t);
    }
    if (fill_extras(db) != 0) return 1; /* again for a kept one: puts replace */
    stat_all(files, n); /* the inodes into the cache, as for the rescans */
    t_stat = stat_all(files, n);
    per_stat = t_stat / (double)n * 1e6;
    printf("baseline: stat() of the %lld files: %.2f s, %.2f us per file\n", (long long)n, t_stat,
           per_stat);
    fflush(stdout);
    for (int r = 0; r < 2; r++) /* the first warms the catalog's pages */
        if (run((const char *[]){"reindex", "--db", db, "-q", NULL}, r == 0, &t_re) != 0) {
            fprintf(stderr, "bench_reindex: reindex failed\n");
            return 1;
        }
    per_re = t_re / (double)n * 1e6;
    printf("reindex, nothing changed: %.2f s, %.2f us per file = %.1fx stat()\n", t_re, per_re,
           per_re / per_stat);
    fflush(stdout);
    int64_t changed = change_one_percent(files, n);
    if (run((const char *[]){"reindex", "--db", db, "-q", NULL}, 0, &t_re) < 0) {
        fprintf(stderr, "bench_reindex: reindex failed\n");
        return 1;
    }
    per_re = t_re / (double)n * 1e6;
    printf("reindex, %lld changed (1%%): %.2f s, %.2f us per file = %.1fx stat()\n",
           (long long)changed, t_re, per_re, per_re / per_stat);
    if (!keep) rm_rf(dir);
    else printf("(kept in %s)\n", dir);
    return 0;
}
