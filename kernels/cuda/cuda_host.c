/*
** cuda_host.c: the host-only half of the GPU path, plain C with no CUDA header,
** built in every configuration (CLIPDB_CUDA=OFF too) and unit-tested without a
** GPU (tests/kernels/test_cuda_host.c):
**  - `--device` strings and their resolution against the devices present;
**  - batch size from free device memory, and the out-of-memory retry loop;
**  - all-or-nothing buffer groups over an injectable allocator;
**  - PIL's bicubic coefficient tables and the per-image resize/crop plan the
**    GPU preprocessing kernel runs (plus its CPU twin, for the tests);
**  - "no CUDA" stubs of the public CUDA entry points when built without CUDA.
*/
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_int.h"

/* ---- device strings ------------------------------------------------------ */

cdb_status cdb_k_device_parse(const char *s, cdb_k_device_spec *out) {
    char buf[32];
    size_t n = 0;
    const char *e;
    if (!out) return cdb_seterr(CDB_INVALID, "cdb_k_device_parse: out is NULL");
    out->kind = CDB_K_BACKEND_AUTO;
    out->index = 0;
    if (!s) return cdb_seterr(CDB_INVALID, "device: NULL string");
    while (*s == ' ' || *s == '\t') s++;
    e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n')) e--;
    if ((size_t)(e - s) >= sizeof buf) goto bad;
    for (const char *p = s; p < e; p++) buf[n++] = (char)tolower((unsigned char)*p);
    buf[n] = 0;
    if (!strcmp(buf, "auto")) return CDB_OK;
    if (!strcmp(buf, "cpu")) {
        out->kind = CDB_K_BACKEND_CPU;
        return CDB_OK;
    }
    if (!strcmp(buf, "cuda")) {
        out->kind = CDB_K_BACKEND_CUDA;
        return CDB_OK;
    }
    if (!strncmp(buf, "cuda:", 5)) {
        const char *d = buf + 5;
        long v = 0;
        if (!*d) goto bad;
        for (; *d; d++) {
            if (*d < '0' || *d > '9') goto bad;
            v = v * 10 + (*d - '0');
            if (v > 1023) goto bad;
        }
        out->kind = CDB_K_BACKEND_CUDA;
        out->index = (int)v;
        return CDB_OK;
    }
bad:
    return cdb_seterr(CDB_INVALID, "invalid device \"%s\": expected auto, cpu, cuda or cuda:N",
                      s);
}

const char *cdb_k_device_str(cdb_k_device_spec d, char *buf, size_t n) {
    if (!buf || n == 0) return "";
    switch (d.kind) {
    case CDB_K_BACKEND_AUTO: snprintf(buf, n, "auto"); break;
    case CDB_K_BACKEND_CPU: snprintf(buf, n, "cpu"); break;
    case CDB_K_BACKEND_CUDA: snprintf(buf, n, "cuda:%d", d.index); break;
    default: snprintf(buf, n, "unknown"); break;
    }
    return buf;
}

cdb_status cdb_k_device_resolve_with(cdb_k_device_spec want, int n_cuda, const char *why_none,
                                     cdb_k_device_spec *out) {
    if (!out) return cdb_seterr(CDB_INVALID, "cdb_k_device_resolve: out is NULL");
    out->kind = CDB_K_BACKEND_CPU;
    out->index = 0;
    if (!why_none || !*why_none) why_none = "no usable CUDA device";
    switch (want.kind) {
    case CDB_K_BACKEND_CPU: return CDB_OK;
    case CDB_K_BACKEND_AUTO:
        if (n_cuda > 0) {
            out->kind = CDB_K_BACKEND_CUDA;
            out->index = 0;
        }
        return CDB_OK;
    case CDB_K_BACKEND_CUDA:
        if (n_cuda <= 0)
            return cdb_seterr(CDB_UNSUPPORTED,
                              "device cuda:%d was asked for but %s; use --device cpu, or "
                              "--device auto to fall back to the CPU",
                              want.index, why_none);
        if (want.index < 0 || want.index >= n_cuda)
            return cdb_seterr(CDB_UNSUPPORTED,
                              "device cuda:%d was asked for but only %d CUDA device%s "
                              "(cuda:0%s%s) %s present; use --device cuda:0..%d, cpu or auto",
                              want.index, n_cuda, n_cuda == 1 ? "" : "s", n_cuda > 1 ? "..cuda:" : "",
                              n_cuda > 1 ? "N" : "", n_cuda == 1 ? "is" : "are", n_cuda - 1);
        *out = want;
        return CDB_OK;
    }
    return cdb_seterr(CDB_INVALID, "device kind %d unknown", (int)want.kind);
}

cdb_status cdb_k_device_resolve(cdb_k_device_spec want, cdb_k_device_spec *out) {
    int n = 0;
    const char *why = NULL;
    if (want.kind != CDB_K_BACKEND_CPU) {
        why = cdb_k_cuda_unusable_reason();
        n = (why && *why) ? 0 : cdb_k_cuda_device_count();
    }
    return cdb_k_device_resolve_with(want, n, why, out);
}

/* ---- batch sizing and OOM retry -------------------------------------------- */

size_t cdb_k_vit_bytes_per_image(int image_size, int patch, int width, int heads, int mlp_width) {
    size_t g, seq, w, h, m, b = 0;
    if (image_size <= 0 || patch <= 0 || width <= 0 || heads <= 0 || mlp_width <= 0) return 0;
    g = (size_t)(image_size / patch);
    seq = g * g + 1;
    w = (size_t)width;
    h = (size_t)heads;
    m = (size_t)mlp_width;
    b += (size_t)3 * image_size * image_size * 4; /* pixels fp32 */
    b += g * g * 3 * patch * patch * 4;           /* im2col (stored as fp32-sized buffers) */
    b += seq * w * 4 * 3;                         /* residual x, LN out, attention out */
    b += seq * 3 * w * 4;                         /* qkv */
    b += seq * m * 4;                             /* MLP hidden */
    b += seq * 3 * w * 2 + seq * w * 2;           /* attention: q,k,v split + merged o */
    b += h * seq * seq * (4 + 2);                 /* scores fp32 + probabilities f16 */
    b += seq * (m > 3 * w ? m : 3 * w) * 2;       /* fp16 copy of a GEMM operand */
    return b;
}

int cdb_k_batch_from_memory(size_t free_bytes, size_t reserve_bytes, size_t per_item_bytes,
                            int max_batch) {
    size_t usable, n;
    if (per_item_bytes == 0 || max_batch <= 0) return 0;
    if (free_bytes <= reserve_bytes) return 0;
    usable = free_bytes - reserve_bytes;
    usable -= usable / 10; /* headroom: cuBLAS workspaces, fragmentation, other users */
    n = usable / per_item_bytes;
    if (n > (size_t)max_batch) n = (size_t)max_batch;
    if (n >= 16) n &= ~(size_t)7;
    return (int)n;
}

cdb_status cdb_k_run_batched(int n_items, int batch, cdb_k_batch_fn fn, void *ud,
                             int *batch_used) {
    int start = 0;
    cdb_status rc = CDB_OK;
    if (batch_used) *batch_used = batch;
    if (!fn || n_items < 0) return cdb_seterr(CDB_INVALID, "cdb_k_run_batched: bad arguments");
    if (batch < 1) batch = 1;
    while (start < n_items) {
        int n = n_items - start < batch ? n_items - start : batch;
        rc = fn(ud, start, n);
        if (rc == CDB_NOMEM) {
            if (n <= 1) {
                rc = cdb_errctx(CDB_NOMEM, "out of device memory even at batch 1");
                break;
            }
            batch = n / 2;
            CDB_LOG_WARN("out of device memory at batch %d (%s); retrying with batch %d", n,
                         cdb_errmsg(), batch);
            cdb_clearerr();
            rc = CDB_OK;
            continue;
        }
        if (rc != CDB_OK) break;
        start += n;
    }
    if (batch_used) *batch_used = batch;
    return rc;
}

cdb_status cdb_k_alloc_group(const cdb_k_allocator *a, const size_t *bytes, int n, void **ptrs) {
    cdb_status rc = CDB_OK;
    int i;
    if (!a || !a->alloc || !a->free || (n > 0 && (!bytes || !ptrs)))
        return cdb_seterr(CDB_INVALID, "cdb_k_alloc_group: bad arguments");
    for (i = 0; i < n; i++) ptrs[i] = NULL;
    for (i = 0; i < n; i++) {
        rc = a->alloc(a->ud, bytes[i], &ptrs[i]);
        if (rc != CDB_OK) {
            ptrs[i] = NULL;
            cdb_k_free_group(a, ptrs, i);
            return rc;
        }
    }
    return CDB_OK;
}

void cdb_k_free_group(const cdb_k_allocator *a, void **ptrs, int n) {
    if (!a || !a->free || !ptrs) return;
    for (int i = n - 1; i >= 0; i--) {
        if (ptrs[i]) a->free(a->ud, ptrs[i]);
        ptrs[i] = NULL;
    }
}

/* ---- PIL bicubic plans ------------------------------------------------------
** The coefficients are kernels' cdb_k_pil_coeffs (the CPU preprocessing's too); the
** passes below transcribe Pillow's src/libImaging/Resample.c (the 8bpc passes): same
** 22-bit fixed point and clip8, so the results match PIL bit for bit. */

#define PIL_PRECISION_BITS CDB_K_RESAMPLE_PRECISION

void cdb_kc_resize_dims(int w, int h, int size, int *rw, int *rh) {
    if (w <= h) {
        *rw = size;
        *rh = (int)((double)size * h / w);
    } else {
        *rh = size;
        *rw = (int)((double)size * w / h);
    }
}

int cdb_kc_center_offset(int in, int crop) {
    int d = in - crop, q;
    if (d <= 0) return 0; /* no crop needed on this axis (the resize never gives d < 0) */
    q = d / 2;
    if (d % 2 == 0) return q;
    return (q % 2 == 0) ? q : q + 1; /* x.5 rounds to the even neighbour, as Python's round */
}

void cdb_kc_resize_plan_free(cdb_kc_resize_plan *p) {
    if (!p) return;
    cdb_free(p->xmin);
    cdb_free(p->kh);
    cdb_free(p->ymin);
    cdb_free(p->kv);
    memset(p, 0, sizeof *p);
}

cdb_status cdb_kc_resize_plan_new(int in_w, int in_h, int size, cdb_kc_resize_plan *out) {
    int kh_n = 0, kv_n = 0;
    int32_t *bh = NULL, *kh = NULL, *bv = NULL, *kv = NULL;
    cdb_status rc;
    if (!out) return cdb_seterr(CDB_INVALID, "resize plan: out is NULL");
    memset(out, 0, sizeof *out);
    if (in_w < 1 || in_h < 1 || size < 1)
        return cdb_seterr(CDB_INVALID, "resize plan: image %dx%d, size %d", in_w, in_h, size);
    out->in_w = in_w;
    out->in_h = in_h;
    out->size = size;
    cdb_kc_resize_dims(in_w, in_h, size, &out->rs_w, &out->rs_h);
    out->crop_x = cdb_kc_center_offset(out->rs_w, size);
    out->crop_y = cdb_kc_center_offset(out->rs_h, size);
    if ((rc = cdb_k_pil_coeffs(in_w, out->rs_w, 0, out->rs_w, 0, &kh_n, &bh, &kh)) != CDB_OK) goto fail;
    if ((rc = cdb_k_pil_coeffs(in_h, out->rs_h, 0, out->rs_h, 0, &kv_n, &bv, &kv)) != CDB_OK) goto fail;
    out->ksize_h = kh_n;
    out->ksize_v = kv_n;
    out->xmin = (int32_t *)cdb_malloc((size_t)size * sizeof(int32_t));
    out->kh = (int32_t *)cdb_calloc((size_t)size * kh_n, sizeof(int32_t));
    out->ymin = (int32_t *)cdb_malloc((size_t)size * sizeof(int32_t));
    out->kv = (int32_t *)cdb_calloc((size_t)size * kv_n, sizeof(int32_t));
    if (!out->xmin || !out->kh || !out->ymin || !out->kv) {
        rc = cdb_seterr(CDB_NOMEM, "resize plan: out of memory");
        goto fail;
    }
    /* Rows of the source the cropped output rows read (PIL's ybox_first/last,
    ** restricted to the crop: the other rows cannot influence the crop). */
    {
        int first = bv[out->crop_y * 2], last = 0;
        for (int y = 0; y < size; y++) {
            int r = out->crop_y + y;
            if (bv[r * 2] < first) first = bv[r * 2];
            if (bv[r * 2] + bv[r * 2 + 1] > last) last = bv[r * 2] + bv[r * 2 + 1];
        }
        out->row0 = first;
        out->n_rows = last - first;
    }
    /* Taps padded to ksize with zero weights; readers clamp tap positions to the
    ** source, so a padded tap reads a valid pixel and adds 0. */
    for (int x = 0; x < size; x++) {
        int c = out->crop_x + x, cnt = bh[c * 2 + 1];
        out->xmin[x] = bh[c * 2];
        for (int k = 0; k < cnt; k++) out->kh[(size_t)x * kh_n + k] = kh[(size_t)c * kh_n + k];
    }
    for (int y = 0; y < size; y++) {
        int r = out->crop_y + y, cnt = bv[r * 2 + 1];
        out->ymin[y] = bv[r * 2] - out->row0;
        for (int k = 0; k < cnt; k++) out->kv[(size_t)y * kv_n + k] = kv[(size_t)r * kv_n + k];
    }
    cdb_free(bh);
    cdb_free(kh);
    cdb_free(bv);
    cdb_free(kv);
    return CDB_OK;
fail:
    cdb_free(bh);
    cdb_free(kh);
    cdb_free(bv);
    cdb_free(kv);
    cdb_kc_resize_plan_free(out);
    return rc;
}

static inline uint8_t clip8(int64_t in) {
    if (in >= ((int64_t)1 << (PIL_PRECISION_BITS + 8))) return 255;
    if (in <= 0) return 0;
    return (uint8_t)(in >> PIL_PRECISION_BITS);
}

void cdb_kc_resize_plan_run_cpu(const cdb_kc_resize_plan *p, const uint8_t *rgb, uint8_t *crop) {
    int size = p->size;
    uint8_t *tmp = (uint8_t *)cdb_malloc((size_t)(p->n_rows > 0 ? p->n_rows : 1) * size * 3);
    if (!tmp) return;
    for (int r = 0; r < p->n_rows; r++) {
        const uint8_t *src = rgb + (size_t)(p->row0 + r) * p->in_w * 3;
        for (int x = 0; x < size; x++) {
            const int32_t *k = p->kh + (size_t)x * p->ksize_h;
            for (int ch = 0; ch < 3; ch++) {
                int32_t ss = 1 << (PIL_PRECISION_BITS - 1);
                for (int t = 0; t < p->ksize_h; t++) {
                    int sx = p->xmin[x] + t < p->in_w ? p->xmin[x] + t : p->in_w - 1;
                    ss += (int32_t)src[(size_t)sx * 3 + ch] * k[t];
                }
                tmp[((size_t)r * size + x) * 3 + ch] = clip8(ss);
            }
        }
    }
    for (int y = 0; y < size; y++) {
        const int32_t *k = p->kv + (size_t)y * p->ksize_v;
        for (int x = 0; x < size; x++)
            for (int ch = 0; ch < 3; ch++) {
                int32_t ss = 1 << (PIL_PRECISION_BITS - 1);
                for (int t = 0; t < p->ksize_v; t++) {
                    int sy = p->ymin[y] + t < p->n_rows ? p->ymin[y] + t : p->n_rows - 1;
                    ss += (int32_t)tmp[((size_t)sy * size + x) * 3 + ch] * k[t];
                }
                crop[((size_t)y * size + x) * 3 + ch] = clip8(ss);
            }
    }
    cdb_free(tmp);
}

/* ---- builds without CUDA ------------------------------------------------------ */
#if !defined(CDB_HAVE_CUDA)
const char *cdb_k_cuda_unusable_reason(void) { return "clipdb was built without CUDA"; }

cdb_status cdb_k_backend_cuda_new(int device_index, cdb_k_backend **out) {
    if (out) *out = NULL;
    return cdb_seterr(CDB_UNSUPPORTED, "cuda:%d: clipdb was built without CUDA", device_index);
}
cdb_status cdb_k_backend_cuda_mem(cdb_k_backend *be, size_t *free_b, size_t *total_b) {
    if (free_b) *free_b = 0;
    if (total_b) *total_b = 0;
    return cdb_seterr(CDB_UNSUPPORTED, "clipdb was built without CUDA");
}
cdb_status cdb_k_cuda_ingest_new(cdb_k_backend *be, int size, const float mean[3],
                                 const float std[3], int max_batch, int64_t max_pixels,
                                 cdb_k_cuda_ingest **out) {
    if (out) *out = NULL;
    return cdb_seterr(CDB_UNSUPPORTED, "GPU ingest: clipdb was built without CUDA");
}
void cdb_k_cuda_ingest_free(cdb_k_cuda_ingest *ing) { (void)ing; }
cdb_status cdb_k_cuda_ingest_preprocess(cdb_k_cuda_ingest *ing, const cdb_k_image_u8 *imgs, int n,
                                        cdb_k_buf *pixels) {
    return cdb_seterr(CDB_UNSUPPORTED, "GPU ingest: clipdb was built without CUDA");
}
cdb_status cdb_k_cuda_im2col(cdb_k_backend *be, const cdb_k_buf *pixels, int n, int size,
                             int patch, cdb_k_buf *cols) {
    return cdb_seterr(CDB_UNSUPPORTED, "cuda im2col: clipdb was built without CUDA");
}
#endif
