/*
** no_cuda.c: the public CUDA entry points of a build without CUDA (CLIPDB_CUDA=OFF,
** or no nvcc): no devices, and the reason. Plain C, built in every configuration
** (empty with CUDA: kernels/cuda/device.cu and backend.cu define them).
*/
#include "kernels/kernels.h"

#if !defined(CDB_HAVE_CUDA)
int cdb_k_cuda_device_count(void) { return 0; }
int cdb_k_cuda_built(void) { return 0; }
const char *cdb_k_cuda_unusable_reason(void) { return "this clipdb was built without CUDA"; }

cdb_status cdb_k_backend_cuda_new(int device_index, cdb_k_backend **out) {
    if (out) *out = NULL;
    return cdb_seterr(CDB_UNSUPPORTED, "cuda:%d: this clipdb was built without CUDA", device_index);
}
#endif
