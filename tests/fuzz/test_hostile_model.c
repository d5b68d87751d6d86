/*
** test_hostile_model.c: hostile model files against cdb_model_open (encoder.h).
**
** - Headers that claim offsets past the end of the file, a header length past the
**   end (2^40, 2^64-1), over the 100 MiB limit, shorter than "{}", overlapping or
**   reversed offsets, shapes whose product overflows: CDB_CORRUPT with a message, no
**   allocation of the claimed size (peak RSS), no read outside the file.
** - A valid tiny model (tests/fuzz/data/clip_w64_f16.safetensors) cut short by one
**   byte, or by half: CDB_CORRUPT naming the tensor.
** - Config files with out-of-range numbers (heads, head_width of 2^32): an error or
**   a sane model, never a crash (this one ran into a division by zero).
** Each case runs in a child process, so a crash fails only that case.
*/
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cdb_test.h"
#include "encoder/encoder.h"
#include "hostile_util.h"

static char g_dir[256];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    remove(path);
    return 0;
}

static pid_t g_owner;
static void rm_dir(void) {
    if (getpid() == g_owner) nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A private folder under $TMPDIR or /tmp, removed at exit (by this process only, not
** by the children that run the cases). */
static void make_dir(void) {
    const char *tmp = getenv("TMPDIR");
    if (g_dir[0]) return;
    snprintf(g_dir, sizeof g_dir, "%s/cdb_hostile_model_%d_XXXXXX", tmp && *tmp ? tmp : "/tmp",
             (int)getpid());
    if (!mkdtemp(g_dir)) abort();
    g_owner = getpid();
    atexit(rm_dir);
}

static int write_file(const char *path, const void *d, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    if (n && fwrite(d, 1, n, f) != n) {
        fclose(f);
        return -1;
    }
    return fclose(f);
}

/* u64 header length (little-endian) + header + data. */
static size_t st_file(uint8_t *out, uint64_t hlen, const char *header, const void *data,
                      size_t n_data) {
    size_t h = strlen(header);
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)(hlen >> (8 * i));
    memcpy(out + 8, header, h);
    if (n_data) memcpy(out + 8 + h, data, n_data);
    return 8 + h + n_data;
}

typedef struct model_case {
    const char *name;
    const char *path;  /* file or folder to open */
    int want;          /* wanted status; -1: OK or any clean error */
    double max_rss_mb;
} model_case;

static int run_open(void *arg) {
    const model_case *c = arg;
    cdb_model_params p = cdb_model_params_default();
    cdb_model *m = NULL;
    double rss0 = hostile_peak_rss_mb(), drss;
    cdb_status rc;
    p.device.kind = CDB_K_DEVICE_CPU;
    p.n_threads = 1;
    rc = cdb_model_open(c->path, &p, &m);
    drss = hostile_peak_rss_mb() - rss0;
    cdb_model_close(m);
    if (getenv("HOSTILE_VERBOSE") || (c->want >= 0 && (int)rc != c->want) || drss > c->max_rss_mb)
        fprintf(stderr, "    %s: %s (%s), peak RSS +%.1f MiB\n", c->name, cdb_status_str(rc),
                cdb_errmsg(), drss);
    if (c->want >= 0 && (int)rc != c->want) return 1;
    if (rc != CDB_OK && (rc == CDB_ERROR || !cdb_errmsg()[0])) return 1;
    return drss > c->max_rss_mb;
}

static int open_case(const char *name, const char *path, int want, double max_rss_mb) {
    model_case c = {name, path, want, max_rss_mb};
    return hostile_in_child(name, run_open, &c) != 0;
}

CDB_TEST(header_lies) {
    static const struct {
        const char *name;
        uint64_t hlen; /* 0: the header's own length */
        const char *header;
        size_t n_data;
    } cases[] = {
        {"offsets past the end", 0, "{\"w\":{\"dtype\":\"F32\",\"shape\":[1000],\"data_offsets\":[0,4000]}}", 16},
        {"second tensor past the end", 0,
         "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}", 8},
        {"begin past the end", 0, "{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4096,4096]}}", 4},
        {"offset 2^63", 0,
         "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[9223372036854775807,9223372036854775808]}}", 4},
        {"reversed offsets", 0, "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[3,2]}}", 4},
        {"negative offset", 0, "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-1,0]}}", 4},
        {"overlap", 0,
         "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}", 8},
        {"shape product overflows", 0,
         "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,0]}}", 0},
        {"size mismatch", 0, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8},
        {"header length 2^40", (uint64_t)1 << 40, "{}", 0},
        {"header length 2^64-1", UINT64_MAX, "{}", 0},
        {"header length 200 MiB", (uint64_t)200 << 20, "{}", 0},
        {"header length 1", 1, "{}", 0},
        {"header length 0", 8, "", 0},
        {"header not an object", 0, "[1,2,3]", 0},
        {"header not JSON", 0, "{\"w\":", 0},
    };
    uint8_t file[4096], zeros[64] = {0};
    char path[512];
    int failures = 0;
    make_dir();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n;
        uint64_t hlen = cases[i].hlen ? cases[i].hlen : strlen(cases[i].header);
        if (cases[i].hlen == 8) hlen = 0; /* "header length 0" */
        n = st_file(file, hlen, cases[i].header, zeros, cases[i].n_data);
        snprintf(path, sizeof path, "%s/case%02zu.safetensors", g_dir, i);
        CHECK(write_file(path, file, n) == 0);
        failures += open_case(cases[i].name, path, CDB_CORRUPT, 16);
    }
    CHECK_EQ_INT(failures, 0);
}

#define TINY_MODEL CDB_SOURCE_DIR "/tests/fuzz/data/clip_w64_f16.safetensors"

/* The valid tiny model's bytes in data (at most cap of them): their count, 0 when the
** file cannot be read. */
static size_t read_tiny_model(uint8_t *data, size_t cap) {
    FILE *f = fopen(TINY_MODEL, "rb");
    size_t n;
    if (!f) return 0;
    n = fread(data, 1, cap, f);
    fclose(f);
    return n;
}

CDB_TEST(truncated_model) {
    char path[512];
    static uint8_t data[1 << 18];
    size_t n;
    int failures = 0;
    if (!(n = read_tiny_model(data, sizeof data))) CDB_SKIP("%s missing", TINY_MODEL);
    make_dir();
    snprintf(path, sizeof path, "%s/whole.safetensors", g_dir);
    CHECK(write_file(path, data, n) == 0);
    failures += open_case("the whole tiny model", path, CDB_OK, 64);
    snprintf(path, sizeof path, "%s/minus1.safetensors", g_dir);
    CHECK(write_file(path, data, n - 1) == 0);
    failures += open_case("tiny model minus one byte", path, CDB_CORRUPT, 16);
    snprintf(path, sizeof path, "%s/half.safetensors", g_dir);
    CHECK(write_file(path, data, n / 2) == 0);
    failures += open_case("tiny model cut in half", path, CDB_CORRUPT, 16);
    snprintf(path, sizeof path, "%s/header_only.safetensors", g_dir);
    CHECK(write_file(path, data, 8 + (size_t)data[0] + ((size_t)data[1] << 8)) == 0);
    failures += open_case("tiny model header only", path, CDB_CORRUPT, 16);
    CHECK_EQ_INT(failures, 0);
}

CDB_TEST(hostile_configs) {
    static const struct {
        const char *name, *file, *json;
    } cases[] = {
        {"open_clip head_width 2^32", "open_clip_config.json",
         "{\"vision_cfg\": {\"head_width\": 4294967296}}"},
        {"open_clip heads 2^32+1", "open_clip_config.json", "{\"text_cfg\": {\"heads\": 4294967297}}"},
        {"config.json heads -2^63", "config.json",
         "{\"vision_config\": {\"num_attention_heads\": -9223372036854775808}}"},
        {"config.json heads 2^31", "config.json",
         "{\"text_config\": {\"num_attention_heads\": 2147483648}}"},
        {"preprocessor std 0 and 1e308", "preprocessor_config.json",
         "{\"image_mean\": [1e308, -1e308, 0], \"image_std\": [0, 0, 0]}"},
        {"config nested 10000 deep", "config.json", NULL},
    };
    char dir[512], path[600];
    static uint8_t data[1 << 18];
    size_t n;
    int failures = 0;
    if (!(n = read_tiny_model(data, sizeof data))) CDB_SKIP("%s missing", TINY_MODEL);
    make_dir();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(dir, sizeof dir, "%s/cfg%zu", g_dir, i);
        CHECK(mkdir(dir, 0755) == 0);
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        CHECK(write_file(path, data, n) == 0);
        snprintf(path, sizeof path, "%s/%s", dir, cases[i].file);
        if (cases[i].json) {
            CHECK(write_file(path, cases[i].json, strlen(cases[i].json)) == 0);
        } else {
            static char deep[20002];
            for (int k = 0; k < 10000; k++) deep[k] = '[', deep[10000 + k] = ']';
            CHECK(write_file(path, deep, 20000) == 0);
        }
        failures += open_case(cases[i].name, dir, -1, 64);
    }
    CHECK_EQ_INT(failures, 0);
}

CDB_TEST_MAIN(header_lies, truncated_model, hostile_configs)
