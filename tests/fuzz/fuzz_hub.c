/*
** fuzz_hub.c: libFuzzer target for what the Hugging Face Hub client reads from a server
** or a user (engine/hub/hub_int.h, engine/hub/hub_parse.c): response header lines (status lines,
** ETag / X-Linked-Etag, X-Repo-Commit, Content-Range, sizes), the revision API's JSON
** and the file selection over its names, a sharded checkpoint's index, and the checks
** on repository names, revisions and file names, with URL quoting.
**
** The input's first byte picks how the rest is read: as header lines (split at '\n'),
** as a revision answer, as an index, or as NUL-separated names. Invariants checked:
** a blob name (ETag) or a commit that came through is a plain file name; every file the
** selection wants passed cdb_hub_filename_valid; a quoted string is ASCII.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/hub/hub_int.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

static void check_name(const char *s) {
    if (strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, "..")) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    const char *p = (const char *)data + 1;
    size_t len = n ? n - 1 : 0;
    if (n == 0) return 0;
    switch (data[0] % 4) {
    case 0: { /* header lines */
        hub_resp r;
        cdb_hub_resp_reset(&r);
        while (len) {
            const char *nl = memchr(p, '\n', len);
            size_t l = nl ? (size_t)(nl - p) + 1 : len;
            cdb_hub_header_line(&r, p, l);
            p += l;
            len -= l;
        }
        if (r.etag[0]) check_name(r.etag);
        if (r.linked_etag[0]) check_name(r.linked_etag);
        if (r.commit[0] && !cdb_hub_is_commit(r.commit)) abort();
        break;
    }
    case 1: { /* the revision API */
        char commit[41], **files = NULL;
        int nf = 0;
        if (cdb_hub_parse_revision(p, len, commit, &files, &nf) == 0) {
            int *want = calloc((size_t)nf + 1, sizeof *want), pending;
            if (!cdb_hub_is_commit(commit)) abort();
            cdb_hub_select(files, nf, want, &pending);
            for (int i = 0; i < nf; i++)
                if (want[i] && (cdb_hub_filename_valid(files[i]) || strchr(files[i], '/')))
                    abort();
            free(want);
            cdb_free(files);
        }
        break;
    }
    case 2: { /* a sharded checkpoint's index */
        char **shards = NULL;
        int ns = 0;
        if (cdb_hub_parse_index(p, len, &shards, &ns) == 0) {
            for (int i = 0; i < ns; i++) check_name(shards[i]);
            cdb_free(shards);
        }
        break;
    }
    default: { /* names: repository, revision, file; quoting */
        char *s = malloc(len + 1), out[512];
        memcpy(s, p, len);
        s[len] = '\0';
        (void)cdb_hub_repo_valid(s);
        if (cdb_hub_revision_valid(s) == 0 &&
            (s[0] == '/' || !strncmp(s, "../", 3) || strstr(s, "/../") || !strcmp(s, "..") ||
             (strlen(s) >= 3 && !strcmp(s + strlen(s) - 3, "/.."))))
            abort(); /* a revision is a path under refs/: never out of it */
        (void)cdb_hub_filename_valid(s);
        if (cdb_hub_quote(s, "/", out, sizeof out) == 0)
            for (const char *c = out; *c; c++)
                if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f) abort();
        free(s);
        break;
    }
    }
    return 0;
}
