/*
** test_fp16.c: fp16 <-> fp32 conversion. References independent of the code under
** test: the compiler's _Float16 arithmetic type (IEEE conversions, round to
** nearest even) and exact integer reasoning about the half grid.
*/
#include "cdb_test.h"
#include "kernels/kernels.h"

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static int is_nan_half(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }

/* Exact value of a finite half from its bits, computed in double. */
static double half_value(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return (h & 0x8000) ? -v : v;
}

CDB_TEST(all_halves_to_f32_exact) {
    static uint16_t h[65536];
    static float f_vec[65536], f_ref[65536];
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    cdb_k_f16_to_f32_scalar(h, f_ref, 65536);
    cdb_k_f16_to_f32(h, f_vec, 65536); /* dispatched (F16C where present) */
    for (int i = 0; i < 65536; i++) {
        uint16_t hi = (uint16_t)i;
        if (is_nan_half(hi)) {
            CHECK_MSG(isnan(f_ref[i]) && isnan(f_vec[i]), "half 0x%04x must give NaN", i);
            CHECK_MSG(!!signbit(f_ref[i]) == !!signbit(f_vec[i]), "NaN sign 0x%04x", i);
            continue;
        }
        if ((hi & 0x7fff) == 0x7c00) {
            CHECK_MSG(isinf(f_ref[i]) && isinf(f_vec[i]), "half 0x%04x must give Inf", i);
            CHECK(!!signbit(f_ref[i]) == !!(hi & 0x8000));
            continue;
        }
        CHECK_MSG((double)f_ref[i] == half_value(hi), "scalar 0x%04x -> %.9g, want %.9g", i,
                  f_ref[i], half_value(hi));
        CHECK_MSG(f32_bits(f_ref[i]) == f32_bits(f_vec[i]), "dispatched 0x%04x: %08x vs %08x", i,
                  f32_bits(f_vec[i]), f32_bits(f_ref[i]));
#ifdef __FLT16_MAX__
        _Float16 hv;
        memcpy(&hv, &h[i], 2);
        CHECK_MSG(f32_bits((float)hv) == f32_bits(f_ref[i]), "_Float16 disagrees at 0x%04x", i);
#endif
    }
}

CDB_TEST(all_halves_roundtrip) {
    for (int i = 0; i < 65536; i++) {
        uint16_t hi = (uint16_t)i;
        uint16_t back = cdb_k_f32_to_f16_1(cdb_k_f16_to_f32_1(hi));
        if (is_nan_half(hi))
            CHECK_MSG(is_nan_half(back) && (back & 0x8000) == (hi & 0x8000), "NaN 0x%04x", i);
        else
            CHECK_MSG(back == hi, "0x%04x -> 0x%04x", i, back);
    }
}

/* Every midpoint between adjacent halves (ties) and the points just around it:
** ties go to the even neighbour, others to the nearest. Covers subnormals, the
** normal/subnormal boundary and the overflow threshold 65520. */
CDB_TEST(f32_to_f16_rounding_grid) {
    static float in[3 * 0x7c00];
    static uint16_t want[3 * 0x7c00], got_s[3 * 0x7c00], got_v[3 * 0x7c00];
    size_t n = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double lo = half_value((uint16_t)h);
        double hi = h + 1 == 0x7c00 ? 65536.0 : half_value((uint16_t)(h + 1));
        double mid = (lo + hi) / 2; /* exact in fp32: halves have 11 significant bits */
        float fm = (float)mid;
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        in[n] = fm;
        want[n++] = even;
        in[n] = nextafterf(fm, 0.0f);
        want[n++] = (uint16_t)h;
        in[n] = nextafterf(fm, INFINITY);
        want[n++] = (uint16_t)(h + 1); /* 0x7c00 = +Inf above the last half */
    }
    cdb_k_f32_to_f16_scalar(in, got_s, n);
    cdb_k_f32_to_f16(in, got_v, n);
    for (size_t i = 0; i < n; i++) {
        CHECK_MSG(got_s[i] == want[i], "scalar %.9g -> 0x%04x, want 0x%04x", in[i], got_s[i], want[i]);
        CHECK_MSG(got_v[i] == want[i], "dispatched %.9g -> 0x%04x, want 0x%04x", in[i], got_v[i], want[i]);
        /* and the negative side mirrors it */
        CHECK(cdb_k_f32_to_f16_1(-in[i]) == (uint16_t)(want[i] | 0x8000));
    }
}

CDB_TEST(f32_to_f16_specials_and_random) {
    CHECK_EQ_INT(cdb_k_f32_to_f16_1(INFINITY), 0x7c00);
    CHECK_EQ_INT(cdb_k_f32_to_f16_1(-INFINITY), 0xfc00);
    CHECK_EQ_INT(cdb_k_f32_to_f16_1(1e10f), 0x7c00);
    CHECK_EQ_INT(cdb_k_f32_to_f16_1(-0.0f), 0x8000);
    CHECK_EQ_INT(cdb_k_f32_to_f16_1(1e-30f), 0x0000);
    CHECK(is_nan_half(cdb_k_f32_to_f16_1(NAN)));
    /* random bit patterns: scalar vs dispatched vs _Float16, bit for bit */
    uint32_t s = 12345;
    enum { N = 1 << 20 };
    static float in[N];
    static uint16_t a[N], b[N];
    for (int i = 0; i < N; i++) {
        uint32_t u;
        s = s * 1664525u + 1013904223u;
        u = s;
        if (i & 1) u = (u & 0x80000000u) | (0x30000000u + (u % 0x17800000u)); /* half range */
        memcpy(&in[i], &u, 4);
    }
    cdb_k_f32_to_f16_scalar(in, a, N);
    cdb_k_f32_to_f16(in, b, N);
    for (int i = 0; i < N; i++) {
        if (isnan(in[i])) {
            CHECK(is_nan_half(a[i]) && is_nan_half(b[i]));
            continue;
        }
        CHECK_MSG(a[i] == b[i], "%.9g: scalar 0x%04x, dispatched 0x%04x", in[i], a[i], b[i]);
#ifdef __FLT16_MAX__
        _Float16 r = (_Float16)in[i];
        uint16_t rb;
        memcpy(&rb, &r, 2);
        CHECK_MSG(a[i] == rb, "%.9g: scalar 0x%04x, _Float16 0x%04x", in[i], a[i], rb);
#endif
    }
}

CDB_TEST(odd_lengths_use_the_tail_path) {
    for (size_t n = 0; n < 40; n++) {
        float in[40] = {0}, out[40];
        uint16_t h[40];
        for (size_t i = 0; i < n; i++) in[i] = (float)i * 0.37f - 3.1f;
        cdb_k_f32_to_f16(in, h, n);
        cdb_k_f16_to_f32(h, out, n);
        for (size_t i = 0; i < n; i++) CHECK_NEAR(out[i], in[i], 0.004);
    }
}

CDB_TEST(isa_reported) {
    cdb_k_isa isa = cdb_k_cpu_isa();
    CHECK(isa == CDB_K_ISA_SCALAR || isa == CDB_K_ISA_AVX2 || isa == CDB_K_ISA_AVX512);
    CHECK(strcmp(cdb_k_isa_name(isa), "unknown") != 0);
    CHECK(cdb_k_cuda_device_count() >= 0);
}

CDB_TEST_MAIN(all_halves_to_f32_exact, all_halves_roundtrip, f32_to_f16_rounding_grid,
              f32_to_f16_specials_and_random, odd_lengths_use_the_tail_path, isa_reported)
