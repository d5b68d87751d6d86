/*
** test_rowfile.c: the one way from a catalog row to a photo's bytes
** (cdb_eng_open_row, engine/library/rowfile.c), in-process, no model needed. The oracle is
** the file's own bytes, kept aside when it was "recorded" (stat'ed as a scan does).
**
**   row_cases       each thing that can take a photo's place, one at a time: a
**                   symbolic link (outside, or to the photo itself), a hard link to
**                   another file, a same-size replacement with the same mtime, a
**                   touched file, a FIFO, a socket, a folder, a device (through a
**                   link of a root that follows them), a folder above it swapped for
**                   a link (even one reaching the very same inode), a folder above it
**                   gone or a file; a legacy row (no dev/ino) compares size and mtime
**   row_race        a property test: a second thread keeps swapping the photos of a
**                   tree between the real file, a link, a FIFO, a socket, another file
**                   of the same size and mtime, a folder, and their folder for a link,
**                   while this one opens them by row: every successful open reads
**                   exactly the recorded bytes, and no open takes long
**   reader_fifo     the ingest readers' cdb_eng_read_photo does not block on a FIFO
*/
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

#include "engine/library/library.h"
#include "library/lib_util.h"

static char g_tmp[512];

static void cleanup(void) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_tmp);
}

static const char *tmp_path(char *buf, size_t size, const char *rel) {
    if (!g_tmp[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(g_tmp, sizeof g_tmp, "%s/clipdb-rowfile-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(g_tmp)) g_tmp[0] = '\0';
        else atexit(cleanup);
    }
    snprintf(buf, size, "%s/%s", g_tmp, rel);
    return buf;
}

static int write_file(const char *path, const unsigned char *b, size_t n) {
    return lu_write(path, b, n);
}

static void fill(unsigned char *b, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        b[i] = (unsigned char)(seed >> 16);
    }
}

static void set_mtime(const char *path, int64_t ns) {
    if (lu_set_mtime(path, ns) != 0) fprintf(stderr, "    cannot set the mtime of %s\n", path);
}

/* Opens ref: the outcome; on success the bytes must be want's exactly. */
static eng_open_rc open_check(const eng_row_ref *ref, const unsigned char *want, size_t n,
                              int *bytes_ok) {
    int fd = -1;
    struct stat st;
    eng_open_rc rc = cdb_eng_open_row(ref, &fd, &st, NULL, 0);
    *bytes_ok = 1;
    if (rc == ENG_OPEN_OK) {
        unsigned char *got = malloc(n + 1);
        ssize_t k = got ? pread(fd, got, n + 1, 0) : -1;
        *bytes_ok = k == (ssize_t)n && !memcmp(got, want, n) &&
                    !(fcntl(fd, F_GETFL) & O_NONBLOCK);
        free(got);
        close(fd);
    } else {
        *bytes_ok = fd == -1;
    }
    return rc;
}

#define PHOTO_BYTES 5000

CDB_TEST(row_cases) {
    char root[600], dir[700], photo[800], p[800], q[800], out[700];
    unsigned char orig[PHOTO_BYTES], other[PHOTO_BYTES];
    cdb_db_file_meta rec;
    struct stat st;
    eng_row_ref ref = {NULL, "a/b/photo.jpg", 0, &rec};
    int ok;
    tmp_path(root, sizeof root, "cases");
    snprintf(dir, sizeof dir, "%s/a/b", root);
    snprintf(photo, sizeof photo, "%s/photo.jpg", dir);
    tmp_path(out, sizeof out, "outside");
    CHECK(g_tmp[0] && mkdir(root, 0755) == 0 && mkdir(out, 0755) == 0);
    snprintf(p, sizeof p, "%s/a", root);
    CHECK(mkdir(p, 0755) == 0 && mkdir(dir, 0755) == 0);
    fill(orig, sizeof orig, 1);
    fill(other, sizeof other, 2);
    ref.root = root;
#define RESET()                                                                   \
    do {                                                                          \
        snprintf(p, sizeof p, "rm -rf '%s' && mkdir -p '%s'", root, dir);         \
        CHECK(system(p) == 0);                                                    \
        CHECK(write_file(photo, orig, sizeof orig) == 0 && stat(photo, &st) == 0); \
        cdb_eng_stat_meta(&st, &rec);                                             \
    } while (0)
#define EXPECT(want)                                                              \
    do {                                                                          \
        eng_open_rc got_ = open_check(&ref, orig, sizeof orig, &ok);              \
        CHECK_MSG(got_ == (want), "line %d: open -> %d, want %d", __LINE__, (int)got_, \
                  (int)(want));                                                   \
        CHECK(ok);                                                                \
    } while (0)

    RESET();
    EXPECT(ENG_OPEN_OK);
    /* a symbolic link to a file outside the library, with the very same bytes */
    snprintf(q, sizeof q, "%s/copy.jpg", out);
    CHECK(write_file(q, orig, sizeof orig) == 0);
    CHECK(unlink(photo) == 0 && symlink(q, photo) == 0);
    EXPECT(ENG_OPEN_CHANGED);
    ref.follow_symlinks = 1; /* a root that follows links: the identity still refuses it */
    EXPECT(ENG_OPEN_CHANGED);
    ref.follow_symlinks = 0;
    /* a link to the recorded file itself: refused unless the root follows links */
    RESET();
    snprintf(q, sizeof q, "%s/real.jpg", dir);
    CHECK(rename(photo, q) == 0 && symlink("real.jpg", photo) == 0);
    EXPECT(ENG_OPEN_CHANGED);
    ref.follow_symlinks = 1;
    EXPECT(ENG_OPEN_OK);
    /* ... and a followed link to a device is refused without being opened */
    CHECK(unlink(photo) == 0 && symlink("/dev/null", photo) == 0);
    EXPECT(ENG_OPEN_CHANGED);
    ref.follow_symlinks = 0;
    /* a hard link to another file */
    RESET();
    snprintf(q, sizeof q, "%s/other.jpg", out);
    CHECK(write_file(q, other, sizeof other) == 0);
    CHECK(unlink(photo) == 0 && link(q, photo) == 0);
    EXPECT(ENG_OPEN_CHANGED);
    /* a hard link to the recorded file is the recorded file */
    RESET();
    snprintf(q, sizeof q, "%s/again.jpg", out);
    CHECK(link(photo, q) == 0 && unlink(photo) == 0 && link(q, photo) == 0);
    EXPECT(ENG_OPEN_OK);
    /* a replacement of the same size and mtime: another inode */
    RESET();
    snprintf(q, sizeof q, "%s/new.tmp", dir);
    CHECK(write_file(q, other, sizeof other) == 0);
    set_mtime(q, rec.mtime_ns);
    CHECK(rename(q, photo) == 0);
    EXPECT(ENG_OPEN_CHANGED);
    /* a legacy row (no identity recorded) compares size and mtime only: that
    ** replacement passes, as documented; a touched one does not */
    {
        cdb_db_file_meta legacy = rec;
        legacy.dev = legacy.ino = 0;
        ref.rec = &legacy;
        eng_open_rc rc = open_check(&ref, other, sizeof other, &ok);
        CHECK_EQ_INT(rc, ENG_OPEN_OK);
        CHECK(ok);
        set_mtime(photo, rec.mtime_ns + 1000000000LL);
        CHECK_EQ_INT(open_check(&ref, other, sizeof other, &ok), ENG_OPEN_CHANGED);
        ref.rec = &rec;
    }
    /* touched: same inode and bytes, new mtime */
    RESET();
    set_mtime(photo, rec.mtime_ns + 1000000000LL);
    EXPECT(ENG_OPEN_CHANGED);
    /* grown in place */
    RESET();
    {
        int fd = open(photo, O_WRONLY | O_APPEND);
        CHECK(fd >= 0 && write(fd, "x", 1) == 1 && close(fd) == 0);
    }
    EXPECT(ENG_OPEN_CHANGED);
    /* a FIFO (no writer: a blocking open would never return) */
    RESET();
    CHECK(unlink(photo) == 0 && mkfifo(photo, 0644) == 0);
    {
        int64_t t0 = cdb_now_ns();
        EXPECT(ENG_OPEN_CHANGED);
        CHECK(cdb_now_ns() - t0 < 1000000000LL);
    }
    /* a socket */
    RESET();
    CHECK(unlink(photo) == 0 && lu_socket(dir, "photo.jpg") == 0);
    EXPECT(ENG_OPEN_CHANGED);
    /* a folder */
    RESET();
    CHECK(unlink(photo) == 0 && mkdir(photo, 0755) == 0);
    EXPECT(ENG_OPEN_CHANGED);
    /* gone */
    RESET();
    CHECK(unlink(photo) == 0);
    EXPECT(ENG_OPEN_GONE);
    /* a folder above it swapped for a link to a folder holding the very same inode:
    ** the identity alone would pass it; the walk refuses it */
    RESET();
    snprintf(p, sizeof p, "%s/a/b", root);
    snprintf(q, sizeof q, "%s/b_real", out);
    CHECK(rename(p, q) == 0 && symlink(q, p) == 0);
    EXPECT(ENG_OPEN_CHANGED);
    ref.follow_symlinks = 1;
    EXPECT(ENG_OPEN_OK);
    ref.follow_symlinks = 0;
    CHECK(unlink(p) == 0);
    snprintf(q, sizeof q, "rm -rf '%s/b_real'", out);
    CHECK(system(q) == 0);
    /* the folder above it gone, or a file now */
    RESET();
    snprintf(p, sizeof p, "rm -rf '%s/a'", root);
    CHECK(system(p) == 0);
    EXPECT(ENG_OPEN_GONE);
    snprintf(p, sizeof p, "%s/a", root);
    CHECK(write_file(p, orig, 10) == 0);
    EXPECT(ENG_OPEN_GONE);
    /* the root gone */
    RESET();
    snprintf(p, sizeof p, "rm -rf '%s'", root);
    CHECK(system(p) == 0);
    EXPECT(ENG_OPEN_GONE);
    /* a file root (relpath ""): the same rules */
    RESET();
    ref.root = photo;
    ref.relpath = "";
    EXPECT(ENG_OPEN_OK);
    snprintf(q, sizeof q, "%s/copy.jpg", out);
    CHECK(unlink(photo) == 0 && symlink(q, photo) == 0);
    EXPECT(ENG_OPEN_CHANGED);
    CHECK(unlink(photo) == 0 && mkfifo(photo, 0644) == 0);
    EXPECT(ENG_OPEN_CHANGED);
#undef RESET
#undef EXPECT
}

/* ---- the race -------------------------------------------------------------------- */

#define RACE_FILES 6
#define RACE_BYTES 3000

typedef struct race {
    char root[600], stash[600], out[600];
    unsigned char bytes[RACE_FILES][RACE_BYTES];
    cdb_db_file_meta rec[RACE_FILES];
    atomic_int stop;
    int64_t swaps;
    uint32_t seed;
} race;

static uint32_t rnd(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Puts something random at photo i's path (or its folder swapped for a link). */
static void swap_one(race *r) {
    char path[800], tmp[800], stash[800], p[900];
    int i = (int)(rnd(&r->seed) % RACE_FILES), what = (int)(rnd(&r->seed) % 8);
    snprintf(path, sizeof path, "%s/d/%d.jpg", r->root, i);
    snprintf(tmp, sizeof tmp, "%s/d/t%d", r->root, i);
    snprintf(stash, sizeof stash, "%s/%d.jpg", r->stash, i);
    if (what == 7) { /* the folder for a link to a copy of it that has the same inodes */
        char d[700], real[700];
        snprintf(d, sizeof d, "%s/d", r->root);
        snprintf(real, sizeof real, "%s/d_real", r->root);
        if (rename(d, real) == 0) {
            if (symlink("d_real", d) == 0) {
                sched_yield();
                unlink(d);
            }
            rename(real, d);
        }
        return;
    }
    rmdir(tmp);
    unlink(tmp);
    switch (what) {
    case 0: link(stash, tmp); break;                          /* the recorded file */
    case 1: symlink(stash, tmp); break;                       /* a link to it */
    case 2: mkfifo(tmp, 0644); break;
    case 3: { /* another file, same size and mtime */
        unsigned char b[RACE_BYTES];
        fill(b, sizeof b, rnd(&r->seed));
        if (write_file(tmp, b, sizeof b) == 0) set_mtime(tmp, r->rec[i].mtime_ns);
        break;
    }
    case 4: snprintf(p, sizeof p, "%s/%d.jpg", r->out, i); link(p, tmp); break; /* hard link out */
    case 5: { /* a socket */
        char dir[700], name[32];
        snprintf(dir, sizeof dir, "%s/d", r->root);
        snprintf(name, sizeof name, "t%d", i);
        lu_socket(dir, name);
        break;
    }
    case 6: /* a folder: not atomic (gone for a moment) */
        rmdir(path);
        unlink(path);
        mkdir(path, 0755);
        r->swaps++;
        return;
    }
    rmdir(path); /* a folder cannot be renamed over */
    rename(tmp, path);
    r->swaps++;
}

static void *mutator(void *arg) {
    race *r = arg;
    while (!atomic_load(&r->stop)) swap_one(r);
    return NULL;
}

CDB_TEST(row_race) {
    race *r = calloc(1, sizeof *r);
    pthread_t th;
    int64_t n[4] = {0, 0, 0, 0}, worst_ns = 0, t_end;
    char p[800];
    CHECK(r != NULL);
    tmp_path(r->root, sizeof r->root, "race");
    tmp_path(r->stash, sizeof r->stash, "race_stash");
    tmp_path(r->out, sizeof r->out, "race_out");
    snprintf(p, sizeof p, "%s/d", r->root);
    CHECK(g_tmp[0] && mkdir(r->root, 0755) == 0 && mkdir(p, 0755) == 0);
    CHECK(mkdir(r->stash, 0755) == 0 && mkdir(r->out, 0755) == 0);
    for (int i = 0; i < RACE_FILES; i++) {
        char path[800], stash[800], other[800];
        struct stat st;
        unsigned char b[RACE_BYTES];
        fill(r->bytes[i], RACE_BYTES, 100u + (uint32_t)i);
        fill(b, sizeof b, 200u + (uint32_t)i);
        snprintf(path, sizeof path, "%s/d/%d.jpg", r->root, i);
        snprintf(stash, sizeof stash, "%s/%d.jpg", r->stash, i);
        snprintf(other, sizeof other, "%s/%d.jpg", r->out, i);
        CHECK(write_file(path, r->bytes[i], RACE_BYTES) == 0 && link(path, stash) == 0);
        CHECK(write_file(other, b, sizeof b) == 0 && stat(path, &st) == 0);
        cdb_eng_stat_meta(&st, &r->rec[i]);
        set_mtime(other, r->rec[i].mtime_ns);
    }
    r->seed = 12345;
    CHECK(pthread_create(&th, NULL, mutator, r) == 0);
    t_end = cdb_now_ns() + 3000000000LL;
    uint32_t s = 777;
    int bad = 0;
    while (cdb_now_ns() < t_end && !bad) {
        int i = (int)(rnd(&s) % RACE_FILES), ok;
        char rel[32];
        eng_row_ref ref = {r->root, rel, 0, &r->rec[i]};
        int64_t t0 = cdb_now_ns(), dt;
        snprintf(rel, sizeof rel, "d/%d.jpg", i);
        eng_open_rc rc = open_check(&ref, r->bytes[i], RACE_BYTES, &ok);
        dt = cdb_now_ns() - t0;
        if (dt > worst_ns) worst_ns = dt;
        n[rc]++;
        if (!ok) bad = 1 + i;
    }
    atomic_store(&r->stop, 1);
    pthread_join(th, NULL);
    printf("    race: %lld swaps; opens: %lld ok, %lld gone, %lld changed, %lld errors; "
           "slowest %.2f ms\n",
           (long long)r->swaps, (long long)n[0], (long long)n[1], (long long)n[2],
           (long long)n[3], (double)worst_ns / 1e6);
    CHECK_MSG(!bad, "photo %d: an open succeeded with other bytes", bad - 1);
    CHECK(n[ENG_OPEN_OK] > 0 && n[ENG_OPEN_CHANGED] > 0);
    CHECK_EQ_INT(n[ENG_OPEN_ERROR], 0);
    CHECK_MSG(worst_ns < 1000000000LL, "an open took %.0f ms", (double)worst_ns / 1e6);
    free(r);
}

CDB_TEST(reader_fifo) {
    char path[700], reason[256];
    unsigned char *buf = NULL;
    cdb_db_file_meta m;
    int64_t t0;
    tmp_path(path, sizeof path, "fifo.jpg");
    CHECK(g_tmp[0] && mkfifo(path, 0644) == 0);
    t0 = cdb_now_ns();
    CHECK_EQ_INT(cdb_eng_read_photo(path, 0, &buf, &m, reason, sizeof reason), ENG_FAIL_GONE);
    CHECK(buf == NULL);
    CHECK(cdb_now_ns() - t0 < 1000000000LL);
}

CDB_TEST_MAIN(row_cases, row_race, reader_fifo)
