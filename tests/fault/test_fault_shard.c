/*
** test_fault_shard.c: a shard file deleted, or truncated, behind clipdb's back
** (issue 9, fault injection). The database is made with small shards (several
** shard files for a small library); one shard is removed or cut in half, then:
**   - `clipdb verify` fails (exit 1) and names exactly the vectors that were in
**     that shard: the count it prints and the file ids it lists match what the
**     shard held (read from the shard file before the damage);
**   - `clipdb reindex --repair` re-encodes them (exit 0);
**   - `clipdb verify` is clean again, the database holds exactly the files and
**     fp16 vectors of a clean database, and searches print exactly what they print
**     on the clean database.
*/
#include <sqlite3.h>

#include "cdb_test.h"
#include "db/db_test_util.h"
#include "fault_util.h"

#define N_IMG 30
#define SHARD_BYTES 2048 /* a few vectors per shard */

static const char *const g_queries[] = {"a red circle", "a blue square on the left", "green",
                                        "a small yellow triangle"};
#define N_QUERIES 4

/* init with small shards: the shard capacity is a creation-time setting recorded
** in the catalog, which the test lowers before the first ingest */
static int init_small_shards(const char *db) {
    char p[1000], sql[128];
    if (fu_init(db) != 0) return -1;
    snprintf(p, sizeof p, "%s/catalog.db", db);
    snprintf(sql, sizeof sql, "UPDATE meta SET value=%d WHERE key='shard_capacity'", SHARD_BYTES);
    return tu_sql_exec(p, sql) == SQLITE_OK ? 0 : -1;
}

static int build_db(const char *db, const char *lib) {
    cli_run_result r;
    int rc;
    if (init_small_shards(db) != 0) return -1;
    rc = fu_run_expect(FU_INGEST(db, lib), NULL, 0, &r);
    cli_run_free(&r);
    if (rc != 0) return -1;
    rc = fu_run_expect((const char *[]){"index", "build", "--db", db, "--quiet", NULL}, NULL, 0, &r);
    cli_run_free(&r);
    return rc;
}

static char *search_all(const char *db) {
    return fu_search_all(db, g_queries, N_QUERIES, "8");
}

/* File ids whose vectors the shard file holds. */
static int shard_ids(const char *path, int64_t *ids, int cap) {
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    int n = 0;
    if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, "SELECT file_id FROM vectors ORDER BY file_id", -1, &st, NULL) == SQLITE_OK)
        while (sqlite3_step(st) == SQLITE_ROW && n < cap) ids[n++] = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return n;
}

CDB_TEST(shard_deleted_or_truncated_then_reindex_repair) {
    char lib[900], ref[900], db[900], shard[1000], p[1100];
    char *ref_search = NULL;
    fu_state ref_state;
    int rc;
    FU_NEED_SETUP();
    snprintf(lib, sizeof lib, "%s/photos", g_tmp);
    CHECK_EQ_INT(fu_library(lib, 31, N_IMG), 0);
    snprintf(ref, sizeof ref, "%s/ref", g_tmp);
    CHECK_EQ_INT(build_db(ref, lib), 0);
    CHECK((ref_search = search_all(ref)) != NULL);
    CHECK_EQ_INT(fu_state_read(ref, &ref_state), 0);
    CHECK_EQ_INT(ref_state.n_vec, N_IMG);

    for (int variant = 0; variant < 2; variant++) {
        const char *what = variant == 0 ? "deleted" : "truncated";
        int64_t ids[N_IMG];
        int n_ids, n_shards = 0;
        cli_run_result r;
        fu_state s;
        char *got, want[64];
        snprintf(db, sizeof db, "%s/db_%s", g_tmp, what);
        CHECK_EQ_INT(build_db(db, lib), 0);
        for (int k = 1; k < 100; k++) {
            snprintf(p, sizeof p, "%s/shards/%04d.db", db, k);
            if (access(p, F_OK) == 0) n_shards = k;
        }
        CHECK_MSG(n_shards >= 3, "only %d shard(s): the test needs several", n_shards);
        snprintf(shard, sizeof shard, "%s/shards/0002.db", db);
        n_ids = shard_ids(shard, ids, N_IMG);
        CHECK_MSG(n_ids > 0 && n_ids < N_IMG, "shard 0002 holds %d vectors", n_ids);
        fprintf(stderr, "    %d shards; shard 0002 (%d vectors) %s\n", n_shards, n_ids, what);

        if (variant == 0) {
            static const char *const sfx[] = {"", "-wal", "-shm"};
            for (int k = 0; k < 3; k++) {
                snprintf(p, sizeof p, "%s%s", shard, sfx[k]);
                unlink(p);
            }
        } else {
            struct stat sb;
            CHECK(stat(shard, &sb) == 0);
            CHECK(truncate(shard, sb.st_size / 2) == 0);
        }

        /* verify: exit 1, exactly the lost vectors, counted */
        CHECK_EQ_INT(fu_run_expect((const char *[]){"verify", "--db", db, NULL}, NULL, 1, &r), 1);
        snprintf(want, sizeof want, "lost: %d vector%s of %d file%s", n_ids, n_ids == 1 ? "" : "s",
                 n_ids, n_ids == 1 ? "" : "s");
        CHECK_MSG(strstr(r.out, want) != NULL, "verify does not say '%s':\n%s", want, r.out);
        fprintf(stderr, "    verify: %s", strstr(r.out, want));
        CHECK_MSG(strstr(r.out, variant == 0 ? "shard-missing" : "shard-damaged") != NULL, "%s", r.out);
        CHECK_EQ_INT(fu_count_lines(r.out, "lost with shard 0002"), n_ids);
        CHECK_MSG(strstr(r.err, "reindex --repair") != NULL, "no hint: %s", r.err);
        cli_run_free(&r);
        CHECK_EQ_INT(fu_run_expect((const char *[]){"verify", "--db", db, "--json", NULL}, NULL, 1, &r), 1);
        snprintf(want, sizeof want, "\"vectors_lost\": %d,", n_ids);
        CHECK_MSG(strstr(r.out, want) != NULL, "verify --json lacks %s:\n%.2000s", want, r.out);
        for (int k = 0; k < n_ids; k++) {
            char id[64];
            snprintf(id, sizeof id, "\"file_id\": %lld,", (long long)ids[k]);
            CHECK_MSG(strstr(r.out, id) != NULL, "verify --json does not name file %lld", (long long)ids[k]);
        }
        CHECK_EQ_INT(fu_count_lines(r.out, "\"kind\": \"vector-missing\""), n_ids);
        cli_run_free(&r);

        /* reindex --repair re-encodes them */
        CHECK_EQ_INT(fu_run_expect((const char *[]){"reindex", "--repair", "--db", db, "--batch", "1",
                                                    "--threads", "2", "--device", "cpu", NULL},
                                   NULL, 0, &r),
                     0);
        CHECK_MSG(strstr(r.out, "repair: ") != NULL, "no repair line: %s", r.out);
        fprintf(stderr, "    reindex --repair:\n%s", r.out);
        cli_run_free(&r);
        CHECK_EQ_INT(fu_run_expect((const char *[]){"verify", "--db", db, NULL}, NULL, 0, &r), 0);
        cli_run_free(&r);
        CHECK_EQ_INT(fu_state_read(db, &s), 0);
        rc = fu_state_same(&ref_state, &s, NULL);
        fu_state_free(&s);
        CHECK_MSG(rc == 0, "after repair (shard %s) the database differs from a clean one", what);
        got = search_all(db);
        CHECK(got != NULL);
        CHECK_MSG(!strcmp(got, ref_search), "searches differ from the clean database's:\n%s\nvs\n%s", got,
                  ref_search);
        free(got);
        /* a second repair finds nothing */
        CHECK_EQ_INT(fu_run_expect((const char *[]){"reindex", "--repair", "--db", db, "--quiet", NULL},
                                   NULL, 0, &r),
                     0);
        CHECK_MSG(strstr(r.out, "repair: no problems found") != NULL, "%s", r.out);
        cli_run_free(&r);
    }
    free(ref_search);
    fu_state_free(&ref_state);
}

CDB_TEST_MAIN_TMP(g_tmp, rm_rf, shard_deleted_or_truncated_then_reindex_repair)
