/*
** image_tiff.c: TIFF (first page) through libtiff 4.5 (Debian's libtiff6, the
** library Debian 12's PIL 9.4 decodes compressed TIFFs with), unpacked into the mode
** PIL's TiffImagePlugin gives the file, so the pixels are PIL's:
**
**   gray 1-bit -> "1" (nearest resize); 2/4/8-bit -> L (2/4-bit scaled by 85/17,
**   MINISWHITE inverted); 16-bit gray kept 16-bit (the high byte is used, see
**   docs/images.md); RGB 8-bit -> RGB; 16-bit RGB -> RGB from the high byte (PIL's
**   "RGB;16B/N" unpackers); RGB + unassociated alpha -> RGBA; + associated alpha
**   -> RGBA un-premultiplied as PIL's "RGBa" unpacker; + unspecified extra sample ->
**   RGB (PIL's "RGBX": the fourth byte never reaches convert("RGB")); palette 1-8 bit
**   -> P (colormap >> 8); CMYK 8-bit (SEPARATED) -> CMYK; YCbCr: JPEG-compressed
**   read with JPEGCOLORMODE_RGB (libjpeg converts, as in PIL), others through
**   TIFFReadRGBAImage as PIL's _decodeAsRGBA does. Strips or tiles, contiguous or
**   separate planes. Other layouts (float, 32-bit, Lab...) are CDB_UNSUPPORTED.
**   The Orientation tag (274) is always applied, once: PIL 9.4 applies it itself when
**   it loads a TIFF (TiffImageFile.load_end), so the reference pipeline sees the
**   rotated picture (ImageOps.exif_transpose would then rotate it a second time, a
**   PIL bug clipdb does not copy).
**
** Safety: libtiff reports through per-handle handlers (TIFFOpenOptions, 4.5), never
** a global one, and its single allocations are capped; the size is checked against
** max_pixels, and the file size against the data it must hold (uncompressed: all
** of it; compressed: 1/4096 of it), before any pixel buffer exists. Reentrant.
*/
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "encoder/image_int.h"

static uint32_t rd32(const uint8_t *p, int le) {
    return le ? (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0]
              : (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static unsigned rd16(const uint8_t *p, int le) {
    return le ? (unsigned)p[1] << 8 | p[0] : (unsigned)p[0] << 8 | p[1];
}

/* IFD0 of a classic TIFF: a DNGVersion tag, CR2's "CR" signature, or a camera make
** with SubIFDs (NEF, ARW, PEF, SRW...) or a CFA photometric mark a camera RAW file. */
int cdb_img_tiff_is_raw(const uint8_t *b, size_t n) {
    int le = b[0] == 'I', make = 0, subifd = 0, cfa = 0;
    uint32_t ifd;
    unsigned count;
    if (n < 16 || rd16(b + 2, le) != 42) return 0;
    if (n >= 10 && b[8] == 'C' && b[9] == 'R') return 1; /* CR2 */
    ifd = rd32(b + 4, le);
    if (ifd < 8 || ifd > n - 2) return 0;
    count = rd16(b + ifd, le);
    for (unsigned i = 0; i < count; i++) {
        size_t e = (size_t)ifd + 2 + (size_t)i * 12;
        unsigned tag;
        if (e + 12 > n) break;
        tag = rd16(b + e, le);
        if (tag == 50706) return 1; /* DNGVersion */
        if (tag == 0x010F) make = 1;
        if (tag == 0x014A) subifd = 1;
        if (tag == 0x0106) {
            unsigned v = rd16(b + e + 8, le);
            if (v == 32803 || v == 34892) cfa = 1; /* CFA, LinearRaw */
        }
    }
    return make && (subifd || cfa);
}

#if CDB_HAVE_TIFF
#include <tiffio.h>

/* libtiff is opened on first use (core.h, cdb_dynlib_open: it and the libraries it pulls
** in, Lerc, JBIG, zstd, lzma, cost every clipdb process ~1.5 ms of loading although
** few commands decode a TIFF), its entry points called through tf. */
#define TIFF_FNS(X) \
    X(TIFFClientOpenExt) \
    X(TIFFClose) \
    X(TIFFComputeStrip) \
    X(TIFFFieldSetGetSize) \
    X(TIFFFieldWithTag) \
    X(TIFFGetField) \
    X(TIFFGetFieldDefaulted) \
    X(TIFFIsTiled) \
    X(TIFFOpenOptionsAlloc) \
    X(TIFFOpenOptionsFree) \
    X(TIFFOpenOptionsSetErrorHandlerExtR) \
    X(TIFFOpenOptionsSetMaxSingleMemAlloc) \
    X(TIFFOpenOptionsSetWarningHandlerExtR) \
    X(TIFFReadEXIFDirectory) \
    X(TIFFReadEncodedStrip) \
    X(TIFFReadGPSDirectory) \
    X(TIFFReadRGBAImageOriented) \
    X(TIFFReadTile) \
    X(TIFFScanlineSize64) \
    X(TIFFSetField) \
    X(TIFFStripSize) \
    X(TIFFTileRowSize) \
    X(TIFFTileSize)
CDB_DYNLIB_LAZY(tf_lib, tf, TIFF_FNS, "libtiff", "CLIPDB_LIBTIFF", "libtiff.so.6", "libtiff.so");

typedef struct tmem {
    const uint8_t *b;
    toff_t n, pos;
    char err[256];
    cdb_status load_rc; /* libtiff could not be loaded (err says why) */
} tmem;

static tsize_t m_read(thandle_t h, tdata_t d, tsize_t k) {
    tmem *m = (tmem *)h;
    toff_t left = m->pos < m->n ? m->n - m->pos : 0;
    if (k < 0) return -1;
    if ((toff_t)k > left) k = (tsize_t)left;
    memcpy(d, m->b + m->pos, (size_t)k);
    m->pos += (toff_t)k;
    return k;
}
static tsize_t m_write(thandle_t h, tdata_t d, tsize_t k) { (void)h, (void)d, (void)k; return -1; }
static toff_t m_seek(thandle_t h, toff_t off, int whence) {
    tmem *m = (tmem *)h;
    toff_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? m->pos : m->n;
    if (off > (toff_t)1 << 62) return (toff_t)-1;
    m->pos = base + off;
    return m->pos;
}
static int m_close(thandle_t h) { (void)h; return 0; }
static toff_t m_size(thandle_t h) { return ((tmem *)h)->n; }
static int m_map(thandle_t h, tdata_t *base, toff_t *size) {
    tmem *m = (tmem *)h;
    *base = (tdata_t)m->b;
    *size = m->n;
    return 1;
}
static void m_unmap(thandle_t h, tdata_t base, toff_t size) { (void)h, (void)base, (void)size; }

static int on_error(TIFF *t, void *ud, const char *module, const char *fmt, va_list ap) {
    tmem *m = ud;
    (void)t;
    if (!m->err[0]) {
        int k = snprintf(m->err, sizeof m->err, "%s: ", module ? module : "libtiff");
        if (k > 0 && (size_t)k < sizeof m->err) vsnprintf(m->err + k, sizeof m->err - k, fmt, ap);
    }
    return 1;
}
static int on_warning(TIFF *t, void *ud, const char *module, const char *fmt, va_list ap) {
    (void)t, (void)ud, (void)module, (void)fmt, (void)ap;
    return 1;
}

static TIFF *open_mem(tmem *m, const uint8_t *b, size_t n, int64_t max_alloc) {
    TIFFOpenOptions *op;
    TIFF *t;
    memset(m, 0, sizeof *m);
    m->b = b;
    m->n = n;
    if ((m->load_rc = cdb_dynlib_get(&tf_lib)) != CDB_OK) {
        snprintf(m->err, sizeof m->err, "%.250s", tf_lib.err);
        return NULL;
    }
    op = tf.TIFFOpenOptionsAlloc();
    if (!op) return NULL;
    tf.TIFFOpenOptionsSetErrorHandlerExtR(op, on_error, m);
    tf.TIFFOpenOptionsSetWarningHandlerExtR(op, on_warning, m);
    tf.TIFFOpenOptionsSetMaxSingleMemAlloc(op, (tmsize_t)max_alloc);
    /* "m": no memory-mapping of our own buffer beyond what m_map gives; "h": header only */
    t = tf.TIFFClientOpenExt("tiff", "rm", (thandle_t)m, m_read, m_write, m_seek, m_close, m_size,
                          m_map, m_unmap, op);
    tf.TIFFOpenOptionsFree(op);
    return t;
}

static cdb_status tiff_fail(const tmem *m, cdb_status rc, const char *what) {
    if (m->load_rc != CDB_OK) return cdb_seterr(m->load_rc, "TIFF: %s", m->err);
    return cdb_seterr(rc, "TIFF: %s%s%s", what, m->err[0] ? " (" : "", m->err[0] ? m->err : "");
}

cdb_status cdb_img_tiff_probe(const uint8_t *b, size_t n, int *w, int *h) {
    tmem m;
    uint32_t tw = 0, th = 0;
    TIFF *t = open_mem(&m, b, n, (int64_t)64 << 20);
    if (!t) return tiff_fail(&m, CDB_CORRUPT, "cannot read the header");
    tf.TIFFGetField(t, TIFFTAG_IMAGEWIDTH, &tw);
    tf.TIFFGetField(t, TIFFTAG_IMAGELENGTH, &th);
    tf.TIFFClose(t);
    if (tw == 0 || th == 0 || tw > (1u << 30) || th > (1u << 30))
        return cdb_seterr(CDB_CORRUPT, "TIFF: invalid size %ux%u", tw, th);
    *w = (int)tw;
    *h = (int)th;
    return CDB_OK;
}

/* Reads every row of every plane into buf (planes x h x row_bytes, packed as stored). */
static cdb_status read_raw(TIFF *t, const tmem *m, uint32_t w, uint32_t h, int planes,
                           size_t row_bytes, uint8_t *buf) {
    uint8_t *tmp = NULL;
    cdb_status rc = CDB_OK;
    if (tf.TIFFIsTiled(t)) {
        uint32_t tw = 0, th = 0;
        tmsize_t ts = tf.TIFFTileSize(t), trow = tf.TIFFTileRowSize(t);
        tf.TIFFGetField(t, TIFFTAG_TILEWIDTH, &tw);
        tf.TIFFGetField(t, TIFFTAG_TILELENGTH, &th);
        if (tw == 0 || th == 0 || ts <= 0 || trow <= 0)
            return tiff_fail(m, CDB_CORRUPT, "bad tile layout");
        if (!(tmp = cdb_malloc((size_t)ts))) return cdb_seterr(CDB_NOMEM, "TIFF: out of memory");
        for (int p = 0; p < planes; p++)
            for (uint32_t y = 0; y < h; y += th)
                for (uint32_t x = 0; x < w; x += tw) {
                    /* tile widths are multiples of 16: x starts on a byte boundary */
                    size_t xoff = (size_t)((uint64_t)x * row_bytes / w), ncopy;
                    if (tf.TIFFReadTile(t, tmp, x, y, 0, (uint16_t)p) < 0) {
                        rc = tiff_fail(m, CDB_CORRUPT, "cannot read a tile");
                        goto done;
                    }
                    ncopy = x + tw >= w ? row_bytes - xoff : (size_t)trow;
                    if (ncopy > (size_t)trow) ncopy = (size_t)trow;
                    for (uint32_t r = 0; r < th && y + r < h; r++)
                        memcpy(buf + ((size_t)p * h + y + r) * row_bytes + xoff,
                               tmp + (size_t)r * (size_t)trow, ncopy);
                }
    } else {
        uint32_t rps = 0;
        tmsize_t ss = tf.TIFFStripSize(t);
        tf.TIFFGetFieldDefaulted(t, TIFFTAG_ROWSPERSTRIP, &rps);
        if (rps == 0 || rps > h) rps = h;
        if (ss <= 0) return tiff_fail(m, CDB_CORRUPT, "bad strip layout");
        if (!(tmp = cdb_malloc((size_t)ss))) return cdb_seterr(CDB_NOMEM, "TIFF: out of memory");
        for (int p = 0; p < planes; p++)
            for (uint32_t y = 0; y < h; y += rps) {
                uint32_t rows = h - y < rps ? h - y : rps;
                tmsize_t got = tf.TIFFReadEncodedStrip(t, tf.TIFFComputeStrip(t, y, (uint16_t)p), tmp,
                                                    (tmsize_t)(rows * row_bytes));
                if (got < (tmsize_t)(rows * row_bytes)) {
                    rc = tiff_fail(m, CDB_CORRUPT, "cannot read a strip (corrupt or truncated)");
                    goto done;
                }
                memcpy(buf + ((size_t)p * h + y) * row_bytes, tmp, (size_t)rows * row_bytes);
            }
    }
done:
    cdb_free(tmp);
    return rc;
}

static unsigned sample(const uint8_t *row, uint32_t i, int bits) {
    switch (bits) {
    case 8: return row[i];
    case 16: return (unsigned)row[2 * i] | (unsigned)row[2 * i + 1] << 8; /* host order */
    default: {
        uint32_t bit = i * (uint32_t)bits;
        return (row[bit >> 3] >> (8 - bits - (bit & 7))) & ((1u << bits) - 1);
    }
    }
}

/* PIL's decode through TIFFRGBAImage (YCbCr without JPEG): ABGR words, oriented top-left. */
static cdb_status decode_rgba(TIFF *t, const tmem *m, uint32_t w, uint32_t h, cdb_image **out) {
    cdb_image *img = NULL;
    uint32_t *rgba = NULL;
    cdb_status rc;
    if ((rc = cdb_img_new((int)w, (int)h, 3, 8, "TIFF", &img)) != CDB_OK) return rc;
    if (!(rgba = cdb_malloc((size_t)w * h * 4))) {
        cdb_image_free(img);
        return cdb_seterr(CDB_NOMEM, "TIFF: out of memory");
    }
    if (!tf.TIFFReadRGBAImageOriented(t, w, h, rgba, ORIENTATION_TOPLEFT, 0)) {
        cdb_free(rgba);
        cdb_image_free(img);
        return tiff_fail(m, CDB_CORRUPT, "cannot decode the image");
    }
    for (size_t i = 0; i < (size_t)w * h; i++) {
        uint8_t *d = (uint8_t *)img->pixels + 3 * i;
        d[0] = (uint8_t)TIFFGetR(rgba[i]);
        d[1] = (uint8_t)TIFFGetG(rgba[i]);
        d[2] = (uint8_t)TIFFGetB(rgba[i]);
    }
    cdb_free(rgba);
    *out = img;
    return CDB_OK;
}

cdb_status cdb_img_tiff_decode(const uint8_t *b, size_t n, const img_opts *o, cdb_image **out) {
    tmem m;
    TIFF *t;
    uint32_t w = 0, h = 0;
    uint16_t bits = 1, spp = 1, photo = 0, planar = PLANARCONFIG_CONTIG, fmt = SAMPLEFORMAT_UINT;
    uint16_t comp = COMPRESSION_NONE, orient = ORIENTATION_TOPLEFT, nextra = 0, *extra = NULL;
    uint16_t *cmap[3] = {NULL, NULL, NULL}, inkset = INKSET_CMYK;
    cdb_image *img = NULL;
    uint8_t *raw = NULL;
    cdb_status rc = CDB_OK;
    int planes, out_ch, alpha_kind = 0; /* 1 unassociated, 2 associated */
    size_t row_bytes;
    int64_t max_alloc = o->max_pixels * 8 < ((int64_t)1 << 30) ? o->max_pixels * 8 : (int64_t)1 << 30;

    *out = NULL;
    if (!(t = open_mem(&m, b, n, max_alloc + (64 << 20))))
        return tiff_fail(&m, CDB_CORRUPT, "cannot read the header");
    tf.TIFFGetField(t, TIFFTAG_IMAGEWIDTH, &w);
    tf.TIFFGetField(t, TIFFTAG_IMAGELENGTH, &h);
    if ((rc = cdb_img_check_size("TIFF", w, h, o->max_pixels)) != CDB_OK) goto done;
    tf.TIFFGetFieldDefaulted(t, TIFFTAG_BITSPERSAMPLE, &bits);
    tf.TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLESPERPIXEL, &spp);
    tf.TIFFGetFieldDefaulted(t, TIFFTAG_PLANARCONFIG, &planar);
    tf.TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLEFORMAT, &fmt);
    tf.TIFFGetFieldDefaulted(t, TIFFTAG_ORIENTATION, &orient);
    tf.TIFFGetFieldDefaulted(t, TIFFTAG_EXTRASAMPLES, &nextra, &extra);
    tf.TIFFGetField(t, TIFFTAG_COMPRESSION, &comp);
    if (!tf.TIFFGetField(t, TIFFTAG_PHOTOMETRIC, &photo)) {
        rc = cdb_seterr(CDB_CORRUPT, "TIFF: no PhotometricInterpretation tag");
        goto done;
    }
    if (photo == PHOTOMETRIC_YCBCR) {
        if (comp == COMPRESSION_JPEG && planar == PLANARCONFIG_CONTIG) {
            tf.TIFFSetField(t, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB); /* as PIL */
            photo = PHOTOMETRIC_RGB;
        } else {
            rc = decode_rgba(t, &m, w, h, &img);
            goto oriented;
        }
    }
    if (fmt != SAMPLEFORMAT_UINT || (bits != 1 && bits != 2 && bits != 4 && bits != 8 &&
                                      bits != 16) ||
        spp < 1 || spp > 4) {
        rc = cdb_seterr(CDB_UNSUPPORTED, "TIFF: %u samples of %u bits (format %u) are not "
                        "supported", spp, bits, fmt);
        goto done;
    }
    if (nextra >= 1 && extra) alpha_kind = extra[0] == EXTRASAMPLE_UNASSALPHA ? 1
                                         : extra[0] == EXTRASAMPLE_ASSOCALPHA ? 2 : 0;
    switch (photo) {
    case PHOTOMETRIC_MINISBLACK: case PHOTOMETRIC_MINISWHITE:
        out_ch = spp >= 2 && alpha_kind ? 2 : 1;
        break;
    case PHOTOMETRIC_RGB:
        if (spp < 3 || bits < 8) goto unsupported;
        out_ch = spp >= 4 && alpha_kind ? 4 : 3;
        break;
    case PHOTOMETRIC_PALETTE:
        if (spp != 1 || bits > 8 || !tf.TIFFGetField(t, TIFFTAG_COLORMAP, &cmap[0], &cmap[1], &cmap[2]))
            goto unsupported;
        out_ch = 3;
        break;
    case PHOTOMETRIC_SEPARATED:
        tf.TIFFGetFieldDefaulted(t, TIFFTAG_INKSET, &inkset);
        if (spp != 4 || bits != 8 || inkset != INKSET_CMYK) goto unsupported;
        out_ch = 4;
        break;
    default:
    unsupported:
        rc = cdb_seterr(CDB_UNSUPPORTED, "TIFF: photometric %u with %u samples of %u bits is not "
                        "supported", photo, spp, bits);
        goto done;
    }
    planes = planar == PLANARCONFIG_SEPARATE ? spp : 1;
    row_bytes = (size_t)tf.TIFFScanlineSize64(t);
    if (row_bytes == 0 ||
        row_bytes < ((size_t)w * bits * (planes > 1 ? 1 : spp) + 7) / 8) {
        rc = tiff_fail(&m, CDB_CORRUPT, "bad scanline size");
        goto done;
    }
    /* A small file cannot hold a big image: uncompressed data must be there, and no
    ** TIFF codec expands more than 4096x (deflate ~1032x, LZW < 3641x, PackBits
    ** 64x) except the bilevel fax codes, whose 1-bit images are small anyway. */
    {
        uint64_t need = (uint64_t)planes * h * row_bytes;
        if (comp == COMPRESSION_NONE ? need > n : bits > 1 && need / 4096 > n) {
            rc = cdb_seterr(CDB_CORRUPT, "TIFF: %zu bytes cannot hold %ux%u x %u samples of %u "
                            "bits (truncated or a bomb?)", n, w, h, spp, bits);
            goto done;
        }
    }
    if (!(raw = cdb_malloc((size_t)planes * h * row_bytes))) {
        rc = cdb_seterr(CDB_NOMEM, "TIFF: out of memory for %ux%u", w, h);
        goto done;
    }
    if ((rc = read_raw(t, &m, w, h, planes, row_bytes, raw)) != CDB_OK) goto done;
    if ((rc = cdb_img_new((int)w, (int)h, out_ch,
                          bits == 16 && photo != PHOTOMETRIC_RGB && out_ch == 1 ? 16 : 8, "TIFF",
                          &img)) != CDB_OK)
        goto done;
    img->is_cmyk = photo == PHOTOMETRIC_SEPARATED;
    img->is_palette = photo == PHOTOMETRIC_PALETTE || (bits == 1 && out_ch == 1);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            unsigned v[4] = {0, 0, 0, 0};
            for (int c = 0; c < spp && c < 4; c++) {
                const uint8_t *row = raw + ((size_t)(planes > 1 ? c : 0) * h + y) * row_bytes;
                v[c] = sample(row, planes > 1 ? x : x * spp + (uint32_t)c, bits);
            }
            if (img->bits == 16) { /* 16-bit gray (PIL "I;16") */
                uint16_t g = (uint16_t)v[0];
                if (photo == PHOTOMETRIC_MINISWHITE) g = (uint16_t)(65535 - g);
                ((uint16_t *)img->pixels)[(size_t)y * w + x] = g;
                continue;
            }
            if (bits == 16) /* PIL's 16-bit unpackers keep the high byte */
                for (int c = 0; c < 4; c++) v[c] >>= 8;
            uint8_t *d = (uint8_t *)img->pixels + ((size_t)y * w + x) * out_ch;
            switch (photo) {
            case PHOTOMETRIC_PALETTE:
                for (int c = 0; c < 3; c++) d[c] = (uint8_t)(cmap[c][v[0]] >> 8);
                break;
            case PHOTOMETRIC_MINISBLACK: case PHOTOMETRIC_MINISWHITE: {
                unsigned g = bits == 1 ? v[0] * 255 : bits == 2 ? v[0] * 85 : bits == 4 ? v[0] * 17
                                                                                         : v[0];
                if (photo == PHOTOMETRIC_MINISWHITE) g = 255 - g;
                d[0] = (uint8_t)g;
                if (out_ch == 2) d[1] = (uint8_t)(bits == 8 || bits == 16 ? v[1] : v[1] * 255);
                break;
            }
            default:
                for (int c = 0; c < out_ch; c++) d[c] = (uint8_t)v[c];
                if (out_ch == 4 && alpha_kind == 2) { /* PIL's "RGBa" unpacker */
                    unsigned a = d[3];
                    for (int c = 0; c < 3; c++) {
                        unsigned q = a == 0 ? 0 : a == 255 ? d[c] : d[c] * 255u / a;
                        d[c] = (uint8_t)(q > 255 ? 255 : q);
                    }
                }
                break;
            }
        }
oriented:
    if (rc == CDB_OK && orient >= 2 && orient <= 8)
        rc = cdb_img_orient(img, orient);
done:
    tf.TIFFClose(t);
    cdb_free(raw);
    if (rc != CDB_OK) {
        cdb_image_free(img);
        return rc;
    }
    *out = img;
    return CDB_OK;
}

/* ---- metadata (image_meta.c): IFD0's make and model, the Exif and GPS IFDs ---------- */

static void tiff_text(TIFF *t, uint32_t tag, char *dst, size_t cap) {
    const char *s = NULL;
    if (tf.TIFFGetField(t, tag, &s) && s) cdb_meta_set_text(dst, cap, s, strnlen(s, 4096));
}

static const char *tiff_ascii(TIFF *t, uint32_t tag, size_t *len) {
    const char *s = NULL;
    if (!tf.TIFFGetField(t, tag, &s) || !s) return NULL;
    *len = strnlen(s, 256);
    return s;
}

static void tiff_taken(TIFF *t, cdb_photo_meta *m, cdb_taken_source src, uint32_t dt_tag,
                       uint32_t sub_tag, uint32_t off_tag) {
    size_t dl = 0, sl = 0, ol = 0;
    const char *dt = tiff_ascii(t, dt_tag, &dl), *sub = tiff_ascii(t, sub_tag, &sl);
    const char *off = tiff_ascii(t, off_tag, &ol);
    cdb_meta_set_taken(m, src, dt, dl, sub, sl, off, ol, 0);
}

/* k rationals of a GPS tag as doubles: libtiff stores them as float or double, as its
** field table says (TIFFFieldSetGetSize), and passes arrays of fixed count by pointer. */
static int tiff_reals(TIFF *t, uint32_t tag, int k, double *out) {
    const TIFFField *f = tf.TIFFFieldWithTag(t, tag);
    int sz = f ? tf.TIFFFieldSetGetSize(f) : 0;
    if (sz != 4 && sz != 8) return 0;
    if (k == 1) {
        double d = 0;
        float v = 0;
        if (!(sz == 8 ? tf.TIFFGetField(t, tag, &d) : tf.TIFFGetField(t, tag, &v))) return 0;
        out[0] = sz == 8 ? d : (double)v;
        return 1;
    }
    {
        const void *p = NULL;
        if (!tf.TIFFGetField(t, tag, &p) || !p) return 0;
        for (int j = 0; j < k; j++)
            out[j] = sz == 8 ? ((const double *)p)[j] : (double)((const float *)p)[j];
    }
    return 1;
}

static char tiff_ref(TIFF *t, uint32_t tag) {
    size_t len = 0;
    const char *s = tiff_ascii(t, tag, &len);
    return s && len ? s[0] : 0;
}

static void tiff_gps(TIFF *t, cdb_photo_meta *m) {
    double lat[3], lon[3], alt;
    if (tiff_reals(t, GPSTAG_LATITUDE, 3, lat) && tiff_reals(t, GPSTAG_LONGITUDE, 3, lon))
        cdb_meta_set_gps(m, lat, tiff_ref(t, GPSTAG_LATITUDEREF), lon,
                         tiff_ref(t, GPSTAG_LONGITUDEREF));
    if (tiff_reals(t, GPSTAG_ALTITUDE, 1, &alt)) {
        uint8_t below = 0;
        const TIFFField *f = tf.TIFFFieldWithTag(t, GPSTAG_ALTITUDEREF);
        if (f && tf.TIFFFieldSetGetSize(f) == 1) tf.TIFFGetField(t, GPSTAG_ALTITUDEREF, &below);
        cdb_meta_set_alt(m, alt, below == 1);
    }
}

/* IFD0's XMP packet (tag 700), copied: the directory is left behind below. */
static void tiff_xmp(TIFF *t, uint8_t **xmp, size_t *xmp_len) {
    uint32_t k = 0;
    const void *p = NULL;
    if (!tf.TIFFGetField(t, TIFFTAG_XMLPACKET, &k, &p) || !p || k == 0 || k > (16u << 20)) return;
    if (!(*xmp = cdb_malloc(k))) return;
    memcpy(*xmp, p, k);
    *xmp_len = k;
}

void cdb_img_tiff_meta(const uint8_t *b, size_t n, cdb_photo_meta *m, uint8_t **xmp,
                       size_t *xmp_len) {
    tmem mem;
    uint64_t exif_off = 0, gps_off = 0;
    int has_exif, has_gps;
    TIFF *t = open_mem(&mem, b, n, (int64_t)64 << 20);
    *xmp = NULL;
    *xmp_len = 0;
    if (!t) return;
    tiff_xmp(t, xmp, xmp_len);
    tiff_text(t, TIFFTAG_MAKE, m->make, sizeof m->make);
    tiff_text(t, TIFFTAG_MODEL, m->model, sizeof m->model);
    has_exif = tf.TIFFGetField(t, TIFFTAG_EXIFIFD, &exif_off) && exif_off;
    has_gps = tf.TIFFGetField(t, TIFFTAG_GPSIFD, &gps_off) && gps_off;
    if (has_exif && tf.TIFFReadEXIFDirectory(t, exif_off)) {
        tiff_taken(t, m, CDB_TAKEN_ORIGINAL, EXIFTAG_DATETIMEORIGINAL,
                   EXIFTAG_SUBSECTIMEORIGINAL, EXIFTAG_OFFSETTIMEORIGINAL);
        tiff_taken(t, m, CDB_TAKEN_CREATED, EXIFTAG_DATETIMEDIGITIZED,
                   EXIFTAG_SUBSECTIMEDIGITIZED, EXIFTAG_OFFSETTIMEDIGITIZED);
        tiff_text(t, EXIFTAG_LENSMODEL, m->lens, sizeof m->lens);
    }
    if (has_gps && tf.TIFFReadGPSDirectory(t, gps_off)) tiff_gps(t, m);
    tf.TIFFClose(t);
}

#else /* !CDB_HAVE_TIFF */

void cdb_img_tiff_meta(const uint8_t *b, size_t n, cdb_photo_meta *m, uint8_t **xmp,
                       size_t *xmp_len) {
    (void)b, (void)n, (void)m;
    *xmp = NULL;
    *xmp_len = 0;
}

CDB_IMG_BUILT_WITHOUT(tiff, "TIFF", "libtiff")
#endif
