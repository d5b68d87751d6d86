/*
** fuzz_png.c: libFuzzer target for PNG's everyday-case decoder (encoder/image_png.c,
** libdeflate) against stb_image on the same bytes. The input is made a PNG (its
** first 8 bytes become the signature) and scanned as image.c scans it; when the scan
** sends it to image_png.c, both decoders run. Invariants: whenever both decode it,
** they give the same size, mode and pixels (stb is the decoder the plain path
** replaced, and its PNGs are PIL's); a failure from either leaves nothing allocated
** (LeakSanitizer). They may disagree on whether a corrupt deflate stream decodes at
** all, as zlib (PIL's inflater) also differs from both there.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "encoder/image_int.h"
#include "fuzz_util.h"

#define FUZZ_MAX_PIXELS (4LL << 20)

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    img_info ii;
    img_opts o = {.max_pixels = FUZZ_MAX_PIXELS, .apply_exif = 1, .fast = 0, .target_size = 224};
    cdb_image *fast = NULL, *ref = NULL;
    uint8_t *b;
    if (n < 8 || n > (1u << 20)) return 0;
    if (!(b = malloc(n))) return 0;
    memcpy(b, data, n);
    memcpy(b, "\x89PNG\r\n\x1a\n", 8);
    memset(&ii, 0, sizeof ii);
    ii.fmt = FMT_PNG;
    if (cdb_img_stb_scan(b, n, &ii) != CDB_OK || !cdb_img_png_is_plain(&ii) ||
        cdb_img_check_size("PNG", ii.decl_w, ii.decl_h, o.max_pixels) != CDB_OK ||
        cdb_img_stb_payload_check(b, n, &ii) != CDB_OK) {
        free(b);
        return 0;
    }
    cdb_status rf = cdb_img_png_decode(b, n, &ii, &o, &fast);
    cdb_status rs = cdb_img_stb_decode(b, n, &ii, &o, &ref);
    FUZZ_CHECK(rf == CDB_OK ? fast != NULL : fast == NULL, "plain path: status %d with image %p",
               (int)rf, (void *)fast);
    if (rf == CDB_OK && rs == CDB_OK) {
        FUZZ_CHECK(fast->width == ref->width && fast->height == ref->height &&
                       fast->channels == ref->channels && fast->bits == ref->bits &&
                       fast->is_palette == ref->is_palette,
                   "plain %dx%d c%d b%d vs stb %dx%d c%d b%d", fast->width, fast->height,
                   fast->channels, fast->bits, ref->width, ref->height, ref->channels, ref->bits);
        FUZZ_CHECK(!memcmp(fast->pixels, ref->pixels,
                           (size_t)fast->width * fast->height * fast->channels),
                   "plain path and stb decode %dx%d c%d to different pixels", fast->width,
                   fast->height, fast->channels);
    }
    cdb_image_free(fast);
    cdb_image_free(ref);
    free(b);
    return 0;
}
