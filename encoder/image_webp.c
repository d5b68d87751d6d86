/*
** image_webp.c: WebP through libwebp 1.2 (Debian's libwebp7/libwebpdemux2, the
** libraries Debian 12's PIL 9.4 links), decoded as PIL's WebPImagePlugin does when
** its animation support is built (Debian's is): WebPAnimDecoder with default
** options (MODE_RGBA, fancy upsampling, no threads) composes the first frame on
** its canvas; mode RGBA when WebPGetFeatures reports alpha, else RGB (PIL's rawmode
** "RGBX", the fourth byte dropped). So lossy, lossless and animated files give PIL's
** pixels. The EXIF chunk's orientation is applied like exif_transpose.
**
** Fast mode (still images only): WebPDecode with libwebp's built-in rescaler to
** 1/2, 1/4 or 1/8 (PIL's draft rule: the short side stays >= target_size) and
** simple upsampling; not PIL's pixels (docs/images.md has the measured difference).
**
** Bombs: the canvas size from the header (WebPGetFeatures / the VP8X chunk) is
** checked before libwebp allocates anything. Reentrant.
*/
#include <string.h>

#include "encoder/image_int.h"

/* ---- the RIFF container (no libwebp needed: photo_meta reads it too) ---------------- */

const uint8_t *cdb_img_webp_chunk(const uint8_t *b, size_t n, const char *fourcc, size_t *len) {
    size_t i = 12;
    if (n < 12) return NULL;
    if (8 + (size_t)cdb_img_le32(b + 4) < n) n = 8 + (size_t)cdb_img_le32(b + 4); /* RIFF's end */
    while (i + 8 <= n) {
        uint32_t l = cdb_img_le32(b + i + 4);
        if (l > n - i - 8) return NULL;
        if (!memcmp(b + i, fourcc, 4)) {
            *len = l;
            return b + i + 8;
        }
        i += 8 + (size_t)l + (l & 1); /* chunks are padded to an even size */
    }
    return NULL;
}

const uint8_t *cdb_img_webp_exif(const uint8_t *b, size_t n, size_t *len) {
    const uint8_t *t = cdb_img_webp_chunk(b, n, "EXIF", len);
    if (t && *len >= 6 && !memcmp(t, "Exif\0\0", 6)) t += 6, *len -= 6;
    return t;
}

#if CDB_HAVE_WEBP
#include <webp/decode.h>
#include <webp/demux.h>

cdb_status cdb_img_webp_probe(const uint8_t *b, size_t n, int *w, int *h) {
    WebPBitstreamFeatures ft;
    VP8StatusCode st = WebPGetFeatures(b, n, &ft);
    if (st != VP8_STATUS_OK)
        return cdb_seterr(st == VP8_STATUS_UNSUPPORTED_FEATURE ? CDB_UNSUPPORTED : CDB_CORRUPT,
                          "WebP: bad header (libwebp status %d)", (int)st);
    *w = ft.width;
    *h = ft.height;
    return CDB_OK;
}

/* The EXIF chunk's orientation (raw TIFF, or "Exif\0\0" + TIFF as some writers do). */
static int webp_orientation(const uint8_t *b, size_t n) {
    size_t len = 0;
    const uint8_t *t = cdb_img_webp_exif(b, n, &len);
    return t ? cdb_img_exif_orientation(t, len) : 1;
}

static int draft_scale(int w, int h, int t) {
    int k = w / t < h / t ? w / t : h / t;
    return k >= 8 ? 8 : k >= 4 ? 4 : k >= 2 ? 2 : 1;
}

/* Fast path for a still image: libwebp's rescaler during decoding. */
static cdb_status decode_scaled(const uint8_t *b, size_t n, const WebPBitstreamFeatures *ft,
                                int s, cdb_image **out) {
    WebPDecoderConfig cfg;
    cdb_image *img = NULL;
    int ch = ft->has_alpha ? 4 : 3, w = (ft->width + s - 1) / s, h = (ft->height + s - 1) / s;
    cdb_status rc;
    VP8StatusCode st;
    if (!WebPInitDecoderConfig(&cfg)) return cdb_seterr(CDB_ERROR, "WebP: libwebp ABI mismatch");
    if ((rc = cdb_img_new(w, h, ch, 8, "WebP", &img)) != CDB_OK) return rc;
    cfg.options.use_scaling = 1;
    cfg.options.scaled_width = w;
    cfg.options.scaled_height = h;
    cfg.options.no_fancy_upsampling = 1;
    cfg.output.colorspace = ch == 4 ? MODE_RGBA : MODE_RGB;
    cfg.output.is_external_memory = 1;
    cfg.output.u.RGBA.rgba = img->pixels;
    cfg.output.u.RGBA.stride = w * ch;
    cfg.output.u.RGBA.size = (size_t)w * h * ch;
    st = WebPDecode(b, n, &cfg);
    WebPFreeDecBuffer(&cfg.output);
    if (st != VP8_STATUS_OK) {
        cdb_image_free(img);
        return cdb_seterr(st == VP8_STATUS_OUT_OF_MEMORY ? CDB_NOMEM : CDB_CORRUPT,
                          "WebP: decoding failed (libwebp status %d%s)", (int)st,
                          st == VP8_STATUS_NOT_ENOUGH_DATA ? ": truncated" : "");
    }
    img->full_width = ft->width;
    img->full_height = ft->height;
    img->scale_denom = s;
    *out = img;
    return CDB_OK;
}

cdb_status cdb_img_webp_decode(const uint8_t *b, size_t n, const img_opts *o, cdb_image **out) {
    WebPBitstreamFeatures ft;
    WebPData data = {b, n};
    WebPAnimDecoder *dec = NULL;
    WebPAnimInfo info;
    cdb_image *img = NULL;
    cdb_status rc = CDB_OK;
    VP8StatusCode st;
    uint8_t *frame = NULL;
    int ts = 0, ch, orient;

    *out = NULL;
    if ((st = WebPGetFeatures(b, n, &ft)) != VP8_STATUS_OK)
        return cdb_seterr(st == VP8_STATUS_UNSUPPORTED_FEATURE ? CDB_UNSUPPORTED : CDB_CORRUPT,
                          "WebP: bad header (libwebp status %d%s)", (int)st,
                          st == VP8_STATUS_NOT_ENOUGH_DATA ? ": truncated" : "");
    if ((rc = cdb_img_check_size("WebP", ft.width, ft.height, o->max_pixels)) != CDB_OK) return rc;
    orient = o->apply_exif ? webp_orientation(b, n) : 1;
    if (o->fast && !ft.has_animation) {
        int s = draft_scale(ft.width, ft.height, o->target_size);
        if (s > 1) {
            if ((rc = decode_scaled(b, n, &ft, s, &img)) != CDB_OK) return rc;
            goto oriented;
        }
    }
    ch = ft.has_alpha ? 4 : 3;
    dec = WebPAnimDecoderNew(&data, NULL); /* PIL passes no options: MODE_RGBA */
    if (!dec) return cdb_seterr(CDB_CORRUPT, "WebP: cannot parse the file (corrupt or truncated)");
    if (!WebPAnimDecoderGetInfo(dec, &info) || (int)info.canvas_width != ft.width ||
        (int)info.canvas_height != ft.height) {
        rc = cdb_seterr(CDB_CORRUPT, "WebP: canvas size disagrees with the header");
        goto done;
    }
    if (!WebPAnimDecoderGetNext(dec, &frame, &ts) || !frame) {
        rc = cdb_seterr(CDB_CORRUPT, "WebP: cannot decode the first frame (corrupt or truncated)");
        goto done;
    }
    if ((rc = cdb_img_new(ft.width, ft.height, ch, 8, "WebP", &img)) != CDB_OK) goto done;
    if (ch == 4) {
        memcpy(img->pixels, frame, (size_t)ft.width * ft.height * 4);
    } else {
        uint8_t *d = img->pixels;
        for (size_t i = 0; i < (size_t)ft.width * ft.height; i++) memcpy(d + 3 * i, frame + 4 * i, 3);
    }
    if (info.frame_count > 1) img->source = "first frame";
oriented:
    if (orient >= 2) rc = cdb_img_orient(img, orient);
done:
    WebPAnimDecoderDelete(dec);
    if (rc != CDB_OK) {
        cdb_image_free(img);
        return rc;
    }
    *out = img;
    return CDB_OK;
}

#else /* !CDB_HAVE_WEBP */

CDB_IMG_BUILT_WITHOUT(webp, "WebP", "libwebp")
#endif
