/*
** bench_duplicates.c: precision and recall of the duplicate groups (dupes/dupes.h) on
** a generated library with a known truth, against a CLIP-only baseline measured in the
** same run.
**
**   bench_duplicates [--dir LIB] [--scenes N] [--model DIR]
**
** bench/dup_library.py (Debian's python3-pil) writes the library: distinct scenes,
** copies of each (exact, 50% resize, JPEG q=60, WebP, 2% crop, EXIF stripped, rotated
** with an EXIF orientation) and bursts (one object moved, one second apart, one
** camera), and truth.tsv. Each file is read, hashed (the catalog's content hash),
** decoded with its orientation, phashed (as an ingest stores it: a JPEG's DC hash), its
** metadata read and its image encoded with
** the bundled model; then cdb_dupes_find groups them. The baseline is what a CLIP-only
** duplicate finder does (Immich before #31286): the same cosine threshold, no phash,
** no metadata.
**
** Per kind it prints the pairs of files the truth links and the groups link:
** - copies (exact + near groups): files of one scene and frame;
** - exact: byte-identical files (in one exact group, or in the near group that holds
**   them with the picture's other copies); near: copies that are not byte-identical;
** - burst: the frames of one scene's burst (the frames as shot, not their copies).
** Bars (exit 1 when missed): recall of true copies >= 0.98, and no two distinct photos
** (another scene or another frame) in one exact or near group.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"
#include "dupes/dupes.h"
#include "encoder/encoder.h"

#define MAX_FILES 20000

typedef struct file {
    char path[96];
    int scene, frame;
    char role[16];
} file;

typedef struct counts {
    long truth, found, both; /* pairs: in the truth, reported, in both */
} counts;

static void print_counts(const char *what, const counts *c)
{
    double p = c->found ? (double)c->both / (double)c->found : 1.0;
    double r = c->truth ? (double)c->both / (double)c->truth : 1.0;
    printf("  %-8s truth %5ld pairs, reported %5ld, both %5ld: precision %.4f recall %.4f\n",
           what, c->truth, c->found, c->both, p, r);
}

/* Reads the library's truth.tsv. Number of files, or -1. */
static int read_truth(const char *dir, file *files)
{
    char path[1024], line[256];
    snprintf(path, sizeof path, "%s/truth.tsv", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int n = 0;
    while (n < MAX_FILES && fgets(line, sizeof line, f))
        if (sscanf(line, "%95s %d %d %15s", files[n].path, &files[n].scene, &files[n].frame,
                   files[n].role) == 4)
            n++;
    fclose(f);
    return n;
}

/* Fills item i from the file: hash, decode, phash, metadata, vector. 0 or -1. */
static int load(const char *dir, const file *fl, cdb_model *m, cdb_dupes_item *it,
                float *vec, char *camera, size_t cam_cap, float *pixels)
{
    char path[1024];
    if (snprintf(path, sizeof path, "%s/%s", dir, fl->path) >= (int)sizeof path)
        return -1;
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n);
    int ok = buf && fread(buf, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    cdb_image *img = NULL;
    cdb_photo_meta meta;
    const cdb_model_info *mi = cdb_model_get_info(m);
    cdb_image_params ip = cdb_image_params_default();
    ip.phash = 1; /* a JPEG's DC hash, as an ingest stores it; else the pixels' */
    ok = ok && cdb_image_decode(buf, (size_t)n, &ip, &img) == CDB_OK &&
         (img->has_phash ? (it->phash = img->phash, CDB_OK) : cdb_image_phash(img, &it->phash)) ==
             CDB_OK &&
         cdb_photo_meta_read(buf, (size_t)n, &meta) == CDB_OK &&
         cdb_image_preprocess(img, &mi->preprocess, pixels, NULL) == CDB_OK &&
         cdb_encode_pixels(m, pixels, 1, 1, vec) == CDB_OK;
    if (ok) {
        cdb_db_hash_buf(buf, (size_t)n, it->hash);
        it->has_hash = it->has_phash = 1;
        it->vec = vec;
        snprintf(camera, cam_cap, "%s%s%s", meta.make, *meta.make ? " " : "", meta.model);
        it->camera = camera;
        it->has_taken = meta.taken_source != CDB_TAKEN_NONE;
        it->taken_ms = meta.taken_ms;
        it->bytes = n;
        it->width = img->full_width;
        it->height = img->full_height;
        it->format = strcmp(img->format, "JPEG") == 0 ? CDB_DUPES_FMT_CAMERA
                     : strcmp(img->format, "RAW") == 0 ? CDB_DUPES_FMT_RAW
                                                       : CDB_DUPES_FMT_OTHER;
    } else {
        fprintf(stderr, "bench_duplicates: %s: %s\n", path, cdb_errmsg());
    }
    cdb_image_free(img);
    free(buf);
    return ok ? 0 : -1;
}

/* The margins: the farthest true copies, and the closest burst frames and distinct
** scenes, in phash bits and cosine. */
static void margins(const file *fl, const cdb_dupes_item *it, int n, int dim)
{
    int bits_max[3] = {0, 0, 0}, bits_min[3] = {64, 64, 64};
    float cos_min[3] = {1, 1, 1}, cos_max[3] = {-1, -1, -1};
    /* per phash threshold T = 6, 8, ..., 20: distinct-scene pairs within T bits (what
    ** the cosine must turn away) and their largest cosine; true copies beyond T */
    long gate_n[8] = {0}, miss_n[8] = {0};
    float gate_cos[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    char hardest[16] = "";
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            int bits = __builtin_popcountll(it[a].phash ^ it[b].phash);
            double c = 0;
            for (int k = 0; k < dim; k++)
                c += (double)it[a].vec[k] * it[b].vec[k];
            int rel = fl[a].scene != fl[b].scene ? 2 : fl[a].frame != fl[b].frame ? 1 : 0;
            if (rel == 0 && bits > bits_max[0])
                snprintf(hardest, sizeof hardest, "%s", strcmp(fl[a].role, "orig") &&
                         strcmp(fl[a].role, "burst") ? fl[a].role : fl[b].role);
            for (int t = 0; t < 8; t++) {
                int T = 6 + 2 * t;
                if (rel == 2 && bits <= T) {
                    gate_n[t]++;
                    gate_cos[t] = (float)c > gate_cos[t] ? (float)c : gate_cos[t];
                }
                miss_n[t] += rel == 0 && bits > T;
            }
            bits_max[rel] = bits > bits_max[rel] ? bits : bits_max[rel];
            bits_min[rel] = bits < bits_min[rel] ? bits : bits_min[rel];
            cos_min[rel] = (float)c < cos_min[rel] ? (float)c : cos_min[rel];
            cos_max[rel] = (float)c > cos_max[rel] ? (float)c : cos_max[rel];
        }
    printf("  true copies: phash bits <= %d (%s), cosine >= %.4f\n", bits_max[0], hardest,
           cos_min[0]);
    printf("  burst frames (distinct shots): phash bits >= %d, cosine <= %.4f\n", bits_min[1],
           cos_max[1]);
    printf("  distinct scenes: phash bits >= %d, cosine <= %.4f\n", bits_min[2], cos_max[2]);
    printf("  phash threshold T:      ");
    for (int t = 0; t < 8; t++)
        printf(" %6d", 6 + 2 * t);
    printf("\n  copies beyond T:        ");
    for (int t = 0; t < 8; t++)
        printf(" %6ld", miss_n[t]);
    printf("\n  distinct within T:      ");
    for (int t = 0; t < 8; t++)
        printf(" %6ld", gate_n[t]);
    printf("\n  ... their max cosine:   ");
    for (int t = 0; t < 8; t++)
        printf(" %6.3f", gate_cos[t]);
    printf("\n");
}

/* The pair counts of one grouping, per kind, and the pairs of distinct photos in one
** exact or near group (*false_copy). */
static void score(const file *fl, const cdb_dupes_item *it, int n, const cdb_dupes_groups *g,
                  counts *copies, counts *exact, counts *near, counts *burst, long *false_copy)
{
    int *copy_of = malloc((size_t)n * sizeof *copy_of);
    int *burst_of = malloc((size_t)n * sizeof *burst_of);
    int *exact_grp = malloc((size_t)n * sizeof *exact_grp);
    for (int i = 0; i < n; i++)
        copy_of[i] = burst_of[i] = exact_grp[i] = -1;
    for (size_t k = 0; k < g->n_groups; k++)
        for (size_t j = g->start[k]; j < g->start[k + 1]; j++) {
            size_t i = g->member[j];
            if (g->kind[k] == CDB_DUPES_BURST)
                burst_of[i] = (int)k;
            else if (g->kind[k] <= CDB_DUPES_NEAR)
                copy_of[i] = (int)k;
            if (g->kind[k] == CDB_DUPES_EXACT)
                exact_grp[i] = (int)k;
        }
    *false_copy = 0;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            int same = fl[a].scene == fl[b].scene && fl[a].frame == fl[b].frame;
            int bytes = !memcmp(it[a].hash, it[b].hash, CDB_DUPES_HASH_BYTES);
            int together = copy_of[a] >= 0 && copy_of[a] == copy_of[b];
            copies->truth += same, copies->found += together, copies->both += same && together;
            *false_copy += together && !same;
            /* exact copies of a picture that has near copies too sit in its near group */
            exact->truth += bytes;
            exact->found += (exact_grp[a] >= 0 && exact_grp[a] == exact_grp[b]) ||
                            (together && bytes);
            exact->both += bytes && together;
            near->truth += same && !bytes;
            near->found += together && !bytes;
            near->both += same && !bytes && together;
            /* bursts: the frames as shot (orig/), one scene, distinct frames */
            int shots = !strncmp(fl[a].path, "orig/", 5) && !strncmp(fl[b].path, "orig/", 5);
            int bt = shots && fl[a].scene == fl[b].scene && fl[a].frame != fl[b].frame;
            int bf = burst_of[a] >= 0 && burst_of[a] == burst_of[b];
            burst->truth += bt, burst->found += bf, burst->both += bt && bf;
        }
    free(copy_of);
    free(burst_of);
    free(exact_grp);
}

int main(int argc, char **argv)
{
    const char *dir = "/tmp/clipdb-bench-duplicates", *model_dir =
        CDB_SOURCE_DIR "/models/shapes-vit-tiny";
    int scenes = 60;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--scenes") && i + 1 < argc)
            scenes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model_dir = argv[++i];
        else {
            fprintf(stderr, "usage: bench_duplicates [--dir LIB] [--scenes N] [--model DIR]\n");
            return 2;
        }
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/bench/dup_library.py '%s' %d 28",
             CDB_SOURCE_DIR, dir, scenes);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_duplicates: %s failed (needs Debian's python3-pil)\n", cmd);
        return 77;
    }
    static file files[MAX_FILES];
    int n = read_truth(dir, files);
    cdb_model *m = NULL;
    cdb_model_params mp = cdb_model_params_default();
    mp.device.kind = CDB_K_DEVICE_CPU;
    if (n < 2 || cdb_model_open(model_dir, &mp, &m) != CDB_OK) {
        fprintf(stderr, "bench_duplicates: no library or model: %s\n", cdb_errmsg());
        return 2;
    }
    const cdb_model_info *mi = cdb_model_get_info(m);
    int dim = mi->embed_dim, size = mi->preprocess.size;
    cdb_dupes_item *it = calloc((size_t)n, sizeof *it), *base = calloc((size_t)n, sizeof *base);
    float *vecs = malloc((size_t)n * (size_t)dim * sizeof *vecs);
    float *pixels = malloc((size_t)3 * size * size * sizeof *pixels);
    char (*cams)[140] = calloc((size_t)n, sizeof *cams);
    int64_t t0 = cdb_now_ns();
    for (int i = 0; i < n; i++) {
        it[i].id = i + 1;
        if (load(dir, &files[i], m, &it[i], vecs + (size_t)i * dim, cams[i], sizeof cams[i],
                 pixels))
            return 1;
    }
    double load_s = (double)(cdb_now_ns() - t0) / 1e9;
    cdb_dupes_params p = cdb_dupes_params_default();
    cdb_dupes_groups *g = NULL, *gb = NULL;
    t0 = cdb_now_ns();
    if (cdb_dupes_find(it, (size_t)n, dim, &p, &g) != CDB_OK)
        return 1;
    double find_ms = (double)(cdb_now_ns() - t0) / 1e6;
    /* the baseline: cosine only, no phash, no metadata */
    cdb_dupes_params bp = p;
    bp.phash_bits = 64;
    for (int i = 0; i < n; i++) {
        base[i] = it[i];
        base[i].camera = NULL;
        base[i].has_taken = 0;
    }
    if (cdb_dupes_find(base, (size_t)n, dim, &bp, &gb) != CDB_OK)
        return 1;
    printf("bench_duplicates: %d files (%d scenes) in %s, model %s (dim %d)\n", n, scenes, dir,
           model_dir, dim);
    printf("  read + hash + decode + phash + metadata + encode: %.1f s; grouping: %.1f ms\n",
           load_s, find_ms);
    printf("  parameters: phash <= %d bits, cosine >= %.2f, burst within %d ms\n",
           p.phash_bits, p.min_cosine, p.burst_ms);
    margins(files, it, n, dim);
    counts c = {0}, e = {0}, nr = {0}, b = {0}, cb = {0}, eb = {0}, nb = {0}, bb = {0};
    long false_copy = 0, false_base = 0;
    score(files, it, n, g, &c, &e, &nr, &b, &false_copy);
    score(files, base, n, gb, &cb, &eb, &nb, &bb, &false_base);
    printf("clipdb (phash AND cosine, capture time and camera):\n");
    print_counts("copies", &c);
    print_counts("exact", &e);
    print_counts("near", &nr);
    print_counts("burst", &b);
    printf("  pair     no RAW files in this library (tests/dupes covers pairs)\n");
    printf("  distinct photos grouped as exact or near: %ld pairs\n", false_copy);
    printf("baseline (cosine >= %.2f only, as a CLIP-only finder):\n", bp.min_cosine);
    print_counts("copies", &cb);
    printf("  distinct photos grouped as exact or near: %ld pairs\n", false_base);
    double recall = c.truth ? (double)c.both / (double)c.truth : 1.0;
    int pass = recall >= 0.98 && false_copy == 0;
    printf("bars: recall of true copies %.4f (>= 0.98), distinct photos grouped %ld (== 0): %s\n",
           recall, false_copy, pass ? "PASS" : "FAIL");
    cdb_dupes_groups_free(g);
    cdb_dupes_groups_free(gb);
    cdb_model_close(m);
    free(it), free(base), free(vecs), free(pixels), free(cams);
    return pass ? 0 : 1;
}
