/*
** world.c: the shapes world's scenes, captions and queries (no pixels; see
** render.c). Everything is a pure function of (seed, index, variant) through a
** counter-based splitmix64 generator, so scene i never depends on scenes < i and a
** library can be judged without rendering it. cdb_world_scene_matches() is the
** ground truth for every evaluation, and captions are built from the same query
** structure it checks, so a caption is true by construction (the tests verify it).
*/
#include "world/world.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "world/world_int.h"

/* ---- names ---------------------------------------------------------------------- */

static const char *const k_shape_names[CDB_WORLD_N_SHAPES] = {
    "circle", "square", "triangle", "star", "ring", "cross", "heart", "arrow"};
static const char *const k_shape_plurals[CDB_WORLD_N_SHAPES] = {
    "circles", "squares", "triangles", "stars", "rings", "crosses", "hearts", "arrows"};
static const char *const k_color_names[CDB_WORLD_N_COLORS] = {
    "red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black", "white"};
static const char *const k_size_names[CDB_WORLD_N_SIZES] = {"small", "medium", "large"};
static const char *const k_pos_names[CDB_WORLD_N_POSITIONS] = {
    "top left", "top", "top right", "left", "center", "right",
    "bottom left", "bottom", "bottom right"};
static const char *const k_pos_phrases[CDB_WORLD_N_POSITIONS] = {
    "in the top left corner", "at the top", "in the top right corner",
    "on the left", "in the center", "on the right",
    "in the bottom left corner", "at the bottom", "in the bottom right corner"};
static const char *const k_bg_names[CDB_WORLD_N_BACKGROUNDS] = {
    "white", "black", "gray", "gradient", "noisy"};

/* Named colors; each object gets one of these, jittered by a few levels. */
const uint8_t cdb_world_palette_[CDB_WORLD_N_COLORS][3] = {
    {220, 30, 35},  {250, 135, 10}, {245, 215, 20}, {35, 165, 55},  {35, 85, 225},
    {135, 50, 185}, {250, 125, 190}, {125, 75, 35}, {20, 20, 20},   {250, 250, 250}};

#define NAME_OR_Q(table, n, i) (((i) >= 0 && (i) < (n)) ? (table)[i] : "?")
const char *cdb_world_shape_name(int v) { return NAME_OR_Q(k_shape_names, CDB_WORLD_N_SHAPES, v); }
const char *cdb_world_color_name(int v) { return NAME_OR_Q(k_color_names, CDB_WORLD_N_COLORS, v); }
const char *cdb_world_size_name(int v) { return NAME_OR_Q(k_size_names, CDB_WORLD_N_SIZES, v); }
const char *cdb_world_pos_name(int v) { return NAME_OR_Q(k_pos_names, CDB_WORLD_N_POSITIONS, v); }
const char *cdb_world_bg_name(int v) { return NAME_OR_Q(k_bg_names, CDB_WORLD_N_BACKGROUNDS, v); }
const char *cdb_world_format_name(int v) {
    return v == CDB_WORLD_JPEG ? "jpeg" : v == CDB_WORLD_PNG ? "png" : "?";
}

static int find_name(const char *const *table, int n, const char *name) {
    if (!name) return -1;
    for (int i = 0; i < n; i++)
        if (!strcmp(table[i], name)) return i;
    return -1;
}
int cdb_world_shape_from_name(const char *name) {
    int i = find_name(k_shape_names, CDB_WORLD_N_SHAPES, name);
    return i >= 0 ? i : find_name(k_shape_plurals, CDB_WORLD_N_SHAPES, name);
}
int cdb_world_color_from_name(const char *name) {
    return find_name(k_color_names, CDB_WORLD_N_COLORS, name);
}

/* ---- random numbers ---------------------------------------------------------------- */

uint64_t cdb_world_mix_(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void cdb_world_rng_init_(cdb_world_rng *r, uint64_t seed, uint64_t index, uint64_t stream) {
    r->s = cdb_world_mix_(seed ^ cdb_world_mix_(index * 0x9e3779b97f4a7c15ULL +
                                                cdb_world_mix_(stream + 0x632be59bd9b4e019ULL)));
}

uint64_t cdb_world_rng_next_(cdb_world_rng *r) {
    r->s += 0x9e3779b97f4a7c15ULL;
    return cdb_world_mix_(r->s);
}

float cdb_world_rng_unit_(cdb_world_rng *r) {
    return (float)(cdb_world_rng_next_(r) >> 40) * (1.0f / 16777216.0f);
}

int cdb_world_rng_below_(cdb_world_rng *r, int n) {
    return n <= 1 ? 0 : (int)(cdb_world_rng_next_(r) % (uint64_t)n);
}

#define RNG_STREAM_SCENE 1
#define RNG_STREAM_DESCRIBE 2
#define RNG_STREAM_QUERY 3

static int clamp_u8(int v) { return v < 0 ? 0 : v > 255 ? 255 : v; }

/* ---- scenes ----------------------------------------------------------------------- */

cdb_world_params cdb_world_params_default(void) {
    cdb_world_params p;
    memset(&p, 0, sizeof p);
    p.min_side = 96;
    p.max_side = 320;
    p.png_fraction = 0.4f;
    p.square_only = 0;
    p.min_objects = 1;
    p.max_objects = CDB_WORLD_MAX_OBJECTS;
    return p;
}

/* Object radius as a fraction of the layout square's side, per size. */
static const float k_size_frac[CDB_WORLD_N_SIZES] = {0.10f, 0.15f, 0.21f};
/* Cell centers along one axis of the layout square. */
static const float k_cell_center[3] = {0.22f, 0.50f, 0.78f};

/* An object color must stand out from the background: never white on white or
** black on black, and far enough (L1) from every background color it sits on. */
static int color_ok(const cdb_world_scene *s, int color) {
    const uint8_t *pc = cdb_world_palette_[color];
    int n_ref = s->background == CDB_WORLD_BG_GRADIENT ? 2 : 1;
    if (s->background == CDB_WORLD_BG_WHITE && color == CDB_WORLD_WHITE) return 0;
    if (s->background == CDB_WORLD_BG_BLACK && color == CDB_WORLD_BLACK) return 0;
    for (int k = 0; k < n_ref; k++) {
        int d = 0;
        for (int c = 0; c < 3; c++) d += abs((int)pc[c] - (int)s->bg_rgb[k][c]);
        if (d < 120) return 0;
    }
    return 1;
}

/* Fallback when random draws keep failing color_ok (rare gradients). */
static int most_distinct_color(const cdb_world_scene *s) {
    int best = CDB_WORLD_RED, best_d = -1;
    for (int color = 0; color < CDB_WORLD_N_COLORS; color++) {
        int dmin = 1 << 30;
        for (int k = 0; k < 2; k++) {
            int d = 0;
            for (int c = 0; c < 3; c++)
                d += abs((int)cdb_world_palette_[color][c] - (int)s->bg_rgb[k][c]);
            if (d < dmin) dmin = d;
        }
        if (dmin > best_d) {
            best_d = dmin;
            best = color;
        }
    }
    return best;
}

static void place_object(cdb_world_object *o, int w, int h, cdb_world_rng *r, int jitter) {
    float L = (float)(w < h ? w : h);
    float ox = 0.5f * ((float)w - L), oy = 0.5f * ((float)h - L);
    float rad = k_size_frac[o->size] * L;
    float fx = k_cell_center[o->pos % 3], fy = k_cell_center[o->pos / 3];
    if (jitter) {
        fx += (cdb_world_rng_unit_(r) - 0.5f) * 0.06f;
        fy += (cdb_world_rng_unit_(r) - 0.5f) * 0.06f;
    }
    float cx = fx * L, cy = fy * L;
    if (cx < rad + 1.0f) cx = rad + 1.0f;
    if (cx > L - rad - 1.0f) cx = L - rad - 1.0f;
    if (cy < rad + 1.0f) cy = rad + 1.0f;
    if (cy > L - rad - 1.0f) cy = L - rad - 1.0f;
    o->cx = ox + cx;
    o->cy = oy + cy;
    o->radius = rad;
}

/* The first earlier object that object k overlaps (2 px margin), or -1. */
static int overlaps(const cdb_world_scene *s, int k) {
    const cdb_world_object *a = &s->objects[k];
    for (int j = 0; j < k; j++) {
        const cdb_world_object *b = &s->objects[j];
        float dx = a->cx - b->cx, dy = a->cy - b->cy;
        if (sqrtf(dx * dx + dy * dy) < a->radius + b->radius + 2.0f) return j;
    }
    return -1;
}

cdb_status cdb_world_scene_make(uint64_t seed, int64_t index, const cdb_world_params *pp,
                                cdb_world_scene *out /* OUT */) {
    cdb_world_params p = pp ? *pp : cdb_world_params_default();
    cdb_world_rng r;
    if (!out) return cdb_seterr(CDB_INVALID, "world: out is NULL");
    if (p.min_side < 16 || p.max_side < p.min_side || p.max_side > 8192)
        return cdb_seterr(CDB_INVALID, "world: bad side range %d..%d", p.min_side, p.max_side);
    if (p.min_objects < 1 || p.max_objects > CDB_WORLD_MAX_OBJECTS || p.max_objects < p.min_objects)
        return cdb_seterr(CDB_INVALID, "world: bad object count range %d..%d", p.min_objects,
                          p.max_objects);
    if (index < 0) return cdb_seterr(CDB_INVALID, "world: negative index %lld", (long long)index);
    memset(out, 0, sizeof *out);
    cdb_world_rng_init_(&r, seed, (uint64_t)index, RNG_STREAM_SCENE);
    out->seed = seed;
    out->index = index;

    /* size and aspect ratio: long/short in {1, 5/4, 4/3, 3/2, 16/9}, either way */
    static const float k_aspect[] = {1.0f, 1.0f, 1.25f, 1.3333f, 1.5f, 1.7778f};
    int side = p.min_side + cdb_world_rng_below_(&r, p.max_side - p.min_side + 1);
    float aspect = k_aspect[cdb_world_rng_below_(&r, 6)]; /* drawn always: same stream */
    if (p.square_only) aspect = 1.0f;
    int lng = (int)lroundf((float)side * aspect);
    if (cdb_world_rng_below_(&r, 2)) {
        out->width = lng;
        out->height = side;
    } else {
        out->width = side;
        out->height = lng;
    }
    out->format = cdb_world_rng_unit_(&r) < p.png_fraction ? CDB_WORLD_PNG : CDB_WORLD_JPEG;
    out->jpeg_quality = 70 + cdb_world_rng_below_(&r, 26);

    /* background */
    out->background = cdb_world_rng_below_(&r, CDB_WORLD_N_BACKGROUNDS);
    out->noise_seed = cdb_world_rng_next_(&r);
    out->bg_dir = cdb_world_rng_unit_(&r) * 6.2831853f;
    switch (out->background) {
    case CDB_WORLD_BG_WHITE:
    case CDB_WORLD_BG_BLACK:
    case CDB_WORLD_BG_GRAY: {
        int base = out->background == CDB_WORLD_BG_WHITE   ? 240 + cdb_world_rng_below_(&r, 16)
                   : out->background == CDB_WORLD_BG_BLACK ? cdb_world_rng_below_(&r, 28)
                                                           : 105 + cdb_world_rng_below_(&r, 46);
        for (int c = 0; c < 3; c++)
            out->bg_rgb[0][c] = out->bg_rgb[1][c] =
                (uint8_t)clamp_u8(base + cdb_world_rng_below_(&r, 9) - 4);
        break;
    }
    case CDB_WORLD_BG_GRADIENT:
        for (int k = 0; k < 2; k++)
            for (int c = 0; c < 3; c++)
                out->bg_rgb[k][c] = (uint8_t)(30 + cdb_world_rng_below_(&r, 201));
        break;
    default: { /* noise around a tinted mid tone */
        int base = 80 + cdb_world_rng_below_(&r, 100);
        for (int c = 0; c < 3; c++)
            out->bg_rgb[0][c] = out->bg_rgb[1][c] =
                (uint8_t)clamp_u8(base + cdb_world_rng_below_(&r, 41) - 20);
        break;
    }
    }

    /* objects in distinct cells */
    int cells[CDB_WORLD_N_POSITIONS];
    for (int i = 0; i < CDB_WORLD_N_POSITIONS; i++) cells[i] = i;
    for (int i = CDB_WORLD_N_POSITIONS - 1; i > 0; i--) {
        int j = cdb_world_rng_below_(&r, i + 1), t = cells[i];
        cells[i] = cells[j];
        cells[j] = t;
    }
    out->n_objects = p.min_objects + cdb_world_rng_below_(&r, p.max_objects - p.min_objects + 1);
    for (int k = 0; k < out->n_objects; k++) {
        cdb_world_object *o = &out->objects[k];
        o->shape = cdb_world_rng_below_(&r, CDB_WORLD_N_SHAPES);
        for (int tries = 0; tries < 64; tries++) {
            o->color = cdb_world_rng_below_(&r, CDB_WORLD_N_COLORS);
            if (color_ok(out, o->color)) break;
        }
        if (!color_ok(out, o->color)) o->color = most_distinct_color(out);
        o->size = cdb_world_rng_below_(&r, CDB_WORLD_N_SIZES);
        o->pos = cells[k];
        place_object(o, out->width, out->height, &r, 1);
        /* shrink this object, then the ones it hits, until nothing overlaps (two
        ** small objects at their cell centers never do) */
        int j;
        while ((j = overlaps(out, k)) >= 0) {
            cdb_world_object *victim = o->size > CDB_WORLD_SMALL ? o : &out->objects[j];
            if (victim->size > CDB_WORLD_SMALL) victim->size--;
            place_object(o, out->width, out->height, &r, 0);
            if (victim != o) place_object(victim, out->width, out->height, &r, 0);
            if (o->size == CDB_WORLD_SMALL && out->objects[j].size == CDB_WORLD_SMALL &&
                overlaps(out, k) == j)
                break; /* cannot happen with the cell layout; never loop forever */
        }
        if (o->shape == CDB_WORLD_ARROW)
            o->angle = 1.5707963f * (float)cdb_world_rng_below_(&r, 4);
        if (o->shape != CDB_WORLD_CIRCLE && o->shape != CDB_WORLD_RING)
            o->angle += (cdb_world_rng_unit_(&r) - 0.5f) * 0.4f;
        for (int c = 0; c < 3; c++)
            o->rgb[c] =
                (uint8_t)clamp_u8((int)cdb_world_palette_[o->color][c] + cdb_world_rng_below_(&r, 17) - 8);
    }
    return CDB_OK;
}

/* ---- matching ----------------------------------------------------------------------- */

static int term_count(const cdb_world_scene *s, const cdb_world_term *t) {
    int n = 0;
    for (int k = 0; k < s->n_objects; k++) {
        const cdb_world_object *o = &s->objects[k];
        if (t->shape != CDB_WORLD_ANY && o->shape != t->shape) continue;
        if (t->color != CDB_WORLD_ANY && o->color != t->color) continue;
        if (t->size != CDB_WORLD_ANY && o->size != t->size) continue;
        if (t->pos != CDB_WORLD_ANY && o->pos != t->pos) continue;
        n++;
    }
    return n;
}

int cdb_world_scene_matches(const cdb_world_scene *s, const cdb_world_query *q) {
    if (!s || !q) return 0;
    if (q->background != CDB_WORLD_ANY && q->background != s->background) return 0;
    for (int i = 0; i < q->n_terms; i++) {
        int n = term_count(s, &q->terms[i]);
        if (q->terms[i].count >= 2 ? n != q->terms[i].count : n < 1) return 0;
    }
    return 1;
}

int cdb_world_scene_has(const cdb_world_scene *s, int shape, int color) {
    cdb_world_term t = {shape, color, CDB_WORLD_ANY, CDB_WORLD_ANY, 0};
    return s ? term_count(s, &t) >= 1 : 0;
}

/* ---- text ------------------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int overflow;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) CDB_PRINTF(2, 3);
static void sb_add(sbuf *b, const char *fmt, ...) {
    va_list ap;
    size_t room = b->cap > b->n ? b->cap - b->n : 0;
    va_start(ap, fmt);
    int k = vsnprintf(b->p ? b->p + b->n : NULL, room, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= room) {
        b->overflow = 1;
        if (b->p && b->cap) b->p[b->cap - 1] = '\0';
        b->n = b->cap;
        return;
    }
    b->n += (size_t)k;
}

static const char *const k_count_words[] = {"", "", "two", "three"};

static void term_text(sbuf *b, const cdb_world_term *t) {
    const char *first;
    int plural = t->count >= 2;
    if (t->size != CDB_WORLD_ANY) first = k_size_names[t->size];
    else if (t->color != CDB_WORLD_ANY) first = k_color_names[t->color];
    else if (t->shape != CDB_WORLD_ANY) first = k_shape_names[t->shape];
    else first = "object";
    if (plural) sb_add(b, "%s", t->count <= 3 ? k_count_words[t->count] : "many");
    else sb_add(b, "%s", strchr("aeiou", first[0]) ? "an" : "a");
    if (t->size != CDB_WORLD_ANY) sb_add(b, " %s", k_size_names[t->size]);
    if (t->color != CDB_WORLD_ANY) sb_add(b, " %s", k_color_names[t->color]);
    if (t->shape != CDB_WORLD_ANY)
        sb_add(b, " %s", plural ? k_shape_plurals[t->shape] : k_shape_names[t->shape]);
    else
        sb_add(b, " %s", plural ? "objects" : "object");
    if (t->pos != CDB_WORLD_ANY) sb_add(b, " %s", k_pos_phrases[t->pos]);
}

cdb_status cdb_world_query_text(const cdb_world_query *q, char *buf /* OUT */, size_t cap) {
    sbuf b = {buf, 0, cap, 0};
    if (!q || !buf || cap == 0) return cdb_seterr(CDB_INVALID, "world: query_text: NULL argument");
    if (q->n_terms < 0 || q->n_terms > CDB_WORLD_MAX_OBJECTS)
        return cdb_seterr(CDB_INVALID, "world: query has %d terms", q->n_terms);
    buf[0] = '\0';
    for (int i = 0; i < q->n_terms; i++) {
        const cdb_world_term *t = &q->terms[i];
        if ((t->shape != CDB_WORLD_ANY && (t->shape < 0 || t->shape >= CDB_WORLD_N_SHAPES)) ||
            (t->color != CDB_WORLD_ANY && (t->color < 0 || t->color >= CDB_WORLD_N_COLORS)) ||
            (t->size != CDB_WORLD_ANY && (t->size < 0 || t->size >= CDB_WORLD_N_SIZES)) ||
            (t->pos != CDB_WORLD_ANY && (t->pos < 0 || t->pos >= CDB_WORLD_N_POSITIONS)))
            return cdb_seterr(CDB_INVALID, "world: query term %d out of range", i);
        if (i > 0) sb_add(&b, "%s", i == q->n_terms - 1 ? " and " : ", ");
        term_text(&b, t);
    }
    if (q->background != CDB_WORLD_ANY) {
        if (q->background < 0 || q->background >= CDB_WORLD_N_BACKGROUNDS)
            return cdb_seterr(CDB_INVALID, "world: query background %d out of range", q->background);
        if (q->n_terms == 0) sb_add(&b, "a %s background", k_bg_names[q->background]);
        else sb_add(&b, " on a %s background", k_bg_names[q->background]);
    }
    if (b.overflow) return cdb_seterr(CDB_TOO_LARGE, "world: query text longer than %zu bytes", cap);
    return CDB_OK;
}

/* Groups the scene's objects by shape (and color when by_color), in first-seen
** order. Returns the number of groups; grp[k] is object k's group. */
static int group_objects(const cdb_world_scene *s, int by_color, int grp[CDB_WORLD_MAX_OBJECTS]) {
    int n = 0, lead[CDB_WORLD_MAX_OBJECTS];
    for (int k = 0; k < s->n_objects; k++) {
        int g = -1;
        for (int j = 0; j < n && g < 0; j++) {
            const cdb_world_object *a = &s->objects[lead[j]], *o = &s->objects[k];
            if (a->shape == o->shape && (!by_color || a->color == o->color)) g = j;
        }
        if (g < 0) {
            g = n;
            lead[n++] = k;
        }
        grp[k] = g;
    }
    return n;
}

/* One term per group: count when > 1, the common size / color when asked and shared,
** the position when asked and the group is a single object. */
static void grouped_query(const cdb_world_scene *s, int with_color, int with_size, int with_pos,
                          int with_bg, cdb_world_query *q) {
    int grp[CDB_WORLD_MAX_OBJECTS];
    memset(q, 0, sizeof *q);
    q->n_terms = group_objects(s, with_color, grp);
    for (int g = 0; g < q->n_terms; g++) {
        cdb_world_term *t = &q->terms[g];
        int n = 0, first = -1, same_size = 1;
        for (int k = 0; k < s->n_objects; k++) {
            if (grp[k] != g) continue;
            if (first < 0) first = k;
            else if (s->objects[k].size != s->objects[first].size) same_size = 0;
            n++;
        }
        const cdb_world_object *o = &s->objects[first];
        t->shape = o->shape;
        t->color = with_color ? o->color : CDB_WORLD_ANY;
        t->size = with_size && same_size ? o->size : CDB_WORLD_ANY;
        t->pos = with_pos && n == 1 ? o->pos : CDB_WORLD_ANY;
        t->count = n >= 2 ? n : 0;
    }
    q->background = with_bg ? s->background : CDB_WORLD_ANY;
}

cdb_status cdb_world_scene_query(const cdb_world_scene *s, cdb_world_query *out /* OUT */) {
    if (!s || !out) return cdb_seterr(CDB_INVALID, "world: scene_query: NULL argument");
    if (s->n_objects < 1 || s->n_objects > CDB_WORLD_MAX_OBJECTS)
        return cdb_seterr(CDB_INVALID, "world: scene has %d objects", s->n_objects);
    grouped_query(s, 1, 1, s->n_objects <= 2, 1, out);
    return CDB_OK;
}

cdb_status cdb_world_caption(const cdb_world_scene *s, char *buf /* OUT */, size_t cap) {
    cdb_world_query q;
    cdb_status rc = cdb_world_scene_query(s, &q);
    if (rc != CDB_OK) return rc;
    return cdb_world_query_text(&q, buf, cap);
}

cdb_status cdb_world_scene_describe(const cdb_world_scene *s, uint64_t variant,
                                    cdb_world_query *out /* OUT */) {
    cdb_world_rng r;
    if (!s || !out) return cdb_seterr(CDB_INVALID, "world: describe: NULL argument");
    if (s->n_objects < 1 || s->n_objects > CDB_WORLD_MAX_OBJECTS)
        return cdb_seterr(CDB_INVALID, "world: scene has %d objects", s->n_objects);
    cdb_world_rng_init_(&r, s->seed ^ cdb_world_mix_(variant + 1), (uint64_t)s->index,
                        RNG_STREAM_DESCRIBE);
    float u = cdb_world_rng_unit_(&r);
    if (u < 0.15f) return cdb_world_scene_query(s, out);
    if (u < 0.65f) { /* one object, some of its attributes */
        const cdb_world_object *o = &s->objects[cdb_world_rng_below_(&r, s->n_objects)];
        memset(out, 0, sizeof *out);
        out->n_terms = 1;
        cdb_world_term *t = &out->terms[0];
        t->shape = o->shape;
        t->color = cdb_world_rng_unit_(&r) < 0.75f ? o->color : CDB_WORLD_ANY;
        t->size = cdb_world_rng_unit_(&r) < 0.3f ? o->size : CDB_WORLD_ANY;
        t->pos = cdb_world_rng_unit_(&r) < 0.3f ? o->pos : CDB_WORLD_ANY;
        t->count = 0;
        int n = term_count(s, t);
        t->count = n >= 2 ? n : 0;
        out->background = cdb_world_rng_unit_(&r) < 0.25f ? s->background : CDB_WORLD_ANY;
        return CDB_OK;
    }
    /* every object, grouped, with attributes dropped scene-wide */
    int with_color = cdb_world_rng_unit_(&r) < 0.8f;
    int with_size = cdb_world_rng_unit_(&r) < 0.3f;
    int with_pos = cdb_world_rng_unit_(&r) < 0.3f;
    int with_bg = cdb_world_rng_unit_(&r) < 0.4f;
    grouped_query(s, with_color, with_size, with_pos, with_bg, out);
    return CDB_OK;
}

cdb_status cdb_world_query_make(uint64_t seed, int64_t index, int kind,
                                cdb_world_query *out /* OUT */) {
    cdb_world_rng r;
    if (!out || index < 0) return cdb_seterr(CDB_INVALID, "world: query_make: bad argument");
    memset(out, 0, sizeof *out);
    out->background = CDB_WORLD_ANY;
    out->n_terms = 1;
    cdb_world_term *t = &out->terms[0];
    t->shape = t->color = t->size = t->pos = CDB_WORLD_ANY;
    if (kind == CDB_WORLD_Q_SINGLE) {
        int n_all = CDB_WORLD_N_SHAPES * (1 + CDB_WORLD_N_COLORS);
        int i = (int)(index % n_all);
        if (i < CDB_WORLD_N_SHAPES) {
            t->shape = i;
        } else {
            i -= CDB_WORLD_N_SHAPES;
            t->color = i / CDB_WORLD_N_SHAPES;
            t->shape = i % CDB_WORLD_N_SHAPES;
        }
        return CDB_OK;
    }
    if (kind != CDB_WORLD_Q_COMPOSITIONAL)
        return cdb_seterr(CDB_INVALID, "world: unknown query kind %d", kind);
    cdb_world_rng_init_(&r, seed, (uint64_t)index, RNG_STREAM_QUERY);
    t->shape = cdb_world_rng_below_(&r, CDB_WORLD_N_SHAPES);
    t->color = cdb_world_rng_below_(&r, CDB_WORLD_N_COLORS);
    switch (cdb_world_rng_below_(&r, 6)) {
    case 0: /* a small blue triangle */
        t->size = cdb_world_rng_below_(&r, CDB_WORLD_N_SIZES);
        break;
    case 1: /* a blue triangle in the top left corner */
        t->pos = cdb_world_rng_below_(&r, CDB_WORLD_N_POSITIONS);
        break;
    case 2: /* a small blue triangle in the top left corner */
        t->size = cdb_world_rng_below_(&r, CDB_WORLD_N_SIZES);
        t->pos = cdb_world_rng_below_(&r, CDB_WORLD_N_POSITIONS);
        break;
    case 3: /* a blue triangle on a white background */
        out->background = cdb_world_rng_below_(&r, CDB_WORLD_N_BACKGROUNDS);
        break;
    case 4: /* two blue triangles */
        t->count = 2;
        break;
    default: { /* a blue triangle and a red star */
        cdb_world_term *u = &out->terms[1];
        out->n_terms = 2;
        *u = *t;
        do {
            u->shape = cdb_world_rng_below_(&r, CDB_WORLD_N_SHAPES);
            u->color = cdb_world_rng_below_(&r, CDB_WORLD_N_COLORS);
        } while (u->shape == t->shape && u->color == t->color);
        break;
    }
    }
    return CDB_OK;
}

/* ---- JSON ------------------------------------------------------------------------- */

static cdb_status sb_finish(sbuf *b, char **out) {
    if (b->overflow) {
        cdb_free(b->p);
        return cdb_seterr(CDB_ERROR, "world: JSON buffer overflow");
    }
    *out = b->p;
    return CDB_OK;
}

static void json_name_or_null(sbuf *b, const char *key, int v, const char *name) {
    if (v == CDB_WORLD_ANY) sb_add(b, "\"%s\":null", key);
    else sb_add(b, "\"%s\":\"%s\"", key, name);
}

cdb_status cdb_world_scene_json(const cdb_world_scene *s, char **out /* OUT */) {
    sbuf b = {NULL, 0, 2048, 0};
    if (!s || !out) return cdb_seterr(CDB_INVALID, "world: scene_json: NULL argument");
    if (!(b.p = cdb_malloc(b.cap))) return cdb_seterr(CDB_NOMEM, "world: scene_json");
    sb_add(&b, "{\"seed\":%llu,\"index\":%lld,\"width\":%d,\"height\":%d,\"format\":\"%s\",",
           (unsigned long long)s->seed, (long long)s->index, s->width, s->height,
           cdb_world_format_name(s->format));
    sb_add(&b, "\"background\":\"%s\",\"background_rgb\":[[%d,%d,%d],[%d,%d,%d]],\"objects\":[",
           cdb_world_bg_name(s->background), s->bg_rgb[0][0], s->bg_rgb[0][1], s->bg_rgb[0][2],
           s->bg_rgb[1][0], s->bg_rgb[1][1], s->bg_rgb[1][2]);
    for (int k = 0; k < s->n_objects; k++) {
        const cdb_world_object *o = &s->objects[k];
        sb_add(&b,
               "%s{\"shape\":\"%s\",\"color\":\"%s\",\"size\":\"%s\",\"position\":\"%s\","
               "\"x\":%.2f,\"y\":%.2f,\"radius\":%.2f,\"angle\":%.3f,\"rgb\":[%d,%d,%d]}",
               k ? "," : "", cdb_world_shape_name(o->shape), cdb_world_color_name(o->color),
               cdb_world_size_name(o->size), cdb_world_pos_name(o->pos), o->cx, o->cy, o->radius,
               o->angle, o->rgb[0], o->rgb[1], o->rgb[2]);
    }
    sb_add(&b, "]}");
    return sb_finish(&b, out);
}

cdb_status cdb_world_query_json(const cdb_world_query *q, char **out /* OUT */) {
    sbuf b = {NULL, 0, 1024, 0};
    if (!q || !out) return cdb_seterr(CDB_INVALID, "world: query_json: NULL argument");
    if (q->n_terms < 0 || q->n_terms > CDB_WORLD_MAX_OBJECTS)
        return cdb_seterr(CDB_INVALID, "world: query has %d terms", q->n_terms);
    if (!(b.p = cdb_malloc(b.cap))) return cdb_seterr(CDB_NOMEM, "world: query_json");
    sb_add(&b, "{\"terms\":[");
    for (int i = 0; i < q->n_terms; i++) {
        const cdb_world_term *t = &q->terms[i];
        sb_add(&b, "%s{", i ? "," : "");
        json_name_or_null(&b, "shape", t->shape, cdb_world_shape_name(t->shape));
        sb_add(&b, ",");
        json_name_or_null(&b, "color", t->color, cdb_world_color_name(t->color));
        sb_add(&b, ",");
        json_name_or_null(&b, "size", t->size, cdb_world_size_name(t->size));
        sb_add(&b, ",");
        json_name_or_null(&b, "position", t->pos, cdb_world_pos_name(t->pos));
        sb_add(&b, ",\"count\":%d}", t->count);
    }
    sb_add(&b, "],");
    json_name_or_null(&b, "background", q->background, cdb_world_bg_name(q->background));
    sb_add(&b, "}");
    return sb_finish(&b, out);
}
