/*
** file_build.h: building image files byte by byte in tests (tests/fuzz/
** test_hostile_image.c, tests/encoder/test_png.c): a growable byte buffer, big- and
** little-endian integers, and PNG chunks with correct CRCs (zlib's crc32; the test
** links ZLIB::ZLIB). Static functions: each test takes what it uses.
*/
#ifndef CDB_TEST_FILE_BUILD_H
#define CDB_TEST_FILE_BUILD_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static inline void put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static inline void put_be32(buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    put(b, x, 4);
}
static inline void put_le16(buf *b, unsigned v) {
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(b, x, 2);
}
static inline void put_le32(buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}
static inline void put_be16(buf *b, unsigned v) {
    uint8_t x[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    put(b, x, 2);
}
/* A PNG chunk with a correct CRC; len_override != 0 writes that length instead. */
static inline void png_chunk(buf *b, const char *type, const void *d, uint32_t n,
                             uint32_t len_override) {
    uLong crc = crc32(0, (const Bytef *)type, 4);
    if (n) crc = crc32(crc, d, n);
    put_be32(b, len_override ? len_override : n);
    put(b, type, 4);
    if (n) put(b, d, n);
    put_be32(b, (uint32_t)crc);
}
/* The signature and an IHDR (compression, filter and interlace methods 0). */
static inline void png_start(buf *b, uint32_t w, uint32_t h, int depth, int ctype) {
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    uint8_t ihdr[13] = {(uint8_t)(w >> 24), (uint8_t)(w >> 16), (uint8_t)(w >> 8), (uint8_t)w,
                        (uint8_t)(h >> 24), (uint8_t)(h >> 16), (uint8_t)(h >> 8), (uint8_t)h,
                        (uint8_t)depth, (uint8_t)ctype, 0, 0, 0};
    put(b, sig, 8);
    png_chunk(b, "IHDR", ihdr, 13, 0);
}

#endif
