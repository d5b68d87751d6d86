/*
** dispatch.c: picks the CPU ISA level once per process (cpuid via the compiler's
** builtins), capped by CLIPDB_ISA. Kernel groups ask cdb_k_cpu_isa() and keep
** their own function pointers.
*/
#include <pthread.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cdb_k_isa g_isa = CDB_K_ISA_SCALAR;

static void detect(void) {
    cdb_k_isa best = CDB_K_ISA_SCALAR;
    const char *cap = getenv("CLIPDB_ISA");
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    int f16c = 0;
    __builtin_cpu_init();
    /* F16C is CPUID.1:ECX bit 29 (clang 14 has no __builtin_cpu_supports("f16c")) */
    if (__get_cpuid(1, &a, &b, &c, &d)) f16c = (c >> 29) & 1;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) {
        best = CDB_K_ISA_AVX2;
        /* libgcc's check includes the OS's XCR0 bits for the ZMM state */
        if (__builtin_cpu_supports("avx512f")) best = CDB_K_ISA_AVX512;
    }
#endif
    if (cap && !strcmp(cap, "scalar")) best = CDB_K_ISA_SCALAR;
    if (cap && !strcmp(cap, "avx2") && best > CDB_K_ISA_AVX2) best = CDB_K_ISA_AVX2;
    g_isa = best;
}

cdb_k_isa cdb_k_cpu_isa(void) {
    pthread_once(&g_once, detect);
    return g_isa;
}

const char *cdb_k_isa_name(cdb_k_isa isa) {
    switch (isa) {
    case CDB_K_ISA_SCALAR: return "scalar";
    case CDB_K_ISA_AVX2: return "avx2";
    case CDB_K_ISA_AVX512: return "avx512";
    }
    return "unknown";
}
