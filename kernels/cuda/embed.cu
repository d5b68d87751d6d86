/*
** embed.cu: the data-movement ops: embedding lookup plus a periodic addend
** (lookup_add), a head row put in front of each group plus a positional table
** (prepend_add) and row gathers.
*/
#include "kernels/cuda/cuda_common.cuh"

static __global__ void k_lookup_add(const void *__restrict__ table, int table_f32,
                                    const float *__restrict__ pos, const int32_t *__restrict__ ids,
                                    size_t n, int period, int width, float *__restrict__ out) {
    CDB_KC_GRID_STRIDE(i, n) {
        size_t r = i / width;
        int col = (int)(i % width);
        float v = cdb_kc_ld(table, table_f32, (size_t)ids[r] * width + col);
        out[i] = v + (pos ? pos[(r % period) * width + col] : 0.f);
    }
}

static __global__ void k_prepend_add(const void *__restrict__ x, int x_f32,
                                     const float *__restrict__ head, const float *__restrict__ pos,
                                     size_t total, int n, int width, float *__restrict__ out) {
    CDB_KC_GRID_STRIDE(i, total) {
        size_t row = i / width;
        int col = (int)(i % width), t = (int)(row % (n + 1));
        size_t b = row / (n + 1);
        float v = t == 0 ? head[col] : cdb_kc_ld(x, x_f32, (b * n + (size_t)(t - 1)) * width + col);
        out[i] = v + pos[(size_t)t * width + col];
    }
}

static __global__ void k_gather_rows(const char *__restrict__ x, const int32_t *__restrict__ rows,
                                     size_t n, size_t row_bytes, char *__restrict__ out) {
    CDB_KC_GRID_STRIDE(i, n) {
        size_t r = i / row_bytes, b = i % row_bytes;
        out[i] = x[(size_t)rows[r] * row_bytes + b];
    }
}

extern "C" cdb_status cdb_kc_lookup_add(cdb_kc_ctx *c, const void *table, int table_f32,
                                        const float *pos, const int32_t *d_ids, int n_rows,
                                        int period, int width, float *out) {
    cdb_status rc = CDB_OK;
    size_t n = (size_t)n_rows * width;
    CDB_CUDA_CHECK_ARG(n_rows >= 0 && period > 0 && width > 0, "lookup_add: bad sizes");
    if (!n) return CDB_OK;
    k_lookup_add<<<cdb_kc_grid(n, 256), 256, 0, c->compute>>>(table, table_f32, pos, d_ids, n,
                                                               period, width, out);
    CDB_CUDA_CHECK_LAUNCH("k_lookup_add");
done:
    return rc;
}

extern "C" cdb_status cdb_kc_prepend_add(cdb_kc_ctx *c, const void *x, int x_f32,
                                         const float *head, const float *pos, int batch, int n,
                                         int width, float *out) {
    cdb_status rc = CDB_OK;
    size_t total = (size_t)batch * (n + 1) * width;
    CDB_CUDA_CHECK_ARG(batch >= 0 && n >= 0 && width > 0, "prepend_add: bad sizes");
    if (!total) return CDB_OK;
    k_prepend_add<<<cdb_kc_grid(total, 256), 256, 0, c->compute>>>(x, x_f32, head, pos, total, n,
                                                                    width, out);
    CDB_CUDA_CHECK_LAUNCH("k_prepend_add");
done:
    return rc;
}

extern "C" cdb_status cdb_kc_gather_rows(cdb_kc_ctx *c, const void *x, const int32_t *d_rows,
                                         int n, int width, size_t elem_bytes, void *out) {
    cdb_status rc = CDB_OK;
    size_t row_bytes = (size_t)width * elem_bytes, total = (size_t)n * row_bytes;
    if (!total) return CDB_OK;
    k_gather_rows<<<cdb_kc_grid(total, 256), 256, 0, c->compute>>>((const char *)x, d_rows, total,
                                                                    row_bytes, (char *)out);
    CDB_CUDA_CHECK_LAUNCH("k_gather_rows");
done:
    return rc;
}
