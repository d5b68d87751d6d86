/*
** ingest_child.h: one whole ingest (cdb_engine_create + load the model + ingest, as
** `clipdb init` + `clipdb ingest` do it) in a fresh child process, so that its peak
** memory and CPU are its own and a model's pages never leak into the next
** measurement. Shared by bench_ingest and bench_photos (each includes it once).
**
**   int main(argc, argv) { if (is_ingest_child(argc, argv)) return ingest_child_main(argv); ... }
**   run_child(model, lib, dbdir, threads, batch, decode, &r): re-executes this program
**     (threads: the readers/decoders and the encoder alike)
**     with --child; decode: -1 keep the vector set's mode, 0 exact, 1 fast.
*/
#ifndef CDB_BENCH_INGEST_CHILD_H
#define CDB_BENCH_INGEST_CHILD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/engine.h"
#include "ingest_util.h"

static int child_ingest(const char *model_path, const char *lib, const char *dir, int threads,
                        int batch, int decode) {
    cdb_engine *e = NULL;
    cdb_engine_params ep = cdb_engine_params_default();
    cdb_engine_run_params rp = cdb_engine_run_params_default();
    cdb_engine_summary sum;
    cdb_status rc;
    if ((rc = cdb_engine_create(dir, model_path, NULL)) != CDB_OK) goto fail;
    ep.writer = 1;
    ep.model_threads = threads; /* the encoder too: the same thread count as a baseline */
    if ((rc = cdb_engine_open(dir, &ep, &e)) != CDB_OK) goto fail;
    int64_t t_load = cdb_now_ns();
    if ((rc = cdb_engine_load_model(e, NULL, 1, 0, NULL)) != CDB_OK) goto fail; /* kept: the run uses it */
    t_load = cdb_now_ns() - t_load;
    rp.batch = batch;
    rp.threads = threads;
    rp.decode = decode;
    int64_t t0 = cdb_now_ns();
    if ((rc = cdb_test_ingest(e, lib, &rp, &sum)) != CDB_OK) goto fail; /* run recorded + flush */
    int64_t total = cdb_now_ns() - t0;
    cdb_engine_close(e);
    printf("RESULT total_ns=%lld load_ns=%lld added=%lld errors=%lld found=%lld walk=%lld "
           "read=%lld decode=%lld preprocess=%lld encode=%lld encode_wait=%lld store=%lld "
           "batches=%lld\n",
           (long long)total, (long long)t_load, (long long)sum.added, (long long)sum.errors,
           (long long)sum.found, (long long)sum.ns_walk, (long long)sum.ns_read,
           (long long)sum.ns_decode, (long long)sum.ns_preprocess, (long long)sum.ns_encode,
           (long long)sum.ns_encode_wait, (long long)sum.ns_store, (long long)sum.n_batches);
    return 0;
fail:
    fprintf(stderr, "ingest child: %s: %s\n", cdb_status_str(rc), cdb_errmsg());
    cdb_engine_close(e);
    return 2;
}

typedef struct result {
    double total, load, walk, read, decode, preprocess, encode, encode_wait, store;
    long long added, errors, found, batches;
    double cpu_s, maxrss_mb;
} result;

static double loadavg1(void) {
    double l[3] = {0, 0, 0};
    return getloadavg(l, 3) >= 1 ? l[0] : -1.0;
}

static double field(const char *line, const char *key) {
    char k[64];
    snprintf(k, sizeof k, " %s=", key);
    const char *p = strstr(line, k);
    return p ? atof(p + strlen(k)) : 0.0;
}

/* Runs one ingest in a child process; 0 on success. */
static int run_child(const char *model, const char *lib, const char *dir, int threads, int batch,
                     int decode, result *r) {
    char t[16], b[16], d[16], line[1024] = "";
    int fd[2];
    struct rusage ru;
    int st = 0;
    snprintf(t, sizeof t, "%d", threads);
    snprintf(b, sizeof b, "%d", batch);
    snprintf(d, sizeof d, "%d", decode);
    fflush(stdout);
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execl("/proc/self/exe", "bench-child", "--child", model, lib, dir, t, b, d, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    char buf[1024];
    while (f && fgets(buf, sizeof buf, f))
        if (!strncmp(buf, "RESULT ", 7)) snprintf(line, sizeof line, "%s", buf + 6);
    if (f) fclose(f);
    if (wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || !line[0]) {
        fprintf(stderr, "the ingest of %s failed (status %d)\n", lib, st);
        return -1;
    }
    memset(r, 0, sizeof *r);
    r->total = field(line, "total_ns") / 1e9;
    r->load = field(line, "load_ns") / 1e9;
    r->walk = field(line, "walk") / 1e9;
    r->read = field(line, "read") / 1e9;
    r->decode = field(line, "decode") / 1e9;
    r->preprocess = field(line, "preprocess") / 1e9;
    r->encode = field(line, "encode") / 1e9;
    r->encode_wait = field(line, "encode_wait") / 1e9;
    r->store = field(line, "store") / 1e9;
    r->added = (long long)field(line, "added");
    r->errors = (long long)field(line, "errors");
    r->found = (long long)field(line, "found");
    r->batches = (long long)field(line, "batches");
    r->cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
               ru.ru_stime.tv_usec / 1e6;
    r->maxrss_mb = ru.ru_maxrss / 1024.0;
    return 0;
}

static void print_stages(const result *r, int threads) {
    printf("    where the time goes (busy seconds; readers summed over %d threads):\n", threads);
    printf("      walk + change checks %7.2f s   read + hash %7.2f s   decode %7.2f s   "
           "preprocess %7.2f s\n",
           r->walk, r->read, r->decode, r->preprocess);
    printf("      encode (image tower) %7.2f s   encoder waiting for images %7.2f s   "
           "store (stage + commit) %7.2f s\n",
           r->encode, r->encode_wait, r->store);
    double n = r->found > 0 ? (double)r->found : 1.0;
    printf("      per file: read %.2f ms, decode %.2f ms, preprocess %.2f ms, encode %.2f ms, "
           "store %.3f ms; %lld encoder batches\n",
           r->read * 1e3 / n, r->decode * 1e3 / n, r->preprocess * 1e3 / n, r->encode * 1e3 / n,
           r->store * 1e3 / n, r->batches);
}

static int is_ingest_child(int argc, char **argv) {
    return argc == 8 && !strcmp(argv[1], "--child");
}

static int ingest_child_main(char **argv) {
    return child_ingest(argv[2], argv[3], argv[4], atoi(argv[5]), atoi(argv[6]), atoi(argv[7]));
}

#endif
