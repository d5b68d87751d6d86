/*
** scan.c: the walker's side of the ingest pipeline (ingest.h).
**
** For each target (a whole root, or a part of a folder root): a missing root is
** reported and left as it is, never taken for "everything deleted"; otherwise the
** walk (walk.c) meets every file, its stat is compared with its row (cdb_db_change_of),
** and what is not unchanged becomes a job with its own root id and paths. What the
** walk could not read is collected as walk problems. The rows come from a merge join:
** each folder's rows are read at once, in name order (cdb_db_folder_read), when the
** walk meets the folder's first file, and its files are found among them in the walk's
** order, so an unchanged file costs no SQL statement of its own.
**
** After the stages have drained (first pass of a run only): the deletion pass marks
** deleted the recorded files of each fully walked target that are gone from a place
** that is still there (cdb_eng_library_gone), keeps those under a folder the walk could
** not read or on a drive that is not mounted, and drops those that exist but are no
** longer in scope (now hidden, reached only through a link that is not followed);
** then the walk problems and each root's scan status are recorded, and a missing
** root all of whose files turned up elsewhere is forgotten.
*/
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/ingest/ingest.h"
#include "ignore/ignore.h"

#define DEL_COMMIT_EVERY 256
#define MAX_WARNINGS 10
/* Files the walker looks up in one read snapshot (cdb_db_read_begin) before it takes a
** newer one: a rescan pays for a read transaction once per this many files instead of
** once per statement, and the snapshot still moves on often enough for checkpoints. */
#define SNAPSHOT_FILES 4096

/* ---- bookkeeping ---------------------------------------------------------------------- */

static void mark_seen(pipe_ctx *c, int64_t id);

void cdb_scan_mark_seen(pipe_ctx *c, int64_t id) {
    pthread_mutex_lock(&c->mu);
    mark_seen(c, id);
    pthread_mutex_unlock(&c->mu);
}

static void mark_seen(pipe_ctx *c, int64_t id) {
    if (id <= 0) return;
    if (id >= c->seen_bits) {
        int64_t nb = (id + 1) * 2;
        uint8_t *ns = realloc(c->seen, (size_t)((nb + 7) / 8));
        if (!ns) return;
        memset(ns + (c->seen_bits + 7) / 8, 0, (size_t)((nb + 7) / 8 - (c->seen_bits + 7) / 8));
        c->seen = ns;
        c->seen_bits = nb;
    }
    c->seen[id / 8] |= (uint8_t)(1u << (id % 8));
}

static int was_seen(const pipe_ctx *c, int64_t id) {
    return id > 0 && id < c->seen_bits && (c->seen[id / 8] >> (id % 8)) & 1;
}

/* A walk problem of the current target (first pass only: later passes walk the same).
** shields: the rows recorded at or under relpath are kept (the walk could not see
** them: an unreadable folder, a file that could not be stat'ed). A broken symbolic
** link shields nothing: the link is there and its photo is not, so its row goes as a
** deleted file's does, and the link is reported. */
static void add_problem(pipe_ctx *c, const char *relpath, const char *reason, int shields) {
    target_state *t = &c->ts[c->cur];
    c->sum->walk_errors++;
    if (c->o->secondary) return;
    if (t->n_probs == t->cap_probs) {
        int nc = t->cap_probs ? t->cap_probs * 2 : 16;
        cdb_db_walk_problem *p = realloc(t->probs, sizeof *p * (size_t)nc);
        if (!p) return;
        t->probs = p;
        unsigned char *sh = realloc(t->shields, (size_t)nc);
        if (!sh) return;
        t->shields = sh;
        t->cap_probs = nc;
    }
    t->shields[t->n_probs] = (unsigned char)(shields != 0);
    cdb_db_walk_problem *p = &t->probs[t->n_probs];
    memset(p, 0, sizeof *p);
    p->root_id = c->targets[c->cur].root_id;
    p->relpath = strdup(relpath);
    p->reason = strdup(reason);
    if (p->relpath && p->reason) {
        t->n_probs++;
    } else {
        free((char *)p->relpath);
        free((char *)p->reason);
    }
}

/* A warning line about the walk (the first MAX_WARNINGS of a run; none in later
** passes, which walk the same folders). */
static void warn(pipe_ctx *c, const char *fmt, ...) CDB_PRINTF(2, 3);
static void warn(pipe_ctx *c, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    if (c->o->secondary || c->sum->walk_errors > MAX_WARNINGS) return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    cdb_eng_warn(c->ev, "%s", line);
}

/* ---- the walk ---------------------------------------------------------------------------- */

typedef struct walk_ud {
    pipe_ctx *c;
    const char *prefix; /* relpaths are prefix + "/" + the walk's relpath */
} walk_ud;

/* 1 when the first pass makes thumbnails and this unchanged ok file has no current one
** (a database from before thumbnails, a changed size setting): the reindex backfills. */
static int thumb_px(const pipe_ctx *c) { return c->o->secondary ? 0 : c->o->thumb_px; }

/* thumb: whether the folder's listing found its thumbnail current (1, 0), -1 not known */
static int needs_thumb(pipe_ctx *c, const cdb_db_file *f, int thumb) {
    int current = 1;
    if (thumb_px(c) <= 0 || !f->meta.has_hash) return 0;
    if (thumb >= 0) return !thumb;
    if (cdb_db_thumb_current(c->rdb, f->id, f->meta.hash, c->o->thumb_px, &current) != CDB_OK)
        return 0; /* a cache: not worth failing the run over */
    return !current;
}

/* 1 when this unchanged ok file has no current metadata row (a database from before
** schema 7, a row a crash lost): its bytes are read again, not encoded. The list of
** such files is read once, before the first walk (load_photo_missing). */
static void load_photo_missing(pipe_ctx *c) {
    if (c->photo_missing_loaded) return;
    c->photo_missing_loaded = 1;
    if (cdb_db_photos_missing(c->rdb, 0, &c->photo_missing, &c->n_photo_missing) != CDB_OK)
        c->n_photo_missing = 0; /* shown, not vital: the next reindex tries again */
}

static int needs_photo(pipe_ctx *c, const cdb_db_file *f) {
    if (c->o->secondary) return 0;
    load_photo_missing(c);
    int64_t lo = 0, hi = c->n_photo_missing;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (c->photo_missing[mid] < f->id) lo = mid + 1;
        else hi = mid;
    }
    return lo < c->n_photo_missing && c->photo_missing[lo] == f->id;
}

/* The walker's read snapshot: taken at the start of a walk, renewed every SNAPSHOT_FILES
** files met, let go at its end. Staleness is harmless: the walker meets each path once
** per pass, and the rows written meanwhile are those of files it has already met (the
** jobs it queued), which the writer handles with its own, current reads. Without a
** snapshot (it could not be taken) each statement reads on its own, as before. */
static void snapshot_renew(pipe_ctx *c) {
    c->n_snapshot = 0;
    if (cdb_db_read_begin(c->rdb) != CDB_OK) cdb_clearerr();
}

/* ---- the merge join: a folder's rows read once, its files found among them ---------------- */

/* A folder of the walk whose rows are read: the walk is depth-first, so the folders met
** and not yet left are the path from the root to the current one, each listing kept
** until the walk leaves its folder (it comes back to a folder after each subfolder). */
struct scan_level {
    char *dir;            /* relative to the root, "" for the root's own folder */
    size_t len;
    cdb_db_folder *rows;
};

static void levels_pop_to(pipe_ctx *c, int n) {
    while (c->n_levels > n) {
        struct scan_level *l = &c->levels[--c->n_levels];
        free(l->dir);
        cdb_db_folder_free(l->rows);
    }
}

/* 1 when folder l is the folder dir (dl bytes) or one above it. */
static int level_holds(const struct scan_level *l, const char *dir, size_t dl) {
    if (l->len == 0) return 1;
    return l->len <= dl && !memcmp(l->dir, dir, l->len) && (l->len == dl || dir[l->len] == '/');
}

/* The row recorded at relpath in the current target (*out NULL: none), from its folder's
** listing: read when the walk first meets a file of the folder. */
static cdb_status folder_row(pipe_ctx *c, const char *relpath, const cdb_db_folder_row **out) {
    const char *slash = strrchr(relpath, '/');
    size_t dl = slash ? (size_t)(slash - relpath) : 0;
    struct scan_level *l;
    cdb_status rc;
    *out = NULL;
    while (c->n_levels > 0 && !level_holds(&c->levels[c->n_levels - 1], relpath, dl))
        levels_pop_to(c, c->n_levels - 1);
    l = c->n_levels ? &c->levels[c->n_levels - 1] : NULL;
    if (!l || l->len != dl) {
        if (c->n_levels == c->cap_levels) {
            int nc = c->cap_levels ? c->cap_levels * 2 : 16;
            struct scan_level *nl = realloc(c->levels, sizeof *nl * (size_t)nc);
            if (!nl) return cdb_seterr(CDB_NOMEM, "out of memory");
            c->levels = nl;
            c->cap_levels = nc;
        }
        l = &c->levels[c->n_levels];
        memset(l, 0, sizeof *l);
        if (!(l->dir = strndup(relpath, dl))) return cdb_seterr(CDB_NOMEM, "out of memory");
        l->len = dl;
        rc = cdb_db_folder_read(c->rdb, c->targets[c->cur].root_id, l->dir, c->model_id,
                                thumb_px(c), &l->rows);
        if (rc != CDB_OK) {
            free(l->dir);
            return rc;
        }
        c->n_levels++;
    }
    *out = cdb_db_folder_find(l->rows, slash ? slash + 1 : relpath);
    return CDB_OK;
}

/* The row recorded at e's path (*recorded 0: none; f holds only its numbers: no strings)
** and what to do with the file (*ch). *thumb: whether its thumbnail is current (1, 0), or
** -1 when not known yet. During a walk, from the folder's listing; else one lookup. */
static cdb_status look_up(pipe_ctx *c, const eng_walk_entry *e, const cdb_db_file_meta *st,
                          cdb_db_change *ch, cdb_db_file *f, int *recorded, int *thumb) {
    cdb_status rc;
    *thumb = -1;
    if (c->in_walk) {
        const cdb_db_folder_row *r = NULL;
        memset(f, 0, sizeof *f);
        if ((rc = folder_row(c, e->relpath, &r)) != CDB_OK) return rc;
        *ch = cdb_db_change_of(r ? &r->f : NULL, r && r->has_vector, st);
        *recorded = r != NULL;
        if (r) {
            *f = r->f;
            f->relpath = f->error = NULL;
            *thumb = r->thumb_current;
        }
        return CDB_OK;
    }
    rc = cdb_db_classify(c->rdb, c->model_id, c->targets[c->cur].root_id, e->relpath, st, ch, f);
    *recorded = f->relpath != NULL;
    cdb_db_file_clear(f);
    return rc;
}

/* What to do with a file the walk met, from its catalog row (if any). Returns the
** job to queue, NULL to skip it (*stop set when the run must stop). */
static job *classify(pipe_ctx *c, const eng_walk_entry *e, int *stop) {
    const eng_target *t = &c->targets[c->cur];
    cdb_db_file_meta st;
    cdb_db_file f;
    cdb_db_change ch;
    int recorded = 0, thumb = -1;
    job *j;
    memset(&st, 0, sizeof st);
    st.size = e->size;
    st.mtime_ns = e->mtime_ns;
    st.ctime_ns = e->ctime_ns;
    st.dev = e->dev;
    st.ino = e->ino;
    if (c->in_walk && ++c->n_snapshot >= SNAPSHOT_FILES) snapshot_renew(c);
    cdb_status rc = look_up(c, e, &st, &ch, &f, &recorded, &thumb);
    if (rc != CDB_OK) {
        cdb_pipe_fatal(c, rc, "catalog lookup failed (%s)", cdb_errmsg());
        *stop = 1;
        return NULL;
    }
    if (recorded) cdb_scan_mark_seen(c, f.id);
    int reencode = t->reencode || c->o->reencode;
    int skip = !c->o->full && !reencode &&
               (ch == CDB_DB_CHANGE_SAME || (ch == CDB_DB_CHANGE_QUARANTINED && !t->named));
    int want_thumb = skip && ch == CDB_DB_CHANGE_SAME && needs_thumb(c, &f, thumb);
    int want_photo = skip && ch == CDB_DB_CHANGE_SAME && needs_photo(c, &f);
    if (skip && !want_thumb && !want_photo) {
        c->sum->unchanged++;
        atomic_fetch_add(&c->n_done, 1);
        cdb_pipe_tick(c);
        return NULL;
    }
    if (!(j = calloc(1, sizeof *j)) || !(j->relpath = strdup(e->relpath)) ||
        !(j->path = strdup(e->path))) {
        cdb_job_free(j);
        cdb_pipe_fatal(c, CDB_NOMEM, "out of memory");
        *stop = 1;
        return NULL;
    }
    j->root_id = t->root_id;
    j->no_exif = t->no_exif;
    j->meta = st;
    if (skip) { /* unchanged, counted so; only its thumbnail or metadata (pipeline.c) */
        c->sum->unchanged++;
        j->thumb_only = 1;
        j->want_thumb = want_thumb;
        j->want_photo = want_photo;
        j->file_id = f.id;
        memcpy(j->old_hash, f.meta.hash, CDB_DB_HASH_BYTES);
        return j;
    }
    if (recorded) {
        int ok = f.state == CDB_DB_OK;
        j->file_id = f.id;
        j->was_ok = ok;
        j->was_pending = f.state == CDB_DB_PENDING;
        j->for_model = ch == CDB_DB_CHANGE_NEEDS_VECTOR;
        /* a transient failure keeps such a row as it is: its size, mtime and inode say
        ** the content is what was stored (a chmod changes the ctime only) */
        j->row_current = ok && f.meta.size == st.size && f.meta.mtime_ns == st.mtime_ns &&
                         (!f.meta.ino || (f.meta.ino == st.ino && f.meta.dev == st.dev));
        /* same content as the stored ok row -> metadata only; with --full the
        ** content is re-checked but an identical hash still keeps the vector */
        if (ok && f.meta.has_hash && !j->for_model && !reencode) {
            j->has_old_hash = 1;
            memcpy(j->old_hash, f.meta.hash, CDB_DB_HASH_BYTES);
        }
        if (ch == CDB_DB_CHANGE_RESTAT && !c->o->full && !reencode) { /* the identity, unread */
            j->kind = R_TOUCH;
            st.has_hash = f.meta.has_hash;
            memcpy(st.hash, f.meta.hash, CDB_DB_HASH_BYTES);
            st.width = f.meta.width;
            st.height = f.meta.height;
            j->meta = st;
        }
    }
    j->sniff = !cdb_image_name_is_image(e->relpath[0] ? e->relpath : t->path) &&
               !(recorded && f.state != CDB_DB_DELETED);
    return j;
}

/* 1 when the file at relpath of target t is not this run's share of a partition
** (ingest --part I/N): such a file is neither stored nor judged here. */
static int not_ours(const pipe_ctx *c, const eng_target *t, const char *relpath) {
    int n = c->o->part_count;
    return n > 1 && cdb_db_part_of(t->path, relpath, n) != c->o->part_index;
}

static int on_entry(const eng_walk_entry *e, walk_ud *ud) {
    pipe_ctx *c = ud->c;
    int stop = 0;
    job *j;
    if (cdb_pipe_stopping(c)) return 1;
    if (!e->error && not_ours(c, &c->targets[c->cur], e->relpath)) return 0;
    if (e->error) {
        char why[300];
        char *full = cdb_db_path_join(c->targets[c->cur].path, e->relpath);
        snprintf(why, sizeof why, "%s (%s)", e->error, strerror(e->err));
        warn(c, "%s: %s", full ? full : e->relpath, why);
        add_problem(c, e->relpath, why, !e->dangling);
        cdb_free(full);
        return 0;
    }
    atomic_fetch_add(&c->n_found, 1);
    c->ts[c->cur].n_found++;
    if (!(j = classify(c, e, &stop))) return stop;
    int64_t t0 = cdb_now_ns();
    if (cdb_eng_queue_push(c->q1, j) != 0) {
        cdb_job_free(j);
        return 1;
    }
    c->ns_walk_blocked += cdb_now_ns() - t0; /* readers busy: not walking */
    cdb_pipe_tick(c);
    return 0;
}

static int on_walk(const eng_walk_entry *e, void *ud_) {
    walk_ud *ud = ud_;
    eng_walk_entry e2;
    int rc;
    if (!ud->prefix) return on_entry(e, ud);
    e2 = *e; /* relative to the root, not to the part walked: the prefix goes first */
    if (!(e2.relpath = cdb_db_path_join(ud->prefix, e->relpath[0] ? e->relpath : NULL))) {
        cdb_pipe_fatal(ud->c, CDB_NOMEM, "out of memory");
        return 1;
    }
    rc = on_entry(&e2, ud);
    cdb_free((char *)e2.relpath);
    return rc;
}

static int link_covered(const char *path, void *ud) {
    return cdb_eng_library_covers(((pipe_ctx *)ud)->lib, path);
}

/* One file: a file root, or a file named inside a folder root. */
static void walk_one_file(pipe_ctx *c, const char *full, const char *relpath) {
    walk_ud ud = {c, NULL};
    struct stat sb;
    eng_walk_entry e;
    memset(&e, 0, sizeof e);
    e.relpath = relpath;
    e.path = full;
    if (stat(full, &sb) != 0) {
        e.error = "cannot stat";
        e.err = errno;
    } else if (!S_ISREG(sb.st_mode)) {
        e.error = "not a regular file";
        e.err = EINVAL;
    } else {
        e.size = (int64_t)sb.st_size;
        e.mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
        e.ctime_ns = (int64_t)sb.st_ctim.tv_sec * 1000000000LL + sb.st_ctim.tv_nsec;
        e.dev = (uint64_t)sb.st_dev;
        e.ino = (uint64_t)sb.st_ino;
    }
    c->ts[c->cur].walked = e.error == NULL;
    on_entry(&e, &ud);
}

/* The folder a target walks: the root, or the part of it the user named. */
static char *target_base(const eng_target *t) {
    return cdb_db_path_join(t->path, t->sub);
}

/* The root's stored rules (db.h: --exclude, forgotten subfolders) as a rule set, NULL
** when it has none. A failure stops the run (walking without them would take in what
** the user left out). */
static cdb_status load_rules(pipe_ctx *c, int64_t root_id, cdb_ignore **out) {
    cdb_db_exclude *v = NULL;
    int n = 0;
    cdb_status rc = cdb_db_root_excludes(c->rdb, root_id, &v, &n);
    *out = NULL;
    if (rc == CDB_OK && n > 0 && (rc = cdb_ignore_new(out)) == CDB_OK)
        for (int i = 0; i < n && rc == CDB_OK; i++)
            rc = cdb_ignore_add(*out, v[i].base, v[i].pattern, strlen(v[i].pattern));
    cdb_db_excludes_free(v, n);
    if (rc != CDB_OK) {
        cdb_ignore_free(*out);
        *out = NULL;
        cdb_pipe_fatal(c, rc, "%s", cdb_errmsg());
    }
    return rc;
}

/* eng_walk_opts.on_ignore_file: kept in the target's state for cdb_scan_finish. */
static void on_ignore_file(const char *rel, void *ud) {
    pipe_ctx *c = ud;
    target_state *t = &c->ts[c->cur];
    if (c->o->secondary) return;
    if (t->n_ignores == t->cap_ignores) {
        int nc = t->cap_ignores ? t->cap_ignores * 2 : 8;
        char **p = realloc(t->ignores, sizeof *p * (size_t)nc);
        if (!p) {
            t->ignores_oom = 1;
            return;
        }
        t->ignores = p;
        t->cap_ignores = nc;
    }
    if (!(t->ignores[t->n_ignores] = strdup(rel))) t->ignores_oom = 1;
    else t->n_ignores++;
}

static void walk_target(pipe_ctx *c) {
    const eng_target *t = &c->targets[c->cur];
    const eng_root *r = cdb_eng_library_root(c->lib, t->root_id);
    char *base;
    if (r && r->foreign) {
        int64_t live = 0;
        cdb_db_root_count_live(c->rdb, t->root_id, &live);
        c->sum->missing_roots++;
        warn(c, "%s is not the folder that was recorded (an empty mount point, another drive "
                "mounted there, or a folder made anew); its %lld file%s kept as %s. If the "
                "folder there now is the right one, run 'clipdb reindex --accept-root %s'",
             t->path, (long long)live, live == 1 ? " is" : "s are", live == 1 ? "it is" : "they are",
             t->path);
        add_problem(c, "", "unavailable: not the folder recorded (not mounted?)", 1);
        return;
    }
    if (r && !r->present) {
        int64_t live = 1;
        struct stat sb;
        char parent[4096];
        snprintf(parent, sizeof parent, "%s", t->path);
        if (strrchr(parent, '/')) *strrchr(parent, '/') = '\0';
        cdb_db_root_count_live(c->rdb, t->root_id, &live);
        c->sum->missing_roots++;
        if (live == 0)
            warn(c, "%s is missing and holds no recorded file: 'clipdb forget %s' stops "
                    "checking it", t->path, t->path);
        else if (t->kind == CDB_DB_ROOT_FILE && lstat(parent, &sb) == 0)
            warn(c, "%s is gone (deleted, or moved out of the folders clipdb knows); its vector is "
                    "kept until 'clipdb forget %s'", t->path, t->path);
        else
            warn(c, "%s is missing%s; its %lld file%s kept as %s (run 'clipdb move' if it "
                    "moved, 'clipdb forget' if it is gone for good)",
                 t->path, r->dev_recorded ? " (not mounted?)" : "", (long long)live,
                 live == 1 ? " is" : "s are", live == 1 ? "it is" : "they are");
        add_problem(c, "", "missing: not mounted, moved or deleted", 1);
        return;
    }
    if (!(base = target_base(t))) {
        cdb_pipe_fatal(c, CDB_NOMEM, "out of memory");
        return;
    }
    if (t->kind == CDB_DB_ROOT_FILE || t->sub_is_file) {
        walk_one_file(c, base, t->sub ? t->sub : "");
    } else {
        walk_ud ud = {c, t->sub};
        cdb_ignore *rules = NULL;
        if (load_rules(c, t->root_id, &rules) != CDB_OK) {
            free(base);
            return;
        }
        eng_walk_opts wo = {t->follow_symlinks, c->db_dir, link_covered, c, c->walked_dirs,
                            c->walked_files, rules, t->sub, on_ignore_file, c};
        eng_walk_stats ws;
        int w;
        if (!c->o->secondary) load_photo_missing(c); /* its own read, before the snapshot */
        c->in_walk = 1;
        snapshot_renew(c);
        w = cdb_eng_walk(base, &wo, on_walk, &ud, &ws);
        c->in_walk = 0;
        levels_pop_to(c, 0); /* the next target has rows of its own */
        cdb_db_read_end(c->rdb);
        cdb_ignore_free(rules);
        if (w == 2) { /* recorded before ingest refused such folders */
            const char *why = "inside the database's own folder: not scanned";
            warn(c, "%s: %s; its files are kept as they are", base, why);
            add_problem(c, t->sub ? t->sub : "", why, 1);
        } else if (w < 0) {
            char why[300];
            snprintf(why, sizeof why, "cannot read the folder (%s)", strerror(errno));
            warn(c, "%s: %s; its files are kept as they are", base, why);
            add_problem(c, t->sub ? t->sub : "", why, 1);
        } else {
            c->ts[c->cur].n_met = ws.n_files + (ws.n_dirs - 1) /* not the root */ +
                                  ws.n_links_skipped + ws.n_loops +
                                  ws.n_special + ws.n_errors + ws.n_links_covered +
                                  ws.n_same_file + ws.n_excluded;
            c->sum->links_skipped += ws.n_links_skipped;
            c->sum->links_covered += ws.n_links_covered;
            c->sum->loops += ws.n_loops;
            c->ts[c->cur].walked = w == 0 && !cdb_pipe_stopping(c);
        }
    }
    free(base);
}

void cdb_scan_walk_all(pipe_ctx *c) {
    for (c->cur = 0; c->cur < c->n_targets && !cdb_pipe_stopping(c); c->cur++) walk_target(c);
}

/* ---- pre-count (only for a live progress line: gives done/total and an ETA) ---- */

typedef struct count_ud {
    const pipe_ctx *c;
    const eng_target *t;
    int64_t n;
} count_ud;

/* Counts a file of this run's share (of a partition: its relpath from the root). */
static int count_one(const eng_walk_entry *e, void *ud_) {
    count_ud *ud = ud_;
    if (!e->error) {
        char *rel = ud->t->sub ? cdb_db_path_join(ud->t->sub, e->relpath[0] ? e->relpath : NULL)
                               : NULL;
        ud->n += !not_ours(ud->c, ud->t, rel ? rel : e->relpath);
        cdb_free(rel);
    }
    return cdb_eng_should_stop(ud->c->ev);
}

int64_t cdb_scan_count_files(const pipe_ctx *c) {
    count_ud ud = {c, NULL, 0};
    for (int i = 0; i < c->n_targets && !cdb_eng_should_stop(c->ev); i++) {
        const eng_target *t = ud.t = &c->targets[i];
        eng_walk_opts wo = {t->follow_symlinks, c->db_dir, link_covered, (void *)c, NULL, NULL,
                            NULL, t->sub, NULL, NULL}; /* a count: .clipdbignore files, no
                                                          ** stored rules */
        eng_walk_stats ws;
        char *base;
        if (t->kind == CDB_DB_ROOT_FILE || t->sub_is_file) {
            ud.n += !not_ours(c, t, t->sub ? t->sub : "");
            continue;
        }
        if (!(base = target_base(t))) break;
        cdb_eng_walk(base, &wo, count_one, &ud, &ws);
        free(base);
    }
    return ud.n;
}

/* ---- the deletion pass ------------------------------------------------------------------- */

typedef struct del_ud {
    pipe_ctx *c;
    const eng_target *t;
    const target_state *ts;
    int64_t *ids;
    int n, cap;
    int64_t unreachable;
    int n_legacy; /* gone rows recorded without a device: nothing tells a mount point */
    int oom;
    cdb_status rc; /* a row that could not be read */
} del_ud;

/* 1 when relpath lies in a folder the walk reported it could not read (or is a file
** it could not stat): a problem that shields its rows (add_problem). */
static int under_problem(const target_state *ts, const char *relpath) {
    for (int i = 0; i < ts->n_probs; i++) {
        if (!ts->shields[i]) continue;
        const char *p = ts->probs[i].relpath;
        size_t n = strlen(p);
        if (!n || (!strncmp(relpath, p, n) && (relpath[n] == '/' || relpath[n] == '\0'))) return 1;
    }
    return 0;
}

static int in_target(const eng_target *t, const char *relpath) {
    size_t pl;
    if (!t->sub) return 1;
    pl = strlen(t->sub);
    return !strncmp(relpath, t->sub, pl) && (relpath[pl] == '/' || relpath[pl] == '\0');
}

/* 1 when f's file (its content and identity) was met by this run under another name: f
** was reached through a link (its identity is the target's, possibly on another
** filesystem than the link's folder, so the device test of cdb_eng_library_gone cannot
** judge it) and that name is gone. An unmounted drive's files are not met, so this never
** takes them for deleted. */
static int met_under_another_name(pipe_ctx *c, const cdb_db_file *f) {
    int64_t ids[16];
    int n = 0, met = 0;
    if (!f->meta.has_hash || !f->meta.dev || !f->meta.ino ||
        cdb_db_files_by_hash(c->db, 0, f->meta.hash, ids, 16, &n) != CDB_OK)
        return 0;
    for (int i = 0; i < n && i < 16 && !met; i++) {
        cdb_db_file g;
        if (ids[i] == f->id || (ids[i] <= c->max_id_before && !was_seen(c, ids[i]))) continue;
        if (cdb_db_file_get(c->db, ids[i], &g) != CDB_OK) continue;
        met = g.meta.dev == f->meta.dev && g.meta.ino == f->meta.ino;
        cdb_db_file_clear(&g);
    }
    cdb_clearerr();
    return met;
}

static int on_known(const cdb_db_file *f, void *ud_) {
    del_ud *d = ud_;
    struct stat st;
    char *path;
    int drop;
    if (!in_target(d->t, f->relpath) || under_problem(d->ts, f->relpath) ||
        not_ours(d->c, d->t, f->relpath))
        return 0;
    if (!(path = cdb_db_path_join(d->t->path, f->relpath))) return d->oom = 1;
    int there = lstat(path, &st) == 0, err = errno;
    int absent = !there && (err == ENOENT || err == ENOTDIR);
    if (there) {
        drop = 1; /* there, but the walk did not meet it: no longer in scope */
    } else if (cdb_eng_library_gone(d->c->lib, f->root_id, path, f->meta.dev)) {
        drop = 1;
        d->n_legacy += f->meta.dev == 0;
    } else if (absent && met_under_another_name(d->c, f)) {
        drop = 1; /* a link to a file this walk met by its own name */
    } else {
        drop = 0;
        if (absent) d->unreachable++; /* not mounted */
    }
    cdb_free(path);
    if (!drop) return 0;
    if (d->n == d->cap) {
        int nc = d->cap ? d->cap * 2 : 256;
        int64_t *p = realloc(d->ids, sizeof *p * (size_t)nc);
        if (!p) return d->oom = 1;
        d->ids = p;
        d->cap = nc;
    }
    d->ids[d->n++] = f->id;
    return 0;
}

/* Each id of the target's root: the rows the walk did not meet, read one by one (a
** rescan meets nearly all of them: only their ids are read), go to on_known unless deleted
** already or created by this run. */
static int on_id(int64_t id, void *ud_) {
    del_ud *d = ud_;
    cdb_db_file f;
    int stop = 0;
    if (id > d->c->max_id_before || was_seen(d->c, id)) return 0;
    if ((d->rc = cdb_db_file_get(d->c->db, id, &f)) != CDB_OK) return 1;
    if (f.state != CDB_DB_DELETED) stop = on_known(&f, d);
    cdb_db_file_clear(&f);
    return stop;
}

/* Marks deleted what target i no longer has (cdb_eng_library_gone decides for each
** row). A whole folder root whose walk met nothing visible at all (no file, folder,
** link or other entry) while files are recorded there is *empty*: what an unmounted drive or a missing network share looks like
** (and, for rows from before schema 5, the only evidence left), so nothing is marked
** deleted and a warning says why, unless the user accepted the folder as it is
** (reindex --accept-root) or forgets the root. */
static cdb_status delete_gone(pipe_ctx *c, int i, const char **status) {
    const eng_target *t = &c->targets[i];
    const eng_root *r = cdb_eng_library_root(c->lib, t->root_id);
    del_ud d = {c, t, &c->ts[i], NULL, 0, 0, 0, 0, 0, CDB_OK};
    cdb_db_batch *b = NULL;
    cdb_status rc = cdb_db_root_file_ids(c->db, t->root_id, on_id, &d);
    if (rc == CDB_OK) rc = d.rc;
    if (rc == CDB_OK && d.oom) rc = cdb_seterr(CDB_NOMEM, "out of memory");
    if (rc == CDB_OK && d.n && c->ts[i].n_met == 0 && t->kind == CDB_DB_ROOT_FOLDER &&
        (!t->sub || d.n_legacy) && !(r && r->accepted)) {
        char *base = target_base(t);
        c->cur = i;
        warn(c, "%s is empty now; its %d recorded file%s kept as %s (not mounted?). If it was "
                "emptied on purpose, run 'clipdb reindex --accept-root %s' (or 'clipdb forget')",
             base ? base : t->path, d.n, d.n == 1 ? " is" : "s are", d.n == 1 ? "it is" : "they are",
             t->path);
        add_problem(c, t->sub ? t->sub : "", "empty: no file found where files were recorded", 1);
        free(base);
        *status = "empty";
        if (!t->sub) c->sum->missing_roots++;
        d.n = 0;
    }
    if (rc == CDB_OK && d.unreachable) {
        c->cur = i;
        warn(c, "%s: %lld recorded file%s on a drive or share that is not mounted; kept as %s",
             t->path, (long long)d.unreachable, d.unreachable == 1 ? " is" : "s are",
             d.unreachable == 1 ? "it is" : "they are");
        add_problem(c, t->sub ? t->sub : "", "some files are on a drive that is not mounted", 1);
        c->sum->unreachable += d.unreachable;
    }
    if (rc == CDB_OK && d.n) rc = cdb_db_batch_new(c->db, c->model_id, &b);
    for (int k = 0; rc == CDB_OK && k < d.n; k++) {
        rc = cdb_db_batch_delete(b, d.ids[k]);
        if (rc == CDB_OK && cdb_db_batch_count(b) >= DEL_COMMIT_EVERY)
            rc = cdb_db_batch_commit(b, NULL);
    }
    if (rc == CDB_OK && b) rc = cdb_db_batch_commit(b, NULL);
    if (rc == CDB_OK) c->sum->deleted += d.n;
    cdb_db_batch_free(b);
    free(d.ids);
    return rc;
}

/* ---- after the walk ------------------------------------------------------------------------- */

/* A missing root, or one whose folder is not the recorded one (foreign): its files
** stay as they are and it is listed as missing or unavailable. Never
** dropped on its own, not even when all its files turned up elsewhere (a renamed
** folder, or copies made before a drive was unplugged): only `clipdb forget` does. */
static cdb_status finish_missing(pipe_ctx *c, int i) {
    const eng_target *t = &c->targets[i];
    const eng_root *r = cdb_eng_library_root(c->lib, t->root_id);
    cdb_status rc = cdb_db_walk_problems_set(c->db, t->root_id, NULL, c->ts[i].probs,
                                             c->ts[i].n_probs);
    if (rc == CDB_OK)
        rc = cdb_db_root_set_scan(c->db, t->root_id, 0, NULL,
                                  r && r->foreign ? "unavailable" : "missing");
    return rc;
}

static cdb_status finish_target(pipe_ctx *c, int i) {
    const eng_target *t = &c->targets[i];
    const eng_root *r = cdb_eng_library_root(c->lib, t->root_id);
    const char *status = "ok";
    cdb_status rc = CDB_OK;
    if (r && !r->present) return finish_missing(c, i);
    if (c->ts[i].walked) rc = delete_gone(c, i, &status);
    else status = "unreadable";
    /* a partial scan replaces the problems under its part of the root only */
    if (rc == CDB_OK)
        rc = cdb_db_walk_problems_set(c->db, t->root_id, t->sub, c->ts[i].probs, c->ts[i].n_probs);
    /* and the .clipdbignore files recorded at and below it (`folders`) */
    if (rc == CDB_OK && c->ts[i].walked && !c->ts[i].ignores_oom &&
        t->kind == CDB_DB_ROOT_FOLDER && !t->sub_is_file)
        rc = cdb_db_ignore_files_set(c->db, t->root_id, t->sub,
                                     (const char *const *)c->ts[i].ignores, c->ts[i].n_ignores);
    /* the folder's identity is recorded (anew) by a complete scan that found it */
    if (rc == CDB_OK && !t->sub)
        rc = cdb_db_root_set_scan(c->db, t->root_id, r ? r->dev_now : 0,
                                  r && r->kind == CDB_DB_ROOT_FOLDER && !strcmp(status, "ok")
                                      ? &r->ident_now
                                      : NULL,
                                  status);
    return rc;
}

cdb_status cdb_scan_finish(pipe_ctx *c) {
    cdb_status rc = CDB_OK;
    if (c->o->secondary) return CDB_OK;
    for (int i = 0; i < c->n_targets && rc == CDB_OK && !cdb_pipe_stopping(c); i++)
        rc = finish_target(c, i);
    if (rc != CDB_OK) cdb_pipe_fatal(c, rc, "cannot record what the scan found (%s)", cdb_errmsg());
    return rc;
}

void cdb_scan_free(pipe_ctx *c) {
    for (int i = 0; c->ts && i < c->n_targets; i++) {
        for (int k = 0; k < c->ts[i].n_probs; k++) {
            free((char *)c->ts[i].probs[k].relpath);
            free((char *)c->ts[i].probs[k].reason);
        }
        free(c->ts[i].probs);
        free(c->ts[i].shields);
        for (int k = 0; k < c->ts[i].n_ignores; k++) free(c->ts[i].ignores[k]);
        free(c->ts[i].ignores);
    }
    free(c->ts);
    c->ts = NULL;
    levels_pop_to(c, 0);
    free(c->levels);
    c->levels = NULL;
    c->cap_levels = 0;
}
