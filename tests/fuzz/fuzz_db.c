/*
** fuzz_db.c: libFuzzer target for opening a corrupted database (db/db.h).
**
** At start-up a small valid database is built with the db API itself (one model,
** two roots, ok/error/deleted/moved files, vectors in a shard, two runs), and its
** catalog.db and shard file are kept in memory. Each input then damages one of the
** two files and the damaged database is opened read-only and fully read (counts,
** models, roots, files, runs, vectors by iterator and by id, generations, the quick
** shard check and the full verify); when asked, it is then opened as the writer,
** verified and repaired. SQLite (Debian's, not instrumented) must turn the damage
** into errors; db/ must turn those into clean cdb_status values: no crash, no
** sanitizer report, no leak, no hang.
**
** Input: byte 0 = flags: bit 0 which file (0 catalog.db, 1 the shard), bit 1 also
** open as the writer and repair, bits 2-3 the damage: 0 patch, 1 truncate, 2 patch
** then truncate, 3 replace the file by the rest of the input. Patch records are 4
** bytes: a 24-bit big-endian offset (modulo the file size) and the byte to write
** there. Truncation takes a 24-bit length (modulo the file size) from the next 3
** bytes. Patching a valid file keeps the damage where SQLite and db/ look.
*/
#include <dirent.h>
#include <stdint.h>
#include <string.h>

#include "db/db.h"
#include "fuzz_util.h"

#define DIM 8

static char g_tmpl[512], g_dir[512];
static char g_shard_name[256];
static uint8_t *g_file[2];
static size_t g_size[2];

static void die(const char *what) {
    fprintf(stderr, "fuzz_db set-up: %s: %s\n", what, cdb_errmsg());
    abort();
}

static void make_template(void) {
    cdb_db_params p = cdb_db_params_default();
    cdb_db *db = NULL;
    cdb_db_batch *b = NULL;
    int64_t model, root, root2, run, ids[8];
    cdb_db_file_meta meta;
    float v[DIM];
    char path[1024];
    DIR *d;
    struct dirent *e;

    snprintf(g_tmpl, sizeof g_tmpl, "%s", fuzz_tmpdir("dbtmpl"));
    snprintf(path, sizeof path, "%s/db", g_tmpl);
    p.create = 1;
    p.sync = CDB_DB_SYNC_NORMAL;
    if (cdb_db_open(path, &p, &db) != CDB_OK) die("create");
    if (cdb_db_model_register(db, "0123456789abcdef", "tiny", DIM, "{\"dim\": 8}", &model))
        die("model");
    if (cdb_db_root_add(db, "/photos", &root) || cdb_db_root_add(db, "/other", &root2))
        die("root");
    if (cdb_db_run_begin(db, "ingest", &run)) die("run");
    if (cdb_db_batch_new(db, model, &b)) die("batch");
    for (int i = 0; i < 5; i++) {
        char rel[64];
        memset(&meta, 0, sizeof meta);
        meta.size = 1000 + i;
        meta.mtime_ns = 1700000000000000000LL + i;
        meta.has_hash = 1;
        memset(meta.hash, 0x10 + i, sizeof meta.hash);
        meta.width = 64, meta.height = 48;
        for (int k = 0; k < DIM; k++) v[k] = (float)((k * 7 + i * 3) % 5) - 2.0f + 0.1f * k;
        snprintf(rel, sizeof rel, "dir/img_%d.jpg", i);
        if (cdb_db_batch_put(b, i < 4 ? root : root2, rel, &meta, v, DIM)) die("put");
    }
    memset(&meta, 0, sizeof meta);
    meta.size = 7;
    if (cdb_db_batch_put_error(b, root, "broken.png", &meta, "PNG: corrupt")) die("put_error");
    if (cdb_db_batch_commit(b, ids)) die("commit 1");
    memset(&meta, 0, sizeof meta);
    meta.size = 1001;
    meta.mtime_ns = 1800000000000000000LL;
    meta.has_hash = 1;
    memset(meta.hash, 0x11, sizeof meta.hash);
    if (cdb_db_batch_delete(b, ids[0]) || cdb_db_batch_move(b, ids[1], "moved/img_1.jpg", &meta))
        die("delete/move");
    if (cdb_db_batch_commit(b, NULL)) die("commit 2");
    /* the library model's rows (schema 5): a file root, a retry, a walk problem */
    int64_t file_root = 0;
    if (cdb_db_root_create(db, "/single.jpg", CDB_DB_ROOT_FILE, 0, &file_root) ||
        cdb_db_root_set_scan(db, root, 42, NULL, "ok") || cdb_db_root_set_options(db, root2, 1, 1))
        die("roots");
    for (int k = 0; k < DIM; k++) v[k] = 0.5f + (float)k;
    memset(&meta, 0, sizeof meta);
    meta.size = 9, meta.dev = 1, meta.ino = 2, meta.ctime_ns = 3;
    if (cdb_db_batch_put(b, file_root, "", &meta, v, DIM) ||
        cdb_db_batch_put_retry(b, root2, "locked.jpg", &meta, "cannot open: Permission denied") ||
        cdb_db_batch_commit(b, NULL))
        die("commit 3");
    cdb_db_walk_problem wp = {0, "dir/locked", "cannot open folder (Permission denied)", 0};
    if (cdb_db_walk_problems_set(db, root, NULL, &wp, 1)) die("walk problems");
    cdb_db_batch_free(b);
    if (cdb_db_run_finish(db, run, "ok", "{\"added\": 5}")) die("run finish");
    cdb_db_close(db);

    snprintf(path, sizeof path, "%s/db/catalog.db", g_tmpl);
    if (!(g_file[0] = fuzz_read_file(path, &g_size[0]))) die("read catalog");
    snprintf(path, sizeof path, "%s/db/shards", g_tmpl);
    if (!(d = opendir(path))) die("shards dir");
    while ((e = readdir(d)))
        if (strlen(e->d_name) > 3 && !strcmp(e->d_name + strlen(e->d_name) - 3, ".db"))
            snprintf(g_shard_name, sizeof g_shard_name, "%s", e->d_name);
    closedir(d);
    if (!g_shard_name[0]) die("no shard file");
    snprintf(path, sizeof path, "%s/db/shards/%s", g_tmpl, g_shard_name);
    if (!(g_file[1] = fuzz_read_file(path, &g_size[1]))) die("read shard");
    snprintf(path, sizeof path, "%s/db/catalog.db-wal", g_tmpl);
    FUZZ_CHECK(access(path, F_OK) != 0, "a closed database left a WAL file");
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    char path[600];
    (void)argc, (void)argv;
    fuzz_quiet();
    make_template();
    snprintf(g_dir, sizeof g_dir, "%s", fuzz_tmpdir("db"));
    snprintf(path, sizeof path, "%s/shards", g_dir);
    if (mkdir(path, 0755) != 0) abort();
    if (getenv("FUZZ_DB_VERBOSE"))
        fprintf(stderr, "fuzz_db: catalog %zu bytes, shard %s %zu bytes\n", g_size[0],
                g_shard_name, g_size[1]);
    return 0;
}

/* ---- reading everything ------------------------------------------------------------- */

static int on_model(const cdb_db_model *m, void *ud) {
    (void)ud;
    FUZZ_CHECK(memchr(m->name, 0, sizeof m->name) && memchr(m->weights_hash, 0, sizeof m->weights_hash),
               "model strings not terminated");
    return 0;
}
static int on_root(const cdb_db_root *r, void *ud) {
    cdb_db *db = ud;
    cdb_db_root info;
    cdb_db_root_counts rc;
    int64_t live;
    FUZZ_CHECK(r->path != NULL, "root without a path");
    if (r->status) (void)strlen(r->status);
    if (db && cdb_db_root_info(db, r->id, &info) == CDB_OK) {
        FUZZ_CHECK(info.path != NULL && !strcmp(info.path, r->path), "root info differs");
        cdb_db_root_clear(&info);
    }
    if (db) {
        (void)cdb_db_root_get_counts(db, r->id, 0, &rc);
        (void)cdb_db_root_count_live(db, r->id, &live);
    }
    return 0;
}
static int on_walk_problem(const cdb_db_walk_problem *p, void *ud) {
    (void)ud;
    FUZZ_CHECK(p->relpath && p->reason, "walk problem without text");
    (void)strlen(p->relpath), (void)strlen(p->reason);
    return 0;
}
static int on_file(const cdb_db_file *f, void *ud) {
    int64_t *ids = ud;
    FUZZ_CHECK(f->relpath != NULL, "file %lld without relpath", (long long)f->id);
    (void)strlen(f->relpath);
    if (f->error) (void)strlen(f->error);
    if (ids[0] < 16) ids[1 + ids[0]++] = f->id;
    return 0;
}
static int on_run(const cdb_db_run *r, void *ud) {
    (void)ud;
    if (r->kind) (void)strlen(r->kind);
    if (r->status) (void)strlen(r->status);
    if (r->summary_json) (void)strlen(r->summary_json);
    return 0;
}
static int on_seq(int64_t file_id, int64_t seq, void *ud) {
    (void)file_id, (void)seq, (void)ud;
    return 0;
}

static void check_report(cdb_db_report *r) {
    if (!r) return;
    FUZZ_CHECK(r->n_listed >= 0 && r->n_listed <= 1000 && r->n_problems >= r->n_listed,
               "report: %d listed of %lld", r->n_listed, (long long)r->n_problems);
    for (int i = 0; i < r->n_listed; i++)
        FUZZ_CHECK(memchr(r->problems[i].msg, 0, sizeof r->problems[i].msg), "msg unterminated");
}

static void read_all(cdb_db *db) {
    cdb_db_counts counts;
    cdb_db_model dm;
    cdb_db_report *rep = NULL;
    cdb_db_iter *it = NULL;
    int64_t fids[17] = {0}, gen, got[16];
    int dim = DIM;

    (void)cdb_db_get_counts(db, 0, &counts);
    (void)cdb_db_models_foreach(db, on_model, NULL);
    (void)cdb_db_roots_foreach(db, on_root, db);
    (void)cdb_db_walk_problems_foreach(db, 0, on_walk_problem, NULL);
    (void)cdb_db_files_foreach(db, 0, CDB_DB_MASK_ALL, on_file, fids);
    (void)cdb_db_runs_foreach(db, 0, on_run, NULL);
    (void)cdb_db_generation(db, &gen);
    if (cdb_db_model_default(db, &dm) == CDB_OK) {
        char *json = NULL;
        FUZZ_CHECK(dm.dim > 0 || dm.dim <= 0, "unreachable");
        if (cdb_db_model_info(db, dm.id, &json) == CDB_OK) cdb_free(json);
        (void)cdb_db_added_since(db, dm.id, 0, on_seq, NULL);
        (void)cdb_db_removed_since(db, dm.id, 0, on_seq, NULL);
        if (dm.dim == DIM) {
            float f32[16 * DIM];
            uint16_t f16[16 * DIM];
            uint8_t found[16];
            int n_out = 0, rounds = 0;
            if (fids[0] > 0)
                (void)cdb_db_vectors_get(db, dm.id, fids + 1, (int)fids[0], f32, found);
            if (cdb_db_iter_new(db, dm.id, &it) == CDB_OK) {
                while (rounds++ < 64 &&
                       cdb_db_iter_read(it, 16, got, f32, f16, &n_out) == CDB_OK && n_out > 0)
                    FUZZ_CHECK(n_out <= 16, "iter read %d > cap", n_out);
                cdb_db_iter_free(it);
            }
        }
        for (int i = 0; i < (int)fids[0]; i++) {
            cdb_db_file f;
            char *path = NULL;
            int has;
            if (cdb_db_file_get(db, fids[1 + i], &f) == CDB_OK) cdb_db_file_clear(&f);
            if (cdb_db_file_path(db, fids[1 + i], &path) == CDB_OK) cdb_free(path);
            (void)cdb_db_file_has_vector(db, dm.id, fids[1 + i], &has);
        }
    }
    (void)dim;
    if (cdb_db_check_shards(db, &rep) == CDB_OK) check_report(rep);
    cdb_db_report_free(rep);
    rep = NULL;
    if (cdb_db_verify(db, &rep) == CDB_OK) check_report(rep);
    cdb_db_report_free(rep);
}

static void put_files(const uint8_t *data, size_t n) {
    const int which = data[0] & 1, mode = (data[0] >> 2) & 3;
    const uint8_t *p = data + 1, *end = data + n;
    uint8_t *buf = NULL;
    size_t size = g_size[which];
    char path[1024];

    if (mode == 3) {
        buf = malloc(end - p + 1);
        memcpy(buf, p, (size_t)(end - p));
        size = (size_t)(end - p);
    } else {
        buf = malloc(size);
        memcpy(buf, g_file[which], size);
        if (mode == 1 || mode == 2) {
            if (end - p >= 3) {
                size_t len = ((size_t)p[0] << 16 | (size_t)p[1] << 8 | p[2]) % (size + 1);
                p += 3;
                if (mode == 1) size = len;
                else if (len < size) size = size - (len % 4096); /* cut the tail below */
            }
        }
        if (mode == 0 || mode == 2)
            for (; end - p >= 4; p += 4) {
                size_t off = ((size_t)p[0] << 16 | (size_t)p[1] << 8 | p[2]) % g_size[which];
                if (off < size) buf[off] = p[3];
            }
    }
    snprintf(path, sizeof path, "%s/catalog.db", g_dir);
    if (fuzz_write_file(path, which == 0 ? buf : g_file[0], which == 0 ? size : g_size[0])) abort();
    snprintf(path, sizeof path, "%s/shards/%s", g_dir, g_shard_name);
    if (fuzz_write_file(path, which == 1 ? buf : g_file[1], which == 1 ? size : g_size[1])) abort();
    free(buf);
    /* leftovers of the previous run */
    snprintf(path, sizeof path, "%s/catalog.db-wal", g_dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/catalog.db-shm", g_dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/shards/%s-wal", g_dir, g_shard_name);
    unlink(path);
    snprintf(path, sizeof path, "%s/shards/%s-shm", g_dir, g_shard_name);
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    cdb_db_params p = cdb_db_params_default();
    cdb_db *db = NULL;
    cdb_status rc;
    if (n < 1) return 0;
    put_files(data, n);

    p.readonly = 1;
    p.busy_timeout_ms = 50;
    rc = cdb_db_open(g_dir, &p, &db);
    if (rc == CDB_OK) {
        read_all(db);
        cdb_db_close(db);
    } else {
        FUZZ_CHECK(db == NULL, "failed open left a handle");
        FUZZ_CHECK(cdb_errmsg()[0] != 0, "open failed (%s) without a message", cdb_status_str(rc));
    }

    if (data[0] & 2) {
        p = cdb_db_params_default();
        p.busy_timeout_ms = 50;
        p.sync = CDB_DB_SYNC_NORMAL;
        if (cdb_db_open(g_dir, &p, &db) == CDB_OK) {
            cdb_db_report *rep = NULL;
            int64_t fixed = 0;
            if (cdb_db_verify(db, &rep) == CDB_OK) {
                check_report(rep);
                (void)cdb_db_repair(db, rep, &fixed);
            }
            cdb_db_report_free(rep);
            cdb_db_close(db);
        }
    }
    return 0;
}
