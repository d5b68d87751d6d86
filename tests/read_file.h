/*
** read_file.h: a whole file in memory, for tests and benches (fixtures, golden files,
** photo sets). One static inline function.
*/
#ifndef CDB_TEST_READ_FILE_H
#define CDB_TEST_READ_FILE_H

#include <stdio.h>
#include <stdlib.h>

/* The bytes of the file at path, malloc'ed with one NUL byte after them (so a text file
** is a C string), their count in *n; NULL and *n = 0 when it cannot be opened or read
** to the end. */
static inline void *test_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long sz;
    *n = 0;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)sz + 1)) && fread(buf, 1, (size_t)sz, f) == (size_t)sz) {
        buf[sz] = 0;
        *n = (size_t)sz;
    } else {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

#endif /* CDB_TEST_READ_FILE_H */
