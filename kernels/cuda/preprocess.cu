/*
** preprocess.cu: CLIP's image transform on the device for 8-bit gray/RGB images
** (resize with PIL's coefficients, centre crop, ToTensor + Normalize): a horizontal
** pass into a byte buffer, then the vertical pass, the crop and the normalization
** into CHW floats. The arithmetic of every output is pp_elem.h's, which the CPU
** emulation test runs against encoder/preprocess.c (bit-exact: integer sums, a float
** lookup). One thread per output byte (horizontal) or pixel (vertical + normalize).
*/
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/pp_elem.h"

static __global__ void k_pp_h(cdb_pp_geom g, const uint8_t *__restrict__ src,
                              uint8_t *__restrict__ tmp, size_t n) {
    size_t per_row = (size_t)g.size * g.nch;
    CDB_KC_GRID_STRIDE(i, n) {
        int r = (int)(i / per_row), x = (int)(i % per_row / g.nch), c = (int)(i % g.nch);
        tmp[i] = cdb_pp_tmp(&g, src, r, x, c);
    }
}

static __global__ void k_pp_v_norm(cdb_pp_geom g, const uint8_t *__restrict__ src,
                                   const uint8_t *__restrict__ tmp, float *__restrict__ out,
                                   size_t n) {
    CDB_KC_GRID_STRIDE(i, n) {
        int y = (int)(i / g.size), x = (int)(i % g.size);
        uint8_t px[3];
        for (int c = 0; c < g.nch; c++) px[c] = cdb_pp_crop(&g, src, tmp, y, x, c);
        for (int c = 0; c < 3; c++) out[(size_t)c * n + i] = cdb_pp_norm(px, g.nch, c, g.lut);
    }
}

extern "C" cdb_status cdb_kc_pp_image(cdb_kc_ctx *c, const cdb_pp_geom *g, const uint8_t *src,
                                      uint8_t *tmp, float *out) {
    cdb_status rc = CDB_OK;
    size_t n_h = g->kh ? (size_t)g->rows * g->size * g->nch : 0, n_v = (size_t)g->size * g->size;
    unsigned grid;
    CDB_CUDA_CHECK_ARG(g->size > 0 && (g->nch == 1 || g->nch == 3) && g->w > 0 && g->h > 0 &&
                           g->lut && (!g->kh || (tmp && g->rows > 0)),
                       "pp_image: bad geometry");
    if (n_h) {
        grid = cdb_kc_grid(n_h, 256);
        k_pp_h<<<grid, 256, 0, c->compute>>>(*g, src, tmp, n_h);
        CDB_CUDA_CHECK_LAUNCH("k_pp_h");
    }
    grid = cdb_kc_grid(n_v, 256);
    k_pp_v_norm<<<grid, 256, 0, c->compute>>>(*g, src, tmp, out, n_v);
    CDB_CUDA_CHECK_LAUNCH("k_pp_v_norm");
done:
    return rc;
}
