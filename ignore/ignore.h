/*
** ignore.h: which paths of a photo root a user has left out, decided from rules in
** the syntax of gitignore (the part of it that .clipdbignore files and the rules a
** root keeps in the catalog use). Pure: path strings in, a verdict out; no file
** system access.
**
** Rule syntax, one rule per line, as git's gitignore(5) describes it:
** - blank lines and lines starting with '#' are skipped; "\#" and "\!" start a rule
**   with a literal '#' or '!'; trailing spaces are dropped unless escaped ("\ ");
** - '!' negates: a path matched by a later (or deeper) negated rule is included again,
**   unless a folder above it is left out (git never looks inside a left-out folder);
** - a trailing '/' makes the rule match folders only;
** - a rule with a '/' at its start or middle is anchored at the folder of the file it
**   comes from; one without matches a name at any depth below that folder;
** - '*' matches any run of characters but '/', '?' one character but '/', "[a-z]",
**   "[!a]", "[^a]" and the POSIX classes ("[[:digit:]]") one character from a set,
**   '\' quotes the next character; "**" between slashes (or at either end) matches
**   any number of folders, zero included: "**" /x, x/ "**", a/ "**" /b.
** Precedence: the rules of a deeper folder's file win over those of a shallower
** one; within one file, the last matching rule wins (git's order).
**
** Paths are relative to the root, '/'-separated, without a leading or trailing '/'
** ("2024/trip/img.jpg"). Matching is byte-wise and case-sensitive, as git's is by
** default.
**
** Thread-safety: a cdb_ignore is read-only once its rules are added; matching may
** then run concurrently. Adding needs exclusive access.
*/
#ifndef CDB_IGNORE_H
#define CDB_IGNORE_H

#include <stddef.h>

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cdb_ignore cdb_ignore;

/* An empty rule set (matches nothing). */
cdb_status cdb_ignore_new(cdb_ignore **out /* OUT */);
void cdb_ignore_free(cdb_ignore *ig); /* NULL is fine */

/* Adds the rules of one ignore file found in folder `base` (relative to the root, ""
** for the root itself, no trailing '/'). text: n bytes, not retained, need not be
** NUL-terminated; lines end at '\n' ("\r\n" too). Lines that are no rule (comments,
** blanks, a lone "!" or "/") are skipped, as git skips them. CDB_NOMEM, or
** CDB_INVALID for a NULL argument or a base with a leading or trailing '/'. */
cdb_status cdb_ignore_add(cdb_ignore *ig, const char *base, const char *text, size_t n);

/* Number of rules added so far. */
size_t cdb_ignore_count(const cdb_ignore *ig);

/* The verdict of the rules for `path` alone, without looking at the folders above it:
** CDB_IGNORE_NONE when no rule matches, else what the winning rule says. */
typedef enum cdb_ignore_verdict {
    CDB_IGNORE_NONE = 0,     /* no rule matches */
    CDB_IGNORE_EXCLUDED = 1, /* the winning rule leaves it out */
    CDB_IGNORE_INCLUDED = 2  /* the winning rule is a '!' rule */
} cdb_ignore_verdict;
cdb_ignore_verdict cdb_ignore_match(const cdb_ignore *ig, const char *path, int is_dir);

/* 1 when `path` is left out: it, or one of the folders above it, is
** CDB_IGNORE_EXCLUDED (what `git check-ignore` answers); 0 otherwise (1 when out of
** memory: fails closed, so nothing private is taken in by accident). is_dir says
** whether path itself is a folder (the folders above it are folders). A walker
** that stops at left-out folders need only call cdb_ignore_match on each entry. */
int cdb_ignore_path(const cdb_ignore *ig, const char *path, int is_dir);

#ifdef __cplusplus
}
#endif

#endif /* CDB_IGNORE_H */
