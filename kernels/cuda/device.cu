/*
** device.cu: CUDA presence probe. Built only when CMake found nvcc; the CUDA
** runtime is linked statically, so a machine with no driver still runs the binary
** and this reports 0 devices instead of failing.
*/
#include <cuda_runtime.h>

#include "kernels/kernels.h"

extern "C" int cdb_k_cuda_built(void) { return 1; }

extern "C" int cdb_k_cuda_device_count(void) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky error: no driver / no GPU */
        return 0;
    }
    return n;
}
