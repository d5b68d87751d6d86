/*
** encode_images.c: cdb_encode_images, decoded images to embeddings. On a backend with
** a device transform (the CUDA backend) an 8-bit gray/RGB image's bytes go to the
** device and are resized, cropped and normalized there (cdb_k_preprocess_u8: pinned
** double buffers on a copy stream, then preprocess.cu), so the host neither resamples
** nor uploads floats; the plan (PIL's coefficients, the normalization table) is
** cdb_pp_plan_make's, the one place cdb_image_preprocess takes it from too, and the
** device's arithmetic is the CPU's, so the pixels are the same bits either way. Images
** the device transform does not take (palette, CMYK, alpha, 16-bit) are preprocessed on
** the host and uploaded among the others. Elsewhere: cdb_image_preprocess, then
** cdb_encode_pixels. cdb_encode_files starts from the files' bytes: on such a backend,
** in fast mode, the JPEGs cdb_image_pick_decoder gives to nvJPEG are decoded on the
** device (cdb_k_jpeg_preprocess) and never leave it; every other file, and one nvJPEG
** fails, is decoded by the CPU decoders.
*/
#include <stdlib.h>
#include <string.h>

#include "encoder/encoder_int.h"

/* Host route: this many images' floats at a time (each 3 x size x size). */
#define HOST_CHUNK 64

int cdb_image_device_ready(const cdb_image *img) {
    return img && img->bits == 8 && (img->channels == 1 || img->channels == 3) &&
           !img->is_palette && !img->is_cmyk;
}

typedef struct fill_ctx {
    const cdb_model *m;
    const cdb_image *const *imgs; /* cdb_encode_images: decoded images */
    /* cdb_encode_files: the files' bytes, their decode, each one's status and decoder */
    const void *const *bufs;
    const size_t *lens;
    const cdb_image_params *ip;
    cdb_status *item_rc;
    cdb_decoder *used;
    float *host; /* one image's floats (the images the device does not take) */
} fill_ctx;

/* cdb_pixsrc's fill: images [first, first + count) into px, each run of images the
** device takes in one cdb_k_preprocess_u8 call, the others uploaded one by one. */
static cdb_status fill(void *ud, cdb_k_backend *be, int first, int count, cdb_k_buf *px) {
    fill_ctx *f = ud;
    const cdb_preprocess_params *pp = &f->m->info.preprocess;
    const size_t per = (size_t)3 * pp->size * pp->size;
    cdb_status rc = CDB_OK;
    cdb_pp_plan *pl = calloc((size_t)count, sizeof *pl);
    cdb_k_pp_geom *g = calloc((size_t)count, sizeof *g);
    const uint8_t **src = calloc((size_t)count, sizeof *src);
    int made = 0;
    if (!pl || !g || !src) rc = cdb_seterr(CDB_NOMEM, "image transform plans");
    for (int i = 0; i < count && rc == CDB_OK;) {
        int run = 0;
        while (i + run < count && cdb_image_device_ready(f->imgs[first + i + run])) {
            const cdb_image *img = f->imgs[first + i + run];
            made = i + run + 1;
            if ((rc = cdb_pp_plan_make(img->width, img->height, pp, 1, &pl[i + run])) != CDB_OK)
                break;
            cdb_pp_plan_geom(&pl[i + run], img->channels, &g[i + run]);
            src[i + run] = img->pixels;
            run++;
        }
        if (rc != CDB_OK) break;
        if (run) {
            rc = cdb_k_preprocess_u8(be, g + i, src + i, run, px, i);
            i += run;
        } else {
            if ((rc = cdb_image_preprocess(f->imgs[first + i], pp, f->host, NULL)) == CDB_OK)
                rc = cdb_k_buf_upload(be, px, per * (size_t)i, f->host, per);
            i++;
        }
    }
    for (int i = 0; pl && i < made; i++) cdb_pp_plan_free(&pl[i]);
    free(pl);
    free(g);
    free(src);
    return rc;
}

/* ---- files: nvJPEG on the device, or the CPU decoders ----------------------------- */

/* File at's floats from its decode (item_rc[at] its status, img its image or NULL):
** preprocessed, or zeros when either step failed (item_rc[at] says which). Frees img. */
static void file_floats(fill_ctx *f, int at, cdb_image *img, float *px) {
    const cdb_preprocess_params *pp = &f->m->info.preprocess;
    if (f->item_rc[at] == CDB_OK) f->item_rc[at] = cdb_image_preprocess(img, pp, px, NULL);
    if (f->item_rc[at] != CDB_OK) memset(px, 0, sizeof *px * 3 * (size_t)pp->size * pp->size);
    cdb_image_free(img);
}

/* Image at's floats on the host route: a decoded image preprocessed (its failure fails
** the call), or a file decoded and preprocessed (its failure is its own: zero pixels). */
static cdb_status host_pixels(fill_ctx *f, int at, float *px) {
    cdb_image *img = NULL;
    if (f->imgs) return cdb_image_preprocess(f->imgs[at], &f->m->info.preprocess, px, NULL);
    f->used[at] = CDB_DECODER_CPU;
    f->item_rc[at] = cdb_image_decode(f->bufs[at], f->lens[at], f->ip, &img);
    file_floats(f, at, img, px);
    return CDB_OK;
}

/* Image i of the call (file first + i) decoded on the CPU into slot i of px: through the
** device transform when it takes the image, else preprocessed here. A file that does
** not decode gets its status and zero pixels (its row is zeroed after the forward). */
static cdb_status file_on_cpu(fill_ctx *f, cdb_k_backend *be, int first, int i, cdb_k_buf *px) {
    const cdb_preprocess_params *pp = &f->m->info.preprocess;
    const size_t per = (size_t)3 * pp->size * pp->size;
    const int at = first + i;
    cdb_image *img = NULL;
    cdb_status rc = CDB_OK;
    f->used[at] = CDB_DECODER_CPU;
    f->item_rc[at] = cdb_image_decode(f->bufs[at], f->lens[at], f->ip, &img);
    if (f->item_rc[at] == CDB_OK && cdb_image_device_ready(img)) {
        cdb_pp_plan pl;
        cdb_k_pp_geom g;
        const uint8_t *src = img->pixels;
        if ((f->item_rc[at] = cdb_pp_plan_make(img->width, img->height, pp, 1, &pl)) == CDB_OK) {
            cdb_pp_plan_geom(&pl, img->channels, &g);
            rc = cdb_k_preprocess_u8(be, &g, &src, 1, px, i);
        }
        cdb_pp_plan_free(&pl);
        cdb_image_free(img);
        if (f->item_rc[at] == CDB_OK) return rc;
        img = NULL;
    }
    file_floats(f, at, img, f->host);
    return cdb_k_buf_upload(be, px, per * (size_t)i, f->host, per);
}

/* 1 when file at goes to nvJPEG: the pick says so and its declared size is allowed. */
static int file_to_nvjpeg(const fill_ctx *f, cdb_k_backend *be, int at, int *w, int *h) {
    int64_t maxp = f->ip->max_pixels > 0 ? f->ip->max_pixels : CDB_IMAGE_DEFAULT_MAX_PIXELS;
    if (cdb_image_pick_decoder(f->bufs[at], f->lens[at], f->ip->decode,
                               cdb_k_jpeg_on_device(be), NULL) != CDB_DECODER_NVJPEG)
        return 0;
    return cdb_image_probe(f->bufs[at], f->lens[at], w, h) == CDB_OK && (int64_t)*w * *h <= maxp;
}

/* cdb_pixsrc's fill for files: each run of files nvJPEG takes in one
** cdb_k_jpeg_preprocess call (a file it fails goes to the CPU), the others decoded on
** the CPU. */
static cdb_status fill_files(void *ud, cdb_k_backend *be, int first, int count,
                             cdb_k_buf *px) {
    fill_ctx *f = ud;
    const cdb_preprocess_params *pp = &f->m->info.preprocess;
    cdb_status rc = CDB_OK;
    cdb_pp_plan *pl = calloc((size_t)count, sizeof *pl);
    cdb_k_pp_geom *g = calloc((size_t)count, sizeof *g);
    const uint8_t **src = calloc((size_t)count, sizeof *src);
    size_t *len = calloc((size_t)count, sizeof *len);
    cdb_status *nv_rc = calloc((size_t)count, sizeof *nv_rc);
    int made = 0, w = 0, h = 0;
    if (!pl || !g || !src || !len || !nv_rc) rc = cdb_seterr(CDB_NOMEM, "file decode plans");
    for (int i = 0; i < count && rc == CDB_OK;) {
        int run = 0;
        while (i + run < count && file_to_nvjpeg(f, be, first + i + run, &w, &h)) {
            int k = i + run, at = first + k;
            made = k + 1;
            if ((rc = cdb_pp_plan_make(w, h, pp, 1, &pl[k])) != CDB_OK) break;
            cdb_pp_plan_geom(&pl[k], 3, &g[k]); /* nvJPEG's packed RGB */
            src[k] = f->bufs[at], len[k] = f->lens[at];
            run++;
        }
        if (rc != CDB_OK) break;
        if (!run) {
            rc = file_on_cpu(f, be, first, i++, px);
            continue;
        }
        rc = cdb_k_jpeg_preprocess(be, g + i, src + i, len + i, run, px, i, nv_rc + i);
        if (rc == CDB_UNSUPPORTED) { /* nvJPEG could not start here: the CPU decodes */
            CDB_LOG_DEBUG("nvJPEG: %s", cdb_errmsg());
            for (int k = i; k < i + run; k++) nv_rc[k] = CDB_UNSUPPORTED;
            rc = CDB_OK;
        }
        if (rc != CDB_OK) break;
        for (int k = i; k < i + run && rc == CDB_OK; k++) {
            f->used[first + k] = CDB_DECODER_NVJPEG;
            f->item_rc[first + k] = CDB_OK;
            if (nv_rc[k] != CDB_OK) rc = file_on_cpu(f, be, first, k, px);
        }
        i += run;
    }
    for (int i = 0; pl && i < made; i++) cdb_pp_plan_free(&pl[i]);
    free(pl), free(g), free(src), free(len), free(nv_rc);
    return rc;
}

/* The host route: pixels made here, HOST_CHUNK images at a time, then the tower. */
static cdb_status on_host(cdb_model *m, fill_ctx *f, int n, float *out) {
    const cdb_preprocess_params *pp = &m->info.preprocess;
    const size_t per = (size_t)3 * pp->size * pp->size;
    const int E = m->info.embed_dim;
    int cap = n < HOST_CHUNK ? n : HOST_CHUNK;
    float *px = malloc(per * (size_t)cap * sizeof *px);
    cdb_status rc = px ? CDB_OK : cdb_seterr(CDB_NOMEM, "pixels");
    for (int i0 = 0; i0 < n && rc == CDB_OK; i0 += cap) {
        int nb = n - i0 < cap ? n - i0 : cap;
        for (int b = 0; b < nb && rc == CDB_OK; b++) rc = host_pixels(f, i0 + b, px + per * b);
        if (rc == CDB_OK) rc = cdb_clip_image_forward(m, px, nb, out + (size_t)i0 * E);
    }
    free(px);
    return rc;
}

/* Both calls' checks of m. */
static cdb_status vision_ready(const cdb_model *m) {
    if (!m->info.has_vision)
        return cdb_seterr(CDB_INVALID, "model %s: image tower not loaded", m->name);
    if (m->info.inspect_only)
        return cdb_seterr(CDB_INVALID, "model %s: opened for inspection only", m->name);
    return CDB_OK;
}

cdb_status cdb_encode_files_route(cdb_model *m, const void *const *bufs, const size_t *lens,
                                  int n, const cdb_image_params *ip, int normalize, float *out,
                                  cdb_status *item_rc, cdb_decoder *used, int on_backend) {
    cdb_image_params dflt = cdb_image_params_default();
    fill_ctx f;
    cdb_status rc;
    cdb_decoder *own_used = NULL;
    if (!m || n < 0 || (n && (!bufs || !lens || !out || !item_rc)))
        return cdb_seterr(CDB_INVALID, "encode_files: bad arguments");
    if ((rc = vision_ready(m)) != CDB_OK || n == 0) return rc;
    memset(&f, 0, sizeof f);
    f.m = m, f.bufs = bufs, f.lens = lens, f.ip = ip ? ip : &dflt, f.item_rc = item_rc;
    f.used = used ? used : (own_used = malloc((size_t)n * sizeof *own_used));
    f.host = malloc((size_t)3 * m->info.preprocess.size * m->info.preprocess.size *
                    sizeof *f.host);
    if (!f.used || !f.host) {
        rc = cdb_seterr(CDB_NOMEM, "pixels");
    } else if (!on_backend || m->vision_rn) {
        rc = on_host(m, &f, n, out);
    } else {
        cdb_pixsrc src = {NULL, fill_files, &f};
        rc = cdb_clip_image_forward_src(m, &src, n, out);
    }
    free(f.host);
    free(own_used);
    if (rc != CDB_OK) return rc;
    if ((rc = cdb_encode_finish(m, out, n, normalize)) != CDB_OK) return rc;
    for (int i = 0; i < n; i++) /* the rows of files that did not decode: zeros */
        if (item_rc[i] != CDB_OK) memset(out + (size_t)i * m->info.embed_dim, 0,
                                         sizeof *out * (size_t)m->info.embed_dim);
    return CDB_OK;
}

cdb_status cdb_encode_files(cdb_model *m, const void *const *bufs, const size_t *lens, int n,
                            const cdb_image_params *ip, int normalize, float *out,
                            cdb_status *item_rc, cdb_decoder *used) {
    return cdb_encode_files_route(m, bufs, lens, n, ip, normalize, out, item_rc, used,
                                  m && cdb_k_preprocess_on_device(m->be));
}

cdb_status cdb_encode_images_route(cdb_model *m, const cdb_image *const *imgs, int n,
                                   int normalize, float *out, int on_backend) {
    fill_ctx f;
    cdb_pixsrc src = {NULL, fill, &f};
    cdb_status rc;
    if (!m || (!imgs && n) || (!out && n) || n < 0)
        return cdb_seterr(CDB_INVALID, "encode_images: bad arguments");
    for (int i = 0; i < n; i++)
        if (!imgs[i]) return cdb_seterr(CDB_INVALID, "encode_images: image %d is NULL", i);
    if ((rc = vision_ready(m)) != CDB_OK || n == 0) return rc;
    memset(&f, 0, sizeof f);
    f.m = m;
    f.imgs = imgs;
    f.host = malloc((size_t)3 * m->info.preprocess.size * m->info.preprocess.size *
                    sizeof *f.host);
    if (!f.host)
        rc = cdb_seterr(CDB_NOMEM, "pixels");
    else if (!on_backend || m->vision_rn)
        rc = on_host(m, &f, n, out);
    else
        rc = cdb_clip_image_forward_src(m, &src, n, out);
    free(f.host);
    return rc != CDB_OK ? rc : cdb_encode_finish(m, out, n, normalize);
}

cdb_status cdb_encode_images(cdb_model *m, const cdb_image *const *imgs, int n, int normalize,
                             float *out) {
    return cdb_encode_images_route(m, imgs, n, normalize, out,
                                   m && cdb_k_preprocess_on_device(m->be));
}

int cdb_model_image_batch_for(const cdb_model *m, size_t free_bytes, int max_batch) {
    size_t item = m ? cdb_clip_image_item_bytes(m) : 0;
    if (max_batch < 1) max_batch = 1;
    return item ? cdb_k_batch_from_free(free_bytes, 0, item, max_batch) : max_batch;
}

int cdb_model_image_batch(cdb_model *m, int cpu_batch, int max_batch) {
    size_t fr = 0;
    if (!m || cdb_k_device_memory(m->be, &fr, NULL) != CDB_OK) return cpu_batch;
    return cdb_model_image_batch_for(m, fr, max_batch);
}

int cdb_model_transforms_on_device(const cdb_model *m) {
    return m && !m->vision_rn && cdb_k_preprocess_on_device(m->be);
}

int cdb_model_decodes_jpeg_on_device(const cdb_model *m) {
    return cdb_model_transforms_on_device(m) && cdb_k_jpeg_on_device(m->be);
}
