/*
** test_ignore.c: the ignore rules (ignore/ignore.h) against their oracle, git itself.
**
** Each trial builds a random tree of folders and files in a scratch git repository,
** puts random rule files (.gitignore, the same text clipdb reads from .clipdbignore)
** in random folders, asks `git check-ignore` which paths are ignored and compares
** with cdb_ignore_path for every file and folder of the tree. The rules draw from
** every part of the syntax ignore.h promises: '!', anchoring, trailing '/', '*', '?',
** "**" in all three places, brackets with ranges, negation and classes, escapes,
** comments, blank lines, trailing spaces (escaped or not) and CRLF line ends.
** Skipped (77) where git is not installed.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdb_test.h"
#include "ignore/ignore.h"

#define MAX_PATHS 256
#define TRIALS 1000

static unsigned long long rng_state;
static unsigned rnd(unsigned n)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)((rng_state >> 33) % n);
}

/* Names a tree is made of: letters the patterns use, extensions, a space, and the
** characters with a meaning at the start of a rule ('#', '!'). */
static const char *const names[] = {"a", "b", "ab", "abc", "ba", "a.jpg", "b.jpg", "c.png",
    "x", "a b", "#a", "!b", "a1", "B"};
#define N_NAMES (sizeof names / sizeof names[0])

/* One random path segment of a rule. */
static const char *const segs[] = {"a", "b", "ab", "*", "**", "?", "a*", "*.jpg", "[ab]",
    "[!a]*", "a?", "[a-c]*", "*b", "x", "[[:digit:]]", "a[[:digit:]]", "\\#a", "\\!b",
    "a b", "[^b]", "B", "**b", "a**"};
#define N_SEGS (sizeof segs / sizeof segs[0])

typedef struct tree {
    char paths[MAX_PATHS][128];
    int is_dir[MAX_PATHS];
    int n;
} tree;

static int run(const char *cmd)
{
    int rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

/* Adds folder `dir` (already created) and, recursively, random contents below it. */
static void grow(tree *t, const char *root /* < 256 bytes */, const char *dir, int depth)
{
    int n = 1 + (int)rnd(4);
    for (int i = 0; i < n && t->n < MAX_PATHS; i++) {
        char rel[128], abs[400];
        const char *name = names[rnd(N_NAMES)];
        if (snprintf(rel, sizeof rel, "%s%s%s", dir, *dir ? "/" : "", name) >= (int)sizeof rel ||
            snprintf(abs, sizeof abs, "%s/%s", root, rel) >= (int)sizeof abs)
            continue;
        struct stat st;
        if (lstat(abs, &st) == 0)
            continue; /* drawn twice */
        int folder = depth < 4 && rnd(3) == 0;
        if (folder) {
            if (mkdir(abs, 0700) != 0)
                continue;
        } else {
            FILE *f = fopen(abs, "w");
            if (!f)
                continue;
            fclose(f);
        }
        snprintf(t->paths[t->n], sizeof t->paths[t->n], "%s", rel);
        t->is_dir[t->n++] = folder;
        if (folder)
            grow(t, root, rel, depth + 1);
    }
}

/* A random rule file's text in buf. */
static void rules_text(char *buf, size_t cap)
{
    size_t k = 0;
    int lines = 1 + (int)rnd(5);
    buf[0] = '\0';
    for (int l = 0; l < lines; l++) {
        char line[160] = "";
        int kind = (int)rnd(20);
        if (kind == 0) {
            snprintf(line, sizeof line, "# comment a");
        } else if (kind == 1) {
            line[0] = '\0'; /* blank line */
        } else {
            size_t m = 0;
            if (rnd(4) == 0)
                line[m++] = '!';
            if (rnd(4) == 0)
                line[m++] = '/';
            int n_seg = 1 + (int)rnd(3);
            for (int s = 0; s < n_seg; s++)
                m += (size_t)snprintf(line + m, sizeof line - m, "%s%s", s ? "/" : "",
                                      segs[rnd(N_SEGS)]);
            if (rnd(4) == 0)
                line[m++] = '/';
            if (rnd(8) == 0)
                m += (size_t)snprintf(line + m, sizeof line - m, "%s", rnd(2) ? "  " : "\\ ");
            line[m] = '\0';
        }
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", line, rnd(6) == 0 ? "\r\n" : "\n");
    }
}

/* One trial: a tree in folder t<i> of the scratch repository, its rule files, and
** git's verdict on each of its paths. */
typedef struct trial {
    tree t;
    char texts[4][1024];
    char bases[4][128];
    int n_files;
    int want[MAX_PATHS];
} trial;

/* git's verdicts for every trial's paths, in one `git check-ignore` run over the
** repository at root (so the test spawns two processes, not two per trial).
** 0, or -1 on failure. */
static int git_verdicts(const char *root, trial *trials, int n)
{
    char list[300], out[300], cmd[2048];
    if (snprintf(list, sizeof list, "%s.list", root) >= (int)sizeof list ||
        snprintf(out, sizeof out, "%s.out", root) >= (int)sizeof out)
        return -1;
    FILE *f = fopen(list, "w");
    if (!f)
        return -1;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < trials[k].t.n; i++)
            fprintf(f, "t%d/%s%c", k, trials[k].t.paths[i], 0);
    fclose(f);
    /* No global or system configuration: only the trees' own .gitignore files count. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null "
             "XDG_CONFIG_HOME=/nonexistent git check-ignore --no-index -z --stdin "
             "<'%s' >'%s'", root, list, out);
    int rc = run(cmd);
    if (rc != 0 && rc != 1)
        return -1;
    f = fopen(out, "rb");
    if (!f)
        return -1;
    char path[256];
    size_t m = 0;
    for (int c; (c = fgetc(f)) != EOF;) {
        if (c != 0) {
            if (m + 1 < sizeof path)
                path[m++] = (char)c;
            continue;
        }
        path[m] = '\0';
        m = 0;
        char *rel = NULL;
        long k = strtol(path + 1, &rel, 10);
        if (path[0] != 't' || *rel != '/' || k < 0 || k >= n)
            continue;
        tree *t = &trials[k].t;
        for (int i = 0; i < t->n; i++)
            if (strcmp(t->paths[i], rel + 1) == 0)
                trials[k].want[i] = 1;
    }
    fclose(f);
    remove(list);
    remove(out);
    return 0;
}

/* Builds trial k under repo/t<k>: a random tree and up to four rule files. 0 or -1. */
static int make_trial(const char *repo, int k, trial *tr)
{
    char root[256];
    snprintf(root, sizeof root, "%s/t%d", repo, k);
    if (mkdir(root, 0700) != 0)
        return -1;
    grow(&tr->t, root, "", 0);
    for (int i = -1; i < tr->t.n && tr->n_files < 4; i++) { /* the root, random folders */
        if (i >= 0 && (!tr->t.is_dir[i] || rnd(3) != 0))
            continue;
        int j = tr->n_files++;
        snprintf(tr->bases[j], sizeof tr->bases[j], "%s", i < 0 ? "" : tr->t.paths[i]);
        rules_text(tr->texts[j], sizeof tr->texts[j]);
        char file[512];
        if (snprintf(file, sizeof file, "%s/%s%s.gitignore", root, tr->bases[j],
                     *tr->bases[j] ? "/" : "") >= (int)sizeof file)
            return -1;
        FILE *f = fopen(file, "wb");
        if (!f)
            return -1;
        fputs(tr->texts[j], f);
        fclose(f);
    }
    return 0;
}

CDB_TEST(ignore_matches_git_check_ignore)
{
    if (run("git --version >/dev/null 2>&1") != 0)
        CDB_SKIP("git is not installed");
    char scratch[] = "/tmp/cdb_ignore_XXXXXX", cmd[600];
    if (!mkdtemp(scratch))
        CDB_TEST_FAIL_("mkdtemp: %s", strerror(errno));
    snprintf(cmd, sizeof cmd, "git init -q '%s'", scratch);
    trial *trials = calloc(TRIALS, sizeof *trials);
    int ok = trials && run(cmd) == 0;
    rng_state = 28;
    for (int k = 0; k < TRIALS && ok; k++)
        ok = make_trial(scratch, k, &trials[k]) == 0;
    ok = ok && git_verdicts(scratch, trials, TRIALS) == 0;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    run(cmd);
    if (!ok) {
        free(trials);
        CDB_TEST_FAIL_("could not build the trees or run git check-ignore");
    }
    int n_checked = 0, n_ignored = 0, failed = 0;
    for (int k = 0; k < TRIALS && !failed; k++) {
        trial *tr = &trials[k];
        cdb_ignore *ig = NULL;
        CHECK_OK(cdb_ignore_new(&ig));
        for (int j = 0; j < tr->n_files; j++)
            CHECK_OK(cdb_ignore_add(ig, tr->bases[j], tr->texts[j], strlen(tr->texts[j])));
        for (int i = 0; i < tr->t.n && !failed; i++) {
            int got = cdb_ignore_path(ig, tr->t.paths[i], tr->t.is_dir[i]);
            n_checked++;
            n_ignored += tr->want[i];
            if (got == tr->want[i])
                continue;
            failed = 1;
            fprintf(stderr, "    trial %d: '%s'%s: git says %d, clipdb %d; rules:\n", k,
                    tr->t.paths[i], tr->t.is_dir[i] ? " (folder)" : "", tr->want[i], got);
            for (int j = 0; j < tr->n_files; j++)
                fprintf(stderr, "    [%s]\n%s", tr->bases[j], tr->texts[j]);
        }
        cdb_ignore_free(ig);
    }
    free(trials);
    printf("    %d paths checked, %d ignored by git\n", n_checked, n_ignored);
    CHECK(!failed);
    /* the trials must exercise both answers, or the comparison proves little */
    CHECK(n_ignored > n_checked / 10 && n_ignored < n_checked * 9 / 10);
}

CDB_TEST(ignore_api_edges)
{
    cdb_ignore *ig = NULL;
    CHECK_OK(cdb_ignore_new(&ig));
    CHECK_EQ_INT(cdb_ignore_path(ig, "a/b.jpg", 0), 0); /* no rules: nothing left out */
    CHECK_RC(cdb_ignore_add(ig, "/a", "x", 1), CDB_INVALID);
    CHECK_RC(cdb_ignore_add(ig, "a/", "x", 1), CDB_INVALID);
    CHECK_RC(cdb_ignore_add(NULL, "", "x", 1), CDB_INVALID);
    /* comments, blanks and rules that are no rule add nothing */
    const char *none = "# a\n\n!\n/\n   \n";
    CHECK_OK(cdb_ignore_add(ig, "", none, strlen(none)));
    CHECK_EQ_INT((int)cdb_ignore_count(ig), 0);
    /* text need not be NUL-terminated: the last line ends at n */
    const char text[] = {'p', 'r', 'i', 'v'};
    CHECK_OK(cdb_ignore_add(ig, "", text, sizeof text));
    CHECK_EQ_INT((int)cdb_ignore_count(ig), 1);
    CHECK_EQ_INT(cdb_ignore_match(ig, "x/priv", 1), CDB_IGNORE_EXCLUDED);
    CHECK_EQ_INT(cdb_ignore_match(ig, "x", 1), CDB_IGNORE_NONE);
    CHECK_EQ_INT(cdb_ignore_path(ig, "x/priv/deep/er/img.jpg", 0), 1);
    /* a path longer than the matcher's stack buffer */
    static char longpath[3000];
    memset(longpath, 'a', sizeof longpath - 1);
    memcpy(longpath + 100, "/priv/", 6);
    CHECK_EQ_INT(cdb_ignore_path(ig, longpath, 0), 1);
    cdb_ignore_free(ig);
    cdb_ignore_free(NULL);
}

CDB_TEST_MAIN(ignore_matches_git_check_ignore, ignore_api_edges)
