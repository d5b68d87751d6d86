/*
** test_hostile_image.c: hostile image files against cdb_image_decode (encoder.h).
**
** - Decompression bombs by declared size (PNG, JPEG, GIF, BMP, TGA, PNM headers that
**   claim 10^8..10^10 pixels in a few dozen bytes) are refused with CDB_TOO_LARGE
**   before any pixel buffer is allocated: the peak RSS must not grow by more than a
**   few MiB, and the refusal must be immediate.
** - A zlib bomb: a valid 1x1 PNG whose IDAT inflates to 256 MiB of zeros (256 KiB
**   file). Whatever the status, decoding must not allocate anywhere near that (stb
**   inflates the whole IDAT stream into memory before looking at the size, so image.c
**   has to bound the inflated size itself).
** - The formats behind libwebp, libtiff and libheif: a 16384^2 WebP canvas, a
**   100000^2 TIFF, 60000^2 HEIC/AVIF (patched ispe), tiny TIFFs declaring 25 Mpx.
** - Absurd chunk / segment lengths (PNG chunk length 0xFFFFFFF0, JPEG segment lengths
**   0, 1 and past the end, an EXIF IFD with 65535 entries pointing outside) give a
**   clean CDB_CORRUPT/UNSUPPORTED or a valid decode, never a crash.
** - Every truncation of a small valid PNG, JPEG (arithmetic, YCCK), GIF, BMP, PGM,
**   WebP (lossy, animated, EXIF), TIFF (LZW, tiled, JPEG) HEIC and AVIF fails cleanly
**   (about 2000 evenly spaced prefixes of files over 4 KiB).
** Each case runs in a child process, so a crash fails only that case.
*/
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cdb_test.h"
#include "encoder/encoder.h"
#include "file_build.h"
#include "hostile_util.h"

/* ---- building files (file_build.h) -------------------------------------------- */

/* zlib stream of `raw` bytes of zeros (streamed: never holds them in memory). */
static void png_idat_zeros(buf *b, size_t raw) {
    static uint8_t zeros[1 << 16], out[1 << 16];
    z_stream z;
    buf data = {0};
    memset(&z, 0, sizeof z);
    deflateInit(&z, 9);
    while (raw > 0 || z.avail_in > 0) {
        size_t chunk = raw < sizeof zeros ? raw : sizeof zeros;
        int flush = raw == chunk ? Z_FINISH : Z_NO_FLUSH;
        z.next_in = zeros;
        z.avail_in = (uInt)chunk;
        raw -= chunk;
        do {
            z.next_out = out;
            z.avail_out = sizeof out;
            deflate(&z, flush);
            put(&data, out, sizeof out - z.avail_out);
        } while (z.avail_out == 0);
        if (flush == Z_FINISH) break;
    }
    deflateEnd(&z);
    png_chunk(b, "IDAT", data.p, (uint32_t)data.n, 0);
    free(data.p);
}

/* ---- running one decode in a child --------------------------------------------- */

typedef struct decode_case {
    const char *name;
    const uint8_t *p;
    size_t n;
    int64_t max_pixels;  /* 0: default */
    int want;            /* -1: any clean status; else the cdb_status wanted */
    double max_rss_mb;   /* allowed growth of the peak RSS */
    double max_seconds;
} decode_case;

static int run_decode(void *arg) {
    const decode_case *c = arg;
    cdb_image_params ip = cdb_image_params_default();
    cdb_image *img = NULL;
    double rss0 = hostile_peak_rss_mb(), t0 = hostile_now_s(), drss, dt;
    cdb_status rc;
    int w, h;
    ip.max_pixels = c->max_pixels;
    (void)cdb_image_probe(c->p, c->n, &w, &h);
    rc = cdb_image_decode(c->p, c->n, &ip, &img);
    drss = hostile_peak_rss_mb() - rss0;
    dt = hostile_now_s() - t0;
    cdb_image_free(img);
    if (getenv("HOSTILE_VERBOSE") || (c->want >= 0 && (int)rc != c->want) ||
        drss > c->max_rss_mb || dt > c->max_seconds)
        fprintf(stderr, "    %s: %s (%s), peak RSS +%.1f MiB, %.3f s\n", c->name,
                cdb_status_str(rc), cdb_errmsg(), drss, dt);
    if (c->want >= 0 && (int)rc != c->want) return 1;
    if (c->want < 0 && rc != CDB_OK && rc != CDB_CORRUPT && rc != CDB_UNSUPPORTED &&
        rc != CDB_TOO_LARGE)
        return 1;
    if (rc != CDB_OK && !cdb_errmsg()[0]) return 1;
    if (drss > c->max_rss_mb || dt > c->max_seconds) return 1;
    return 0;
}

#define RUN_CASE(...)                                                                 \
    do {                                                                              \
        decode_case c_ = {__VA_ARGS__};                                               \
        if (hostile_in_child(c_.name, run_decode, &c_)) failures++;                   \
    } while (0)

/* A JPEG: SOI, the SOF, DHT and SOS segments (each with its marker), n_scan bytes of
** scan data, EOI. */
static void put_jpeg(buf *b, const uint8_t *sof, size_t n_sof, const uint8_t *dht, size_t n_dht,
                     const uint8_t *sos, size_t n_sos, const void *scan, size_t n_scan) {
    put(b, "\xff\xd8", 2);
    put(b, sof, n_sof);
    put(b, dht, n_dht);
    put(b, sos, n_sos);
    put(b, scan, n_scan);
    put(b, "\xff\xd9", 2);
}

/* ---- tests ----------------------------------------------------------------------- */

CDB_TEST(declared_size_bombs) {
    int failures = 0;
    buf png = {0}, png2 = {0}, jpg = {0}, gif = {0}, bmp = {0}, tga = {0};
    static const char pnm[] = "P6\n100000 100000\n255\n\x01\x02\x03";
    static const char pgm[] = "P5 65535 65535 65535 \x01\x02";
    /* PNG 100000 x 100000 RGB8 (3e10 bytes), tiny IDAT */
    png_start(&png, 100000, 100000, 8, 2);
    png_idat_zeros(&png, 16);
    png_chunk(&png, "IEND", NULL, 0, 0);
    RUN_CASE("PNG 100000x100000", png.p, png.n, 0, CDB_TOO_LARGE, 8, 1);
    /* PNG 2^31-1 x 1: over max_pixels while each side is "valid" */
    png_start(&png2, 0x7fffffff, 1, 16, 6);
    png_idat_zeros(&png2, 16);
    png_chunk(&png2, "IEND", NULL, 0, 0);
    RUN_CASE("PNG 2147483647x1 RGBA16", png2.p, png2.n, 0, CDB_TOO_LARGE, 8, 1);
    /* a 100x100 PNG with max_pixels 1000 */
    png.n = 0;
    png_start(&png, 100, 100, 8, 0);
    png_idat_zeros(&png, 100 * 101);
    png_chunk(&png, "IEND", NULL, 0, 0);
    RUN_CASE("PNG 100x100 over max_pixels=1000", png.p, png.n, 1000, CDB_TOO_LARGE, 8, 1);
    /* JPEG: SOI, SOF0 65500x65500x3, DHT, SOS, 16 bytes of scan data, EOI */
    {
        static const uint8_t sof[] = {0xff, 0xc0, 0x00, 0x11, 8, 0xff, 0xdc, 0xff, 0xdc, 3,
                                      1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1};
        /* DC and AC tables 0 and 1 (the ones the scan names), a single 1-bit code each */
        static const uint8_t dht[] = {0xff, 0xc4, 0x00, 0x4a,
                                      0x00, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00,
                                      0x10, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00,
                                      0x01, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00,
                                      0x11, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00};
        static const uint8_t sos[] = {0xff, 0xda, 0x00, 0x0c, 3, 1, 0x00, 2, 0x11, 3, 0x11,
                                      0, 63, 0};
        put_jpeg(&jpg, sof, sizeof sof, dht, sizeof dht, sos, sizeof sos, "0123456789abcdef", 16);
        RUN_CASE("JPEG 65500x65500", jpg.p, jpg.n, 0, CDB_TOO_LARGE, 8, 1);
    }
    /* GIF 65535x65535 logical screen and image */
    {
        static const uint8_t g[] = {'G', 'I', 'F', '8', '9', 'a', 0xff, 0xff, 0xff, 0xff, 0, 0, 0,
                                    ',', 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 2, 2, 0x44, 0x01,
                                    0, ';'};
        put(&gif, g, sizeof g);
        RUN_CASE("GIF 65535x65535", gif.p, gif.n, 0, CDB_TOO_LARGE, 8, 1);
    }
    /* BMP 2^24+1 x 2^24+1, 24-bit */
    put(&bmp, "BM", 2);
    put_le32(&bmp, 70);
    put_le32(&bmp, 0);
    put_le32(&bmp, 54);
    put_le32(&bmp, 40);
    put_le32(&bmp, (1u << 24) + 1);
    put_le32(&bmp, (1u << 24) + 1);
    put_le16(&bmp, 1);
    put_le16(&bmp, 24);
    put_le32(&bmp, 0);
    for (int i = 0; i < 5; i++) put_le32(&bmp, 0);
    put_le32(&bmp, 0);
    RUN_CASE("BMP 16777217x16777217", bmp.p, bmp.n, 0, CDB_TOO_LARGE, 8, 1);
    /* BMP with a negative (top-down) height of INT_MIN */
    memcpy(bmp.p + 22, "\x00\x00\x00\x80", 4);
    memcpy(bmp.p + 18, "\x10\x00\x00\x00", 4);
    RUN_CASE("BMP height INT_MIN", bmp.p, bmp.n, 0, -1, 8, 1);
    /* TGA 65535x65535 truecolor */
    {
        uint8_t h[18] = {0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 24, 0};
        put(&tga, h, 18);
        put(&tga, "abc", 3);
        RUN_CASE("TGA 65535x65535", tga.p, tga.n, 0, -1, 8, 1);
    }
    /* PNM and TGA store pixels uncompressed: a tiny file cannot hold a big image, and
    ** refusing it as truncated (CDB_CORRUPT) before allocating is as good */
    RUN_CASE("PPM 100000x100000", (const uint8_t *)pnm, sizeof pnm - 1, 0, -1, 8, 1);
    RUN_CASE("PGM 65535x65535 16-bit", (const uint8_t *)pgm, sizeof pgm - 1, 0, -1, 8, 1);
    free(png.p), free(png2.p), free(jpg.p), free(gif.p), free(bmp.p), free(tga.p);
    CHECK_EQ_INT(failures, 0);
}

/* Tiny files whose header declares an image just under the default max_pixels (8000 x
** 8000 = 64 Mpx): the formats whose decoders zero-fill missing data (stb's JPEG and
** RLE TGA readers, GIF's LZW) would otherwise allocate and fill 192-256 MiB from a
** 40-byte file. A file cannot hold that image: it must be refused as truncated. */
CDB_TEST(tiny_files_under_limit) {
    int failures = 0;
    buf jpg = {0}, tga = {0}, gif = {0};
    {
        static const uint8_t sof[] = {0xff, 0xc0, 0x00, 0x0b, 8, 0x1f, 0x40, 0x1f, 0x40, 1,
                                      1, 0x11, 0};
        /* one DC and one AC table, each with a single 1-bit code */
        static const uint8_t dht[] = {0xff, 0xc4, 0x00, 0x26,
                                      0x00, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00,
                                      0x10, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00};
        static const uint8_t sos[] = {0xff, 0xda, 0x00, 0x08, 1, 1, 0x00, 0, 63, 0};
        put_jpeg(&jpg, sof, sizeof sof, dht, sizeof dht, sos, sizeof sos, "\0\0\0\0\0\0\0\0", 8);
        RUN_CASE("JPEG 8000x8000 in 70 bytes", jpg.p, jpg.n, 0, -1, 64, 5);
    }
    {
        /* RLE truecolor, 8000x8000x24, one run packet of 128 pixels */
        uint8_t h[18] = {0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x1f, 0x40, 0x1f, 24, 0x20};
        put(&tga, h, 18);
        put(&tga, "\xff\x10\x20\x30", 4);
        RUN_CASE("TGA RLE 8000x8000 in 22 bytes", tga.p, tga.n, 0, -1, 64, 5);
    }
    {
        static const uint8_t g[] = {'G', 'I', 'F', '8', '9', 'a', 0x40, 0x1f, 0x40, 0x1f, 0x80, 0, 0,
                                    0, 0, 0, 0xff, 0xff, 0xff,
                                    ',', 0, 0, 0, 0, 0x40, 0x1f, 0x40, 0x1f, 0, 2, 2, 0x44, 0x01,
                                    0, ';'};
        put(&gif, g, sizeof g);
        RUN_CASE("GIF 8000x8000 in 35 bytes", gif.p, gif.n, 0, -1, 64, 5);
    }
    free(jpg.p), free(tga.p), free(gif.p);
    CHECK_EQ_INT(failures, 0);
}

/* The formats behind other libraries: declared-size bombs refused from the header
** before the library allocates (WebP VP8X canvas, TIFF IFD, HEIF ispe), tiny files
** declaring images under the limit refused as unable to hold them (TIFF), and the
** RSS of each attempt bounded. */
static void tiff_ifd(buf *b, uint32_t w, uint32_t h, unsigned comp, uint32_t strip_bytes) {
    /* little-endian classic TIFF, RGB 8-bit, one strip right after the IFD */
    static const unsigned tags[][3] = {{256, 4, 0}, {257, 4, 0}, {258, 3, 8}, {259, 3, 0},
                                       {262, 3, 2}, {273, 4, 0}, {277, 3, 3}, {278, 4, 0},
                                       {279, 4, 0}};
    uint32_t n = sizeof tags / sizeof tags[0], data_off = 8 + 2 + 12 * n + 4;
    put(b, "II*\0", 4);
    put_le32(b, 8);
    put_le16(b, n);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = tags[i][2];
        if (tags[i][0] == 256) v = w;
        if (tags[i][0] == 257 || tags[i][0] == 278) v = h;
        if (tags[i][0] == 259) v = comp;
        if (tags[i][0] == 273) v = data_off;
        if (tags[i][0] == 279) v = strip_bytes;
        put_le16(b, tags[i][0]);
        put_le16(b, tags[i][1]);
        put_le32(b, 1);
        if (tags[i][1] == 3) {
            put_le16(b, v);
            put_le16(b, 0);
        } else {
            put_le32(b, v);
        }
    }
    put_le32(b, 0);
    put(b, "0123456789abcdef", 16);
}

static uint8_t *read_golden(const char *name, size_t *n) {
    char path[4096];
    static uint8_t data[1 << 16];
    FILE *f;
    snprintf(path, sizeof path, "%s/tests/golden/images/%s", CDB_SOURCE_DIR, name);
    if (!(f = fopen(path, "rb"))) return NULL;
    *n = fread(data, 1, sizeof data, f);
    fclose(f);
    return data;
}

CDB_TEST(library_format_bombs) {
    int failures = 0;
    buf w = {0}, t = {0}, t2 = {0}, t3 = {0};
    /* WebP: VP8X canvas 16384 x 16384 (fields hold size - 1, 24 bits each), nothing else */
    put(&w, "RIFF", 4);
    put_le32(&w, 4 + 8 + 10);
    put(&w, "WEBPVP8X", 8);
    put_le32(&w, 10);
    put(&w, "\x02\0\0\0\xff\x3f\0\xff\x3f\0", 10); /* animation flag */
    RUN_CASE("WebP VP8X 16384x16384", w.p, w.n, 0, -1, 8, 1);
    w.p[24] = 0x27, w.p[25] = 0x23, w.p[27] = 0x27, w.p[28] = 0x23; /* 9000 x 9000 */
    RUN_CASE("WebP VP8X 9000x9000 without frames", w.p, w.n, 0, -1, 64, 5);
    /* a build without libtiff refuses TIFF by name instead */
    int tiff = strstr(cdb_image_formats(0), "TIFF") != NULL;
    tiff_ifd(&t, 100000, 100000, 1, 16);
    RUN_CASE("TIFF 100000x100000", t.p, t.n, 0, tiff ? CDB_TOO_LARGE : CDB_UNSUPPORTED, 8, 1);
    tiff_ifd(&t2, 5000, 5000, 1, 5000 * 5000 * 3);
    RUN_CASE("TIFF 5000x5000 uncompressed in 150 bytes", t2.p, t2.n, 0,
             tiff ? CDB_CORRUPT : CDB_UNSUPPORTED, 64, 5);
    tiff_ifd(&t3, 5000, 5000, 8, 16); /* deflate */
    RUN_CASE("TIFF 5000x5000 deflate in 150 bytes", t3.p, t3.n, 0,
             tiff ? CDB_CORRUPT : CDB_UNSUPPORTED, 64, 5);
    /* HEIF / AVIF: the primary image's ispe box patched to 60000 x 60000 */
    for (int k = 0; k < 2; k++) {
        size_t n = 0;
        uint8_t *d = read_golden(k ? "avif_o1_120x90.avif" : "heic_o1_120x90.heic", &n);
        int patched = 0;
        if (!d) continue;
        for (size_t i = 4; i + 20 <= n; i++)
            if (!memcmp(d + i, "ispe", 4)) {
                memcpy(d + i + 8, "\0\0\xea\x60\0\0\xea\x60", 8);
                patched++;
            }
        CHECK_MSG(patched > 0, "no ispe box found");
        RUN_CASE(k ? "AVIF ispe 60000x60000" : "HEIC ispe 60000x60000", d, n, 0, -1, 16, 5);
    }
    free(w.p), free(t.p), free(t2.p), free(t3.p);
    CHECK_EQ_INT(failures, 0);
}

CDB_TEST(zlib_bomb) {
    int failures = 0;
    buf png = {0};
    png_start(&png, 1, 1, 8, 2); /* 1x1 RGB: 4 bytes of raw data expected */
    png_idat_zeros(&png, (size_t)256 << 20);
    png_chunk(&png, "IEND", NULL, 0, 0);
    fprintf(stderr, "    1x1 PNG whose IDAT inflates to 256 MiB: %zu bytes\n", png.n);
    RUN_CASE("PNG zlib bomb 1x1 -> 256 MiB", png.p, png.n, 0, -1, 64, 20);
    free(png.p);
    CHECK_EQ_INT(failures, 0);
}

CDB_TEST(absurd_lengths) {
    int failures = 0;
    buf a = {0}, b = {0}, c = {0};
    static const uint8_t soi[2] = {0xff, 0xd8};
    /* PNG: IDAT chunk length 0xFFFFFFF0 with 16 bytes behind it */
    png_start(&a, 8, 8, 8, 2);
    png_chunk(&a, "IDAT", "0123456789abcdef", 16, 0xfffffff0u);
    RUN_CASE("PNG chunk length 0xFFFFFFF0", a.p, a.n, 0, -1, 8, 1);
    a.n = 0;
    png_start(&a, 8, 8, 8, 2);
    png_chunk(&a, "tEXt", "k\0v", 3, 0x7fffffffu);
    png_idat_zeros(&a, 8 * 25);
    RUN_CASE("PNG ancillary chunk length 2^31-1", a.p, a.n, 0, -1, 8, 1);
    a.n = 0;
    png_start(&a, 8, 8, 8, 2);
    a.p[8 + 3] = 0xff; /* IHDR length 255 */
    RUN_CASE("PNG IHDR length 255", a.p, a.n, 0, -1, 8, 1);
    /* JPEG segment lengths 0 and 1, and one running past the end */
    for (unsigned len = 0; len < 3; len++) {
        b.n = 0;
        put(&b, soi, 2);
        put_be16(&b, 0xffe0);
        put_be16(&b, len == 2 ? 0xffff : len);
        put(&b, "JFIF\0", 5);
        RUN_CASE(len == 0 ? "JPEG APP0 length 0" : len == 1 ? "JPEG APP0 length 1"
                                                            : "JPEG APP0 length 0xFFFF past end",
                 b.p, b.n, 0, -1, 8, 1);
    }
    /* JPEG EXIF: IFD0 claims 65535 entries, orientation entry with a bad offset, then SOF
    ** of a tiny image (no scan data) */
    put(&c, soi, 2);
    put_be16(&c, 0xffe1);
    put_be16(&c, 2 + 6 + 8 + 2 + 12);
    put(&c, "Exif\0\0", 6);
    put(&c, "MM\0\x2a\0\0\0\x08", 8);
    put_be16(&c, 0xffff);
    put(&c, "\x01\x12\0\x03\xff\xff\xff\xff\0\x06\0\0", 12);
    {
        static const uint8_t sof[] = {0xff, 0xc0, 0x00, 0x0b, 8, 0, 8, 0, 8, 1, 1, 0x11, 0};
        put(&c, sof, sizeof sof);
    }
    put_be16(&c, 0xffd9);
    RUN_CASE("JPEG EXIF IFD with 65535 entries", c.p, c.n, 0, -1, 8, 1);
    free(a.p), free(b.p), free(c.p);
    CHECK_EQ_INT(failures, 0);
}

typedef struct trunc_arg {
    const uint8_t *p;
    size_t n, step; /* every step-th prefix length (1: all) */
} trunc_arg;

static int run_truncations(void *arg) {
    const trunc_arg *t = arg;
    int bad = 0;
    for (size_t len = 0; len < t->n; len += t->step) {
        cdb_image *img = NULL;
        uint8_t *copy = malloc(len ? len : 1); /* exact-size heap copy: ASan sees overreads */
        cdb_status rc;
        memcpy(copy, t->p, len);
        rc = cdb_image_decode(len ? copy : NULL, len, NULL, &img);
        if (len == 0 && rc == CDB_INVALID) rc = CDB_CORRUPT;
        if (rc != CDB_OK && rc != CDB_CORRUPT && rc != CDB_UNSUPPORTED) {
            fprintf(stderr, "    prefix %zu: %s (%s)\n", len, cdb_status_str(rc), cdb_errmsg());
            bad = 1;
        }
        cdb_image_free(img);
        free(copy);
    }
    return bad;
}

CDB_TEST(truncations) {
    static const char *const files[] = {"bw_45x37.png", "exif_o6_96x64.jpg", "pal_75x55.gif",
                                        "bw_37x29.bmp", "gray_40x30_max100.pgm",
                                        "jpeg_arith_prog_203x157.jpg", "jpeg_ycck_120x90.jpg",
                                        "webp_lossy_150x110.webp", "webp_anim_80x60.webp",
                                        "webp_exif6_96x64.webp", "tiff_lzw_130x90.tif",
                                        "tiff_tiled_130x90.tif", "tiff_jpeg_130x90.tif",
                                        "heic_o6_120x90.heic", "avif_o1_alpha_64x48.avif"};
    int failures = 0, found = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[4096];
        FILE *f;
        trunc_arg t;
        static uint8_t data[1 << 16];
        snprintf(path, sizeof path, "%s/tests/golden/images/%s", CDB_SOURCE_DIR, files[i]);
        if (!(f = fopen(path, "rb"))) continue;
        t.n = fread(data, 1, sizeof data, f);
        t.p = data;
        t.step = t.n <= 4096 ? 1 : t.n / 2048; /* about 2000 prefixes of the big ones */
        fclose(f);
        found++;
        if (hostile_in_child(files[i], run_truncations, &t)) failures++;
    }
    if (!found) CDB_SKIP("tests/golden/images not present");
    CHECK_EQ_INT(failures, 0);
}

/* Every input the fuzzer ever crashed or stalled on (tests/fuzz/crashes/fuzz_image)
** decodes cleanly in a child now; the JPEG whose scan uses a Huffman table before
** defining it is refused as corrupt, before stb sees it. */
CDB_TEST(saved_fuzz_findings) {
    static const struct { const char *file; int want; } finds[] = {
        {"fuzz_image/slow_tga_rle_91_bytes_26482x101", -1},
        {"fuzz_image/jpeg_scan_uses_undefined_huffman_table", CDB_CORRUPT},
        {"fuzz_image/png_declared_pixels_overflow_int64", CDB_TOO_LARGE},
        {"fuzz_image/avif_ispe_disagrees_with_bitstream", CDB_CORRUPT},
        {"fuzz_png/png_empty_idat_first_null_plus_zero", CDB_CORRUPT},
    };
    int failures = 0, found = 0;
    for (size_t i = 0; i < sizeof finds / sizeof finds[0]; i++) {
        char path[4096];
        static uint8_t data[1 << 16];
        FILE *f;
        decode_case c;
        snprintf(path, sizeof path, "%s/tests/fuzz/crashes/%s", CDB_SOURCE_DIR, finds[i].file);
        if (!(f = fopen(path, "rb"))) continue;
        memset(&c, 0, sizeof c);
        c.name = finds[i].file;
        c.n = fread(data, 1, sizeof data, f);
        c.p = data;
        c.want = finds[i].want;
        if (strstr(c.name, "/avif") && !strstr(cdb_image_formats(0), "AVIF"))
            c.want = CDB_UNSUPPORTED; /* a build without libheif */
        c.max_rss_mb = 256;
        c.max_seconds = 20;
        fclose(f);
        found++;
        if (hostile_in_child(c.name, run_decode, &c)) failures++;
    }
    if (!found) CDB_SKIP("tests/fuzz/crashes not present");
    CHECK_EQ_INT(found, 5);
    CHECK_EQ_INT(failures, 0);
}

CDB_TEST_MAIN(declared_size_bombs, tiny_files_under_limit, library_format_bombs, zlib_bomb,
              absurd_lengths, truncations, saved_fuzz_findings)
