/*
** thumbs.c: thumbnails. At ingest, a reader that has decoded a photo for the encoder
** makes its thumbnail from the same decoded image (no second decode): converted to
** 8-bit RGB (16-bit samples by their high byte, gray spread to RGB, alpha composited
** over white, CMYK converted as PIL's cmyk2rgb), scaled down so that its long side is
** at most the database's setting by exact area averaging (every source pixel weighs
** by the fraction of it an output pixel covers; never scaled up), and compressed by
** libjpeg-turbo at quality 80. The writer stores it (db/thumbs.c) after the batch
** that made the file ok. Searches' hits point at them (cdb_engine_thumb); a file
** that has none yet gets one made on the fly from its original, not stored.
**
** Memory: one converted source row, one source-width row of accumulators, the output
** image: never a full-resolution copy.
*/
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "engine/library/library.h"

#define THUMB_QUALITY 80

/* ---- area averaging -------------------------------------------------------------- */

/* For each output index o: the source indexes [start[o], start[o] + count[o]) and
** their weights (the overlap of source pixel i with [o * s, (o + 1) * s)). */
typedef struct taps {
    int *start, *count;
    float *w;  /* out * max_count weights */
    int max_count;
} taps;

static void taps_free(taps *t) {
    free(t->start);
    free(t->count);
    free(t->w);
}

static int taps_make(int in, int out, taps *t) {
    double s = (double)in / (double)out;
    memset(t, 0, sizeof *t);
    t->max_count = (int)ceil(s) + 2;
    t->start = malloc(sizeof *t->start * (size_t)out);
    t->count = malloc(sizeof *t->count * (size_t)out);
    t->w = malloc(sizeof *t->w * (size_t)out * (size_t)t->max_count);
    if (!t->start || !t->count || !t->w) return -1;
    for (int o = 0; o < out; o++) {
        double a = o * s, b = (o + 1) * s;
        int i0 = (int)floor(a), i1 = (int)ceil(b), n = 0;
        if (i1 > in) i1 = in;
        if (i0 >= i1) i0 = i1 - 1;
        t->start[o] = i0;
        for (int i = i0; i < i1 && n < t->max_count; i++) {
            double lo = i > a ? i : a, hi = i + 1 < b ? i + 1 : b;
            t->w[(size_t)o * t->max_count + n++] = (float)(hi > lo ? hi - lo : 0);
        }
        t->count[o] = n;
    }
    return 0;
}

/* Row y of img as packed 8-bit RGB: the image's own row when it is one already (8-bit
** RGB, nearly every photo), else converted into buf (width * 3). */
static const uint8_t *row_rgb8(const cdb_image *img, int y, uint8_t *buf) {
    int w = img->width, ch = img->channels;
    size_t off = (size_t)y * (size_t)w * (size_t)ch;
    const uint8_t *p8 = (const uint8_t *)img->pixels + off;
    const uint16_t *p16 = (const uint16_t *)img->pixels + off;
    if (img->bits == 8 && ch == 3) return p8;
    for (int x = 0; x < w; x++) {
        unsigned v[4] = {0, 0, 0, 255};
        for (int c = 0; c < ch && c < 4; c++)
            v[c] =
                img->bits == 16 ? (unsigned)(p16[(size_t)x * ch + c] >> 8) : p8[(size_t)x * ch + c];
        uint8_t *o = buf + (size_t)x * 3;
        if (ch == 1 || ch == 2) {
            unsigned a = ch == 2 ? v[1] : 255, g = (v[0] * a + 255 * (255 - a) + 127) / 255;
            o[0] = o[1] = o[2] = (uint8_t)g;
        } else if (ch == 4 && img->is_cmyk) { /* PIL's cmyk2rgb: (255 - C) * (255 - K) / 255 */
            unsigned nk = 255 - v[3];
            for (int c = 0; c < 3; c++) o[c] = (uint8_t)(((255 - v[c]) * nk + 127) / 255);
        } else {
            unsigned a = ch == 4 ? v[3] : 255;
            for (int c = 0; c < 3; c++) o[c] = (uint8_t)((v[c] * a + 255 * (255 - a) + 127) / 255);
        }
    }
    return buf;
}

/* col[i] += wy * src[i] over a row's n samples: the vertical pass, first, over whole
** rows (contiguous: the compiler vectorizes it), so that the horizontal one runs once
** per output row instead of once per source row. A source row strictly inside an
** output row weighs exactly 1 (taps_make). */
static void accumulate_rows(const uint8_t *src, size_t n, float wy, float *col) {
    if (wy == 1.0f)
        for (size_t i = 0; i < n; i++) col[i] += (float)src[i];
    else
        for (size_t i = 0; i < n; i++) col[i] += wy * (float)src[i];
}

/* Output row out (ow RGB pixels) from col, the weighted sum of its source rows: each
** output pixel the x-weighted sum over its taps, times norm_y / its x weights. */
static void finish_row(const float *col, const taps *tx, int ow, const float *inv_x, float inv_y,
                       uint8_t *out) {
    for (int ox = 0; ox < ow; ox++) {
        const float *wx = tx->w + (size_t)ox * tx->max_count;
        const float *s = col + (size_t)tx->start[ox] * 3;
        float r = 0, g = 0, b = 0, norm = inv_x[ox] * inv_y;
        for (int j = 0; j < tx->count[ox]; j++, s += 3) {
            r += wx[j] * s[0];
            g += wx[j] * s[1];
            b += wx[j] * s[2];
        }
        float v[3] = {r * norm + 0.5f, g * norm + 0.5f, b * norm + 0.5f};
        for (int c = 0; c < 3; c++) out[ox * 3 + c] = (uint8_t)(v[c] < 0 ? 0 : v[c] > 255 ? 255 : v[c]);
    }
}

cdb_status cdb_eng_thumb_scale(const cdb_image *img, int ow, int oh, uint8_t *out) {
    int w = img->width, h = img->height;
    size_t n = (size_t)w * 3;
    taps tx, ty;
    uint8_t *buf = malloc(n);
    float *col = malloc(sizeof *col * n), *inv_x = malloc(sizeof *inv_x * (size_t)ow);
    cdb_status rc = CDB_OK;
    memset(&tx, 0, sizeof tx);
    memset(&ty, 0, sizeof ty);
    if (!buf || !col || !inv_x || taps_make(w, ow, &tx) || taps_make(h, oh, &ty)) {
        rc = cdb_seterr(CDB_NOMEM, "out of memory making a thumbnail");
        goto done;
    }
    for (int ox = 0; ox < ow; ox++) {
        float wsum_x = 0;
        for (int j = 0; j < tx.count[ox]; j++) wsum_x += tx.w[(size_t)ox * tx.max_count + j];
        inv_x[ox] = wsum_x > 0 ? 1.0f / wsum_x : 0.0f;
    }
    for (int oy = 0; oy < oh; oy++) {
        float wsum_y = 0;
        memset(col, 0, sizeof *col * n);
        for (int k = 0; k < ty.count[oy]; k++) {
            float wy = ty.w[(size_t)oy * ty.max_count + k];
            accumulate_rows(row_rgb8(img, ty.start[oy] + k, buf), n, wy, col);
            wsum_y += wy;
        }
        finish_row(col, &tx, ow, inv_x, wsum_y > 0 ? 1.0f / wsum_y : 0.0f, out + (size_t)oy * ow * 3);
    }
done:
    taps_free(&tx);
    taps_free(&ty);
    free(buf);
    free(col);
    free(inv_x);
    return rc;
}

/* ---- JPEG ------------------------------------------------------------------------- */

typedef struct jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
} jerr;

static void on_jpeg_error(j_common_ptr c) { longjmp(((jerr *)c->err)->jb, 1); }
static void on_jpeg_message(j_common_ptr c) { (void)c; }

/* Where jpeg_mem_dest writes: on the heap, so that a longjmp out of libjpeg still sees
** the buffer it last grew to. */
typedef struct jmem {
    unsigned char *buf;
    unsigned long size;
} jmem;

static cdb_status encode_jpeg(const uint8_t *rgb, int w, int h, int quality, unsigned char **out,
                              size_t *n) {
    struct jpeg_compress_struct ci;
    jerr je;
    jmem *md = calloc(1, sizeof *md);
    if (!md) return cdb_seterr(CDB_NOMEM, "out of memory");
    memset(&ci, 0, sizeof ci);
    ci.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = on_jpeg_error;
    je.pub.output_message = on_jpeg_message;
    if (setjmp(je.jb)) {
        jpeg_destroy_compress(&ci);
        free(md->buf);
        free(md);
        return cdb_seterr(CDB_ERROR, "JPEG compression failed");
    }
    jpeg_create_compress(&ci);
    jpeg_mem_dest(&ci, &md->buf, &md->size);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = 3;
    ci.in_color_space = JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, quality, TRUE);
    ci.optimize_coding = TRUE;
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)ci.next_scanline * (size_t)w * 3);
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    *out = md->buf;
    *n = (size_t)md->size;
    free(md);
    return CDB_OK;
}

/* ---- a thumbnail ------------------------------------------------------------------ */

void cdb_eng_thumb_clear(eng_thumb *t) {
    if (!t) return;
    free(t->jpeg);
    memset(t, 0, sizeof *t);
}

cdb_status cdb_eng_jpeg_make(const cdb_image *img, int px, int quality, eng_thumb *t) {
    int w = img->width, h = img->height, ow, oh;
    uint8_t *out;
    cdb_status rc;
    memset(t, 0, sizeof *t);
    if (w <= 0 || h <= 0 || !img->pixels || img->channels < 1 || img->channels > 4 || px < 1)
        return cdb_seterr(CDB_INVALID, "thumbnail of an empty image");
    cdb_eng_thumb_dims(w, h, px, &ow, &oh);
    if (!(out = malloc((size_t)ow * (size_t)oh * 3)))
        return cdb_seterr(CDB_NOMEM, "out of memory making a thumbnail");
    if ((rc = cdb_eng_thumb_scale(img, ow, oh, out)) == CDB_OK &&
        (rc = encode_jpeg(out, ow, oh, quality, &t->jpeg, &t->n)) == CDB_OK) {
        t->width = ow;
        t->height = oh;
    }
    free(out);
    return rc;
}

cdb_status cdb_eng_thumb_make(const cdb_image *img, int px, eng_thumb *t) {
    return cdb_eng_jpeg_make(img, px, THUMB_QUALITY, t);
}

void cdb_eng_thumb_dims(int w, int h, int px, int *ow, int *oh) {
    if (w >= h) {
        *ow = w > px ? px : w;
        *oh = (int)lround((double)h * *ow / w);
    } else {
        *oh = h > px ? px : h;
        *ow = (int)lround((double)w * *oh / h);
    }
    if (*ow < 1) *ow = 1;
    if (*oh < 1) *oh = 1;
}
