/*
** test_core.c: the status/error-message/logging conventions of core/core.h, and
** cdb_data_path() (the source-tree fallback here; installed: a copy of this program
** in a fake prefix, and tests/install/test_install.sh for the real clipdb).
*/
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdb_test.h"
#include "core/core.h"

CDB_TEST(status_strings_cover_every_code) {
    /* every code in the X-macro list has its own, non-generic string */
    for (int i = 0; i < CDB_STATUS_COUNT_; i++) {
        const char *s = cdb_status_str((cdb_status)i);
        CHECK(s != NULL);
        CHECK_MSG(strcmp(s, "unknown status") != 0, "code %d has no string", i);
        for (int j = 0; j < i; j++)
            CHECK_MSG(strcmp(s, cdb_status_str((cdb_status)j)) != 0, "codes %d and %d share \"%s\"", i, j, s);
    }
    CHECK_EQ_STR(cdb_status_str(CDB_OK), "ok");
    CHECK_EQ_STR(cdb_status_str((cdb_status)9999), "unknown status");
    CHECK_EQ_STR(cdb_status_str((cdb_status)-1), "unknown status");
}

CDB_TEST(seterr_returns_code_and_formats) {
    cdb_clearerr();
    CHECK_EQ_STR(cdb_errmsg(), "");
    CHECK_EQ_INT(cdb_seterr(CDB_IO, "open %s: %d", "/x/catalog.db", 13), CDB_IO);
    CHECK_EQ_STR(cdb_errmsg(), "open /x/catalog.db: 13");
    CHECK_EQ_INT(cdb_errctx(CDB_IO, "ingest %s", "/photos"), CDB_IO);
    CHECK_EQ_STR(cdb_errmsg(), "ingest /photos: open /x/catalog.db: 13");
    cdb_clearerr();
    CHECK_EQ_INT(cdb_errctx(CDB_NOMEM, "load"), CDB_NOMEM);
    CHECK_EQ_STR(cdb_errmsg(), "load: out of memory");
}

/* The contexts a "what (why)" sentence says already are dropped from why, whole words
** only, and never its last part. */
CDB_TEST(err_unsaid_names_each_thing_once) {
    CHECK_EQ_STR(cdb_err_unsaid("cannot read the image ../a.jpg", "../a.jpg: image: not a JPEG"),
                 "not a JPEG");
    CHECK_EQ_STR(cdb_err_unsaid("cannot load the model m1", "model m1: m1/x.json: not JSON"),
                 "m1/x.json: not JSON");
    CHECK_EQ_STR(cdb_err_unsaid("cannot use /x.jpg", "/x.jpg: /x.jpg: No such file"),
                 "No such file");
    /* part of a word or a path is not said: "m1" is not "m10", nor "/m1" */
    CHECK_EQ_STR(cdb_err_unsaid("cannot load the model m10", "m1: bad"), "m1: bad");
    CHECK_EQ_STR(cdb_err_unsaid("cannot load /d/m1", "m1: bad"), "m1: bad");
    CHECK_EQ_STR(cdb_err_unsaid("cannot open a", "a: b"), "b");
    CHECK_EQ_STR(cdb_err_unsaid("cannot open a", "a"), "a");
    CHECK_EQ_STR(cdb_err_unsaid("x", ": y"), ": y");
    CHECK(cdb_err_unsaid("x", NULL) == NULL);
}

/* Nested wrappers name each thing once: the contexts and the "(path)" groups a
** lower layer added are dropped when the wrapper says them (issue 32: a damaged
** shard was named four times in one line). */
CDB_TEST(err_said_once_drops_repeated_contexts_and_paths) {
    char out[256];
    CHECK_EQ_STR(cdb_err_said_once("shard /d/0002.db is damaged",
                                   "read: database disk image is malformed (/d/0002.db)", out,
                                   sizeof out),
                 "read: database disk image is malformed");
    CHECK_EQ_STR(cdb_err_said_once("cannot open /d/x", "/d/x: open: gone (/d/y)", out, sizeof out),
                 "gone (/d/y)"); /* "open" is said too; /d/y is not */
    CHECK_EQ_STR(cdb_err_said_once("a", "b (c) d", out, sizeof out), "b (c) d");
    CHECK_EQ_STR(cdb_err_said_once("x", "y", out, 2), "y");
    /* wrappers nested: the shard named once however deep */
    cdb_seterr(CDB_CORRUPT, "read shard identity: database disk image is malformed (/d/2.db)");
    cdb_errctx(CDB_CORRUPT, "shard /d/2.db is damaged");
    cdb_errctx(CDB_CORRUPT, "shard /d/2.db is damaged or not a clipdb shard");
    CHECK_EQ_STR(cdb_errmsg(), "shard /d/2.db is damaged or not a clipdb shard: read shard "
                               "identity: database disk image is malformed");
}

CDB_TEST(seterr_truncates_long_messages) {
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    cdb_seterr(CDB_INVALID, "%s", big);
    CHECK(strlen(cdb_errmsg()) < 1024);
    CHECK(strlen(cdb_errmsg()) > 1000);
}

static void *thread_sets_error(void *arg) {
    (void)arg;
    cdb_seterr(CDB_CORRUPT, "from the other thread");
    return (void *)(intptr_t)(strcmp(cdb_errmsg(), "from the other thread") == 0);
}

CDB_TEST(errmsg_is_thread_local) {
    pthread_t th;
    void *ok = NULL;
    cdb_seterr(CDB_IO, "main thread");
    CHECK_EQ_INT(pthread_create(&th, NULL, thread_sets_error, NULL), 0);
    pthread_join(th, &ok);
    CHECK(ok != NULL);
    CHECK_EQ_STR(cdb_errmsg(), "main thread");
}

typedef struct log_capture {
    int n;
    cdb_log_level last_level;
    char last[256];
} log_capture;

static void capture_log(cdb_log_level lvl, const char *msg, void *ud) {
    log_capture *c = (log_capture *)ud;
    c->n++;
    c->last_level = lvl;
    snprintf(c->last, sizeof c->last, "%s", msg);
}

CDB_TEST(log_levels_filter_and_callback_receives) {
    log_capture cap = {0, CDB_LOG_LEVEL_DEBUG, ""};
    cdb_log_set(capture_log, &cap);
    cdb_log_set_level(CDB_LOG_LEVEL_WARN);
    CDB_LOG_DEBUG("dropped %d", 1);
    CDB_LOG_INFO("dropped %d", 2);
    CHECK_EQ_INT(cap.n, 0);
    CDB_LOG_WARN("shard %s: %d tombstones", "0001.db", 7);
    CHECK_EQ_INT(cap.n, 1);
    CHECK_EQ_INT(cap.last_level, CDB_LOG_LEVEL_WARN);
    CHECK_EQ_STR(cap.last, "shard 0001.db: 7 tombstones");
    cdb_log_set_level(CDB_LOG_LEVEL_DEBUG);
    CDB_LOG_DEBUG("now kept");
    CHECK_EQ_INT(cap.n, 2);
    cdb_log_set(NULL, NULL);
}

CDB_TEST(log_level_from_environment) {
    setenv("CLIPDB_LOG", "error", 1);
    cdb_log_set(NULL, NULL);
    CHECK_EQ_INT(cdb_log_get_level(), CDB_LOG_LEVEL_ERROR);
    setenv("CLIPDB_LOG", "debug", 1);
    cdb_log_set(NULL, NULL);
    CHECK_EQ_INT(cdb_log_get_level(), CDB_LOG_LEVEL_DEBUG);
    setenv("CLIPDB_LOG", "bogus", 1);
    cdb_log_set(NULL, NULL);
    CHECK_EQ_INT(cdb_log_get_level(), CDB_LOG_LEVEL_WARN);
    unsetenv("CLIPDB_LOG");
    cdb_log_set(NULL, NULL);
}

CDB_TEST(default_threads_and_version) {
    setenv("CLIPDB_THREADS", "3", 1);
    CHECK_EQ_INT(cdb_default_threads(), 3);
    setenv("CLIPDB_THREADS", "0", 1);
    CHECK(cdb_default_threads() >= 1);
    unsetenv("CLIPDB_THREADS");
    CHECK(cdb_default_threads() >= 1);
    CHECK_EQ_INT(cdb_libversion_number(), CDB_VERSION_NUMBER);
    CHECK_EQ_STR(cdb_libversion(), CDB_VERSION_STRING);
    char *d = cdb_strdup("abc");
    CHECK_EQ_STR(d, "abc");
    cdb_free(d);
    cdb_free(NULL);
}

CDB_TEST(data_path_source_tree_and_missing) {
    char buf[PATH_MAX], want[PATH_MAX], small[8];
    const char *where = NULL;
    /* this test program is in the build folder: no ../share/clipdb beside it */
    CHECK(cdb_data_path("models", buf, sizeof buf, &where) == buf);
    CHECK_EQ_STR(where, "source tree");
    CHECK(realpath(CDB_SOURCE_DIR "/models", want) != NULL);
    CHECK_EQ_STR(buf, want);
    CHECK(cdb_data_path("data/bpe_simple_vocab_16e6.txt.gz", buf, sizeof buf, NULL) == buf);
    CHECK(cdb_data_path("no/such/data", buf, sizeof buf, &where) == NULL);
    CHECK_EQ_STR(where, "none");
    CHECK(cdb_data_path("models", small, sizeof small, &where) == NULL); /* does not fit */
    CHECK(cdb_data_path("", buf, sizeof buf, NULL) == NULL);
}

/* The installed case: this program copied to PREFIX/bin/ with PREFIX/share/clipdb/
** beside it finds its data there, before the source tree. The copy runs the test
** data_path_installed_child, told the prefix through CDB_TEST_PREFIX. */
CDB_TEST(data_path_installed_child) {
    const char *prefix = getenv("CDB_TEST_PREFIX"), *where = NULL;
    char buf[PATH_MAX], want[PATH_MAX];
    if (!prefix) CDB_SKIP("run by data_path_installed");
    CHECK(cdb_data_path("models", buf, sizeof buf, &where) == buf);
    CHECK_EQ_STR(where, "installed");
    snprintf(want, sizeof want, "%s/share/clipdb/models", prefix);
    CHECK_EQ_STR(buf, want);
    /* what the prefix lacks still comes from the source tree */
    CHECK(cdb_data_path("data/bpe_simple_vocab_16e6.txt.gz", buf, sizeof buf, &where) == buf);
    CHECK_EQ_STR(where, "source tree");
}

CDB_TEST(data_path_installed) {
    char dir[] = "/tmp/cdb-datapath-XXXXXX", prefix[PATH_MAX], cmd[6 * PATH_MAX];
    CHECK(mkdtemp(dir) != NULL);
    CHECK(realpath(dir, prefix) != NULL);
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/bin' '%s/share/clipdb/models' && cp /proc/%d/exe '%s/bin/test_core' && "
             "CDB_TEST_PREFIX='%s' '%s/bin/test_core' data_path_installed_child",
             prefix, prefix, (int)getpid(), prefix, prefix, prefix);
    int rc = system(cmd);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", prefix);
    CHECK_EQ_INT(system(cmd), 0);
    CHECK_EQ_INT(rc, 0);
}

CDB_TEST_MAIN(status_strings_cover_every_code, seterr_returns_code_and_formats,
              err_unsaid_names_each_thing_once, err_said_once_drops_repeated_contexts_and_paths,
              seterr_truncates_long_messages, errmsg_is_thread_local,
              log_levels_filter_and_callback_receives, log_level_from_environment,
              default_threads_and_version, data_path_source_tree_and_missing,
              data_path_installed_child, data_path_installed)
