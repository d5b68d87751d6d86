/*
** test_serve_slow_clients.c: `clipdb serve` while a thousand clients trickle their
** headers (slowloris): each of CLIPDB_SLOW_CLIENTS (default 1,000) loopback
** connections sends a request line and then one header line a second, never the end
** of its headers, for CLIPDB_SLOW_SECONDS (default 8). Meanwhile a real client opens a
** new connection four times a second and searches: every search must be answered 200
** within a second (the goal of issue #25: the connection capacity follows the
** file-descriptor limit, and epoll makes a waiting connection cheap). The trickling
** connections must all still be open at the end (held, not refused), so the test
** measures what it claims. Prints the latencies and the server's resident memory.
** Bounded: the clients, the time and the server stop by themselves; loopback only.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>

#include "serve/serve_util.h"

#define SEARCH_DEADLINE_MS 1000

static int *g_fds, g_n;
static atomic_int g_stop;

static void *trickler(void *arg) {
    (void)arg;
    for (int round = 0; !atomic_load(&g_stop); round++) {
        char line[64];
        int n = snprintf(line, sizeof line, "X-Trickle-%d: %d\r\n", round, round);
        for (int i = 0; i < g_n; i++)
            if (g_fds[i] >= 0) (void)!send(g_fds[i], line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
        for (int t = 0; t < 10 && !atomic_load(&g_stop); t++) {
            struct timespec ts = {0, 100 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

static long rss_kb(pid_t pid) {
    char path[64], *st, *p;
    long kb = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if ((st = cli_read_file(path, NULL)) && (p = strstr(st, "VmRSS:"))) kb = strtol(p + 6, NULL, 10);
    free(st);
    return kb;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

CDB_TEST(search_under_slowloris) {
    static const char *queries[] = {"a%20red%20circle", "a%20blue%20star", "green%20-%20square",
                                    "2*yellow%20heart"};
    char lib[700], db[700];
    su_server s;
    struct rlimit rl;
    pthread_t th;
    float lat[400];
    int n_lat = 0, late = 0, failed = 0, refused = 0, closed = 0, seconds;
    long rss0, rss1;
    const char *env;
    LU_NEED_SETUP();
    g_n = (env = getenv("CLIPDB_SLOW_CLIENTS")) ? atoi(env) : 1000;
    seconds = (env = getenv("CLIPDB_SLOW_SECONDS")) ? atoi(env) : 8;
    if (seconds < 2) seconds = 2;
    if (seconds > 60) seconds = 60;
    /* this process holds g_n sockets: as many descriptors as it may have */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    if ((long long)rl.rlim_cur < g_n + 64) {
        if ((long long)rl.rlim_cur < 164) CDB_SKIP("too few file descriptors (%lld)", (long long)rl.rlim_cur);
        printf("    only %lld file descriptors: %d clients\n", (long long)rl.rlim_cur, (int)rl.rlim_cur - 64);
        g_n = (int)rl.rlim_cur - 64;
    }
    lu_path(lib, sizeof lib, "photos");
    lu_path(db, sizeof db, "db");
    CHECK_EQ_INT(lu_generate(lib, 5, 0, 24), 0);
    CHECK_EQ_INT(lu_init(db), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, lib, "--quiet", NULL}, 0, NULL), 0);
    /* the header deadline past the test's end: the clients are held, not cut */
    CHECK_EQ_INT(su_start(&s, (const char *[]){"--db", db, "--threads", "2", "--header-timeout",
                                               "120", "--quiet", NULL}), 0);
    rss0 = rss_kb(s.pid);
    CHECK((g_fds = malloc(sizeof *g_fds * (size_t)g_n)) != NULL);
    int64_t t0 = cdb_now_ns();
    for (int i = 0; i < g_n; i++) {
        static const char head[] = "GET /api/search?q=slow HTTP/1.1\r\nHost: 127.0.0.1\r\n";
        if ((g_fds[i] = su_connect(s.port)) < 0 || su_send_all(g_fds[i], head, sizeof head - 1) != 0) {
            if (g_fds[i] >= 0) close(g_fds[i]);
            g_fds[i] = -1;
            refused++;
        }
    }
    printf("    %d trickling connections opened in %.0f ms (%d refused)\n", g_n,
           (double)(cdb_now_ns() - t0) / 1e6, refused);
    CHECK_EQ_INT(refused, 0);
    CHECK_EQ_INT(pthread_create(&th, NULL, trickler, NULL), 0);
    int64_t until = cdb_now_ns() + (int64_t)seconds * 1000000000;
    for (int i = 0; cdb_now_ns() < until && n_lat < 400; i++) {
        char path[200];
        su_resp r;
        snprintf(path, sizeof path, "/api/search?q=%s&k=10", queries[i % 4]);
        int64_t a = cdb_now_ns();
        int fd = su_connect(s.port), rc = -1;
        if (fd >= 0) {
            rc = su_request_on(fd, "GET", path, NULL, NULL, 0, &r, 10000);
            close(fd);
        } else {
            memset(&r, 0, sizeof r);
        }
        float ms = (float)(cdb_now_ns() - a) / 1e6f;
        lat[n_lat++] = ms;
        if (rc != 0 || r.status != 200) {
            if (!failed) fprintf(stderr, "    search %d: status %d after %.0f ms\n", i, r.status, ms);
            failed++;
        } else if (ms > SEARCH_DEADLINE_MS) {
            fprintf(stderr, "    search %d: %.0f ms\n", i, ms);
            late++;
        }
        su_resp_free(&r);
        struct timespec ts = {0, 250 * 1000000L};
        nanosleep(&ts, NULL);
    }
    rss1 = rss_kb(s.pid);
    atomic_store(&g_stop, 1);
    pthread_join(th, NULL);
    /* every trickler still open: nothing to read, no hang-up */
    for (int i = 0; i < g_n; i++) {
        struct pollfd pf = {g_fds[i], POLLIN, 0};
        if (g_fds[i] >= 0 && poll(&pf, 1, 0) != 0) closed++;
        if (g_fds[i] >= 0) close(g_fds[i]);
    }
    free(g_fds);
    qsort(lat, (size_t)n_lat, sizeof *lat, cmp_float);
    printf("    %d searches beside %d trickling clients: p50 %.1f ms, p99 %.1f ms, max %.1f ms; "
           "%d failed, %d over %d ms; server RSS %ld -> %ld KiB; %d tricklers closed early\n",
           n_lat, g_n, n_lat ? (double)lat[n_lat / 2] : 0.0,
           n_lat ? (double)lat[(n_lat * 99) / 100] : 0.0, n_lat ? (double)lat[n_lat - 1] : 0.0,
           failed, late, SEARCH_DEADLINE_MS, rss0, rss1, closed);
    CHECK(n_lat >= 4);
    CHECK_EQ_INT(failed, 0);
    CHECK_EQ_INT(late, 0);
    CHECK_EQ_INT(closed, 0);
    CHECK_EQ_INT(su_stop(&s), 0);
}

CDB_TEST_MAIN_TMP(lu_tmp, lu_rm_rf, search_under_slowloris)
