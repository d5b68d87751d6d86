/*
** embed.cu: the graph's data-movement ops: token embedding lookup + positional
** embedding (text), ViT token assembly (class token + patch embeddings +
** positional embedding), row gathers (text EOT / ViT class token), and im2col for
** the stride == kernel patch convolution.
*/
#include "kernels/cuda/cuda_common.cuh"

static unsigned grid_for(size_t n) {
    unsigned b = cdb_kc_blocks(n, 256);
    return b > 65536 ? 65536 : b;
}

static __global__ void k_embed_tokens(const void *__restrict__ table, int table_f32,
                                      const float *__restrict__ pos, const int32_t *__restrict__ ids,
                                      size_t n, int seq, int width, float *__restrict__ out) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / width;
        int col = (int)(i % width);
        float v = cdb_kc_ld(table, table_f32, (size_t)ids[r] * width + col);
        out[i] = v + (pos ? pos[(r % seq) * width + col] : 0.f);
    }
}

static __global__ void k_embed_patches(const void *__restrict__ patches, int patches_f32,
                                       const float *__restrict__ cls, const float *__restrict__ pos,
                                       size_t n, int n_patches, int width, float *__restrict__ out) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t row = i / width;
        int col = (int)(i % width), t = (int)(row % (n_patches + 1));
        size_t b = row / (n_patches + 1);
        float v = t == 0 ? cls[col]
                         : cdb_kc_ld(patches, patches_f32,
                                     (b * n_patches + (size_t)(t - 1)) * width + col);
        out[i] = v + pos[(size_t)t * width + col];
    }
}

static __global__ void k_gather_rows(const char *__restrict__ x, const int32_t *__restrict__ rows,
                                     size_t n, size_t row_bytes, char *__restrict__ out) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / row_bytes, b = i % row_bytes;
        out[i] = x[(size_t)rows[r] * row_bytes + b];
    }
}

/* cols[(b*g + gy)*g + gx, (ch*P + ky)*P + kx] = pix[b, ch, gy*P + ky, gx*P + kx] */
static __global__ void k_im2col(const float *__restrict__ pix, int batch, int size, int patch,
                                uint16_t *__restrict__ cols) {
    int g = size / patch, kc = 3 * patch * patch;
    size_t n = (size_t)batch * g * g * kc;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t row = i / kc;
        int col = (int)(i % kc), ch = col / (patch * patch), ky = (col / patch) % patch,
            kx = col % patch;
        int gx = (int)(row % g), gy = (int)((row / g) % g);
        size_t b = row / ((size_t)g * g);
        cols[i] = cdb_kc_f2h(
            pix[((b * 3 + ch) * size + (size_t)gy * patch + ky) * size + (size_t)gx * patch + kx]);
    }
}

extern "C" cdb_status cdb_kc_embed_tokens(cdb_kc_ctx *c, const void *table, int table_f32,
                                          const float *pos, const int32_t *d_ids, int n_rows,
                                          int seq, int width, float *out) {
    cdb_status rc = CDB_OK;
    size_t n = (size_t)n_rows * width;
    CDB_CUDA_CHECK_ARG(n_rows >= 0 && seq > 0 && width > 0, "embed_tokens: bad sizes");
    if (!n) return CDB_OK;
    k_embed_tokens<<<grid_for(n), 256, 0, c->compute>>>(table, table_f32, pos, d_ids, n, seq, width,
                                                       out);
    CDB_CUDA_CHECK_LAUNCH("k_embed_tokens");
done:
    return rc;
}

extern "C" cdb_status cdb_kc_embed_patches(cdb_kc_ctx *c, const void *patches, int patches_f32,
                                           const float *cls, const float *pos, int batch,
                                           int n_patches, int width, float *out) {
    cdb_status rc = CDB_OK;
    size_t n = (size_t)batch * (n_patches + 1) * width;
    CDB_CUDA_CHECK_ARG(batch >= 0 && n_patches >= 0 && width > 0, "embed_patches: bad sizes");
    if (!n) return CDB_OK;
    k_embed_patches<<<grid_for(n), 256, 0, c->compute>>>(patches, patches_f32, cls, pos, n,
                                                        n_patches, width, out);
    CDB_CUDA_CHECK_LAUNCH("k_embed_patches");
done:
    return rc;
}

extern "C" cdb_status cdb_kc_gather_rows(cdb_kc_ctx *c, const void *x, const int32_t *d_rows,
                                         int n, int width, size_t elem_bytes, void *out) {
    cdb_status rc = CDB_OK;
    size_t row_bytes = (size_t)width * elem_bytes, total = (size_t)n * row_bytes;
    if (!total) return CDB_OK;
    k_gather_rows<<<grid_for(total), 256, 0, c->compute>>>((const char *)x, d_rows, total,
                                                          row_bytes, (char *)out);
    CDB_CUDA_CHECK_LAUNCH("k_gather_rows");
done:
    return rc;
}

extern "C" cdb_status cdb_kc_im2col(cdb_kc_ctx *c, const float *pix, int batch, int size, int patch,
                                    uint16_t *cols) {
    cdb_status rc = CDB_OK;
    size_t n;
    CDB_CUDA_CHECK_ARG(batch >= 0 && patch > 0 && size >= patch && size % patch == 0,
                       "im2col: image %d not a multiple of patch %d", size, patch);
    n = (size_t)batch * (size / patch) * (size / patch) * 3 * patch * patch;
    if (!n) return CDB_OK;
    k_im2col<<<grid_for(n), 256, 0, c->compute>>>(pix, batch, size, patch, cols);
    CDB_CUDA_CHECK_LAUNCH("k_im2col");
done:
    return rc;
}
