/*
** bench_merge.c: the memory of `clipdb merge` against the number of files (issue 29).
**
**   bench_merge [N] [--clipdb PATH] [--keep DIR]     (default N = 100,000)
**   (--clipdb, or $CLIPDB_BENCH_BIN: the binary that merges)
**
** Two parts made by `clipdb init` (the bundled model) and filled through db/ with random
** vectors (bench_db.h; nothing encoded): one of N/10 files (the baseline, in the same
** run) and one of N. Each is merged into a new database by `clipdb merge --no-index` (a
** whole process; the index is left out, since its own memory grows with N by nature),
** and the process's peak RSS (wait4's ru_maxrss) printed, with the ratio of the two and
** the bytes per file of the difference. A merge that holds the parts' rows grows by
** ~100 bytes per file plus the path; one that streams them stays flat (ratio ~1).
** --clipdb PATH merges with another build's binary (e.g. the main branch's, to compare;
** one without --no-index is run without it).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli_run.h"
#include "db/db.h"
#include "bench_db.h"
#include "bench_util.h"

/* clipdb args... (binary exe) in a child, output to /dev/null: its exit code, peak RSS
** in *kb and wall time in *s. */
static int run_rss(const char *exe, const char *const *args, long *kb, double *s) {
    double ms = 0;
    bench_usage use = {0, 0};
    int rc = bench_exe_run(exe, args, 0, &ms, &use);
    *kb = use.maxrss_kb;
    *s = ms / 1000.0;
    return rc;
}

/* A part of n files at dir (made once). */
static int make_part(const char *dir, const char *model, int64_t n) {
    if (file_exists(dir)) return 0;
    if (bench_clipdb_run((const char *[]){"init", "--db", dir, "--model", model, "-q", NULL}, 1,
                         NULL) != 0)
        return -1;
    return bench_db_fill(dir, n, NULL, bench_rnd_normal, "bench_merge");
}

/* Merges the part into a new database under dir; peak RSS in *kb. */
static int merge(const char *exe, const char *dir, const char *part, const char *tag, long *kb) {
    char into[4300];
    double s = 0;
    int rc;
    snprintf(into, sizeof into, "%s/merged-%s", dir, tag);
    rm_rf(into);
    rc = run_rss(exe, (const char *[]){"merge", "--db", into, "--no-index", "-q", part, NULL}, kb,
                 &s);
    if (rc == 2) { /* a binary from before --no-index, whose merge built no index */
        rm_rf(into);
        rc = run_rss(exe, (const char *[]){"merge", "--db", into, "-q", part, NULL}, kb, &s);
    }
    if (rc != 0) fprintf(stderr, "bench_merge: merge of %s exited %d\n", part, rc);
    else printf("merge of %s: %.1f s, peak RSS %.1f MB\n", tag, s, *kb / 1024.0);
    fflush(stdout);
    rm_rf(into);
    return rc;
}

int main(int argc, char **argv) {
    int64_t n = 100000, n_small;
    const char *keep = NULL, *model = cli_find_model(), *exe = bench_clipdb_path();
    char tmp[] = "/tmp/clipdb-bench-merge-XXXXXX", dir[4200], small[4300], big[4300];
    char tag_small[64], tag_big[64];
    long kb_small = 0, kb_big = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--keep") && i + 1 < argc) keep = argv[++i];
        else if (!strcmp(argv[i], "--clipdb") && i + 1 < argc) exe = argv[++i];
        else n = atoll(argv[i]);
    }
    if (!model) {
        printf("bench_merge: skipped (no model: models/<name>/ with weights)\n");
        return 0;
    }
    n_small = n / 10 > 0 ? n / 10 : 1;
    if (keep) snprintf(dir, sizeof dir, "%s", keep);
    else if (mkdtemp(tmp)) snprintf(dir, sizeof dir, "%s", tmp);
    else return perror("mkdtemp"), 1;
    mkdir(dir, 0777);
    snprintf(small, sizeof small, "%s/part-%lld", dir, (long long)n_small);
    snprintf(big, sizeof big, "%s/part-%lld", dir, (long long)n);
    snprintf(tag_small, sizeof tag_small, "%lld files", (long long)n_small);
    snprintf(tag_big, sizeof tag_big, "%lld files", (long long)n);
    printf("bench_merge: N=%lld files (baseline %lld), %s, in %s\n", (long long)n,
           (long long)n_small, exe, dir);
    fflush(stdout);
    if (make_part(small, model, n_small) != 0 || make_part(big, model, n) != 0) return 1;
    if (merge(exe, dir, small, tag_small, &kb_small) != 0 ||
        merge(exe, dir, big, tag_big, &kb_big) != 0)
        return 1;
    printf("peak RSS: %.1f MB at %lld files, %.1f MB at %lld = %.2fx the baseline; "
           "%.0f bytes per added file\n",
           kb_small / 1024.0, (long long)n_small, kb_big / 1024.0, (long long)n,
           (double)kb_big / (double)kb_small,
           (double)(kb_big - kb_small) * 1024.0 / (double)(n - n_small));
    if (!keep) rm_rf(dir);
    else printf("(kept in %s)\n", dir);
    return 0;
}
