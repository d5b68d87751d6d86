/*
** test_cli_edges.c: the rough edges a new user hits, through the clipdb binary and a
** shell (redirections, pipes) on a small generated library:
**   - a write error on stdout (/dev/full) is exit 1 with the reason, not exit 0, in
**     one line (also for --out -);
**   - a mistyped command gets "did you mean" (also after 'help'); a global option
**     after the command says where it goes;
**   - each error names a thing once: a path, a model, a file of a model;
**   - a leading '-' query term says how to pass it ('--');
**   - query weights: "2 * red", "red*2" and "red * 2" mean "2*red" (the same output
**     as the prefix form, the oracle), 0/nan/inf weights and cancelling terms are
**     usage errors (exit 2);
**   - '-' among query words reads that part from stdin (same output as typing it);
**   - --log-time and CLIPDB_LOG_TIME=1 stamp every stderr line;
**   - an empty result explains an --under that does not exist and a --min-score
**     that filters everything (stderr; stdout stays empty);
**   - --under repeated: the hits under any of them;
**   - --device cuda / cuda:0 (or $CLIPDB_DEVICE) where CUDA cannot run says why (the
**     build or the driver), not "cannot find the model", for search and serve;
**   - a shard file deleted behind clipdb's back: stats says so, a search runs on what
**     is left and says what it left out (once), verify names each file once;
**   - one of a thing is said in the singular ("1 file", "1 folder unavailable");
**   - preprocess --out - and embed --out - (npy or JSON) write to stdout; --db naming a
**     file says so;
**   - ingest of the database's own folder reads none of its files; a folder inside it
**     is refused, and no folder is recorded;
**   - every stored vector is exactly fp16 of what `clipdb embed` gives for its photo.
** Needs a model ($CLIPDB_TEST_MODEL or the bundled one); skips without one.
*/
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cdb_test.h"
#include "cli_run.h"
#include "kernels/kernels.h"

static char g_tmp[512], g_db[700];

/* `sh -c CMD` with $CLIPDB and $DB (the test database): cli_sh. */
static int sh(const char *cmd, char **out, char **err) {
    return cli_sh(g_tmp, g_db, cmd, out, err);
}
static int sh_err(const char *cmd, int want, const char *says) {
    return cli_sh_err(g_tmp, g_db, cmd, want, says);
}

/* Occurrences of sub in s (0 for a NULL s). */
static int count_of(const char *s, const char *sub) {
    int n = 0;
    for (const char *p = s; p && (p = strstr(p, sub)); p += strlen(sub)) n++;
    return n;
}

#define NEED_LIBRARY() CLI_NEED_LIBRARY(g_tmp, g_db)

CDB_TEST(stdout_write_error_fails) {
    char *out = NULL, *err = NULL;
    NEED_LIBRARY();
    CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB\" red >/dev/full", &out, &err), 1);
    CHECK_MSG(err && strstr(err, "cannot write to standard output (No space left on device)"),
              "%s", err);
    free(err);
    /* an array to --out - (standard output): one error line, which says so */
    static const char *const npy[] = {
        "cd \"$(dirname \"$DB\")\" && \"$CLIPDB\" preprocess photos/$(ls photos | head -1) "
        "--out - >/dev/full",
        "cd \"$(dirname \"$DB\")\" && \"$CLIPDB\" embed --format npy --out - "
        "--image photos/$(ls photos | head -1) >/dev/full"};
    for (size_t i = 0; i < sizeof npy / sizeof npy[0]; i++) {
        CHECK_EQ_INT(sh(npy[i], NULL, &err), 1);
        CHECK_MSG(err && count_of(err, "error:") == 1 &&
                      strstr(err, "cannot write to standard output (No space left on device)") &&
                      !strstr(err, "cannot write -"),
                  "%s: %s", npy[i], err);
        free(err);
    }
    CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB\" --json red >/dev/full", NULL, &err), 1);
    free(err);
    CHECK_EQ_INT(sh("\"$CLIPDB\" --help >/dev/full", NULL, &err), 1);
    free(err);
    /* a reader that stops early (| head) is not an error of clipdb's */
    CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB\" -k 40 red | head -c 1 >/dev/null; exit 0",
                    NULL, &err),
                 0);
    CHECK_MSG(err && !strstr(err, "cannot write"), "%s", err);
    free(err);
    free(out);
}

CDB_TEST(did_you_mean) {
    char *err = NULL;
    CHECK_EQ_INT(sh_err("\"$CLIPDB\" serch red", 2,
                        "unknown command 'serch' (did you mean 'search'?)"),
                 0);
    CHECK_EQ_INT(sh_err("\"$CLIPDB\" reindx", 2, "did you mean 'reindex'?"), 0);
    CHECK_EQ_INT(sh("\"$CLIPDB\" qqqqqqq", NULL, &err), 2);
    CHECK_MSG(err && !strstr(err, "did you mean"), "%s", err);
    free(err);
    CHECK_EQ_INT(sh_err("\"$CLIPDB\" help serach", 2,
                        "unknown command 'serach' (did you mean 'search'?)"),
                 0);
}

CDB_TEST(leading_dash_term) {
    char *err = NULL;
    NEED_LIBRARY();
    CHECK_EQ_INT(sh_err("\"$CLIPDB\" search --db \"$DB\" -red", 2, "goes after '--'"), 0);
    CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB\" -k 1 -- -red", NULL, &err), 0);
    free(err);
}

/* The output of a search for QUERY (stdout), or NULL when it did not exit 0. */
static char *search_out(const char *query) {
    char cmd[1024], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "\"$CLIPDB\" search --db \"$DB\" -k 8 %s", query);
    int rc = sh(cmd, &out, &err);
    if (rc != 0) fprintf(stderr, "    search %s: exit %d: %s\n", query, rc, err ? err : "");
    free(err);
    if (rc != 0) {
        free(out);
        return NULL;
    }
    return out;
}

CDB_TEST(query_weights) {
    char *want, *got;
    NEED_LIBRARY();
    want = search_out("\"2*red + blue circle\"");
    CHECK(want && *want);
    const char *same[] = {"\"2 * red + blue circle\"", "\"red*2 + blue circle\"",
                          "\"red * 2 + blue circle\"", "2 \\* red + blue circle"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        got = search_out(same[i]);
        CHECK_MSG(got && want && !strcmp(got, want), "%s differs from 2*red + blue circle:\n%s\n%s",
                  same[i], got ? got : "(failed)", want ? want : "");
        free(got);
    }
    free(want);
    /* weights change the result: the form is not just ignored */
    want = search_out("\"0.1*red + blue circle\"");
    got = search_out("\"red * 0.1 + blue circle\"");
    CHECK(want && got && !strcmp(want, got));
    free(got);
    got = search_out("\"red * 3 + blue circle\"");
    CHECK(want && got && strcmp(want, got) != 0);
    free(want);
    free(got);
    const char *bad[] = {"\"0*red\"", "\"nan*red\"", "\"inf*red + blue\"", "\"red * 0\"",
                         "\"red - red\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[512], *err = NULL;
        snprintf(cmd, sizeof cmd, "\"$CLIPDB\" search --db \"$DB\" %s", bad[i]);
        CHECK_MSG(sh(cmd, NULL, &err) == 2, "%s: not a usage error: %s", bad[i], err);
        /* cancelling terms: the reason without brackets in the brackets */
        CHECK_MSG(i + 1 < sizeof bad / sizeof bad[0] ||
                      (err && strstr(err, "cannot combine the query terms (the weighted sum of "
                                          "the terms is zero)\n")),
                  "%s", err);
        free(err);
    }
}

CDB_TEST(query_part_from_stdin) {
    char *want, *got = NULL, *err = NULL;
    NEED_LIBRARY();
    want = search_out("red + blue circle");
    CHECK_EQ_INT(sh("printf \"red\\n\" | \"$CLIPDB\" search --db \"$DB\" -k 8 - + blue circle", &got,
                    &err),
                 0);
    CHECK_MSG(want && got && !strcmp(want, got), "stdin: %s\ntyped: %s\n%s", got, want, err);
    free(got);
    free(err);
    CHECK_EQ_INT(sh("echo red | \"$CLIPDB\" search --db \"$DB\" - + -", NULL, &err), 2);
    free(err);
    free(want);
}

CDB_TEST(log_time) {
    regex_t re;
    char *err = NULL;
    CHECK_EQ_INT(regcomp(&re, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[+-][0-9]{4} "
                              "clipdb: error: ",
                         REG_EXTENDED | REG_NOSUB),
                 0);
    CHECK_EQ_INT(sh("\"$CLIPDB\" --log-time stats --db /nonexistent/db", NULL, &err), 1);
    CHECK_MSG(err && regexec(&re, err, 0, NULL, 0) == 0, "%s", err);
    free(err);
    CHECK_EQ_INT(sh("CLIPDB_LOG_TIME=1 \"$CLIPDB\" stats --db /nonexistent/db", NULL, &err), 1);
    CHECK_MSG(err && regexec(&re, err, 0, NULL, 0) == 0, "%s", err);
    /* every line: the hint too */
    CHECK_MSG(err && strstr(err, "\nhint") == NULL, "%s", err);
    free(err);
    CHECK_EQ_INT(sh("\"$CLIPDB\" stats --db /nonexistent/db", NULL, &err), 1);
    CHECK_MSG(err && !strncmp(err, "clipdb: error: ", 15), "%s", err);
    free(err);
    /* after the command: where it goes, rather than "unknown option" */
    CHECK_EQ_INT(sh("\"$CLIPDB\" search --log-time red", NULL, &err), 2);
    CHECK_MSG(err && strstr(err, "clipdb: error: --log-time is a global option: put it before "
                                 "the command (clipdb --log-time search ...)\n") &&
                  !strstr(err, "unknown option"),
              "%s", err);
    free(err);
    CHECK_EQ_INT(sh("\"$CLIPDB\" stats --version", NULL, &err), 2);
    CHECK_MSG(err && strstr(err, "--version is a global option: give it without a command "
                                 "(clipdb --version)"),
              "%s", err);
    free(err);
    regfree(&re);
}

CDB_TEST(empty_results_explained) {
    char *out = NULL, *err = NULL;
    NEED_LIBRARY();
    CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB\" red --under /nonexistent/x", &out, &err), 0);
    CHECK(out && !*out);
    CHECK_MSG(err && strstr(err, "/nonexistent/x does not exist"), "%s", err);
    free(out);
    free(err);
    CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB\" red --min-score 0.999", &out, &err), 0);
    CHECK(out && !*out);
    CHECK_MSG(err && strstr(err, "--min-score 0.999"), "%s", err);
    free(out);
    free(err);
    CHECK_EQ_INT(sh("\"$CLIPDB\" search -q --db \"$DB\" red --min-score 0.999", &out, &err), 0);
    CHECK_MSG(err && !*err, "quiet, yet: %s", err);
    free(out);
    free(err);
}

/* Lines of s that start with prefix; -1 when a line starts with none of a, b. */
static int count_lines(const char *s, const char *prefix, const char *a, const char *b) {
    int n = 0;
    for (const char *l = s; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "") {
        if (strncmp(l, a, strlen(a)) && strncmp(l, b, strlen(b))) return -1;
        n += !strncmp(l, prefix, strlen(prefix));
    }
    return n;
}

/* --under given twice: the hits under either (the library's img_00000NN files: 10 per
** prefix), not only under the last one. */
CDB_TEST(under_repeated) {
    char *out = NULL, *err = NULL, p0[800], p1[800], cmd[2400];
    NEED_LIBRARY();
    snprintf(p0, sizeof p0, "%s/lib/photos/img_000000", g_tmp);
    snprintf(p1, sizeof p1, "%s/lib/photos/img_000001", g_tmp);
    snprintf(cmd, sizeof cmd,
             "\"$CLIPDB\" search --db \"$DB\" red -k 40 --paths --under %s --under %s", p0, p1);
    CHECK_EQ_INT(sh(cmd, &out, &err), 0);
    CHECK_MSG(count_lines(out, p0, p0, p1) == 10 && count_lines(out, p1, p0, p1) == 10,
              "%s", out);
    free(out);
    free(err);
    /* one of them alone, and one that holds nothing beside one that does */
    snprintf(cmd, sizeof cmd,
             "\"$CLIPDB\" search --db \"$DB\" red -k 40 --paths --under %s --under /nonexistent/x",
             p1);
    CHECK_EQ_INT(sh(cmd, &out, &err), 0);
    CHECK_MSG(count_lines(out, p1, p1, p1) == 10, "%s", out);
    CHECK_MSG(err && !*err, "hits, yet: %s", err);
    free(out);
    free(err);
    /* nothing under any: each is explained */
    CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB\" red --under /nonexistent/x "
                    "--under \"$DB\"",
                    &out, &err),
                 0);
    CHECK(out && !*out);
    CHECK_MSG(err && strstr(err, "/nonexistent/x does not exist") && strstr(err, "no photo under "),
              "%s", err);
    free(out);
    free(err);
}

CDB_TEST(device_that_cannot_run) {
    /* cuda:0 by flag, by $CLIPDB_DEVICE, for search and serve: exit 1 and the reason
    ** (a CPU-only build: "this clipdb was built without CUDA"; here, the driver's) */
    static const char *const cmds[] = {
        "\"$CLIPDB\" search --db \"$DB\" red --device cuda:0",
        "CLIPDB_DEVICE=cuda:0 \"$CLIPDB\" search --db \"$DB\" red",
        "timeout 60 \"$CLIPDB\" serve --db \"$DB\" --port 0 --device cuda:0"};
    const char *why = cdb_k_cuda_unusable_reason();
    char *err = NULL;
    NEED_LIBRARY();
    if (cdb_k_cuda_device_count() > 0 && !*why) CDB_SKIP("a CUDA device is usable here");
    CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB\" red --device cuda", NULL, &err), 1);
    CHECK_MSG(err && !strstr(err, "cannot find the database's model") && strstr(err, "device"),
              "%s", err);
    free(err);
    /* embed (no database): the device is the trouble, so the hint is about it, and the
    ** model's path is said once (not again as "(model PATH: ...") */
    CHECK_EQ_INT(sh("\"$CLIPDB\" embed --text red --device cuda", NULL, &err), 1);
    CHECK_MSG(err && strstr(err, "cuda:0 is not available: ") && !strstr(err, "(model ") &&
                  strstr(err, "\nhint: pass --device cpu to run on the CPU\n") &&
                  !strstr(err, "--model"),
              "%s", err);
    free(err);
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        err = NULL;
        CHECK_EQ_INT(sh(cmds[i], NULL, &err), 1);
        CHECK_MSG(err && strstr(err, "cuda:0 is not available: ") && strstr(err, why) &&
                      !strstr(err, "cannot find the database's model"),
                  "%s: %s", cmds[i], err);
        free(err);
    }
}

CDB_TEST(missing_shard_is_said) {
    char *out = NULL, *err = NULL;
    NEED_LIBRARY();
    CHECK_EQ_INT(sh("cp -r \"$DB\" \"$DB.copy\" && rm \"$DB.copy\"/shards/0001.db*", NULL, NULL),
                 0);
    CHECK_EQ_INT(sh("\"$CLIPDB\" stats --db \"$DB.copy\"", &out, &err), 0);
    CHECK_MSG(out && strstr(out, "1 missing or damaged: run 'clipdb verify'"), "%s", out);
    free(out);
    free(err);
    /* a search still runs, on what is left, and says what it left out: once */
    CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB.copy\" red", &out, &err), 0);
    CHECK_MSG(err && strstr(err, "missing or damaged") && strstr(err, "reindex --repair") &&
                  count_of(err, "its vectors are left out") == 1,
              "%s", err);
    free(out);
    free(err);
    /* each lost vector's line names its photo once, not again as "file N (name)" */
    CHECK_EQ_INT(sh("\"$CLIPDB\" verify --db \"$DB.copy\"", &out, &err), 1);
    CHECK_MSG(out && strstr(out, "\nvector-missing: /") &&
                  strstr(out, ": vector for model 1 lost with shard 0001\n") &&
                  !strstr(out, ": file "),
              "%s", out);
    free(out);
    free(err);
    /* the repair's index rebuild says why it was rebuilt */
    CHECK_EQ_INT(sh("\"$CLIPDB\" reindex -q --repair --db \"$DB.copy\"", &out, &err), 0);
    CHECK_MSG(out && strstr(out, "vectors (after the repair)\n"), "%s%s", out, err);
    free(out);
    free(err);
}

/* A shard damaged inside (its header intact, its first page garbage) is searched around
** as a missing one is: one warning naming it once, reindex --repair as the hint, and
** the search's exit 0 (issue 32: it stopped every search, naming the shard 4 times). */
CDB_TEST(damaged_shard_is_searched_around) {
    char *out = NULL, *err = NULL;
    NEED_LIBRARY();
    CHECK_EQ_INT(sh("rm -rf \"$DB.dmg\" && cp -r \"$DB\" \"$DB.dmg\" && "
                    "head -c 3000 /dev/zero | tr '\\0' 'x' | dd of=\"$DB.dmg\"/shards/0001.db "
                    "bs=1 seek=100 conv=notrunc 2>/dev/null",
                    NULL, NULL),
                 0);
    CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB.dmg\" red", &out, &err), 0);
    CHECK_MSG(err && strstr(err, "reindex --repair") && count_of(err, "0001.db") == 1 &&
                  count_of(err, "its vectors are left out") == 1,
              "%s", err);
    free(out);
    free(err);
    CHECK_EQ_INT(sh("\"$CLIPDB\" verify --db \"$DB.dmg\"", &out, &err), 1);
    /* each line of verify names the shard at most once */
    for (const char *l = out; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        char line[2048];
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), l);
        CHECK_MSG(count_of(line, "0001.db") <= 1, "%s", line);
        l = nl ? nl + 1 : NULL;
    }
    free(out);
    free(err);
    CHECK_EQ_INT(sh("rm -rf \"$DB.dmg\"", NULL, NULL), 0);
}

/* An empty shard file the catalog does not list (a run killed between creating it and
** the commit that lists it) is removed by the next writer; a listed one stays. */
CDB_TEST(unlisted_empty_shard_is_removed) {
    NEED_LIBRARY();
    CHECK_EQ_INT(sh("rm -rf \"$DB.orph\" && cp -r \"$DB\" \"$DB.orph\" && "
                    ": > \"$DB.orph\"/shards/0009.db && "
                    "\"$CLIPDB\" reindex -q --db \"$DB.orph\" && "
                    "test ! -e \"$DB.orph\"/shards/0009.db && test -s \"$DB.orph\"/shards/0001.db",
                    NULL, NULL),
                 0);
    CHECK_EQ_INT(sh("rm -rf \"$DB.orph\"", NULL, NULL), 0);
}

/* A user's error names each thing once: the image's path (not again in the decoder's
** reason), the model folder (not again as "model m1: "), the tokenizer (one prefix). */
CDB_TEST(each_thing_named_once) {
    char cmd[3000], *err = NULL;
    const char *model = cli_find_model();
    struct stat sb;
    NEED_LIBRARY();
    CHECK_EQ_INT(sh("cd \"$(dirname \"$DB\")\" && echo garbage >bad.jpg && "
                    "\"$CLIPDB\" preprocess ../lib/bad.jpg --out x.npy; "
                    "s=$?; rm -f bad.jpg; exit $s",
                    NULL, &err),
                 1);
    CHECK_MSG(err && strstr(err, "cannot read the image ../lib/bad.jpg (not a JPEG, PNG") &&
                  count_of(err, "bad.jpg") == 1,
              "%s", err);
    free(err);
    CHECK_EQ_INT(sh("\"$CLIPDB\" search --db \"$DB\" --image /nonexistent.jpg", NULL, &err), 1);
    CHECK_MSG(err && strstr(err, "cannot use the query image /nonexistent.jpg (No such file or "
                                 "directory)\n") &&
                  count_of(err, "/nonexistent.jpg") == 1,
              "%s", err);
    free(err);
    if (stat(model, &sb) != 0 || !S_ISDIR(sb.st_mode)) CDB_SKIP("the test model is not a folder");
    /* a broken config and a broken vocabulary in copies of the model */
    snprintf(cmd, sizeof cmd,
             "cd %s && rm -rf m1 m5 && cp -r %.700s m1 && cp -r %.700s m5 && "
             "echo \"{bad\" >m1/open_clip_config.json && echo \"{bad\" >m5/vocab.json",
             g_tmp, model, model);
    CHECK_EQ_INT(sh(cmd, NULL, NULL), 0);
    snprintf(cmd, sizeof cmd, "cd %s && \"$CLIPDB\" models --model m1", g_tmp);
    CHECK_EQ_INT(sh(cmd, NULL, &err), 1);
    CHECK_MSG(err && strstr(err, "cannot load the model m1 (m1/open_clip_config.json: not valid "
                                 "JSON at line 1: ") &&
                  count_of(err, "m1") == 2 && !strstr(err, "(line"),
              "%s", err);
    free(err);
    snprintf(cmd, sizeof cmd, "cd %s && \"$CLIPDB\" models --model m5", g_tmp);
    CHECK_EQ_INT(sh(cmd, NULL, &err), 1);
    CHECK_MSG(err && strstr(err, "cannot load the model m5 (tokenizer: m5/vocab.json line 1: ") &&
                  count_of(err, "tokenizer") == 1 && count_of(err, "m5") == 2,
              "%s", err);
    free(err);
}

/* One of a thing is said in the singular: the summary's counts, a missing folder's
** warning, the index line (which also says its counts once). */
CDB_TEST(one_is_singular) {
    char cmd[3000], *out = NULL, *err = NULL;
    NEED_LIBRARY();
    snprintf(cmd, sizeof cmd,
             "cd %s && rm -rf one one.db && mkdir one && cp lib/photos/img_0000000.jpg one/ && "
             "\"$CLIPDB\" init -q --db one.db && \"$CLIPDB\" ingest --db one.db one && "
             "\"$CLIPDB\" reindex --full --db one.db",
             g_tmp);
    CHECK_EQ_INT(sh(cmd, &out, &err), 0);
    CHECK_MSG(out && strstr(out, "ingest: 1 file: 1 added, 0 changed, 0 moved, 0 deleted, "
                                 "0 errors, 0 unchanged, 0 not images (") &&
                  strstr(out, "\nindex: rebuilt flat over 1 vector (full rebuild asked)\n"),
              "%s%s", out, err);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "cd %s && mv one one.gone && \"$CLIPDB\" reindex --db one.db; "
             "s=$?; mv one.gone one; exit $s", g_tmp);
    CHECK_EQ_INT(sh(cmd, &out, &err), 3);
    CHECK_MSG(out && strstr(out, ", 1 folder unavailable (") && err &&
                  strstr(err, "; its 1 file is kept as it is ("),
              "%s%s", out, err);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "cd %s && cp lib/photos/img_0000001.png one/ && "
             "\"$CLIPDB\" reindex --db one.db", g_tmp);
    CHECK_EQ_INT(sh(cmd, &out, &err), 0);
    CHECK_MSG(out && strstr(out, "\nindex: updated: 1 added, 0 removed\n"), "%s%s", out, err);
    free(out);
    free(err);
}

CDB_TEST(out_dash_and_db_file) {
    char *out = NULL, *err = NULL;
    NEED_LIBRARY();
    /* preprocess --out -: the same bytes as the file, and no file named '-' */
    CHECK_EQ_INT(sh("cd \"$(dirname \"$DB\")\" && img=$(ls photos | head -1) && "
                    "\"$CLIPDB\" preprocess photos/$img --out - > a.npy && "
                    "\"$CLIPDB\" preprocess photos/$img --out b.npy && cmp a.npy b.npy && "
                    "test ! -e ./-",
                    NULL, &err),
                 0);
    free(err);
    /* embed --out - in JSON: standard output, the same bytes as without --out */
    CHECK_EQ_INT(sh("cd \"$(dirname \"$DB\")\" && "
                    "\"$CLIPDB\" embed --text red --out - > a.json && "
                    "\"$CLIPDB\" embed --text red > b.json && cmp a.json b.json && "
                    "test ! -e ./-",
                    NULL, &err),
                 0);
    free(err);
    /* --db naming a file: said so, rather than suggesting 'init' there */
    CHECK_EQ_INT(sh("\"$CLIPDB\" stats --db \"$DB/catalog.db\"", &out, &err), 1);
    CHECK_MSG(err && strstr(err, "is a file: a database is a folder") && !strstr(err, "init"),
              "%s", err);
    free(out);
    free(err);
}

CDB_TEST(db_folder_not_ingested) {
    char *out = NULL, *err = NULL, *before = NULL, *after = NULL;
    NEED_LIBRARY();
    /* the database's own folder as a PATH (photos may live beside the database files):
    ** its files are not read, so nothing is found in a folder holding only them */
    CHECK_EQ_INT(sh("cd \"$DB\" && \"$CLIPDB\" ingest --json --db . .", &out, &err), 0);
    CHECK_MSG(out && strstr(out, "\"found\": 0,") && strstr(out, "\"not_images\": 0,"), "%s %s",
              out, err);
    free(out);
    free(err);
    CHECK_EQ_INT(sh("\"$CLIPDB\" folders --db \"$DB\"", &before, NULL), 0);
    /* a folder or file inside it is refused before any byte of it is read */
    CHECK_EQ_INT(sh("\"$CLIPDB\" ingest -q --db \"$DB\" \"$DB/shards\"", &out, &err), 1);
    CHECK_MSG(err && strstr(err, "it is inside the database's own folder"), "%s", err);
    free(out);
    free(err);
    CHECK_EQ_INT(sh("\"$CLIPDB\" folders --db \"$DB\"", &after, NULL), 0);
    CHECK_EQ_STR(after, before);
    free(before);
    free(after);
}

CDB_TEST(index_messages_in_clipdbs_words) {
    char *out = NULL, *err = NULL;
    NEED_LIBRARY();
    /* too few vectors for the index type: one error line in clipdb's words, no FAISS text */
    CHECK_EQ_INT(sh("\"$CLIPDB\" index build --db \"$DB\" --type ivf-pq", &out, &err), 1);
    CHECK_MSG(err && strstr(err, "needs at least 256 vectors") && !strstr(err, "faiss") &&
                  !strstr(err, "Error in") && strstr(err, "error:") &&
                  !strstr(strstr(err, "error:") + 1, "error:"),
              "%s", err);
    free(out);
    free(err);
    /* a trainable IVF: FAISS's clustering warning stays out of stderr */
    CHECK_EQ_INT(sh("\"$CLIPDB\" index build --db \"$DB\" --type ivf-sq", &out, &err), 0);
    CHECK_MSG(err && !strstr(err, "WARNING") && !strstr(err, "clustering"), "%s", err);
    CHECK_MSG(out && !strstr(out, "Built a ") && !strstr(out, "budget 0.0 MB"), "%s", out);
    free(out);
    free(err);
    CHECK_EQ_INT(sh("\"$CLIPDB\" index build --db \"$DB\" --type flat", NULL, NULL), 0);
}

/* The data of a .npy file (after its header), heap; *n its bytes. */
static unsigned char *npy_data(const char *path, size_t *n) {
    size_t len = 0, hdr;
    unsigned char *b = (unsigned char *)cli_read_file(path, &len), *d;
    if (!b || len < 10) {
        free(b);
        return NULL;
    }
    hdr = 10 + (size_t)(b[8] | b[9] << 8);
    if (hdr > len || !(d = malloc(len - hdr + 1))) {
        free(b);
        return NULL;
    }
    memcpy(d, b + hdr, len - hdr);
    *n = len - hdr;
    free(b);
    return d;
}

CDB_TEST(stored_is_fp16_of_embed) {
    /* one normalization for the encoder and the store: each stored vector is exactly
    ** fp16(x) of the fp32 row `clipdb embed` prints for the same photo */
    char cmd[3000], p1[700], p2[700], *paths = NULL;
    size_t n16 = 0, n32 = 0;
    unsigned char *v16 = NULL, *v32 = NULL;
    NEED_LIBRARY();
    snprintf(cmd, sizeof cmd,
             "rm -rf %s/ex && \"$CLIPDB\" export --db \"$DB\" --format npy --dtype fp16 --out %s/ex "
             ">/dev/null && args=$(sed \"s/^/--image /\" %s/ex/paths.txt | tr \"\\n\" \" \") && "
             "\"$CLIPDB\" embed $args --format npy --out %s/ex/embed.npy",
             g_tmp, g_tmp, g_tmp, g_tmp);
    CHECK_EQ_INT(sh(cmd, NULL, NULL), 0);
    snprintf(p1, sizeof p1, "%s/ex/vectors.npy", g_tmp);
    snprintf(p2, sizeof p2, "%s/ex/embed.npy", g_tmp);
    v16 = npy_data(p1, &n16);
    v32 = npy_data(p2, &n32);
    CHECK(v16 && v32 && n16 > 0 && n32 == 2 * n16);
    if (v16 && v32 && n32 == 2 * n16) {
        size_t differ = 0;
        for (size_t i = 0; i < n16 / 2; i++) {
            float f;
            uint16_t h, want;
            memcpy(&f, v32 + 4 * i, 4);
            memcpy(&h, v16 + 2 * i, 2);
            cdb_k_f32_to_f16(&f, &want, 1);
            differ += h != want;
        }
        CHECK_MSG(differ == 0, "%zu of %zu stored elements are not fp16 of embed's", differ,
                  n16 / 2);
    }
    free(v16);
    free(v32);
    free(paths);
}

CDB_TEST_MAIN(stdout_write_error_fails, did_you_mean, leading_dash_term, query_weights,
              query_part_from_stdin, log_time, empty_results_explained, under_repeated,
              device_that_cannot_run,
              missing_shard_is_said, damaged_shard_is_searched_around,
              unlisted_empty_shard_is_removed, out_dash_and_db_file,
              stored_is_fp16_of_embed,
              db_folder_not_ingested, index_messages_in_clipdbs_words, each_thing_named_once,
              one_is_singular)
