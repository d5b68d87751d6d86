/*
** test_hub.c: `clipdb models get` and --model hf:ORG/NAME against a Hugging Face Hub
** stand-in on 127.0.0.1 (hub_server.h; no test reaches the internet): the cache layout
** huggingface_hub writes (blobs by ETag, relative snapshot links, refs), only the files a
** model needs, the token sent to the Hub and never to the CDN, 401, 404s, a connection
** dropped mid-file (resumed with Range), a download left by an earlier run (resumed), a
** corrupted file (checksum error, nothing in the snapshot), a server that streams more
** than the size it said, or says no size and streams without end (cut off at the size or
** the cap, by the stand-in's count of what it sent; nothing kept), a full disk, HF_HUB_OFFLINE,
** a second get that downloads nothing, a cache made by hand by the layout's rules, and
** the CLI end to end (models get, --list, models/init --model hf:). Also the parsers of
** hub_int.h on their own.
*/
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdb_test.h"
#include "cli/cli_run.h"
#include "engine/engine.h"
#include "engine/hub/hub_int.h"
#include "hub/hub_server.h"

static hub_server g_srv;
static char g_tmp[PATH_MAX];
static char g_model_dir[PATH_MAX];

/* A fresh cache for each test: HF_HOME=<tmp>/<name> (so HF_HOME/hub is the cache). */
static void fresh_env(const char *name, char *cache, size_t cap) {
    char home[PATH_MAX], ep[64];
    snprintf(home, sizeof home, "%s/%s", g_tmp, name);
    mkdir(home, 0777);
    setenv("HF_HOME", home, 1);
    unsetenv("HF_HUB_CACHE");
    unsetenv("HUGGINGFACE_HUB_CACHE");
    unsetenv("HF_HUB_OFFLINE");
    unsetenv("TRANSFORMERS_OFFLINE");
    unsetenv("HF_TOKEN");
    unsetenv("HUGGING_FACE_HUB_TOKEN");
    unsetenv("HF_TOKEN_PATH");
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", g_srv.port);
    setenv("HF_ENDPOINT", ep, 1);
    snprintf(cache, cap, "%s/hub", home);
    hs_clear_log(&g_srv);
}

static int same_bytes(const char *path, const hs_file *f) {
    size_t len;
    char *b = hs_slurp(path, &len);
    int same = b && len == f->len && !memcmp(b, f->data, len);
    free(b);
    return same;
}

/* How many entries of dir have a name ending with suffix (-1: no such folder). */
static int count_suffix(const char *dir, const char *suffix) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d))) {
        size_t a = strlen(e->d_name), b = strlen(suffix);
        if (a >= b && !strcmp(e->d_name + a - b, suffix)) n++;
    }
    closedir(d);
    return n;
}

CDB_TEST(parsers) {
    hub_resp r;
    char out[128], commit[41], **files = NULL;
    int n = 0, want[8], pending = 0;
    cdb_hub_resp_reset(&r);
    cdb_hub_header_line(&r, "HTTP/1.1 302 Found\r\n", 20);
    CHECK_EQ_INT(r.status, 302);
    cdb_hub_header_line(&r, "x-linked-etag: \"abc123\"\r\n", 25);
    CHECK_EQ_STR(r.linked_etag, "abc123");
    cdb_hub_header_line(&r, "ETag: W/\"deadbeef\"", 18);
    CHECK_EQ_STR(r.etag, "deadbeef");
    cdb_hub_header_line(&r, "ETag: \"../../x\"", 15); /* never a path */
    CHECK_EQ_STR(r.etag, "");
    cdb_hub_header_line(&r, "X-Repo-Commit: " HS_COMMIT, 55);
    CHECK_EQ_STR(r.commit, HS_COMMIT);
    cdb_hub_header_line(&r, "Content-Range: bytes 100-199/200", 32);
    CHECK_EQ_INT(r.range_start, 100);
    CHECK_EQ_INT(r.range_total, 200);
    cdb_hub_header_line(&r, "X-Linked-Size: 12x", 18);
    CHECK_EQ_INT(r.linked_size, -1);
    cdb_hub_header_line(&r, "HTTP/2 200", 10); /* a new response */
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_STR(r.linked_etag, "");
    CHECK_EQ_INT(cdb_hub_etag_normalize("W/\"x\"", 5, out, sizeof out), 0);
    CHECK_EQ_STR(out, "x");
    CHECK_EQ_INT(cdb_hub_repo_valid("openai/clip-vit-base-patch32"), 0);
    CHECK_EQ_INT(cdb_hub_repo_valid("gpt2"), 0);
    CHECK_EQ_INT(cdb_hub_repo_valid("a/b/c"), -1);
    CHECK_EQ_INT(cdb_hub_repo_valid("a--b/c"), -1);
    CHECK_EQ_INT(cdb_hub_repo_valid("../x"), -1);
    CHECK_EQ_INT(cdb_hub_repo_valid("org/x.git"), -1);
    CHECK_EQ_INT(cdb_hub_revision_valid("refs/pr/1"), 0);
    CHECK_EQ_INT(cdb_hub_revision_valid("../main"), -1);
    CHECK_EQ_INT(cdb_hub_revision_valid("/main"), -1);
    CHECK_EQ_INT(cdb_hub_filename_valid("a/../b"), -1);
    CHECK_EQ_INT(cdb_hub_quote("refs/pr/1", "", out, sizeof out), 0);
    CHECK_EQ_STR(out, "refs%2Fpr%2F1");
    CHECK_EQ_INT(cdb_hub_quote("a b/c.json", "/", out, sizeof out), 0);
    CHECK_EQ_STR(out, "a%20b/c.json");
    {
        static const char js[] = "{\"sha\":\"" HS_COMMIT "\",\"siblings\":[{\"rfilename\":"
                                 "\"model.safetensors\"},{\"rfilename\":\"../evil\"},{\"rfile"
                                 "name\":\"pytorch_model.bin\"},{\"rfilename\":\"config.json\"},"
                                 "{\"rfilename\":\"onnx/model.safetensors\"}]}";
        CHECK_EQ_INT(cdb_hub_parse_revision(js, strlen(js), commit, &files, &n), 0);
        CHECK_EQ_STR(commit, HS_COMMIT);
        CHECK_EQ_INT(n, 4); /* ../evil dropped */
        cdb_hub_select(files, n, want, &pending);
        CHECK_EQ_INT(want[0], 1);
        CHECK_EQ_INT(want[1], 0);
        CHECK_EQ_INT(want[2], 1);
        CHECK_EQ_INT(want[3], 0);
        CHECK_EQ_INT(pending, 0);
        cdb_free(files);
    }
    CHECK_EQ_INT(cdb_hub_parse_revision("{\"sha\":\"x\"}", 11, commit, &files, &n), -1);
    {
        static const char ix[] = "{\"weight_map\":{\"a\":\"m-1.safetensors\",\"b\":\"m-2.safe"
                                 "tensors\",\"c\":\"m-1.safetensors\"}}";
        CHECK_EQ_INT(cdb_hub_parse_index(ix, strlen(ix), &files, &n), 0);
        CHECK_EQ_INT(n, 2);
        cdb_free(files);
        CHECK_EQ_INT(cdb_hub_parse_index("{\"weight_map\":{\"a\":\"../x.safetensors\"}}", 39,
                                         &files, &n), -1);
    }
}

/* The layout: snapshots/COMMIT/FILE -> ../../blobs/ETAG, refs/main, nothing else. */
CDB_TEST(get_layout_token_and_second_get) {
    char cache[PATH_MAX], repo_dir[PATH_MAX], path[PATH_MAX + 64], link[PATH_MAX], want[300];
    char *folder = NULL;
    cdb_engine_hub_params p = cdb_engine_hub_params_default();
    fresh_env("layout", cache, sizeof cache);
    setenv("HF_TOKEN", "secret-token", 1);
    CHECK_OK(cdb_engine_hub_get("org/tiny", &p, &folder));
    snprintf(repo_dir, sizeof repo_dir, "%s/models--org--tiny", cache);
    snprintf(path, sizeof path, "%s/snapshots/%s", repo_dir, HS_COMMIT);
    CHECK_EQ_STR(folder, path);
    CHECK_EQ_INT(p.n_fetched, 4);
    for (int i = 0; i < 4; i++) { /* the model's four files, as links to their blobs */
        const hs_file *f = &g_srv.files[i];
        ssize_t n;
        snprintf(path, sizeof path, "%s/%s", folder, f->name);
        n = readlink(path, link, sizeof link - 1);
        CHECK(n > 0);
        link[n] = '\0';
        snprintf(want, sizeof want, "../../blobs/%s", f->etag);
        CHECK_EQ_STR(link, want);
        CHECK(same_bytes(path, f));
    }
    /* never fetched: pytorch_model.bin, README.md, onnx/ */
    snprintf(path, sizeof path, "%s/pytorch_model.bin", folder);
    CHECK(access(path, F_OK) != 0);
    CHECK_EQ_INT(hs_count(&g_srv, "pytorch_model.bin", NULL), 0);
    CHECK_EQ_INT(hs_count(&g_srv, "README.md", NULL), 0);
    CHECK_EQ_INT(hs_count(&g_srv, "onnx", NULL), 0);
    /* refs/main holds the commit, as huggingface_hub writes it (no newline) */
    snprintf(path, sizeof path, "%s/refs/main", repo_dir);
    {
        size_t len;
        char *b = hs_slurp(path, &len);
        CHECK(b && len == 40 && !memcmp(b, HS_COMMIT, 40));
        free(b);
    }
    snprintf(path, sizeof path, "%s/blobs", repo_dir);
    CHECK_EQ_INT(count_suffix(path, ".incomplete"), 0);
    CHECK_EQ_INT(count_suffix(path, ""), 4 + 2); /* + . and .. */
    /* the token went to the Hub, never to the CDN */
    CHECK(hs_count(&g_srv, "/api/models/org/tiny", "Bearer secret-token") == 1);
    CHECK(hs_count(&g_srv, "GET /cdn/", NULL) == 1);
    CHECK_EQ_INT(hs_count(&g_srv, "GET /cdn/", "Bearer"), 0);
    /* the lock file huggingface_hub would take too */
    snprintf(path, sizeof path, "%s/.locks/models--org--tiny/%s.lock", cache, g_srv.files[3].etag);
    CHECK(access(path, F_OK) == 0);
    cdb_free(folder);
    folder = NULL;

    /* a second get downloads nothing: one API call, no resolve, no CDN */
    hs_clear_log(&g_srv);
    CHECK_OK(cdb_engine_hub_get("org/tiny", &p, &folder));
    CHECK_EQ_INT(p.n_fetched, 0);
    CHECK_EQ_INT(hs_count(&g_srv, "/api/models/", NULL), 1);
    CHECK_EQ_INT(hs_count(&g_srv, "/resolve/", NULL), 0);
    CHECK_EQ_INT(hs_count(&g_srv, "/cdn/", NULL), 0);
    cdb_free(folder);
    folder = NULL;

    /* --model hf:ORG/NAME (cache_first): no request at all */
    hs_clear_log(&g_srv);
    CHECK_OK(cdb_engine_model_path("hf:org/tiny", NULL, &folder));
    CHECK(strstr(folder, HS_COMMIT) != NULL);
    CHECK_EQ_INT(g_srv.n_log, 0);
    cdb_free(folder);
    folder = NULL;
    CHECK_OK(cdb_engine_model_path("/some/folder", NULL, &folder));
    CHECK_EQ_STR(folder, "/some/folder");
    cdb_free(folder);
    unsetenv("HF_TOKEN");
}

/* hub_get(repo) fails with rc and the engine's code, gives no folder, and its message
** says `says` (NULL: not checked). */
static void expect_refused(cdb_test_ctx *cdb_t_, const char *repo, cdb_engine_hub_params *p,
                           cdb_status rc, cdb_engine_err code, const char *says) {
    char *folder = NULL;
    CHECK_RC(cdb_engine_hub_get(repo, p, &folder), rc);
    CHECK_EQ_INT(cdb_engine_errcode(), code);
    CHECK_MSG(!says || strstr(cdb_errmsg(), says), "message: %s", cdb_errmsg());
    CHECK(folder == NULL);
}

/* Whether the cache holds no model.safetensors of repo_dir (models--ORG--NAME) at
** the test server's commit. */
static int no_snapshot_file(const char *cache, const char *repo_dir) {
    char path[PATH_MAX + 200];
    snprintf(path, sizeof path, "%s/%s/snapshots/%s/model.safetensors", cache, repo_dir,
             HS_COMMIT);
    return access(path, F_OK) != 0 && errno == ENOENT;
}

CDB_TEST(errors_401_404) {
    char cache[PATH_MAX], *folder = NULL;
    cdb_engine_hub_params p = cdb_engine_hub_params_default();
    fresh_env("errors", cache, sizeof cache);
    expect_refused(cdb_t_, "org/private", &p, CDB_ERROR, CDB_ENGINE_E_HUB_AUTH, "HF_TOKEN");
    setenv("HF_TOKEN", "wrong-token", 1);
    CHECK_RC(cdb_engine_hub_get("org/private", &p, &folder), CDB_ERROR);
    CHECK_EQ_INT(cdb_engine_errcode(), CDB_ENGINE_E_HUB_AUTH);
    CHECK(strstr(cdb_errmsg(), "wrong-token") == NULL); /* never printed */
    setenv("HF_TOKEN", "secret-token", 1);
    CHECK_OK(cdb_engine_hub_get("org/private", &p, &folder));
    cdb_free(folder);
    folder = NULL;
    unsetenv("HF_TOKEN");
    expect_refused(cdb_t_, "org/missing", &p, CDB_NOTFOUND, CDB_ENGINE_E_HUB_NOT_FOUND,
                   "no such repository");
    p.revision = "v9";
    CHECK_RC(cdb_engine_hub_get("org/tiny", &p, &folder), CDB_NOTFOUND);
    CHECK(strstr(cdb_errmsg(), "no such revision") != NULL);
    p.revision = "../../etc";
    CHECK_RC(cdb_engine_hub_get("org/tiny", &p, &folder), CDB_INVALID);
    p.revision = NULL;
    CHECK_RC(cdb_engine_hub_get("no-such-short-name", &p, &folder), CDB_NOTFOUND);
    CHECK_EQ_INT(cdb_engine_errcode(), CDB_ENGINE_E_HUB_NOT_FOUND);
    CHECK_RC(cdb_engine_hub_get("org/../x", &p, &folder), CDB_INVALID);
}

CDB_TEST(dropped_connection_resumes) {
    char cache[PATH_MAX], path[PATH_MAX + 64], want[64], *folder = NULL;
    cdb_engine_hub_params p = cdb_engine_hub_params_default();
    const hs_file *w = &g_srv.files[3];
    fresh_env("drop", cache, sizeof cache);
    g_srv.drops_left = 1;
    CHECK_OK(cdb_engine_hub_get("org/drop", &p, &folder));
    CHECK_EQ_INT(g_srv.drops_left, 0);
    snprintf(want, sizeof want, "Range: bytes=%zu-", 0 + w->len / 2);
    /* the second GET asked for the rest only */
    CHECK_EQ_INT(hs_count(&g_srv, "GET /cdn/org/drop", NULL), 2);
    CHECK_EQ_INT(hs_count(&g_srv, "GET /cdn/org/drop", "|bytes="), 1);
    snprintf(path, sizeof path, "%s/model.safetensors", folder);
    CHECK(same_bytes(path, w));
    cdb_free(folder);
}

CDB_TEST(earlier_partial_download_resumes) {
    char cache[PATH_MAX], path[PATH_MAX + 200], range[64], *folder = NULL;
    cdb_engine_hub_params p = cdb_engine_hub_params_default();
    const hs_file *w = &g_srv.files[3];
    FILE *f;
    fresh_env("partial", cache, sizeof cache);
    mkdir(cache, 0777);
    snprintf(path, sizeof path, "%s/models--org--tiny", cache);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/models--org--tiny/blobs", cache);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/models--org--tiny/blobs/%s.incomplete", cache, w->etag);
    CHECK((f = fopen(path, "wb")) != NULL);
    CHECK_EQ_INT((int)fwrite(w->data, 1, 1000, f), 1000);
    fclose(f);
    hs_clear_log(&g_srv);
    CHECK_OK(cdb_engine_hub_get("org/tiny", &p, &folder));
    snprintf(range, sizeof range, "|bytes=1000-|");
    CHECK_EQ_INT(hs_count(&g_srv, "GET /cdn/org/tiny", range), 1);
    snprintf(path, sizeof path, "%s/model.safetensors", folder);
    CHECK(same_bytes(path, w));
    cdb_free(folder);
}

CDB_TEST(corrupt_file_leaves_nothing) {
    char cache[PATH_MAX], path[PATH_MAX + 200];
    cdb_engine_hub_params p = cdb_engine_hub_params_default();
    fresh_env("corrupt", cache, sizeof cache);
    expect_refused(cdb_t_, "org/corrupt", &p, CDB_CORRUPT, CDB_ENGINE_E_HUB_CHECKSUM, "sha256");
    CHECK(no_snapshot_file(cache, "models--org--corrupt"));
    snprintf(path, sizeof path, "%s/models--org--corrupt/blobs", cache);
    CHECK_EQ_INT(count_suffix(path, ".incomplete"), 0);
    CHECK_EQ_INT(count_suffix(path, ""), 3 + 2); /* the three small files only */
    /* and the snapshot is not taken for a complete one */
    setenv("HF_HUB_OFFLINE", "1", 1);
    expect_refused(cdb_t_, "org/corrupt", &p, CDB_NOTFOUND, CDB_ENGINE_E_HUB_OFFLINE, NULL);
    unsetenv("HF_HUB_OFFLINE");
}

/* The bytes past a file's end that the stand-in sent, since the last reset. */
static size_t flood_sent(int reset) {
    size_t n;
    pthread_mutex_lock(&g_srv.mu);
    n = g_srv.flood_sent;
    if (reset) g_srv.flood_sent = 0;
    pthread_mutex_unlock(&g_srv.mu);
    return n;
}

/* What the sockets between the stand-in and the client may hold when the client stops
** reading (loopback buffers): anything sent past it was read. */
#define SOCKET_SLACK ((size_t)32 << 20)

/* The weights' size is said (X-Linked-Size and a sha256 ETag); the CDN then streams 160
** MiB more without a length: cut off at the size, nothing of it kept. */
CDB_TEST(more_than_the_size_said_is_cut_off) {
    char cache[PATH_MAX], path[PATH_MAX + 200], *folder = NULL;
    cdb_engine_hub_params p = cdb_engine_hub_params_default();
    fresh_env("liesize", cache, sizeof cache);
    flood_sent(1);
    CHECK_RC(cdb_engine_hub_get("org/liesize", &p, &folder), CDB_CORRUPT);
    CHECK_EQ_INT(cdb_engine_errcode(), CDB_ENGINE_E_HUB_CHECKSUM);
    CHECK(strstr(cdb_errmsg(), "wrong size") != NULL);
    CHECK(folder == NULL);
    CHECK_MSG(flood_sent(0) < SOCKET_SLACK, "%zu bytes past the end were read", flood_sent(0));
    snprintf(path, sizeof path, "%s/models--org--liesize/blobs", cache);
    CHECK_EQ_INT(count_suffix(path, ".incomplete"), 0);
    CHECK_EQ_INT(count_suffix(path, ""), 3 + 2); /* the three small files only */
    snprintf(path, sizeof path, "%s/models--org--liesize/snapshots/%s/model.safetensors", cache,
             HS_COMMIT);
    CHECK(access(path, F_OK) != 0 && errno == ENOENT);
}

/* No size and an ETag that is no hash, for every file: the small files (under the cap)
** come as they are; the weights, streamed without end, are cut at 64 MiB and not kept. */
CDB_TEST(no_size_is_capped) {
    char cache[PATH_MAX], path[PATH_MAX + 200], *folder = NULL;
    cdb_engine_hub_params p = cdb_engine_hub_params_default();
    const hs_file *cfg = hs_find(&g_srv, "open_clip_config.json");
    fresh_env("nosize", cache, sizeof cache);
    flood_sent(1);
    CHECK_RC(cdb_engine_hub_get("org/nosize", &p, &folder), CDB_CORRUPT);
    CHECK(strstr(cdb_errmsg(), "no size") != NULL);
    CHECK(folder == NULL);
    /* the cap, 64 MiB, less the weights' own bytes, was read at most */
    CHECK_MSG(flood_sent(0) < ((size_t)64 << 20) + SOCKET_SLACK, "%zu bytes past the end",
              flood_sent(0));
    snprintf(path, sizeof path, "%s/models--org--nosize/blobs", cache);
    CHECK_EQ_INT(count_suffix(path, ".incomplete"), 0);
    snprintf(path, sizeof path, "%s/models--org--nosize/snapshots/%s/model.safetensors", cache,
             HS_COMMIT);
    CHECK(access(path, F_OK) != 0 && errno == ENOENT);
    snprintf(path, sizeof path, "%s/models--org--nosize/snapshots/%s/open_clip_config.json",
             cache, HS_COMMIT);
    CHECK(same_bytes(path, cfg));
}

/* Every file under one ETag that is no hash: each must still be its own bytes (a blob
** named by such an ETag alone made every file the first one's). */
CDB_TEST(same_weak_etag_keeps_files_apart) {
    char cache[PATH_MAX], path[PATH_MAX + 200], *folder = NULL;
    cdb_engine_hub_params p = cdb_engine_hub_params_default();
    fresh_env("sametag", cache, sizeof cache);
    CHECK_OK(cdb_engine_hub_get("org/sametag", &p, &folder));
    int checked = 0;
    for (int i = 0; i < g_srv.n_files; i++) {
        snprintf(path, sizeof path, "%s/models--org--sametag/snapshots/%s/%s", cache,
                 HS_COMMIT, g_srv.files[i].name);
        if (access(path, F_OK) != 0) continue; /* a file the model does not need */
        CHECK_MSG(same_bytes(path, &g_srv.files[i]), "%s is not its own bytes",
                  g_srv.files[i].name);
        checked++;
    }
    CHECK(checked >= 2);
    cdb_free(folder);
}

CDB_TEST(full_disk) {
    char cache[PATH_MAX];
    cdb_engine_hub_params p = cdb_engine_hub_params_default();
    fresh_env("full", cache, sizeof cache);
    expect_refused(cdb_t_, "org/huge", &p, CDB_NOSPACE, CDB_ENGINE_E_DISK_FULL, "no space left");
    CHECK_EQ_INT(hs_count(&g_srv, "/cdn/", NULL), 0);
    CHECK(no_snapshot_file(cache, "models--org--huge"));
}

/* HF_HUB_OFFLINE=1: the cache only. A cache written by the layout's rules (as a
** Python user's huggingface_hub would) is found, with no request. */
CDB_TEST(offline_and_a_cache_made_by_hand) {
    char cache[PATH_MAX], dir[PATH_MAX + 200], path[PATH_MAX + 300], *folder = NULL;
    const char *commit2 = "fedcba9876543210fedcba9876543210fedcba98";
    cdb_engine_hub_params p = cdb_engine_hub_params_default();
    FILE *f;
    fresh_env("offline", cache, sizeof cache);
    setenv("HF_HUB_OFFLINE", "1", 1);
    expect_refused(cdb_t_, "org/tiny", &p, CDB_NOTFOUND, CDB_ENGINE_E_HUB_OFFLINE,
                   "HF_HUB_OFFLINE");
    /* models--org--handmade/{blobs/B, snapshots/C/model.safetensors -> ../../blobs/B,
    ** refs/main = C} */
    snprintf(dir, sizeof dir, "%s/models--org--handmade", cache);
    mkdir(cache, 0777);
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/blobs", dir);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/refs", dir);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/snapshots", dir);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/snapshots/%s", dir, commit2);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/blobs/%s", dir, g_srv.files[3].etag);
    CHECK((f = fopen(path, "wb")) != NULL);
    fwrite(g_srv.files[3].data, 1, g_srv.files[3].len, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/snapshots/%s/model.safetensors", dir, commit2);
    {
        char target[128];
        snprintf(target, sizeof target, "../../blobs/%s", g_srv.files[3].etag);
        CHECK_EQ_INT(symlink(target, path), 0);
    }
    snprintf(path, sizeof path, "%s/refs/main", dir);
    CHECK((f = fopen(path, "w")) != NULL);
    fputs(commit2, f);
    fclose(f);
    CHECK_OK(cdb_engine_hub_get("org/handmade", &p, &folder));
    snprintf(path, sizeof path, "%s/snapshots/%s", dir, commit2);
    CHECK_EQ_STR(folder, path);
    cdb_free(folder);
    folder = NULL;
    p.revision = commit2; /* a commit needs no ref */
    CHECK_OK(cdb_engine_hub_get("org/handmade", &p, &folder));
    cdb_free(folder);
    folder = NULL;
    p.revision = NULL;
    CHECK_EQ_INT(g_srv.n_log, 0);
    unsetenv("HF_HUB_OFFLINE");
    /* HF_HUB_CACHE wins over HF_HOME */
    setenv("HF_HUB_CACHE", cache, 1);
    setenv("HF_HOME", "/nonexistent", 1);
    CHECK_OK(cdb_engine_model_path("hf:org/handmade", NULL, &folder));
    cdb_free(folder);
    unsetenv("HF_HUB_CACHE");
}

/* The program: models get prints the folder; --list; models and init with --model hf:. */
CDB_TEST(cli_end_to_end) {
    char cache[PATH_MAX], want[PATH_MAX + 100], db[PATH_MAX];
    cli_run_result r;
    fresh_env("cli", cache, sizeof cache);
    {
        const char *args[] = {"models", "get", "org/tiny", NULL};
        cli_run(args, &r);
        snprintf(want, sizeof want, "%s/models--org--tiny/snapshots/%s\n", cache, HS_COMMIT);
        CHECK_MSG(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
        CHECK_EQ_STR(r.out, want);
        CHECK_EQ_STR(r.err, ""); /* no progress bar: stderr is no terminal */
        cli_run_free(&r);
    }
    {
        const char *args[] = {"models", "get", "--list", NULL};
        cli_run(args, &r);
        CHECK_EQ_INT(r.exit_code, 0);
        CHECK(strstr(r.out, "ViT-B-32 ") && strstr(r.out, "openai/clip-vit-base-patch32"));
        /* SigLIP2 runs whole now (its tokenizer.model through SentencePiece) */
        CHECK(strstr(r.out, "ViT-B-16-SigLIP2") && !strstr(r.out, "(needs"));
        CHECK(strstr(r.out, "ViT-SO400M-16-SigLIP2-384") != NULL);
        cli_run_free(&r);
    }
    {
        const char *args[] = {"models", "--model", "hf:org/tiny", "--json", NULL};
        hs_clear_log(&g_srv);
        cli_run(args, &r);
        CHECK_MSG(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
        CHECK(strstr(r.out, HS_COMMIT) != NULL);
        CHECK_EQ_INT(g_srv.n_log, 0); /* from the cache */
        cli_run_free(&r);
    }
    {
        const char *args[] = {"models", "get", "org/missing", NULL};
        cli_run(args, &r);
        CHECK_EQ_INT(r.exit_code, 1);
        CHECK(strstr(r.err, "no such repository") != NULL);
        CHECK_EQ_STR(r.out, "");
        cli_run_free(&r);
    }
    {
        const char *args[] = {"models", "get", "org/private", NULL};
        cli_run(args, &r);
        CHECK_EQ_INT(r.exit_code, 1);
        CHECK(strstr(r.err, "HF_TOKEN") != NULL);
        cli_run_free(&r);
    }
    {
        const char *args[] = {"models", "get", NULL};
        cli_run(args, &r);
        CHECK_EQ_INT(r.exit_code, 2);
        cli_run_free(&r);
    }
    snprintf(db, sizeof db, "%s/cli/db", g_tmp);
    {
        /* a model not cached yet is fetched where a path goes */
        const char *args[] = {"init", "--db", db, "--model", "hf:org/drop", NULL};
        g_srv.drops_left = 0;
        cli_run(args, &r);
        CHECK_MSG(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
        cli_run_free(&r);
    }
    {
        const char *env[] = {"HF_HUB_OFFLINE=1", NULL};
        const char *args[] = {"models", "--model", "hf:org/other", NULL};
        cli_run_in(NULL, args, env, &r);
        CHECK_EQ_INT(r.exit_code, 1);
        CHECK(strstr(r.err, "HF_HUB_OFFLINE") != NULL);
        cli_run_free(&r);
    }
}

static void setup(void) {
    char tmpl[] = "/tmp/cdb_test_hub_XXXXXX";
    snprintf(g_model_dir, sizeof g_model_dir, "%s/models/shapes-vit-tiny", CDB_SOURCE_DIR);
    if (!mkdtemp(tmpl) || hs_start(&g_srv, g_model_dir) != 0) {
        fprintf(stderr, "test_hub: cannot start the test server\n");
        exit(1);
    }
    snprintf(g_tmp, sizeof g_tmp, "%s", tmpl);
}

static void teardown(void) {
    char cmd[PATH_MAX + 16];
    hs_stop(&g_srv);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "test_hub: cannot remove %s\n", g_tmp);
}

#define main test_main
CDB_TEST_MAIN(parsers, get_layout_token_and_second_get, errors_401_404,
              dropped_connection_resumes, earlier_partial_download_resumes,
              corrupt_file_leaves_nothing, more_than_the_size_said_is_cut_off,
              no_size_is_capped, same_weak_etag_keeps_files_apart, full_disk,
              offline_and_a_cache_made_by_hand, cli_end_to_end)
#undef main

int main(int argc, char **argv) {
    int rc;
    setup();
    rc = test_main(argc, argv);
    teardown();
    return rc;
}
