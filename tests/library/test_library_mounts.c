/*
** test_library_mounts.c: the filesystem boundary of issue 25, "deleted needs
** evidence", with real mounts (tmpfs and bind mounts; needs root, else each test
** skips and says so) and the real binary:
**
**   unmounted_root_keeps_everything  a root that is a mount point, unmounted (an
**                                    empty mount point, then one with a stray photo
**                                    in it): exit 3, one warning, listed in `errors`
**                                    and `folders`, every vector kept bit for bit;
**                                    mounted again: nothing encoded again
**   nested_mount_inside_a_root       a drive mounted inside a root goes away: its
**                                    files are kept, a delete beside it is a delete
**   emptied_root_needs_accept        an emptied root keeps its files until
**                                    `reindex --accept-root`; a path not recorded
**                                    is refused
**   folder_made_anew                 the root's folder replaced by a copy: kept until
**                                    accepted, then nothing encoded again
**   identity_rule                    cdb_eng_root_matches, case by case: a reboot that
**                                    renumbers devices keeps a root (by its folder's
**                                    birth time, or its filesystem's id); an empty mount
**                                    point, a new tmpfs, a remade folder do not
**
** The oracle: the stored vectors as exported before the drive went away (the same
** bytes must come back), and lib_util.h's embedding of each file's own bytes.
*/
#include <stdarg.h>
#include <sys/mount.h>

#include "engine/ingest/ingest.h"
#include "lib_util.h"

#define N 6

#define NEED_ROOT()                                                                  \
    do {                                                                             \
        if (geteuid() != 0) CDB_SKIP("needs root to mount tmpfs and bind mounts");   \
    } while (0)

/* Every path of a is in b once with the very same vector, and the counts match. */
static int same_export(const lu_export *a, const lu_export *b) {
    int bad = 0;
    if (a->n != b->n || a->dim != b->dim) {
        fprintf(stderr, "    %d paths stored now, %d before\n", b->n, a->n);
        return 1;
    }
    for (int i = 0; i < a->n; i++) {
        int count = 0, k = lu_export_find(b, a->paths[i], &count);
        if (count != 1 || k < 0 ||
            memcmp(a->vecs + (size_t)i * a->dim, b->vecs + (size_t)k * b->dim,
                   sizeof(float) * (size_t)a->dim)) {
            if (bad++ < 5) fprintf(stderr, "    %s: not stored as before\n", a->paths[i]);
        }
    }
    return bad;
}

/* The export of db equals `before`. */
static int export_is(const char *db, const lu_export *before) {
    lu_export now;
    if (lu_export_read(db, &now) != 0) return 1;
    int bad = same_export(before, &now);
    lu_export_free(&now);
    return bad;
}

static int has(const cli_run_result *r, const char *needle) {
    return (r->out && strstr(r->out, needle)) || (r->err && strstr(r->err, needle));
}

/* `reindex` (extra args may be NULL) exits want and says each of the strings after want
** (NULL-terminated) on stdout or stderr. 0, else 1 with what it said shown. */
static int reindex_says(const char *db, const char *extra, const char *extra_val, int want,
                        ...) {
    const char *args[] = {"reindex", "--db", db, "--threads", "2", extra, extra_val, NULL};
    cli_run_result r;
    va_list ap;
    int bad = lu_expect(args, want, &r) != want;
    va_start(ap, want);
    for (const char *says; !bad && (says = va_arg(ap, const char *));)
        if (!has(&r, says)) {
            fprintf(stderr, "    reindex: no \"%s\" in\n%s%s", says, r.out, r.err);
            bad = 1;
        }
    va_end(ap);
    cli_run_free(&r);
    return bad;
}

CDB_TEST(unmounted_root_keeps_everything) {
    char store[700], photos[700], nas[700], db[700];
    lu_export before;
    cli_run_result r;
    NEED_ROOT();
    LU_NEED_SETUP();
    LU_PATHS("um", CLI_AT(store, "store"), CLI_AT(nas, "nas"), CLI_AT(db, "db"));
    snprintf(photos, sizeof photos, "%s/photos", store);
    CHECK(lu_mkdirs(store) == 0 && lu_mkdirs(nas) == 0);
    CHECK(mount("tmpfs", store, "tmpfs", 0, "size=64m") == 0);
    CHECK(lu_generate(photos, 7, 0, N) == 0);
    CHECK(mount(photos, nas, NULL, MS_BIND, NULL) == 0);
    CHECK(lu_init(db) == 0);
    CHECK(lu_expect((const char *[]){"ingest", "--db", db, nas, "--quiet", NULL}, 0, NULL) == 0);
    CHECK(lu_db_is_exact(db, N) == 0);
    CHECK(lu_export_read(db, &before) == 0);

    /* the drive goes away: an empty mount point */
    CHECK(umount(nas) == 0);
    CHECK(reindex_says(db, "--json", NULL, 3, "is not the folder that was recorded",
                       "\"missing_folders\": 1", "\"deleted\": 0", NULL) == 0);
    CHECK(export_is(db, &before) == 0);
    CHECK(lu_expect((const char *[]){"verify", "--db", db, "--quiet", NULL}, 0, NULL) == 0);
    CHECK(lu_expect((const char *[]){"errors", "--db", db, NULL}, 0, &r) == 0);
    CHECK_MSG(has(&r, nas) && has(&r, "unavailable"), "%s", r.out);
    cli_run_free(&r);
    CHECK(lu_expect((const char *[]){"folders", "--db", db, "--json", NULL}, 0, &r) == 0);
    CHECK_MSG(has(&r, "\"unavailable\""), "%s", r.out);
    cli_run_free(&r);

    /* something was written into the mount point meanwhile: still not the drive */
    /* (a photo at a recorded name, over the mount point's own folder) */
    CHECK(lu_generate(nas, 99, 0, 1) == 0);
    CHECK(reindex_says(db, NULL, NULL, 3, NULL) == 0);
    CHECK(export_is(db, &before) == 0);
    lu_rm_rf(nas);
    CHECK(lu_mkdirs(nas) == 0);

    /* the drive is back: nothing is encoded again, nothing changed */
    CHECK(mount(photos, nas, NULL, MS_BIND, NULL) == 0);
    CHECK(reindex_says(db, "--json", NULL, 0, "\"added\": 0", "\"changed\": 0",
                       "\"deleted\": 0", NULL) == 0);
    CHECK(export_is(db, &before) == 0);
    CHECK(lu_db_is_exact(db, N) == 0);
    lu_export_free(&before);
    CHECK(umount(nas) == 0 && umount(store) == 0);
}

CDB_TEST(nested_mount_inside_a_root) {
    char lib[700], local[800], nas[800], store[700], db[700], p[900];
    lu_export before;
    NEED_ROOT();
    LU_NEED_SETUP();
    LU_PATHS("nest", CLI_AT(lib, "lib"), CLI_AT(store, "store"), CLI_AT(db, "db"));
    snprintf(local, sizeof local, "%s/local", lib);
    snprintf(nas, sizeof nas, "%s/nas", lib);
    CHECK(lu_generate(local, 3, 0, N) == 0);
    CHECK(lu_mkdirs(nas) == 0 && lu_mkdirs(store) == 0);
    CHECK(mount("tmpfs", store, "tmpfs", 0, "size=64m") == 0);
    CHECK(lu_generate(store, 4, N, N) == 0); /* other names than local/'s */
    CHECK(mount(store, nas, NULL, MS_BIND, NULL) == 0);
    CHECK(lu_init(db) == 0);
    CHECK(lu_expect((const char *[]){"ingest", "--db", db, lib, "--quiet", NULL}, 0, NULL) == 0);
    CHECK(lu_db_is_exact(db, 2 * N) == 0);

    CHECK(umount(nas) == 0);
    CHECK(unlink(lu_img(local, 0, p, sizeof p)) == 0); /* a real delete beside it */
    CHECK(reindex_says(db, "--json", NULL, 3, "not mounted", "\"deleted\": 1", NULL) == 0);
    CHECK(lu_export_read(db, &before) == 0);
    CHECK_EQ_INT(before.n, 2 * N - 1);
    CHECK(lu_export_find(&before, p, NULL) < 0);

    CHECK(mount(store, nas, NULL, MS_BIND, NULL) == 0);
    CHECK(reindex_says(db, "--json", NULL, 0, "\"added\": 0", "\"changed\": 0",
                       "\"deleted\": 0", NULL) == 0);
    CHECK(export_is(db, &before) == 0);
    CHECK(lu_db_is_exact(db, 2 * N - 1) == 0);
    lu_export_free(&before);
    CHECK(umount(nas) == 0 && umount(store) == 0);
}

CDB_TEST(emptied_root_needs_accept) {
    char lib[700], db[700], p[900], other[700];
    lu_export before;
    LU_NEED_SETUP();
    LU_PATHS("empty", CLI_AT(lib, "lib"), CLI_AT(db, "db"), CLI_AT(other, "other"));
    CHECK(lu_generate(lib, 5, 0, N) == 0);
    CHECK(lu_mkdirs(other) == 0);
    CHECK(lu_init(db) == 0);
    CHECK(lu_expect((const char *[]){"ingest", "--db", db, lib, "--quiet", NULL}, 0, NULL) == 0);
    CHECK(lu_export_read(db, &before) == 0);
    for (int i = 0; i < N; i++) CHECK(unlink(lu_img(lib, i, p, sizeof p)) == 0);
    CHECK(reindex_says(db, NULL, NULL, 3, "is empty now", "--accept-root", NULL) == 0);
    CHECK(export_is(db, &before) == 0);
    lu_export_free(&before);
    /* a path that is not a recorded root is refused, and nothing changes */
    CHECK(reindex_says(db, "--accept-root", other, 1, "not a recorded folder", NULL) == 0);
    CHECK(reindex_says(db, "--accept-root", lib, 0, "6 deleted", NULL) == 0);
    CHECK(lu_db_is_exact(db, 0) == 0);
    CHECK(lu_generate(lib, 5, 0, 3) == 0);
    CHECK(reindex_says(db, NULL, NULL, 0, "3 added", NULL) == 0);
    CHECK(lu_db_is_exact(db, 3) == 0);
}

CDB_TEST(folder_made_anew) {
    char lib[700], old[700], db[700], a[900], b[900];
    lu_export before;
    LU_NEED_SETUP();
    LU_PATHS("anew", CLI_AT(lib, "lib"), CLI_AT(db, "db"));
    snprintf(old, sizeof old, "%s.old", lib);
    CHECK(lu_generate(lib, 6, 0, N) == 0);
    CHECK(lu_init(db) == 0);
    CHECK(lu_expect((const char *[]){"ingest", "--db", db, lib, "--quiet", NULL}, 0, NULL) == 0);
    CHECK(lu_export_read(db, &before) == 0);
    CHECK(rename(lib, old) == 0 && lu_mkdirs(lib) == 0);
    for (int i = 0; i < N - 1; i++) { /* a copy, one photo short */
        lu_img(old, i, a, sizeof a);
        snprintf(b, sizeof b, "%s%s", lib, strrchr(a, '/'));
        CHECK(lu_copy(a, b) == 0);
    }
    CHECK(reindex_says(db, NULL, NULL, 3, "is not the folder that was recorded", NULL) == 0);
    CHECK(export_is(db, &before) == 0);
    lu_export_free(&before);
    CHECK(reindex_says(db, "--accept-root", lib, 0, " 0 added, 0 changed, 0 moved, 1 deleted",
                       NULL) == 0);
    CHECK(lu_db_is_exact(db, N - 1) == 0);
    /* recorded: the new folder is the root's */
    CHECK(reindex_says(db, NULL, NULL, 0, NULL) == 0);
}

CDB_TEST(identity_rule) {
    /* a folder recorded on ext4: inode 2 (a filesystem's root), born at t, fsid f */
    const cdb_db_root_ident rec = {0xF00D, 0xEF53, 2, 1700000000123456789LL};
    cdb_db_root_ident now = rec, none = {0, 0, 0, 0};
    int strong = -1;
    /* the same folder; the same folder after a reboot gave its disk another st_dev */
    CHECK(cdb_eng_root_matches(&rec, 0x801, &now, 0x801, &strong) && strong);
    CHECK(cdb_eng_root_matches(&rec, 0x801, &now, 0x811, &strong) && strong);
    /* no birth time (NFS, FAT): the filesystem id; without that either, the device
    ** number, or an NFS share's type when its anonymous device number changed */
    now.btime_ns = 0;
    CHECK(cdb_eng_root_matches(&rec, 0x801, &now, 0x811, &strong) && strong);
    now.fsid = 0;
    CHECK(cdb_eng_root_matches(&rec, 0x801, &now, 0x801, &strong) && !strong);
    CHECK(cdb_eng_root_matches(&rec, 0x801, &now, 0x2d, &strong) && strong); /* same type */
    now.fstype = 0x6969;                                                      /* NFS now */
    CHECK(!cdb_eng_root_matches(&rec, 0x801, &now, 0x2d, &strong));
    /* the empty mount point: another inode on another filesystem, whatever else */
    now = rec;
    now.ino = 1234567;
    CHECK(!cdb_eng_root_matches(&rec, 0x801, &now, 0x801, &strong));
    /* a folder made anew at the path: a new birth time (an inode may be reused) */
    now = rec;
    now.btime_ns += 1;
    CHECK(!cdb_eng_root_matches(&rec, 0x801, &now, 0x801, &strong));
    /* a new tmpfs at the path reuses the device number and the root inode: a new
    ** birth time and filesystem id tell it from the recorded one */
    now = rec;
    now.btime_ns = 0;
    now.fsid = 0xBEEF;
    CHECK(!cdb_eng_root_matches(&rec, 0x801, &now, 0x801, &strong));
    /* never recorded: anything goes (the first scan records it); recorded before
    ** schema 6 (a device number only): the device number decides */
    CHECK(cdb_eng_root_matches(&none, 0, &now, 0x801, &strong) && !strong);
    CHECK(cdb_eng_root_matches(&none, 0x801, &now, 0x801, &strong));
    CHECK(!cdb_eng_root_matches(&none, 0x801, &now, 0x2d, &strong));
}

CDB_TEST_MAIN(identity_rule, unmounted_root_keeps_everything, nested_mount_inside_a_root, emptied_root_needs_accept,
              folder_made_anew)
