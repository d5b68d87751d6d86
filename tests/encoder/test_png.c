/*
** test_png.c: PNG's everyday case (encoder/image_png.c, libdeflate) against an
** oracle the test builds itself. Random pixels (gray, gray+alpha, RGB, RGBA; 1 to
** 70 pixels a side) are filtered row by row with random filter types by this file's
** own forward filters (PNG specification, section 9), compressed with zlib at a
** random level, and cut into random IDAT chunks with ancillary chunks between them;
** the decoded image must be those pixels exactly, and stb_image (the decoder the
** other PNGs use, image_stb.c) must give the same bytes. Broken streams (a filter
** type of 5, a truncated stream, a bad zlib header) are refused as corrupt, as stb
** refuses them, and data past the last row is ignored, as stb and PIL ignore it; files the plain path does not take (palette,
** tRNS, interlaced, 16-bit) still decode through stb.
*/
#include "cdb_test.h"
#include "core/core.h"
#include "encoder/image_int.h"
#include "file_build.h"

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) { return (uint32_t)(cdb_test_xorshift(&g_rng) % n); }

static int paeth_pred(int a, int b, int c) {
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* The forward filter of one row: what an encoder stores for pixel bytes `row`. */
static void filter_row(int type, const uint8_t *row, const uint8_t *up, size_t rb, int bpp,
                       uint8_t *out) {
    for (size_t i = 0; i < rb; i++) {
        int a = i >= (size_t)bpp ? row[i - bpp] : 0, b = up ? up[i] : 0;
        int c = up && i >= (size_t)bpp ? up[i - bpp] : 0, pred = 0;
        if (type == 1) pred = a;
        if (type == 2) pred = b;
        if (type == 3) pred = (a + b) / 2;
        if (type == 4) pred = paeth_pred(a, b, c);
        out[i] = (uint8_t)(row[i] - pred);
    }
}

static const int k_ctype[5] = {0, 0, 4, 2, 6}; /* by channel count */

static int g_drop_adler; /* make_png leaves out the stream's Adler-32 trailer */

/* A PNG of px (w x h x ch): each row with a random filter type (5 on bad_filter_row),
** IDAT cut into pieces of random size. extra_raw adds bytes past the image's rows;
** short_raw drops some. */
static buf make_png(const uint8_t *px, int w, int h, int ch, int level, int extra_raw,
                    int short_raw, int bad_filter_row) {
    buf png = {0}, raw = {0};
    size_t rb = (size_t)w * ch;
    uint8_t *frow = malloc(rb + 1);
    png_start(&png, (uint32_t)w, (uint32_t)h, 8, k_ctype[ch]);
    if (rnd(2)) png_chunk(&png, "tEXt", "Comment\0before", 14, 0);
    for (int y = 0; y < h; y++) {
        int type = (int)rnd(5);
        filter_row(type, px + (size_t)y * rb, y ? px + (size_t)(y - 1) * rb : NULL, rb, ch, frow + 1);
        frow[0] = (uint8_t)(y == bad_filter_row ? 5 : type);
        put(&raw, frow, rb + 1);
    }
    for (int i = 0; i < extra_raw; i++) put(&raw, "\0", 1);
    if (short_raw) raw.n -= (size_t)short_raw < raw.n ? (size_t)short_raw : raw.n;
    uLongf zn = compressBound(raw.n);
    uint8_t *z = malloc(zn);
    compress2(z, &zn, raw.p, raw.n, level);
    if (g_drop_adler) zn -= 4;
    for (size_t at = 0; at < zn;) {
        size_t piece = 1 + rnd((uint32_t)(zn - at < 300 ? zn - at : 300));
        png_chunk(&png, "IDAT", z + at, (uint32_t)piece, 0);
        at += piece;
        if (!rnd(8)) png_chunk(&png, "tIME", "\x07\xe6\x01\x02\x03\x04\x05", 7, 0);
    }
    png_chunk(&png, "IEND", NULL, 0, 0);
    free(z), free(raw.p), free(frow);
    return png;
}

/* stb's decode of the same bytes (the path every non-plain PNG takes). */
static cdb_status stb_decode(const buf *png, cdb_image **out) {
    img_info ii;
    img_opts o = {.max_pixels = 1 << 24, .apply_exif = 1, .fast = 0, .target_size = 224};
    memset(&ii, 0, sizeof ii);
    ii.fmt = FMT_PNG;
    cdb_status rc = cdb_img_stb_scan(png->p, png->n, &ii);
    if (rc == CDB_OK) rc = cdb_img_stb_payload_check(png->p, png->n, &ii);
    return rc == CDB_OK ? cdb_img_stb_decode(png->p, png->n, &ii, &o, out) : rc;
}

static int is_plain(const buf *png) {
    img_info ii;
    memset(&ii, 0, sizeof ii);
    ii.fmt = FMT_PNG;
    return cdb_img_stb_scan(png->p, png->n, &ii) == CDB_OK && cdb_img_png_is_plain(&ii);
}

CDB_TEST(random_images_decode_to_their_pixels) {
    g_drop_adler = 0; /* a failed check in another test may leave it set */
    cdb_image_params prm = cdb_image_params_default();
    int cases = 0;
    for (int t = 0; t < 400; t++) {
        int w = 1 + (int)rnd(70), h = 1 + (int)rnd(70), ch = 1 + (int)rnd(4);
        size_t n = (size_t)w * h * ch;
        uint8_t *px = malloc(n);
        /* smooth images (what the predictors are for) and noise (every byte value) */
        int smooth = (int)rnd(2);
        for (size_t i = 0; i < n; i++)
            px[i] = smooth ? (uint8_t)((i / ch % w) * 3 + (i / ch / w) * 5 + rnd(4)) : (uint8_t)rnd(256);
        buf png = make_png(px, w, h, ch, (int)rnd(10), 0, 0, -1);
        cdb_image *img = NULL, *ref = NULL;
        CHECK_MSG(is_plain(&png), "case %d (%dx%d c%d) not taken by the plain path", t, w, h, ch);
        cdb_status rc = cdb_image_decode(png.p, png.n, &prm, &img);
        CHECK_MSG(rc == CDB_OK, "case %d (%dx%d c%d): %s", t, w, h, ch, cdb_errmsg());
        CHECK_EQ_INT(img->width, w);
        CHECK_EQ_INT(img->height, h);
        CHECK_EQ_INT(img->channels, ch);
        CHECK_EQ_INT(img->bits, 8);
        CHECK_MSG(!memcmp(img->pixels, px, n), "case %d (%dx%d c%d): pixels differ", t, w, h, ch);
        CHECK_EQ_INT(stb_decode(&png, &ref), CDB_OK);
        CHECK_MSG(ref->channels == ch && !memcmp(ref->pixels, px, n), "case %d: stb differs", t);
        cdb_image_free(img), cdb_image_free(ref), free(png.p), free(px);
        cases++;
    }
    fprintf(stderr, "    %d random PNGs decoded to their own pixels, as stb decodes them\n", cases);
}

/* Data past the last row is ignored, as stb and PIL ignore it. */
CDB_TEST(data_past_the_rows_is_ignored) {
    g_drop_adler = 0; /* a failed check in another test may leave it set */
    cdb_image_params prm = cdb_image_params_default();
    uint8_t px[9 * 7 * 4];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)rnd(256);
    for (int extra = 1; extra < 3000; extra *= 7) {
        buf png = make_png(px, 9, 7, 4, 6, extra, 0, -1);
        cdb_image *img = NULL;
        CHECK_MSG(cdb_image_decode(png.p, png.n, &prm, &img) == CDB_OK, "%d bytes more: %s", extra,
                  cdb_errmsg());
        CHECK_MSG(!memcmp(img->pixels, px, sizeof px), "%d bytes more: pixels differ", extra);
        cdb_image_free(img), free(png.p);
    }
}

CDB_TEST(broken_streams_are_corrupt) {
    g_drop_adler = 0; /* a failed check in another test may leave it set */
    cdb_image_params prm = cdb_image_params_default();
    const int w = 23, h = 17, ch = 3;
    uint8_t px[23 * 17 * 3];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)rnd(256);
    struct {
        const char *what;
        int extra, short_by, bad_row, bad_header;
    } cases[] = {{"a row with filter type 5", 0, 0, 9, 0},
                 {"one byte of data missing", 0, 1, -1, 0},
                 {"a row missing", 0, 23 * 3 + 1, -1, 0},
                 {"a zlib header with a bad check", 0, 0, -1, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        buf png = make_png(px, w, h, ch, 6, cases[k].extra, cases[k].short_by, cases[k].bad_row);
        cdb_image *img = NULL, *ref = NULL;
        if (cases[k].bad_header) { /* the first IDAT's FLG byte */
            for (size_t i = 8; i + 8 < png.n; i++)
                if (!memcmp(png.p + i, "IDAT", 4)) {
                    png.p[i + 5] ^= 1;
                    break;
                }
        }
        CHECK_MSG(is_plain(&png), "%s: not taken by the plain path", cases[k].what);
        cdb_status rc = cdb_image_decode(png.p, png.n, &prm, &img);
        CHECK_MSG(rc == CDB_CORRUPT && !img, "%s: %s (%s)", cases[k].what, cdb_status_str(rc), cdb_errmsg());
        fprintf(stderr, "    %s: %s\n", cases[k].what, cdb_errmsg());
        CHECK_MSG(stb_decode(&png, &ref) != CDB_OK, "%s: stb decodes it", cases[k].what);
        free(png.p);
    }
}

/* A stream without its Adler-32 trailer: stb 2.27 fails on some such streams near
** the end of input, where libdeflate reads on; the plain path hands them to stb, so
** the verdict and the pixels are stb's either way. */
CDB_TEST(streams_without_trailer_get_stbs_verdict) {
    cdb_image_params prm = cdb_image_params_default();
    int agree = 0, decoded = 0;
    g_drop_adler = 1;
    for (int t = 0; t < 60; t++) {
        int w = 1 + (int)rnd(20), h = 1 + (int)rnd(20), ch = 1 + (int)rnd(4);
        size_t n = (size_t)w * h * ch;
        uint8_t *px = malloc(n);
        for (size_t i = 0; i < n; i++) px[i] = (uint8_t)rnd(256);
        buf png = make_png(px, w, h, ch, 1 + (int)rnd(9), 0, 0, -1);
        cdb_image *img = NULL, *ref = NULL;
        cdb_status a = cdb_image_decode(png.p, png.n, &prm, &img), b = stb_decode(&png, &ref);
        CHECK_MSG((a == CDB_OK) == (b == CDB_OK), "case %d: plain path %s, stb %s", t,
                  cdb_status_str(a), cdb_status_str(b));
        if (a == CDB_OK) {
            CHECK_MSG(!memcmp(img->pixels, ref->pixels, n) && !memcmp(img->pixels, px, n),
                      "case %d: pixels differ", t);
            decoded++;
        }
        agree++;
        cdb_image_free(img), cdb_image_free(ref), free(png.p), free(px);
    }
    g_drop_adler = 0;
    fprintf(stderr, "    %d streams without a trailer: %d decoded, as stb decodes them\n", agree,
            decoded);
}

/* What the plain path leaves to stb: the scan's png_plain is 0 and the decode works. */
CDB_TEST(other_pngs_still_go_to_stb) {
    g_drop_adler = 0; /* a failed check in another test may leave it set */
    cdb_image_params prm = cdb_image_params_default();
    uint8_t px[5 * 4 * 3];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 7);
    for (int variant = 0; variant < 3; variant++) {
        buf png = make_png(px, 5, 4, 3, 6, 0, 0, -1), out = {0};
        /* rebuild with one extra chunk right after IHDR (8 + 25 bytes) */
        put(&out, png.p, 33);
        if (variant == 0) png_chunk(&out, "tRNS", "\0\1\0\2\0\3", 6, 0);
        if (variant == 1) png_chunk(&out, "PLTE", "\1\2\3\4\5\6", 6, 0);
        if (variant == 2) png_chunk(&out, "sRGB", "\0", 1, 0); /* ancillary: still plain */
        put(&out, png.p + 33, png.n - 33);
        CHECK_EQ_INT(is_plain(&out), variant == 2);
        cdb_image *img = NULL;
        CHECK_MSG(cdb_image_decode(out.p, out.n, &prm, &img) == CDB_OK, "variant %d: %s", variant,
                  cdb_errmsg());
        CHECK_MSG(!memcmp(img->pixels, px, sizeof px), "variant %d: pixels differ", variant);
        cdb_image_free(img), free(png.p), free(out.p);
    }
}

/* Empty IDAT chunks (legal: the stream is the concatenation of the IDATs' data) before
** the first one with data, which stb 2.27 met with NULL + 0 (fuzz_png): both paths give
** the image's own pixels, with 1 to 3 of them (and a tEXt among them). */
CDB_TEST(empty_idat_chunks_first) {
    g_drop_adler = 0; /* a failed check in another test may leave it set */
    cdb_image_params prm = cdb_image_params_default();
    uint8_t px[7 * 5 * 3];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 13 + 1);
    for (int k = 1; k <= 3; k++) {
        buf png = make_png(px, 7, 5, 3, 6, 0, 0, -1), out = {0};
        put(&out, png.p, 33); /* signature + IHDR */
        for (int e = 0; e < k; e++) {
            png_chunk(&out, "IDAT", NULL, 0, 0);
            if (e == 1) png_chunk(&out, "tEXt", "Comment\0among", 13, 0);
        }
        put(&out, png.p + 33, png.n - 33);
        cdb_image *img = NULL, *ref = NULL;
        CHECK_MSG(cdb_image_decode(out.p, out.n, &prm, &img) == CDB_OK, "%d empty: %s", k,
                  cdb_errmsg());
        CHECK_MSG(img && !memcmp(img->pixels, px, sizeof px), "%d empty: pixels differ", k);
        CHECK_MSG(stb_decode(&out, &ref) == CDB_OK, "%d empty, stb: %s", k, cdb_errmsg());
        CHECK_MSG(ref && !memcmp(ref->pixels, px, sizeof px), "%d empty, stb: pixels differ", k);
        cdb_image_free(img), cdb_image_free(ref), free(png.p), free(out.p);
    }
}

CDB_TEST_MAIN(random_images_decode_to_their_pixels, data_past_the_rows_is_ignored,
              broken_streams_are_corrupt, streams_without_trailer_get_stbs_verdict,
              other_pngs_still_go_to_stb, empty_idat_chunks_first)
