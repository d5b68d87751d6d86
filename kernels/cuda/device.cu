/*
** device.cu: CUDA presence probe. Built only when CMake found nvcc; the CUDA
** runtime is linked statically and cuBLAS is loaded with dlopen, so a machine with
** no driver still runs the binary and this reports 0 devices (and why) instead of
** failing.
*/
#include <pthread.h>
#include <stdio.h>

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_int.h"

static pthread_once_t g_probe_once = PTHREAD_ONCE_INIT;
static int g_n_devices = 0;
static char g_reason[256];

static void probe(void) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the error: no driver / no GPU */
        if (err == cudaErrorNoDevice)
            snprintf(g_reason, sizeof g_reason, "no CUDA-capable device is present");
        else if (err == cudaErrorInsufficientDriver)
            snprintf(g_reason, sizeof g_reason,
                     "the NVIDIA driver is missing or older than this build's CUDA %d.%d (%s)",
                     CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10,
                     cudaGetErrorString(err));
        else
            snprintf(g_reason, sizeof g_reason, "CUDA is not usable: %s (%s)",
                     cudaGetErrorString(err), cudaGetErrorName(err));
        n = 0;
    } else if (n == 0) {
        snprintf(g_reason, sizeof g_reason, "no CUDA-capable device is present");
    }
    g_n_devices = n;
}

extern "C" int cdb_k_cuda_built(void) { return 1; }

extern "C" int cdb_k_cuda_device_count(void) {
    pthread_once(&g_probe_once, probe);
    return g_n_devices;
}

extern "C" const char *cdb_k_cuda_unusable_reason(void) {
    pthread_once(&g_probe_once, probe);
    if (g_n_devices == 0) return g_reason;
    if (cdb_kc_cublas_load() != CDB_OK) return "cuBLAS could not be loaded (libcublas.so); set "
                                                "CLIPDB_CUBLAS to its path";
    return "";
}
