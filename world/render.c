/*
** render.c: pixels for the shapes world, and whole libraries on disk.
**
** Backgrounds are plain, a linear two-color gradient, or value noise (a coarse
** lattice plus per-pixel grain), all pure functions of the scene record. Each
** shape is a signed distance function in the object's unit frame (radius 1,
** rotated by the object's angle); coverage is clamp(0.5 - distance_in_pixels), a
** one-pixel antialiased edge, composited over the background. Images are encoded
** with stb_image_write (JPEG at the scene's quality, or PNG). cdb_world_generate()
** renders scenes on n threads (disjoint index ranges) and writes the manifest in
** index order from the main thread.
*/
#include "world/world.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "world/world_int.h"


/* ---- signed distance functions (unit frame, negative inside) ---------------------- */

typedef struct vec2 {
    float x, y;
} vec2;

static float sd_box(vec2 p, float hx, float hy) {
    float dx = fabsf(p.x) - hx, dy = fabsf(p.y) - hy;
    float ox = dx > 0 ? dx : 0, oy = dy > 0 ? dy : 0;
    float in = dx > dy ? dx : dy;
    return sqrtf(ox * ox + oy * oy) + (in < 0 ? in : 0);
}

/* Exact distance to a simple polygon (Inigo Quilez's sdPolygon). */
static float sd_polygon(vec2 p, const vec2 *v, int n) {
    float d = (p.x - v[0].x) * (p.x - v[0].x) + (p.y - v[0].y) * (p.y - v[0].y);
    float s = 1.0f;
    for (int i = 0, j = n - 1; i < n; j = i, i++) {
        vec2 e = {v[j].x - v[i].x, v[j].y - v[i].y};
        vec2 w = {p.x - v[i].x, p.y - v[i].y};
        float t = (w.x * e.x + w.y * e.y) / (e.x * e.x + e.y * e.y);
        t = t < 0 ? 0 : t > 1 ? 1 : t;
        vec2 b = {w.x - e.x * t, w.y - e.y * t};
        float bb = b.x * b.x + b.y * b.y;
        if (bb < d) d = bb;
        int c1 = p.y >= v[i].y, c2 = p.y < v[j].y, c3 = e.x * w.y > e.y * w.x;
        if ((c1 && c2 && c3) || (!c1 && !c2 && !c3)) s = -s;
    }
    return s * sqrtf(d);
}

#define HEART_N 48
typedef struct shape_tables {
    vec2 triangle[3], star[10], arrow[7], heart[HEART_N];
} shape_tables;

static void shape_tables_init(shape_tables *t) {
    for (int i = 0; i < 3; i++) { /* apex up (y grows downward) */
        float a = -1.5707963f + (float)i * 2.0943951f;
        t->triangle[i] = (vec2){cosf(a), sinf(a) * 1.0f + 0.12f};
    }
    for (int i = 0; i < 10; i++) {
        float a = -1.5707963f + (float)i * 0.62831853f, r = (i & 1) ? 0.45f : 1.0f;
        t->star[i] = (vec2){r * cosf(a), r * sinf(a) + 0.05f};
    }
    static const vec2 arrow[7] = {{-0.95f, -0.22f}, {0.15f, -0.22f}, {0.15f, -0.62f}, {0.95f, 0.0f},
                                  {0.15f, 0.62f},   {0.15f, 0.22f},  {-0.95f, 0.22f}};
    memcpy(t->arrow, arrow, sizeof arrow);
    for (int i = 0; i < HEART_N; i++) { /* the classic parametric heart, point down */
        float a = 6.2831853f * (float)i / HEART_N, s = sinf(a);
        float x = 16.0f * s * s * s;
        float y = 13.0f * cosf(a) - 5.0f * cosf(2 * a) - 2.0f * cosf(3 * a) - cosf(4 * a);
        t->heart[HEART_N - 1 - i] = (vec2){x / 17.0f, -(y + 2.5f) / 17.0f};
    }
}

static float shape_sdf(const shape_tables *t, int shape, vec2 p) {
    switch (shape) {
    case CDB_WORLD_CIRCLE: return sqrtf(p.x * p.x + p.y * p.y) - 1.0f;
    case CDB_WORLD_SQUARE: return sd_box(p, 0.74f, 0.74f);
    case CDB_WORLD_TRIANGLE: return sd_polygon(p, t->triangle, 3);
    case CDB_WORLD_STAR: return sd_polygon(p, t->star, 10);
    case CDB_WORLD_RING: return fabsf(sqrtf(p.x * p.x + p.y * p.y) - 0.73f) - 0.27f;
    case CDB_WORLD_CROSS: {
        float a = sd_box(p, 0.95f, 0.3f), b = sd_box(p, 0.3f, 0.95f);
        return a < b ? a : b;
    }
    case CDB_WORLD_HEART: return sd_polygon(p, t->heart, HEART_N);
    default: return sd_polygon(p, t->arrow, 7);
    }
}

/* ---- backgrounds ------------------------------------------------------------------ */

static float hash_unit(uint64_t seed, int x, int y) {
    uint64_t h = cdb_world_mix_(seed ^ ((uint64_t)(uint32_t)x << 32 | (uint32_t)y));
    return (float)(h >> 40) * (1.0f / 16777216.0f);
}

static uint8_t to_u8(float v) {
    return (uint8_t)(v <= 0 ? 0 : v >= 255 ? 255 : (int)(v + 0.5f));
}

static void render_background(const cdb_world_scene *s, uint8_t *rgb) {
    int w = s->width, h = s->height;
    if (s->background == CDB_WORLD_BG_GRADIENT) {
        float dx = cosf(s->bg_dir), dy = sinf(s->bg_dir);
        float c0 = 0, c1 = 0; /* range of the projection over the four corners */
        float proj[4] = {0, dx * (float)w, dy * (float)h, dx * (float)w + dy * (float)h};
        c0 = c1 = proj[0];
        for (int i = 1; i < 4; i++) {
            if (proj[i] < c0) c0 = proj[i];
            if (proj[i] > c1) c1 = proj[i];
        }
        float inv = c1 > c0 ? 1.0f / (c1 - c0) : 0;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                float t = ((float)x * dx + (float)y * dy - c0) * inv;
                uint8_t *px = rgb + ((size_t)y * w + x) * 3;
                for (int c = 0; c < 3; c++)
                    px[c] = to_u8((float)s->bg_rgb[0][c] * (1 - t) + (float)s->bg_rgb[1][c] * t);
            }
    } else if (s->background == CDB_WORLD_BG_NOISE) {
        int cell = (w < h ? w : h) / 8;
        if (cell < 4) cell = 4;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int gx = x / cell, gy = y / cell;
                float fx = (float)(x % cell) / (float)cell, fy = (float)(y % cell) / (float)cell;
                fx = fx * fx * (3 - 2 * fx);
                fy = fy * fy * (3 - 2 * fy);
                float a = hash_unit(s->noise_seed, gx, gy), b = hash_unit(s->noise_seed, gx + 1, gy);
                float c = hash_unit(s->noise_seed, gx, gy + 1);
                float d = hash_unit(s->noise_seed, gx + 1, gy + 1);
                float coarse = (a * (1 - fx) + b * fx) * (1 - fy) + (c * (1 - fx) + d * fx) * fy;
                uint8_t *px = rgb + ((size_t)y * w + x) * 3;
                for (int ch = 0; ch < 3; ch++) {
                    float grain = hash_unit(s->noise_seed + 1 + (uint64_t)ch, x, y);
                    px[ch] = to_u8((float)s->bg_rgb[0][ch] + (coarse - 0.5f) * 90.0f +
                                   (grain - 0.5f) * 60.0f);
                }
            }
    } else {
        for (size_t i = 0; i < (size_t)w * h; i++) memcpy(rgb + i * 3, s->bg_rgb[0], 3);
    }
}

cdb_status cdb_world_render(const cdb_world_scene *s, uint8_t *rgb /* OUT */) {
    shape_tables tab;
    if (!s || !rgb) return cdb_seterr(CDB_INVALID, "world: render: NULL argument");
    if (s->width < 1 || s->height < 1 || s->n_objects < 0 || s->n_objects > CDB_WORLD_MAX_OBJECTS)
        return cdb_seterr(CDB_INVALID, "world: render: bad scene %dx%d, %d objects", s->width,
                          s->height, s->n_objects);
    shape_tables_init(&tab);
    render_background(s, rgb);
    for (int k = 0; k < s->n_objects; k++) {
        const cdb_world_object *o = &s->objects[k];
        float r = o->radius, ca = cosf(-o->angle), sa = sinf(-o->angle);
        int x0 = (int)floorf(o->cx - r * 1.1f - 2), x1 = (int)ceilf(o->cx + r * 1.1f + 2);
        int y0 = (int)floorf(o->cy - r * 1.1f - 2), y1 = (int)ceilf(o->cy + r * 1.1f + 2);
        if (x0 < 0) x0 = 0;
        if (y0 < 0) y0 = 0;
        if (x1 > s->width) x1 = s->width;
        if (y1 > s->height) y1 = s->height;
        if (o->shape < 0 || o->shape >= CDB_WORLD_N_SHAPES || r <= 0)
            return cdb_seterr(CDB_INVALID, "world: render: bad object %d", k);
        for (int y = y0; y < y1; y++)
            for (int x = x0; x < x1; x++) {
                float dx = ((float)x + 0.5f - o->cx) / r, dy = ((float)y + 0.5f - o->cy) / r;
                vec2 p = {dx * ca - dy * sa, dx * sa + dy * ca};
                float cov = 0.5f - shape_sdf(&tab, o->shape, p) * r;
                if (cov <= 0) continue;
                if (cov > 1) cov = 1;
                uint8_t *px = rgb + ((size_t)y * s->width + x) * 3;
                for (int c = 0; c < 3; c++)
                    px[c] = to_u8((float)px[c] * (1 - cov) + (float)o->rgb[c] * cov);
            }
    }
    return CDB_OK;
}

cdb_status cdb_world_write_image(const cdb_world_scene *s, const char *path) {
    cdb_status rc = CDB_OK;
    uint8_t *rgb = NULL;
    int ok;
    if (!s || !path) return cdb_seterr(CDB_INVALID, "world: write_image: NULL argument");
    if (!(rgb = cdb_malloc((size_t)s->width * s->height * 3)))
        return cdb_seterr(CDB_NOMEM, "world: %dx%d image", s->width, s->height);
    if ((rc = cdb_world_render(s, rgb)) != CDB_OK) goto cleanup;
    if (s->format == CDB_WORLD_PNG)
        ok = cdb_world_write_png_(path, s->width, s->height, rgb);
    else
        ok = cdb_world_write_jpg_(path, s->width, s->height, rgb, s->jpeg_quality);
    if (!ok) rc = cdb_seterr(CDB_IO, "world: cannot write %s: %s", path, strerror(errno));
cleanup:
    cdb_free(rgb);
    return rc;
}

/* ---- libraries -------------------------------------------------------------------- */

cdb_world_library_params cdb_world_library_params_default(void) {
    cdb_world_library_params p;
    memset(&p, 0, sizeof p);
    p.scene = cdb_world_params_default();
    p.n_variants = 0;
    p.n_threads = 0;
    return p;
}

static void image_name(const cdb_world_scene *s, char *buf, size_t cap) {
    snprintf(buf, cap, "img_%07lld.%s", (long long)s->index,
             s->format == CDB_WORLD_PNG ? "png" : "jpg");
}

typedef struct gen_job {
    const char *dir;
    uint64_t seed;
    int64_t first, n;
    const cdb_world_params *params;
    cdb_status rc;
    char err[512];
} gen_job;

static void *gen_worker(void *arg) {
    gen_job *j = arg;
    char name[64], path[4096];
    for (int64_t i = j->first; i < j->first + j->n; i++) {
        cdb_world_scene s;
        cdb_status rc = cdb_world_scene_make(j->seed, i, j->params, &s);
        if (rc == CDB_OK) {
            image_name(&s, name, sizeof name);
            snprintf(path, sizeof path, "%s/%s", j->dir, name);
            rc = cdb_world_write_image(&s, path);
        }
        if (rc != CDB_OK) { /* the message is thread-local: carry it to the caller */
            j->rc = rc;
            snprintf(j->err, sizeof j->err, "%s", cdb_errmsg());
            break;
        }
    }
    return NULL;
}

static cdb_status write_manifest(const char *dir, uint64_t seed, int64_t first, int64_t n,
                                 const cdb_world_library_params *p) {
    cdb_status rc = CDB_OK;
    char path[4096], tmp[4200], name[64], text[1024];
    char *json = NULL;
    FILE *f = NULL;
    snprintf(path, sizeof path, "%s/manifest.jsonl", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "wb"))) return cdb_seterr(CDB_IO, "world: open %s: %s", tmp, strerror(errno));
    for (int64_t i = first; i < first + n; i++) {
        cdb_world_scene s;
        if ((rc = cdb_world_scene_make(seed, i, &p->scene, &s)) != CDB_OK) goto cleanup;
        if ((rc = cdb_world_caption(&s, text, sizeof text)) != CDB_OK) goto cleanup;
        if ((rc = cdb_world_scene_json(&s, &json)) != CDB_OK) goto cleanup;
        image_name(&s, name, sizeof name);
        fprintf(f, "{\"path\":\"%s\",\"index\":%lld,\"caption\":\"%s\",\"scene\":%s", name,
                (long long)i, text, json);
        cdb_free(json);
        json = NULL;
        if (p->n_variants > 0) {
            fputs(",\"variants\":[", f);
            for (int v = 0; v < p->n_variants; v++) {
                cdb_world_query q;
                if ((rc = cdb_world_scene_describe(&s, (uint64_t)v, &q)) != CDB_OK) goto cleanup;
                if ((rc = cdb_world_query_text(&q, text, sizeof text)) != CDB_OK) goto cleanup;
                if ((rc = cdb_world_query_json(&q, &json)) != CDB_OK) goto cleanup;
                fprintf(f, "%s{\"text\":\"%s\",\"query\":%s}", v ? "," : "", text, json);
                cdb_free(json);
                json = NULL;
            }
            fputs("]", f);
        }
        fputs("}\n", f);
    }
    if (fflush(f) != 0 || ferror(f)) rc = cdb_seterr(CDB_IO, "world: write %s: %s", tmp, strerror(errno));
cleanup:
    cdb_free(json);
    if (fclose(f) != 0 && rc == CDB_OK) rc = cdb_seterr(CDB_IO, "world: close %s: %s", tmp, strerror(errno));
    if (rc == CDB_OK && rename(tmp, path) != 0)
        rc = cdb_seterr(CDB_IO, "world: rename %s: %s", tmp, strerror(errno));
    if (rc != CDB_OK) remove(tmp);
    return rc;
}

cdb_status cdb_world_generate(const char *dir, uint64_t seed, int64_t first, int64_t n,
                              const cdb_world_library_params *pp) {
    cdb_world_library_params p = pp ? *pp : cdb_world_library_params_default();
    cdb_status rc = CDB_OK;
    gen_job *jobs = NULL;
    pthread_t *tids = NULL;
    int n_threads, n_started = 0;
    if (!dir || !*dir || first < 0 || n < 0)
        return cdb_seterr(CDB_INVALID, "world: generate: bad arguments");
    if (strlen(dir) > 3000) return cdb_seterr(CDB_INVALID, "world: generate: path too long");
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return cdb_seterr(CDB_IO, "world: mkdir %s: %s", dir, strerror(errno));
    n_threads = p.n_threads > 0 ? p.n_threads : cdb_default_threads();
    if (n_threads > 64) n_threads = 64;
    if (n < n_threads * 4) n_threads = 1;
    jobs = cdb_calloc((size_t)n_threads, sizeof *jobs);
    tids = cdb_calloc((size_t)n_threads, sizeof *tids);
    if (!jobs || !tids) {
        rc = cdb_seterr(CDB_NOMEM, "world: generate");
        goto cleanup;
    }
    for (int t = 0; t < n_threads; t++) {
        int64_t a = first + n * t / n_threads, b = first + n * (t + 1) / n_threads;
        jobs[t] = (gen_job){dir, seed, a, b - a, &p.scene, CDB_OK, ""};
    }
    if (n_threads == 1) {
        gen_worker(&jobs[0]);
    } else {
        for (; n_started < n_threads; n_started++)
            if (pthread_create(&tids[n_started], NULL, gen_worker, &jobs[n_started]) != 0) break;
        if (n_started < n_threads) /* run what could not start here */
            for (int t = n_started; t < n_threads; t++) gen_worker(&jobs[t]);
        for (int t = 0; t < n_started; t++) pthread_join(tids[t], NULL);
    }
    for (int t = 0; t < n_threads; t++)
        if (jobs[t].rc != CDB_OK) {
            rc = cdb_seterr(jobs[t].rc, "%s", jobs[t].err);
            goto cleanup;
        }
    rc = write_manifest(dir, seed, first, n, &p);
cleanup:
    cdb_free(jobs);
    cdb_free(tids);
    return rc;
}
