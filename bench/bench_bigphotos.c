/*
** bench_bigphotos.c: the peak memory of ingesting ten 150-megapixel JPEGs (issue 25,
** part 3), with the decoders' budget of pixels in flight and without it, measured in
** the same run (figures and ratios printed, nothing asserted).
**
** The photos (15000 x 10000 RGB, written at run time by tests/big_jpeg.h into
** $TMPDIR) are ingested by the real `clipdb` binary in a fresh process each time,
** with CLIPDB_BENCH_THREADS reader/decoder threads (default 8: a many-core machine's
** decoders, which the budget exists for) and the bundled model:
**   baseline   --decode-memory 1048576 (1 TiB: no bound in practice)
**   default    no option: a quarter of the machine's memory
**   1 GiB      --decode-memory 1024
** Printed per run: peak RSS (wait4's ru_maxrss), the run's decode_peak_pixels and
** decode_waits, wall time; then each ratio against the baseline's peak RSS.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "big_jpeg.h"
#include "bench_util.h"

#define N_PHOTOS 10
#define W 15000
#define H 10000

typedef struct run_result {
    long max_rss_kb;
    double seconds;
    long long peak_px, waits;
    int status;
} run_result;

static long long json_int(const char *text, const char *key) {
    char k[100];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *p = strstr(text, k);
    return p ? atoll(p + strlen(k)) : -1;
}

/* clipdb ARGS... in a child, stdout into out (size), peak RSS and time into *r. */
static int run_clipdb(char *const argv[], char *out, size_t size, run_result *r) {
    int pipefd[2];
    struct rusage ru;
    size_t got = 0;
    double t0 = now_s();
    if (pipe(pipefd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 1);
        close(pipefd[0]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(pipefd[1]);
    for (ssize_t k; (k = read(pipefd[0], out + got, size - 1 - got)) > 0;) got += (size_t)k;
    out[got] = '\0';
    close(pipefd[0]);
    if (wait4(pid, &r->status, 0, &ru) != pid) return -1;
    r->max_rss_kb = ru.ru_maxrss;
    r->seconds = now_s() - t0;
    return WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1;
}

int main(void) {
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    const char *th = getenv("CLIPDB_BENCH_THREADS");
    char base[512], lib[600], path[700], clipdb[600], threads[16];
    static char out[1 << 16];
    static const struct {
        const char *label, *mem;
    } runs[] = {{"baseline (no bound)", "1048576"},
                {"default budget", NULL},
                {"1 GiB budget", "1024"}};
    run_result res[3];
    snprintf(threads, sizeof threads, "%d", th && atoi(th) > 0 ? atoi(th) : 8);
    snprintf(clipdb, sizeof clipdb, "%s/clipdb", CDB_BINARY_DIR);
    snprintf(base, sizeof base, "%s/clipdb-bigphotos-XXXXXX", tmp);
    if (!mkdtemp(base)) return 1;
    snprintf(lib, sizeof lib, "%s/lib", base);
    mkdir(lib, 0755);
    double t0 = now_s();
    for (int i = 0; i < N_PHOTOS; i++) {
        snprintf(path, sizeof path, "%s/p%02d.jpg", lib, i);
        if (big_jpeg_write(path, W, H, 3, 85, (unsigned)i) != 0) return 1;
    }
    printf("bench_bigphotos: %d JPEGs of %dx%d (%.0f MP, RGB) written in %.1f s; %s decoder "
           "threads\n",
           N_PHOTOS, W, H, W * (double)H / 1e6, now_s() - t0, threads);
    for (int k = 0; k < 3; k++) {
        char db[700];
        snprintf(db, sizeof db, "%s/db%d", base, k);
        char *init[] = {clipdb, "init", "--db", db, "--quiet", NULL};
        run_result ri;
        int irc = run_clipdb(init, out, sizeof out, &ri);
        if (irc != 0) {
            printf("  clipdb init failed (exit %d, status %d: no bundled model?)\n", irc,
                   ri.status);
            return 77;
        }
        char *argv[16] = {clipdb, "ingest", "--db", db, lib, "--threads", threads, "--json",
                          "--quiet", NULL};
        if (runs[k].mem) {
            argv[9] = "--decode-memory";
            argv[10] = (char *)runs[k].mem;
            argv[11] = NULL;
        }
        int rc = run_clipdb(argv, out, sizeof out, &res[k]);
        res[k].peak_px = json_int(out, "decode_peak_pixels");
        res[k].waits = json_int(out, "decode_waits");
        printf("  %-20s peak RSS %6.0f MB, decoded pixels in flight at most %5.0f MP, %lld "
               "decodes waited, %.1f s (exit %d, %lld added)\n",
               runs[k].label, res[k].max_rss_kb / 1024.0, res[k].peak_px / 1e6, res[k].waits,
               res[k].seconds, rc, json_int(out, "added"));
    }
    for (int k = 1; k < 3; k++)
        printf("  %-20s peak RSS %.2fx the baseline's\n", runs[k].label,
               (double)res[k].max_rss_kb / (double)res[0].max_rss_kb);
    for (int i = 0; i < N_PHOTOS; i++) {
        snprintf(path, sizeof path, "%s/p%02d.jpg", lib, i);
        unlink(path);
    }
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    return system(cmd) == 0 ? 0 : 1;
}
