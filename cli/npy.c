/*
** npy.c: writes NumPy .npy files (format version 1.0): the magic, a header dict
** padded with spaces to a multiple of 64 bytes and ending in '\n', then the data
** in C order, little-endian. Used by `embed --format npy`, `preprocess` and
** `export`. The header can be written first and the data streamed after it.
*/
#include <errno.h>
#include <string.h>

#include "cli/cli.h"

int cdb_cli_npy_header(FILE *f, const char *descr, const int64_t *shape, int ndim) {
    char dict[256];
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    size_t n, total;
    int o = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr);
    for (int i = 0; i < ndim; i++)
        o += snprintf(dict + o, sizeof dict - (size_t)o, "%lld,%s", (long long)shape[i],
                      i + 1 < ndim ? " " : "");
    if (ndim > 1) o--; /* (3, 224, 224) but (5,) */
    o += snprintf(dict + o, sizeof dict - (size_t)o, "), }");
    n = (size_t)o;
    total = (10 + n + 1 + 63) / 64 * 64;
    pre[8] = (unsigned char)((total - 10) & 0xFF);
    pre[9] = (unsigned char)((total - 10) >> 8);
    if (fwrite(pre, 1, 10, f) != 10 || fwrite(dict, 1, n, f) != n) return -1;
    for (size_t i = 10 + n; i + 1 < total; i++) fputc(' ', f);
    fputc('\n', f);
    return ferror(f) ? -1 : 0;
}

int cdb_cli_npy_write(const char *path, const char *descr, const int64_t *shape, int ndim,
                      const void *data, size_t elem_bytes) {
    int to_stdout = !strcmp(path, "-"); /* `--out -`: the array on standard output */
    FILE *f = to_stdout ? stdout : fopen(path, "wb");
    size_t count = 1;
    int rc;
    if (!f) return -1;
    for (int i = 0; i < ndim; i++) count *= (size_t)shape[i];
    rc = cdb_cli_npy_header(f, descr, shape, ndim);
    if (rc == 0 && count && fwrite(data, elem_bytes, count, f) != count) rc = -1;
    if (rc != 0 && to_stdout) cdb_cli_stdout_failed(errno); /* before the flush clears it */
    if (to_stdout ? cdb_cli_flush_stdout() != 0 : fclose(f) != 0) rc = -1;
    return rc;
}
