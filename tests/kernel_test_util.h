/*
** kernel_test_util.h: the harness the differential kernel tests share (tests/kernels,
** tests/encoder/test_resnet_ops.c, tests/gpu): a xorshift stream of uniform floats,
** random vectors, the NMSE of a result against a reference, and float buffers moved
** to and from a backend (kernels.h), so one op can run on two backends and the two
** results be compared; and for the fp16 tests (tests/kernels/test_dot.c,
** tests/index/test_index.c) a splitmix64 stream of doubles (uniform, Gaussian) and fp16
** conversions by the compiler's _Float16 (an oracle independent of kernels/).
**
** KTU_SEED and KTU_SPLITMIX_SEED, defined before the include, pick the random streams
** (each test keeps the inputs it was written with); the functions are static inline, so
** a test that does not use one pays nothing for it.
*/
#ifndef CDB_TEST_KERNEL_TEST_UTIL_H
#define CDB_TEST_KERNEL_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "kernels/kernels.h"

#ifndef KTU_SEED
#define KTU_SEED 0x9E3779B97F4A7C15ull
#endif

static uint64_t g_rng = KTU_SEED;

static inline uint64_t xorshift64(void) { return cdb_test_xorshift(&g_rng); }

/* Uniform in [-1, 1). */
static inline float frand(void) {
    return (float)((xorshift64() >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}

/* n floats uniform in [-scale, scale), malloc'ed (one at least, so n may be 0). */
static inline float *rand_vec(size_t n, float scale) {
    float *v = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) v[i] = frand() * scale;
    return v;
}

/* sum (a - ref)^2 / sum ref^2, in double; the plain squared error when ref is all 0. */
static inline double nmse(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

/* The optimized CPU backend (2 threads) and the scalar reference backend. */
typedef struct pair {
    cdb_k_backend *be[2]; /* 0: optimized, 1: reference */
} pair;

static inline int pair_new(pair *p) {
    memset(p, 0, sizeof *p);
    return cdb_k_backend_cpu_new(2, &p->be[0]) == CDB_OK &&
           cdb_k_backend_cpu_ref_new(&p->be[1]) == CDB_OK;
}
static inline void pair_free(pair *p) {
    cdb_k_backend_free(p->be[0]);
    cdb_k_backend_free(p->be[1]);
}

/* A new buffer of be holding v[0..n) (of one float when n is 0); NULL on failure. */
static inline cdb_k_buf *up(cdb_k_backend *be, const float *v, size_t n) {
    cdb_k_buf *b = NULL;
    if (cdb_k_buf_alloc(be, n ? n : 1, &b) != CDB_OK) return NULL;
    if (n && cdb_k_buf_upload(be, b, 0, v, n) != CDB_OK) {
        cdb_k_buf_free(be, b);
        return NULL;
    }
    return b;
}

/* The first n floats of b, malloc'ed; all NaN (so any comparison fails) if the download
** failed, which is said on stderr. */
static inline float *down(cdb_k_backend *be, const cdb_k_buf *b, size_t n) {
    float *v = malloc((n ? n : 1) * sizeof(float));
    if (cdb_k_buf_download(be, b, 0, v, n) != CDB_OK) {
        fprintf(stderr, "    download: %s\n", cdb_errmsg());
        for (size_t i = 0; i < n; i++) v[i] = NAN;
    }
    return v;
}

/* ---- splitmix64 doubles and _Float16 -------------------------------------------------- */

#ifndef KTU_SPLITMIX_SEED
#define KTU_SPLITMIX_SEED 0x9e3779b97f4a7c15ull
#endif

static uint64_t rng_state = KTU_SPLITMIX_SEED;

static inline uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* Uniform in [0, 1). */
static inline double rng_unif(void) {
    return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0);
}
/* Standard normal (Box-Muller). */
static inline double rng_gauss(void) {
    double u = rng_unif() + 1e-300, v = rng_unif();
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* d rounded to fp16 (through float, as the stored vectors are), as bits. */
static inline uint16_t to_half(double d) {
    _Float16 h = (_Float16)(float)d;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}
static inline double from_half(uint16_t u) {
    _Float16 h;
    memcpy(&h, &u, 2);
    return (double)h;
}

#endif /* CDB_TEST_KERNEL_TEST_UTIL_H */
