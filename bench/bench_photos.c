/*
** bench_photos.c: decode + preprocess on real photos, against PIL + OpenAI CLIP's
** transform, measured in the same run (figures and ratios printed, nothing asserted).
**
** Photos: the wallpapers and sample photos of eight Debian 12 packages, fetched on
** first use into <build>/photos by bench/fetch_photos (apt-get download + dpkg -x);
** every JPEG/PNG of at least 1 MP, keeping only the largest of the per-resolution
** copies a wallpaper folder ships (WxH.jpg names). Exit 77 when they cannot be had.
**
**   1. per-image CPU (this thread) of cdb_image_decode + cdb_image_preprocess to 224,
**      exact and fast mode (best of BENCH_REPS, default 2), vs PIL 9.4 + torchvision
**      (bench/pil_photos.py, one thread) on the same bytes. Bars: exact <= 0.8x PIL,
**      fast <= 0.4x PIL.
**   1b. the metadata read (cdb_photo_meta_read) on the same bytes, as a share of the
**      exact decode + preprocess (the ratio printed). Bar: under 2%.
**   1c. the perceptual hash of a JPEG by a decode of its own (a 1/8 DCT decode + the
**      hash: what reindex and duplicates pay), as a share of the JPEGs' exact decode +
**      preprocess (ingest takes it from its own decode instead: bench_phash_jpeg).
**      `bench_photos --meta-only`: parts 1, 1b and 1c alone.
**   2. the resample/crop/normalize step alone, AVX2 vs the scalar reference (a child
**      run with CLIPDB_ISA=scalar), and which ISA path ran.
**   3. fast vs exact: max/mean |difference| of the uint8 crops, and the embedding
**      cosine with the bundled model (models/) and ViT-B/32-shaped random weights
**      (bench_encoder's, <build>/bench_data/vitb32_random.safetensors; generated with
**      Debian's torch on first use; skipped when that fails).
**   4. exact vs PIL: how many crops are identical (the optional test_photos asserts it).
**   5. the decoder-thread split: decode+preprocess CPU vs ViT-B/32 image-tower CPU per
**      image (batch 32, CLIPDB_BENCH_THREADS threads, default 2).
**   6. the whole ingest of the same photos (copied into a fresh folder under $TMPDIR)
**      with the ViT-B/32-shaped weights, exact and fast, each in a fresh process
**      (ingest_child.h: what `clipdb init` + `clipdb ingest` run, thumbnails included),
**      against an rclip-style PyTorch loop (bench/rclip_loop.py: PIL open + OpenAI's
**      transform + encode_image in batches of 32 + SQLite inserts, torch threads =
**      the same thread count). Model loading is timed apart on both sides. Bars:
**      exact >= 1.5x, fast >= 2x the loop's files/s. Best of BENCH_INGEST_REPS runs
**      (default 1) of each, interleaved. `bench_photos --ingest-only`: this part alone.
*/
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cosine.h"
#include "encoder/encoder.h"
#include "ingest_child.h"
#include "kernels/kernels.h"
#include "read_file.h"

#define PY "/usr/bin/python3"
#define SZ 224
#define MAX_PHOTOS 400

typedef struct photo {
    char path[1200];
    unsigned char *data;
    size_t n;
    int w, h, is_jpeg;
    double ms_exact, ms_fast, ms_pil, ms_pre_only;
} photo;

static photo g_ph[MAX_PHOTOS];
static int g_n;

static double thread_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* "1920x1080.jpg": one of a wallpaper's per-resolution copies. */
static int is_res_name(const char *base) {
    const char *p = base;
    if (!isdigit((unsigned char)*p)) return 0;
    while (isdigit((unsigned char)*p)) p++;
    if (*p++ != 'x' || !isdigit((unsigned char)*p)) return 0;
    while (isdigit((unsigned char)*p)) p++;
    return *p == '.';
}

/* candidates.txt (sorted paths) -> list.txt: >= 1 MP, the largest WxH copy per folder. */
static int select_photos(const char *dir) {
    char cand[1200], list[1200], line[1200], best[1200] = "", best_dir[1200] = "";
    long long best_px = 0;
    FILE *in, *out;
    int kept = 0;
    snprintf(cand, sizeof cand, "%s/candidates.txt", dir);
    snprintf(list, sizeof list, "%s/list.txt", dir);
    if (!(in = fopen(cand, "r")) || !(out = fopen(list, "w"))) return -1;
    while (fgets(line, sizeof line, in)) {
        size_t n;
        int w = 0, h = 0;
        unsigned char *b;
        char *slash, d[1200];
        line[strcspn(line, "\n")] = 0;
        if (!(b = test_read_file(line, &n))) continue;
        if (cdb_image_probe(b, n, &w, &h) != CDB_OK || (long long)w * h < 1000000) {
            free(b);
            continue;
        }
        free(b);
        slash = strrchr(line, '/');
        snprintf(d, sizeof d, "%.*s", (int)(slash ? slash - line : 0), line);
        if (is_res_name(slash ? slash + 1 : line)) {
            if (strcmp(d, best_dir)) {
                if (best[0]) fprintf(out, "%s\n", best), kept++;
                snprintf(best_dir, sizeof best_dir, "%s", d);
                best[0] = 0;
                best_px = 0;
            }
            if ((long long)w * h > best_px) {
                best_px = (long long)w * h;
                snprintf(best, sizeof best, "%s", line);
            }
            continue;
        }
        fprintf(out, "%s\n", line);
        kept++;
    }
    if (best[0]) fprintf(out, "%s\n", best), kept++;
    fclose(in);
    fclose(out);
    return kept;
}

static int load_list(const char *dir) {
    char list[1200], line[1200];
    FILE *f;
    snprintf(list, sizeof list, "%s/list.txt", dir);
    if (!(f = fopen(list, "r"))) return -1;
    while (g_n < MAX_PHOTOS && fgets(line, sizeof line, f)) {
        photo *p = &g_ph[g_n];
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || !(p->data = test_read_file(line, &p->n))) continue;
        snprintf(p->path, sizeof p->path, "%s", line);
        if (cdb_image_probe(p->data, p->n, &p->w, &p->h) != CDB_OK) {
            free(p->data);
            continue;
        }
        p->is_jpeg = p->n > 2 && p->data[0] == 0xFF && p->data[1] == 0xD8;
        g_n++;
    }
    fclose(f);
    return g_n;
}

/* One decode + preprocess; returns thread-CPU ms, or -1 on error. pre_ms: the
** preprocess step alone. */
static double run_one(const photo *p, int fast, float *px, uint8_t *crop, double *pre_ms) {
    cdb_image_params ip = cdb_image_params_default();
    cdb_preprocess_params pp = cdb_preprocess_params_default();
    cdb_image *img = NULL;
    double t0, t1, t2;
    ip.apply_exif = 0; /* OpenAI's transform ignores EXIF: same work as the PIL side */
    if (fast) {
        ip.decode = CDB_DECODE_FAST;
        ip.target_size = SZ;
    }
    t0 = thread_ms();
    if (cdb_image_decode(p->data, p->n, &ip, &img) != CDB_OK) {
        fprintf(stderr, "bench_photos: %s: %s\n", p->path, cdb_errmsg());
        return -1;
    }
    t1 = thread_ms();
    if (cdb_image_preprocess(img, &pp, px, crop) != CDB_OK) {
        cdb_image_free(img);
        return -1;
    }
    t2 = thread_ms();
    cdb_image_free(img);
    if (pre_ms) *pre_ms = t2 - t1;
    return t2 - t0;
}

/* 1b. the metadata read that ingest does on the same bytes (cdb_photo_meta_read),
** against the exact decode + preprocess. Bar: under 2% of it. */
static void meta_cost(int reps) {
    double total = 0, decode = 0;
    int taken = 0, camera = 0, gps = 0;
    for (int i = 0; i < g_n; i++) {
        double best = 1e30;
        cdb_photo_meta m;
        for (int r = 0; r < reps * 5; r++) {
            double t0 = thread_ms(), dt;
            cdb_photo_meta_read(g_ph[i].data, g_ph[i].n, &m);
            dt = thread_ms() - t0;
            if (dt < best) best = dt;
        }
        total += best;
        decode += g_ph[i].ms_exact;
        taken += m.taken_source != CDB_TAKEN_NONE;
        camera += m.make[0] || m.model[0];
        gps += m.has_gps;
    }
    printf("metadata read (EXIF/XMP): %.4f ms per photo, exact decode+preprocess %.2f ms: "
           "ratio %.5f = %.3f%% (bar < 2%%: %s); %d with a capture time, %d a camera, %d GPS "
           "of %d\n", total / g_n, decode / g_n, total / decode, 100.0 * total / decode,
           total < 0.02 * decode ? "met" : "MISSED", taken, camera, gps, g_n);
}

/* 1c. the perceptual hash by a decode of its own (issue 28: engine/search/photos.c's
** cdb_eng_phash_of, a fast decode to 64 px, scaled in the DCT domain, then the hash:
** what reindex and duplicates pay) against the JPEGs' exact decode + preprocess. Ingest
** takes a JPEG's from its own decode instead (the DC tap, bench_phash_jpeg). */
static void phash_cost(int reps) {
    double total = 0, decode = 0;
    int n = 0;
    for (int i = 0; i < g_n; i++) {
        double best = 1e30;
        if (!g_ph[i].is_jpeg) continue;
        for (int r = 0; r < reps * 3; r++) {
            cdb_image_params ip = cdb_image_params_default();
            cdb_image *img = NULL;
            uint64_t h = 0;
            double t0 = thread_ms(), dt;
            ip.decode = CDB_DECODE_FAST;
            ip.target_size = 64;
            if (cdb_image_decode(g_ph[i].data, g_ph[i].n, &ip, &img) == CDB_OK)
                cdb_image_phash(img, &h);
            cdb_image_free(img);
            dt = thread_ms() - t0;
            if (dt < best) best = dt;
        }
        total += best;
        decode += g_ph[i].ms_exact;
        n++;
    }
    if (n)
        printf("perceptual hash (JPEG, 1/8 DCT decode): %.3f ms per photo, exact "
               "decode+preprocess %.2f ms: ratio %.4f = %.2f%% (%d JPEGs)\n", total / n,
               decode / n, total / decode, 100.0 * total / decode, n);
}

static double sum_ms(int which) {
    double s = 0;
    for (int i = 0; i < g_n; i++)
        s += which == 0 ? g_ph[i].ms_exact : which == 1 ? g_ph[i].ms_fast
             : which == 2 ? g_ph[i].ms_pil : g_ph[i].ms_pre_only;
    return s;
}

/* --child-preprocess: only the total preprocess CPU (the parent runs this with
** CLIPDB_ISA=scalar to measure the vector speedup in the same run). */
static int child_preprocess(const char *dir, int reps) {
    float *px = malloc(sizeof(float) * 3 * SZ * SZ);
    double total = 0;
    if (load_list(dir) <= 0) return 77;
    for (int i = 0; i < g_n; i++) {
        double best = 1e30, pre = 0;
        for (int r = 0; r < reps; r++) {
            if (run_one(&g_ph[i], 0, px, NULL, &pre) < 0) return 1;
            if (pre < best) best = pre;
        }
        total += best;
    }
    printf("preprocess_total_ms %.3f isa %s\n", total, cdb_k_isa_name(cdb_k_cpu_isa()));
    free(px);
    return 0;
}

static double proc_cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Embedding cosine fast vs exact over every photo, with the model at path; the
** photos go through the image tower in batches of 32 (16 exact + 16 fast), as an
** ingest batches them, and the tower's process CPU per image is reported. */
static void cosines(const char *label, const char *path, int threads, double dec_ms_per_img) {
    enum { PAIRS = 16 };
    cdb_model_params mp = cdb_model_params_default();
    cdb_model *m = NULL;
    const cdb_model_info *mi;
    cdb_preprocess_params pp;
    double cmin = 1, csum = 0, enc_cpu = 0, enc_wall = 0;
    int d, s, done = 0, encoded = 0;
    mp.load_text = 0;
    mp.n_threads = threads;
    if (cdb_model_open(path, &mp, &m) != CDB_OK) {
        printf("  %-34s skipped (%s)\n", label, cdb_errmsg());
        return;
    }
    mi = cdb_model_get_info(m);
    d = mi->embed_dim;
    pp = mi->preprocess;
    s = pp.size;
    {
        size_t per = (size_t)3 * s * s;
        float *px = malloc(sizeof(float) * 2 * PAIRS * per), *e = malloc(sizeof(float) * 2 * PAIRS * d);
        for (int i0 = 0; i0 < g_n; i0 += PAIRS) {
            int k = 0;
            for (int i = i0; i < g_n && i < i0 + PAIRS; i++) {
                int ok = 1;
                for (int f = 0; f < 2 && ok; f++) {
                    cdb_image *img = NULL;
                    cdb_image_params ip = cdb_image_params_default();
                    ip.apply_exif = 0;
                    if (f) ip.decode = CDB_DECODE_FAST, ip.target_size = s;
                    ok = cdb_image_decode(g_ph[i].data, g_ph[i].n, &ip, &img) == CDB_OK &&
                         cdb_image_preprocess(img, &pp, px + (size_t)(f * PAIRS + k) * per, NULL) ==
                             CDB_OK;
                    cdb_image_free(img);
                }
                if (ok) k++;
            }
            if (!k) continue;
            if (k < PAIRS) /* close the gap: fast tensors right after the exact ones */
                memmove(px + (size_t)k * per, px + (size_t)PAIRS * per, sizeof(float) * k * per);
            double c0 = proc_cpu_ms();
            int64_t t0 = cdb_now_ns();
            if (cdb_encode_pixels(m, px, 2 * k, 1, e) != CDB_OK) break;
            enc_wall += (cdb_now_ns() - t0) / 1e6;
            enc_cpu += proc_cpu_ms() - c0;
            encoded += 2 * k;
            for (int j = 0; j < k; j++) {
                double c = cosine(e + (size_t)j * d, e + (size_t)(k + j) * d, d);
                if (c < cmin) cmin = c;
                csum += c;
                done++;
            }
        }
        free(px);
        free(e);
    }
    printf("  %-34s %d photos: cosine(fast, exact) min %.6f, mean %.6f\n", label, done, cmin,
           done ? csum / done : 0);
    if (dec_ms_per_img > 0 && encoded) {
        double ec = enc_cpu / encoded, share = dec_ms_per_img / (dec_ms_per_img + ec);
        printf("  %-34s image tower (batch 32, %d threads): %.1f ms CPU, %.1f ms wall per image\n",
               "", threads, ec, enc_wall / encoded);
        printf("  %-34s decode+preprocess (exact) %.1f ms CPU = %.0f%% of an image's CPU: on %d "
               "cores give decoding %.2f cores (fast mode: %.0f%%)\n", "", dec_ms_per_img,
               share * 100, threads, share * threads,
               100 * (sum_ms(1) / g_n) / (sum_ms(1) / g_n + ec));
    }
    cdb_model_close(m);
}

/* 6. Writes the photos into base/lib (file names prefixed by their index: several
** packages ship the same names) and their paths into base/list.txt. */
static int write_library(const char *base) {
    char lib[1300], list[1300], path[1600];
    FILE *lf;
    snprintf(lib, sizeof lib, "%s/lib", base);
    snprintf(list, sizeof list, "%s/list.txt", base);
    if (mkdir(lib, 0755) != 0 || !(lf = fopen(list, "w"))) return -1;
    for (int i = 0; i < g_n; i++) {
        const char *slash = strrchr(g_ph[i].path, '/');
        FILE *f;
        snprintf(path, sizeof path, "%s/%03d_%.200s", lib, i, slash ? slash + 1 : g_ph[i].path);
        if (!(f = fopen(path, "wb")) || fwrite(g_ph[i].data, 1, g_ph[i].n, f) != g_ph[i].n ||
            fclose(f) != 0) {
            fclose(lf);
            return -1;
        }
        fprintf(lf, "%s\n", path);
    }
    return fclose(lf) == 0 ? 0 : -1;
}

/* One run of bench/rclip_loop.py; its files/s, or -1. */
static double rclip_run(const char *weights, const char *base, int threads, double *load_s,
                        double *cpu_s) {
    char cmd[4096], line[256];
    double secs = -1, files = 0;
    FILE *p;
    snprintf(cmd, sizeof cmd, PY " '%s/bench/rclip_loop.py' '%s' '%s/list.txt' --batch 32 "
             "--threads %d --db '%s/rclip.db'", CDB_SOURCE_DIR, weights, base, threads, base);
    if (!(p = popen(cmd, "r"))) return -1;
    while (fgets(line, sizeof line, p)) {
        sscanf(line, "rclip_ingest_s=%lf", &secs);
        sscanf(line, "rclip_files=%lf", &files);
        sscanf(line, "rclip_load_s=%lf", load_s);
        sscanf(line, "rclip_cpu_s=%lf", cpu_s);
    }
    if (pclose(p) != 0 || secs <= 0 || files != g_n) return -1;
    snprintf(cmd, sizeof cmd, "%s/rclip.db", base);
    unlink(cmd);
    return files / secs;
}

/* One clipdb ingest (decode 0 exact, 1 fast) into a fresh database; files/s, or -1. */
static double clipdb_run(const char *weights, const char *base, int threads, int decode,
                         result *r) {
    char lib[1300], db[1300], cmd[1400];
    snprintf(lib, sizeof lib, "%s/lib", base);
    snprintf(db, sizeof db, "%s/db", base);
    double fps = run_child(weights, lib, db, threads, 32, decode, r) == 0 && r->added == g_n
                     ? r->found / r->total : -1;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", db);
    if (system(cmd) != 0) fprintf(stderr, "bench_photos: cannot remove %s\n", db);
    return fps;
}

static void whole_ingest(const char *weights, int threads) {
    int reps = getenv("BENCH_INGEST_REPS") ? atoi(getenv("BENCH_INGEST_REPS")) : 1;
    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char base[1100], cmd[1300];
    double best[3] = {-1, -1, -1}, load[3] = {0, 0, 0}, cpu[3] = {0, 0, 0};
    result stages[3];
    snprintf(base, sizeof base, "%s/cdb_bench_photos_XXXXXX", tmp);
    if (reps < 1) reps = 1;
    printf("whole ingest of the %d photos, ViT-B/32-shaped weights, %d threads, batch 32 "
           "(load average %.1f):\n", g_n, threads, loadavg1());
    if (!mkdtemp(base) || write_library(base) != 0) {
        printf("  skipped: cannot write the library under %s\n", tmp);
        return;
    }
    for (int rep = 0; rep < reps; rep++) {
        for (int k = 0; k < 3; k++) { /* clipdb exact, the rclip-style loop, clipdb fast */
            result r;
            double l = 0, c = 0, fps = k == 1 ? rclip_run(weights, base, threads, &l, &c)
                                              : clipdb_run(weights, base, threads, k / 2, &r);
            if (fps < 0) {
                printf("  %s run failed\n", k == 1 ? "rclip-style loop" : "clipdb ingest");
                continue;
            }
            if (fps > best[k]) {
                best[k] = fps;
                load[k] = k == 1 ? l : r.load;
                cpu[k] = k == 1 ? c : r.cpu_s - r.load; /* the child's CPU less its load (~1 core) */
                if (k != 1) stages[k] = r;
            }
        }
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0) fprintf(stderr, "bench_photos: cannot remove %s\n", base);
    for (int k = 0; k < 3; k++)
        if (best[k] > 0)
            printf("  %-30s %6.2f files/s, %.0f ms CPU per file (model load %.2f s, apart)\n",
                   k == 0 ? "clipdb ingest, exact decode" : k == 1 ? "rclip-style PyTorch loop"
                                                                  : "clipdb ingest --decode fast",
                   best[k], 1e3 * cpu[k] / g_n, load[k]);
    for (int k = 0; k < 3; k += 2)
        if (best[k] > 0) {
            printf("  clipdb %s:\n", k ? "fast" : "exact");
            print_stages(&stages[k], threads);
        }
    if (best[1] > 0) {
        if (best[0] > 0)
            printf("  ratio exact %.3fx (bar >= 1.5: %s)\n", best[0] / best[1],
                   best[0] / best[1] >= 1.5 ? "met" : "MISSED");
        if (best[2] > 0)
            printf("  ratio fast  %.3fx (bar >= 2.0: %s)\n", best[2] / best[1],
                   best[2] / best[1] >= 2.0 ? "met" : "MISSED");
    }
    printf("  load average at the end %.1f\n", loadavg1());
}

int main(int argc, char **argv) {
    char dir[1024], list[1200], cmd[4096];
    int reps = getenv("BENCH_REPS") ? atoi(getenv("BENCH_REPS")) : 2;
    int threads = getenv("CLIPDB_BENCH_THREADS") ? atoi(getenv("CLIPDB_BENCH_THREADS")) : 2;
    float *px = malloc(sizeof(float) * 3 * SZ * SZ);
    uint8_t *ce = malloc(3 * SZ * SZ), *cf = malloc(3 * SZ * SZ);
    FILE *p;
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    int pil_ok = 0, same = 0, compared = 0, max_diff = 0;
    double mean_diff = 0;

    if (is_ingest_child(argc, argv)) return ingest_child_main(argv);
    if (reps < 1) reps = 1;
    snprintf(dir, sizeof dir, "%s/photos", CDB_BINARY_DIR);
    if (argc > 1 && !strcmp(argv[1], "--child-preprocess")) return child_preprocess(dir, reps);
    snprintf(list, sizeof list, "%s/list.txt", dir);
    /* A list naming no readable photo is stale (the build folder was moved): made again. */
    if (!exists(list) || load_list(dir) <= 0) {
        snprintf(cmd, sizeof cmd, "bash '%s/bench/fetch_photos' '%s'", CDB_SOURCE_DIR, dir);
        if (system(cmd) != 0 || select_photos(dir) <= 0) {
            printf("bench_photos: the real-photo set cannot be had (apt-get download failed)\n");
            return 77;
        }
    }
    if (!g_n && load_list(dir) <= 0) {
        printf("bench_photos: no photos in %s\n", list);
        return 77;
    }
    {
        int nj = 0;
        long long mp = 0;
        for (int i = 0; i < g_n; i++) nj += g_ph[i].is_jpeg, mp += (long long)g_ph[i].w * g_ph[i].h;
        printf("bench_photos: %d photos (%d JPEG, %d PNG), %.1f MP on average; ISA path %s; "
               "OPENBLAS_CORETYPE=%s\n", g_n, nj, g_n - nj, mp / 1e6 / g_n,
               cdb_k_isa_name(cdb_k_cpu_isa()), coretype ? coretype : "(unset)");
    }

    if (argc > 1 && !strcmp(argv[1], "--ingest-only")) { /* part 6 alone */
        char vitb[1200];
        snprintf(vitb, sizeof vitb, "%s/bench_data/vitb32_random.safetensors", CDB_BINARY_DIR);
        if (exists(vitb)) whole_ingest(vitb, threads);
        else printf("--ingest-only: no %s (a full run makes it)\n", vitb);
        free(px), free(ce), free(cf);
        for (int i = 0; i < g_n; i++) free(g_ph[i].data);
        return 0;
    }
    /* 1. clipdb, exact and fast; PIL crops come from the PIL side (below) */
    for (int i = 0; i < g_n; i++) {
        double be = 1e30, bf = 1e30, pre = 0, bp = 1e30;
        for (int r = 0; r < reps; r++) {
            double t = run_one(&g_ph[i], 0, px, ce, &pre);
            if (t < 0) return 1;
            if (t < be) be = t;
            if (pre < bp) bp = pre;
            t = run_one(&g_ph[i], 1, px, cf, NULL);
            if (t < 0) return 1;
            if (t < bf) bf = t;
        }
        g_ph[i].ms_exact = be;
        g_ph[i].ms_fast = bf;
        g_ph[i].ms_pre_only = bp;
        {
            int md = 0;
            double s = 0;
            for (int k = 0; k < 3 * SZ * SZ; k++) {
                int dd = abs((int)ce[k] - (int)cf[k]);
                if (dd > md) md = dd;
                s += dd;
            }
            if (md > max_diff) max_diff = md;
            mean_diff += s / (3.0 * SZ * SZ);
        }
        /* keep the exact crop for the PIL comparison */
        {
            char cp[1300];
            FILE *f;
            snprintf(cp, sizeof cp, "%s/clipdb_crops", dir);
            mkdir(cp, 0755);
            snprintf(cp, sizeof cp, "%s/clipdb_crops/%d.rgb", dir, i);
            if ((f = fopen(cp, "wb"))) fwrite(ce, 1, 3 * SZ * SZ, f), fclose(f);
        }
    }

    meta_cost(reps);
    phash_cost(reps);
    if (argc > 1 && !strcmp(argv[1], "--meta-only")) { /* parts 1 and 1b alone */
        free(px), free(ce), free(cf);
        for (int i = 0; i < g_n; i++) free(g_ph[i].data);
        return 0;
    }

    /* PIL + torchvision, one thread, same bytes; also writes PIL's crops */
    snprintf(cmd, sizeof cmd, PY " '%s/bench/pil_photos.py' '%s' --reps %d --crops '%s/pil_crops'",
             CDB_SOURCE_DIR, list, reps, dir);
    if ((p = popen(cmd, "r"))) {
        char line[256];
        int k = 0;
        while (fgets(line, sizeof line, p)) {
            int idx;
            double ms;
            if (sscanf(line, "ms %d %lf", &idx, &ms) == 2 && idx >= 0 && idx < g_n)
                g_ph[idx].ms_pil = ms, k++;
        }
        pil_ok = pclose(p) == 0 && k == g_n;
    }
    for (int i = 0; i < g_n && pil_ok; i++) {
        char a[1300], b[1300];
        size_t na, nb;
        unsigned char *x, *y;
        snprintf(a, sizeof a, "%s/clipdb_crops/%d.rgb", dir, i);
        snprintf(b, sizeof b, "%s/pil_crops/%d.rgb", dir, i);
        x = test_read_file(a, &na);
        y = test_read_file(b, &nb);
        if (x && y && na == nb) {
            compared++;
            same += !memcmp(x, y, na);
        }
        free(x), free(y);
    }

    {
        double e = sum_ms(0) / g_n, f = sum_ms(1) / g_n, q = sum_ms(2) / g_n;
        printf("decode+preprocess to %d, CPU ms per photo (best of %d, one thread):\n", SZ, reps);
        printf("  clipdb exact %8.1f   clipdb fast %8.1f", e, f);
        if (pil_ok) {
            printf("   PIL+torchvision %8.1f\n", q);
            printf("  ratio exact/PIL %.2fx (bar <= 0.80: %s)   fast/PIL %.2fx (bar <= 0.40: %s)\n",
                   e / q, e / q <= 0.8 ? "met" : "MISSED", f / q, f / q <= 0.4 ? "met" : "MISSED");
            for (int j = 0; j < 2; j++) {
                double se = 0, sf = 0, sp = 0;
                int c = 0;
                for (int i = 0; i < g_n; i++)
                    if (g_ph[i].is_jpeg == !j) se += g_ph[i].ms_exact, sf += g_ph[i].ms_fast,
                                                   sp += g_ph[i].ms_pil, c++;
                if (c)
                    printf("    %-4s (%2d): exact %7.1f  fast %7.1f  PIL %7.1f  -> %.2fx / %.2fx\n",
                           j ? "PNG" : "JPEG", c, se / c, sf / c, sp / c, se / sp, sf / sp);
            }
            printf("  exact crops identical to PIL's: %d of %d\n", same, compared);
        } else {
            printf("\n  (PIL + torchvision baseline unavailable: needs %s with python3-pil and "
                   "python3-torchvision)\n", PY);
        }
    }

    /* 2. the vector speedup of resize + crop + normalize */
    {
        double scalar = -1;
        snprintf(cmd, sizeof cmd, "CLIPDB_ISA=scalar BENCH_REPS=%d '%s' --child-preprocess", reps,
                 argv[0]);
        if ((p = popen(cmd, "r"))) {
            char line[256];
            while (fgets(line, sizeof line, p)) sscanf(line, "preprocess_total_ms %lf", &scalar);
            pclose(p);
        }
        printf("resize+crop+normalize alone, ms per photo: %s %.1f", cdb_k_isa_name(cdb_k_cpu_isa()),
               sum_ms(3) / g_n);
        if (scalar > 0)
            printf(", scalar %.1f: %.2fx speedup\n", scalar / g_n, scalar / sum_ms(3));
        else
            printf(" (scalar child run failed)\n");
    }

    /* 3 + 5. fast vs exact: pixels and embeddings; the decode/encode CPU split */
    printf("fast vs exact (uint8 224x224 crops): max |diff| %d, mean |diff| %.3f levels of 255\n",
           max_diff, mean_diff / g_n);
    {
        char bundled[1200], vitb[1200];
        snprintf(bundled, sizeof bundled, "%s/models/shapes-vit-tiny", CDB_SOURCE_DIR);
        cosines("bundled model (shapes-vit-tiny)", bundled, threads, -1);
        snprintf(vitb, sizeof vitb, "%s/bench_data/vitb32_random.safetensors", CDB_BINARY_DIR);
        if (!exists(vitb)) {
            snprintf(cmd, sizeof cmd, PY " '%s/bench/encoder_baseline.py' --make-weights '%s' "
                     ">/dev/null", CDB_SOURCE_DIR, vitb);
            if (system(cmd) != 0) fprintf(stderr, "bench_photos: cannot make %s\n", vitb);
        }
        cosines("ViT-B/32-shaped random weights", vitb, threads, sum_ms(0) / g_n);
        if (exists(vitb)) whole_ingest(vitb, threads);
    }
    free(px), free(ce), free(cf);
    for (int i = 0; i < g_n; i++) free(g_ph[i].data);
    return 0;
}
