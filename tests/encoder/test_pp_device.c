/*
** test_pp_device.c: the device's image transform (kernels/cuda/preprocess.cu), emulated
** on the CPU: the very per-output functions its kernels run (kernels/cuda/pp_elem.h),
** over the plan encoder/preprocess.c computes (cdb_pp_plan_make, the one place PIL's
** coefficients and the normalization table come from), against cdb_image_preprocess
** (itself bit-exact with PIL: test_image, test_photos). The arithmetic is integer
** sums plus a table lookup, so the derived bound is 0: every float must be equal, bit
** for bit, for gray and RGB 8-bit images, both interpolations, CLIP's short side +
** centre crop and SigLIP's squash, HF's rescale, and each combination of the passes
** (both, horizontal only, vertical only, none). The GPU runs the same functions
** (tests/gpu/test_cuda_kernels.c compares its output with cdb_image_preprocess).
*/
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "kernel_test_util.h"
#include "encoder/encoder_int.h"
#include "kernels/cuda/pp_elem.h"

static unsigned rnd(void) { return (unsigned)(xorshift64() >> 32); }

/* The kernels' loops on the CPU: k_pp_h over tmp, then k_pp_v_norm over the crop. */
static int emulate(const cdb_image *img, const cdb_preprocess_params *p, float *out) {
    cdb_pp_plan pl;
    cdb_pp_geom g;
    uint8_t *tmp = NULL;
    int ok = 0;
    if (cdb_pp_plan_make(img->width, img->height, p, 1, &pl) != CDB_OK) goto out;
    memset(&g, 0, sizeof g);
    g.w = img->width, g.h = img->height, g.nch = img->channels;
    g.stride = (size_t)img->width * img->channels;
    g.size = pl.size, g.left = pl.left, g.top = pl.top;
    g.y0 = pl.y0, g.rows = pl.y1 - pl.y0;
    g.bh = pl.bh, g.kkh = pl.kkh, g.kh = pl.need_h ? pl.kh : 0;
    g.bv = pl.bv, g.kkv = pl.kkv, g.kv = pl.need_v ? pl.kv : 0;
    g.lut = &pl.lut[0][0];
    if (g.kh) {
        size_t n = (size_t)g.rows * g.size * g.nch;
        if (!(tmp = malloc(n))) goto out;
        for (size_t i = 0; i < n; i++) {
            size_t per_row = (size_t)g.size * g.nch;
            tmp[i] = cdb_pp_tmp(&g, img->pixels, (int)(i / per_row), (int)(i % per_row / g.nch),
                                (int)(i % g.nch));
        }
    }
    for (size_t i = 0, n = (size_t)g.size * g.size; i < n; i++) {
        uint8_t px[3];
        for (int c = 0; c < g.nch; c++)
            px[c] = cdb_pp_crop(&g, img->pixels, tmp, (int)(i / g.size), (int)(i % g.size), c);
        for (int c = 0; c < 3; c++) out[(size_t)c * n + i] = cdb_pp_norm(px, g.nch, c, g.lut);
    }
    ok = 1;
out:
    free(tmp);
    cdb_pp_plan_free(&pl);
    return ok;
}

/* A smooth image with noise (the resampler's sums cover the whole byte range). */
static void fill(cdb_image *img) {
    uint8_t *px = img->pixels;
    for (int y = 0; y < img->height; y++)
        for (int x = 0; x < img->width; x++)
            for (int c = 0; c < img->channels; c++) {
                int v = (x * 7 + y * 3 + c * 50) % 256 + (int)(rnd() % 61) - 30;
                px[((size_t)y * img->width + x) * img->channels + c] =
                    (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
}

CDB_TEST(emulated_kernels_equal_cdb_image_preprocess) {
    /* w, h, size: both passes, horizontal only (h == size after resize), vertical only
    ** (w == size), none (already size x size), enlargement, tall and wide */
    static const int shapes[][3] = {{640, 480, 224}, {500, 224, 224}, {224, 301, 224},
                                    {224, 224, 224}, {37, 53, 64},    {1000, 90, 48},
                                    {90, 1000, 48},  {3, 2, 16}};
    int n_cases = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int nch = 1; nch <= 3; nch += 2)
            for (int mode = 0; mode < 4; mode++) {
                cdb_image img;
                cdb_preprocess_params p = cdb_preprocess_params_default();
                int size = shapes[s][2];
                float *want = malloc((size_t)3 * size * size * 4);
                float *got = malloc((size_t)3 * size * size * 4);
                memset(&img, 0, sizeof img);
                img.width = shapes[s][0], img.height = shapes[s][1], img.channels = nch;
                img.bits = 8;
                img.pixels = malloc((size_t)img.width * img.height * nch);
                CHECK(want && got && img.pixels);
                fill(&img);
                p.size = size;
                p.interp = mode & 1 ? CDB_INTERP_BILINEAR : CDB_INTERP_BICUBIC;
                p.resize = mode & 2 ? CDB_RESIZE_SQUASH : CDB_RESIZE_SHORT_CROP;
                if (mode == 3) p.rescale_factor = 1.0 / 255.0;
                CHECK_OK(cdb_image_preprocess(&img, &p, want, NULL));
                CHECK(emulate(&img, &p, got));
                CHECK_MSG(!memcmp(want, got, (size_t)3 * size * size * 4),
                          "%dx%d nch %d size %d mode %d: the emulated kernels differ", img.width,
                          img.height, nch, size, mode);
                free(want), free(got), free(img.pixels);
                n_cases++;
            }
    CHECK_EQ_INT(n_cases, 64);
}

/* The plan refuses what cdb_image_preprocess refuses, with the same status. */
CDB_TEST(plan_validates_like_preprocess) {
    cdb_pp_plan pl;
    cdb_preprocess_params p = cdb_preprocess_params_default();
    p.size = 0;
    CHECK_RC(cdb_pp_plan_make(10, 10, &p, 1, &pl), CDB_INVALID);
    cdb_pp_plan_free(&pl);
    p = cdb_preprocess_params_default();
    p.std[1] = 0;
    CHECK_RC(cdb_pp_plan_make(10, 10, &p, 1, &pl), CDB_INVALID);
    cdb_pp_plan_free(&pl);
    p = cdb_preprocess_params_default();
    CHECK_RC(cdb_pp_plan_make(1, 1 << 30, &p, 1, &pl), CDB_TOO_LARGE);
    cdb_pp_plan_free(&pl);
    CHECK_OK(cdb_pp_plan_make(640, 480, &p, 0, &pl)); /* palette: no coefficients */
    CHECK(pl.bh == NULL && pl.bv == NULL && pl.need_h && pl.need_v);
    cdb_pp_plan_free(&pl);
}

CDB_TEST_MAIN(emulated_kernels_equal_cdb_image_preprocess, plan_validates_like_preprocess)
