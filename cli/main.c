/*
** main.c: the clipdb program's entry point: global options and subcommand
** dispatch. Each subcommand lives in its own cmd_*.c file.
*/
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "kernels/kernels.h"

static int cmd_version(void) {
    printf("clipdb %s (cpu: %s, cuda: %s, %d device%s)\n", cdb_libversion(),
           cdb_k_isa_name(cdb_k_cpu_isa()), cdb_k_cuda_built() ? "built" : "not built",
           cdb_k_cuda_device_count(), cdb_k_cuda_device_count() == 1 ? "" : "s");
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")))
        return cmd_version();
    fprintf(stderr, "usage: clipdb <command> [options]\n");
    return 2;
}
