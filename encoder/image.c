/*
** image.c: the image decoding API (encoder.h IMAGE section). Sniffs the format from
** the content, runs the format's header scan, refuses decompression bombs from the
** declared size before any decoder allocates, and hands the bytes to the decoder
** file of that format (image_int.h lists them); then applies the EXIF orientation
** the way PIL's ImageOps.exif_transpose does when params ask for it.
**
** Sniffing (by content only; a file name is never consulted):
**   JPEG FF D8 FF; PNG; GIF87a/89a; BM; P1-P7; 8BPS (PSD); RIFF....WEBP;
**   TIFF II*\0 / MM\0* (camera RAW when cdb_img_tiff_is_raw says so: DNG, CR2, NEF,
**   ARW, PEF...); ORF IIRO/IIRS/MMOR, RW2 IIU\0, RAF FUJIFILMCCD-RAW, CRW, MRW, X3F;
**   ISO BMFF "ftyp" with an avif/avis brand -> AVIF, heic/heix/heim/heis/hevc/hevx/
**   mif1/msf1 -> HEIC, crx -> RAW (CR3); TGA last (it has no magic).
**
** Reentrant: no globals except the formats string, built once.
*/
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "encoder/image_int.h"


const char *cdb_img_fmt_name(img_fmt f) {
    switch (f) {
    case FMT_JPEG: return "JPEG";
    case FMT_PNG: return "PNG";
    case FMT_GIF: return "GIF";
    case FMT_BMP: return "BMP";
    case FMT_PNM: return "PNM";
    case FMT_TGA: return "TGA";
    case FMT_PSD: return "PSD";
    case FMT_WEBP: return "WebP";
    case FMT_TIFF: return "TIFF";
    case FMT_HEIF: return "HEIC";
    case FMT_AVIF: return "AVIF";
    case FMT_RAW: return "RAW";
    default: return "unknown";
    }
}

/* ISO BMFF: the ftyp box's major and compatible brands. */
static img_fmt sniff_bmff(const uint8_t *b, size_t n) {
    uint32_t len = cdb_img_be32(b);
    int heif = 0, avif = 0, crx = 0;
    if (len < 16 || len > n) len = (uint32_t)(n < 64 ? n : 64) & ~3u;
    for (uint32_t i = 8; i + 4 <= len; i += 4) {
        const uint8_t *br = b + i;
        if (i == 12) continue; /* minor version */
        if (!memcmp(br, "avif", 4) || !memcmp(br, "avis", 4)) avif = 1;
        if (!memcmp(br, "heic", 4) || !memcmp(br, "heix", 4) || !memcmp(br, "heim", 4) ||
            !memcmp(br, "heis", 4) || !memcmp(br, "hevc", 4) || !memcmp(br, "hevx", 4) ||
            !memcmp(br, "mif1", 4) || !memcmp(br, "msf1", 4))
            heif = 1;
        if (!memcmp(br, "crx ", 4)) crx = 1;
    }
    if (crx) return FMT_RAW;
    if (avif) return FMT_AVIF;
    if (heif) return FMT_HEIF;
    return FMT_UNKNOWN;
}

img_fmt cdb_img_sniff(const uint8_t *b, size_t n) {
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return FMT_JPEG;
    if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8)) return FMT_PNG;
    if (n >= 6 && (!memcmp(b, "GIF87a", 6) || !memcmp(b, "GIF89a", 6))) return FMT_GIF;
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4)) return FMT_WEBP;
    if (n >= 4 && !memcmp(b, "8BPS", 4)) return FMT_PSD;
    if (n >= 8 && (!memcmp(b, "II*\0", 4) || !memcmp(b, "MM\0*", 4) || !memcmp(b, "II+\0", 4) ||
                   !memcmp(b, "MM\0+", 4)))
        return cdb_img_tiff_is_raw(b, n) ? FMT_RAW : FMT_TIFF;
    if (n >= 8 && (!memcmp(b, "IIRO", 4) || !memcmp(b, "IIRS", 4) || !memcmp(b, "MMOR", 4) ||
                   !memcmp(b, "IIU\0", 4)))
        return FMT_RAW;
    if (n >= 16 && (!memcmp(b, "FUJIFILMCCD-RAW", 15) || !memcmp(b + 6, "HEAPCCDR", 8) ||
                    !memcmp(b, "\0MRM", 4) || !memcmp(b, "FOVb", 4)))
        return FMT_RAW;
    if (n >= 16 && !memcmp(b + 4, "ftyp", 4)) {
        img_fmt f = sniff_bmff(b, n);
        if (f != FMT_UNKNOWN) return f;
    }
    if (n >= 2 && b[0] == 'B' && b[1] == 'M') return FMT_BMP;
    if (n >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '7') return FMT_PNM;
    /* TGA has no magic: image type 1, 2, 3, 9, 10, 11 and a sane colour map type. */
    if (n >= 18 && b[1] <= 1 &&
        (b[2] == 1 || b[2] == 2 || b[2] == 3 || b[2] == 9 || b[2] == 10 || b[2] == 11))
        return FMT_TGA;
    return FMT_UNKNOWN;
}

/* The checks a strict sniff adds (cdb_image_sniff): what keeps a text file that starts
** "BM" or "P2" from being taken for an image when its name is no image's. */
static int strong_signature(img_fmt f, const uint8_t *b, size_t n) {
    switch (f) {
    case FMT_UNKNOWN:
    case FMT_TGA: return 0;
    case FMT_BMP: {
        unsigned hs; /* the DIB header's size, the first field after the 14-byte file header */
        if (n < 16) return 1;
        hs = cdb_img_le16(b + 14);
        return hs == 12 || hs == 40 || hs == 52 || hs == 56 || hs == 64 || hs == 108 ||
               hs == 124;
    }
    case FMT_PNM: { /* "P1".."P6", whitespace, then the width's digits or a comment */
        size_t i = 2;
        if (n < 4 || b[1] > '6' || (b[2] != ' ' && b[2] != '\n' && b[2] != '\r' && b[2] != '\t'))
            return 0;
        while (i < n && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t')) i++;
        return i == n || (b[i] >= '0' && b[i] <= '9') || b[i] == '#';
    }
    default: return 1;
    }
}

const char *cdb_image_sniff(const void *buf, size_t n, int strict) {
    img_fmt f = buf ? cdb_img_sniff(buf, n) : FMT_UNKNOWN;
    if (f == FMT_UNKNOWN || (strict && !strong_signature(f, buf, n))) return NULL;
    return cdb_img_fmt_name(f);
}

const char *cdb_image_mime(const void *buf, size_t n) {
    static const struct {
        img_fmt f;
        const char *mime;
    } map[] = {{FMT_JPEG, "image/jpeg"}, {FMT_PNG, "image/png"},   {FMT_GIF, "image/gif"},
               {FMT_BMP, "image/bmp"},   {FMT_TIFF, "image/tiff"}, {FMT_WEBP, "image/webp"},
               {FMT_HEIF, "image/heif"}, {FMT_AVIF, "image/avif"},
               {FMT_PSD, "image/vnd.adobe.photoshop"}, {FMT_PNM, "image/x-portable-anymap"}};
    img_fmt f = buf ? cdb_img_sniff(buf, n) : FMT_UNKNOWN;
    if (!strong_signature(f, buf, n)) return "application/octet-stream";
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].f == f) return map[i].mime;
    return "application/octet-stream"; /* camera RAW */
}

int cdb_image_name_is_image(const char *name) {
    static const char *const exts[] = {
        "jpg", "jpeg", "jpe", "jfif", "png", "apng", "bmp", "dib", "gif", "tga", "icb", "vda",
        "vst", "pnm", "ppm", "pgm", "pbm", "webp", "tif", "tiff", "heic", "heif", "hif", "heics",
        "heifs", "avif", "avifs", "psd",
        /* camera RAW (libraw) */
        "dng", "cr2", "cr3", "crw", "nef", "nrw", "arw", "srf", "sr2", "raf", "orf", "rw2", "pef",
        "srw", "x3f", "3fr", "fff", "iiq", "mrw", "mos", "erf", "kdc", "dcr", "rwl", "mef", "raw",
        NULL};
    const char *dot = name ? strrchr(name, '.') : NULL;
    if (!dot || dot == name || strchr(dot, '/')) return 0;
    for (int i = 0; exts[i]; i++)
        if (!strcasecmp(dot + 1, exts[i])) return 1;
    return 0;
}

/* ---- shared helpers (image_int.h) --------------------------------------------- */

cdb_status cdb_img_check_size(const char *fmt, int64_t w, int64_t h, int64_t max_pixels) {
    int64_t px;
    if (w <= 0 || h <= 0)
        return cdb_seterr(CDB_CORRUPT, "%s: invalid size %lldx%lld", fmt, (long long)w,
                          (long long)h);
    /* Two 32-bit sides (PNG's IHDR) can overflow even an int64 product (found by
    ** fuzz_image): saturate. */
    if (__builtin_mul_overflow(w, h, &px)) px = INT64_MAX;
    if (px > max_pixels)
        return cdb_seterr(CDB_TOO_LARGE, "%s: %lldx%lld = %lld pixels exceeds the limit of %lld "
                          "(decompression bomb?)", fmt, (long long)w, (long long)h,
                          (long long)px, (long long)max_pixels);
    if (w > IMG_MAX_SIDE || h > IMG_MAX_SIDE)
        return cdb_seterr(CDB_TOO_LARGE, "%s: declared size %lldx%lld is absurd", fmt,
                          (long long)w, (long long)h);
    return CDB_OK;
}

cdb_status cdb_img_new(int w, int h, int channels, int bits, const char *format,
                       cdb_image **out /* OUT */) {
    cdb_image *img = cdb_calloc(1, sizeof *img);
    size_t bytes = (size_t)w * (size_t)h * (size_t)channels * (size_t)(bits / 8);
    *out = NULL;
    if (!img) return cdb_seterr(CDB_NOMEM, "%s: out of memory", format);
    img->pixels = cdb_malloc(bytes ? bytes : 1);
    if (!img->pixels) {
        cdb_free(img);
        return cdb_seterr(CDB_NOMEM, "%s: out of memory for %dx%d pixels", format, w, h);
    }
    img->width = img->full_width = w;
    img->height = img->full_height = h;
    img->channels = channels;
    img->bits = bits;
    img->scale_denom = 1;
    img->format = format;
    img->source = "decoded";
    *out = img;
    return CDB_OK;
}

/* Orientation tag from a TIFF block; 1 when absent or malformed. */
int cdb_img_exif_orientation(const uint8_t *t, size_t n) {
    int le;
    uint32_t ifd;
    unsigned count;
    if (n < 8) return 1;
    if (t[0] == 'I' && t[1] == 'I') le = 1;
    else if (t[0] == 'M' && t[1] == 'M') le = 0;
    else return 1;
    if ((le ? cdb_img_le16(t + 2) : cdb_img_be16(t + 2)) != 42) return 1;
    ifd = le ? cdb_img_le32(t + 4) : cdb_img_be32(t + 4);
    if (ifd > n - 2 || ifd < 8) return 1;
    count = le ? cdb_img_le16(t + ifd) : cdb_img_be16(t + ifd);
    for (unsigned i = 0; i < count; i++) {
        size_t e = (size_t)ifd + 2 + (size_t)i * 12;
        unsigned tag, type, v;
        if (e + 12 > n) return 1;
        tag = le ? cdb_img_le16(t + e) : cdb_img_be16(t + e);
        if (tag != 0x0112) continue;
        type = le ? cdb_img_le16(t + e + 2) : cdb_img_be16(t + e + 2);
        if (type == 3) /* SHORT, stored left-justified in the value field */
            v = le ? cdb_img_le16(t + e + 8) : cdb_img_be16(t + e + 8);
        else if (type == 4) /* LONG: tolerated */
            v = le ? cdb_img_le32(t + e + 8) : cdb_img_be32(t + e + 8);
        else
            return 1;
        return (v >= 1 && v <= 8) ? (int)v : 1;
    }
    return 1;
}

/* ImageOps.exif_transpose: out(x, y) = in(sx, sy) per orientation. */
cdb_status cdb_img_orient(cdb_image *img, int o) {
    int w = img->width, h = img->height, ow = (o >= 5) ? h : w, oh = (o >= 5) ? w : h;
    size_t px = (size_t)img->channels * (img->bits / 8);
    uint8_t *src = img->pixels, *dst;
    if (o < 2 || o > 8) return CDB_OK;
    dst = cdb_malloc((size_t)w * h * px);
    if (!dst) return cdb_seterr(CDB_NOMEM, "image: out of memory for EXIF rotation");
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++) {
            int sx, sy;
            switch (o) {
            case 2: sx = w - 1 - x; sy = y; break;          /* FLIP_LEFT_RIGHT */
            case 3: sx = w - 1 - x; sy = h - 1 - y; break;  /* ROTATE_180 */
            case 4: sx = x; sy = h - 1 - y; break;          /* FLIP_TOP_BOTTOM */
            case 5: sx = y; sy = x; break;                  /* TRANSPOSE */
            case 6: sx = y; sy = h - 1 - x; break;          /* ROTATE_270 (90 cw) */
            case 7: sx = w - 1 - y; sy = h - 1 - x; break;  /* TRANSVERSE */
            case 8: sx = w - 1 - y; sy = x; break;          /* ROTATE_90 (90 ccw) */
            default: sx = x; sy = y; break;
            }
            memcpy(dst + ((size_t)y * ow + x) * px, src + ((size_t)sy * w + sx) * px, px);
        }
    cdb_free(img->pixels);
    img->pixels = dst;
    img->width = ow;
    img->height = oh;
    if (o >= 5) {
        int t = img->full_width;
        img->full_width = img->full_height;
        img->full_height = t;
    }
    return CDB_OK;
}

/* ---- public API ------------------------------------------------------------- */

cdb_image_params cdb_image_params_default(void) {
    cdb_image_params p;
    memset(&p, 0, sizeof p);
    p.max_pixels = CDB_IMAGE_DEFAULT_MAX_PIXELS;
    p.apply_exif = 1;
    p.decode = CDB_DECODE_EXACT;
    p.target_size = 0;
    return p;
}

static cdb_status check_buffer(const void *buf, size_t n) {
    if (!buf && n) return cdb_seterr(CDB_INVALID, "image: NULL buffer");
    if (n == 0) return cdb_seterr(CDB_CORRUPT, "image: empty file (0 bytes)");
    if (n > (size_t)IMG_MAX_FILE_BYTES)
        return cdb_seterr(CDB_TOO_LARGE, "image: %zu bytes is over the 1 GiB limit", n);
    return CDB_OK;
}

static cdb_status unknown_format(void) {
    return cdb_seterr(CDB_UNSUPPORTED, "image: not a JPEG, PNG, GIF, BMP, TGA, PSD, PNM, WebP, "
                      "TIFF, HEIC, AVIF or camera RAW file");
}

/* ---- the generated world's mark (encoder.h) -------------------------------------------- */

#define WORLD_MARK_SCAN 4096 /* the mark comes before any table: well inside this */

static int mark_at(const uint8_t *p, size_t len) {
    size_t k = sizeof CDB_IMAGE_WORLD_MARK - 1;
    return len >= k && !memcmp(p, CDB_IMAGE_WORLD_MARK, k);
}

/* JPEG: SOI, then the marker segments before the first table; a COM among them. */
static int jpeg_marked(const uint8_t *b, size_t n) {
    size_t o = 2;
    while (o + 4 <= n) {
        size_t len = (size_t)b[o + 2] << 8 | b[o + 3];
        if (b[o] != 0xFF || len < 2 || o + 2 + len > n) return 0;
        if (b[o + 1] == 0xFE) return mark_at(b + o + 4, len - 2);
        if (b[o + 1] < 0xE0 || b[o + 1] > 0xEF) return 0; /* not APPn: tables, frame */
        o += 2 + len;
    }
    return 0;
}

/* PNG: the signature, then the chunks before IDAT; a tEXt "Software" among them. */
static int png_marked(const uint8_t *b, size_t n) {
    static const char key[] = "Software";
    size_t o = 8;
    while (o + 12 <= n) {
        size_t len = (size_t)b[o] << 24 | (size_t)b[o + 1] << 16 | (size_t)b[o + 2] << 8 | b[o + 3];
        const uint8_t *type = b + o + 4, *data = b + o + 8;
        if (len > n - o - 12 || !memcmp(type, "IDAT", 4)) return 0;
        if (!memcmp(type, "tEXt", 4) && len > sizeof key && !memcmp(data, key, sizeof key))
            return mark_at(data + sizeof key, len - sizeof key);
        o += 12 + len;
    }
    return 0;
}

int cdb_image_world_marked(const void *buf, size_t n) {
    const uint8_t *b = buf;
    if (!buf) return 0;
    if (n > WORLD_MARK_SCAN) n = WORLD_MARK_SCAN;
    if (n >= 4 && b[0] == 0xFF && b[1] == 0xD8) return jpeg_marked(b, n);
    if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8)) return png_marked(b, n);
    return 0;
}

cdb_status cdb_image_probe(const void *buf, size_t n, int *width /* OUT */, int *height /* OUT */) {
    const uint8_t *b = buf;
    cdb_status rc;
    int64_t w = 0, h = 0;
    img_fmt f;
    if (!buf || !width || !height) return cdb_seterr(CDB_INVALID, "image_probe: NULL argument");
    if ((rc = check_buffer(buf, n)) != CDB_OK) return rc;
    f = cdb_img_sniff(b, n);
    switch (f) {
    case FMT_UNKNOWN: return unknown_format();
    case FMT_JPEG: {
        img_jpeg_hdr jh;
        if ((rc = cdb_img_jpeg_scan(b, n, &jh)) != CDB_OK) return rc;
        w = jh.w, h = jh.h;
        break;
    }
    case FMT_WEBP: case FMT_TIFF: case FMT_HEIF: case FMT_AVIF: case FMT_RAW: {
        int iw = 0, ih = 0;
        rc = f == FMT_WEBP   ? cdb_img_webp_probe(b, n, &iw, &ih)
             : f == FMT_TIFF ? cdb_img_tiff_probe(b, n, &iw, &ih)
             : f == FMT_RAW  ? cdb_img_raw_probe(b, n, &iw, &ih)
                             : cdb_img_heif_probe(b, n, f, &iw, &ih);
        if (rc != CDB_OK) return rc;
        w = iw, h = ih;
        break;
    }
    default: {
        img_info ii;
        memset(&ii, 0, sizeof ii);
        ii.fmt = f;
        if ((rc = cdb_img_stb_scan(b, n, &ii)) != CDB_OK) return rc;
        w = ii.decl_w, h = ii.decl_h;
        break;
    }
    }
    if (w <= 0 || h <= 0 || w > INT_MAX || h > INT_MAX)
        return cdb_seterr(CDB_TOO_LARGE, "%s: declared size %lldx%lld is absurd",
                          cdb_img_fmt_name(f), (long long)w, (long long)h);
    *width = (int)w;
    *height = (int)h;
    return CDB_OK;
}

cdb_status cdb_image_decode(const void *buf, size_t n, const cdb_image_params *p,
                            cdb_image **out /* OUT */) {
    cdb_status rc = CDB_OK;
    cdb_image_params prm = p ? *p : cdb_image_params_default();
    const uint8_t *b = buf;
    img_opts o;
    img_fmt f;

    if (!out) return cdb_seterr(CDB_INVALID, "image_decode: NULL out");
    *out = NULL;
    if ((rc = check_buffer(buf, n)) != CDB_OK) return rc;
    if (prm.max_pixels < 0) return cdb_seterr(CDB_INVALID, "image_decode: negative max_pixels");
    if (prm.decode != CDB_DECODE_EXACT && prm.decode != CDB_DECODE_FAST)
        return cdb_seterr(CDB_INVALID, "image_decode: unknown decode mode %d", (int)prm.decode);
    if (prm.target_size < 0 || prm.target_size > 16384)
        return cdb_seterr(CDB_INVALID, "image_decode: target_size %d out of range 0..16384",
                          prm.target_size);
    o.max_pixels = prm.max_pixels ? prm.max_pixels : CDB_IMAGE_DEFAULT_MAX_PIXELS;
    o.apply_exif = prm.apply_exif;
    o.fast = prm.decode == CDB_DECODE_FAST;
    o.target_size = prm.target_size ? prm.target_size : 224;
    o.phash = prm.phash;

    f = cdb_img_sniff(b, n);
    switch (f) {
    case FMT_UNKNOWN: return unknown_format();
    case FMT_JPEG: rc = cdb_img_jpeg_decode(b, n, &o, out); break;
    case FMT_WEBP: rc = cdb_img_webp_decode(b, n, &o, out); break;
    case FMT_TIFF: rc = cdb_img_tiff_decode(b, n, &o, out); break;
    case FMT_RAW: rc = cdb_img_raw_decode(b, n, &o, out); break;
    case FMT_HEIF: case FMT_AVIF: rc = cdb_img_heif_decode(b, n, f, &o, out); break;
    default: {
        img_info ii;
        memset(&ii, 0, sizeof ii);
        ii.fmt = f;
        if ((rc = cdb_img_stb_scan(b, n, &ii)) != CDB_OK) return rc;
        /* Declared size first: nothing is decoded for a bomb. */
        if ((rc = cdb_img_check_size(cdb_img_fmt_name(f), ii.decl_w, ii.decl_h, o.max_pixels)) !=
            CDB_OK)
            return rc;
        if ((rc = cdb_img_stb_payload_check(b, n, &ii)) != CDB_OK) return rc;
        if (cdb_img_png_is_plain(&ii)) rc = cdb_img_png_decode(b, n, &ii, &o, out);
        else rc = cdb_img_stb_decode(b, n, &ii, &o, out);
        break;
    }
    }
    if (rc != CDB_OK) {
        cdb_image_free(*out); /* decoders leave NULL; belt and braces */
        *out = NULL;
        return rc;
    }
    if (!*out || !(*out)->pixels || (*out)->width <= 0 || (*out)->height <= 0 ||
        (int64_t)(*out)->width * (*out)->height > o.max_pixels) {
        cdb_image_free(*out);
        *out = NULL;
        return cdb_seterr(CDB_CORRUPT, "%s: decoder returned no usable image", cdb_img_fmt_name(f));
    }
    return CDB_OK;
}

cdb_status cdb_image_load(const char *path, const cdb_image_params *p, cdb_image **out /* OUT */) {
    cdb_status rc = CDB_OK;
    FILE *f = NULL;
    uint8_t *buf = NULL;
    struct stat st;
    size_t n;
    if (!path || !out) return cdb_seterr(CDB_INVALID, "image_load: NULL argument");
    *out = NULL;
    f = fopen(path, "rb");
    if (!f) return cdb_seterr(errno == ENOENT ? CDB_NOTFOUND : CDB_IO, "%s: %s", path,
                              strerror(errno));
    if (fstat(fileno(f), &st) != 0) {
        rc = cdb_seterr(CDB_IO, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = cdb_seterr(CDB_INVALID, "%s: not a regular file", path);
        goto done;
    }
    if ((int64_t)st.st_size > IMG_MAX_FILE_BYTES) {
        rc = cdb_seterr(CDB_TOO_LARGE, "%s: %lld bytes is over the 1 GiB limit", path,
                        (long long)st.st_size);
        goto done;
    }
    n = (size_t)st.st_size;
    buf = cdb_malloc(n ? n : 1);
    if (!buf) {
        rc = cdb_seterr(CDB_NOMEM, "%s: out of memory (%zu bytes)", path, n);
        goto done;
    }
    if (n && fread(buf, 1, n, f) != n) {
        rc = cdb_seterr(CDB_IO, "%s: %s", path, ferror(f) ? strerror(errno) : "short read");
        goto done;
    }
    rc = cdb_image_decode(buf, n, p, out);
    if (rc != CDB_OK) rc = cdb_errctx(rc, "%s", path);
done:
    if (f) fclose(f);
    cdb_free(buf);
    return rc;
}

void cdb_image_free(cdb_image *img) {
    if (!img) return;
    cdb_free(img->pixels); /* every decoder allocates with cdb_malloc */
    cdb_free(img);
}

/* ---- the formats this build decodes -------------------------------------------- */

static char g_formats[2][512];
static pthread_once_t g_formats_once = PTHREAD_ONCE_INIT;

static void formats_init(void) {
    static const struct { const char *name, *lib; int have; } f[] = {
        {"JPEG", "libjpeg-turbo", 1},
        {"PNG", "stb_image", 1}, {"GIF", "stb_image", 1}, {"BMP", "stb_image", 1},
        {"TGA", "stb_image", 1}, {"PSD", "stb_image", 1}, {"PNM", "stb_image", 1},
        {"WebP", "libwebp", CDB_HAVE_WEBP}, {"TIFF", "libtiff", CDB_HAVE_TIFF},
        {"HEIC", "libheif", CDB_HAVE_HEIF}, {"AVIF", "libheif", CDB_HAVE_HEIF},
        {"RAW", "libraw", CDB_HAVE_RAW},
    };
    for (int d = 0; d < 2; d++) {
        size_t o = 0;
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
            if (!f[i].have) continue;
            o += (size_t)snprintf(g_formats[d] + o, sizeof g_formats[d] - o, "%s%s%s%s%s",
                                  o ? ", " : "", f[i].name, d ? " (" : "", d ? f[i].lib : "",
                                  d ? ")" : "");
        }
    }
}

const char *cdb_image_formats(int detail) {
    pthread_once(&g_formats_once, formats_init);
    return g_formats[detail ? 1 : 0];
}
