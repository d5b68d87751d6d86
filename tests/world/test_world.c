/*
** test_world.c: the generated shapes world (world/world.h): determinism, scene
** invariants (layout inside the crop square, no overlaps, readable colors), the
** truth of every caption and training variant, query text and matching semantics
** on hand-built scenes, pixels (shape areas and holes measured on rendered
** images), the PNG/JPEG files decoded back with stb_image, and whole libraries with
** their manifest.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdb_test.h"
#include "core/core.h"
#include "world/world.h"

#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif
#include "stb_image.h"
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

static cdb_world_term term(int shape, int color, int size, int pos, int count) {
    cdb_world_term t = {shape, color, size, pos, count};
    return t;
}

static cdb_world_query query1(cdb_world_term t, int bg) {
    cdb_world_query q;
    memset(&q, 0, sizeof q);
    q.n_terms = 1;
    q.terms[0] = t;
    q.background = bg;
    return q;
}

/* A hand-built scene: w x h, plain background, objects given by the caller. */
static cdb_world_scene plain_scene(int w, int h, int bg, uint8_t bg_level) {
    cdb_world_scene s;
    memset(&s, 0, sizeof s);
    s.width = w;
    s.height = h;
    s.format = CDB_WORLD_PNG;
    s.jpeg_quality = 90;
    s.background = bg;
    memset(s.bg_rgb, bg_level, sizeof s.bg_rgb);
    return s;
}

static void add_object(cdb_world_scene *s, int shape, int color, int size, int pos, float cx,
                       float cy, float r, const uint8_t rgb[3]) {
    cdb_world_object *o = &s->objects[s->n_objects++];
    memset(o, 0, sizeof *o);
    o->shape = shape;
    o->color = color;
    o->size = size;
    o->pos = pos;
    o->cx = cx;
    o->cy = cy;
    o->radius = r;
    memcpy(o->rgb, rgb, 3);
}

static const uint8_t RED[3] = {220, 30, 35}, BLUE[3] = {35, 85, 225};

CDB_TEST(world_deterministic) {
    cdb_world_scene a, b, c;
    for (int i = 0; i < 200; i++) {
        CHECK_OK(cdb_world_scene_make(42, i, NULL, &a));
        CHECK_OK(cdb_world_scene_make(42, i, NULL, &b));
        CHECK(memcmp(&a, &b, sizeof a) == 0);
    }
    /* other seeds / indices give other scenes */
    int same = 0;
    for (int i = 0; i < 200; i++) {
        CHECK_OK(cdb_world_scene_make(42, i, NULL, &a));
        CHECK_OK(cdb_world_scene_make(43, i, NULL, &b));
        CHECK_OK(cdb_world_scene_make(42, i + 1, NULL, &c));
        same += a.width == b.width && a.objects[0].shape == b.objects[0].shape &&
                a.objects[0].color == b.objects[0].color;
        same += a.width == c.width && a.objects[0].shape == c.objects[0].shape &&
                a.objects[0].color == c.objects[0].color;
    }
    CHECK_MSG(same < 20, "%d of 400 scene pairs look alike", same);
    /* pixels too */
    CHECK_OK(cdb_world_scene_make(5, 3, NULL, &a));
    size_t n = (size_t)a.width * a.height * 3;
    uint8_t *p = malloc(n), *q = malloc(n);
    CHECK(p && q);
    CHECK_OK(cdb_world_render(&a, p));
    CHECK_OK(cdb_world_render(&a, q));
    CHECK(memcmp(p, q, n) == 0);
    free(p);
    free(q);
}

CDB_TEST(world_scene_invariants) {
    int n_shape[CDB_WORLD_N_SHAPES] = {0}, n_color[CDB_WORLD_N_COLORS] = {0};
    int n_bg[CDB_WORLD_N_BACKGROUNDS] = {0}, n_count[4] = {0}, n_fmt[2] = {0};
    int n_land = 0, n_port = 0, n_square = 0, n_obj = 0;
    const int N = 5000;
    for (int i = 0; i < N; i++) {
        cdb_world_scene s;
        CHECK_OK(cdb_world_scene_make(7, i, NULL, &s));
        CHECK(s.n_objects >= 1 && s.n_objects <= 3);
        int shortside = s.width < s.height ? s.width : s.height;
        CHECK(shortside >= 96 && shortside <= 320);
        n_land += s.width > s.height;
        n_port += s.width < s.height;
        n_square += s.width == s.height;
        n_fmt[s.format]++;
        n_bg[s.background]++;
        n_count[s.n_objects]++;
        float L = (float)shortside, ox = 0.5f * ((float)s.width - L), oy = 0.5f * ((float)s.height - L);
        for (int k = 0; k < s.n_objects; k++) {
            const cdb_world_object *o = &s.objects[k];
            n_obj++;
            n_shape[o->shape]++;
            n_color[o->color]++;
            /* inside the centered square that CLIP's center crop keeps */
            CHECK_MSG(o->cx - o->radius >= ox && o->cx + o->radius <= ox + L &&
                          o->cy - o->radius >= oy && o->cy + o->radius <= oy + L,
                      "scene %d object %d outside the crop square", i, k);
            /* in its named cell (thirds of the square) */
            int col = (int)((o->cx - ox) / L * 3), row = (int)((o->cy - oy) / L * 3);
            CHECK_MSG(row * 3 + col == o->pos, "scene %d object %d: cell %d, named %s", i, k,
                      row * 3 + col, cdb_world_pos_name(o->pos));
            CHECK(!(s.background == CDB_WORLD_BG_WHITE && o->color == CDB_WORLD_WHITE));
            CHECK(!(s.background == CDB_WORLD_BG_BLACK && o->color == CDB_WORLD_BLACK));
            for (int j = 0; j < k; j++) {
                const cdb_world_object *b = &s.objects[j];
                float d = hypotf(o->cx - b->cx, o->cy - b->cy);
                CHECK_MSG(d >= o->radius + b->radius, "scene %d: objects %d and %d overlap", i, j, k);
                CHECK(o->pos != b->pos);
            }
        }
    }
    for (int v = 0; v < CDB_WORLD_N_SHAPES; v++)
        CHECK_MSG(abs(n_shape[v] - n_obj / CDB_WORLD_N_SHAPES) < n_obj / 40, "shape %s: %d of %d",
                  cdb_world_shape_name(v), n_shape[v], n_obj);
    for (int v = 0; v < CDB_WORLD_N_COLORS; v++)
        CHECK_MSG(n_color[v] > n_obj / 20, "color %s: %d of %d", cdb_world_color_name(v), n_color[v], n_obj);
    for (int v = 0; v < CDB_WORLD_N_BACKGROUNDS; v++) CHECK(n_bg[v] > N / 8);
    for (int v = 1; v <= 3; v++) CHECK(n_count[v] > N / 5);
    CHECK(n_fmt[CDB_WORLD_PNG] > N / 4 && n_fmt[CDB_WORLD_JPEG] > N / 4);
    CHECK(n_land > N / 5 && n_port > N / 5 && n_square > N / 10);
}

CDB_TEST(world_captions_are_true) {
    char text[1024];
    int n_variant_texts = 0, n_partial = 0;
    for (int i = 0; i < 3000; i++) {
        cdb_world_scene s;
        cdb_world_query q;
        CHECK_OK(cdb_world_scene_make(11, i, NULL, &s));
        CHECK_OK(cdb_world_scene_query(&s, &q));
        CHECK_MSG(cdb_world_scene_matches(&s, &q), "scene %d: full caption false", i);
        CHECK_OK(cdb_world_caption(&s, text, sizeof text));
        CHECK(strlen(text) > 8);
        CHECK(strstr(text, " background") != NULL);
        for (int v = 0; v < 10; v++) {
            CHECK_OK(cdb_world_scene_describe(&s, (uint64_t)v, &q));
            CHECK_MSG(cdb_world_scene_matches(&s, &q), "scene %d variant %d false", i, v);
            CHECK_OK(cdb_world_query_text(&q, text, sizeof text));
            n_variant_texts++;
            n_partial += q.n_terms < s.n_objects || q.background == CDB_WORLD_ANY;
        }
    }
    CHECK(n_partial > n_variant_texts / 2); /* variants really are partial descriptions */
}

CDB_TEST(world_caption_text) {
    char t[256];
    cdb_world_scene s = plain_scene(200, 200, CDB_WORLD_BG_WHITE, 250);
    add_object(&s, CDB_WORLD_CIRCLE, CDB_WORLD_RED, CDB_WORLD_LARGE, CDB_WORLD_CENTER, 100, 100, 40, RED);
    CHECK_OK(cdb_world_caption(&s, t, sizeof t));
    CHECK_EQ_STR(t, "a large red circle in the center on a white background");

    cdb_world_scene s2 = plain_scene(300, 200, CDB_WORLD_BG_GRADIENT, 128);
    add_object(&s2, CDB_WORLD_SQUARE, CDB_WORLD_BLUE, CDB_WORLD_SMALL, CDB_WORLD_TOP_LEFT, 90, 45, 15, BLUE);
    add_object(&s2, CDB_WORLD_STAR, CDB_WORLD_RED, CDB_WORLD_MEDIUM, CDB_WORLD_CENTER, 150, 100, 25, RED);
    add_object(&s2, CDB_WORLD_SQUARE, CDB_WORLD_BLUE, CDB_WORLD_SMALL, CDB_WORLD_BOTTOM, 150, 160, 15, BLUE);
    CHECK_OK(cdb_world_caption(&s2, t, sizeof t));
    CHECK_EQ_STR(t, "two small blue squares and a medium red star on a gradient background");

    cdb_world_query q = query1(term(CDB_WORLD_ARROW, CDB_WORLD_ORANGE, CDB_WORLD_ANY,
                                    CDB_WORLD_TOP_LEFT, 0), CDB_WORLD_ANY);
    CHECK_OK(cdb_world_query_text(&q, t, sizeof t));
    CHECK_EQ_STR(t, "an orange arrow in the top left corner");
    q = query1(term(CDB_WORLD_STAR, CDB_WORLD_ANY, CDB_WORLD_ANY, CDB_WORLD_ANY, 0), CDB_WORLD_ANY);
    CHECK_OK(cdb_world_query_text(&q, t, sizeof t));
    CHECK_EQ_STR(t, "a star");
    q = query1(term(CDB_WORLD_CROSS, CDB_WORLD_ANY, CDB_WORLD_ANY, CDB_WORLD_ANY, 3), CDB_WORLD_BG_NOISE);
    CHECK_OK(cdb_world_query_text(&q, t, sizeof t));
    CHECK_EQ_STR(t, "three crosses on a noisy background");
    q.n_terms = 3;
    q.background = CDB_WORLD_ANY;
    q.terms[0] = term(CDB_WORLD_HEART, CDB_WORLD_PINK, CDB_WORLD_ANY, CDB_WORLD_ANY, 0);
    q.terms[1] = term(CDB_WORLD_RING, CDB_WORLD_ANY, CDB_WORLD_SMALL, CDB_WORLD_ANY, 0);
    q.terms[2] = term(CDB_WORLD_TRIANGLE, CDB_WORLD_ANY, CDB_WORLD_ANY, CDB_WORLD_RIGHT, 0);
    CHECK_OK(cdb_world_query_text(&q, t, sizeof t));
    CHECK_EQ_STR(t, "a pink heart, a small ring and a triangle on the right");
    /* errors */
    CHECK_RC(cdb_world_query_text(&q, t, 10), CDB_TOO_LARGE);
    q.terms[0].shape = 99;
    CHECK_RC(cdb_world_query_text(&q, t, sizeof t), CDB_INVALID);
    CHECK_EQ_INT(cdb_world_shape_from_name("crosses"), CDB_WORLD_CROSS);
    CHECK_EQ_INT(cdb_world_color_from_name("purple"), CDB_WORLD_PURPLE);
    CHECK_EQ_INT(cdb_world_color_from_name("teal"), -1);
}

CDB_TEST(world_matching) {
    cdb_world_scene s = plain_scene(300, 300, CDB_WORLD_BG_WHITE, 250);
    add_object(&s, CDB_WORLD_SQUARE, CDB_WORLD_BLUE, CDB_WORLD_SMALL, CDB_WORLD_TOP_LEFT, 66, 66, 30, BLUE);
    add_object(&s, CDB_WORLD_SQUARE, CDB_WORLD_BLUE, CDB_WORLD_LARGE, CDB_WORLD_BOTTOM_RIGHT, 234, 234, 60, BLUE);
    add_object(&s, CDB_WORLD_STAR, CDB_WORLD_RED, CDB_WORLD_MEDIUM, CDB_WORLD_TOP_RIGHT, 234, 66, 45, RED);
    const int A = CDB_WORLD_ANY;
    cdb_world_query q;
    q = query1(term(CDB_WORLD_SQUARE, CDB_WORLD_BLUE, A, A, 2), A);
    CHECK(cdb_world_scene_matches(&s, &q)); /* two blue squares */
    q = query1(term(CDB_WORLD_SQUARE, CDB_WORLD_BLUE, A, A, 3), A);
    CHECK(!cdb_world_scene_matches(&s, &q)); /* not three */
    q = query1(term(CDB_WORLD_SQUARE, CDB_WORLD_BLUE, A, A, 0), A);
    CHECK(cdb_world_scene_matches(&s, &q)); /* "a blue square": at least one */
    q = query1(term(CDB_WORLD_SQUARE, A, CDB_WORLD_SMALL, CDB_WORLD_TOP_LEFT, 0), A);
    CHECK(cdb_world_scene_matches(&s, &q));
    q = query1(term(CDB_WORLD_SQUARE, A, CDB_WORLD_SMALL, CDB_WORLD_BOTTOM_RIGHT, 0), A);
    CHECK(!cdb_world_scene_matches(&s, &q)); /* attributes bind to one object */
    q = query1(term(CDB_WORLD_STAR, CDB_WORLD_BLUE, A, A, 0), A);
    CHECK(!cdb_world_scene_matches(&s, &q)); /* a blue star: colors bind too */
    q = query1(term(CDB_WORLD_STAR, A, A, A, 0), CDB_WORLD_BG_BLACK);
    CHECK(!cdb_world_scene_matches(&s, &q));
    q = query1(term(CDB_WORLD_STAR, A, A, A, 0), CDB_WORLD_BG_WHITE);
    CHECK(cdb_world_scene_matches(&s, &q));
    q.n_terms = 2;
    q.terms[1] = term(CDB_WORLD_CIRCLE, A, A, A, 0);
    CHECK(!cdb_world_scene_matches(&s, &q)); /* every term must hold */
    q.terms[1] = term(CDB_WORLD_SQUARE, A, CDB_WORLD_LARGE, A, 0);
    CHECK(cdb_world_scene_matches(&s, &q));
    CHECK(cdb_world_scene_has(&s, CDB_WORLD_STAR, CDB_WORLD_RED));
    CHECK(!cdb_world_scene_has(&s, CDB_WORLD_STAR, CDB_WORLD_GREEN));
    CHECK(cdb_world_scene_has(&s, A, CDB_WORLD_BLUE));
    CHECK(!cdb_world_scene_has(&s, CDB_WORLD_HEART, A));
}

/* Fraction of pixels within the object's box that differ from the background. */
static double shape_area(int shape, float angle, int *center_is_fg) {
    cdb_world_scene s = plain_scene(200, 200, CDB_WORLD_BG_WHITE, 255);
    add_object(&s, shape, CDB_WORLD_RED, CDB_WORLD_LARGE, CDB_WORLD_CENTER, 100, 100, 60, RED);
    s.objects[0].angle = angle;
    uint8_t *rgb = malloc(200 * 200 * 3);
    if (!rgb || cdb_world_render(&s, rgb) != CDB_OK) {
        free(rgb);
        return -1;
    }
    double cov = 0;
    for (int i = 0; i < 200 * 200; i++) cov += (255.0 - rgb[i * 3 + 1]) / (255.0 - RED[1]);
    *center_is_fg = rgb[(100 * 200 + 100) * 3 + 1] < 128;
    free(rgb);
    return cov / (60.0 * 60.0); /* area in units of r^2 */
}

CDB_TEST(world_render_shapes) {
    int center;
    /* circle: area pi r^2 */
    CHECK_NEAR(shape_area(CDB_WORLD_CIRCLE, 0, &center), M_PI, 0.03);
    CHECK(center);
    /* ring: outer 1.0, inner 0.46: pi (1 - 0.46^2); the center is background */
    CHECK_NEAR(shape_area(CDB_WORLD_RING, 0, &center), M_PI * (1 - 0.46 * 0.46), 0.04);
    CHECK(!center);
    /* square of half-side 0.74: 4 * 0.74^2 */
    CHECK_NEAR(shape_area(CDB_WORLD_SQUARE, 0, &center), 4 * 0.74 * 0.74, 0.03);
    /* rotation keeps the area */
    CHECK_NEAR(shape_area(CDB_WORLD_SQUARE, 0.3f, &center), 4 * 0.74 * 0.74, 0.03);
    /* cross: two 1.9 x 0.6 bars minus the shared 0.6 x 0.6 */
    CHECK_NEAR(shape_area(CDB_WORLD_CROSS, 0, &center), 2 * 1.9 * 0.6 - 0.36, 0.03);
    /* equilateral triangle inscribed in the unit circle: 3 sqrt(3) / 4 */
    CHECK_NEAR(shape_area(CDB_WORLD_TRIANGLE, 0, &center), 3 * sqrt(3) / 4, 0.03);
    /* the rest: clearly different areas, all filled at the center */
    double star = shape_area(CDB_WORLD_STAR, 0, &center);
    CHECK(center);
    double heart = shape_area(CDB_WORLD_HEART, 0, &center);
    CHECK(center);
    double arrow = shape_area(CDB_WORLD_ARROW, 0, &center);
    CHECK(center);
    /* 5-point star, radii 1 and 0.45: 10 triangles of 0.5 * 0.45 * sin(36 deg) */
    CHECK_NEAR(star, 10 * 0.5 * 0.45 * sin(M_PI / 5), 0.03);
    /* arrow polygon: shaft 1.1 x 0.44 + head 0.8 * 1.24 / 2 */
    CHECK_NEAR(arrow, 1.1 * 0.44 + 0.5 * 0.8 * 1.24, 0.03);
    CHECK(heart > 1.2 && heart < 2.6);
}

CDB_TEST(world_backgrounds) {
    cdb_world_scene s;
    int seen[CDB_WORLD_N_BACKGROUNDS] = {0};
    for (int i = 0; i < 400; i++) {
        CHECK_OK(cdb_world_scene_make(3, i, NULL, &s));
        if (seen[s.background]) continue;
        seen[s.background] = 1;
        s.n_objects = 0;
        uint8_t *rgb = malloc((size_t)s.width * s.height * 3);
        CHECK(rgb);
        CHECK_OK(cdb_world_render(&s, rgb));
        double mean = 0, var = 0;
        size_t n = (size_t)s.width * s.height;
        for (size_t k = 0; k < n; k++) mean += rgb[k * 3];
        mean /= (double)n;
        for (size_t k = 0; k < n; k++) var += (rgb[k * 3] - mean) * (rgb[k * 3] - mean);
        var /= (double)n;
        free(rgb);
        switch (s.background) {
        case CDB_WORLD_BG_WHITE: CHECK(mean > 230 && var < 1); break;
        case CDB_WORLD_BG_BLACK: CHECK(mean < 35 && var < 1); break;
        case CDB_WORLD_BG_GRAY: CHECK(mean > 95 && mean < 160 && var < 1); break;
        case CDB_WORLD_BG_GRADIENT: CHECK(var > 4 || s.bg_rgb[0][0] == s.bg_rgb[1][0]); break;
        default: CHECK_MSG(var > 100, "noise variance %.1f", var); break;
        }
    }
    for (int b = 0; b < CDB_WORLD_N_BACKGROUNDS; b++) CHECK(seen[b]);
}

static char g_tmp[256];

static const char *tmpdir(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/cdb_test_world_XXXXXX");
    return mkdtemp(g_tmp);
}

static void rm_rf(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "    (could not remove %s)\n", dir);
}

CDB_TEST(world_files_decode) {
    const char *dir = tmpdir();
    char path[512];
    CHECK(dir);
    int done[2] = {0, 0};
    for (int i = 0; i < 100 && !(done[0] && done[1]); i++) {
        cdb_world_scene s;
        CHECK_OK(cdb_world_scene_make(9, i, NULL, &s));
        /* pixel noise is what JPEG loses most; compare on smooth backgrounds */
        if (done[s.format] || s.background == CDB_WORLD_BG_NOISE) continue;
        done[s.format] = 1;
        snprintf(path, sizeof path, "%s/x.%s", dir, s.format == CDB_WORLD_PNG ? "png" : "jpg");
        CHECK_OK(cdb_world_write_image(&s, path));
        int w, h, c;
        uint8_t *dec = stbi_load(path, &w, &h, &c, 3);
        CHECK_MSG(dec, "stb_image cannot decode %s", path);
        CHECK_EQ_INT(w, s.width);
        CHECK_EQ_INT(h, s.height);
        uint8_t *ref = malloc((size_t)w * h * 3);
        CHECK(ref);
        CHECK_OK(cdb_world_render(&s, ref));
        double mad = 0;
        for (size_t k = 0; k < (size_t)w * h * 3; k++) mad += abs((int)dec[k] - (int)ref[k]);
        mad /= (double)w * h * 3;
        if (s.format == CDB_WORLD_PNG) CHECK_MSG(mad == 0, "PNG differs: %.3f", mad);
        else CHECK_MSG(mad < 8, "JPEG mean abs diff %.2f", mad);
        stbi_image_free(dec);
        free(ref);
    }
    CHECK(done[0] && done[1]);
    rm_rf(dir);
}

CDB_TEST(world_library) {
    const char *dir = tmpdir();
    char path[512], line[65536], caption[1024], want[1100];
    CHECK(dir);
    cdb_world_library_params p = cdb_world_library_params_default();
    p.n_variants = 3;
    p.n_threads = 2;
    p.scene.min_side = 48;
    p.scene.max_side = 96;
    int64_t t0 = cdb_now_ns();
    CHECK_OK(cdb_world_generate(dir, 77, 10, 60, &p));
    double dt = (double)(cdb_now_ns() - t0) * 1e-9;
    fprintf(stderr, "    60 images in %.3f s (%.0f images/s)\n", dt, 60 / dt);
    snprintf(path, sizeof path, "%s/manifest.jsonl", dir);
    FILE *f = fopen(path, "rb");
    CHECK(f);
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        cdb_world_scene s;
        CHECK_OK(cdb_world_scene_make(77, 10 + n, &p.scene, &s));
        CHECK_OK(cdb_world_caption(&s, caption, sizeof caption));
        snprintf(want, sizeof want, "\"caption\":\"%s\"", caption);
        CHECK_MSG(strstr(line, want), "line %d lacks %s", n, want);
        CHECK(strstr(line, "\"variants\":[{\"text\":"));
        snprintf(want, sizeof want, "\"path\":\"img_%07d.%s\"", 10 + n, s.format == CDB_WORLD_PNG ? "png" : "jpg");
        CHECK_MSG(strstr(line, want), "line %d lacks %s", n, want);
        snprintf(path, sizeof path, "%s/img_%07d.%s", dir, 10 + n, s.format == CDB_WORLD_PNG ? "png" : "jpg");
        int w, h, c;
        CHECK_MSG(stbi_info(path, &w, &h, &c), "cannot read %s", path);
        CHECK_EQ_INT(w, s.width);
        CHECK_EQ_INT(h, s.height);
        n++;
    }
    fclose(f);
    CHECK_EQ_INT(n, 60);
    /* bad arguments */
    CHECK_RC(cdb_world_generate(NULL, 1, 0, 1, NULL), CDB_INVALID);
    p.scene.min_side = 4;
    CHECK_RC(cdb_world_generate(dir, 1, 0, 1, &p), CDB_INVALID);
    rm_rf(dir);
}

CDB_TEST(world_eval_queries) {
    /* The single-object evaluation set: 88 distinct queries, each with enough true
    ** images in a 2,000-image library for precision@10 to mean something. */
    enum { N_LIB = 2000, N_Q = 88 };
    static cdb_world_scene lib[N_LIB];
    char texts[N_Q][64];
    for (int i = 0; i < N_LIB; i++) CHECK_OK(cdb_world_scene_make(424242, i, NULL, &lib[i]));
    for (int k = 0; k < N_Q; k++) {
        cdb_world_query q;
        CHECK_OK(cdb_world_query_make(1, k, CDB_WORLD_Q_SINGLE, &q));
        CHECK_OK(cdb_world_query_text(&q, texts[k], sizeof texts[k]));
        for (int j = 0; j < k; j++) CHECK_MSG(strcmp(texts[j], texts[k]), "duplicate query %s", texts[k]);
        int rel = 0;
        for (int i = 0; i < N_LIB; i++) rel += cdb_world_scene_matches(&lib[i], &q);
        CHECK_MSG(rel >= 10, "'%s': only %d relevant images", texts[k], rel);
    }
    /* compositional queries parse back to text and are sometimes (not always) true */
    int with_rel = 0;
    for (int k = 0; k < 100; k++) {
        cdb_world_query q;
        char t[256];
        CHECK_OK(cdb_world_query_make(1, k, CDB_WORLD_Q_COMPOSITIONAL, &q));
        CHECK_OK(cdb_world_query_text(&q, t, sizeof t));
        int rel = 0;
        for (int i = 0; i < N_LIB; i++) rel += cdb_world_scene_matches(&lib[i], &q);
        with_rel += rel > 0;
        CHECK_MSG(rel < N_LIB / 4, "'%s' matches %d images", t, rel);
    }
    CHECK(with_rel > 50);
    CHECK_RC(cdb_world_query_make(1, 0, 99, &(cdb_world_query){0}), CDB_INVALID);
}

CDB_TEST(world_json) {
    cdb_world_scene s;
    cdb_world_query q;
    char *j = NULL;
    CHECK_OK(cdb_world_scene_make(1, 0, NULL, &s));
    CHECK_OK(cdb_world_scene_json(&s, &j));
    CHECK(j[0] == '{' && j[strlen(j) - 1] == '}');
    CHECK(strstr(j, "\"objects\":[{\"shape\":\""));
    CHECK(strstr(j, cdb_world_shape_name(s.objects[0].shape)));
    cdb_free(j);
    q = query1(term(CDB_WORLD_STAR, CDB_WORLD_ANY, CDB_WORLD_SMALL, CDB_WORLD_ANY, 2), CDB_WORLD_BG_GRAY);
    CHECK_OK(cdb_world_query_json(&q, &j));
    CHECK_EQ_STR(j, "{\"terms\":[{\"shape\":\"star\",\"color\":null,\"size\":\"small\","
                    "\"position\":null,\"count\":2}],\"background\":\"gray\"}");
    cdb_free(j);
}

CDB_TEST_MAIN(world_deterministic, world_scene_invariants, world_captions_are_true,
              world_caption_text, world_matching, world_render_shapes, world_backgrounds,
              world_files_decode, world_library, world_eval_queries, world_json)
