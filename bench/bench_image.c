/*
** bench_image.c: decode + preprocess speed for a phone-photo-sized JPEG
** (4000x3000, smooth content), printed as best-of-5 wall and CPU milliseconds.
** No bar: the ingest benchmark shows whether decoding keeps the encoder busy.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "encoder/encoder.h"

/* stb_image_write (libstb-dev) makes the large JPEG for the speed figures. */
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

static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
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

/* A 4000x3000 photo-sized JPEG (smooth content, like a phone photo): decode and
** preprocess times are printed (best of 3), not asserted. */
int main(void) {
    const int W = 4000, H = 3000;
    unsigned char *rgb = malloc((size_t)W * H * 3);
    membuf jpg = {NULL, 0, 0};
    cdb_preprocess_params pp = cdb_preprocess_params_default();
    float *out = malloc(3 * 224 * 224 * sizeof(float));
    double best_dec = 1e9, best_pre = 1e9, cpu_dec = 1e9, cpu_pre = 1e9;
    if (!rgb || !out) return 1;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            unsigned char *p = rgb + ((size_t)y * W + x) * 3;
            p[0] = (unsigned char)(128 + 100 * sin(x * 0.003) * cos(y * 0.002));
            p[1] = (unsigned char)((x ^ y) >> 4);
            p[2] = (unsigned char)(((x / 50 + y / 50) & 1) ? 200 : 40);
        }
    if (!stbi_write_jpg_to_func(membuf_write, &jpg, W, H, 3, rgb, 90)) return 1;
    for (int rep = 0; rep < 5; rep++) {
        cdb_image *img = NULL;
        int64_t t0 = cdb_now_ns(), t1, t2;
        double c0 = cpu_ms(), c1, c2;
        if (cdb_image_decode(jpg.p, jpg.n, NULL, &img) != CDB_OK) {
            fprintf(stderr, "decode: %s\n", cdb_errmsg());
            return 1;
        }
        t1 = cdb_now_ns();
        c1 = cpu_ms();
        if (cdb_image_preprocess(img, &pp, out, NULL) != CDB_OK) {
            fprintf(stderr, "preprocess: %s\n", cdb_errmsg());
            return 1;
        }
        t2 = cdb_now_ns();
        c2 = cpu_ms();
        if ((t1 - t0) / 1e6 < best_dec) best_dec = (t1 - t0) / 1e6;
        if ((t2 - t1) / 1e6 < best_pre) best_pre = (t2 - t1) / 1e6;
        if (c1 - c0 < cpu_dec) cpu_dec = c1 - c0;
        if (c2 - c1 < cpu_pre) cpu_pre = c2 - c1;
        cdb_image_free(img);
    }
    printf("image: 4000x3000 JPEG (%zu KB): decode %.1f ms (cpu %.1f); resize+crop+normalize "
           "to 224: %.1f ms (cpu %.1f); best of 5\n", jpg.n / 1024, best_dec, cpu_dec, best_pre,
           cpu_pre);
    free(jpg.p);
    free(rgb);
    free(out);
    return 0;
}
