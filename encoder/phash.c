/*
** phash.c: the perceptual hash of a decoded image (cdb_image_phash, encoder.h), the
** DCT hash of imagehash.phash with a box filter for the 32x32 reduction. What
** `clipdb duplicates` compares (with the CLIP cosine) to find near copies.
** Oracle: tests/encoder/phash_ref.py (numpy, FFT-based DCT) on the golden images.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "encoder/encoder.h"

enum { SIDE = 32, LOW = 8 };

/* The luma of pixel i of img, 0..255. */
static float luma(const cdb_image *img, size_t i)
{
    float c[4];
    int n = img->channels < 4 ? img->channels : 4;
    for (int k = 0; k < n; k++)
        c[k] = img->bits == 16 ? ((const uint16_t *)img->pixels)[i * (size_t)img->channels + k]
                                     / 257.0f
                               : ((const uint8_t *)img->pixels)[i * (size_t)img->channels + k];
    if (n <= 2)
        return c[0]; /* gray, gray + alpha */
    if (img->is_cmyk) { /* PIL's CMYK -> RGB: (255 - C) * (255 - K) / 255 ... */
        float k = 255.0f - c[3];
        for (int j = 0; j < 3; j++)
            c[j] = (255.0f - c[j]) * k / 255.0f;
    }
    return c[0] * 0.299f + c[1] * 0.587f + c[2] * 0.114f;
}

/* img's luma box-averaged into SIDE x SIDE cells (cell (y, x) covers source rows
** [y*h/SIDE, (y+1)*h/SIDE), at least one). */
static void reduce(const cdb_image *img, double out[SIDE][SIDE])
{
    int w = img->width, h = img->height;
    for (int y = 0; y < SIDE; y++) {
        int y0 = (int)((int64_t)y * h / SIDE), y1 = (int)((int64_t)(y + 1) * h / SIDE);
        if (y1 <= y0)
            y1 = y0 + 1;
        for (int x = 0; x < SIDE; x++) {
            int x0 = (int)((int64_t)x * w / SIDE), x1 = (int)((int64_t)(x + 1) * w / SIDE);
            if (x1 <= x0)
                x1 = x0 + 1;
            double sum = 0;
            if (img->channels == 1 && img->bits == 8) { /* gray (a JPEG's DC plane): the */
                const uint8_t *p = img->pixels;          /* same sum, exact, in integers */
                int64_t s = 0;
                for (int yy = y0; yy < y1; yy++)
                    for (int xx = x0; xx < x1; xx++) s += p[(size_t)yy * (size_t)w + (size_t)xx];
                sum = (double)s;
            } else {
                for (int yy = y0; yy < y1; yy++)
                    for (int xx = x0; xx < x1; xx++)
                        sum += luma(img, (size_t)yy * (size_t)w + (size_t)xx);
            }
            out[y][x] = sum / ((double)(y1 - y0) * (double)(x1 - x0));
        }
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

cdb_status cdb_image_phash(const cdb_image *img, uint64_t *out)
{
    if (!img || !out || !img->pixels || img->width <= 0 || img->height <= 0 ||
        img->channels < 1 || (img->bits != 8 && img->bits != 16))
        return cdb_seterr(CDB_INVALID, "cdb_image_phash: no image");
    double px[SIDE][SIDE], rows[SIDE][LOW], coef[LOW * LOW], sorted[LOW * LOW], cosv[LOW][SIDE];
    reduce(img, px);
    for (int u = 0; u < LOW; u++) /* unnormalized DCT-II basis: one scale for all */
        for (int x = 0; x < SIDE; x++)
            cosv[u][x] = cos(M_PI * (2 * x + 1) * u / (2.0 * SIDE));
    for (int y = 0; y < SIDE; y++)
        for (int u = 0; u < LOW; u++) {
            double s = 0;
            for (int x = 0; x < SIDE; x++)
                s += px[y][x] * cosv[u][x];
            rows[y][u] = s;
        }
    for (int v = 0; v < LOW; v++)
        for (int u = 0; u < LOW; u++) {
            double s = 0;
            for (int y = 0; y < SIDE; y++)
                s += rows[y][u] * cosv[v][y];
            coef[v * LOW + u] = s;
        }
    memcpy(sorted, coef, sizeof sorted);
    qsort(sorted, LOW * LOW, sizeof sorted[0], cmp_double);
    /* above the median by more than rounding: a flat image's AC terms are all ~0 */
    double median = (sorted[LOW * LOW / 2 - 1] + sorted[LOW * LOW / 2]) / 2;
    double eps = 1e-9 * fabs(coef[0]);
    uint64_t h = 0;
    for (int k = 0; k < LOW * LOW; k++)
        if (coef[k] > median + eps)
            h |= (uint64_t)1 << k;
    *out = h;
    return CDB_OK;
}
