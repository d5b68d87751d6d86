/*
** walk.c: finds the files under an ingest root, and tells images from other files.
**
** The walk is depth-first with the entries of each folder sorted by name (bytes),
** so two runs over the same tree visit files in the same order. Symbolic links are
** skipped unless follow_symlinks; when followed, a link whose target the library
** already holds at its own path (opts.link_covered) is not followed, so a photo is
** never found twice, and every folder's (device, inode) is remembered, so a link
** back to an ancestor (a loop), a second link to a folder already walked, or a bind
** mount of one (with opts.dirs shared by all the walks of a run) is not entered
** twice; a file met through a link or with several names (hard links) is passed on
** once (opts.files). A broken link is a walk problem. Hidden entries (names starting
** with '.') and the folder given as `skip_dir` (the database itself, when it lives
** inside the root) are skipped. Memory: the open folders' entry lists plus the set
** of visited folders; never the list of all files.
**
** Leaving out: the root's stored rules (opts.rules) and the .clipdbignore files met
** (gitignore syntax, ignore/ignore.h) decide per entry, on its path relative to the
** root; a left-out entry is counted (n_excluded) and a left-out folder is not entered,
** so nothing below it is met. The rules fail closed: a .clipdbignore that is there but
** cannot be read in full (no permission, an I/O error, over 1 MiB, not a regular file,
** or a symbolic link, which is not followed, as git does not follow a linked
** .gitignore) means the folder it governs is not walked: it is reported as a walk
** problem (the scan keeps that folder's recorded rows, as for an unreadable folder)
** whose reason starts with CDB_ENG_NOT_WALKED, so nothing it leaves out is taken in.
**
** Classification: a file "claims to be an image" when its extension is an image
** extension (cdb_image_name_is_image) or its first bytes are an image signature
** (cdb_image_sniff, strict); only those go to the decoder. encoder/ is the one sniffer.
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db/db.h"
#include "engine/ingest/ingest.h"
#include "ignore/ignore.h"

#define IGNORE_FILE ".clipdbignore"
#define IGNORE_MAX_BYTES (1 << 20)

/* ---- visited folders and files: an open-addressing set of (dev, ino) -------------- */

struct eng_devino_set {
    uint64_t *keys; /* pairs: dev, ino; dev == ~0 marks empty */
    size_t cap, n;
};
typedef eng_devino_set devino_set;

eng_devino_set *cdb_eng_devino_new(void) { return calloc(1, sizeof(eng_devino_set)); }

void cdb_eng_devino_free(eng_devino_set *s) {
    if (!s) return;
    free(s->keys);
    free(s);
}

static size_t dh(uint64_t dev, uint64_t ino, size_t cap) {
    uint64_t h = (dev * 0x9E3779B97F4A7C15ULL) ^ (ino * 0xC2B2AE3D27D4EB4FULL);
    h ^= h >> 29;
    return (size_t)(h & (cap - 1));
}

/* 1 if inserted, 0 if present, -1 on OOM. */
int cdb_eng_devino_add(eng_devino_set *s, uint64_t dev, uint64_t ino) {
    size_t i;
    if ((s->n + 1) * 2 > s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 64;
        uint64_t *nk = malloc(sizeof *nk * 2 * nc);
        if (!nk) return -1;
        for (size_t k = 0; k < nc; k++) nk[2 * k] = ~0ULL;
        for (size_t k = 0; k < s->cap; k++) {
            if (s->keys[2 * k] == ~0ULL) continue;
            i = dh(s->keys[2 * k], s->keys[2 * k + 1], nc);
            while (nk[2 * i] != ~0ULL) i = (i + 1) & (nc - 1);
            nk[2 * i] = s->keys[2 * k];
            nk[2 * i + 1] = s->keys[2 * k + 1];
        }
        free(s->keys);
        s->keys = nk;
        s->cap = nc;
    }
    i = dh(dev, ino, s->cap);
    while (s->keys[2 * i] != ~0ULL) {
        if (s->keys[2 * i] == dev && s->keys[2 * i + 1] == ino) return 0;
        i = (i + 1) & (s->cap - 1);
    }
    s->keys[2 * i] = dev;
    s->keys[2 * i + 1] = ino;
    s->n++;
    return 1;
}

/* ---- the walk ------------------------------------------------------------------- */

typedef struct walker {
    const char *root;
    int follow;
    int (*link_covered)(const char *path, void *ud);
    void *link_ud;
    uint64_t skip_dev, skip_ino;
    int has_skip;
    int root_is_db; /* the root is the database's own folder: its files are not walked */
    eng_devino_set *dirs;  /* folders walked (this walk's, or the run's: opts.dirs) */
    eng_devino_set *files; /* files that could be met twice: reached through a link, or
                              with more than one name (opts.files) */
    eng_walk_fn fn;
    void *ud;
    eng_walk_stats *st;
    int stop;
    const cdb_ignore *rules; /* the root's stored rules, or NULL */
    cdb_ignore *found;       /* the rules of the .clipdbignore files met (may be NULL: OOM) */
    const char *prefix;      /* the walked folder relative to the root, "" for the root */
    void (*on_ignore_file)(const char *rel, void *ud); /* opts.on_ignore_file */
    void *ignore_ud;
    char why[8400]; /* the reason of a rules file's problem, for the report's call */
} walker;

static void report(walker *w, const char *rel, const char *what, int err, int dangling) {
    eng_walk_entry e;
    memset(&e, 0, sizeof e);
    e.relpath = rel;
    e.error = what;
    e.err = err;
    e.dangling = dangling;
    w->st->n_errors++;
    if (w->fn(&e, w->ud)) w->stop = 1;
}

/* Reads fd (a regular file) to its end into *buf (heap, free), *n bytes: 0, or -1 with
** errno (EFBIG past IGNORE_MAX_BYTES: rules past a cut would be dropped). */
static int read_all(int fd, size_t size_hint, char **buf, size_t *n) {
    size_t cap = size_hint < IGNORE_MAX_BYTES ? size_hint + 1 : IGNORE_MAX_BYTES + 1;
    char *b = malloc(cap);
    *buf = NULL;
    *n = 0;
    if (!b) return -1;
    for (;;) {
        if (*n == cap) {
            char *nb = cap > IGNORE_MAX_BYTES ? NULL : realloc(b, cap = IGNORE_MAX_BYTES + 1);
            if (!nb) {
                free(b);
                errno = cap > IGNORE_MAX_BYTES ? EFBIG : ENOMEM;
                return -1;
            }
            b = nb;
        }
        ssize_t k = read(fd, b + *n, cap - *n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            free(b);
            return -1;
        }
        if (k == 0) break;
        *n += (size_t)k;
    }
    if (*n > IGNORE_MAX_BYTES) {
        free(b);
        errno = EFBIG;
        return -1;
    }
    *buf = b;
    return 0;
}

/* Adds the rules of dir/.clipdbignore (dir: a full path; rel: it relative to the root).
** NULL when they were added, or when there is no such file; else what is wrong with the
** file that is there (a static phrase, errno set): its rules are unknown, and the caller
** must not walk what they govern (fails closed). */
static const char *read_ignore_file(walker *w, const char *dir, const char *rel) {
    char path[8300], *buf = NULL;
    struct stat st;
    size_t n = 0;
    const char *bad = NULL;
    int len = snprintf(path, sizeof path, "%s/" IGNORE_FILE, dir), fd;
    if (len < 0 || (size_t)len >= sizeof path) return errno = ENAMETOOLONG, "cannot be read";
    if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0) {
        if (errno == ENOENT || errno == ENOTDIR) return NULL; /* none (or gone since listed) */
        return errno == ELOOP ? "is a symbolic link, which is not followed" : "cannot be read";
    }
    if (fstat(fd, &st) != 0)
        bad = "cannot be read";
    else if (!S_ISREG(st.st_mode))
        bad = (errno = EINVAL, "is not a regular file");
    else if (st.st_size > IGNORE_MAX_BYTES)
        bad = (errno = EFBIG, "is larger than 1 MiB");
    else if (read_all(fd, (size_t)st.st_size, &buf, &n) != 0)
        bad = errno == EFBIG ? "is larger than 1 MiB" : "cannot be read";
    else if (!w->found || cdb_ignore_add(w->found, rel, buf, n) != CDB_OK)
        bad = (errno = ENOMEM, "cannot be read");
    else if (w->on_ignore_file)
        w->on_ignore_file(rel, w->ignore_ud);
    int e = errno;
    free(buf);
    close(fd);
    errno = e;
    return bad;
}

/* Reads the .clipdbignore of folder dir (a full path; rel: it relative to the root).
** 0, or -1 when it is there but unusable: then reported as a problem of at (a path
** relative to the walked folder: the folder not walked), and the caller walks nothing
** below at. */
static int rules_or_report(walker *w, const char *dir, const char *rel, const char *at) {
    const char *bad = read_ignore_file(w, dir, rel);
    if (!bad) return 0;
    int e = errno;
    snprintf(w->why, sizeof w->why, CDB_ENG_NOT_WALKED "%s%s" IGNORE_FILE " %s", rel,
             *rel ? "/" : "", bad);
    report(w, at, w->why, e, 0);
    return -1;
}

/* The path relative to the root of `rel` (relative to the walked folder): heap. */
static char *root_rel(const walker *w, const char *rel) {
    size_t pl = strlen(w->prefix), rl = strlen(rel);
    char *s = malloc(pl + rl + 2);
    if (!s) return NULL;
    memcpy(s, w->prefix, pl);
    s[pl] = pl && rl ? '/' : '\0';
    memcpy(s + pl + (pl && rl), rel, rl + 1);
    return s;
}

/* 1 when the rules leave out `rel` (relative to the walked folder); 1 also when out of
** memory (fails closed: nothing private is taken in by accident). */
static int left_out(walker *w, const char *rel, int is_dir) {
    if (!w->rules && (!w->found || cdb_ignore_count(w->found) == 0)) return 0;
    char *r = root_rel(w, rel);
    int out = !r || (w->rules && cdb_ignore_match(w->rules, r, is_dir) == CDB_IGNORE_EXCLUDED) ||
              (w->found && cdb_ignore_match(w->found, r, is_dir) == CDB_IGNORE_EXCLUDED);
    free(r);
    if (out) w->st->n_excluded++;
    return out;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Walks folder `rel` ("" for the root); path buffers are built per level. via_link:
** the walk came into this folder through a symbolic link. */
static void walk_dir(walker *w, const char *rel, int depth, int via_link) {
    char *full;
    DIR *d;
    struct dirent *de;
    char **names = NULL;
    size_t n = 0, cap = 0;
    if (depth > 4096) {
        report(w, rel, "too deeply nested", ELOOP, 0);
        return;
    }
    if (!(full = cdb_db_path_join(w->root, rel))) {
        report(w, rel, "cannot open folder", ENOMEM, 0);
        return;
    }
    d = opendir(full);
    cdb_free(full);
    if (!d) {
        report(w, rel, "cannot open folder", errno, 0);
        return;
    }
    int has_ignore = 0, list_err = 0;
    size_t n_walk;
    for (errno = 0; (de = readdir(d)); errno = 0) {
        if (!strcmp(de->d_name, IGNORE_FILE)) has_ignore = 1;
        if (de->d_name[0] == '.') {
            if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) w->st->n_hidden++;
            continue;
        }
        if (n == cap) {
            char **nn = realloc(names, sizeof *names * (cap = cap ? cap * 2 : 64));
            if (!nn) break;
            names = nn;
        }
        if (!(names[n] = strdup(de->d_name))) break;
        n++;
    }
    list_err = de ? ENOMEM : errno; /* stopped early, or readdir failed: a partial list */
    closedir(d);
    n_walk = n;
    if (list_err) { /* what it misses must not look deleted: the folder is not walked */
        report(w, rel, "cannot list folder", list_err, 0);
        n_walk = 0;
    } else if (has_ignore) {
        char *dir = cdb_db_path_join(w->root, rel), *r = root_rel(w, rel);
        int closed = dir && r ? rules_or_report(w, dir, r, rel) : -1;
        if (!dir || !r) report(w, rel, "cannot open folder", ENOMEM, 0);
        cdb_free(dir);
        free(r);
        n_walk = closed ? 0 : n; /* its rules unknown: nothing in it is met (fails closed) */
    }
    if (n_walk > 1) qsort(names, n, sizeof *names, cmp_names); /* names: NULL when empty */
    for (size_t i = 0; i < n_walk && !w->stop; i++) {
        char *child_rel;
        size_t rl = strlen(rel), nl = strlen(names[i]);
        struct stat st;
        int is_link = 0;
        /* never opened: closing a descriptor of ours would drop SQLite's locks on them */
        if (depth == 0 && w->root_is_db && cdb_db_owns_name(names[i])) continue;
        if (!(child_rel = malloc(rl + nl + 2))) break;
        if (rl) {
            memcpy(child_rel, rel, rl);
            child_rel[rl] = '/';
            memcpy(child_rel + rl + 1, names[i], nl + 1);
        } else {
            memcpy(child_rel, names[i], nl + 1);
        }
        /* the one full path of this entry: stat'ed here, handed on with it */
        if (!(full = cdb_db_path_join(w->root, child_rel))) {
            free(child_rel);
            break;
        }
        if (lstat(full, &st) != 0) {
            report(w, child_rel, "cannot stat", errno, 0);
            free(child_rel);
            cdb_free(full);
            continue;
        }
        if (S_ISLNK(st.st_mode)) {
            is_link = 1;
            if (!w->follow) {
                w->st->n_links_skipped++;
                free(child_rel);
                cdb_free(full);
                continue;
            }
            if (stat(full, &st) != 0) {
                report(w, child_rel, "broken symbolic link", errno, 1);
                free(child_rel);
                cdb_free(full);
                continue;
            }
            if (w->link_covered && w->link_covered(full, w->link_ud)) {
                w->st->n_links_covered++; /* found at its real path instead */
                free(child_rel);
                cdb_free(full);
                continue;
            }
        }
        if ((S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) &&
            left_out(w, child_rel, S_ISDIR(st.st_mode))) {
            free(child_rel);
            cdb_free(full);
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            int added;
            if (w->has_skip && (uint64_t)st.st_dev == w->skip_dev &&
                (uint64_t)st.st_ino == w->skip_ino) {
                free(child_rel);
                cdb_free(full);
                continue;
            }
            added = cdb_eng_devino_add(w->dirs, (uint64_t)st.st_dev, (uint64_t)st.st_ino);
            if (added == 0) {
                w->st->n_loops++; /* already walked: a loop or a second link */
            } else if (added > 0) {
                w->st->n_dirs++;
                walk_dir(w, child_rel, depth + 1, via_link || is_link);
            }
        } else if (S_ISREG(st.st_mode)) {
            eng_walk_entry e;
            if ((via_link || is_link || st.st_nlink > 1) &&
                cdb_eng_devino_add(w->files, (uint64_t)st.st_dev, (uint64_t)st.st_ino) == 0) {
                w->st->n_same_file++; /* met under another name already */
                free(child_rel);
                cdb_free(full);
                continue;
            }
            memset(&e, 0, sizeof e);
            e.relpath = child_rel;
            e.path = full;
            e.size = (int64_t)st.st_size;
            e.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
            e.dev = (uint64_t)st.st_dev;
            e.ino = (uint64_t)st.st_ino;
            e.ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
            w->st->n_files++;
            if (w->fn(&e, w->ud)) w->stop = 1;
        } else {
            w->st->n_special++;
        }
        free(child_rel);
        cdb_free(full);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* Reads the .clipdbignore files above the walked folder (w->root = top/prefix): in the
** root (top) and each folder between it and the walked one. 0, or -1 when one is there
** but unusable (reported as a problem of the walked folder, which is then not walked). */
static int read_rules_above(walker *w) {
    size_t rl = strlen(w->root), pl = strlen(w->prefix);
    char *top = rl > pl ? strndup(w->root, rl - pl - 1) : NULL, *rel = strdup(w->prefix);
    char dir[8300];
    int rc = top && rel ? rules_or_report(w, top, "", "") : -1;
    if (!top || !rel) report(w, "", "cannot open folder", ENOMEM, 0);
    for (char *slash = rel; rc == 0 && (slash = strchr(slash, '/')); *slash++ = '/') {
        *slash = '\0';
        snprintf(dir, sizeof dir, "%s/%s", top, rel);
        rc = rules_or_report(w, dir, rel, "");
    }
    free(top);
    free(rel);
    return rc;
}

int cdb_eng_path_inside(const char *path, const char *dir) {
    char rp[PATH_MAX], rd[PATH_MAX];
    return realpath(path, rp) && realpath(dir, rd) && cdb_eng_path_under(rp, rd, 1);
}

int cdb_eng_walk(const char *root, const eng_walk_opts *o, eng_walk_fn fn, void *ud,
             eng_walk_stats *st) {
    walker w;
    struct stat rs;
    memset(&w, 0, sizeof w);
    memset(st, 0, sizeof *st);
    w.root = root;
    w.follow = o->follow_symlinks;
    w.link_covered = o->link_covered;
    w.link_ud = o->link_ud;
    w.dirs = o->dirs ? o->dirs : cdb_eng_devino_new();
    w.files = o->files ? o->files : cdb_eng_devino_new();
    if (!w.dirs || !w.files) {
        if (!o->dirs) cdb_eng_devino_free(w.dirs);
        if (!o->files) cdb_eng_devino_free(w.files);
        errno = ENOMEM;
        return -1;
    }
    w.fn = fn;
    w.ud = ud;
    w.st = st;
    w.rules = o->rules;
    w.prefix = o->prefix ? o->prefix : "";
    w.on_ignore_file = o->on_ignore_file;
    w.ignore_ud = o->ignore_ud;
    if (cdb_ignore_new(&w.found) != CDB_OK) w.found = NULL;
    if (o->skip_dir) {
        struct stat ss;
        if (stat(o->skip_dir, &ss) == 0) {
            w.has_skip = 1;
            w.skip_dev = (uint64_t)ss.st_dev;
            w.skip_ino = (uint64_t)ss.st_ino;
        }
    }
    int rc = 0;
    if (stat(root, &rs) != 0) {
        rc = -1;
    } else if (o->skip_dir && cdb_eng_path_inside(root, o->skip_dir)) {
        rc = 2; /* a folder inside the database's own: its files are the database's */
    } else if (cdb_eng_devino_add(w.dirs, (uint64_t)rs.st_dev, (uint64_t)rs.st_ino) == 0) {
        st->n_loops++; /* walked already in this run (a bind mount of a walked folder) */
    } else {
        /* the database's own folder as the root, found as nested ones are (dev, inode) */
        w.root_is_db = w.has_skip && (uint64_t)rs.st_dev == w.skip_dev &&
                       (uint64_t)rs.st_ino == w.skip_ino;
        st->n_dirs = 1;
        if (!*w.prefix || read_rules_above(&w) == 0) walk_dir(&w, "", 0, 0);
        rc = w.stop ? 1 : 0;
    }
    int e = errno;
    cdb_ignore_free(w.found);
    if (!o->dirs) cdb_eng_devino_free(w.dirs);
    if (!o->files) cdb_eng_devino_free(w.files);
    errno = e;
    return rc;
}
