/*
** test_cuda_host.c: the host-side logic of the GPU path, which runs everywhere
** (no GPU, no driver, CLIPDB_CUDA=OFF): `--device` parsing and resolution, and the
** "no device" paths of the public CUDA entry points.
*/
#include "cdb_test.h"
#include "kernels/kernels.h"

/* ---- device strings --------------------------------------------------------- */

CDB_TEST(device_parse_forms) {
    cdb_k_device_spec d;
    CHECK_OK(cdb_k_device_parse("auto", &d));
    CHECK_EQ_INT(d.kind, CDB_K_BACKEND_AUTO);
    CHECK_OK(cdb_k_device_parse("cpu", &d));
    CHECK_EQ_INT(d.kind, CDB_K_BACKEND_CPU);
    CHECK_OK(cdb_k_device_parse("cuda", &d));
    CHECK_EQ_INT(d.kind, CDB_K_BACKEND_CUDA);
    CHECK_EQ_INT(d.index, 0);
    CHECK_OK(cdb_k_device_parse("cuda:3", &d));
    CHECK_EQ_INT(d.kind, CDB_K_BACKEND_CUDA);
    CHECK_EQ_INT(d.index, 3);
    CHECK_OK(cdb_k_device_parse("  CUDA:12 \n", &d));
    CHECK_EQ_INT(d.index, 12);
    CHECK_OK(cdb_k_device_parse("Cpu", &d));
    CHECK_EQ_INT(d.kind, CDB_K_BACKEND_CPU);
}

CDB_TEST(device_parse_rejects) {
    static const char *bad[] = {"", "gpu", "cuda:", "cuda:-1", "cuda:1x", "cuda:99999",
                                "cuda: 1", "cpu0", "cuda0", "auto:1", "cuda:1:2",
                                "a-very-long-device-string-that-overflows"};
    cdb_k_device_spec d;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_RC(cdb_k_device_parse(bad[i], &d), CDB_INVALID);
        CHECK_MSG(strstr(cdb_errmsg(), "auto, cpu, cuda or cuda:N") != NULL,
                  "message for \"%s\" lacks the accepted forms: %s", bad[i], cdb_errmsg());
    }
    CHECK_RC(cdb_k_device_parse(NULL, &d), CDB_INVALID);
}

CDB_TEST(device_str_roundtrip) {
    char buf[32];
    cdb_k_device_spec d = {CDB_K_BACKEND_CUDA, 7}, e;
    CHECK_EQ_STR(cdb_k_device_str(d, buf, sizeof buf), "cuda:7");
    CHECK_OK(cdb_k_device_parse(buf, &e));
    CHECK_EQ_INT(e.kind, d.kind);
    CHECK_EQ_INT(e.index, d.index);
    d.kind = CDB_K_BACKEND_CPU;
    CHECK_EQ_STR(cdb_k_device_str(d, buf, sizeof buf), "cpu");
    d.kind = CDB_K_BACKEND_AUTO;
    CHECK_EQ_STR(cdb_k_device_str(d, buf, sizeof buf), "auto");
}

CDB_TEST(device_resolve_injected) {
    cdb_k_device_spec want, got;
    /* auto: GPU when present, else CPU, never an error */
    want.kind = CDB_K_BACKEND_AUTO;
    want.index = 0;
    CHECK_OK(cdb_k_device_resolve_with(want, 2, NULL, &got));
    CHECK_EQ_INT(got.kind, CDB_K_BACKEND_CUDA);
    CHECK_EQ_INT(got.index, 0);
    CHECK_OK(cdb_k_device_resolve_with(want, 0, "no NVIDIA driver", &got));
    CHECK_EQ_INT(got.kind, CDB_K_BACKEND_CPU);
    /* cpu: always cpu */
    want.kind = CDB_K_BACKEND_CPU;
    CHECK_OK(cdb_k_device_resolve_with(want, 4, NULL, &got));
    CHECK_EQ_INT(got.kind, CDB_K_BACKEND_CPU);
    /* cuda with none: clear message with the reason and the way out */
    want.kind = CDB_K_BACKEND_CUDA;
    want.index = 0;
    CHECK_RC(cdb_k_device_resolve_with(want, 0, "no NVIDIA driver", &got), CDB_UNSUPPORTED);
    CHECK_MSG(strstr(cdb_errmsg(), "no NVIDIA driver") && strstr(cdb_errmsg(), "--device cpu"),
              "message: %s", cdb_errmsg());
    CHECK_EQ_INT(got.kind, CDB_K_BACKEND_CPU);
    /* cuda:N beyond the count */
    want.index = 2;
    CHECK_RC(cdb_k_device_resolve_with(want, 2, NULL, &got), CDB_UNSUPPORTED);
    CHECK_MSG(strstr(cdb_errmsg(), "cuda:2") && strstr(cdb_errmsg(), "only 2"), "message: %s",
              cdb_errmsg());
    want.index = 1;
    CHECK_OK(cdb_k_device_resolve_with(want, 2, NULL, &got));
    CHECK_EQ_INT(got.kind, CDB_K_BACKEND_CUDA);
    CHECK_EQ_INT(got.index, 1);
}

/* On this machine (CI: no GPU) the real probe must answer cleanly either way. */
CDB_TEST(device_resolve_real) {
    cdb_k_device_spec want = {CDB_K_BACKEND_AUTO, 0}, got;
    int n = cdb_k_cuda_device_count();
    const char *why = cdb_k_cuda_unusable_reason();
    CHECK(n >= 0);
    CHECK(why != NULL);
    CHECK_OK(cdb_k_device_resolve(want, &got));
    if (n == 0 || *why) {
        CHECK_EQ_INT(got.kind, CDB_K_BACKEND_CPU);
        CHECK(*why != 0);
        want.kind = CDB_K_BACKEND_CUDA;
        CHECK_RC(cdb_k_device_resolve(want, &got), CDB_UNSUPPORTED);
        CHECK(strstr(cdb_errmsg(), why) != NULL);
    } else {
        CHECK_EQ_INT(got.kind, CDB_K_BACKEND_CUDA);
    }
    if (!cdb_k_cuda_built()) CHECK_EQ_INT(n, 0);
}

/* ---- graceful "no device" paths ---------------------------------------------- */

CDB_TEST(no_device_paths) {
    cdb_k_backend *be = (cdb_k_backend *)1;
    if (cdb_k_cuda_device_count() > 0 && !*cdb_k_cuda_unusable_reason())
        CDB_SKIP("a usable GPU is present; covered by tests/gpu");
    CHECK_RC(cdb_k_backend_cuda_new(0, &be), CDB_UNSUPPORTED);
    CHECK(be == NULL);
    CHECK(strlen(cdb_errmsg()) > 0);
    CHECK_RC(cdb_k_backend_cuda_new(5, &be), CDB_UNSUPPORTED);
}

CDB_TEST_MAIN(device_parse_forms, device_parse_rejects, device_str_roundtrip,
              device_resolve_injected, device_resolve_real, no_device_paths)
