/*
** rowfile.c: the one way from a catalog row to a photo's bytes (DESIGN.md, "the
** filesystem boundary"). Every open of a recorded photo (the server's originals and
** /metadata, cdb_engine_file_get/_open, thumbnails made on the fly and backfilled,
** verify --deep and the repair after it) goes through cdb_eng_open_row: what it
** hands back is the file the catalog recorded, or an error, never other bytes.
**
** The walk: the root's recorded path is opened as a folder (it is the user's own
** setting, normalized by realpath when it was recorded, so it is trusted as it is),
** then each folder of the relative path with openat(O_PATH | O_DIRECTORY |
** O_NOFOLLOW), then the file with openat(O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
** O_CLOEXEC | O_NOCTTY). So a folder inside the root swapped for a symbolic link is
** refused as a changed file, as the photo itself swapped for one is, and no path is
** ever resolved twice (no window between a check and the open). It costs one openat
** per folder level, a few microseconds; comparing realpath() would cost as much and
** still leave a window. A root whose walks follow symbolic links (ingest
** --follow-symlinks) recorded photos through links, so there links are followed, and
** the identity check below is what keeps other bytes out.
**
** Before the open, the name is looked at (fstatat): anything but a regular file is
** refused without being opened, so opening a device node cannot start a driver's
** side effects (a tape rewinding, a watchdog arming). The open's own fstat is the
** authority: a regular file whose device, inode, size and mtime are the row's.
** ctime is not compared: a chmod or a new hard link changes it, not the bytes. Rows
** written before identities were recorded (schema < 5: dev and ino are 0) compare
** what they have, size and mtime, as cdb_db_same_stat does. O_NONBLOCK makes a FIFO
** that took a photo's place between the look and the open return at once (then
** refused by the fstat); it is cleared on the file handed back.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/library/library.h"

#define ROW_OPEN_FLAGS (O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)

static const char *kind_name(mode_t m) {
    if (S_ISLNK(m)) return "a symbolic link";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
    if (S_ISDIR(m)) return "a folder";
    return "not a regular file";
}

static eng_open_rc open_fail(eng_open_rc rc, char *why, size_t size, const char *fmt,
                             const char *a) {
    if (why && size) snprintf(why, size, fmt, a);
    return rc;
}

/* What an open's errno says: gone, something else there, or an error. */
static eng_open_rc errno_rc(int e, char *why, size_t size) {
    if (e == ENOENT || e == ENOTDIR)
        return open_fail(ENG_OPEN_GONE, why, size, "%s", "not there any more");
    if (e == ELOOP) return open_fail(ENG_OPEN_CHANGED, why, size, "%s", "a symbolic link now");
    if (e == ENXIO || e == ENODEV || e == ETXTBSY)
        return open_fail(ENG_OPEN_CHANGED, why, size, "%s", "not a regular file now");
    return open_fail(ENG_OPEN_ERROR, why, size, "%s", strerror(e));
}

/* dev, ino, size, mtime of st against the row's record (see the top of the file). */
static int same_identity(const cdb_db_file_meta *rec, const struct stat *st) {
    cdb_db_file_meta now;
    cdb_eng_stat_meta(st, &now);
    if (rec->size != now.size || rec->mtime_ns != now.mtime_ns) return 0;
    if (!rec->ino) return 1; /* no identity recorded (a row from before schema 5) */
    return rec->dev == now.dev && rec->ino == now.ino;
}

/* Opens folder `name` under dirfd as an O_PATH handle (following links or not).
** A missing folder is gone; a link or another kind of file where the folder was
** (ELOOP or ENOTDIR with something there) is a change. */
static eng_open_rc open_dir(int dirfd, const char *name, int follow, int *out, char *why,
                            size_t size) {
    int fd, e;
    struct stat st;
    do fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
    while (fd < 0 && errno == EINTR);
    if (fd >= 0) {
        *out = fd;
        return ENG_OPEN_OK;
    }
    e = errno;
    if ((e == ENOTDIR || e == ELOOP) &&
        fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        return open_fail(ENG_OPEN_CHANGED, why, size, "%s", "a folder above it is a symbolic link now");
    return errno_rc(e, why, size);
}

eng_open_rc cdb_eng_open_row(const eng_row_ref *ref, int *fd_out, struct stat *st_out, char *why,
                             size_t why_size) {
    char rel[4096];
    const char *name;
    int dirfd = AT_FDCWD, fd = -1, nf = ref->follow_symlinks ? 0 : O_NOFOLLOW;
    struct stat st;
    eng_open_rc rc = ENG_OPEN_OK;
    *fd_out = -1;
    if (why && why_size) why[0] = '\0';
    if (!ref->relpath || !*ref->relpath) { /* a file root: the root is the photo */
        name = ref->root;
    } else {
        char *p, *slash;
        if (snprintf(rel, sizeof rel, "%s", ref->relpath) >= (int)sizeof rel)
            return open_fail(ENG_OPEN_ERROR, why, why_size, "%s", "path too long");
        if ((rc = open_dir(AT_FDCWD, ref->root, 1, &dirfd, why, why_size)) != ENG_OPEN_OK)
            return rc == ENG_OPEN_CHANGED ? ENG_OPEN_GONE : rc; /* the root itself: not ours */
        for (p = rel; (slash = strchr(p, '/')); p = slash + 1) {
            int next;
            *slash = '\0';
            if (!*p || !strcmp(p, ".") || !strcmp(p, "..")) {
                rc = open_fail(ENG_OPEN_ERROR, why, why_size, "%s", "malformed recorded path");
                goto done;
            }
            rc = open_dir(dirfd, p, ref->follow_symlinks, &next, why, why_size);
            if (rc != ENG_OPEN_OK) goto done;
            close(dirfd);
            dirfd = next;
        }
        name = p;
    }
    /* a look first: nothing but a regular file is ever opened */
    if (fstatat(dirfd, name, &st, ref->follow_symlinks ? 0 : AT_SYMLINK_NOFOLLOW) != 0) {
        rc = errno_rc(errno, why, why_size);
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = open_fail(ENG_OPEN_CHANGED, why, why_size, "%s now", kind_name(st.st_mode));
        goto done;
    }
    do fd = openat(dirfd, name, ROW_OPEN_FLAGS | nf);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        rc = errno_rc(errno, why, why_size);
        goto done;
    }
    if (fstat(fd, &st) != 0) {
        rc = open_fail(ENG_OPEN_ERROR, why, why_size, "cannot stat: %s", strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        rc = open_fail(ENG_OPEN_CHANGED, why, why_size, "%s now", kind_name(st.st_mode));
    } else if (!same_identity(ref->rec, &st)) {
        rc = open_fail(ENG_OPEN_CHANGED, why, why_size, "%s",
                       "another file, or the file was modified");
    } else {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
            rc = open_fail(ENG_OPEN_ERROR, why, why_size, "fcntl: %s", strerror(errno));
    }
done:
    if (rc == ENG_OPEN_OK) {
        *fd_out = fd;
        if (st_out) *st_out = st;
    } else if (fd >= 0) {
        close(fd);
    }
    if (dirfd >= 0) close(dirfd);
    return rc;
}

cdb_status cdb_eng_open_file_id(cdb_db *db, int64_t id, cdb_db_file *f, char **path, int *fd,
                                struct stat *st) {
    cdb_db_root root;
    eng_row_ref ref;
    char why[200];
    eng_open_rc orc;
    cdb_status rc;
    memset(f, 0, sizeof *f);
    memset(&root, 0, sizeof root);
    *fd = -1;
    if (path) *path = NULL;
    rc = id > 0 ? cdb_db_file_get(db, id, f) : CDB_NOTFOUND;
    if (rc == CDB_OK && f->state != CDB_DB_OK) rc = CDB_NOTFOUND;
    if (rc == CDB_NOTFOUND) {
        rc = cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_UNKNOWN_ID, NULL, "no photo has the id %lld",
                           (long long)id);
        goto done;
    }
    if (rc != CDB_OK || (rc = cdb_db_root_info(db, f->root_id, &root)) != CDB_OK) {
        rc = cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "cannot look up the file %lld", (long long)id);
        goto done;
    }
    if (path && !(*path = cdb_db_path_join(root.path, f->relpath))) {
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
        goto done;
    }
    ref.root = root.path;
    ref.relpath = f->relpath;
    ref.follow_symlinks = root.follow_symlinks;
    ref.rec = &f->meta;
    orc = cdb_eng_open_row(&ref, fd, st, why, sizeof why);
    if (orc == ENG_OPEN_GONE)
        rc = cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_FILE_GONE, NULL,
                           "photo %lld is not where the catalog has it: moved or deleted since "
                           "the last scan (run `clipdb reindex`)",
                           (long long)id);
    else if (orc == ENG_OPEN_CHANGED)
        rc = cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_FILE_CHANGED, NULL,
                           "photo %lld changed since the last scan (%s): run `clipdb reindex`",
                           (long long)id, why);
    else if (orc != ENG_OPEN_OK)
        rc = cdb_eng_failw(CDB_IO, CDB_ENGINE_E_NONE, why, "cannot open photo %lld",
                           (long long)id);
done:
    if (rc != CDB_OK) {
        cdb_db_file_clear(f);
        if (path) {
            cdb_free(*path);
            *path = NULL;
        }
    }
    cdb_db_root_clear(&root);
    return rc;
}
