/*
** files.c: what the catalog says about files, read by id or in bulk: the ok file
** behind a search hit (its path, size, size in pixels, its type from its first bytes,
** and the photo itself opened the one way a recorded photo is, cdb_eng_open_file_id,
** so a server sends the catalog's bytes without ever taking a path from a request or
** from the disk) and its thumbnail, what could not be ingested and why (`clipdb
** errors`), and every stored vector with its path (`clipdb export`).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/library/library.h"

/* ---- a file by id -------------------------------------------------------------------- */

void cdb_engine_file_clear(cdb_engine_file *f) {
    if (!f) return;
    free(f->path);
    memset(f, 0, sizeof *f);
}

cdb_status cdb_engine_file_open(cdb_engine *e, int64_t id, cdb_engine_file *out, int *fd) {
    eng_reader *r = NULL;
    cdb_db_file f;
    char *path = NULL;
    unsigned char head[32];
    ssize_t k;
    cdb_status st;
    cdb_eng_clear();
    memset(out, 0, sizeof *out);
    *fd = -1;
    if ((st = cdb_eng_reader_get(e, &r)) != CDB_OK) return st;
    st = cdb_eng_open_file_id(r->db, id, &f, &path, fd, NULL);
    cdb_eng_reader_put(e, r);
    if (st != CDB_OK) return st;
    if (!(out->path = strdup(path))) {
        close(*fd);
        *fd = -1;
        st = cdb_seterr(CDB_NOMEM, "out of memory");
    } else {
        k = pread(*fd, head, sizeof head, 0);
        out->id = id;
        out->size = f.meta.size;
        out->mtime_ns = f.meta.mtime_ns;
        out->width = f.meta.width;
        out->height = f.meta.height;
        out->mime = cdb_image_mime(head, k > 0 ? (size_t)k : 0);
    }
    cdb_free(path);
    cdb_db_file_clear(&f);
    return st;
}

cdb_status cdb_engine_file_get(cdb_engine *e, int64_t id, cdb_engine_file *out) {
    int fd = -1;
    cdb_status st = cdb_engine_file_open(e, id, out, &fd);
    if (fd >= 0) close(fd);
    return st;
}

/* ---- thumbnails -------------------------------------------------------------------- */

cdb_status cdb_engine_thumb_size(cdb_engine *e, int *px) {
    eng_reader *r = NULL;
    cdb_status st;
    cdb_eng_clear();
    if ((st = cdb_eng_reader_get(e, &r)) != CDB_OK) return st;
    st = cdb_db_thumb_size(r->db, px);
    cdb_eng_reader_put(e, r);
    return st == CDB_OK ? CDB_OK
                        : cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot read the thumbnail size");
}

cdb_status cdb_engine_set_thumb_size(cdb_engine *e, int px) {
    cdb_status st;
    cdb_eng_clear();
    if ((st = cdb_eng_writer(e, "setting the thumbnail size")) != CDB_OK) return st;
    if ((st = cdb_db_set_thumb_size(e->db, px)) != CDB_OK)
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot set the thumbnail size");
    return CDB_OK;
}

cdb_status cdb_eng_decode_original(cdb_db *db, const cdb_db_file *f, int fd, const struct stat *sb,
                                   int target, cdb_image **img, char *reason, size_t reason_size) {
    unsigned char *buf = NULL;
    cdb_db_file_meta m;
    cdb_db_root root;
    cdb_image_params ip = cdb_image_params_default();
    cdb_status st;
    *img = NULL;
    memset(&root, 0, sizeof root);
    if (cdb_eng_read_photo_fd(fd, sb, 0, &buf, &m, reason, reason_size) != ENG_FAIL_NONE)
        return CDB_IO;
    ip.apply_exif = !(cdb_db_root_info(db, f->root_id, &root) == CDB_OK && root.no_exif);
    ip.decode = CDB_DECODE_FAST;
    ip.target_size = target > 0 ? target : 1;
    if (cdb_db_max_pixels(db, &ip.max_pixels) != CDB_OK) ip.max_pixels = 0;
    if ((st = cdb_image_decode(buf, (size_t)m.size, &ip, img)) != CDB_OK)
        snprintf(reason, reason_size, "%s", cdb_errmsg());
    cdb_db_root_clear(&root);
    free(buf);
    return st;
}

/* A thumbnail made now from the original (a file ingested before thumbnails), read
** the one way a recorded photo is (cdb_eng_open_file_id). The decode may shrink a
** JPEG in the DCT domain: the result is px wide or more. */
static cdb_status thumb_now(cdb_db *db, const cdb_db_file *row, int px, void **jpeg, size_t *n) {
    char reason[256] = "";
    cdb_db_file f;
    cdb_image *img = NULL;
    eng_thumb t;
    struct stat sb;
    int fd = -1;
    cdb_status st = CDB_OK;
    memset(&t, 0, sizeof t);
    memset(&f, 0, sizeof f);
    if ((st = cdb_eng_open_file_id(db, row->id, &f, NULL, &fd, &sb)) != CDB_OK) {
        if (cdb_engine_errcode() == CDB_ENGINE_E_FILE_GONE ||
            cdb_engine_errcode() == CDB_ENGINE_E_FILE_CHANGED)
            return st; /* 404 / 409: the same answer as its original's */
        return cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_NO_THUMB, NULL,
                             "no thumbnail for %lld (its original cannot be read)",
                             (long long)row->id);
    }
    if (cdb_eng_decode_original(db, &f, fd, &sb, px, &img, reason, sizeof reason) != CDB_OK ||
        (st = cdb_eng_thumb_make(img, px, &t)) != CDB_OK) {
        st = cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_NO_THUMB, reason[0] ? reason : NULL,
                           "no thumbnail for %lld (its original cannot be read)",
                           (long long)row->id);
        goto done;
    }
    *jpeg = t.jpeg; /* malloc'd: cdb_free frees it */
    *n = t.n;
    t.jpeg = NULL;
done:
    close(fd);
    cdb_eng_thumb_clear(&t);
    cdb_image_free(img);
    cdb_db_file_clear(&f);
    return st;
}

cdb_status cdb_engine_thumb(cdb_engine *e, int64_t id, void **jpeg, size_t *n) {
    eng_reader *r = NULL;
    cdb_db_file f;
    cdb_db_thumb t;
    int px = 0;
    cdb_status st;
    cdb_eng_clear();
    *jpeg = NULL;
    *n = 0;
    memset(&f, 0, sizeof f);
    memset(&t, 0, sizeof t);
    if ((st = cdb_eng_reader_get(e, &r)) != CDB_OK) return st;
    st = id > 0 ? cdb_db_file_get(r->db, id, &f) : CDB_NOTFOUND;
    if (st == CDB_OK && f.state != CDB_DB_OK) st = CDB_NOTFOUND;
    if (st == CDB_NOTFOUND) {
        st = cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_UNKNOWN_ID, NULL, "no photo has the id %lld",
                       (long long)id);
        goto done;
    }
    if (st != CDB_OK || (st = cdb_db_thumb_size(r->db, &px)) != CDB_OK) {
        st = cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot look up the thumbnail of %lld",
                          (long long)id);
        goto done;
    }
    if (px == 0) {
        st = cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_NO_THUMB, NULL,
                       "thumbnails are off in this database");
        goto done;
    }
    st = cdb_db_thumb_get(r->db, id, &t);
    if (st == CDB_OK && f.meta.has_hash && !memcmp(t.hash, f.meta.hash, CDB_DB_HASH_BYTES)) {
        *jpeg = (void *)t.jpeg;
        *n = t.n_bytes;
        t.jpeg = NULL;
    } else {
        st = thumb_now(r->db, &f, px, jpeg, n);
    }
done:
    cdb_db_thumb_clear(&t);
    cdb_db_file_clear(&f);
    cdb_eng_reader_put(e, r);
    return st;
}

/* ---- errors ------------------------------------------------------------------------ */

typedef struct errors_ud {
    eng_library lib;
    cdb_engine_error_entry *v;
    int64_t n;
    size_t cap;
    const char *kind;
    int oom;
} errors_ud;

static char *root_join(const errors_ud *ud, int64_t root_id, const char *relpath) {
    const eng_root *r = cdb_eng_library_root(&ud->lib, root_id);
    return cdb_db_path_join(r ? r->path : "?", relpath);
}

static int add_entry(errors_ud *ud, int64_t id, char *full, const char *reason, int64_t size) {
    if (cdb_eng_grow((void **)&ud->v, &ud->cap, (size_t)ud->n, sizeof *ud->v) != 0) {
        cdb_free(full);
        return ud->oom = 1;
    }
    cdb_engine_error_entry *x = &ud->v[ud->n];
    x->kind = ud->kind;
    x->id = id;
    x->size = size;
    x->path = strdup(full);
    x->reason = strdup(reason ? reason : "");
    cdb_free(full);
    if (!x->path || !x->reason) {
        free(x->path);
        free(x->reason);
        return ud->oom = 1;
    }
    ud->n++;
    return 0;
}

static int on_error_file(const cdb_db_file *f, void *ud_) {
    errors_ud *ud = ud_;
    char *full;
    if (f->state == CDB_DB_PENDING && !f->error) return 0; /* work of an interrupted run */
    if (!(full = root_join(ud, f->root_id, f->relpath))) return ud->oom = 1;
    return add_entry(ud, f->id, full, f->error, f->meta.size);
}

static int on_walk_problem(const cdb_db_walk_problem *p, void *ud_) {
    errors_ud *ud = ud_;
    char *full = root_join(ud, p->root_id, p->relpath);
    if (!full) return ud->oom = 1;
    return add_entry(ud, 0, full, p->reason, 0);
}

void cdb_engine_errors_free(cdb_engine_error_entry *v, int64_t n) {
    for (int64_t i = 0; v && i < n; i++) {
        free(v[i].path);
        free(v[i].reason);
    }
    free(v);
}

cdb_status cdb_engine_errors(cdb_engine *e, cdb_engine_error_entry **out, int64_t *n) {
    errors_ud ud;
    cdb_status st;
    cdb_eng_clear();
    memset(&ud, 0, sizeof ud);
    *out = NULL;
    *n = 0;
    if ((st = cdb_eng_library_load(e->db, &ud.lib)) == CDB_OK) {
        ud.kind = "error";
        st = cdb_db_files_foreach(e->db, 0, CDB_DB_MASK_ERROR, on_error_file, &ud);
        ud.kind = "retry";
        if (st == CDB_OK && !ud.oom)
            st = cdb_db_files_foreach(e->db, 0, CDB_DB_MASK_PENDING, on_error_file, &ud);
        ud.kind = "walk";
        if (st == CDB_OK && !ud.oom)
            st = cdb_db_walk_problems_foreach(e->db, 0, on_walk_problem, &ud);
        if (st == CDB_OK && ud.oom) st = cdb_seterr(CDB_NOMEM, "out of memory");
    }
    cdb_eng_library_free(&ud.lib);
    if (st != CDB_OK) {
        cdb_engine_errors_free(ud.v, ud.n);
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot list the errors");
    }
    *out = ud.v;
    *n = ud.n;
    return CDB_OK;
}

/* ---- every stored vector ------------------------------------------------------------ */

struct cdb_engine_vectors {
    cdb_engine *e;
    cdb_db_iter *it;
    int64_t model_id;
    int dim;
};

cdb_status cdb_engine_vectors_open(cdb_engine *e, const char *model_path, cdb_engine_vectors **out,
                                   cdb_engine_model *model, int64_t *count) {
    eng_model *m = NULL;
    cdb_db_counts counts;
    cdb_engine_vectors *v;
    cdb_status st;
    cdb_eng_clear();
    *out = NULL;
    if ((st = cdb_eng_model_get(e, e->db, model_path, 0, model_path && *model_path, -1, &m)) !=
        CDB_OK)
        return st;
    cdb_eng_model_to_public(&m->dm, model);
    memset(&counts, 0, sizeof counts);
    cdb_db_get_counts(e->db, m->dm.id, &counts);
    *count = counts.n_vectors;
    if (!(v = calloc(1, sizeof *v))) return cdb_seterr(CDB_NOMEM, "out of memory");
    v->e = e;
    v->model_id = m->dm.id;
    v->dim = m->dm.dim;
    if ((st = cdb_db_iter_new(e->db, m->dm.id, &v->it)) != CDB_OK) {
        free(v);
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot read the vectors");
    }
    *out = v;
    return CDB_OK;
}

/* Keeps of the n vectors read (ids, f32, f16; the latter two may be NULL) those the
** catalog's vector directory claims, moved to the front in order; *kept of them. A
** shard row without its claim is one a commit is taking away or has not finished
** adding (the write order: a deletion takes the claim back in its first step, before
** the shard's row goes; an addition claims in its last), so the export agrees with
** stats: a file being forgotten or folded away has no vector any more. */
static cdb_status keep_claimed(const cdb_engine_vectors *v, int n, int64_t *ids, float *f32,
                               uint16_t *f16, int *kept) {
    size_t dim = (size_t)v->dim;
    int k = 0;
    for (int i = 0; i < n; i++) {
        int has = 0;
        cdb_status st = cdb_db_file_has_vector(v->e->db, v->model_id, ids[i], &has);
        if (st != CDB_OK) return st;
        if (!has) continue;
        if (k != i) {
            ids[k] = ids[i];
            if (f32) memcpy(f32 + (size_t)k * dim, f32 + (size_t)i * dim, dim * sizeof *f32);
            if (f16) memcpy(f16 + (size_t)k * dim, f16 + (size_t)i * dim, dim * sizeof *f16);
        }
        k++;
    }
    *kept = k;
    return CDB_OK;
}

cdb_status cdb_engine_vectors_read(cdb_engine_vectors *v, int cap, int64_t *ids, float *f32,
                                   uint16_t *f16, char **paths, int *n) {
    int64_t *own = NULL;
    int got = 0;
    cdb_status st;
    cdb_eng_clear();
    *n = 0;
    if (!ids && !(ids = own = malloc(sizeof *ids * (size_t)(cap > 0 ? cap : 1))))
        return cdb_seterr(CDB_NOMEM, "out of memory");
    /* 0 kept of a chunk is not the end: read on until one is kept or none is left */
    do {
        if ((st = cdb_db_iter_read(v->it, cap, ids, f32, f16, &got)) == CDB_OK)
            st = keep_claimed(v, got, ids, f32, f16, n);
    } while (st == CDB_OK && got > 0 && *n == 0);
    if (st != CDB_OK) {
        *n = 0;
        free(own);
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot read the vectors");
    }
    for (int i = 0; paths && i < *n; i++) {
        char *p = NULL;
        paths[i] = NULL;
        if (cdb_db_file_path(v->e->db, ids[i], &p) == CDB_OK) paths[i] = strdup(p);
        cdb_free(p);
    }
    free(own);
    return CDB_OK;
}

void cdb_engine_vectors_close(cdb_engine_vectors *v) {
    if (!v) return;
    cdb_db_iter_free(v->it);
    free(v);
}
