/*
** bench_rn50_precision.c: the figures behind docs/models.md's answer to "why do
** OpenAI's CLIP and OpenCLIP give slightly different RN50 embeddings for the same
** image?", measured on RN50-shaped random weights (BatchNorm statistics calibrated on
** random images; bench/encoder_baseline.py --make-weights-rn50) and N random images
** (uniform [-2, 2) after normalization; BENCH_N, default 16):
**   - clipdb's CPU encoder on the F32 weights and on their fp16 copy as OpenAI
**     releases them (OpenAI's convert_weights: convolutions and linear layers fp16,
**     BatchNorms fp32), widened to fp32 at load;
**   - PyTorch (bench/rn50_precision.py, a child process) on the same files: float64,
**     fp32, fp16 weights computed in fp32 (OpenCLIP's default precision; OpenAI's
**     clip on a CPU), and two GPU behaviours emulated on the CPU because this machine
**     has no GPU: the fp16 model OpenAI's clip.load runs on a GPU, and TF32
**     convolutions (OpenCLIP fp32 on an Ampere or newer GPU, PyTorch's default);
**   - what clipdb stores: fp32 embedding -> L2-normalized in fp32 -> fp16, against
**     the fp32 embedding the API returns.
** Prints 1 - cosine (min / median / max over the images) for each pair. Not a test:
** it reports, and exits 0 unless something failed to run.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cosine.h"
#include "encoder/encoder.h"
#include "kernels/kernels.h"
#include "bench_util.h"

#define E 1024 /* RN50's embedding */
#define PX ((size_t)3 * 224 * 224)

static int run_cmd(const char *cmd) {
    printf("  $ %s\n", cmd);
    fflush(stdout);
    return system(cmd);
}

static double one_minus_cos(const float *a, const float *b) { return 1.0 - cosine(a, b, E); }

static void row(const char *what, const float *a, const float *b, int n) {
    double *d = malloc((size_t)n * sizeof *d);
    if (!d) return;
    for (int i = 0; i < n; i++) d[i] = one_minus_cos(a + (size_t)i * E, b + (size_t)i * E);
    qsort(d, (size_t)n, sizeof *d, cmp_d);
    printf("  %-66s %9.2g %9.2g %9.2g\n", what, d[0], d[n / 2], d[n - 1]);
    free(d);
}

static float *read_f32(const char *dir, const char *name, size_t n) {
    char path[1200];
    float *v = malloc(n * sizeof *v);
    FILE *f;
    snprintf(path, sizeof path, "%s/%s.f32", dir, name);
    f = fopen(path, "rb");
    if (!v || !f || fread(v, sizeof *v, n, f) != n) {
        fprintf(stderr, "bench_rn50_precision: cannot read %s\n", path);
        free(v);
        v = NULL;
    }
    if (f) fclose(f);
    return v;
}

static float *encode(const char *weights, const float *px, int n) {
    cdb_model_params mp = cdb_model_params_default();
    cdb_model *m = NULL;
    float *out = malloc((size_t)n * E * sizeof *out);
    mp.load_text = 0;
    mp.n_threads = 2;
    if (!out || cdb_model_open(weights, &mp, &m) != CDB_OK ||
        cdb_model_get_info(m)->embed_dim != E || cdb_encode_pixels(m, px, n, 0, out) != CDB_OK) {
        fprintf(stderr, "bench_rn50_precision: %s: %s\n", weights, cdb_errmsg());
        free(out);
        out = NULL;
    }
    cdb_model_close(m);
    return out;
}

int main(void) {
    char w32[1024], w16[1024], pxf[1024], dir[1024], cmd[8192];
    const char *env_n = getenv("BENCH_N");
    int n = env_n && atoi(env_n) > 1 ? atoi(env_n) : 16, rc = 1;
    float *px = NULL, *c32 = NULL, *c16 = NULL, *stored = NULL, *t[5] = {NULL};
    static const char *names[5] = {"fp64", "fp32", "w16_fp32", "w16_fp16", "w16_tf32"};
    uint64_t rng = 777;
    FILE *f;

    snprintf(w32, sizeof w32, "%s/bench_data/rn50_random.safetensors", CDB_BINARY_DIR);
    snprintf(w16, sizeof w16, "%s/bench_data/rn50_random_f16.safetensors", CDB_BINARY_DIR);
    snprintf(pxf, sizeof pxf, "%s/bench_data/rn50_precision_pixels.f32", CDB_BINARY_DIR);
    snprintf(dir, sizeof dir, "%s/bench_data/rn50_precision", CDB_BINARY_DIR);
    printf("RN50 precision: %d random images, RN50-shaped random weights\n", n);
    if (!file_exists(w32)) {
        snprintf(cmd, sizeof cmd, PY " %s/bench/encoder_baseline.py --make-weights-rn50 '%s'",
                 CDB_SOURCE_DIR, w32);
        if (run_cmd(cmd) != 0) return 1;
    }
    if (!file_exists(w16)) {
        snprintf(cmd, sizeof cmd, PY " %s/bench/rn50_precision.py --f16-copy '%s' '%s'",
                 CDB_SOURCE_DIR, w32, w16);
        if (run_cmd(cmd) != 0) return 1;
    }
    px = malloc((size_t)n * PX * sizeof *px);
    if (!px) return 1;
    for (size_t i = 0; i < (size_t)n * PX; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        px[i] = (float)((rng >> 40) / (double)(1 << 24)) * 4.0f - 2.0f;
    }
    f = fopen(pxf, "wb");
    if (!f || fwrite(px, sizeof *px, (size_t)n * PX, f) != (size_t)n * PX) {
        fprintf(stderr, "bench_rn50_precision: cannot write %s\n", pxf);
        if (f) fclose(f);
        goto done;
    }
    fclose(f);
    mkdir(dir, 0755);
    if (!(c32 = encode(w32, px, n)) || !(c16 = encode(w16, px, n))) goto done;
    /* the stored form: fp32 normalize, then one rounding to fp16, read back exactly */
    stored = malloc((size_t)n * E * sizeof *stored);
    if (!stored) goto done;
    for (int i = 0; i < n; i++) {
        uint16_t h[E];
        if (cdb_k_normalize_to_f16(c32 + (size_t)i * E, E, h) != CDB_OK) goto done;
        cdb_k_f16_to_f32(h, stored + (size_t)i * E, E);
    }
    snprintf(cmd, sizeof cmd, PY " %s/bench/rn50_precision.py --run '%s' '%s' '%s' %d '%s' "
             "--threads 2 > /dev/null", CDB_SOURCE_DIR, w32, w16, pxf, n, dir);
    if (run_cmd(cmd) != 0) goto done;
    for (int i = 0; i < 5; i++)
        if (!(t[i] = read_f32(dir, names[i], (size_t)n * E))) goto done;

    printf("\n  1 - cosine, per image                                              "
           "      min    median       max\n");
    printf("  same weights, clipdb vs PyTorch:\n");
    row("clipdb CPU (F32 weights) vs PyTorch float64", c32, t[0], n);
    row("clipdb CPU (F32 weights) vs PyTorch fp32", c32, t[1], n);
    row("clipdb CPU (fp16 weights widened) vs PyTorch fp32 on them", c16, t[2], n);
    printf("  fp16 weights (as OpenAI releases RN50) vs the fp32 weights they round:\n");
    row("clipdb: fp16 weights widened vs fp32 weights", c16, c32, n);
    row("PyTorch fp32: the same", t[2], t[1], n);
    printf("  one fp16 checkpoint, computed differently (GPU cases emulated on the CPU):\n");
    row("fp16 model on a GPU (OpenAI clip.load) vs fp32 (OpenCLIP default)", t[3], t[2], n);
    row("TF32 convolutions (OpenCLIP fp32, Ampere+ GPU) vs fp32 (CPU)", t[4], t[2], n);
    row("fp16 model on a GPU (OpenAI clip.load) vs clipdb CPU", t[3], c16, n);
    printf("  what clipdb keeps:\n");
    row("stored vector (fp32 normalize -> fp16) vs the fp32 embedding", stored, c32, n);
    rc = 0;
done:
    free(px);
    free(c32);
    free(c16);
    free(stored);
    for (int i = 0; i < 5; i++) free(t[i]);
    return rc;
}
