/*
** duplicates.c: `clipdb duplicates` and /api/duplicates (engine.h): the library's
** duplicate groups. Gathers, for every file with a vector of the default model, what
** dupes/dupes.h groups by: the vector (the shards), the content hash and the
** metadata (the file's bytes, read through the one way from a row to bytes,
** cdb_engine_file_open), the perceptual hash (a cheap decode: JPEG scaled in the DCT
** domain, a RAW's preview, with the root's orientation setting), then groups them.
** Reads every photo once per call (no cache yet). Never deletes anything.
*/
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db/db.h"
#include "dupes/dupes.h"
#include "encoder/encoder.h"
#include "engine/library/library.h"

/* One file's facts, besides its vector. */
typedef struct facts {
    int64_t id;
    char *path, *stem; /* heap (free()) */
    char camera[140];
    char taken[40];
    cdb_dupes_item item;
} facts;

/* Reads fd (size bytes) whole. Heap buffer, or NULL. */
static unsigned char *read_all(int fd, size_t size)
{
    unsigned char *buf = malloc(size ? size : 1);
    size_t at = 0;
    while (buf && at < size) {
        ssize_t k = read(fd, buf + at, size - at);
        if (k <= 0) {
            free(buf);
            return NULL;
        }
        at += (size_t)k;
    }
    return buf;
}

static cdb_dupes_format format_of(const char *decoded)
{
    if (!strcmp(decoded, "RAW"))
        return CDB_DUPES_FMT_RAW;
    if (!strcmp(decoded, "JPEG") || !strcmp(decoded, "HEIF") || !strcmp(decoded, "TIFF"))
        return CDB_DUPES_FMT_CAMERA;
    return CDB_DUPES_FMT_OTHER;
}

/* Fills f (id set) from the photo. 0, or -1 when it cannot be read or decoded now. */
static int gather(cdb_engine *e, facts *f)
{
    cdb_engine_file file = {0};
    int fd = -1, rc = -1;
    if (cdb_engine_file_open(e, f->id, &file, &fd) != CDB_OK)
        return -1;
    unsigned char *buf = read_all(fd, (size_t)file.size);
    close(fd);
    cdb_image_params ip = cdb_image_params_default();
    ip.decode = CDB_DECODE_FAST; /* the hash looks at 32x32: a 1/8 JPEG decode is plenty */
    ip.target_size = 64;
    cdb_image *img = NULL;
    cdb_photo_meta meta;
    if (buf && cdb_image_decode(buf, (size_t)file.size, &ip, &img) == CDB_OK &&
        cdb_image_phash(img, &f->item.phash) == CDB_OK &&
        cdb_photo_meta_read(buf, (size_t)file.size, &meta) == CDB_OK) {
        cdb_dupes_item *it = &f->item;
        cdb_db_hash_buf(buf, (size_t)file.size, it->hash);
        it->has_hash = it->has_phash = 1;
        snprintf(f->camera, sizeof f->camera, "%s%s%s", meta.make, *meta.make ? " " : "",
                 meta.model);
        it->camera = f->camera;
        it->has_taken = meta.taken_source != CDB_TAKEN_NONE;
        it->taken_ms = meta.taken_ms;
        cdb_photo_meta_taken_iso(&meta, f->taken, sizeof f->taken);
        it->bytes = file.size;
        it->width = img->full_width;
        it->height = img->full_height;
        it->format = format_of(img->format);
        f->path = file.path;
        file.path = NULL;
        f->stem = strdup(f->path); /* NULL (out of memory): no pair for it */
        char *dot = f->stem ? strrchr(f->stem, '.') : NULL;
        char *slash = dot ? strrchr(f->stem, '/') : NULL;
        if (dot && (!slash || dot > slash + 1))
            *dot = '\0';
        it->stem = f->stem;
        it->id = f->id;
        rc = 0;
    }
    cdb_image_free(img);
    free(buf);
    cdb_engine_file_clear(&file);
    return rc;
}

/* The groups of kind `kind` (-1: all) as the engine's result. */
static cdb_status build(const cdb_dupes_groups *g, facts *fs, int kind, cdb_engine_dups *out)
{
    size_t n = 0;
    for (size_t k = 0; k < g->n_groups; k++)
        n += kind < 0 || (int)g->kind[k] == kind;
    out->groups = calloc(n ? n : 1, sizeof *out->groups);
    if (!out->groups)
        return cdb_eng_fail(CDB_NOMEM, CDB_ENGINE_E_NONE, "duplicates: out of memory");
    for (size_t k = 0; k < g->n_groups; k++) {
        if (kind >= 0 && (int)g->kind[k] != kind)
            continue;
        cdb_engine_dup_group *dg = &out->groups[out->n_groups++];
        dg->kind = (int)g->kind[k];
        dg->keep = fs[g->keep[k]].id;
        dg->n_files = (int)(g->start[k + 1] - g->start[k]);
        dg->files = calloc((size_t)dg->n_files, sizeof *dg->files);
        if (!dg->files)
            return cdb_eng_fail(CDB_NOMEM, CDB_ENGINE_E_NONE, "duplicates: out of memory");
        for (int m = 0; m < dg->n_files; m++) {
            facts *f = &fs[g->member[g->start[k] + (size_t)m]];
            cdb_engine_dup_file *df = &dg->files[m];
            df->id = f->id;
            df->path = strdup(f->path);
            if (!df->path)
                return cdb_eng_fail(CDB_NOMEM, CDB_ENGINE_E_NONE, "duplicates: out of memory");
            df->width = f->item.width;
            df->height = f->item.height;
            df->bytes = f->item.bytes;
            snprintf(df->taken, sizeof df->taken, "%s", f->taken);
        }
    }
    return CDB_OK;
}

cdb_status cdb_engine_duplicates(cdb_engine *e, int kind, cdb_engine_dups *out)
{
    memset(out, 0, sizeof *out);
    if (kind < -1 || kind >= CDB_DUPES_KINDS)
        return cdb_eng_fail(CDB_INVALID, CDB_ENGINE_E_NONE, "duplicates: no kind %d", kind);
    cdb_engine_vectors *vi = NULL;
    cdb_engine_model model;
    int64_t count = 0;
    cdb_status rc = cdb_engine_vectors_open(e, NULL, &vi, &model, &count);
    if (rc != CDB_OK)
        return rc;
    size_t cap = (size_t)(count > 0 ? count : 1) + 64, n = 0;
    facts *fs = calloc(cap, sizeof *fs);
    float *vecs = malloc(cap * (size_t)model.dim * sizeof *vecs);
    cdb_dupes_item *items = NULL;
    cdb_dupes_groups *g = NULL;
    if (!fs || !vecs) {
        rc = cdb_eng_fail(CDB_NOMEM, CDB_ENGINE_E_NONE, "duplicates: out of memory");
        goto done;
    }
    for (;;) { /* the vectors, in id order; a file that cannot be read now is skipped */
        int64_t id;
        int got = 0;
        if (n == cap)
            break; /* more than when opened: a writer added some; the next run sees them */
        if ((rc = cdb_engine_vectors_read(vi, 1, &id, vecs + n * (size_t)model.dim, NULL,
                                          NULL, &got)) != CDB_OK)
            goto done;
        if (got == 0)
            break;
        fs[n].id = id;
        if (gather(e, &fs[n]) != 0) {
            out->n_unreadable++;
            continue;
        }
        fs[n].item.vec = vecs + n * (size_t)model.dim;
        n++;
    }
    out->n_files = (int64_t)n;
    items = malloc((n ? n : 1) * sizeof *items);
    if (!items) {
        rc = cdb_eng_fail(CDB_NOMEM, CDB_ENGINE_E_NONE, "duplicates: out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        items[i] = fs[i].item;
    if ((rc = cdb_dupes_find(items, n, model.dim, NULL, &g)) != CDB_OK ||
        (rc = build(g, fs, kind, out)) != CDB_OK)
        goto done;
done:
    if (rc != CDB_OK)
        cdb_engine_dups_free(out);
    cdb_dupes_groups_free(g);
    for (size_t i = 0; fs && i < cap; i++)
        free(fs[i].path), free(fs[i].stem);
    free(fs);
    free(vecs);
    free(items);
    cdb_engine_vectors_close(vi);
    return rc;
}

void cdb_engine_dups_free(cdb_engine_dups *d)
{
    if (!d)
        return;
    for (int k = 0; d->groups && k < d->n_groups; k++) {
        for (int m = 0; d->groups[k].files && m < d->groups[k].n_files; m++)
            free(d->groups[k].files[m].path);
        free(d->groups[k].files);
    }
    free(d->groups);
    memset(d, 0, sizeof *d);
}
