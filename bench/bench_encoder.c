/*
** bench_encoder.c: clipdb's CPU encoder against PyTorch on ViT-B/32-shaped random
** weights (88M visual + 63M text parameters, F32), measured in the same run:
**   - image-tower throughput at batch 32, best of 2 after a warm-up (bar: >= 1.0x PyTorch)
**   - one short text query, tokenize + encode, median of 9 (bar: <= 0.3x PyTorch's)
**   - peak RSS of this process                     (bar: <= fp32 weights + 200 MB)
** and then the RN50 image tower (OpenAI's ModifiedResNet, 38.3M visual parameters,
** F32, random weights with calibrated BatchNorm statistics) at batch 32 against
** PyTorch eager (NCHW, fp32, BatchNorm as its own op, as OpenAI's clip runs it) on the
** same file, after a warm-up each, their batches interleaved (a PyTorch child driven
** line by line) over BENCH_RN50_ROUNDS rounds (default 3), best of each: bar >= 1.0x. It prints the CPU ISA path
** clipdb's kernels use, OpenBLAS's kernel family and OPENBLAS_CORETYPE (which
** chooses OpenBLAS's kernels for both processes: run it with and without
** OPENBLAS_CORETYPE=Haswell to see both).
** PyTorch runs in a child process (bench/encoder_baseline.py, Debian python3-torch,
** fp32, the same thread count), after clipdb's figures are taken.
**
** Weights: BENCH_WEIGHTS or <build>/bench_data/vitb32_random.safetensors, and
** BENCH_RN50_WEIGHTS or <build>/bench_data/rn50_random.safetensors, written by the
** baseline script on first use. Threads: CLIPDB_BENCH_THREADS (default 2).
** BENCH_NO_TORCH=1 skips the PyTorch side, BENCH_NO_IMAGE=1 the ViT image runs,
** BENCH_ONLY=vit or BENCH_ONLY=rn50 one of the two models (for quick experiments;
** the figures then lack their ratios).
** Prints figures and ratios; exits 0 unless something failed to run (missing a
** bar is reported, not an error: this is a benchmark, not a test).
*/
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "encoder/encoder.h"
#include "kernels/kernels.h"

/* OpenBLAS's name for the kernel family it picked at load (cblas.h declares it in
** some builds only). */
char *openblas_get_corename(void);

#ifndef CDB_SOURCE_DIR
#define CDB_SOURCE_DIR "."
#endif
#ifndef CDB_BINARY_DIR
#define CDB_BINARY_DIR "."
#endif
#define PY "/usr/bin/python3"
#define BATCH 32

static double now_s(void) { return (double)cdb_now_ns() * 1e-9; }

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

/* "RssAnon: ... RssFile: ..." from /proc/self/status (current, not peak). */
static void rss_parts(char *buf, size_t n) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t used = 0;
    buf[0] = 0;
    if (!f) return;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "RssAnon:", 8) || !strncmp(line, "RssFile:", 8)) {
            line[strcspn(line, "\n")] = 0;
            used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? ", " : "", line);
            if (used >= n) break;
        }
    fclose(f);
}

static void loadavg(char *buf, size_t n) {
    FILE *f = fopen("/proc/loadavg", "r");
    buf[0] = 0;
    if (f) {
        if (!fgets(buf, (int)n, f)) buf[0] = 0;
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = 0;
}

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* A standard vocabulary to tokenize with: CLIPDB_VOCAB, the source tree's data/,
** or ../shared/data next to the checkout. */
static const char *find_vocab(void) {
    static const char *cands[] = {CDB_SOURCE_DIR "/data/bpe_simple_vocab_16e6.txt.gz",
                                  CDB_SOURCE_DIR "/../shared/data/bpe_simple_vocab_16e6.txt.gz"};
    const char *env = getenv("CLIPDB_VOCAB");
    if (env && *env && file_exists(env)) return env;
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++)
        if (file_exists(cands[i])) return cands[i];
    return NULL;
}

/* PyTorch's RN50 in a child process driven line by line (encoder_baseline.py
** --serve-rn50): its batches are interleaved with clipdb's, so both see the same
** machine load (this machine is shared; a load swing between two sequential
** phases moved the ratio by 3x). */
typedef struct torch_child {
    pid_t pid;
    FILE *to, *from;
} torch_child;

static int torch_start(torch_child *c, const char *weights, int threads) {
    int in[2], out[2];
    char script[1024], th[16], line[256];
    snprintf(script, sizeof script, "%s/bench/encoder_baseline.py", CDB_SOURCE_DIR);
    snprintf(th, sizeof th, "%d", threads);
    memset(c, 0, sizeof *c);
    if (pipe(in) != 0) return -1;
    if (pipe(out) != 0) {
        close(in[0]), close(in[1]);
        return -1;
    }
    fflush(stdout);
    c->pid = fork();
    if (c->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        execl(PY, PY, script, "--serve-rn50", weights, "--threads", th, "--batch", "32",
              (char *)NULL);
        _exit(127);
    }
    close(in[0]), close(out[1]);
    if (c->pid < 0) {
        close(in[1]), close(out[0]);
        return -1;
    }
    c->to = fdopen(in[1], "w");
    c->from = fdopen(out[0], "r");
    while (c->from && fgets(line, sizeof line, c->from))
        if (!strncmp(line, "ready", 5)) return 0;
    return -1;
}

/* One timed PyTorch batch: seconds, or -1. */
static double torch_run(torch_child *c) {
    char line[256];
    double t = -1;
    if (!c->to || fprintf(c->to, "run\n") < 0 || fflush(c->to) != 0) return -1;
    if (fgets(line, sizeof line, c->from) && sscanf(line, "t=%lf", &t) == 1) return t;
    return -1;
}

/* Ends the child; *rss_mb: its peak RSS. 0 when it exited cleanly. */
static int torch_stop(torch_child *c, double *rss_mb) {
    char line[256];
    int st = 0;
    if (c->to) fclose(c->to);
    while (c->from && fgets(line, sizeof line, c->from))
        sscanf(line, "torch_rn50_rss_mb=%lf", rss_mb);
    if (c->from) fclose(c->from);
    if (c->pid > 0 && waitpid(c->pid, &st, 0) < 0) return -1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* The RN50 image tower: clipdb and PyTorch on the same weights file, batches
** interleaved (BENCH_RN50_ROUNDS rounds, default 3, best of each). 0 = ran. */
static int bench_rn50(int threads) {
    char weights[1024], cmd[4096], load0[128], load1[128];
    const char *env_w = getenv("BENCH_RN50_WEIGHTS"), *core = getenv("OPENBLAS_CORETYPE");
    const char *env_r = getenv("BENCH_RN50_ROUNDS");
    cdb_model_params mp = cdb_model_params_default();
    cdb_model *m = NULL;
    const cdb_model_info *info;
    float *pixels = NULL, *emb = NULL;
    double t, t_load, best = 1e30, torch_best = 1e30, torch_rss = -1, rss;
    uint64_t rng = 4242;
    size_t npx = (size_t)BATCH * 3 * 224 * 224;
    int rc = 0, rounds = env_r && atoi(env_r) > 0 ? atoi(env_r) : 3, have_torch = 0;
    torch_child tc;

    if (env_w && *env_w)
        snprintf(weights, sizeof weights, "%s", env_w);
    else
        snprintf(weights, sizeof weights, "%s/bench_data/rn50_random.safetensors", CDB_BINARY_DIR);
    if (!file_exists(weights)) {
        printf("generating RN50-shaped random weights: %s\n", weights);
        fflush(stdout);
        snprintf(cmd, sizeof cmd, PY " %s/bench/encoder_baseline.py --make-weights-rn50 '%s'",
                 CDB_SOURCE_DIR, weights);
        if (system(cmd) != 0 || !file_exists(weights)) {
            fprintf(stderr, "bench_encoder: could not generate RN50 weights (needs %s with "
                            "torch)\n", PY);
            return 1;
        }
    }
    loadavg(load0, sizeof load0);
    mp.n_threads = threads;
    mp.load_text = 0;
    t = now_s();
    if (cdb_model_open(weights, &mp, &m) != CDB_OK) {
        fprintf(stderr, "bench_encoder: %s\n", cdb_errmsg());
        return 1;
    }
    t_load = now_s() - t;
    info = cdb_model_get_info(m);
    pixels = malloc(npx * sizeof(float));
    emb = malloc((size_t)BATCH * info->embed_dim * sizeof(float));
    if (!pixels || !emb) {
        fprintf(stderr, "bench_encoder: out of memory\n");
        cdb_model_close(m);
        free(pixels);
        free(emb);
        return 1;
    }
    for (size_t i = 0; i < npx; i++) { /* ~uniform [-2, 2) */
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        pixels[i] = (float)((rng >> 40) / (double)(1 << 24)) * 4.0f - 2.0f;
    }
    if (cdb_encode_pixels(m, pixels, BATCH, 1, emb) != CDB_OK) { /* warm-up */
        fprintf(stderr, "bench_encoder: RN50: %s\n", cdb_errmsg());
        rc = 1;
    }
    signal(SIGPIPE, SIG_IGN); /* a dead child shows as a failed read, not a signal */
    if (rc == 0 && !getenv("BENCH_NO_TORCH")) {
        if (torch_start(&tc, weights, threads) == 0) {
            have_torch = 1;
        } else {
            fprintf(stderr, "bench_encoder: the PyTorch side did not start\n");
            torch_stop(&tc, &torch_rss);
            rc = 1;
        }
    }
    for (int r = 0; r < rounds && rc == 0; r++) {
        t = now_s();
        cdb_encode_pixels(m, pixels, BATCH, 1, emb);
        t = now_s() - t;
        if (t < best) best = t;
        if (have_torch) {
            double tt = torch_run(&tc);
            if (tt < 0) {
                rc = 1;
                break;
            }
            if (tt < torch_best) torch_best = tt;
        }
    }
    if (have_torch && torch_stop(&tc, &torch_rss) != 0) rc = 1;
    rss = peak_rss_mb();
    loadavg(load1, sizeof load1);
    cdb_model_close(m);
    free(pixels);
    free(emb);
    if (rc) return rc;
    {
        double ips = BATCH / best, tips = have_torch ? BATCH / torch_best : -1;
        printf("encoder bench: RN50 image tower (ModifiedResNet, random weights %s, F32), %d "
               "threads, batch %d, %d interleaved rounds (best of each)\n", weights, threads,
               BATCH, rounds);
        printf("  kernels: clipdb ISA path %s; OpenBLAS kernels %s (OPENBLAS_CORETYPE=%s)\n",
               cdb_k_isa_name(cdb_k_cpu_isa()), openblas_get_corename(), core ? core : "unset");
        printf("  load average before/after: %s | %s\n", load0, load1);
        printf("  clipdb model open (image tower only: validate + hash + fold BatchNorm): "
               "%.3f s\n", t_load);
        printf("  RN50 image tower, batch %d:   clipdb %.2f img/s   pytorch %.2f img/s   ratio "
               "%.2fx (bar >= 1.0x: %s)\n", BATCH, ips, tips, tips > 0 ? ips / tips : 0,
               tips > 0 && ips >= tips ? "met" : "NOT met");
        printf("  peak RSS: clipdb %.0f MB (this process so far)   pytorch %.0f MB\n", rss,
               torch_rss);
    }
    return rc;
}

int main(void) {
    char weights[1024], cmd[4096], line[512], load0[128], load1[128], parts[256];
    const char *env_w = getenv("BENCH_WEIGHTS"), *env_t = getenv("CLIPDB_BENCH_THREADS");
    const char *only = getenv("BENCH_ONLY");
    const char *vocab = find_vocab();
    const char *query = "a dog on a beach";
    int threads = env_t && atoi(env_t) > 0 ? atoi(env_t) : 2;
    cdb_model_params mp = cdb_model_params_default();
    cdb_model *m = NULL;
    const cdb_model_info *info;
    float *pixels = NULL, *emb = NULL;
    double t, t_load, best_img = 1e30, text_ms = -1, rss, weights_mb;
    double torch_img = -1, torch_text = -1, torch_rss = -1;
    int text_mode_ids = 0, rc = 0;
    uint64_t rng = 42;
    FILE *p;

    if (only && !strcmp(only, "rn50")) return bench_rn50(threads);
    loadavg(load0, sizeof load0);
    if (env_w && *env_w)
        snprintf(weights, sizeof weights, "%s", env_w);
    else
        snprintf(weights, sizeof weights, "%s/bench_data/vitb32_random.safetensors", CDB_BINARY_DIR);
    if (!file_exists(weights)) {
        printf("generating ViT-B/32-shaped random weights: %s\n", weights);
        fflush(stdout);
        snprintf(cmd, sizeof cmd, PY " %s/bench/encoder_baseline.py --make-weights '%s'",
                 CDB_SOURCE_DIR, weights);
        if (system(cmd) != 0 || !file_exists(weights)) {
            fprintf(stderr, "bench_encoder: could not generate weights (needs %s with torch)\n", PY);
            return 1;
        }
    }

    /* ---- clipdb ---- */
    mp.n_threads = threads;
    mp.tokenizer_path = vocab;
    t = now_s();
    if (cdb_model_open(weights, &mp, &m) != CDB_OK) {
        /* The tokenizer may not be built yet: retry without one (ids path). */
        mp.tokenizer_path = NULL;
        if (cdb_model_open(weights, &mp, &m) != CDB_OK) {
            fprintf(stderr, "bench_encoder: %s\n", cdb_errmsg());
            return 1;
        }
    }
    t_load = now_s() - t;
    info = cdb_model_get_info(m);
    weights_mb = 0;
    {
        struct stat st;
        if (stat(weights, &st) == 0) weights_mb = (double)st.st_size / (1024.0 * 1024.0);
    }
    pixels = malloc((size_t)BATCH * 3 * 224 * 224 * sizeof(float));
    emb = malloc((size_t)BATCH * info->embed_dim * sizeof(float));
    for (size_t i = 0; i < (size_t)BATCH * 3 * 224 * 224; i++) { /* ~uniform [-2, 2) */
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        pixels[i] = (float)((rng >> 40) / (double)(1 << 24)) * 4.0f - 2.0f;
    }
    if (getenv("BENCH_NO_IMAGE")) {
        best_img = 1e30;
    } else if (cdb_encode_pixels(m, pixels, BATCH, 1, emb) != CDB_OK) { /* warm-up */
        fprintf(stderr, "bench_encoder: %s\n", cdb_errmsg());
        return 1;
    }
    for (int r = 0; r < 2 && !getenv("BENCH_NO_IMAGE"); r++) {
        t = now_s();
        cdb_encode_pixels(m, pixels, BATCH, 1, emb);
        t = now_s() - t;
        if (t < best_img) best_img = t;
    }
    {
        double ts[9];
        int n = 9;
        /* "a dog on a beach" in the standard vocabulary, when no tokenizer is built. */
        static const int32_t ids_ref[7] = {49406, 320, 1929, 525, 320, 2117, 49407};
        int32_t ids[77] = {0};
        memcpy(ids, ids_ref, sizeof ids_ref);
        text_mode_ids = cdb_model_tokenizer(m) == NULL;
        for (int r = 0; r < 3 + n; r++) {
            cdb_status s;
            t = now_s();
            s = text_mode_ids ? cdb_encode_tokens(m, ids, 1, 1, emb)
                              : cdb_encode_texts(m, &query, 1, 1, emb);
            t = now_s() - t;
            if (s != CDB_OK) {
                fprintf(stderr, "bench_encoder: text: %s\n", cdb_errmsg());
                return 1;
            }
            if (r >= 3) ts[r - 3] = t;
        }
        for (int i = 1; i < n; i++) /* insertion sort, median */
            for (int j = i; j > 0 && ts[j] < ts[j - 1]; j--) {
                double x = ts[j];
                ts[j] = ts[j - 1];
                ts[j - 1] = x;
            }
        text_ms = ts[n / 2] * 1000.0;
    }
    rss = peak_rss_mb();
    rss_parts(parts, sizeof parts);
    loadavg(load1, sizeof load1);
    cdb_model_close(m);

    /* ---- PyTorch ---- */
    snprintf(cmd, sizeof cmd,
             PY " %s/bench/encoder_baseline.py --measure '%s' --threads %d --batch %d "
                "--runs 2 --text-runs 9%s%s%s",
             CDB_SOURCE_DIR, weights, threads, BATCH, vocab ? " --vocab '" : "", vocab ? vocab : "",
             vocab ? "'" : "");
    p = getenv("BENCH_NO_TORCH") ? NULL : popen(cmd, "r");
    if (p) {
        while (fgets(line, sizeof line, p)) {
            sscanf(line, "torch_image_per_s=%lf", &torch_img);
            sscanf(line, "torch_text_ms=%lf", &torch_text);
            sscanf(line, "torch_rss_mb=%lf", &torch_rss);
        }
        if (pclose(p) != 0) rc = 1;
    }

    printf("encoder bench: ViT-B/32-shaped random weights (%s, %.0f MB F32), %d threads, "
           "backend cpu (OpenBLAS + OpenMP)\n", weights, weights_mb, threads);
    printf("  load average before/after clipdb runs: %s | %s\n", load0, load1);
    printf("  clipdb model open (validate + hash + map): %.3f s\n", t_load);
    printf("  image tower, batch %d:   clipdb %.2f img/s   pytorch %.2f img/s   ratio %.2fx "
           "(bar >= 1.0x: %s)\n", BATCH, BATCH / best_img, torch_img,
           torch_img > 0 ? (BATCH / best_img) / torch_img : 0,
           torch_img > 0 && (BATCH / best_img) >= torch_img ? "met" : "NOT met");
    printf("  text query \"%s\"%s:   clipdb %.2f ms   pytorch %.2f ms   ratio %.3fx "
           "(bar <= 0.3x: %s)\n", query, text_mode_ids ? " (ids only: no tokenizer built)" :
           " (tokenize+encode)", text_ms, torch_text, torch_text > 0 ? text_ms / torch_text : 0,
           torch_text > 0 && text_ms <= 0.3 * torch_text ? "met" : "NOT met");
    printf("  peak RSS: clipdb %.0f MB (bar <= %.0f MB weights + 200 MB = %.0f MB: %s)   "
           "pytorch %.0f MB\n", rss, weights_mb, weights_mb + 200,
           rss <= weights_mb + 200 ? "met" : "NOT met", torch_rss);
    printf("  clipdb RSS after the runs: %s (F32 weights are used in place from the file "
           "mapping; untouched rows of the token embedding are never resident)\n", parts);
    free(pixels);
    free(emb);
    fflush(stdout);
    if (!(only && !strcmp(only, "vit")) && bench_rn50(threads) != 0) rc = 1;
    return rc;
}
