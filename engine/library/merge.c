/*
** merge.c: `clipdb merge`: brings databases made by `ingest --part I/N` (or any other
** clipdb databases of the same model) into one.
**
** What a part holds goes in through db/'s batches, so the merge has the write order of
** every other writer (catalog pending -> shard -> catalog ok) and is safe against a
** kill -9 or a full disk at any moment; running it again finishes it with the same
** result, because every step is keyed by what a row is, never by what was done before:
** - roots by path (created with the part's settings, exclusions, scan outcome and walk
**   problems: every part walks every root, so each records the same problems), nested
**   as an ingest nests them (merge_roots): a root inside another folder root (of the
**   database or a part) goes into it, one holding the database's roots takes them over,
**   so every photo has one row;
** - models by weights hash: the database's default model must be every part's default
**   (CDB_INVALID otherwise, nothing written); a part's other vector sets are registered;
**   a part that is not a database, given twice or missing a shard is refused before
**   anything is written (open_parts; cdb_engine_merge_check, which `merge` runs before
**   it creates an absent database);
** - files by (root path, relpath): a part's ok file is put with its stored fp16 vector
**   copied bit for bit (cdb_db_batch_put_f16), for every vector set the part holds; an
**   error or pending file keeps its state and reason; a row the database already has
**   is replaced (its id kept), so merging a newer part of the same roots updates it;
**   of equal paths in several parts only the last part's row goes in (pass_root);
** - a part that records a partition (I/N) is the truth for its share: a live row of
**   the database in that share (cdb_db_part_of) that the part does not hold, or holds
**   as deleted, is marked deleted (the file was deleted, or moved: its new path is in
**   whichever part's share it hashes to now, db/README.md's "missing is never deleted"
**   holding within each part);
** - one file held by two parts at two paths (it moved from one part's share to
**   another's between their ingests: each part is the truth for its share only) keeps
**   the row whose path the disk has it at (drop_moved; never guessed from a missing
**   drive: then both stay until a reindex finds the gone path, as after an ingest of
**   one folder that a photo left for another);
** - thumbnails and photo metadata are copied after the batches that made their files
**   ok (outside the write order, as an ingest stores them: a kill between the two
**   leaves ok files without them, which the next merge copies); the thumbnails of files
**   deleted or changed are dropped, as a reindex drops them.
**
** Ids: the parts' files are put in one order, roots in the order they were first
** recorded (a part's roots are those its command named, in that order), then each
** root's files in the order a walk meets them (depth first, names in byte order:
** cdb_db_walk_cmp), so a merge into a new database gives every file the id one process
** ingesting the same roots with one reader thread gives it (test_cli_parts checks it).
**
** Memory: the rows are streamed (pass_rows), never held; what grows with the files is
** the part each database id came from (one byte per id, for the index), with a trained
** index file each ok row's part id and database id (16 bytes, to rename the ids of the
** parts' own indexes: merge_index.c), and SQLite's caches up to their bounds
** (bench_merge, without one: 33 bytes per file from 10^5 to 10^6 files, 190 when the
** rows were held).
*/
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "engine/library/library.h"

#define MERGE_COMMIT_EVERY 256

/* One file row of a part, and where it goes (its strings borrowed from the part's
** cursor: valid while the row is handled). */
typedef struct mrow {
    int part;          /* index into the parts */
    int64_t part_id;   /* its id in the part */
    int64_t root_id;   /* the database's root */
    const char *relpath;
    cdb_db_file_state state;
    const char *error;
    cdb_db_file_meta meta;
} mrow;

/* A root of a part, and the database's root its rows go under: its own (prefix NULL),
** or the folder root holding it (nested roots: ingest's rule, one root per photo), its
** rows there under prefix (its path below that root). */
typedef struct mroot {
    int64_t id;          /* in the part */
    char *path, *status; /* heap */
    cdb_db_root_kind kind;
    int follow_symlinks, no_exif;
    uint64_t dev;
    cdb_db_root_ident ident;
    int64_t db_id;       /* the database's root */
    char *prefix;        /* heap; NULL: db_id is this root's own path */
    int hidden;          /* inside a hidden folder of the holding root: its rows stay out */
} mroot;

typedef struct mpart {
    const char *dir;
    cdb_db *db;
    int part_index, part_count;
    mroot *roots;
    int n_roots;
} mpart;

/* A part's file ids and the database ids their rows became (pairs in from[i], to[i]). */
typedef struct id_pairs {
    int64_t *from, *to;
    int64_t n, cap;
} id_pairs;

typedef struct merger {
    cdb_engine *e;
    cdb_db *db;
    mpart *parts;
    int n_parts;
    int64_t *rank_root;  /* the database's roots in merge order */
    int n_ranks;
    uint8_t *part_of;    /* database file id -> 1 + the part its row came from (0: none) */
    int64_t n_part_of;
    int no_index;        /* CDB_ENGINE_MERGE_NO_INDEX */
    const char *trained; /* the trained index file, or NULL */
    id_pairs *ids;       /* with trained: per part (the first 255), its file ids -> the
                            database's, for the ok rows taken from it */
    cdb_engine_merge_report *r;
} merger;

/* ---- models ------------------------------------------------------------------------ */

typedef struct model_ud {
    merger *m;
    mpart *p;
    cdb_status rc;
} model_ud;

/* Registers a part's model in the database (get-or-create by weights hash). */
static int add_model(const cdb_db_model *dm, void *ud_) {
    model_ud *ud = ud_;
    int64_t id = 0;
    ud->rc = cdb_eng_model_copy(ud->p->db, dm, ud->m->db, &id);
    return ud->rc != CDB_OK;
}

/* Every part's default model is want (the database's, or the first part's, which a
** new database is made like). */
static cdb_status check_part_models(const merger *m, const cdb_db_model *want) {
    cdb_db_model have;
    cdb_status rc;
    for (int i = 0; i < m->n_parts; i++) {
        if ((rc = cdb_db_model_default(m->parts[i].db, &have)) != CDB_OK)
            return cdb_eng_failw(rc, CDB_ENGINE_E_NOT_INITIALIZED, "it has no model",
                                 "cannot merge %s", m->parts[i].dir);
        if (strcmp(have.weights_hash, want->weights_hash))
            return cdb_eng_fail(CDB_INVALID, CDB_ENGINE_E_NONE,
                                "cannot merge %s: its model '%s' (weights %.16s) is not the "
                                "database's '%s' (weights %.16s); parts must be made with the "
                                "same model",
                                m->parts[i].dir, have.name, have.weights_hash, want->name,
                                want->weights_hash);
    }
    return CDB_OK;
}

/* Every part's default model is the database's (*want); each part's other sets
** registered. */
static cdb_status check_models(merger *m, cdb_db_model *want /* OUT */) {
    cdb_status rc = cdb_db_model_default(m->db, want);
    if (rc != CDB_OK)
        return cdb_eng_failw(rc, CDB_ENGINE_E_NOT_INITIALIZED, "it has no model",
                             "cannot merge into %s", cdb_db_dir(m->db));
    if ((rc = check_part_models(m, want)) != CDB_OK) return rc;
    for (int i = 0; i < m->n_parts; i++) {
        model_ud ud = {m, &m->parts[i], CDB_OK};
        if ((rc = cdb_db_models_foreach(m->parts[i].db, add_model, &ud)) != CDB_OK) return rc;
        if (ud.rc != CDB_OK) return ud.rc;
    }
    return CDB_OK;
}

/* ---- roots ------------------------------------------------------------------------- */

/* The database's rank of root id (its place in the merge order), added when new. */
static int rank_of(merger *m, int64_t root_id) {
    for (int i = 0; i < m->n_ranks; i++)
        if (m->rank_root[i] == root_id) return i;
    int64_t *p = realloc(m->rank_root, sizeof *p * (size_t)(m->n_ranks + 1));
    if (!p) return -1;
    m->rank_root = p;
    p[m->n_ranks] = root_id;
    return m->n_ranks++;
}

/* rel (a relpath below a root at prefix, "" for a file root's file) as a relpath of the
** root holding that one: prefix/rel (as cdb_db_root_adopt names the rows it moves).
** NULL prefix: rel. Into buf (*cap bytes, grown); NULL when out of memory. */
static const char *under_prefix(const char *prefix, const char *rel, char **buf, size_t *cap) {
    size_t np, nr = strlen(rel);
    if (!prefix) return rel;
    np = strlen(prefix);
    if (np + nr + 2 > *cap) {
        char *q = realloc(*buf, np + nr + 2);
        if (!q) return NULL;
        *buf = q;
        *cap = np + nr + 2;
    }
    snprintf(*buf, *cap, "%s%s%s", prefix, nr ? "/" : "", rel);
    return *buf;
}

/* Copies the part's exclusion rules of a root onto the database's root, their folder
** under prefix (a root nested in the database's: as cdb_db_root_adopt moves them). */
static cdb_status copy_excludes(cdb_db *from, const mroot *r, cdb_db *to) {
    cdb_db_exclude *v = NULL;
    char *buf = NULL;
    size_t cap = 0;
    int n = 0;
    cdb_status rc = cdb_db_root_excludes(from, r->id, &v, &n);
    for (int i = 0; i < n && rc == CDB_OK; i++) {
        const char *base = under_prefix(r->prefix, v[i].base, &buf, &cap);
        rc = base ? cdb_db_root_exclude_add(to, r->db_id, v[i].kind, base, v[i].pattern)
                  : cdb_seterr(CDB_NOMEM, "out of memory");
    }
    cdb_db_excludes_free(v, n);
    free(buf);
    return rc;
}

/* Copies a walk problem into the rows ud (eng_rows). */
static int add_problem(const cdb_db_walk_problem *p, void *ud) {
    eng_rows *rows = ud;
    cdb_db_walk_problem *q = cdb_eng_rows_add(rows, sizeof *q);
    if (!q) return 1;
    *q = *p;
    q->relpath = strdup(p->relpath);
    q->reason = strdup(p->reason);
    if (!q->relpath || !q->reason) return rows->oom = 1;
    return 0;
}

/* The part's walk problems of a root (what its scan could not read) onto the database's
** root, replacing those recorded there: `clipdb errors` lists them. */
static cdb_status copy_problems(cdb_db *from, int64_t from_id, cdb_db *to, int64_t to_id) {
    eng_rows rows = {0};
    cdb_status rc = cdb_db_walk_problems_foreach(from, from_id, add_problem, &rows);
    cdb_db_walk_problem *v = rows.v;
    if (rc == CDB_OK && rows.oom) rc = cdb_seterr(CDB_NOMEM, "out of memory");
    if (rc == CDB_OK) rc = cdb_db_walk_problems_set(to, to_id, NULL, v, (int)rows.n);
    for (size_t i = 0; i < rows.n; i++) {
        free((char *)v[i].relpath);
        free((char *)v[i].reason);
    }
    free(v);
    return rc;
}

typedef struct root_ud {
    mpart *p;
    cdb_status rc;
} root_ud;

/* Keeps a part's root: what the merge needs of it. */
static int collect_root(const cdb_db_root *r, void *ud_) {
    root_ud *ud = ud_;
    mpart *p = ud->p;
    mroot *v = realloc(p->roots, sizeof *v * (size_t)(p->n_roots + 1)), *x;
    if (!v) {
        ud->rc = cdb_seterr(CDB_NOMEM, "out of memory");
        return 1;
    }
    p->roots = v;
    x = &v[p->n_roots++];
    memset(x, 0, sizeof *x);
    x->id = r->id;
    x->kind = r->kind;
    x->follow_symlinks = r->follow_symlinks;
    x->no_exif = r->no_exif;
    x->dev = r->dev;
    x->ident = r->ident;
    x->path = strdup(r->path);
    x->status = r->status ? strdup(r->status) : NULL;
    if (!x->path || (r->status && !x->status)) {
        ud->rc = cdb_seterr(CDB_NOMEM, "out of memory");
        return 1;
    }
    return 0;
}

/* 1 when path lies inside a folder root of a part or of the database (lib). */
static int nested(const merger *m, const eng_library *lib, const char *path) {
    for (int i = 0; i < lib->n; i++)
        if (lib->r[i].kind == CDB_DB_ROOT_FOLDER && cdb_eng_path_under(path, lib->r[i].path, 1))
            return 1;
    for (int i = 0; i < m->n_parts; i++)
        for (int k = 0; k < m->parts[i].n_roots; k++) {
            const mroot *r = &m->parts[i].roots[k];
            if (r->kind == CDB_DB_ROOT_FOLDER && cdb_eng_path_under(path, r->path, 1)) return 1;
        }
    return 0;
}

/* Records a root of a part that no other root holds as the database's own, with the
** part's settings, exclusions, scan outcome and walk problems. */
static cdb_status record_root(merger *m, const mpart *p, mroot *r) {
    cdb_db *db = m->db;
    cdb_status rc = cdb_db_root_create(db, r->path, r->kind, r->follow_symlinks, &r->db_id);
    if (rc == CDB_OK) rc = cdb_db_root_set_options(db, r->db_id, -1, r->no_exif);
    if (rc == CDB_OK) rc = copy_excludes(p->db, r, db);
    if (rc == CDB_OK && r->status)
        rc = cdb_db_root_set_scan(db, r->db_id, r->dev, r->ident.ino ? &r->ident : NULL,
                                  r->status);
    if (rc == CDB_OK) rc = copy_problems(p->db, r->id, db, r->db_id);
    return rc;
}

/* Where part root r's rows go: the database's root at its path, or the folder root that
** holds it (its rows under the prefix; its exclusions with them, its walk problems
** left to the holding root's walk, as cdb_db_root_adopt does). */
static cdb_status map_root(merger *m, const mpart *p, const eng_library *lib, mroot *r) {
    for (int i = 0; i < lib->n; i++)
        if (!strcmp(lib->r[i].path, r->path)) {
            r->db_id = lib->r[i].id;
            return CDB_OK;
        }
    for (int i = 0; i < lib->n; i++) {
        const char *h = lib->r[i].path;
        if (lib->r[i].kind != CDB_DB_ROOT_FOLDER || !cdb_eng_path_under(r->path, h, 1)) continue;
        r->db_id = lib->r[i].id;
        if (!(r->prefix = strdup(r->path + strlen(h) + (h[strlen(h) - 1] == '/' ? 0 : 1))))
            return cdb_seterr(CDB_NOMEM, "out of memory");
        if ((r->hidden = cdb_eng_rel_hidden(r->prefix))) {
            cdb_eng_warn(&m->e->p.events,
                         "%s (of %s) is hidden inside %s (names starting with '.' are skipped "
                         "there): its photos are not merged",
                         r->path, p->dir, h);
            return CDB_OK;
        }
        return copy_excludes(p->db, r, m->db);
    }
    return cdb_seterr(CDB_ERROR, "root %s vanished while it was recorded", r->path);
}

/* The parts' roots into the database by ingest's rule (library.c): a root no other
** root holds is recorded; one that holds roots of the database takes them over (their
** rows and vectors: cdb_eng_library_normalize); one inside another's folder is a part
** of that root. Then the merge order: the database's roots as the parts name them. */
static cdb_status merge_roots(merger *m, int64_t model_id) {
    eng_library lib;
    cdb_status rc = CDB_OK;
    for (int i = 0; i < m->n_parts && rc == CDB_OK; i++) {
        root_ud ud = {&m->parts[i], CDB_OK};
        rc = cdb_db_roots_foreach(m->parts[i].db, collect_root, &ud);
        if (rc == CDB_OK) rc = ud.rc;
    }
    if (rc != CDB_OK || (rc = cdb_eng_library_load(m->db, &lib)) != CDB_OK) return rc;
    for (int i = 0; i < m->n_parts && rc == CDB_OK; i++)
        for (int k = 0; k < m->parts[i].n_roots && rc == CDB_OK; k++)
            if (!nested(m, &lib, m->parts[i].roots[k].path))
                rc = record_root(m, &m->parts[i], &m->parts[i].roots[k]);
    cdb_eng_library_free(&lib);
    if (rc == CDB_OK && (rc = cdb_eng_library_load(m->db, &lib)) == CDB_OK) {
        rc = cdb_eng_library_normalize(m->db, model_id, &lib, NULL);
        for (int i = 0; i < m->n_parts && rc == CDB_OK; i++)
            for (int k = 0; k < m->parts[i].n_roots && rc == CDB_OK; k++) {
                mroot *r = &m->parts[i].roots[k];
                rc = map_root(m, &m->parts[i], &lib, r);
                if (rc == CDB_OK && !r->hidden && rank_of(m, r->db_id) < 0)
                    rc = cdb_seterr(CDB_NOMEM, "out of memory");
            }
        cdb_eng_library_free(&lib);
    }
    return rc;
}

/* ---- rows, streamed ------------------------------------------------------------------
** The parts' rows go by in merge order without being held: for each of the database's
** roots in rank order, a cursor per part root that goes under it, on that root's rows
** in walk order (cdb_db_files_cursor_open: SQLite sorts, spilling to temporary files;
** a nested root's relpaths under its prefix keep that order), merged N ways. Of rows
** with equal paths only the last (the latest part's) goes by: it replaces the others,
** and each file is counted once. Memory: one row per part root, whatever the number of
** files. Each pass (a vector set, the extras) reads the parts again. */

typedef cdb_status (*row_fn)(merger *m, const mrow *r, void *ud);

/* One cursor of a pass: a part root's rows, each with its relpath in the database. */
typedef struct msrc {
    int part;
    const mroot *root;
    cdb_db_files_cursor *cur;
    cdb_db_file f;
    int has;
    const char *rel; /* f's relpath in the database's root (f's own, or buf) */
    char *buf;
    size_t cap;
} msrc;

static cdb_status src_next(msrc *s) {
    cdb_status rc = cdb_db_files_cursor_next(s->cur, &s->f, &s->has);
    if (rc == CDB_OK && s->has &&
        !(s->rel = under_prefix(s->root->prefix, s->f.relpath, &s->buf, &s->cap)))
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
    return rc;
}

/* The cursors on the part roots that go under the database's root db_root (part
** order, then root order), in *out (heap); their number. *rc: CDB_OK or the failure. */
static int open_srcs(merger *m, int64_t db_root, unsigned mask, msrc **out, cdb_status *rc) {
    int n = 0, cap = 0;
    msrc *v = NULL;
    *rc = CDB_OK;
    for (int i = 0; i < m->n_parts && *rc == CDB_OK; i++)
        for (int k = 0; k < m->parts[i].n_roots && *rc == CDB_OK; k++) {
            const mroot *r = &m->parts[i].roots[k];
            if (r->db_id != db_root || r->hidden) continue;
            if (n == cap) {
                msrc *q = realloc(v, sizeof *q * (size_t)(cap = cap ? cap * 2 : 4));
                if (!q) {
                    *rc = cdb_seterr(CDB_NOMEM, "out of memory");
                    break;
                }
                v = q;
            }
            memset(&v[n], 0, sizeof v[n]);
            v[n].part = i;
            v[n].root = r;
            *rc = cdb_db_files_cursor_open(m->parts[i].db, r->id, mask, &v[n].cur);
            if (*rc == CDB_OK) *rc = src_next(&v[n]);
            n++;
        }
    *out = v;
    return n;
}

/* Every row of the database's root db_root from the parts whose state is in mask, in
** walk order, through fn. */
static cdb_status pass_root(merger *m, int64_t db_root, unsigned mask, row_fn fn, void *ud) {
    msrc *s = NULL;
    cdb_status rc;
    int n = open_srcs(m, db_root, mask, &s, &rc);
    while (rc == CDB_OK) {
        int best = -1;
        mrow r;
        for (int i = 0; i < n; i++)
            if (s[i].has && (best < 0 || cdb_db_walk_cmp(s[i].rel, s[best].rel) <= 0)) best = i;
        if (best < 0) break;
        /* the same path in other parts: theirs are replaced (ties: the later source won) */
        for (int i = 0; i < best && rc == CDB_OK; i++)
            if (s[i].has && !cdb_db_walk_cmp(s[i].rel, s[best].rel)) rc = src_next(&s[i]);
        if (rc != CDB_OK) break;
        r.part = s[best].part;
        r.part_id = s[best].f.id;
        r.root_id = db_root;
        r.relpath = s[best].rel;
        r.state = s[best].f.state;
        r.error = s[best].f.error;
        r.meta = s[best].f.meta;
        rc = fn(m, &r, ud);
        if (rc == CDB_OK) rc = src_next(&s[best]);
    }
    for (int i = 0; i < n; i++) {
        cdb_db_files_cursor_close(s[i].cur);
        free(s[i].buf);
    }
    free(s);
    return rc;
}

/* Every part's rows whose state is in mask, in merge order, through fn. */
static cdb_status pass_rows(merger *m, unsigned mask, row_fn fn, void *ud) {
    cdb_status rc = CDB_OK;
    for (int k = 0; k < m->n_ranks && rc == CDB_OK; k++)
        rc = pass_root(m, m->rank_root[k], mask, fn, ud);
    return rc;
}

/* ---- writing ------------------------------------------------------------------------ */

static cdb_status commit_if(cdb_db_batch *b, int force) {
    if (cdb_db_batch_count(b) == 0) return CDB_OK;
    if (!force && cdb_db_batch_count(b) < MERGE_COMMIT_EVERY) return CDB_OK;
    return cdb_db_batch_commit(b, NULL);
}

/* Stages row r for the default set (first) or another set (model ids in the part and
** the database): ok rows with their vector, failures, deletions. */
static cdb_status stage_row(merger *m, cdb_db_batch *b, const mrow *r, int64_t part_model,
                            int dim, int first, uint16_t *v16) {
    cdb_db *pdb = m->parts[r->part].db;
    cdb_status rc = CDB_OK;
    if (r->state == CDB_DB_OK) {
        uint8_t found = 0;
        if ((rc = cdb_db_vectors_get_f16(pdb, part_model, &r->part_id, 1, v16, &found)) != CDB_OK)
            return rc;
        if (!found) return CDB_OK; /* the part's set lacks it: its next reindex makes it */
        m->r->vectors++;
        return cdb_db_batch_put_f16(b, r->root_id, r->relpath, &r->meta, v16, dim);
    }
    if (!first) return CDB_OK;
    if (r->state == CDB_DB_ERROR)
        return cdb_db_batch_put_error(b, r->root_id, r->relpath, &r->meta, r->error);
    if (r->state == CDB_DB_PENDING)
        return cdb_db_batch_put_retry(b, r->root_id, r->relpath, &r->meta,
                                      r->error ? r->error : "left pending by the part's ingest");
    {   /* deleted in the part: deleted here too, when the database holds it live */
        cdb_db_file f;
        rc = cdb_db_file_lookup(m->db, r->root_id, r->relpath, &f);
        if (rc == CDB_NOTFOUND) {
            cdb_clearerr();
            return CDB_OK;
        }
        if (rc == CDB_OK && f.state != CDB_DB_DELETED) {
            rc = cdb_db_batch_delete(b, f.id);
            m->r->deleted++;
        }
        cdb_db_file_clear(&f);
    }
    return rc;
}

typedef struct set_ud {
    merger *m;
    int first;
    cdb_db_batch *b;
    int64_t *part_model; /* the set's model id in each part (0: the part lacks it) */
    int dim;
    uint16_t *v16;
    cdb_status rc;
} set_ud;

static cdb_status set_row(merger *m, const mrow *r, void *ud_) {
    set_ud *ud = ud_;
    cdb_status rc;
    if (!ud->part_model[r->part]) return CDB_OK;
    if (ud->first) m->r->files += r->state != CDB_DB_DELETED;
    rc = stage_row(m, ud->b, r, ud->part_model[r->part], ud->dim, ud->first, ud->v16);
    return rc == CDB_OK ? commit_if(ud->b, 0) : rc;
}

/* One vector set: every row in merge order (the default set: every row; another set:
** the ok ones), through one batch. */
static int merge_set(const cdb_db_model *dm, void *ud_) {
    set_ud *ud = ud_;
    merger *m = ud->m;
    cdb_status rc;
    ud->b = NULL;
    ud->dim = dm->dim;
    ud->v16 = malloc(sizeof *ud->v16 * (size_t)dm->dim);
    ud->part_model = calloc((size_t)m->n_parts, sizeof *ud->part_model);
    rc = ud->v16 && ud->part_model ? CDB_OK : cdb_seterr(CDB_NOMEM, "out of memory");
    if (ud->first != dm->is_default) goto done; /* the default set first, then the others */
    for (int i = 0; i < m->n_parts && rc == CDB_OK; i++) {
        cdb_db_model pm;
        rc = cdb_db_model_find(m->parts[i].db, dm->weights_hash, &pm);
        if (rc == CDB_NOTFOUND) {
            cdb_clearerr();
            rc = CDB_OK;
            continue;
        }
        ud->part_model[i] = pm.id;
    }
    if (rc == CDB_OK) rc = cdb_db_batch_new(m->db, dm->id, &ud->b);
    if (rc == CDB_OK)
        rc = pass_rows(m, ud->first ? CDB_DB_MASK_ALL : CDB_DB_MASK_OK, set_row, ud);
    if (rc == CDB_OK) rc = commit_if(ud->b, 1);
done:
    cdb_db_batch_free(ud->b);
    ud->b = NULL;
    free(ud->v16);
    free(ud->part_model);
    ud->rc = rc;
    return rc != CDB_OK;
}

/* ---- a part's share: what it no longer holds ---------------------------------------- */

typedef struct gone_ud {
    merger *m;
    const mpart *p;
    eng_rows ids; /* int64_t: the file ids to mark deleted */
    cdb_status rc;
} gone_ud;

/* The part root of p whose share holds the database's row f (its relpath in that root
** into *rel), or NULL. */
static const mroot *share_root(const mpart *p, const cdb_db_file *f, const char **rel) {
    for (int k = 0; k < p->n_roots; k++) {
        const mroot *r = &p->roots[k];
        size_t n = r->prefix ? strlen(r->prefix) : 0;
        if (r->db_id != f->root_id || r->hidden) continue;
        if (n && (strncmp(f->relpath, r->prefix, n) || (f->relpath[n] && f->relpath[n] != '/')))
            continue;
        *rel = f->relpath + n + (n && f->relpath[n] ? 1 : 0);
        /* the hash first: only the share's rows are looked up in the part */
        return cdb_db_part_of(r->path, *rel, p->part_count) == p->part_index ? r : NULL;
    }
    return NULL;
}

static int find_gone(const cdb_db_file *f, void *ud_) {
    gone_ud *ud = ud_;
    const char *rel = NULL;
    const mroot *r = share_root(ud->p, f, &rel);
    cdb_db_file pf;
    cdb_status rc;
    int held;
    if (!r) return 0;
    rc = cdb_db_file_lookup(ud->p->db, r->id, rel, &pf);
    if (rc == CDB_OK) {
        held = pf.state != CDB_DB_DELETED;
        cdb_db_file_clear(&pf);
        if (held) return 0;
    } else if (rc != CDB_NOTFOUND) {
        ud->rc = rc;
        return 1;
    }
    cdb_clearerr();
    int64_t *id = cdb_eng_rows_add(&ud->ids, sizeof *id);
    if (!id) {
        ud->rc = cdb_seterr(CDB_NOMEM, "out of memory");
        return 1;
    }
    *id = f->id;
    return 0;
}

/* Marks the database's rows ids[0..n) deleted, in batches. */
static cdb_status delete_ids(merger *m, const int64_t *ids, size_t n) {
    cdb_db_model dm;
    cdb_db_batch *b = NULL;
    cdb_status rc = n ? cdb_db_model_default(m->db, &dm) : CDB_OK;
    if (rc == CDB_OK && n) rc = cdb_db_batch_new(m->db, dm.id, &b);
    for (size_t i = 0; i < n && rc == CDB_OK; i++) {
        rc = cdb_db_batch_delete(b, ids[i]);
        if (rc == CDB_OK) rc = commit_if(b, 0);
    }
    if (rc == CDB_OK && b) rc = commit_if(b, 1);
    if (rc == CDB_OK) m->r->deleted += (int64_t)n;
    cdb_db_batch_free(b);
    return rc;
}

/* Marks deleted the database's live rows in part p's share that p does not hold. */
static cdb_status drop_gone(merger *m, const mpart *p) {
    gone_ud ud = {m, p, {0}, CDB_OK};
    cdb_status rc;
    if (p->part_count < 1) return CDB_OK;
    rc = cdb_db_files_foreach(m->db, 0, CDB_DB_MASK_OK | CDB_DB_MASK_PENDING | CDB_DB_MASK_ERROR,
                              find_gone, &ud);
    if (rc == CDB_OK) rc = ud.rc;
    if (rc == CDB_OK) rc = delete_ids(m, ud.ids.v, ud.ids.n);
    free(ud.ids.v);
    return rc;
}

/* ---- one file at two paths ----------------------------------------------------------- */

/* An ok row's file identity, as the ingest that read it recorded it. */
typedef struct eng_ident {
    uint64_t ino, dev;
    int64_t size, id, root_id;
    uint8_t hash[CDB_DB_HASH_BYTES];
} eng_ident;

static int add_ident(const cdb_db_file *f, void *ud) {
    eng_ident *r;
    if (!f->meta.ino || !f->meta.has_hash) return 0; /* recorded before identities were */
    if (!(r = cdb_eng_rows_add(ud, sizeof *r))) return 1;
    r->ino = f->meta.ino, r->dev = f->meta.dev, r->size = f->meta.size;
    r->id = f->id, r->root_id = f->root_id;
    memcpy(r->hash, f->meta.hash, sizeof r->hash);
    return 0;
}

/* 1 when x and y are one file: the same inode number, size and content. Not the device:
** a shared filesystem can have another st_dev on each node that ingested a part. */
static int same_file(const eng_ident *x, const eng_ident *y) {
    return x->ino == y->ino && x->size == y->size && !memcmp(x->hash, y->hash, sizeof x->hash);
}

/* The identities of db's ok rows of files recorded at more than one path
** (cdb_db_files_same_identity, in its order: the rows of one file together, by id):
** eng_ident rows in out (free out->v). */
static cdb_status file_idents(cdb_db *db, eng_rows *out) {
    cdb_status rc;
    memset(out, 0, sizeof *out);
    rc = cdb_db_files_same_identity(db, add_ident, out);
    if (rc == CDB_OK && out->oom) rc = cdb_seterr(CDB_NOMEM, "out of memory");
    return rc;
}

/* Which of the rows g[0..n) of one file (same_file) the disk confirms: live[i] 1 when
** row i's path is that file now, -1 when its path is gone (cdb_eng_library_gone: its
** root is there, so "gone" is known, never guessed from a missing drive), 0 when
** nothing is known. */
static cdb_status judge_group(merger *m, const eng_library *lib, const eng_ident *g, int n,
                              int *live) {
    for (int i = 0; i < n; i++) {
        char *path = NULL;
        struct stat st;
        cdb_status rc = cdb_db_file_path(m->db, g[i].id, &path);
        if (rc != CDB_OK) return rc;
        if (lstat(path, &st) == 0)
            live[i] = S_ISREG(st.st_mode) && (uint64_t)st.st_ino == g[i].ino &&
                      (int64_t)st.st_size == g[i].size;
        else
            live[i] = cdb_eng_library_gone(lib, g[i].root_id, path, g[i].dev) ? -1 : 0;
        cdb_free(path);
    }
    return CDB_OK;
}

/* A file that moved from one part's share to another's between the parts' ingests is
** held by both, at its old path and its new one (each part is the truth for its own
** share only). An ingest never stores one file twice (a file with several names,
** hard links, goes in once: walk.c), so ok rows of the same file (same_file) are the
** same photo twice: the rows whose path is gone are marked deleted, when the disk
** confirms another row of the file at its path. Without a confirmation (the photos'
** drive not mounted where the merge runs) every row stays: a reindex that sees the disk
** drops the gone one. */
static cdb_status drop_moved(merger *m) {
    eng_rows rows, gone = {0};
    eng_library lib;
    cdb_status rc = file_idents(m->db, &rows);
    const eng_ident *v = rows.v;
    if (rc != CDB_OK || rows.n < 2) {
        free(rows.v);
        return rc;
    }
    if ((rc = cdb_eng_library_load(m->db, &lib)) != CDB_OK) {
        free(rows.v);
        return rc;
    }
    for (size_t i = 0, j; i < rows.n && rc == CDB_OK; i = j) {
        int live[8], n, confirmed = 0;
        for (j = i + 1; j < rows.n && same_file(&v[i], &v[j]); j++) {}
        if ((n = (int)(j - i)) < 2) continue;
        if (n > 8) n = 8; /* more names than that: left to verify */
        rc = judge_group(m, &lib, v + i, n, live);
        for (int k = 0; k < n; k++) confirmed |= live[k] == 1;
        for (int k = 0; k < n && rc == CDB_OK && confirmed; k++) {
            int64_t *id = live[k] < 0 ? cdb_eng_rows_add(&gone, sizeof *id) : NULL;
            if (id) *id = v[i + k].id;
            else if (live[k] < 0) rc = cdb_seterr(CDB_NOMEM, "out of memory");
        }
    }
    cdb_eng_library_free(&lib);
    free(rows.v);
    if (rc == CDB_OK) rc = delete_ids(m, gone.v, gone.n);
    free(gone.v);
    return rc;
}

/* ---- thumbnails and photo metadata ----------------------------------------------------- */

#define EXTRAS_EVERY 128 /* thumbnails and metadata rows per transaction */

typedef struct extras {
    cdb_db_thumb t[EXTRAS_EVERY];
    cdb_db_photo ph[EXTRAS_EVERY];
    int n_t, n_ph;
} extras;

/* Stores what x holds (one transaction each) and empties it. */
static cdb_status extras_flush(merger *m, extras *x) {
    cdb_status rc = x->n_t ? cdb_db_thumbs_put(m->db, x->t, x->n_t) : CDB_OK;
    if (rc == CDB_OK && x->n_ph) rc = cdb_db_photos_put(m->db, x->ph, x->n_ph);
    if (rc == CDB_OK) {
        m->r->thumbs += x->n_t;
        m->r->photos += x->n_ph;
    }
    for (int i = 0; i < x->n_t; i++) cdb_db_thumb_clear(&x->t[i]);
    x->n_t = x->n_ph = 0;
    return rc;
}

/* Records that the database's file id came from part (for the index, built by part). */
static cdb_status note_part(merger *m, int64_t id, int part) {
    if (id < 0 || part > 254) return CDB_OK; /* past 255 parts: the index's last group */
    if (id >= m->n_part_of) {
        int64_t nn = (id + 1) * 2;
        uint8_t *p = realloc(m->part_of, (size_t)nn);
        if (!p) return cdb_seterr(CDB_NOMEM, "out of memory");
        memset(p + m->n_part_of, 0, (size_t)(nn - m->n_part_of));
        m->part_of = p;
        m->n_part_of = nn;
    }
    m->part_of[id] = (uint8_t)(part + 1);
    return CDB_OK;
}

/* Notes that part's file part_id became the database's id (for its own index). */
static cdb_status note_id(merger *m, int part, int64_t part_id, int64_t id) {
    id_pairs *q;
    if (!m->ids || part > 254) return CDB_OK;
    q = &m->ids[part];
    if (q->n == q->cap) {
        int64_t nc = q->cap ? q->cap * 2 : 1024;
        int64_t *f = realloc(q->from, sizeof *f * (size_t)nc), *t;
        if (f) q->from = f;
        if (!f || !(t = realloc(q->to, sizeof *t * (size_t)nc)))
            return cdb_seterr(CDB_NOMEM, "out of memory");
        q->to = t;
        q->cap = nc;
    }
    q->from[q->n] = part_id;
    q->to[q->n++] = id;
    return CDB_OK;
}

/* Row r's thumbnail and metadata from its part, under the database's id, into x (and
** the part it came from noted). */
static cdb_status extras_add(merger *m, const mrow *r, extras *x) {
    cdb_db *pdb = m->parts[r->part].db;
    cdb_db_file f;
    cdb_db_photo *ph = &x->ph[x->n_ph];
    uint8_t found = 0;
    int64_t id;
    cdb_status rc = cdb_db_file_lookup(m->db, r->root_id, r->relpath, &f);
    if (rc != CDB_OK) return rc;
    id = f.id;
    cdb_db_file_clear(&f);
    if ((rc = note_part(m, id, r->part)) != CDB_OK) return rc;
    if ((rc = note_id(m, r->part, r->part_id, id)) != CDB_OK) return rc;
    if ((rc = cdb_db_thumb_get(pdb, r->part_id, &x->t[x->n_t])) == CDB_OK) {
        x->t[x->n_t++].file_id = id;
    } else if (rc == CDB_NOTFOUND) {
        cdb_clearerr();
        rc = CDB_OK;
    }
    if (rc == CDB_OK) rc = cdb_db_photos_get(pdb, &r->part_id, 1, ph, &found);
    if (rc == CDB_OK && found && ph->read) {
        ph->file_id = id;
        if (ph->taken_source == CDB_DB_TAKEN_FILE) { /* get's stand-in: none stored */
            ph->taken_source = CDB_DB_TAKEN_NONE;
            memset(&ph->taken, 0, sizeof ph->taken);
        }
        x->n_ph++;
    }
    return rc;
}

static cdb_status extras_row(merger *m, const mrow *r, void *ud) {
    extras *x = ud;
    cdb_status rc = extras_add(m, r, x);
    if (rc == CDB_OK && (x->n_t == EXTRAS_EVERY || x->n_ph == EXTRAS_EVERY))
        rc = extras_flush(m, x);
    return rc;
}

/* The thumbnail and the metadata of every ok row, under the database's ids. */
static cdb_status copy_extras(merger *m) {
    extras *x = calloc(1, sizeof *x);
    cdb_status rc = x ? CDB_OK : cdb_seterr(CDB_NOMEM, "out of memory");
    if (rc == CDB_OK) rc = pass_rows(m, CDB_DB_MASK_OK, extras_row, x);
    if (x) {
        cdb_status frc = extras_flush(m, x);
        if (rc == CDB_OK) rc = frc;
    }
    free(x);
    return rc;
}

/* ---- the index ------------------------------------------------------------------------ */

typedef struct index_ud {
    merger *m;
    cdb_status rc;
} index_ud;

static int cmp_pair(const void *a, const void *b) {
    const int64_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* Part k's pairs, sorted by the part's id, kept only where the database's row came from
** part k in the end (a later part's row of the same path replaces it): the map its own
** index is renamed by. */
static cdb_status part_map(merger *m, int k, eng_part_index *pi) {
    id_pairs *q = &m->ids[k];
    int64_t *pair = malloc(sizeof *pair * 2 * (size_t)(q->n + 1)), n = 0;
    if (!pair) return cdb_seterr(CDB_NOMEM, "out of memory");
    for (int64_t i = 0; i < q->n; i++) {
        int64_t to = q->to[i];
        if (to < 0 || to >= m->n_part_of || m->part_of[to] != k + 1) continue;
        pair[2 * n] = q->from[i];
        pair[2 * n + 1] = to;
        n++;
    }
    qsort(pair, (size_t)n, sizeof *pair * 2, cmp_pair);
    q->n = 0; /* rewritten in place: from ascending, the last of equal ids kept */
    for (int64_t i = 0; i < n; i++) {
        if (q->n && q->from[q->n - 1] == pair[2 * i]) q->n--;
        q->from[q->n] = pair[2 * i];
        q->to[q->n++] = pair[2 * i + 1];
    }
    free(pair);
    *pi = (eng_part_index){m->parts[k].dir, m->parts[k].db, q->from, q->to, q->n};
    return CDB_OK;
}

/* One vector set's index, built by part (merge_index.c); the default set's from the
** trained file and the parts' own indexes when the merge has them. */
static int build_index(const cdb_db_model *dm, void *ud_) {
    index_ud *ud = ud_;
    merger *m = ud->m;
    eng_index_result res;
    eng_split_result split;
    eng_part_index *pi = NULL;
    int n_groups = m->n_parts < 255 ? m->n_parts : 255;
    ud->rc = CDB_OK;
    if (dm->is_default && m->trained && m->ids) {
        if (!(pi = calloc((size_t)n_groups, sizeof *pi)))
            ud->rc = cdb_seterr(CDB_NOMEM, "out of memory");
        for (int k = 0; k < n_groups && ud->rc == CDB_OK; k++) ud->rc = part_map(m, k, &pi[k]);
    }
    if (ud->rc == CDB_OK)
        ud->rc = cdb_eng_index_build_split(m->db, dm->id, dm->dim, CDB_INDEX_AUTO, m->part_of,
                                           m->n_part_of, n_groups, pi ? m->trained : NULL, pi,
                                           &res, &split);
    free(pi);
    if (ud->rc == CDB_NOTFOUND) { /* no vectors in this set: no index */
        cdb_clearerr();
        ud->rc = CDB_OK;
        return 0;
    }
    if (ud->rc == CDB_OK && dm->is_default) {
        m->r->indexed = res.n_vectors;
        m->r->index_parts = split.built_in;
        m->r->index_part_files = split.from_files;
        m->r->index_trained_file = split.trained_file;
        snprintf(m->r->index_kind, sizeof m->r->index_kind, "%s",
                 cdb_index_kind_name(res.info.kind));
    }
    return ud->rc != CDB_OK;
}

/* ---- the merge ------------------------------------------------------------------------ */

/* Refuses part pt when a shard of it is missing or damaged: its vectors could not be
** copied (verify names the problem, reindex --repair re-encodes what it lost). */
static cdb_status check_shards(const mpart *pt) {
    cdb_db_report *rep = NULL;
    cdb_status rc = cdb_db_check_shards(pt->db, &rep);
    if (rc == CDB_OK && rep->n_problems)
        rc = cdb_eng_failw(CDB_CORRUPT, CDB_ENGINE_E_NONE,
                           rep->n_listed ? rep->problems[0].msg : "a shard is missing or damaged",
                           "cannot merge %s: it lost vectors with a shard; 'clipdb verify --db "
                           "%s' lists the problems, 'clipdb reindex --repair' mends them",
                           pt->dir, pt->dir);
    cdb_db_report_free(rep);
    return rc;
}

/* Opens the parts (readers) and checks that none is the database (at self_dir) or
** another part, that no two are the same part of one partition, and that every
** shard of each is there. */
static cdb_status open_parts(merger *m, const char *self_dir, const char *const *dirs) {
    char self[PATH_MAX], (*real)[PATH_MAX] = calloc((size_t)m->n_parts, sizeof *real);
    cdb_db_params p = cdb_db_params_default();
    cdb_status rc = real ? CDB_OK : cdb_seterr(CDB_NOMEM, "out of memory");
    p.readonly = 1;
    if (!realpath(self_dir, self)) self[0] = '\0';
    for (int i = 0; i < m->n_parts && rc == CDB_OK; i++) {
        mpart *pt = &m->parts[i];
        pt->dir = dirs[i];
        if (!realpath(dirs[i], real[i])) real[i][0] = '\0';
        if (real[i][0] && !strcmp(self, real[i])) {
            rc = cdb_eng_fail(CDB_INVALID, CDB_ENGINE_E_NONE, "cannot merge %s into itself",
                              dirs[i]);
            break;
        }
        for (int k = 0; k < i && rc == CDB_OK; k++)
            if (real[i][0] && !strcmp(real[k], real[i]))
                rc = cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_NONE, NULL,
                                   "%s and %s are the same database", dirs[k], dirs[i]);
        if (rc != CDB_OK) break;
        if ((rc = cdb_db_open(dirs[i], &p, &pt->db)) != CDB_OK) {
            rc = cdb_eng_fail(rc, rc == CDB_NOTFOUND ? CDB_ENGINE_E_NO_DATABASE : CDB_ENGINE_E_NONE,
                              "cannot open the part %s", dirs[i]);
            break;
        }
        if ((rc = cdb_db_partition(pt->db, &pt->part_index, &pt->part_count)) != CDB_OK) break;
        for (int k = 0; k < i && rc == CDB_OK; k++)
            if (pt->part_count && m->parts[k].part_count == pt->part_count &&
                m->parts[k].part_index == pt->part_index)
                rc = cdb_eng_fail(CDB_INVALID, CDB_ENGINE_E_NONE, "%s and %s are both part %d/%d",
                                  m->parts[k].dir, dirs[i], pt->part_index, pt->part_count);
        if (rc == CDB_OK) rc = check_shards(pt);
    }
    free(real);
    return rc;
}

static void merger_free(merger *m) {
    for (int i = 0; m->parts && i < m->n_parts; i++) {
        for (int k = 0; k < m->parts[i].n_roots; k++) {
            free(m->parts[i].roots[k].path);
            free(m->parts[i].roots[k].status);
            free(m->parts[i].roots[k].prefix);
        }
        free(m->parts[i].roots);
        cdb_db_close(m->parts[i].db);
    }
    free(m->parts);
    free(m->rank_root);
    free(m->part_of);
    for (int i = 0; m->ids && i < m->n_parts && i < 255; i++) {
        free(m->ids[i].from);
        free(m->ids[i].to);
    }
    free(m->ids);
}

/* Every step of the merge, in order (see the top of the file). */
static cdb_status merge_steps(merger *m) {
    cdb_db_model dm;
    cdb_status rc = check_models(m, &dm);
    set_ud su = {m, 1, NULL, NULL, 0, NULL, CDB_OK};
    if (rc == CDB_OK) rc = merge_roots(m, dm.id);
    for (su.first = 1; su.first >= 0 && rc == CDB_OK; su.first--) {
        rc = cdb_db_models_foreach(m->db, merge_set, &su);
        if (rc == CDB_OK) rc = su.rc;
    }
    for (int i = 0; i < m->n_parts && rc == CDB_OK; i++) rc = drop_gone(m, &m->parts[i]);
    if (rc == CDB_OK) rc = drop_moved(m);
    if (rc == CDB_OK) rc = copy_extras(m);
    if (rc == CDB_OK && !m->no_index) {
        index_ud iu = {m, CDB_OK};
        rc = cdb_db_models_foreach(m->db, build_index, &iu);
        if (rc == CDB_OK) rc = iu.rc;
    }
    /* the thumbnails of files now deleted or changed go, as after a reindex */
    if (rc == CDB_OK && cdb_db_thumbs_prune(m->db, NULL) != CDB_OK)
        CDB_LOG_WARN("stale thumbnails not dropped: %s", cdb_errmsg()); /* a cache */
    return rc;
}

cdb_status cdb_engine_merge_check(const char *db_dir, const char *const *parts, int n) {
    merger m;
    cdb_db_model want;
    cdb_status rc;
    cdb_eng_clear();
    memset(&m, 0, sizeof m);
    if (n <= 0) return cdb_seterr(CDB_INVALID, "no PART given");
    m.n_parts = n;
    if (!(m.parts = calloc((size_t)n, sizeof *m.parts)))
        return cdb_seterr(CDB_NOMEM, "out of memory");
    rc = open_parts(&m, db_dir, parts);
    if (rc == CDB_OK && (rc = cdb_db_model_default(m.parts[0].db, &want)) != CDB_OK)
        rc = cdb_eng_failw(rc, CDB_ENGINE_E_NOT_INITIALIZED, "it has no model",
                           "cannot merge %s", parts[0]);
    if (rc == CDB_OK) rc = check_part_models(&m, &want);
    merger_free(&m);
    return rc;
}

cdb_status cdb_engine_merge(cdb_engine *e, const char *const *parts, int n, unsigned flags,
                            const char *trained, cdb_engine_merge_report *r) {
    merger m;
    int64_t run_id = 0;
    cdb_status rc;
    cdb_eng_clear();
    memset(r, 0, sizeof *r);
    memset(&m, 0, sizeof m);
    if ((rc = cdb_eng_writer(e, "merge")) != CDB_OK) return rc;
    if (n <= 0) return cdb_seterr(CDB_INVALID, "no PART given");
    m.e = e;
    m.db = e->db;
    m.n_parts = n;
    m.no_index = (flags & CDB_ENGINE_MERGE_NO_INDEX) != 0;
    m.r = r;
    r->n_parts = n;
    if (!(m.parts = calloc((size_t)n, sizeof *m.parts))) return cdb_seterr(CDB_NOMEM, "out of memory");
    m.trained = m.no_index ? NULL : trained;
    if (m.trained && !(m.ids = calloc((size_t)(n < 255 ? n : 255), sizeof *m.ids))) {
        free(m.parts);
        return cdb_seterr(CDB_NOMEM, "out of memory");
    }
    rc = open_parts(&m, cdb_db_dir(m.db), parts);
    if (rc == CDB_OK) {
        cdb_db_run_begin(m.db, "merge", &run_id);
        rc = merge_steps(&m);
        if (rc != CDB_OK) {
            char why[1024];
            snprintf(why, sizeof why, "%s", cdb_errmsg());
            if (run_id) cdb_db_run_finish(m.db, run_id, "failed", "{}");
            cdb_eng_code(cdb_seterr(rc, "%s", why),
                         cdb_eng_disk_full(rc) ? CDB_ENGINE_E_DISK_FULL : CDB_ENGINE_E_NONE);
        } else if (run_id) {
            char js[200];
            snprintf(js, sizeof js, "{\"parts\":%d,\"files\":%lld,\"vectors\":%lld,\"deleted\":%lld}",
                     n, (long long)r->files, (long long)r->vectors, (long long)r->deleted);
            cdb_db_run_finish(m.db, run_id, "ok", js);
        }
    }
    merger_free(&m);
    return rc;
}
