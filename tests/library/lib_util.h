/*
** lib_util.h: helpers of the library tests (tests/library/): the real clipdb binary
** run as a user runs it, generated photo folders (world/), and the oracle every
** check goes back to: the embedding of a file's own bytes, computed by `clipdb
** embed` (a separate process, never the database; its batches give each image's
** bytes alone), compared with what `clipdb export` says is stored for its path.
**
** The bundled model is used ($CLIPDB_TEST_MODEL overrides it); without one the
** tests skip (exit 77).
*/
#ifndef CDB_TEST_LIB_UTIL_H
#define CDB_TEST_LIB_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>

#include "cdb_test.h"
#include "../cli/cli_run.h"
#include "world/world.h"

#ifndef CDB_FAULT_SHIM
#define CDB_FAULT_SHIM ""
#endif

static char lu_tmp[512];
static const char *lu_model;

/* 0 ready, 77 no model, -1 failure. */
static inline int lu_setup(void) {
    if (lu_tmp[0]) return 0;
    if (!(lu_model = cli_find_model())) return 77;
    if (!cli_tmpdir(lu_tmp, sizeof lu_tmp)) return -1;
    return 0;
}

#define LU_NEED_SETUP()                                                   \
    do {                                                                  \
        int s_ = lu_setup();                                              \
        if (s_ == 77) CDB_SKIP("no model: set CLIPDB_TEST_MODEL or add models/<name>/"); \
        CHECK(s_ == 0);                                                   \
    } while (0)

static inline int lu_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f) {
    (void)sb, (void)flag, (void)f;
    return remove(p);
}
static inline void lu_rm_rf(const char *path) { nftw(path, lu_rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

/* A path under the test's scratch folder, in buf. */
static inline const char *lu_path(char *buf, size_t size, const char *rel) {
    if ((size_t)snprintf(buf, size, "%s/%s", lu_tmp, rel) >= size) buf[0] = '\0';
    return buf;
}

static inline void lu_paths_(const char *prefix, const cli_dest *d) {
    char dir[600];
    cli_paths_(lu_path(dir, sizeof dir, prefix), d);
}
/* A test's paths under one folder of the scratch folder (cli_run.h's CLI_PATHS there):
**   LU_PATHS("case", CLI_AT(lib, "photos"), CLI_AT(db, "db"));  (char lib[N], db[M])
** sets lib to lu_path("case/photos") and db to lu_path("case/db"). */
#define LU_PATHS(prefix, ...) lu_paths_((prefix), (const cli_dest[]){__VA_ARGS__, {0}})

static inline int lu_mkdirs(const char *path) {
    char b[4096];
    snprintf(b, sizeof b, "%s", path);
    for (char *p = b + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(b, 0755) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(b, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* Photos [first, first+n) of seed into dir, named img_NNNNNNN.jpg/png (two folders
** with the same first get the same names), without the manifest. */
static inline int lu_generate(const char *dir, uint64_t seed, int first, int n) {
    cdb_world_library_params lp = cdb_world_library_params_default();
    char manifest[4200];
    lp.n_threads = 2;
    if (lu_mkdirs(dir) != 0) return -1;
    if (cdb_world_generate(dir, seed, first, n, &lp) != CDB_OK) return -1;
    snprintf(manifest, sizeof manifest, "%s/manifest.jsonl", dir);
    remove(manifest);
    return 0;
}

/* The name of generated photo i in dir (jpg or png), in buf. */
static inline const char *lu_img(const char *dir, int i, char *buf, size_t size) {
    snprintf(buf, size, "%s/img_%07d.jpg", dir, i);
    if (access(buf, F_OK) == 0) return buf;
    snprintf(buf, size, "%s/img_%07d.png", dir, i);
    return buf;
}

/* The library tests' names for cli_run.h's file helpers. */
static inline int lu_write(const char *path, const void *data, size_t n) {
    return cli_write_file(path, data, n);
}
static inline int lu_copy(const char *from, const char *to) { return cli_copy_file(from, to); }

/* ---- clipdb as another user (nobody, 65534) ---------------------------------------
** A checkout in a folder other users cannot enter (a home folder of mode 0700) keeps
** nobody from the program and the model it was built with. lu_reader_kit copies what
** nobody needs into the scratch folder's reader/ (everyone may read it, and the tests
** open the scratch folder to everyone): the program, the test model, and LeakSanitizer's
** suppressions when LSAN_OPTIONS names them. In the child, after fork and before exec,
** lu_reader_env points clipdb at them: CLIPDB_MODEL is the model a database falls back
** to when its recorded path cannot be read. Root only (the callers setpriv to nobody). */
static char lu_reader_bin[600], lu_reader_model[600], lu_reader_lsan[1200];

/* 0, or -1 with the failing command printed. Once per process. */
static inline int lu_reader_kit(void) {
    char dir[600], cmd[6000], supp[1024] = "";
    const char *lsan = getenv("LSAN_OPTIONS"), *p = NULL;
    struct stat sb;
    if (lu_reader_bin[0]) return 0;
    if (!lu_tmp[0] || !lu_model || stat(lu_model, &sb) != 0) return -1;
    lu_path(dir, sizeof dir, "reader");
    /* a model folder, or a bare .safetensors file ($CLIPDB_TEST_MODEL) keeping its suffix */
    snprintf(lu_reader_model, sizeof lu_reader_model, "%s/%s", dir,
             S_ISDIR(sb.st_mode) ? "model" : "model.safetensors");
    if (lsan && (p = strstr(lsan, "suppressions="))) /* up to the next ':' */
        snprintf(supp, sizeof supp, "%.*s", (int)strcspn(p + 13, ":"), p + 13);
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s' && cp '%s' '%s/clipdb' && cp -R '%s' '%s' && "
             "{ [ -z '%s' ] || cp '%s' '%s/lsan.supp'; } && chmod a+rx '%s' && chmod -R a+rX '%s'",
             dir, CLIPDB_BIN, dir, lu_model, lu_reader_model, supp, supp, dir, lu_tmp, dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "    cannot make the reader's copies: %s\n", cmd);
        return -1;
    }
    if (supp[0]) { /* LSAN_OPTIONS with its suppressions= path replaced by the copy's */
        size_t at = (size_t)(p - lsan);
        snprintf(lu_reader_lsan, sizeof lu_reader_lsan, "%.*ssuppressions=%s/lsan.supp%s",
                 (int)at, lsan, dir, p + 13 + strlen(supp));
    }
    snprintf(lu_reader_bin, sizeof lu_reader_bin, "%s/clipdb", dir);
    return 0;
}

/* In the child that becomes the reader: the environment for the kit's copies. */
static inline void lu_reader_env(void) {
    setenv("CLIPDB_MODEL", lu_reader_model, 1);
    if (lu_reader_lsan[0]) setenv("LSAN_OPTIONS", lu_reader_lsan, 1);
}

/* Runs clipdb (env: extra "NAME=value", NULL-terminated, may be NULL); the exit code;
** *out (may be NULL: freed here) gets the output. When env preloads the fault shim
** into a sanitized clipdb, ASan must not insist on coming first in the library list. */
static inline int lu_run_env(const char *const *args, const char *const *env, cli_run_result *out) {
    cli_run_result r;
    const char *e[32];
    static char asan[1024];
    int n = 0, preload = 0;
    for (int i = 0; env && env[i] && n < 28; i++) {
        e[n++] = env[i];
        preload |= !strncmp(env[i], "LD_PRELOAD=", 11);
    }
    if (preload) {
        const char *cur = getenv("ASAN_OPTIONS");
        snprintf(asan, sizeof asan, "ASAN_OPTIONS=%s%sverify_asan_link_order=0", cur ? cur : "",
                 cur && *cur ? ":" : "");
        e[n++] = asan;
    }
    e[n] = NULL;
    int rc = cli_run_in(NULL, args, e, &r);
    if (out) *out = r;
    else cli_run_free(&r);
    return rc;
}
static inline int lu_run(const char *const *args, cli_run_result *out) {
    return lu_run_env(args, NULL, out);
}
/* Runs clipdb and reports its output when the exit code is not `want`. */
static inline int lu_expect(const char *const *args, int want, cli_run_result *out) {
    cli_run_result r;
    int rc = cli_run_in(NULL, args, NULL, &r);
    if (rc != want) {
        fprintf(stderr, "    clipdb");
        for (int i = 0; args[i]; i++) fprintf(stderr, " %s", args[i]);
        fprintf(stderr, ": exit %d (want %d)\n    stdout: %.2000s\n    stderr: %.2000s\n", rc,
                want, r.out, r.err);
    }
    if (out) *out = r;
    else cli_run_free(&r);
    return rc;
}

static inline int lu_init(const char *db) {
    return lu_expect((const char *[]){"init", "--db", db, "--model", lu_model, "--quiet", NULL}, 0,
                     NULL);
}

/* A new database at db (lu_init) holding paths (folders or files, NULL-terminated, at
** most 12), ingested quietly; with index, its ANN index built as well. 0 on success
** (a failing command's output is shown). */
static inline int lu_db_of(const char *db, const char *const *paths, int index) {
    const char *args[20] = {"ingest", "--db", db};
    int n = 3;
    for (int i = 0; paths[i] && n < 16; i++) args[n++] = paths[i];
    args[n++] = "--quiet";
    args[n] = NULL;
    if (lu_init(db) != 0 || lu_expect(args, 0, NULL) != 0) return -1;
    return index ? lu_expect((const char *[]){"index", "build", "--db", db, "--quiet", NULL}, 0,
                             NULL)
                 : 0;
}

/* n generated photos of seed in lib (lu_generate) and a new database db holding them
** (lu_db_of, with index as there). 0 on success. */
static inline int lu_generate_db(const char *lib, uint64_t seed, int n, const char *db, int index) {
    if (lu_generate(lib, seed, 0, n) != 0) return -1;
    return lu_db_of(db, (const char *const[]){lib, NULL}, index);
}

/* ---- .npy reading (little-endian <f4 / <f2 arrays, as clipdb writes them) ---------- */

static inline float lu_f16(uint16_t h) { /* binary16 -> float, written out here */
    int e = (h >> 10) & 31, f = h & 1023;
    double x = e == 0 ? ldexp(f, -24) : e == 31 ? INFINITY : ldexp(1024 + f, e - 25);
    return (float)((h & 0x8000) ? -x : x);
}

/* The rows x cols float matrix of an npy file (fp32 or fp16); heap (free). */
static inline float *lu_npy(const char *path, int *rows, int *cols) {
    size_t n = 0;
    char *b = cli_read_file(path, &n);
    float *out = NULL;
    *rows = *cols = 0;
    if (!b || n < 10 || memcmp(b, "\x93NUMPY", 6)) goto done;
    size_t hl = (size_t)(unsigned char)b[8] | (size_t)(unsigned char)b[9] << 8, off = 10 + hl;
    const char *shape = strstr(b + 10, "'shape': (");
    int f16 = strstr(b + 10, "<f2") != NULL;
    if (!shape || off > n) goto done;
    *rows = atoi(shape + 10);
    const char *comma = strchr(shape + 10, ',');
    *cols = comma && comma[1] != ')' ? atoi(comma + 1) : 1;
    size_t count = (size_t)*rows * (size_t)*cols, es = f16 ? 2 : 4;
    if (off + count * es > n || !(out = malloc(sizeof *out * (count ? count : 1)))) goto done;
    for (size_t i = 0; i < count; i++) {
        if (f16) {
            uint16_t h;
            memcpy(&h, b + off + 2 * i, 2);
            out[i] = lu_f16(h);
        } else {
            memcpy(&out[i], b + off + 4 * i, 4);
        }
    }
done:
    free(b);
    return out;
}

/* ---- the database as `clipdb export` shows it --------------------------------------- */

typedef struct lu_export {
    int n, dim;
    char **paths;
    float *vecs; /* n * dim, decoded from the stored fp16 */
} lu_export;

static inline void lu_export_free(lu_export *e) {
    for (int i = 0; i < e->n; i++) free(e->paths[i]);
    free(e->paths);
    free(e->vecs);
    memset(e, 0, sizeof *e);
}

/* The vector set of model (a path, number or name; NULL: the default) as exported.
** 0, or -1 (and a message) when the export failed. */
static inline int lu_export_read_model(const char *db, const char *model, lu_export *e) {
    char dir[700], p[800];
    size_t n = 0;
    int rows = 0;
    memset(e, 0, sizeof *e);
    snprintf(dir, sizeof dir, "%s.export", db);
    lu_rm_rf(dir);
    if (lu_expect(model ? (const char *[]){"export", "--db", db, "--model", model, "--out", dir,
                                           "--quiet", NULL}
                        : (const char *[]){"export", "--db", db, "--out", dir, "--quiet", NULL},
                  0, NULL))
        return -1;
    snprintf(p, sizeof p, "%s/vectors.npy", dir);
    e->vecs = lu_npy(p, &rows, &e->dim);
    snprintf(p, sizeof p, "%s/paths.txt", dir);
    char *text = cli_read_file(p, &n);
    if (!text) return -1;
    e->paths = calloc((size_t)rows + 1, sizeof *e->paths);
    for (char *s = text, *nl; e->paths && *s && e->n < rows; s = nl + 1) {
        if (!(nl = strchr(s, '\n'))) break;
        e->paths[e->n++] = strndup(s, (size_t)(nl - s));
    }
    free(text);
    lu_rm_rf(dir);
    return e->n == rows && (rows == 0 || e->vecs) ? 0 : -1;
}
static inline int lu_export_read(const char *db, lu_export *e) {
    return lu_export_read_model(db, NULL, e);
}

/* How many paths the export of db holds; -1 when the export failed. */
static inline int lu_export_count(const char *db) {
    lu_export e;
    if (lu_export_read(db, &e) != 0) return -1;
    int n = e.n;
    lu_export_free(&e);
    return n;
}

/* Index of path in the export, -1; *count: how many times it appears. */
static inline int lu_export_find(const lu_export *e, const char *path, int *count) {
    int at = -1, c = 0;
    for (int i = 0; i < e->n; i++)
        if (!strcmp(e->paths[i], path)) {
            if (at < 0) at = i;
            c++;
        }
    if (count) *count = c;
    return at;
}

/* ---- the oracle: a file's own embedding ---------------------------------------------- */

/* Embeddings of files[n] (rows of out, dim each) by `clipdb embed --model model`, 40
** images per call (cli_run passes at most 127 arguments); -1 on failure. */
static inline int lu_embed_model(const char *model, const char *const *files, int n, float **out,
                                 int *dim) {
    enum { PER_CALL = 40 };
    const char *args[2 * PER_CALL + 12];
    char npy[700];
    float *all = NULL;
    *out = NULL;
    *dim = 0;
    snprintf(npy, sizeof npy, "%s/oracle.npy", lu_tmp);
    for (int at = 0; at < n; at += PER_CALL) {
        int k = 0, rows = 0, d = 0, m = n - at < PER_CALL ? n - at : PER_CALL;
        float *part;
        args[k++] = "embed";
        args[k++] = "--model";
        args[k++] = model;
        for (int i = 0; i < m; i++) {
            args[k++] = "--image";
            args[k++] = files[at + i];
        }
        args[k++] = "--format";
        args[k++] = "npy";
        args[k++] = "--out";
        args[k++] = npy;
        args[k] = NULL;
        if (lu_expect(args, 0, NULL) != 0 || !(part = lu_npy(npy, &rows, &d)) || rows != m) {
            free(all);
            return -1;
        }
        if (!all && !(all = malloc(sizeof *all * (size_t)n * (size_t)d))) {
            free(part);
            return -1;
        }
        memcpy(all + (size_t)at * d, part, sizeof *all * (size_t)m * (size_t)d);
        free(part);
        *dim = d;
        remove(npy);
    }
    *out = all;
    return n == 0 || all ? 0 : -1;
}
static inline int lu_embed(const char *const *files, int n, float **out, int *dim) {
    return lu_embed_model(lu_model, files, n, out, dim);
}

/* The stored fp16 vector a (decoded) is the file's own embedding b: each element
** within 2e-3 (the stored vector's fp16 rounding, with margin) and
** cosine >= 0.99999. Two different photos are far further apart. */
static inline int lu_same_vector(const float *a, const float *b, int dim, double *cos_out) {
    double ab = 0, aa = 0, bb = 0, worst = 0;
    for (int i = 0; i < dim; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
        worst = fmax(worst, fabs((double)a[i] - b[i]));
    }
    double c = aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0;
    if (cos_out) *cos_out = c;
    return worst <= 2e-3 && c >= 0.99999;
}

/* Every exported path: the file exists and its stored vector is its own embedding;
** no path twice. Returns the number of violations (each printed). */
static inline int lu_check_export_against_files(const lu_export *e) {
    float *want = NULL;
    int dim = 0, bad = 0;
    if (e->n == 0) return 0;
    if (lu_embed((const char *const *)e->paths, e->n, &want, &dim) != 0 || dim != e->dim) {
        fprintf(stderr, "    the oracle could not embed the %d exported files\n", e->n);
        free(want);
        return 1;
    }
    for (int i = 0; i < e->n; i++) {
        int count = 0;
        double c = 0;
        lu_export_find(e, e->paths[i], &count);
        if (count != 1 && bad++ < 10) fprintf(stderr, "    %s stored %d times\n", e->paths[i], count);
        if (!lu_same_vector(e->vecs + (size_t)i * dim, want + (size_t)i * dim, dim, &c) &&
            bad++ < 10)
            fprintf(stderr, "    %s: stored vector is not its own (cosine %.6f)\n", e->paths[i], c);
    }
    free(want);
    return bad;
}

/* The oracle over the whole export of db: every path its own vector, exactly `want`
** paths. 0, else the number of problems (each said on stderr), -1 when the export
** failed. */
static inline int lu_db_is_exact(const char *db, int want) {
    lu_export e;
    if (lu_export_read(db, &e) != 0) return -1;
    int bad = lu_check_export_against_files(&e);
    if (e.n != want) {
        fprintf(stderr, "    %d paths stored, want %d\n", e.n, want);
        bad++;
    }
    lu_export_free(&e);
    return bad;
}

/* `search --image path` ranks path first, at a score of 1 up to fp16 storage
** (>= 0.999), or tied with it within 1e-4 (a copy of the same bytes). 0 when it
** does. */
static inline int lu_search_finds_itself(const char *db, const char *path) {
    cli_run_result r;
    int rc = lu_run((const char *[]){"search", "--db", db, "--image", path, "-k", "8",
                                      "--no-collapse", NULL}, &r); /* copies tie at the top */
    int found = 0;
    double top = -2;
    for (char *line = r.out; rc == 0 && line && *line;) {
        char *nl = strchr(line, '\n'), *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (nl) *nl = '\0';
        if (!t2) break;
        double score = atof(t1 + 1);
        if (top < -1) top = score;
        if (top < 0.999 || score < top - 1e-4) break; /* past the ties at the top */
        if (!strcmp(t2 + 1, path)) found = 1;
        line = nl ? nl + 1 : NULL;
    }
    if (!found) fprintf(stderr, "    search --image %s:\n%s%s", path, r.out, r.err);
    cli_run_free(&r);
    return found ? 0 : -1;
}

/* Sets path's mtime (ns) without touching its content. */
static inline int lu_set_mtime(const char *path, int64_t mtime_ns) {
    struct timespec ts[2] = {{mtime_ns / 1000000000, mtime_ns % 1000000000},
                             {mtime_ns / 1000000000, mtime_ns % 1000000000}};
    return utimensat(AT_FDCWD, path, ts, 0);
}

/* A socket file named name in dir, bound through the relative name (sun_path is
** short); the socket itself is closed (the file stays, as a dead server leaves it). */
static inline int lu_socket(const char *dir, const char *name) {
    struct sockaddr_un a;
    char cwd[4096];
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;
    if (fd < 0) return -1;
    if (!getcwd(cwd, sizeof cwd) || chdir(dir) != 0) {
        close(fd);
        return -1;
    }
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", name);
    rc = bind(fd, (struct sockaddr *)&a, sizeof a);
    close(fd);
    return chdir(cwd) == 0 ? rc : -1;
}

static inline int64_t lu_mtime(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec
                                : -1;
}

/* A P6 image of w x h whose pixels depend on seed: every such image of one size has
** the same byte size (a same-size replacement). Heap (free); *n bytes. */
static inline unsigned char *lu_ppm(int w, int h, uint64_t seed, size_t *n) {
    char head[32];
    int hl = snprintf(head, sizeof head, "P6\n%d %d\n255\n", w, h);
    unsigned char *b = malloc((size_t)hl + (size_t)w * h * 3);
    if (!b) return NULL;
    memcpy(b, head, (size_t)hl);
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
    int cx = (int)(seed % (uint64_t)w), cy = (int)((seed / 7) % (uint64_t)h);
    unsigned char fg[3] = {(unsigned char)(s >> 8), (unsigned char)(s >> 24), (unsigned char)(s >> 40)};
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            unsigned char *p = b + hl + ((size_t)y * w + x) * 3;
            int in = abs(x - cx) < w / 3 && abs(y - cy) < h / 4;
            p[0] = in ? fg[0] : (unsigned char)(x * 255 / w);
            p[1] = in ? fg[1] : (unsigned char)(y * 255 / h);
            p[2] = in ? fg[2] : (unsigned char)(seed * 37);
        }
    *n = (size_t)hl + (size_t)w * h * 3;
    return b;
}

#define LU_PIC_W 192
#define LU_PIC_H 144
/* lu_ppm's picture of seed, at half size (2x2 averages) or with noise (as a lossy
** re-encode leaves it) when asked, written to path. */
static inline int lu_write_pic(const char *path, uint64_t seed, int half, int noisy) {
    size_t n = 0;
    unsigned char *b = lu_ppm(LU_PIC_W, LU_PIC_H, seed, &n), *px;
    int rc = -1;
    if (!b) return -1;
    px = b + (n - (size_t)LU_PIC_W * LU_PIC_H * 3);
    if (noisy) {
        uint64_t s = seed + 5;
        for (size_t i = 0; i < (size_t)LU_PIC_W * LU_PIC_H * 3; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            int v = px[i] + (int)((s >> 33) % 9) - 4;
            px[i] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
    if (!half) {
        rc = lu_write(path, b, n);
    } else {
        int w = LU_PIC_W / 2, h = LU_PIC_H / 2;
        char head[32];
        int hl = snprintf(head, sizeof head, "P6\n%d %d\n255\n", w, h);
        unsigned char *o = malloc((size_t)hl + (size_t)w * h * 3);
        if (o) {
            memcpy(o, head, (size_t)hl);
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++)
                    for (int c = 0; c < 3; c++) {
                        const unsigned char *q = px + 3 * (2 * y * LU_PIC_W + 2 * x) + c;
                        int sum = q[0] + q[3] + q[3 * LU_PIC_W] + q[3 * LU_PIC_W + 3];
                        o[hl + 3 * (y * w + x) + c] = (unsigned char)((sum + 2) / 4);
                    }
            rc = lu_write(path, o, (size_t)hl + (size_t)w * h * 3);
            free(o);
        }
    }
    free(b);
    return rc;
}

/* Roots ca, cb, cc of 6 pictures each, plus copies of root r's pictures in root r + 1
** (pic 0: the same bytes, pic 1: half size, pic 2: noisy) and in root r (pic 3: the same
** bytes); a database of each (dbs[r]) with its phashes stored (reindex), and one of all
** (all). The copies collapsed across databases or servers are checked on them. */
static inline int lu_copy_fixtures(char roots[3][PATH_MAX], char dbs[3][PATH_MAX],
                                   char all[PATH_MAX]) {
    char p[PATH_MAX + 64];
    for (int r = 0; r < 3; r++) {
        lu_path(roots[r], sizeof roots[r], r == 0 ? "ca" : r == 1 ? "cb" : "cc");
        if (lu_mkdirs(roots[r])) return -1;
    }
    for (int r = 0; r < 3; r++) {
        const char *next = roots[(r + 1) % 3];
        uint64_t seed = 1000 + 10 * (uint64_t)r;
        for (int i = 0; i < 6; i++) {
            snprintf(p, sizeof p, "%s/pic%d.ppm", roots[r], i);
            if (lu_write_pic(p, seed + (uint64_t)i, 0, 0)) return -1;
        }
        snprintf(p, sizeof p, "%s/from%d_same.ppm", next, r);
        if (lu_write_pic(p, seed, 0, 0)) return -1;
        snprintf(p, sizeof p, "%s/from%d_half.ppm", next, r);
        if (lu_write_pic(p, seed + 1, 1, 0)) return -1;
        snprintf(p, sizeof p, "%s/from%d_noisy.ppm", next, r);
        if (lu_write_pic(p, seed + 2, 0, 1)) return -1;
        snprintf(p, sizeof p, "%s/pic3_copy.ppm", roots[r]);
        if (lu_write_pic(p, seed + 3, 0, 0)) return -1;
    }
    for (int r = 0; r < 4; r++) {
        char *db = r < 3 ? dbs[r] : all;
        const char *paths[4] = {roots[r % 3], NULL, NULL, NULL};
        if (r == 3) paths[1] = roots[1], paths[2] = roots[2];
        snprintf(db, PATH_MAX, "%s.db", r < 3 ? roots[r] : roots[0]);
        if (r == 3) lu_path(db, PATH_MAX, "call.db");
        if (lu_db_of(db, paths, 0) ||
            lu_expect((const char *[]){"reindex", "--db", db, NULL}, 0, NULL))
            return -1;
    }
    return 0;
}

#endif /* CDB_TEST_LIB_UTIL_H */
