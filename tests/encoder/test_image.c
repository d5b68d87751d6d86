/*
** test_image.c: image decoding and the reference CLIP transform against golden
** fixtures from PIL 9.4 + torch (tests/golden/images, made by
** tests/reference/make_image_fixtures.py; see tests/golden/README.md).
**
** - Lossless inputs (PNG 8/16-bit, gray, 1-bit, palette, tRNS, RGBA, LA, BMP, GIF,
**   TGA, PNM): the uint8 RGB crop must equal PIL's at every value, and every
**   normalized value must equal torch's ToTensor+Normalize of that byte (norm_lut)
**   to 1e-6; two cases also compare their whole CHW tensor.
** - JPEG (libjpeg-turbo as PIL: qualities, subsamplings, progressive, arithmetic,
**   restart markers, gray, CMYK, Adobe YCCK), WebP, TIFF, PSD: exact, as lossless;
**   HEIC/AVIF exact against libheif's heif-convert; EXIF orientations 1-8 against
**   PIL's ImageOps.exif_transpose; fast mode exact against PIL's Image.draft.
** - Bad inputs (empty, text, truncated, corrupt, unsupported JPEG processes,
**   decompression bombs, absurd PNG chunk lengths, random byte flips): a clear
**   error, never a crash.
** - Speed figures for a 4000x3000 JPEG (printed, not asserted).
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "cdb_test.h"
#include "read_file.h"
#include "encoder/encoder.h"


#define GOLDEN CDB_SOURCE_DIR "/tests/golden/images"

/* ---- helpers ---------------------------------------------------------------- */

typedef struct npy {
    char dtype[8]; /* "u1" or "f4" (little-endian) */
    int ndim;
    long shape[4];
    size_t count;
    void *data;
    void *raw;
} npy;

static void npy_free(npy *a) {
    free(a->raw);
    memset(a, 0, sizeof *a);
}

/* Reads a (gzipped or plain) .npy file: version 1/2, C order, u1 or <f4. */
static int npy_load(const char *path, npy *a) {
    gzFile g = gzopen(path, "rb");
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = NULL;
    memset(a, 0, sizeof *a);
    if (!g) return -1;
    buf = malloc(cap);
    for (;;) {
        int r;
        if (n == cap) buf = realloc(buf, cap *= 2);
        r = gzread(g, buf + n, (unsigned)(cap - n));
        if (r <= 0) break;
        n += (size_t)r;
    }
    gzclose(g);
    if (n < 12 || memcmp(buf, "\x93NUMPY", 6)) goto bad;
    {
        size_t hlen = buf[6] == 1 ? (size_t)(buf[8] | buf[9] << 8)
                                  : (size_t)(buf[8] | buf[9] << 8 | buf[10] << 16);
        size_t off = buf[6] == 1 ? 10 : 12;
        char hdr[512];
        const char *d, *s;
        if (hlen >= sizeof hdr || off + hlen > n) goto bad;
        memcpy(hdr, buf + off, hlen);
        hdr[hlen] = 0;
        d = strstr(hdr, "'descr': '");
        s = strstr(hdr, "'shape': (");
        if (!d || !s || strstr(hdr, "'fortran_order': True")) goto bad;
        d += 10;
        if (!strncmp(d, "|u1", 3)) strcpy(a->dtype, "u1");
        else if (!strncmp(d, "<f4", 3)) strcpy(a->dtype, "f4");
        else goto bad;
        s += 10;
        a->count = 1;
        while (*s && *s != ')' && a->ndim < 4) {
            char *e;
            long v = strtol(s, &e, 10);
            if (e == s) break;
            a->shape[a->ndim++] = v;
            a->count *= (size_t)v;
            s = e;
            while (*s == ',' || *s == ' ') s++;
        }
        if (off + hlen + a->count * (a->dtype[0] == 'u' ? 1 : 4) > n) goto bad;
        a->raw = buf;
        a->data = buf + off + hlen;
        return 0;
    }
bad:
    free(buf);
    return -1;
}

typedef struct gcase {
    char name[96], input[96], kind[16], crop[128], tensor[128];
    int size, apply_exif, interp;
} gcase;

static int load_manifest(gcase *cs, int max) {
    FILE *f = fopen(GOLDEN "/manifest.txt", "r");
    char line[1024];
    int n = 0;
    if (!f) return -1;
    while (fgets(line, sizeof line, f) && n < max) {
        gcase *c = &cs[n];
        if (line[0] == '#' || line[0] == '\n') continue;
        if (sscanf(line, "%95s %95s %d %d %d %15s %127s %127s", c->name, c->input, &c->size,
                   &c->apply_exif, &c->interp, c->kind, c->crop, c->tensor) == 8)
            n++;
    }
    fclose(f);
    return n;
}

typedef struct result {
    int ok;
    long mismatches;
    int max_u8_diff;
    double mean_abs, max_abs;     /* normalized tensor vs reference (via norm_lut) */
    double lut_max_err;           /* our tensor vs norm_lut of our own crop */
    char why[256];
} result;

/* Runs one golden case; fills r. */
static void run_case(const gcase *c, const npy *lut, result *r) {
    char path[512];
    cdb_image *img = NULL;
    cdb_image_params ip = cdb_image_params_default();
    cdb_preprocess_params pp = cdb_preprocess_params_default();
    npy ref;
    size_t S = (size_t)c->size, plane = S * S;
    float *out = malloc(3 * plane * sizeof(float));
    uint8_t *crop = malloc(plane * 3);
    const float *L = lut->data;
    memset(r, 0, sizeof *r);
    ip.apply_exif = c->apply_exif;
    if (!strcmp(c->kind, "fast")) {
        ip.decode = CDB_DECODE_FAST;
        ip.target_size = c->size;
    }
    pp.size = c->size;
    pp.interp = c->interp ? CDB_INTERP_BILINEAR : CDB_INTERP_BICUBIC;
    snprintf(path, sizeof path, "%s/%s", GOLDEN, c->input);
    if (cdb_image_load(path, &ip, &img) != CDB_OK) {
        snprintf(r->why, sizeof r->why, "decode: %s", cdb_errmsg());
        goto done;
    }
    if (cdb_image_preprocess(img, &pp, out, crop) != CDB_OK) {
        snprintf(r->why, sizeof r->why, "preprocess: %s", cdb_errmsg());
        goto done;
    }
    snprintf(path, sizeof path, "%s/%s", GOLDEN, c->crop);
    if (npy_load(path, &ref) || strcmp(ref.dtype, "u1") || ref.count != plane * 3) {
        snprintf(r->why, sizeof r->why, "bad fixture %s", c->crop);
        goto done;
    }
    for (size_t i = 0; i < plane; i++)
        for (int ch = 0; ch < 3; ch++) {
            int a = crop[i * 3 + ch], b = ((uint8_t *)ref.data)[i * 3 + ch];
            float mine = out[ch * plane + i];
            double d = fabs((double)mine - (double)L[ch * 256 + b]);
            double e = fabs((double)mine - (double)L[ch * 256 + a]);
            if (a != b) r->mismatches++;
            if (abs(a - b) > r->max_u8_diff) r->max_u8_diff = abs(a - b);
            r->mean_abs += d;
            if (d > r->max_abs) r->max_abs = d;
            if (e > r->lut_max_err) r->lut_max_err = e;
        }
    r->mean_abs /= (double)(plane * 3);
    npy_free(&ref);
    r->ok = 1;
done:
    cdb_image_free(img);
    free(out);
    free(crop);
}

/* ---- tests ------------------------------------------------------------------ */

CDB_TEST(image_defaults) {
    cdb_preprocess_params pp = cdb_preprocess_params_default();
    cdb_image_params ip = cdb_image_params_default();
    CHECK_EQ_INT(pp.size, 224);
    CHECK_EQ_INT(pp.interp, CDB_INTERP_BICUBIC);
    /* OpenAI CLIP's constants (clip/clip.py _transform), as float32. */
    CHECK(pp.mean[0] == 0.48145466f && pp.mean[1] == 0.4578275f && pp.mean[2] == 0.40821073f);
    CHECK(pp.std[0] == 0.26862954f && pp.std[1] == 0.26130258f && pp.std[2] == 0.27577711f);
    CHECK_EQ_INT(ip.max_pixels, 2 * 89478485LL); /* PIL raises above 2 x MAX_IMAGE_PIXELS */
    /* the appended fields are zero: CLIP's transform (fuzz_image found them unset) */
    CHECK_EQ_INT(pp.resize, CDB_RESIZE_SHORT_CROP);
    CHECK(pp.rescale_factor == 0.0);
    CHECK_EQ_INT(ip.apply_exif, 1);
}

static void golden_kind(cdb_test_ctx *cdb_t_, const char *kind) {
    static gcase cs[256];
    npy lut;
    int n = load_manifest(cs, 256), ran = 0, failed = 0, not_built = 0;
    CHECK_MSG(n > 0, "cannot read %s/manifest.txt", GOLDEN);
    CHECK_MSG(npy_load(GOLDEN "/norm_lut.npy.gz", &lut) == 0 && lut.count == 768 &&
                  !strcmp(lut.dtype, "f4"),
              "cannot read norm_lut.npy.gz");
    for (int i = 0; i < n; i++) {
        result r;
        int bad;
        if (strcmp(cs[i].kind, kind)) continue;
        run_case(&cs[i], &lut, &r);
        if (!r.ok && strstr(r.why, "this clipdb was built without")) {
            not_built++; /* a build without that library: formats_and_info checks the error */
            continue;
        }
        ran++;
        bad = !r.ok || r.mismatches != 0 || r.lut_max_err > 1e-6;
        if (bad || getenv("CDB_TEST_VERBOSE")) {
            fprintf(stderr,
                    "    %-26s %s: %s mismatches=%ld max_u8=%d mean=%.5f max=%.5f lut=%.2g\n",
                    cs[i].name, bad ? "FAIL" : "ok", r.ok ? "" : r.why, r.mismatches,
                    r.max_u8_diff, r.mean_abs, r.max_abs, r.lut_max_err);
        }
        failed += bad;
    }
    npy_free(&lut);
    if (not_built) fprintf(stderr, "    %d '%s' cases skipped: format not in this build\n", not_built, kind);
    CHECK_MSG(ran >= 5, "only %d '%s' cases in the manifest", ran, kind);
    CHECK_MSG(failed == 0, "%d of %d '%s' golden cases failed", failed, ran, kind);
}

/* Every decode, lossless or not (JPEG through libjpeg-turbo as PIL, WebP, TIFF,
** HEIC/AVIF against heif-convert), must give the reference's bytes. */
CDB_TEST(golden_exact) { golden_kind(cdb_t_, "exact"); }
/* Fast mode on JPEG is PIL's Image.draft: the same bytes as PIL's draft + transform. */
CDB_TEST(golden_fast) { golden_kind(cdb_t_, "fast"); }

/* The whole CHW tensor for the cases that store one, to 1e-6. */
CDB_TEST(golden_tensor) {
    static gcase cs[256];
    int n = load_manifest(cs, 256), checked = 0;
    CHECK(n > 0);
    for (int i = 0; i < n; i++) {
        char path[512];
        npy ref;
        cdb_image *img = NULL;
        cdb_image_params ip = cdb_image_params_default();
        cdb_preprocess_params pp = cdb_preprocess_params_default();
        float *out;
        double maxd = 0;
        if (!strcmp(cs[i].tensor, "-")) continue;
        snprintf(path, sizeof path, "%s/%s", GOLDEN, cs[i].tensor);
        CHECK_MSG(npy_load(path, &ref) == 0 && !strcmp(ref.dtype, "f4"), "bad %s", path);
        CHECK_EQ_INT(ref.count, 3 * cs[i].size * cs[i].size);
        ip.apply_exif = cs[i].apply_exif;
        pp.size = cs[i].size;
        pp.interp = cs[i].interp ? CDB_INTERP_BILINEAR : CDB_INTERP_BICUBIC;
        snprintf(path, sizeof path, "%s/%s", GOLDEN, cs[i].input);
        CHECK_OK(cdb_image_load(path, &ip, &img));
        out = malloc(ref.count * sizeof(float));
        CHECK_OK(cdb_image_preprocess(img, &pp, out, NULL));
        for (size_t k = 0; k < ref.count; k++) {
            double d = fabs((double)out[k] - (double)((float *)ref.data)[k]);
            if (d > maxd) maxd = d;
        }
        free(out);
        cdb_image_free(img);
        npy_free(&ref);
        CHECK_MSG(maxd <= 1e-6, "%s: max |diff| %.3g > 1e-6", cs[i].name, maxd);
        checked++;
    }
    CHECK(checked >= 2);
}

static cdb_image *load_golden(cdb_test_ctx *cdb_t_, const char *name, int apply_exif) {
    char path[512];
    cdb_image *img = NULL;
    cdb_image_params ip = cdb_image_params_default();
    ip.apply_exif = apply_exif;
    snprintf(path, sizeof path, "%s/%s", GOLDEN, name);
    if (cdb_image_load(path, &ip, &img) != CDB_OK) {
        fprintf(stderr, "    load %s: %s\n", name, cdb_errmsg());
        cdb_t_->failed = 1;
        return NULL;
    }
    return img;
}

/* The mode each format's header implies (what PIL would call it). */
CDB_TEST(decode_modes) {
    static const struct {
        const char *file;
        int w, h, channels, bits, palette;
    } want[] = {
        {"rgb_7x5.png", 7, 5, 3, 8, 0},        {"gray_150x110.png", 150, 110, 1, 8, 0},
        {"bw_45x37.png", 45, 37, 1, 8, 1},     {"pal_120x90.png", 120, 90, 3, 8, 1},
        {"pal_trns_53x71.png", 53, 71, 4, 8, 1}, {"rgb16_80x60.png", 80, 60, 3, 16, 0},
        {"gray16_70x90.png", 70, 90, 1, 16, 0}, {"rgba_130x100.png", 130, 100, 4, 8, 0},
        {"la_61x77.png", 61, 77, 2, 8, 0},     {"rgb_90x70.bmp", 90, 70, 3, 8, 0},
        {"rgba_60x50.bmp", 60, 50, 3, 8, 0},   {"pal_70x50.bmp", 70, 50, 3, 8, 1},
        {"gray_66x40.bmp", 66, 40, 1, 8, 0},   {"pal_75x55.gif", 75, 55, 4, 8, 1},
        {"rgb_57x83.tga", 57, 83, 3, 8, 0},    {"rgba_50x40.tga", 50, 40, 4, 8, 0},
        {"rgb_44x70.ppm", 44, 70, 3, 8, 0},    {"gray_70x44.pgm", 70, 44, 1, 8, 0},
        {"photo_320x240.jpg", 320, 240, 3, 8, 0}, {"photo_320x240_prog.jpg", 320, 240, 3, 8, 0},
        {"photo_gray_320x240.jpg", 320, 240, 1, 8, 0},
        {"photo_cmyk_160x120.jpg", 160, 120, 4, 8, 0}, {"rgba16_60x45.png", 60, 45, 4, 16, 0},
        {"la16_60x45.png", 60, 45, 2, 16, 0},  {"gray_40x30_max1000.pgm", 40, 30, 1, 16, 0},
        {"rgb_30x40_max1000.ppm", 30, 40, 3, 8, 0}, {"bw_37x29.bmp", 37, 29, 1, 8, 1},
        {"gray2_35x21.png", 35, 21, 1, 8, 0},  {"pal1_50x40.png", 50, 40, 3, 8, 1},
        {"pal_66x48.gif", 66, 48, 3, 8, 1},    {"rgba_80x60_rle.tga", 80, 60, 4, 8, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cdb_image *img = load_golden(cdb_t_, want[i].file, 1);
        if (!img) return;
        CHECK_MSG(img->width == want[i].w && img->height == want[i].h &&
                      img->channels == want[i].channels && img->bits == want[i].bits &&
                      img->is_palette == want[i].palette &&
                      img->is_cmyk == (strstr(want[i].file, "cmyk") != NULL),
                  "%s: got %dx%d ch=%d bits=%d pal=%d", want[i].file, img->width, img->height,
                  img->channels, img->bits, img->is_palette);
        cdb_image_free(img);
    }
}

/* Orientations 5-8 swap the axes; apply_exif=0 keeps the stored layout. */
CDB_TEST(exif_dims) {
    for (int o = 1; o <= 8; o++) {
        char name[64];
        cdb_image *a, *b;
        snprintf(name, sizeof name, "exif_o%d_96x64.jpg", o);
        a = load_golden(cdb_t_, name, 1);
        b = load_golden(cdb_t_, name, 0);
        if (!a || !b) return;
        CHECK_EQ_INT(b->width, 96);
        CHECK_EQ_INT(a->width, o >= 5 ? 64 : 96);
        CHECK_EQ_INT(a->height, o >= 5 ? 96 : 64);
        if (o == 1) CHECK(!memcmp(a->pixels, b->pixels, 96 * 64 * 3));
        if (o == 3) { /* ROTATE_180: first pixel of a is the last of b */
            CHECK(!memcmp(a->pixels, (uint8_t *)b->pixels + (96 * 64 - 1) * 3, 3));
        }
        cdb_image_free(a);
        cdb_image_free(b);
    }
}

static size_t make_png(unsigned char *b, uint32_t w, uint32_t h, uint32_t idat_len,
                       const unsigned char *idat, size_t idat_n);

CDB_TEST(probe_and_limits) {
    size_t n;
    unsigned char *buf = test_read_file(GOLDEN "/photo_320x240.jpg", &n);
    int w = 0, h = 0;
    cdb_image *img = NULL;
    cdb_image_params ip = cdb_image_params_default();
    CHECK(buf != NULL);
    CHECK_OK(cdb_image_probe(buf, n, &w, &h));
    CHECK_EQ_INT(w, 320);
    CHECK_EQ_INT(h, 240);
    ip.max_pixels = 320 * 240 - 1;
    CHECK_RC(cdb_image_decode(buf, n, &ip, &img), CDB_TOO_LARGE);
    CHECK(img == NULL);
    CHECK(strstr(cdb_errmsg(), "76800") != NULL);
    ip.max_pixels = 320 * 240;
    CHECK_OK(cdb_image_decode(buf, n, &ip, &img));
    cdb_image_free(img);
    ip.max_pixels = -1;
    CHECK_RC(cdb_image_decode(buf, n, &ip, &img), CDB_INVALID);
    free(buf);
    /* probe reads the header only: a 100000 x 100000 PNG (a bomb) still probes */
    {
        unsigned char png[128], z[9] = {0x78, 0x9c, 0x63, 0, 0, 0, 1, 0, 1};
        size_t np = make_png(png, 100000, 100000, 9, z, 9);
        CHECK_OK(cdb_image_probe(png, np, &w, &h));
        CHECK_EQ_INT(w, 100000);
        CHECK_EQ_INT(h, 100000);
        CHECK_RC(cdb_image_probe("hello", 5, &w, &h), CDB_UNSUPPORTED);
        CHECK_RC(cdb_image_probe(png, 0, &w, &h), CDB_CORRUPT);
    }
}

/* A PNG header with the given IHDR size and one IDAT of the given declared length. */
static size_t make_png(unsigned char *b, uint32_t w, uint32_t h, uint32_t idat_len,
                       const unsigned char *idat, size_t idat_n) {
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    size_t o = 0;
    unsigned char ihdr[13] = {0};
#define PUT32(v) (b[o++] = (unsigned char)((v) >> 24), b[o++] = (unsigned char)((v) >> 16), \
                  b[o++] = (unsigned char)((v) >> 8), b[o++] = (unsigned char)(v))
    memcpy(b, sig, 8);
    o = 8;
    ihdr[0] = (unsigned char)(w >> 24); ihdr[1] = (unsigned char)(w >> 16);
    ihdr[2] = (unsigned char)(w >> 8);  ihdr[3] = (unsigned char)w;
    ihdr[4] = (unsigned char)(h >> 24); ihdr[5] = (unsigned char)(h >> 16);
    ihdr[6] = (unsigned char)(h >> 8);  ihdr[7] = (unsigned char)h;
    ihdr[8] = 8; ihdr[9] = 2;
    PUT32(13u);
    memcpy(b + o, "IHDR", 4); o += 4;
    memcpy(b + o, ihdr, 13); o += 13;
    PUT32(crc32(crc32(0, (const Bytef *)"IHDR", 4), ihdr, 13));
    PUT32(idat_len);
    memcpy(b + o, "IDAT", 4); o += 4;
    memcpy(b + o, idat, idat_n); o += idat_n;
    PUT32(0u);
    PUT32(0u);
    memcpy(b + o, "IEND", 4); o += 4;
    PUT32(0xAE426082u);
#undef PUT32
    return o;
}

static void expect_error(cdb_test_ctx *cdb_t_, const char *what, const void *buf, size_t n,
                         int want_rc) {
    cdb_image *img = (cdb_image *)(uintptr_t)1;
    cdb_status rc = cdb_image_decode(buf, n, NULL, &img);
    if (rc == CDB_OK) {
        cdb_image_free(img);
        CDB_TEST_FAIL_("%s: decoded without error", what);
    }
    CHECK_MSG(img == NULL, "%s: *out not NULL on error", what);
    CHECK_MSG(cdb_errmsg()[0] != 0, "%s: empty error message", what);
    if (want_rc >= 0)
        CHECK_MSG((int)rc == want_rc, "%s: %s (%s), want %s", what, cdb_status_str(rc),
                  cdb_errmsg(), cdb_status_str((cdb_status)want_rc));
    if (getenv("CDB_TEST_VERBOSE"))
        fprintf(stderr, "    %-22s -> %s: %s\n", what, cdb_status_str(rc), cdb_errmsg());
}

CDB_TEST(bad_files) {
    size_t nj, np;
    unsigned char *jpg = test_read_file(GOLDEN "/photo_320x240.jpg", &nj);
    unsigned char *png = test_read_file(GOLDEN "/rgb_320x241.png", &np);
    unsigned char *b;
    unsigned char small[256], zeros[64] = {0};
    static const char text[] = "This is a text file, not an image.\nclipdb\n";
    CHECK(jpg && png);
    b = malloc(nj > np ? nj : np);

    expect_error(cdb_t_, "zero bytes", small, 0, CDB_CORRUPT);
    expect_error(cdb_t_, "text file", text, sizeof text - 1, CDB_UNSUPPORTED);
    expect_error(cdb_t_, "zeros", zeros, sizeof zeros, CDB_UNSUPPORTED);
    expect_error(cdb_t_, "jpeg header only", jpg, 20, -1);
    expect_error(cdb_t_, "jpeg truncated 50%", jpg, nj / 2, -1);
    expect_error(cdb_t_, "png truncated 50%", png, np / 2, CDB_CORRUPT);
    expect_error(cdb_t_, "png signature only", png, 8, CDB_CORRUPT);
    /* corrupt: garbage after the JPEG headers */
    memcpy(b, jpg, nj);
    for (size_t i = nj / 4; i < nj; i++) b[i] = (unsigned char)(i * 131u);
    expect_error(cdb_t_, "jpeg corrupt body", b, nj, -1);
    memcpy(b, png, np);
    for (size_t i = 60; i < np - 12; i++) b[i] = (unsigned char)(i * 7u);
    expect_error(cdb_t_, "png corrupt body", b, np, -1);
    /* unsupported JPEG processes: patch the SOF marker / precision */
    for (size_t i = 2; i + 10 < nj; i++)
        if (jpg[i] == 0xFF && jpg[i + 1] == 0xC0) {
            memcpy(b, jpg, nj);
            b[i + 1] = 0xC3;
            expect_error(cdb_t_, "jpeg lossless", b, nj, CDB_UNSUPPORTED);
            b[i + 1] = 0xC0;
            b[i + 4] = 12;
            expect_error(cdb_t_, "jpeg 12-bit", b, nj, CDB_UNSUPPORTED);
            b[i + 4] = 8;
            CHECK_EQ_INT(b[i + 11], 0x22); /* 4:2:0 luma */
            b[i + 14] = 0x31;              /* chroma 3x1: 3 is not a multiple of 2 */
            expect_error(cdb_t_, "jpeg fractional sampling", b, nj, CDB_UNSUPPORTED);
            b[i + 14] = 0x05;
            expect_error(cdb_t_, "jpeg sampling 0x5", b, nj, CDB_CORRUPT);
            break;
        }
    /* decompression bomb: 100000 x 100000 declared, 100 bytes of file */
    {
        unsigned char z[16] = {0x78, 0x9c, 0x63, 0, 0, 0, 1, 0, 1};
        size_t n = make_png(small, 100000, 100000, 9, z, 9);
        expect_error(cdb_t_, "png bomb", small, n, CDB_TOO_LARGE);
        n = make_png(small, 20000, 20000, 9, z, 9); /* 4e8 > 2 x 89478485 */
        expect_error(cdb_t_, "png bomb 20000^2", small, n, CDB_TOO_LARGE);
        n = make_png(small, 16, 16, 0x7FFFFFF0u, z, 9);
        expect_error(cdb_t_, "png absurd chunk len", small, n, CDB_CORRUPT);
        n = make_png(small, 16, 16, 0xFFFFFFFFu, z, 9);
        expect_error(cdb_t_, "png chunk len 2^32-1", small, n, CDB_CORRUPT);
        n = make_png(small, 0, 16, 9, z, 9);
        expect_error(cdb_t_, "png zero width", small, n, -1);
    }
    expect_error(cdb_t_, "pbm P4", "P4\n8 8\n\0\0\0\0\0\0\0\0", 14, CDB_UNSUPPORTED);
    expect_error(cdb_t_, "pgm huge header", "P5\n99999999999 2\n255\n", 21, CDB_TOO_LARGE);
    expect_error(cdb_t_, "pgm truncated", "P5\n64 64\n255\n\1\2\3", 16, -1);
    expect_error(cdb_t_, "gif header only", "GIF89a\x10\0\x10\0\0\0\0", 13, -1);
    expect_error(cdb_t_, "bmp header only", "BM\0\0\0\0\0\0\0\0\x36\0\0\0", 14, -1);
    {
        size_t nt = 0, nb = 0;
        unsigned char *tga = test_read_file(GOLDEN "/rgb_57x83.tga", &nt);
        unsigned char *bmp = test_read_file(GOLDEN "/rgb_90x70.bmp", &nb);
        CHECK(tga && bmp);
        expect_error(cdb_t_, "tga truncated", tga, nt - 100, CDB_CORRUPT);
        expect_error(cdb_t_, "bmp truncated", bmp, nb - 100, CDB_CORRUPT);
        free(tga);
        free(bmp);
    }
    {
        cdb_image *img = NULL;
        CHECK_RC(cdb_image_load(GOLDEN "/no_such_file.png", NULL, &img), CDB_NOTFOUND);
        CHECK(img == NULL);
    }
    free(jpg);
    free(png);
    free(b);
}

/* Random byte flips in valid files of every format: errors are fine, crashes are
** not (run under CLIPDB_SANITIZE=ON for the full value; CDB_TEST_MUTATIONS=N sets
** the iterations per file). */
CDB_TEST(mutations_never_crash) {
    static const char *files[] = {"photo_320x240_prog.jpg", "exif_o6_96x64.jpg",
                                  "jpeg_arith_203x157.jpg", "jpeg_ycck_120x90.jpg",
                                  "webp_lossy_150x110.webp", "webp_anim_80x60.webp",
                                  "tiff_lzw_130x90.tif", "tiff_planar_130x90.tif",
                                  "heic_o6_120x90.heic", "avif_o1_120x90.avif",
                                  "psd_rle_150x97.psd",
                                  "pal_trns_53x71.png", "rgb16_80x60.png", "pal_75x55.gif",
                                  "pal_70x50.bmp", "rgba_50x40.tga", "gray_70x44.pgm",
                                  "rgb_30x40_max1000.ppm", "rgba_80x60_rle.tga", "bw_37x29.bmp"};
    uint32_t seed = 12345;
    int decoded = 0, refused = 0;
    int iters = getenv("CDB_TEST_MUTATIONS") ? atoi(getenv("CDB_TEST_MUTATIONS")) : 40;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[512];
        size_t n;
        unsigned char *orig, *b;
        snprintf(path, sizeof path, "%s/%s", GOLDEN, files[f]);
        orig = test_read_file(path, &n);
        CHECK(orig != NULL);
        b = malloc(n);
        for (int it = 0; it < iters; it++) {
            cdb_image *img = NULL;
            memcpy(b, orig, n);
            for (int k = 0; k < 1 + it % 4; k++) {
                seed = seed * 1664525u + 1013904223u;
                size_t pos = (seed >> 8) % (it % 2 ? (n < 200 ? n : 200) : n);
                seed = seed * 1664525u + 1013904223u;
                b[pos] = (unsigned char)(seed >> 24);
            }
            size_t len = n - (it % 3 == 2 ? (seed >> 4) % n : 0); /* some truncated */
            if (cdb_image_decode(b, len, NULL, &img) == CDB_OK) {
                cdb_preprocess_params pp = cdb_preprocess_params_default();
                float *out = malloc(3 * 32 * 32 * sizeof(float));
                pp.size = 32;
                CHECK_OK(cdb_image_preprocess(img, &pp, out, NULL));
                free(out);
                cdb_image_free(img);
                decoded++;
            } else {
                CHECK(cdb_errmsg()[0] != 0);
                refused++;
            }
        }
        free(b);
        free(orig);
    }
    CHECK(decoded + refused == (int)(sizeof files / sizeof files[0]) * iters);
    if (getenv("CDB_TEST_VERBOSE"))
        fprintf(stderr, "    %d decoded, %d refused\n", decoded, refused);
}

/* Each decoder fills format/source/full size; fast mode reports its reduction; a
** format the build lacks is refused by name (configure with -DCLIPDB_WITH_HEIF=OFF
** etc. to exercise that branch: the expectations follow cdb_image_formats()). */
CDB_TEST(formats_and_info) {
    static const struct {
        const char *file, *fmt, *source, *lib;
        int w, h, full_w, full_h, scale; /* 0: full = w x h, scale 1 */
    } want[] = {
        {"photo_320x240.jpg", "JPEG", "decoded", NULL, 320, 240, 0, 0, 0},
        {"psd_rgb_150x97.psd", "PSD", "decoded", NULL, 150, 97, 0, 0, 0},
        {"webp_lossy_150x110.webp", "WebP", "decoded", "libwebp", 150, 110, 0, 0, 0},
        {"webp_anim_80x60.webp", "WebP", "first frame", "libwebp", 80, 60, 0, 0, 0},
        {"tiff_lzw_130x90.tif", "TIFF", "decoded", "libtiff", 130, 90, 0, 0, 0},
        {"tiff_orient6_130x90.tif", "TIFF", "decoded", "libtiff", 90, 130, 0, 0, 0},
        {"heic_o6_120x90.heic", "HEIC", "primary image", "libheif", 90, 120, 0, 0, 0},
        {"avif_o1_alpha_64x48.avif", "AVIF", "primary image", "libheif", 64, 48, 0, 0, 0},
        {"dng_preview_160x120.dng", "RAW", "embedded preview", "libraw", 160, 120, 0, 0, 0},
        {"dng_preview_o6_160x120.dng", "RAW", "embedded preview", "libraw", 120, 160, 0, 0, 0},
        {"dng_nopreview_160x120.dng", "RAW", "half-size demosaic", "libraw", 80, 60, 160, 120, 2},
    };
    const char *have = cdb_image_formats(0), *detail = cdb_image_formats(1);
    CHECK(strstr(have, "JPEG") && strstr(have, "PNG") && strstr(have, "PSD"));
    CHECK(strstr(detail, "JPEG (libjpeg-turbo)") != NULL);
    if (getenv("CDB_TEST_VERBOSE")) fprintf(stderr, "    formats: %s\n", detail);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char path[512], why[64];
        cdb_image *img = NULL;
        cdb_status rc;
        int built = strstr(have, want[i].fmt) != NULL;
        snprintf(path, sizeof path, "%s/%s", GOLDEN, want[i].file);
        rc = cdb_image_load(path, NULL, &img);
        if (!built) {
            snprintf(why, sizeof why, "%s: this clipdb was built without %s", want[i].fmt,
                     want[i].lib);
            CHECK_MSG(rc == CDB_UNSUPPORTED && strstr(cdb_errmsg(), why), "%s: %s", want[i].file,
                      cdb_errmsg());
            continue;
        }
        CHECK_MSG(rc == CDB_OK, "%s: %s", want[i].file, cdb_errmsg());
        CHECK_MSG(!strcmp(img->format, want[i].fmt) && !strcmp(img->source, want[i].source) &&
                      img->width == want[i].w && img->height == want[i].h &&
                      img->full_width == (want[i].full_w ? want[i].full_w : want[i].w) &&
                      img->full_height == (want[i].full_h ? want[i].full_h : want[i].h) &&
                      img->scale_denom == (want[i].scale ? want[i].scale : 1),
                  "%s: %s/%s %dx%d full %dx%d /%d", want[i].file, img->format, img->source,
                  img->width, img->height, img->full_width, img->full_height, img->scale_denom);
        cdb_image_free(img);
    }
    /* fast mode: 800x600 at 64 decodes at 1/8 and says so; full size stays known */
    {
        char path[512];
        cdb_image *img = NULL;
        cdb_image_params ip = cdb_image_params_default();
        ip.decode = CDB_DECODE_FAST;
        ip.target_size = 64;
        snprintf(path, sizeof path, "%s/photo_800x600.jpg", GOLDEN);
        CHECK_OK(cdb_image_load(path, &ip, &img));
        CHECK(img->width == 100 && img->height == 75 && img->scale_denom == 8 &&
              img->full_width == 800 && img->full_height == 600);
        cdb_image_free(img);
        ip.target_size = 0; /* 224: 600 / 224 = 2 -> 1/2 */
        CHECK_OK(cdb_image_load(path, &ip, &img));
        CHECK(img->width == 400 && img->scale_denom == 2);
        cdb_image_free(img);
        ip.decode = (cdb_decode_mode)7;
        CHECK_RC(cdb_image_load(path, &ip, &img), CDB_INVALID);
    }
}

CDB_TEST(preprocess_args) {
    uint8_t px[12] = {0};
    cdb_image img = {.width = 2, .height = 2, .channels = 3, .bits = 8, .pixels = px};
    cdb_preprocess_params pp = cdb_preprocess_params_default();
    float out[3 * 4];
    pp.size = 2;
    CHECK_OK(cdb_image_preprocess(&img, &pp, out, NULL));
    CHECK(out[0] == (0.0f - pp.mean[0]) / pp.std[0]);
    CHECK_RC(cdb_image_preprocess(NULL, &pp, out, NULL), CDB_INVALID);
    CHECK_RC(cdb_image_preprocess(&img, NULL, out, NULL), CDB_INVALID);
    CHECK_RC(cdb_image_preprocess(&img, &pp, NULL, NULL), CDB_INVALID);
    pp.size = 0;
    CHECK_RC(cdb_image_preprocess(&img, &pp, out, NULL), CDB_INVALID);
    pp.size = 2;
    pp.std[1] = 0.0f;
    CHECK_RC(cdb_image_preprocess(&img, &pp, out, NULL), CDB_INVALID);
    pp = cdb_preprocess_params_default();
    pp.size = 2;
    img.channels = 5;
    CHECK_RC(cdb_image_preprocess(&img, &pp, out, NULL), CDB_INVALID);
    img.channels = 3;
    img.width = 0;
    CHECK_RC(cdb_image_preprocess(&img, &pp, out, NULL), CDB_INVALID);
    cdb_image_free(NULL);
}


/* buf[0..at) + ins[0..k) + buf[at..n) (heap). */
static unsigned char *spliced(const unsigned char *buf, size_t n, size_t at,
                              const void *ins, size_t k) {
    unsigned char *o = malloc(n + k);
    if (!o) return NULL;
    memcpy(o, buf, at);
    memcpy(o + at, ins, k);
    memcpy(o + at + k, buf + at, n - at);
    return o;
}

/* The generated world's mark where the file formats let a writer put a comment first
** (JPEG: a COM segment after SOI and APP0; PNG: a tEXt "Software" chunk after IHDR),
** built here byte by byte from the formats' layouts into PIL-made files that lack it
** (they must read 0, as any photo; the chunk's CRC is not what the check reads). Another
** comment or keyword, the mark after the first table, or a file cut inside it, is not
** the mark. */
CDB_TEST(world_mark) {
    static const unsigned char com[] = {0xFF, 0xFE, 0, 14, 'c', 'l', 'i', 'p', 'd', 'b', '-',
                                        'w', 'o', 'r', 'l', 'd'};
    static const unsigned char other[] = {0xFF, 0xFE, 0, 14, 'c', 'l', 'i', 'p', 'd', 'b', '-',
                                          'w', 'o', 'r', 'l', 'D'};
    static const unsigned char text[] = {0, 0, 0, 21, 't', 'E', 'X', 't', 'S', 'o', 'f', 't',
                                         'w', 'a', 'r', 'e', 0, 'c', 'l', 'i', 'p', 'd', 'b',
                                         '-', 'w', 'o', 'r', 'l', 'd', 0, 0, 0, 0};
    size_t nj = 0, np = 0;
    unsigned char *jpg = test_read_file(GOLDEN "/photo_320x240.jpg", &nj);
    unsigned char *png = test_read_file(GOLDEN "/rgb_320x241.png", &np);
    unsigned char *m;
    CHECK(jpg && nj > 40 && png && np > 60);
    if (!jpg || !png) goto done;
    CHECK_EQ_INT(cdb_image_world_marked(jpg, nj), 0);
    CHECK_EQ_INT(cdb_image_world_marked(png, np), 0);
    CHECK((m = spliced(jpg, nj, 20, com, sizeof com))); /* SOI 2 + APP0 18 */
    if (m) {
        CHECK_EQ_INT(cdb_image_world_marked(m, nj + sizeof com), 1);
        CHECK_EQ_INT(cdb_image_world_marked(m, 20 + sizeof com - 1), 0); /* cut in it */
        free(m);
    }
    CHECK((m = spliced(jpg, nj, 2, com, sizeof com))); /* before APP0 too */
    if (m) CHECK_EQ_INT(cdb_image_world_marked(m, nj + sizeof com), 1);
    free(m);
    CHECK((m = spliced(jpg, nj, 20, other, sizeof other)));
    if (m) CHECK_EQ_INT(cdb_image_world_marked(m, nj + sizeof other), 0);
    free(m);
    /* after the first table (DQT at 20, its length at 22): not where the world puts it */
    CHECK((m = spliced(jpg, nj, 22 + ((size_t)jpg[22] << 8 | jpg[23]), com, sizeof com)));
    if (m) CHECK_EQ_INT(cdb_image_world_marked(m, nj + sizeof com), 0);
    free(m);
    CHECK((m = spliced(png, np, 33, text, sizeof text))); /* signature 8 + IHDR 25 */
    if (m) {
        CHECK_EQ_INT(cdb_image_world_marked(m, np + sizeof text), 1);
        m[33 + 8] = 's'; /* another keyword */
        CHECK_EQ_INT(cdb_image_world_marked(m, np + sizeof text), 0);
        free(m);
    }
    CHECK_EQ_INT(cdb_image_world_marked(NULL, 0), 0);
    CHECK_EQ_INT(cdb_image_world_marked(com, sizeof com), 0); /* no SOI */
done:
    free(jpg);
    free(png);
}

CDB_TEST_MAIN(image_defaults, golden_exact, golden_fast, golden_tensor, decode_modes,
              exif_dims, probe_and_limits, bad_files, mutations_never_crash, formats_and_info,
              preprocess_args, world_mark)
