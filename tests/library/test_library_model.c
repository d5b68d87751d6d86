/*
** test_library_model.c: a model-based random test of the library (issue 13). A
** seeded generator plays a history of a photo library and of what its owner runs,
** and after every step the database is checked against an independent truth.
**
** The library: folders that reuse the same file names (cam1, cam2, their sub/,
** misc/deep/, ...), single files, links/ with symbolic links to photos and dangling
** ones. Contents come from a pool of distinct photos (generated JPEG/PNG, and P6
** images of one size, so one can replace another without a size change); the truth
** is the pool's embeddings, computed once by `clipdb embed` from the pool's files.
**
** The history: add, delete, move (within and across folders and recorded roots),
** rename a folder, edit in place, replace with the same size and mtime, touch,
** add/remove links, and the commands `ingest` (folders, parts of roots, single files,
** parents of roots, with or without --follow-symlinks), `reindex`, `forget`, a root
** renamed away (a missing root: kept, exit 3) then `move` or put back, a read error
** injected on one file (retried later), and kill -9 at a random moment followed by
** the same command again; the filesystem boundary (issue 25): a photo swapped for a
** symbolic link or a hard link to a file outside the library, a FIFO, a socket or a
** folder, and (as root: a note says when they are skipped) cam2/ as a bind mount of
** a tmpfs, unmounted (reindex: exit 3, every vector under it kept) and mounted
** again (reindex: nothing added, changed or deleted).
**
** After every step (the expected roots are this file's own model of the rules):
**   - `verify` exits 0; the roots `folders` lists are the expected ones;
**   - every exported path appears once; each one the history has not touched since
**     a scan covered it exists, is in scope, and holds its own content's embedding;
**   - every file in scope that is not stale is exported;
**   - both for the default vector set and for a second one (tests/golden/models/
**     hf_gelu, added by the first ingest with --model), each against its own model's
**     embeddings of the pool (issue 33: no set is left with holes);
**   - two such files found by `search --image` first; every few steps `verify
**     --deep --sample 0.3` exits 0;
**   - a `clipdb serve` running through the whole history hands out, for every id
**     /metadata names, either exactly the photo that is at its path now (through a
**     link only where the root follows links) or 404/409, each within 5 s: never
**     the outside file, a FIFO's block, or another photo's bytes.
** --steps N / --seed S (or CLIPDB_LIBRARY_STEPS, default 70, bounded to 45 s in CI,
** and CLIPDB_LIBRARY_SEED, default the time) choose the history; for kill campaigns,
** CLIPDB_LIBRARY_KILL_EVERY=K kills one command in K (default 6) at a moment up to
** CLIPDB_LIBRARY_KILL_MS (default 250) after its start; a failure prints the
** seed and step to replay it (with CLIPDB_KEEP_TMP=1 the files stay). Every history
** that ever failed is replayed first (k_regressions).
*/
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "serve/serve_util.h"

#define MAX_FILES 400
#define MAX_ROOTS 16
#define POOL_GEN 20
#define POOL_PPM 4
#define POOL (POOL_GEN + POOL_PPM)

/* Histories that once failed, replayed on every run (seed, steps, kills): what each found. */
static const struct {
    uint64_t seed;
    int steps;
    int kill_every; /* 0: the default */
} k_regressions[] = {
    {12, 6, 0},   /* forget of the last root: the index refresh failed on no vectors */
    {14, 11, 0},  /* a root of links renamed away was dropped as "emptied" */
    {11, 27, 0},  /* a folder root emptied by deletes: first deleted, now kept (issue 25) */
    {102, 85, 0}, /* after a kill, a move onto a pending row's path failed the commit */
    {20012, 16, 1}, /* a dangling link kept the deleted photo's row (every command killed) */
    {1796286098, 43, 0}, /* a link to a photo on the cam2 mount, unlinked: its row was kept as
                         ** "on a drive not mounted" (the target's device, not the link's) */
};

static const char *const k_places[] = {"cam1", "cam2", "cam1/sub", "cam2/sub", "misc",
                                       "misc/deep/er", "single", "links"};
#define N_PLACES (int)(sizeof k_places / sizeof k_places[0])
static const char *const k_names[] = {"img_0", "img_1", "img_2", "img_3", "img_4", "IMG 5"};
#define N_NAMES (int)(sizeof k_names / sizeof k_names[0])

/* A path the history made: a photo, a link, or a ghost (the path of a photo that
** was deleted or moved away: stale until a scan covers it); a regular file that is
** not an image (a hard link to the outside file) or something that is not a regular
** file (FIFO, socket, folder) where a photo was: on disk, never in scope. */
#define GHOST (-2)
#define NOT_IMAGE (-3)
#define SPECIAL (-4)
typedef struct file_t {
    char path[800];
    int content; /* pool index; -1 for a symbolic link (see link_to); GHOST */
    char link_to[800];
    int dirty;   /* changed since a completed scan covered it */
} file_t;

typedef struct root_t {
    char path[800];
    int is_file, follow;
} root_t;

typedef struct model {
    char base[700], db[700], pool_dir[700];
    uint64_t rng, rng2; /* the main stream; the side stream (ON_SIDE_STREAM) */
    unsigned char *pool[POOL];
    size_t pool_n[POOL];
    char pool_ext[POOL][8];
    float *oracle; /* POOL * dim */
    int dim;
    /* A second vector set (issue 33): the first ingest adds it (--model m2); every
    ** check holds for its export too, against its own embeddings of the pool. */
    char m2[700];
    float *oracle2;
    int dim2, has_set2;
    file_t f[MAX_FILES];
    int n_files;
    root_t r[MAX_ROOTS];
    int n_roots;
    int step;
    int kill_every, kill_ms; /* one command in kill_every killed, up to kill_ms after its start */
    char outside[800];       /* a file outside the library ("/etc/passwd") */
    char tmpfs[800], cam2[800], store[800]; /* cam2/: a bind mount of store (on tmpfs) */
    int mounted;             /* 1: cam2/ is mounted; 0: no mounts (not root) */
    su_server srv;           /* `clipdb serve` over the database, all along */
} model;

static uint64_t rnd(model *m) {
    uint64_t z = (m->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int pick(model *m, int n) { return n > 0 ? (int)(rnd(m) % (uint64_t)n) : 0; }

static int within(const char *path, const char *dir) {
    size_t n = strlen(dir);
    return !strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0');
}

/* ---- the pool and its oracle --------------------------------------------------------- */

static int make_pool(model *m) {
    char dir[800], p[900];
    const char *files[POOL];
    char names[POOL][900];
    snprintf(m->pool_dir, sizeof m->pool_dir, "%s/pool", m->base);
    snprintf(dir, sizeof dir, "%s/gen", m->pool_dir);
    if (lu_generate(dir, 4242, 0, POOL_GEN) != 0) return -1;
    for (int i = 0; i < POOL; i++) {
        if (i < POOL_GEN) {
            lu_img(dir, i, names[i], sizeof names[i]);
            m->pool[i] = (unsigned char *)cli_read_file(names[i], &m->pool_n[i]);
            snprintf(m->pool_ext[i], sizeof m->pool_ext[i], "%s", strrchr(names[i], '.'));
        } else {
            m->pool[i] = lu_ppm(48, 40, (uint64_t)i * 31 + 5, &m->pool_n[i]);
            snprintf(m->pool_ext[i], sizeof m->pool_ext[i], ".ppm");
            snprintf(names[i], sizeof names[i], "%s/p%d.ppm", m->pool_dir, i);
            if (lu_write(names[i], m->pool[i], m->pool_n[i])) return -1;
        }
        if (!m->pool[i]) return -1;
        files[i] = names[i];
    }
    if (lu_embed(files, POOL, &m->oracle, &m->dim) != 0) return -1;
    if (m->m2[0] && lu_embed_model(m->m2, files, POOL, &m->oracle2, &m->dim2) != 0) return -1;
    /* the oracle must tell every pool photo from every other */
    for (int i = 0; i < POOL; i++)
        for (int k = 0; k < i; k++)
            if (lu_same_vector(m->oracle + (size_t)i * m->dim, m->oracle + (size_t)k * m->dim,
                               m->dim, NULL)) {
                fprintf(stderr, "    pool photos %d and %d embed alike\n", i, k);
                return -1;
            }
    (void)p;
    return 0;
}

/* ---- the disk and its model ----------------------------------------------------------- */

static file_t *find_file(model *m, const char *path) {
    for (int i = 0; i < m->n_files; i++)
        if (!strcmp(m->f[i].path, path)) return &m->f[i];
    return NULL;
}

/* What is on disk at path (a photo or a link), NULL for nothing or a ghost. */
static file_t *on_disk(model *m, const char *path) {
    file_t *f = find_file(m, path);
    return f && f->content != GHOST ? f : NULL;
}

static void drop_file(model *m, file_t *f) { *f = m->f[--m->n_files]; }

/* The path is gone from disk: the database may still hold it until a scan. */
static void leave_ghost(model *m, const char *where) {
    char path[800];
    snprintf(path, sizeof path, "%s", where); /* where may be the record itself */
    file_t *g = find_file(m, path);
    if (!g) {
        if (m->n_files >= MAX_FILES) return;
        g = &m->f[m->n_files++];
        memset(g, 0, sizeof *g);
        memcpy(g->path, path, sizeof path);
    }
    g->content = GHOST;
    g->link_to[0] = '\0';
    g->dirty = 1;
}

static const char *ext_of(model *m, int content) { return m->pool_ext[content]; }

/* A path for a new file in a place, with one of the shared names. */
static void new_path(model *m, char *out, size_t size, int place, int content) {
    snprintf(out, size, "%s/lib/%s/%s%s", m->base, k_places[place], k_names[pick(m, N_NAMES)],
             ext_of(m, content));
}

/* Removes what is at path when it is not a photo (a link, a hard link to the outside
** file, a FIFO, a socket, a folder), so that writing there never writes through it. */
static int clear_non_photo(model *m, const char *path) {
    file_t *f = find_file(m, path);
    struct stat st;
    if (!f || f->content >= 0 || f->content == GHOST || lstat(path, &st) != 0) return 0;
    return S_ISDIR(st.st_mode) ? rmdir(path) : unlink(path);
}

static int write_content(model *m, const char *path, int content) {
    char dir[800];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    if (lu_mkdirs(dir) != 0 || clear_non_photo(m, path) != 0) return -1;
    return lu_write(path, m->pool[content], m->pool_n[content]);
}

/* rename(), or across filesystems (cam2/ is a mount) a copy with the same mtime. */
static int move_file(const char *from, const char *to) {
    if (rename(from, to) == 0) return 0;
    if (errno != EXDEV) return -1;
    int64_t mt = lu_mtime(from);
    if (lu_copy(from, to) != 0 || lu_set_mtime(to, mt) != 0) return -1;
    return unlink(from);
}

static int is_file_root(model *m, const char *path) {
    for (int i = 0; i < m->n_roots; i++)
        if (m->r[i].is_file && !strcmp(m->r[i].path, path)) return 1;
    return 0;
}

/* A random regular file of the model that is not a file root's (those stay put). */
static file_t *some_photo(model *m) {
    for (int tries = 0; tries < 20 && m->n_files; tries++) {
        file_t *f = &m->f[pick(m, m->n_files)];
        if (f->content >= 0 && !is_file_root(m, f->path)) return f;
    }
    return NULL;
}

static void mark_dirty_under(model *m, const char *dir) {
    for (int i = 0; i < m->n_files; i++)
        if (within(m->f[i].path, dir)) m->f[i].dirty = 1;
}

/* The model's photo at p (found, a ghost's included, or added) now holds content, is no
** link and is dirty. NULL (nothing recorded) when the model is full. */
static file_t *record_photo(model *m, const char *p, int content) {
    file_t *f = find_file(m, p);
    if (!f) {
        if (m->n_files >= MAX_FILES) return NULL;
        f = &m->f[m->n_files++];
        memset(f, 0, sizeof *f);
        snprintf(f->path, sizeof f->path, "%s", p);
    }
    f->content = content;
    f->link_to[0] = '\0';
    f->dirty = 1;
    return f;
}

/* One random change on disk. Returns what it did, for the log. */
static const char *disk_op(model *m) {
    static char what[1200];
    int op = pick(m, 100);
    file_t *f;
    char p[800];
    if (op < 30 || m->n_files < 6) { /* add (or overwrite) */
        int c = pick(m, POOL), place = pick(m, N_PLACES - 1); /* not links/ */
        new_path(m, p, sizeof p, place, c);
        if (is_file_root(m, p)) return "skip";
        if (write_content(m, p, c) != 0) return NULL;
        if (!record_photo(m, p, c)) return "skip";
        snprintf(what, sizeof what, "add %s (%d)", p, c);
    } else if (op < 42) { /* delete */
        if (!(f = some_photo(m))) return "skip";
        snprintf(what, sizeof what, "delete %s", f->path);
        if (unlink(f->path) != 0) return NULL;
        leave_ghost(m, f->path);
    } else if (op < 56) { /* move within or across folders and roots */
        if (!(f = some_photo(m))) return "skip";
        new_path(m, p, sizeof p, pick(m, N_PLACES - 1), f->content);
        if (on_disk(m, p) || is_file_root(m, p) || m->n_files >= MAX_FILES - 1) return "skip";
        char dir[800], old[800];
        snprintf(dir, sizeof dir, "%s", p);
        *strrchr(dir, '/') = '\0';
        if (lu_mkdirs(dir) != 0 || clear_non_photo(m, p) != 0 || move_file(f->path, p) != 0)
            return NULL;
        snprintf(what, sizeof what, "move %s -> %s", f->path, p);
        snprintf(old, sizeof old, "%s", f->path);
        int content = f->content;
        leave_ghost(m, old);
        record_photo(m, p, content);
    } else if (op < 64) { /* edit in place */
        if (!(f = some_photo(m))) return "skip";
        f->content = pick(m, POOL);
        if (write_content(m, f->path, f->content) != 0) return NULL;
        f->dirty = 1;
        snprintf(what, sizeof what, "edit %s (%d)", f->path, f->content);
    } else if (op < 70) { /* same size, same mtime, another photo (P6 files only) */
        f = some_photo(m);
        if (!f || f->content < POOL_GEN) return "skip";
        int64_t mt = lu_mtime(f->path);
        f->content = POOL_GEN + (f->content - POOL_GEN + 1 + pick(m, POOL_PPM - 1)) % POOL_PPM;
        if (write_content(m, f->path, f->content) != 0 || lu_set_mtime(f->path, mt) != 0) return NULL;
        f->dirty = 1;
        snprintf(what, sizeof what, "replace same size+mtime %s (%d)", f->path, f->content);
    } else if (op < 76) { /* touch */
        if (!(f = some_photo(m))) return "skip";
        if (lu_set_mtime(f->path, lu_mtime(f->path) + 1000000000LL) != 0) return NULL;
        f->dirty = 1;
        snprintf(what, sizeof what, "touch %s", f->path);
    } else if (op < 84) { /* rename a folder that is not a root */
        static const char *const dirs[] = {"cam1/sub", "cam2/sub", "misc/deep", "misc/deep/er"};
        static const char *const alt[] = {"cam1/sub2", "cam2/sub2", "misc/deeper", "misc/deep/er2"};
        int k = pick(m, 4), back = pick(m, 2);
        char from[800], to[800];
        snprintf(from, sizeof from, "%s/lib/%s", m->base, back ? alt[k] : dirs[k]);
        snprintf(to, sizeof to, "%s/lib/%s", m->base, back ? dirs[k] : alt[k]);
        for (int i = 0; i < m->n_roots; i++)
            if (within(m->r[i].path, from)) return "skip"; /* a root, or holding one: root_away */
        if (access(from, F_OK) != 0 || access(to, F_OK) == 0) return "skip";
        if (rename(from, to) != 0) return NULL;
        for (int i = 0, n = m->n_files; i < n; i++)
            if (within(m->f[i].path, from) && m->f[i].content != GHOST) {
                char np[800];
                snprintf(np, sizeof np, "%s%s", to, m->f[i].path + strlen(from));
                file_t moved = m->f[i];
                snprintf(moved.path, sizeof moved.path, "%s", np);
                moved.dirty = 1;
                leave_ghost(m, m->f[i].path); /* m->f[i] becomes the ghost */
                file_t *dst = find_file(m, np);
                if (!dst) {
                    if (m->n_files >= MAX_FILES) return NULL;
                    dst = &m->f[m->n_files++];
                }
                *dst = moved;
            }
        snprintf(what, sizeof what, "rename folder %s -> %s", from, to);
    } else if (op < 92) { /* a link to a photo, or a dangling one */
        file_t *t = some_photo(m);
        snprintf(p, sizeof p, "%s/lib/links/l%d.jpg", m->base, pick(m, 6));
        if (on_disk(m, p) || m->n_files >= MAX_FILES) return "skip";
        char dir[800];
        snprintf(dir, sizeof dir, "%s/lib/links", m->base);
        lu_mkdirs(dir);
        const char *target = t && pick(m, 4) ? t->path : "/nonexistent/photo.jpg";
        if (symlink(target, p) != 0) return NULL;
        if (!(f = find_file(m, p))) f = &m->f[m->n_files++];
        memset(f, 0, sizeof *f);
        snprintf(f->path, sizeof f->path, "%s", p);
        snprintf(f->link_to, sizeof f->link_to, "%s", target);
        f->content = -1;
        f->dirty = 1;
        snprintf(what, sizeof what, "link %s -> %s", p, target);
    } else { /* remove a link */
        for (int i = 0; i < m->n_files; i++)
            if (m->f[i].content == -1) {
                snprintf(what, sizeof what, "unlink %s", m->f[i].path);
                unlink(m->f[i].path);
                leave_ghost(m, m->f[i].path);
                return what;
            }
        return "skip";
    }
    return what;
}

/* A photo swapped for what a hostile or careless writer of a photo folder can put
** there (issue 25): a link or a hard link to a file outside the library, a FIFO, a
** socket, a folder. Returns what it did, "skip", or NULL on failure. */
static const char *swap_op(model *m) {
    static char what[1000];
    static const char *const kinds[] = {"symlink out", "hard link out", "FIFO", "socket", "folder"};
    file_t *f = some_photo(m);
    int k = pick(m, 5), rc = 0;
    if (!f) return "skip";
    char path[800];
    snprintf(path, sizeof path, "%s", f->path);
    if (unlink(path) != 0) return NULL;
    if (k == 0) {
        rc = symlink(m->outside, path);
    } else if (k == 1) {
        if ((rc = link(m->outside, path)) != 0 && errno == EXDEV) { /* cam2/: another filesystem */
            leave_ghost(m, path);
            return "skip (a photo deleted: no hard link across filesystems)";
        }
    } else if (k == 2) {
        rc = mkfifo(path, 0644);
    } else if (k == 3) {
        struct sockaddr_un a;
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        if (strlen(path) >= sizeof a.sun_path) { /* too long for a socket: a FIFO then */
            rc = mkfifo(path, 0644);
        } else {
            memcpy(a.sun_path, path, strlen(path) + 1);
            rc = fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ? -1 : 0;
        }
        if (fd >= 0) close(fd);
    } else {
        rc = mkdir(path, 0755);
    }
    if (rc != 0) return NULL;
    f->content = k == 0 ? -1 : k == 1 ? NOT_IMAGE : SPECIAL;
    snprintf(f->link_to, sizeof f->link_to, "%s", k == 0 ? m->outside : "");
    f->dirty = 1;
    snprintf(what, sizeof what, "swap %s for a %s", path, kinds[k]);
    return what;
}

/* ---- the roots, by the rules (DESIGN.md) --------------------------------------------- */

static root_t *root_of(model *m, const char *path, int exact) {
    for (int i = 0; i < m->n_roots; i++)
        if (!strcmp(m->r[i].path, path)) return &m->r[i];
    if (exact) return NULL;
    for (int i = 0; i < m->n_roots; i++)
        if (!m->r[i].is_file && within(path, m->r[i].path)) return &m->r[i];
    return NULL;
}

/* `ingest path`: a new root (adopting the roots inside a folder), or part of one. */
static void rules_ingest(model *m, const char *path, int is_file, int follow) {
    root_t *r = root_of(m, path, 0);
    if (!r) {
        for (int i = 0; !is_file && i < m->n_roots;)
            if (within(m->r[i].path, path)) m->r[i] = m->r[--m->n_roots];
            else i++;
        r = &m->r[m->n_roots++];
        memset(r, 0, sizeof *r);
        snprintf(r->path, sizeof r->path, "%s", path);
        r->is_file = is_file;
        r->follow = follow > 0;
    } else if (follow >= 0) {
        r->follow = follow;
    }
}

static int is_hidden_below(const char *path, const char *root) {
    for (const char *p = path + strlen(root); *p; p++)
        if (*p == '/' && p[1] == '.') return 1;
    return 0;
}

/* The root holding path at its own place (real path), or NULL. */
static root_t *holder(model *m, const char *path) {
    root_t *r = root_of(m, path, 0);
    return r && !is_hidden_below(path, r->path) ? r : NULL;
}

/* Whether file f is in the library's scope now, and (links) with which content. */
static int in_scope(model *m, const file_t *f, int *content) {
    root_t *r = holder(m, f->path);
    if (!r || f->content == GHOST || f->content == NOT_IMAGE || f->content == SPECIAL) return 0;
    if (f->content >= 0) {
        *content = f->content;
        return 1;
    }
    /* a link: followed by its root, to a photo the library does not hold itself */
    file_t *t = find_file(m, f->link_to);
    if (!r->follow || !t || t->content < 0 || holder(m, t->path)) return 0;
    *content = t->content;
    return 1;
}

/* Which links are in scope depends on the roots (a link to a photo the library
** holds elsewhere is not followed): when the roots change, every link is stale
** until a scan of its folder. */
static void roots_changed(model *m) {
    for (int i = 0; i < m->n_files; i++)
        if (m->f[i].content == -1) m->f[i].dirty = 1;
}

/* A link scanned while its target is stale (not scanned by the same run) stays stale. */
static int is_stale_target(model *m, const file_t *link) {
    file_t *t = find_file(m, link->link_to);
    return t && t->dirty && !holder(m, t->path);
}

/* A link's content is its target's: it is stale when its target is. */
static int is_stale(model *m, const file_t *f) {
    if (f->dirty) return 1;
    if (f->content != -1) return 0;
    file_t *t = find_file(m, f->link_to);
    return t && t->dirty;
}

/* 1 when the folder holds no visible entry (none whose name does not start with
** '.'): an empty root keeps its rows (DESIGN.md, "deleted needs evidence"). */
static int holds_nothing(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *de;
    int nothing = 1;
    if (!d) return 1;
    while (nothing && (de = readdir(d)))
        if (de->d_name[0] != '.') nothing = 0;
    closedir(d);
    return nothing;
}

/* Marks clean what a completed scan of `path` covered (a root, or a part of one). A
** whole folder root that holds nothing is "empty": its rows are kept (exit 3), so
** its ghosts stay. */
static void scanned(model *m, const char *path) {
    root_t *r = root_of(m, path, 0);
    const char *what = r && !strcmp(r->path, path) ? r->path : path;
    if (r && what == r->path && !r->is_file && holds_nothing(r->path)) {
        mark_dirty_under(m, r->path);
        return;
    }
    for (int i = 0; i < m->n_files; i++) /* links first: their targets may be cleared */
        if (m->f[i].content == -1 && within(m->f[i].path, what))
            m->f[i].dirty = is_stale_target(m, &m->f[i]);
    for (int i = 0; i < m->n_files; i++)
        if ((m->f[i].content >= 0 || m->f[i].content == NOT_IMAGE || m->f[i].content == SPECIAL) &&
            within(m->f[i].path, what))
            m->f[i].dirty = 0;
    for (int i = 0; i < m->n_files;) /* a scanned ghost is gone from the database too */
        if (m->f[i].content == GHOST && within(m->f[i].path, what)) drop_file(m, &m->f[i]);
        else i++;
}

/* ---- checks ------------------------------------------------------------------------------ */

static int check_roots(model *m) {
    cli_run_result r;
    int bad = 0;
    if (lu_expect((const char *[]){"folders", "--db", m->db, "--json", NULL}, 0, &r)) return 1;
    int listed = 0;
    for (const char *p = r.out; (p = strstr(p, "\"path\": \"")); p += 9) {
        char path[800];
        const char *e = strchr(p + 9, '"');
        snprintf(path, sizeof path, "%.*s", (int)(e - p - 9), p + 9);
        listed++;
        if (!root_of(m, path, 1) && bad++ < 5) fprintf(stderr, "    unexpected root %s\n", path);
    }
    if (listed != m->n_roots && bad++ < 5)
        fprintf(stderr, "    %d roots listed, %d expected\n", listed, m->n_roots);
    cli_run_free(&r);
    return bad;
}

/* The export of one vector set against the model: every exported path once; if
** untouched since its scan: there, in scope, its own content's embedding (oracle);
** every file in scope that is not stale, exported once. */
static int check_export(model *m, const lu_export *e, const float *oracle, int dim,
                        const char *set) {
    int bad = 0;
    if (e->n && e->dim != dim) {
        fprintf(stderr, "    %s: %d dimensions, %d expected\n", set, e->dim, dim);
        return 1;
    }
    for (int i = 0; i < e->n; i++) {
        int count = 0, c = -1;
        lu_export_find(e, e->paths[i], &count);
        if (count != 1 && bad++ < 8) fprintf(stderr, "    %s: %s stored %d times\n", set, e->paths[i], count);
        file_t *f = find_file(m, e->paths[i]);
        if (f && is_stale(m, f)) continue;
        if (!f || !in_scope(m, f, &c)) {
            if (f && f->content == GHOST) f = NULL;
            if (bad++ < 8) fprintf(stderr, "    %s: %s is stored but %s\n", set, e->paths[i],
                                   f ? "out of scope" : "not on disk");
            continue;
        }
        if (!lu_same_vector(e->vecs + (size_t)i * e->dim, oracle + (size_t)c * dim, dim, NULL) &&
            bad++ < 8)
            fprintf(stderr, "    %s: %s holds a vector that is not its content's (%d)\n", set,
                    e->paths[i], c);
    }
    for (int i = 0; i < m->n_files; i++) {
        int c, count = 0;
        if (is_stale(m, &m->f[i]) || !in_scope(m, &m->f[i], &c)) continue;
        lu_export_find(e, m->f[i].path, &count);
        if (count != 1 && bad++ < 8)
            fprintf(stderr, "    %s: %s is in scope but stored %d times\n", set, m->f[i].path, count);
    }
    return bad;
}

static int check_db(model *m, int deep) {
    lu_export e;
    int bad = 0;
    if (lu_expect((const char *[]){"verify", "--db", m->db, "--quiet", NULL}, 0, NULL)) bad++;
    if (deep && lu_expect((const char *[]){"verify", "--db", m->db, "--deep", "--sample", "0.3",
                                           "--quiet", NULL},
                          0, NULL))
        bad++;
    bad += check_roots(m);
    if (lu_export_read(m->db, &e) != 0) return bad + 1;
    bad += check_export(m, &e, m->oracle, m->dim, "default set");
    lu_export_free(&e);
    if (m->has_set2) {
        if (lu_export_read_model(m->db, m->m2, &e) != 0) return bad + 1;
        bad += check_export(m, &e, m->oracle2, m->dim2, "second set");
        lu_export_free(&e);
    }
    /* two of them found first by their own image */
    for (int k = 0, tries = 0; k < 2 && tries < 20; tries++) {
        int c;
        file_t *f = m->n_files ? &m->f[pick(m, m->n_files)] : NULL;
        if (!f || is_stale(m, f) || f->content < 0 || !in_scope(m, f, &c)) continue;
        if (lu_search_finds_itself(m->db, f->path) != 0) bad++;
        k++;
    }
    return bad;
}

/* ---- commands ----------------------------------------------------------------------------- */

static int run_cmd(model *m, const char *const *args, const char *const *env, int *killed) {
    cli_run_result r;
    int rc;
    *killed = 0;
    if (killed && pick(m, m->kill_every) == 0) { /* kill -9 at a random moment, then again */
        char out[800], err[800];
        snprintf(out, sizeof out, "%s/killed.out", m->base);
        snprintf(err, sizeof err, "%s/killed.err", m->base);
        pid_t pid = cli_spawn(args, out, err);
        long ms = pick(m, m->kill_ms);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        cli_wait(pid);
        *killed = 1;
    }
    rc = lu_run_env(args, env, &r);
    if (rc != 0 && rc != 3) fprintf(stderr, "    exit %d\n%s%s", rc, r.out, r.err);
    cli_run_free(&r);
    return rc;
}

/* An ingest of 1 or 2 random things: places, single files, the whole library. */
static int cmd_ingest(model *m, char *log, size_t size) {
    char paths[2][800];
    const char *args[16] = {"ingest", "--db", m->db, "--quiet", "--threads", "2", "--batch", "3"};
    int n = 8, k = 1 + pick(m, 2), follow = -1, killed, adds_set2 = m->m2[0] && !m->has_set2;
    if (adds_set2) {
        args[n++] = "--model";
        args[n++] = m->m2;
    }
    int roll = pick(m, 10);
    if (roll == 0) follow = 1;
    else if (roll == 1) follow = 0;
    if (follow == 1) args[n++] = "--follow-symlinks";
    if (follow == 0) args[n++] = "--no-follow-symlinks";
    snprintf(log, size, "ingest%s", follow == 1 ? " --follow-symlinks" : follow == 0 ? " --no-follow" : "");
    int is_file[2];
    for (int i = 0; i < k; i++) {
        int what = pick(m, 30);
        is_file[i] = 0;
        if (what == 0) {
            snprintf(paths[i], sizeof paths[i], "%s/lib", m->base);
        } else if (what < 8 && m->n_files) {
            file_t *f = some_photo(m);
            if (!f) return 0;
            snprintf(paths[i], sizeof paths[i], "%s", f->path);
            is_file[i] = 1;
        } else {
            snprintf(paths[i], sizeof paths[i], "%s/lib/%s", m->base, k_places[pick(m, N_PLACES)]);
            if (access(paths[i], F_OK) != 0) lu_mkdirs(paths[i]);
        }
        args[n++] = paths[i];
        snprintf(log + strlen(log), size - strlen(log), " %s", paths[i] + strlen(m->base));
    }
    args[n] = NULL;
    int rc = run_cmd(m, args, NULL, &killed);
    if (killed) snprintf(log + strlen(log), size - strlen(log), " [killed, rerun]");
    if (rc != 0 && rc != 3) return -1;
    if (adds_set2) m->has_set2 = 1;
    for (int i = 0; i < k; i++) rules_ingest(m, paths[i], is_file[i], follow);
    roots_changed(m);
    for (int i = 0; i < k; i++) scanned(m, paths[i]);
    return 0;
}

static int cmd_reindex(model *m, char *log, size_t size, int with_fault) {
    const char *args[] = {"reindex", "--db", m->db, "--quiet", "--threads", "2", NULL};
    char match[900], *shim_env[3] = {NULL, NULL, NULL};
    file_t *victim = NULL;
    int killed;
    snprintf(log, size, "reindex");
    if (with_fault && CDB_FAULT_SHIM[0] && (victim = some_photo(m))) {
        snprintf(match, sizeof match, "CDB_FAULT_EACCES_MATCH=%s", victim->path);
        shim_env[0] = "LD_PRELOAD=" CDB_FAULT_SHIM;
        shim_env[1] = match;
        snprintf(log, size, "reindex with %s unreadable", victim->path);
    }
    int rc = run_cmd(m, args, (const char *const *)(victim ? shim_env : NULL), &killed);
    if (killed) snprintf(log + strlen(log), size - strlen(log), " [killed, rerun]");
    if (rc != 0 && rc != 3) return -1;
    char vpath[800] = "";
    if (victim) snprintf(vpath, sizeof vpath, "%s", victim->path); /* scanned() moves records */
    for (int i = 0; i < m->n_roots; i++) scanned(m, m->r[i].path);
    if (victim && (victim = find_file(m, vpath))) victim->dirty = 1; /* retried later */
    return 0;
}

static int cmd_forget(model *m, char *log, size_t size) {
    if (!m->n_roots) return 0;
    root_t r = m->r[pick(m, m->n_roots)];
    snprintf(log, size, "forget %s", r.path);
    if (lu_expect((const char *[]){"forget", "--db", m->db, r.path, "--quiet", NULL}, 0, NULL))
        return -1;
    for (int i = 0; i < m->n_roots;)
        if (within(m->r[i].path, r.path)) m->r[i] = m->r[--m->n_roots];
        else i++;
    roots_changed(m);
    return 0;
}

/* A recorded folder renamed away (a drive unmounted, a folder renamed): kept, exit
** 3; then either put back or `clipdb move`d to its new name. */
static int cmd_root_away(model *m, char *log, size_t size) {
    root_t *r = NULL;
    for (int tries = 0; tries < 10 && !r; tries++) {
        root_t *x = m->n_roots ? &m->r[pick(m, m->n_roots)] : NULL;
        int recorded = 0; /* `move` checks that some recorded file is at the new place */
        for (int i = 0; x && i < m->n_files; i++)
            recorded |= m->f[i].content >= 0 && !m->f[i].dirty && within(m->f[i].path, x->path);
        if (x && recorded && !x->is_file && access(x->path, F_OK) == 0 &&
            strcmp(strrchr(x->path, '/'), "/lib") && strcmp(x->path, m->cam2))
            r = x;
    }
    if (!r) return 0;
    char away[900];
    snprintf(away, sizeof away, "%s.away", r->path);
    if (access(away, F_OK) == 0) return 0;
    int to_move = pick(m, 2);
    snprintf(log, size, "root %s away, reindex, then %s", r->path, to_move ? "move" : "back");
    mark_dirty_under(m, r->path);
    if (rename(r->path, away) != 0) return -1;
    cli_run_result res;
    int rc = lu_run((const char *[]){"reindex", "--db", m->db, NULL}, &res);
    int ok = rc == 3 && strstr(res.err, "is missing") != NULL;
    if (!ok) fprintf(stderr, "    reindex with a missing root: exit %d\n%s%s", rc, res.out, res.err);
    cli_run_free(&res);
    if (!ok) return -1;
    if (to_move) {
        if (lu_expect((const char *[]){"move", "--db", m->db, r->path, away, "--quiet", NULL}, 0,
                      NULL))
            return -1;
        for (int i = 0; i < m->n_files; i++)
            if (within(m->f[i].path, r->path)) {
                char np[900];
                snprintf(np, sizeof np, "%s%s", away, m->f[i].path + strlen(r->path));
                snprintf(m->f[i].path, sizeof m->f[i].path, "%s", np);
            }
        snprintf(r->path, sizeof r->path, "%s", away);
        /* rename back on disk and `move` again, so the places keep their names */
        char back[800];
        snprintf(back, sizeof back, "%.*s", (int)(strlen(away) - 5), away);
        if (rename(away, back) != 0 ||
            lu_expect((const char *[]){"move", "--db", m->db, away, back, "--quiet", NULL}, 0, NULL))
            return -1;
        for (int i = 0; i < m->n_files; i++)
            if (within(m->f[i].path, away)) {
                char np[900];
                snprintf(np, sizeof np, "%s%s", back, m->f[i].path + strlen(away));
                snprintf(m->f[i].path, sizeof m->f[i].path, "%s", np);
            }
        snprintf(r->path, sizeof r->path, "%s", back);
    } else if (rename(away, r->path) != 0) {
        return -1;
    }
    return cmd_reindex(m, log + strlen(log), size - strlen(log), 0);
}

/* ---- mounts (root only) ------------------------------------------------------------------ */

/* cam2/ becomes a bind mount of a folder on a tmpfs, before anything is ingested: a
** drive that can go away under the library. Without root, the history runs without. */
static void mounts_setup(model *m) {
    static int said;
    snprintf(m->tmpfs, sizeof m->tmpfs, "%s/tmpfs", m->base);
    snprintf(m->store, sizeof m->store, "%s/cam2", m->tmpfs);
    snprintf(m->cam2, sizeof m->cam2, "%s/lib/cam2", m->base);
    if (geteuid() != 0 || getenv("CLIPDB_LIBRARY_NO_MOUNTS")) {
        if (!said++) fprintf(stderr, "    not root: the unmount/remount operations are skipped\n");
        return;
    }
    if (lu_mkdirs(m->tmpfs) != 0 || lu_mkdirs(m->cam2) != 0 ||
        mount("tmpfs", m->tmpfs, "tmpfs", 0, "size=256m") != 0)
        return;
    if (lu_mkdirs(m->store) != 0 || mount(m->store, m->cam2, NULL, MS_BIND, NULL) != 0) {
        umount2(m->tmpfs, MNT_DETACH);
        return;
    }
    m->mounted = 1;
}

static void mounts_teardown(model *m) {
    if (!m->mounted) return;
    umount2(m->cam2, MNT_DETACH);
    umount2(m->tmpfs, MNT_DETACH);
    m->mounted = 0;
}

/* The paths of the export under dir (heap, n), NULL on failure. */
static char **export_paths_under(model *m, const char *dir, int *n) {
    lu_export e;
    char **out;
    *n = 0;
    if (lu_export_read(m->db, &e) != 0 || !(out = calloc((size_t)e.n + 1, sizeof *out))) return NULL;
    for (int i = 0; i < e.n; i++)
        if (within(e.paths[i], dir)) out[(*n)++] = strdup(e.paths[i]);
    lu_export_free(&e);
    return out;
}

/* reindex --json (never killed): its exit code, the summary's counts in c[5]: added,
** changed, moved, deleted, touched. */
static int reindex_counts(model *m, int64_t c[5]) {
    static const char *const keys[] = {"\"added\": ", "\"changed\": ", "\"moved\": ",
                                       "\"deleted\": ", "\"touched\": "};
    cli_run_result r;
    int rc = lu_run((const char *[]){"reindex", "--db", m->db, "--json", NULL}, &r);
    for (int k = 0; k < 5; k++) {
        const char *p = r.out ? strstr(r.out, keys[k]) : NULL;
        c[k] = p ? atoll(p + strlen(keys[k])) : -1;
    }
    if (rc != 0 && rc != 3) fprintf(stderr, "    reindex: exit %d\n%s%s", rc, r.out, r.err);
    cli_run_free(&r);
    return rc;
}

/* The drive under cam2/ goes away and comes back (issue 25): after a settling
** reindex, an unmounted cam2/ keeps every vector recorded under it (nothing at all is
** deleted), and once mounted again a reindex finds nothing to do. */
static int cmd_unmount_cycle(model *m, char *log, size_t size) {
    int64_t c[5];
    int n_before = 0, n_after = 0, bad = 0;
    snprintf(log, size, "settle, unmount %s, reindex, mount, reindex", m->cam2);
    if (reindex_counts(m, c) > 3) return -1;
    for (int i = 0; i < m->n_roots; i++) scanned(m, m->r[i].path);
    char **before = export_paths_under(m, m->cam2, &n_before);
    if (!before || umount(m->cam2) != 0) return -1;
    int rc = reindex_counts(m, c);
    char **after = export_paths_under(m, m->cam2, &n_after);
    if (mount(m->store, m->cam2, NULL, MS_BIND, NULL) != 0) m->mounted = 0;
    if ((rc != 0 && rc != 3) || c[3] != 0 || !after || n_after != n_before) {
        fprintf(stderr, "    unmounted: exit %d, %lld deleted, %d paths under cam2 kept of %d\n",
                rc, (long long)c[3], n_after, n_before);
        bad++;
    }
    if (n_before && rc != 3 && bad++ < 8)
        fprintf(stderr, "    unmounted with %d photos recorded: exit %d, not 3\n", n_before, rc);
    for (int i = 0; i < n_before; i++) free(before[i]);
    for (int i = 0; after && i < n_after; i++) free(after[i]);
    free(before);
    free(after);
    if (!m->mounted) return -1;
    rc = reindex_counts(m, c);
    if ((rc != 0 && rc != 3) || c[0] || c[1] || c[2] || c[3] || c[4]) {
        fprintf(stderr, "    mounted again: exit %d, %lld added, %lld changed, %lld moved, "
                        "%lld deleted, %lld touched (all 0 expected)\n",
                rc, (long long)c[0], (long long)c[1], (long long)c[2], (long long)c[3],
                (long long)c[4]);
        bad++;
    }
    return bad ? -1 : 0;
}

/* ---- the server ----------------------------------------------------------------------------- */

/* The bytes that may be served for path now: the photo there, or where the root follows
** links, the photo a link there points to; NULL when nothing may be served. */
static const unsigned char *servable(model *m, const char *path, size_t *n) {
    file_t *f = find_file(m, path);
    if (f && f->content == -1) {
        root_t *r = holder(m, path);
        f = r && r->follow ? find_file(m, f->link_to) : NULL;
    }
    if (!f || f->content < 0) return NULL;
    *n = m->pool_n[f->content];
    return m->pool[f->content];
}

/* ids.npy of an export (little-endian <i8), heap, *n rows. */
static int64_t *read_ids(const char *path, int *n) {
    size_t len = 0;
    char *b = cli_read_file(path, &len);
    int64_t *ids = NULL;
    *n = 0;
    if (b && len >= 10 && !memcmp(b, "\x93NUMPY", 6) && strstr(b + 10, "<i8")) {
        size_t hl = (size_t)(unsigned char)b[8] | (size_t)(unsigned char)b[9] << 8;
        size_t off = 10 + hl;
        if (off <= len && (ids = malloc(len - off + 8))) {
            *n = (int)((len - off) / 8);
            memcpy(ids, b + off, len - off);
        }
    }
    free(b);
    return ids;
}

/* Every exported id through /api/file (and /metadata): the bytes servable at its path
** now, or 404/409, within 5 s. */
static int check_served(model *m) {
    char dir[800], p[900];
    int bad = 0, n = 0;
    if (m->srv.pid <= 0) return 0;
    snprintf(dir, sizeof dir, "%s/served", m->base);
    lu_rm_rf(dir);
    if (lu_expect((const char *[]){"export", "--db", m->db, "--out", dir, "--quiet", NULL}, 0, NULL))
        return 1;
    snprintf(p, sizeof p, "%s/ids.npy", dir);
    int64_t *ids = read_ids(p, &n);
    snprintf(p, sizeof p, "%s/paths.txt", dir);
    char *text = cli_read_file(p, NULL), *line = text;
    json_t *req = json_object(), *arr = json_array();
    for (int i = 0; i < n && line && *line; i++) {
        char *nl = strchr(line, '\n'), url[64];
        su_resp r = {0};
        size_t want_n = 0;
        if (nl) *nl = '\0';
        json_array_append_new(arr, json_integer(ids[i]));
        snprintf(url, sizeof url, "/api/file/%lld", (long long)ids[i]);
        int64_t t0 = cdb_now_ns();
        int fd = su_connect(m->srv.port);
        if (fd < 0 || su_request_on(fd, "GET", url, NULL, NULL, 0, &r, 5000) != 0 || !r.status) {
            if (bad++ < 8) fprintf(stderr, "    %s (%s): no answer within 5 s\n", url, line);
        } else if (r.status == 200) {
            const unsigned char *want = servable(m, line, &want_n);
            if ((!want || r.len != want_n || memcmp(r.body, want, want_n)) && bad++ < 8)
                fprintf(stderr, "    %s (%s): served %zu bytes that are not the photo there\n", url,
                        line, r.len);
        } else if (r.status != 404 && r.status != 409 && bad++ < 8) {
            fprintf(stderr, "    %s (%s): status %d\n", url, line, r.status);
        }
        if ((cdb_now_ns() - t0) > 5000000000LL && bad++ < 8)
            fprintf(stderr, "    %s: %.1f s\n", url, (cdb_now_ns() - t0) / 1e9);
        if (fd >= 0) close(fd);
        su_resp_free(&r);
        line = nl ? nl + 1 : NULL;
    }
    /* /metadata names each id's own path */
    json_object_set_new(req, "ids", arr);
    char *body = json_dumps(req, JSON_COMPACT);
    su_resp r = {0};
    if (body && su_post_json(m->srv.port, "/metadata", body, &r) == 0 && r.status == 200) {
        json_t *a = su_json(&r);
        size_t i;
        json_t *it;
        json_array_foreach(a, i, it) {
            json_t *md = json_object_get(it, "metadata");
            const char *mp = json_string_value(json_object_get(md, "path"));
            int64_t id = json_integer_value(json_object_get(it, "id"));
            file_t *f = mp ? find_file(m, mp) : NULL;
            (void)id;
            if (mp && !f && !strstr(text ? text : "", mp) && bad++ < 8)
                fprintf(stderr, "    /metadata: id %lld names %s, not an exported path\n",
                        (long long)id, mp);
        }
        json_decref(a);
    } else if (bad++ < 8) {
        fprintf(stderr, "    /metadata: status %d\n", body ? r.status : -1);
    }
    su_resp_free(&r);
    free(body);
    json_decref(req);
    free(text);
    free(ids);
    lu_rm_rf(dir);
    return bad;
}

/* ---- the history ------------------------------------------------------------------------ */

/* The kill settings of a history: CLIPDB_LIBRARY_KILL_EVERY / _KILL_MS, else 6 and
** 250 ms; a regression may fix its own. */
static void kill_settings(int *every, int *ms) {
    const char *e = getenv("CLIPDB_LIBRARY_KILL_EVERY"), *t = getenv("CLIPDB_LIBRARY_KILL_MS");
    *every = e && atoi(e) > 0 ? atoi(e) : 6;
    *ms = t && atoi(t) > 0 ? atoi(t) : 250;
}

/* Runs f on the side stream of random numbers (the swaps and the mounts), so that the
** main stream, and with it every history k_regressions replays, stays as it was. */
#define ON_SIDE_STREAM(m, expr)                                                          \
    do {                                                                                 \
        uint64_t main_ = (m)->rng;                                                       \
        (m)->rng = (m)->rng2;                                                            \
        expr;                                                                            \
        (m)->rng2 = (m)->rng;                                                            \
        (m)->rng = main_;                                                                \
    } while (0)

static int history_run(model *m, uint64_t seed, int steps, double seconds);

static int history(uint64_t seed, int steps, double seconds, int kill_every, int kill_ms) {
    static model mm;
    model *m = &mm;
    for (int i = 0; i < POOL; i++) free(m->pool[i]);
    free(m->oracle);
    free(m->oracle2);
    memset(m, 0, sizeof *m);
    snprintf(m->m2, sizeof m->m2, "%s/tests/golden/models/hf_gelu", CDB_SOURCE_DIR);
    if (access(m->m2, R_OK) != 0) m->m2[0] = '\0'; /* one set only */
    m->rng = seed;
    m->rng2 = seed ^ 0x5DEECE66DULL;
    m->kill_every = kill_every;
    m->kill_ms = kill_ms;
    snprintf(m->base, sizeof m->base, "%s/model_%llu", lu_tmp, (unsigned long long)seed);
    lu_rm_rf(m->base);
    snprintf(m->db, sizeof m->db, "%s/db", m->base);
    snprintf(m->outside, sizeof m->outside, "%s/outside/secret.txt", m->base);
    int rc = history_run(m, seed, steps, seconds);
    if (m->srv.pid > 0) su_stop(&m->srv);
    mounts_teardown(m);
    if (rc == 0 && !getenv("CLIPDB_KEEP_TMP")) lu_rm_rf(m->base);
    return rc;
}

static int history_run(model *m, uint64_t seed, int steps, double seconds) {
    char log[4000];
    int64_t t0 = cdb_now_ns();
    char outside_dir[800];
    snprintf(outside_dir, sizeof outside_dir, "%s/outside", m->base);
    if (lu_mkdirs(outside_dir) != 0 || lu_write(m->outside, "root:x:0:0:secret\n", 18) != 0)
        return -1;
    mounts_setup(m);
    if (make_pool(m) != 0 || lu_init(m->db) != 0) return -1;
    if (su_start(&m->srv, (const char *const[]){"--db", m->db, NULL}) != 0) return -1;
    for (m->step = 1; m->step <= steps; m->step++) {
        if (seconds > 0 && (double)(cdb_now_ns() - t0) / 1e9 > seconds) break;
        char did[4][1300];
        int n_ops = 1 + pick(m, 3), swap = 0, cycle = 0;
        for (int k = 0; k < 4; k++) did[k][0] = '\0';
        for (int k = 0; k < n_ops; k++) {
            const char *w = disk_op(m);
            if (!w) {
                fprintf(stderr, "    disk operation failed: %s\n", strerror(errno));
                return -1;
            }
            snprintf(did[k], sizeof did[k], "%s", w);
        }
        ON_SIDE_STREAM(m, swap = pick(m, 5) == 0; cycle = m->mounted && pick(m, 8) == 0);
        if (swap) {
            const char *w;
            ON_SIDE_STREAM(m, w = swap_op(m));
            if (!w) {
                fprintf(stderr, "    swap failed: %s\n", strerror(errno));
                return -1;
            }
            snprintf(did[3], sizeof did[3], "%s", w);
        }
        int which = pick(m, 100), rc;
        log[0] = '\0';
        if (which < 50) rc = cmd_ingest(m, log, sizeof log);
        else if (which < 82) rc = cmd_reindex(m, log, sizeof log, 0);
        else if (which < 88) rc = cmd_reindex(m, log, sizeof log, 1);
        else if (which < 93) rc = cmd_forget(m, log, sizeof log);
        else rc = cmd_root_away(m, log, sizeof log);
        int bad = rc != 0 ? 1 : check_db(m, m->step % 5 == 0);
        if (!bad && cycle) {
            size_t l = strlen(log);
            snprintf(log + l, sizeof log - l, "; ");
            bad = cmd_unmount_cycle(m, log + l + 2, sizeof log - l - 2) != 0 || check_db(m, 0);
        }
        if (!bad) bad = check_served(m);
        if (getenv("CDB_TEST_VERBOSE") || bad) {
            fprintf(stderr, "    seed %llu step %d: %s | %s | %s | %s | %s\n",
                    (unsigned long long)seed, m->step, did[0], did[1], did[2], did[3], log);
        }
        if (bad) {
            fprintf(stderr,
                    "    replay: CLIPDB_LIBRARY_SEED=%llu CLIPDB_LIBRARY_STEPS=%d "
                    "CLIPDB_LIBRARY_KILL_EVERY=%d CLIPDB_LIBRARY_KILL_MS=%d "
                    "CLIPDB_KEEP_TMP=1 %s/tests/library/test_library_model random_history\n",
                    (unsigned long long)seed, m->step, m->kill_every, m->kill_ms, CDB_BINARY_DIR);
            return -1;
        }
    }
    /* the end: one more full scan, and everything must be exact */
    for (int i = 0; i < m->n_files; i++) m->f[i].dirty = 1;
    if (cmd_reindex(m, log, sizeof log, 0) != 0 || check_db(m, 1) != 0) {
        fprintf(stderr, "    seed %llu: the final reindex is not exact\n", (unsigned long long)seed);
        return -1;
    }
    fprintf(stderr, "    seed %llu: %d steps, %d files, %d roots (%.1f s)\n", (unsigned long long)seed,
            m->step - 1, m->n_files, m->n_roots, (double)(cdb_now_ns() - t0) / 1e9);
    return 0;
}

CDB_TEST(regressions) {
    LU_NEED_SETUP();
    for (size_t i = 0; i < sizeof k_regressions / sizeof k_regressions[0]; i++) {
        int every, ms;
        kill_settings(&every, &ms);
        if (k_regressions[i].kill_every) every = k_regressions[i].kill_every;
        CHECK_EQ_INT(history(k_regressions[i].seed, k_regressions[i].steps, 0, every, ms), 0);
    }
}

CDB_TEST(random_history) {
    const char *s = getenv("CLIPDB_LIBRARY_SEED"), *n = getenv("CLIPDB_LIBRARY_STEPS");
    uint64_t seed = s && *s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
    int steps = n && *n ? atoi(n) : 70;
    LU_NEED_SETUP();
    /* bounded in CI (45 s, after the replays); as long as asked otherwise */
    int every, ms;
    kill_settings(&every, &ms);
    CHECK_EQ_INT(history(seed, steps, n && *n ? 0 : 45, every, ms), 0);
}

int main(int argc, char **argv) {
    CDB_TEST_LIST(tests, regressions, random_history);
    /* --seed S --steps N: the same as CLIPDB_LIBRARY_SEED / CLIPDB_LIBRARY_STEPS */
    int n = 1;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "--seed") || !strcmp(argv[i], "--steps")) && i + 1 < argc) {
            setenv(strcmp(argv[i], "--seed") ? "CLIPDB_LIBRARY_STEPS" : "CLIPDB_LIBRARY_SEED",
                   argv[i + 1], 1);
            i++;
        } else {
            argv[n++] = argv[i];
        }
    }
    argc = n;
    int rc = cdb_test_run_tmp_(tests, CDB_TEST_N(tests), argc, argv, lu_tmp,
                               lu_rm_rf);
    return rc;
}
