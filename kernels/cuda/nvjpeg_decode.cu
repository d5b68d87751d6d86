/*
** nvjpeg_decode.cu: cdb_k_jpeg_preprocess on the CUDA backend. A batch of JPEGs is
** decoded by nvJPEG (nvjpeg.c loads it) to interleaved RGB in one device buffer on the
** compute stream: by the hardware JPEG decoder in one nvjpegDecodeBatched call where
** the device has one (every JPEG whose subsampling it takes), else, and for whatever it
** refuses, one nvjpegDecode per JPEG on nvJPEG's default (hybrid/GPU) backend. Each
** decoded image is then transformed where it lies (cdb_kc_pp_one: only its tables go
** up through the pinned staging). A JPEG nvJPEG cannot decode, or whose size differs
** from its header's, gets its own status: the caller decodes it on the CPU.
*/
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_backend.cuh"

/* nvJPEG status -> clipdb status (3 BAD_JPEG, 4 JPEG_NOT_SUPPORTED). */
static cdb_status nv_status(int st, const char *call, int i) {
    cdb_status rc = st == 3 ? CDB_CORRUPT : st == 4 ? CDB_UNSUPPORTED : CDB_DEVICE;
    return cdb_seterr(rc, "JPEG %d: %s: nvJPEG status %d", i, call, st);
}

/* The decoder handles, once per backend. CDB_UNSUPPORTED when nvJPEG is not loaded. */
static cdb_status jd_open(cdb_kc_backend *b, const cdb_kc_nvjpeg_api *api) {
    cdb_kc_jpeg_dec *d = &b->jd;
    cdb_status rc;
    int st, hw = 0;
    void *h = NULL;
    if (d->h_sw) return CDB_OK;
    if (d->tried) return cdb_seterr(CDB_UNSUPPORTED, "nvJPEG could not start on this device");
    d->tried = 1;
    if ((rc = cdb_kc_nvjpeg_handle(api, &h, &hw)) != CDB_OK) return rc;
    if (hw) {
        d->h_hw = h, d->hw = 1;
        if ((st = api->state_create(d->h_hw, &d->st_hw)) != 0) return nv_status(st, "state", -1);
        if ((st = api->create_ex(CDB_NVJPEG_BACKEND_DEFAULT, NULL, NULL, 0, &d->h_sw)) != 0) {
            d->h_sw = NULL;
            return nv_status(st, "nvjpegCreateEx(default)", -1);
        }
    } else {
        d->h_sw = h;
    }
    if ((st = api->state_create(d->h_sw, &d->st_sw)) != 0) {
        api->destroy(d->h_sw);
        d->h_sw = NULL;
        return nv_status(st, "nvjpegJpegStateCreate", -1);
    }
    CDB_LOG_INFO("nvJPEG: %s backend", d->hw ? "hardware decoder" : "default (hybrid/GPU)");
    return CDB_OK;
}

extern "C" void cdb_kc_jpeg_dec_free(cdb_kc_backend *b) {
    cdb_kc_jpeg_dec *d = &b->jd;
    const cdb_kc_nvjpeg_api *api = cdb_kc_nvjpeg();
    if (api) {
        if (d->st_hw) api->state_destroy(d->st_hw);
        if (d->h_hw) api->destroy(d->h_hw);
        if (d->st_sw) api->state_destroy(d->st_sw);
        if (d->h_sw) api->destroy(d->h_sw);
    }
    (void)cudaFree(d->out);
    memset(d, 0, sizeof *d);
}

extern "C" int cdb_kc_backend_jpeg_on_device(const cdb_k_backend *be) {
    const cdb_kc_backend *b = (const cdb_kc_backend *)be;
    return cdb_k_nvjpeg_usable() && !(b->jd.tried && !b->jd.h_sw); /* not after a failed start */
}

/* Room for bytes of decoded RGB (waits for the compute stream before it frees). */
static cdb_status jd_room(cdb_kc_backend *b, size_t bytes) {
    cdb_kc_jpeg_dec *d = &b->jd;
    cdb_status rc = CDB_OK;
    if (bytes <= d->out_cap) return CDB_OK;
    CDB_CUDA_CHECK(cudaStreamSynchronize(b->c->compute));
    (void)cudaFree(d->out);
    d->out = NULL, d->out_cap = 0;
    bytes += bytes / 4;
    CDB_CUDA_CHECK(cudaMalloc(&d->out, bytes));
    d->out_cap = bytes;
done:
    return rc;
}

extern "C" cdb_status cdb_kc_backend_jpeg_preprocess(cdb_k_backend *be, const cdb_k_pp_geom *g,
                                                     const uint8_t *const *jpeg,
                                                     const size_t *len, int n, cdb_k_buf *px,
                                                     int at, cdb_status *item_rc) {
    cdb_kc_backend *b = (cdb_kc_backend *)be;
    const cdb_kc_nvjpeg_api *api = cdb_kc_nvjpeg();
    cdb_kc_jpeg_dec *d = &b->jd;
    const size_t per = (size_t)3 * g[0].size * g[0].size;
    cdb_status rc = CDB_OK;
    size_t *off = (size_t *)calloc((size_t)n + 1, sizeof *off);
    cdb_nvjpeg_image *dst = (cdb_nvjpeg_image *)calloc((size_t)n, sizeof *dst);
    int *hw_ok = (int *)calloc((size_t)n, sizeof *hw_ok);
    const unsigned char **hw_data = (const unsigned char **)calloc((size_t)n, sizeof *hw_data);
    size_t *hw_len = (size_t *)calloc((size_t)n, sizeof *hw_len);
    cdb_nvjpeg_image *hw_dst = (cdb_nvjpeg_image *)calloc((size_t)n, sizeof *hw_dst);
    int n_hw = 0, sub = 0, pp_i = 0;
    pthread_mutex_lock(&b->mu);
    if (!off || !dst || !hw_ok || !hw_data || !hw_len || !hw_dst) {
        rc = cdb_seterr(CDB_NOMEM, "jpeg_preprocess: host memory");
        goto done;
    }
    if (!api) {
        rc = cdb_seterr(CDB_UNSUPPORTED, "%s", cdb_k_nvjpeg_unusable_reason());
        goto done;
    }
    if ((rc = cdb_kc_ctx_bind(b->c)) != CDB_OK) goto done;
    CDB_CUDA_CHECK_ARG(px->n / per >= (size_t)at + n && px->f32 && !px->is_weight,
                       "jpeg_preprocess: px holds no fp32 room for images [%d, %d)", at, at + n);
    if ((rc = jd_open(b, api)) != CDB_OK) goto done;
    /* each JPEG's header as nvJPEG reads it; its place in the output */
    for (int i = 0; i < n; i++) {
        int comps = 0, w[CDB_NVJPEG_MAX_COMPONENT] = {0}, h[CDB_NVJPEG_MAX_COMPONENT] = {0};
        int st = api->get_image_info(d->h_sw, jpeg[i], len[i], &comps, &sub, w, h);
        off[i + 1] = off[i];
        item_rc[i] = CDB_OK;
        if (st != 0) {
            item_rc[i] = nv_status(st, "nvjpegGetImageInfo", i);
        } else if (w[0] != g[i].w || h[0] != g[i].h) {
            item_rc[i] = cdb_seterr(CDB_UNSUPPORTED, "JPEG %d: nvJPEG reads %dx%d, the header "
                                    "%dx%d", i, w[0], h[0], g[i].w, g[i].h);
        } else {
            off[i + 1] += (size_t)g[i].w * 3 * g[i].h;
            hw_ok[i] = d->hw && sub != CDB_NVJPEG_CSS_410 && sub != CDB_NVJPEG_CSS_411 &&
                       sub != CDB_NVJPEG_CSS_410V;
        }
    }
    if ((rc = jd_room(b, off[n] ? off[n] : 1)) != CDB_OK) goto done;
    for (int i = 0; i < n; i++) {
        dst[i].channel[0] = (unsigned char *)d->out + off[i];
        dst[i].pitch[0] = (size_t)g[i].w * 3;
        if (hw_ok[i]) {
            hw_data[n_hw] = jpeg[i], hw_len[n_hw] = len[i], hw_dst[n_hw] = dst[i];
            n_hw++;
        }
    }
    /* the hardware decoder takes its share in one call; if it refuses the batch, the
    ** default backend decodes those JPEGs one by one below */
    if (n_hw) {
        int st = api->batched_init(d->h_hw, d->st_hw, n_hw, 1, CDB_NVJPEG_OUTPUT_RGBI);
        if (st == 0)
            st = api->batched(d->h_hw, d->st_hw, hw_data, hw_len, hw_dst, b->c->compute);
        if (st != 0) {
            CDB_LOG_INFO("nvJPEG hardware decoder refused a batch of %d (status %d): the "
                         "default backend decodes them", n_hw, st);
            memset(hw_ok, 0, sizeof *hw_ok * (size_t)n);
        }
    }
    for (int i = 0; i < n; i++) {
        int st;
        if (item_rc[i] != CDB_OK || hw_ok[i]) continue;
        st = api->decode(d->h_sw, d->st_sw, jpeg[i], len[i], CDB_NVJPEG_OUTPUT_RGBI, &dst[i],
                         b->c->compute);
        if (st != 0) item_rc[i] = nv_status(st, "nvjpegDecode", i);
    }
    for (int i = 0; i < n; i++) {
        if (item_rc[i] != CDB_OK) continue;
        if ((rc = cdb_kc_pp_one(b, pp_i++, &g[i], NULL, dst[i].channel[0],
                                (float *)px->d + per * (size_t)(at + i))) != CDB_OK)
            goto done;
    }
done:
    pthread_mutex_unlock(&b->mu);
    free(off), free(dst), free(hw_ok), free(hw_data), free(hw_len), free(hw_dst);
    return rc;
}
