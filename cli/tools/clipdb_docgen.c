/*
** clipdb_docgen.c: writes the man page (clipdb.1) and the bash and zsh completion
** scripts from clipdb's own --help texts (cli/usage.c, linked in: the very strings
** the program prints), so none of the three can drift from the program. Run by
** cli/CMakeLists.txt at build time; not installed.
**
**   clipdb-docgen MAN.1 BASH ZSH VERSION DATE DATA_FROM_BIN
**
** What it reads from the texts (the shape every text in usage.c has):
** - paragraphs are separated by blank lines; the first one of a text is its usage
**   lines ("usage: clipdb CMD ..."; a lowercase word right after CMD, as in
**   "clipdb index build", is a subcommand);
** - a paragraph whose first line ends with ':' and whose other lines are indented
**   by two spaces is a list under that heading: "...options...:" lists options
**   ("-q, --quiet" or "--db DIR", then the description), "...example...:" is shown
**   verbatim, any other heading ("Database commands:", "Environment:", "Exit
**   status:") lists terms (first word, then the description); a line indented
**   further continues the item above it;
** - every other paragraph is prose;
** - the commands are the items of the main text's "... commands:" lists, in order,
**   and each must have its own help text (else this program fails).
** Exit status: 0 written, 1 a text does not have this shape or a file cannot be
** written (the message says which).
*/
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"

#define MAX_LINES 64
#define MAX_BLOCKS 32
#define MAX_ITEMS 48
#define MAX_NAMES 4
#define MAX_CMDS 40
#define MAX_SUBS 8

typedef enum { B_USAGE, B_PROSE, B_OPTIONS, B_TERMS, B_EXAMPLE } block_kind;

typedef struct item {
    char term[160];                /* B_TERMS: the first word; B_OPTIONS: "-q, --quiet" */
    char names[MAX_NAMES][48];     /* B_OPTIONS: "-q", "--quiet" */
    int n_names;
    char arg[48];                  /* B_OPTIONS: "DIR", "auto|cpu|cuda" or "" (a flag) */
    char desc[1024];
} item;

typedef struct block {
    block_kind kind;
    char heading[128]; /* lists: the heading without its ':' */
    const char *lines[MAX_LINES];
    int n_lines;
    item items[MAX_ITEMS];
    int n_items;
} block;

typedef struct doc {
    char *buf; /* the text, its lines NUL-terminated in place */
    block blocks[MAX_BLOCKS];
    int n_blocks;
} doc;

typedef struct command {
    const char *name, *summary, *group;
    doc d;
    char subs[MAX_SUBS][32];
    int n_subs;
} command;

static command g_cmds[MAX_CMDS];
static int g_n_cmds;
static doc g_main;

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("clipdb-docgen: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void append(char *dst, size_t size, const char *s) {
    size_t n = strlen(dst);
    if (n + strlen(s) + 2 > size) die("a description is too long: %.40s...", dst);
    if (n) dst[n++] = ' ';
    strcpy(dst + n, s);
}

static const char *skip_spaces(const char *p) {
    while (*p == ' ') p++;
    return p;
}

/* An option's argument: all capitals/digits ("DIR", "N") or a choice ("fp16|fp32"). */
static int is_arg_word(const char *w, size_t n) {
    int caps = 1, bar = 0;
    for (size_t i = 0; i < n; i++) {
        if (w[i] == '|') bar = 1;
        else if (!(isupper((unsigned char)w[i]) || isdigit((unsigned char)w[i]) || w[i] == '_' ||
                   w[i] == '.'))
            caps = 0;
    }
    return n > 0 && (caps || bar);
}

static void parse_option(const char *line, item *it, const char *where) {
    const char *p = line + 2, *start;
    while (*p == '-') {
        start = p;
        while (*p && *p != ' ' && *p != ',') p++;
        if (it->n_names == MAX_NAMES || (size_t)(p - start) >= sizeof it->names[0])
            die("%s: bad option line '%s'", where, line);
        snprintf(it->names[it->n_names++], sizeof it->names[0], "%.*s", (int)(p - start), start);
        if (p[0] == ',' && p[1] == ' ') p += 2;
    }
    if (!it->n_names) die("%s: an option line without an option: '%s'", where, line);
    if (p[0] == ' ' && p[1] != ' ') { /* one space, then maybe the argument */
        size_t n = strcspn(p + 1, " ");
        if (is_arg_word(p + 1, n) && n < sizeof it->arg) {
            snprintf(it->arg, sizeof it->arg, "%.*s", (int)n, p + 1);
            p += 1 + n;
        }
    }
    snprintf(it->term, sizeof it->term, "%.*s", (int)(p - (line + 2)), line + 2);
    snprintf(it->desc, sizeof it->desc, "%s", skip_spaces(p));
}

static void parse_term(const char *line, item *it) {
    const char *p = line + 2;
    size_t n = strcspn(p, " ");
    snprintf(it->term, sizeof it->term, "%.*s", (int)n, p);
    snprintf(it->desc, sizeof it->desc, "%s", skip_spaces(p + n));
}

static void parse_list(block *b, const char *where) {
    for (int i = 1; i < b->n_lines; i++) {
        const char *l = b->lines[i];
        if (strncmp(l, "   ", 3) == 0) { /* continues the item above */
            if (!b->n_items) die("%s: '%s' continues nothing", where, l);
            append(b->items[b->n_items - 1].desc, sizeof b->items[0].desc, skip_spaces(l));
            continue;
        }
        if (b->n_items == MAX_ITEMS) die("%s: too many items under '%s'", where, b->heading);
        item *it = &b->items[b->n_items++];
        memset(it, 0, sizeof *it);
        if (b->kind == B_OPTIONS) parse_option(l, it, where);
        else parse_term(l, it);
    }
}

static int has_word(const char *s, const char *w) {
    for (; *s; s++)
        if (strncasecmp(s, w, strlen(w)) == 0) return 1;
    return 0;
}

/* Splits text into blocks (see the top of this file). */
static void parse_doc(const char *text, doc *d, const char *where) {
    char *p;
    int n_para_lines = 0;
    const char *para[MAX_LINES];
    memset(d, 0, sizeof *d);
    if (!(d->buf = strdup(text))) die("out of memory");
    p = d->buf;
    for (;;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        if (*p) {
            if (n_para_lines == MAX_LINES) die("%s: a paragraph is too long", where);
            para[n_para_lines++] = p;
        }
        if ((!*p || !nl) && n_para_lines) { /* a blank line or the end: a paragraph */
            block *b;
            size_t l0;
            if (d->n_blocks == MAX_BLOCKS) die("%s: too many paragraphs", where);
            b = &d->blocks[d->n_blocks++];
            memcpy(b->lines, para, sizeof para[0] * (size_t)n_para_lines);
            b->n_lines = n_para_lines;
            l0 = strlen(para[0]);
            if (!strncmp(para[0], "usage: ", 7)) {
                b->kind = B_USAGE;
            } else if (para[0][0] != ' ' && l0 > 1 && para[0][l0 - 1] == ':' && n_para_lines > 1 &&
                       !strncmp(para[1], "  ", 2)) {
                snprintf(b->heading, sizeof b->heading, "%.*s", (int)(l0 - 1), para[0]);
                b->kind = has_word(b->heading, "example") ? B_EXAMPLE
                          : has_word(b->heading, "options") ? B_OPTIONS
                                                            : B_TERMS;
                if (b->kind != B_EXAMPLE) parse_list(b, where);
            } else {
                b->kind = B_PROSE;
            }
            n_para_lines = 0;
        }
        if (!nl) break;
        p = nl + 1;
    }
    if (!d->n_blocks || d->blocks[0].kind != B_USAGE) die("%s: does not start with usage:", where);
}

static void load(void) {
    parse_doc(cdb_cli_help_text(NULL), &g_main, "clipdb --help");
    for (int b = 0; b < g_main.n_blocks; b++) {
        block *bl = &g_main.blocks[b];
        if (bl->kind != B_TERMS || !has_word(bl->heading, "commands")) continue;
        for (int i = 0; i < bl->n_items; i++) {
            command *c;
            const char *text = cdb_cli_help_text(bl->items[i].term);
            char where[96];
            if (!text) die("clipdb --help lists '%s', which has no help text", bl->items[i].term);
            if (g_n_cmds == MAX_CMDS) die("too many commands");
            c = &g_cmds[g_n_cmds++];
            c->name = bl->items[i].term;
            c->summary = bl->items[i].desc;
            c->group = bl->heading;
            snprintf(where, sizeof where, "clipdb %s --help", c->name);
            parse_doc(text, &c->d, where);
            /* subcommands: "clipdb CMD word" in the usage lines */
            for (int l = 0; l < c->d.blocks[0].n_lines; l++) {
                char pat[64];
                const char *s;
                size_t n = 0;
                snprintf(pat, sizeof pat, "clipdb %s ", c->name);
                if (!(s = strstr(c->d.blocks[0].lines[l], pat))) continue;
                s += strlen(pat);
                while (islower((unsigned char)s[n]) || (n && s[n] == '-')) n++; /* add-part */
                if (!n || (s[n] && s[n] != ' ') || n >= sizeof c->subs[0]) continue;
                int dup = 0;
                for (int k = 0; k < c->n_subs; k++)
                    dup |= !strncmp(c->subs[k], s, n) && !c->subs[k][n];
                if (!dup && c->n_subs < MAX_SUBS)
                    snprintf(c->subs[c->n_subs++], sizeof c->subs[0], "%.*s", (int)n, s);
            }
        }
    }
    if (!g_n_cmds) die("clipdb --help lists no commands");
}

/* The "Global options" list of the main text. */
static const block *global_options(void) {
    for (int b = 0; b < g_main.n_blocks; b++)
        if (g_main.blocks[b].kind == B_OPTIONS) return &g_main.blocks[b];
    die("clipdb --help has no options list");
    return NULL;
}

/* ---- man page ------------------------------------------------------------------ */

/* Text for roff: backslashes and hyphens escaped, a leading '.' or '\'' defused. */
static void roff(FILE *f, const char *s, size_t n) {
    for (size_t i = 0; i < n && s[i]; i++) {
        if (i == 0 && (s[0] == '.' || s[0] == '\'')) fputs("\\&", f);
        if (s[i] == '\\') fputs("\\e", f);
        else if (s[i] == '-') fputs("\\-", f);
        else fputc(s[i], f);
    }
}
static void roffs(FILE *f, const char *s) { roff(f, s, strlen(s)); }

static void man_usage(FILE *f, const block *b) {
    fputs(".nf\n", f);
    for (int l = 0; l < b->n_lines; l++) {
        const char *s = b->lines[l];
        s = !strncmp(s, "usage: ", 7) ? s + 7
                                      : (!strncmp(s, "       ", 7) ? s + 7 : skip_spaces(s));
        roffs(f, s);
        fputc('\n', f);
    }
    fputs(".fi\n", f);
}

static void man_prose(FILE *f, const block *b) {
    fputs(".PP\n", f);
    for (int l = 0; l < b->n_lines; l++) {
        roffs(f, skip_spaces(b->lines[l]));
        fputc('\n', f);
    }
}

static void man_items(FILE *f, const block *b) {
    for (int i = 0; i < b->n_items; i++) {
        const item *it = &b->items[i];
        fputs(".TP\n", f);
        if (b->kind == B_OPTIONS) {
            for (int k = 0; k < it->n_names; k++) {
                fputs(k ? ", \\fB" : "\\fB", f);
                roffs(f, it->names[k]);
                fputs("\\fR", f);
            }
            if (*it->arg) {
                fputs(" \\fI", f);
                roffs(f, it->arg);
                fputs("\\fR", f);
            }
        } else {
            fputs("\\fB", f);
            roffs(f, it->term);
            fputs("\\fR", f);
        }
        fputc('\n', f);
        roffs(f, it->desc);
        fputc('\n', f);
    }
}

static void man_example(FILE *f, const block *b) {
    fputs(".PP\n", f);
    roffs(f, b->lines[0]);
    fputs("\n.RS\n.nf\n", f);
    for (int l = 1; l < b->n_lines; l++) {
        roffs(f, b->lines[l] + 2);
        fputc('\n', f);
    }
    fputs(".fi\n.RE\n", f);
}

/* A command's text after its usage lines; lists get their heading as a line. */
static void man_body(FILE *f, const doc *d) {
    for (int b = 1; b < d->n_blocks; b++) {
        const block *bl = &d->blocks[b];
        switch (bl->kind) {
        case B_PROSE: man_prose(f, bl); break;
        case B_EXAMPLE: man_example(f, bl); break;
        case B_OPTIONS:
        case B_TERMS:
            fputs(".PP\n", f);
            roffs(f, bl->heading);
            fputs(":\n", f);
            man_items(f, bl);
            break;
        case B_USAGE: break;
        }
    }
}

static void upper(FILE *f, const char *s) {
    for (; *s; s++) fputc(toupper((unsigned char)*s), f);
}

static void write_man(FILE *f, const char *version, const char *date, const char *from_bin) {
    const char *tagline = NULL;
    fprintf(f, ".\\\" clipdb.1: generated from clipdb's --help texts (cli/usage.c) by\n"
               ".\\\" cli/tools/clipdb_docgen.c at build time; do not edit.\n");
    fprintf(f, ".TH CLIPDB 1 \"%s\" \"clipdb %s\" \"User Commands\"\n", date, version);
    for (int b = 1; b < g_main.n_blocks && !tagline; b++)
        if (g_main.blocks[b].kind == B_PROSE) tagline = g_main.blocks[b].lines[0];
    fputs(".nh\n.ad l\n.SH NAME\nclipdb \\- ", f);
    if (tagline) { /* "A photo search database ..." as "a photo search database ..." */
        size_t n = strlen(tagline);
        if (n && tagline[n - 1] == '.') n--;
        if (n > 1 && isupper((unsigned char)tagline[0]) && !isupper((unsigned char)tagline[1])) {
            fputc(tolower((unsigned char)*tagline++), f);
            n--;
        }
        roff(f, tagline, n);
        fputc('\n', f);
    }
    fputs(".SH SYNOPSIS\n", f);
    man_usage(f, &g_main.blocks[0]);
    fputs(".SH DESCRIPTION\n", f);
    for (int b = 1; b < g_main.n_blocks; b++)
        if (g_main.blocks[b].kind == B_PROSE) man_prose(f, &g_main.blocks[b]);
    fputs(".PP\nEach command's text is under \\fBCOMMANDS\\fR below.\n", f);
    /* the main text's lists, the command lists first, then the details */
    fputs(".SH COMMANDS\n", f);
    for (int b = 1; b < g_main.n_blocks; b++) {
        const block *bl = &g_main.blocks[b];
        if (bl->kind != B_TERMS || !has_word(bl->heading, "commands")) continue;
        fputs(".SS ", f);
        roffs(f, bl->heading);
        fputc('\n', f);
        man_items(f, bl);
    }
    for (int c = 0; c < g_n_cmds; c++) {
        fprintf(f, ".SS clipdb %s\n", g_cmds[c].name);
        man_usage(f, &g_cmds[c].d.blocks[0]);
        man_body(f, &g_cmds[c].d);
    }
    for (int b = 1; b < g_main.n_blocks; b++) {
        const block *bl = &g_main.blocks[b];
        if ((bl->kind != B_TERMS && bl->kind != B_OPTIONS) || has_word(bl->heading, "commands"))
            continue;
        fputs(".SH ", f);
        upper(f, bl->heading);
        fputc('\n', f);
        man_items(f, bl);
    }
    fputs(".SH FILES\n"
          "\\fIDATA\\fR below is \\fI", f);
    roffs(f, from_bin);
    fputs("\\fR relative to the folder of the clipdb program (the installed\n"
          "layout: \\fIPREFIX\\fR/bin/clipdb reads \\fIPREFIX\\fR/share/clipdb), found\n"
          "wherever the prefix was installed or moved to. A clipdb run from its build\n"
          "folder uses its source tree instead, which has the same layout.\n"
          ".TP\n\\fIDATA\\fR/models/\n"
          "The bundled models. Without \\fB\\-\\-model\\fR or \\fBCLIPDB_MODEL\\fR, the first one\n"
          "by name is used.\n"
          ".TP\n\\fIDATA\\fR/data/bpe_simple_vocab_16e6.txt.gz\n"
          "The standard CLIP vocabulary, for models that bring no tokenizer files\n"
          "(\\fBCLIPDB_VOCAB\\fR names another one).\n", f);
}

/* ---- bash ---------------------------------------------------------------------- */

/* How an option's value is completed: 'd' folders, 'f' files, 'c' the choices in
** arg, 'n' nothing (a number, a text). */
static int value_kind(const item *it) {
    const char *a = it->arg;
    if (strchr(a, '|')) return 'c';
    if (!strcmp(a, "DIR")) return 'd';
    if (!strcmp(a, "PATH") || !strcmp(a, "FILE") || !strcmp(a, "PREFIX") || !strcmp(a, "IMAGE") ||
        (!strcmp(a, "F") && strstr(it->names[it->n_names - 1], "-file"))) /* F: a fraction too */
        return 'f';
    return 'n';
}

static void choices(FILE *f, const char *arg) {
    for (; *arg; arg++) fputc(*arg == '|' ? ' ' : *arg, f);
}

static void bash_values(FILE *f, const block *opts, const char *indent) {
    fprintf(f, "%scase $prev in\n", indent);
    for (int i = 0; i < opts->n_items; i++) {
        const item *it = &opts->items[i];
        if (!*it->arg) continue;
        fprintf(f, "%s    ", indent);
        for (int k = 0; k < it->n_names; k++) fprintf(f, "%s%s", k ? "|" : "", it->names[k]);
        switch (value_kind(it)) {
        case 'd': fputs(") _clipdb_dirs; return ;;\n", f); break;
        case 'f': fputs(") _clipdb_files; return ;;\n", f); break;
        case 'c':
            fputs(") _clipdb_words '", f);
            choices(f, it->arg);
            fputs("'; return ;;\n", f);
            break;
        default: fputs(") return ;;\n", f); break;
        }
    }
    fprintf(f, "%sesac\n", indent);
}

static void option_words(FILE *f, const block *opts) {
    for (int i = 0; opts && i < opts->n_items; i++)
        for (int k = 0; k < opts->items[i].n_names; k++)
            fprintf(f, "%s%s", i || k ? " " : "", opts->items[i].names[k]);
}

static const block *options_of(const doc *d) {
    for (int b = 0; b < d->n_blocks; b++)
        if (d->blocks[b].kind == B_OPTIONS) return &d->blocks[b];
    return NULL;
}

/* The comment a completion script starts with: what it is, where it comes from, and
** where it is installed (installed: the rest of that sentence, newlines included). */
static void completion_header(FILE *f, const char *shell, const char *installed) {
    fprintf(f,
            "# %s completion for clipdb: commands, their options and the options' values.\n"
            "# Generated from clipdb's --help texts (cli/usage.c) by cli/tools/clipdb_docgen.c\n"
            "# at build time; do not edit. Installed as%s\n\n",
            shell, installed);
}

static void write_bash(FILE *f) {
    const block *g = global_options();
    completion_header(f, "bash",
                      "\n# PREFIX/share/bash-completion/completions/clipdb (loaded on demand by\n"
                      "# bash-completion); or source it from ~/.bashrc.");
    fputs("# words without blanks (commands, options, choices); names of files may have them\n"
          "_clipdb_words() { COMPREPLY=($(compgen -W \"$1\" -- \"$cur\")); }\n"
          "_clipdb_files() {\n"
          "    local IFS=$'\\n'\n"
          "    compopt -o filenames 2>/dev/null\n"
          "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
          "}\n"
          "_clipdb_dirs() {\n"
          "    local IFS=$'\\n'\n"
          "    compopt -o filenames 2>/dev/null\n"
          "    COMPREPLY=($(compgen -d -- \"$cur\"))\n"
          "}\n\n", f);
    fputs("_clipdb() {\n"
          "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
          "    local cmd= at=0 i opts\n"
          "    COMPREPLY=()\n"
          "    # the command: the first word after the global options\n"
          "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
          "        case ${COMP_WORDS[i]} in\n", f);
    for (int i = 0; i < g->n_items; i++)
        if (*g->items[i].arg) {
            fputs("            ", f);
            for (int k = 0; k < g->items[i].n_names; k++)
                fprintf(f, "%s%s", k ? "|" : "", g->items[i].names[k]);
            fputs(") ((i++)) ;;\n", f);
        }
    fputs("            -*) ;;\n"
          "            *) cmd=${COMP_WORDS[i]} at=$i; break ;;\n"
          "        esac\n"
          "    done\n"
          "    if [[ -z $cmd ]]; then\n", f);
    bash_values(f, g, "        ");
    fputs("        if [[ $cur == -* ]]; then _clipdb_words '", f);
    option_words(f, g);
    fputs("'\n        else _clipdb_words '", f);
    for (int c = 0; c < g_n_cmds; c++) fprintf(f, "%s%s", c ? " " : "", g_cmds[c].name);
    fputs("'\n        fi\n        return\n    fi\n    case $cmd in\n", f);
    for (int c = 0; c < g_n_cmds; c++) {
        const command *cm = &g_cmds[c];
        const block *o = options_of(&cm->d);
        fprintf(f, "    %s)\n", cm->name);
        if (!strcmp(cm->name, "help")) {
            fputs("        [[ $cur == -* ]] || _clipdb_words '", f);
            for (int k = 0; k < g_n_cmds; k++) fprintf(f, "%s%s", k ? " " : "", g_cmds[k].name);
            fputs("'\n        return ;;\n", f);
            continue;
        }
        if (cm->n_subs) {
            fputs("        if ((COMP_CWORD == at + 1)) && [[ $cur != -* ]]; then\n"
                  "            _clipdb_words '", f);
            for (int k = 0; k < cm->n_subs; k++) fprintf(f, "%s%s", k ? " " : "", cm->subs[k]);
            fputs("'\n            return\n        fi\n", f);
        }
        if (o) bash_values(f, o, "        ");
        fputs("        opts='", f);
        option_words(f, o);
        fputs("' ;;\n", f);
    }
    fputs("    *) _clipdb_files; return ;;\n"
          "    esac\n"
          "    if [[ $cur == -* ]]; then _clipdb_words \"$opts\"; else _clipdb_files; fi\n"
          "}\n"
          "complete -F _clipdb clipdb\n", f);
}

/* ---- zsh ----------------------------------------------------------------------- */

/* s inside '...' of a zsh spec: quotes closed and reopened; [ ] : escaped. */
static void zq(FILE *f, const char *s, int brackets) {
    for (; *s; s++) {
        if (*s == '\'') fputs("'\\''", f);
        else if (brackets && (*s == '[' || *s == ']' || *s == ':' || *s == '\\'))
            fprintf(f, "\\%c", *s);
        else fputc(*s, f);
    }
}

static void zsh_spec(FILE *f, const item *it) {
    int rep = strstr(it->desc, "repeatable") != NULL;
    fputs("    ", f);
    if (it->n_names > 1) {
        fputs("'(", f);
        for (int k = 0; k < it->n_names; k++) fprintf(f, "%s%s", k ? " " : "", it->names[k]);
        fputs(")'", f);
        fputs(rep ? "'*'{" : "{", f);
        for (int k = 0; k < it->n_names; k++) fprintf(f, "%s%s", k ? "," : "", it->names[k]);
        fputs("}'[", f);
    } else {
        fprintf(f, "'%s%s[", rep ? "*" : "", it->names[0]);
    }
    zq(f, it->desc, 1);
    fputc(']', f);
    if (*it->arg) {
        fputc(':', f);
        zq(f, it->arg, 1);
        switch (value_kind(it)) {
        case 'd': fputs(":_files -/", f); break;
        case 'f': fputs(":_files", f); break;
        case 'c': fputs(":(", f); choices(f, it->arg); fputc(')', f); break;
        default: fputs(": ", f); break;
        }
    }
    fputs("' \\\n", f);
}

static void write_zsh(FILE *f) {
    const block *g = global_options();
    fputs("#compdef clipdb\n", f);
    completion_header(f, "zsh",
                      " PREFIX/share/zsh/site-functions/_clipdb;\n"
                      "# a folder zsh finds through $fpath (before compinit).");
    fputs("_clipdb() {\n"
          "    local curcontext=$curcontext state line ret=1\n"
          "    local -a commands\n"
          "    commands=(\n", f);
    for (int c = 0; c < g_n_cmds; c++) {
        fputs("        '", f);
        zq(f, g_cmds[c].name, 0);
        fputc(':', f);
        zq(f, g_cmds[c].summary, 0);
        fputs("'\n", f);
    }
    fputs("    )\n"
          "    _arguments -C \\\n", f);
    for (int i = 0; i < g->n_items; i++) zsh_spec(f, &g->items[i]);
    fputs("    '1:command:->command' \\\n"
          "    '*::argument:->argument' && ret=0\n"
          "    case $state in\n"
          "    command) _describe -t commands 'clipdb command' commands && ret=0 ;;\n"
          "    argument)\n"
          "        curcontext=${curcontext%:*:*}:clipdb-$line[1]:\n"
          "        case $line[1] in\n", f);
    for (int c = 0; c < g_n_cmds; c++) {
        const command *cm = &g_cmds[c];
        const block *o = options_of(&cm->d);
        fprintf(f, "        %s)\n", cm->name);
        if (!strcmp(cm->name, "help")) {
            fputs("            _describe -t commands 'clipdb command' commands && ret=0 ;;\n", f);
            continue;
        }
        fputs("            _arguments \\\n", f);
        for (int i = 0; o && i < o->n_items; i++) zsh_spec(f, &o->items[i]);
        if (cm->n_subs) {
            fputs("    '1:subcommand:(", f);
            for (int k = 0; k < cm->n_subs; k++) fprintf(f, "%s%s", k ? " " : "", cm->subs[k]);
            fputs(")' \\\n", f);
        }
        fputs("    '*:file:_files' && ret=0 ;;\n", f);
    }
    fputs("        esac ;;\n"
          "    esac\n"
          "    return ret\n"
          "}\n"
          "_clipdb \"$@\"\n", f);
}

/* ---- main ---------------------------------------------------------------------- */

static void write_file(const char *path, void (*fn)(FILE *, const char *, const char *,
                                                     const char *),
                       const char *a, const char *b, const char *c) {
    FILE *f = fopen(path, "w");
    if (!f) die("cannot write %s", path);
    fn(f, a, b, c);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) die("cannot write %s", path);
}
static void man_fn(FILE *f, const char *a, const char *b, const char *c) { write_man(f, a, b, c); }
static void bash_fn(FILE *f, const char *a, const char *b, const char *c) {
    (void)a, (void)b, (void)c;
    write_bash(f);
}
static void zsh_fn(FILE *f, const char *a, const char *b, const char *c) {
    (void)a, (void)b, (void)c;
    write_zsh(f);
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fputs("usage: clipdb-docgen MAN.1 BASH ZSH VERSION DATE DATA_FROM_BIN\n", stderr);
        return 2;
    }
    load();
    write_file(argv[1], man_fn, argv[4], argv[5], argv[6]);
    write_file(argv[2], bash_fn, NULL, NULL, NULL);
    write_file(argv[3], zsh_fn, NULL, NULL, NULL);
    return 0;
}
