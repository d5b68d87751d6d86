/*
** test_cli_run.c: runs the built clipdb binary and checks what users see without
** needing a model: every command's --help against tests/cli/golden/ (the golden
** text is the spec: update it deliberately, or with CDB_UPDATE_GOLDEN=1), usage
** errors (exit 2, error line, usage lines, nothing on stdout), the error and hint
** for a missing database (exit 1), configuration precedence (--db over
** CLIPDB_DB over ./clipdb), colors only on a terminal and never with NO_COLOR.
*/
#include <math.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "cli_run.h"

static const char *const g_cmds[] = {"init",     "ingest", "search",     "reindex", "index",
                                      "stats",    "verify", "errors",     "export",  "models",
                                      "tokenize", "embed",  "preprocess", "demo",    "version",
                                      "help",     "folders", "forget",    "move",    "serve",
                                      "duplicates", "merge", "slurm"};

static int check_golden(cdb_test_ctx *cdb_t_, const char *name, const char *got) {
    char path[1024];
    char *want;
    snprintf(path, sizeof path, "%s/tests/cli/golden/%s.txt", CDB_SOURCE_DIR, name);
    if (getenv("CDB_UPDATE_GOLDEN")) {
        FILE *f = fopen(path, "wb");
        if (f) {
            fputs(got, f);
            fclose(f);
        }
    }
    want = cli_read_file(path, NULL);
    if (!want) {
        fprintf(stderr, "    missing golden file %s\n", path);
        cdb_t_->failed = 1;
        return 0;
    }
    if (strcmp(want, got)) {
        size_t i = 0;
        while (want[i] && want[i] == got[i]) i++;
        fprintf(stderr, "    %s differs from the golden file at byte %zu:\n    want: %.60s\n    got:  %.60s\n",
                name, i, want + i, got + i);
        cdb_t_->failed = 1;
        free(want);
        return 0;
    }
    free(want);
    return 1;
}

CDB_TEST(help_golden) {
    cli_run_result r;
    cli_run((const char *[]){"--help", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK_EQ_INT((int)r.err_len, 0);
    check_golden(cdb_t_, "main", r.out);
    cli_run_free(&r);
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++) {
        cli_run_result h;
        cli_run((const char *[]){g_cmds[i], "--help", NULL}, &r);
        if (r.exit_code != 0 || r.err_len != 0)
            CDB_TEST_FAIL_("clipdb %s --help: exit %d, stderr '%s'", g_cmds[i], r.exit_code, r.err);
        if (strncmp(r.out, "usage: clipdb ", 14))
            CDB_TEST_FAIL_("clipdb %s --help does not start with a usage line", g_cmds[i]);
        check_golden(cdb_t_, g_cmds[i], r.out);
        /* `clipdb help CMD` and `-h` print the same text */
        cli_run((const char *[]){"help", g_cmds[i], NULL}, &h);
        CHECK_EQ_INT(h.exit_code, 0);
        CHECK_EQ_STR(h.out, r.out);
        cli_run_free(&h);
        cli_run((const char *[]){g_cmds[i], "-h", NULL}, &h);
        CHECK_EQ_STR(h.out, r.out);
        cli_run_free(&h);
        cli_run_free(&r);
    }
}

CDB_TEST(help_lines_fit_80_columns) {
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++) {
        cli_run_result r;
        const char *line;
        cli_run((const char *[]){g_cmds[i], "--help", NULL}, &r);
        line = r.out;
        while (line && *line) {
            const char *nl = strchr(line, '\n');
            size_t len = nl ? (size_t)(nl - line) : strlen(line);
            if (len > 90) CDB_TEST_FAIL_("clipdb %s --help: a line of %zu columns", g_cmds[i], len);
            line = nl ? nl + 1 : NULL;
        }
        cli_run_free(&r);
    }
}

CDB_TEST(version) {
    cli_run_result r;
    cli_run((const char *[]){"--version", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK(strncmp(r.out, "clipdb 0.", 9) == 0);
    CHECK(strstr(r.out, "cpu: ") != NULL);
    cli_run_free(&r);
    cli_run((const char *[]){"version", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK(strncmp(r.out, "clipdb 0.", 9) == 0);
    cli_run_free(&r);
}

/* Every usage error: exit 2, "clipdb: error: ..." then the usage lines on stderr,
** nothing on stdout (with --json: the error as one JSON document). */
CDB_TEST(usage_errors_exit_2) {
    static const char *const cases[][8] = {
        {NULL},                                   /* no command */
        {"frobnicate", NULL},                     /* unknown command */
        {"--bogus", "stats", NULL},               /* unknown global option */
        {"--db", NULL},                           /* global option without its value */
        {"search", "--bogus", "cat", NULL},       /* unknown option */
        {"search", "cat", "-k", NULL},            /* missing value */
        {"search", "cat", "-k", "zero", NULL},    /* bad number */
        {"search", "cat", "-k", "0", NULL},       /* out of range */
        {"search", "cat", "--sort", "size", NULL},/* bad choice */
        {"search", NULL},                         /* no query */
        {"search", "beach", "+", NULL},           /* bad query */
        {"search", "cat", "--json", "--paths", NULL},
        {"search", "cat", "--min-score", "2", NULL},
        {"search", "--json=yes", "cat", NULL},    /* flag with a value */
        {"ingest", NULL},                         /* no PATH */
        {"ingest", "x", "--batch", "0", NULL},
        {"ingest", "x", "--device", "tpu", NULL},
        {"ingest", "x", "--device", "CPU", NULL}, /* device names are lowercase */
        {"search", "cat", "--device", "cuda:", NULL},
        {"search", "cat", "--device", "cuda:-1", NULL},
        {"serve", "--device", "cuda:1x", NULL},
        {"embed", "--text", "a", "--device", "cuda: 1", NULL},
        {"reindex", "extra", NULL},
        {"index", NULL},
        {"index", "rebuild", NULL},
        {"index", "build", "--type", "lsh", NULL},
        {"export", NULL},                         /* no --out */
        {"export", "--out", "x", "--format", "csv", NULL},
        {"init", "somewhere", NULL},
        {"stats", "extra", NULL},
        {"tokenize", NULL},
        {"embed", NULL},
        {"embed", "--text", "a", "--format", "npy", NULL}, /* npy needs --out */
        {"preprocess", "a.png", NULL},            /* no --out */
        {"demo", "a", "b", NULL},
        {"demo", "--count", "-5", NULL},
        {"version", "extra", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_run_result r;
        cli_run((const char *const *)cases[i], &r);
        if (r.exit_code != 2)
            CDB_TEST_FAIL_("case %zu (%s %s ...): exit %d, want 2; stderr: %s", i,
                           cases[i][0] ? cases[i][0] : "", cases[i][0] && cases[i][1] ? cases[i][1] : "",
                           r.exit_code, r.err);
        if (strncmp(r.err, "clipdb: error: ", 15))
            CDB_TEST_FAIL_("case %zu: stderr does not start with 'clipdb: error: ': %s", i, r.err);
        if (!strstr(r.err, "\nusage: clipdb"))
            CDB_TEST_FAIL_("case %zu: no usage lines in: %s", i, r.err);
        /* stdout stays empty, but for --json: the error as one document */
        int json = 0;
        for (const char *const *a = cases[i]; *a; a++) json |= !strncmp(*a, "--json", 6);
        if (!json && r.out_len) CDB_TEST_FAIL_("case %zu: stdout is not empty: %s", i, r.out);
        if (json && (!strstr(r.out, "\"status\": \"error\"") ||
                     !strstr(r.out, "\"exit_code\": 2") || r.out[r.out_len - 1] != '\n'))
            CDB_TEST_FAIL_("case %zu: --json: not the error document: %s", i, r.out);
        cli_run_free(&r);
    }
}

CDB_TEST(help_wins_over_bad_options) {
    cli_run_result r;
    cli_run((const char *[]){"search", "--bogus", "--help", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK(strncmp(r.out, "usage: clipdb search", 20) == 0);
    cli_run_free(&r);
}

/* No database: exit 1, "clipdb: error: no database at X (...)" and a hint to init. */
CDB_TEST(missing_database) {
    char tmp[512], want[1024];
    const char *cmds[] = {"stats", "verify", "errors", "reindex"};
    if (!cli_tmpdir(tmp, sizeof tmp)) CDB_TEST_FAIL_("mkdtemp failed");
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        cli_run_result r;
        char db[600];
        snprintf(db, sizeof db, "%s/nothing-here", tmp);
        cli_run((const char *[]){cmds[i], "--db", db, NULL}, &r);
        CHECK_EQ_INT(r.exit_code, 1);
        snprintf(want, sizeof want, "clipdb: error: no database at %s (", db);
        if (strncmp(r.err, want, strlen(want)))
            CDB_TEST_FAIL_("%s: stderr is '%s', want it to start with '%s'", cmds[i], r.err, want);
        CHECK(strstr(r.err, "\nhint: run 'clipdb init") != NULL);
        CHECK_EQ_INT((int)r.out_len, 0);
        cli_run_free(&r);
    }
    rmdir(tmp);
}

/* --db beats CLIPDB_DB beats ./clipdb (the error names the path used). */
CDB_TEST(db_path_precedence) {
    char tmp[512];
    cli_run_result r;
    if (!cli_tmpdir(tmp, sizeof tmp)) CDB_TEST_FAIL_("mkdtemp failed");
    /* default: ./clipdb in the working directory */
    cli_run_in(tmp, (const char *[]){"stats", NULL}, NULL, &r);
    CHECK_EQ_INT(r.exit_code, 1);
    CHECK(strstr(r.err, "no database at clipdb (") != NULL);
    cli_run_free(&r);
    /* the environment */
    cli_run_in(tmp, (const char *[]){"stats", NULL}, (const char *[]){"CLIPDB_DB=/nonexistent/envdb", NULL}, &r);
    CHECK(strstr(r.err, "no database at /nonexistent/envdb (CLIPDB_DB)") != NULL);
    cli_run_free(&r);
    /* the flag wins over the environment, before or after the command */
    cli_run_in(tmp, (const char *[]){"stats", "--db", "/nonexistent/flagdb", NULL},
               (const char *[]){"CLIPDB_DB=/nonexistent/envdb", NULL}, &r);
    CHECK(strstr(r.err, "no database at /nonexistent/flagdb (--db)") != NULL);
    cli_run_free(&r);
    cli_run_in(tmp, (const char *[]){"--db=/nonexistent/globaldb", "stats", NULL},
               (const char *[]){"CLIPDB_DB=/nonexistent/envdb", NULL}, &r);
    CHECK(strstr(r.err, "no database at /nonexistent/globaldb (--db)") != NULL);
    cli_run_free(&r);
    rmdir(tmp);
}

CDB_TEST(model_not_found_is_failure) {
    cli_run_result r;
    cli_run((const char *[]){"tokenize", "--model", "/nonexistent/model", "a cat", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 1);
    CHECK(strncmp(r.err, "clipdb: error: cannot load the model /nonexistent/model (", 56) == 0);
    CHECK_EQ_INT((int)r.out_len, 0);
    cli_run_free(&r);
    cli_run((const char *[]){"ingest", "/nonexistent/photos", "--db", "/nonexistent/db", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 1);
    CHECK(strstr(r.err, "cannot ingest /nonexistent/photos (No such file or directory)") != NULL);
    cli_run_free(&r);
}

/* Runs clipdb with stderr on a pseudo-terminal; returns what it wrote there (the
** caller frees it), or NULL with nothing allocated when there is no pseudo-terminal
** (a chroot or a container without /dev/pts) or no memory. */
static char *run_on_pty(const char *const *args, int no_color, int *exit_code) {
    int master, slave, status = 0;
    pid_t pid;
    char *buf;
    size_t len = 0;
    if (openpty(&master, &slave, NULL, NULL, NULL) != 0) return NULL;
    if (!(buf = calloc(1, 1)) || (pid = fork()) < 0) {
        free(buf);
        close(master), close(slave);
        return NULL;
    }
    if (pid == 0) {
        close(master);
        dup2(slave, 2);
        unsetenv("CLIPDB_DB");
        if (no_color) setenv("NO_COLOR", "1", 1);
        else unsetenv("NO_COLOR");
        setenv("TERM", "xterm", 1);
        cli_exec_(args);
    }
    close(slave);
    for (;;) {
        char chunk[4096];
        ssize_t k = read(master, chunk, sizeof chunk);
        if (k <= 0) break;
        cli_run_append_(&buf, &len, chunk, (size_t)k);
    }
    close(master);
    waitpid(pid, &status, 0);
    *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return buf;
}

CDB_TEST(color_only_on_a_terminal_without_no_color) {
    int code = 0;
    char *err = run_on_pty((const char *[]){"stats", "--db", "/nonexistent/db", NULL}, 0, &code);
    if (!err) CDB_SKIP("no pseudo-terminal available");
    CHECK_EQ_INT(code, 1);
    CHECK(strstr(err, "\033[") != NULL); /* colored on a terminal */
    free(err);
    err = run_on_pty((const char *[]){"stats", "--db", "/nonexistent/db", NULL}, 1, &code);
    CHECK(err && strstr(err, "\033[") == NULL); /* NO_COLOR */
    CHECK(err && strstr(err, "clipdb: error: no database at") != NULL);
    free(err);
    {
        cli_run_result r; /* not a terminal: never colored */
        cli_run_in(NULL, (const char *[]){"stats", "--db", "/nonexistent/db", NULL},
                   (const char *[]){"NO_COLOR=", NULL}, &r);
        CHECK(strstr(r.err, "\033[") == NULL);
        cli_run_free(&r);
    }
}

/* init warns exactly when the model it binds cannot encode text: a bare .safetensors
** file has no tokenizer files beside it (only a model folder does), unless the
** standard vocabulary fits it. The oracle is a text search on the new database. */
CDB_TEST(init_warns_when_text_cannot_be_encoded) {
    const char *model = cli_find_model();
    char tmp[512], db[600], file[4200], other[4200];
    cli_run_result r, s;
    if (!model) CDB_SKIP("no model: set CLIPDB_TEST_MODEL or add models/");
    CHECK(cli_tmpdir(tmp, sizeof tmp) != NULL);
    snprintf(file, sizeof file, "%s/model.safetensors", model);
    for (int i = 0; i < 2; i++) {
        snprintf(db, sizeof db, "%s/db%d", tmp, i);
        cli_run((const char *[]){"init", "--db", db, "--model", i ? file : model, NULL}, &r);
        CHECK_EQ_INT(r.exit_code, 0);
        cli_run((const char *[]){"search", "--db", db, "a red circle", NULL}, &s);
        int warned = strstr(r.err, "cannot encode text") != NULL;
        CHECK_MSG(warned == (s.exit_code != 0), "init %s: warned %d, text search exit %d (%s)",
                  i ? "file" : "folder", warned, s.exit_code, s.err);
        if (i == 0) CHECK_MSG(!warned, "a model folder: %s", r.err);
        cli_run_free(&r);
        cli_run_free(&s);
    }
    snprintf(other, sizeof other, "rm -rf '%s'", tmp);
    CHECK_EQ_INT(system(other), 0);
}

/* init over a regular file says that a database is a folder (it said "mkdir
** FILE/shards: Not a directory") and leaves the file as it was. */
CDB_TEST(init_on_a_file) {
    char tmp[512], file[600], cmd[700];
    cli_run_result r;
    FILE *f;
    CHECK(cli_tmpdir(tmp, sizeof tmp) != NULL);
    snprintf(file, sizeof file, "%s/notes.txt", tmp);
    CHECK((f = fopen(file, "w")) != NULL);
    fputs("mine\n", f);
    fclose(f);
    cli_run((const char *[]){"init", "--db", file, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 1);
    CHECK_MSG(strstr(r.err, "is a file: a database is a folder") != NULL, "%s", r.err);
    cli_run_free(&r);
    char *back = cli_read_file(file, NULL);
    CHECK_EQ_STR(back ? back : "", "mine\n");
    free(back);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK_EQ_INT(system(cmd), 0);
}

CDB_TEST_MAIN(help_golden, help_lines_fit_80_columns, version, usage_errors_exit_2,
              help_wins_over_bad_options, missing_database, db_path_precedence,
              model_not_found_is_failure, color_only_on_a_terminal_without_no_color,
              init_warns_when_text_cannot_be_encoded, init_on_a_file)
