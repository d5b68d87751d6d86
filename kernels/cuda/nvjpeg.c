/*
** nvjpeg.c: nvJPEG, loaded at run time as cuBLAS is (never linked: a build with
** CUDA must start where nvJPEG is absent, and the toolkit this builds with ships no
** nvjpeg.h, so the few types and entry points used are declared in cuda_int.h from
** NVIDIA's documented C ABI). Decided here, in plain C built in every configuration
** (so every branch is tested on any machine, with fake libraries): whether a GPU ingest
** may hand baseline JPEGs to nvJPEG (cdb_k_nvjpeg_usable, encoder.h's
** cdb_image_pick_decoder) and why not, and which decoder backend a device gets (the
** hardware JPEG decoder of A100/H100/H200 when nvjpegCreateEx accepts it, else nvJPEG's
** default, hybrid/GPU backend). The decoding itself is nvjpeg_decode.cu's. The library
** is looked up as $CLIPDB_NVJPEG (a path), then libnvjpeg.so.13 / .12 on the loader's
** path, then the toolkit's and PyTorch-wheel's usual folders.
*/
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/cuda_int.h"

/* The entry points the device decoder uses, in cdb_kc_nvjpeg_api's order (nvjpeg.h's
** names; their C ABI is the same in CUDA 11, 12 and 13). */
static const char *const g_symbols[] = {
    "nvjpegCreateEx",         "nvjpegDestroy",      "nvjpegJpegStateCreate",
    "nvjpegJpegStateDestroy", "nvjpegGetImageInfo", "nvjpegDecode",
    "nvjpegDecodeBatchedInitialize", "nvjpegDecodeBatched",
};
#define N_SYMBOLS ((int)(sizeof g_symbols / sizeof g_symbols[0]))

static const char *const g_candidates[] = {
    "libnvjpeg.so.13",
    "libnvjpeg.so.12",
    "/usr/local/cuda/lib64/libnvjpeg.so.13",
    "/usr/local/cuda/targets/x86_64-linux/lib/libnvjpeg.so.13",
    "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvjpeg.so.13",
    "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nvjpeg/lib/libnvjpeg.so.12",
};

const cdb_dynlib_spec cdb_kc_nvjpeg_spec = {
    "nvJPEG", "CLIPDB_NVJPEG", g_candidates, (int)(sizeof g_candidates / sizeof g_candidates[0]),
    g_symbols, N_SYMBOLS};

cdb_status cdb_kc_nvjpeg_decide(int cuda_built, const char *cuda_why, const cdb_dynlib_spec *spec,
                                cdb_kc_nvjpeg_api *api, char *why, size_t why_cap) {
    void *syms[N_SYMBOLS];
    memset(api, 0, sizeof *api);
    if (spec->n_symbols != N_SYMBOLS) {
        snprintf(why, why_cap, "nvJPEG: %d symbols asked, %d used", spec->n_symbols, N_SYMBOLS);
        return cdb_seterr(CDB_INVALID, "%s", why);
    }
    if (!cuda_built) {
        snprintf(why, why_cap, "this clipdb was built without CUDA");
        return cdb_seterr(CDB_UNSUPPORTED, "%s", why);
    }
    if (cuda_why && *cuda_why) { /* no driver, no device, no cuBLAS: no GPU ingest at all */
        snprintf(why, why_cap, "no CUDA device: %s", cuda_why);
        return cdb_seterr(CDB_UNSUPPORTED, "%s", why);
    }
    if (cdb_dynlib_open(spec, &api->lib, syms) != CDB_OK) {
        snprintf(why, why_cap, "%s", cdb_errmsg());
        return CDB_UNSUPPORTED;
    }
    memcpy(&api->create_ex, &syms[0], sizeof(void *));
    memcpy(&api->destroy, &syms[1], sizeof(void *));
    memcpy(&api->state_create, &syms[2], sizeof(void *));
    memcpy(&api->state_destroy, &syms[3], sizeof(void *));
    memcpy(&api->get_image_info, &syms[4], sizeof(void *));
    memcpy(&api->decode, &syms[5], sizeof(void *));
    memcpy(&api->batched_init, &syms[6], sizeof(void *));
    memcpy(&api->batched, &syms[7], sizeof(void *));
    why[0] = 0;
    return CDB_OK;
}

cdb_status cdb_kc_nvjpeg_handle(const cdb_kc_nvjpeg_api *api, void **handle, int *hardware) {
    int st = api->create_ex(CDB_NVJPEG_BACKEND_HARDWARE, NULL, NULL, 0, handle);
    *hardware = st == 0;
    if (st == 0) return CDB_OK;
    /* 7 ARCH_MISMATCH, 9 IMPLEMENTATION_NOT_SUPPORTED ...: no hardware decoder here */
    *handle = NULL;
    st = api->create_ex(CDB_NVJPEG_BACKEND_DEFAULT, NULL, NULL, 0, handle);
    if (st == 0) return CDB_OK;
    *handle = NULL;
    return cdb_seterr(CDB_DEVICE, "nvjpegCreateEx failed (nvJPEG status %d)", st);
}

static struct {
    cdb_kc_nvjpeg_api api;
    char why[1600];
} g_nv;
static pthread_once_t g_nv_once = PTHREAD_ONCE_INIT;

static void nv_load(void) {
    (void)cdb_kc_nvjpeg_decide(cdb_k_cuda_built(), cdb_k_cuda_unusable_reason(),
                               &cdb_kc_nvjpeg_spec, &g_nv.api, g_nv.why, sizeof g_nv.why);
}

const cdb_kc_nvjpeg_api *cdb_kc_nvjpeg(void) {
    pthread_once(&g_nv_once, nv_load);
    return g_nv.api.lib ? &g_nv.api : NULL;
}

int cdb_k_nvjpeg_usable(void) { return cdb_kc_nvjpeg() != NULL; }

const char *cdb_k_nvjpeg_unusable_reason(void) {
    pthread_once(&g_nv_once, nv_load);
    return g_nv.api.lib ? "" : g_nv.why;
}
