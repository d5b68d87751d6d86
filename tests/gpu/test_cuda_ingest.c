/*
** test_cuda_ingest.c: the GPU ingest path against the CPU (exits 77 without a usable
** GPU; tests/gpu/run.sh runs it):
**  - cdb_k_preprocess_u8 on the CUDA backend (8-bit bytes through the pinned double
**    buffers and the copy stream, then the device transform) equal to
**    cdb_image_preprocess bit for bit, for a run of images of many sizes (gray, RGB, a
**    12 MP photo, tiny ones) at an offset, twice (the staging slots reused and grown);
**  - cdb_encode_images on cuda against the CPU's preprocess + cdb_encode_pixels on cpu
**    (cosine >= 0.9995), and against cdb_encode_pixels on cuda of the CPU's pixels
**    (the same pixels: the difference printed, cosine >= 0.99999);
**  - nvJPEG (when usable): its pixels against libjpeg-turbo's on baseline JPEGs (4:2:0,
**    4:4:4, gray; the transform set to pass bytes through), max and mean difference
**    printed (different IDCTs and chroma upsampling: a sanity bound only, mean < 3,
**    max <= 64), which backend decoded them, and cdb_encode_files in fast mode on
**    cuda (nvJPEG) vs cpu (libjpeg-turbo): the embeddings' cosine printed, every
**    baseline JPEG decoded by nvJPEG, the progressive, rotated and PNG files by the
**    CPU, a corrupt file refused with its own status.
** Lines "nvjpeg_vs_libjpeg ..." and "nvjpeg_embed_cos ..." are read by run.sh.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "encoder/encoder_int.h"
#include "gpu_model.h"
#include "jpeg_test_util.h"
#include "kernels/kernels.h"

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static unsigned rnd(void) { return (unsigned)((gm_rand(&g_rng) + 1.0f) * 65536.0f); }

static cdb_image *rand_image(int w, int h, int nch) {
    cdb_image *img = calloc(1, sizeof *img);
    size_t n = (size_t)w * h * nch;
    img->width = w, img->height = h, img->channels = nch, img->bits = 8;
    img->pixels = malloc(n);
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)img->pixels)[i] = (uint8_t)((i / 3 % 251) + rnd() % 5);
    return img;
}

static void free_image(cdb_image *img) {
    if (img) free(img->pixels);
    free(img);
}

/* The geometry of img under p (encoder/preprocess.c's); pl freed by the caller. */
static void geom(const cdb_image *img, const cdb_preprocess_params *p, cdb_pp_plan *pl,
                 cdb_k_pp_geom *g) {
    memset(g, 0, sizeof *g);
    if (cdb_pp_plan_make(img->width, img->height, p, 1, pl) == CDB_OK)
        cdb_pp_plan_geom(pl, img->channels, g);
}

CDB_TEST(preprocess_u8_double_buffered_equals_cpu) {
    enum { N = 9, AT = 2 };
    static const int shapes[N][3] = {{640, 480, 3}, {300, 500, 1}, {224, 224, 3},
                                     {4000, 3000, 3}, {37, 53, 3},  {1000, 90, 1},
                                     {3, 2, 3},       {1920, 1080, 3}, {500, 224, 3}};
    cdb_k_backend *be = NULL;
    cdb_k_buf *px = NULL;
    cdb_preprocess_params p = cdb_preprocess_params_default();
    const size_t per = (size_t)3 * 224 * 224;
    cdb_image *img[N];
    cdb_pp_plan pl[N];
    cdb_k_pp_geom g[N];
    const uint8_t *src[N];
    float *want, *got;
    NEED_GPU();
    want = malloc(per * 4), got = malloc(per * (N + AT) * 4);
    CHECK_OK(cdb_k_backend_cuda_new(0, &be));
    CHECK(cdb_k_preprocess_on_device(be));
    CHECK_OK(cdb_k_buf_alloc(be, per * (N + AT), &px));
    for (int i = 0; i < N; i++) {
        img[i] = rand_image(shapes[i][0], shapes[i][1], shapes[i][2]);
        geom(img[i], &p, &pl[i], &g[i]);
        src[i] = img[i]->pixels;
    }
    for (int round = 0; round < 2; round++) {
        CHECK_OK(cdb_k_preprocess_u8(be, g, src, N, px, AT));
        CHECK_OK(cdb_k_buf_download(be, px, 0, got, per * (N + AT)));
        for (int i = 0; i < N; i++) {
            CHECK_OK(cdb_image_preprocess(img[i], &p, want, NULL));
            CHECK_MSG(!memcmp(want, got + per * (AT + i), per * 4),
                      "round %d image %d (%dx%d, %d ch): device pixels differ", round, i,
                      img[i]->width, img[i]->height, img[i]->channels);
        }
    }
    for (int i = 0; i < N; i++) cdb_pp_plan_free(&pl[i]), free_image(img[i]);
    cdb_k_buf_free(be, px);
    cdb_k_backend_free(be);
    free(want), free(got);
}

static cdb_model *open_vit(int cuda) {
    static char path[700];
    cdb_model_params mp = cdb_model_params_default();
    cdb_model *m = NULL;
    if (!path[0] && !(tmpdir()[0] && gm_write_vitb32(tmpdir(), 1234, path))) return NULL;
    mp.device.kind = cuda ? CDB_K_DEVICE_CUDA : CDB_K_DEVICE_CPU;
    mp.load_text = 0;
    return cdb_model_open(path, &mp, &m) == CDB_OK ? m : NULL;
}

CDB_TEST(encode_images_gpu_vs_cpu) {
    enum { N = 12 };
    cdb_model *gpu, *cpu;
    cdb_image *img[N];
    float *a, *b, *c, *px;
    double worst = 1, worst_same = 1;
    NEED_GPU();
    a = malloc(sizeof(float) * N * GM_EMBED), b = malloc(sizeof(float) * N * GM_EMBED);
    c = malloc(sizeof(float) * N * GM_EMBED);
    px = malloc(sizeof(float) * N * 3 * GM_SIZE * GM_SIZE);
    CHECK((gpu = open_vit(1)) && (cpu = open_vit(0)));
    for (int i = 0; i < N; i++) {
        img[i] = rand_image(200 + 97 * i, 150 + 61 * (N - i), i % 4 == 1 ? 1 : 3);
        CHECK_OK(cdb_image_preprocess(img[i], &cdb_model_get_info(cpu)->preprocess,
                                      px + (size_t)i * 3 * GM_SIZE * GM_SIZE, NULL));
    }
    CHECK_OK(cdb_encode_images(gpu, (const cdb_image *const *)img, N, 1, a));
    CHECK_OK(cdb_encode_pixels(cpu, px, N, 1, b));
    CHECK_OK(cdb_encode_pixels(gpu, px, N, 1, c));
    for (int i = 0; i < N; i++) {
        double x = cosine(a + i * GM_EMBED, b + i * GM_EMBED, GM_EMBED);
        double y = cosine(a + i * GM_EMBED, c + i * GM_EMBED, GM_EMBED);
        worst = x < worst ? x : worst, worst_same = y < worst_same ? y : worst_same;
    }
    printf("    encode_images on cuda: min cosine(cpu, gpu) = %.7f; vs cuda on the CPU's "
           "pixels %.9f\n", worst, worst_same);
    CHECK_MSG(worst >= 0.9995, "cosine %.7f < 0.9995", worst);
    CHECK_MSG(worst_same >= 0.99999, "same pixels, cosine %.9f", worst_same);
    for (int i = 0; i < N; i++) free_image(img[i]);
    cdb_model_close(gpu), cdb_model_close(cpu);
    free(a), free(b), free(c), free(px);
}

/* nvJPEG's RGB vs libjpeg-turbo's, through the transform set to pass bytes through
** (a square image at its own size: no resampling; mean 0, std 1, rescale 1: float = byte). */
static void pixels_vs_libjpeg(cdb_test_ctx *cdb_t_, cdb_k_backend *be, int w, int comps,
                              int flags, const char *name) {
    unsigned long n = 0;
    unsigned char *j = cdb_test_jpeg(w, w, comps, flags, &n);
    cdb_image_params ip = cdb_image_params_default();
    cdb_preprocess_params p = cdb_preprocess_params_default();
    cdb_image *ref = NULL, shape;
    cdb_pp_plan pl;
    cdb_k_pp_geom g;
    cdb_k_buf *px = NULL;
    cdb_status item = CDB_ERROR;
    size_t per = (size_t)3 * w * w;
    float *got = malloc(per * 4);
    const uint8_t *src = j;
    size_t len = n;
    double sum = 0;
    int mx = 0;
    CHECK(j && got);
    p.size = w, p.rescale_factor = 1.0;
    for (int c = 0; c < 3; c++) p.mean[c] = 0, p.std[c] = 1;
    CHECK_OK(cdb_image_decode(j, n, &ip, &ref)); /* libjpeg-turbo, full size */
    memset(&shape, 0, sizeof shape);
    shape.width = w, shape.height = w, shape.channels = 3;
    geom(&shape, &p, &pl, &g);
    CHECK_OK(cdb_k_buf_alloc(be, per, &px));
    CHECK_OK(cdb_k_jpeg_preprocess(be, &g, &src, &len, 1, px, 0, &item));
    CHECK_OK(item);
    CHECK_OK(cdb_k_buf_download(be, px, 0, got, per));
    for (size_t i = 0; i < (size_t)w * w; i++)
        for (int c = 0; c < 3; c++) {
            int r = ((uint8_t *)ref->pixels)[i * ref->channels + (ref->channels == 1 ? 0 : c)];
            int d = abs((int)got[(size_t)c * w * w + i] - r);
            sum += d, mx = d > mx ? d : mx;
        }
    printf("nvjpeg_vs_libjpeg %s %dx%d: max=%d mean=%.4f\n", name, w, w, mx, sum / per);
    CHECK_MSG(sum / per < 3 && mx <= 64, "%s: nvJPEG and libjpeg-turbo disagree (max %d, "
              "mean %.3f)", name, mx, sum / per);
    cdb_pp_plan_free(&pl);
    cdb_image_free(ref);
    cdb_k_buf_free(be, px);
    free(got), free(j);
}

CDB_TEST(nvjpeg_pixels_vs_libjpeg) {
    cdb_k_backend *be = NULL;
    NEED_GPU();
    if (!cdb_k_nvjpeg_usable()) CDB_SKIP("nvJPEG: %s", cdb_k_nvjpeg_unusable_reason());
    CHECK_OK(cdb_k_backend_cuda_new(0, &be));
    CHECK(cdb_k_jpeg_on_device(be));
    pixels_vs_libjpeg(cdb_t_, be, 640, 3, 0, "rgb-420");
    pixels_vs_libjpeg(cdb_t_, be, 333, 3, CDB_TJ_444, "rgb-444");
    pixels_vs_libjpeg(cdb_t_, be, 256, 1, 0, "gray");
    pixels_vs_libjpeg(cdb_t_, be, 1024, 3, CDB_TJ_OPTIMIZED, "rgb-420-optimized");
    cdb_k_backend_free(be);
}

CDB_TEST(encode_files_nvjpeg_vs_cpu) {
    enum { NF = 8 };
    static const int sz[NF][3] = {{640, 480, 0}, {1024, 768, CDB_TJ_444}, {300, 300, 0},
                                  {800, 600, CDB_TJ_PROGRESSIVE}, {640, 480, CDB_TJ_ROTATED},
                                  {2000, 1500, 0}, {0, 0, 0}, {500, 400, 0}};
    const void *bufs[NF];
    size_t lens[NF];
    cdb_status rc_g[NF], rc_c[NF];
    cdb_decoder used[NF];
    cdb_image_params ip = cdb_image_params_default();
    cdb_model *gpu, *cpu;
    float *a, *b;
    double worst = 1;
    NEED_GPU();
    if (!cdb_k_nvjpeg_usable()) CDB_SKIP("nvJPEG: %s", cdb_k_nvjpeg_unusable_reason());
    a = malloc(sizeof(float) * NF * GM_EMBED), b = malloc(sizeof(float) * NF * GM_EMBED);
    for (int i = 0; i < NF; i++) {
        unsigned long n = 0;
        if (i == 6) { /* not an image */
            bufs[i] = strdup("definitely not an image file"), lens[i] = 28;
            continue;
        }
        bufs[i] = cdb_test_jpeg(sz[i][0], sz[i][1], i == 2 ? 1 : 3, sz[i][2], &n);
        lens[i] = i == 7 ? n / 2 : n; /* 7: cut in half (the CPU decoder refuses it too) */
    }
    CHECK((gpu = open_vit(1)) && (cpu = open_vit(0)));
    ip.decode = CDB_DECODE_FAST, ip.target_size = GM_SIZE;
    CHECK_OK(cdb_encode_files(gpu, bufs, lens, NF, &ip, 1, a, rc_g, used));
    CHECK_OK(cdb_encode_files(cpu, bufs, lens, NF, &ip, 1, b, rc_c, NULL));
    for (int i = 0; i < NF; i++) {
        int want_nv = i != 3 && i != 4 && i != 6;
        printf("    file %d: %s, status %s / cpu %s\n", i,
               used[i] == CDB_DECODER_NVJPEG ? "nvJPEG" : "CPU", cdb_status_str(rc_g[i]),
               cdb_status_str(rc_c[i]));
        if (i != 7) CHECK_MSG(used[i] == (want_nv ? CDB_DECODER_NVJPEG : CDB_DECODER_CPU),
                              "file %d decoded by the wrong decoder", i);
        if (i < 6) {
            double c = cosine(a + i * GM_EMBED, b + i * GM_EMBED, GM_EMBED);
            worst = c < worst ? c : worst;
            CHECK_OK(rc_g[i]);
        }
    }
    CHECK(rc_g[6] != CDB_OK && rc_c[6] != CDB_OK);
    printf("nvjpeg_embed_cos min=%.6f (fast mode: nvJPEG full size on cuda vs libjpeg-turbo "
           "DCT-scaled on cpu)\n", worst);
    for (int i = 0; i < NF; i++) free((void *)bufs[i]);
    cdb_model_close(gpu), cdb_model_close(cpu);
    free(a), free(b);
}

CDB_TEST_MAIN(preprocess_u8_double_buffered_equals_cpu, encode_images_gpu_vs_cpu,
              nvjpeg_pixels_vs_libjpeg, encode_files_nvjpeg_vs_cpu)
