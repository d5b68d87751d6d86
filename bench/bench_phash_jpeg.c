/*
** bench_phash_jpeg.c: what a JPEG's perceptual hash costs an ingest that decodes exactly
** (issue 28), and how far the hash's possible definitions are from one another, on real
** JPEGs: `bench_phash_jpeg FILE...` (Debian's wallpapers, say; with no argument, the
** JPEGs of bench_photos' set, <build>/photos/list.txt; exit 77 when there is none).
**
** Per photo, best of REPS (default 3, BENCH_PHASH_REPS) thread-CPU times:
**   exact    the exact decode (PIL's pixels) alone: the baseline
**   tap      the same decode asked for the DC hash (cdb_image_params.phash: the DC terms
**            kept as its entropy decoding hands them to the IDCT, the hash of that plane)
**   draft    a second decode at 1/8 + cdb_image_phash (the hash's definition before:
**            what computing it at ingest would have cost)
**   box      cdb_image_phash of the exact decode's own pixels (a box reduction of the
**            whole image: no second decode, another value than the 1/8 decode's)
** and the Hamming distances: DC hash vs the 1/8 decode's RGB hash and vs the box hash of
** the same photo; under each definition, the photo vs its copies (half size at q=75,
** recompressed at q=60, both written here with libjpeg from the exact pixels). Prints
** each figure and the ratios to the exact decode measured in the same run.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "encoder/encoder.h"
#include "jpeg_test_util.h"
#include "read_file.h"

#define MAX_FILES 400

static double thread_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* One decode of buf: exact or fast to 64 (draft), the DC hash asked for or not; the
** thread-CPU ms (and the image kept in *keep when keep). -1 on error. */
static double decode_ms(const unsigned char *buf, size_t n, int fast, int tap, cdb_image **keep) {
    cdb_image_params ip = cdb_image_params_default();
    cdb_image *img = NULL;
    double t0 = thread_ms(), dt;
    ip.decode = fast ? CDB_DECODE_FAST : CDB_DECODE_EXACT;
    ip.target_size = 64;
    ip.phash = tap;
    if (cdb_image_decode(buf, n, &ip, &img) != CDB_OK) return -1;
    if (fast) {
        uint64_t h;
        cdb_image_phash(img, &h);
    }
    dt = thread_ms() - t0;
    if (keep) *keep = img;
    else cdb_image_free(img);
    return dt;
}

/* The 3-channel 8-bit image img as a JPEG of quality q, halved (2x2 averages) first
** when half (jpeg_test_util.h). Heap bytes in *out (free), their count in *n. */
static int encode_copy(const cdb_image *img, int half, int q, unsigned char **out,
                       unsigned long *n) {
    size_t W = (size_t)img->width, w = half ? W / 2 : W, h = half ? (size_t)img->height / 2
                                                                  : (size_t)img->height;
    const unsigned char *px = img->pixels;
    unsigned char *small = half ? malloc(w * h * 3) : NULL;
    *out = NULL;
    if (img->channels != 3 || img->bits != 8 || (half && !small)) return free(small), -1;
    for (size_t y = 0; small && y < h; y++)
        for (size_t x = 0; x < w; x++)
            for (int k = 0; k < 3; k++)
                small[3 * (y * w + x) + k] =
                    (unsigned char)((px[3 * (2 * y * W + 2 * x) + k] +
                                     px[3 * (2 * y * W + 2 * x + 1) + k] +
                                     px[3 * ((2 * y + 1) * W + 2 * x) + k] +
                                     px[3 * ((2 * y + 1) * W + 2 * x + 1) + k] + 2) / 4);
    *out = cdb_test_jpeg_of(half ? small : px, (int)w, (int)h, 3, q, 0, n);
    free(small);
    return *out ? 0 : -1;
}

/* The three hashes of a JPEG's bytes: dc (the DC hash), draft (cdb_image_phash of a
** 1/8 decode), box (cdb_image_phash of the exact decode). -1 when one is missing. */
static int hashes(const unsigned char *buf, size_t n, uint64_t h[3]) {
    cdb_image *a = NULL, *b = NULL;
    int rc = -1;
    if (decode_ms(buf, n, 0, 1, &a) >= 0 && a->has_phash && decode_ms(buf, n, 1, 0, &b) >= 0 &&
        cdb_image_phash(b, &h[1]) == CDB_OK && cdb_image_phash(a, &h[2]) == CDB_OK) {
        h[0] = a->phash;
        rc = 0;
    }
    cdb_image_free(a);
    cdb_image_free(b);
    return rc;
}

static int bits(uint64_t a, uint64_t b) { return __builtin_popcountll(a ^ b); }

int main(int argc, char **argv) {
    static char *paths[MAX_FILES];
    int n = 0, reps = getenv("BENCH_PHASH_REPS") ? atoi(getenv("BENCH_PHASH_REPS")) : 3;
    double t_exact = 0, t_tap = 0, t_draft = 0, t_box = 0;
    int d_draft_max = 0, d_box_max = 0, copy_max[3] = {0, 0, 0}, n_used = 0;
    double d_draft_sum = 0, d_box_sum = 0, copy_sum[3] = {0, 0, 0};
    long long mp = 0;
    if (reps < 1) reps = 1;
    for (int i = 1; i < argc && n < MAX_FILES; i++) paths[n++] = argv[i];
    if (!n) { /* bench_photos' set */
        char list[1200], line[1200];
        FILE *f;
        snprintf(list, sizeof list, "%s/photos/list.txt", CDB_BINARY_DIR);
        if ((f = fopen(list, "r"))) {
            while (n < MAX_FILES && fgets(line, sizeof line, f)) {
                line[strcspn(line, "\n")] = 0;
                if (strstr(line, ".jpg") || strstr(line, ".JPG") || strstr(line, ".jpeg"))
                    paths[n++] = strdup(line);
            }
            fclose(f);
        }
    }
    if (!n) {
        printf("bench_phash_jpeg: no JPEGs (give files, or run bench_photos once)\n");
        return 77;
    }
    for (int i = 0; i < n; i++) {
        size_t len = 0;
        unsigned char *buf = test_read_file(paths[i], &len), *cp[2] = {NULL, NULL};
        unsigned long cn[2] = {0, 0};
        cdb_image *img = NULL;
        double best[4] = {1e30, 1e30, 1e30, 1e30};
        uint64_t h[3], hc[3];
        if (!buf || hashes(buf, len, h)) {
            fprintf(stderr, "bench_phash_jpeg: %s: no DC hash (not a YCbCr JPEG?)\n", paths[i]);
            free(buf);
            continue;
        }
        for (int r = 0; r < reps; r++) {
            double t, t0;
            uint64_t x;
            if ((t = decode_ms(buf, len, 0, 0, NULL)) < best[0]) best[0] = t;
            if ((t = decode_ms(buf, len, 0, 1, NULL)) < best[1]) best[1] = t;
            if ((t = decode_ms(buf, len, 1, 0, NULL)) < best[2]) best[2] = t;
            decode_ms(buf, len, 0, 0, &img);
            t0 = thread_ms();
            cdb_image_phash(img, &x);
            if ((t = thread_ms() - t0) < best[3]) best[3] = t;
            if (r + 1 < reps) cdb_image_free(img), img = NULL;
        }
        t_exact += best[0], t_tap += best[1], t_draft += best[2], t_box += best[3];
        mp += (long long)img->full_width * img->full_height;
        d_draft_sum += bits(h[0], h[1]), d_box_sum += bits(h[0], h[2]);
        if (bits(h[0], h[1]) > d_draft_max) d_draft_max = bits(h[0], h[1]);
        if (bits(h[0], h[2]) > d_box_max) d_box_max = bits(h[0], h[2]);
        const char *name = strrchr(paths[i], '/') ? strrchr(paths[i], '/') + 1 : paths[i];
        printf("  %-44.44s %5dx%-5d exact %7.1f ms  tap +%6.3f ms  draft %6.1f ms  box %5.1f ms"
               "  DC-vs-draft %2d DC-vs-box %2d", name, img->full_width, img->full_height,
               best[0], best[1] - best[0], best[2], best[3], bits(h[0], h[1]), bits(h[0], h[2]));
        for (int c = 0; c < 2; c++)
            if (encode_copy(img, c == 0, c == 0 ? 75 : 60, &cp[c], &cn[c]) == 0 &&
                hashes(cp[c], cn[c], hc) == 0) {
                printf("  %s: DC %2d draft %2d box %2d", c ? "q60" : "half", bits(h[0], hc[0]),
                       bits(h[1], hc[1]), bits(h[2], hc[2]));
                for (int k = 0; k < 3; k++) {
                    int d = bits(h[k], hc[k]);
                    copy_sum[k] += d / 2.0;
                    if (d > copy_max[k]) copy_max[k] = d;
                }
            }
        printf("\n");
        for (int c = 0; c < 2; c++) free(cp[c]);
        cdb_image_free(img);
        free(buf);
        n_used++;
    }
    if (!n_used) return 77;
    {
        printf("bench_phash_jpeg: %d JPEGs, %.1f MP on average, best of %d\n", n_used,
               mp / 1e6 / n_used, reps);
        printf("exact decode %.2f ms per photo (the baseline)\n", t_exact / n_used);
        printf("DC hash from the exact decode (tap): +%.3f ms = %.2f%% of the exact decode "
               "(bar < 5%%: %s)\n", (t_tap - t_exact) / n_used, 100 * (t_tap - t_exact) / t_exact,
               t_tap - t_exact < 0.05 * t_exact ? "met" : "MISSED");
        printf("a second 1/8 decode + hash (draft): %.2f ms = %.2f%% of the exact decode\n",
               t_draft / n_used, 100 * t_draft / t_exact);
        printf("hash of the exact decode's pixels (box): %.2f ms = %.2f%% of the exact decode\n",
               t_box / n_used, 100 * t_box / t_exact);
        printf("DC hash vs draft hash of the same photo: mean %.2f bits, max %d; vs box hash: "
               "mean %.2f, max %d\n", d_draft_sum / n_used, d_draft_max, d_box_sum / n_used,
               d_box_max);
        printf("photo vs its copies (half q75, q60), mean / max bits: DC %.2f / %d, draft %.2f "
               "/ %d, box %.2f / %d\n", copy_sum[0] / n_used, copy_max[0],
               copy_sum[1] / n_used, copy_max[1], copy_sum[2] / n_used, copy_max[2]);
    }
    return 0;
}
