/*
** make_fixture_files.c: writes the image fixtures that neither PIL nor a Debian
** command-line tool can write, with the formats' own reference libraries:
**
**   make_fixture_files ycck W H QUALITY OUT.jpg   < W*H*4 bytes of CMYK
**       an Adobe YCCK JPEG (libjpeg-turbo: in_color_space JCS_CMYK, jpeg_set_colorspace
**       JCS_YCCK, which writes the Adobe APP14 marker with transform 2)
**   make_fixture_files heif W H QUALITY ORIENT avif|heic OUT [alpha] < W*H*3 (or *4) bytes
**       a HEIC (x265) or AVIF (aom) file whose primary image carries the EXIF-style
**       orientation ORIENT (1-8) as irot/imir boxes (libheif's image_orientation)
**
** Built and run by tests/reference/make_image_fixtures.py only (gcc, pkg-config);
** never part of clipdb or its tests. Exits non-zero on any failure.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libheif/heif.h>

#include "../jpeg_test_util.h"

static unsigned char *read_all(size_t n) {
    unsigned char *b = malloc(n);
    if (!b || fread(b, 1, n, stdin) != n) {
        fprintf(stderr, "short input\n");
        exit(1);
    }
    return b;
}

static int ycck(int w, int h, int q, const char *out) {
    unsigned char *px = read_all((size_t)w * h * 4);
    int rc = cdb_test_jpeg_file(out, px, w, h, 4, q, CDB_TJ_YCCK);
    free(px);
    return rc ? 1 : 0;
}

#define HCHECK(x)                                                                    \
    do {                                                                             \
        struct heif_error e_ = (x);                                                  \
        if (e_.code != heif_error_Ok) {                                              \
            fprintf(stderr, "%s: %s\n", #x, e_.message);                             \
            return 1;                                                                \
        }                                                                            \
    } while (0)

static int heif(int w, int h, int q, int orient, int avif, const char *out, int alpha) {
    int ch = alpha ? 4 : 3, stride = 0;
    unsigned char *px = read_all((size_t)w * h * ch);
    struct heif_context *ctx = heif_context_alloc();
    struct heif_encoder *enc = NULL;
    struct heif_image *img = NULL;
    struct heif_encoding_options *opt = heif_encoding_options_alloc();
    uint8_t *plane;
    HCHECK(heif_context_get_encoder_for_format(ctx, avif ? heif_compression_AV1
                                                         : heif_compression_HEVC, &enc));
    HCHECK(heif_encoder_set_lossy_quality(enc, q));
    HCHECK(heif_image_create(w, h, heif_colorspace_RGB,
                             alpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB,
                             &img));
    HCHECK(heif_image_add_plane(img, heif_channel_interleaved, w, h, 8));
    plane = heif_image_get_plane(img, heif_channel_interleaved, &stride);
    for (int y = 0; y < h; y++) memcpy(plane + (size_t)y * stride, px + (size_t)y * w * ch, (size_t)w * ch);
    opt->image_orientation = (enum heif_orientation)orient;
    HCHECK(heif_context_encode_image(ctx, img, enc, opt, NULL));
    HCHECK(heif_context_write_to_file(ctx, out));
    heif_encoding_options_free(opt);
    heif_image_release(img);
    heif_encoder_release(enc);
    heif_context_free(ctx);
    free(px);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 6 && !strcmp(argv[1], "ycck"))
        return ycck(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argv[5]);
    if ((argc == 8 || argc == 9) && !strcmp(argv[1], "heif"))
        return heif(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
                    !strcmp(argv[6], "avif"), argv[7], argc == 9);
    fprintf(stderr, "usage: see the header of make_fixture_files.c\n");
    return 2;
}
