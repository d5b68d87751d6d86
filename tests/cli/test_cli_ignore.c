/*
** test_cli_ignore.c: .clipdbignore files through the binary. A tree of photos with
** rule files in several folders (a left-out folder, a glob, a deeper '!' rule, a rule
** file inside a folder below the root, a rule that names a folder by '**'); the oracle
** is `git check-ignore` on the same tree, with the rule files copied as .gitignore:
** ingest must add exactly the photos git does not ignore; a rule added later makes
** reindex drop exactly the photos it newly leaves out, and `folders` lists the rule
** files where they were put. `ingest --exclude` against the
** same oracle (the rules as a .gitignore for git only), and remembered by reindex.
** `forget` of a subfolder against git with the folder's rule, and its edges (a link
** to it is refused: forget acts on a link itself).
** Skipped (77) without git or a model.
*/
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cdb_test.h"
#include "cli_run.h"

/* stb is third-party code: its warnings are silenced (as world/stb_write.c does) */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#endif
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

static const char *const k_photos[] = {
    "a.png", "b.tmp.png", "private/p1.png", "private/deep/p2.png", "x/c.tmp.png",
    "x/keep.png", "x/y/d.png", "x/y/cache/e.png", "z/cache/f.png", "z/g.png", NULL};

/* root/rel, its folders made first. */
static int put(const char *root, const char *rel, const void *data, size_t n) {
    char path[1200], dir[1300];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(dir, sizeof dir, "mkdir -p \"$(dirname '%s')\"", path);
    if (system(dir) != 0) return -1;
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

/* A rule file at root/dir as .clipdbignore and .gitignore. */
static int rules(const char *root, const char *dir, const char *text) {
    char rel[300];
    snprintf(rel, sizeof rel, "%s%s.clipdbignore", dir, *dir ? "/" : "");
    if (put(root, rel, text, strlen(text))) return -1;
    snprintf(rel, sizeof rel, "%s%s.gitignore", dir, *dir ? "/" : "");
    return put(root, rel, text, strlen(text));
}

/* Photo i's path for make_photos (seed > 0: an "n" before the file name). */
static void photo_rel(int i, int seed, char *rel, size_t cap) {
    const char *slash = strrchr(k_photos[i], '/');
    if (seed)
        snprintf(rel, cap, "%.*sn%s", slash ? (int)(slash - k_photos[i] + 1) : 0, k_photos[i],
                 slash ? slash + 1 : k_photos[i]);
    else
        snprintf(rel, cap, "%s", k_photos[i]);
}

/* k_photos under root, each its own 16x16 picture (seed + index), at photo_rel's names
** (seed > 0: new photos beside the old ones). 0 or -1. */
static int make_photos(const char *root, int seed) {
    for (int i = 0; k_photos[i]; i++) {
        unsigned char px[16 * 16 * 3];
        char rel[300], path[1200];
        for (int k = 0; k < (int)sizeof px; k++)
            px[k] = (unsigned char)(k * (i + seed + 3) + (i + seed) * 41);
        photo_rel(i, seed, rel, sizeof rel);
        snprintf(path, sizeof path, "%s/%s", root, rel);
        if (put(root, rel, "", 0) || !stbi_write_png(path, 16, 16, 3, px, 16 * 3)) return -1;
    }
    return 0;
}

/* How many of the photos make_photos(root, seed) made git does not ignore. */
static int git_kept(const char *root, int seed) {
    char cmd[1600], rel[300];
    int kept = 0;
    for (int i = 0; k_photos[i]; i++) {
        photo_rel(i, seed, rel, sizeof rel);
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null "
                 "XDG_CONFIG_HOME=/nonexistent git check-ignore -q --no-index '%s'",
                 root, rel);
        int rc = system(cmd);
        if (rc == -1 || WEXITSTATUS(rc) > 1) return -1;
        kept += WEXITSTATUS(rc) == 1;
    }
    return kept;
}

/* A fresh tmp (tmp[512]) with the photos in a git repository, lib = tmp/photos
** (lib[600]), and the database's path db = tmp/db (db[600]). 0 or -1. */
static int make_library(char *tmp, char *lib, char *db) {
    char cmd[1400];
    if (!cli_tmpdir(tmp, 512)) return -1;
    snprintf(lib, 600, "%s/photos", tmp);
    snprintf(db, 600, "%s/db", tmp);
    snprintf(cmd, sizeof cmd, "git init -q '%s'", lib);
    return make_photos(lib, 0) == 0 && system(cmd) == 0 ? 0 : -1;
}

/* In a CDB_TEST: skips without a model or git, else makes the library. */
#define NEED_LIBRARY(model, tmp, lib, db)                                               \
    const char *model = cli_find_model();                                               \
    if (!model) CDB_SKIP("no model: set CLIPDB_TEST_MODEL or add models/<name>/");      \
    if (system("git --version >/dev/null 2>&1") != 0) CDB_SKIP("git is not installed"); \
    if (make_library(tmp, lib, db) != 0) CDB_TEST_FAIL_("cannot make the library")

static int64_t jint(const cli_run_result *r, const char *key) {
    json_error_t e;
    json_t *j = json_loads(r->out, 0, &e);
    int64_t v = j ? json_integer_value(json_object_get(j, key)) : -1;
    json_decref(j);
    return v;
}

CDB_TEST(clipdbignore_like_git) {
    char tmp[512], lib[600], db[600], cmd[1400];
    cli_run_result r;
    NEED_LIBRARY(model, tmp, lib, db);
    CHECK_EQ_INT(rules(lib, "", "# left out\nprivate/\n*.tmp.png\n"), 0);
    CHECK_EQ_INT(rules(lib, "x", "!c.tmp.png\n**/cache/\n"), 0);
    int kept = git_kept(lib, 0);
    CHECK(kept > 0 && kept < 10);

    cli_run((const char *[]){"init", "--db", db, "--model", model, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    cli_run_free(&r);
    cli_run((const char *[]){"ingest", "--db", db, lib, "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK_EQ_INT((int)jint(&r, "added"), kept);
    cli_run_free(&r);

    /* a rule file added later: reindex drops what it leaves out, and nothing else */
    CHECK_EQ_INT(rules(lib, "z", "g.png\n"), 0);
    int kept2 = git_kept(lib, 0);
    CHECK_EQ_INT(kept2, kept - 1);
    cli_run((const char *[]){"reindex", "--db", db, "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK_EQ_INT((int)jint(&r, "deleted"), kept - kept2);
    CHECK_EQ_INT((int)jint(&r, "added"), 0);
    cli_run_free(&r);
    /* folders lists the rule files the scans met: the oracle is where they were put */
    {
        static const char *const want[] = {"/.clipdbignore", "/x/.clipdbignore",
                                           "/z/.clipdbignore"};
        json_error_t e;
        cli_run((const char *[]){"folders", "--db", db, "--json", NULL}, &r);
        CHECK_EQ_INT(r.exit_code, 0);
        json_t *doc = json_loads(r.out, 0, &e);
        json_t *ig = json_object_get(json_array_get(json_object_get(doc, "folders"), 0),
                                     "ignore_files");
        CHECK_EQ_INT((int)json_array_size(ig), 3);
        for (size_t i = 0; i < 3 && i < json_array_size(ig); i++) {
            snprintf(cmd, sizeof cmd, "%s%s", lib, want[i]);
            CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(ig, i), "path")), cmd);
        }
        json_decref(doc);
        cli_run_free(&r);
        cli_run((const char *[]){"folders", "--db", db, NULL}, &r);
        snprintf(cmd, sizeof cmd, "left out: the rules in %s/z/.clipdbignore", lib);
        CHECK(strstr(r.out, cmd) != NULL);
        cli_run_free(&r);
    }
    /* the photos are all still there: leaving out never deletes */
    struct stat st;
    snprintf(cmd, sizeof cmd, "%s/z/g.png", lib);
    CHECK(stat(cmd, &st) == 0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK_EQ_INT(system(cmd), 0);
}

/* ingest --exclude: the same oracle (the rules as the root's .gitignore for git only);
** remembered: a reindex after new photos appear under a left-out folder adds none of
** them, and `folders --json` lists the rules. */
CDB_TEST(exclude_is_remembered) {
    char tmp[512], lib[600], db[600], cmd[1400];
    cli_run_result r;
    NEED_LIBRARY(model, tmp, lib, db);
    static const char rules_text[] = "private/\n**/cache/\n";
    CHECK_EQ_INT(put(lib, ".gitignore", rules_text, strlen(rules_text)), 0);
    int kept = git_kept(lib, 0);
    CHECK(kept > 0 && kept < 10);
    cli_run((const char *[]){"init", "--db", db, "--model", model, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    cli_run_free(&r);
    cli_run((const char *[]){"ingest", "--db", db, lib, "--exclude", "private/", "--exclude",
                             "**/cache/", "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK_EQ_INT((int)jint(&r, "added"), kept);
    cli_run_free(&r);
    CHECK_EQ_INT(make_photos(lib, 100), 0); /* new photos everywhere, left-out folders too */
    cli_run((const char *[]){"reindex", "--db", db, "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK_EQ_INT((int)jint(&r, "added"), git_kept(lib, 100));
    cli_run_free(&r);
    cli_run((const char *[]){"folders", "--db", db, "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    json_error_t e;
    json_t *doc = json_loads(r.out, 0, &e);
    json_t *ex = json_object_get(json_array_get(json_object_get(doc, "folders"), 0), "excludes");
    CHECK_EQ_INT((int)json_array_size(ex), 2);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(ex, 1), "pattern")), "**/cache/");
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(ex, 1), "kind")), "exclude");
    json_decref(doc);
    cli_run_free(&r);
    cli_run((const char *[]){"ingest", "--db", db, lib, "--exclude", "", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 2);
    cli_run_free(&r);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK_EQ_INT(system(cmd), 0);
}

/* folders --json's first folder: its "files" and "vectors" counts, and its excludes
** as "kind pattern" lines. */
static void first_folder(const char *db, int64_t *files, int64_t *vectors, char *ex, size_t cap) {
    cli_run_result r;
    json_error_t e;
    size_t at = 0, i;
    json_t *v;
    cli_run((const char *[]){"folders", "--db", db, "--json", NULL}, &r);
    json_t *doc = json_loads(r.out, 0, &e);
    json_t *f = json_array_get(json_object_get(doc, "folders"), 0);
    *files = f ? json_integer_value(json_object_get(f, "files")) : -1;
    *vectors = f ? json_integer_value(json_object_get(f, "vectors")) : -1;
    ex[0] = '\0';
    json_array_foreach(json_object_get(f, "excludes"), i, v) {
        at += (size_t)snprintf(ex + at, cap - at, "%s %s\n",
                               json_string_value(json_object_get(v, "kind")),
                               json_string_value(json_object_get(v, "pattern")));
        if (at >= cap) break;
    }
    json_decref(doc);
    cli_run_free(&r);
}

/* forget of a folder inside a root: the oracle is git with "/x/" in the root's
** .gitignore (what the forget must amount to): the files and vectors left are the
** photos git keeps, a reindex after new photos appear adds only those git keeps, and
** the rule is listed. Then the edges: a folder below the forgotten one, the same
** folder through "..", a trailing '/' (already left out), a symbolic link to it
** (refused: nothing is recorded at the link), a file (refused), a folder that is
** neither on disk nor recorded (refused), ingest of a folder inside the forgotten one
** (refused), and ingest of the forgotten folder itself, which takes it in again (git
** without the rule). */
CDB_TEST(forget_subfolder_leaves_it_out) {
    char tmp[512], lib[600], db[600], p[1400], link[700], ex[512];
    int64_t files, vectors;
    cli_run_result r;
    NEED_LIBRARY(model, tmp, lib, db);
    CHECK_EQ_INT(cli_init_ingest(db, model, lib), 0);
    CHECK_EQ_INT(put(lib, ".gitignore", "/x/\n", 4), 0);
    int kept = git_kept(lib, 0);
    CHECK(kept > 0 && kept < 10);

    snprintf(p, sizeof p, "%s/x/", lib); /* a trailing '/' */
    cli_run((const char *[]){"forget", "--db", db, p, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK(strstr(r.out, "Forgot ") && strstr(r.out, "leave it out"));
    cli_run_free(&r);
    first_folder(db, &files, &vectors, ex, sizeof ex);
    CHECK_EQ_INT((int)files, kept);
    CHECK_EQ_INT((int)vectors, kept);
    CHECK_EQ_STR(ex, "forgotten /x/\n");
    cli_run((const char *[]){"verify", "--db", db, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    cli_run_free(&r);

    CHECK_EQ_INT(make_photos(lib, 100), 0); /* new photos everywhere, x/ too */
    cli_run((const char *[]){"reindex", "--db", db, "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK_EQ_INT((int)jint(&r, "added"), git_kept(lib, 100));
    CHECK_EQ_INT((int)jint(&r, "deleted"), 0);
    cli_run_free(&r);
    cli_run((const char *[]){"ingest", "--db", db, lib, "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK_EQ_INT((int)jint(&r, "added"), 0);
    cli_run_free(&r);

    /* already left out: below it, through ".." */
    const char *again[2];
    snprintf(p, sizeof p, "%s/x/y", lib);
    again[0] = strdup(p);
    snprintf(p, sizeof p, "%s/z/../x", lib);
    again[1] = strdup(p);
    for (int i = 0; i < 2; i++) {
        cli_run((const char *[]){"forget", "--db", db, again[i], NULL}, &r);
        CHECK_EQ_INT(r.exit_code, 0);
        CHECK(strstr(r.out, "left out already") != NULL);
        CHECK(strstr(r.out, "/x was forgotten") != NULL);
        cli_run_free(&r);
    }
    /* a symbolic link to it: forget acts on the link itself, which holds nothing */
    snprintf(link, sizeof link, "%s/link", tmp);
    snprintf(p, sizeof p, "%s/x", lib);
    CHECK_EQ_INT(symlink(p, link), 0);
    cli_run((const char *[]){"forget", "--db", db, link, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 1);
    CHECK(strstr(r.err, "is a symbolic link to ") != NULL);
    cli_run_free(&r);
    first_folder(db, &files, &vectors, ex, sizeof ex);
    CHECK_EQ_STR(ex, "forgotten /x/\n");

    /* a file inside the root, and a folder neither there nor recorded: refused */
    snprintf(p, sizeof p, "%s/a.png", lib);
    cli_run((const char *[]){"forget", "--db", db, p, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 1);
    CHECK(strstr(r.err, "is a file inside") != NULL);
    cli_run_free(&r);
    snprintf(p, sizeof p, "%s/nowhere", lib);
    cli_run((const char *[]){"forget", "--db", db, p, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 1);
    cli_run_free(&r);
    first_folder(db, &files, &vectors, ex, sizeof ex);
    CHECK_EQ_INT((int)files, kept + git_kept(lib, 100));

    /* ingest of a folder inside the forgotten one: refused, naming the folder */
    cli_run((const char *[]){"ingest", "--db", db, again[0], NULL}, &r);
    CHECK(r.exit_code != 0);
    CHECK(strstr(r.err, "left out") != NULL);
    cli_run_free(&r);
    /* ingest of the forgotten folder: taken in again, all of it (git without the rule) */
    CHECK_EQ_INT(put(lib, ".gitignore", "", 0), 0);
    snprintf(p, sizeof p, "%s/x", lib);
    cli_run((const char *[]){"ingest", "--db", db, p, "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    cli_run_free(&r);
    first_folder(db, &files, &vectors, ex, sizeof ex);
    CHECK_EQ_INT((int)files, git_kept(lib, 0) + git_kept(lib, 100));
    CHECK_EQ_INT((int)vectors, (int)files);
    CHECK_EQ_STR(ex, "");
    free((char *)again[0]);
    free((char *)again[1]);
    snprintf(p, sizeof p, "rm -rf '%s'", tmp);
    CHECK_EQ_INT(system(p), 0);
}

CDB_TEST_MAIN(clipdbignore_like_git, exclude_is_remembered, forget_subfolder_leaves_it_out)
