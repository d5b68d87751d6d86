/*
** duplicates.c: `clipdb duplicates` and /api/duplicates (engine.h): the library's
** duplicate groups. Gathers, for every file with a vector of the default model, what
** dupes/dupes.h groups by: the vector (the shards), the content hash and the
** metadata and the perceptual hash (cdb_eng_phash_of: a cheap decode, JPEG scaled in
** the DCT domain, a RAW's preview), then groups them. Those come from the catalog
** (photo_meta, schema 9: stored by ingest and reindex for the content the catalog
** records) when the file on disk is unchanged since (its size and mtime; no open), else
** from the file's bytes, read through the one way from a row to bytes
** (cdb_engine_file_open); a writer's run stores what it read (the CLI opens one when no
** other clipdb writes). Never deletes a photo.
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
    int read;          /* gathered from its bytes: row holds them, for the catalog */
    cdb_db_photo row;
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

/* Fills f (id set) from its facts: the metadata read from its bytes, its phash, content
** hash, size and path (taken over: heap). */
static void fill(facts *f, const cdb_photo_meta *meta, const eng_phash *ph,
                 const uint8_t hash[CDB_DUPES_HASH_BYTES], int64_t size, char *path)
{
    cdb_dupes_item *it = &f->item;
    memcpy(it->hash, hash, CDB_DUPES_HASH_BYTES);
    it->has_hash = it->has_phash = 1;
    it->phash = ph->hash;
    snprintf(f->camera, sizeof f->camera, "%s%s%s", meta->make, *meta->make ? " " : "",
             meta->model);
    it->camera = f->camera;
    it->has_taken = meta->taken_source != CDB_TAKEN_NONE;
    it->taken_ms = meta->taken_ms;
    cdb_photo_meta_taken_iso(meta, f->taken, sizeof f->taken);
    it->bytes = size;
    it->width = ph->width;
    it->height = ph->height;
    it->format = (cdb_dupes_format)ph->format;
    f->path = path;
    f->stem = strdup(f->path); /* NULL (out of memory): no pair for it */
    char *dot = f->stem ? strrchr(f->stem, '.') : NULL;
    char *slash = dot ? strrchr(f->stem, '/') : NULL;
    if (dot && (!slash || dot > slash + 1))
        *dot = '\0';
    it->stem = f->stem;
    it->id = f->id;
}

/* Fills f (id set) from the catalog alone, without opening the photo: its row, its
** metadata row with the phash (current: read from the content the catalog records),
** and the file on disk unchanged since (lstat: size and mtime as recorded). 0, or -1
** when any of that is missing (the photo is then read). */
static int gather_cached(cdb_db *db, facts *f)
{
    cdb_db_file row;
    cdb_db_photo ph;
    cdb_photo_meta meta;
    char *path = NULL;
    struct stat sb;
    int rc = -1;
    if (cdb_db_file_hit(db, f->id, 0, &row, &path, &ph) != CDB_OK) /* one statement */
        return -1;
    if (row.state == CDB_DB_OK && row.meta.has_hash && lstat(path, &sb) == 0 &&
        S_ISREG(sb.st_mode) && sb.st_size == row.meta.size &&
        (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec == row.meta.mtime_ns &&
        ph.read && ph.has_phash) {
        eng_phash h = {1, ph.phash, ph.phash_format, ph.phash_width, ph.phash_height};
        memset(&meta, 0, sizeof meta);
        if (ph.taken_source != CDB_DB_TAKEN_FILE) { /* FILE: photos_get's mtime stand-in */
            meta.taken_source = (cdb_taken_source)ph.taken_source;
            meta.taken_ms = ph.taken.wall_ms;
            meta.has_offset = ph.taken.has_offset;
            meta.offset_min = ph.taken.offset_min;
        }
        snprintf(meta.make, sizeof meta.make, "%s", ph.make);
        snprintf(meta.model, sizeof meta.model, "%s", ph.model);
        char *own = strdup(path);
        if (own) {
            fill(f, &meta, &h, row.meta.hash, row.meta.size, own);
            rc = 0;
        }
    }
    cdb_db_file_clear(&row);
    cdb_free(path);
    return rc;
}

/* Fills f (id set) from the photo's bytes. 0, or -1 when it cannot be read or decoded
** now. */
static int gather_read(cdb_engine *e, facts *f)
{
    cdb_engine_file file = {0};
    int fd = -1, rc = -1;
    if (cdb_engine_file_open(e, f->id, &file, &fd) != CDB_OK)
        return -1;
    unsigned char *buf = read_all(fd, (size_t)file.size);
    close(fd);
    eng_phash ph;
    cdb_photo_meta meta;
    if (buf && cdb_eng_phash_of(buf, (size_t)file.size, &ph) == 0 && ph.has &&
        cdb_photo_meta_read(buf, (size_t)file.size, &meta) == CDB_OK) {
        uint8_t hash[CDB_DUPES_HASH_BYTES];
        cdb_db_hash_buf(buf, (size_t)file.size, hash);
        fill(f, &meta, &ph, hash, file.size, file.path);
        file.path = NULL;
        /* the row describes the bytes read (their hash): current only while the
        ** catalog records that content */
        cdb_eng_photo_row(&meta, &ph, f->id, hash, &f->row);
        f->read = 1;
        rc = 0;
    }
    free(buf);
    cdb_engine_file_clear(&file);
    return rc;
}

/* A writer stores what it read (metadata and phash, photo_meta), so that the next run
** reads none of those photos; a failure is only logged (the next run reads them again). */
static void store_read(cdb_engine *e, const facts *fs, size_t n)
{
    cdb_db_photo *rows = malloc(sizeof *rows * (n ? n : 1));
    int k = 0;
    for (size_t i = 0; rows && i < n; i++)
        if (fs[i].read)
            rows[k++] = fs[i].row;
    if (k && (!rows || cdb_db_photos_put(e->db, rows, k) != CDB_OK))
        CDB_LOG_WARN("duplicates: the photos' hashes were not stored (%s); the next run reads "
                     "them again", rows ? cdb_errmsg() : "out of memory");
    free(rows);
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
    eng_reader *r = NULL;
    cdb_status rc = cdb_engine_vectors_open(e, NULL, &vi, &model, &count);
    if (rc != CDB_OK)
        return rc;
    if (cdb_eng_reader_get(e, &r) != CDB_OK) { /* no cache then: every photo is read */
        r = NULL;
        cdb_eng_clear();
    }
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
        if ((!r || gather_cached(r->db, &fs[n]) != 0) && gather_read(e, &fs[n]) != 0) {
            out->n_unreadable++;
            continue;
        }
        fs[n].item.vec = vecs + n * (size_t)model.dim;
        n++;
    }
    out->n_files = (int64_t)n;
    if (e->p.writer)
        store_read(e, fs, n);
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
    if (r)
        cdb_eng_reader_put(e, r);
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
