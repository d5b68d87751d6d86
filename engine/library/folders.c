/*
** folders.c: the library's roots (the folders and single files ingested): listing
** them with their counts and last scan, forgetting one (its files, vectors and the
** space they took), and moving one (paths rewritten, vectors kept). The library model
** they act on: library.c, db/roots.c.
*/
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/library/library.h"
#include "ignore/ignore.h"

/* An absolute, normalized form of path for matching recorded roots: its real path
** when it exists, else made absolute and cleaned lexically ("." and ".." folded,
** repeated and trailing slashes dropped), since an unmounted folder has no real
** path. Heap (free). */
static char *normalized_path(const char *path) {
    char real[PATH_MAX], cwd[PATH_MAX], *out, *o;
    size_t cap;
    if (realpath(path, real)) return strdup(real);
    if (path[0] != '/' && !getcwd(cwd, sizeof cwd)) return NULL;
    cap = strlen(path) + (path[0] == '/' ? 0 : strlen(cwd)) + 3;
    if (!(out = malloc(cap))) return NULL;
    snprintf(out, cap, "%s/%s", path[0] == '/' ? "" : cwd, path);
    o = out; /* fold in place: o writes, p reads */
    for (const char *p = out; *p;) {
        while (*p == '/') p++;
        const char *e = p;
        while (*e && *e != '/') e++;
        size_t n = (size_t)(e - p);
        if (n == 0) break;
        if (n == 1 && p[0] == '.') {
        } else if (n == 2 && p[0] == '.' && p[1] == '.') {
            while (o > out && *--o != '/') {
            }
        } else {
            *o++ = '/';
            memmove(o, p, n);
            o += n;
        }
        p = e;
    }
    if (o == out) *o++ = '/';
    *o = '\0';
    return out;
}

/* The path a forget acts on: normalized_path(path), except when its last component
** (trailing slashes dropped) is a symbolic link: then its folder's real path joined with
** the link's own name, and link_to (size bytes) gets where the link leads (its real
** path, or its text when that is not there). A forget acts on a link itself, never on
** where it leads. Heap (free); NULL out of memory or when the folder cannot be resolved
** (errno). */
static char *forget_path(const char *path, char *link_to, size_t size) {
    char real[PATH_MAX], *p = strdup(path), *name, *out = NULL;
    size_t n = p ? strlen(p) : 0;
    struct stat sb;
    link_to[0] = '\0';
    if (!p) return NULL;
    while (n > 1 && p[n - 1] == '/') p[--n] = '\0';
    name = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
    if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || lstat(p, &sb) != 0 ||
        !S_ISLNK(sb.st_mode)) {
        free(p);
        return normalized_path(path);
    }
    if (realpath(p, real)) {
        snprintf(link_to, size, "%s", real);
    } else {
        ssize_t k = readlink(p, real, sizeof real - 1);
        snprintf(link_to, size, "%.*s", k > 0 ? (int)k : 0, real);
    }
    if (name == p) {
        out = normalized_path(".");
    } else {
        name[-1] = '\0';
        out = normalized_path(name - 1 == p ? "/" : p);
    }
    if (out) {
        size_t ol = strlen(out), nl = strlen(name);
        char *joined = realloc(out, ol + nl + 2);
        if (joined) snprintf(joined + ol, nl + 2, "%s%s", strcmp(joined, "/") ? "/" : "", name);
        else free(out);
        out = joined;
    }
    free(p);
    return out;
}

static int within(const char *path, const char *dir) {
    size_t n = strlen(dir);
    return !strncmp(path, dir, n) && (path[n] == '\0' || path[n] == '/' || !strcmp(dir, "/"));
}

/* Indexes of the roots equal to or inside path; *n_out of them. When there is none:
** E_PART_OF_ROOT (container: the folder root holding path) or E_NOT_A_ROOT. */
static cdb_status roots_at(const eng_library *lib, const char *path, int *idx, int *n_out,
                           char *container, size_t size) {
    int n = 0;
    for (int i = 0; i < lib->n; i++)
        if (within(lib->r[i].path, path)) idx[n++] = i;
    *n_out = n;
    if (n) return CDB_OK;
    for (int i = 0; i < lib->n; i++)
        if (lib->r[i].kind == CDB_DB_ROOT_FOLDER && within(path, lib->r[i].path)) {
            snprintf(container, size, "%s", lib->r[i].path);
            return cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_PART_OF_ROOT, NULL,
                             "%s is a part of the folder %s, not a folder of its own", path,
                             lib->r[i].path);
        }
    return cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_NOT_A_ROOT, NULL,
                     "%s is not a folder or file of this database", path);
}

/* ---- folders --------------------------------------------------------------------------- */

typedef struct folders_ud {
    cdb_db *db;
    cdb_engine_folder *f;
    int n;
    size_t cap;
    cdb_status rc;
} folders_ud;

static const char *status_word(const char *s) {
    static const char *const known[] = {"ok",          "missing",    "empty",
                                        "unavailable", "unreadable", NULL};
    for (int i = 0; s && known[i]; i++)
        if (!strcmp(s, known[i])) return known[i];
    return s ? "unknown" : "new";
}

/* f->excludes from the root's stored rules (engine.h's format). */
static cdb_status folder_excludes(cdb_db *db, cdb_engine_folder *f) {
    cdb_db_exclude *v = NULL;
    int n = 0;
    cdb_status rc = cdb_db_root_excludes(db, f->id, &v, &n);
    if (rc == CDB_OK && n > 0 && !(f->excludes = calloc((size_t)n, sizeof *f->excludes)))
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
    for (int i = 0; rc == CDB_OK && i < n; i++) {
        const char *kind = v[i].kind == CDB_DB_EXCLUDE_FORGOT ? "forgotten" : "exclude";
        size_t len = strlen(kind) + strlen(v[i].base) + strlen(v[i].pattern) + 3;
        if (!(f->excludes[i] = malloc(len))) {
            rc = cdb_seterr(CDB_NOMEM, "out of memory");
            break;
        }
        snprintf(f->excludes[i], len, "%s\t%s\t%s", kind, v[i].base, v[i].pattern);
        f->n_excludes = i + 1;
    }
    cdb_db_excludes_free(v, n);
    return rc;
}

/* f->ignore_files from the folders the root's scans recorded (engine.h's format). */
static cdb_status folder_ignore_files(cdb_db *db, cdb_engine_folder *f) {
    char **v = NULL;
    int n = 0;
    cdb_status rc = cdb_db_ignore_files(db, f->id, &v, &n);
    if (rc == CDB_OK && n > 0 && !(f->ignore_files = calloc((size_t)n, sizeof *f->ignore_files)))
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
    for (int i = 0; rc == CDB_OK && i < n; i++) {
        char *dir = cdb_db_path_join(f->path, v[i]);
        char *p = dir ? cdb_db_path_join(dir, ".clipdbignore") : NULL;
        cdb_free(dir);
        if (!p || !(f->ignore_files[i] = strdup(p)))
            rc = cdb_seterr(CDB_NOMEM, "out of memory");
        else
            f->n_ignore_files = i + 1;
        cdb_free(p);
    }
    cdb_db_ignore_files_free(v, n);
    return rc;
}

typedef struct unwalked_ud {
    cdb_engine_folder *f;
    size_t cap, cap_why;
    int oom;
} unwalked_ud;

/* A walk problem of a folder not walked for its rules (CDB_ENG_NOT_WALKED) into
** f->not_walked (engine.h's format); other problems are `clipdb errors`' only. */
static int on_unwalked(const cdb_db_walk_problem *p, void *ud_) {
    unwalked_ud *ud = ud_;
    cdb_engine_folder *f = ud->f;
    size_t pl = strlen(CDB_ENG_NOT_WALKED);
    if (strncmp(p->reason, CDB_ENG_NOT_WALKED, pl)) return 0;
    char *dir = cdb_db_path_join(f->path, p->relpath);
    char *why = cdb_db_path_join(f->path, p->reason + pl); /* the reason starts with the
                                                              rules file's relpath */
    if (dir && why &&
        cdb_eng_grow((void **)&f->not_walked, &ud->cap, (size_t)f->n_not_walked,
                     sizeof *f->not_walked) == 0 &&
        cdb_eng_grow((void **)&f->not_walked_why, &ud->cap_why, (size_t)f->n_not_walked,
                     sizeof *f->not_walked_why) == 0) {
        f->not_walked[f->n_not_walked] = dir;
        f->not_walked_why[f->n_not_walked++] = why;
        return 0;
    }
    cdb_free(dir);
    cdb_free(why);
    ud->oom = 1;
    return 1;
}

static int on_folder(const cdb_db_root *r, void *ud_) {
    folders_ud *ud = ud_;
    cdb_db_root_counts c;
    struct stat sb;
    if (cdb_eng_grow((void **)&ud->f, &ud->cap, (size_t)ud->n, sizeof *ud->f) != 0) {
        ud->rc = cdb_seterr(CDB_NOMEM, "out of memory");
        return 1;
    }
    if ((ud->rc = cdb_db_root_get_counts(ud->db, r->id, 0, &c)) != CDB_OK) return 1;
    cdb_engine_folder *f = &ud->f[ud->n];
    memset(f, 0, sizeof *f);
    if (!(f->path = strdup(r->path))) {
        ud->rc = cdb_seterr(CDB_NOMEM, "out of memory");
        return 1;
    }
    ud->n++;
    f->id = r->id;
    f->is_file = r->kind == CDB_DB_ROOT_FILE;
    f->status = stat(r->path, &sb) != 0 ? "missing" : status_word(r->status); /* now */
    f->files = c.files[CDB_DB_OK] + c.files[CDB_DB_PENDING] + c.files[CDB_DB_ERROR];
    f->ok = c.files[CDB_DB_OK];
    f->errors = c.files[CDB_DB_ERROR];
    f->to_retry = c.n_retry;
    f->walk_problems = c.n_walk_problems;
    f->vectors = c.n_vectors;
    f->follow_symlinks = r->follow_symlinks;
    f->no_exif = r->no_exif;
    f->scanned_ns = r->scanned_ns;
    if ((ud->rc = folder_excludes(ud->db, f)) != CDB_OK) return 1;
    if ((ud->rc = folder_ignore_files(ud->db, f)) != CDB_OK) return 1;
    unwalked_ud uw = {f, 0, 0, 0};
    if ((ud->rc = cdb_db_walk_problems_foreach(ud->db, r->id, on_unwalked, &uw)) == CDB_OK &&
        uw.oom)
        ud->rc = cdb_seterr(CDB_NOMEM, "out of memory");
    return ud->rc != CDB_OK;
}

void cdb_engine_folders_free(cdb_engine_folder *f, int n) {
    for (int i = 0; f && i < n; i++) {
        free(f[i].path);
        for (int k = 0; k < f[i].n_excludes; k++) free(f[i].excludes[k]);
        free(f[i].excludes);
        for (int k = 0; k < f[i].n_ignore_files; k++) free(f[i].ignore_files[k]);
        free(f[i].ignore_files);
        for (int k = 0; k < f[i].n_not_walked; k++) {
            cdb_free(f[i].not_walked[k]);
            cdb_free(f[i].not_walked_why[k]);
        }
        free(f[i].not_walked);
        free(f[i].not_walked_why);
    }
    free(f);
}

cdb_status cdb_engine_folders(cdb_engine *e, cdb_engine_folder **out, int *n) {
    eng_reader *r = NULL;
    folders_ud ud;
    cdb_status st;
    cdb_eng_clear();
    *out = NULL;
    *n = 0;
    memset(&ud, 0, sizeof ud);
    if ((st = cdb_eng_reader_get(e, &r)) != CDB_OK) return st;
    ud.db = r->db;
    st = cdb_db_roots_foreach(r->db, on_folder, &ud);
    if (st == CDB_OK) st = ud.rc;
    cdb_eng_reader_put(e, r);
    if (st != CDB_OK) {
        cdb_engine_folders_free(ud.f, ud.n);
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot list the folders");
    }
    *out = ud.f;
    *n = ud.n;
    return CDB_OK;
}

/* ---- the folders inside a root ----------------------------------------------------------- */

typedef struct sub_ud {
    const char *want;          /* the absolute folder asked for */
    int64_t root_id;
    char *root;                /* heap: the folder root that holds it */
    /* the listing */
    const char *base;          /* want, as the paths' start */
    size_t skip;               /* bytes of a relpath before the child's name */
    eng_rows subs;             /* cdb_engine_subfolder: the listing; oom: any failure */
} sub_ud;

static int on_root_for(const cdb_db_root *r, void *ud_) {
    sub_ud *ud = ud_;
    size_t n = strlen(r->path);
    if (r->kind != CDB_DB_ROOT_FOLDER || strncmp(ud->want, r->path, n) ||
        (ud->want[n] != '\0' && ud->want[n] != '/' && !(n == 1 && r->path[0] == '/')))
        return 0;
    if (ud->root && strlen(ud->root) >= n) return 0; /* a longer match already */
    free(ud->root);
    if (!(ud->root = strdup(r->path))) return ud->subs.oom = 1;
    ud->root_id = r->id;
    return 0;
}

static int on_relpath(const char *rel, size_t len, void *ud_) {
    sub_ud *ud = ud_;
    const char *name = rel + ud->skip, *slash;
    size_t k;
    if (len <= ud->skip || !(slash = strchr(name, '/'))) return 0; /* a photo right here */
    k = (size_t)(slash - name);
    /* rows come in byte order: one child's rows are consecutive */
    if (ud->subs.n > 0) {
        cdb_engine_subfolder *last = (cdb_engine_subfolder *)ud->subs.v + ud->subs.n - 1;
        const char *lname = last->path + strlen(ud->base) + 1;
        if (strlen(lname) == k && !memcmp(lname, name, k)) {
            last->files++;
            last->has_subfolders |= strchr(slash + 1, '/') != NULL;
            return 0;
        }
    }
    cdb_engine_subfolder *x = cdb_eng_rows_add(&ud->subs, sizeof *x);
    size_t nb = strlen(ud->base);
    if (!x) return 1;
    if (!(x->path = malloc(nb + 1 + k + 1))) return ud->subs.oom = 1;
    memcpy(x->path, ud->base, nb);
    x->path[nb] = '/';
    memcpy(x->path + nb + 1, name, k);
    x->path[nb + 1 + k] = '\0';
    x->files = 1;
    x->has_subfolders = strchr(slash + 1, '/') != NULL;
    return 0;
}

void cdb_engine_subfolders_free(cdb_engine_subfolder *f, int n) {
    for (int i = 0; f && i < n; i++) free(f[i].path);
    free(f);
}

cdb_status cdb_engine_subfolders(cdb_engine *e, const char *under, cdb_engine_subfolder **out,
                                 int *n) {
    char abs[PATH_MAX];
    eng_reader *r = NULL;
    sub_ud ud;
    cdb_engine_subfolder *subs;
    int folder = 0;
    size_t nr, na;
    cdb_status st;
    cdb_eng_clear();
    *out = NULL;
    *n = 0;
    memset(&ud, 0, sizeof ud);
    if (!under || !*under)
        return cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_NOT_A_ROOT, NULL, "no folder given");
    cdb_engine_under_resolve(under, abs, sizeof abs, &folder);
    na = strlen(abs);
    while (na > 1 && abs[na - 1] == '/') abs[--na] = '\0';
    ud.want = abs;
    if ((st = cdb_eng_reader_get(e, &r)) != CDB_OK) return st;
    st = cdb_db_roots_foreach(r->db, on_root_for, &ud);
    if (st == CDB_OK && ud.subs.oom) st = cdb_seterr(CDB_NOMEM, "out of memory");
    if (st != CDB_OK) {
        st = cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot list the folders in %s", under);
        goto done;
    }
    if (!ud.root) {
        st = cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_NOT_A_ROOT, NULL,
                           "%s is not a recorded folder or inside one", under);
        goto done;
    }
    nr = strlen(ud.root);
    /* the relpath prefix of the folder: what follows the root's path and its '/' */
    {
        const char *prefix = abs + nr + (abs[nr] == '/' ? 1 : 0);
        if (nr == 1) prefix = abs + 1; /* the root "/" */
        ud.base = abs;
        ud.skip = *prefix ? strlen(prefix) + 1 : 0;
        st = cdb_db_relpaths_under(r->db, ud.root_id, prefix, CDB_DB_MASK_OK, on_relpath, &ud);
    }
    if (st == CDB_OK && ud.subs.oom) st = cdb_seterr(CDB_NOMEM, "out of memory");
    if (st != CDB_OK) {
        st = cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot list the folders in %s", under);
        goto done;
    }
    subs = ud.subs.v;
    if (na == 1) /* "/" as the base: children are "/name", not "//name" */
        for (size_t i = 0; i < ud.subs.n; i++)
            memmove(subs[i].path, subs[i].path + 1, strlen(subs[i].path));
    *out = subs;
    *n = (int)ud.subs.n;
    ud.subs.v = NULL;
    ud.subs.n = 0;
done:
    cdb_eng_reader_put(e, r);
    cdb_engine_subfolders_free(ud.subs.v, (int)ud.subs.n);
    free(ud.root);
    return st;
}

/* ---- forget ------------------------------------------------------------------------------ */

void cdb_engine_forget_report_free(cdb_engine_forget_report *r) {
    if (!r) return;
    for (int i = 0; i < r->n_roots; i++) free(r->roots[i].path);
    free(r->roots);
    r->roots = NULL;
    r->n_roots = 0;
}

/* The writer's default model and roots (forget and move). */
static cdb_status open_library(cdb_engine *e, cdb_db_model *dm, eng_library *lib) {
    cdb_status st;
    if ((st = cdb_db_model_default(e->db, dm)) != CDB_OK ||
        (st = cdb_eng_library_load(e->db, lib)) != CDB_OK)
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot read the database");
    return CDB_OK;
}

/* The notes a forget keeps (db.h): "forget" holds the path of a forget begun and not
** finished (the next writer finishes it: cdb_eng_finish_forget), "forgotten:PATH" says
** that PATH was forgotten (running the same forget again says so). */
#define NOTE_FORGET "forget"
#define NOTE_FORGOTTEN "forgotten:"

/* ---- a subfolder forgotten: left out of its root ------------------------------------- */

/* The index in lib of the folder root that holds path strictly, -1 when none. */
static int container_index(const eng_library *lib, const char *path) {
    for (int i = 0; i < lib->n; i++)
        if (lib->r[i].kind == CDB_DB_ROOT_FOLDER && strcmp(path, lib->r[i].path) &&
            within(path, lib->r[i].path))
            return i;
    return -1;
}

/* The anchored folder rule that leaves rel out of its root: "/rel/", with gitignore's
** wildcards quoted (ignore.h). NULL when rel holds a newline, which no rule can name
** (errno EINVAL), or out of memory. Heap (free). */
static char *forgot_rule(const char *rel) {
    size_t n = strlen(rel);
    char *out = strchr(rel, '\n') ? NULL : malloc(2 * n + 3), *o = out;
    if (!out) {
        errno = strchr(rel, '\n') ? EINVAL : ENOMEM;
        return NULL;
    }
    *o++ = '/';
    for (const char *p = rel; *p; p++) {
        if (strchr("*?[\\", *p)) *o++ = '\\';
        *o++ = *p;
    }
    *o++ = '/';
    *o = '\0';
    return out;
}

/* The folder (relative to the root) a forgotten-subfolder rule leaves out: its base
** joined with the rule's path unquoted. NULL for a rule of another kind or shape, or
** out of memory. Heap (free). */
static char *forgot_folder(const cdb_db_exclude *x) {
    size_t bl = strlen(x->base), pl = strlen(x->pattern);
    char *out, *o;
    if (x->kind != CDB_DB_EXCLUDE_FORGOT || pl < 3 || x->pattern[0] != '/' ||
        x->pattern[pl - 1] != '/' || !(out = malloc(bl + pl + 1)))
        return NULL;
    memcpy(out, x->base, bl);
    o = out + bl;
    if (bl) *o++ = '/';
    for (const char *p = x->pattern + 1; p < x->pattern + pl - 1; p++) {
        if (*p == '\\' && p + 1 < x->pattern + pl - 1) p++;
        *o++ = *p;
    }
    *o = '\0';
    return out;
}

/* Whether the root's rules leave the folder rel out already (a forgotten folder at or
** above it, or an `ingest --exclude` rule): *by gets the forgotten folder that covers
** it (heap, free), or stays NULL when a glob does. */
static cdb_status left_out_already(cdb_db *db, int64_t root_id, const char *rel, int *yes,
                                   char **by) {
    cdb_db_exclude *v = NULL;
    cdb_ignore *ig = NULL;
    int n = 0;
    cdb_status rc = cdb_db_root_excludes(db, root_id, &v, &n);
    *yes = 0;
    *by = NULL;
    if (rc == CDB_OK) rc = cdb_ignore_new(&ig);
    for (int i = 0; rc == CDB_OK && i < n; i++)
        rc = cdb_ignore_add(ig, v[i].base, v[i].pattern, strlen(v[i].pattern));
    if (rc == CDB_OK && (*yes = cdb_ignore_path(ig, rel, 1)))
        for (int i = 0; i < n && !*by; i++) {
            char *f = forgot_folder(&v[i]);
            if (f && cdb_eng_path_under(rel, f, 0)) *by = f;
            else free(f);
        }
    cdb_ignore_free(ig);
    cdb_db_excludes_free(v, n);
    return rc;
}

typedef struct any_ud {
    int found;
} any_ud;

static int any_file(const char *rel, size_t n, void *ud) {
    (void)rel;
    (void)n;
    ((any_ud *)ud)->found = 1;
    return 1;
}

/* Leaves the folder path (inside root r, at rel) out of it: the rule first (reindex
** and ingest of the root skip it from then on), then its files, vectors and metadata.
** Both steps are idempotent: a killed run is finished by running them again. */
static cdb_status forget_sub(cdb_engine *e, const cdb_db_model *dm, const eng_root *r,
                             const char *path, cdb_engine_forget_report *out) {
    const char *rel = path + strlen(r->path) + (strcmp(r->path, "/") ? 1 : 0);
    int64_t k = 0;
    cdb_status st = CDB_OK;
    char *rule = forgot_rule(rel);
    if (!rule)
        return cdb_eng_failw(errno == EINVAL ? CDB_INVALID : CDB_NOMEM, CDB_ENGINE_E_NONE,
                             errno == EINVAL ? "its name holds a newline, which no exclusion "
                                               "rule can name" : "out of memory",
                             "cannot forget %s", path);
    if ((st = cdb_db_root_exclude_add(e->db, r->id, CDB_DB_EXCLUDE_FORGOT, "", rule)) !=
            CDB_OK ||
        (st = cdb_db_root_forget_under(e->db, dm->id, r->id, rel, &k)) != CDB_OK)
        st = cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot forget %s", path);
    free(rule);
    if (st != CDB_OK) return st;
    if (!(out->roots[0].path = strdup(path))) return cdb_seterr(CDB_NOMEM, "out of memory");
    out->n_roots = 1;
    out->roots[0].files = k;
    out->files = k;
    out->subfolder = 1;
    snprintf(out->container, sizeof out->container, "%s", r->path);
    return CDB_OK;
}

/* The failure of a forget of a symbolic link (out->link_to) that holds nothing recorded. */
static cdb_status link_holds_nothing(const char *path, const cdb_engine_forget_report *out) {
    return cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_NOT_A_ROOT,
                         "forget acts on a link itself, never on where it leads",
                         "%s is a symbolic link to %s, and nothing is recorded at the link",
                         path, out->link_to);
}

/* Before a subfolder forget begins: path (inside root r) must be a folder on the disk
** or hold recorded files (a symbolic link: hold recorded files, as in a root that
** follows links), and not be left out already (then out->already, and
** out->left_out_by the forgotten folder that covers it, if one does). */
static cdb_status sub_check(cdb_engine *e, const eng_root *r, const char *path,
                            cdb_engine_forget_report *out) {
    const char *rel = path + strlen(r->path) + (strcmp(r->path, "/") ? 1 : 0);
    struct stat sb;
    any_ud any = {0};
    char *by = NULL;
    int yes = 0;
    cdb_status st;
    snprintf(out->container, sizeof out->container, "%s", r->path);
    if (out->link_to[0]) { /* never what it leads to: only what was recorded through it */
        if ((st = cdb_db_relpaths_under(e->db, r->id, rel, CDB_DB_MASK_OK | CDB_DB_MASK_PENDING |
                                        CDB_DB_MASK_ERROR, any_file, &any)) != CDB_OK)
            return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot forget %s", path);
        if (!any.found) return link_holds_nothing(path, out);
    } else if (lstat(path, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_PART_OF_ROOT,
                             "forget leaves out folders; to leave a photo out, use 'clipdb "
                             "ingest --exclude' or a .clipdbignore file",
                             "%s is a file inside the folder %s", path, r->path);
    if ((st = left_out_already(e->db, r->id, rel, &yes, &by)) != CDB_OK)
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot forget %s", path);
    if (yes) {
        out->already = 1;
        if (by) snprintf(out->left_out_by, sizeof out->left_out_by, "%s/%s", r->path, by);
        free(by);
        return CDB_OK;
    }
    if (!out->link_to[0] && lstat(path, &sb) != 0 &&
        ((st = cdb_db_relpaths_under(e->db, r->id, rel, CDB_DB_MASK_OK | CDB_DB_MASK_PENDING |
                                     CDB_DB_MASK_ERROR, any_file, &any)) != CDB_OK ||
         !any.found))
        return st != CDB_OK ? cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot forget %s", path)
                            : cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_NOT_A_ROOT, NULL,
                                            "%s is not a folder of this database", path);
    return CDB_OK;
}

cdb_status cdb_eng_unforget(cdb_db *db, const eng_target *t, int n) {
    cdb_status st = CDB_OK;
    for (int i = 0; i < n && st == CDB_OK; i++) {
        cdb_db_exclude *v = NULL;
        int nx = 0;
        if (t[i].kind != CDB_DB_ROOT_FOLDER || !t[i].sub) continue;
        st = cdb_db_root_excludes(db, t[i].root_id, &v, &nx);
        for (int k = 0; k < nx && st == CDB_OK; k++) {
            char *f = forgot_folder(&v[k]);
            if (f && !strcmp(f, t[i].sub))
                st = cdb_db_root_exclude_remove(db, t[i].root_id, v[k].kind, v[k].base,
                                                v[k].pattern);
            else if (f && cdb_eng_path_under(t[i].sub, f, 1))
                st = cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_NONE, NULL,
                                   "%s/%s lies inside %s/%s, which 'clipdb forget' left out; "
                                   "'clipdb ingest %s/%s' takes that folder in again",
                                   t[i].path, t[i].sub, t[i].path, f, t[i].path, f);
            free(f);
        }
        cdb_db_excludes_free(v, nx);
    }
    return st;
}

/* Forgets the roots idx[0..n) of lib into out: their files, vectors and rows. */
static cdb_status forget_roots(cdb_engine *e, const cdb_db_model *dm, const eng_library *lib,
                               const int *idx, int n, cdb_engine_forget_report *out) {
    for (int i = 0; i < n; i++) {
        const eng_root *r = &lib->r[idx[i]];
        int64_t k = 0;
        cdb_status st;
        if ((st = cdb_db_root_forget(e->db, dm->id, r->id, &k)) != CDB_OK)
            return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot forget %s", r->path);
        cdb_engine_forgot *f = &out->roots[out->n_roots];
        if (!(f->path = strdup(r->path))) return cdb_seterr(CDB_NOMEM, "out of memory");
        out->n_roots++;
        f->is_file = r->kind == CDB_DB_ROOT_FILE;
        f->files = k;
        out->files += k;
    }
    return CDB_OK;
}

/* What a forget does once the rows are gone: drops the thumbnails, brings every index
** up to date, gives the space back, and clears the note that a forget is under way
** (kept when an index could not be refreshed, so the next writer tries again). */
static cdb_status forget_finish(cdb_engine *e, cdb_engine_forget_report *out) {
    cdb_status st;
    int r;
    if (cdb_db_thumbs_prune(e->db, NULL) != CDB_OK) /* a cache: never fatal */
        CDB_LOG_WARN("the forgotten files' thumbnails were not dropped: %s", cdb_errmsg());
    if ((st = cdb_db_photos_prune(e->db, NULL)) != CDB_OK)
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot drop the forgotten photos' metadata");
    /* the indexes first: their writes then go into the compaction too */
    if ((r = cdb_eng_refresh_all_indexes(e->db, &e->p.events)) < 0)
        return CDB_ERROR; /* errmsg: cannot list the models (...) */
    out->index_refresh_failed = r > 0;
    if ((st = cdb_db_compact(e->db, NULL)) != CDB_OK)
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE,
                            "forgotten, but the space could not be given back");
    if (!r && (st = cdb_db_note_set(e->db, NOTE_FORGET, NULL)) != CDB_OK)
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "forgotten, but the database could not record "
                            "that it is done");
    /* the note's commit sits in the WAL again: fold it, so that what the report says was
    ** freed is what the folder holds once this writer closes */
    if (cdb_db_catalog_checkpoint(e->db) != CDB_OK)
        CDB_LOG_WARN("the catalog's journal was not folded in: %s", cdb_errmsg());
    return CDB_OK;
}

/* Allocates out's root list for lib (and idx, n entries). */
static cdb_status forget_alloc(const eng_library *lib, int **idx, cdb_engine_forget_report *out,
                               const char *path) {
    if (!(*idx = calloc((size_t)(lib->n ? lib->n : 1), sizeof **idx)) ||
        !(out->roots = calloc((size_t)(lib->n ? lib->n : 1), sizeof *out->roots)))
        return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot forget %s",
                             path);
    return CDB_OK;
}

/* Finishes a forget that a killed run began (its note says which). */
static cdb_status finish_forget(cdb_engine *e) {
    int n = 0, *idx = NULL;
    cdb_db_model dm;
    eng_library lib = {0};
    cdb_engine_forget_report out;
    char *path = NULL, container[PATH_MAX];
    cdb_status st;
    memset(&out, 0, sizeof out);
    if ((st = cdb_db_note_get(e->db, NOTE_FORGET, &path)) != CDB_OK || !path) return st;
    CDB_LOG_INFO("finishing the forget of %s that a killed run began", path);
    if ((st = open_library(e, &dm, &lib)) == CDB_OK &&
        (st = forget_alloc(&lib, &idx, &out, path)) == CDB_OK) {
        int sub = roots_at(&lib, path, idx, &n, container, sizeof container) != CDB_OK
                      ? container_index(&lib, path) : -1;
        cdb_eng_clear();
        if (sub >= 0) st = forget_sub(e, &dm, &lib.r[sub], path, &out);
        else st = forget_roots(e, &dm, &lib, idx, n, &out);
        if (st == CDB_OK) st = forget_finish(e, &out);
    }
    free(idx);
    cdb_free(path);
    cdb_eng_library_free(&lib);
    cdb_engine_forget_report_free(&out);
    return st;
}

/* A subfolder forget (sub_check passed): the note first (one transaction: after a kill
** from here on the next writer finishes it), then the work, then the note cleared. */
static cdb_status forget_sub_begin(cdb_engine *e, const cdb_db_model *dm, const eng_root *r,
                                   const char *path, int64_t disk_before,
                                   cdb_engine_forget_report *out) {
    cdb_status st = cdb_db_note_set(e->db, NOTE_FORGET, path);
    if (st != CDB_OK) return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot forget %s", path);
    if ((st = forget_sub(e, dm, r, path, out)) != CDB_OK ||
        (st = forget_finish(e, out)) != CDB_OK)
        return st;
    out->bytes_freed = disk_before - cdb_eng_disk_bytes(e->dir);
    if (out->bytes_freed < 0) out->bytes_freed = 0;
    return CDB_OK;
}

cdb_status cdb_engine_forget(cdb_engine *e, const char *path_in, cdb_engine_forget_report *out) {
    int n = 0, *idx = NULL;
    int64_t disk_before;
    cdb_db_model dm;
    eng_library lib = {0};
    char *path = NULL, *done = NULL, key[PATH_MAX + 16];
    cdb_status st;
    cdb_eng_clear();
    memset(out, 0, sizeof *out);
    if ((st = cdb_eng_writer(e, "forget")) != CDB_OK) return st;
    disk_before = cdb_eng_disk_bytes(e->dir);
    if (!(path = forget_path(path_in, out->link_to, sizeof out->link_to)))
        return cdb_eng_failw(CDB_IO, CDB_ENGINE_E_NONE, strerror(errno), "cannot forget %s",
                             path_in);
    snprintf(key, sizeof key, NOTE_FORGOTTEN "%s", path);
    if ((st = open_library(e, &dm, &lib)) != CDB_OK) goto done;
    if ((st = forget_alloc(&lib, &idx, out, path)) != CDB_OK) goto done;
    if ((st = roots_at(&lib, path, idx, &n, out->container, sizeof out->container)) != CDB_OK) {
        int sub = container_index(&lib, path);
        /* the same forget again (also after a kill: the work left was finished when
        ** this writer opened the database) */
        if (cdb_engine_errcode() == CDB_ENGINE_E_NOT_A_ROOT &&
            cdb_db_note_get(e->db, key, &done) == CDB_OK && done) {
            cdb_eng_clear();
            out->already = 1;
            st = CDB_OK;
        } else if (sub >= 0) { /* a folder inside a root: left out of it from now on */
            cdb_eng_clear();
            if ((st = sub_check(e, &lib.r[sub], path, out)) == CDB_OK && !out->already)
                st = forget_sub_begin(e, &dm, &lib.r[sub], path, disk_before, out);
        } else if (out->link_to[0]) {
            st = link_holds_nothing(path, out);
        }
        goto done;
    }
    /* the notes first, each one transaction: after a kill from here on the next
    ** writer finishes the forget, and the same forget again says it is done */
    if ((st = cdb_db_note_set(e->db, key, "1")) != CDB_OK ||
        (st = cdb_db_note_set(e->db, NOTE_FORGET, path)) != CDB_OK) {
        st = cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot forget %s", path);
        goto done;
    }
    if ((st = forget_roots(e, &dm, &lib, idx, n, out)) != CDB_OK) goto done;
    if ((st = forget_finish(e, out)) != CDB_OK) goto done;
    /* what the folder really shrank by: shards, catalog, thumbnails, index files, WALs */
    out->bytes_freed = disk_before - cdb_eng_disk_bytes(e->dir);
    if (out->bytes_freed < 0) out->bytes_freed = 0;
done:
    free(idx);
    free(path);
    cdb_free(done);
    cdb_eng_library_free(&lib);
    return st;
}

/* ---- move ------------------------------------------------------------------------------------ */

typedef struct there_ud {
    const char *root; /* the new place of the root */
    int64_t live, present;
} there_ud;

static int count_there(const cdb_db_file *f, void *ud_) {
    there_ud *ud = ud_;
    struct stat st;
    char *p = cdb_db_path_join(ud->root, f->relpath);
    ud->live++;
    if (p && lstat(p, &st) == 0) ud->present++;
    cdb_free(p);
    return 0;
}

/* The notes a move keeps: "move" holds OLD of a move begun and not finished, and
** "moved:OLD" its NEW (the next writer finishes the move: finish_move; the same move
** again says it is done). */
#define NOTE_MOVE "move"
#define NOTE_MOVED "moved:"

/* The new paths of the roots idx[0..n) of lib at old when old becomes newp (heap,
** dest[i] for each; cdb_free). */
static cdb_status move_dests(const eng_library *lib, const int *idx, int n, const char *old,
                             const char *newp, char **dest) {
    for (int i = 0; i < n; i++) {
        const char *rest = lib->r[idx[i]].path + strlen(old);
        if (!(dest[i] = cdb_db_path_join(newp, *rest == '/' ? rest + 1 : rest)))
            return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot move %s",
                                 old);
    }
    return CDB_OK;
}

/* Rewrites the paths of the roots idx[0..n) of lib to dest, folds the roots that NEW
** holds or lies in (library normalize) and clears the move's note. */
static cdb_status move_roots(cdb_engine *e, int64_t model_id, eng_library *lib, const int *idx,
                             int n, char *const *dest) {
    cdb_status st;
    for (int i = 0; i < n; i++)
        if ((st = cdb_db_root_set_path(e->db, lib->r[idx[i]].id, dest[i])) != CDB_OK)
            return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot move %s", lib->r[idx[i]].path);
    /* NEW may lie inside a recorded folder, or hold recorded roots: fold them */
    cdb_eng_library_free(lib);
    if ((st = cdb_eng_library_load(e->db, lib)) != CDB_OK ||
        (st = cdb_eng_library_normalize(e->db, model_id, lib, NULL)) != CDB_OK ||
        (st = cdb_db_note_set(e->db, NOTE_MOVE, NULL)) != CDB_OK)
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "moved, but the folders could not be merged");
    return CDB_OK;
}

/* Finishes a move that a killed run began (its notes say which). */
static cdb_status finish_move(cdb_engine *e) {
    int n = 0, *idx = NULL;
    cdb_db_model dm;
    eng_library lib = {0};
    char *old = NULL, *newp = NULL, **dest = NULL, key[PATH_MAX + 16], container[PATH_MAX];
    cdb_status st;
    if ((st = cdb_db_note_get(e->db, NOTE_MOVE, &old)) != CDB_OK || !old) return st;
    snprintf(key, sizeof key, NOTE_MOVED "%s", old);
    CDB_LOG_INFO("finishing the move of %s that a killed run began", old);
    if ((st = cdb_db_note_get(e->db, key, &newp)) == CDB_OK && newp &&
        (st = open_library(e, &dm, &lib)) == CDB_OK) {
        idx = calloc((size_t)(lib.n ? lib.n : 1), sizeof *idx);
        dest = calloc((size_t)(lib.n ? lib.n : 1), sizeof *dest);
        if (!idx || !dest) st = cdb_seterr(CDB_NOMEM, "out of memory");
        else if (roots_at(&lib, old, idx, &n, container, sizeof container) != CDB_OK) n = 0;
        cdb_eng_clear();
        if (st == CDB_OK) st = move_dests(&lib, idx, n, old, newp, dest);
        if (st == CDB_OK) st = move_roots(e, dm.id, &lib, idx, n, dest);
    }
    for (int i = 0; dest && i < n; i++) cdb_free(dest[i]);
    free(dest);
    free(idx);
    cdb_free(old);
    cdb_free(newp);
    cdb_eng_library_free(&lib);
    return st;
}

cdb_status cdb_eng_leftovers(cdb_db *db, char **forget, char **move) {
    cdb_status st;
    *forget = *move = NULL;
    if ((st = cdb_db_note_get(db, NOTE_FORGET, forget)) == CDB_OK)
        st = cdb_db_note_get(db, NOTE_MOVE, move);
    return st;
}

cdb_status cdb_eng_finish_leftovers(cdb_engine *e) {
    cdb_status st = finish_move(e);
    if (st != CDB_OK) return st;
    return finish_forget(e);
}

cdb_status cdb_engine_move(cdb_engine *e, const char *old_in, const char *new_in,
                           cdb_engine_move_report *out) {
    int n = 0, *idx = NULL;
    cdb_db_model dm;
    eng_library lib = {0};
    char *old = NULL, **dest = NULL, newp[PATH_MAX], key[PATH_MAX + 16], *done = NULL;
    there_ud there = {0};
    cdb_status st;
    cdb_eng_clear();
    memset(out, 0, sizeof *out);
    if ((st = cdb_eng_writer(e, "move")) != CDB_OK) return st;
    if (!realpath(new_in, newp))
        return cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_MOVE_TARGET, strerror(errno),
                         "cannot move to %s", new_in);
    if (!(old = normalized_path(old_in)))
        return cdb_eng_failw(CDB_IO, CDB_ENGINE_E_NONE, strerror(errno), "cannot move %s", old_in);
    snprintf(out->old_path, sizeof out->old_path, "%s", old);
    snprintf(out->new_path, sizeof out->new_path, "%s", newp);
    snprintf(key, sizeof key, NOTE_MOVED "%s", old);
    if ((st = open_library(e, &dm, &lib)) != CDB_OK) goto done;
    idx = calloc((size_t)(lib.n ? lib.n : 1), sizeof *idx);
    dest = calloc((size_t)(lib.n ? lib.n : 1), sizeof *dest);
    if (!idx || !dest) {
        st = cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot move %s", old);
        goto done;
    }
    if ((st = roots_at(&lib, old, idx, &n, out->container, sizeof out->container)) != CDB_OK) {
        /* the same move again (also after a kill: the writer's open finished it) */
        if (cdb_engine_errcode() == CDB_ENGINE_E_NOT_A_ROOT &&
            cdb_db_note_get(e->db, key, &done) == CDB_OK && done && !strcmp(done, newp)) {
            cdb_eng_clear();
            out->already = 1;
            st = CDB_OK;
        }
        goto done;
    }
    /* where each root goes, and how many of its files are there */
    if ((st = move_dests(&lib, idx, n, old, newp, dest)) != CDB_OK) goto done;
    for (int i = 0; i < n; i++) {
        const eng_root *r = &lib.r[idx[i]];
        struct stat sb;
        if (stat(dest[i], &sb) != 0 ||
            (r->kind == CDB_DB_ROOT_FILE ? !S_ISREG(sb.st_mode) : !S_ISDIR(sb.st_mode))) {
            snprintf(out->bad_root, sizeof out->bad_root, "%s", r->path);
            snprintf(out->bad_dest, sizeof out->bad_dest, "%s", dest[i]);
            out->bad_dest_is_file = r->kind == CDB_DB_ROOT_FILE;
            st = cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_MOVE_TARGET, NULL,
                           "%s would move to %s, which is not a %s", r->path, dest[i],
                           r->kind == CDB_DB_ROOT_FILE ? "file" : "folder");
            goto done;
        }
        there.root = dest[i];
        cdb_db_files_foreach(e->db, r->id, CDB_DB_MASK_OK | CDB_DB_MASK_PENDING | CDB_DB_MASK_ERROR,
                             count_there, &there);
    }
    out->files = there.live;
    out->present = there.present;
    if (there.live > 0 && there.present == 0) {
        char b[32];
        if (there.live == 1)
            st = cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_MOVE_NOTHING, NULL,
                               "the one recorded file of %s is not under %s; nothing changed",
                               old, newp);
        else
            st = cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_MOVE_NOTHING, NULL,
                               "none of the %s recorded files of %s is under %s; nothing changed",
                               cdb_out_fmt_count(there.live, b, sizeof b), old, newp);
        goto done;
    }
    /* the notes first: after a kill from here on the next writer finishes the move */
    if ((st = cdb_db_note_set(e->db, key, newp)) != CDB_OK ||
        (st = cdb_db_note_set(e->db, NOTE_MOVE, old)) != CDB_OK) {
        st = cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot move %s", old);
        goto done;
    }
    st = move_roots(e, dm.id, &lib, idx, n, dest);
done:
    for (int i = 0; dest && i < n; i++) cdb_free(dest[i]);
    free(dest);
    free(idx);
    free(old);
    cdb_free(done);
    cdb_eng_library_free(&lib);
    return st;
}
