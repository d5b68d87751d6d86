/*
** deep.c: `verify --deep` and the deep half of `reindex --repair`: the checks that
** need the photos themselves, not only the database.
**
**   - every ok file is read again and its bytes compared with the recorded hash:
**     a file whose bytes changed while its size, times and inode did not (bit rot,
**     a copy made behind clipdb's back) holds a vector of other content;
**   - a sample of them is decoded and encoded again and the vector compared with
**     the stored one, element by element: one fp16 ulp allowed (the vector may have
**     been stored on another machine's ISA path or by the CUDA backend, which round
**     the last bit differently; batches do not, on one CPU path), or 2^-20 in
**     absolute terms near zero, and cosine >= 0.99999.
**
** The sample is the files whose id hashes below the fraction asked for, so verify
** and a repair after it look at the same files. Files are opened the one way a
** recorded photo is (cdb_eng_open_row: never a link, FIFO or other file in its
** place). Files whose stat changed since they were stored, or that something else
** replaced, are stale (the next reindex updates them), files that are gone or on a
** folder that is missing are counted, none of them is a problem.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/library/library.h"
#include "kernels/kernels.h"

typedef struct deep_ctx {
    cdb_db *db;
    cdb_model *m;
    int64_t model_id;
    int dim, decode; /* the vector set's decode mode */
    int64_t max_pixels; /* the database's pixel limit (0: the default) */
    const cdb_preprocess_params *pp;
    double sample;
    eng_library lib;
    cdb_db_report *r;
    eng_deep_info info;
    float *pixels, *vec, *stored;
    uint16_t *v16, *s16;
    const cdb_engine_events *ev;
    int64_t total;
    cdb_status rc;
} deep_ctx;

/* splitmix64: a fixed, well-mixed hash of the file id. */
static uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static int in_sample(int64_t id, double fraction) {
    return (double)(mix64((uint64_t)id) >> 11) < fraction * 9007199254740992.0; /* 2^53 */
}

/* fp16 bit patterns on one ordered integer line, so ulps are a subtraction. */
static int32_t f16_order(uint16_t h) { return h & 0x8000 ? -(int32_t)(h & 0x7fff) : (int32_t)h; }

static float cosine(const float *a, const float *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? (float)(ab / sqrt(aa * bb)) : 0.0f;
}

/* Re-encodes a file whose bytes are buf and compares with its stored vector. */
static void check_vector(deep_ctx *d, const cdb_db_file *f, const eng_root *root, const char *path,
                         const unsigned char *buf, size_t n) {
    char reason[256];
    int32_t w, h;
    uint8_t found = 0;
    cdb_status rc;
    if ((rc = cdb_db_vectors_get(d->db, d->model_id, &f->id, 1, d->stored, &found)) != CDB_OK) {
        if (rc == CDB_NOMEM) d->rc = rc;
        else d->info.n_unreadable++; /* a missing or damaged shard: cdb_db_verify reports it */
        return;
    }
    if (!found) return; /* cdb_db_verify reports an ok file without its vector */
    eng_readfail k = cdb_eng_decode_photo(buf, n, !root->no_exif, d->decode, d->max_pixels, d->pp,
                                          d->pixels, NULL, &w, &h, NULL, 0, NULL, NULL, reason,
                                          sizeof reason);
    if (k != ENG_FAIL_NONE) {
        cdb_db_report_add(d->r, CDB_DB_VECTOR_MISMATCH, f->shard, d->model_id, f->id,
                          "%s: stored as ok, but now %s", path, reason);
        return;
    }
    if ((rc = cdb_encode_pixels(d->m, d->pixels, 1, 0, d->vec)) != CDB_OK ||
        cdb_db_encode_vector(d->vec, d->dim, d->v16) != CDB_OK) {
        d->info.n_unreadable++; /* the encoder, not the file: nothing to say about it */
        return;
    }
    d->info.n_encoded++;
    cdb_k_f32_to_f16(d->stored, d->s16, (size_t)d->dim); /* exact: the stored bits */
    cdb_k_f16_to_f32(d->v16, d->vec, (size_t)d->dim);
    /* Another ISA path or device differs far below an fp16 ulp, which moves an
    ** element's rounding by one ulp at most; near zero, in fp16's subnormal range, one
    ** ulp is 6e-8 and a few of them are still far below anything that tells two photos
    ** apart: there the bound is absolute. */
    int32_t worst = 0, off = 0;
    for (int i = 0; i < d->dim; i++) {
        int32_t u = abs(f16_order(d->v16[i]) - f16_order(d->s16[i]));
        if (u > worst) worst = u;
        off |= u > 1 && fabsf(d->vec[i] - d->stored[i]) > 0x1p-20f;
    }
    if (worst > d->info.max_ulp) d->info.max_ulp = worst;
    if (off || cosine(d->vec, d->stored, d->dim) < 0.99999f) {
        cdb_db_report_add(d->r, CDB_DB_VECTOR_MISMATCH, f->shard, d->model_id, f->id,
                          "%s: encoding it again gives another vector (elements differ by up to "
                          "%d fp16 ulps, cosine %.6f)",
                          path, (int)worst, (double)cosine(d->vec, d->stored, d->dim));
    }
}

static int on_ok_file(const cdb_db_file *f, void *ud) {
    deep_ctx *d = ud;
    const eng_root *root = cdb_eng_library_root(&d->lib, f->root_id);
    cdb_db_file_meta now;
    unsigned char *buf = NULL;
    char reason[256];
    struct stat st;
    eng_row_ref ref;
    eng_open_rc orc;
    char *path;
    int fd = -1;
    d->info.n_files++;
    cdb_eng_progress(d->ev, CDB_ENGINE_PROGRESS_UPDATE, "verify --deep", d->info.n_files, d->total,
                     0);
    if (!root || !root->present) {
        d->info.n_gone++; /* its folder is missing: reindex reports it */
        return 0;
    }
    if (!(path = cdb_db_path_join(root->path, f->relpath))) {
        d->rc = cdb_seterr(CDB_NOMEM, "out of memory");
        return 1;
    }
    memset(&now, 0, sizeof now);
    ref.root = root->path;
    ref.relpath = f->relpath;
    ref.follow_symlinks = root->follow_symlinks;
    ref.rec = &f->meta;
    orc = cdb_eng_open_row(&ref, &fd, &st, NULL, 0);
    if (orc == ENG_OPEN_ERROR) {
        d->info.n_unreadable++; /* a folder above it without permission, I/O errors */
    } else if (orc == ENG_OPEN_GONE) {
        d->info.n_gone++;
    } else if (orc == ENG_OPEN_CHANGED ||
               (cdb_eng_stat_meta(&st, &now), !cdb_db_same_stat(&f->meta, &now))) {
        d->info.n_stale++; /* another file, a link or a FIFO there now, or a new ctime */
    } else if (cdb_eng_read_photo_fd(fd, &st, 0, &buf, &now, reason, sizeof reason) !=
               ENG_FAIL_NONE) {
        d->info.n_unreadable++;
    } else {
        d->info.n_hashed++;
        if (!f->meta.has_hash || memcmp(now.hash, f->meta.hash, CDB_DB_HASH_BYTES))
            cdb_db_report_add(d->r, CDB_DB_FILE_CHANGED, f->shard, 0, f->id,
                              "%s: its bytes differ from what was stored (same size, times and "
                              "inode): its vector describes other content",
                              path);
        else if (in_sample(f->id, d->sample))
            check_vector(d, f, root, path, buf, (size_t)now.size);
    }
    if (fd >= 0) close(fd);
    free(buf);
    cdb_free(path);
    return d->rc != CDB_OK;
}

cdb_status cdb_eng_deep_check(cdb_db *db, cdb_model *m, int64_t model_id, double sample,
                          cdb_db_report *r, const cdb_engine_events *ev, eng_deep_info *info) {
    deep_ctx d;
    cdb_db_counts counts;
    cdb_status rc;
    memset(&d, 0, sizeof d);
    d.db = db;
    d.m = m;
    d.model_id = model_id;
    cdb_db_model dm;
    if (cdb_db_model_get(db, model_id, &dm) == CDB_OK) d.decode = dm.decode;
    if (cdb_db_max_pixels(db, &d.max_pixels) != CDB_OK) d.max_pixels = 0;
    d.dim = cdb_model_get_info(m)->embed_dim;
    d.pp = &cdb_model_get_info(m)->preprocess;
    d.sample = sample;
    d.r = r;
    d.ev = ev;
    d.pixels = malloc(sizeof *d.pixels * 3 * (size_t)d.pp->size * (size_t)d.pp->size);
    d.vec = malloc(sizeof *d.vec * (size_t)d.dim);
    d.stored = malloc(sizeof *d.stored * (size_t)d.dim);
    d.v16 = malloc(sizeof *d.v16 * (size_t)d.dim);
    d.s16 = malloc(sizeof *d.s16 * (size_t)d.dim);
    if (!d.pixels || !d.vec || !d.stored || !d.v16 || !d.s16) {
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = cdb_eng_library_load(db, &d.lib)) != CDB_OK) goto done;
    memset(&counts, 0, sizeof counts);
    cdb_db_get_counts(db, model_id, &counts);
    d.total = counts.files[CDB_DB_OK];
    cdb_eng_progress(ev, CDB_ENGINE_PROGRESS_START, "verify --deep", 0, d.total, 0);
    rc = cdb_db_files_foreach(db, 0, CDB_DB_MASK_OK, on_ok_file, &d);
    if (rc == CDB_OK) rc = d.rc;
    cdb_eng_progress(ev, CDB_ENGINE_PROGRESS_END, "verify --deep", d.info.n_files, d.total, 0);
done:
    if (info) *info = d.info;
    cdb_eng_library_free(&d.lib);
    free(d.pixels);
    free(d.vec);
    free(d.stored);
    free(d.v16);
    free(d.s16);
    return rc;
}
