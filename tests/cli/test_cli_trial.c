/*
** test_cli_trial.c: the CLI items of issue 25's trial ("the rest of the same trial"),
** through the clipdb binary and a shell on a small generated library:
**   - --json on a failed run still prints one JSON document on stdout ("status":
**     "error", the exit code, the message), for every command that takes --json,
**     usage errors included;
**   - query weights: only their ratios matter, so huge and tiny ones search as the
**     plain terms do ("1e308*red + 1e308*blue" is "red + blue", exit 0); a weight
**     beyond a double says it overflows, and only terms that cancel get that hint;
**   - search --image - reads the example image from standard input (the same hits as
**     the file's path); an empty input, or '-' for both text and image, is a usage
**     error;
**   - a search of an empty database (or one whose photos all failed) exits 0 with no
**     hits and says on stderr that it is empty and how to fill it;
**   - export refuses the database's own folder and anything inside it as --out (also
**     through a link or '..'), writing nothing there; exporting again into one folder
**     in the other format leaves only the new format's files;
**   - forget says the space it really freed (the database folder's files measured
**     before and after; thumbs.db shrinks too), and stats' disk figure agrees;
**   - verify counts every vector lost with a missing shard, past the listed problems'
**     cap (1,100 photos in one shard: 1,100 lost, not "at least 999");
**   - a write command run by a user who can only read the database (uid 65534 in a
**     forked child; a read-only bind mount) says exactly that, not a SQLite error,
**     and changes nothing; reading still works (needs root: skipped without it).
** Needs a model ($CLIPDB_TEST_MODEL or the bundled one); skips without one.
*/
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "cdb_test.h"
#include "cli_run.h"

static char g_tmp[512], g_db[700];

static int sh(const char *cmd, char **out, char **err) {
    return cli_sh(g_tmp, g_db, cmd, out, err);
}
static int sh_err(const char *cmd, int want, const char *says) {
    return cli_sh_err(g_tmp, g_db, cmd, want, says);
}

#define NEED_LIBRARY() CLI_NEED_LIBRARY(g_tmp, g_db)

/* ---- 1. --json on a failed run ---------------------------------------------------- */

/* Runs cmd, which must fail with exit code want, and checks that stdout is one JSON
** object {"status": "error", "exit_code": want, "message": <has msg>}. 0 when it is. */
static int json_failure_is(const char *cmd, int want, const char *msg, char *why, size_t n) {
    char *out = NULL, *err = NULL;
    json_error_t je;
    json_t *doc = NULL;
    int rc = sh(cmd, &out, &err), ok = 0;
    const char *m = NULL;
    if (rc != want) {
        snprintf(why, n, "%s: exit %d, want %d (%s)", cmd, rc, want, err ? err : "");
    } else if (!(doc = json_loads(out ? out : "", 0, &je)) || !json_is_object(doc)) {
        snprintf(why, n, "%s: stdout is not one JSON object (%s): '%s'", cmd, je.text,
                 out ? out : "");
    } else if (!json_is_string(json_object_get(doc, "status")) ||
               strcmp(json_string_value(json_object_get(doc, "status")), "error") ||
               json_integer_value(json_object_get(doc, "exit_code")) != want ||
               !(m = json_string_value(json_object_get(doc, "message"))) ||
               !strstr(m, msg) || strstr(m, "clipdb: error:")) {
        snprintf(why, n, "%s: want status error, exit_code %d, a message with '%s': '%s'", cmd,
                 want, msg, out);
    } else {
        ok = 1;
    }
    json_decref(doc);
    free(out);
    free(err);
    return ok ? 0 : -1;
}

CDB_TEST(json_on_failure) {
    static const struct {
        const char *cmd, *msg;
        int rc;
    } cases[] = {
        /* usage errors, before anything runs */
        {"\"$CLIPDB\" search --db \"$DB\" --json --bogus red", "unknown option --bogus", 2},
        {"\"$CLIPDB\" search --db \"$DB\" --json -k 0 red", "-k", 2},
        {"\"$CLIPDB\" search --db \"$DB\" --json", "no QUERY given", 2},
        {"\"$CLIPDB\" stats --db \"$DB\" --json extra", "unexpected argument", 2},
        {"\"$CLIPDB\" verify --db \"$DB\" --json --sample 0.5", "--sample goes with --deep", 2},
        {"\"$CLIPDB\" errors --db \"$DB\" --json extra", "unexpected argument", 2},
        {"\"$CLIPDB\" index --db \"$DB\" --json frob", "unknown subcommand", 2},
        {"\"$CLIPDB\" folders --db \"$DB\" --json --bogus", "unknown option", 2},
        {"\"$CLIPDB\" ingest --db \"$DB\" --json --batch x .", "--batch", 2},
        {"\"$CLIPDB\" reindex --db \"$DB\" --json --bogus", "unknown option", 2},
        {"\"$CLIPDB\" models --json --bogus", "unknown option", 2},
        {"\"$CLIPDB\" tokenize --json --bogus x", "unknown option", 2},
        /* failures of the command itself */
        {"\"$CLIPDB\" search --db \"$DB/nope\" --json red", "no database at", 1},
        {"\"$CLIPDB\" stats --db \"$DB/nope\" --json", "no database at", 1},
        {"\"$CLIPDB\" verify --db \"$DB/nope\" --json", "no database at", 1},
        {"\"$CLIPDB\" errors --db \"$DB/nope\" --json", "no database at", 1},
        {"\"$CLIPDB\" folders --db \"$DB/nope\" --json", "no database at", 1},
        {"\"$CLIPDB\" index info --db \"$DB/nope\" --json", "no database at", 1},
        {"\"$CLIPDB\" ingest --db \"$DB\" --json \"$DB/../no-such-folder\"", "cannot ingest", 1},
        {"\"$CLIPDB\" search --db \"$DB\" --json \"red - red\"", "zero", 2},
        {"\"$CLIPDB\" models --json --model /no/such/model", "/no/such/model", 1},
    };
    char why[4096];
    NEED_LIBRARY();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(json_failure_is(cases[i].cmd, cases[i].rc, cases[i].msg, why, sizeof why) == 0,
                  "%s", why);
    /* a hint goes with its error; without --json nothing reaches stdout */
    {
        char *out = NULL;
        CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB/nope\" --json red", &out, NULL), 1);
        CHECK_MSG(out && strstr(out, "\"hint\": \"run 'clipdb init"), "%s", out);
        free(out);
        CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB/nope\" red", &out, NULL), 1);
        CHECK_MSG(out && !*out, "'%s'", out);
        free(out);
    }
}

/* ---- 2. huge and tiny weights ---------------------------------------------------- */

CDB_TEST(weights_overflow) {
    static const char *const same[][2] = {
        {"1e308*red + 1e308*blue", "red + blue"},
        {"1e308*red - 1e307*blue", "red - 0.1*blue"},
        {"1e-50*red", "red"},
        {"3e38*red + 3e38*blue", "red + blue"}, /* past a float's range */
    };
    char cmd[512], *a = NULL, *b = NULL, *err = NULL;
    NEED_LIBRARY();
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        snprintf(cmd, sizeof cmd, "\"$CLIPDB\" search --db \"$DB\" -k 5 \"%s\"", same[i][0]);
        CHECK_EQ_INT(sh(cmd, &a, &err), 0);
        CHECK_MSG(err && !*err, "%s: %s", same[i][0], err);
        free(err);
        snprintf(cmd, sizeof cmd, "\"$CLIPDB\" search --db \"$DB\" -k 5 \"%s\"", same[i][1]);
        CHECK_EQ_INT(sh(cmd, &b, NULL), 0);
        CHECK_MSG(a && b && *a && !strcmp(a, b), "%s:\n%s\nvs %s:\n%s", same[i][0], a, same[i][1],
                  b);
        free(a);
        free(b);
    }
    CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB\" \"1e309*red + blue\"", NULL, &err), 2);
    CHECK_MSG(err && strstr(err, "the weight of 'red' is infinite or overflows") &&
                  !strstr(err, "cancel"),
              "%s", err);
    free(err);
    CHECK_EQ_INT(sh_err("\"$CLIPDB\" search --db \"$DB\" \"1e308*red - 1e308*red\"", 2,
                        "the terms may cancel out"),
                 0);
}

/* ---- 3. search --image - ------------------------------------------------------------ */

CDB_TEST(image_from_stdin) {
    char *a = NULL, *b = NULL, *err = NULL;
    const char *photo =
        "\"$(dirname \"$DB\")/photos/$(ls \"$(dirname \"$DB\")/photos\" | head -1)\"";
    char cmd[1024];
    NEED_LIBRARY();
    snprintf(cmd, sizeof cmd, "\"$CLIPDB\" search --db \"$DB\" -k 5 --image %s", photo);
    CHECK_EQ_INT(sh(cmd, &a, NULL), 0);
    snprintf(cmd, sizeof cmd, "\"$CLIPDB\" search --db \"$DB\" -k 5 --image - < %s", photo);
    CHECK_EQ_INT(sh(cmd, &b, &err), 0);
    CHECK_MSG(a && b && *a && !strcmp(a, b) && strstr(a, "1.0000"), "by path:\n%s\nstdin:\n%s%s",
              a, b, err);
    free(a), free(b), free(err);
    /* with text, and in --json the image given as '-' */
    snprintf(cmd, sizeof cmd, "\"$CLIPDB\" search --db \"$DB\" -k 3 --json --image - red < %s",
             photo);
    CHECK_EQ_INT(sh(cmd, &a, NULL), 0);
    CHECK_MSG(a && strstr(a, "\"images\": [\n    \"-\"\n  ]") && strstr(a, "\"count\": 3"), "%s",
              a);
    free(a);
    CHECK_EQ_INT(sh_err("\"$CLIPDB\" search --db \"$DB\" --image - </dev/null", 2,
                        "standard input is empty"),
                 0);
    CHECK_EQ_INT(sh_err("echo red | \"$CLIPDB\" search --db \"$DB\" --image - -", 2,
                        "not both"),
                 0);
    CHECK_EQ_INT(sh_err("echo red | \"$CLIPDB\" search --db \"$DB\" --image -", 1,
                        "cannot use the query image"),
                 0);
}

/* ---- 4. a search of an empty database ------------------------------------------------ */

CDB_TEST(empty_database_said) {
    char *out = NULL, *err = NULL;
    NEED_LIBRARY();
    CHECK_EQ_INT(sh("\"$CLIPDB\" init -q --db \"$DB.empty\" && "
                    "\"$CLIPDB\" search --db \"$DB.empty\" red",
                    &out, &err),
                 0);
    CHECK_MSG(out && !*out, "'%s'", out);
    CHECK_MSG(err && strstr(err, "is empty: add photos with 'clipdb ingest PATH'"), "%s", err);
    free(out), free(err);
    CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB.empty\" --json red", &out, &err), 0);
    CHECK_MSG(out && strstr(out, "\"count\": 0") && err && strstr(err, "is empty"), "%s%s", out,
              err);
    free(out), free(err);
    CHECK_EQ_INT(sh("\"$CLIPDB\" search -q --db \"$DB.empty\" red", NULL, &err), 0);
    CHECK_MSG(err && !*err, "-q: %s", err);
    free(err);
    /* photos recorded, none usable: not "empty", but where to look */
    CHECK_EQ_INT(sh("mkdir -p \"$DB.bad\" && echo junk >\"$DB.bad/x.jpg\" && "
                    "\"$CLIPDB\" init -q --db \"$DB.bad.db\" && "
                    "\"$CLIPDB\" ingest -q --db \"$DB.bad.db\" \"$DB.bad\"; "
                    "\"$CLIPDB\" search --db \"$DB.bad.db\" red",
                    NULL, &err),
                 0);
    CHECK_MSG(err && strstr(err, "has a vector of model") && strstr(err, "'clipdb errors'") &&
                  !strstr(err, "is empty"),
              "%s", err);
    free(err);
    /* a database with photos and no hit for other reasons says nothing of the kind */
    CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB\" --min-score 0.99 red", NULL, &err), 0);
    CHECK_MSG(err && !strstr(err, "empty") && strstr(err, "--min-score"), "%s", err);
    free(err);
}

/* ---- 5. export's --out --------------------------------------------------------------- */

/* The names in folder dir, sorted, joined with spaces (heap). */
static char *names_in(const char *dir) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "ls \"%s\" | tr \"\\n\" \" \"", dir);
    sh(cmd, &out, NULL);
    return out;
}

CDB_TEST(export_out_checked) {
    static const char *const inside[] = {"\"$DB\"", "\"$DB/\"", "\"$DB/shards\"",
                                         "\"$DB/new\"", "\"$DB/../photos/../clipdb\"",
                                         "\"$DB.link\"", "\"$DB.link/index\""};
    char cmd[1024], *before = NULL, *after = NULL, *err = NULL, dir[800];
    NEED_LIBRARY();
    before = names_in(g_db);
    CHECK_EQ_INT(sh("ln -sfn \"$DB\" \"$DB.link\"", NULL, NULL), 0);
    for (size_t i = 0; i < sizeof inside / sizeof inside[0]; i++) {
        snprintf(cmd, sizeof cmd, "\"$CLIPDB\" export --db \"$DB\" --out %s", inside[i]);
        CHECK_EQ_INT(sh(cmd, NULL, &err), 2);
        CHECK_MSG(err && strstr(err, "in the database's own folder"), "%s: %s", inside[i], err);
        free(err);
    }
    after = names_in(g_db);
    CHECK_MSG(before && after && !strcmp(before, after), "before: %s\nafter: %s", before, after);
    free(before), free(after);
    snprintf(dir, sizeof dir, "%s/shards", g_db);
    after = names_in(dir);
    CHECK_MSG(after && !strstr(after, "npy") && !strstr(after, "new"), "%s", after);
    free(after);
    /* one folder, npy then jsonl then npy: only the last format's files */
    snprintf(dir, sizeof dir, "%s/ex", g_tmp);
    CHECK_EQ_INT(sh("\"$CLIPDB\" export -q --db \"$DB\" --out \"$DB/../../ex\"", NULL, NULL), 0);
    after = names_in(dir);
    CHECK_EQ_STR(after, "ids.npy paths.txt paths0.txt photos.jsonl vectors.npy ");
    free(after);
    CHECK_EQ_INT(sh("\"$CLIPDB\" export -q --db \"$DB\" --out \"$DB/../../ex\" --format jsonl",
                    NULL, NULL),
                 0);
    after = names_in(dir);
    CHECK_EQ_STR(after, "vectors.jsonl ");
    free(after);
    CHECK_EQ_INT(sh("\"$CLIPDB\" export -q --db \"$DB\" --out \"$DB/../../ex\" --dtype fp32",
                    NULL, NULL),
                 0);
    after = names_in(dir);
    CHECK_EQ_STR(after, "ids.npy paths.txt paths0.txt photos.jsonl vectors.npy ");
    free(after);
}

/* ---- 6. forget's freed space -------------------------------------------------------- */

/* The bytes of the files under dir (SQLite's *-shm files left out), or of one file. */
static long long bytes_of(const char *path) {
    char cmd[1024], *out = NULL;
    long long n;
    snprintf(cmd, sizeof cmd, "find \"%s\" -type f ! -name \"*-shm\" -printf \"%%s\\n\" | "
             "awk \"{s+=\\$1} END {print s+0}\"", path);
    sh(cmd, &out, NULL);
    n = out ? atoll(out) : -1;
    free(out);
    return n;
}

/* stats --json's disk_bytes of the database at db, -1 if none. */
static long long stats_disk(const char *db) {
    char cmd[1024], *out = NULL, *p;
    long long n = -1;
    snprintf(cmd, sizeof cmd, "\"$CLIPDB\" stats --json --db \"%s\"", db);
    if (sh(cmd, &out, NULL) == 0 && out && (p = strstr(out, "\"disk_bytes\": ")))
        n = atoll(p + 14);
    free(out);
    return n;
}

CDB_TEST(forget_frees_what_it_says) {
    char db[800], thumbs[820], *out = NULL, *p, unit[8] = "";
    long long before, after, st_before, st_after, th_before, th_after;
    double said = -1, scale = 0;
    NEED_LIBRARY();
    snprintf(db, sizeof db, "%s.forget", g_db);
    snprintf(thumbs, sizeof thumbs, "%s/thumbs.db", db);
    /* two folders of the same 40 photos; the second is forgotten */
    CHECK_EQ_INT(sh("cd \"$(dirname \"$DB\")\" && cp -r photos copy && "
                    "\"$CLIPDB\" init -q --db \"$DB.forget\" && "
                    "\"$CLIPDB\" ingest -q --db \"$DB.forget\" photos copy >/dev/null",
                    NULL, NULL),
                 0);
    st_before = stats_disk(db);
    before = bytes_of(db);
    th_before = bytes_of(thumbs);
    CHECK_EQ_INT(sh("\"$CLIPDB\" forget --db \"$DB.forget\" \"$(dirname \"$DB\")/copy\"", &out,
                    NULL),
                 0);
    after = bytes_of(db);
    th_after = bytes_of(thumbs);
    st_after = stats_disk(db);
    CHECK_MSG(out && (p = strstr(out, "Freed ")) && sscanf(p, "Freed %lf %7s", &said, unit) == 2,
              "%s", out);
    scale = !strcmp(unit, "B") ? 1 : !strcmp(unit, "KB") ? 1e3 : !strcmp(unit, "MB") ? 1e6 : 0;
    CHECK_MSG(scale > 0, "unit %s", unit);
    /* what it says is what the folder shrank by (to the 0.1 printed), and stats agrees */
    CHECK_MSG(before > after && fabs(said * scale - (double)(before - after)) <= 0.05 * scale,
              "said %s; the folder went from %lld to %lld bytes (%lld freed)", p, before, after,
              before - after);
    CHECK_EQ_INT(st_before - st_after, before - after);
    CHECK_MSG(th_after < th_before, "thumbs.db: %lld -> %lld bytes", th_before, th_after);
    free(out);
}

/* ---- 7. verify's count of lost vectors ------------------------------------------------ */

CDB_TEST(verify_counts_lost_exactly) {
    char *out = NULL, *err = NULL;
    NEED_LIBRARY();
    /* more vectors in one shard than the problems verify lists (1,000) */
    CHECK_EQ_INT(sh("\"$CLIPDB\" demo -q --count 1100 \"$DB.big\" >/dev/null && "
                    "ls \"$DB.big/clipdb/shards\" | grep -c \"^[0-9]*\\.db$\"",
                    &out, NULL),
                 0);
    CHECK_MSG(out && atoi(out) == 1, "shards: %s", out); /* one shard holds them all */
    free(out);
    CHECK_EQ_INT(sh("rm \"$DB.big/clipdb/shards/0001.db\"* && "
                    "\"$CLIPDB\" verify --db \"$DB.big/clipdb\"",
                    &out, &err),
                 1);
    CHECK_MSG(out && strstr(out, "\nlost: 1,100 vectors of 1,100 files (in missing or damaged "
                                 "shards)\n") && strstr(out, "... and "),
              "%s", out);
    free(out), free(err);
    CHECK_EQ_INT(sh("\"$CLIPDB\" verify --json --db \"$DB.big/clipdb\"", &out, NULL), 1);
    CHECK_MSG(out && strstr(out, "\"vectors_lost\": 1100,") && strstr(out, "\"files_lost\": 1100,"),
              "%.300s", out);
    free(out);
}

/* ---- 8. a database this user can only read ------------------------------------------- */

/* cli_sh's `sh -c CMD`, as uid/gid 65534 ("nobody") in a forked child (stdout and
** stderr opened as root first). The exit status, or -1. */
static int sh_as_nobody(const char *cmd, char **out, char **err) {
    char po[800], pe[800], env[1600];
    int st = 0;
    pid_t pid;
    snprintf(po, sizeof po, "%s/nobody.out", g_tmp);
    snprintf(pe, sizeof pe, "%s/nobody.err", g_tmp);
    if ((pid = fork()) == 0) {
        int fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) _exit(126);
        if (setgroups(0, NULL) || setgid(65534) || setuid(65534) || getuid() != 65534) _exit(125);
        snprintf(env, sizeof env, "%s", CLIPDB_BIN);
        setenv("CLIPDB", env, 1);
        setenv("DB", g_db, 1);
        setenv("NO_COLOR", "1", 1);
        unsetenv("CLIPDB_DB");
        unsetenv("CLIPDB_MODEL");
        unsetenv("CLIPDB_LOG_TIME");
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    if (pid < 0 || waitpid(pid, &st, 0) < 0) return -1;
    if (out) *out = cli_read_file(po, NULL);
    if (err) *err = cli_read_file(pe, NULL);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The write commands, each on the database $DB.ro (a root of it: $DB.rop). */
static const char *const k_writes[] = {
    "\"$CLIPDB\" ingest --db \"$DB.ro\" \"$(dirname \"$DB\")/photos\"",
    "\"$CLIPDB\" reindex --db \"$DB.ro\"",
    "\"$CLIPDB\" forget --db \"$DB.ro\" \"$DB.rop\"",
    "\"$CLIPDB\" move --db \"$DB.ro\" \"$DB.rop\" \"$(dirname \"$DB\")/photos\"",
    "\"$CLIPDB\" index build --db \"$DB.ro\"",
    "\"$CLIPDB\" models --db \"$DB.ro\" --default 1",
};

CDB_TEST(read_only_user_told) {
    char *out = NULL, *err = NULL, *stats0 = NULL, *stats1 = NULL;
    NEED_LIBRARY();
    if (geteuid() != 0) CDB_SKIP("not root: cannot run a command as another user");
    CHECK_EQ_INT(sh("chmod 755 \"$(dirname \"$(dirname \"$DB\")\")\" && "
                    "cp -r \"$(dirname \"$DB\")/photos\" \"$DB.rop\" && "
                    "chmod -R a+rX \"$DB.rop\" && "
                    "\"$CLIPDB\" init -q --db \"$DB.ro\" && "
                    "\"$CLIPDB\" ingest -q --db \"$DB.ro\" \"$DB.rop\" >/dev/null && "
                    "\"$CLIPDB\" stats --db \"$DB.ro\"",
                    &stats0, NULL),
                 0);
    /* reading works as that user */
    CHECK_EQ_INT(sh_as_nobody("\"$CLIPDB\" search --db \"$DB.ro\" -k 1 red", &out, &err), 0);
    CHECK_MSG(out && strstr(out, "1\t"), "%s%s", out, err);
    free(out), free(err);
    for (size_t i = 0; i < sizeof k_writes / sizeof k_writes[0]; i++) {
        CHECK_EQ_INT(sh_as_nobody(k_writes[i], NULL, &err), 1);
        CHECK_MSG(err && strstr(err, "is not writable by this user (nobody, uid 65534)") &&
                      strstr(err, "hint: reading it works") && !strstr(err, "SQLite") &&
                      !strstr(err, "readonly database") && !strstr(err, "Permission denied"),
                  "%s: %s", k_writes[i], err);
        free(err);
    }
    /* the folder writable, its catalog not (a lock file anyone may take) */
    CHECK_EQ_INT(sh("chmod 777 \"$DB.ro\" && { [ ! -d \"$DB.ro/index\" ] || chmod 777 "
                    "\"$DB.ro/index\"; } && "
                    "{ [ ! -e \"$DB.ro/lock\" ] || chmod 666 \"$DB.ro/lock\"; }",
                    NULL, NULL),
                 0);
    CHECK_EQ_INT(sh_as_nobody(k_writes[0], NULL, &err), 1);
    CHECK_MSG(err && strstr(err, "its file catalog.db is not writable by this user"), "%s", err);
    free(err);
    CHECK_EQ_INT(sh("\"$CLIPDB\" stats --db \"$DB.ro\"", &stats1, NULL), 0);
    CHECK_MSG(stats0 && stats1 && !strcmp(stats0, stats1), "before:\n%s\nafter:\n%s", stats0,
              stats1);
    free(stats0), free(stats1);
}

CDB_TEST(read_only_mount_told) {
    char *out = NULL, *err = NULL, ro[800], mnt[800];
    NEED_LIBRARY();
    if (geteuid() != 0) CDB_SKIP("not root: cannot bind-mount");
    snprintf(ro, sizeof ro, "%s/romnt", g_tmp);
    CHECK_EQ_INT(sh("cp -r \"$(dirname \"$DB\")\" \"$(dirname \"$DB\")/../rolib\" && "
                    "mkdir -p \"$(dirname \"$DB\")/../romnt\"",
                    NULL, NULL),
                 0);
    snprintf(mnt, sizeof mnt, "%s/rolib", g_tmp);
    if (mount(mnt, ro, NULL, MS_BIND, NULL) != 0) CDB_SKIP("bind mount: %s", strerror(errno));
    if (mount(NULL, ro, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) != 0) {
        umount(ro);
        CDB_SKIP("read-only remount: %s", strerror(errno));
    }
    CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB/../../romnt/clipdb\" -k 1 red", &out, NULL),
                 0);
    CHECK_MSG(out && strstr(out, "1\t"), "%s", out);
    free(out);
    static const char *const writes[] = {
        "\"$CLIPDB\" ingest --db \"$DB/../../romnt/clipdb\" \"$DB/../../romnt/photos\"",
        "\"$CLIPDB\" reindex --db \"$DB/../../romnt/clipdb\"",
        "\"$CLIPDB\" index build --db \"$DB/../../romnt/clipdb\"",
        "\"$CLIPDB\" models --db \"$DB/../../romnt/clipdb\" --default 1",
    };
    for (size_t i = 0; i < sizeof writes / sizeof writes[0]; i++) {
        int rc = sh(writes[i], NULL, &err);
        if (rc != 1 || !err || !strstr(err, "it is on a read-only filesystem") ||
            !strstr(err, "hint: reading it works")) {
            umount(ro);
            CDB_TEST_FAIL_("%s: exit %d: %s", writes[i], rc, err);
        }
        free(err);
    }
    CHECK_EQ_INT(umount(ro), 0);
}

CDB_TEST_MAIN(json_on_failure, weights_overflow, image_from_stdin, empty_database_said,
              export_out_checked, forget_frees_what_it_says, verify_counts_lost_exactly,
              read_only_user_told, read_only_mount_told)
