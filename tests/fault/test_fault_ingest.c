/*
** test_fault_ingest.c: a sick disk during `clipdb ingest` (issue 9, fault injection),
** with the real binary and model; the faults come from fault_shim.c (LD_PRELOAD),
** which needs no privileges (no loop device, no tmpfs mount), so it runs in CI.
**
** disk_full_then_rerun_gives_the_clean_result: writes under the database folder
**   fail with ENOSPC once N bytes have been written (N = 2%, 10%, 30% of what a clean
**   ingest writes, measured first; or N bytes to shard files only, while the
**   catalog still has room). The ingest must stop with exit code 1 and
**   a message saying the disk is full; `clipdb verify` must pass on what it left;
**   the next ingest without the fault must end with exactly the files and fp16
**   vectors of a clean run.
** read_errors_are_retried_and_the_ingest_goes_on: read() of two images fails with
**   EIO. An I/O error says nothing about the bytes (a transient failure): those two
**   are left pending with the reason, listed by `clipdb errors` as to be retried,
**   every other file is stored exactly as in a clean run, and the exit code is 3.
**   The next run, with the disk healthy again, stores them: the database then
**   equals the clean run's.
*/
#include "cdb_test.h"
#include "fault_util.h"

#define N_IMG 24

static char g_lib[800], g_ref[800];
static fu_state g_ref_state;
static int g_ready; /* 0 not yet, 1 ready, 77 skip, -1 failed */

static int prepare(void) {
    cli_run_result r;
    int rc;
    if (g_ready) return g_ready;
    g_ready = -1;
    if ((rc = fu_setup()) != 0) return g_ready = rc;
    snprintf(g_lib, sizeof g_lib, "%s/photos", g_tmp);
    snprintf(g_ref, sizeof g_ref, "%s/ref", g_tmp);
    if (fu_library(g_lib, 21, N_IMG) != 0) return -1;
    if (fu_init(g_ref) != 0) return -1;
    rc = fu_run_expect(FU_INGEST(g_ref, g_lib), NULL, 0, &r);
    cli_run_free(&r);
    if (rc != 0 || fu_state_read(g_ref, &g_ref_state) != 0) return -1;
    if (g_ref_state.n != N_IMG || g_ref_state.n_vec != N_IMG) {
        fprintf(stderr, "    reference: %d files, %d vectors (want %d)\n", g_ref_state.n,
                g_ref_state.n_vec, N_IMG);
        return -1;
    }
    return g_ready = 1;
}

CDB_TEST(disk_full_then_rerun_gives_the_clean_result) {
    /* where the disk fills up: after a fraction of what a clean ingest writes into
    ** the whole database folder, or after N bytes written to shards only (the
    ** catalog commits, the vector writes fail: the window between steps 1 and 3) */
    static const struct {
        const char *under;
        double fraction;
        long long bytes;
    } rounds[] = {{"", 0.02, 0},       {"", 0.10, 0},          {"", 0.30, 0},
                  {"shards/", 0, 0}, {"shards/", 0, 30000}, {"shards/", 0, 100000}};
    int landed = 0;
    char db[900], dirv[960], count[900], after[64], logv[960], countv[960], logf[900];
    cli_run_result r;
    long long total = 0;
    int ready = prepare();
    if (ready == 77) CDB_SKIP("no model or no clipdb binary");
    CHECK_MSG(ready == 1, "set-up failed");

    /* how many bytes a clean ingest writes into the database folder */
    snprintf(db, sizeof db, "%s/measure", g_tmp);
    snprintf(count, sizeof count, "%s/measure.count", g_tmp);
    CHECK_EQ_INT(fu_init(db), 0);
    snprintf(dirv, sizeof dirv, "CDB_FAULT_ENOSPC_DIR=%s/", db);
    snprintf(countv, sizeof countv, "CDB_FAULT_COUNT=%s", count);
    CHECK_EQ_INT(fu_run_expect(FU_INGEST(db, g_lib),
                               (const char *[]){"LD_PRELOAD=" CDB_FAULT_SHIM, dirv, countv, NULL}, 0,
                               &r),
                 0);
    cli_run_free(&r);
    {
        char *c = cli_read_file(count, NULL);
        total = c ? atoll(c) : 0;
        free(c);
    }
    fprintf(stderr, "    a clean ingest of %d images writes %lld bytes into the database\n", N_IMG,
            total);
    CHECK_MSG(total > 10000, "the shim counted %lld bytes: is it preloaded?", total);

    for (size_t i = 0; i < sizeof rounds / sizeof *rounds; i++) {
        fu_state s;
        char *log;
        int n_faults, rc;
        long long limit = rounds[i].fraction > 0 ? (long long)((double)total * rounds[i].fraction)
                                                 : rounds[i].bytes;
        snprintf(db, sizeof db, "%s/full%zu", g_tmp, i);
        snprintf(logf, sizeof logf, "%s/full%zu.log", g_tmp, i);
        CHECK_EQ_INT(fu_init(db), 0);
        snprintf(dirv, sizeof dirv, "CDB_FAULT_ENOSPC_DIR=%s/%s", db, rounds[i].under);
        snprintf(after, sizeof after, "CDB_FAULT_ENOSPC_AFTER=%lld", limit);
        snprintf(logv, sizeof logv, "CDB_FAULT_LOG=%s", logf);
        rc = lu_run_env(FU_INGEST(db, g_lib),
                    (const char *[]){"LD_PRELOAD=" CDB_FAULT_SHIM, dirv, after, logv, NULL}, &r);
        log = cli_read_file(logf, NULL);
        n_faults = fu_count_lines(log, "ENOSPC");
        free(log);
        fprintf(stderr, "    disk full in <db>/%s after %lld bytes: exit %d, %d refused writes; %.*s\n",
                rounds[i].under, limit, rc, n_faults,
                (int)(strchr(r.err, '\n') ? strchr(r.err, '\n') - r.err : (long)strlen(r.err)), r.err);
        if (n_faults == 0) {
            /* the run wrote less than this time (commits are time-based): it must
            ** simply have succeeded */
            CHECK_MSG(rc == 0, "exit %d without an injected fault; stderr: %s", rc, r.err);
        } else {
            landed++;
            CHECK_MSG(rc == 1, "exit %d, want 1 (failure); stderr: %s", rc, r.err);
            CHECK_MSG(strstr(r.err, "clipdb: error:") && strstr(r.err, ": no space left on device"),
                      "no clear disk-full message: %s", r.err);
            CHECK_MSG(strstr(r.err, "hint: free space") != NULL, "no hint: %s", r.err);
        }
        {
            /* the summary counts what was committed (files now ok), not what was tried
            ** (a commit cut short leaves its files pending, vectors or not) */
            const char *f = strstr(r.out, " files: ");
            long long said = -1, ok = 0;
            fu_state st;
            if (f && sscanf(f, " files: %lld added", &said) == 1 && fu_state_read(db, &st) == 0) {
                for (int k = 0; k < st.n; k++) ok += st.f[k].state == CDB_DB_OK;
                CHECK_MSG(said == ok, "the summary says %lld added, %lld files are stored ok",
                          said, ok);
                fu_state_free(&st);
            }
        }
        cli_run_free(&r);

        /* what the failed run left is consistent */
        rc = fu_run_expect((const char *[]){"verify", "--db", db, NULL}, NULL, 0, &r);
        cli_run_free(&r);
        CHECK_EQ_INT(rc, 0);

        /* space is back: the next run finishes the work */
        rc = fu_run_expect(FU_INGEST(db, g_lib), NULL, 0, &r);
        cli_run_free(&r);
        CHECK_EQ_INT(rc, 0);
        rc = fu_run_expect((const char *[]){"verify", "--db", db, NULL}, NULL, 0, &r);
        cli_run_free(&r);
        CHECK_EQ_INT(rc, 0);
        CHECK_EQ_INT(fu_state_read(db, &s), 0);
        CHECK_EQ_INT(s.n_pending, 0);
        CHECK_EQ_INT(s.n_vec, N_IMG);
        rc = fu_state_same(&g_ref_state, &s, NULL);
        fu_state_free(&s);
        CHECK_MSG(rc == 0, "after a full disk (round %zu) and a rerun, the database differs from a clean run", i);
    }
    CHECK_MSG(landed >= 4, "only %d of the rounds hit a full disk", landed);
}

CDB_TEST(read_errors_are_retried_and_the_ingest_goes_on) {
    char lib[900], db[900], ref[900], p[1000], q[1000], logf[900], logv[960];
    cli_run_result r;
    fu_state s, rs;
    int rc, ready = prepare();
    const char *bad[2] = {"eio_first.png", "sub/eio_second.jpg"};
    if (ready == 77) CDB_SKIP("no model or no clipdb binary");
    CHECK_MSG(ready == 1, "set-up failed");

    /* the library plus two more images (copies) that will not read */
    snprintf(lib, sizeof lib, "%s/photos_eio", g_tmp);
    CHECK_EQ_INT(fu_library(lib, 21, N_IMG), 0);
    snprintf(p, sizeof p, "%s/sub", lib);
    mkdir(p, 0755);
    for (int i = 0; i < 2; i++) {
        size_t n = 0;
        char *b = NULL;
        for (int k = 0; k < N_IMG && !b; k++) {
            snprintf(q, sizeof q, "%s/img_%07d.%s", lib, k + i, i ? "jpg" : "png");
            b = cli_read_file(q, &n);
        }
        CHECK(b != NULL);
        snprintf(p, sizeof p, "%s/%s", lib, bad[i]);
        write_file(p, b, n);
        free(b);
    }
    snprintf(ref, sizeof ref, "%s/eio_ref", g_tmp);
    CHECK_EQ_INT(fu_init(ref), 0);
    CHECK_EQ_INT(fu_run_expect(FU_INGEST(ref, lib), NULL, 0, &r), 0);
    cli_run_free(&r);

    snprintf(db, sizeof db, "%s/eio", g_tmp);
    snprintf(logf, sizeof logf, "%s/eio.log", g_tmp);
    snprintf(logv, sizeof logv, "CDB_FAULT_LOG=%s", logf);
    CHECK_EQ_INT(fu_init(db), 0);
    rc = fu_run_expect(FU_INGEST(db, lib),
                       (const char *[]){"LD_PRELOAD=" CDB_FAULT_SHIM, "CDB_FAULT_EIO_MATCH=/eio_", logv,
                                        NULL},
                       3, &r);
    {
        char *log = cli_read_file(logf, NULL);
        CHECK_MSG(fu_count_lines(log, "EIO") >= 2, "the read errors were not injected: %s",
                  log ? log : "(no log)");
        free(log);
    }
    CHECK_EQ_INT(rc, 3);
    CHECK_MSG(strstr(r.out, "0 errors, 2 to retry") != NULL, "summary: %s", r.out);
    cli_run_free(&r);

    /* `clipdb errors` names both files with the reason, as to be retried */
    CHECK_EQ_INT(fu_run_expect((const char *[]){"errors", "--db", db, NULL}, NULL, 0, &r), 0);
    for (int i = 0; i < 2; i++) {
        const char *line = strstr(r.out, bad[i]);
        CHECK_MSG(line && strstr(line, "will retry: ") && strstr(line, "Input/output error"),
                  "errors output lacks %s + reason: %s", bad[i], r.out);
    }
    cli_run_free(&r);

    /* every other file exactly as in a clean run; the two as errors with the reason */
    CHECK_EQ_INT(fu_state_read(db, &s), 0);
    CHECK_EQ_INT(fu_state_read(ref, &rs), 0);
    CHECK_EQ_INT(s.n, N_IMG + 2);
    CHECK_EQ_INT(s.n_vec, N_IMG);
    CHECK_EQ_INT(fu_state_same(&rs, &s, "/eio_"), 0);
    for (int i = 0; i < 2; i++) {
        const fu_file *f;
        snprintf(p, sizeof p, "%s/%s", lib, bad[i]);
        f = fu_find(&s, p);
        CHECK_MSG(f && f->state == CDB_DB_PENDING && !f->vec && f->error &&
                      strstr(f->error, "Input/output error"),
                  "%s: state %d, error %s", p, f ? f->state : -1, f && f->error ? f->error : "(none)");
    }
    fu_state_free(&s);
    CHECK_EQ_INT(fu_run_expect((const char *[]){"verify", "--db", db, NULL}, NULL, 0, &r), 0);
    cli_run_free(&r);

    /* the disk is fine again: the next run (same sizes and times) retries them */
    CHECK_EQ_INT(fu_run_expect(FU_INGEST(db, lib), NULL, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "2 added") != NULL, "rerun summary: %s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(fu_state_read(db, &s), 0);
    CHECK_EQ_INT(s.n_vec, N_IMG + 2);
    CHECK_EQ_INT(fu_state_same(&rs, &s, NULL), 0);
    fu_state_free(&s);
    fu_state_free(&rs);
}

int main(int argc, char **argv) {
    CDB_TEST_LIST(tests, disk_full_then_rerun_gives_the_clean_result,
                  read_errors_are_retried_and_the_ingest_goes_on);
    int rc = cdb_test_run_tmp_(tests, 2, argc, argv, g_tmp, rm_rf);
    fu_state_free(&g_ref_state);
    return rc;
}
