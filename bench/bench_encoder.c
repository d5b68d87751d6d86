/*
** bench_encoder.c: clipdb's CPU encoder against PyTorch eager (scripts/clip_torch.py,
** fp32, the same weights, the same thread count) in the same run, the two sides'
** batches interleaved (a PyTorch child driven line by line, so both see the same load
** on a shared machine; best of each):
**   - ViT-B/32 (random weights, 88M visual + 63M text parameters, F32): the image
**     tower at batch 32 over BENCH_ROUNDS rounds (default 3; bar >= 1.2x PyTorch),
**     one short text query, tokenize + encode, median of 9 with each side run 200 ms
**     after the other (bar <= 0.15x PyTorch's; also printed back to back, where each
**     side pays for the other process's worker threads still spinning),
**     peak RSS (bar <= fp32 weights + 200 MB); then the same weights stored F16
**     (BENCH_WEIGHTS_F16 or <build>/bench_data/vitb32_random_f16.safetensors) only
**     opened, for the bytes their widened, packed matrices take;
**   - RN50 (OpenAI's ModifiedResNet, 38.3M visual parameters, F32, random weights with
**     calibrated BatchNorm statistics): the image tower at batch 32 (bar >= 1.2x;
**     PyTorch runs it NCHW with BatchNorm as its own op, as OpenAI's clip does);
**   - SigLIP2 B/16 (random weights at the real size, Hugging Face layout, written by
**     bench/siglip_baseline.py into <build>/bench_data/siglip2_b16_random{,_f16}/; PyTorch
**     runs scripts/siglip_torch.py's SiglipModel): peak RSS (VmHWM) of a child process
**     that opens both towers and encodes a batch and a query, for the F16 and the F32
**     checkpoint, against Immich's published 3 GB; the image tower at batch 32 (bar >=
**     1.2x) and a 64-id query (bar <= 0.15x; no tokenizer on either side), as for
**     ViT-B/32; the text tower's open + one query with the packed matrix cache off, cold
**     and hit (a private cache folder, removed after).
** Each tower's rate is also given in GFLOP/s and as a percentage of this machine's
** peak fp32 FMA rate on clipdb's ISA path, measured in the same run (a small FMA loop
** on the same threads, best of one probe per round). Printed with the figures: the
** GEMM path clipdb ran (CLIPDB_ISA=avx2 or scalar forces a lower one) and whether
** cpuid offers AVX-512 at all, the bytes of its packed weight matrices, OpenBLAS's
** kernel family (PyTorch's GEMM) and OPENBLAS_CORETYPE (which picks those kernels:
** run with and without it), the load average before and after.
**
** Weights: BENCH_WEIGHTS or <build>/bench_data/vitb32_random.safetensors, and
** BENCH_RN50_WEIGHTS or <build>/bench_data/rn50_random.safetensors, written by the
** baseline script on first use. Threads: CLIPDB_BENCH_THREADS (default 2).
** BENCH_NO_TORCH=1 skips the PyTorch side, BENCH_ONLY=vit, rn50 or siglip one of the
** three models. The CPU ISA path that ran is printed (cdb_k_cpu_isa). Exits 0 unless
** something failed to run (missing a bar is reported,
** not an error: this is a benchmark, not a test): each bar is printed MET or MISSED.
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
#include "bench_util.h"

/* OpenBLAS's name for the kernel family it picked at load (cblas.h declares it in
** some builds only). */
char *openblas_get_corename(void);

#define BATCH 32

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

/* ---- the PyTorch side: a child process driven line by line -------------------- */

typedef struct torch_child {
    pid_t pid;
    FILE *to, *from;
} torch_child;

/* bench/<py> <mode> weights --threads T --batch 32 [--vocab V] (py: encoder_baseline.py
** or siglip_baseline.py); 0 once it printed "ready" (after its warm-ups). */
static int torch_start(torch_child *c, const char *py, const char *mode, const char *weights,
                       int threads, const char *vocab) {
    int in[2], out[2];
    char script[1024], th[16], line[256];
    snprintf(script, sizeof script, "%s/bench/%s", CDB_SOURCE_DIR, py);
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
        if (vocab)
            execl(PY, PY, script, mode, weights, "--threads", th, "--batch", "32", "--vocab",
                  vocab, (char *)NULL);
        else
            execl(PY, PY, script, mode, weights, "--threads", th, "--batch", "32", (char *)NULL);
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

/* One timed PyTorch step ("run": an image batch, "text": a query): seconds, or -1. */
static double torch_cmd(torch_child *c, const char *cmd) {
    char line[256];
    double t = -1;
    if (!c->to || fprintf(c->to, "%s\n", cmd) < 0 || fflush(c->to) != 0) return -1;
    if (c->from && fgets(line, sizeof line, c->from) && sscanf(line, "t=%lf", &t) == 1) return t;
    return -1;
}

/* Ends the child; *rss_mb: its peak RSS. 0 when it exited cleanly. */
static int torch_stop(torch_child *c, double *rss_mb) {
    char line[256];
    int st = 0;
    if (c->to) fclose(c->to);
    while (c->from && fgets(line, sizeof line, c->from))
        if (sscanf(line, "torch_rss_mb=%lf", rss_mb) != 1)
            sscanf(line, "torch_rn50_rss_mb=%lf", rss_mb);
    if (c->from) fclose(c->from);
    if (c->pid > 0 && waitpid(c->pid, &st, 0) < 0) return -1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* The PyTorch side unless BENCH_NO_TORCH: *have 1 once it is ready. 0 = fine (also when
** skipped); 1 = it did not start (said on stderr). */
static int torch_begin(torch_child *c, const char *py, const char *mode, const char *weights,
                       int threads, const char *vocab, int *have, double *rss) {
    *have = 0;
    signal(SIGPIPE, SIG_IGN); /* a dead child shows as a failed read, not a signal */
    if (getenv("BENCH_NO_TORCH")) return 0;
    if (torch_start(c, py, mode, weights, threads, vocab) == 0) {
        *have = 1;
        return 0;
    }
    fprintf(stderr, "bench_encoder: the PyTorch side did not start\n");
    torch_stop(c, rss);
    return 1;
}

#define PEAK_PROBE_S 0.25

/* rounds of one clipdb image batch (BATCH images at px) then one PyTorch "run" (when
** have): the best time of each side, and the best FMA-rate probe (one per round) in
** *peak. 0 = ran; 1 = the PyTorch side failed. */
static int interleave_batches(cdb_model *m, const float *px, float *emb, torch_child *tc,
                              int have, int threads, int rounds, double *best,
                              double *torch_best, double *peak) {
    for (int r = 0; r < rounds; r++) {
        double pk = cdb_k_cpu_fma_peak_gflops(threads, PEAK_PROBE_S), t;
        if (pk > *peak) *peak = pk;
        t = now_s();
        cdb_encode_pixels(m, px, BATCH, 1, emb);
        t = now_s() - t;
        if (t < *best) *best = t;
        if (!have) continue;
        if ((t = torch_cmd(tc, "run")) < 0) return 1;
        if (t < *torch_best) *torch_best = t;
    }
    return 0;
}

/* ---- FLOP counts (multiply-adds x 2) ------------------------------------------------ */

/* The ViT image tower as clip.c computes it: patch GEMM, blocks, projection; the
** last block's keys and values for every token, all else for the class token only. */
static double vit_image_flops(const cdb_model_info *in) {
    double g = in->image_size / in->patch_size, N = g * g, S = N + 1, W = in->vision_width;
    double M = in->vision_mlp_width, P = in->patch_size, L = in->vision_layers;
    double block = S * W * 3 * W + 2 * S * S * W + S * W * W + 2 * S * W * M;
    double last = S * W * 2 * W + W * W + 2 * S * W + W * W + 2 * W * M;
    return 2 * (N * W * 3 * P * P + (L - 1) * block + last + W * in->embed_dim);
}

/* OpenAI's RN50 at 224 px as resnet.c computes it: the stem, the Bottlenecks (a
** stride-2 block's 3x3 at full resolution, its c3 and shortcut after the pool), the
** attention pool (k, v for every token, q and c_proj for the mean token). */
static double rn50_image_flops(void) {
    static const int blocks[4] = {3, 4, 6, 3};
    double f = 0, r = 112, cin;
    f += r * r * 9 * 3 * 32 + r * r * 9 * 32 * 32 + r * r * 9 * 32 * 64; /* stem */
    r = 56, cin = 64;
    for (int s = 0; s < 4; s++) {
        double p = 64 << s;
        for (int b = 0; b < blocks[s]; b++) {
            double ro = (s > 0 && b == 0) ? r / 2 : r;
            f += r * r * cin * p + r * r * 9 * p * p + ro * ro * p * 4 * p;
            if (b == 0) f += ro * ro * cin * 4 * p; /* downsample */
            cin = 4 * p, r = ro;
        }
    }
    f += (r * r + 1) * 2048 * 2 * 2048 + 2048 * 2048 + 2 * (r * r + 1) * 2048 + 2048 * 1024;
    return 2 * f;
}

static const char *verdict(int met) { return met ? "MET" : "MISSED"; }

/* Whether the CPU reports AVX-512F (cpuid; the OS saving the registers aside). */
static int cpu_has_avx512f(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
#else
    return 0;
#endif
}

/* path: the weights file; made by encoder_baseline.py <flag> when missing. 0 = there. */
static int ensure_weights(const char *path, const char *flag, const char *what) {
    char cmd[4096];
    if (file_exists(path)) return 0;
    printf("generating %s: %s\n", what, path);
    fflush(stdout);
    snprintf(cmd, sizeof cmd, PY " %s/bench/encoder_baseline.py %s '%s'", CDB_SOURCE_DIR, flag,
             path);
    if (system(cmd) != 0 || !file_exists(path)) {
        fprintf(stderr, "bench_encoder: could not generate %s (needs %s with torch)\n", what, PY);
        return 1;
    }
    return 0;
}

static void print_kernels(int threads, double peak) {
    const char *isa = getenv("CLIPDB_ISA"), *core = getenv("OPENBLAS_CORETYPE");
    printf("  cpuid: AVX-512F %s\n",
           cpu_has_avx512f() ? "present (the avx512 path can run here)"
                             : "absent: the avx512 path cannot run on this machine, its "
                               "figures are not measured here");
    printf("  kernels: clipdb GEMM path %s (CLIPDB_ISA=%s), packed weights %.1f MiB; PyTorch: "
           "OpenBLAS kernels %s (OPENBLAS_CORETYPE=%s)\n", cdb_k_cpu_gemm_path(),
           isa ? isa : "unset", (double)cdb_k_cpu_packed_bytes() / (1 << 20),
           openblas_get_corename(), core ? core : "unset");
    printf("  peak fp32 FMA rate on the %s path, %d threads, measured in this run: %.1f "
           "GFLOP/s\n", cdb_k_cpu_gemm_path(), threads, peak);
}

/* The RN50 image tower: clipdb and PyTorch on the same weights file, batches
** interleaved (BENCH_ROUNDS rounds, default 3, best of each). 0 = ran. */
static int bench_rn50(int threads, int rounds) {
    char weights[1024], load0[128], load1[128];
    const char *env_w = getenv("BENCH_RN50_WEIGHTS");
    cdb_model_params mp = cdb_model_params_default();
    cdb_model *m = NULL;
    const cdb_model_info *info;
    float *pixels = NULL, *emb = NULL;
    double t, t_load, best = 1e30, torch_best = 1e30, torch_rss = -1, rss, peak = 0;
    uint64_t rng = 4242;
    size_t npx = (size_t)BATCH * 3 * 224 * 224;
    int rc = 0, have_torch = 0;
    torch_child tc;

    if (env_w && *env_w)
        snprintf(weights, sizeof weights, "%s", env_w);
    else
        snprintf(weights, sizeof weights, "%s/bench_data/rn50_random.safetensors", CDB_BINARY_DIR);
    if (ensure_weights(weights, "--make-weights-rn50", "RN50-shaped random weights")) return 1;
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
    if (rc == 0)
        rc = torch_begin(&tc, "encoder_baseline.py", "--serve-rn50", weights, threads, NULL,
                         &have_torch, &torch_rss);
    if (rc == 0)
        rc = interleave_batches(m, pixels, emb, &tc, have_torch, threads, rounds, &best,
                                &torch_best, &peak);
    if (have_torch && torch_stop(&tc, &torch_rss) != 0) rc = 1;
    rss = peak_rss_mb();
    loadavg(load1, sizeof load1);
    if (rc == 0) {
        double ips = BATCH / best, tips = have_torch ? BATCH / torch_best : -1;
        double gf = rn50_image_flops() * BATCH / best * 1e-9;
        printf("encoder bench: RN50 image tower (ModifiedResNet, random weights %s, F32), %d "
               "threads, batch %d, %d interleaved rounds (best of each)\n", weights, threads,
               BATCH, rounds);
        print_kernels(threads, peak);
        printf("  load average before/after: %s | %s\n", load0, load1);
        printf("  clipdb model open (image tower only: validate + hash + fold BatchNorm + pack): "
               "%.3f s\n", t_load);
        printf("  RN50 image tower, batch %d:   clipdb %.2f img/s (%.1f GFLOP/s, %.0f%% of peak)   "
               "pytorch %.2f img/s   ratio %.2fx (bar >= 1.2x: %s)\n", BATCH, ips, gf,
               peak > 0 ? 100 * gf / peak : 0, tips, tips > 0 ? ips / tips : 0,
               tips > 0 ? verdict(ips >= 1.2 * tips) : "not measured");
        printf("  peak RSS: clipdb %.0f MB (this process so far)   pytorch %.0f MB\n", rss,
               torch_rss);
    }
    cdb_model_close(m);
    free(pixels);
    free(emb);
    return rc;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define TEXT_RUNS 9
/* Before each text step of either side in the "settled" series: long enough for the
** other process's worker threads to stop spinning (OpenMP/OpenBLAS spin a few ms after
** each call; run right after them, a 10 ms query also pays those ms, ~7 here). */
#define TEXT_GAP_MS 200

/* The ViT-B/32 towers, interleaved with PyTorch's. *packed_f32: the bytes the
** model's packed matrices took. 0 = ran. */
static int bench_vit(int threads, int rounds, size_t *packed_f32 /* OUT */) {
    char weights[1024], load0[128], load1[128], parts[256];
    const char *env_w = getenv("BENCH_WEIGHTS");
    const char *vocab = find_vocab();
    const char *query = "a dog on a beach";
    /* "a dog on a beach" in the standard vocabulary, when no tokenizer is built. */
    static const int32_t ids_ref[7] = {49406, 320, 1929, 525, 320, 2117, 49407};
    int32_t ids[77] = {0};
    cdb_model_params mp = cdb_model_params_default();
    cdb_model *m = NULL;
    const cdb_model_info *info;
    float *pixels = NULL, *emb = NULL;
    double t, t_load, best = 1e30, torch_best = 1e30, rss, weights_mb = 0, peak = 0;
    double ts[2][TEXT_RUNS], tts[2][TEXT_RUNS], torch_rss = -1;
    int text_mode_ids, rc = 0, have_torch = 0;
    uint64_t rng = 42;
    torch_child tc;
    struct stat st;
    size_t packed0;

    loadavg(load0, sizeof load0);
    if (env_w && *env_w)
        snprintf(weights, sizeof weights, "%s", env_w);
    else
        snprintf(weights, sizeof weights, "%s/bench_data/vitb32_random.safetensors", CDB_BINARY_DIR);
    if (ensure_weights(weights, "--make-weights", "ViT-B/32-shaped random weights")) return 1;
    mp.n_threads = threads;
    mp.tokenizer_path = vocab;
    packed0 = cdb_k_cpu_packed_bytes();
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
    *packed_f32 = cdb_k_cpu_packed_bytes() - packed0;
    info = cdb_model_get_info(m);
    if (stat(weights, &st) == 0) weights_mb = (double)st.st_size / (1024.0 * 1024.0);
    text_mode_ids = cdb_model_tokenizer(m) == NULL;
    memcpy(ids, ids_ref, sizeof ids_ref);
    pixels = malloc((size_t)BATCH * 3 * 224 * 224 * sizeof(float));
    emb = malloc((size_t)BATCH * info->embed_dim * sizeof(float));
    if (!pixels || !emb) {
        fprintf(stderr, "bench_encoder: out of memory\n");
        rc = 1;
        goto done;
    }
    for (size_t i = 0; i < (size_t)BATCH * 3 * 224 * 224; i++) { /* ~uniform [-2, 2) */
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        pixels[i] = (float)((rng >> 40) / (double)(1 << 24)) * 4.0f - 2.0f;
    }
    /* warm-ups */
    if (cdb_encode_pixels(m, pixels, BATCH, 1, emb) != CDB_OK ||
        (text_mode_ids ? cdb_encode_tokens(m, ids, 1, 1, emb)
                       : cdb_encode_texts(m, &query, 1, 1, emb)) != CDB_OK) {
        fprintf(stderr, "bench_encoder: %s\n", cdb_errmsg());
        rc = 1;
        goto done;
    }
    if (torch_begin(&tc, "encoder_baseline.py", "--serve-vit", weights, threads,
                    text_mode_ids ? NULL : vocab, &have_torch, &torch_rss) != 0) {
        rc = 1;
        goto done;
    }
    rc = interleave_batches(m, pixels, emb, &tc, have_torch, threads, rounds, &best,
                            &torch_best, &peak);
    /* series 0: back to back; series 1: settled (TEXT_GAP_MS before each step) */
    for (int gap = 0; gap < 2; gap++)
        for (int r = 0; r < TEXT_RUNS && rc == 0; r++) {
            if (gap) usleep(1000 * TEXT_GAP_MS);
            t = now_s();
            if ((text_mode_ids ? cdb_encode_tokens(m, ids, 1, 1, emb)
                               : cdb_encode_texts(m, &query, 1, 1, emb)) != CDB_OK)
                rc = 1;
            ts[gap][r] = now_s() - t;
            if (gap) usleep(1000 * TEXT_GAP_MS);
            tts[gap][r] = have_torch && !text_mode_ids ? torch_cmd(&tc, "text") : -1;
        }
    if (have_torch && torch_stop(&tc, &torch_rss) != 0) rc = 1;
    rss = peak_rss_mb();
    rss_parts(parts, sizeof parts);
    loadavg(load1, sizeof load1);
    if (rc == 0) {
        double ips = BATCH / best, tips = have_torch ? BATCH / torch_best : -1;
        double gf = vit_image_flops(info) * BATCH / best * 1e-9, text_ms, torch_text;
        double text_b2b, torch_b2b;
        for (int g = 0; g < 2; g++) {
            qsort(ts[g], TEXT_RUNS, sizeof ts[g][0], cmp_dbl);
            qsort(tts[g], TEXT_RUNS, sizeof tts[g][0], cmp_dbl);
        }
        text_ms = ts[1][TEXT_RUNS / 2] * 1000, torch_text = tts[1][TEXT_RUNS / 2] * 1000;
        text_b2b = ts[0][TEXT_RUNS / 2] * 1000, torch_b2b = tts[0][TEXT_RUNS / 2] * 1000;
        printf("encoder bench: ViT-B/32-shaped random weights (%s, %.0f MB F32), %d threads, "
               "batch %d, %d interleaved rounds (best of each)\n", weights, weights_mb, threads,
               BATCH, rounds);
        print_kernels(threads, peak);
        printf("  load average before/after: %s | %s\n", load0, load1);
        printf("  clipdb model open (validate + hash + pack): %.3f s\n", t_load);
        printf("  image tower, batch %d:   clipdb %.2f img/s (%.1f GFLOP/s, %.0f%% of peak)   "
               "pytorch %.2f img/s   ratio %.2fx (bar >= 1.2x: %s)\n", BATCH, ips, gf,
               peak > 0 ? 100 * gf / peak : 0, tips, tips > 0 ? ips / tips : 0,
               tips > 0 ? verdict(ips >= 1.2 * tips) : "not measured");
        printf("  text query \"%s\"%s, median of %d interleaved, each side %d ms after the "
               "other:   clipdb %.2f ms   pytorch %.2f ms   ratio %.3fx (bar <= 0.15x: %s)\n",
               query, text_mode_ids ? " (ids only: no tokenizer built)" : " (tokenize+encode)",
               TEXT_RUNS, TEXT_GAP_MS, text_ms, torch_text,
               torch_text > 0 ? text_ms / torch_text : 0,
               torch_text > 0 ? verdict(text_ms <= 0.15 * torch_text) : "not measured");
        printf("    the same back to back (each side right after the other's spinning worker "
               "threads):   clipdb %.2f ms   pytorch %.2f ms   ratio %.3fx\n", text_b2b,
               torch_b2b, torch_b2b > 0 ? text_b2b / torch_b2b : 0);
        printf("  peak RSS: clipdb %.0f MB (bar <= %.0f MB weights + 200 MB = %.0f MB: %s)   "
               "pytorch %.0f MB\n", rss, weights_mb, weights_mb + 200,
               verdict(rss <= weights_mb + 200), torch_rss);
        printf("  clipdb RSS after the runs: %s (matrices packed at load, their file pages "
               "dropped; other F32 weights used in place from the mapping)\n", parts);
    }
done:
    cdb_model_close(m);
    free(pixels);
    free(emb);
    return rc;
}

/* The ViT-B/32 weights stored F16, only opened (both towers): the bytes of their
** matrices widened to fp32 and packed at load, printed beside packed_f32's. 0 = ran. */
static int bench_f16_packing(int threads, size_t packed_f32) {
    char weights[1024];
    const char *env_w = getenv("BENCH_WEIGHTS_F16");
    cdb_model_params mp = cdb_model_params_default();
    cdb_model *m = NULL;
    struct stat st;
    size_t packed0 = cdb_k_cpu_packed_bytes(), packed;
    double file_mb = 0;

    if (env_w && *env_w)
        snprintf(weights, sizeof weights, "%s", env_w);
    else
        snprintf(weights, sizeof weights, "%s/bench_data/vitb32_random_f16.safetensors",
                 CDB_BINARY_DIR);
    if (ensure_weights(weights, "--make-weights-f16", "the same weights stored F16")) return 1;
    mp.n_threads = threads;
    if (cdb_model_open(weights, &mp, &m) != CDB_OK) {
        fprintf(stderr, "bench_encoder: F16: %s\n", cdb_errmsg());
        return 1;
    }
    packed = cdb_k_cpu_packed_bytes() - packed0;
    if (stat(weights, &st) == 0) file_mb = (double)st.st_size / (1024.0 * 1024.0);
    printf("  packed weight matrices (fp32 panels, both towers; cdb_k_cpu_packed_bytes): F32 "
           "file %.1f MiB; F16 file (%s, %.0f MB) %.1f MiB, widened to fp32 once at load\n",
           (double)packed_f32 / (1 << 20), weights, file_mb, (double)packed / (1 << 20));
    cdb_model_close(m);
    return 0;
}

/* ---- SigLIP2 B/16 (issue 26: memory, speed, opening) --------------------------------- */

/* The same 64 ids as siglip_baseline.py's query: 11 ids, then the pad id 1. */
static void siglip_query(int32_t ids[64]) {
    static const int32_t head[11] = {2, 651, 5929, 611, 476, 8318, 578, 476, 15982, 235265, 1};
    for (int i = 0; i < 64; i++) ids[i] = i < 11 ? head[i] : 1;
}

/* A "Key:   N kB" line of /proc/self/status in MB, or -1. */
static double status_mb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = -1;
    size_t n = strlen(key);
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') kb = atof(line + n + 1);
    fclose(f);
    return kb < 0 ? -1 : kb / 1024.0;
}

static void fill_pixels(float *px, size_t n, uint64_t rng) {
    for (size_t i = 0; i < n; i++) { /* ~uniform [-2, 2) */
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        px[i] = (float)((rng >> 40) / (double)(1 << 24)) * 4.0f - 2.0f;
    }
}

/* In a child process (a peak of its own): opens dir (both towers), encodes one image
** batch and one query, prints the peak RSS (VmHWM) and what is resident after. */
static int siglip_rss(const char *dir, const char *label, int threads) {
    pid_t pid;
    int st = 0;
    fflush(stdout);
    if ((pid = fork()) == 0) {
        cdb_model_params mp = cdb_model_params_default();
        cdb_model *m = NULL;
        int32_t ids[64];
        size_t npx = (size_t)BATCH * 3 * 224 * 224;
        float *px = malloc(npx * sizeof *px), *emb = malloc((size_t)BATCH * 768 * sizeof *emb);
        mp.n_threads = threads;
        siglip_query(ids);
        if (!px || !emb || cdb_model_open(dir, &mp, &m) != CDB_OK) {
            fprintf(stderr, "bench_encoder: %s: %s\n", dir, cdb_errmsg());
            _exit(1);
        }
        fill_pixels(px, npx, 7);
        if (cdb_encode_pixels(m, px, BATCH, 1, emb) != CDB_OK ||
            cdb_encode_tokens(m, ids, 1, 1, emb) != CDB_OK) {
            fprintf(stderr, "bench_encoder: %s\n", cdb_errmsg());
            _exit(1);
        }
        printf("  peak RSS (VmHWM), %s: open both towers + %d images + 1 query: %.0f MB "
               "(Immich's figure for this model: 3 GB; bar < 3072 MB: %s); after: RssAnon "
               "%.0f MB, RssFile %.0f MB; packed matrices %.0f MiB\n", label, BATCH,
               status_mb("VmHWM"), verdict(status_mb("VmHWM") < 3072), status_mb("RssAnon"),
               status_mb("RssFile"), (double)cdb_k_cpu_packed_bytes() / (1 << 20));
        fflush(stdout);
        _exit(0);
    }
    if (pid < 0 || waitpid(pid, &st, 0) < 0) return 1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    return v[n / 2];
}

/* Text-only opens of dir as a query opens it (the recorded hash passed back, so the
** weights are not hashed), each followed by one query, median of 5: the packed
** matrix cache off, then on (one cold open writes it, then hits). */
static void siglip_open_costs(const char *dir, int threads, const char *hash, const char *key) {
    char cache[] = "/tmp/clipdb-bench-pack-XXXXXX";
    double t[3][5];
    char status[3][64] = {"", "", ""}; /* copies: the model's strings die with it */
    int32_t ids[64];
    float emb[768];
    siglip_query(ids);
    if (!mkdtemp(cache)) return;
    for (int mode = 0; mode < 3; mode++)
        for (int r = 0; r < 5; r++) {
            cdb_model_params mp = cdb_model_params_default();
            cdb_model *m = NULL;
            double t0 = now_s();
            mp.n_threads = threads;
            mp.load_vision = 0;
            mp.known_hash = hash;
            mp.known_files_key = key;
            mp.pack_cache = mode == 0 ? CDB_PACK_CACHE_OFF : CDB_PACK_CACHE_AUTO;
            mp.pack_cache_dir = cache;
            if (mode == 1 && r > 0) break; /* the cold open once */
            if (cdb_model_open(dir, &mp, &m) != CDB_OK || cdb_encode_tokens(m, ids, 1, 1, emb)) {
                fprintf(stderr, "bench_encoder: %s\n", cdb_errmsg());
                cdb_model_close(m);
                return;
            }
            t[mode][r] = now_s() - t0;
            snprintf(status[mode], sizeof status[mode], "%s",
                     cdb_model_get_info(m)->pack_cache);
            cdb_model_close(m);
        }
    printf("  text tower open + 1 query (in process, hash recorded): cache off %.1f ms "
           "(median of 5); cache cold (%s) %.1f ms; cache hit (%s) %.1f ms (median of 5), "
           "%.2fx the cache-off time\n", median_of(t[0], 5) * 1e3, status[1], t[1][0] * 1e3,
           status[2], median_of(t[2], 5) * 1e3, median_of(t[2], 5) / median_of(t[0], 5));
    {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
        if (system(cmd) != 0) fprintf(stderr, "bench_encoder: could not remove %s\n", cache);
    }
}

/* SigLIP2 B/16-shaped random weights (HF layout, bench/siglip_baseline.py): peak RSS
** for the F16 and the F32 checkpoint, the image tower and a query against PyTorch fp32
** (interleaved as bench_vit), and the text tower's open cost with and without the
** packed matrix cache. 0 = ran. */
static int bench_siglip(int threads, int rounds) {
    char f32[1024], f16[1024], cfg[1200], load0[128], load1[128];
    cdb_model_params mp = cdb_model_params_default();
    cdb_model *m = NULL;
    size_t npx = (size_t)BATCH * 3 * 224 * 224;
    float *px = NULL, *emb = NULL;
    double t, best = 1e30, torch_best = 1e30, ts[TEXT_RUNS], tts[TEXT_RUNS], torch_rss = -1;
    double peak = 0;
    int32_t ids[64];
    int rc = 0, have_torch = 0;
    torch_child tc;

    snprintf(f32, sizeof f32, "%s/bench_data/siglip2_b16_random", CDB_BINARY_DIR);
    snprintf(f16, sizeof f16, "%s/bench_data/siglip2_b16_random_f16", CDB_BINARY_DIR);
    for (int i = 0; i < 2; i++) {
        char cmd[4096];
        snprintf(cfg, sizeof cfg, "%s/config.json", i ? f16 : f32);
        if (file_exists(cfg)) continue;
        printf("generating SigLIP2 B/16-shaped random weights (%s): %s\n", i ? "F16" : "F32",
               i ? f16 : f32);
        fflush(stdout);
        snprintf(cmd, sizeof cmd, PY " %s/bench/siglip_baseline.py --make '%s' --dtype %s",
                 CDB_SOURCE_DIR, i ? f16 : f32, i ? "f16" : "f32");
        if (system(cmd) != 0 || !file_exists(cfg)) {
            fprintf(stderr, "bench_encoder: could not generate %s (needs %s with torch)\n",
                    i ? f16 : f32, PY);
            return 1;
        }
    }
    printf("encoder bench: SigLIP2 B/16-shaped random weights (HF layout; vocabulary 256000, "
           "width 768, 12 + 12 layers, image 224, patch 16), %d threads, CPU ISA path %s\n",
           threads, cdb_k_isa_name(cdb_k_cpu_isa()));
    if (siglip_rss(f16, "F16 checkpoint (the 256k x 768 table stays F16, 393 MB)", threads) ||
        siglip_rss(f32, "F32 checkpoint (the table used in place from the mapping)", threads))
        return 1;
    loadavg(load0, sizeof load0);
    mp.n_threads = threads;
    mp.pack_cache = CDB_PACK_CACHE_OFF;
    siglip_query(ids);
    px = malloc(npx * sizeof *px);
    emb = malloc((size_t)BATCH * 768 * sizeof *emb);
    if (!px || !emb || cdb_model_open(f32, &mp, &m) != CDB_OK) {
        fprintf(stderr, "bench_encoder: SigLIP: %s\n", cdb_errmsg());
        rc = 1;
        goto done;
    }
    fill_pixels(px, npx, 42);
    if (cdb_encode_pixels(m, px, BATCH, 1, emb) != CDB_OK ||
        cdb_encode_tokens(m, ids, 1, 1, emb) != CDB_OK) {
        fprintf(stderr, "bench_encoder: SigLIP: %s\n", cdb_errmsg());
        rc = 1;
        goto done;
    }
    if (torch_begin(&tc, "siglip_baseline.py", "--serve", f32, threads, NULL, &have_torch,
                    &torch_rss) != 0) {
        rc = 1;
        goto done;
    }
    rc = interleave_batches(m, px, emb, &tc, have_torch, threads, rounds, &best, &torch_best,
                            &peak);
    for (int r = 0; r < TEXT_RUNS && rc == 0; r++) {
        usleep(1000 * TEXT_GAP_MS);
        t = now_s();
        if (cdb_encode_tokens(m, ids, 1, 1, emb) != CDB_OK) rc = 1;
        ts[r] = now_s() - t;
        usleep(1000 * TEXT_GAP_MS);
        tts[r] = have_torch ? torch_cmd(&tc, "text") : -1;
    }
    if (have_torch && torch_stop(&tc, &torch_rss) != 0) rc = 1;
    loadavg(load1, sizeof load1);
    if (rc == 0) {
        double ips = BATCH / best, tips = have_torch ? BATCH / torch_best : -1;
        double text_ms = median_of(ts, TEXT_RUNS) * 1e3;
        double torch_text = median_of(tts, TEXT_RUNS) * 1e3;
        print_kernels(threads, peak);
        printf("  load average before/after: %s | %s\n", load0, load1);
        printf("  image tower, batch %d, %d interleaved rounds (best of each):   clipdb %.2f "
               "img/s   pytorch fp32 %.2f img/s   ratio %.2fx (bar >= 1.2x: %s)\n", BATCH,
               rounds, ips, tips, tips > 0 ? ips / tips : 0,
               tips > 0 ? verdict(ips >= 1.2 * tips) : "not measured");
        printf("  text query (64 ids, no tokenizer on either side), median of %d, each side %d "
               "ms after the other:   clipdb %.2f ms   pytorch fp32 %.2f ms   ratio %.3fx "
               "(bar <= 0.15x: %s)\n", TEXT_RUNS, TEXT_GAP_MS, text_ms, torch_text,
               torch_text > 0 ? text_ms / torch_text : 0,
               torch_text > 0 ? verdict(text_ms <= 0.15 * torch_text) : "not measured");
        printf("  pytorch peak RSS: %.0f MB\n", torch_rss);
        siglip_open_costs(f32, threads, cdb_model_get_info(m)->hash,
                          cdb_model_get_info(m)->files_key);
    }
done:
    cdb_model_close(m);
    free(px);
    free(emb);
    return rc;
}

int main(void) {
    const char *env_t = getenv("CLIPDB_BENCH_THREADS"), *only = getenv("BENCH_ONLY");
    const char *env_r = getenv("BENCH_ROUNDS");
    int threads = env_t && atoi(env_t) > 0 ? atoi(env_t) : 2;
    int rounds = env_r && atoi(env_r) > 0 ? atoi(env_r) : 3, rc = 0;
    size_t packed_f32 = 0;
    if ((!only || !strcmp(only, "vit")) && (bench_vit(threads, rounds, &packed_f32) != 0 ||
                                             bench_f16_packing(threads, packed_f32) != 0))
        rc = 1;
    fflush(stdout);
    if ((!only || !strcmp(only, "rn50")) && bench_rn50(threads, rounds) != 0) rc = 1;
    fflush(stdout);
    if ((!only || !strcmp(only, "siglip")) && bench_siglip(threads, rounds) != 0) rc = 1;
    return rc;
}
