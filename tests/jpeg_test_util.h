/*
** jpeg_test_util.h: JPEGs written by libjpeg-turbo for the tests that need a JPEG of a
** given kind (the oracle of each kind: what libjpeg was asked to write), in memory, or
** to a file from given pixels (bench_image, tests/reference/make_fixture_files.c).
** Header-only test code; link PkgConfig::LIBJPEG.
*/
#ifndef CDB_TESTS_JPEG_TEST_UTIL_H
#define CDB_TESTS_JPEG_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>

enum {
    CDB_TJ_PROGRESSIVE = 1, /* jpeg_simple_progression */
    CDB_TJ_ARITH = 2,       /* arithmetic coding */
    CDB_TJ_OPTIMIZED = 4,   /* optimized Huffman tables (still SOF0) */
    CDB_TJ_ROTATED = 8,     /* an APP1 Exif block with Orientation = 6 */
    CDB_TJ_444 = 16,        /* no chroma subsampling (default: libjpeg's 4:2:0) */
    CDB_TJ_YCCK = 32        /* CMYK stored as Adobe's YCCK (jpeg_set_colorspace) */
};

/* ci created for a w x h image of comps (1 gray, 3 RGB, 4 CMYK) components at quality,
** with the coding options flags name; the caller then names the destination and starts. */
static inline void cdb_test_jpeg_setup(struct jpeg_compress_struct *ci,
                                       struct jpeg_error_mgr *jerr, int w, int h, int comps,
                                       int quality, int flags) {
    ci->err = jpeg_std_error(jerr);
    jpeg_create_compress(ci);
    ci->image_width = (JDIMENSION)w;
    ci->image_height = (JDIMENSION)h;
    ci->input_components = comps;
    ci->in_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 4 ? JCS_CMYK : JCS_RGB;
    jpeg_set_defaults(ci);
    if (flags & CDB_TJ_YCCK) jpeg_set_colorspace(ci, JCS_YCCK);
    jpeg_set_quality(ci, quality, TRUE);
    if (flags & CDB_TJ_PROGRESSIVE) jpeg_simple_progression(ci);
    if (flags & CDB_TJ_ARITH) ci->arith_code = TRUE;
    if (flags & CDB_TJ_OPTIMIZED) ci->optimize_coding = TRUE;
    if ((flags & CDB_TJ_444) && comps == 3) {
        ci->comp_info[0].h_samp_factor = 1;
        ci->comp_info[0].v_samp_factor = 1;
    }
}

/* Writes px (w x h pixels of comps bytes, rows packed) through ci (set up, its destination
** named): the Exif orientation 6 block when flags has CDB_TJ_ROTATED, the rows, the end. */
static inline void cdb_test_jpeg_write(struct jpeg_compress_struct *ci, const unsigned char *px,
                                       int w, int comps, int flags) {
    jpeg_start_compress(ci, TRUE);
    if (flags & CDB_TJ_ROTATED) { /* little-endian TIFF, one entry: 0x0112 SHORT 1 = 6 */
        static const unsigned char exif[] = {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0,
                                             0,   0,   1,   0,   0x12, 1, 3, 0, 1, 0, 0, 0,
                                             6,   0,   0,   0,   0,   0,   0,   0, 0, 0};
        jpeg_write_marker(ci, JPEG_APP0 + 1, exif, sizeof exif);
    }
    while (ci->next_scanline < ci->image_height) {
        JSAMPROW row = (JSAMPROW)px + (size_t)ci->next_scanline * (size_t)w * (size_t)comps;
        jpeg_write_scanlines(ci, &row, 1);
    }
    jpeg_finish_compress(ci);
    jpeg_destroy_compress(ci);
}

/* px (w x h pixels of comps bytes, rows packed) as a JPEG of that quality and flags, in
** memory; free with free(). NULL on failure. */
static inline unsigned char *cdb_test_jpeg_of(const unsigned char *px, int w, int h, int comps,
                                              int quality, int flags, unsigned long *n) {
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    unsigned char *out = NULL;
    *n = 0;
    cdb_test_jpeg_setup(&ci, &jerr, w, h, comps, quality, flags);
    jpeg_mem_dest(&ci, &out, n);
    cdb_test_jpeg_write(&ci, px, w, comps, flags);
    return out;
}

/* A w x h JPEG of comps (1 gray, 3 RGB, 4 CMYK) components, quality 90, as flags say,
** pixels a smooth pattern with texture; free with free(). NULL on failure. */
static inline unsigned char *cdb_test_jpeg(int w, int h, int comps, int flags,
                                           unsigned long *n) {
    unsigned char *px = malloc((size_t)w * (size_t)h * (size_t)comps), *out;
    if (!px) return NULL;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w * comps; x++)
            px[(size_t)y * (size_t)w * (size_t)comps + (size_t)x] =
                (unsigned char)(x * 5 + y * 9 + ((x * 7919 + y * 104729) >> 3) % 23);
    out = cdb_test_jpeg_of(px, w, h, comps, 90, flags, n);
    free(px);
    return out;
}

/* Writes px (w x h pixels of comps bytes, rows packed) to path as a JPEG of that quality
** and flags. 0, or -1 when path cannot be written. */
static inline int cdb_test_jpeg_file(const char *path, const unsigned char *px, int w, int h,
                                     int comps, int quality, int flags) {
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    cdb_test_jpeg_setup(&ci, &jerr, w, h, comps, quality, flags);
    jpeg_stdio_dest(&ci, f);
    cdb_test_jpeg_write(&ci, px, w, comps, flags);
    return fclose(f) == 0 ? 0 : -1;
}

#endif
