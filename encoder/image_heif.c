/*
** image_heif.c: HEIC/HEIF and AVIF through libheif 1.15 (Debian's libheif1, with
** libde265 for HEVC and dav1d/aom for AV1 decoding). The primary image is decoded
** with libheif's defaults: its YCbCr -> RGB conversion (the colour profile's matrix,
** nclx when present), its irot/imir transformations applied, an alpha plane kept
** (RGBA) when the image has one; HDR (10/12-bit) images come out as 8-bit
** (convert_hdr_to_8bit). PIL 9.4 cannot open these formats, so libheif itself is
** the reference (heif-convert gives the same pixels; tests/reference).
**
** Fast mode: libheif has no reduced decode; its cheapest equivalent is the
** file's own thumbnail image (iPhones store a 320x240 one) when that thumbnail's
** short side is at least target_size, otherwise the full decode.
**
** Safety: the primary image's size is checked against max_pixels before decoding,
** and libheif's own maximum image side is set; errors come back as values (no
** longjmp, no global handler). Reentrant: one heif_context per call.
*/
#include <stdio.h>
#include <string.h>

#include "encoder/image_int.h"

#if CDB_HAVE_HEIF
#include <libheif/heif.h>

/* libheif is opened on first use (core.h, cdb_dynlib_open: its codecs' start-up cost
** every clipdb process milliseconds), its entry points called through hf. */
#define HEIF_FNS(X) \
    X(heif_context_alloc) \
    X(heif_context_free) \
    X(heif_context_get_primary_image_handle) \
    X(heif_context_read_from_memory_without_copy) \
    X(heif_context_set_maximum_image_size_limit) \
    X(heif_decode_image) \
    X(heif_decoding_options_alloc) \
    X(heif_decoding_options_free) \
    X(heif_image_get_bits_per_pixel_range) \
    X(heif_image_get_height) \
    X(heif_image_get_plane_readonly) \
    X(heif_image_get_width) \
    X(heif_image_handle_get_height) \
    X(heif_image_handle_get_list_of_metadata_block_IDs) \
    X(heif_image_handle_get_list_of_thumbnail_IDs) \
    X(heif_image_handle_get_metadata) \
    X(heif_image_handle_get_metadata_content_type) \
    X(heif_image_handle_get_metadata_size) \
    X(heif_image_handle_get_thumbnail) \
    X(heif_image_handle_get_width) \
    X(heif_image_handle_has_alpha_channel) \
    X(heif_image_handle_release) \
    X(heif_image_release)
CDB_DYNLIB_LAZY(hf_lib, hf, HEIF_FNS, "libheif", "CLIPDB_LIBHEIF", "libheif.so.1", "libheif.so");

/* CDB_OK once libheif is loaded; else CDB_UNSUPPORTED naming the format and why. */
static cdb_status hf_ready(img_fmt f) {
    cdb_status rc = cdb_dynlib_get(&hf_lib);
    if (rc != CDB_OK) return cdb_seterr(rc, "%s: %s", cdb_img_fmt_name(f), hf_lib.err);
    return CDB_OK;
}

static cdb_status heif_fail(const char *fmt, struct heif_error e, const char *what) {
    cdb_status rc = e.code == heif_error_Memory_allocation_error ? CDB_NOMEM
                    : e.code == heif_error_Unsupported_feature ||
                              e.code == heif_error_Unsupported_filetype ||
                              (e.code == heif_error_Decoder_plugin_error &&
                               e.subcode == heif_suberror_Unsupported_codec)
                        ? CDB_UNSUPPORTED
                        : CDB_CORRUPT;
    return cdb_seterr(rc, "%s: %s (%s)", fmt, what, e.message ? e.message : "libheif error");
}

static cdb_status open_ctx(const uint8_t *b, size_t n, const char *fmt, struct heif_context **ctx,
                           struct heif_image_handle **h) {
    struct heif_error e;
    *h = NULL;
    if (!(*ctx = hf.heif_context_alloc())) return cdb_seterr(CDB_NOMEM, "%s: out of memory", fmt);
    hf.heif_context_set_maximum_image_size_limit(*ctx, IMG_MAX_SIDE);
    e = hf.heif_context_read_from_memory_without_copy(*ctx, b, n, NULL);
    if (e.code != heif_error_Ok) return heif_fail(fmt, e, "cannot read the file");
    e = hf.heif_context_get_primary_image_handle(*ctx, h);
    if (e.code != heif_error_Ok) return heif_fail(fmt, e, "no primary image");
    return CDB_OK;
}

cdb_status cdb_img_heif_probe(const uint8_t *b, size_t n, img_fmt f, int *w, int *h) {
    struct heif_context *ctx = NULL;
    struct heif_image_handle *hd = NULL;
    cdb_status rc = hf_ready(f);
    if (rc != CDB_OK) return rc;
    rc = open_ctx(b, n, cdb_img_fmt_name(f), &ctx, &hd);
    if (rc == CDB_OK) {
        *w = hf.heif_image_handle_get_width(hd);
        *h = hf.heif_image_handle_get_height(hd);
    }
    hf.heif_image_handle_release(hd);
    hf.heif_context_free(ctx);
    return rc;
}

/* The first thumbnail whose short side covers t, or NULL. */
static struct heif_image_handle *pick_thumb(struct heif_image_handle *h, int t) {
    heif_item_id ids[8];
    int k = hf.heif_image_handle_get_list_of_thumbnail_IDs(h, ids, 8);
    for (int i = 0; i < k; i++) {
        struct heif_image_handle *th = NULL;
        if (hf.heif_image_handle_get_thumbnail(h, ids[i], &th).code != heif_error_Ok) continue;
        int tw = hf.heif_image_handle_get_width(th), tt = hf.heif_image_handle_get_height(th);
        if ((tw < tt ? tw : tt) >= t) return th;
        hf.heif_image_handle_release(th);
    }
    return NULL;
}

cdb_status cdb_img_heif_decode(const uint8_t *b, size_t n, img_fmt f, const img_opts *o,
                               cdb_image **out) {
    const char *fmt = cdb_img_fmt_name(f);
    struct heif_context *ctx = NULL;
    struct heif_image_handle *hd = NULL, *use = NULL;
    struct heif_image *im = NULL;
    struct heif_decoding_options *dopt = NULL;
    struct heif_error e;
    cdb_image *img = NULL;
    cdb_status rc;
    int w, h, alpha, ch, stride = 0, fw, fh;
    const uint8_t *plane;

    *out = NULL;
    if ((rc = hf_ready(f)) != CDB_OK) return rc; /* nothing to free: hf is not there */
    if ((rc = open_ctx(b, n, fmt, &ctx, &hd)) != CDB_OK) goto done;
    fw = hf.heif_image_handle_get_width(hd);
    fh = hf.heif_image_handle_get_height(hd);
    if ((rc = cdb_img_check_size(fmt, fw, fh, o->max_pixels)) != CDB_OK) goto done;
    use = hd;
    if (o->fast) {
        struct heif_image_handle *th = pick_thumb(hd, o->target_size);
        if (th) use = th;
    }
    alpha = hf.heif_image_handle_has_alpha_channel(use);
    ch = alpha ? 4 : 3;
    if (!(dopt = hf.heif_decoding_options_alloc())) {
        rc = cdb_seterr(CDB_NOMEM, "%s: out of memory", fmt);
        goto done;
    }
    dopt->convert_hdr_to_8bit = 1;
    e = hf.heif_decode_image(use, &im, heif_colorspace_RGB,
                          alpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB, dopt);
    if (e.code != heif_error_Ok) {
        rc = heif_fail(fmt, e, "cannot decode the image");
        goto done;
    }
    w = hf.heif_image_get_width(im, heif_channel_interleaved);
    h = hf.heif_image_get_height(im, heif_channel_interleaved);
    plane = hf.heif_image_get_plane_readonly(im, heif_channel_interleaved, &stride);
    if (!plane || w <= 0 || h <= 0 || stride < w * ch ||
        hf.heif_image_get_bits_per_pixel_range(im, heif_channel_interleaved) != 8) {
        rc = cdb_seterr(CDB_CORRUPT, "%s: decoder returned no 8-bit RGB image", fmt);
        goto done;
    }
    if ((rc = cdb_img_check_size(fmt, w, h, o->max_pixels)) != CDB_OK) goto done;
    if (use == hd && (w != fw || h != fh)) {
        /* libheif does not compare the coded image with the ispe box (found by
        ** fuzz_image: ispe 4107x12 around a 16x12 AV1 frame) */
        rc = cdb_seterr(CDB_CORRUPT, "%s: the image decodes to %dx%d but its header says %dx%d",
                        fmt, w, h, fw, fh);
        goto done;
    }
    if ((rc = cdb_img_new(w, h, ch, 8, fmt, &img)) != CDB_OK) goto done;
    for (int y = 0; y < h; y++)
        memcpy((uint8_t *)img->pixels + (size_t)y * w * ch, plane + (size_t)y * stride,
               (size_t)w * ch);
    img->source = use == hd ? "primary image" : "thumbnail";
    img->full_width = fw;
    img->full_height = fh;
    if (use != hd) img->scale_denom = fw / (w > 0 ? w : 1) > 0 ? fw / w : 1;
done:
    hf.heif_decoding_options_free(dopt);
    hf.heif_image_release(im);
    if (use && use != hd) hf.heif_image_handle_release(use);
    hf.heif_image_handle_release(hd);
    hf.heif_context_free(ctx);
    if (rc != CDB_OK) {
        cdb_image_free(img);
        return rc;
    }
    *out = img;
    return CDB_OK;
}

/* A metadata item's bytes (at most 16 MiB), cdb_malloc'd; NULL when unreadable. */
static uint8_t *heif_item(const struct heif_image_handle *hd, heif_item_id id, size_t *len) {
    size_t k = hf.heif_image_handle_get_metadata_size(hd, id);
    uint8_t *d;
    if (k == 0 || k > ((size_t)16 << 20) || !(d = cdb_malloc(k))) return NULL;
    if (hf.heif_image_handle_get_metadata(hd, id, d).code != heif_error_Ok) {
        cdb_free(d);
        return NULL;
    }
    *len = k;
    return d;
}

/* The Exif item: ISO/IEC 23008-12 A.2.1 puts a 4-byte offset to the TIFF header first. */
static void heif_exif(const struct heif_image_handle *hd, uint8_t **exif, size_t *exif_len) {
    heif_item_id id;
    size_t k = 0;
    uint8_t *d;
    uint32_t off;
    if (hf.heif_image_handle_get_list_of_metadata_block_IDs(hd, "Exif", &id, 1) != 1) return;
    if (!(d = heif_item(hd, id, &k))) return;
    off = k >= 4 ? cdb_img_be32(d) : UINT32_MAX;
    if (off > k - 4) {
        cdb_free(d);
        return;
    }
    memmove(d, d + 4 + off, k - 4 - off);
    *exif = d, *exif_len = k - 4 - off;
}

void cdb_img_heif_meta_blocks(const uint8_t *b, size_t n, uint8_t **exif, size_t *exif_len,
                              uint8_t **xmp, size_t *xmp_len) {
    struct heif_context *ctx = NULL;
    struct heif_image_handle *hd = NULL;
    heif_item_id id;
    const char *type;
    *exif = *xmp = NULL;
    *exif_len = *xmp_len = 0;
    if (hf_ready(FMT_HEIF) != CDB_OK) { /* the decode says why; metadata is only lost */
        cdb_clearerr();
        return;
    }
    if (open_ctx(b, n, "HEIF", &ctx, &hd) == CDB_OK) {
        heif_exif(hd, exif, exif_len);
        if (hf.heif_image_handle_get_list_of_metadata_block_IDs(hd, "mime", &id, 1) == 1 &&
            (type = hf.heif_image_handle_get_metadata_content_type(hd, id)) != NULL &&
            !strcmp(type, "application/rdf+xml"))
            *xmp = heif_item(hd, id, xmp_len);
    }
    if (hd) hf.heif_image_handle_release(hd);
    if (ctx) hf.heif_context_free(ctx);
}

#else /* !CDB_HAVE_HEIF */

void cdb_img_heif_meta_blocks(const uint8_t *b, size_t n, uint8_t **exif, size_t *exif_len,
                              uint8_t **xmp, size_t *xmp_len) {
    (void)b, (void)n;
    *exif = *xmp = NULL;
    *exif_len = *xmp_len = 0;
}

cdb_status cdb_img_heif_probe(const uint8_t *b, size_t n, img_fmt f, int *w, int *h) {
    (void)b, (void)n, (void)w, (void)h;
    return cdb_seterr(CDB_UNSUPPORTED, "%s: this clipdb was built without libheif",
                      cdb_img_fmt_name(f));
}
cdb_status cdb_img_heif_decode(const uint8_t *b, size_t n, img_fmt f, const img_opts *o,
                               cdb_image **out) {
    (void)b, (void)n, (void)o;
    *out = NULL;
    return cdb_seterr(CDB_UNSUPPORTED, "%s: this clipdb was built without libheif",
                      cdb_img_fmt_name(f));
}
#endif
