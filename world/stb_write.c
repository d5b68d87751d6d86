/*
** stb_write.c: the one translation unit that compiles stb_image_write (libstb-dev's
** header) for the world generator. stb is third-party code: its warnings are
** silenced here, and under CLIPDB_SANITIZE this file alone is built without the
** shift-base check, because stb's JPEG writer left-shifts negative values
** (well defined on every compiler clipdb supports, but UB by the letter of C11).
** stb's functions are static here (STB_IMAGE_WRITE_STATIC): the library exports only
** the two cdb_world_write_* wrappers (world_int.h), so a program linking clipdb's
** static libraries can have its own stb_image_write.
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

#include "world/world_int.h"

int cdb_world_write_png_(const char *path, int w, int h, const unsigned char *rgb) {
    return stbi_write_png(path, w, h, 3, rgb, w * 3);
}

int cdb_world_write_jpg_(const char *path, int w, int h, const unsigned char *rgb, int quality) {
    return stbi_write_jpg(path, w, h, 3, rgb, quality);
}
