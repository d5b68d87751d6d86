/*
** test_snapshot.c: index/snapshot.c, the vector snapshot. The oracle is the source's
** own arrays: every id maps back to its bytes, ids it lacks to NULL. A snapshot that
** is truncated, extended, bit-flipped (header, padding, ids, vectors: with its stamp, whose file
** identity the write changes, and without), of another vector set or another dim, or
** not a snapshot at all is refused with a reason; a failed write (the source's error,
** ids out of order) leaves the old file whole and no temporary behind.
*/
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdb_test.h"
#include "read_file.h"
#define KTU_SPLITMIX_SEED 4242
#include "kernel_test_util.h"
#include "index/index.h"

typedef struct arrays {
    int64_t n;
    int dim;
    int64_t *ids;
    uint16_t *vecs;
    int64_t fail_at; /* read of a position past this fails (-1: never) */
    int shuffle;     /* 1: two ids swapped (not ascending) */
} arrays;

static cdb_status arrays_read(void *ctx, int64_t pos, int64_t n, int64_t *ids, uint16_t *vecs) {
    arrays *a = ctx;
    if (a->fail_at >= 0 && pos + n > a->fail_at) return cdb_seterr(CDB_IO, "source failed");
    memcpy(ids, a->ids + pos, (size_t)n * sizeof *ids);
    memcpy(vecs, a->vecs + (size_t)pos * a->dim, (size_t)n * a->dim * 2);
    if (a->shuffle && n > 2) {
        int64_t t = ids[0];
        ids[0] = ids[1], ids[1] = t;
    }
    return CDB_OK;
}

/* n vectors of random fp16 bits (finite), ids 3*i + 1 (gaps between). */
static arrays make_arrays(int64_t n, int dim) {
    arrays a = {n, dim, malloc((size_t)(n ? n : 1) * 8), malloc((size_t)(n ? n : 1) * dim * 2),
                -1, 0};
    for (int64_t i = 0; i < n; i++) a.ids[i] = 3 * i + 1;
    for (size_t i = 0; i < (size_t)n * dim; i++) a.vecs[i] = to_half(rng_gauss());
    return a;
}

static cdb_index_source source_of(arrays *a) {
    cdb_index_source s = {a->n, arrays_read, a};
    return s;
}

static char g_dir[64];

static const char *tmp_path(const char *name, char *buf, size_t size) {
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "/tmp/cdb_snap_testXXXXXX");
        if (!mkdtemp(g_dir)) return NULL;
    }
    snprintf(buf, size, "%s/%s", g_dir, name);
    return buf;
}

/* Every id of a maps to its own bytes, and the ids between them to nothing. */
static int matches(const cdb_index_snap *s, const arrays *a) {
    if (cdb_index_snap_count(s) != a->n || cdb_index_snap_dim(s) != a->dim) return 0;
    for (int64_t i = 0; i < a->n; i++) {
        const uint16_t *v = cdb_index_snap_find(s, a->ids[i]);
        if (!v || memcmp(v, a->vecs + (size_t)i * a->dim, (size_t)a->dim * 2)) return 0;
        if (cdb_index_snap_find(s, a->ids[i] + 1) || cdb_index_snap_find(s, a->ids[i] - 1))
            return 0;
        if (cdb_index_snap_ids(s)[i] != a->ids[i]) return 0;
    }
    return !cdb_index_snap_find(s, -1) && !cdb_index_snap_find(s, 3 * a->n + 1);
}

static void flip_byte(const char *path, off_t at) {
    int fd = open(path, O_RDWR);
    unsigned char c = 0;
    if (fd < 0) return;
    if (pread(fd, &c, 1, at) == 1) {
        c ^= 0x10;
        if (pwrite(fd, &c, 1, at) != 1) c = 0;
    }
    close(fd);
}

static off_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

static void copy_file(const char *from, const char *to) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cp -p '%s' '%s'", from, to);
    if (system(cmd) != 0) fprintf(stderr, "copy failed: %s\n", cmd);
}

CDB_TEST(snapshot_roundtrip_against_source) {
    char path[128];
    int sizes[] = {0, 1, 5000, 40000};
    for (int t = 0; t < 4; t++) {
        arrays a = make_arrays(sizes[t], t == 3 ? 7 : 64);
        cdb_index_source src = source_of(&a);
        cdb_index_snap *s = NULL;
        CHECK(tmp_path("rt.snap", path, sizeof path));
        CHECK_OK(cdb_index_snap_write(path, 5, a.dim, 1000 + t, &src));
        CHECK_OK(cdb_index_snap_open(path, 5, a.dim, 0, &s));
        CHECK(matches(s, &a));
        CHECK_EQ_INT(cdb_index_snap_watermark(s), 1000 + t);
        cdb_index_snap_close(s);
        /* the whole check (no stamp trusted) agrees */
        CHECK_OK(cdb_index_snap_open(path, -1, 0, CDB_INDEX_SNAP_VERIFY, &s));
        CHECK(matches(s, &a));
        cdb_index_snap_close(s);
        free(a.ids), free(a.vecs);
    }
    CHECK_RC(cdb_index_snap_open("/nonexistent/x.snap", 5, 64, 0, &(cdb_index_snap *){0}),
             CDB_NOTFOUND);
}

CDB_TEST(snapshot_damage_is_refused) {
    char path[128], good[128], stamp[160];
    arrays a = make_arrays(3000, 32);
    cdb_index_source src = source_of(&a);
    cdb_index_snap *s = NULL;
    off_t size, ids_at = 4096, vecs_at;
    CHECK(tmp_path("dmg.snap", path, sizeof path) && tmp_path("good.snap", good, sizeof good));
    snprintf(stamp, sizeof stamp, "%s.ok", path);
    CHECK_OK(cdb_index_snap_write(good, 9, 32, 77, &src));
    size = file_size(good);
    vecs_at = size - (off_t)3000 * 32 * 2;
    /* the vector set and dim asked for */
    CHECK_RC(cdb_index_snap_open(good, 8, 32, 0, &s), CDB_CORRUPT);
    CHECK_RC(cdb_index_snap_open(good, 9, 16, 0, &s), CDB_DIM_MISMATCH);
    CHECK(s == NULL);
    {
        /* damage at: the magic, the header's counts, its padding, the ids, their padding,
        ** the vectors (first and last byte); each with the good file's stamp and without */
        off_t at[] = {0, 40, 2000, ids_at + 8 * 17, ids_at + 8 * 3000 + 10, vecs_at, size - 1};
        for (int i = 0; i < 7; i++)
            for (int with_stamp = 0; with_stamp < 2; with_stamp++) {
                unlink(path), unlink(stamp);
                CHECK_OK(cdb_index_snap_write(path, 9, 32, 77, &src)); /* stamped */
                if (!with_stamp) unlink(stamp);
                usleep(20000); /* the write then changes the file's ctime: a coarse clock */
                flip_byte(path, at[i]);
                CHECK_MSG(cdb_index_snap_open(path, 9, 32, 0, &s) == CDB_CORRUPT,
                          "damage at %lld (stamp %d) was not refused", (long long)at[i],
                          with_stamp);
                CHECK(s == NULL);
            }
    }
    /* truncated, extended */
    copy_file(good, path);
    unlink(stamp);
    CHECK(truncate(path, size - 1) == 0);
    CHECK_RC(cdb_index_snap_open(path, 9, 32, 0, &s), CDB_CORRUPT);
    CHECK(truncate(path, size + 4096) == 0);
    CHECK_RC(cdb_index_snap_open(path, 9, 32, 0, &s), CDB_CORRUPT);
    CHECK(truncate(path, 100) == 0);
    CHECK_RC(cdb_index_snap_open(path, 9, 32, 0, &s), CDB_CORRUPT);
    /* not a snapshot */
    {
        FILE *f = fopen(path, "wb");
        for (int i = 0; f && i < 10000; i++) fputc(i * 7, f);
        if (f) fclose(f);
    }
    CHECK_RC(cdb_index_snap_open(path, 9, 32, 0, &s), CDB_CORRUPT);
    /* the good one, untouched, still opens */
    CHECK_OK(cdb_index_snap_open(good, 9, 32, 0, &s));
    CHECK(matches(s, &a));
    cdb_index_snap_close(s);
    free(a.ids), free(a.vecs);
}

/* How many names "<name>.tmp.*" the test folder holds. */
static int temps_left(const char *name) {
    char prefix[128];
    int n = 0;
    DIR *d = opendir(g_dir);
    struct dirent *e;
    snprintf(prefix, sizeof prefix, "%s.tmp.", name);
    while (d && (e = readdir(d)))
        n += !strncmp(e->d_name, prefix, strlen(prefix));
    if (d) closedir(d);
    return n;
}

CDB_TEST(snapshot_failed_write_leaves_old_file) {
    char path[128], tmp[200];
    arrays a = make_arrays(50000, 16), b = make_arrays(50000, 16);
    cdb_index_source sa = source_of(&a), sb = source_of(&b);
    cdb_index_snap *s = NULL;
    CHECK(tmp_path("fail.snap", path, sizeof path));
    CHECK_OK(cdb_index_snap_write(path, 1, 16, 5, &sa));
    b.fail_at = 30000; /* the source fails midway */
    CHECK_RC(cdb_index_snap_write(path, 1, 16, 6, &sb), CDB_IO);
    b.fail_at = -1, b.shuffle = 1; /* ids out of order */
    CHECK_RC(cdb_index_snap_write(path, 1, 16, 6, &sb), CDB_INVALID);
    CHECK_EQ_INT(temps_left("fail.snap"), 0);
    CHECK_OK(cdb_index_snap_open(path, 1, 16, 0, &s));
    CHECK(matches(s, &a));
    CHECK_EQ_INT(cdb_index_snap_watermark(s), 5);
    cdb_index_snap_close(s);
    /* a temporary left by a writer that died is removed by the next writer */
    snprintf(tmp, sizeof tmp, "%s.tmp.999999", path);
    {
        FILE *f = fopen(tmp, "w");
        if (f) fclose(f);
    }
    b.shuffle = 0;
    CHECK_OK(cdb_index_snap_write(path, 1, 16, 7, &sb));
    CHECK(access(tmp, F_OK) != 0);
    CHECK_OK(cdb_index_snap_open(path, 1, 16, 0, &s));
    CHECK(matches(s, &b));
    cdb_index_snap_close(s);
    free(a.ids), free(a.vecs), free(b.ids), free(b.vecs);
}

/* Someone who can write to the database folder plants links at every temporary name
** this process would use ("<file>.tmp.<pid>" and "<file>.tmp.<pid>.<n>", of the snapshot,
** its stamp and the index) pointing at a file of the victim's: the writes must leave that
** file's bytes alone and no link at the snapshot's or index's name. */
CDB_TEST(writes_never_follow_planted_links) {
    char path[128], ix_path[128], victim[128], name[256];
    arrays a = make_arrays(300, 16);
    cdb_index_source sa = source_of(&a);
    CHECK(tmp_path("planted.snap", path, sizeof path));
    CHECK(tmp_path("planted.cdbidx", ix_path, sizeof ix_path));
    CHECK(tmp_path("victim", victim, sizeof victim));
    FILE *f = fopen(victim, "w");
    CHECK(f && fputs("the victim's bytes\n", f) >= 0 && fclose(f) == 0);
    const char *bases[3] = {path, NULL, ix_path};
    char ok_path[160];
    snprintf(ok_path, sizeof ok_path, "%s.ok", path);
    bases[1] = ok_path;
    int planted = 0;
    for (int b = 0; b < 3; b++)
        for (int k = -1; k < 64; k++) {
            if (k < 0) snprintf(name, sizeof name, "%s.tmp.%ld", bases[b], (long)getpid());
            else snprintf(name, sizeof name, "%s.tmp.%ld.%d", bases[b], (long)getpid(), k);
            planted += symlink(victim, name) == 0;
        }
    CHECK_EQ_INT(planted, 3 * 65);
    cdb_status rc = cdb_index_snap_write(path, 1, 16, 5, &sa); /* may refuse: never follow */
    cdb_index *ix = NULL;
    cdb_index_params p = cdb_index_params_default();
    p.kind = CDB_INDEX_FLAT;
    p.dim = 16;
    CHECK_OK(cdb_index_build(&p, &sa, &ix));
    (void)cdb_index_save(ix, ix_path); /* may refuse: never follow */
    cdb_index_free(ix);
    char *bytes = NULL;
    size_t len = 0;
    f = fopen(victim, "r");
    CHECK(f != NULL);
    bytes = calloc(1, 256);
    len = fread(bytes, 1, 255, f);
    fclose(f);
    CHECK_MSG(len == 19 && !strcmp(bytes, "the victim's bytes\n"), "victim overwritten: %zu "
              "bytes", len);
    free(bytes);
    struct stat st;
    CHECK(lstat(path, &st) != 0 || S_ISREG(st.st_mode));
    CHECK(lstat(ix_path, &st) != 0 || S_ISREG(st.st_mode));
    if (rc == CDB_OK) {
        cdb_index_snap *s = NULL;
        CHECK_OK(cdb_index_snap_open(path, 1, 16, 0, &s));
        CHECK(matches(s, &a));
        cdb_index_snap_close(s);
    }
    free(a.ids), free(a.vecs);
}

/* A FIFO (or a link) where a snapshot or an index is read: refused at once as no such
** file, never an open that waits for a writer (the test would hang). */
CDB_TEST(fifo_or_link_is_no_snapshot_or_index) {
    char fifo[128], link[128];
    cdb_index_snap *s = NULL;
    cdb_index *ix = NULL;
    CHECK(tmp_path("fifo.snap", fifo, sizeof fifo));
    CHECK(tmp_path("link.snap", link, sizeof link));
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK(symlink("/etc/passwd", link) == 0);
    CHECK_RC(cdb_index_snap_open(fifo, 1, 16, 0, &s), CDB_CORRUPT);
    CHECK_RC(cdb_index_snap_open(link, 1, 16, 0, &s), CDB_CORRUPT);
    CHECK_RC(cdb_index_load(fifo, &ix), CDB_CORRUPT);
    CHECK_RC(cdb_index_load(link, &ix), CDB_CORRUPT);
    CHECK(s == NULL && ix == NULL);
}

/* Writes n bytes to path (created or emptied); 0, or -1. */
static int put_file(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(b, 1, n, f) == n;
    return f && fclose(f) == 0 && ok ? 0 : -1;
}

/* An HNSW index file with one byte changed anywhere (header, FAISS's graph and vectors,
** the end mark, the sum) is refused before FAISS reads it: a flipped byte of the graph
** crashed every search. A version 1 file (no sum) is refused as such. */
CDB_TEST(index_damage_is_refused) {
    char path[128];
    arrays a = make_arrays(400, 16);
    cdb_index_source sa = source_of(&a);
    cdb_index *ix = NULL;
    cdb_index_params p = cdb_index_params_default();
    p.kind = CDB_INDEX_HNSW;
    p.dim = 16;
    CHECK(tmp_path("damage.cdbidx", path, sizeof path));
    CHECK_OK(cdb_index_build(&p, &sa, &ix));
    CHECK_OK(cdb_index_save(ix, path));
    cdb_index_free(ix);
    size_t n = 0;
    unsigned char *good = test_read_file(path, &n);
    CHECK(good != NULL && n > 4096);
    ix = NULL;
    CHECK_OK(cdb_index_load(path, &ix));
    cdb_index_free(ix);
    int refused = 0, tries = 0;
    for (size_t at = 0; at < n; at += 1 + rng_next() % (n / 150 + 1), tries++) {
        unsigned char *bad = malloc(n);
        CHECK(bad != NULL);
        memcpy(bad, good, n);
        bad[at] ^= (unsigned char)(1u << (rng_next() % 8));
        CHECK(put_file(path, bad, n) == 0);
        ix = NULL;
        cdb_status rc = cdb_index_load(path, &ix);
        refused += rc != CDB_OK;
        CHECK_MSG(rc != CDB_OK, "byte %zu of %zu flipped: loaded", at, n);
        cdb_index_free(ix);
        free(bad);
    }
    CHECK(tries > 100 && refused == tries);
    unsigned char *v1 = malloc(n); /* version 1: the same bytes, no sum */
    CHECK(v1 != NULL);
    memcpy(v1, good, n - 8);
    v1[8] = 1, v1[9] = v1[10] = v1[11] = 0;
    CHECK(put_file(path, v1, n - 8) == 0);
    ix = NULL;
    CHECK_RC(cdb_index_load(path, &ix), CDB_VERSION);
    free(v1);
    free(good);
    free(a.ids), free(a.vecs);
}

CDB_TEST_MAIN(snapshot_roundtrip_against_source, snapshot_damage_is_refused,
              snapshot_failed_write_leaves_old_file, writes_never_follow_planted_links,
              fifo_or_link_is_no_snapshot_or_index, index_damage_is_refused)
