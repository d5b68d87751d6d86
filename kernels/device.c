/*
** device.c: clipdb's device names and their resolution against the devices this
** process can use (kernels.h, DEVICES). Host logic only, built in every
** configuration; tests/kernels/test_device.c checks it with the facts injected
** (cdb_k_device_resolve_with, backend_impl.h).
*/
#include <string.h>

#include "kernels/backend_impl.h"

#define DEVICE_FORMS "expected auto, cpu, cuda or cuda:N (N = 0, 1, ...; lowercase, no blanks)"

cdb_status cdb_k_device_parse(const char *s, cdb_k_device *out) {
    if (!out) return cdb_seterr(CDB_INVALID, "cdb_k_device_parse: out is NULL");
    out->kind = CDB_K_DEVICE_AUTO;
    out->index = 0;
    if (!s) return cdb_seterr(CDB_INVALID, "no device given: " DEVICE_FORMS);
    if (!strcmp(s, "auto")) return CDB_OK;
    if (!strcmp(s, "cpu")) {
        out->kind = CDB_K_DEVICE_CPU;
        return CDB_OK;
    }
    if (!strcmp(s, "cuda")) {
        out->kind = CDB_K_DEVICE_CUDA;
        return CDB_OK;
    }
    if (!strncmp(s, "cuda:", 5)) {
        const char *d = s + 5;
        int v = 0, n = 0;
        /* at most 9 digits, so v never overflows an int */
        for (; n < 9 && *d >= '0' && *d <= '9'; d++, n++) v = v * 10 + (*d - '0');
        if (n > 0 && !*d) {
            out->kind = CDB_K_DEVICE_CUDA;
            out->index = v;
            return CDB_OK;
        }
    }
    return cdb_seterr(CDB_INVALID, "invalid device '%s': " DEVICE_FORMS, s);
}

cdb_status cdb_k_device_resolve_with(cdb_k_device want, int n_cuda, const char *why_none,
                                     cdb_k_device *out) {
    if (!out) return cdb_seterr(CDB_INVALID, "cdb_k_device_resolve: out is NULL");
    out->kind = CDB_K_DEVICE_CPU;
    out->index = 0;
    if (!why_none || !*why_none) why_none = "no usable CUDA device";
    switch (want.kind) {
    case CDB_K_DEVICE_CPU: return CDB_OK;
    case CDB_K_DEVICE_AUTO:
        if (n_cuda > 0) out->kind = CDB_K_DEVICE_CUDA;
        return CDB_OK;
    case CDB_K_DEVICE_CUDA:
        if (want.index < 0) return cdb_seterr(CDB_INVALID, "cuda:%d: a negative device", want.index);
        if (n_cuda <= 0)
            return cdb_seterr(CDB_UNSUPPORTED, "cuda:%d is not available: %s", want.index,
                              why_none);
        if (want.index >= n_cuda)
            return cdb_seterr(CDB_UNSUPPORTED, "no CUDA device %d: only %d present (%s%d)",
                              want.index, n_cuda, n_cuda == 1 ? "cuda:" : "cuda:0 to cuda:",
                              n_cuda - 1);
        *out = want;
        return CDB_OK;
    }
    return cdb_seterr(CDB_INVALID, "device kind %d unknown", (int)want.kind);
}

cdb_status cdb_k_device_resolve(cdb_k_device want, cdb_k_device *out) {
    int n = 0;
    const char *why = NULL;
    if (want.kind != CDB_K_DEVICE_CPU) {
        why = cdb_k_cuda_unusable_reason();
        n = *why ? 0 : cdb_k_cuda_device_count();
    }
    return cdb_k_device_resolve_with(want, n, why, out);
}
