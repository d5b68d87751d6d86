/*
** test_library_rules.c: what a library's rules and a user's paths mean when the disk
** does not cooperate (a hostile review's findings), through the real clipdb binary. The
** oracle is the library the test lays out (which photo lies where, which rule leaves it
** out) against `clipdb export` of the result, and the catalog read with SQLite.
**
**   unusable_rules_fail_closed  a .clipdbignore that is there but cannot be read in full
**                               (no permission and an I/O error, by the fault shim: root
**                               reads anything; over 1 MiB with its rule past 1 MiB; a
**                               symbolic link to a rules file; a folder), at the root and
**                               in a subfolder: the folder it governs is not walked
**                               (exit 3), so nothing it leaves out is taken in and nothing
**                               new in it either, its recorded photos are kept, `folders`
**                               and `errors` name it; readable again, a reindex walks it.
**                               Before the fix: exit 0, the left-out photos taken in.
**   rules_above_a_part_fail_closed  `ingest LIB/sub` with LIB's .clipdbignore unreadable:
**                               sub is not walked either (the rules above it count).
**   forget_acts_on_a_link       `forget LIB/junk`, a link to another root's folder, forgets
**                               nothing (exit 1, the link named); before the fix it forgot
**                               the other root's folder. A link that a root following links
**                               recorded photos through is forgotten as a folder of it.
**   verify_tells_unfinished     a forget killed before its index is renamed into place,
**                               and an ingest killed before a shard's fsync: verify says
**                               what is unfinished (exit 0: no damage) and what finishes
**                               it; a reindex does, and verify is clear. Before the fix:
**                               "ok" and nothing else.
** Skipped (77) without a model or the fault shim.
*/
#include <jansson.h>
#include <signal.h>
#include <sqlite3.h>

#include "lib_util.h"

/* ---- the library: lib/{2 photos, private/ 2, sub/ 2, sub/private/ 2} ------------------- */

static const char *const k_dirs[] = {"", "private", "sub", "sub/private"};

/* The library's photos: folder k_dirs[d] gets 2, named from d * 100 (names unique). */
static int make_lib(const char *lib) {
    for (int d = 0; d < 4; d++) {
        char dir[900];
        snprintf(dir, sizeof dir, "%s%s%s", lib, *k_dirs[d] ? "/" : "", k_dirs[d]);
        if (lu_generate(dir, 40 + (uint64_t)d, d * 100, 2) != 0) return -1;
    }
    return 0;
}

/* One more photo (number `first`) in lib/dir. */
static int add_photo(const char *lib, const char *dir, int first) {
    char p[900];
    snprintf(p, sizeof p, "%s%s%s", lib, *dir ? "/" : "", dir);
    return lu_generate(p, 60 + (uint64_t)first, first, 1);
}


/* The photo files under lib/dir (recursive), as relpaths of lib, into *v (heap). */
static void photos_under(const char *lib, const char *rel, char ***v, int *n) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s%s%s", lib, *rel ? "/" : "", rel);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char child[1400], full[1600];
        struct stat sb;
        if (e->d_name[0] == '.') continue;
        snprintf(child, sizeof child, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        snprintf(full, sizeof full, "%s/%s", lib, child);
        if (lstat(full, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) {
            photos_under(lib, child, v, n);
        } else if (S_ISREG(sb.st_mode)) {
            *v = realloc(*v, sizeof **v * (size_t)(*n + 1));
            (*v)[(*n)++] = strdup(child);
        }
    }
    if (d) closedir(d);
}

/* 1 when rel (relative to the library) lies in folder dir ("" : anywhere). */
static int in_dir(const char *rel, const char *dir) {
    size_t n = strlen(dir);
    return !n || (!strncmp(rel, dir, n) && rel[n] == '/');
}

/* The export of db, its paths under lib, equals as a set the photos under lib that
** keep(rel, ud) accepts. 0, or the number of differences (each printed). */
static int recorded_is(const char *db, const char *lib, int (*keep)(const char *, const void *),
                       const void *ud) {
    lu_export e;
    char **v = NULL;
    int n = 0, bad = 0, want = 0;
    if (lu_export_read(db, &e) != 0) return -1;
    photos_under(lib, "", &v, &n);
    for (int i = 0; i < n; i++) {
        char full[1400];
        int count = 0;
        snprintf(full, sizeof full, "%s/%s", lib, v[i]);
        lu_export_find(&e, full, &count);
        int k = keep(v[i], ud);
        want += k;
        if (count != k) {
            fprintf(stderr, "    %s: recorded %d times, want %d\n", v[i], count, k);
            bad++;
        }
        free(v[i]);
    }
    free(v);
    int under = 0;
    for (int i = 0; i < e.n; i++)
        under += !strncmp(e.paths[i], lib, strlen(lib)) && e.paths[i][strlen(lib)] == '/';
    if (under != want) {
        fprintf(stderr, "    %d paths recorded under %s, want %d\n", under, lib, want);
        bad++;
    }
    lu_export_free(&e);
    return bad;
}

/* ---- rules that cannot be read ------------------------------------------------------ */

enum { M_EACCES, M_EIO, M_BIG, M_LINK, M_FOLDER, M_COUNT };
static const char *const k_mode[] = {"eacces", "eio", "big", "link", "folder"};
/* what the walk problem's reason says for each way */
static const char *const k_why[] = {"cannot be read (Permission denied)",
                                    "cannot be read (Input/output error)",
                                    "is larger than 1 MiB", "is a symbolic link",
                                    "is not a regular file"};

/* lib/dir/.clipdbignore's path, in buf. */
static const char *rules_path(const char *lib, const char *dir, char *buf, size_t size) {
    snprintf(buf, size, "%s%s%s/.clipdbignore", lib, *dir ? "/" : "", dir);
    return buf;
}

/* lib/dir/.clipdbignore as a regular file leaving private/ out. */
static int rules_ok(const char *lib, const char *dir) {
    char p[1000], cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", rules_path(lib, dir, p, sizeof p));
    return system(cmd) == 0 && lu_write(p, "private/\n", 9) == 0 ? 0 : -1;
}

/* lib/dir/.clipdbignore made unusable in mode m, its rule still "private/"; env[0..1]
** get the fault shim's variables when m needs them (else env[0] is ""). */
static int rules_break(const char *lib, const char *dir, int m, const char *log,
                       char env[3][1200]) {
    char p[1000], target[1100];
    rules_path(lib, dir, p, sizeof p);
    env[0][0] = env[1][0] = env[2][0] = '\0';
    if (m == M_EACCES || m == M_EIO) {
        snprintf(env[0], sizeof env[0], "LD_PRELOAD=%s", CDB_FAULT_SHIM);
        snprintf(env[1], sizeof env[1], "CDB_FAULT_%s_MATCH=%s", m == M_EIO ? "EIO" : "EACCES", p);
        snprintf(env[2], sizeof env[2], "CDB_FAULT_LOG=%s", log);
        return 0;
    }
    if (remove(p) != 0) return -1;
    if (m == M_FOLDER) return mkdir(p, 0755);
    if (m == M_LINK) { /* a shared rules file beside the library, as people do */
        snprintf(target, sizeof target, "%s.rules", lib);
        return lu_write(target, "private/\n", 9) == 0 && symlink(target, p) == 0 ? 0 : -1;
    }
    FILE *f = fopen(p, "w"); /* M_BIG: 1.2 MiB of comments, then the rule */
    if (!f) return -1;
    for (int i = 0; i < 40000; i++) fprintf(f, "# a comment line of padding %06d\n", i);
    fputs("private/\n", f);
    return fclose(f);
}

/* keep() of recorded_is: everything but the folders named private at or below the
** folder with the rules (their rule: "private/"), and (when frozen is set) nothing new in
** or below that folder: the photos numbered 500 and up. */
typedef struct keep_ud {
    const char *rules;  /* the folder whose .clipdbignore says "private/" */
    const char *frozen; /* a folder not walked since the first ingest, or NULL */
} keep_ud;
static int keep_public(const char *rel, const void *ud_) {
    const keep_ud *ud = ud_;
    const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    const char *below = rel + (*ud->rules ? strlen(ud->rules) + 1 : 0);
    int is_new = atoi(base + 4) >= 500; /* img_NNNNNNN */
    int left_out = in_dir(rel, ud->rules) &&
                   (!strncmp(below, "private/", 8) || strstr(below, "/private/"));
    return !left_out && !(ud->frozen && is_new && in_dir(rel, ud->frozen));
}

/* 1 when the fault shim logged an injected fault into log. */
static int injected(const char *log) {
    char *text = cli_read_file(log, NULL);
    int yes = text && *text;
    free(text);
    return yes;
}

/* The scratch folder as its real path: the paths clipdb records and the fault shim
** sees are real paths. */
static int canonical_tmp(void) {
    char *canon = realpath(lu_tmp, NULL);
    if (!canon) return -1;
    snprintf(lu_tmp, sizeof lu_tmp, "%s", canon);
    free(canon);
    return 0;
}

/* The root's not_walked list of `folders --json`: count, and the first's path and reason
** (into path and why). */
static int not_walked(const char *db, char *path, char *why, size_t size) {
    cli_run_result r;
    json_error_t e;
    int n = -1;
    path[0] = why[0] = '\0';
    if (lu_expect((const char *[]){"folders", "--db", db, "--json", NULL}, 0, &r) != 0) return -1;
    json_t *doc = json_loads(r.out, 0, &e);
    json_t *nw = json_object_get(json_array_get(json_object_get(doc, "folders"), 0), "not_walked");
    if (json_is_array(nw)) {
        n = (int)json_array_size(nw);
        const char *p = json_string_value(json_object_get(json_array_get(nw, 0), "path"));
        const char *w = json_string_value(json_object_get(json_array_get(nw, 0), "reason"));
        snprintf(path, size, "%s", p ? p : "");
        snprintf(why, size, "%s", w ? w : "");
    }
    json_decref(doc);
    cli_run_free(&r);
    return n;
}

/* One way (m) of one rules file (lib/dir) failing, on a fresh library and database. */
static int one_unusable(int m, const char *dir) {
    char lib[700], db[700], log[700], env[3][1200], p[1000], path[1200], why[1200], base[800];
    const char *envp[4] = {NULL};
    cli_run_result r;
    int bad = 0, rc;
    snprintf(base, sizeof base, "unusable_%s_%s", k_mode[m], *dir ? "sub" : "root");
    LU_PATHS(base, CLI_AT(lib, "lib"), CLI_AT(db, "db"), CLI_AT(log, "fault.log"));
    if (make_lib(lib) != 0 || rules_ok(lib, dir) != 0) return -1;
    if (lu_db_of(db, (const char *[]){lib, NULL}, 0) != 0) return -1;
    keep_ud all = {dir, NULL}, frozen = {dir, dir};
    bad += recorded_is(db, lib, keep_public, &all) != 0;
    /* new photos in the folder the rules govern (one in its private/), one elsewhere */
    snprintf(p, sizeof p, "%s%sprivate", dir, *dir ? "/" : "");
    if (add_photo(lib, dir, 500) || add_photo(lib, p, 600) ||
        add_photo(lib, *dir ? "" : "sub", 700))
        return -1;
    if (rules_break(lib, dir, m, log, env) != 0) return -1;
    for (int i = 0, k = 0; i < 3; i++)
        if (env[i][0]) envp[k++] = env[i];
    rc = lu_run_env((const char *[]){"reindex", "--db", db, NULL}, envp, &r);
    if (rc != 3 || !strstr(r.err, ".clipdbignore")) {
        fprintf(stderr, "    %s: reindex exit %d (want 3)\n%s%s", base, rc, r.out, r.err);
        bad++;
    }
    cli_run_free(&r);
    if (envp[0] && !injected(log)) {
        fprintf(stderr, "    %s: the fault was not injected\n", base);
        bad++;
    }
    /* the governed folder: not walked (its rows kept, nothing new); the rest walked */
    bad += recorded_is(db, lib, keep_public, &frozen) != 0;
    snprintf(p, sizeof p, "%s%s%s", lib, *dir ? "/" : "", dir);
    if (not_walked(db, path, why, sizeof path) != 1 || strcmp(path, p) || !strstr(why, k_why[m]) ||
        !strstr(why, rules_path(lib, dir, p, sizeof p))) {
        fprintf(stderr, "    %s: folders --json not_walked: %s: %s\n", base, path, why);
        bad++;
    }
    lu_expect((const char *[]){"errors", "--db", db, NULL}, 0, &r);
    if (!strstr(r.out, "not walked: ")) {
        fprintf(stderr, "    %s: errors does not name it:\n%s", base, r.out);
        bad++;
    }
    cli_run_free(&r);
    /* readable again: walked again, all of it */
    if (rules_ok(lib, dir) != 0) return -1;
    bad += lu_expect((const char *[]){"reindex", "--db", db, "--quiet", NULL}, 0, NULL) != 0;
    bad += recorded_is(db, lib, keep_public, &all) != 0;
    bad += not_walked(db, path, why, sizeof path) != 0;
    return bad;
}

CDB_TEST(unusable_rules_fail_closed) {
    LU_NEED_SETUP();
    if (!CDB_FAULT_SHIM[0]) CDB_SKIP("no fault shim");
    CHECK_EQ_INT(canonical_tmp(), 0);
    int bad = 0;
    for (int m = 0; m < M_COUNT; m++)
        for (int at = 0; at < 2; at++)
            if (one_unusable(m, at ? "sub" : "") != 0) {
                fprintf(stderr, "    FAILED: %s %s\n", k_mode[m], at ? "in sub" : "at the root");
                bad++;
            }
    CHECK_EQ_INT(bad, 0);
}

CDB_TEST(rules_above_a_part_fail_closed) {
    char lib[700], db[700], log[700], sub[800], p[1000], env[3][1200], path[1200], why[1200];
    cli_run_result r;
    LU_NEED_SETUP();
    if (!CDB_FAULT_SHIM[0]) CDB_SKIP("no fault shim");
    CHECK_EQ_INT(canonical_tmp(), 0);
    LU_PATHS("above", CLI_AT(lib, "lib"), CLI_AT(db, "db"), CLI_AT(log, "fault.log"));
    CHECK_EQ_INT(make_lib(lib), 0);
    CHECK_EQ_INT(rules_ok(lib, ""), 0);
    CHECK_EQ_INT(lu_db_of(db, (const char *[]){lib, NULL}, 0), 0);
    keep_ud all = {"", NULL}, frozen = {"", "sub"};
    CHECK_EQ_INT(recorded_is(db, lib, keep_public, &all), 0);
    CHECK_EQ_INT(add_photo(lib, "sub", 500), 0);
    CHECK_EQ_INT(add_photo(lib, "sub/private", 600), 0);
    /* a part of the root, walked alone: lib's rules, above it, cannot be read */
    CHECK_EQ_INT(rules_break(lib, "", M_EACCES, log, env), 0);
    snprintf(sub, sizeof sub, "%s/sub", lib);
    CHECK_EQ_INT(lu_run_env((const char *[]){"ingest", "--db", db, sub, NULL},
                            (const char *[]){env[0], env[1], env[2], NULL}, &r),
                 3);
    cli_run_free(&r);
    CHECK(injected(log));
    CHECK_EQ_INT(recorded_is(db, lib, keep_public, &frozen), 0);
    CHECK_EQ_INT(not_walked(db, path, why, sizeof path), 1);
    CHECK_EQ_STR(path, sub);
    CHECK_MSG(strstr(why, rules_path(lib, "", p, sizeof p)) != NULL, "%s", why);
    /* readable: the part is walked, its private folder left out */
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, sub, "--quiet", NULL}, 0, NULL),
                 0);
    CHECK_EQ_INT(recorded_is(db, lib, keep_public, &all), 0);
    CHECK_EQ_INT(not_walked(db, path, why, sizeof path), 0);
}

/* ---- forget of a symbolic link --------------------------------------------------------- */

static int keep_all(const char *rel, const void *ud) {
    (void)rel, (void)ud;
    return 1;
}

CDB_TEST(forget_acts_on_a_link) {
    char lib[700], other[700], db[700], link[800], out[700], lib2[700], db2[700], p[900];
    cli_run_result r;
    LU_NEED_SETUP();
    CHECK_EQ_INT(canonical_tmp(), 0);
    LU_PATHS("link", CLI_AT(lib, "lib"), CLI_AT(other, "other"), CLI_AT(db, "db"),
             CLI_AT(out, "outside"), CLI_AT(lib2, "lib2"), CLI_AT(db2, "db2"));
    CHECK_EQ_INT(lu_generate(lib, 71, 0, 2), 0);
    snprintf(p, sizeof p, "%s/important", other);
    CHECK_EQ_INT(lu_generate(p, 72, 100, 3), 0);
    CHECK_EQ_INT(lu_generate(other, 73, 200, 1), 0);
    snprintf(link, sizeof link, "%s/junk", lib);
    CHECK_EQ_INT(symlink("../other/important", link), 0); /* planted by whoever writes in lib */
    CHECK_EQ_INT(lu_db_of(db, (const char *[]){lib, other, NULL}, 0), 0);
    CHECK_EQ_INT(recorded_is(db, other, keep_all, NULL), 0);
    CHECK_EQ_INT(lu_export_count(db), 6);
    for (int pass = 0; pass < 2; pass++) { /* as given, and with a trailing '/' */
        snprintf(p, sizeof p, "%s%s", link, pass ? "/" : "");
        CHECK_EQ_INT(lu_expect((const char *[]){"forget", "--db", db, p, NULL}, 1, &r), 1);
        CHECK_MSG(strstr(r.err, "is a symbolic link to") && strstr(r.err, "/other/important"),
                  "%s", r.err);
        cli_run_free(&r);
    }
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(recorded_is(db, other, keep_all, NULL), 0);
    CHECK_EQ_INT(lu_export_count(db), 6);

    /* a root that follows links: what it recorded through the link is its folder */
    CHECK_EQ_INT(lu_generate(lib2, 74, 300, 2), 0);
    CHECK_EQ_INT(lu_generate(out, 75, 400, 2), 0);
    snprintf(link, sizeof link, "%s/ext", lib2);
    CHECK_EQ_INT(symlink("../outside", link), 0);
    CHECK_EQ_INT(lu_init(db2), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db2, lib2, "--follow-symlinks",
                                            "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(lu_export_count(db2), 4);
    CHECK_EQ_INT(lu_expect((const char *[]){"forget", "--db", db2, link, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "Forgot ") && strstr(r.out, "/lib2/ext"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db2, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(recorded_is(db2, lib2, keep_all, NULL), 0); /* lib2's own 2: ext not walked */
    CHECK_EQ_INT(lu_export_count(db2), 2);
    struct stat sb;
    CHECK_EQ_INT(stat(lu_img(out, 400, p, sizeof p), &sb), 0); /* the photos stay on disk */
}

/* ---- verify and unfinished work -------------------------------------------------------- */

/* Pending rows without an error, read straight from the catalog (state 1: db.h). */
static int pending_in_catalog(const char *db) {
    char p[800];
    sqlite3 *s = NULL;
    sqlite3_stmt *st = NULL;
    int n = -1;
    snprintf(p, sizeof p, "%s/catalog.db", db);
    if (sqlite3_open_v2(p, &s, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(s, "SELECT count(*) FROM files WHERE state = 1 AND "
                              "coalesce(error, '') = ''", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(s);
    return n;
}

/* verify --json's "unfinished" object of db: its forget path (into forget) and files. */
static int unfinished(const char *db, char *forget, size_t size, int64_t *files) {
    cli_run_result r;
    json_error_t e;
    int rc = lu_expect((const char *[]){"verify", "--db", db, "--json", NULL}, 0, &r);
    json_t *doc = json_loads(r.out, 0, &e), *u = json_object_get(doc, "unfinished");
    const char *f = json_string_value(json_object_get(u, "forget"));
    snprintf(forget, size, "%s", f ? f : "");
    *files = json_is_object(u) ? json_integer_value(json_object_get(u, "files_pending")) : -1;
    if (!json_is_true(json_object_get(doc, "ok"))) rc = -1;
    json_decref(doc);
    cli_run_free(&r);
    return rc;
}

CDB_TEST(verify_tells_unfinished) {
    char lib[700], sub[800], db[700], log[700], env[2][1200], forget[1200], more[800];
    int64_t files = -1;
    cli_run_result r;
    LU_NEED_SETUP();
    if (!CDB_FAULT_SHIM[0]) CDB_SKIP("no fault shim");
    CHECK_EQ_INT(canonical_tmp(), 0);
    LU_PATHS("unfinished", CLI_AT(lib, "lib"), CLI_AT(db, "db"), CLI_AT(log, "fault.log"));
    snprintf(sub, sizeof sub, "%s/sub", lib);
    CHECK_EQ_INT(lu_generate(lib, 81, 0, 2), 0);
    CHECK_EQ_INT(lu_generate(sub, 82, 100, 3), 0);
    CHECK_EQ_INT(lu_db_of(db, (const char *[]){lib, NULL}, 0), 0);
    /* a forget killed once its rows are gone, before its index is renamed into place */
    snprintf(env[0], sizeof env[0], "CDB_FAULT_KILL_RENAME=%s/index/", db);
    snprintf(env[1], sizeof env[1], "CDB_FAULT_LOG=%s", log);
    CHECK_EQ_INT(lu_run_env((const char *[]){"forget", "--db", db, sub, NULL},
                            (const char *[]){"LD_PRELOAD=" CDB_FAULT_SHIM, env[0], env[1], NULL},
                            NULL),
                 -SIGKILL);
    CHECK_EQ_INT(unfinished(db, forget, sizeof forget, &files), 0);
    CHECK_EQ_STR(forget, sub);
    CHECK_EQ_INT((int)files, 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"verify", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "unfinished: the forget of ") && strstr(r.out, "'clipdb reindex'") &&
                  strstr(r.out, "work unfinished"),
              "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(unfinished(db, forget, sizeof forget, &files), 0);
    CHECK_EQ_STR(forget, "");
    CHECK_EQ_INT(lu_export_count(db), 2); /* the forget was finished */

    /* an ingest killed before a shard's fsync: files pending, as the catalog says */
    snprintf(more, sizeof more, "%s/more", lib);
    CHECK_EQ_INT(lu_generate(more, 83, 200, 4), 0);
    snprintf(env[0], sizeof env[0], "CDB_FAULT_KILL_FSYNC=%s/shards/", db);
    CHECK_EQ_INT(lu_run_env((const char *[]){"ingest", "--db", db, more, NULL},
                            (const char *[]){"LD_PRELOAD=" CDB_FAULT_SHIM, env[0], env[1], NULL},
                            NULL),
                 -SIGKILL);
    int pending = pending_in_catalog(db);
    CHECK(pending > 0);
    CHECK_EQ_INT(unfinished(db, forget, sizeof forget, &files), 0);
    CHECK_EQ_INT((int)files, pending);
    CHECK_EQ_INT(lu_expect((const char *[]){"verify", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "pending (an ingest or reindex cut short"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(unfinished(db, forget, sizeof forget, &files), 0);
    CHECK_EQ_INT((int)files, 0);
    CHECK_EQ_INT(lu_export_count(db), 6);
}

CDB_TEST_MAIN_TMP(lu_tmp, lu_rm_rf, unusable_rules_fail_closed, rules_above_a_part_fail_closed,
                  forget_acts_on_a_link, verify_tells_unfinished)
