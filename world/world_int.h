/*
** world_int.h: private to world/: the counter-based random generator and the
** palette shared by world.c (scenes) and render.c (pixels), and the image writers.
*/
#ifndef CDB_WORLD_INT_H
#define CDB_WORLD_INT_H

#include <stdint.h>

typedef struct cdb_world_rng {
    uint64_t s;
} cdb_world_rng;

uint64_t cdb_world_mix_(uint64_t z); /* splitmix64 finalizer */
/* Independent stream per (seed, index, stream). */
void cdb_world_rng_init_(cdb_world_rng *r, uint64_t seed, uint64_t index, uint64_t stream);
uint64_t cdb_world_rng_next_(cdb_world_rng *r);
float cdb_world_rng_unit_(cdb_world_rng *r); /* [0, 1) */
int cdb_world_rng_below_(cdb_world_rng *r, int n); /* [0, n); 0 when n <= 1 */

extern const uint8_t cdb_world_palette_[10][3];

/* stb_image_write's PNG and JPEG writers (stb_write.c) for w x h RGB rows of 3w bytes;
** nonzero on success. */
int cdb_world_write_png_(const char *path, int w, int h, const unsigned char *rgb);
int cdb_world_write_jpg_(const char *path, int w, int h, const unsigned char *rgb, int quality);

#endif /* CDB_WORLD_INT_H */
