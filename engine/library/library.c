/*
** library.c: the library model (DESIGN.md, README.md "The library"): which
** roots a database records, what an `ingest PATH...` means in terms of them, and
** the questions the pipeline asks about places on disk.
**
**   - Every root is a real, absolute path (realpath), a folder or a single file.
**   - No root lies inside another: ingesting a folder that holds recorded roots
**     adopts them (their files and vectors move under it, nothing is re-encoded);
**     ingesting a path inside a root scans that part of the root; legacy databases
**     that recorded both are folded together before any run (normalize).
**   - A followed symbolic link whose target the library holds at its real path is
**     not followed: every photo is found once, at its own path.
**   - Deleted needs evidence. A folder root is *present* only when the folder at
**     its path is the one recorded (root_matches: its inode with its birth time, or
**     its filesystem's id, the evidence that survives a reboot renumbering devices);
**     an empty mount point, another filesystem mounted there or a folder made anew
**     is *foreign*: unavailable, like a missing root, until the recorded folder is
**     back or the user accepts the new one (reindex --accept-root). A recorded file
**     that is not where it was counts as gone (deleted, moved) only when its root is
**     present and the nearest folder above it that exists is on the filesystem the
**     file was recorded on; otherwise (a drive or share inside the root that is not
**     mounted) its files and vectors are kept. (An empty root is the scan's rule:
**     engine/scan.c.)
*/
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "engine/library/library.h"

int cdb_eng_path_under(const char *path, const char *dir, int strictly) {
    size_t n = strlen(dir);
    if (strncmp(path, dir, n) != 0) return 0;
    if (path[n] == '\0') return !strictly;
    return path[n] == '/' || (n == 1 && dir[0] == '/'); /* dir "/" */
}

/* The part of path below dir (cdb_eng_path_under(path, dir, 1) holds). */
static const char *below(const char *path, const char *dir) {
    size_t n = strlen(dir);
    return path + n + (dir[n - 1] == '/' ? 0 : 1);
}

/* ---- loading --------------------------------------------------------------------- */

/* Adds the root r to the rows ud (eng_rows of eng_root). */
static int on_root(const cdb_db_root *r, void *ud) {
    eng_rows *roots = ud;
    eng_root *c = cdb_eng_rows_add(roots, sizeof *c);
    if (!c) return 1;
    if (!(c->path = strdup(r->path))) return roots->oom = 1;
    c->id = r->id;
    c->kind = r->kind;
    c->follow_symlinks = r->follow_symlinks;
    c->no_exif = r->no_exif;
    c->dev_recorded = r->dev;
    c->ident_recorded = r->ident;
    return 0;
}

/* The identity of the folder at path now (fields the system does not give stay 0). */
static void ident_now(const char *path, cdb_db_root_ident *id) {
    struct statx sx;
    struct statfs sf;
    memset(id, 0, sizeof *id);
    if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_INO | STATX_BTIME, &sx) == 0) {
        id->ino = sx.stx_ino;
        if (sx.stx_mask & STATX_BTIME)
            id->btime_ns = (int64_t)sx.stx_btime.tv_sec * 1000000000LL + sx.stx_btime.tv_nsec;
    }
    if (statfs(path, &sf) == 0) {
        uint32_t w[2];
        memcpy(w, &sf.f_fsid, sizeof w);
        id->fsid = (uint64_t)w[0] << 32 | w[1];
        id->fstype = (uint64_t)sf.f_type;
    }
}

/* Whether the folder now at a root's path is the recorded one (library.h). The
** evidence, strongest first:
**   - the folder's inode and birth time (statx; ext4, xfs, btrfs, tmpfs): the same
**     folder object, whatever device number its filesystem has after a reboot;
**   - the inode and the filesystem id (statfs f_fsid: from the UUID on ext4 and
**     btrfs, so it too survives renumbering; a new tmpfs gets a new one);
**   - where neither is given (NFS, FAT): the inode with the device number, or with
**     the filesystem type (an NFS share's device number changes at each mount).
** An empty mount point is another folder on another filesystem; a filesystem
** mounted at the path is another folder than the mount point it covers. Roots
** recorded before identities (schema 6) have only the device number to go by. */
int cdb_eng_root_matches(const cdb_db_root_ident *a, uint64_t dev_recorded,
                         const cdb_db_root_ident *b, uint64_t dev_now, int *strong) {
    *strong = 0;
    if (!a->ino) return !dev_recorded || dev_recorded == dev_now;
    if (a->ino != b->ino) return 0;
    if (a->btime_ns && b->btime_ns) return *strong = a->btime_ns == b->btime_ns;
    if (a->fsid && b->fsid) return *strong = a->fsid == b->fsid;
    if (dev_recorded && dev_recorded == dev_now) return 1;
    return *strong = a->fstype && a->fstype == b->fstype;
}

/* exists: the path is there with its kind. A root recorded as a real path that is a
** symbolic link now (a folder replaced by a link to another) is not followed. A
** folder root is present when its folder is the recorded one (or accepted). */
static void stat_root(eng_root *c) {
    struct stat st;
    c->exists = c->present = c->foreign = c->same_by_ident = 0;
    c->dev_now = 0;
    memset(&c->ident_now, 0, sizeof c->ident_now);
    if (lstat(c->path, &st) != 0) return;
    if (c->kind == CDB_DB_ROOT_FILE ? !S_ISREG(st.st_mode) : !S_ISDIR(st.st_mode)) return;
    c->exists = 1;
    c->dev_now = (uint64_t)st.st_dev;
    if (c->kind == CDB_DB_ROOT_FOLDER) {
        ident_now(c->path, &c->ident_now);
        c->foreign = !c->accepted && !cdb_eng_root_matches(&c->ident_recorded, c->dev_recorded,
                                                           &c->ident_now, c->dev_now,
                                                           &c->same_by_ident);
    }
    c->present = !c->foreign;
}

cdb_status cdb_eng_library_load(cdb_db *db, eng_library *lib) {
    eng_rows roots = {0};
    char real[PATH_MAX];
    memset(lib, 0, sizeof *lib);
    cdb_status rc = cdb_db_roots_foreach(db, on_root, &roots);
    lib->r = roots.v; /* freed with lib, a failed root's path included (NULL) */
    lib->n = (int)roots.n;
    if (rc == CDB_OK && roots.oom) rc = cdb_seterr(CDB_NOMEM, "out of memory");
    if (rc == CDB_OK && realpath(cdb_db_dir(db), real) && !(lib->db_dir = strdup(real)))
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
    if (rc != CDB_OK) {
        cdb_eng_library_free(lib);
        return rc;
    }
    for (int i = 0; i < lib->n; i++) stat_root(&lib->r[i]);
    return CDB_OK;
}

void cdb_eng_library_free(eng_library *lib) {
    if (!lib) return;
    for (int i = 0; i < lib->n; i++) free(lib->r[i].path);
    free(lib->r);
    free(lib->db_dir);
    memset(lib, 0, sizeof *lib);
}

cdb_status cdb_eng_library_accept(eng_library *lib, const char *path) {
    char real[PATH_MAX];
    const char *p = realpath(path, real) ? real : path;
    for (int i = 0; i < lib->n; i++)
        if (!strcmp(lib->r[i].path, path) || !strcmp(lib->r[i].path, p)) {
            lib->r[i].accepted = 1;
            stat_root(&lib->r[i]);
            return CDB_OK;
        }
    return cdb_seterr(CDB_NOTFOUND, "not a recorded folder");
}

const eng_root *cdb_eng_library_root(const eng_library *lib, int64_t root_id) {
    for (int i = 0; i < lib->n; i++)
        if (lib->r[i].id == root_id) return &lib->r[i];
    return NULL;
}

/* ---- questions about places ---------------------------------------------------------- */

int cdb_eng_rel_hidden(const char *rel) {
    for (const char *p = rel; *p;) {
        if (*p == '.') return 1;
        const char *slash = strchr(p, '/');
        if (!slash) break;
        p = slash + 1;
    }
    return 0;
}

int cdb_eng_library_covers(const eng_library *lib, const char *path) {
    char real[PATH_MAX];
    if (!realpath(path, real)) return 0;
    if (lib->db_dir && cdb_eng_path_under(real, lib->db_dir, 0)) return 1; /* never indexed */
    for (int i = 0; i < lib->n; i++) {
        const eng_root *r = &lib->r[i];
        if (!strcmp(real, r->path)) return 1;
        if (r->kind == CDB_DB_ROOT_FOLDER && cdb_eng_path_under(real, r->path, 1) &&
            !cdb_eng_rel_hidden(below(real, r->path)))
            return 1;
    }
    return 0;
}

int cdb_eng_library_gone(const eng_library *lib, int64_t root_id, const char *path,
                         uint64_t file_dev) {
    char up[PATH_MAX];
    struct stat st;
    const eng_root *r = cdb_eng_library_root(lib, root_id);
    if (lstat(path, &st) == 0) return 0;
    if (errno != ENOENT && errno != ENOTDIR) return 0; /* EIO, EACCES: nothing is known */
    if (!r || !r->present) return 0;                     /* not the recorded folder */
    if (!file_dev) return 1; /* recorded before identities were: as before, gone */
    snprintf(up, sizeof up, "%s", path);
    for (;;) {
        char *slash = strrchr(up, '/');
        if (!slash) return 0;
        if (slash == up) slash[1] = '\0';
        else *slash = '\0';
        if (stat(up, &st) == 0) break;
        if (slash == up) return 0;
    }
    if ((uint64_t)st.st_dev == file_dev) return 1;
    /* the user said the root's folder as it is now is the truth */
    if (r->accepted && r->dev_now && (uint64_t)st.st_dev == r->dev_now) return 1;
    /* the root's filesystem under a new device number (after a reboot, say): only
    ** when the root was recognized by its identity, not by a device number */
    return r->same_by_ident && r->dev_recorded == file_dev && r->dev_now &&
           (uint64_t)st.st_dev == r->dev_now;
}

/* ---- normalizing: no root inside another ----------------------------------------------- */

/* The outermost folder root holding root i (-1: none). */
static int outermost_container(const eng_library *lib, int i) {
    int best = -1;
    for (int k = 0; k < lib->n; k++) {
        if (k == i || lib->r[k].kind != CDB_DB_ROOT_FOLDER) continue;
        if (!cdb_eng_path_under(lib->r[i].path, lib->r[k].path, 1)) continue;
        if (best < 0 || strlen(lib->r[k].path) < strlen(lib->r[best].path)) best = k;
    }
    return best;
}

static cdb_status reload(cdb_db *db, eng_library *lib) {
    cdb_eng_library_free(lib);
    return cdb_eng_library_load(db, lib);
}

cdb_status cdb_eng_library_normalize(cdb_db *db, int64_t model_id, eng_library *lib,
                                     int *n_adopted) {
    int n = 0;
    cdb_status rc = CDB_OK;
    if (n_adopted) *n_adopted = 0;
    for (int i = 0; i < lib->n && rc == CDB_OK; i++) {
        int k = outermost_container(lib, i);
        if (k < 0) continue;
        CDB_LOG_INFO("library: %s lies inside %s: folded into it", lib->r[i].path, lib->r[k].path);
        rc = cdb_db_root_adopt(db, model_id, lib->r[k].id, lib->r[i].id, NULL);
        n++;
    }
    if (rc == CDB_OK && n) rc = reload(db, lib);
    if (n_adopted) *n_adopted = n;
    return rc;
}

/* ---- resolving ingest PATHs ----------------------------------------------------------- */

void cdb_eng_targets_free(eng_target *t, int n) {
    for (int i = 0; t && i < n; i++) {
        free((char *)t[i].path);
        free((char *)t[i].sub);
    }
    free(t);
}

/* Appends a target for root r (sub NULL: the whole root). */
static cdb_status add_target(eng_target *t, int *n, const eng_root *r, const char *sub,
                             int sub_is_file, int named) {
    eng_target *x = &t[*n];
    memset(x, 0, sizeof *x);
    x->root_id = r->id;
    x->kind = r->kind;
    x->follow_symlinks = r->follow_symlinks;
    x->no_exif = r->no_exif;
    x->sub_is_file = sub && sub_is_file;
    x->named = named;
    x->path = strdup(r->path);
    x->sub = sub ? strdup(sub) : NULL;
    (*n)++;
    if (!x->path || (sub && !x->sub)) return cdb_seterr(CDB_NOMEM, "out of memory");
    return CDB_OK;
}

cdb_status cdb_eng_library_all(const eng_library *lib, eng_target **targets, int *n_targets) {
    eng_target *t = calloc((size_t)(lib->n ? lib->n : 1), sizeof *t);
    int n = 0;
    cdb_status rc = t ? CDB_OK : cdb_seterr(CDB_NOMEM, "out of memory");
    for (int i = 0; i < lib->n && rc == CDB_OK; i++) rc = add_target(t, &n, &lib->r[i], NULL, 0, 0);
    if (rc != CDB_OK) {
        cdb_eng_targets_free(t, n);
        return rc;
    }
    *targets = t;
    *n_targets = n;
    return CDB_OK;
}

/* 1 when paths[i] repeats an earlier one or lies inside another folder PATH. */
static int covered_by_other(char *const *paths, const int *is_file, int n, int i) {
    for (int k = 0; k < n; k++) {
        if (k == i) continue;
        if (!strcmp(paths[k], paths[i])) {
            if (k < i) return 1;
            continue;
        }
        if (!is_file[k] && cdb_eng_path_under(paths[i], paths[k], 1)) return 1;
    }
    return 0;
}

/* A new root at path; a new folder root adopts the roots inside it. One that lies
** under a hidden folder of it (or is hidden itself) is adopted too, but its files are
** out of the new root's scope: the scan drops them, and says so beforehand. */
static cdb_status new_root(cdb_db *db, int64_t model_id, eng_library *lib, const char *path,
                           int is_file, int follow, int no_exif, const cdb_engine_events *ev,
                           int64_t *id) {
    cdb_status rc = cdb_db_root_create(db, path, is_file ? CDB_DB_ROOT_FILE : CDB_DB_ROOT_FOLDER,
                                       follow > 0, id);
    if (rc == CDB_OK && no_exif > 0) rc = cdb_db_root_set_options(db, *id, -1, 1);
    for (int i = 0; rc == CDB_OK && !is_file && i < lib->n; i++)
        if (cdb_eng_path_under(lib->r[i].path, path, 1)) {
            if (cdb_eng_rel_hidden(below(lib->r[i].path, path)))
                cdb_eng_warn(ev,
                             "%s is hidden inside %s (names starting with '.' are skipped there): "
                             "its photos leave the database",
                             lib->r[i].path, path);
            rc = cdb_db_root_adopt(db, model_id, *id, lib->r[i].id, NULL);
        }
    if (rc == CDB_OK) rc = reload(db, lib);
    return rc;
}

/* The root equal to path (exact), else the folder root holding it; -1: none. */
static int root_for(const eng_library *lib, const char *path, int *exact) {
    for (int i = 0; i < lib->n; i++)
        if (!strcmp(lib->r[i].path, path)) {
            *exact = 1;
            return i;
        }
    *exact = 0;
    for (int i = 0; i < lib->n; i++)
        if (lib->r[i].kind == CDB_DB_ROOT_FOLDER && cdb_eng_path_under(path, lib->r[i].path, 1)) return i;
    return -1;
}

static int targeted(const eng_target *t, int nt, int64_t root_id) {
    for (int i = 0; i < nt; i++)
        if (t[i].root_id == root_id) return 1;
    return 0;
}

cdb_status cdb_eng_library_resolve(cdb_db *db, int64_t model_id, eng_library *lib,
                               char *const *paths, const int *is_file, int n, int follow,
                               int no_exif, const cdb_engine_events *ev, eng_target **targets,
                               int *n_targets) {
    eng_target *t = calloc((size_t)(n > 0 ? n : 1), sizeof *t);
    int nt = 0, created = 0;
    cdb_status rc = t ? CDB_OK : cdb_seterr(CDB_NOMEM, "out of memory");
    /* nothing is written before every PATH checks out */
    for (int i = 0; i < n && rc == CDB_OK; i++) {
        int exact = 0,
            k = covered_by_other(paths, is_file, n, i) ? -1 : root_for(lib, paths[i], &exact);
        if (k >= 0 && !exact && cdb_eng_rel_hidden(below(paths[i], lib->r[k].path)))
            rc = cdb_seterr(CDB_INVALID,
                            "%s is hidden inside the folder %s, whose scans skip names starting "
                            "with '.'", paths[i], lib->r[k].path);
    }
    for (int i = 0; i < n && rc == CDB_OK; i++) {
        int exact = 0, k;
        if (covered_by_other(paths, is_file, n, i)) continue;
        if ((k = root_for(lib, paths[i], &exact)) < 0) {
            int64_t id = 0;
            if ((rc = new_root(db, model_id, lib, paths[i], is_file[i], follow, no_exif, ev,
                               &id)) != CDB_OK)
                break;
            exact = 1;
            created = 1;
            for (k = 0; k < lib->n && lib->r[k].id != id; k++) {
            }
            if (k == lib->n) {
                rc = cdb_seterr(CDB_ERROR, "root %s vanished while it was recorded", paths[i]);
                break;
            }
        }
        eng_root *r = &lib->r[k];
        int reencode = no_exif >= 0 && r->no_exif != no_exif;
        if ((follow >= 0 && r->follow_symlinks != follow) || reencode) {
            if ((rc = cdb_db_root_set_options(db, r->id, follow, no_exif)) != CDB_OK) break;
            if (follow >= 0) r->follow_symlinks = follow;
            if (no_exif >= 0) r->no_exif = no_exif;
        }
        /* the stored vectors were made with the other orientation: the whole root again */
        rc = add_target(t, &nt, r, exact || reencode ? NULL : below(paths[i], r->path),
                        is_file[i] && !reencode, is_file[i] && !reencode);
        if (rc == CDB_OK) t[nt - 1].reencode = reencode;
    }
    /* (No target points at a root a later PATH adopted: such a target lay inside that
    ** PATH, and covered_by_other dropped it.) A new root can hold what other roots
    ** reach through links: those roots are scanned again, so no photo is found twice. */
    if (created && rc == CDB_OK) {
        eng_target *g = realloc(t, sizeof *t * (size_t)(nt + lib->n + 1));
        if (!g) rc = cdb_seterr(CDB_NOMEM, "out of memory");
        else t = g;
        for (int i = 0; i < lib->n && rc == CDB_OK; i++)
            if (lib->r[i].follow_symlinks && lib->r[i].kind == CDB_DB_ROOT_FOLDER &&
                !targeted(t, nt, lib->r[i].id))
                rc = add_target(t, &nt, &lib->r[i], NULL, 0, 0);
    }
    if (rc != CDB_OK) {
        cdb_eng_targets_free(t, nt);
        return rc;
    }
    *targets = t;
    *n_targets = nt;
    return CDB_OK;
}
