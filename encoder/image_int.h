/*
** image_int.h: private interface of the encoder's IMAGE section, between image.c
** (sniffing, the declared-size checks, EXIF orientation, the public API) and one
** file per decoder family:
**
**   image_jpeg.c   JPEG through libjpeg-turbo with PIL 9.4's decoder settings
**   image_png.c    PNG's everyday case (8-bit, not palette, not interlaced) through
**                  libdeflate
**   image_stb.c    the other PNGs, GIF, BMP, TGA, PSD, PNM through stb_image (header
**                  scans and payload bounds in image_scan.c)
**   image_webp.c   WebP (libwebp)            image_tiff.c   TIFF (libtiff)
**   image_heif.c   HEIC/HEIF/AVIF (libheif)  image_raw.c    camera RAW (libraw)
**
** Contract every decoder keeps: the size comes from the header and is checked with
** cdb_img_check_size() before any pixel buffer exists; on error nothing is left
** allocated and *out stays NULL; errors are one line naming the format. A format
** the build lacks is still sniffed, and refused with "<FMT>: this clipdb was built
** without <lib>" (CDB_UNSUPPORTED).
** Not installed; only encoder/image*.c include it.
*/
#ifndef CDB_ENCODER_IMAGE_INT_H
#define CDB_ENCODER_IMAGE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "encoder/encoder.h"

#define IMG_MAX_FILE_BYTES ((int64_t)1 << 30) /* stb takes an int length */
#define IMG_MAX_SIDE (1 << 24)                  /* stb's STBI_MAX_DIMENSIONS */

/* Unaligned big- and little-endian reads of the formats' headers and chunks. */
static inline uint32_t cdb_img_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint32_t cdb_img_le32(const uint8_t *p) {
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}
static inline unsigned cdb_img_be16(const uint8_t *p) { return (unsigned)p[0] << 8 | p[1]; }
static inline unsigned cdb_img_le16(const uint8_t *p) { return (unsigned)p[1] << 8 | p[0]; }

typedef enum img_fmt {
    FMT_UNKNOWN = 0,
    FMT_JPEG,
    FMT_PNG,
    FMT_GIF,
    FMT_BMP,
    FMT_PNM,
    FMT_TGA,
    FMT_PSD,
    FMT_WEBP,
    FMT_TIFF,
    FMT_HEIF, /* HEIC and other HEIF brands */
    FMT_AVIF,
    FMT_RAW   /* camera RAW in its own container (CR3, RAF, ORF, RW2...); TIFF-based RAW
                 files (DNG, CR2, NEF, ARW) are told apart from plain TIFF in image.c */
} img_fmt;

/* The format of buf, from its content (what cdb_image_decode dispatches on). */
img_fmt cdb_img_sniff(const uint8_t *b, size_t n);

/* Static name of a format, as errors and cdb_image.format spell it. */
const char *cdb_img_fmt_name(img_fmt f);

/* What image.c hands every decoder. */
typedef struct img_opts {
    int64_t max_pixels; /* > 0 */
    int apply_exif;
    int fast;           /* cdb_image_params.decode == CDB_DECODE_FAST */
    int target_size;    /* fast mode: the short side is never reduced below this */
    int phash;          /* cdb_image_params.phash */
} img_opts;

/* Saturating w*h against max_pixels and the 2^24 side limit: CDB_TOO_LARGE with a
** message naming fmt, else CDB_OK. Every decoder calls it on the header's size. */
cdb_status cdb_img_check_size(const char *fmt, int64_t w, int64_t h, int64_t max_pixels);

/* A zeroed cdb_image with pixels of w*h*channels*(bits/8) bytes (cdb_malloc), format
** and source filled in; CDB_NOMEM leaves *out NULL. */
cdb_status cdb_img_new(int w, int h, int channels, int bits, const char *format,
                       cdb_image **out /* OUT */);

/* EXIF orientation (1-8; 1 when absent or malformed) from a TIFF-structured block
** (what follows "Exif\0\0" in a JPEG APP1, a WebP EXIF chunk, a PNG eXIf chunk). */
int cdb_img_exif_orientation(const uint8_t *tiff, size_t n);

/* ImageOps.exif_transpose for orientation o (2-8; others are a no-op): replaces
** img's pixels; full_width/full_height follow the swap. CDB_NOMEM keeps img as it was. */
cdb_status cdb_img_orient(cdb_image *img, int o);

/* ---- JPEG (image_jpeg.c) -------------------------------------------------------- */

/* Header facts the JPEG pre-scan finds (markers only, no entropy decoding). */
typedef struct img_jpeg_hdr {
    int64_t w, h;
    int comps;
    int orientation;       /* from the first Exif APP1, 1 when none */
    int64_t min_bits;      /* entropy-coded bits any valid file of this frame holds */
    int progressive;       /* SOF2 (or SOF10) */
    int arithmetic;        /* arithmetic-coded (SOF9, SOF10) */
} img_jpeg_hdr;

/* Walks the markers up to the first scan: refuses what libjpeg-turbo 2.1 cannot
** decode (lossless, hierarchical, 12-bit) with a precise reason, checks segment
** lengths and Huffman tables, reads the size and the EXIF orientation. */
cdb_status cdb_img_jpeg_scan(const uint8_t *b, size_t n, img_jpeg_hdr *h /* OUT */);
cdb_status cdb_img_jpeg_decode(const uint8_t *b, size_t n, const img_opts *o,
                               cdb_image **out /* OUT */);

/* ---- stb formats (image_scan.c + image_stb.c) ------------------------------------- */

/* What the format headers say beyond stb's (w, h, comp). */
typedef struct img_info {
    img_fmt fmt;
    int want_channels; /* channels to ask stb for (0 = stb's own) */
    int is_palette;    /* resize with nearest (PIL "P" or "1") */
    int64_t decl_w, decl_h; /* size the header declares */
    int pnm_maxval;    /* PNM only */
    size_t pnm_data;   /* offset of the first sample */
    int gif_trans;     /* GIF transparent index, -1 none */
    uint8_t gif_rgb[3];/* its colour */
    int png_depth, png_ctype, png_interlace, png_cgbi; /* IHDR; CgBI: Apple's raw deflate */
    int png_plain;     /* decoded by image_png.c (see png_scan) */
    int64_t gif_frame_px;   /* first frame's pixels, -1: no frame found */
    int64_t gif_lzw_bytes;  /* its LZW sub-block payload, as far as the file goes */
    int orientation;        /* PNG eXIf orientation, 1 when none */
    int psd_channels, psd_depth, psd_rle; /* PSD header */
    size_t psd_data;        /* PSD: offset of the image data after the compression word */
} img_info;

/* Header scan of a PNG/GIF/BMP/PNM/TGA/PSD file (ii->fmt set by the caller): the
** declared size, PIL's mode, and the checks that guard stb 2.27's known defects. */
cdb_status cdb_img_stb_scan(const uint8_t *b, size_t n, img_info *ii /* IN/OUT */);
/* Refuses a file too small to hold the image it declares (stb allocates it whole
** and fills what is missing). Runs after the size check. */
cdb_status cdb_img_stb_payload_check(const uint8_t *b, size_t n, const img_info *ii);
/* Decodes with stb (the scans above already ran) into PIL's mode. */
cdb_status cdb_img_stb_decode(const uint8_t *b, size_t n, const img_info *ii, const img_opts *o,
                              cdb_image **out /* OUT */);

/* ---- PNG's everyday case (image_png.c) ---------------------------------------------- */

/* 1 when the scanned file is a PNG that image_png.c decodes (ii->png_plain). */
int cdb_img_png_is_plain(const img_info *ii);
/* Decodes such a PNG (after the scans and the size check) with libdeflate: the same
** pixels, mode and orientation as cdb_img_stb_decode gives it. */
cdb_status cdb_img_png_decode(const uint8_t *b, size_t n, const img_info *ii, const img_opts *o,
                              cdb_image **out /* OUT */);

/* ---- other libraries ----------------------------------------------------------------
** Each probe reads the header only (the stored size, before any orientation);
** each decode does the size check first. */
cdb_status cdb_img_webp_probe(const uint8_t *b, size_t n, int *w, int *h);
/* The first chunk named fourcc of a WebP's RIFF container (b, n: the file) and its size
** in *len; NULL when there is none before the container ends or a chunk overruns it.
** Needs no libwebp. */
const uint8_t *cdb_img_webp_chunk(const uint8_t *b, size_t n, const char *fourcc, size_t *len);
/* The first "EXIF" chunk as a TIFF-structured block (a leading "Exif\0\0", which some
** writers add, skipped); NULL when there is none. */
const uint8_t *cdb_img_webp_exif(const uint8_t *b, size_t n, size_t *len);
cdb_status cdb_img_webp_decode(const uint8_t *b, size_t n, const img_opts *o, cdb_image **out);
cdb_status cdb_img_tiff_probe(const uint8_t *b, size_t n, int *w, int *h);
cdb_status cdb_img_tiff_decode(const uint8_t *b, size_t n, const img_opts *o, cdb_image **out);
cdb_status cdb_img_heif_probe(const uint8_t *b, size_t n, img_fmt f, int *w, int *h);
cdb_status cdb_img_heif_decode(const uint8_t *b, size_t n, img_fmt f, const img_opts *o,
                               cdb_image **out);
cdb_status cdb_img_raw_probe(const uint8_t *b, size_t n, int *w, int *h);
cdb_status cdb_img_raw_decode(const uint8_t *b, size_t n, const img_opts *o, cdb_image **out);
/* The probe and decode of format fmt (tiff, webp, raw) in a build without its library
** (CDB_HAVE_<FMT> 0): both refuse with CDB_UNSUPPORTED, "<NAME>: this clipdb was built
** without <lib>", the decode setting *out = NULL. HEIF's take the format as well. */
#define CDB_IMG_BUILT_WITHOUT(fmt, NAME, lib)                                              \
    cdb_status cdb_img_##fmt##_probe(const uint8_t *b, size_t n, int *w, int *h) {         \
        (void)b, (void)n, (void)w, (void)h;                                               \
        return cdb_seterr(CDB_UNSUPPORTED, NAME ": this clipdb was built without " lib);   \
    }                                                                                     \
    cdb_status cdb_img_##fmt##_decode(const uint8_t *b, size_t n, const img_opts *o,       \
                                      cdb_image **out) {                                  \
        (void)b, (void)n, (void)o;                                                        \
        *out = NULL;                                                                      \
        return cdb_seterr(CDB_UNSUPPORTED, NAME ": this clipdb was built without " lib);   \
    }
/* 1 when the TIFF-structured file is a camera RAW (DNG/CR2/NEF/ARW/...) that libraw
** should open rather than libtiff: a DNGVersion tag, a CR2 signature, or a maker
** name libraw knows in IFD0 with no usable strip/tile image of its own. */
int cdb_img_tiff_is_raw(const uint8_t *b, size_t n);


/* ---- photo metadata (image_meta.c; the format files feed it) -------------------------
** The setters validate before they write: an invalid value leaves the field as it was
** (so a later, valid source can still fill it), and a field already set is kept (the
** first valid source wins: callers go from the strongest source to the weakest). */

/* An EXIF-style date-time, "YYYY:MM:DD HH:MM:SS" (or with '-' in the date, or ISO 8601's
** 'T', as XMP writes it; XMP may append its own offset and fraction, which `iso` = 1
** parses), with optional subsec digits and an "+HH:MM" offset string (NULL: none). */
void cdb_meta_set_taken(cdb_photo_meta *m, cdb_taken_source src, const char *dt, size_t dt_len,
                        const char *subsec, size_t subsec_len, const char *offset,
                        size_t offset_len, int iso);
/* GPS from degrees/minutes/seconds triples and their refs ('N'/'S', 'E'/'W'); alt with
** altref (1: below sea level); has_alt 0 when there is no altitude. */
void cdb_meta_set_gps(cdb_photo_meta *m, const double lat[3], char lat_ref, const double lon[3],
                      char lon_ref);
void cdb_meta_set_alt(cdb_photo_meta *m, double alt, int below_sea_level);
/* A text field (make, model, lens: dst of cap bytes) from len bytes, stopping at a NUL;
** trimmed; bytes that are not UTF-8 are taken as Latin-1. */
void cdb_meta_set_text(char *dst, size_t cap, const char *src, size_t len);

/* Per-library readers (the format's own file): fill what they find, never an error.
** TIFF also hands back IFD0's XMP packet (cdb_malloc'd, NULL when none). */
void cdb_img_tiff_meta(const uint8_t *b, size_t n, cdb_photo_meta *m, uint8_t **xmp,
                       size_t *xmp_len);
void cdb_img_raw_meta(const uint8_t *b, size_t n, cdb_photo_meta *m);
/* HEIF/AVIF: the primary image's first Exif item (the TIFF block after its 4-byte
** offset) and XMP item, each cdb_malloc'd (NULL, 0 when absent); the caller frees. */
void cdb_img_heif_meta_blocks(const uint8_t *b, size_t n, uint8_t **exif, size_t *exif_len,
                              uint8_t **xmp, size_t *xmp_len);

#endif
