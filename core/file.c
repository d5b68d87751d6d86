/*
** file.c: creating temporaries and opening files in folders someone else may write to
** (core.h, "files clipdb writes beside others'"). The hostile case: a user who can
** write to a database or cache folder plants a link at the predictable temporary name
** of a write that root is about to make (it would truncate the link's target), or a FIFO
** where clipdb reads a cache or index (the open would block for ever).
*/
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

int cdb_tmp_create(const char *path, char *tmp, size_t size) {
    static atomic_uint counter;
    for (int tries = 0; tries < 64; tries++) {
        unsigned n = atomic_fetch_add(&counter, 1);
        int w = snprintf(tmp, size, "%s.tmp.%ld.%u", path, (long)getpid(), n);
        if (w < 0 || (size_t)w >= size) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1; /* 64 names taken: someone is filling them (errno EEXIST) */
}

long cdb_tmp_owner_pid(const char *after_tmp) {
    char *end;
    long pid = strtol(after_tmp, &end, 10);
    if (end == after_tmp || pid <= 0) return -1;
    if (*end == '.') {
        const char *n = end + 1;
        strtoul(n, &end, 10);
        if (end == n) return -1;
    }
    return *end ? -1 : pid;
}

int cdb_open_regular(const char *path, int extra_flags) {
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | extra_flags);
    if (fd < 0) return -1;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) { /* a FIFO, socket or device */
        close(fd);
        errno = EINVAL;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int cdb_dir_private(const char *dir) {
    struct stat st;
    return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
           !(st.st_mode & S_IWOTH) && (!(st.st_mode & S_IWGRP) || st.st_gid == getegid());
}
