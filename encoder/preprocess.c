/*
** preprocess.c: the reference CLIP image transform, bit-exact with PIL 9.4 +
** torchvision on PIL images (OpenAI CLIP's _transform):
**
**   Resize(size, BICUBIC) -> CenterCrop(size) -> convert("RGB") -> ToTensor -> Normalize
**
** - Resize: the short side becomes `size`, the long side int(size * long / short)
**   (truncated); or, for SigLIP (CDB_RESIZE_SQUASH: HF's SiglipImageProcessor, OpenCLIP's
**   resize_mode "squash"), both sides become `size` and the "crop" is the whole image. PIL's ImagingResample: separable, horizontal pass first (into a
**   uint8 intermediate covering only the rows the vertical pass reads), then
**   vertical; a pass is skipped when its axis keeps its size. Filter support is
**   scaled by the reduction factor (antialiasing); coefficients are computed in
**   double, normalized per output pixel, then rounded to 22-bit fixed point
**   (PRECISION_BITS = 32 - 8 - 2) away from zero; accumulation starts at the
**   rounding bias 1 << 21 and the result is clipped to 0..255 after >> 22.
** - The resize runs in the image's own mode: gray as one channel, gray+alpha and
**   RGBA premultiplied first (PIL's "La"/"RGBa" detour, MULDIV255 going in,
**   255*v/a integer division coming out, so fully transparent pixels end black),
**   palette images with nearest neighbour (PIL forces NEAREST for "P"), computed
**   the way ImagingScaleAffine does (a source coordinate accumulated in double).
**   When the size does not change, PIL returns a copy and so do we (no
**   premultiply round trip).
** - Only the centre crop of the resized image is ever computed: each output pixel
**   of PIL's resampler depends only on its own coefficients, so computing the
**   crop window alone gives the same bytes for a fraction of the work.
** - Crop offsets: int(round((resized - size) / 2.0)) with Python's round half to even.
** - convert("RGB") after the crop: gray replicated, alpha dropped, CMYK through
**   PIL's cmyk2rgb (nk = 255 - K; each channel nk - MULDIV255(C, nk)); CMYK is
**   resized as four plain channels (PIL premultiplies only LA and RGBA).
** - ToTensor + Normalize: float32 v / 255.0f (or HF's rescale: float32 of v * factor
**   computed in double), then (x - mean) / std, one float32
**   operation at a time (no FMA contraction is possible in this expression),
**   tabulated per byte value (the same floats, looked up).
** - The resampling passes and the channel split are kernels/ primitives (AVX2 when
**   the CPU has it, else the scalar reference; identical bytes).
**
** 16-bit images (PNG) are reduced to 8 bits by their high byte first: PIL does
** exactly that for 16-bit RGB/RGBA/LA PNGs. For 16-bit grayscale PIL instead keeps
** 32-bit "I" mode and convert("RGB") saturates everything above 255 to white; we
** deliberately do not reproduce that defect (docs/images.md).
**
** Reentrant: no globals; all scratch is allocated per call.
*/
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "encoder/encoder_int.h"
#include "kernels/kernels.h"

#define PP_MAX_SIZE 16384 /* output side limit: keeps every buffer size sane */

/* MULDIV255 as in PIL's ImPlatform/Convert: round(a*b/255) for 8-bit a, b. */
static inline unsigned muldiv255(unsigned a, unsigned b) {
    unsigned t = a * b + 128;
    return ((t >> 8) + t) >> 8;
}


/* One horizontal pass over rows [y0, y0 + n_rows) of src (sw wide, nch interleaved
** channels): dst gets n_rows x count pixels. Each source row is first split into
** channel planes (plane: nch * sw bytes of scratch) so every tap loop runs over
** contiguous memory; the arithmetic is PIL's (kernels/kernels.h, AVX2 or scalar),
** only the memory order differs. */
static void resample_h(const uint8_t *src, int sw, int nch, int y0, int n_rows,
                       const cdb_pp_plan *c, int count, uint8_t *dst, uint8_t *scratch,
                       int premul_rows) {
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *row = src + ((size_t)(y0 + r) * sw) * nch;
        const uint8_t *plane = row;
        if (premul_rows) { /* PIL's La/RGBa conversion, row by row on the way */
            cdb_k_premul_deinterleave_u8(row, (size_t)sw, nch, scratch, (size_t)sw);
            plane = scratch;
        } else if (nch > 1) {
            cdb_k_deinterleave_u8(row, (size_t)sw, nch, scratch, (size_t)sw);
            plane = scratch;
        }
        cdb_k_resample_h_u8(plane, (size_t)sw, nch, c->bh, c->kkh, c->kh, count,
                            dst + (size_t)r * count * nch);
    }
}

/* One vertical pass: src is sw wide; output rows use the plan's vertical coefficients
** (bounds relative to src's first row); dst gets count rows of sw pixels. */
static void resample_v(const uint8_t *src, int sw, int nch, const cdb_pp_plan *c, int count,
                       uint8_t *dst) {
    size_t stride = (size_t)sw * nch;
    for (int i = 0; i < count; i++)
        cdb_k_resample_v_u8(src + (size_t)c->bv[2 * i] * stride, stride,
                            c->kkv + (size_t)i * c->kv, c->bv[2 * i + 1], stride,
                            dst + (size_t)i * stride);
}

/* PIL's ImagingScaleAffine for one axis: source index of each output position in
** [0, first + count), accumulated in double exactly as PIL does; -1 = outside
** (PIL fills those with 0). */
static void nearest_table(int in_size, int out_size, int first, int count, int *tab /* OUT */) {
    float in1 = (float)in_size;
    double a = (double)(in1 - 0.0f) / out_size;
    double o = 0.0 + a * 0.5;
    for (int x = 0; x < first + count; x++) {
        int v = o < 0.0 ? -1 : (int)o;
        if (x >= first) tab[x - first] = (v >= 0 && v < in_size) ? v : -1;
        o += a;
    }
}

/* Python's int(round(d / 2.0)) for d >= 0: half to even. */
static int crop_offset(int64_t d) {
    int64_t k = d / 2;
    if (d % 2 == 0) return (int)k;
    return (int)(k % 2 == 0 ? k : k + 1);
}

cdb_preprocess_params cdb_preprocess_params_default(void) {
    cdb_preprocess_params p;
    memset(&p, 0, sizeof p); /* appended fields: zero is the previous behaviour */
    p.size = 224;
    p.mean[0] = 0.48145466f;
    p.mean[1] = 0.4578275f;
    p.mean[2] = 0.40821073f;
    p.std[0] = 0.26862954f;
    p.std[1] = 0.26130258f;
    p.std[2] = 0.27577711f;
    p.interp = CDB_INTERP_BICUBIC;
    return p;
}

void cdb_pp_plan_free(cdb_pp_plan *pl) {
    cdb_free(pl->bh);
    cdb_free(pl->bv);
    cdb_free(pl->kkh);
    cdb_free(pl->kkv);
    pl->bh = pl->bv = NULL;
    pl->kkh = pl->kkv = NULL;
}

cdb_status cdb_pp_plan_make(int w, int h, const cdb_preprocess_params *p, int coeffs,
                            cdb_pp_plan *pl) {
    cdb_status rc;
    int size = p->size, bilinear = p->interp == CDB_INTERP_BILINEAR;
    memset(pl, 0, sizeof *pl);
    if (size <= 0 || size > PP_MAX_SIZE)
        return cdb_seterr(CDB_INVALID, "image_preprocess: size %d out of range 1..%d", size,
                          PP_MAX_SIZE);
    if (p->interp != CDB_INTERP_BICUBIC && p->interp != CDB_INTERP_BILINEAR)
        return cdb_seterr(CDB_INVALID, "image_preprocess: unknown interpolation %d",
                          (int)p->interp);
    if (p->resize != CDB_RESIZE_SHORT_CROP && p->resize != CDB_RESIZE_SQUASH)
        return cdb_seterr(CDB_INVALID, "image_preprocess: unknown resize mode %d", (int)p->resize);
    if (!(p->rescale_factor >= 0) || !isfinite(p->rescale_factor))
        return cdb_seterr(CDB_INVALID, "image_preprocess: bad rescale factor");
    for (int c = 0; c < 3; c++)
        if (!(p->std[c] != 0.0f) || !isfinite(p->std[c]) || !isfinite(p->mean[c]))
            return cdb_seterr(CDB_INVALID, "image_preprocess: bad mean/std for channel %d", c);
    pl->w = w, pl->h = h, pl->size = size;
    /* torchvision's _compute_resized_output_size: the long side truncated. The
    ** quotient of two exact integers never lands within one ulp of the next integer
    ** at these magnitudes, so integer division equals int(float division). */
    if (p->resize == CDB_RESIZE_SQUASH) { /* SigLIP: both sides to size, nothing cropped */
        pl->nw = pl->nh = size;
    } else if (w <= h) {
        pl->nw = size;
        pl->nh = (int64_t)size * h / w;
    } else {
        pl->nh = size;
        pl->nw = (int64_t)size * w / h;
    }
    if (pl->nw > INT_MAX / 8 || pl->nh > INT_MAX / 8)
        return cdb_seterr(CDB_TOO_LARGE, "image_preprocess: resized size %lldx%lld too large",
                          (long long)pl->nw, (long long)pl->nh);
    pl->left = crop_offset(pl->nw - size);
    pl->top = crop_offset(pl->nh - size);
    pl->need_h = pl->nw != w;
    pl->need_v = pl->nh != h;
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++) {
            /* torchvision's ToTensor, or Hugging Face's rescale (in float64, then cast
            ** to float32), then Normalize in float32 */
            float x = p->rescale_factor > 0 ? (float)((double)v * p->rescale_factor)
                                            : (float)v / 255.0f;
            x = x - p->mean[c];
            pl->lut[c][v] = x / p->std[c];
        }
    if (!coeffs) return CDB_OK;
    if (pl->need_v &&
        (rc = cdb_k_pil_coeffs(h, (int)pl->nh, pl->top, size, bilinear, &pl->kv, &pl->bv,
                               &pl->kkv)) != CDB_OK)
        return rc;
    if (pl->need_h) {
        /* Rows the vertical pass reads (all rows when it is skipped: then the crop
        ** rows themselves). */
        if (pl->need_v) {
            pl->y0 = pl->bv[0];
            pl->y1 = pl->bv[2 * (size - 1)] + pl->bv[2 * (size - 1) + 1];
            for (int i = 0; i < size; i++) pl->bv[2 * i] -= pl->y0;
        } else {
            pl->y0 = pl->top;
            pl->y1 = pl->top + size;
        }
        if ((rc = cdb_k_pil_coeffs(w, (int)pl->nw, pl->left, size, bilinear, &pl->kh, &pl->bh,
                                   &pl->kkh)) != CDB_OK)
            return rc;
    }
    return CDB_OK;
}

cdb_status cdb_image_preprocess(const cdb_image *img, const cdb_preprocess_params *p,
                                float *out /* OUT */, uint8_t *crop_rgb8 /* OUT */) {
    cdb_status rc = CDB_OK;
    uint8_t *src8 = NULL, *tmp = NULL, *crop = NULL;
    const uint8_t *src = NULL;
    int *xtab = NULL, *ytab = NULL;
    cdb_pp_plan pl;
    int w, h, nch, size, has_alpha, premul;
    int64_t nw, nh;
    size_t npix;
    int left, top;

    memset(&pl, 0, sizeof pl);
    if (!img || !p || !out)
        return cdb_seterr(CDB_INVALID, "image_preprocess: NULL argument");
    w = img->width;
    h = img->height;
    nch = img->channels;
    if (w <= 0 || h <= 0 || nch < 1 || nch > 4 || (img->bits != 8 && img->bits != 16) ||
        !img->pixels)
        return cdb_seterr(CDB_INVALID, "image_preprocess: malformed image (%dx%d, %d ch, %d bit)",
                          w, h, nch, img->bits);
    if ((rc = cdb_pp_plan_make(w, h, p, !img->is_palette, &pl)) != CDB_OK) goto done;
    size = pl.size;
    nw = pl.nw;
    nh = pl.nh;
    left = pl.left;
    top = pl.top;
    npix = (size_t)w * (size_t)h;

    /* 8-bit working copy in the image's own mode (high byte of 16-bit samples). */
    has_alpha = (nch == 2 || nch == 4) && !img->is_cmyk;
    premul = has_alpha && !img->is_palette && !(nw == w && nh == h);
    /* 8-bit with a horizontal pass: premultiplied row by row inside it (no copy of
    ** the whole image); otherwise (16-bit, or a vertical pass only) a premultiplied
    ** 8-bit copy first. */
    int premul_rows = premul && img->bits == 8 && nw != w;
    if (img->bits == 16 || (premul && !premul_rows)) {
        src8 = cdb_malloc(npix * nch);
        if (!src8) {
            rc = cdb_seterr(CDB_NOMEM, "image_preprocess: out of memory (%dx%d)", w, h);
            goto done;
        }
        if (img->bits == 16) {
            const uint16_t *s16 = img->pixels;
            for (size_t i = 0; i < npix * nch; i++) src8[i] = (uint8_t)(s16[i] >> 8);
        } else {
            memcpy(src8, img->pixels, npix * nch);
        }
        if (premul && nch == 2) {
            for (size_t i = 0; i < npix; i++)
                src8[2 * i] = (uint8_t)muldiv255(src8[2 * i], src8[2 * i + 1]);
        } else if (premul) {
            for (size_t i = 0; i < npix; i++) {
                uint8_t *px = src8 + 4 * i;
                px[0] = (uint8_t)muldiv255(px[0], px[3]);
                px[1] = (uint8_t)muldiv255(px[1], px[3]);
                px[2] = (uint8_t)muldiv255(px[2], px[3]);
            }
        }
    }
    src = src8 ? src8 : (const uint8_t *)img->pixels;

    crop = cdb_malloc((size_t)size * size * nch);
    if (!crop) {
        rc = cdb_seterr(CDB_NOMEM, "image_preprocess: out of memory");
        goto done;
    }

    if (nw == w && nh == h) {
        /* PIL returns a copy: the crop reads the source directly. */
        for (int y = 0; y < size; y++)
            memcpy(crop + (size_t)y * size * nch, src + ((size_t)(top + y) * w + left) * nch,
                   (size_t)size * nch);
    } else if (img->is_palette) {
        xtab = cdb_malloc((size_t)size * sizeof(int));
        ytab = cdb_malloc((size_t)size * sizeof(int));
        if (!xtab || !ytab) {
            rc = cdb_seterr(CDB_NOMEM, "image_preprocess: out of memory");
            goto done;
        }
        nearest_table(w, (int)nw, left, size, xtab);
        nearest_table(h, (int)nh, top, size, ytab);
        for (int y = 0; y < size; y++)
            for (int x = 0; x < size; x++) {
                uint8_t *d = crop + ((size_t)y * size + x) * nch;
                if (ytab[y] < 0 || xtab[x] < 0)
                    memset(d, 0, nch);
                else
                    memcpy(d, src + ((size_t)ytab[y] * w + xtab[x]) * nch, nch);
            }
    } else {
        const uint8_t *vin = src;
        int vin_w = w;
        if (pl.need_h) {
            int y0 = pl.y0, y1 = pl.y1;
            tmp = cdb_malloc((size_t)(y1 - y0) * size * nch + (size_t)w * nch);
            if (!tmp) {
                rc = cdb_seterr(CDB_NOMEM, "image_preprocess: out of memory");
                goto done;
            }
            resample_h(src, w, nch, y0, y1 - y0, &pl, size, tmp,
                       tmp + (size_t)(y1 - y0) * size * nch, premul_rows);
            if (!pl.need_v) {
                memcpy(crop, tmp, (size_t)size * size * nch);
                goto converted;
            }
            vin = tmp;
            vin_w = size;
        } else {
            /* Width unchanged (== size): the crop columns are [left, left+size) = all. */
            vin_w = w;
        }
        resample_v(vin, vin_w, nch, &pl, size, crop);
    }

converted:
    /* Undo premultiplication (PIL's RGBa -> RGBA), then convert("RGB") + normalize.
    ** ToTensor + Normalize act per byte value, so each channel's 256 results are
    ** computed once, with torch's float32 operations, and looked up. */
    {
        size_t plane = (size_t)size * size;
        const float(*lut)[256] = pl.lut;
        for (size_t i = 0; i < plane; i++) {
            uint8_t *px = crop + i * nch;
            uint8_t rgb[3];
            if (premul) {
                unsigned a = px[nch - 1];
                if (a != 0 && a != 255)
                    for (int c = 0; c < nch - 1; c++) {
                        unsigned v = 255u * px[c] / a;
                        px[c] = (uint8_t)(v > 255 ? 255 : v);
                    }
            }
            if (nch <= 2) {
                rgb[0] = rgb[1] = rgb[2] = px[0];
            } else if (img->is_cmyk) { /* PIL's cmyk2rgb */
                unsigned nk = 255u - px[3];
                for (int c = 0; c < 3; c++) rgb[c] = (uint8_t)(nk - muldiv255(px[c], nk));
            } else {
                rgb[0] = px[0];
                rgb[1] = px[1];
                rgb[2] = px[2];
            }
            out[i] = lut[0][rgb[0]];
            out[plane + i] = lut[1][rgb[1]];
            out[2 * plane + i] = lut[2][rgb[2]];
            if (crop_rgb8) memcpy(crop_rgb8 + i * 3, rgb, 3);
        }
    }

done:
    cdb_pp_plan_free(&pl);
    cdb_free(xtab);
    cdb_free(ytab);
    cdb_free(tmp);
    cdb_free(crop);
    cdb_free(src8);
    return rc;
}

void cdb_pp_plan_geom(const cdb_pp_plan *pl, int nch, cdb_k_pp_geom *g) {
    memset(g, 0, sizeof *g);
    g->w = pl->w, g->h = pl->h, g->nch = nch;
    g->stride = (size_t)pl->w * nch;
    g->size = pl->size, g->left = pl->left, g->top = pl->top;
    g->y0 = pl->y0, g->rows = pl->y1 - pl->y0;
    g->bh = pl->bh, g->kkh = pl->kkh, g->kh = pl->need_h ? pl->kh : 0;
    g->bv = pl->bv, g->kkv = pl->kkv, g->kv = pl->need_v ? pl->kv : 0;
    g->lut = &pl->lut[0][0];
}
