/*
** test_phash.c: cdb_image_phash (encoder.h) against its reference,
** tests/reference/make_phash_fixtures.py (PIL decode, numpy FFT-based DCT), on the
** golden images: tests/golden/phash/phash.txt. A hash may differ from the reference
** in at most 2 of 64 bits, for coefficients that sit at the median within rounding
** (the decoders and the float order differ); the test prints the largest difference.
*/
#include <stdio.h>
#include <string.h>

#include "cdb_test.h"
#include "encoder/encoder.h"

#define GOLDEN CDB_SOURCE_DIR "/tests/golden/phash/phash.txt"
#define IMAGES CDB_SOURCE_DIR "/tests/golden/images/"

CDB_TEST(phash_matches_reference)
{
    FILE *f = fopen(GOLDEN, "r");
    CHECK_MSG(f != NULL, "cannot open %s", GOLDEN);
    char line[512], name[256], path[600];
    unsigned long long want;
    int n = 0, worst = 0, far = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%255s %llx", name, &want) != 2)
            continue;
        snprintf(path, sizeof path, "%s%s", IMAGES, name);
        cdb_image *img = NULL;
        if (cdb_image_load(path, NULL, &img) != CDB_OK) {
            fprintf(stderr, "    %s: %s\n", name, cdb_errmsg());
            far++;
            continue;
        }
        uint64_t got = 0;
        CHECK_OK(cdb_image_phash(img, &got));
        cdb_image_free(img);
        int d = __builtin_popcountll(got ^ (uint64_t)want);
        if (d > worst)
            worst = d;
        if (d > 2) {
            fprintf(stderr, "    %s: %016llx, reference %016llx (%d bits)\n", name,
                    (unsigned long long)got, want, d);
            far++;
        }
        n++;
    }
    fclose(f);
    printf("    %d images, largest difference %d bits\n", n, worst);
    CHECK(n >= 50);
    CHECK_EQ_INT(far, 0);
}

CDB_TEST(phash_invalid)
{
    uint64_t h = 0;
    CHECK_RC(cdb_image_phash(NULL, &h), CDB_INVALID);
    cdb_image empty = {0};
    CHECK_RC(cdb_image_phash(&empty, &h), CDB_INVALID);
}

CDB_TEST_MAIN(phash_matches_reference, phash_invalid)
