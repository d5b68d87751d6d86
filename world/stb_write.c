/*
** stb_write.c: the one translation unit that compiles stb_image_write (libstb-dev's
** header) for the world generator. stb is third-party code: its warnings are
** silenced here, and under CLIPDB_SANITIZE this file alone is built without the
** shift-base check, because stb's JPEG writer left-shifts negative values
** (well defined on every compiler clipdb supports, but UB by the letter of C11).
** stb's functions are static here (STB_IMAGE_WRITE_STATIC): the library exports only
** the two cdb_world_write_* wrappers (world_int.h), so a program linking clipdb's
** static libraries can have its own stb_image_write. Each file gets the world's mark
** (CDB_IMAGE_WORLD_MARK, encoder.h), by which an ingest tells it from a real photo.
*/
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include "stb_image_write.h"
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encoder/encoder.h" /* CDB_IMAGE_WORLD_MARK: what the ingest looks for */
#include "world/world_int.h"

/* The encoded file in memory, as stb hands it over. */
typedef struct membuf {
    unsigned char *p;
    size_t n, cap;
    int failed;
} membuf;

static void mem_put(void *ctx, void *data, int size) {
    membuf *m = ctx;
    if (m->failed || size <= 0) return;
    if (m->n + (size_t)size > m->cap) {
        size_t cap = (m->cap ? m->cap * 2 : 65536) + (size_t)size;
        unsigned char *p = realloc(m->p, cap);
        if (!p) {
            m->failed = 1;
            return;
        }
        m->p = p;
        m->cap = cap;
    }
    memcpy(m->p + m->n, data, (size_t)size);
    m->n += (size_t)size;
}

/* Writes head[0..at), the mark's segment or chunk, then head[at..n) to path. 1 ok. */
static int write_marked(const char *path, const unsigned char *file, size_t n, size_t at,
                        const unsigned char *mark, size_t mark_len) {
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(file, 1, at, f) == at && fwrite(mark, 1, mark_len, f) == mark_len &&
             fwrite(file + at, 1, n - at, f) == n - at;
    if (f && fclose(f) != 0) ok = 0;
    return ok;
}

static void put_be32(unsigned char *p, unsigned v) {
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* The PNG with a tEXt chunk "Software" = the mark right after IHDR (signature 8 bytes,
** IHDR 25). */
int cdb_world_write_png_(const char *path, int w, int h, const unsigned char *rgb) {
    static const char key[] = "Software";
    const size_t klen = sizeof key, mlen = sizeof CDB_IMAGE_WORLD_MARK - 1;
    unsigned char chunk[64];
    int len = 0, ok;
    unsigned char *png = stbi_write_png_to_mem(rgb, w * 3, w, h, 3, &len);
    if (!png || len < 33) {
        free(png);
        return 0;
    }
    put_be32(chunk, (unsigned)(klen + mlen));
    memcpy(chunk + 4, "tEXt", 4);
    memcpy(chunk + 8, key, klen);
    memcpy(chunk + 8 + klen, CDB_IMAGE_WORLD_MARK, mlen);
    put_be32(chunk + 8 + klen + mlen, stbiw__crc32(chunk + 4, (int)(4 + klen + mlen)));
    ok = write_marked(path, png, (size_t)len, 33, chunk, 12 + klen + mlen);
    free(png);
    return ok;
}

/* The JPEG with a COM segment holding the mark right after stb's SOI and JFIF APP0. */
int cdb_world_write_jpg_(const char *path, int w, int h, const unsigned char *rgb, int quality) {
    const size_t mlen = sizeof CDB_IMAGE_WORLD_MARK - 1;
    unsigned char seg[32] = {0xFF, 0xFE, 0, (unsigned char)(2 + mlen)};
    membuf m = {NULL, 0, 0, 0};
    size_t at;
    int ok;
    memcpy(seg + 4, CDB_IMAGE_WORLD_MARK, mlen);
    ok = stbi_write_jpg_to_func(mem_put, &m, w, h, 3, rgb, quality) && !m.failed && m.n > 6;
    at = ok ? 4 + ((size_t)m.p[4] << 8 | m.p[5]) : 0; /* SOI, then APP0 of that length */
    ok = ok && m.p[2] == 0xFF && m.p[3] == 0xE0 && at < m.n &&
         write_marked(path, m.p, m.n, at, seg, 4 + mlen);
    free(m.p);
    return ok;
}
