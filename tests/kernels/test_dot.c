/*
** test_dot.c: the fp32-accumulating fp16 dot kernels and the precision contract.
** References are independent of the code under test: long double sums computed
** here, and the compiler's _Float16 type for fp16 rounding and for emulating the
** naive fp16 accumulation the contract forbids (which must visibly collapse on the
** same data, so the headline tests can fail).
*/
#include "cdb_test.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"

#define BIG_DIM 59136 /* 77 tokens x 768 hidden: a CLIP text hidden state, flattened */

/* Reference dot in long double, plus sum|a_i q_i| for the tolerance. */
static double ref_dot(const uint16_t *a, const float *q, size_t n, double *abs_sum) {
    long double s = 0, t = 0;
    for (size_t i = 0; i < n; i++) {
        long double p = (long double)from_half(a[i]) * q[i];
        s += p;
        t += p < 0 ? -p : p;
    }
    if (abs_sum) *abs_sum = (double)t;
    return (double)s;
}

/* CLIP-hidden-state-like values: mostly N(0,1), a few outlier channels of a few
** hundred (the massive activations seen in transformer residual streams). */
static void make_hidden_state(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = (float)rng_gauss();
    for (size_t i = 0; i < n; i += 768) { /* per token: two outlier channels */
        x[i + 17] = (float)(250.0 + 150.0 * rng_unif());
        if (i + 401 < n) x[i + 401] = (float)-(200.0 + 100.0 * rng_unif());
    }
}

CDB_TEST(dot_avx2_matches_scalar_random_dims) {
    printf("    isa: %s\n", cdb_k_isa_name(cdb_k_cpu_isa()));
    static const size_t dims[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 100, 255, 511,
                                  512, 513, 768, 1023, 1031, 4099};
    uint16_t *a = malloc(4099 * 2), *b = malloc(4099 * 2);
    float *q = malloc(4099 * 4);
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
        size_t n = dims[d];
        for (int rep = 0; rep < 5; rep++) {
            double scale = rep == 4 ? 300.0 : 1.0;
            for (size_t i = 0; i < n; i++) {
                a[i] = to_half((float)(rng_gauss() * scale));
                b[i] = to_half((float)rng_gauss());
                q[i] = (float)rng_gauss();
            }
            double abs_sum = 0, want = ref_dot(a, q, n, &abs_sum);
            float got = cdb_k_dot_f16_f32(a, q, n), ref = cdb_k_dot_f16_f32_scalar(a, q, n);
            double tol = 1e-6 * abs_sum + 1e-30;
            CHECK_MSG(fabs(got - ref) <= tol, "dim %zu: dispatched %.9g vs scalar %.9g", n, got, ref);
            CHECK_MSG(fabs(ref - want) <= tol, "dim %zu: scalar %.9g vs ref %.9g", n, ref, want);
            /* fp16 x fp16 */
            long double s2 = 0, t2 = 0;
            for (size_t i = 0; i < n; i++) {
                long double p = (long double)from_half(a[i]) * from_half(b[i]);
                s2 += p, t2 += fabsl(p);
            }
            float g2 = cdb_k_dot_f16_f16(a, b, n), r2 = cdb_k_dot_f16_f16_scalar(a, b, n);
            CHECK_MSG(fabs(g2 - r2) <= 1e-6 * (double)t2 + 1e-30, "f16f16 dim %zu", n);
            CHECK_MSG(fabs(r2 - (double)s2) <= 1e-6 * (double)t2 + 1e-30, "f16f16 ref dim %zu", n);
            /* fp32 x fp32: b widened, against long double */
            {
                float *bf = malloc(n * sizeof *bf);
                long double s3 = 0, t3 = 0;
                for (size_t i = 0; i < n; i++) {
                    long double p;
                    bf[i] = from_half(b[i]) * (float)scale;
                    p = (long double)bf[i] * q[i];
                    s3 += p, t3 += fabsl(p);
                }
                float g3 = cdb_k_dot_f32(bf, q, n), r3 = cdb_k_dot_f32_scalar(bf, q, n);
                CHECK_MSG(fabs(g3 - r3) <= 1e-6 * (double)t3 + 1e-30, "f32 dim %zu", n);
                CHECK_MSG(fabs(r3 - (double)s3) <= 1e-6 * (double)t3 + 1e-30, "f32 ref dim %zu", n);
                free(bf);
            }
        }
    }
    free(a), free(b), free(q);
}

CDB_TEST(dot_multi_and_batch_match_single) {
    const size_t dims[] = {5, 8, 24, 77, 512, 515};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
        size_t dim = dims[d];
        for (size_t n_vecs = 1; n_vecs <= 7; n_vecs += 3) {
            for (size_t n_q = 1; n_q <= 9; n_q += 2) {
                uint16_t *v = malloc(n_vecs * dim * 2);
                float *qs = malloc(n_q * dim * 4), *out = malloc(n_vecs * n_q * 4);
                float *ref = malloc(n_vecs * n_q * 4), *bat = malloc(n_vecs * 4);
                for (size_t i = 0; i < n_vecs * dim; i++) v[i] = to_half((float)rng_gauss());
                for (size_t i = 0; i < n_q * dim; i++) qs[i] = (float)rng_gauss();
                cdb_k_dot_f16_f32_multi(v, n_vecs, qs, n_q, dim, out);
                cdb_k_dot_f16_f32_multi_scalar(v, n_vecs, qs, n_q, dim, ref);
                for (size_t j = 0; j < n_q; j++) {
                    cdb_k_dot_f16_f32_batch(v, n_vecs, qs + j * dim, dim, bat);
                    for (size_t i = 0; i < n_vecs; i++) {
                        double abs_sum = 0, want = ref_dot(v + i * dim, qs + j * dim, dim, &abs_sum);
                        double tol = 1e-6 * abs_sum + 1e-30;
                        CHECK_MSG(fabs(out[i * n_q + j] - want) <= tol,
                                  "multi dim %zu vec %zu q %zu: %.9g vs %.9g", dim, i, j,
                                  out[i * n_q + j], want);
                        CHECK_MSG(fabs(ref[i * n_q + j] - want) <= tol, "multi scalar");
                        CHECK_MSG(fabs(bat[i] - want) <= tol, "batch dim %zu vec %zu", dim, i);
                        /* Scores must not depend on the path that computed them. */
                        float one = cdb_k_dot_f16_f32(v + i * dim, qs + j * dim, dim);
                        CHECK_MSG(memcmp(&one, &out[i * n_q + j], 4) == 0 &&
                                      memcmp(&one, &bat[i], 4) == 0,
                                  "dim %zu vec %zu q %zu: single %.9g multi %.9g batch %.9g "
                                  "not bit-identical", dim, i, j, one, out[i * n_q + j], bat[i]);
                    }
                }
                free(v), free(qs), free(out), free(ref), free(bat);
            }
        }
    }
}

/* Headline: self-cosine of a 59,136-element fp16 vector is 1.0 within 1e-6 with
** the kernels, and naive fp16 accumulation collapses on the same data. */
CDB_TEST(precision_self_cosine_59136) {
    float *x = malloc(BIG_DIM * 4), *xf = malloc(BIG_DIM * 4);
    uint16_t *h = malloc(BIG_DIM * 2), *hn = malloc(BIG_DIM * 2);
    make_hidden_state(x, BIG_DIM);
    for (size_t i = 0; i < BIG_DIM; i++) h[i] = to_half(x[i]);

    /* The kernels: raw hidden state stored as fp16. */
    float cos_raw = cdb_k_cosine_f16(h, h, BIG_DIM);
    CHECK_NEAR(cos_raw, 1.0, 1e-6);
    for (size_t i = 0; i < BIG_DIM; i++) xf[i] = from_half(h[i]);
    float d = cdb_k_dot_f16_f32(h, xf, BIG_DIM), nn = cdb_k_l2norm_f16(h, BIG_DIM);
    CHECK(isfinite(d) && d > 0);
    CHECK_NEAR((double)d / ((double)nn * nn), 1.0, 1e-6);

    /* Naive fp16 accumulation on the same data: every partial sum rounded to fp16. */
    _Float16 acc = 0;
    for (size_t i = 0; i < BIG_DIM; i++) {
        _Float16 v;
        memcpy(&v, &h[i], 2);
        acc = (_Float16)(acc + (_Float16)(v * v));
    }
    float naive_norm2 = (float)acc, naive_cos = (float)acc / ((float)acc);
    printf("    raw hidden state: kernel cos %.9f, naive fp16 |x|^2 = %g, cos = %g\n", cos_raw,
           naive_norm2, naive_cos);
    CHECK_MSG(isinf(naive_norm2) && isnan(naive_cos), "naive fp16 must overflow here");

    /* Normalized in fp32, stored as fp16: the kernels give 1, naive fp16 stalls. */
    CHECK_OK(cdb_k_normalize_to_f16(x, BIG_DIM, hn));
    for (size_t i = 0; i < BIG_DIM; i++) xf[i] = from_half(hn[i]);
    float nh = cdb_k_l2norm_f16(hn, BIG_DIM);
    float cos_unit = (float)((double)cdb_k_dot_f16_f32(hn, xf, BIG_DIM) / ((double)nh * nh));
    CHECK_NEAR(cos_unit, 1.0, 1e-6);
    CHECK_NEAR(cdb_k_cosine_f16(hn, hn, BIG_DIM), 1.0, 1e-6);
    CHECK_NEAR(nh, 1.0, 1e-3); /* fp16 rounding of a unit vector */

    /* A unit vector without dominant channels (an image embedding's spread):
    ** naive fp16 running sums stall once the terms fall below half an ulp. */
    for (size_t i = 0; i < BIG_DIM; i++) x[i] = (float)rng_gauss();
    CHECK_OK(cdb_k_normalize_to_f16(x, BIG_DIM, hn));
    for (size_t i = 0; i < BIG_DIM; i++) xf[i] = from_half(hn[i]);
    nh = cdb_k_l2norm_f16(hn, BIG_DIM);
    float self = cdb_k_dot_f16_f32(hn, xf, BIG_DIM);
    CHECK_NEAR((double)self / ((double)nh * nh), 1.0, 1e-6);
    CHECK_NEAR(self, 1.0, 1e-3);
    acc = 0;
    for (size_t i = 0; i < BIG_DIM; i++) {
        _Float16 v;
        memcpy(&v, &hn[i], 2);
        acc = (_Float16)(acc + (_Float16)(v * v));
    }
    printf("    spread unit vector: kernel self-dot %.9f, naive fp16 self-dot %g\n", self,
           (float)acc);
    CHECK_MSG(fabs((float)acc - 1.0) > 0.05, "naive fp16 self-dot should collapse, got %g",
              (float)acc);
    free(x), free(xf), free(h), free(hn);
}

/* Inputs of huge magnitude normalize correctly before the rounding to fp16. */
CDB_TEST(precision_huge_magnitude_normalize) {
    static const double mags[] = {1e5, 1e20, 1e30};
    float *x = malloc(BIG_DIM * 4);
    uint16_t *h = malloc(BIG_DIM * 2);
    for (size_t m = 0; m < 3; m++) {
        long double s = 0;
        for (size_t i = 0; i < BIG_DIM; i++) {
            x[i] = (float)(mags[m] * (0.5 + rng_unif()) * (rng_next() & 1 ? 1 : -1));
            s += (long double)x[i] * x[i];
        }
        long double norm = sqrtl(s);
        /* naive fp32 sum of squares overflows from ~1.8e19 per element */
        float naive = 0;
        for (size_t i = 0; i < BIG_DIM; i++) naive += x[i] * x[i];
        if (mags[m] >= 1e20) CHECK(isinf(naive));
        CHECK_OK(cdb_k_normalize_to_f16(x, BIG_DIM, h));
        size_t bad = 0;
        for (size_t i = 0; i < BIG_DIM; i++) {
            float want = (float)((long double)x[i] / norm);
            uint16_t w = to_half(want);
            if (w != h[i]) bad++;
        }
        CHECK_MSG(bad == 0, "mag %g: %zu of %d elements differ from fp16(x/|x|)", mags[m], bad,
                  BIG_DIM);
        CHECK_NEAR(cdb_k_l2norm_f16(h, BIG_DIM), 1.0, 1e-3);
        /* in place, fp32 */
        float n_out = 0;
        CHECK_OK(cdb_k_normalize_f32(x, BIG_DIM, &n_out));
        CHECK_NEAR(cdb_k_l2norm_f32(x, BIG_DIM), 1.0, 1e-6);
        CHECK_NEAR(n_out / (double)norm, 1.0, 1e-6);
    }
    free(x), free(h);
}

CDB_TEST(normalize_refuses_nan_inf_zero) {
    float v[37];
    uint16_t h[37];
    for (int i = 0; i < 37; i++) v[i] = (float)(i + 1);
    v[20] = NAN;
    CHECK_RC(cdb_k_normalize_f32(v, 37, NULL), CDB_INVALID);
    CHECK(strstr(cdb_errmsg(), "NaN") != NULL);
    CHECK(v[0] == 1.0f && v[36] == 37.0f); /* untouched */
    v[20] = INFINITY;
    CHECK_RC(cdb_k_normalize_to_f16(v, 37, h), CDB_INVALID);
    CHECK(strstr(cdb_errmsg(), "infinite") != NULL);
    v[20] = -INFINITY;
    CHECK_RC(cdb_k_normalize_f32(v, 37, NULL), CDB_INVALID);
    memset(v, 0, sizeof v);
    CHECK_RC(cdb_k_normalize_f32(v, 37, NULL), CDB_INVALID);
    CHECK(strstr(cdb_errmsg(), "zero") != NULL);
}

/* The nearest of ny transposed ys (a PQ sub-quantizer's centroids): the dispatched kernel
** (AVX2 here) gives the index a brute force in long double gives, the first of equal
** distances (ys repeated: exact ties), for ny with and without a tail of fewer than 8. */
CDB_TEST(nearest_l2_transposed_is_first_minimum) {
    enum { DIMS = 8, MAXY = 259 };
    static float y[MAXY][DIMS], yt[DIMS * MAXY];
    float x[DIMS];
    const size_t nys[] = {256, 259, 5, 8};
    int checked = 0;
    for (int round = 0; round < 200; round++) {
        size_t ny = nys[round % 4];
        for (size_t i = 0; i < ny; i++)
            for (int d = 0; d < DIMS; d++) y[i][d] = (float)rng_gauss();
        for (size_t i = 1; i < ny; i += 3) memcpy(y[i], y[i / 2], sizeof y[i]); /* ties */
        for (int d = 0; d < DIMS; d++) x[d] = (float)rng_gauss();
        if (round % 5 == 0) memcpy(x, y[ny - 1], sizeof x); /* distance 0, at the end */
        for (size_t i = 0; i < ny; i++)
            for (int d = 0; d < DIMS; d++) yt[d * ny + i] = y[i][d];
        size_t want = 0;
        long double best = 1e30L;
        for (size_t i = 0; i < ny; i++) {
            long double s = 0;
            for (int d = 0; d < DIMS; d++) s += ((long double)x[d] - y[i][d]) * (x[d] - y[i][d]);
            if (s < best) best = s, want = i;
        }
        size_t got = cdb_k_nearest_l2_t_f32(x, yt, ny, DIMS);
        size_t ref = cdb_k_nearest_l2_t_f32_scalar(x, yt, ny, DIMS);
        CHECK_EQ_INT((long long)got, (long long)ref);
        /* fp32 sums may order a near-tie otherwise than long double: then the two ys
        ** must be as near as fp32 can tell */
        if (got != want) {
            long double s = 0;
            for (int d = 0; d < DIMS; d++)
                s += ((long double)x[d] - y[got][d]) * (x[d] - y[got][d]);
            CHECK_MSG(s - best <= 1e-5L * (best + 1e-6L), "round %d: %zu vs %zu", round, got,
                      want);
        }
        checked++;
    }
    CHECK_EQ_INT(checked, 200);
}

CDB_TEST_MAIN(dot_avx2_matches_scalar_random_dims, dot_multi_and_batch_match_single,
              precision_self_cosine_59136, precision_huge_magnitude_normalize,
              normalize_refuses_nan_inf_zero, nearest_l2_transposed_is_first_minimum)
