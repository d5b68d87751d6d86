/*
** test_device.c: clipdb's device names and their resolution (kernels/device.c),
** which run everywhere (no GPU, no driver, CLIPDB_CUDA=OFF): the spellings
** cdb_k_device_parse accepts and refuses, cdb_k_device_resolve with the facts
** injected (backend_impl.h's test seam: 0, 1 or 2 CUDA devices) and for real on this
** machine, cdb_k_backend_new on an unavailable CUDA device, and the "no device"
** paths of the CUDA constructor; the run-time loading of CUDA libraries
** (cdb_dynlib_open, as cuBLAS and nvJPEG are loaded) with fake libraries: nothing
** loadable, a missing symbol, the environment's path first; nvJPEG's "not usable"
** reason on a machine without a GPU; nvJPEG's decision with the facts injected (built
** without CUDA, no driver, no device, no cuBLAS, no libnvjpeg, a library of another
** kind, a stand-in libnvjpeg: fake_nvjpeg.c) and the choice of its decoder backend
** (hardware when accepted, else the default one).
*/
#include <stdlib.h>

#include "cdb_test.h"
#include "kernels/backend_impl.h"
#include "kernels/cuda/cuda_int.h"
#include "kernels/kernels.h"

/* ---- names --------------------------------------------------------------------- */

CDB_TEST(device_parse_forms) {
    static const struct {
        const char *s;
        cdb_k_device_kind kind;
        int index;
    } ok[] = {{"auto", CDB_K_DEVICE_AUTO, 0},     {"cpu", CDB_K_DEVICE_CPU, 0},
              {"cuda", CDB_K_DEVICE_CUDA, 0},     {"cuda:0", CDB_K_DEVICE_CUDA, 0},
              {"cuda:3", CDB_K_DEVICE_CUDA, 3},   {"cuda:12", CDB_K_DEVICE_CUDA, 12},
              {"cuda:007", CDB_K_DEVICE_CUDA, 7}, {"cuda:999999999", CDB_K_DEVICE_CUDA, 999999999}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        cdb_k_device d = {CDB_K_DEVICE_CPU, -5};
        CHECK_MSG(cdb_k_device_parse(ok[i].s, &d) == CDB_OK, "\"%s\": %s", ok[i].s, cdb_errmsg());
        CHECK_MSG(d.kind == ok[i].kind && d.index == ok[i].index, "\"%s\" -> kind %d index %d",
                  ok[i].s, (int)d.kind, d.index);
    }
}

CDB_TEST(device_parse_rejects) {
    /* case matters, blanks are not trimmed, N is digits only and at most 9 of them */
    static const char *bad[] = {"",        "gpu",       "CPU",         "Cpu",       "AUTO",
                                "CUDA",    "CUDA:0",    " cpu",        "cpu ",      "cpu\n",
                                "cuda:",   "cuda:-1",   "cuda:+1",     "cuda:1x",   "cuda: 1",
                                "cuda:1 ", "cuda:0x1",  "cuda:1.0",    "cuda:1:2",  "cuda::1",
                                "cuda0",   "cuda1",     "cpu:0",       "auto:1",    "cpu0",
                                "cudax",   "cuda:1234567890",          "cuda:99999999999999999999",
                                "a-very-long-device-string-that-is-not-a-device"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cdb_k_device d = {CDB_K_DEVICE_CUDA, 9};
        CHECK_MSG(cdb_k_device_parse(bad[i], &d) == CDB_INVALID, "\"%s\" accepted", bad[i]);
        CHECK_MSG(strstr(cdb_errmsg(), "auto, cpu, cuda or cuda:N") != NULL,
                  "message for \"%s\" lacks the accepted forms: %s", bad[i], cdb_errmsg());
        CHECK_MSG(strstr(cdb_errmsg(), bad[i]) != NULL, "message for \"%s\" does not quote it: %s",
                  bad[i], cdb_errmsg());
        CHECK(d.kind == CDB_K_DEVICE_AUTO && d.index == 0); /* *out is reset, never half-set */
    }
    {
        cdb_k_device d;
        CHECK_RC(cdb_k_device_parse(NULL, &d), CDB_INVALID);
        CHECK_RC(cdb_k_device_parse("cpu", NULL), CDB_INVALID);
    }
}

/* ---- resolution ------------------------------------------------------------------- */

CDB_TEST(device_resolve_injected) {
    cdb_k_device want = {CDB_K_DEVICE_AUTO, 0}, got;
    /* auto: cuda:0 when a device is there, else the CPU, never an error */
    CHECK_OK(cdb_k_device_resolve_with(want, 2, NULL, &got));
    CHECK_EQ_INT(got.kind, CDB_K_DEVICE_CUDA);
    CHECK_EQ_INT(got.index, 0);
    CHECK_OK(cdb_k_device_resolve_with(want, 0, "this clipdb was built without CUDA", &got));
    CHECK_EQ_INT(got.kind, CDB_K_DEVICE_CPU);
    /* cpu: always the CPU */
    want.kind = CDB_K_DEVICE_CPU;
    CHECK_OK(cdb_k_device_resolve_with(want, 4, NULL, &got));
    CHECK_EQ_INT(got.kind, CDB_K_DEVICE_CPU);
    /* cuda:N with no device at all: the reason, as given */
    want.kind = CDB_K_DEVICE_CUDA;
    want.index = 0;
    CHECK_RC(cdb_k_device_resolve_with(want, 0, "this clipdb was built without CUDA", &got),
             CDB_UNSUPPORTED);
    CHECK_MSG(strstr(cdb_errmsg(), "cuda:0 is not available: this clipdb was built without CUDA"),
              "message: %s", cdb_errmsg());
    CHECK_EQ_INT(got.kind, CDB_K_DEVICE_CPU);
    want.index = 3;
    CHECK_RC(cdb_k_device_resolve_with(want, 0, NULL, &got), CDB_UNSUPPORTED);
    CHECK_MSG(strstr(cdb_errmsg(), "cuda:3 is not available: no usable CUDA device"), "message: %s",
              cdb_errmsg());
    /* cuda:N beyond the devices present */
    want.index = 2;
    CHECK_RC(cdb_k_device_resolve_with(want, 2, NULL, &got), CDB_UNSUPPORTED);
    CHECK_MSG(strstr(cdb_errmsg(), "no CUDA device 2: only 2 present (cuda:0 to cuda:1)"),
              "message: %s", cdb_errmsg());
    want.index = 1;
    CHECK_RC(cdb_k_device_resolve_with(want, 1, NULL, &got), CDB_UNSUPPORTED);
    CHECK_MSG(strstr(cdb_errmsg(), "no CUDA device 1: only 1 present (cuda:0)"), "message: %s",
              cdb_errmsg());
    CHECK_OK(cdb_k_device_resolve_with(want, 2, NULL, &got));
    CHECK_EQ_INT(got.kind, CDB_K_DEVICE_CUDA);
    CHECK_EQ_INT(got.index, 1);
    /* nonsense a caller may build by hand */
    want.index = -1;
    CHECK_RC(cdb_k_device_resolve_with(want, 2, NULL, &got), CDB_INVALID);
    want.kind = (cdb_k_device_kind)7;
    want.index = 0;
    CHECK_RC(cdb_k_device_resolve_with(want, 2, NULL, &got), CDB_INVALID);
}

/* On this machine (CI: no GPU) the real probe must answer cleanly either way. */
CDB_TEST(device_resolve_real) {
    cdb_k_device want = {CDB_K_DEVICE_AUTO, 0}, got;
    int n = cdb_k_cuda_device_count();
    const char *why = cdb_k_cuda_unusable_reason();
    CHECK(n >= 0);
    CHECK(why != NULL);
    CHECK_OK(cdb_k_device_resolve(want, &got));
    if (n == 0 || *why) {
        CHECK_EQ_INT(got.kind, CDB_K_DEVICE_CPU);
        CHECK(*why != 0);
        want.kind = CDB_K_DEVICE_CUDA;
        CHECK_RC(cdb_k_device_resolve(want, &got), CDB_UNSUPPORTED);
        CHECK(strstr(cdb_errmsg(), why) != NULL);
    } else {
        CHECK_EQ_INT(got.kind, CDB_K_DEVICE_CUDA);
    }
    if (!cdb_k_cuda_built()) {
        CHECK_EQ_INT(n, 0);
        CHECK_EQ_STR(why, "this clipdb was built without CUDA");
    }
}

/* ---- backends on devices that are not there ------------------------------------------ */

CDB_TEST(no_device_paths) {
    cdb_k_backend *be = (cdb_k_backend *)1;
    cdb_k_backend_params p = cdb_k_backend_params_default();
    if (cdb_k_cuda_device_count() > 0 && !*cdb_k_cuda_unusable_reason())
        CDB_SKIP("a usable GPU is present; covered by tests/gpu");
    CHECK_RC(cdb_k_backend_cuda_new(0, &be), CDB_UNSUPPORTED);
    CHECK(be == NULL);
    CHECK(strlen(cdb_errmsg()) > 0);
    CHECK_RC(cdb_k_backend_cuda_new(5, &be), CDB_UNSUPPORTED);
    /* the factory: cuda:N says why and makes nothing; auto falls back to the CPU */
    p.device.kind = CDB_K_DEVICE_CUDA;
    p.device.index = 1;
    be = (cdb_k_backend *)1;
    CHECK_RC(cdb_k_backend_new(&p, &be), CDB_UNSUPPORTED);
    CHECK(be == NULL);
    CHECK_MSG(strstr(cdb_errmsg(), "cuda:1 is not available: ") &&
                  strstr(cdb_errmsg(), cdb_k_cuda_unusable_reason()),
              "message: %s", cdb_errmsg());
    p.device.kind = CDB_K_DEVICE_AUTO;
    p.device.index = 0;
    CHECK_OK(cdb_k_backend_new(&p, &be));
    CHECK(be != NULL);
    cdb_k_backend_free(be);
}

/* ---- libraries loaded at run time ------------------------------------------------ */

CDB_TEST(lib_open_failure_paths) {
    static const char *const missing[] = {"/nonexistent/libcdb_fake.so.13",
                                          "libcdb_no_such_library.so.9"};
    static const char *const with_libm[] = {"/nonexistent/libcdb_fake.so.13", "libm.so.6"};
    static const char *const math[] = {"cos", "sqrt"};
    static const char *const bad_sym[] = {"cos", "cdb_no_such_symbol_xyz"};
    cdb_dynlib_spec s = {"FakeLib 13", "CLIPDB_TEST_FAKE_LIB", missing, 2, math, 2};
    void *h = (void *)1, *syms[2] = {NULL, NULL};
    unsetenv("CLIPDB_TEST_FAKE_LIB");
    /* nothing loads: every attempt named, the variable to set, nothing open */
    CHECK_RC(cdb_dynlib_open(&s, &h, syms), CDB_UNSUPPORTED);
    CHECK(h == NULL);
    CHECK_MSG(strstr(cdb_errmsg(), "FakeLib 13 could not be loaded") &&
                  strstr(cdb_errmsg(), "/nonexistent/libcdb_fake.so.13") &&
                  strstr(cdb_errmsg(), "libcdb_no_such_library.so.9") &&
                  strstr(cdb_errmsg(), "CLIPDB_TEST_FAKE_LIB="),
              "message: %s", cdb_errmsg());
    /* the environment's path is tried first, and then the list */
    setenv("CLIPDB_TEST_FAKE_LIB", "/also/missing/libcdb.so", 1);
    CHECK_RC(cdb_dynlib_open(&s, &h, syms), CDB_UNSUPPORTED);
    CHECK(strstr(cdb_errmsg(), "/also/missing/libcdb.so") < strstr(cdb_errmsg(), "libcdb_fake"));
    setenv("CLIPDB_TEST_FAKE_LIB", "libm.so.6", 1);
    CHECK_OK(cdb_dynlib_open(&s, &h, syms));
    CHECK(h != NULL);
    CHECK_NEAR(((double (*)(double))syms[1])(2.25), 1.5, 0); /* sqrt, through the table */
    unsetenv("CLIPDB_TEST_FAKE_LIB");
    /* the second candidate loads; a symbol it lacks is named */
    s.candidates = with_libm;
    CHECK_OK(cdb_dynlib_open(&s, &h, syms));
    CHECK_NEAR(((double (*)(double))syms[0])(0.0), 1.0, 0); /* cos */
    s.symbols = bad_sym;
    h = (void *)1;
    CHECK_RC(cdb_dynlib_open(&s, &h, syms), CDB_UNSUPPORTED);
    CHECK(h == NULL);
    CHECK_MSG(strstr(cdb_errmsg(), "FakeLib 13 has no symbol cdb_no_such_symbol_xyz"),
              "message: %s", cdb_errmsg());
}

/* Without a usable GPU nvJPEG is not used, and the reason says why. */
CDB_TEST(nvjpeg_unusable_without_gpu) {
    const char *why = cdb_k_nvjpeg_unusable_reason();
    CHECK(why != NULL);
    if (cdb_k_cuda_device_count() > 0) CDB_SKIP("a CUDA device is present; tests/gpu covers it");
    CHECK_EQ_INT(cdb_k_nvjpeg_usable(), 0);
    CHECK_MSG(strstr(why, cdb_k_cuda_built() ? "no CUDA device: " : "built without CUDA"),
              "reason: %s", why);
}

/* Each reason nvJPEG is not used gives its own message and no library (the CPU
** decoders then take every file: test_decoder_pick, nvjpeg_usable 0). */
CDB_TEST(nvjpeg_decide_failure_paths) {
    static const char *const missing[] = {"/nonexistent/libnvjpeg.so.13",
                                          "libcdb_no_nvjpeg.so.12"};
    cdb_dynlib_spec s = cdb_kc_nvjpeg_spec;
    cdb_kc_nvjpeg_api api;
    char why[1600];
    s.env = "CLIPDB_TEST_NVJPEG";
    unsetenv("CLIPDB_TEST_NVJPEG");
    CHECK_EQ_STR(cdb_kc_nvjpeg_spec.env, "CLIPDB_NVJPEG");
    CHECK_EQ_STR(cdb_kc_nvjpeg_spec.candidates[0], "libnvjpeg.so.13");
    CHECK_RC(cdb_kc_nvjpeg_decide(0, "", &s, &api, why, sizeof why), CDB_UNSUPPORTED);
    CHECK_EQ_STR(why, "this clipdb was built without CUDA");
    CHECK(api.lib == NULL);
    CHECK_RC(cdb_kc_nvjpeg_decide(1, "the NVIDIA driver is missing or older than this build's "
                                  "CUDA 13.0", &s, &api, why, sizeof why), CDB_UNSUPPORTED);
    CHECK_EQ_STR(why, "no CUDA device: the NVIDIA driver is missing or older than this "
                      "build's CUDA 13.0");
    CHECK_RC(cdb_kc_nvjpeg_decide(1, "no CUDA-capable device is present", &s, &api, why,
                                  sizeof why), CDB_UNSUPPORTED);
    CHECK_EQ_STR(why, "no CUDA device: no CUDA-capable device is present");
    CHECK_RC(cdb_kc_nvjpeg_decide(1, "cuBLAS could not be loaded (libcublas.so); set "
                                  "CLIPDB_CUBLAS to its path", &s, &api, why, sizeof why),
             CDB_UNSUPPORTED);
    CHECK(strstr(why, "no CUDA device: cuBLAS could not be loaded") == why);
    CHECK(api.lib == NULL);
    /* a usable device, no libnvjpeg: every attempt and the variable to set */
    s.candidates = missing;
    s.n_candidates = 2;
    CHECK_RC(cdb_kc_nvjpeg_decide(1, "", &s, &api, why, sizeof why), CDB_UNSUPPORTED);
    CHECK_MSG(strstr(why, "nvJPEG could not be loaded (") &&
                  strstr(why, "/nonexistent/libnvjpeg.so.13") &&
                  strstr(why, "libcdb_no_nvjpeg.so.12") && strstr(why, "CLIPDB_TEST_NVJPEG="),
              "reason: %s", why);
    CHECK(api.lib == NULL);
    /* a library that is not nvJPEG */
    setenv("CLIPDB_TEST_NVJPEG", "libm.so.6", 1);
    CHECK_RC(cdb_kc_nvjpeg_decide(1, "", &s, &api, why, sizeof why), CDB_UNSUPPORTED);
    CHECK_MSG(strstr(why, "nvJPEG has no symbol nvjpegCreateEx"), "reason: %s", why);
    CHECK(api.lib == NULL);
    unsetenv("CLIPDB_TEST_NVJPEG");
}

/* The stand-in library loads; the hardware decoder is taken when nvjpegCreateEx accepts
** it, else the default backend; neither: CDB_DEVICE with nvJPEG's status. */
CDB_TEST(nvjpeg_decide_and_backend_choice) {
    cdb_dynlib_spec s = cdb_kc_nvjpeg_spec;
    cdb_kc_nvjpeg_api api;
    char why[1600];
    void *h = NULL;
    int hw = -1;
    const char *fake = getenv("CLIPDB_TEST_FAKE_NVJPEG"); /* prebuilt binaries elsewhere */
    s.env = "CLIPDB_TEST_NVJPEG";
    setenv("CLIPDB_TEST_NVJPEG", fake && *fake ? fake : CDB_FAKE_NVJPEG, 1);
    CHECK_OK(cdb_kc_nvjpeg_decide(1, "", &s, &api, why, sizeof why));
    unsetenv("CLIPDB_TEST_NVJPEG");
    CHECK(api.lib && api.create_ex && api.destroy && api.state_create && api.state_destroy &&
          api.get_image_info && api.decode && api.batched_init && api.batched);
    CHECK_EQ_STR(why, "");
    unsetenv("FAKE_NVJPEG_HW");
    unsetenv("FAKE_NVJPEG_FAIL");
    CHECK_OK(cdb_kc_nvjpeg_handle(&api, &h, &hw));
    CHECK(h != NULL);
    CHECK_EQ_INT(hw, 0); /* ARCH_MISMATCH for the hardware backend: the default one */
    CHECK_EQ_INT(api.destroy(h), 0);
    setenv("FAKE_NVJPEG_HW", "1", 1);
    CHECK_OK(cdb_kc_nvjpeg_handle(&api, &h, &hw));
    CHECK_EQ_INT(hw, 1);
    setenv("FAKE_NVJPEG_FAIL", "1", 1);
    h = (void *)1;
    CHECK_RC(cdb_kc_nvjpeg_handle(&api, &h, &hw), CDB_DEVICE);
    CHECK(h == NULL);
    CHECK_MSG(strstr(cdb_errmsg(), "nvjpegCreateEx failed (nvJPEG status 6)"), "message: %s",
              cdb_errmsg());
    unsetenv("FAKE_NVJPEG_HW");
    unsetenv("FAKE_NVJPEG_FAIL");
}

CDB_TEST_MAIN(device_parse_forms, device_parse_rejects, device_resolve_injected,
              device_resolve_real, no_device_paths, lib_open_failure_paths,
              nvjpeg_unusable_without_gpu, nvjpeg_decide_failure_paths,
              nvjpeg_decide_and_backend_choice)
