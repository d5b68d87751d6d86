/*
** test_library_edges.c: regressions found by a hostile review of the library model
** (issue 13), each as the reviewer reproduced it, checked with the oracle of
** lib_util.h:
**
**   copies_made_before_a_drive_goes   a missing root whose photos were copied
**                                     elsewhere first is never dropped; when it
**                                     comes back it is scanned again
**   deep_check_on_a_fresh_database    verify --deep --sample 1 right after an ingest
**                                     is clean (fp16 subnormals differ by 2 ulps
**                                     between batches)
**   no_exif_is_the_folders_setting    --no-exif is remembered, used by reindex and
**                                     verify --deep, and --exif encodes them again
**   hidden_paths_named                a hidden path inside a recorded folder is
**                                     refused instead of stored and then deleted
**   unreadable_photo_keeps_its_vector a chmod (ctime only) and a permission error:
**                                     the vector stays, the file is retried
**   one_photo_through_two_links       two links to one photo, then its folder
**                                     ingested: one vector at every moment
**   export_names_with_newlines        paths.txt keeps one line per row
**   deep_problems_are_repaired        bytes changed behind the stat, swapped vectors:
**                                     verify --deep names them, reindex --repair fixes
*/
#include <sqlite3.h>

#include "lib_util.h"

static int count_lines(const char *out, const char *needle) {
    int n = 0;
    for (const char *p = out; (p = strstr(p, needle)); p++) n++;
    return n;
}

static int exact(const char *db, int want) {
    lu_export e;
    if (lu_export_read(db, &e) != 0) return -1;
    int bad = lu_check_export_against_files(&e);
    if (want >= 0 && e.n != want) {
        fprintf(stderr, "    %d paths stored, want %d\n", e.n, want);
        bad++;
    }
    lu_export_free(&e);
    return bad;
}

CDB_TEST(copies_made_before_a_drive_goes) {
    char main_[700], card[700], copy[700], away[700], db[700], cmd[3000];
    cli_run_result r;
    LU_NEED_SETUP();
    LU_PATHS("card", CLI_AT(main_, "lib/main"), CLI_AT(card, "drive/card"),
             CLI_AT(copy, "lib/main/from_card"), CLI_AT(away, "unplugged"), CLI_AT(db, "db"));
    CHECK_EQ_INT(lu_generate(main_, 1, 0, 3), 0);
    CHECK_EQ_INT(lu_generate(card, 2, 0, 3), 0);
    CHECK_EQ_INT(lu_db_of(db, (const char *[]){main_, card, NULL}, 0), 0);
    snprintf(cmd, sizeof cmd, "cp -a %s %s && mv %s %s", card, copy, card, away);
    CHECK_EQ_INT(system(cmd), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 3, &r), 3);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"folders", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, card) && strstr(r.out, "missing"), "%s", r.out);
    cli_run_free(&r);
    /* the card's rows stay; the copies are new photos of their own */
    lu_export e;
    CHECK_EQ_INT(lu_export_read(db, &e), 0);
    int on_card = 0, copies = 0;
    for (int i = 0; i < e.n; i++) {
        on_card += !strncmp(e.paths[i], card, strlen(card));
        copies += !strncmp(e.paths[i], copy, strlen(copy));
    }
    lu_export_free(&e);
    CHECK_EQ_INT(on_card, 3);
    CHECK_EQ_INT(copies, 3);
    char c0[900];
    CHECK_EQ_INT(lu_search_finds_itself(db, lu_img(copy, 0, c0, sizeof c0)), 0);
    /* plugged in again: scanned again, every photo once */
    CHECK_EQ_INT(rename(away, card), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(exact(db, 9), 0);
    char p[900];
    CHECK_EQ_INT(lu_search_finds_itself(db, lu_img(card, 1, p, sizeof p)), 0);
}

CDB_TEST(deep_check_on_a_fresh_database) {
    char lib[700], db[700], dir[800];
    cdb_world_library_params lp = cdb_world_library_params_default();
    LU_NEED_SETUP();
    LU_PATHS("deep", CLI_AT(lib, "lib"), CLI_AT(db, "db"));
    lp.n_threads = 2;
    lp.scene.png_fraction = 0; /* the reviewer's library: JPEGs only */
    for (int k = 0; k < 3; k++) {
        snprintf(dir, sizeof dir, "%s/%c", lib, 'a' + k);
        CHECK_EQ_INT(lu_mkdirs(dir), 0);
        CHECK(cdb_world_generate(dir, 81 + (uint64_t)k, 0, k == 2 ? 4 : 5, &lp) == CDB_OK);
    }
    CHECK_EQ_INT(lu_init(db), 0);
    snprintf(dir, sizeof dir, "%s/a", lib);
    char b[800], c[800];
    snprintf(b, sizeof b, "%s/b", lib);
    snprintf(c, sizeof c, "%s/c", lib);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, dir, b, c, "--quiet", NULL}, 0, NULL),
                 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"verify", "--db", db, "--deep", "--sample", "1", NULL}, 0,
                           NULL),
                 0);
}

CDB_TEST(no_exif_is_the_folders_setting) {
    char lib[700], db[700], src[900], p[900];
    cli_run_result r;
    LU_NEED_SETUP();
    LU_PATHS("exif", CLI_AT(lib, "lib"), CLI_AT(db, "db"));
    CHECK_EQ_INT(lu_mkdirs(lib), 0);
    for (int o = 5; o <= 8; o++) { /* orientations that turn the picture */
        snprintf(src, sizeof src, "%s/tests/golden/images/exif_o%d_96x64.jpg", CDB_SOURCE_DIR, o);
        snprintf(p, sizeof p, "%s/o%d.jpg", lib, o);
        CHECK_EQ_INT(lu_copy(src, p), 0);
    }
    CHECK_EQ_INT(lu_init(db), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, "--no-exif", lib, "--quiet", NULL},
                           0, NULL),
                 0);
    /* stored without the orientation: what `embed --no-exif` gives */
    lu_export e;
    CHECK_EQ_INT(lu_export_read(db, &e), 0);
    CHECK_EQ_INT(e.n, 4);
    for (int i = 0; i < e.n; i++) {
        char npy[800];
        float *want = NULL;
        int rows = 0, dim = 0;
        snprintf(npy, sizeof npy, "%s/exif/one.npy", lu_tmp);
        CHECK_EQ_INT(lu_expect((const char *[]){"embed", "--model", lu_model, "--no-exif", "--image",
                                                e.paths[i], "--format", "npy", "--out", npy, NULL},
                               0, NULL),
                     0);
        CHECK((want = lu_npy(npy, &rows, &dim)) && dim == e.dim);
        CHECK_MSG(want && lu_same_vector(e.vecs + (size_t)i * dim, want, dim, NULL),
                  "%s is not stored as its --no-exif embedding", e.paths[i]);
        free(want);
    }
    lu_export_free(&e);
    CHECK_EQ_INT(lu_expect((const char *[]){"verify", "--db", db, "--deep", "--sample", "1", NULL}, 0,
                           NULL),
                 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"folders", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "EXIF orientation ignored"), "%s", r.out);
    cli_run_free(&r);
    /* an edited photo is encoded again the same way */
    snprintf(src, sizeof src, "%s/tests/golden/images/exif_o6_be_96x64.jpg", CDB_SOURCE_DIR);
    snprintf(p, sizeof p, "%s/o6.jpg", lib);
    CHECK_EQ_INT(lu_copy(src, p), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"verify", "--db", db, "--deep", "--sample", "1", NULL}, 0,
                           NULL),
                 0);
    /* and back: --exif encodes the folder again, with the orientation */
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, "--exif", lib, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "4 changed"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(exact(db, 4), 0); /* lu_embed applies EXIF, as clipdb embed does by default */
}

CDB_TEST(hidden_paths_named) {
    char lib[700], hid[700], db[700], p[900];
    cli_run_result r;
    LU_NEED_SETUP();
    LU_PATHS("hidden", CLI_AT(lib, "lib"), CLI_AT(hid, "lib/.hidden"), CLI_AT(db, "db"));
    CHECK_EQ_INT(lu_generate(lib, 3, 0, 3), 0);
    CHECK_EQ_INT(lu_generate(hid, 4, 10, 2), 0);
    CHECK_EQ_INT(lu_db_of(db, (const char *[]){lib, NULL}, 0), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, lu_img(hid, 10, p, sizeof p), NULL},
                           1, &r),
                 1);
    CHECK_MSG(strstr(r.err, "hidden"), "%s", r.err);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, " 0 deleted"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(exact(db, 3), 0);
}

CDB_TEST(unreadable_photo_keeps_its_vector) {
    char lib[700], db[700], p[900], env[1000];
    cli_run_result r;
    LU_NEED_SETUP();
    if (!CDB_FAULT_SHIM[0]) CDB_SKIP("no fault shim");
    LU_PATHS("perm", CLI_AT(lib, "lib"), CLI_AT(db, "db"));
    CHECK_EQ_INT(lu_generate_db(lib, 61, 5, db, 0), 0);
    lu_img(lib, 3, p, sizeof p);
    CHECK_EQ_INT(chmod(p, 0600), 0); /* the ctime changes, nothing else */
    snprintf(env, sizeof env, "CDB_FAULT_EACCES_MATCH=%s", p);
    CHECK_EQ_INT(lu_run_env((const char *[]){"reindex", "--db", db, NULL},
                            (const char *[]){"LD_PRELOAD=" CDB_FAULT_SHIM, env, NULL}, &r),
                 3);
    CHECK_MSG(strstr(r.out, "1 to retry"), "%s%s", r.out, r.err);
    cli_run_free(&r);
    CHECK_EQ_INT(exact(db, 5), 0); /* still searchable */
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, " 0 added") && strstr(r.out, " 0 changed"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(exact(db, 5), 0);
}

CDB_TEST(one_photo_through_two_links) {
    char lib[700], out[700], db[700], p[900], q[900];
    lu_export e;
    LU_NEED_SETUP();
    LU_PATHS("twolinks", CLI_AT(lib, "lib/a"), CLI_AT(out, "outside/o"), CLI_AT(db, "db"));
    CHECK_EQ_INT(lu_generate(lib, 41, 0, 3), 0);
    CHECK_EQ_INT(lu_generate(out, 43, 10, 3), 0);
    snprintf(p, sizeof p, "%s/outlink", lib);
    CHECK_EQ_INT(symlink(out, p), 0);
    snprintf(p, sizeof p, "%s/fav.jpg", lib);
    CHECK_EQ_INT(symlink(lu_img(out, 11, q, sizeof q), p), 0);
    CHECK_EQ_INT(lu_init(db), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, "--follow-symlinks", lib, "--quiet",
                                            NULL},
                           0, NULL),
                 0);
    CHECK_EQ_INT(exact(db, 6), 0); /* 3 + the 3 outside ones, the favourite once */
    /* the outside folder joins the library: the links no longer count, at once */
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, out, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(exact(db, 6), 0);
    CHECK_EQ_INT(lu_export_read(db, &e), 0);
    int under_out = 0;
    for (int i = 0; i < e.n; i++) under_out += !strncmp(e.paths[i], out, strlen(out));
    lu_export_free(&e);
    CHECK_EQ_INT(under_out, 3);
    CHECK_EQ_INT(lu_search_finds_itself(db, q), 0);
}

CDB_TEST(export_names_with_newlines) {
    char lib[700], db[700], p[900], q[900], ex[800];
    LU_NEED_SETUP();
    LU_PATHS("newline", CLI_AT(lib, "lib"), CLI_AT(db, "db"), CLI_AT(ex, "export"));
    CHECK_EQ_INT(lu_generate(lib, 51, 0, 3), 0);
    snprintf(p, sizeof p, "%s/new\nline.jpg", lib);
    CHECK_EQ_INT(lu_copy(lu_img(lib, 0, q, sizeof q), p), 0);
    /* the name that paths.txt would write as the same line if '\' were not escaped */
    snprintf(q, sizeof q, "%s/new\\nline.jpg", lib);
    CHECK_EQ_INT(lu_copy(p, q), 0);
    CHECK_EQ_INT(lu_db_of(db, (const char *[]){lib, NULL}, 0), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"export", "--db", db, "--out", ex, "--quiet", NULL}, 0,
                           NULL),
                 0);
    size_t n = 0, n0 = 0;
    snprintf(q, sizeof q, "%s/paths.txt", ex);
    char *t = cli_read_file(q, &n);
    snprintf(q, sizeof q, "%s/paths0.txt", ex);
    char *z = cli_read_file(q, &n0);
    CHECK(t && z);
    int lines = 0, nuls = 0, found = 0;
    for (size_t i = 0; i < n; i++) lines += t[i] == '\n';
    for (size_t i = 0; i < n0; i += strlen(z + i) + 1) {
        nuls++;
        found |= !strcmp(z + i, p);
    }
    CHECK_EQ_INT(lines, 5);
    CHECK_EQ_INT(nuls, 5);
    CHECK_MSG(found, "paths0.txt lacks the exact name");
    CHECK(strstr(t, "/new\\nline.jpg\n") != NULL);
    CHECK(strstr(t, "/new\\\\nline.jpg\n") != NULL);
    /* every line unique (two names never give one line) */
    for (char *a = t; *a; a = strchr(a, '\n') + 1)
        for (char *b = strchr(a, '\n') + 1; *b; b = strchr(b, '\n') + 1)
            CHECK_MSG(strcspn(a, "\n") != strcspn(b, "\n") || strncmp(a, b, strcspn(a, "\n")),
                      "two rows share the line %.*s", (int)strcspn(a, "\n"), a);
    /* jsonl has no dtype and the export is a folder: usage errors */
    cli_run_result r;
    CHECK_EQ_INT(lu_expect((const char *[]){"export", "--db", db, "--format", "jsonl", "--dtype",
                                            "fp32", "--out", ex, NULL},
                           2, &r),
                 2);
    CHECK_MSG(r.err && strstr(r.err, "--dtype is for npy"), "%s", r.err);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"export", "--db", db, "--out", "-", NULL}, 2, &r), 2);
    CHECK_MSG(r.err && strstr(r.err, "cannot be standard output"), "%s", r.err);
    cli_run_free(&r);
    free(t);
    free(z);
}

/* One SQL statement on a database file, straight through SQLite (damage behind
** clipdb's back). */
static int sql(const char *file, const char *stmt) {
    sqlite3 *c = NULL;
    int rc = sqlite3_open(file, &c);
    if (rc == SQLITE_OK) rc = sqlite3_exec(c, stmt, NULL, NULL, NULL);
    if (rc != SQLITE_OK) fprintf(stderr, "    sql %s: %s\n", stmt, c ? sqlite3_errmsg(c) : "?");
    sqlite3_close(c);
    return rc;
}

CDB_TEST(deep_problems_are_repaired) {
    char lib[700], db[700], cat[800], shard[800];
    cli_run_result r;
    LU_NEED_SETUP();
    LU_PATHS("repair", CLI_AT(lib, "lib"), CLI_AT(db, "db"));
    CHECK_EQ_INT(lu_generate_db(lib, 71, 6, db, 0), 0);
    snprintf(cat, sizeof cat, "%s/catalog.db", db);
    snprintf(shard, sizeof shard, "%s/shards/0001.db", db);
    /* file 2's bytes "changed" without its stat showing it; files 3 and 4 hold each
    ** other's vectors (both still unit vectors: only re-encoding can tell) */
    CHECK_EQ_INT(sql(cat, "UPDATE files SET hash=randomblob(16) WHERE id=2"), SQLITE_OK);
    CHECK_EQ_INT(sql(shard, "UPDATE vectors SET file_id=-3 WHERE file_id=3;"
                            "UPDATE vectors SET file_id=3 WHERE file_id=4;"
                            "UPDATE vectors SET file_id=4 WHERE file_id=-3"),
                 SQLITE_OK);
    CHECK_EQ_INT(lu_expect((const char *[]){"verify", "--db", db, NULL}, 0, NULL), 0); /* blind */
    CHECK_EQ_INT(lu_expect((const char *[]){"verify", "--db", db, "--deep", "--sample", "1", NULL}, 1,
                           &r),
                 1);
    CHECK_MSG(strstr(r.out, "file-changed") && count_lines(r.out, "vector-mismatch") == 2,
              "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, "--repair", "--sample", "1", NULL},
                           0, &r),
                 0);
    CHECK_MSG(strstr(r.out, "3 problems found"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"verify", "--db", db, "--deep", "--sample", "1", NULL}, 0,
                           NULL),
                 0);
    CHECK_EQ_INT(exact(db, 6), 0);
}

CDB_TEST_MAIN_TMP(lu_tmp, lu_rm_rf, copies_made_before_a_drive_goes, deep_check_on_a_fresh_database,
                  no_exif_is_the_folders_setting, hidden_paths_named,
                  unreadable_photo_keeps_its_vector, one_photo_through_two_links,
                  export_names_with_newlines, deep_problems_are_repaired)
