/*
** pipeline.c: the ingest pipeline shared by `ingest` and `reindex`.
**
**   walker (calling thread) -> Q1 -> readers x N -> Q2 -> encoder x 1 -> Q3 -> writer x 1
**
** - walker (scan.c): walks each target, looks every file up in the catalog through
**   a read-only handle, and skips without reading it what is unchanged. Everything
**   else becomes a job that carries its root id, relative path and full path.
** - readers: read the whole file, hash it (XXH3-128), and decide: same hash as the
**   catalog's -> metadata-only update (touch); a new path whose content is an ok
**   file of any root whose old path is gone -> move (keeps its vector); a file
**   that is neither named nor shaped like an image -> skipped; otherwise decode +
**   preprocess. Failures are permanent (quarantined) or transient (retried by the
**   next run): imagefile.c classifies them. On a GPU (c->dev_pp) a reader keeps the
**   decoded image as it is, for the device transform, while the pool of kept images
**   has room (half the decode budget's bytes; else it preprocesses it here), and
**   (c->dev_jpeg: fast mode) the bytes of a JPEG nvJPEG takes, undecoded; its
**   thumbnail, when the database makes them, comes from a DCT-scaled CPU decode (the
**   fast mode's, at 1/2 to 1/8 of the full size).
** - encoder: batches the jobs (--batch; not given: what the device's free memory
**   allows, 32 on the CPU), runs the image tower (preprocessed floats, decoded images
**   and JPEG bytes each in one call: encode_jobs), gives each item its own vector; a
**   file that neither nvJPEG nor the CPU decodes is the file's failure. A batch that runs out of (device) memory is split in
**   halves, and the run keeps the smaller size (cdb_k_run_batched); a batch that
**   fails otherwise is retried item by item, each item with its own status; an
**   item that still fails is a transient failure. Items
**   are never positional: every result carries its own path and vector.
** - writer: stages results into cdb_db batches and commits them every
**   ENG_COMMIT_EVERY operations or every second, whichever comes first (the
**   crash-safe write order is db/'s), so a search sees new photos quickly.
**
** Queues are bounded, so memory stays flat whatever the library's size. After the
** walk, cdb_scan_finish runs the deletion pass and the roots' bookkeeping. Ctrl-C: the
** walker stops, readers drop their queued jobs, the encoder flushes its partial
** batch and the writer commits; no deletion pass.
*/
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/ingest/ingest.h"

#define ENG_COMMIT_EVERY 256
#define ENG_COMMIT_NS 1000000000LL /* also commit at least once a second */

/* ---- readers ----------------------------------------------------------------------- */

/* Takes file id for one move in this run; 0 when another job took it first. */
static int claim(pipe_ctx *c, int64_t id) {
    int ok = 1;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n_claimed; i++)
        if (c->claimed[i] == id) ok = 0;
    if (ok) {
        if (cdb_eng_grow((void **)&c->claimed, &c->cap_claimed, (size_t)c->n_claimed,
                         sizeof *c->claimed) == 0)
            c->claimed[c->n_claimed++] = id;
        else
            ok = 0;
    }
    pthread_mutex_unlock(&c->mu);
    return ok;
}

/* An ok file of any root with this content whose path is gone (from a place that is
** still there, cdb_eng_library_gone): a move. Not out of a root that is missing: its rows
** stay as they are until it comes back, is moved (`clipdb move`) or forgotten (copies
** made before a drive was unplugged are new files, not its files moving away). */
static int64_t find_moved(pipe_ctx *c, cdb_db *rdb, const job *j) {
    int64_t ids[16];
    int n = 0;
    if (cdb_db_files_by_hash(rdb, 0, j->meta.hash, ids, 16, &n) != CDB_OK) return 0;
    for (int i = 0; i < n && i < 16; i++) {
        cdb_db_file f;
        const eng_root *r;
        char *path;
        int gone;
        if (ids[i] == j->file_id || cdb_db_file_get(rdb, ids[i], &f) != CDB_OK) continue;
        r = cdb_eng_library_root(c->lib, f.root_id);
        path = r && r->present ? cdb_db_path_join(r->path, f.relpath) : NULL;
        gone = path && cdb_eng_library_gone(c->lib, f.root_id, path, f.meta.dev);
        cdb_free(path);
        cdb_db_file_clear(&f);
        if (gone && claim(c, ids[i])) return ids[i];
    }
    return 0;
}

/* A failure of kind k with reason already in j->reason. A transient failure of a
** file whose row is current keeps the row (and its vector) as it is. */
static void job_failed(job *j, eng_readfail k) {
    if (k == ENG_FAIL_GONE) j->kind = R_GONE;
    else if (k == ENG_FAIL_NOT_IMAGE) j->kind = R_SKIP;
    else if (k == ENG_FAIL_PERMANENT) j->kind = R_ERROR;
    else j->kind = j->row_current ? R_KEEP : R_RETRY;
}

/* cdb_eng_decode_photo under the run's budget of decoded pixels in flight: the
** photo's pixels, as its header declares them, are taken before and given back
** after (none for a photo over the pixel limit: it is refused before decoding).
** phash (may be NULL): the decode's phash where it is the phash's own. */
static eng_readfail decode_budgeted(pipe_ctx *c, const unsigned char *buf, size_t n,
                                    int apply_exif, float *pixels, cdb_image **keep,
                                    int32_t *w, int32_t *h,
                                    int64_t ns[2], eng_thumb *thumb, eng_phash *phash,
                                    char *reason, size_t reason_size) {
    int pw = 0, ph = 0;
    int64_t px = 0, limit = c->o->max_pixels > 0 ? c->o->max_pixels : CDB_IMAGE_DEFAULT_MAX_PIXELS;
    if (cdb_image_probe(buf, n, &pw, &ph) == CDB_OK && pw > 0 && ph > 0)
        px = (int64_t)pw * ph;
    if (px > limit) px = 0;
    cdb_eng_budget_take(&c->budget, px);
    eng_readfail k = cdb_eng_decode_photo(buf, n, apply_exif, c->o->decode, c->o->max_pixels, c->pp,
                                          pixels, keep, w, h, ns, c->o->thumb_px, thumb,
                                          phash, reason, reason_size);
    cdb_eng_budget_give(&c->budget, px);
    return k;
}

/* The bytes of a file the walker found unchanged (its stat is the row's), read the
** one way a recorded photo is (cdb_eng_open_row), from its root (the library's
** record of it); links are followed only where the root's walks follow them. */
static eng_readfail read_recorded(pipe_ctx *c, job *j, unsigned char **buf,
                                  cdb_db_file_meta *m) {
    const eng_root *r = cdb_eng_library_root(c->lib, j->root_id);
    eng_row_ref ref;
    struct stat st;
    eng_readfail rc;
    int fd;
    *buf = NULL;
    if (!r) return ENG_FAIL_GONE;
    ref.root = r->path;
    ref.relpath = j->relpath;
    ref.follow_symlinks = r->follow_symlinks;
    ref.rec = &j->meta;
    if (cdb_eng_open_row(&ref, &fd, &st, j->reason, sizeof j->reason) != ENG_OPEN_OK)
        return ENG_FAIL_GONE; /* changed since the walk: the next run sees it */
    rc = cdb_eng_read_photo_fd(fd, &st, 0, buf, m, j->reason, sizeof j->reason);
    close(fd);
    return rc;
}

/* Files larger than this stay with the CPU decoders (the bytes wait for the encoder). */
#define ENG_NVJPEG_MAX_FILE ((size_t)16 << 20)

/* 1 when j's bytes go to nvJPEG on the device (cdb_image_pick_decoder says so, the
** header's size is within the pixel limit): its size is then the header's (such a JPEG
** has no EXIF rotation). */
static int to_nvjpeg(pipe_ctx *c, job *j, const unsigned char *buf) {
    size_t n = (size_t)j->meta.size;
    int64_t limit = c->o->max_pixels > 0 ? c->o->max_pixels : CDB_IMAGE_DEFAULT_MAX_PIXELS;
    int w = 0, h = 0;
    if (!c->dev_jpeg || n > ENG_NVJPEG_MAX_FILE ||
        cdb_image_pick_decoder(buf, n, CDB_DECODE_FAST, 1, NULL) != CDB_DECODER_NVJPEG ||
        cdb_image_probe(buf, n, &w, &h) != CDB_OK || w <= 0 || h <= 0 ||
        (int64_t)w * h > limit)
        return 0;
    j->meta.width = w, j->meta.height = h;
    return 1;
}

/* The photo's metadata, from the bytes already read (never an error: a photo with
** broken metadata keeps its pixels and vector, cdb_photo_meta_read), and with_phash (a
** reindex's backfill of an unchanged file) its perceptual hash; a new or changed file's
** comes from the ingest's own decode where that gives it (process: every YCbCr or gray
** JPEG, exact or fast, and the formats cdb_eng_phash_of_decoded names), else is left to
** the next reindex or duplicates run: a decode of its own would cost a quarter of a large
** JPEG's (cdb_eng_phash_of says why). */
static void read_photo(job *j, const unsigned char *buf, size_t n, int with_phash) {
    j->has_photo = cdb_photo_meta_read(buf, n, &j->photo) == CDB_OK;
    if (j->has_photo && with_phash) cdb_eng_phash_of(buf, n, &j->phash);
}

/* Reads, hashes and classifies one job; decodes and preprocesses an image. */
static void process(pipe_ctx *c, cdb_db *rdb, job *j) {
    unsigned char *buf = NULL;
    cdb_db_file_meta m = j->meta; /* the walk's stat, until the read's */
    int64_t t0 = cdb_now_ns(), ns[2] = {0, 0};
    eng_readfail k;
    if (j->kind == R_TOUCH) return; /* decided by the walker (a first identity) */
    if (j->thumb_only) { /* unchanged: its thumbnail or metadata, from the same bytes */
        int32_t w, h;
        j->kind = R_THUMB;
        k = read_recorded(c, j, &buf, &m);
        atomic_fetch_add(&c->ns_read, cdb_now_ns() - t0);
        if (k == ENG_FAIL_NONE && !memcmp(j->old_hash, m.hash, CDB_DB_HASH_BYTES)) {
            if (j->want_photo) read_photo(j, buf, (size_t)m.size, 1);
            if (j->want_thumb)
                decode_budgeted(c, buf, (size_t)m.size, !j->no_exif, NULL, NULL, &w, &h, ns,
                                &j->thumb, NULL, j->reason, sizeof j->reason);
        }
        atomic_fetch_add(&c->ns_decode, ns[0]);
        free(buf);
        return;
    }
    k = cdb_eng_read_photo(j->path, j->sniff, &buf, &m, j->reason, sizeof j->reason);
    atomic_fetch_add(&c->ns_read, cdb_now_ns() - t0);
    if (k != ENG_FAIL_NONE) {
        job_failed(j, k);
        return;
    }
    j->meta = m;
    if (j->has_old_hash && !memcmp(j->old_hash, j->meta.hash, CDB_DB_HASH_BYTES)) {
        free(buf);
        j->kind = R_TOUCH;
        return;
    }
    t0 = cdb_now_ns();
    /* A move lands on this path: only where no row with vectors may be (a pending row
    ** of an interrupted run may hold one already: it is simply encoded again, and the
    ** gone file's row is marked deleted by the deletion pass). */
    j->move_from = j->was_ok || j->was_pending ? 0 : find_moved(c, rdb, j);
    atomic_fetch_add(&c->ns_read, cdb_now_ns() - t0);
    if (j->move_from > 0) {
        free(buf);
        j->kind = R_MOVE;
        return;
    }
    j->real_photo = !cdb_image_world_marked(buf, (size_t)j->meta.size);
    read_photo(j, buf, (size_t)j->meta.size, 0);
    if (to_nvjpeg(c, j, buf)) { /* decoded on the device by the encoder */
        if (c->o->thumb_px > 0) { /* the thumbnail needs host pixels: a DCT-scaled decode */
            char why[256];
            int32_t w, h;
            decode_budgeted(c, buf, (size_t)j->meta.size, !j->no_exif, NULL, NULL, &w, &h, ns,
                            &j->thumb, &j->phash, why, sizeof why); /* nvJPEG judges it */
            atomic_fetch_add(&c->ns_decode, ns[0]);
        }
        j->file = buf;
        j->file_len = (size_t)j->meta.size;
        j->kind = R_IMAGE;
        return;
    }
    if (!(j->pixels = malloc(sizeof *j->pixels * 3 * (size_t)c->pp->size * (size_t)c->pp->size))) {
        free(buf);
        snprintf(j->reason, sizeof j->reason, "out of memory preprocessing");
        job_failed(j, ENG_FAIL_TRANSIENT);
        return;
    }
    k = decode_budgeted(c, buf, (size_t)j->meta.size, !j->no_exif, j->pixels,
                        c->dev_pp ? &j->img : NULL, &j->meta.width, &j->meta.height, ns,
                        &j->thumb, &j->phash, j->reason, sizeof j->reason);
    if (j->img) { /* kept for the device transform, when the pool of kept images has room */
        int64_t bytes = (int64_t)j->img->width * j->img->height * j->img->channels;
        if (cdb_eng_budget_keep(&c->budget, bytes)) {
            j->img_bytes = bytes;
            atomic_fetch_add(&c->n_kept, 1);
            free(j->pixels);
            j->pixels = NULL;
        } else {
            int64_t t1 = cdb_now_ns();
            k = cdb_eng_preprocess_kept(&j->img, c->pp, j->pixels, j->reason, sizeof j->reason);
            ns[1] += cdb_now_ns() - t1;
        }
    }
    free(buf);
    atomic_fetch_add(&c->ns_decode, ns[0]);
    atomic_fetch_add(&c->ns_preprocess, ns[1]);
    if (k != ENG_FAIL_NONE) {
        free(j->pixels);
        j->pixels = NULL;
        job_failed(j, k);
        return;
    }
    j->kind = R_IMAGE;
}

static void *reader_main(void *arg) {
    pipe_ctx *c = arg;
    cdb_db *rdb = NULL;
    cdb_db_params p = cdb_db_params_default();
    job *j;
    p.readonly = 1;
    if (cdb_db_open(c->db_dir, &p, &rdb) != CDB_OK) {
        cdb_pipe_fatal(c, CDB_IO, "cannot open the database for reading (%s)", cdb_errmsg());
        rdb = NULL;
    }
    while ((j = cdb_eng_queue_pop(c->q1))) {
        if (cdb_pipe_stopping(c) || !rdb) {
            cdb_job_free(j); /* interrupted: not processed, not counted */
            continue;
        }
        process(c, rdb, j);
        if (cdb_eng_queue_push(c->q2, j) != 0) cdb_job_free(j);
    }
    cdb_db_close(rdb);
    if (atomic_fetch_sub(&c->readers_left, 1) == 1) cdb_eng_queue_close(c->q2); /* the last one */
    return NULL;
}

/* ---- encoder ----------------------------------------------------------------------- */

/* Encodes jobs b[0..n) into out (row i: job i), each kind in one call: the
** preprocessed ones (the run's encode hook, else cdb_encode_pixels), the decoded images
** (cdb_encode_images: the device transform) and the files' bytes (cdb_encode_files:
** nvJPEG); file_rc[i]: job i's file decode status (CDB_OK for the other kinds). px:
** room for n images' floats. Returns the first call's failure. */
static cdb_status encode_jobs(pipe_ctx *c, job **b, int n, float *px, float *out,
                              cdb_status *file_rc) {
    const size_t per = 3 * (size_t)c->pp->size * (size_t)c->pp->size, E = (size_t)c->dim;
    float *tmp = malloc(sizeof *tmp * E * (size_t)n);
    const cdb_image **imgs = malloc(sizeof *imgs * (size_t)n);
    const void **bufs = malloc(sizeof *bufs * (size_t)n);
    size_t *lens = malloc(sizeof *lens * (size_t)n);
    cdb_status *frc = malloc(sizeof *frc * (size_t)n), rc = CDB_OK;
    int *at = malloc(sizeof *at * (size_t)n);
    int64_t t0 = cdb_now_ns();
    if (!tmp || !imgs || !bufs || !lens || !frc || !at) rc = cdb_seterr(CDB_NOMEM, "encoder batch");
    for (int i = 0; i < n; i++) file_rc[i] = CDB_OK;
    for (int kind = 0; kind < 3 && rc == CDB_OK; kind++) { /* pixels, images, files */
        int m = 0;
        for (int i = 0; i < n; i++) {
            const job *j = b[i];
            if ((j->file ? 2 : j->img ? 1 : 0) != kind) continue;
            at[m] = i;
            if (kind == 0) memcpy(px + per * (size_t)m, j->pixels, per * sizeof *px);
            else if (kind == 1) imgs[m] = j->img;
            else bufs[m] = j->file, lens[m] = j->file_len;
            m++;
        }
        if (!m) continue;
        if (kind == 0) {
            rc = c->o->encode ? c->o->encode(c->o->encode_ud, c->model, px, m, tmp)
                              : cdb_encode_pixels(c->model, px, m, 0, tmp);
        } else if (kind == 1) {
            rc = cdb_encode_images(c->model, imgs, m, 0, tmp);
        } else {
            cdb_image_params ip = cdb_image_params_default();
            ip.decode = CDB_DECODE_FAST;
            ip.target_size = c->pp->size;
            ip.max_pixels = c->o->max_pixels > 0 ? c->o->max_pixels : 0;
            rc = cdb_encode_files(c->model, bufs, lens, m, &ip, 0, tmp, frc, NULL);
        }
        for (int q = 0; q < m && rc == CDB_OK; q++) {
            memcpy(out + E * (size_t)at[q], tmp + E * (size_t)q, E * sizeof *out);
            if (kind == 2) file_rc[at[q]] = frc[q];
        }
        c->n_batches++;
    }
    c->ns_encode += cdb_now_ns() - t0;
    free(tmp), free(imgs), free(bufs), free(lens), free(frc), free(at);
    return rc;
}

/* Frees what job j carried to the encoder. */
static void drop_input(pipe_ctx *c, job *j) {
    free(j->pixels);
    j->pixels = NULL;
    cdb_image_free(j->img);
    j->img = NULL;
    cdb_eng_budget_unkeep(&c->budget, j->img_bytes);
    j->img_bytes = 0;
    free(j->file);
    j->file = NULL;
}

/* Item i's vector from out, or its own transient failure. */
static void give_vector(pipe_ctx *c, job *j, const float *v, cdb_status rc) {
    if (rc != CDB_OK) {
        const char *m = cdb_errmsg();
        snprintf(j->reason, sizeof j->reason, "cannot encode: %.200s",
                 m && *m ? m : cdb_status_str(rc));
        job_failed(j, ENG_FAIL_TRANSIENT); /* memory, the device: nothing about the file */
    } else if ((j->vec = malloc(sizeof(float) * (size_t)c->dim))) {
        memcpy(j->vec, v, sizeof(float) * (size_t)c->dim);
    } else {
        snprintf(j->reason, sizeof j->reason, "out of memory");
        job_failed(j, ENG_FAIL_TRANSIENT);
    }
    drop_input(c, j);
}

/* A file nvJPEG did not take that the CPU decoders refused too: decoded alone once more
** for the decoder's own words, then a failure of the file as a reader's would be. */
static void file_failed(pipe_ctx *c, job *j, cdb_status rc) {
    cdb_image_params ip = cdb_image_params_default();
    cdb_image *img = NULL;
    ip.decode = CDB_DECODE_FAST;
    ip.target_size = c->pp->size;
    ip.max_pixels = c->o->max_pixels > 0 ? c->o->max_pixels : 0;
    if (cdb_image_decode(j->file, j->file_len, &ip, &img) == CDB_OK) /* decodes now: */
        cdb_seterr(rc, "%s", cdb_status_str(rc));                  /* the first status */
    cdb_image_free(img);
    snprintf(j->reason, sizeof j->reason, "cannot decode: %.200s", cdb_errmsg());
    job_failed(j, rc == CDB_NOMEM ? ENG_FAIL_TRANSIENT : ENG_FAIL_PERMANENT);
    drop_input(c, j);
}

/* cdb_k_run_batched's view of one encoder batch: items [first, first + count). */
typedef struct enc_span {
    pipe_ctx *c;
    job **b;
    float *px;
    float *out;
    cdb_status *file_rc;
} enc_span;

static cdb_status encode_span(void *ud, int first, int count) {
    enc_span *s = ud;
    return encode_jobs(s->c, s->b + first, count, s->px, s->out + (size_t)first * s->c->dim,
                       s->file_rc + first);
}

/* Encodes the batch in calls of at most c->enc_batch items: a call that runs out of
** (device) memory is split in halves, and the smaller size kept for the run. Items of
** a call that failed otherwise are encoded again one by one, each with its own result.
** file_rc: room for n statuses. */
static void encode_batch(pipe_ctx *c, job **b, int n, float *px, float *out,
                         cdb_status *file_rc) {
    enc_span span = {c, b, px, out, file_rc};
    int done = 0;
    cdb_status rc = cdb_k_run_batched(n, &c->enc_batch, encode_span, &span, &done);
    for (int i = 0; i < n; i++) {
        cdb_status ri = i < done ? CDB_OK : rc;
        if (ri != CDB_OK && n > 1) ri = encode_jobs(c, b + i, 1, px, out + (size_t)i * c->dim,
                                                    file_rc + i);
        if (ri == CDB_OK && file_rc[i] != CDB_OK)
            file_failed(c, b[i], file_rc[i]);
        else
            give_vector(c, b[i], out + (size_t)i * c->dim, ri);
        if (cdb_eng_queue_push(c->q3, b[i]) != 0) cdb_job_free(b[i]);
    }
}

static void *encoder_main(void *arg) {
    pipe_ctx *c = arg;
    int cap = c->o->batch, n = 0;
    job **b = calloc((size_t)cap, sizeof *b);
    float *px = malloc(sizeof *px * 3 * (size_t)c->pp->size * (size_t)c->pp->size * (size_t)cap);
    float *out = malloc(sizeof *out * (size_t)c->dim * (size_t)cap);
    cdb_status *frc = malloc(sizeof *frc * (size_t)cap);
    job *j;
    if (!b || !px || !out || !frc)
        cdb_pipe_fatal(c, CDB_NOMEM, "out of memory for the encoder batch");
    for (;;) {
        int64_t t0 = cdb_now_ns();
        if (!(j = cdb_eng_queue_pop(c->q2))) break;
        c->ns_encode_wait += cdb_now_ns() - t0;
        if (j->kind != R_IMAGE || !b || !px || !out || !frc) {
            if (cdb_eng_queue_push(c->q3, j) != 0) cdb_job_free(j);
            continue;
        }
        b[n++] = j;
        if (n == cap) {
            encode_batch(c, b, n, px, out, frc);
            n = 0;
        }
    }
    if (n) encode_batch(c, b, n, px, out, frc); /* the partial last batch (also on Ctrl-C) */
    cdb_eng_queue_close(c->q3);
    free(b);
    free(px);
    free(out);
    free(frc);
    return NULL;
}

/* ---- writer ------------------------------------------------------------------------ */

/* Thumbnails waiting for their batch's commit (the file ids of new files are known
** only then): op >= 0 is the staged operation's index in the batch, else file_id is
** known already (thumbnail-only jobs). */
typedef struct pending_thumb {
    int op;
    cdb_db_thumb t;
    unsigned char *jpeg; /* owned */
} pending_thumb;

/* What the staged batch will change, counted into the summary only once it commits:
** after a failed commit (a full disk) the summary says what is stored, not what was
** tried. */
typedef struct staged_counts {
    int64_t added, changed, errors, retry, touched, moved, real_photos;
} staged_counts;

/* Photo metadata rows waiting for their batch's commit, as thumbnails do. */
typedef struct pending_photo {
    int op;
    cdb_db_photo row;
} pending_photo;

typedef struct writer_state {
    staged_counts staged;
    pending_thumb *p;
    int n;
    size_t cap;
    pending_photo *ph;
    int n_ph;
    size_t cap_ph;
    int64_t *ids;        /* one per staged operation, filled by the commit */
    int ids_cap;
} writer_state;

static void thumbs_free(writer_state *w) {
    for (int i = 0; i < w->n; i++) free(w->p[i].jpeg);
    w->n = 0;
}

/* Takes j's thumbnail (for operation op, or for j's file when op < 0). */
static void keep_thumb(pipe_ctx *c, writer_state *w, job *j, int op) {
    if (!j->thumb.jpeg) return;
    if (cdb_eng_grow((void **)&w->p, &w->cap, (size_t)w->n, sizeof *w->p) != 0)
        return; /* only a thumbnail: the next reindex makes it */
    pending_thumb *t = &w->p[w->n++];
    memset(t, 0, sizeof *t);
    t->op = op;
    t->t.file_id = op < 0 ? j->file_id : 0;
    memcpy(t->t.hash, op < 0 ? j->old_hash : j->meta.hash, CDB_DB_HASH_BYTES);
    t->t.px = c->o->thumb_px;
    t->t.width = j->thumb.width;
    t->t.height = j->thumb.height;
    t->t.jpeg = t->jpeg = j->thumb.jpeg;
    t->t.n_bytes = j->thumb.n;
    j->thumb.jpeg = NULL;
}

/* Keeps j's metadata row (for operation op, or for j's file when op < 0). */
static void keep_photo(writer_state *w, job *j, int op) {
    if (!j->has_photo) return;
    if (cdb_eng_grow((void **)&w->ph, &w->cap_ph, (size_t)w->n_ph, sizeof *w->ph) != 0)
        return; /* the next reindex reads it */
    pending_photo *p = &w->ph[w->n_ph++];
    p->op = op;
    cdb_eng_photo_row(&j->photo, &j->phash, op < 0 ? j->file_id : 0,
                      op < 0 ? j->old_hash : j->meta.hash, &p->row);
}

/* Stores the metadata rows of the committed batch (n operations, their file ids in
** w->ids when known). A failure is logged: the next reindex reads them again. */
static void put_photos(pipe_ctx *c, writer_state *w, int n) {
    cdb_db_photo *rows = malloc(sizeof *rows * (size_t)w->n_ph);
    int k = 0;
    for (int i = 0; rows && i < w->n_ph; i++) {
        pending_photo *p = &w->ph[i];
        if (p->op >= 0) p->row.file_id = p->op < n && n <= w->ids_cap ? w->ids[p->op] : 0;
        if (p->row.file_id > 0) rows[k++] = p->row;
    }
    if (rows && k && cdb_db_photos_put(c->db, rows, k) != CDB_OK)
        CDB_LOG_WARN("photo metadata not stored (%s); the next reindex reads it", cdb_errmsg());
    free(rows);
    w->n_ph = 0;
}

/* Commits the batch, then stores the thumbnails it made (a failure to store them is
** logged: they are a cache, made again by the next reindex). */
static void commit(pipe_ctx *c, cdb_db_batch *b, writer_state *w) {
    cdb_status rc;
    int n = cdb_db_batch_count(b);
    if (n > 0) {
        if (n > w->ids_cap) {
            int64_t *p = realloc(w->ids, sizeof *p * (size_t)n);
            if (p) {
                w->ids = p;
                w->ids_cap = n;
            }
        }
        if ((rc = cdb_db_batch_commit(b, n <= w->ids_cap ? w->ids : NULL)) != CDB_OK) {
            cdb_pipe_fatal(c, rc, "cannot commit to the database (%s)", cdb_errmsg());
            memset(&w->staged, 0, sizeof w->staged);
            thumbs_free(w);
            w->n_ph = 0;
            return;
        }
    }
    c->sum->added += w->staged.added;
    c->sum->changed += w->staged.changed;
    c->sum->errors += w->staged.errors;
    c->sum->retry += w->staged.retry;
    c->sum->touched += w->staged.touched;
    c->sum->moved += w->staged.moved;
    c->sum->real_photos += w->staged.real_photos;
    memset(&w->staged, 0, sizeof w->staged);
    if (w->n) {
        cdb_db_thumb *t = malloc(sizeof *t * (size_t)w->n);
        int k = 0;
        for (int i = 0; t && i < w->n; i++) {
            pending_thumb *p = &w->p[i];
            if (p->op >= 0) p->t.file_id = p->op < n && n <= w->ids_cap ? w->ids[p->op] : 0;
            if (p->t.file_id > 0) t[k++] = p->t;
        }
        if (t && k && (rc = cdb_db_thumbs_put(c->db, t, k)) != CDB_OK)
            CDB_LOG_WARN("thumbnails not stored (%s); the next reindex makes them", cdb_errmsg());
        else if (t)
            c->sum->thumbs += k;
        free(t);
        thumbs_free(w);
    }
    if (w->n_ph) put_photos(c, w, n);
}

static void count_error(pipe_ctx *c, writer_state *w) {
    w->staged.errors++;
    atomic_fetch_add(&c->n_errors, 1); /* the progress line's count: at once */
}

static void stage(pipe_ctx *c, cdb_db_batch *b, writer_state *w, job *j) {
    cdb_engine_summary *s = c->sum;
    cdb_status rc = CDB_OK;
    int op = cdb_db_batch_count(b);
    switch (j->kind) {
    case R_IMAGE:
        rc = cdb_db_batch_put(b, j->root_id, j->relpath, &j->meta, j->vec, c->dim);
        if (rc == CDB_OK) {
            keep_thumb(c, w, j, op);
            keep_photo(w, j, op);
        }
        if (rc == CDB_INVALID) { /* NaN, Inf, zero: the same for these bytes every time */
            char why[300];
            snprintf(why, sizeof why, "the encoder gave an unusable vector: %s", cdb_errmsg());
            rc = cdb_db_batch_put_error(b, j->root_id, j->relpath, &j->meta, why);
            count_error(c, w);
        } else {
            if (j->was_ok && !j->for_model) w->staged.changed++;
            else w->staged.added++;
            if (rc == CDB_OK) w->staged.real_photos += j->real_photo;
        }
        break;
    case R_ERROR:
        rc = cdb_db_batch_put_error(b, j->root_id, j->relpath, &j->meta, j->reason);
        count_error(c, w);
        break;
    case R_RETRY:
        rc = cdb_db_batch_put_retry(b, j->root_id, j->relpath, &j->meta, j->reason);
        w->staged.retry++;
        atomic_fetch_add(&c->n_errors, 1);
        break;
    case R_KEEP:
        s->retry++;
        atomic_fetch_add(&c->n_errors, 1);
        break;
    case R_TOUCH:
        rc = cdb_db_batch_touch(b, j->file_id, &j->meta);
        w->staged.touched++;
        break;
    case R_MOVE:
        rc = cdb_db_batch_move_to(b, j->move_from, j->root_id, j->relpath, &j->meta);
        cdb_scan_mark_seen(c, j->move_from); /* now at a path the walk met */
        w->staged.moved++;
        break;
    case R_SKIP: s->skipped++; break;
    case R_THUMB:
        keep_thumb(c, w, j, -1);
        keep_photo(w, j, -1);
        break;
    default: break; /* R_GONE: the deletion pass decides */
    }
    if (rc != CDB_OK) cdb_pipe_fatal(c, rc, "cannot stage %s (%s)", j->path, cdb_errmsg());
}

static void *writer_main(void *arg) {
    pipe_ctx *c = arg;
    cdb_db_batch *b = NULL;
    writer_state w;
    job *j;
    int64_t last = cdb_now_ns();
    cdb_status rc = cdb_db_batch_new(c->db, c->model_id, &b);
    memset(&w, 0, sizeof w);
    if (rc != CDB_OK) cdb_pipe_fatal(c, rc, "cannot start a database batch (%s)", cdb_errmsg());
    while ((j = cdb_eng_queue_pop(c->q3))) {
        int64_t t0 = cdb_now_ns();
        if (b && !atomic_load(&c->abort)) {
            stage(c, b, &w, j);
            atomic_fetch_add(&c->n_done, 1);
            int waiting = w.n > w.n_ph ? w.n : w.n_ph;
            if (cdb_db_batch_count(b) >= ENG_COMMIT_EVERY || waiting >= ENG_COMMIT_EVERY ||
                ((cdb_db_batch_count(b) > 0 || waiting > 0) &&
                 cdb_now_ns() - last > ENG_COMMIT_NS)) {
                commit(c, b, &w);
                last = cdb_now_ns();
            }
        }
        cdb_job_free(j);
        c->ns_store += cdb_now_ns() - t0;
    }
    int64_t t0 = cdb_now_ns();
    if (b && !atomic_load(&c->abort)) commit(c, b, &w);
    c->ns_store += cdb_now_ns() - t0;
    thumbs_free(&w);
    free(w.p);
    free(w.ph);
    free(w.ids);
    cdb_db_batch_free(b);
    atomic_store(&c->writer_done, 1);
    return NULL;
}

/* ---- driver --------------------------------------------------------------------------- */

/* Starts the stages, walks, waits for them to drain. */
static void run_stages(pipe_ctx *c, int n_readers) {
    pthread_t *readers = calloc((size_t)n_readers, sizeof *readers), enc, wri;
    int started = 0, enc_ok = 0, wri_ok = 0;
    if (!readers) {
        cdb_pipe_fatal(c, CDB_NOMEM, "out of memory");
        return;
    }
    atomic_store(&c->readers_left, n_readers);
    for (; started < n_readers; started++)
        if (pthread_create(&readers[started], NULL, reader_main, c)) break;
    if (started < n_readers) { /* count only the readers that run */
        atomic_fetch_sub(&c->readers_left, n_readers - started);
        if (!started) cdb_eng_queue_close(c->q2);
    }
    enc_ok = pthread_create(&enc, NULL, encoder_main, c) == 0;
    wri_ok = pthread_create(&wri, NULL, writer_main, c) == 0;
    if (!started || !enc_ok || !wri_ok) {
        cdb_pipe_fatal(c, CDB_ERROR, "cannot start the pipeline threads");
    } else {
        int64_t tw = cdb_now_ns();
        cdb_scan_walk_all(c);
        c->sum->ns_walk = cdb_now_ns() - tw - c->ns_walk_blocked;
    }
    c->prog_total = atomic_load(&c->n_found);
    cdb_eng_queue_close(c->q1);
    if (!enc_ok) cdb_eng_queue_close(c->q3);
    while (wri_ok && !atomic_load(&c->writer_done)) { /* keep the progress line alive */
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
        cdb_pipe_tick(c);
    }
    for (int i = 0; i < started; i++) pthread_join(readers[i], NULL);
    if (enc_ok) pthread_join(enc, NULL);
    if (wri_ok) pthread_join(wri, NULL);
    free(readers);
}

cdb_status cdb_eng_pipeline_run(cdb_db *db, const char *db_dir, cdb_model *model, int64_t model_id,
                            const eng_library *lib, const eng_target *roots, int n_roots,
                            const eng_ingest_opts *o, cdb_engine_summary *sum) {
    pipe_ctx c;
    int n_readers = o->threads > 0 ? o->threads : 1, route;
    cdb_db_params rp = cdb_db_params_default();
    cdb_status rc = CDB_OK;
    int64_t t0 = cdb_now_ns();

    memset(&c, 0, sizeof c);
    memset(sum, 0, sizeof *sum);
    pthread_mutex_init(&c.mu, NULL);
    cdb_eng_budget_init(&c.budget, o->decode_budget);
    c.db = db;
    c.db_dir = db_dir;
    c.model = model;
    c.model_id = model_id;
    c.lib = lib;
    c.o = o;
    c.enc_batch = o->batch > 0 ? o->batch : 1;
    c.pp = &cdb_model_get_info(model)->preprocess;
    c.dim = cdb_model_get_info(model)->embed_dim;
    /* a GPU: decoded bytes go up for the device transform; in fast mode without
    ** thumbnails to make, nvJPEG decodes the JPEGs it takes (docs/images.md).
    ** CLIPDB_TEST_GPU_ROUTE=1 takes that route on any backend: on the CPU it must give
    ** the very vectors of the usual one (test_encoder_faults) */
    route = getenv("CLIPDB_TEST_GPU_ROUTE") && !strcmp(getenv("CLIPDB_TEST_GPU_ROUTE"), "1");
    c.dev_pp = !o->encode && (route || cdb_model_transforms_on_device(model));
    c.dev_jpeg = c.dev_pp && o->decode && (route || cdb_model_decodes_jpeg_on_device(model));
    c.targets = roots;
    c.n_targets = n_roots;
    c.sum = sum;
    c.ev = o->ev;
    c.label = o->label ? o->label : "ingest";
    c.prog_total = -1;
    rp.readonly = 1;
    cdb_eng_progress(c.ev, CDB_ENGINE_PROGRESS_START, c.label, 0, -1, 0);
    if (cdb_eng_should_stop(c.ev)) atomic_store(&c.stop, 1);
    c.ts = calloc((size_t)(n_roots > 0 ? n_roots : 1), sizeof *c.ts);
    if (!c.ts) {
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
        goto done;
    }
    c.walked_dirs = cdb_eng_devino_new();
    c.walked_files = cdb_eng_devino_new();
    if (!c.walked_dirs || !c.walked_files) {
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
        goto done;
    }
    if (c.ev && c.ev->count_first) c.prog_total = cdb_scan_count_files(&c);
    if ((rc = cdb_db_open(db_dir, &rp, &c.rdb)) != CDB_OK ||
        (rc = cdb_db_max_file_id(db, &c.max_id_before)) != CDB_OK)
        goto done;
    c.q1 = cdb_eng_queue_new(4 * n_readers + 4);
    c.q2 = cdb_eng_queue_new(2 * o->batch + n_readers);
    c.q3 = cdb_eng_queue_new(2 * o->batch + 16);
    if (!c.q1 || !c.q2 || !c.q3) {
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
        goto done;
    }
    run_stages(&c, n_readers);
    if (cdb_eng_should_stop(c.ev)) atomic_store(&c.stop, 1);
    if (!cdb_pipe_stopping(&c)) cdb_scan_finish(&c);
    if (atomic_load(&c.abort)) rc = cdb_seterr(c.fatal_rc, "%s", c.fatal);
done:
    cdb_eng_progress(c.ev, CDB_ENGINE_PROGRESS_END, c.label, atomic_load(&c.n_done), c.prog_total,
                 atomic_load(&c.n_errors));
    sum->found = atomic_load(&c.n_found);
    sum->interrupted = atomic_load(&c.stop) || cdb_eng_should_stop(c.ev);
    sum->seconds = (double)(cdb_now_ns() - t0) / 1e9;
    sum->ns_read = atomic_load(&c.ns_read);
    sum->ns_decode = atomic_load(&c.ns_decode);
    sum->ns_preprocess = atomic_load(&c.ns_preprocess);
    sum->ns_encode = c.ns_encode;
    sum->ns_encode_wait = c.ns_encode_wait;
    sum->ns_store = c.ns_store;
    sum->n_batches = c.n_batches;
    cdb_db_close(c.rdb);
    cdb_free(c.photo_missing);
    cdb_eng_queue_free(c.q1);
    cdb_eng_queue_free(c.q2);
    cdb_eng_queue_free(c.q3);
    cdb_scan_free(&c);
    cdb_eng_devino_free(c.walked_dirs);
    cdb_eng_devino_free(c.walked_files);
    free(c.claimed);
    free(c.seen);
    pthread_mutex_destroy(&c.mu);
    sum->decode_peak_pixels = c.budget.peak;
    sum->kept_peak_bytes = c.budget.kept_peak;
    sum->kept_images = atomic_load(&c.n_kept);
    sum->decode_waits = c.budget.n_waits;
    cdb_eng_budget_destroy(&c.budget);
    return rc;
}
