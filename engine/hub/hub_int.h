/*
** hub_int.h: the parts of the Hugging Face Hub client (engine/hub.c) that read what a
** server sends or a user types, with no I/O: response header lines, the revision API's
** JSON, a sharded checkpoint's index, repository names, revisions, file names, URL
** quoting. Private to engine/ (tests/hub and the fuzz target include it); the public
** contract is the hub section of engine/engine.h.
**
** Everything here treats its input as hostile: any bytes, any length. Nothing
** allocates except the functions that say they do.
*/
#ifndef CDB_HUB_INT_H
#define CDB_HUB_INT_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What one HTTP response said that the client uses. Strings are NUL-terminated and
** truncated to their buffers; a value too long for its buffer is dropped ("" / -1), so
** a truncated ETag or commit can never name a file. */
typedef struct hub_resp {
    long status;               /* from the status line; 0 before one */
    char etag[160];            /* ETag, normalized (W/ and quotes stripped) */
    char linked_etag[160];     /* X-Linked-Etag, normalized: the LFS file's sha256 */
    char commit[64];           /* X-Repo-Commit */
    char location[2048];       /* Location */
    char error_code[64];       /* X-Error-Code (RepoNotFound, RevisionNotFound, ...) */
    char error_message[256];   /* X-Error-Message */
    int64_t content_length;    /* Content-Length; -1 when absent */
    int64_t linked_size;       /* X-Linked-Size; -1 when absent */
    int64_t range_start;       /* Content-Range: bytes START-END/TOTAL; -1 when absent */
    int64_t range_total;       /*   its TOTAL; -1 when absent or '*' */
} hub_resp;

/* Empties r (status 0, strings "", numbers -1). */
void cdb_hub_resp_reset(hub_resp *r);
/* Reads one header line as curl hands it over (with or without CR LF). A status line
** ("HTTP/1.1 302 Found") starts a new response: r is reset and status set (a redirect
** followed gives each response's headers in turn). Unknown or malformed lines are
** ignored. */
void cdb_hub_header_line(hub_resp *r, const char *line, size_t len);

/* ETag value to a file name: W/ prefix and quotes stripped, as huggingface_hub's
** _normalize_etag. 0 and out set when the result is a non-empty name of [0-9A-Za-z_-]
** only (so it can be a blob's name); -1 otherwise. */
int cdb_hub_etag_normalize(const char *v, size_t len, char *out, size_t cap);

/* 1 for 40 lowercase hex digits (a commit), 0 otherwise. */
int cdb_hub_is_commit(const char *s);

/* A repository id as huggingface_hub validates it: NAME or ORG/NAME, each part of
** [A-Za-z0-9_.-] starting and ending with [A-Za-z0-9_], no "--" or "..", not ending
** with ".git", at most 96 bytes. 0 or -1. */
int cdb_hub_repo_valid(const char *repo);
/* A revision (branch, tag, commit, "refs/pr/1"): non-empty, at most 255 bytes,
** printable ASCII with no space or backslash, no empty, "." or ".." path component,
** not starting with '/'. 0 or -1. */
int cdb_hub_revision_valid(const char *rev);
/* A repository file name that may be written under a snapshot: a relative path of
** printable ASCII (no backslash), no empty, "." or ".." component. 0 or -1. */
int cdb_hub_filename_valid(const char *name);

/* Percent-encodes s into out as Python's urllib.parse.quote (unreserved characters
** and the ones in safe kept). 0, or -1 when out is too small. */
int cdb_hub_quote(const char *s, const char *safe, char *out, size_t cap);

/* The revision API's answer (/api/models/REPO/revision/REV): its "sha" (a commit) and
** its "siblings"' "rfilename"s, the valid ones (cdb_hub_filename_valid) only. 0, or
** -1 with the reason in cdb_errmsg (CDB_CORRUPT). *files: n_files strings, one block:
** cdb_free(*files) frees them all. */
int cdb_hub_parse_revision(const char *json, size_t len, char commit[41], char ***files,
                           int *n_files);
/* The shards a model.safetensors.index.json names (the distinct values of its
** "weight_map"), each a valid top-level .safetensors name. As cdb_hub_parse_revision. */
int cdb_hub_parse_index(const char *json, size_t len, char ***shards, int *n_shards);

/* Which of a repository's files a model needs. files[n]; wanted[i] set to 1 for the
** ones to fetch: the weights the encoder would load (open_clip_model.safetensors, else
** model.safetensors, else the sharded index's shards (*shards_pending set to 1: the
** index must be read first), else every top-level .safetensors), the configs and
** the tokenizer files. Never pytorch_model.bin, flax, tf or onnx files, nor files in
** subfolders. */
void cdb_hub_select(char *const *files, int n, int *wanted /* OUT n */,
                    int *shards_pending /* OUT */);

#ifdef __cplusplus
}
#endif
#endif /* CDB_HUB_INT_H */
