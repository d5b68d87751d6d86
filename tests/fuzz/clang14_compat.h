/*
** clang14_compat.h: force-included (-include) into C files of the fuzz build by
** scripts/fuzz.sh when the compiler is clang < 15, which rejects
** __builtin_cpu_supports("f16c") (kernels/dispatch.c). The fuzz build then uses the
** scalar reference kernels, which is what we want to fuzz anyway.
** Remove once dispatch.c detects F16C with <cpuid.h> (CPUID.1:ECX bit 29).
*/
#if defined(__clang__) && __clang_major__ < 15
#define __builtin_cpu_supports(feature) 0
#endif
