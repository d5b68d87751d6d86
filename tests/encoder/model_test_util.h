/*
** model_test_util.h: what the model tests that write real-shape files share
** (test_model_families.c for the ViT sizes, test_resnet.c for the ResNet ones): a
** private temporary folder removed at exit, a safetensors writer whose data region
** is a hole (header written, then ftruncate: multi-GB models that use no disk),
** OpenAI-naming transformer blocks and towers, JSON configs, peak-RSS and page-cache probes,
** fixture reading, and cosine (cosine.h). Header-only (static functions); test code. Define
** CDB_TEST_TMP_TAG (a short name for the folder) before including it.
*/
#ifndef CDB_TESTS_ENCODER_MODEL_TEST_UTIL_H
#define CDB_TESTS_ENCODER_MODEL_TEST_UTIL_H

#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cdb_test.h"
#include "cosine.h"
#include "encoder/encoder.h"
#include "read_file.h"

#ifndef CDB_TEST_TMP_TAG
#define CDB_TEST_TMP_TAG "model"
#endif

/* ---- temporary folder ------------------------------------------------------------ */

static char g_tmp[256];

static inline int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static inline void rm_tmpdir(void) {
    if (g_tmp[0]) nftw(g_tmp, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static inline const char *tmpdir(void) {
    if (!g_tmp[0]) {
        snprintf(g_tmp, sizeof g_tmp, "/tmp/cdb_test_%s_XXXXXX", CDB_TEST_TMP_TAG);
        if (!mkdtemp(g_tmp))
            g_tmp[0] = 0;
        else
            atexit(rm_tmpdir);
    }
    return g_tmp;
}

/* ---- a safetensors header over a hole ------------------------------------------------ */

typedef struct st_writer {
    json_t *hdr;
    int64_t off;              /* bytes of data so far */
    struct st_writer *shard2; /* non-NULL: the text tower goes to this second file */
} st_writer;

static inline void st_add(st_writer *w, const char *dtype, int64_t esize, int nd,
                          const int64_t *shape, const char *fmt, ...) CDB_PRINTF(6, 7);
static inline void st_add(st_writer *w, const char *dtype, int64_t esize, int nd,
                          const int64_t *shape, const char *fmt, ...) {
    char name[256];
    va_list ap;
    json_t *sh = json_array(), *e = json_object();
    int64_t n = 1;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (w->shard2 && (!strncmp(name, "text_", 5) || !strcmp(name, "logit_scale")))
        w = w->shard2; /* as model-00002-of-00002.safetensors */
    for (int i = 0; i < nd; i++) {
        json_array_append_new(sh, json_integer(shape[i]));
        n *= shape[i];
    }
    json_object_set_new(e, "dtype", json_string(dtype));
    json_object_set_new(e, "shape", sh);
    json_object_set_new(e, "data_offsets", json_pack("[II]", (json_int_t)w->off,
                                                      (json_int_t)(w->off + n * esize)));
    json_object_set_new(w->hdr, name, e);
    w->off += n * esize;
}

#define T1(w, a, ...) st_add(w, "F16", 2, 1, (int64_t[]){a}, __VA_ARGS__)
#define T2(w, a, b, ...) st_add(w, "F16", 2, 2, (int64_t[]){a, b}, __VA_ARGS__)

static inline void add_block(st_writer *w, const char *pre, int64_t W, int64_t M, int hf) {
    const char *ln1 = hf ? "layer_norm1" : "ln_1", *ln2 = hf ? "layer_norm2" : "ln_2";
    const char *outp = hf ? "self_attn.out_proj" : "attn.out_proj";
    const char *fc = hf ? "mlp.fc1" : "mlp.c_fc", *pj = hf ? "mlp.fc2" : "mlp.c_proj";
    T1(w, W, "%s%s.weight", pre, ln1);
    T1(w, W, "%s%s.bias", pre, ln1);
    if (hf) {
        static const char *qkv[3] = {"q", "k", "v"};
        for (int i = 0; i < 3; i++) {
            T2(w, W, W, "%sself_attn.%s_proj.weight", pre, qkv[i]);
            T1(w, W, "%sself_attn.%s_proj.bias", pre, qkv[i]);
        }
    } else {
        T2(w, 3 * W, W, "%sattn.in_proj_weight", pre);
        T1(w, 3 * W, "%sattn.in_proj_bias", pre);
    }
    T2(w, W, W, "%s%s.weight", pre, outp);
    T1(w, W, "%s%s.bias", pre, outp);
    T1(w, W, "%s%s.weight", pre, ln2);
    T1(w, W, "%s%s.bias", pre, ln2);
    T2(w, M, W, "%s%s.weight", pre, fc);
    T1(w, M, "%s%s.bias", pre, fc);
    T2(w, W, M, "%s%s.weight", pre, pj);
    T1(w, W, "%s%s.bias", pre, pj);
}

/* OpenAI naming, the ViT image tower: conv1 (patch P), the class and positional
** embeddings (G x G patches + 1), ln_pre, L blocks of width W and MLP width M (the
** last one's last_m: M, or a wrong width for the "still validated" checks), ln_post,
** the projection to E. */
static inline void add_openai_vit(st_writer *w, int64_t W, int64_t P, int64_t G, int L,
                                  int64_t M, int64_t last_m, int64_t E) {
    char pre[128];
    st_add(w, "F16", 2, 4, (int64_t[]){W, 3, P, P}, "visual.conv1.weight");
    T1(w, W, "visual.class_embedding");
    T2(w, G * G + 1, W, "visual.positional_embedding");
    T1(w, W, "visual.ln_pre.weight");
    T1(w, W, "visual.ln_pre.bias");
    for (int i = 0; i < L; i++) {
        snprintf(pre, sizeof pre, "visual.transformer.resblocks.%d.", i);
        add_block(w, pre, W, i == L - 1 ? last_m : M, 0);
    }
    T1(w, W, "visual.ln_post.weight");
    T1(w, W, "visual.ln_post.bias");
    T2(w, W, E, "visual.proj");
}

/* OpenAI naming, the text tower: the token (vocab x T) and positional (ctx x T)
** embeddings, L blocks of width T and MLP width M, ln_final, the projection to E. */
static inline void add_openai_text(st_writer *w, int64_t vocab, int64_t ctx, int64_t T, int L,
                                   int64_t M, int64_t E) {
    char pre[128];
    T2(w, vocab, T, "token_embedding.weight");
    T2(w, ctx, T, "positional_embedding");
    for (int i = 0; i < L; i++) {
        snprintf(pre, sizeof pre, "transformer.resblocks.%d.", i);
        add_block(w, pre, T, M, 0);
    }
    T1(w, T, "ln_final.weight");
    T1(w, T, "ln_final.bias");
    T2(w, T, E, "text_projection");
}

/* u64 length + header (padded with spaces to 8, as the reference writer) + a hole;
** truncate_1: one byte short (a truncated file). */
static inline int write_header(const char *path, st_writer *w, int truncate_1) {
    char *h;
    size_t hl, pad;
    int fd, ok = 0;
    unsigned char len8[8];
    json_object_set_new(w->hdr, "__metadata__", json_pack("{ss}", "format", "pt"));
    h = json_dumps(w->hdr, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(w->hdr);
    if (!h) return 0;
    hl = strlen(h);
    pad = (8 - hl % 8) % 8;
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)(hl + pad) >> (8 * i));
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        ok = write(fd, len8, 8) == 8 && write(fd, h, hl) == (ssize_t)hl &&
             write(fd, "        ", pad) == (ssize_t)pad &&
             ftruncate(fd, (off_t)(8 + hl + pad) + (off_t)w->off - (truncate_1 != 0)) == 0;
        ok = close(fd) == 0 && ok;
    }
    free(h);
    return ok;
}

static inline int write_json(const char *dir, const char *name, json_t *j) {
    char path[700];
    int rc;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    rc = json_dump_file(j, path, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(j);
    return rc == 0;
}

static inline json_t *floats3(const float v[3]) {
    return json_pack("[fff]", (double)v[0], (double)v[1], (double)v[2]);
}

static inline long max_rss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* Bytes of path in the page cache (mincore over a fresh mapping), or -1. The sparse
** files are written with write() for the header and ftruncate() for the rest, so
** their data is cached only if someone read it: a full open hashes every byte. */
static inline int64_t cached_bytes(const char *path) {
    int fd = open(path, O_RDONLY);
    struct stat st;
    long pg = sysconf(_SC_PAGESIZE);
    int64_t n = -1;
    if (fd < 0) return -1;
    if (fstat(fd, &st) == 0 && st.st_size > 0 && pg > 0) {
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        size_t n_pages = ((size_t)st.st_size + (size_t)pg - 1) / (size_t)pg;
        unsigned char *vec = malloc(n_pages);
        if (map != MAP_FAILED && vec && mincore(map, (size_t)st.st_size, vec) == 0) {
            n = 0;
            for (size_t i = 0; i < n_pages; i++) n += (vec[i] & 1) ? pg : 0;
        }
        free(vec);
        if (map != MAP_FAILED) munmap(map, (size_t)st.st_size);
    }
    close(fd);
    return n;
}

/* Linux: writing 5 to clear_refs resets the peak RSS to the current RSS. */
static inline void reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

/* Opens the model at path with p into *m, measuring what the load costs: the peak RSS
** it adds, in KiB (the peak is reset first: an earlier load's cannot hide it), and the
** wall time in ms when ms is not NULL. */
static inline cdb_status open_measured(const char *path, const cdb_model_params *p,
                                       cdb_model **m, long *rss_kb, double *ms) {
    struct timespec t0, t1;
    long rss0;
    cdb_status rc;
    reset_peak_rss();
    rss0 = max_rss_kb();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = cdb_model_open(path, p, m);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *rss_kb = max_rss_kb() - rss0;
    if (ms) *ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    return rc;
}

/* The full_load_peak_rss tests (on request only: they need the RAM). Opens the sparse
** real-size model file at path measured (open_measured), prints its peak RSS beside its
** weights as fp32 and the file's bytes read, encodes one zero input through it (a text,
** or an image of image x image pixels when image > 0), closes it and removes the file.
** The peak stays under the fp32 weights + 10% and 256 MiB of transients (one widened,
** transposed or folded tensor at a time, one 64 MiB hash step); ASan's quarantine and
** shadow add their own ~300 MB: there the figure is printed, not checked. */
static inline void full_load_measure(cdb_test_ctx *cdb_t_, const char *path, const char *label,
                                     int image) {
    cdb_model_params p = cdb_model_params_default();
    cdb_model *m = NULL;
    long rss = 0;
    int32_t ids[77] = {49406, 320, 1929, 49407};
    CHECK_OK(open_measured(path, &p, &m, &rss, NULL));
    const cdb_model_info *in = cdb_model_get_info(m);
    double wbytes = (double)in->weights_f32_bytes;
    printf("     %s: full load: peak RSS +%.0f MiB; weights as fp32 %.0f MiB (n_params %lld); "
           "%.0f MiB of the file read\n",
           label, (double)rss / 1024, wbytes / (1 << 20), (long long)in->n_params,
           (double)cached_bytes(path) / (1 << 20));
    float *px = image > 0 ? calloc((size_t)3 * image * image, sizeof *px) : NULL;
    float *e = calloc((size_t)in->embed_dim, sizeof *e);
    cdb_status erc = !e || (image > 0 && !px) ? CDB_NOMEM
                     : image > 0              ? cdb_encode_pixels(m, px, 1, 0, e)
                                              : cdb_encode_tokens(m, ids, 1, 0, e);
    free(px);
    free(e);
    cdb_model_close(m);
    unlink(path);
    CHECK_RC(erc, CDB_OK);
#ifndef __SANITIZE_ADDRESS__
    CHECK_MSG((double)rss * 1024 < wbytes * 1.1 + (256 << 20),
              "peak RSS +%ld KiB for %.0f bytes of fp32 weights", rss, wbytes);
#endif
}

/* The golden fixture name (in dir) opened twice, one thread each: fully into *full and
** inspect-only into *inspect. */
static inline void open_full_and_inspect(cdb_test_ctx *cdb_t_, const char *dir, const char *name,
                                         cdb_model **full, cdb_model **inspect) {
    char path[600];
    cdb_model_params p = cdb_model_params_default();
    snprintf(path, sizeof path, "%s/%s", dir, name);
    p.n_threads = 1;
    CHECK_OK(cdb_model_open(path, &p, full));
    p.inspect_only = 1;
    CHECK_OK(cdb_model_open(path, &p, inspect));
}

/* A golden fixture's expected embeddings, <dir>/<name>.<kind>.f32 (kind: text, image or
** photo), as test_read_file gives them (NULL when missing). */
static inline float *read_golden_f32(const char *dir, const char *name, const char *kind,
                                     size_t *n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s.f32", dir, name, kind);
    return test_read_file(path, n);
}

#endif
