/*
** image_stb.c: the one translation unit that compiles stb_image (libstb-dev's
** header, v2.27 on Debian 12), restricted to the formats stb decodes for clipdb
** (PNG, BMP, GIF, TGA, PSD, PNM; JPEG goes through libjpeg-turbo in image_jpeg.c)
** and without stdio, plus cdb_img_stb_decode: stb's output turned into the mode
** PIL 9.4 gives the file (image_scan.c read the header facts stb hides). stb's
** failure reason is thread-local (STBI_THREAD_LOCAL is _Thread_local under C11),
** so decoding stays reentrant. stb is third-party code: its warnings are silenced
** here and nowhere else.
*/
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC /* its functions stay private to this file: no stbi_* symbol
                         ** in libcdb_encoder.a can collide with a user's own stb_image */
#define STBI_NO_STDIO
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#define STBI_ONLY_GIF
#define STBI_ONLY_TGA
#define STBI_ONLY_PSD
#define STBI_ONLY_PNM
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_MALLOC(sz) stb_malloc(sz)
#define STBI_REALLOC(p, newsz) stb_realloc(p, newsz)
#define STBI_FREE(p) cdb_free(p)

#include <math.h>
#include <string.h>

#include "core/core.h"
#include "encoder/image_int.h"

/* Every allocation stb makes while decoding one file is capped (thread-local, set
** around the stb call): stb 2.27 inflates a PNG's whole IDAT stream into a buffer it
** grows by doubling, without comparing with the image size first (stb issue #276),
** so a 1x1 PNG can inflate to gigabytes. The cap, 16 bytes per declared pixel plus
** the file size plus 64 KiB, is above anything a valid file needs (the raw data of a
** 16-bit RGBA image is 8 bytes per pixel, and stb's buffer at most doubles past it),
** so a zlib bomb fails after a bounded allocation instead. */
static _Thread_local size_t g_stb_cap;
static _Thread_local int g_stb_capped;
static void *stb_malloc(size_t n) {
    if (g_stb_cap && n > g_stb_cap) {
        g_stb_capped = 1;
        return NULL;
    }
    return cdb_malloc(n);
}
static void *stb_realloc(void *p, size_t n) {
    if (g_stb_cap && n > g_stb_cap) {
        g_stb_capped = 1;
        return NULL;
    }
    return cdb_realloc(p, n);
}

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmisleading-indentation"
#pragma GCC diagnostic ignored "-Wshift-negative-value"
#pragma GCC diagnostic ignored "-Wtype-limits"
#endif
#include <stb_image.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
/* With STB_IMAGE_STATIC, stb 2.27 declares stbi_set_unpremultiply_on_load_thread
** static without defining it; GCC reports that at the end of the file, after the
** pop above. */
#pragma GCC diagnostic ignored "-Wunused-function"
#endif

static cdb_status stb_error(img_fmt f) {
    const char *why = stbi_failure_reason(), *name = cdb_img_fmt_name(f);
    if (!why) why = "decode failed";
    if (strstr(why, "outofmem") || strstr(why, "Out of memory"))
        return cdb_seterr(CDB_NOMEM, "%s: out of memory while decoding", name);
    if (strstr(why, "not supported") || strstr(why, "unsupported") || strstr(why, "Unsupported") ||
        strstr(why, "only"))
        return cdb_seterr(CDB_UNSUPPORTED, "%s: %s", name, why);
    if (strstr(why, "too large") || strstr(why, "Very large"))
        return cdb_seterr(CDB_TOO_LARGE, "%s: %s", name, why);
    return cdb_seterr(CDB_CORRUPT, "%s: corrupt or truncated data (%s)", name, why);
}


/* PNG bytes b without the empty IDAT chunks that come before its first IDAT with
** data (*n_out bytes, heap), or NULL when there are none (or no memory: stb then reads
** b as it is). stb 2.27 copies an IDAT's bytes to its data buffer plus an offset, and
** before the first byte that buffer is NULL: NULL + 0 is undefined behaviour (found
** by fuzz_png). An empty IDAT carries no byte of the stream, so the image is the same. */
static uint8_t *png_without_leading_empty_idat(const uint8_t *b, size_t n, size_t *n_out) {
    size_t i = 8, o, cut_end = 0;
    uint8_t *c;
    while (i + 12 <= n) {
        uint32_t len = cdb_img_be32(b + i);
        int idat = !memcmp(b + i + 4, "IDAT", 4);
        if (len > n - i - 12 || (idat && len > 0)) break;
        i += 12 + (size_t)len;
        if (idat) cut_end = i; /* an empty IDAT ends at i */
    }
    if (!cut_end || !(c = cdb_malloc(n))) return NULL;
    memcpy(c, b, 8);
    o = 8;
    for (i = 8; i < cut_end;) { /* every chunk up to the last empty IDAT, but those */
        size_t len = 12 + (size_t)cdb_img_be32(b + i);
        if (memcmp(b + i + 4, "IDAT", 4)) {
            memcpy(c + o, b + i, len);
            o += len;
        }
        i += len;
    }
    memcpy(c + o, b + cut_end, n - cut_end);
    *n_out = o + (n - cut_end);
    return c;
}

cdb_status cdb_img_stb_decode(const uint8_t *b, size_t n, const img_info *ii, const img_opts *o,
                              cdb_image **out /* OUT */) {
    uint8_t *fixed = NULL;
    size_t n_fixed = 0;
    if (ii->fmt == FMT_PNG && n > 8 && (fixed = png_without_leading_empty_idat(b, n, &n_fixed))) {
        cdb_status rc = cdb_img_stb_decode(fixed, n_fixed, ii, o, out);
        cdb_free(fixed);
        return rc;
    }
    cdb_status rc = CDB_OK;
    cdb_image *img = NULL;
    int w = 0, h = 0, got = 0, want = ii->want_channels, is16;
    void *pix = NULL;

    *out = NULL;
    if (want < 0 || want > 4)
        return cdb_seterr(CDB_UNSUPPORTED, "%s: %d channels", cdb_img_fmt_name(ii->fmt), want);
    is16 = (ii->fmt == FMT_PNG || ii->fmt == FMT_PNM) && stbi_is_16_bit_from_memory(b, (int)n);
    g_stb_cap = (size_t)ii->decl_w * (size_t)ii->decl_h * 16 + n + 65536;
    g_stb_capped = 0;
    if (is16)
        pix = stbi_load_16_from_memory(b, (int)n, &w, &h, &got, want);
    else
        pix = stbi_load_from_memory(b, (int)n, &w, &h, &got, want);
    g_stb_cap = 0;
    if (!pix && g_stb_capped)
        return cdb_seterr(CDB_CORRUPT, "%s: the data decodes to more than %lldx%lld needs (a "
                          "zlib bomb?)", cdb_img_fmt_name(ii->fmt), (long long)ii->decl_w,
                          (long long)ii->decl_h);
    if (!pix) return stb_error(ii->fmt);
    if (want == 0) want = got; /* the format's own count */
    if (want < 1 || want > 4 || (int64_t)w * h > o->max_pixels || w != ii->decl_w ||
        h != ii->decl_h) {
        stbi_image_free(pix);
        return cdb_seterr(CDB_CORRUPT, "%s: decoder returned %dx%d with %d channels",
                          cdb_img_fmt_name(ii->fmt), w, h, want);
    }

    img = cdb_calloc(1, sizeof *img);
    if (!img) {
        stbi_image_free(pix);
        return cdb_seterr(CDB_NOMEM, "image: out of memory");
    }
    img->width = img->full_width = w;
    img->height = img->full_height = h;
    img->channels = want;
    img->bits = is16 ? 16 : 8;
    img->is_palette = ii->is_palette;
    img->pixels = pix;
    img->format = cdb_img_fmt_name(ii->fmt);
    img->source = "decoded";
    img->scale_denom = 1;

    if (ii->fmt == FMT_GIF && ii->gif_trans >= 0) {
        uint8_t *q = pix;
        for (size_t i = 0; i < (size_t)w * h; i++, q += 4)
            if (q[3] == 0) memcpy(q, ii->gif_rgb, 3);
    }
    if (ii->fmt == FMT_PNM && is16) {
        /* PNM samples are big-endian; stb 2.27 returns them unswapped (later stb
        ** versions swap). Decide from the first sample whose two bytes differ. */
        uint16_t *q = pix;
        size_t ns = (size_t)w * h * img->channels;
        for (size_t i = 0; i < ns; i++) {
            const uint8_t *f = b + ii->pnm_data + 2 * i;
            if (f[0] == f[1]) continue;
            if (q[i] != (uint16_t)(f[0] << 8 | f[1]))
                for (size_t k = 0; k < ns; k++) q[k] = (uint16_t)(q[k] << 8 | q[k] >> 8);
            break;
        }
    }
    if (ii->fmt == FMT_PNM && ii->pnm_maxval != 255 &&
        !(ii->pnm_maxval == 65535 && img->channels == 1)) {
        /* PIL 9.4's PpmDecoder: min(out_max, round(v / maxval * out_max)) in double
        ** with Python's round half to even (rint), out_max = 65535 for gray with
        ** maxval > 255 (mode "I"), else 255. */
        size_t ns = (size_t)w * h * img->channels;
        int out16 = img->channels == 1 && ii->pnm_maxval > 255;
        double mv = ii->pnm_maxval, omax = out16 ? 65535.0 : 255.0;
        void *d = cdb_malloc(ns * (out16 ? 2 : 1));
        if (!d) {
            rc = cdb_seterr(CDB_NOMEM, "image: out of memory");
            goto done;
        }
        for (size_t i = 0; i < ns; i++) {
            unsigned v = is16 ? ((uint16_t *)pix)[i] : ((uint8_t *)pix)[i];
            double r = rint((double)v / mv * omax);
            if (r > omax) r = omax;
            if (out16)
                ((uint16_t *)d)[i] = (uint16_t)r;
            else
                ((uint8_t *)d)[i] = (uint8_t)r;
        }
        cdb_free(pix);
        img->pixels = d;
        img->bits = out16 ? 16 : 8;
    }
    if (o->apply_exif && ii->orientation >= 2) rc = cdb_img_orient(img, ii->orientation);

done:
    if (rc != CDB_OK) {
        cdb_image_free(img);
        return rc;
    }
    *out = img;
    return CDB_OK;
}
