/*
** image_stb.c: the one translation unit that compiles stb_image (libstb-dev's
** header, v2.27 on Debian 12), restricted to the formats clipdb accepts (JPEG,
** PNG, BMP, GIF, TGA, PNM) and without stdio: image.c reads files itself and
** hands stb memory buffers only. stb's failure reason is thread-local
** (STBI_THREAD_LOCAL is _Thread_local under C11), so decoding stays reentrant.
** stb is third-party code: its warnings are silenced here and nowhere else.
*/
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO
#define STBI_ONLY_JPEG
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#define STBI_ONLY_GIF
#define STBI_ONLY_TGA
#define STBI_ONLY_PNM
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_MALLOC(sz) cdb_malloc(sz)
#define STBI_REALLOC(p, newsz) cdb_realloc(p, newsz)
#define STBI_FREE(p) cdb_free(p)

#include "core/core.h"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmisleading-indentation"
#pragma GCC diagnostic ignored "-Wshift-negative-value"
#pragma GCC diagnostic ignored "-Wtype-limits"
#endif
#include <stb_image.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
