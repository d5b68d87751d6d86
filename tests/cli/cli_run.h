/*
** cli_run.h: runs the built clipdb binary (CDB_BINARY_DIR "/clipdb") as a child
** process and captures its exit code, stdout and stderr, for the CLI tests. The
** child gets a clean environment for clipdb (CLIPDB_* unset, NO_COLOR=1) plus
** the "NAME=value" strings given.
*/
#ifndef CDB_TEST_CLI_RUN_H
#define CDB_TEST_CLI_RUN_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CDB_BINARY_DIR
#define CDB_BINARY_DIR "."
#endif
#define CLIPDB_BIN CDB_BINARY_DIR "/clipdb"

typedef struct cli_run_result {
    int exit_code; /* -signal when killed by a signal, -1000 when it could not run */
    char *out;     /* stdout, NUL-terminated (may contain NULs: see out_len) */
    size_t out_len;
    char *err;     /* stderr, NUL-terminated */
    size_t err_len;
    long max_rss_kb; /* the child's peak resident set (wait4's ru_maxrss), KiB */
} cli_run_result;

static inline void cli_run_free(cli_run_result *r) {
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

static inline void cli_run_append_(char **buf, size_t *len, const char *data, size_t n) {
    char *b = realloc(*buf, *len + n + 1);
    if (!b) return;
    memcpy(b + *len, data, n);
    *len += n;
    b[*len] = '\0';
    *buf = b;
}

/* args: NULL-terminated, without the program name. env: NULL-terminated extra
** "NAME=value" entries, or NULL. cwd: directory to run in, or NULL. */
/* In a forked child: replaces it with clipdb args... (at most 126 of them); _exit(127)
** when that fails. Never returns. */
static inline void cli_exec_(const char *const *args) {
    const char *argv[128];
    int n = 0;
    argv[n++] = CLIPDB_BIN;
    for (int i = 0; args[i] && n < 127; i++) argv[n++] = args[i];
    argv[n] = NULL;
    execv(CLIPDB_BIN, (char *const *)argv);
    _exit(127);
}

static inline int cli_run_in(const char *cwd, const char *const *args, const char *const *env,
                             cli_run_result *r) {
    int po[2], pe[2], status = 0;
    pid_t pid;
    memset(r, 0, sizeof *r);
    r->out = calloc(1, 1);
    r->err = calloc(1, 1);
    if (pipe(po) || pipe(pe)) return r->exit_code = -1000;
    pid = fork();
    if (pid < 0) return r->exit_code = -1000;
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
        if (cwd && chdir(cwd) != 0) _exit(127);
        unsetenv("CLIPDB_DB");
        unsetenv("CLIPDB_MODEL");
        unsetenv("CLIPDB_DEVICE");
        unsetenv("CLIPDB_LOG");
        setenv("NO_COLOR", "1", 1);
        for (int i = 0; env && env[i]; i++) putenv((char *)env[i]);
        cli_exec_(args);
    }
    close(po[1]);
    close(pe[1]);
    {
        struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
        int open_ = 2;
        char buf[65536];
        while (open_ > 0) {
            if (poll(fds, 2, -1) < 0) {
                if (errno == EINTR) continue;
                break;
            }
            for (int i = 0; i < 2; i++) {
                ssize_t k;
                if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                k = read(fds[i].fd, buf, sizeof buf);
                if (k <= 0) {
                    close(fds[i].fd);
                    fds[i].fd = -1;
                    open_--;
                } else if (i == 0) {
                    cli_run_append_(&r->out, &r->out_len, buf, (size_t)k);
                } else {
                    cli_run_append_(&r->err, &r->err_len, buf, (size_t)k);
                }
            }
        }
    }
    {
        struct rusage ru;
        memset(&ru, 0, sizeof ru);
        wait4(pid, &status, 0, &ru);
        r->max_rss_kb = ru.ru_maxrss;
    }
    if (WIFEXITED(status)) r->exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) r->exit_code = -WTERMSIG(status);
    else r->exit_code = -1000;
    return r->exit_code;
}

static inline int cli_run(const char *const *args, cli_run_result *r) {
    return cli_run_in(NULL, args, NULL, r);
}

/* Starts clipdb in the background with stdout/stderr going to out_path/err_path.
** Returns the pid, or -1. Reap it with cli_wait(). */
static inline pid_t cli_spawn(const char *const *args, const char *out_path, const char *err_path) {
    pid_t pid = fork();
    if (pid == 0) {
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644),
            fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0) _exit(127);
        dup2(fo, 1);
        dup2(fe, 2);
        unsetenv("CLIPDB_DB");
        unsetenv("CLIPDB_MODEL");
        setenv("NO_COLOR", "1", 1);
        cli_exec_(args);
    }
    return pid;
}

/* Waits for pid; its exit code, -signal, or -1000. */
static inline int cli_wait(pid_t pid) {
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) return -1000;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return -WTERMSIG(status);
    return -1000;
}

static inline char *cli_read_file(const char *path, size_t *len);

/* Runs `sh -c CMD` with $CLIPDB naming the binary and $DB the database db (CLIPDB_*
** unset, NO_COLOR=1); stdout and stderr go through tmp/sh.out and tmp/sh.err into
** *out and *err (heap; each may be NULL). CMD must not hold a single quote. Returns
** the exit status, -1 when killed. */
static inline int cli_sh(const char *tmp, const char *db, const char *cmd, char **out,
                         char **err) {
    char line[8192], po[800], pe[800];
    int st;
    snprintf(po, sizeof po, "%s/sh.out", tmp);
    snprintf(pe, sizeof pe, "%s/sh.err", tmp);
    snprintf(line, sizeof line,
             "env -u CLIPDB_DB -u CLIPDB_MODEL -u CLIPDB_LOG_TIME NO_COLOR=1 CLIPDB='%s' "
             "DB='%s' sh -c '%s' >'%s' 2>'%s'",
             CLIPDB_BIN, db, cmd, po, pe);
    st = system(line);
    if (out) *out = cli_read_file(po, NULL);
    if (err) *err = cli_read_file(pe, NULL);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* cli_sh, for a command that fails: 0 when it exits want and its stderr says says; else
** 1, with what it said shown. */
static inline int cli_sh_err(const char *tmp, const char *db, const char *cmd, int want,
                             const char *says) {
    char *err = NULL;
    int rc = cli_sh(tmp, db, cmd, NULL, &err);
    int bad = rc != want || !err || !strstr(err, says);
    if (bad)
        fprintf(stderr, "    %s: exit %d (want %d), no \"%s\" in:\n%s", cmd, rc, want, says, err);
    free(err);
    return bad;
}

/* Reads a whole file; NULL if it cannot. *len may be NULL. */
static inline char *cli_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0;
    char chunk[65536];
    size_t k;
    if (!f) return NULL;
    buf = calloc(1, 1);
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) cli_run_append_(&buf, &n, chunk, k);
    fclose(f);
    if (len) *len = n;
    return buf;
}

/* Where CLI_PATHS puts a path: buf (size bytes) gets dir/rel. */
typedef struct cli_dest {
    char *buf;
    size_t size;
    const char *rel;
} cli_dest;
#define CLI_AT(buf, rel) {(buf), sizeof(buf), (rel)}

static inline void cli_paths_(const char *dir, const cli_dest *d) {
    for (; d->buf; d++)
        if ((size_t)snprintf(d->buf, d->size, "%s/%s", dir, d->rel) >= d->size) d->buf[0] = '\0';
}
/* Paths in one folder:
**   CLI_PATHS(tmp, CLI_AT(lib, "photos"), CLI_AT(db, "db"));  (char lib[N], db[M])
** sets lib to tmp/photos and db to tmp/db (a path that does not fit: empty). */
#define CLI_PATHS(dir, ...) cli_paths_((dir), (const cli_dest[]){__VA_ARGS__, {0}})

/* Writes n bytes of data to path (created or emptied); 0, or -1. */
static inline int cli_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Copies the file at from to to; 0, or -1. */
static inline int cli_copy_file(const char *from, const char *to) {
    size_t n = 0;
    char *b = cli_read_file(from, &n);
    int rc = b ? cli_write_file(to, b, n) : -1;
    free(b);
    return rc;
}

/* A fresh empty directory under $TMPDIR (or /tmp); the path is static per call. */
static inline const char *cli_tmpdir(char *buf, size_t size) {
    const char *t = getenv("TMPDIR");
    snprintf(buf, size, "%s/clipdb-test-XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(buf);
}

/* The model the end-to-end tests use: $CLIPDB_TEST_MODEL, else the first
** models/<name>/ with a model.safetensors; NULL when there is none (tests skip). */
static inline const char *cli_find_model(void) {
    static char g_model[4096];
    const char *env = getenv("CLIPDB_TEST_MODEL");
    char dir[1024];
    DIR *d;
    struct dirent *e;
    if (env && *env) return env;
    snprintf(dir, sizeof dir, "%s/models", CDB_SOURCE_DIR);
    if (!(d = opendir(dir))) return NULL;
    while ((e = readdir(d))) {
        char p[4096];
        FILE *f;
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s/model.safetensors", dir, e->d_name);
        if ((f = fopen(p, "rb"))) {
            fclose(f);
            snprintf(g_model, sizeof g_model, "%s/%s", dir, e->d_name);
            closedir(d);
            return g_model;
        }
    }
    closedir(d);
    return NULL;
}

/* A new database at db with model, holding lib: `init` then `ingest`. 0 when both exit
** 0; else the failing exit code (its output shown). */
static inline int cli_init_ingest(const char *db, const char *model, const char *lib) {
    const char *const steps[2][7] = {{"init", "--db", db, "--model", model, NULL},
                                     {"ingest", "--db", db, lib, NULL}};
    for (int i = 0; i < 2; i++) {
        cli_run_result r;
        int rc = cli_run(steps[i], &r);
        if (rc != 0) fprintf(stderr, "    clipdb %s: exit %d\n%s%s", steps[i][0], rc, r.out, r.err);
        cli_run_free(&r);
        if (rc != 0) return rc;
    }
    return 0;
}

/* A demo library of count photos in a fresh tmp (tmp[512]): tmp/lib/photos, and its
** database tmp/lib/clipdb in db (db[700]). 0, or -1 when it cannot be made. */
static inline int cli_demo_library(char *tmp, char *db, int count) {
    char cmd[1600];
    if (!cli_tmpdir(tmp, 512)) return -1;
    snprintf(db, 700, "%s/lib/clipdb", tmp);
    snprintf(cmd, sizeof cmd, "\"$CLIPDB\" demo --count %d -q %s/lib >/dev/null", count, tmp);
    return cli_sh(tmp, db, cmd, NULL, NULL) == 0 ? 0 : -1;
}

/* In a CDB_TEST: skips without a model, else makes the demo library of 40 photos in
** char tmp[512] and db[700] once (db[0] == 0 until then). */
#define CLI_NEED_LIBRARY(tmp, db)                                                        \
    do {                                                                                 \
        if (!cli_find_model()) CDB_SKIP("no model: set CLIPDB_TEST_MODEL or add models/"); \
        if (!(db)[0] && cli_demo_library(tmp, db, 40) != 0) {                            \
            (db)[0] = 0;                                                                 \
            CDB_TEST_FAIL_("cannot make the test library");                              \
        }                                                                                \
    } while (0)

#endif /* CDB_TEST_CLI_RUN_H */
