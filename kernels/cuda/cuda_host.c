/*
** cuda_host.c: the host-only half of the GPU path, plain C with no CUDA header,
** built in every configuration (CLIPDB_CUDA=OFF too) and unit-tested without a
** GPU (tests/kernels/test_cuda_host.c):
**  - `--device` strings and their resolution against the devices present;
**  - "no CUDA" stubs of the public CUDA entry points when built without CUDA.
*/
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_int.h"

/* ---- device strings ------------------------------------------------------ */

cdb_status cdb_k_device_parse(const char *s, cdb_k_device_spec *out) {
    char buf[32];
    size_t n = 0;
    const char *e;
    if (!out) return cdb_seterr(CDB_INVALID, "cdb_k_device_parse: out is NULL");
    out->kind = CDB_K_BACKEND_AUTO;
    out->index = 0;
    if (!s) return cdb_seterr(CDB_INVALID, "device: NULL string");
    while (*s == ' ' || *s == '\t') s++;
    e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n')) e--;
    if ((size_t)(e - s) >= sizeof buf) goto bad;
    for (const char *p = s; p < e; p++) buf[n++] = (char)tolower((unsigned char)*p);
    buf[n] = 0;
    if (!strcmp(buf, "auto")) return CDB_OK;
    if (!strcmp(buf, "cpu")) {
        out->kind = CDB_K_BACKEND_CPU;
        return CDB_OK;
    }
    if (!strcmp(buf, "cuda")) {
        out->kind = CDB_K_BACKEND_CUDA;
        return CDB_OK;
    }
    if (!strncmp(buf, "cuda:", 5)) {
        const char *d = buf + 5;
        long v = 0;
        if (!*d) goto bad;
        for (; *d; d++) {
            if (*d < '0' || *d > '9') goto bad;
            v = v * 10 + (*d - '0');
            if (v > 1023) goto bad;
        }
        out->kind = CDB_K_BACKEND_CUDA;
        out->index = (int)v;
        return CDB_OK;
    }
bad:
    return cdb_seterr(CDB_INVALID, "invalid device \"%s\": expected auto, cpu, cuda or cuda:N",
                      s);
}

const char *cdb_k_device_str(cdb_k_device_spec d, char *buf, size_t n) {
    if (!buf || n == 0) return "";
    switch (d.kind) {
    case CDB_K_BACKEND_AUTO: snprintf(buf, n, "auto"); break;
    case CDB_K_BACKEND_CPU: snprintf(buf, n, "cpu"); break;
    case CDB_K_BACKEND_CUDA: snprintf(buf, n, "cuda:%d", d.index); break;
    default: snprintf(buf, n, "unknown"); break;
    }
    return buf;
}

cdb_status cdb_k_device_resolve_with(cdb_k_device_spec want, int n_cuda, const char *why_none,
                                     cdb_k_device_spec *out) {
    if (!out) return cdb_seterr(CDB_INVALID, "cdb_k_device_resolve: out is NULL");
    out->kind = CDB_K_BACKEND_CPU;
    out->index = 0;
    if (!why_none || !*why_none) why_none = "no usable CUDA device";
    switch (want.kind) {
    case CDB_K_BACKEND_CPU: return CDB_OK;
    case CDB_K_BACKEND_AUTO:
        if (n_cuda > 0) {
            out->kind = CDB_K_BACKEND_CUDA;
            out->index = 0;
        }
        return CDB_OK;
    case CDB_K_BACKEND_CUDA:
        if (n_cuda <= 0)
            return cdb_seterr(CDB_UNSUPPORTED,
                              "device cuda:%d was asked for but %s; use --device cpu, or "
                              "--device auto to fall back to the CPU",
                              want.index, why_none);
        if (want.index < 0 || want.index >= n_cuda)
            return cdb_seterr(CDB_UNSUPPORTED,
                              "device cuda:%d was asked for but only %d CUDA device%s "
                              "(cuda:0%s%s) %s present; use --device cuda:0..%d, cpu or auto",
                              want.index, n_cuda, n_cuda == 1 ? "" : "s", n_cuda > 1 ? "..cuda:" : "",
                              n_cuda > 1 ? "N" : "", n_cuda == 1 ? "is" : "are", n_cuda - 1);
        *out = want;
        return CDB_OK;
    }
    return cdb_seterr(CDB_INVALID, "device kind %d unknown", (int)want.kind);
}

cdb_status cdb_k_device_resolve(cdb_k_device_spec want, cdb_k_device_spec *out) {
    int n = 0;
    const char *why = NULL;
    if (want.kind != CDB_K_BACKEND_CPU) {
        why = cdb_k_cuda_unusable_reason();
        n = (why && *why) ? 0 : cdb_k_cuda_device_count();
    }
    return cdb_k_device_resolve_with(want, n, why, out);
}

/* ---- builds without CUDA ------------------------------------------------------ */
#if !defined(CDB_HAVE_CUDA)
const char *cdb_k_cuda_unusable_reason(void) { return "clipdb was built without CUDA"; }

cdb_status cdb_k_backend_cuda_new(int device_index, cdb_k_backend **out) {
    if (out) *out = NULL;
    return cdb_seterr(CDB_UNSUPPORTED, "cuda:%d: clipdb was built without CUDA", device_index);
}
#endif
