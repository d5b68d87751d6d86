/*
** bench_gpu.c: the GPU benchmark (issue 8's bar, issue 30's one graph).
**
**  The product's own path: a ViT-B/32-shaped model with seeded random weights
**  (tests/gpu/gpu_model.h writes it as an OpenAI-layout F16 .safetensors file),
**  opened with cdb_model_open on cuda:0 and run with cdb_encode_pixels at batch 256:
**  encoder/clip.c on the CUDA backend, the pixels uploaded and unfolded into patches
**  on the device (cdb_k_patchify), images/s. In the same run, the sum of the
**  tower's cuBLAS GEMMs alone (the same shapes through cdb_k_gemm, one batch) and
**  the tower's time against it: what the non-GEMM ops and the upload cost.
**  Compared with PyTorch fp16 autocast on the same GPU and the same weights:
**  `--write-model DIR` writes the model for bench/bench_gpu_torch.py, which prints
**  `torch_ips=N`; pass it back with `--torch-ips N` and the ratio is printed
**  (tests/gpu/run.sh does all this). `--torch-check FILE` compares our embeddings
**  with PyTorch's fp32 ones.
**
** Prints `key=value` lines. Exits 77 when no usable GPU is present.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encoder/encoder.h"
#include "gpu_model.h"
#include "kernels/kernels.h"
#include "bench_util.h"

#define BK(call)                                                                   \
    do {                                                                           \
        cdb_status rc_ = (call);                                                   \
        if (rc_ != CDB_OK) {                                                       \
            fprintf(stderr, "bench_gpu: %s: %s (%s)\n", #call, cdb_status_str(rc_), \
                    cdb_errmsg());                                                 \
            goto fail;                                                             \
        }                                                                          \
    } while (0)

/* Same weights, same inputs: our CUDA embeddings vs PyTorch's fp32 ones. 0: all
** cosines >= 0.9995. */
static int torch_check(cdb_model *m, const char *path) {
    FILE *f = fopen(path, "rb");
    int32_t n = 0;
    size_t plane = (size_t)3 * GM_SIZE * GM_SIZE, E = GM_EMBED;
    float *px = NULL, *ref = NULL, *got = NULL;
    double worst = 2;
    int bad = 1;
    if (!f || fread(&n, 4, 1, f) != 1 || n < 1 || n > 4096) goto out;
    px = malloc((size_t)n * plane * 4);
    ref = malloc((size_t)n * E * 4);
    got = malloc((size_t)n * E * 4);
    if (!px || !ref || !got || fread(px, 4, (size_t)n * plane, f) != (size_t)n * plane ||
        fread(ref, 4, (size_t)n * E, f) != (size_t)n * E)
        goto out;
    if (cdb_encode_pixels(m, px, n, 0, got) != CDB_OK) {
        fprintf(stderr, "bench_gpu: torch check forward: %s\n", cdb_errmsg());
        goto out;
    }
    for (int i = 0; i < n; i++) {
        double c = cosine(got + (size_t)i * E, ref + (size_t)i * E, (int)E);
        if (c < worst) worst = c;
    }
    bad = !(worst >= 0.9995);
    printf("torch_check_images=%d min_cosine_vs_torch_fp32=%.7f %s\n", n, worst,
           bad ? "FAIL (< 0.9995)" : "ok");
out:
    if (f) fclose(f);
    if (!px) printf("torch_check=unreadable (%s)\n", path);
    free(px);
    free(ref);
    free(got);
    return bad;
}

/* One GEMM shape of the tower: count times per batch, m rows (a multiple of the
** batch: rows_per_item), n x k weights. */
typedef struct gemm_shape {
    int rows_per_item, n, k, count;
    cdb_k_act act;
    int accumulate;
} gemm_shape;

/* Seconds per batch of the ViT-B/32 tower's GEMMs alone (what clip.c issues: the
** patch embedding, 11 full blocks, the last block's pooled rows, the projection),
** timed over iters batches on a backend of its own. */
static double gemm_seconds(int batch, int iters) {
    const int W = GM_WIDTH, M = 4 * GM_WIDTH, G = GM_SIZE / GM_PATCH, S = G * G + 1;
    const gemm_shape sh[] = {
        {G * G, W, 3 * GM_PATCH * GM_PATCH, 1, CDB_K_ACT_NONE, 0}, /* patches */
        {S, 3 * W, W, 11, CDB_K_ACT_NONE, 0},                      /* q|k|v */
        {S, W, W, 11, CDB_K_ACT_NONE, 1},                          /* out proj */
        {S, M, W, 11, CDB_K_ACT_QUICK_GELU, 0},                    /* c_fc */
        {S, W, M, 11, CDB_K_ACT_NONE, 1},                          /* c_proj */
        {S, 2 * W, W, 1, CDB_K_ACT_NONE, 0},                       /* last: k|v */
        {1, W, W, 2, CDB_K_ACT_NONE, 0},                           /* last: q, out */
        {1, M, W, 1, CDB_K_ACT_QUICK_GELU, 0},                     /* last: c_fc */
        {1, W, M, 1, CDB_K_ACT_NONE, 1},                           /* last: c_proj */
        {1, GM_EMBED, W, 1, CDB_K_ACT_NONE, 0},                    /* projection */
    };
    const int ns = (int)(sizeof sh / sizeof sh[0]);
    cdb_k_backend *be = NULL;
    cdb_k_buf *x = NULL, *y = NULL, *w[sizeof sh / sizeof sh[0]] = {NULL};
    size_t big = (size_t)batch * S * (size_t)M;
    float *host = malloc((size_t)M * M * sizeof(float));
    uint64_t seed = 99;
    double t = -1, t0 = 0;
    if (!host) return -1;
    for (size_t i = 0; i < (size_t)M * M; i++) host[i] = 0.03f * gm_rand(&seed);
    BK(cdb_k_backend_cuda_new(0, &be));
    BK(cdb_k_buf_alloc(be, big, &x));
    BK(cdb_k_buf_alloc(be, big, &y));
    for (size_t i = 0; i < big; i += (size_t)M * M) {
        size_t n = big - i < (size_t)M * M ? big - i : (size_t)M * M;
        BK(cdb_k_buf_upload(be, x, i, host, n));
        BK(cdb_k_buf_upload(be, y, i, host, n));
    }
    for (int s = 0; s < ns; s++)
        BK(cdb_k_matrix_upload(be, host, CDB_K_F32, sh[s].n, sh[s].k, 0, &w[s]));
    for (int it = -2; it < iters; it++) { /* two warm-up rounds */
        if (it == 0) {
            BK(cdb_k_sync(be));
            t0 = now_s();
        }
        for (int s = 0; s < ns; s++)
            for (int c = 0; c < sh[s].count; c++)
                BK(cdb_k_gemm(be, x, w[s], NULL, y, batch * sh[s].rows_per_item, sh[s].n, sh[s].k,
                              sh[s].act, sh[s].accumulate));
    }
    BK(cdb_k_sync(be));
    t = (now_s() - t0) / iters;
fail:
    for (int s = 0; s < ns; s++) cdb_k_buf_free(be, w[s]);
    cdb_k_buf_free(be, x);
    cdb_k_buf_free(be, y);
    cdb_k_backend_free(be);
    free(host);
    return t;
}

int main(int argc, char **argv) {
    int batch = 256, iters = 10, rc = 1;
    double torch_ips = 0, t0, t1, tower_ips, gemm_s;
    const char *write_dir = NULL, *model = NULL, *check = NULL;
    char path[700];
    cdb_model *m = NULL;
    cdb_model_params mp = cdb_model_params_default();
    float *px = NULL, *out = NULL;
    uint64_t seed = 7;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--torch-ips") && i + 1 < argc) torch_ips = atof(argv[++i]);
        else if (!strcmp(argv[i], "--write-model") && i + 1 < argc) write_dir = argv[++i];
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--torch-check") && i + 1 < argc) check = argv[++i];
        else {
            fprintf(stderr, "usage: bench_gpu [--batch N] [--iters N] [--write-model DIR] "
                            "[--model FILE] [--torch-ips X] [--torch-check FILE]\n");
            return 2;
        }
    }
    if (batch < 1 || iters < 1) return 2;
    if (write_dir || !model) {
        if (!gm_write_vitb32(write_dir ? write_dir : tmpdir(), 20261129, path)) {
            fprintf(stderr, "bench_gpu: cannot write the model in %s\n",
                    write_dir ? write_dir : tmpdir());
            return 1;
        }
        printf("model=%s\n", path);
        if (write_dir) return 0;
        model = path;
    }
    if (cdb_k_cuda_device_count() == 0 || *cdb_k_cuda_unusable_reason()) {
        printf("skip: no usable GPU: %s\n", cdb_k_cuda_unusable_reason());
        return 77;
    }
    mp.device.kind = CDB_K_DEVICE_CUDA;
    mp.load_text = 0;
    BK(cdb_model_open(model, &mp, &m));
    if (check && torch_check(m, check) != 0) rc = 3; /* reported; the benchmark goes on */
    px = malloc((size_t)batch * 3 * GM_SIZE * GM_SIZE * sizeof(float));
    out = malloc((size_t)batch * GM_EMBED * sizeof(float));
    if (!px || !out) goto fail;
    for (size_t i = 0; i < (size_t)batch * 3 * GM_SIZE * GM_SIZE; i++) px[i] = 2 * gm_rand(&seed);
    /* warm-up: cuBLAS heuristics, the backend's buffer cache */
    for (int it = 0; it < 3; it++) BK(cdb_encode_pixels(m, px, batch, 0, out));
    t0 = now_s();
    for (int it = 0; it < iters; it++) BK(cdb_encode_pixels(m, px, batch, 0, out));
    t1 = now_s();
    tower_ips = (double)batch * iters / (t1 - t0);
    printf("tower_batch=%d tower_ms_per_batch=%.3f tower_ips=%.1f (pixels from host memory, "
           "embeddings back)\n", batch, (t1 - t0) * 1e3 / iters, tower_ips);
    gemm_s = gemm_seconds(batch, iters);
    if (gemm_s > 0)
        printf("gemm_ms_per_batch=%.3f tower_vs_gemm_sum=%.3f\n", gemm_s * 1e3,
               (t1 - t0) / iters / gemm_s);
    if (torch_ips > 0)
        printf("torch_ips=%.1f ratio_vs_torch=%.3f (>= 1.0 required)\n", torch_ips,
               tower_ips / torch_ips);
    if (rc == 1) rc = 0;
fail:
    cdb_model_close(m);
    free(px);
    free(out);
    return rc;
}
