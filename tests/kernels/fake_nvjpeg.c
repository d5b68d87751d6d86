/*
** fake_nvjpeg.c: a stand-in libnvjpeg for test_device (built as a loadable module): the
** entry points clipdb resolves, with nvjpegCreateEx answering as the environment says,
** so the loader's and the backend choice's branches run on a machine without a GPU.
**   FAKE_NVJPEG_HW=1    the hardware backend (3) is accepted; otherwise it gets
**                       NVJPEG_STATUS_ARCH_MISMATCH (7), as on a GPU without the decoder
**   FAKE_NVJPEG_FAIL=1  every backend fails (NVJPEG_STATUS_EXECUTION_FAILED, 6)
** Decoding entry points are never reached by the test: they return
** NVJPEG_STATUS_NOT_INITIALIZED (1).
*/
#include <stddef.h>
#include <stdlib.h>

static int g_handle;

int nvjpegCreateEx(int backend, void *dev_alloc, void *pinned_alloc, unsigned flags,
                   void **handle) {
    (void)dev_alloc, (void)pinned_alloc, (void)flags;
    if (getenv("FAKE_NVJPEG_FAIL")) return 6;
    if (backend == 3 && !getenv("FAKE_NVJPEG_HW")) return 7;
    *handle = &g_handle;
    return 0;
}
int nvjpegDestroy(void *handle) { return handle == &g_handle ? 0 : 2; }
int nvjpegJpegStateCreate(void *handle, void **state) { (void)handle, (void)state; return 1; }
int nvjpegJpegStateDestroy(void *state) { (void)state; return 1; }
int nvjpegGetImageInfo(void *h, const unsigned char *d, size_t n, int *c, int *s, int *w, int *hh) {
    (void)h, (void)d, (void)n, (void)c, (void)s, (void)w, (void)hh;
    return 1;
}
int nvjpegDecode(void *h, void *st, const unsigned char *d, size_t n, int f, void *dst, void *s) {
    (void)h, (void)st, (void)d, (void)n, (void)f, (void)dst, (void)s;
    return 1;
}
int nvjpegDecodeBatchedInitialize(void *h, void *st, int b, int t, int f) {
    (void)h, (void)st, (void)b, (void)t, (void)f;
    return 1;
}
int nvjpegDecodeBatched(void *h, void *st, const unsigned char *const *d, const size_t *n,
                        void *dst, void *s) {
    (void)h, (void)st, (void)d, (void)n, (void)dst, (void)s;
    return 1;
}
