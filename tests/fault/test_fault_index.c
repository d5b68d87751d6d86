/*
** test_fault_index.c: `clipdb index build` killed with SIGKILL part way (issue 9,
** fault injection). An index is written to a temp file, fsynced, then renamed over
** the old one (index/index.c). fault_shim.c kills the build at the two moments
** that matter: just before the temp file's fsync (its bytes written, not durable)
** and just before the rename (complete, not yet swapped in). After each kill:
**   - the old index file is byte for byte what it was, and `clipdb search` uses it
**     and prints exactly what it printed before the kill (the vectors added since
**     the old index are searched exactly: nothing is missing);
**   - `clipdb index info` and `clipdb verify` succeed;
** and the next `clipdb index build` succeeds, replaces the index, leaves no temp
** file behind (the killed build's is removed), and searches print the same.
*/
#include "cdb_test.h"
#include "fault_util.h"

static const char *const g_queries[] = {"a red circle", "a blue square", "a yellow star on the right"};
#define N_QUERIES 3

static char *search_all(const char *db) {
    return fu_search_all(db, g_queries, N_QUERIES, "10");
}

static int count_temps(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

CDB_TEST(index_build_killed_old_index_serves_next_build_succeeds) {
    static const char *const points[][2] = {{"CDB_FAULT_KILL_FSYNC", "before the temp file's fsync"},
                                            {"CDB_FAULT_KILL_RENAME", "before the rename"}};
    char lib_a[900], lib_b[900], db[900], ix_dir[1000], ix[1100], logf[1000], logv[1100], killv[200];
    char *before = NULL, *old_ix = NULL;
    size_t old_len = 0;
    cli_run_result r;
    int rc;
    FU_NEED_SETUP();
    snprintf(lib_a, sizeof lib_a, "%s/photos_a", g_tmp);
    snprintf(lib_b, sizeof lib_b, "%s/photos_b", g_tmp);
    snprintf(db, sizeof db, "%s/db", g_tmp);
    snprintf(ix_dir, sizeof ix_dir, "%s/index", db);
    snprintf(ix, sizeof ix, "%s/model_1.cdbidx", ix_dir);
    CHECK_EQ_INT(fu_library(lib_a, 41, 24), 0);
    CHECK_EQ_INT(fu_library(lib_b, 42, 12), 0);
    CHECK_EQ_INT(fu_init(db), 0);
    CHECK_EQ_INT(fu_run_expect(FU_INGEST(db, lib_a), NULL, 0, &r), 0);
    cli_run_free(&r);
    CHECK_EQ_INT(fu_run_expect((const char *[]){"index", "build", "--db", db, "--quiet", NULL}, NULL, 0, &r), 0);
    cli_run_free(&r);
    CHECK_MSG((old_ix = cli_read_file(ix, &old_len)) != NULL && old_len > 0, "no index file at %s", ix);
    /* more vectors: the next build would write a different index */
    CHECK_EQ_INT(fu_run_expect(FU_INGEST(db, lib_b), NULL, 0, &r), 0);
    cli_run_free(&r);
    CHECK((before = search_all(db)) != NULL);

    for (int k = 0; k < 2; k++) {
        char *now, *log;
        size_t n = 0;
        snprintf(logf, sizeof logf, "%s/kill%d.log", g_tmp, k);
        snprintf(logv, sizeof logv, "CDB_FAULT_LOG=%s", logf);
        snprintf(killv, sizeof killv, "%s=.cdbidx.tmp.", points[k][0]);
        rc = lu_run_env((const char *[]){"index", "build", "--db", db, "--quiet", NULL},
                    (const char *[]){"LD_PRELOAD=" CDB_FAULT_SHIM, killv, logv, NULL}, &r);
        cli_run_free(&r);
        log = cli_read_file(logf, NULL);
        fprintf(stderr, "    index build killed %s: exit %d; %s", points[k][1], rc, log ? log : "(no log)\n");
        CHECK_MSG(fu_count_lines(log, "SIGKILL") == 1, "the kill did not happen: %s", log ? log : "(no log)");
        free(log);
        CHECK_EQ_INT(rc, -9);
        CHECK_MSG(count_temps(ix_dir) == 1, "the killed build left %d temp files", count_temps(ix_dir));
        /* the old index, untouched, still serves */
        now = cli_read_file(ix, &n);
        CHECK_MSG(now && n == old_len && !memcmp(now, old_ix, n), "the index file changed under a killed build");
        free(now);
        now = search_all(db);
        CHECK_MSG(now && !strcmp(now, before), "searches after the kill differ:\n%s\nvs\n%s", now ? now : "(failed)",
                  before);
        free(now);
        CHECK_EQ_INT(fu_run_expect((const char *[]){"index", "info", "--db", db, NULL}, NULL, 0, &r), 0);
        cli_run_free(&r);
        CHECK_EQ_INT(fu_run_expect((const char *[]){"verify", "--db", db, NULL}, NULL, 0, &r), 0);
        cli_run_free(&r);
    }

    /* the next build succeeds, swaps a new index in, and cleans up */
    CHECK_EQ_INT(fu_run_expect((const char *[]){"index", "build", "--db", db, "--quiet", NULL}, NULL, 0, &r), 0);
    cli_run_free(&r);
    CHECK_EQ_INT(count_temps(ix_dir), 0);
    {
        size_t n = 0;
        char *now = cli_read_file(ix, &n);
        CHECK_MSG(now && (n != old_len || memcmp(now, old_ix, n)), "the index was not replaced");
        free(now);
        now = search_all(db);
        CHECK_MSG(now && !strcmp(now, before), "searches after the rebuild differ:\n%s\nvs\n%s",
                  now ? now : "(failed)", before);
        free(now);
    }
    CHECK_EQ_INT(fu_run_expect((const char *[]){"verify", "--db", db, NULL}, NULL, 0, &r), 0);
    cli_run_free(&r);
    free(before);
    free(old_ix);
}

CDB_TEST_MAIN_TMP(g_tmp, rm_rf, index_build_killed_old_index_serves_next_build_succeeds)
