/*
** test_thumbs.c: the thumbnails' scaling (engine/library/thumbs.c) against an independent
** oracle: each output pixel is the mean of the source pixels weighted by their exact
** overlap with it, computed here in double from the geometry alone, after the
** conversion to RGB the thumbnails document (16-bit by the high byte, gray spread,
** alpha over white, CMYK as PIL's cmyk2rgb). Random images of every layout and
** random sizes, seeded; every byte must be within 1 of the oracle's rounding.
** Also: the sizes thumbnails get, and that a thumbnail is a JPEG of that size.
*/
#include "cdb_test.h"
#include "engine/library/library.h"

static uint64_t g_rng = 0x7468756d62ull;

static uint32_t rnd(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}

/* The oracle's RGB of source pixel (x, y), 0..255 as a double (rounded as documented). */
static void oracle_rgb(const cdb_image *img, int x, int y, double rgb[3]) {
    size_t i = ((size_t)y * img->width + x) * img->channels;
    unsigned v[4] = {0, 0, 0, 255};
    for (int c = 0; c < img->channels; c++)
        v[c] = img->bits == 16 ? ((const uint16_t *)img->pixels)[i + c] >> 8
                               : ((const uint8_t *)img->pixels)[i + c];
    if (img->channels <= 2) {
        unsigned a = img->channels == 2 ? v[1] : 255;
        rgb[0] = rgb[1] = rgb[2] = (v[0] * a + 255 * (255 - a) + 127) / 255;
    } else if (img->is_cmyk) {
        for (int c = 0; c < 3; c++) rgb[c] = ((255 - v[c]) * (255 - v[3]) + 127) / 255;
    } else {
        unsigned a = img->channels == 4 ? v[3] : 255;
        for (int c = 0; c < 3; c++) rgb[c] = (v[c] * a + 255 * (255 - a) + 127) / 255;
    }
}

/* The overlap of source interval [i, i+1) with output pixel o's [o*s, (o+1)*s). */
static double overlap(int i, int o, double s) {
    double lo = fmax(i, o * s), hi = fmin(i + 1.0, (o + 1) * s);
    return hi > lo ? hi - lo : 0;
}

static int check_one(int w, int h, int ch, int bits, int cmyk, int ow, int oh) {
    size_t n = (size_t)w * h * ch;
    cdb_image img = {0};
    uint8_t *out = malloc((size_t)ow * oh * 3);
    int bad = 0;
    img.width = w, img.height = h, img.channels = ch, img.bits = bits, img.is_cmyk = cmyk;
    img.pixels = malloc(n * (bits == 16 ? 2 : 1));
    /* smooth content plus noise, so that averages differ from their samples */
    for (size_t i = 0; i < n; i++) {
        unsigned v = (unsigned)((i * 7 / (size_t)ch) % 256 + rnd() % 40) % 256;
        if (bits == 16) ((uint16_t *)img.pixels)[i] = (uint16_t)(v << 8 | (rnd() & 255));
        else ((uint8_t *)img.pixels)[i] = (uint8_t)v;
    }
    if (cdb_eng_thumb_scale(&img, ow, oh, out) != CDB_OK) bad = -1;
    double sx = (double)w / ow, sy = (double)h / oh;
    for (int oy = 0; oy < oh && !bad; oy++)
        for (int ox = 0; ox < ow && !bad; ox++) {
            double acc[3] = {0, 0, 0}, wsum = 0, rgb[3];
            for (int y = (int)floor(oy * sy); y < h && y < ceil((oy + 1) * sy); y++)
                for (int x = (int)floor(ox * sx); x < w && x < ceil((ox + 1) * sx); x++) {
                    double wt = overlap(x, ox, sx) * overlap(y, oy, sy);
                    oracle_rgb(&img, x, y, rgb);
                    for (int c = 0; c < 3; c++) acc[c] += wt * rgb[c];
                    wsum += wt;
                }
            for (int c = 0; c < 3; c++) {
                double want = acc[c] / wsum;
                int got = out[((size_t)oy * ow + ox) * 3 + c];
                if (fabs(got - want) > 0.5 + 1e-3) {
                    fprintf(stderr, "    %dx%d ch %d bits %d cmyk %d -> %dx%d: pixel (%d,%d)[%d] "
                            "%d, oracle %.3f\n", w, h, ch, bits, cmyk, ow, oh, ox, oy, c, got, want);
                    bad = 1;
                }
            }
        }
    free(img.pixels);
    free(out);
    return bad;
}

CDB_TEST(scale_matches_area_average) {
    static const int layouts[][3] = {{3, 8, 0}, {1, 8, 0}, {2, 8, 0}, {4, 8, 0}, {4, 8, 1},
                                     {3, 16, 0}, {1, 16, 0}, {4, 16, 0}};
    int cases = 0;
    for (int round = 0; round < 40; round++)
        for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++) {
            int w = 1 + (int)(rnd() % 300), h = 1 + (int)(rnd() % 300);
            int ow = 1 + (int)(rnd() % (unsigned)w), oh = 1 + (int)(rnd() % (unsigned)h);
            if (round == 0) ow = w, oh = h; /* identity */
            if (round == 1) ow = w > 1 ? w / 2 : 1, oh = 1; /* integer and extreme factors */
            CHECK_EQ_INT(check_one(w, h, layouts[l][0], layouts[l][1], layouts[l][2], ow, oh), 0);
            cases++;
        }
    CHECK_EQ_INT(cases, 320);
}

CDB_TEST(dims) {
    int ow, oh;
    cdb_eng_thumb_dims(4000, 3000, 384, &ow, &oh);
    CHECK(ow == 384 && oh == 288);
    cdb_eng_thumb_dims(3000, 4000, 384, &ow, &oh);
    CHECK(ow == 288 && oh == 384);
    cdb_eng_thumb_dims(200, 100, 384, &ow, &oh); /* never scaled up */
    CHECK(ow == 200 && oh == 100);
    cdb_eng_thumb_dims(10000, 1, 384, &ow, &oh); /* never 0 */
    CHECK(ow == 384 && oh == 1);
}

CDB_TEST(make_gives_a_jpeg_of_that_size) {
    cdb_image img = {0};
    eng_thumb t;
    int w = 0, h = 0;
    img.width = 1000, img.height = 600, img.channels = 3, img.bits = 8;
    img.pixels = calloc((size_t)1000 * 600, 3);
    CHECK_OK(cdb_eng_thumb_make(&img, 384, &t));
    CHECK(t.n > 2 && t.jpeg[0] == 0xFF && t.jpeg[1] == 0xD8);
    CHECK_OK(cdb_image_probe(t.jpeg, t.n, &w, &h));
    CHECK(w == 384 && h == 230 && t.width == 384 && t.height == 230);
    cdb_eng_thumb_clear(&t);
    free(img.pixels);
}

CDB_TEST_MAIN(scale_matches_area_average, dims, make_gives_a_jpeg_of_that_size)
