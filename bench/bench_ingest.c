/*
** bench_ingest.c: the whole ingest pipeline (walk -> read + hash -> decode ->
** preprocess -> encode -> store), run through the same functions as `clipdb
** ingest` (cli/pipeline.c via the cdb_cli library), on libraries generated with
** the shapes world (world/world.h) under $TMPDIR (default /tmp), deleted at the end.
**
**   (a) ViT-B/32-shaped random weights (as bench_encoder: BENCH_WEIGHTS or
**       <build>/bench_data/vitb32_random.safetensors, written by
**       bench/encoder_baseline.py when missing), N images, 2 decode threads: total
**       time, time inside the encoder (cdb_encode_pixels), time outside it (walk,
**       read, decode, preprocess, store, and the encoder waiting for images).
**       Bar (issue 5): outside <= 15% of the total.
**   (b) the bundled default model (found as the CLI finds it: CLIPDB_MODEL, then
**       <source>/models): files/s and where the time goes, per stage.
**   (c) peak memory (the ingest process's ru_maxrss = VmHWM) with the default
**       model for N and N_LARGE files. Bar: N_LARGE within 10% of N.
**
**   bench_ingest [--n N] [--n-large N] [--parts abc] [--threads T] [--batch B]
**   env: BENCH_INGEST_N (default 2000), BENCH_INGEST_N_LARGE (20000),
**        BENCH_INGEST_PARTS (abc), BENCH_WEIGHTS, TMPDIR
**
** Every ingest runs in a fresh child process (this program re-executed with
** --child), so its peak memory is its own and a model's pages never leak into
** the next measurement. Wall-clock figures count other programs' time on a busy
** machine: the child's CPU time and the load average are printed with them.
** Exit status: 0 when every bar measured is met, 1 when one is missed, 2 on error.
*/
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "db/db.h"
#include "encoder/encoder.h"
#include "engine/engine.h"
#include "world/world.h"

#define WORLD_SEED 515151ull /* a seed no training run uses */
#define BAR_OUTSIDE 0.15
#define BAR_MEM 0.10

#include "ingest_child.h"
#include "bench_util.h"

/* Scenes [0, n) of the bench seed into dir, images only (no manifest). */
static int make_library(const char *dir, int n) {
    cdb_world_library_params lp = cdb_world_library_params_default();
    char man[4200];
    int64_t t0 = cdb_now_ns();
    printf("generating %d images into %s ...\n", n, dir);
    fflush(stdout);
    if (cdb_world_generate(dir, WORLD_SEED, 0, n, &lp) != CDB_OK) {
        fprintf(stderr, "bench_ingest: generate: %s\n", cdb_errmsg());
        return -1;
    }
    snprintf(man, sizeof man, "%s/manifest.jsonl", dir);
    unlink(man);
    printf("  generated in %.1f s\n", (cdb_now_ns() - t0) / 1e9);
    return 0;
}


static int env_int(const char *name, int def) {
    const char *v = getenv(name);
    return v && atoi(v) > 0 ? atoi(v) : def;
}

int main(int argc, char **argv) {
    if (is_ingest_child(argc, argv)) return ingest_child_main(argv);
    int n = env_int("BENCH_INGEST_N", 2000), n_large = env_int("BENCH_INGEST_N_LARGE", 20000);
    int threads = 2, batch = 32, status = 0;
    const char *parts = getenv("BENCH_INGEST_PARTS") ? getenv("BENCH_INGEST_PARTS") : "abc";
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--n") && v) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--n-large") && v) n_large = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--parts") && v) parts = argv[++i];
        else if (!strcmp(argv[i], "--threads") && v) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && v) batch = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_ingest [--n N] [--n-large N] [--parts abc] "
                            "[--threads T] [--batch B]\n");
            return 2;
        }
    }
    if (n < 1 || n_large < 1 || threads < 1 || batch < 1) {
        fprintf(stderr, "bench_ingest: sizes, threads and batch must be positive\n");
        return 2;
    }
    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char base[1024], lib[1200], lib_large[1200], dir[1200];
    snprintf(base, sizeof base, "%s/cdb_bench_ingest_%d", tmp, (int)getpid());
    snprintf(lib, sizeof lib, "%s/lib_%d", base, n);
    snprintf(lib_large, sizeof lib_large, "%s/lib_%d", base, n_large);
    if (mkdir(base, 0755) != 0) {
        fprintf(stderr, "bench_ingest: mkdir %s: %s\n", base, strerror(errno));
        return 2;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("bench_ingest: %d-image library (world seed %llu), %d decode threads, batch %d; "
           "%ld CPUs, load average %.1f\n",
           n, (unsigned long long)WORLD_SEED, threads, batch, ncpu, loadavg1());
    if (make_library(lib, n) != 0) {
        rm_rf(base);
        return 2;
    }
    result r_small;
    int have_small = 0;

    /* (a) ViT-B/32-shaped random weights: the encoder's share of the wall time */
    if (strchr(parts, 'a')) {
        char weights[1024], cmd[4096];
        const char *env_w = getenv("BENCH_WEIGHTS");
        if (env_w && *env_w)
            snprintf(weights, sizeof weights, "%s", env_w);
        else
            snprintf(weights, sizeof weights, "%s/bench_data/vitb32_random.safetensors",
                     CDB_BINARY_DIR);
        if (!file_exists(weights)) {
            printf("generating ViT-B/32-shaped random weights: %s\n", weights);
            fflush(stdout);
            snprintf(cmd, sizeof cmd, PY " %s/bench/encoder_baseline.py --make-weights '%s'",
                     CDB_SOURCE_DIR, weights);
            if (system(cmd) != 0) weights[0] = '\0';
        }
        result r;
        printf("(a) ViT-B/32-shaped random weights (%s), %d images:\n", weights, n);
        fflush(stdout);
        snprintf(dir, sizeof dir, "%s/db_a", base);
        if (!weights[0] || !file_exists(weights)) {
            printf("    skipped: no weights (needs %s with torch to generate them)\n", PY);
        } else if (run_child(weights, lib, dir, threads, batch, -1, &r) != 0) {
            status = 2;
        } else {
            double outside = r.total - r.encode, frac = r.total > 0 ? outside / r.total : 1;
            printf("    total %.2f s (%.1f files/s; model load %.2f s before it), inside the "
                   "encoder %.2f s, outside %.2f s = %.1f%% of the total\n",
                   r.total, r.found / r.total, r.load, r.encode, outside, 100 * frac);
            printf("    ingest process: %.1f s CPU (%.2f cores busy on average), peak RSS %.0f "
                   "MB, load average now %.1f\n",
                   r.cpu_s, r.cpu_s / (r.total + r.load), r.maxrss_mb, loadavg1());
            print_stages(&r, threads);
            printf("    bar: outside the encoder <= %.0f%% of the total: %s (%.1f%%)\n",
                   100 * BAR_OUTSIDE, frac <= BAR_OUTSIDE ? "met" : "NOT met", 100 * frac);
            if (frac > BAR_OUTSIDE && status == 0) status = 1;
        }
        rm_rf(dir);
    }

    /* (b) the default model: throughput and stages; also (c)'s small library */
    const char *src = NULL, *model = cdb_cli_model_path(NULL, &src);
    char model_buf[PATH_MAX];
    if ((strchr(parts, 'b') || strchr(parts, 'c')) && !model) {
        printf("(b, c) skipped: no default model found (models/ or CLIPDB_MODEL)\n");
    } else if (strchr(parts, 'b') || strchr(parts, 'c')) {
        snprintf(model_buf, sizeof model_buf, "%s", model);
        snprintf(dir, sizeof dir, "%s/db_b", base);
        if (run_child(model_buf, lib, dir, threads, batch, -1, &r_small) != 0) {
            status = 2;
        } else {
            have_small = 1;
            printf("(b) default model (%s, from %s), %d images:\n", model_buf, src, n);
            printf("    %.0f files/s: %lld added, %lld errors in %.2f s (model load %.2f s "
                   "before it); %.1f s CPU, load average now %.1f\n",
                   r_small.found / r_small.total, r_small.added, r_small.errors, r_small.total,
                   r_small.load, r_small.cpu_s, loadavg1());
            print_stages(&r_small, threads);
        }
        rm_rf(dir);
    }

    /* (c) peak memory: the large library against the small one */
    if (strchr(parts, 'c') && have_small) {
        result r;
        rm_rf(lib); /* only one library on disk at a time */
        if (make_library(lib_large, n_large) != 0) {
            status = 2;
        } else {
            snprintf(dir, sizeof dir, "%s/db_c", base);
            if (run_child(model_buf, lib_large, dir, threads, batch, -1, &r) != 0) {
                status = 2;
            } else {
                double ratio = r.maxrss_mb / r_small.maxrss_mb;
                printf("(c) peak memory, default model: %d files %.1f MB, %d files %.1f MB: "
                       "ratio %.3f (%d files at %.0f files/s)\n",
                       n, r_small.maxrss_mb, n_large, r.maxrss_mb, ratio, n_large,
                       r.found / r.total);
                printf("    bar: peak memory at %d files within %.0f%% of %d files: %s\n",
                       n_large, 100 * BAR_MEM, n,
                       ratio <= 1 + BAR_MEM ? "met" : "NOT met");
                if (ratio > 1 + BAR_MEM && status == 0) status = 1;
            }
            rm_rf(dir);
        }
    }
    rm_rf(base);
    printf("load average at the end: %.1f on %ld CPUs\n", loadavg1(), ncpu);
    return status;
}
