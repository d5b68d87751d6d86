/*
** bench_gpu.c: the GPU benchmark (issue 8's bars).
**
**  ViT-B/32 image tower, batch 256, inputs already on the device (the patch
**  matrix, unfolded on the host and uploaded once, as encoder/clip.c unfolds it
**  -> patch GEMM -> tower -> embeddings), through the CUDA backend: images/s.
**  Compared with PyTorch fp16 autocast on the same GPU and the same weights:
**  `--dump-weights FILE` writes the seeded random weights for
**  bench/bench_gpu_torch.py, which prints `torch_ips=N`; pass it back with
**  `--torch-ips N` and the ratio is printed (tests/gpu/run.sh does all this).
**  `--torch-check FILE` compares our embeddings with PyTorch's fp32 ones.
**
** Prints `key=value` lines. Exits 77 when no usable GPU is present.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_vit.h"
#include "kernels/kernels.h"

static double now_s(void) { return (double)cdb_now_ns() * 1e-9; }

static int dump_weights(const gv_host *h, const char *path) {
    FILE *f = fopen(path, "wb");
    gv_shape s = h->s;
    size_t w = (size_t)s.width, g = (size_t)(s.size / s.patch), K = 3 * (size_t)s.patch * s.patch;
    int hdr[8] = {0x43444257 /* "WBDC" */, s.size, s.patch, s.width, s.layers, s.heads, s.mlp, s.embed};
    int ok;
    if (!f) return 0;
    ok = fwrite(hdr, sizeof hdr, 1, f) == 1;
#define W_(p, n) ok = ok && fwrite((p), sizeof(float), (n), f) == (n)
    W_(h->patch_w, w * K);
    W_(h->cls, w);
    W_(h->pos, (g * g + 1) * w);
    W_(h->ln_pre_g, w);
    W_(h->ln_pre_b, w);
    for (int l = 0; l < s.layers; l++) {
        const gv_block_h *b = &h->blk[l];
        W_(b->ln1_g, w);
        W_(b->ln1_b, w);
        W_(b->qkv_w, 3 * w * w);
        W_(b->qkv_b, 3 * w);
        W_(b->out_w, w * w);
        W_(b->out_b, w);
        W_(b->ln2_g, w);
        W_(b->ln2_b, w);
        W_(b->fc_w, (size_t)s.mlp * w);
        W_(b->fc_b, (size_t)s.mlp);
        W_(b->pr_w, w * s.mlp);
        W_(b->pr_b, w);
    }
    W_(h->ln_post_g, w);
    W_(h->ln_post_b, w);
    W_(h->proj, (size_t)s.embed * w);
#undef W_
    return fclose(f) == 0 && ok;
}

/* Same weights, same inputs: our CUDA tower vs PyTorch's fp32 embeddings. */
static int torch_check(const gv_dev *d, gv_scratch *s, const char *path) {
    FILE *f = fopen(path, "rb");
    int32_t n = 0;
    size_t plane = (size_t)3 * d->s.size * d->s.size, E = (size_t)d->s.embed;
    float *px = NULL, *ref = NULL, *got = NULL;
    double worst = 2;
    int bad = 1;
    if (!f || fread(&n, 4, 1, f) != 1 || n < 1 || n > s->n) goto out;
    px = malloc((size_t)n * plane * 4);
    ref = malloc((size_t)n * E * 4);
    got = malloc((size_t)n * E * 4);
    if (!px || !ref || !got || fread(px, 4, (size_t)n * plane, f) != (size_t)n * plane ||
        fread(ref, 4, (size_t)n * E, f) != (size_t)n * E)
        goto out;
    if (gv_forward_host(d, s, px, n, got) != CDB_OK) {
        fprintf(stderr, "bench_gpu: torch check forward: %s\n", cdb_errmsg());
        goto out;
    }
    for (int i = 0; i < n; i++) {
        double c = gv_cosine(got + (size_t)i * E, ref + (size_t)i * E, E);
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

#define BK(call)                                                                   \
    do {                                                                           \
        cdb_status rc_ = (call);                                                   \
        if (rc_ != CDB_OK) {                                                       \
            fprintf(stderr, "bench_gpu: %s: %s (%s)\n", #call, cdb_status_str(rc_), \
                    cdb_errmsg());                                                 \
            goto fail;                                                             \
        }                                                                          \
    } while (0)

int main(int argc, char **argv) {
    int batch = 256, iters = 10;
    double torch_ips = 0;
    const char *dump = NULL, *check = NULL;
    gv_host h;
    gv_dev d;
    gv_scratch s;
    cdb_k_backend *be = NULL;
    size_t plane = (size_t)3 * 224 * 224, ncols;
    double t0, t1, tower_ips;
    int rc = 1;

    memset(&h, 0, sizeof h);
    memset(&d, 0, sizeof d);
    memset(&s, 0, sizeof s);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--torch-ips") && i + 1 < argc) torch_ips = atof(argv[++i]);
        else if (!strcmp(argv[i], "--dump-weights") && i + 1 < argc) dump = argv[++i];
        else if (!strcmp(argv[i], "--torch-check") && i + 1 < argc) check = argv[++i];
        else {
            fprintf(stderr, "usage: bench_gpu [--batch N] [--iters N] [--dump-weights FILE] "
                            "[--torch-ips X] [--torch-check FILE]\n");
            return 2;
        }
    }
    if (!gv_host_new(GV_B32, 20261129, &h)) {
        fprintf(stderr, "bench_gpu: out of host memory\n");
        return 1;
    }
    if (dump) {
        if (!dump_weights(&h, dump)) {
            fprintf(stderr, "bench_gpu: cannot write %s\n", dump);
            gv_host_free(&h);
            return 1;
        }
        printf("weights=%s\n", dump);
        gv_host_free(&h);
        return 0;
    }
    if (cdb_k_cuda_device_count() == 0 || *cdb_k_cuda_unusable_reason()) {
        printf("skip: no usable GPU: %s\n", cdb_k_cuda_unusable_reason());
        gv_host_free(&h);
        return 77;
    }
    BK(cdb_k_backend_cuda_new(0, &be));
    BK(gv_dev_new(be, &h, &d));
    BK(gv_scratch_new(be, GV_B32, batch, &s));
    if (check && torch_check(&d, &s, check) != 0) rc = 3; /* reported; benchmark goes on */

    /* ---- tower throughput, inputs on the device ---- */
    {
        size_t g = (size_t)(GV_B32.size / GV_B32.patch);
        ncols = (size_t)batch * g * g * 3 * GV_B32.patch * GV_B32.patch;
    }
    {
        float *px = gv_randn((size_t)batch * plane, 1.0f, 0.0f), *cols = malloc(ncols * 4);
        cdb_status up_rc = CDB_NOMEM;
        if (px && cols) {
            gv_unfold(GV_B32, px, batch, cols);
            up_rc = cdb_k_buf_upload(be, s.cols, 0, cols, ncols);
        }
        free(px);
        free(cols);
        BK(up_rc);
    }
    /* warm-up: cuBLAS heuristics, allocations */
    for (int it = 0; it < 3; it++) BK(gv_forward_cols(&d, &s, batch));
    BK(cdb_k_sync(be));
    t0 = now_s();
    for (int it = 0; it < iters; it++) BK(gv_forward_cols(&d, &s, batch));
    BK(cdb_k_sync(be));
    t1 = now_s();
    tower_ips = (double)batch * iters / (t1 - t0);
    printf("tower_batch=%d tower_ms_per_batch=%.3f tower_ips=%.1f\n", batch,
           (t1 - t0) * 1e3 / iters, tower_ips);
    if (torch_ips > 0)
        printf("torch_ips=%.1f ratio_vs_torch=%.3f (>= 1.0 required)\n", torch_ips,
               tower_ips / torch_ips);
    if (rc == 1) rc = 0;
fail:
    if (be) {
        gv_scratch_free(be, &s);
        gv_dev_free(&d);
        cdb_k_backend_free(be);
    }
    gv_host_free(&h);
    return rc;
}
