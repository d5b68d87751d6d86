/*
** big_jpeg.h: writes very large JPEGs at test time (100-200 megapixels; too big to
** commit), streamed row by row through libjpeg so the writer never holds the image.
** A smooth gradient with a diagonal pattern: a real photo's decode cost, and an
** image whose embedding is not degenerate. Used by tests/library/test_big_photos.c
** and bench/bench_bigphotos.c.
*/
#ifndef CDB_TEST_BIG_JPEG_H
#define CDB_TEST_BIG_JPEG_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>

/* A width x height JPEG (channels 1: gray, 3: RGB; quality 1-100) at path, seeded by
** seed. 0, or -1 when the file cannot be written. */
static inline int big_jpeg_write(const char *path, int width, int height, int channels,
                                 int quality, unsigned seed) {
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    FILE *f = fopen(path, "wb");
    unsigned char *row = malloc((size_t)width * (size_t)channels);
    if (!f || !row) {
        if (f) fclose(f);
        free(row);
        return -1;
    }
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    jpeg_stdio_dest(&ci, f);
    ci.image_width = (JDIMENSION)width;
    ci.image_height = (JDIMENSION)height;
    ci.input_components = channels;
    ci.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, quality, TRUE);
    jpeg_start_compress(&ci, TRUE);
    for (int y = 0; y < height; y++) {
        for (int x = 0; x < width; x++)
            for (int c = 0; c < channels; c++) {
                unsigned v = (unsigned)(x * (255 - 40 * c)) / (unsigned)width +
                             (unsigned)(y * (60 + 50 * c)) / (unsigned)height +
                             ((((unsigned)x + (unsigned)y * (seed + 3)) >> 7) & 1) * 40u + seed * 17u;
                row[(size_t)x * channels + c] = (unsigned char)(v & 255);
            }
        JSAMPROW rp = row;
        jpeg_write_scanlines(&ci, &rp, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(row);
    return fclose(f) == 0 ? 0 : -1;
}

#endif
