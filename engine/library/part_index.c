/*
** part_index.c: the first two steps of an index built in parts on a cluster (issue 29
** part 4: "build per part from one trained quantizer and merge the inverted lists, instead
** of adding every vector again"); the third, the merge of the parts' lists, is
** merge_index.c's.
**
** 1. train (one job, once every part is ingested: there is no sample before): the index
**    planned for the parts' vectors together, trained empty on an evenly spread sample of
**    them (the parts read as one source, in part order), saved to a file. Its stamp is the
**    FNV-1a hash of that file's bytes.
** 2. add (one task per part, after the train job): a copy of the trained index filled with
**    the part's vectors under the part's own file ids, saved in the part's folder as
**    index/part.<stamp>.cdbidx, with the part's generation as its watermark. The stamp in
**    the name ties it to one trained file: a part index made from another training is not
**    found, so never merged into lists whose quantizer it does not share. The ids are the
**    part's: the merge knows which database id each became and renames them then
**    (cdb_index_remap_ids), and the generation tells it whether the part changed since.
*/
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/library/library.h"

void cdb_eng_part_index_path(const char *part_dir, const char *stamp, char *buf, size_t size) {
    snprintf(buf, size, "%s/index/part.%s.cdbidx", part_dir, stamp);
}

cdb_status cdb_eng_trained_stamp(const char *path, char stamp[17]) {
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long n = -1;
    cdb_status rc = CDB_OK;
    stamp[0] = '\0';
    if (!f) return cdb_seterr(cdb_errno_status(errno), "%s: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) rc = cdb_seterr(CDB_IO, "%s: cannot size it", path);
    else if (!(buf = malloc((size_t)n + 1))) rc = cdb_seterr(CDB_NOMEM, "out of memory");
    else if (fread(buf, 1, (size_t)n, f) != (size_t)n)
        rc = cdb_seterr(CDB_IO, "%s: short read", path);
    if (rc == CDB_OK)
        snprintf(stamp, 17, "%016llx", (unsigned long long)cdb_fnv1a64(buf, (size_t)n));
    free(buf);
    fclose(f);
    return rc;
}

/* ---- train ---------------------------------------------------------------------------- */

/* Several sources read as one: positions run through sources[0], then [1], ... */
typedef struct cat_src {
    const cdb_index_source *s;
    int n, dim;
} cat_src;

static cdb_status cat_read(void *ctx, int64_t pos, int64_t n, int64_t *ids, uint16_t *vecs) {
    const cat_src *c = ctx;
    cdb_status rc = CDB_OK;
    for (int i = 0; i < c->n && n > 0 && rc == CDB_OK; i++) {
        int64_t len = c->s[i].n, k;
        if (pos >= len) {
            pos -= len;
            continue;
        }
        k = n < len - pos ? n : len - pos;
        rc = c->s[i].read(c->s[i].ctx, pos, k, ids, vecs);
        ids += k;
        vecs += (size_t)k * (size_t)c->dim;
        n -= k;
        pos = 0;
    }
    if (rc == CDB_OK && n > 0) rc = cdb_seterr(CDB_INVALID, "read past the parts' vectors");
    return rc;
}

static int is_ivf(cdb_index_kind k) {
    return k == CDB_INDEX_IVF_SQ || k == CDB_INDEX_IVF_PQ || k == CDB_INDEX_IVF_HNSW_PQ;
}

/* Opens the parts (readers) and their default model's vectors as sources; the models
** must be one. */
static cdb_status open_sources(const char *const *dirs, int n, cdb_db **dbs,
                               cdb_index_source *srcs, int *dim) {
    cdb_db_params p = cdb_db_params_default();
    cdb_db_model first, dm;
    cdb_status rc = CDB_OK;
    p.readonly = 1;
    for (int i = 0; i < n && rc == CDB_OK; i++) {
        if ((rc = cdb_db_open(dirs[i], &p, &dbs[i])) != CDB_OK)
            return cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "cannot open the part %s", dirs[i]);
        if ((rc = cdb_db_model_default(dbs[i], i ? &dm : &first)) != CDB_OK)
            return cdb_eng_failw(rc, CDB_ENGINE_E_NOT_INITIALIZED, "it has no model",
                                 "cannot train on %s", dirs[i]);
        if (i && strcmp(dm.weights_hash, first.weights_hash))
            return cdb_eng_fail(CDB_INVALID, CDB_ENGINE_E_NONE,
                                "%s and %s have different models: parts must be made with the "
                                "same model", dirs[0], dirs[i]);
        rc = cdb_eng_store_source_open(dbs[i], i ? dm.id : first.id, first.dim, &srcs[i]);
    }
    *dim = first.dim;
    return rc;
}

cdb_status cdb_engine_index_train_parts(const char *const *parts, int n,
                                        cdb_engine_index_kind kind, const char *out,
                                        cdb_engine_train_report *r) {
    cdb_db **dbs = NULL;
    cdb_index_source *srcs = NULL;
    cdb_index *ix = NULL;
    cdb_index_params p = cdb_index_params_default();
    cdb_index_info plan, info;
    cat_src cat = {NULL, n, 0};
    int64_t total = 0;
    cdb_status rc = CDB_OK;
    cdb_eng_clear();
    memset(r, 0, sizeof *r);
    if (n < 1 || !out || !*out) return cdb_seterr(CDB_INVALID, "no PART or no output file");
    dbs = calloc((size_t)n, sizeof *dbs);
    srcs = calloc((size_t)n, sizeof *srcs);
    if (!dbs || !srcs) rc = cdb_seterr(CDB_NOMEM, "out of memory");
    if (rc == CDB_OK) rc = open_sources(parts, n, dbs, srcs, &p.dim);
    for (int i = 0; i < n && rc == CDB_OK; i++) total += srcs[i].n;
    if (rc == CDB_OK && total == 0)
        rc = cdb_eng_fail(CDB_NOTFOUND, CDB_ENGINE_E_NO_VECTORS, "the parts hold no vectors");
    p.kind = (cdb_index_kind)kind;
    if (rc == CDB_OK) rc = cdb_index_plan(total, &p, &plan);
    if (rc != CDB_OK) goto done;
    r->vectors = total;
    snprintf(r->kind, sizeof r->kind, "%s", cdb_index_kind_name(plan.kind));
    if (!is_ivf(plan.kind)) { /* no lists to build in parts: no trained file either */
        if (unlink(out) != 0 && errno != ENOENT)
            rc = cdb_seterr(cdb_errno_status(errno), "cannot remove %s: %s", out,
                            strerror(errno));
        goto done;
    }
    cat.s = srcs;
    cat.dim = p.dim;
    {
        cdb_index_source all = {total, cat_read, &cat};
        if ((rc = cdb_index_new(&p, total, &ix)) == CDB_OK)
            rc = cdb_index_train_source(ix, &all);
    }
    if (rc == CDB_OK) rc = cdb_index_save(ix, out);
    if (rc == CDB_OK) rc = cdb_eng_trained_stamp(out, r->stamp);
    if (rc == CDB_OK) {
        cdb_index_get_info(ix, &info);
        r->n_train = info.n_train;
        r->written = 1;
    }
done:
    for (int i = 0; srcs && i < n; i++)
        if (srcs[i].read) cdb_eng_store_source_close(&srcs[i]);
    for (int i = 0; dbs && i < n; i++) cdb_db_close(dbs[i]);
    free(dbs);
    free(srcs);
    cdb_index_free(ix);
    return rc;
}

/* ---- add ------------------------------------------------------------------------------- */

/* Removes <dir>/index/part.*.cdbidx files other than keep (a name): part indexes of earlier
** trainings, which no merge will look for. Best effort. */
static void remove_other_part_indexes(const char *dir, const char *keep) {
    char path[4200];
    struct dirent *de;
    DIR *d;
    snprintf(path, sizeof path, "%s/index", dir);
    if (!(d = opendir(path))) return;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (strncmp(de->d_name, "part.", 5) || len < 12 ||
            strcmp(de->d_name + len - 7, ".cdbidx") || !strcmp(de->d_name, keep))
            continue;
        snprintf(path, sizeof path, "%s/index/%s", dir, de->d_name);
        if (unlink(path) != 0) CDB_LOG_WARN("cannot remove %s: %s", path, strerror(errno));
    }
    closedir(d);
}

cdb_status cdb_engine_index_add_part(cdb_engine *e, const char *trained,
                                     cdb_engine_part_add_report *r) {
    cdb_eng_clear();
    return cdb_eng_part_index_add(e->db, trained, r);
}

cdb_status cdb_eng_part_index_add(cdb_db *db, const char *trained, cdb_engine_part_add_report *r) {
    cdb_db_model dm;
    cdb_index *tix = NULL, *ix = NULL;
    cdb_index_source src = {0};
    char stamp[17], dir[4200];
    int64_t gen = 0;
    cdb_status rc;
    memset(r, 0, sizeof *r);
    if ((rc = cdb_db_model_default(db, &dm)) != CDB_OK)
        return cdb_eng_failw(rc, CDB_ENGINE_E_NOT_INITIALIZED, "it has no model",
                             "cannot add %s", cdb_db_dir(db));
    rc = cdb_index_load(trained, &tix);
    if (rc == CDB_NOTFOUND) { /* the train job found no IVF plan: nothing to add to */
        cdb_clearerr();
        return CDB_OK;
    }
    if (rc != CDB_OK) return cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "the trained index %s", trained);
    r->trained_found = 1;
    if (cdb_index_dim(tix) != dm.dim)
        rc = cdb_eng_fail(CDB_DIM_MISMATCH, CDB_ENGINE_E_NONE,
                          "the trained index %s has dim %d, the part's model %d", trained,
                          cdb_index_dim(tix), dm.dim);
    if (rc == CDB_OK) rc = cdb_eng_trained_stamp(trained, stamp);
    if (rc == CDB_OK) rc = cdb_db_generation(db, &gen); /* before the reads */
    if (rc == CDB_OK) rc = cdb_index_clone_empty(tix, &ix);
    if (rc == CDB_OK) rc = cdb_eng_store_source_open(db, dm.id, dm.dim, &src);
    if (rc == CDB_OK) rc = cdb_index_add_source(ix, &src);
    if (src.read) cdb_eng_store_source_close(&src);
    if (rc != CDB_OK) goto done;
    cdb_index_set_watermark(ix, (uint64_t)gen);
    snprintf(dir, sizeof dir, "%s/index", cdb_db_dir(db));
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        rc = cdb_seterr(cdb_errno_status(errno), "mkdir %s: %s", dir, strerror(errno));
        goto done;
    }
    cdb_eng_part_index_path(cdb_db_dir(db), stamp, r->path, sizeof r->path);
    if ((rc = cdb_index_save(ix, r->path)) != CDB_OK) goto done;
    r->vectors = cdb_index_count(ix);
    remove_other_part_indexes(cdb_db_dir(db), strrchr(r->path, '/') + 1);
done:
    cdb_index_free(tix);
    cdb_index_free(ix);
    return rc;
}
