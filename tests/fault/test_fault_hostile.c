/*
** test_fault_hostile.c: hostile paths and queries given to the clipdb binary
** (issue 9, hostile input).
**
** symlinks_out_of_the_root_only_with_follow: a library whose folder holds a link to
**   a folder outside it (relative, through ".."), a link to a file outside it, a
**   link to its own root and one to its parent inside it (two loops). Without
**   --follow-symlinks no link is followed: exactly the library's own images are
**   recorded and the links are counted as skipped. With it, the outside files are
**   recorded under the link's path, the loops are detected (the walk ends, no file
**   is recorded twice) and the exit code is 0.
** dotdot_paths_are_canonical: `ingest LIB/sub/..` records LIB itself (one root, no
**   ".." in any stored path); `ingest LIB/sub/../sub` is a part of that root, not a
**   second root.
** huge_query_is_refused_with_bounded_memory: a 10 MB query on standard input
**   (`clipdb search -`; Linux refuses more than 6 MB of arguments) exits 2 with
**   "query too long" and the documented limit (64 KiB), and the child's peak RSS
**   (wait4) exceeds that of a trivial usage error by less than 16 MB: clipdb reads
**   no more than the limit. The largest query arguments allow (5 MB in 50 words
**   of 100 kB; one argument may not exceed 128 kB) is refused the same way, its
**   RSS bound adding the 5 MB the kernel copies the arguments into. A query just
**   under the limit is served (exit 0).
*/
#include <signal.h>
#include <sys/resource.h>

#include "cdb_test.h"
#include "fault_util.h"

static int on_root(const cdb_db_root *r, void *ud) {
    char **first = ud;
    if (!*first) *first = strdup(r->path);
    return 0;
}

/* Roots recorded in db; *first gets the first one (heap). */
static int roots_of(const char *dir, char **first) {
    cdb_db_params p = cdb_db_params_default();
    cdb_db *db = NULL;
    cdb_db_counts c;
    int n = -1;
    *first = NULL;
    p.readonly = 1;
    if (cdb_db_open(dir, &p, &db) != CDB_OK) return -1;
    if (cdb_db_get_counts(db, 0, &c) == CDB_OK) n = (int)c.n_roots;
    cdb_db_roots_foreach(db, on_root, first);
    cdb_db_close(db);
    return n;
}

CDB_TEST(symlinks_out_of_the_root_only_with_follow) {
    char lib[900], out[900], db[900], p[1200], q[1200];
    cli_run_result r;
    fu_state s;
    FU_NEED_SETUP();
    snprintf(lib, sizeof lib, "%s/lib", g_tmp);
    snprintf(out, sizeof out, "%s/outside", g_tmp);
    CHECK_EQ_INT(fu_library(lib, 51, 6), 0);
    CHECK_EQ_INT(fu_library(out, 52, 3), 0);
    snprintf(p, sizeof p, "%s/sub", lib);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof p, "%s/to_outside", lib);
    CHECK(symlink("../outside", p) == 0); /* a folder outside the root, through ".." */
    snprintf(p, sizeof p, "%s/one_outside.png", lib);
    snprintf(q, sizeof q, "%s/img_0000000.png", out);
    if (access(q, F_OK) != 0) snprintf(q, sizeof q, "%s/img_0000000.jpg", out);
    CHECK(symlink(q, p) == 0); /* a file outside the root */
    snprintf(p, sizeof p, "%s/loop_root", lib);
    CHECK(symlink(lib, p) == 0); /* the root itself */
    snprintf(p, sizeof p, "%s/sub/loop_up", lib);
    CHECK(symlink("..", p) == 0); /* its parent, inside the root */

    /* default: no link followed */
    snprintf(db, sizeof db, "%s/db_nofollow", g_tmp);
    CHECK_EQ_INT(fu_init(db), 0);
    CHECK_EQ_INT(fu_run_expect((const char *[]){"ingest", "--db", db, lib, "--json", "--quiet", "--device", "cpu", NULL},
                               NULL, 0, &r),
                 0);
    CHECK_MSG(strstr(r.out, "\"symlinks_skipped\": 4,") != NULL, "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(fu_state_read(db, &s), 0);
    CHECK_EQ_INT(s.n, 6);
    CHECK_EQ_INT(s.n_vec, 6);
    for (int i = 0; i < s.n; i++) {
        snprintf(p, sizeof p, "%s/", lib);
        CHECK_MSG(!strncmp(s.f[i].path, p, strlen(p)) && !strchr(s.f[i].path + strlen(p), '/'),
                  "recorded %s", s.f[i].path);
    }
    fu_state_free(&s);

    /* --follow-symlinks: the outside files under the links' paths, each once, loops ended */
    snprintf(db, sizeof db, "%s/db_follow", g_tmp);
    CHECK_EQ_INT(fu_init(db), 0);
    CHECK_EQ_INT(fu_run_expect((const char *[]){"ingest", "--db", db, lib, "--follow-symlinks", "--json", "--quiet",
                                                "--device", "cpu", NULL},
                               NULL, 0, &r),
                 0);
    cli_run_free(&r);
    CHECK_EQ_INT(fu_state_read(db, &s), 0);
    /* one_outside.png and to_outside/ reach one same file: stored once, under the
    ** path the walk meets first (names in byte order: one_outside.png) */
    CHECK_EQ_INT(s.n, 6 + 3);
    {
        int n_out = 0, n_file = 0;
        for (int i = 0; i < s.n; i++) {
            snprintf(p, sizeof p, "%s/", lib);
            CHECK_MSG(!strncmp(s.f[i].path, p, strlen(p)), "recorded %s", s.f[i].path);
            CHECK_MSG(!strstr(s.f[i].path, "loop_"), "a loop was walked: %s", s.f[i].path);
            snprintf(p, sizeof p, "%s/to_outside/", lib);
            n_out += !strncmp(s.f[i].path, p, strlen(p));
            n_file += strstr(s.f[i].path, "/one_outside.png") != NULL;
        }
        CHECK_EQ_INT(n_out, 2);
        CHECK_EQ_INT(n_file, 1);
    }
    fu_state_free(&s);
    CHECK_EQ_INT(fu_run_expect((const char *[]){"verify", "--db", db, NULL}, NULL, 0, &r), 0);
    cli_run_free(&r);
}

CDB_TEST(dotdot_paths_are_canonical) {
    char lib[900], db[900], p[1200];
    char *root = NULL;
    cli_run_result r;
    fu_state s;
    FU_NEED_SETUP();
    snprintf(lib, sizeof lib, "%s/lib2", g_tmp);
    CHECK_EQ_INT(fu_library(lib, 53, 4), 0);
    snprintf(p, sizeof p, "%s/sub", lib);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(db, sizeof db, "%s/db_dotdot", g_tmp);
    CHECK_EQ_INT(fu_init(db), 0);
    snprintf(p, sizeof p, "%s/sub/..", lib);
    CHECK_EQ_INT(fu_run_expect((const char *[]){"ingest", "--db", db, p, "--quiet", "--device", "cpu", NULL}, NULL, 0, &r),
                 0);
    cli_run_free(&r);
    CHECK_EQ_INT(roots_of(db, &root), 1);
    CHECK_MSG(root && !strcmp(root, lib), "root recorded as %s, want %s", root ? root : "(none)", lib);
    free(root);
    snprintf(p, sizeof p, "%s/sub/../sub", lib);
    CHECK_EQ_INT(fu_run_expect((const char *[]){"ingest", "--db", db, p, "--quiet", "--device", "cpu", NULL}, NULL, 0, &r),
                 0);
    cli_run_free(&r);
    CHECK_EQ_INT(roots_of(db, &root), 1);
    free(root);
    CHECK_EQ_INT(fu_state_read(db, &s), 0);
    CHECK_EQ_INT(s.n, 4);
    for (int i = 0; i < s.n; i++) CHECK_MSG(!strstr(s.f[i].path, "/.."), "stored %s", s.f[i].path);
    fu_state_free(&s);
}

/* Runs clipdb with argv (NULL-terminated, without the program name) and a 64 MB
** stack limit (the kernel allows arguments up to a quarter of it); returns the
** exit code, *maxrss_kb the child's peak RSS, *err its stderr (first 4 kB). */
static int run_rss(const char *const *args, const char *in, size_t in_len, long *maxrss_kb, char *err,
                   size_t err_size) {
    int pe[2], pi[2], status = 0;
    struct rusage ru;
    pid_t pid;
    ssize_t k;
    size_t got = 0;
    if (pipe(pe) != 0 || pipe(pi) != 0) return -1000;
    signal(SIGPIPE, SIG_IGN); /* the child stops reading at the limit */
    if ((pid = fork()) < 0) return -1000;
    if (pid == 0) {
        struct rlimit rl = {64L << 20, 64L << 20};
        const char **argv;
        int n = 0;
        while (args[n]) n++;
        argv = calloc((size_t)n + 2, sizeof *argv);
        if (!argv) _exit(127);
        argv[0] = CLIPDB_BIN;
        for (int i = 0; i < n; i++) argv[i + 1] = args[i];
        getrlimit(RLIMIT_STACK, &rl);
        if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= (64L << 20)) rl.rlim_cur = 64L << 20;
        setrlimit(RLIMIT_STACK, &rl);
        dup2(pe[1], 2);
        dup2(pi[0], 0);
        close(pe[0]), close(pe[1]), close(pi[0]), close(pi[1]);
        {
            int fd = open("/dev/null", O_WRONLY);
            if (fd < 0) _exit(127);
            dup2(fd, 1);
        }
        unsetenv("CLIPDB_DB");
        setenv("NO_COLOR", "1", 1);
        execv(CLIPDB_BIN, (char *const *)argv);
        _exit(126);
    }
    close(pe[1]);
    close(pi[0]);
    for (size_t off = 0; in && off < in_len;) { /* until the child stops reading (EPIPE) */
        ssize_t w = write(pi[1], in + off, in_len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    close(pi[1]);
    while ((k = read(pe[0], err + got, err_size - 1 - got)) > 0) got += (size_t)k;
    err[got] = '\0';
    { /* drain the rest */
        char sink[4096];
        while (read(pe[0], sink, sizeof sink) > 0) {
        }
    }
    close(pe[0]);
    if (wait4(pid, &status, 0, &ru) < 0) return -1000;
    *maxrss_kb = ru.ru_maxrss;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

CDB_TEST(huge_query_is_refused_with_bounded_memory) {
    /* Linux caps all arguments together at 6 MB (3/4 of _STK_LIM) and one at
    ** 128 kB: a 10 MB query can only come on standard input ('-'); the largest
    ** argv query, 5 MB in 50 words, is checked too. */
    enum { MB10 = 10 << 20, N_WORDS = 50, WORD = 100000 };
    char db[900], err[4096];
    const char **args = NULL;
    char *big = NULL;
    long rss_base = 0, rss = 0;
    int rc, n = 0;
    FU_NEED_SETUP();
    snprintf(db, sizeof db, "%s/db_query", g_tmp);
    CHECK_EQ_INT(fu_init(db), 0);

    /* baseline: the same process start, failing on a bad option value */
    rc = run_rss((const char *[]){"search", "--db", db, "-k", "0", "x", NULL}, NULL, 0, &rss_base, err, sizeof err);
    CHECK_EQ_INT(rc, 2);

    CHECK((big = malloc(MB10 + 1)) != NULL);
    for (int j = 0; j < MB10; j++) big[j] = "red circle "[j % 11];
    big[MB10] = '\0';

    /* 10 MB on standard input */
    rc = run_rss((const char *[]){"search", "--db", db, "--device", "cpu", "-", NULL}, big, MB10, &rss, err,
                 sizeof err);
    fprintf(stderr, "    10 MB query on stdin: exit %d, peak RSS %ld kB (a usage error: %ld kB); %.160s", rc, rss,
            rss_base, err);
    CHECK_EQ_INT(rc, 2);
    CHECK_MSG(strstr(err, "query too long") && strstr(err, "65536"), "unclear error: %s", err);
    CHECK_MSG(rss - rss_base < 16384, "peak RSS grew by %ld kB for a refused query", rss - rss_base);

    /* 5 MB of arguments */
    CHECK((args = calloc(N_WORDS + 8, sizeof *args)) != NULL);
    args[n++] = "search";
    args[n++] = "--db";
    args[n++] = db;
    args[n++] = "--device";
    args[n++] = "cpu";
    for (int i = 0; i < N_WORDS; i++) {
        char *w = malloc(WORD + 1);
        CHECK(w != NULL);
        memcpy(w, big, WORD);
        w[WORD] = '\0';
        args[n++] = w;
    }
    args[n] = NULL;
    rc = run_rss(args, NULL, 0, &rss, err, sizeof err);
    fprintf(stderr, "    5 MB query in arguments: exit %d, peak RSS %ld kB; %.160s", rc, rss, err);
    CHECK_EQ_INT(rc, 2);
    CHECK_MSG(strstr(err, "query too long") && strstr(err, "65536"), "unclear error: %s", err);
    CHECK_MSG(rss - rss_base < 5000 + 16384, "peak RSS grew by %ld kB for a refused query", rss - rss_base);
    for (int i = 5; i < n; i++) free((char *)args[i]);

    /* just under the limit, on stdin and as an argument: served */
    rc = run_rss((const char *[]){"search", "--db", db, "--device", "cpu", "-", NULL}, big, 60000, &rss, err,
                 sizeof err);
    CHECK_MSG(rc == 0, "a 60 kB query on stdin: exit %d: %s", rc, err);
    big[60000] = '\0';
    rc = run_rss((const char *[]){"search", "--db", db, "--device", "cpu", big, NULL}, NULL, 0, &rss, err, sizeof err);
    CHECK_MSG(rc == 0, "a 60 kB query: exit %d: %s", rc, err);
    free(big);
    free(args);
}

CDB_TEST_MAIN_TMP(g_tmp, rm_rf, symlinks_out_of_the_root_only_with_follow,
                  dotdot_paths_are_canonical, huge_query_is_refused_with_bounded_memory)
