/*
** bench_image.c: decode + preprocess speed on synthetic phone-sized inputs, printed
** as best-of-5 wall and CPU milliseconds (this thread), exact and fast mode:
**   - a 4000x3000 baseline JPEG (stb_image_write, quality 90)
**   - a 6000x4000 (24 MP) progressive JPEG (libjpeg's standard progression, 4:2:0)
**   - a 4032x3024 HEIC with a 320x240 thumbnail, as iPhones write them (libheif/x265;
**     skipped when the build has no libheif or no HEVC encoder)
** The inputs are written on first use into <build>/bench_data/. No bar: bench_photos
** compares with PIL on real photos; this one follows a format's cost over time.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#if BENCH_HAVE_HEIF
#include <libheif/heif.h>
#endif

#include "encoder/encoder.h"
#include "kernels/kernels.h"
#include "jpeg_test_util.h"

/* stb_image_write (libstb-dev) makes the baseline JPEG. */
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#endif
#include <stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

static double thread_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

typedef struct membuf {
    unsigned char *p;
    size_t n, cap;
} membuf;

static void membuf_write(void *ctx, void *data, int size) {
    membuf *m = ctx;
    if (m->n + (size_t)size > m->cap) {
        m->cap = (m->n + (size_t)size) * 2;
        m->p = realloc(m->p, m->cap);
    }
    memcpy(m->p + m->n, data, (size_t)size);
    m->n += (size_t)size;
}

/* Smooth content with edges, like a photo. */
static unsigned char *photo(int W, int H) {
    unsigned char *rgb = malloc((size_t)W * H * 3);
    for (int y = 0; y < H && rgb; y++)
        for (int x = 0; x < W; x++) {
            unsigned char *p = rgb + ((size_t)y * W + x) * 3;
            p[0] = (unsigned char)(128 + 100 * sin(x * 0.003) * cos(y * 0.002));
            p[1] = (unsigned char)((x ^ y) >> 4);
            p[2] = (unsigned char)(((x / 50 + y / 50) & 1) ? 200 : 40);
        }
    return rgb;
}

static int load(const char *path, membuf *m) {
    FILE *f = fopen(path, "rb");
    long n;
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    m->p = malloc((size_t)n);
    m->n = m->p ? fread(m->p, 1, (size_t)n, f) : 0;
    fclose(f);
    return m->n == (size_t)n && n > 0;
}

static int progressive_jpeg(const char *path, int W, int H) {
    unsigned char *rgb = photo(W, H);
    int ok = rgb && cdb_test_jpeg_file(path, rgb, W, H, 3, 90, CDB_TJ_PROGRESSIVE) == 0;
    free(rgb);
    return ok;
}

#if BENCH_HAVE_HEIF
static int heic(const char *path, int W, int H) {
    struct heif_context *ctx = heif_context_alloc();
    struct heif_encoder *enc = NULL;
    struct heif_image *img = NULL;
    struct heif_image_handle *h = NULL;
    unsigned char *rgb = photo(W, H);
    int stride = 0, ok = 0;
    uint8_t *plane;
    if (heif_context_get_encoder_for_format(ctx, heif_compression_HEVC, &enc).code) goto done;
    heif_encoder_set_lossy_quality(enc, 80);
    if (heif_image_create(W, H, heif_colorspace_RGB, heif_chroma_interleaved_RGB, &img).code ||
        heif_image_add_plane(img, heif_channel_interleaved, W, H, 8).code)
        goto done;
    plane = heif_image_get_plane(img, heif_channel_interleaved, &stride);
    for (int y = 0; y < H; y++) memcpy(plane + (size_t)y * stride, rgb + (size_t)y * W * 3, (size_t)W * 3);
    if (heif_context_encode_image(ctx, img, enc, NULL, &h).code) goto done;
    if (heif_context_encode_thumbnail(ctx, img, h, enc, NULL, 320, NULL).code) goto done;
    ok = !heif_context_write_to_file(ctx, path).code;
done:
    heif_image_handle_release(h);
    heif_image_release(img);
    if (enc) heif_encoder_release(enc);
    heif_context_free(ctx);
    free(rgb);
    return ok;
}
#endif

static void run(const char *what, const membuf *m) {
    cdb_preprocess_params pp = cdb_preprocess_params_default();
    float *out = malloc(3 * 224 * 224 * sizeof(float));
    for (int fast = 0; fast < 2; fast++) {
        double best_dec = 1e9, best_pre = 1e9, cpu_dec = 1e9, cpu_pre = 1e9;
        int w = 0, h = 0, s = 1;
        for (int rep = 0; rep < 5; rep++) {
            cdb_image *img = NULL;
            cdb_image_params ip = cdb_image_params_default();
            int64_t t0 = cdb_now_ns(), t1, t2;
            double c0 = thread_ms(), c1, c2;
            if (fast) ip.decode = CDB_DECODE_FAST, ip.target_size = 224;
            if (cdb_image_decode(m->p, m->n, &ip, &img) != CDB_OK) {
                printf("image: %s: %s\n", what, cdb_errmsg());
                free(out);
                return;
            }
            t1 = cdb_now_ns();
            c1 = thread_ms();
            if (cdb_image_preprocess(img, &pp, out, NULL) != CDB_OK) {
                printf("image: %s: preprocess: %s\n", what, cdb_errmsg());
                cdb_image_free(img);
                free(out);
                return;
            }
            t2 = cdb_now_ns();
            c2 = thread_ms();
            if ((t1 - t0) / 1e6 < best_dec) best_dec = (t1 - t0) / 1e6;
            if ((t2 - t1) / 1e6 < best_pre) best_pre = (t2 - t1) / 1e6;
            if (c1 - c0 < cpu_dec) cpu_dec = c1 - c0;
            if (c2 - c1 < cpu_pre) cpu_pre = c2 - c1;
            w = img->width, h = img->height, s = img->scale_denom;
            cdb_image_free(img);
        }
        printf("image: %-34s %s: decode %6.1f ms (cpu %6.1f) to %dx%d (1/%d); resize+crop+"
               "normalize %5.1f ms (cpu %5.1f); best of 5\n", what, fast ? "fast " : "exact",
               best_dec, cpu_dec, w, h, s, best_pre, cpu_pre);
    }
    free(out);
}

int main(void) {
    const int W = 4000, H = 3000;
    char dir[1024], path[1200];
    unsigned char *rgb = photo(W, H);
    membuf jpg = {NULL, 0, 0}, prog = {NULL, 0, 0}, hc = {NULL, 0, 0};
    if (!rgb) return 1;
    printf("image: ISA path %s; formats: %s\n", cdb_k_isa_name(cdb_k_cpu_isa()),
           cdb_image_formats(1));
    if (!stbi_write_jpg_to_func(membuf_write, &jpg, W, H, 3, rgb, 90)) return 1;
    free(rgb);
    run("4000x3000 baseline JPEG", &jpg);
    snprintf(dir, sizeof dir, "%s/bench_data", CDB_BINARY_DIR);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/prog_6000x4000.jpg", dir);
    if (load(path, &prog) || (progressive_jpeg(path, 6000, 4000) && load(path, &prog)))
        run("6000x4000 (24 MP) progressive JPEG", &prog);
    else
        printf("image: cannot write %s\n", path);
#if BENCH_HAVE_HEIF
    snprintf(path, sizeof path, "%s/iphone_4032x3024.heic", dir);
    if (load(path, &hc) || (heic(path, 4032, 3024) && load(path, &hc)))
        run("4032x3024 HEIC (+320x240 thumbnail)", &hc);
    else
        printf("image: HEIC skipped (no HEVC encoder in this libheif)\n");
#else
    printf("image: HEIC skipped (built without libheif)\n");
#endif
    free(jpg.p);
    free(prog.p);
    free(hc.p);
    return 0;
}
