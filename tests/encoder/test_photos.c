/*
** test_photos.c (optional): clipdb's crops of the real-photo set against PIL's, byte
** for byte. The photos (DIR/list.txt, extracted by bench/fetch_photos) and PIL's crops
** (DIR/pil_crops/: PIL 9.4's Resize(224, BICUBIC) + CenterCrop(224) + convert("RGB")
** as torchvision makes them; for JPEGs also after Image.draft) come from one of two
** places, the first that has a list.txt: <build>/photos, made by running bench_photos
** once (bench/pil_photos.py, with torchvision), or the cache `scripts/setup.sh test`
** fills (CDB_PHOTOS_CACHE, <checkout>/.deps/photos: bench/pil_crops.py, Debian's
** python3-pil alone). Without either this test is skipped (exit 77). EXIF is not
** applied (OpenAI's transform does not).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdb_test.h"
#include "read_file.h"
#include "encoder/encoder.h"

#ifndef CDB_PHOTOS_CACHE
#define CDB_PHOTOS_CACHE CDB_SOURCE_DIR "/.deps/photos"
#endif
#define SZ 224

/* The first of bench_photos' folder and setup.sh's cache with a list.txt, or NULL. */
static const char *photos_dir(void) {
    static const char *const dirs[] = {CDB_BINARY_DIR "/photos", CDB_PHOTOS_CACHE};
    char list[1200];
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(list, sizeof list, "%s/list.txt", dirs[i]);
        if (access(list, R_OK) == 0) return dirs[i];
    }
    return NULL;
}

static void compare(cdb_test_ctx *cdb_t_, int fast) {
    const char *dir = photos_dir();
    FILE *f;
    char line[1200], ref[1300];
    int idx = 0, compared = 0, differ = 0;
    float *px;
    uint8_t *crop;
    cdb_preprocess_params pp = cdb_preprocess_params_default();
    if (!dir)
        CDB_SKIP("no photo set (no list.txt in %s/photos or %s): scripts/setup.sh test fetches "
                 "it, or run bench_photos once",
                 CDB_BINARY_DIR, CDB_PHOTOS_CACHE);
    snprintf(line, sizeof line, "%s/list.txt", dir);
    if (!(f = fopen(line, "r"))) CDB_SKIP("cannot read %s", line);
    px = malloc(sizeof(float) * 3 * SZ * SZ);
    crop = malloc(3 * SZ * SZ);
    while (fgets(line, sizeof line, f)) {
        size_t n, nr;
        unsigned char *b, *r;
        cdb_image *img = NULL;
        cdb_image_params ip = cdb_image_params_default();
        line[strcspn(line, "\n")] = 0;
        snprintf(ref, sizeof ref, "%s/pil_crops/%d%s.rgb", dir, idx++, fast ? ".fast" : "");
        if (!(r = test_read_file(ref, &nr))) continue; /* fast: PNGs have no draft crop */
        b = test_read_file(line, &n);
        CHECK_MSG(b != NULL, "cannot read %s", line);
        ip.apply_exif = 0;
        if (fast) ip.decode = CDB_DECODE_FAST, ip.target_size = SZ;
        CHECK_MSG(cdb_image_decode(b, n, &ip, &img) == CDB_OK, "%s: %s", line, cdb_errmsg());
        CHECK_OK(cdb_image_preprocess(img, &pp, px, crop));
        compared++;
        if (nr != 3 * SZ * SZ || memcmp(crop, r, nr)) {
            int md = 0;
            for (size_t k = 0; k < nr && k < 3 * SZ * SZ; k++)
                if (abs(crop[k] - r[k]) > md) md = abs(crop[k] - r[k]);
            fprintf(stderr, "    %s: differs from PIL (max %d)\n", line, md);
            differ++;
        }
        cdb_image_free(img);
        free(b), free(r);
    }
    fclose(f);
    free(px), free(crop);
    if (!compared) CDB_SKIP("no PIL crops in %s/pil_crops: run bench_photos once", dir);
    fprintf(stderr, "    %d photos of %s compared (%s), %d differ\n", compared, dir,
            fast ? "fast" : "exact", differ);
    CHECK_EQ_INT(differ, 0);
}

CDB_TEST(photos_exact_equal_pil) { compare(cdb_t_, 0); }
CDB_TEST(photos_fast_equal_pil_draft) { compare(cdb_t_, 1); }

CDB_TEST_MAIN(photos_exact_equal_pil, photos_fast_equal_pil_draft)
