/*
** cosine.h: the cosine of two fp32 vectors, accumulated in double: what the tests and
** benchmarks compare embeddings with, independent of the kernels' own cosines.
** Header-only test code.
*/
#ifndef CDB_TESTS_COSINE_H
#define CDB_TESTS_COSINE_H

#include <math.h>

/* a . b / (|a| |b|) over n floats; NaN when either is all zero. */
static inline double cosine(const float *a, const float *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return ab / sqrt(aa * bb);
}

#endif
