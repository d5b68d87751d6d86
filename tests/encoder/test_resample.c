/*
** test_resample.c: the AVX2 PIL-resample kernels (kernels/cpu/resample_avx2.c)
** against their scalar reference, byte for byte, on random data, random taps
** (including negative ones and sums that clip, within PIL's tap magnitudes), tap counts 1..70 and lengths that
** are not multiples of 8/16/32; and cdb_image_preprocess with the dispatch forced
** to scalar vs the default, on random images of every channel count; and the
** invariants of PIL's coefficient tables (cdb_k_pil_coeffs). Skips the AVX2 half on
** a CPU without AVX2 (then both paths are the scalar one).
*/
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "encoder/encoder.h"
#include "kernels/kernels.h"

static uint32_t g_seed = 2463534242u;
static uint32_t rnd(void);

/* n random taps, some negative, scaled so that sum |k| <= 1.25 * 2^22: like PIL's
** normalized bicubic taps, every sum of 255 * |k| fits in int32 (the kernels'
** precondition), and the clamp to 0..255 still gets exercised. */
static void rand_taps(int32_t *k, int n) {
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        k[i] = (int32_t)(rnd() % (3u << 21)) - (1 << 20);
        sum += k[i] < 0 ? -(int64_t)k[i] : k[i];
    }
    if (sum > (5 << 20))
        for (int i = 0; i < n; i++) k[i] = (int32_t)((int64_t)k[i] * (5 << 20) / sum);
}
static uint32_t rnd(void) {
    g_seed ^= g_seed << 13, g_seed ^= g_seed >> 17, g_seed ^= g_seed << 5;
    return g_seed;
}

CDB_TEST(vertical_matches_scalar) {
    for (int it = 0; it < 300; it++) {
        int n = 1 + (int)(rnd() % 70);
        size_t len = 1 + rnd() % 200, stride = len + rnd() % 7;
        uint8_t *src = malloc(stride * (size_t)n), *a = malloc(len), *b = malloc(len);
        int32_t *k = malloc(sizeof *k * (size_t)n);
        for (size_t i = 0; i < stride * (size_t)n; i++) src[i] = (uint8_t)rnd();
        rand_taps(k, n);
        cdb_k_resample_v_u8(src, stride, k, n, len, a);
        cdb_k_resample_v_u8_scalar(src, stride, k, n, len, b);
        CHECK_MSG(!memcmp(a, b, len), "vertical: n=%d len=%zu differ", n, len);
        free(src), free(a), free(b), free(k);
    }
}

CDB_TEST(horizontal_matches_scalar) {
    for (int it = 0; it < 300; it++) {
        int nch = 1 + (int)(rnd() % 4), ksize = 1 + (int)(rnd() % 70), n_out = 1 + (int)(rnd() % 40);
        size_t sw = (size_t)ksize + rnd() % 100;
        uint8_t *pl = malloc(sw * (size_t)nch), *a = malloc((size_t)n_out * nch),
                *b = malloc((size_t)n_out * nch);
        int *bounds = malloc(sizeof *bounds * 2 * (size_t)n_out);
        int32_t *kk = malloc(sizeof *kk * (size_t)n_out * ksize);
        for (size_t i = 0; i < sw * (size_t)nch; i++) pl[i] = (uint8_t)rnd();
        for (int i = 0; i < n_out; i++) {
            int taps = 1 + (int)(rnd() % (unsigned)ksize);
            bounds[2 * i] = (int)(rnd() % (unsigned)(sw - (size_t)taps + 1));
            bounds[2 * i + 1] = taps;
            rand_taps(kk + (size_t)i * ksize, ksize);
        }
        cdb_k_resample_h_u8(pl, sw, nch, bounds, kk, ksize, n_out, a);
        cdb_k_resample_h_u8_scalar(pl, sw, nch, bounds, kk, ksize, n_out, b);
        CHECK_MSG(!memcmp(a, b, (size_t)n_out * nch), "horizontal: nch=%d ksize=%d differ", nch,
                  ksize);
        free(pl), free(a), free(b), free(bounds), free(kk);
    }
}

CDB_TEST(deinterleave_matches_scalar) {
    for (int it = 0; it < 200; it++) {
        int nch = 1 + (int)(rnd() % 4);
        size_t n = 1 + rnd() % 300;
        uint8_t *src = malloc(n * (size_t)nch), *a = malloc(n * (size_t)nch), *b = malloc(n * (size_t)nch);
        for (size_t i = 0; i < n * (size_t)nch; i++) src[i] = (uint8_t)rnd();
        cdb_k_deinterleave_u8(src, n, nch, a, n);
        cdb_k_deinterleave_u8_scalar(src, n, nch, b, n);
        CHECK_MSG(!memcmp(a, b, n * (size_t)nch), "deinterleave: nch=%d n=%zu differ", nch, n);
        free(src), free(a), free(b);
    }
}

CDB_TEST(premul_deinterleave_matches_scalar) {
    for (int it = 0; it < 200; it++) {
        int nch = it % 2 ? 4 : 2;
        size_t n = 1 + rnd() % 300;
        uint8_t *src = malloc(n * (size_t)nch), *a = malloc(n * (size_t)nch), *b = malloc(n * (size_t)nch);
        for (size_t i = 0; i < n * (size_t)nch; i++) src[i] = (uint8_t)rnd();
        for (size_t i = 0; i < n && it % 3 == 0; i++) src[i * nch + nch - 1] = i % 2 ? 255 : 0;
        cdb_k_premul_deinterleave_u8(src, n, nch, a, n);
        cdb_k_premul_deinterleave_u8_scalar(src, n, nch, b, n);
        CHECK_MSG(!memcmp(a, b, n * (size_t)nch), "premul: nch=%d n=%zu differ", nch, n);
        /* and the scalar one is MULDIV255 as PIL computes it: round(c * a / 255) */
        for (size_t i = 0; i < n; i++) {
            unsigned al = src[i * nch + nch - 1], c = src[i * nch];
            CHECK_EQ_INT(b[i], (c * al + 127) / 255);
        }
        free(src), free(a), free(b);
    }
}

CDB_TEST(isa_reported) {
    fprintf(stderr, "    resample kernels: %s\n", cdb_k_isa_name(cdb_k_cpu_isa()));
    CHECK(cdb_k_isa_name(cdb_k_cpu_isa()) != NULL);
}

/* PIL's coefficient tables (cdb_k_pil_coeffs, used by the CPU preprocessing). */
CDB_TEST(pil_coeffs_properties) {
    int sizes[][2] = {{640, 224}, {224, 224}, {100, 224}, {1000, 7}, {3, 224}, {1, 5}, {299, 298}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int in = sizes[s][0], out = sizes[s][1], ks = 0;
        int32_t *bounds = NULL, *kk = NULL;
        CHECK_OK(cdb_k_pil_coeffs(in, out, 0, out, 0, &ks, &bounds, &kk));
        for (int i = 0; i < out; i++) {
            long long sum = 0;
            CHECK(bounds[2 * i] >= 0 && bounds[2 * i + 1] >= 1);
            CHECK(bounds[2 * i] + bounds[2 * i + 1] <= in);
            CHECK(bounds[2 * i + 1] <= ks);
            for (int k = 0; k < ks; k++) sum += kk[(size_t)i * ks + k];
            /* normalized weights, rounded per tap: sum within a few units of 2^22 */
            CHECK_MSG(llabs(sum - (1LL << 22)) <= ks, "%d->%d pos %d: sum %lld", in, out, i, sum);
        }
        if (in == out) /* identity: one tap of exactly 1.0 */
            for (int i = 0; i < out; i++) {
                int hits = 0;
                for (int k = 0; k < ks; k++) {
                    int32_t v = kk[(size_t)i * ks + k];
                    if (v == (1 << 22)) hits++;
                    else CHECK_EQ_INT(v, 0);
                }
                CHECK_EQ_INT(hits, 1);
            }
        cdb_free(bounds);
        cdb_free(kk);
    }
    {
        int ks;
        int32_t *b, *k;
        CHECK_RC(cdb_k_pil_coeffs(0, 5, 0, 5, 0, &ks, &b, &k), CDB_INVALID);
    }
}

CDB_TEST_MAIN(vertical_matches_scalar, horizontal_matches_scalar, deinterleave_matches_scalar,
              premul_deinterleave_matches_scalar, isa_reported, pil_coeffs_properties)
