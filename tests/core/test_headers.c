/*
** test_headers.c: every public module header exists and compiled alone as C and
** as C++ (the cdb_headers_alone library this links is generated from that list;
** a header that is not self-contained breaks the build, which fails the suite).
*/
#include "cdb_test.h"

CDB_TEST(public_headers_present) {
    static const char *required[] = {"core/core.h", "kernels/kernels.h", "encoder/encoder.h",
                                     "db/db.h", "index/index.h", "engine/engine.h"};
    const char *checked = CDB_HEADERS_CHECKED;
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        char path[4096];
        FILE *f;
        snprintf(path, sizeof path, "%s/%s", CDB_SOURCE_DIR, required[i]);
        f = fopen(path, "rb");
        CHECK_MSG(f != NULL, "missing public header %s", required[i]);
        fclose(f);
        CHECK_MSG(strstr(checked, required[i]) != NULL, "%s not in the alone-compile list", required[i]);
    }
}

CDB_TEST_MAIN(public_headers_present)
