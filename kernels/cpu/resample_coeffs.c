/*
** resample_coeffs.c: PIL 9.4's resampling coefficients (libImaging/Resample.c,
** precompute_coeffs + normalize_coeffs_8bpc) for the preprocessing
** (encoder/preprocess.c): the same double arithmetic in the same order, the same
** rounding to 22-bit fixed point, so the taps are PIL's bit for bit.
*/
#include <math.h>

#include "kernels/kernels.h"

static double filter_bicubic(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static double filter_bilinear(double x) {
    if (x < 0.0) x = -x;
    if (x < 1.0) return 1.0 - x;
    return 0.0;
}

cdb_status cdb_k_pil_coeffs(int in_size, int out_size, int first, int count, int bilinear,
                            int *ksize_out, int **bounds_out, int32_t **kk_out) {
    double (*filter)(double) = bilinear ? filter_bilinear : filter_bicubic;
    double fsupport = bilinear ? 1.0 : 2.0;
    /* PIL: in0/in1 are floats (the resize box); (double)(in1 - in0) / outSize. */
    float in0 = 0.0f, in1 = (float)in_size;
    double scale, filterscale, support, *w;
    int ksize, *bounds;
    int32_t *kk;
    *ksize_out = 0;
    *bounds_out = NULL;
    *kk_out = NULL;
    if (in_size < 1 || out_size < 1 || first < 0 || count < 0 || first + count > out_size)
        return cdb_seterr(CDB_INVALID, "resize %d -> %d (outputs %d..%d): empty or out of range",
                          in_size, out_size, first, first + count);
    scale = (double)(in1 - in0) / out_size;
    filterscale = scale < 1.0 ? 1.0 : scale;
    support = fsupport * filterscale;
    ksize = (int)ceil(support) * 2 + 1;
    bounds = cdb_malloc((size_t)(count ? count : 1) * 2 * sizeof *bounds);
    kk = cdb_malloc((size_t)(count ? count : 1) * (size_t)ksize * sizeof *kk);
    w = cdb_malloc((size_t)ksize * sizeof *w);
    if (!bounds || !kk || !w) {
        cdb_free(bounds);
        cdb_free(kk);
        cdb_free(w);
        return cdb_seterr(CDB_NOMEM, "resize: out of memory for %d x %d coefficients", count,
                          ksize);
    }
    for (int i = 0; i < count; i++) {
        int xx = first + i;
        double center = in0 + (xx + 0.5) * scale;
        double ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5);
        int xmax = (int)(center + support + 0.5);
        int x;
        if (xmin < 0) xmin = 0;
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        for (x = 0; x < xmax; x++) {
            double v = filter((x + xmin - center + 0.5) * ss);
            w[x] = v;
            ww += v;
        }
        for (x = 0; x < xmax; x++)
            if (ww != 0.0) w[x] /= ww;
        for (; x < ksize; x++) w[x] = 0;
        for (x = 0; x < ksize; x++) {
            double v = w[x] * (1 << CDB_K_RESAMPLE_PRECISION);
            kk[(size_t)i * ksize + x] = (int32_t)(w[x] < 0 ? -0.5 + v : 0.5 + v);
        }
        bounds[2 * i] = xmin;
        bounds[2 * i + 1] = xmax;
    }
    cdb_free(w);
    *ksize_out = ksize;
    *bounds_out = bounds;
    *kk_out = kk;
    return CDB_OK;
}
