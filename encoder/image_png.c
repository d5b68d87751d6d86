/*
** image_png.c: PNG's everyday case (8-bit gray, gray+alpha, RGB, RGBA; not
** interlaced; only IHDR, IDAT, IEND and ancillary chunks: what image_scan.c marks
** png_plain) decoded with libdeflate and clipdb's own unfiltering. Every other PNG
** goes to stb (image_stb.c).
**
** Why not stb or libpng for these: a 5120x2880 wallpaper took stb 2.27 about 300 ms
** on one core, of which its inflate was well over half; libpng 1.6 with zlib was
** slower still than stb on the same files (measured on the bench_photos set), and
** neither can use another inflater. libdeflate (a well-kept library, also used by
** libtiff) inflates the whole IDAT stream at once into a buffer of the exact size
** the header gives, about 4x faster than stb's. What remains is the PNG
** specification's five row filters, written here with SSE2 for 3- and 4-byte pixels
** (Paeth and Average carry a dependency from pixel to pixel, so they go one pixel
** per step in 16-bit lanes, as libpng's own SSE2 filters do) and in plain C else.
**
** The output is stb's, byte for byte (PNG is lossless; stb's PNGs are PIL's):
** tests/encoder/test_png.c checks it against the pixels the test itself filtered
** and compressed, and tests/fuzz/fuzz_png.c against stb on arbitrary input. Like
** stb, this reads all IDAT chunks as one zlib stream, checks its two header bytes
** and not its Adler-32, ignores chunk CRCs and anything after the stream's end. Any
** file whose stream does not inflate cleanly to exactly the declared rows goes to stb
** (inflate_rows), so broken files get stb's verdict. Known difference: a few
** invalid streams that stb and zlib refuse decode here, deterministically (length
** symbols 286/287, distance codes 30/31, a code-length run past the table: what
** libdeflate accepts by design); stb itself reads uninitialized memory on the second.
*/
#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/core.h"
#include "encoder/image_int.h"


int cdb_img_png_is_plain(const img_info *ii) { return ii->fmt == FMT_PNG && ii->png_plain; }

/* ---- the row filters (PNG specification, section 9) --------------------------------- */

static uint8_t paeth(int a, int b, int c) {
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    if (pa <= pb && pa <= pc) return (uint8_t)a;
    return (uint8_t)(pb <= pc ? b : c);
}

/* Generic filters for any pixel size: out = the row's bytes, prev = the row above
** (zeros for the first row). */
static void unfilter_c(int type, const uint8_t *in, uint8_t *out, const uint8_t *prev, size_t rb,
                       int bpp) {
    size_t i;
    switch (type) {
    case 1:
        for (i = 0; i < (size_t)bpp; i++) out[i] = in[i];
        for (; i < rb; i++) out[i] = (uint8_t)(in[i] + out[i - bpp]);
        break;
    case 2:
        for (i = 0; i < rb; i++) out[i] = (uint8_t)(in[i] + prev[i]);
        break;
    case 3:
        for (i = 0; i < (size_t)bpp; i++) out[i] = (uint8_t)(in[i] + (prev[i] >> 1));
        for (; i < rb; i++) out[i] = (uint8_t)(in[i] + ((out[i - bpp] + prev[i]) >> 1));
        break;
    case 4:
        for (i = 0; i < (size_t)bpp; i++) out[i] = (uint8_t)(in[i] + prev[i]);
        for (; i < rb; i++) out[i] = (uint8_t)(in[i] + paeth(out[i - bpp], prev[i], prev[i - bpp]));
        break;
    default:
        memmove(out, in, rb); /* in place: out overlaps in (unfilter_image) */
        break;
    }
}

#if defined(__SSE2__)
/* Up, 16 bytes at a time (any pixel size). */
static void unfilter_up_sse2(const uint8_t *in, uint8_t *out, const uint8_t *prev, size_t rb) {
    size_t i = 0;
    for (; i + 16 <= rb; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(in + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(prev + i));
        _mm_storeu_si128((__m128i *)(out + i), _mm_add_epi8(x, b));
    }
    for (; i < rb; i++) out[i] = (uint8_t)(in[i] + prev[i]);
}

/* One 3- or 4-byte pixel in the low lanes of a register, and back, through a
** general register (a 3-byte memcpy through the stack stalls on store forwarding). */
static inline __attribute__((always_inline)) __m128i load_px(const uint8_t *p, int bpp) {
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
    if (bpp == 4) v |= (uint32_t)p[3] << 24;
    return _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)v), _mm_setzero_si128());
}
static inline __attribute__((always_inline)) void store_px(uint8_t *p, __m128i v, int bpp) {
    uint32_t u = (uint32_t)_mm_cvtsi128_si32(_mm_packus_epi16(v, v));
    p[0] = (uint8_t)u, p[1] = (uint8_t)(u >> 8), p[2] = (uint8_t)(u >> 16);
    if (bpp == 4) p[3] = (uint8_t)(u >> 24);
}
static __m128i abs16(__m128i x) { return _mm_max_epi16(x, _mm_sub_epi16(_mm_setzero_si128(), x)); }

/* Sub, Average and Paeth for 3- and 4-byte pixels, in 16-bit lanes; sums wrap through the
** 0xff mask as the specification's modulo-256 arithmetic does. Inlined with a
** constant bpp, so that a pixel is one load and one store rather than a byte loop
** through the stack (whose store-to-load stalls made it slower than stb). */
static inline __attribute__((always_inline)) void unfilter_sse2(int type, const uint8_t *in, uint8_t *out, const uint8_t *prev,
                          size_t rb, int bpp) {
    const __m128i mask = _mm_set1_epi16(0xff);
    __m128i a = _mm_setzero_si128(), c = _mm_setzero_si128();
    size_t i = 0;
    switch (type) {
    case 3:
        for (; i < rb; i += (size_t)bpp) {
            __m128i b = load_px(prev + i, bpp), x = load_px(in + i, bpp);
            a = _mm_and_si128(_mm_add_epi16(_mm_srli_epi16(_mm_add_epi16(a, b), 1), x), mask);
            store_px(out + i, a, bpp);
        }
        break;
    case 4:
        for (; i < rb; i += (size_t)bpp) {
            __m128i b = load_px(prev + i, bpp), x = load_px(in + i, bpp);
            /* p = a + b - c: |p - a| = |b - c|, |p - b| = |a - c|, |p - c| = |a + b - 2c| */
            __m128i da = _mm_sub_epi16(b, c), db = _mm_sub_epi16(a, c);
            __m128i pc = abs16(_mm_add_epi16(da, db)), pa = abs16(da), pb = abs16(db);
            __m128i least = _mm_min_epi16(pc, _mm_min_epi16(pa, pb));
            __m128i is_a = _mm_cmpeq_epi16(least, pa), is_b = _mm_cmpeq_epi16(least, pb);
            /* ties go to a, then b, then c */
            __m128i pred = _mm_or_si128(_mm_and_si128(is_b, b), _mm_andnot_si128(is_b, c));
            pred = _mm_or_si128(_mm_and_si128(is_a, a), _mm_andnot_si128(is_a, pred));
            a = _mm_and_si128(_mm_add_epi16(pred, x), mask);
            store_px(out + i, a, bpp);
            c = b;
        }
        break;
    default:
        unfilter_c(type, in, out, prev, rb, bpp);
        break;
    }
}
#endif

static void unfilter_row(int type, const uint8_t *in, uint8_t *out, const uint8_t *prev, size_t rb,
                         int bpp) {
#if defined(__SSE2__)
    if (type == 2) unfilter_up_sse2(in, out, prev, rb);
    else if (bpp == 3) unfilter_sse2(type, in, out, prev, rb, 3);
    else if (bpp == 4) unfilter_sse2(type, in, out, prev, rb, 4);
    else unfilter_c(type, in, out, prev, rb, bpp);
#else
    unfilter_c(type, in, out, prev, rb, bpp);
#endif
}

/* ---- the decoder ------------------------------------------------------------------------ */

/* The IDAT chunks' payloads, in order, as one buffer (the scan checked every length). */
static uint8_t *gather_idat(const uint8_t *b, size_t n, size_t *zn) {
    size_t total = 0, i;
    uint8_t *z;
    for (i = 8; i + 12 <= n; i += 12 + (size_t)cdb_img_be32(b + i)) {
        if (!memcmp(b + i + 4, "IEND", 4)) break;
        if (!memcmp(b + i + 4, "IDAT", 4)) total += cdb_img_be32(b + i);
    }
    z = cdb_malloc(total ? total : 1);
    if (!z) return NULL;
    *zn = 0;
    for (i = 8; i + 12 <= n; i += 12 + (size_t)cdb_img_be32(b + i)) {
        uint32_t len = cdb_img_be32(b + i);
        if (!memcmp(b + i + 4, "IEND", 4)) break;
        if (memcmp(b + i + 4, "IDAT", 4)) continue;
        memcpy(z + *zn, b + i + 8, len);
        *zn += len;
    }
    return z;
}

/* Inflates the zlib stream z into raw: 1 when it gave at least raw_n bytes and ended
** with its whole Adler-32 trailer behind it; 0 for anything else (a stream holding
** more than the rows, a broken or truncated one, a bad zlib header), which is left to
** stb, so that such files get stb's verdict and stb's pixels: stb inflates past the
** rows, builds incomplete Huffman codes that libdeflate refuses, and fails near an
** end of input that libdeflate reads to. -1 when out of memory. */
static int inflate_rows(const uint8_t *z, size_t zn, uint8_t *raw, size_t raw_n) {
    struct libdeflate_decompressor *d;
    enum libdeflate_result r;
    size_t in_used = 0, got = 0;
    /* the zlib header, checked as stb checks it: CM 8, no preset dictionary, FCHECK */
    if (zn < 2 || (z[0] * 256 + z[1]) % 31 != 0 || (z[0] & 15) != 8 || (z[1] & 32)) return 0;
    if (!(d = libdeflate_alloc_decompressor())) return -1;
    r = libdeflate_deflate_decompress_ex(d, z + 2, zn - 2, raw, raw_n, &in_used, &got);
    libdeflate_free_decompressor(d);
    return r == LIBDEFLATE_SUCCESS && got == raw_n && zn - 2 - in_used >= 4;
}

/* Unfilters in place: px holds h rows of a filter byte and rb bytes, and ends up
** holding the h rows of rb pixel bytes. Row y's output starts y + 1 bytes before its
** input, so writing forward never overwrites input not yet read (each filter reads a
** pixel's input before it stores that pixel), and the row above is final output. */
static cdb_status unfilter_image(uint8_t *px, int64_t h, size_t rb, int bpp) {
    uint8_t *zeros = cdb_calloc(1, rb);
    const uint8_t *prev = zeros;
    if (!zeros) return cdb_seterr(CDB_NOMEM, "PNG: out of memory while decoding");
    for (int64_t y = 0; y < h; y++) {
        const uint8_t *in = px + (size_t)y * (rb + 1);
        uint8_t *row = px + (size_t)y * rb;
        int type = in[0];
        if (type > 4) {
            cdb_free(zeros);
            return cdb_seterr(CDB_CORRUPT, "PNG: corrupt data (row %lld has filter type %d)",
                              (long long)y, type);
        }
        unfilter_row(type, in + 1, row, prev, rb, bpp);
        prev = row;
    }
    cdb_free(zeros);
    return CDB_OK;
}

cdb_status cdb_img_png_decode(const uint8_t *b, size_t n, const img_info *ii, const img_opts *o,
                              cdb_image **out /* OUT */) {
    int ch = ii->want_channels;
    size_t rb = (size_t)ii->decl_w * (size_t)ch, zn = 0, raw_n = (rb + 1) * (size_t)ii->decl_h;
    uint8_t *z = NULL, *raw;
    cdb_image *img = NULL;
    cdb_status rc;

    *out = NULL;
    if (!cdb_img_png_is_plain(ii) || ch < 1 || ch > 4)
        return cdb_seterr(CDB_INVALID, "PNG: not a plain 8-bit PNG");
    if ((rc = cdb_img_new((int)ii->decl_w, (int)ii->decl_h, ch, 8, "PNG", &img)) != CDB_OK)
        return rc;
    img->is_palette = ii->is_palette;
    /* the pixel buffer, grown by a byte a row, holds the raw rows until unfiltered */
    if (!(raw = cdb_realloc(img->pixels, raw_n)) || !(z = gather_idat(b, n, &zn))) {
        if (raw) img->pixels = raw;
        rc = cdb_seterr(CDB_NOMEM, "PNG: out of memory while decoding");
        goto done;
    }
    img->pixels = raw;
    int inflated = inflate_rows(z, zn, raw, raw_n);
    cdb_free(z);
    if (inflated < 0) {
        rc = cdb_seterr(CDB_NOMEM, "PNG: out of memory while decoding");
        goto done;
    }
    if (!inflated) { /* rare files: see inflate_rows */
        cdb_image_free(img);
        return cdb_img_stb_decode(b, n, ii, o, out);
    }
    rc = unfilter_image(raw, ii->decl_h, rb, ch);
    if (rc == CDB_OK && o->apply_exif && ii->orientation >= 2)
        rc = cdb_img_orient(img, ii->orientation);

done:
    if (rc != CDB_OK) {
        cdb_image_free(img);
        return rc;
    }
    *out = img;
    return CDB_OK;
}
