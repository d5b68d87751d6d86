/*
** world.h: the generated "shapes" world: deterministic photo libraries with true
** captions, for the bundled default model, the demo and the benchmarks.
**
** A scene is 1-3 objects (circle, square, triangle, star, ring, cross, heart,
** arrow) in one of 10 colors, 3 sizes and 9 positions, on a background (white,
** black, gray, gradient, noise). Scene i of seed s is a pure function of (s, i):
** a library can be regenerated, or one scene recomputed without rendering the
** others, from the seed alone. Objects are laid out inside the centered square of
** side min(width, height), so that CLIP's center crop sees every object and the
** captions stay true for what a model sees; positions ("top left", ...) refer to
** that square.
**
** Queries (cdb_world_query) are the structured form of captions: a list of object
** terms (shape / color / size / position, each optional, with a count) and an
** optional background. cdb_world_scene_matches() is the ground truth every
** evaluation uses; cdb_world_query_text() turns a query into English.
**
** Threading: every function is reentrant; nothing here has global state.
*/
#ifndef CDB_WORLD_H
#define CDB_WORLD_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cdb_world_shape {
    CDB_WORLD_CIRCLE = 0, CDB_WORLD_SQUARE, CDB_WORLD_TRIANGLE, CDB_WORLD_STAR,
    CDB_WORLD_RING, CDB_WORLD_CROSS, CDB_WORLD_HEART, CDB_WORLD_ARROW,
    CDB_WORLD_N_SHAPES
} cdb_world_shape;

typedef enum cdb_world_color {
    CDB_WORLD_RED = 0, CDB_WORLD_ORANGE, CDB_WORLD_YELLOW, CDB_WORLD_GREEN,
    CDB_WORLD_BLUE, CDB_WORLD_PURPLE, CDB_WORLD_PINK, CDB_WORLD_BROWN,
    CDB_WORLD_BLACK, CDB_WORLD_WHITE,
    CDB_WORLD_N_COLORS
} cdb_world_color;

typedef enum cdb_world_size {
    CDB_WORLD_SMALL = 0, CDB_WORLD_MEDIUM, CDB_WORLD_LARGE,
    CDB_WORLD_N_SIZES
} cdb_world_size;

/* 3x3 grid cells of the layout square, row-major. */
typedef enum cdb_world_pos {
    CDB_WORLD_TOP_LEFT = 0, CDB_WORLD_TOP, CDB_WORLD_TOP_RIGHT,
    CDB_WORLD_LEFT, CDB_WORLD_CENTER, CDB_WORLD_RIGHT,
    CDB_WORLD_BOTTOM_LEFT, CDB_WORLD_BOTTOM, CDB_WORLD_BOTTOM_RIGHT,
    CDB_WORLD_N_POSITIONS
} cdb_world_pos;

typedef enum cdb_world_bg {
    CDB_WORLD_BG_WHITE = 0, CDB_WORLD_BG_BLACK, CDB_WORLD_BG_GRAY,
    CDB_WORLD_BG_GRADIENT, CDB_WORLD_BG_NOISE,
    CDB_WORLD_N_BACKGROUNDS
} cdb_world_bg;

typedef enum cdb_world_format { CDB_WORLD_JPEG = 0, CDB_WORLD_PNG = 1 } cdb_world_format;

#define CDB_WORLD_MAX_OBJECTS 3
#define CDB_WORLD_ANY (-1) /* a query field that matches every value */

/* English names ("circle", "red", "small", "top left", "gradient", "jpeg");
** static strings, "?" when out of range. */
const char *cdb_world_shape_name(int shape);
const char *cdb_world_color_name(int color);
const char *cdb_world_size_name(int size);
const char *cdb_world_pos_name(int pos);
const char *cdb_world_bg_name(int bg);
const char *cdb_world_format_name(int format);
/* Inverse of the *_name functions; -1 when the name is unknown. */
int cdb_world_shape_from_name(const char *name);
int cdb_world_color_from_name(const char *name);

typedef struct cdb_world_object {
    int shape;        /* cdb_world_shape */
    int color;        /* cdb_world_color */
    int size;         /* cdb_world_size */
    int pos;          /* cdb_world_pos */
    float cx, cy;     /* center, image pixels */
    float radius;     /* bounding radius, pixels */
    float angle;      /* rotation, radians */
    uint8_t rgb[3];   /* the exact fill color (the named color, slightly jittered) */
} cdb_world_object;

typedef struct cdb_world_scene {
    uint64_t seed;        /* library seed */
    int64_t index;        /* scene index within the library */
    int width, height;    /* pixels */
    int format;           /* cdb_world_format */
    int jpeg_quality;     /* 1..100, JPEG only */
    int background;       /* cdb_world_bg */
    uint8_t bg_rgb[2][3]; /* plain: [0]; gradient: from [0] to [1]; noise: base [0] */
    float bg_dir;         /* gradient direction, radians */
    uint64_t noise_seed;  /* noise background */
    int n_objects;        /* 1..CDB_WORLD_MAX_OBJECTS */
    cdb_world_object objects[CDB_WORLD_MAX_OBJECTS];
} cdb_world_scene;

typedef struct cdb_world_params {
    int min_side, max_side; /* short side range, pixels (default 96..320) */
    float png_fraction;     /* share of PNG files (default 0.4); the rest JPEG */
    int square_only;        /* 1: width == height (default 0: varied aspect ratios) */
    int min_objects, max_objects; /* default 1..3 */
} cdb_world_params;
cdb_world_params cdb_world_params_default(void);

/* Scene index of library seed. p == NULL means defaults. CDB_INVALID on bad params. */
cdb_status cdb_world_scene_make(uint64_t seed, int64_t index, const cdb_world_params *p,
                                cdb_world_scene *out /* OUT */);

/* Renders the scene. rgb: caller-owned width*height*3 bytes (HWC, RGB). */
cdb_status cdb_world_render(const cdb_world_scene *s, uint8_t *rgb /* OUT */);

/* Renders and encodes to a file in the scene's format (JPEG or PNG), with the world's
** mark in it (a JPEG comment, a PNG tEXt "Software" chunk: "clipdb-world"), by which
** an ingest tells a generated image from a real photo (encoder.h,
** cdb_image_world_marked). */
cdb_status cdb_world_write_image(const cdb_world_scene *s, const char *path);

/* ---- captions and queries ------------------------------------------------------ */

typedef struct cdb_world_term {
    int shape, color, size, pos; /* CDB_WORLD_ANY or a value */
    int count;                   /* 0 or 1: at least one such object; n >= 2: exactly n */
} cdb_world_term;

typedef struct cdb_world_query {
    int n_terms;                 /* 0..CDB_WORLD_MAX_OBJECTS; all must hold */
    cdb_world_term terms[CDB_WORLD_MAX_OBJECTS];
    int background;              /* CDB_WORLD_ANY or a cdb_world_bg */
} cdb_world_query;

/* 1 when the scene satisfies every term and the background, else 0. */
int cdb_world_scene_matches(const cdb_world_scene *s, const cdb_world_query *q);
/* Convenience: 1 when the scene has an object of this shape and color (either may
** be CDB_WORLD_ANY). */
int cdb_world_scene_has(const cdb_world_scene *s, int shape, int color);

/* English text of a query, e.g. "two blue squares and a small red star in the top
** left corner on a white background". CDB_TOO_LARGE if cap is too small. */
cdb_status cdb_world_query_text(const cdb_world_query *q, char *buf /* OUT */, size_t cap);

/* The full true caption of a scene: every object (identical shape+color grouped
** with a count), its size when it is the same for the group, its position for
** single-object scenes, and the background. */
cdb_status cdb_world_scene_query(const cdb_world_scene *s, cdb_world_query *out /* OUT */);
cdb_status cdb_world_caption(const cdb_world_scene *s, char *buf /* OUT */, size_t cap);

/* A random true partial description of the scene (for training text variants):
** one object or all of them, with a random subset of attributes. variant picks
** the draw; the result always matches s. */
cdb_status cdb_world_scene_describe(const cdb_world_scene *s, uint64_t variant,
                                    cdb_world_query *out /* OUT */);

typedef enum cdb_world_query_kind {
    CDB_WORLD_Q_SINGLE = 0,   /* one object: a shape, or a color and a shape */
    CDB_WORLD_Q_COMPOSITIONAL /* size, position, count, background, two objects */
} cdb_world_query_kind;

/* Evaluation query index of seed. CDB_WORLD_Q_SINGLE enumerates the 8 shapes then
** the 80 color+shape pairs (index mod 88), so the first 88 are all distinct;
** CDB_WORLD_Q_COMPOSITIONAL draws at random. */
cdb_status cdb_world_query_make(uint64_t seed, int64_t index, int kind,
                                cdb_world_query *out /* OUT */);

/* JSON of a scene record (one object, no newline), as written in manifests.
** *out: cdb_free it. */
cdb_status cdb_world_scene_json(const cdb_world_scene *s, char **out /* OUT */);
/* JSON of a query: {"terms":[{"shape":"star","color":null,...,"count":0}],"background":null}. */
cdb_status cdb_world_query_json(const cdb_world_query *q, char **out /* OUT */);

/* ---- libraries ------------------------------------------------------------------ */

typedef struct cdb_world_library_params {
    cdb_world_params scene;  /* image parameters */
    int n_variants;          /* extra training captions per image in the manifest (default 0) */
    int n_threads;           /* 0 = cdb_default_threads() */
} cdb_world_library_params;
cdb_world_library_params cdb_world_library_params_default(void);

/* Writes scenes [first, first+n) of seed into dir (created if missing) as
** img_NNNNNNN.jpg/.png plus dir/manifest.jsonl, one JSON object per line, in
** index order:
**   {"path":"img_0000000.png","index":0,"caption":"...","scene":{...},
**    "variants":[{"text":"...","query":{...}}, ...]}
** ("variants" only when n_variants > 0). An existing manifest is replaced.
** Not atomic: a failure leaves a partial folder. */
cdb_status cdb_world_generate(const char *dir, uint64_t seed, int64_t first, int64_t n,
                              const cdb_world_library_params *p);

#ifdef __cplusplus
}
#endif
#endif /* CDB_WORLD_H */
