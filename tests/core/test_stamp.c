/*
** test_stamp.c: the stamp of a checked cache file (core/stamp.c, cdb_stamp_*) vouches
** for exactly the file it was written for. The oracle is the file system itself: each
** case changes the file the way a writer, a crash or a user would (a write in place, a
** replacement by rename, a touch, another payload sum, a damaged or missing stamp) and
** the stamp must then not match, or, for what leaves the bytes alone (touching the
** stamp, reading), still match.
*/
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cdb_test.h"
#include "core/core.h"

static char g_tmp[64];
static const uint64_t k_sum[2] = {0x0123456789abcdefull, 42};

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    return remove(p);
}

static void rm_tmp(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static int put(const char *p, const char *s) {
    FILE *f = fopen(p, "wb");
    int ok = f && fputs(s, f) >= 0;
    return f && fclose(f) == 0 && ok ? 0 : -1;
}

/* Past the file system's timestamp tick, so that the next write gets another ctime. */
static void next_tick(void) { nanosleep(&(struct timespec){0, 30 * 1000 * 1000}, NULL); }

/* Stamps p as it is now with k_sum; 1 when written. */
static int stamp_now(const char *p) {
    struct stat st;
    if (stat(p, &st) != 0) return 0;
    cdb_stamp due = cdb_stamp_of(&st, k_sum);
    return cdb_stamp_write(p, &due) == 0;
}

static int matches_now(const char *p, const uint64_t sum[2]) {
    struct stat st;
    return stat(p, &st) == 0 && cdb_stamp_matches(p, &st, sum);
}

CDB_TEST(stamp_vouches_for_its_file_only) {
    char file[128], other[128], stamp[160];
    uint64_t sum2[2] = {k_sum[0], k_sum[1] + 1};
    CHECK(mkdtemp(strcpy(g_tmp, "/tmp/cdb_stamp_test_XXXXXX")));
    snprintf(file, sizeof file, "%s/cache.bin", g_tmp);
    snprintf(other, sizeof other, "%s/other.bin", g_tmp);
    CHECK(cdb_stamp_path(file, stamp, sizeof stamp) == 0);
    CHECK(strcmp(stamp + strlen(stamp) - 3, ".ok") == 0);
    CHECK(put(file, "payload bytes") == 0);
    CHECK(!matches_now(file, k_sum)); /* no stamp yet */
    CHECK(stamp_now(file));
    CHECK(matches_now(file, k_sum));
    CHECK(!matches_now(file, sum2)); /* another payload sum (a header that changed) */
    cdb_stamp_touch(file);           /* marks it used: the stamp's mtime, not the file's */
    CHECK(matches_now(file, k_sum));
    /* a write in place: same inode and size, a new ctime */
    next_tick();
    {
        int fd = open(file, O_WRONLY);
        CHECK(fd >= 0 && pwrite(fd, "P", 1, 0) == 1);
        close(fd);
    }
    CHECK(!matches_now(file, k_sum));
    CHECK(stamp_now(file));
    CHECK(matches_now(file, k_sum));
    /* replaced by another file of the same size (a writer's rename): another inode */
    CHECK(put(other, "Payload bytes") == 0);
    CHECK(rename(other, file) == 0);
    CHECK(!matches_now(file, k_sum));
    /* a due for a file that changed after it was checked is not written */
    {
        struct stat st;
        CHECK(stat(file, &st) == 0);
        cdb_stamp due = cdb_stamp_of(&st, k_sum);
        next_tick();
        CHECK(put(file, "payload, changed") == 0);
        CHECK(cdb_stamp_write(file, &due) != 0);
        CHECK(!matches_now(file, k_sum));
    }
    /* a damaged stamp (one byte) and a short one do not match; a missing file has none */
    CHECK(stamp_now(file));
    {
        int fd = open(stamp, O_RDWR);
        unsigned char c;
        CHECK(fd >= 0 && pread(fd, &c, 1, 20) == 1);
        c ^= 1;
        CHECK(pwrite(fd, &c, 1, 20) == 1);
        CHECK(!matches_now(file, k_sum));
        c ^= 1;
        CHECK(pwrite(fd, &c, 1, 20) == 1);
        CHECK(matches_now(file, k_sum));
        CHECK(ftruncate(fd, 16) == 0);
        CHECK(!matches_now(file, k_sum));
        close(fd);
    }
    CHECK(unlink(file) == 0);
    CHECK(!stamp_now(file));
}

CDB_TEST_MAIN_TMP(g_tmp, rm_tmp, stamp_vouches_for_its_file_only)
