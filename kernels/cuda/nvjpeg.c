/*
** nvjpeg.c: nvJPEG, loaded at run time as cuBLAS is (never linked: a build with
** CUDA must start where nvJPEG is absent, and the toolkit this builds with may not
** ship its headers). Only presence is decided here: cdb_k_nvjpeg_usable() says
** whether a GPU ingest may hand baseline JPEGs to nvJPEG (encoder.h,
** cdb_image_pick_decoder), and why not. The library is looked up as $CLIPDB_NVJPEG
** (a path), then libnvjpeg.so.13 / .12 on the loader's path, then the toolkit's and
** PyTorch-wheel's usual folders. Plain C with no CUDA header (built in every
** configuration; without CUDA nothing is loaded).
*/
#include <pthread.h>
#include <stdio.h>

#include "kernels/cuda/cuda_int.h"

/* The entry points the device decoder uses (nvjpeg.h's names; their C ABI is the
** same in CUDA 12 and 13). */
static const char *const g_symbols[] = {
    "nvjpegCreateEx",         "nvjpegDestroy",      "nvjpegJpegStateCreate",
    "nvjpegJpegStateDestroy", "nvjpegGetImageInfo", "nvjpegDecode",
};
#define N_SYMBOLS ((int)(sizeof g_symbols / sizeof g_symbols[0]))

static struct {
    void *lib;
    void *syms[N_SYMBOLS];
    char why[1600];
} g_nv;
static pthread_once_t g_nv_once = PTHREAD_ONCE_INIT;

static void nv_load(void) {
    static const char *const candidates[] = {
        "libnvjpeg.so.13",
        "libnvjpeg.so.12",
        "/usr/local/cuda/lib64/libnvjpeg.so.13",
        "/usr/local/cuda/targets/x86_64-linux/lib/libnvjpeg.so.13",
        "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvjpeg.so.13",
        "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nvjpeg/lib/libnvjpeg.so.12",
    };
    const cdb_kc_lib_spec spec = {"nvJPEG", "CLIPDB_NVJPEG", candidates,
                                  (int)(sizeof candidates / sizeof candidates[0]), g_symbols,
                                  N_SYMBOLS};
    if (!cdb_k_cuda_built()) {
        snprintf(g_nv.why, sizeof g_nv.why, "this clipdb was built without CUDA");
        return;
    }
    if (cdb_k_cuda_device_count() == 0) {
        snprintf(g_nv.why, sizeof g_nv.why, "no CUDA device: %s", cdb_k_cuda_unusable_reason());
        return;
    }
    if (cdb_kc_lib_open(&spec, &g_nv.lib, g_nv.syms) != CDB_OK)
        snprintf(g_nv.why, sizeof g_nv.why, "%s", cdb_errmsg());
}

int cdb_k_nvjpeg_usable(void) {
    pthread_once(&g_nv_once, nv_load);
    return g_nv.lib != NULL;
}

const char *cdb_k_nvjpeg_unusable_reason(void) {
    pthread_once(&g_nv_once, nv_load);
    return g_nv.lib ? "" : g_nv.why;
}
