/*
** ignore.c: gitignore-style rules (ignore.h). The wildcard matcher follows the
** semantics of git's wildmatch.c with WM_PATHNAME (the same answers, including its
** ABORT shortcuts, so a rule means in clipdb what it means in git), and the rule
** parsing and precedence follow git's dir.c. Tested against `git check-ignore` on
** random trees and rule files (tests/ignore/test_ignore.c).
*/
#include "ignore/ignore.h"

#include <string.h>

enum { RULE_NEGATE = 1, RULE_DIR_ONLY = 2, RULE_BASENAME = 4 };

typedef struct rule {
    char *pat;     /* the pattern, '!' and trailing '/' removed; NUL-terminated */
    char *base;    /* folder of the file it came from, "" for the root */
    size_t baselen;
    int depth;     /* components in base: deeper files win */
    int flags;     /* RULE_* */
} rule;

struct cdb_ignore {
    rule *rules;
    size_t n, cap;
};

/* ---- wildcard matching (git's wildmatch, WM_PATHNAME) ---------------------------- */

enum { WM_MATCH = 0, WM_NOMATCH = 1, WM_ABORT_ALL = -1, WM_ABORT_TO_STARSTAR = -2 };

/* Is c in the POSIX class name[0..len) (the C locale's, as git's sane-ctype)? *ok
** says whether the class exists. */
static int class_has(const char *name, size_t len, unsigned char c, int *ok /* OUT */)
{
    static const char *const classes[] = {"alnum", "alpha", "blank", "cntrl", "digit",
        "graph", "lower", "print", "punct", "space", "upper", "xdigit"};
    int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'), digit = c >= '0' && c <= '9';
    int which = -1;
    for (int i = 0; i < (int)(sizeof classes / sizeof classes[0]); i++)
        if (strlen(classes[i]) == len && memcmp(classes[i], name, len) == 0)
            which = i;
    *ok = which >= 0;
    switch (which) {
    case 0: return alpha || digit;
    case 1: return alpha;
    case 2: return c == ' ' || c == '\t';
    case 3: return c < 32 || c == 127;
    case 4: return digit;
    case 5: return c > 32 && c < 127;
    case 6: return c >= 'a' && c <= 'z';
    case 7: return c >= 32 && c < 127;
    case 8: return c > 32 && c < 127 && !alpha && !digit;
    case 9: return c == ' ' || (c >= '\t' && c <= '\r');
    case 10: return c >= 'A' && c <= 'Z';
    case 11: return digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    default: return 0;
    }
}

/* One bracket expression at *pp (just past '['), against text character t. Advances
** *pp to its closing ']'. WM_MATCH, WM_NOMATCH or WM_ABORT_ALL (malformed). */
static int match_bracket(const unsigned char **pp, unsigned char t)
{
    const unsigned char *p = *pp;
    unsigned char p_ch = *p, prev_ch = 0;
    int negated = 0, matched = 0;
    if (p_ch == '^')
        p_ch = '!';
    if (p_ch == '!') {
        negated = 1;
        p_ch = *++p;
    }
    do {
        if (!p_ch)
            return WM_ABORT_ALL;
        if (p_ch == '\\') {
            p_ch = *++p;
            if (!p_ch)
                return WM_ABORT_ALL;
            matched |= t == p_ch;
        } else if (p_ch == '-' && prev_ch && p[1] && p[1] != ']') {
            p_ch = *++p;
            if (p_ch == '\\' && !(p_ch = *++p))
                return WM_ABORT_ALL;
            matched |= t <= p_ch && t >= prev_ch;
            p_ch = 0; /* a range is not the start of the next one */
        } else if (p_ch == '[' && p[1] == ':') {
            const unsigned char *s = p += 2;
            while ((p_ch = *p) && p_ch != ']')
                p++;
            if (!p_ch)
                return WM_ABORT_ALL;
            if (p - s - 1 < 0 || p[-1] != ':') { /* no ":]": a literal '[' */
                p = s - 2;
                p_ch = '[';
                matched |= t == p_ch;
                continue;
            }
            int ok;
            matched |= class_has((const char *)s, (size_t)(p - s - 1), t, &ok);
            if (!ok)
                return WM_ABORT_ALL;
            p_ch = 0;
        } else {
            matched |= t == p_ch;
        }
    } while (prev_ch = p_ch, (p_ch = *++p) != ']');
    *pp = p;
    return matched == negated || t == '/' ? WM_NOMATCH : WM_MATCH;
}

static int dowild(const unsigned char *p, const unsigned char *text, const unsigned char *start)
{
    for (; *p; text++, p++) {
        unsigned char p_ch = *p, t_ch = *text;
        if (t_ch == '\0' && p_ch != '*')
            return WM_ABORT_ALL;
        switch (p_ch) {
        case '\\': /* the quoted character is a literal ('\0' at the end: no match) */
            p_ch = *++p;
            /* fall through */
        default:
            if (t_ch != p_ch)
                return WM_NOMATCH;
            continue;
        case '?':
            if (t_ch == '/')
                return WM_NOMATCH;
            continue;
        case '[': {
            ++p;
            int m = match_bracket(&p, t_ch);
            if (m != WM_MATCH)
                return m;
            continue;
        }
        case '*': {
            int match_slash = 0;
            if (*++p == '*') {
                const unsigned char *prev_p = p - 2;
                while (*++p == '*') {
                }
                /* "**" is special only between slashes or at the ends of the pattern */
                if ((prev_p < start || *prev_p == '/') &&
                    (*p == '\0' || *p == '/' || (p[0] == '\\' && p[1] == '/'))) {
                    if (p[0] == '/' && dowild(p + 1, text, start) == WM_MATCH)
                        return WM_MATCH; /* "/ ** /" as zero folders */
                    match_slash = 1;
                }
            }
            if (*p == '\0') {
                if (!match_slash && strchr((const char *)text, '/'))
                    return WM_ABORT_TO_STARSTAR;
                return WM_MATCH;
            }
            if (!match_slash && *p == '/') { /* "*" then '/': skip to the next '/' */
                const char *slash = strchr((const char *)text, '/');
                if (!slash)
                    return WM_ABORT_ALL;
                text = (const unsigned char *)slash;
                break; /* the loop steps past both slashes */
            }
            for (;; t_ch = *++text) {
                if (t_ch == '\0')
                    return WM_ABORT_ALL;
                int m = dowild(p, text, start);
                if (m != WM_NOMATCH) {
                    if (!match_slash || m != WM_ABORT_TO_STARSTAR)
                        return m;
                } else if (!match_slash && t_ch == '/') {
                    return WM_ABORT_TO_STARSTAR;
                }
            }
        }
        }
    }
    return *text ? WM_NOMATCH : WM_MATCH;
}

static int wildmatch(const char *pat, const char *text)
{
    const unsigned char *p = (const unsigned char *)pat;
    return dowild(p, (const unsigned char *)text, p) == WM_MATCH;
}

/* ---- rules ------------------------------------------------------------------- */

cdb_status cdb_ignore_new(cdb_ignore **out)
{
    if (!out)
        return cdb_seterr(CDB_INVALID, "cdb_ignore_new: out is NULL");
    *out = cdb_malloc(sizeof **out);
    if (!*out)
        return cdb_seterr(CDB_NOMEM, "cdb_ignore_new: out of memory");
    memset(*out, 0, sizeof **out);
    return CDB_OK;
}

void cdb_ignore_free(cdb_ignore *ig)
{
    if (!ig)
        return;
    for (size_t i = 0; i < ig->n; i++) {
        cdb_free(ig->rules[i].pat);
        cdb_free(ig->rules[i].base);
    }
    cdb_free(ig->rules);
    cdb_free(ig);
}

size_t cdb_ignore_count(const cdb_ignore *ig)
{
    return ig ? ig->n : 0;
}

/* Length of line[0..len) without its unescaped trailing spaces (git's
** trim_trailing_spaces). */
static size_t trim_trailing_spaces(const char *line, size_t len)
{
    size_t keep = len;
    int in_spaces = 0;
    for (size_t i = 0; i < len; i++) {
        if (line[i] == ' ') {
            if (!in_spaces)
                keep = i;
            in_spaces = 1;
            continue;
        }
        in_spaces = 0;
        if (line[i] == '\\' && i + 1 < len)
            i++;
    }
    return in_spaces ? keep : len;
}

static cdb_status add_rule(cdb_ignore *ig, const char *base, int depth, const char *line,
                           size_t len)
{
    int flags = 0;
    if (len && line[0] == '!') {
        flags |= RULE_NEGATE;
        line++, len--;
    }
    if (len && line[len - 1] == '/') {
        flags |= RULE_DIR_ONLY;
        len--;
    }
    if (len == 0)
        return CDB_OK; /* "!", "/" or "!/": no rule, as in git */
    if (!memchr(line, '/', len))
        flags |= RULE_BASENAME;
    else if (line[0] == '/')
        line++, len--; /* anchored: the leading '/' only says so */
    if (ig->n == ig->cap) {
        size_t cap = ig->cap ? ig->cap * 2 : 16;
        rule *r = cdb_realloc(ig->rules, cap * sizeof *r);
        if (!r)
            return cdb_seterr(CDB_NOMEM, "cdb_ignore_add: out of memory");
        ig->rules = r;
        ig->cap = cap;
    }
    rule *r = &ig->rules[ig->n];
    r->pat = cdb_malloc(len + 1);
    r->base = cdb_strdup(base);
    if (!r->pat || !r->base) {
        cdb_free(r->pat);
        cdb_free(r->base);
        return cdb_seterr(CDB_NOMEM, "cdb_ignore_add: out of memory");
    }
    memcpy(r->pat, line, len);
    r->pat[len] = '\0';
    r->baselen = strlen(base);
    r->depth = depth;
    r->flags = flags;
    ig->n++;
    return CDB_OK;
}

cdb_status cdb_ignore_add(cdb_ignore *ig, const char *base, const char *text, size_t n)
{
    if (!ig || !base || (!text && n))
        return cdb_seterr(CDB_INVALID, "cdb_ignore_add: NULL argument");
    size_t baselen = strlen(base);
    if (baselen && (base[0] == '/' || base[baselen - 1] == '/'))
        return cdb_seterr(CDB_INVALID, "cdb_ignore_add: base '%s' has a leading or "
                          "trailing '/'", base);
    int depth = baselen ? 1 : 0;
    for (size_t i = 0; i < baselen; i++)
        depth += base[i] == '/';
    for (size_t at = 0; at < n;) {
        const char *line = text + at;
        const char *nl = memchr(line, '\n', n - at);
        size_t len = nl ? (size_t)(nl - line) : n - at;
        at += len + (nl != NULL);
        if (len && line[len - 1] == '\r')
            len--;
        if (len == 0 || line[0] == '#')
            continue;
        const char *nul = memchr(line, '\0', len); /* git reads a line as a C string */
        len = trim_trailing_spaces(line, nul ? (size_t)(nul - line) : len);
        if (len == 0)
            continue; /* "\#" and "\!" stay: the matcher reads them as literals */
        cdb_status rc = add_rule(ig, base, depth, line, len);
        if (rc != CDB_OK)
            return rc;
    }
    return CDB_OK;
}

/* Does rule r match path (pathlen bytes, NUL-terminated)? */
static int rule_matches(const rule *r, const char *path, size_t pathlen, int is_dir)
{
    if ((r->flags & RULE_DIR_ONLY) && !is_dir)
        return 0;
    const char *name = path;
    if (r->baselen) { /* rules of a folder's file see only the paths below it */
        if (pathlen <= r->baselen || path[r->baselen] != '/' ||
            memcmp(path, r->base, r->baselen) != 0)
            return 0;
        name = path + r->baselen + 1;
    }
    if (r->flags & RULE_BASENAME) {
        const char *slash = strrchr(name, '/');
        return wildmatch(r->pat, slash ? slash + 1 : name);
    }
    /* git compares the literal head of a pattern first and wildmatches the rest as a
    ** pattern of its own, so a "**" right after the head counts as at the start
    ** ("a** /x" matches "ab/c/x"): the same here, for the same answers. */
    size_t head = strcspn(r->pat, "*?[\\");
    if (strncmp(r->pat, name, head) != 0)
        return 0;
    return wildmatch(r->pat + head, name + head);
}

cdb_ignore_verdict cdb_ignore_match(const cdb_ignore *ig, const char *path, int is_dir)
{
    if (!ig || !path)
        return CDB_IGNORE_NONE;
    size_t pathlen = strlen(path);
    const rule *best = NULL;
    for (size_t i = 0; i < ig->n; i++) { /* the deepest file wins, then the last rule */
        const rule *r = &ig->rules[i];
        if (best && r->depth < best->depth)
            continue;
        if (rule_matches(r, path, pathlen, is_dir))
            best = r;
    }
    if (!best)
        return CDB_IGNORE_NONE;
    return (best->flags & RULE_NEGATE) ? CDB_IGNORE_INCLUDED : CDB_IGNORE_EXCLUDED;
}

int cdb_ignore_path(const cdb_ignore *ig, const char *path, int is_dir)
{
    if (!ig || !path || ig->n == 0)
        return 0;
    size_t len = strlen(path);
    char stack[1024], *buf = len < sizeof stack ? stack : cdb_malloc(len + 1);
    if (!buf)
        return 1; /* out of memory: leave it out rather than take in what may be private */
    memcpy(buf, path, len + 1);
    int out = 0;
    for (char *s = strchr(buf, '/'); s && !out; s = strchr(s + 1, '/')) {
        *s = '\0'; /* each folder above path, from the top */
        out = cdb_ignore_match(ig, buf, 1) == CDB_IGNORE_EXCLUDED;
        *s = '/';
    }
    if (!out)
        out = cdb_ignore_match(ig, buf, is_dir) == CDB_IGNORE_EXCLUDED;
    if (buf != stack)
        cdb_free(buf);
    return out;
}
