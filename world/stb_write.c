/*
** stb_write.c: the one translation unit that compiles stb_image_write (libstb-dev's
** header) for the world generator. stb is third-party code: its warnings are
** silenced here, and under CLIPDB_SANITIZE this file alone is built without the
** shift-base check, because stb's JPEG writer left-shifts negative values
** (well defined on every compiler clipdb supports, but UB by the letter of C11).
*/
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include "stb_image_write.h"
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
