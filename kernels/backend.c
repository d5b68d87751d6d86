/*
** backend.c: the public face of the BACKEND interface (kernels.h): the factory that
** picks a backend for a device, and the cdb_k_* functions, each a NULL check and a call through
** the backend's vtable (backend_impl.h). The backends validate their own
** arguments.
*/
#include <stdlib.h>
#include <string.h>

#include "kernels/backend_impl.h"
#include "kernels/cuda/pp_elem.h"

/* The vtable call, or CDB_INVALID when there is no backend. */
#define VCALL(be, slot, ...)                                                       \
    ((be) ? (be)->ops->slot((be), __VA_ARGS__)                                     \
          : cdb_seterr(CDB_INVALID, "%s: no backend (NULL)", __func__))

/* ---- construction ------------------------------------------------------------ */

cdb_k_backend_params cdb_k_backend_params_default(void) {
    cdb_k_backend_params p;
    memset(&p, 0, sizeof p);
    p.device.kind = CDB_K_DEVICE_AUTO;
    return p;
}

cdb_status cdb_k_backend_new(const cdb_k_backend_params *p, cdb_k_backend **out) {
    cdb_k_backend_params d = p ? *p : cdb_k_backend_params_default();
    cdb_k_device dev;
    cdb_status rc;
    *out = NULL;
    if ((rc = cdb_k_device_resolve(d.device, &dev)) != CDB_OK) return rc;
    /* kernels/cuda/ always provides the constructor (a stub that says why without
    ** CUDA), so this file needs no #ifdef. */
    if (dev.kind == CDB_K_DEVICE_CUDA) {
        rc = cdb_k_backend_cuda_new(dev.index, out);
        if (rc == CDB_OK || d.device.kind == CDB_K_DEVICE_CUDA) return rc;
        CDB_LOG_WARN("cuda:%d unusable (%s); using the CPU", dev.index, cdb_errmsg());
        cdb_clearerr();
    } else if (d.device.kind == CDB_K_DEVICE_AUTO && cdb_k_cuda_device_count() > 0) {
        CDB_LOG_WARN("a CUDA device is present but unusable (%s); using the CPU",
                     cdb_k_cuda_unusable_reason());
    }
    return cdb_k_backend_cpu_new(d.n_threads, out);
}

void cdb_k_backend_free(cdb_k_backend *be) {
    if (be) be->ops->destroy(be);
}

/* ---- buffers ------------------------------------------------------------------- */

cdb_status cdb_k_buf_alloc(cdb_k_backend *be, size_t n, cdb_k_buf **out) {
    if (out) *out = NULL;
    return VCALL(be, buf_alloc, n, out);
}

void cdb_k_buf_free(cdb_k_backend *be, cdb_k_buf *b) {
    if (be && b) be->ops->buf_free(be, b);
}

cdb_status cdb_k_weight_upload(cdb_k_backend *be, const void *src, cdb_k_dtype dt, size_t n,
                               cdb_k_wrole role, int flags, cdb_k_buf **out) {
    if (out) *out = NULL;
    return VCALL(be, weight_upload, src, dt, n, role, flags, out);
}

cdb_status cdb_k_matrix_upload(cdb_k_backend *be, const void *src, cdb_k_dtype dt, int rows,
                               int cols, int flags, cdb_k_buf **out) {
    if (out) *out = NULL;
    return VCALL(be, matrix_upload, src, dt, rows, cols, flags, out);
}

const char *cdb_k_matrix_layout(const cdb_k_backend *be) {
    return be && be->ops->matrix_layout ? be->ops->matrix_layout(be) : NULL;
}

size_t cdb_k_matrix_packed_bytes(const cdb_k_backend *be, int rows, int cols) {
    return be && be->ops->matrix_packed_bytes ? be->ops->matrix_packed_bytes(be, rows, cols) : 0;
}

const void *cdb_k_matrix_packed_data(const cdb_k_backend *be, const cdb_k_buf *b) {
    return be && b && be->ops->matrix_packed_data ? be->ops->matrix_packed_data(be, b) : NULL;
}

cdb_status cdb_k_matrix_borrow_packed(cdb_k_backend *be, const void *packed, int rows, int cols,
                                      cdb_k_buf **out) {
    if (out) *out = NULL;
    if (be && !be->ops->matrix_borrow_packed)
        return cdb_seterr(CDB_UNSUPPORTED, "backend %s has no packed matrix layout",
                          be->ops->name);
    return VCALL(be, matrix_borrow_packed, packed, rows, cols, out);
}

cdb_status cdb_k_buf_upload(cdb_k_backend *be, cdb_k_buf *dst, size_t off, const float *src,
                            size_t n) {
    return VCALL(be, buf_upload, dst, off, src, n);
}

cdb_status cdb_k_buf_download(cdb_k_backend *be, const cdb_k_buf *src, size_t off, float *dst,
                              size_t n) {
    return VCALL(be, buf_download, src, off, dst, n);
}

/* ---- ops --------------------------------------------------------------------------- */

cdb_status cdb_k_gemm(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *w,
                      const cdb_k_buf *bias, cdb_k_buf *y, int m, int n, int k, cdb_k_act act,
                      int accumulate) {
    return VCALL(be, gemm, x, w, bias, y, m, n, k, act, accumulate);
}

cdb_status cdb_k_layernorm(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *gamma,
                           const cdb_k_buf *beta, cdb_k_buf *y, int m, int n, float eps) {
    return VCALL(be, layernorm, x, gamma, beta, y, m, n, eps);
}

cdb_status cdb_k_activate(cdb_k_backend *be, cdb_k_buf *x, size_t n, cdb_k_act act) {
    return VCALL(be, act, x, n, act);
}

cdb_status cdb_k_add(cdb_k_backend *be, cdb_k_buf *y, const cdb_k_buf *x, size_t n) {
    return VCALL(be, add, y, x, n);
}

cdb_status cdb_k_attention(cdb_k_backend *be, const cdb_k_buf *qkv, cdb_k_buf *out, int batch,
                           int seq, int heads, int head_dim, int causal) {
    return VCALL(be, attention, qkv, out, batch, seq, heads, head_dim, causal);
}

/* A backend without the op computes every row and keeps the asked ones. */
static cdb_status attention_rows_by_gather(cdb_k_backend *be, const cdb_k_buf *qkv,
                                           cdb_k_buf *out, int batch, int seq, int heads,
                                           int head_dim, int causal, const int32_t *qpos) {
    cdb_k_buf *all = NULL;
    int32_t *rows = NULL;
    cdb_status rc;
    if (batch == 0) return CDB_OK;
    if (batch < 0 || seq <= 0 || heads <= 0 || head_dim <= 0)
        return cdb_seterr(CDB_INVALID, "attention: bad shape b=%d s=%d h=%d hd=%d", batch, seq,
                          heads, head_dim);
    if (!(rows = malloc((size_t)batch * sizeof *rows)))
        return cdb_seterr(CDB_NOMEM, "attention rows");
    for (int b = 0; b < batch; b++) {
        if (qpos[b] < 0 || qpos[b] >= seq) {
            free(rows);
            return cdb_seterr(CDB_INVALID, "attention: item %d's query %d outside [0, %d)", b,
                              qpos[b], seq);
        }
        rows[b] = b * seq + qpos[b];
    }
    rc = be->ops->buf_alloc(be, (size_t)batch * seq * heads * head_dim, &all);
    if (rc == CDB_OK) rc = be->ops->attention(be, qkv, all, batch, seq, heads, head_dim, causal);
    if (rc == CDB_OK) rc = be->ops->gather_rows(be, all, rows, batch, heads * head_dim, out);
    if (all) be->ops->buf_free(be, all);
    free(rows);
    return rc;
}

cdb_status cdb_k_attention_rows(cdb_k_backend *be, const cdb_k_buf *qkv, cdb_k_buf *out,
                                int batch, int seq, int heads, int head_dim, int causal,
                                const int32_t *qpos) {
    if (!be || !qpos) return cdb_seterr(CDB_INVALID, "%s: no backend or no positions", __func__);
    if (!be->ops->attention_rows)
        return attention_rows_by_gather(be, qkv, out, batch, seq, heads, head_dim, causal, qpos);
    return be->ops->attention_rows(be, qkv, out, batch, seq, heads, head_dim, causal, qpos);
}

cdb_status cdb_k_attention_q(cdb_k_backend *be, const cdb_k_buf *q, const cdb_k_buf *kv,
                             cdb_k_buf *out, int batch, int n_q, int seq, int heads,
                             int head_dim) {
    return VCALL(be, attention_q, q, kv, out, batch, n_q, seq, heads, head_dim);
}

cdb_status cdb_k_lookup_add(cdb_k_backend *be, const cdb_k_buf *table, const cdb_k_buf *pos,
                            const int32_t *ids, int n_rows, int period, int width,
                            cdb_k_buf *out) {
    return VCALL(be, lookup_add, table, pos, ids, n_rows, period, width, out);
}

cdb_status cdb_k_prepend_add(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *head,
                             const cdb_k_buf *pos, int batch, int n, int width, cdb_k_buf *out) {
    return VCALL(be, prepend_add, x, head, pos, batch, n, width, out);
}

cdb_status cdb_k_prepend_mean_add(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *pos,
                                  int batch, int n, int width, cdb_k_buf *out) {
    return VCALL(be, prepend_mean_add, x, pos, batch, n, width, out);
}

cdb_status cdb_k_gather_rows(cdb_k_backend *be, const cdb_k_buf *x, const int32_t *rows, int n,
                             int width, cdb_k_buf *out) {
    return VCALL(be, gather_rows, x, rows, n, width, out);
}

cdb_status cdb_k_sync(cdb_k_backend *be) {
    return be ? be->ops->sync(be) : cdb_seterr(CDB_INVALID, "cdb_k_sync: no backend (NULL)");
}

cdb_status cdb_k_im2col(cdb_k_backend *be, const cdb_k_buf *x, int n, int h, int w, int c, int k,
                        int stride, int pad, cdb_k_buf *cols) {
    return VCALL(be, im2col, x, n, h, w, c, k, stride, pad, cols);
}

cdb_status cdb_k_patchify(cdb_k_backend *be, const cdb_k_buf *x, int n, int c, int h, int w,
                          int p, cdb_k_buf *cols) {
    return VCALL(be, patchify, x, n, c, h, w, p, cols);
}

size_t cdb_k_scratch_bytes(cdb_k_backend *be) {
    if (!be) return 0;
    return be->ops->scratch_bytes ? be->ops->scratch_bytes(be) : CDB_K_CPU_SCRATCH_BYTES;
}

cdb_status cdb_k_avgpool(cdb_k_backend *be, const cdb_k_buf *x, int n, int h, int w, int c, int s,
                         cdb_k_buf *out) {
    return VCALL(be, avgpool, x, n, h, w, c, s, out);
}

/* ---- 8-bit images to model pixels ------------------------------------------------- */

/* One image's transform on the host: the device kernels' loops (preprocess.cu) over
** pp_elem.h's arithmetic. tmp: rows x size x nch bytes when g->kh. */
static void pp_host(const cdb_k_pp_geom *g, const uint8_t *src, uint8_t *tmp, float *out) {
    size_t per_row = (size_t)g->size * g->nch, n = (size_t)g->size * g->size;
    if (g->kh)
        for (size_t i = 0; i < (size_t)g->rows * per_row; i++)
            tmp[i] = cdb_pp_tmp(g, src, (int)(i / per_row), (int)(i % per_row / g->nch),
                                (int)(i % g->nch));
    for (size_t i = 0; i < n; i++) {
        uint8_t px[3];
        for (int c = 0; c < g->nch; c++)
            px[c] = cdb_pp_crop(g, src, tmp, (int)(i / g->size), (int)(i % g->size), c);
        for (int c = 0; c < 3; c++) out[(size_t)c * n + i] = cdb_pp_norm(px, g->nch, c, g->lut);
    }
}

/* The slot's default: each image transformed on the host, its floats uploaded. */
static cdb_status pp_on_host(cdb_k_backend *be, const cdb_k_pp_geom *g,
                             const uint8_t *const *src, int n, cdb_k_buf *px, int at) {
    size_t per = (size_t)3 * g[0].size * g[0].size, tmp_max = 0;
    cdb_status rc = CDB_OK;
    uint8_t *tmp;
    float *out = malloc(per * sizeof *out);
    for (int i = 0; i < n; i++) {
        size_t t = g[i].kh ? (size_t)g[i].rows * g[i].size * g[i].nch : 0;
        if (t > tmp_max) tmp_max = t;
    }
    tmp = malloc(tmp_max ? tmp_max : 1);
    if (!out || !tmp) rc = cdb_seterr(CDB_NOMEM, "preprocess_u8: host scratch");
    for (int i = 0; i < n && rc == CDB_OK; i++) {
        pp_host(&g[i], src[i], tmp, out);
        rc = be->ops->buf_upload(be, px, per * (size_t)(at + i), out, per);
    }
    free(out);
    free(tmp);
    return rc;
}

/* CDB_OK when every g[i] is well formed, of one size, with a source. */
static cdb_status pp_check(const char *what, const cdb_k_pp_geom *g, const void *const *src,
                           int n) {
    for (int i = 0; i < n; i++)
        if (!src[i] || g[i].size != g[0].size || !cdb_pp_geom_ok(&g[i]))
            return cdb_seterr(CDB_INVALID, "%s: image %d: malformed geometry (%dx%d, %d "
                              "channels, size %d)", what, i, g[i].w, g[i].h, g[i].nch,
                              g[i].size);
    return CDB_OK;
}

cdb_status cdb_k_preprocess_u8(cdb_k_backend *be, const cdb_k_pp_geom *g,
                               const uint8_t *const *src, int n, cdb_k_buf *px, int at) {
    cdb_status rc;
    if (!be || n < 0 || at < 0 || (n && (!g || !src || !px)))
        return cdb_seterr(CDB_INVALID, "preprocess_u8: bad arguments");
    if ((rc = pp_check("preprocess_u8", g, (const void *const *)src, n)) != CDB_OK) return rc;
    if (n == 0) return CDB_OK;
    return be->ops->preprocess_u8 ? be->ops->preprocess_u8(be, g, src, n, px, at)
                                  : pp_on_host(be, g, src, n, px, at);
}

int cdb_k_preprocess_on_device(const cdb_k_backend *be) {
    return be && be->ops->preprocess_u8 != NULL;
}

cdb_status cdb_k_jpeg_preprocess(cdb_k_backend *be, const cdb_k_pp_geom *g,
                                 const uint8_t *const *jpeg, const size_t *len, int n,
                                 cdb_k_buf *px, int at, cdb_status *item_rc) {
    cdb_status rc;
    if (!be || n < 0 || at < 0 || (n && (!g || !jpeg || !len || !px || !item_rc)))
        return cdb_seterr(CDB_INVALID, "jpeg_preprocess: bad arguments");
    if (!cdb_k_jpeg_on_device(be))
        return cdb_seterr(CDB_UNSUPPORTED, "jpeg_preprocess: the %s backend decodes no JPEG "
                          "(%s)", be->ops->name, be->ops->jpeg_on_device
                          ? cdb_k_nvjpeg_unusable_reason() : "not a GPU backend");
    if ((rc = pp_check("jpeg_preprocess", g, (const void *const *)jpeg, n)) != CDB_OK) return rc;
    for (int i = 0; i < n; i++)
        if (g[i].nch != 3 || g[i].stride != (size_t)g[i].w * 3)
            return cdb_seterr(CDB_INVALID, "jpeg_preprocess: image %d: nvJPEG gives packed RGB",
                              i);
    return n ? be->ops->jpeg_preprocess(be, g, jpeg, len, n, px, at, item_rc) : CDB_OK;
}

int cdb_k_jpeg_on_device(const cdb_k_backend *be) {
    return be && be->ops->jpeg_on_device && be->ops->jpeg_preprocess &&
           be->ops->jpeg_on_device(be);
}

cdb_status cdb_k_device_memory(cdb_k_backend *be, size_t *free_b, size_t *total_b) {
    if (free_b) *free_b = 0;
    if (total_b) *total_b = 0;
    if (!be) return cdb_seterr(CDB_INVALID, "device_memory: no backend (NULL)");
    if (!be->ops->mem_info)
        return cdb_seterr(CDB_UNSUPPORTED, "the %s backend has no device memory", be->ops->name);
    return be->ops->mem_info(be, free_b, total_b);
}
