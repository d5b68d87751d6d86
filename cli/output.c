/*
** output.c: everything clipdb says that is not a command's result: error, warning
** and hint lines (`clipdb: error: <what> (<why>)`), colors (stderr on a terminal,
** never with NO_COLOR), the live progress line, durations and sizes, and the --json
** failure document, and the escaping of names in human output (cdb_cli_esc). The JSON
** writer, the path / path_b64 rule and count formatting are output/output.h's, shared
** with the server.
*/
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

static int g_quiet, g_tty, g_color, g_log_time;

/* ---- text for a terminal ------------------------------------------------------------- */

/* 1 when the valid k-byte UTF-8 character at s must not reach a terminal raw: a C0
** control, DEL, a C1 control (U+0080..U+009F: some terminals take U+009B as CSI), or a
** character that reorders or breaks what is shown (U+200E, U+200F, U+2028..U+202E,
** U+2066..U+2069: line and paragraph separators, bidirectional controls). */
static int must_escape(const unsigned char *s, size_t k) {
    uint32_t cp;
    if (k == 1) return s[0] < 0x20 || s[0] == 0x7f;
    if (k == 2) return (((uint32_t)(s[0] & 0x1f) << 6) | (s[1] & 0x3f)) <= 0x9f;
    if (k != 3) return 0;
    cp = ((uint32_t)(s[0] & 0x0f) << 12) | ((uint32_t)(s[1] & 0x3f) << 6) | (s[2] & 0x3f);
    return cp == 0x200e || cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

/* s escaped into b (appended): each byte of a character must_escape names and each byte
** that starts no valid UTF-8 sequence as \n, \r, \t or \xHH (lowercase hex); out of
** memory: b->oom. */
static void esc_into(cdb_buf *b, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0, k; i < n; i += k) {
        k = cdb_utf8_seq_len(p + i, n - i);
        if (k && !must_escape(p + i, k)) {
            cdb_buf_put(b, p + i, k);
            continue;
        }
        for (size_t e = 0; e < (k ? k : 1); e++) {
            unsigned char c = p[i + e];
            if (c == '\n' || c == '\r' || c == '\t')
                cdb_buf_put(b, c == '\n' ? "\\n" : c == '\r' ? "\\r" : "\\t", 2);
            else
                cdb_buf_printf(b, "\\x%02x", c);
        }
        if (!k) k = 1;
    }
}

const char *cdb_cli_esc(const char *s) {
    static _Thread_local cdb_buf ring[8];
    static _Thread_local unsigned next;
    const unsigned char *p = (const unsigned char *)s;
    if (!s) return "(null)";
    while (*p >= 0x20 && *p < 0x7f) p++;
    if (!*p) return s; /* printable ASCII: shown as it is */
    cdb_buf *b = &ring[next++ % 8];
    cdb_buf_reset(b);
    b->oom = 0;
    esc_into(b, s);
    return b->oom || !b->data ? "(a name that could not be shown: out of memory)" : b->data;
}

/* Writes s to f escaped as cdb_cli_esc does (a line of stderr: a message may name
** paths from the disk). */
static void put_esc(FILE *f, const char *s) {
    cdb_buf b = {0};
    esc_into(&b, s);
    if (b.len) fwrite(b.data, 1, b.len, f);
    cdb_buf_free(&b);
}

/* fmt formatted, then written to f escaped (put_esc); at most 16 KiB of it. */
static void put_vesc(FILE *f, const char *fmt, va_list ap) CDB_PRINTF(2, 0);
static void put_vesc(FILE *f, const char *fmt, va_list ap) {
    char text[16384];
    vsnprintf(text, sizeof text, fmt, ap);
    put_esc(f, text);
}

/* --json on a failed run: the command asked for JSON, whether a JSON document was
** begun on stdout, and the first error line and hint said (cdb_cli_json_failure). */
static const char *g_json_cmd;
static int g_json_doc;
static char g_first_error[2048], g_first_hint[1024];

void cdb_cli_output_init(int quiet) {
    const char *nc = getenv("NO_COLOR");
    const char *term = getenv("TERM");
    g_quiet = quiet;
    g_tty = isatty(STDERR_FILENO);
    g_color = g_tty && !(nc && *nc) && !(term && !strcmp(term, "dumb"));
}

int cdb_cli_quiet(void) { return g_quiet; }
int cdb_cli_stderr_is_tty(void) { return g_tty; }

/* "2026-12-01T03:00:05+0100 " before a line when asked (--log-time): cron logs. */
static void stamp(void) {
    char buf[40];
    time_t now = time(NULL);
    struct tm tm;
    if (g_log_time && localtime_r(&now, &tm) &&
        strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z ", &tm))
        fputs(buf, stderr);
}

/* The library's log lines (CDB_LOG_*) in the same form as the CLI's own. */
static void log_sink(cdb_log_level lvl, const char *msg, void *ud) {
    static const char *names[] = {"debug", "info", "warning", "error"};
    (void)ud;
    stamp();
    fprintf(stderr, "clipdb: %s: ", lvl >= 0 && lvl <= CDB_LOG_LEVEL_ERROR ? names[lvl] : "log");
    put_esc(stderr, msg);
    fputc('\n', stderr);
}

static int g_stdout_errno;

int cdb_cli_stdout_failed(int e) {
    if (!g_stdout_errno) g_stdout_errno = e ? e : EIO;
    return -1;
}

int cdb_cli_flush_stdout(void) {
    if (fflush(stdout) == 0) return 0;
    return cdb_cli_stdout_failed(errno);
}

int cdb_cli_stdout_errno(void) { return g_stdout_errno; }

void cdb_cli_output_log_time(int on) {
    g_log_time = on;
    cdb_log_set(log_sink, NULL); /* the library's lines too: stamped, names escaped */
}

static void vline(const char *tag, const char *color, const char *fmt, va_list ap) {
    stamp();
    if (g_color)
        fprintf(stderr, "clipdb: %s%s:\033[0m ", color, tag);
    else
        fprintf(stderr, "clipdb: %s: ", tag);
    put_vesc(stderr, fmt, ap);
}

/* The error line "what (why)", why less the contexts what says already (the path it
** names: cdb_err_said_once), so each thing is named once. */
static int verror(const char *why, const char *fmt, va_list ap) {
    char what[3 * 4096]; /* room for two paths of PATH_MAX and the words around them */
    char said[4096];
    vsnprintf(what, sizeof what, fmt, ap);
    if (why) why = cdb_err_said_once(what, why, said, sizeof said);
    stamp();
    fputs(g_color ? "clipdb: \033[1;31merror:\033[0m " : "clipdb: error: ", stderr);
    put_esc(stderr, what);
    if (why && *why) {
        fputs(" (", stderr);
        put_esc(stderr, why);
        fputc(')', stderr);
    }
    fputc('\n', stderr);
    if (!g_first_error[0])
        snprintf(g_first_error, sizeof g_first_error, "%.1500s%s%.500s%s", what,
                 why && *why ? " (" : "", why && *why ? why : "", why && *why ? ")" : "");
    return CLI_EXIT_FAIL;
}

int cdb_cli_error(const char *why, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verror(why, fmt, ap);
    va_end(ap);
    return CLI_EXIT_FAIL;
}

int cdb_cli_error_status(cdb_status rc, const char *fmt, ...) {
    const char *why = cdb_errmsg();
    va_list ap;
    if (!why || !*why) why = cdb_status_str(rc);
    va_start(ap, fmt);
    verror(why, fmt, ap);
    va_end(ap);
    return CLI_EXIT_FAIL;
}

void cdb_cli_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vline("warning", "\033[1;33m", fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void cdb_cli_hint(const char *fmt, ...) {
    va_list ap;
    stamp();
    fputs(g_color ? "\033[36mhint:\033[0m " : "hint: ", stderr);
    va_start(ap, fmt);
    put_vesc(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (g_first_error[0] && !g_first_hint[0]) { /* the hint of the first error */
        va_start(ap, fmt);
        vsnprintf(g_first_hint, sizeof g_first_hint, fmt, ap);
        va_end(ap);
    }
}

int cdb_cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vline("error", "\033[1;31m", fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (!g_first_error[0]) {
        va_start(ap, fmt);
        vsnprintf(g_first_error, sizeof g_first_error, fmt, ap);
        va_end(ap);
    }
    cdb_cli_print_usage_lines(stderr, cmd);
    fprintf(stderr, "Run 'clipdb %s%s--help' for more.\n", cmd ? cmd : "", cmd ? " " : "");
    return CLI_EXIT_USAGE;
}

/* ---- numbers ------------------------------------------------------------------------ */

const char *cdb_cli_fmt_duration(double s, char *buf, size_t size) {
    if (!(s >= 0) || s > 1e9) snprintf(buf, size, "?");
    else if (s < 10) snprintf(buf, size, "%.1f s", s);
    else if (s < 60) snprintf(buf, size, "%.0f s", s);
    else if (s < 3600) snprintf(buf, size, "%d min %02d s", (int)s / 60, (int)s % 60);
    else snprintf(buf, size, "%d h %02d min", (int)s / 3600, ((int)s % 3600) / 60);
    return buf;
}

const char *cdb_cli_fmt_bytes(int64_t n, char *buf, size_t size) {
    static const char *units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1000.0 && u < 5) {
        v /= 1000.0;
        u++;
    }
    if (u == 0) snprintf(buf, size, "%lld B", (long long)n);
    else snprintf(buf, size, "%.1f %s", v, units[u]);
    return buf;
}

/* ---- progress ----------------------------------------------------------------------- */

void cdb_cli_progress_start(cli_progress *p, const char *label, int64_t total) {
    memset(p, 0, sizeof *p);
    p->label = label;
    p->total = total;
    p->t0_ns = cdb_now_ns();
    p->live = g_tty && !g_quiet;
}

static void draw(cli_progress *p, int64_t now) {
    char done[32], total[32], eta[32], errs[32];
    double el = (double)(now - p->t0_ns) / 1e9;
    double rate = el > 0 ? (double)p->done / el : 0;
    fprintf(stderr, "\r\033[K%s: %s", p->label, cdb_out_fmt_count(p->done, done, sizeof done));
    if (p->total >= 0) {
        fprintf(stderr, "/%s", cdb_out_fmt_count(p->total, total, sizeof total));
        if (p->total > 0)
            fprintf(stderr, " (%d%%)", (int)(100.0 * (double)p->done / (double)p->total));
    }
    fprintf(stderr, ", %.1f files/s", rate);
    if (p->total >= 0 && rate > 0 && p->done > 0)
        fprintf(stderr, ", ETA %s",
                cdb_cli_fmt_duration((double)(p->total - p->done) / rate, eta, sizeof eta));
    if (p->errors)
        fprintf(stderr, ", %s error%s", cdb_out_fmt_count(p->errors, errs, sizeof errs),
                p->errors == 1 ? "" : "s");
    fflush(stderr);
    p->drawn = 1;
    p->last_draw_ns = now;
}

void cdb_cli_progress_update(cli_progress *p) {
    int64_t now;
    if (!p->live) return;
    now = cdb_now_ns();
    if (p->drawn && now - p->last_draw_ns < 100000000LL) return;
    draw(p, now);
}

void cdb_cli_progress_end(cli_progress *p) {
    if (p->live && p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    p->drawn = 0;
}

/* ---- JSON --------------------------------------------------------------------------- */

void cdb_cli_json_init(cdb_json *j, FILE *f, int pretty) {
    cdb_json_init(j, f, pretty);
    if (f == stdout) g_json_doc = 1;
}

void cdb_cli_json_doc(cdb_json *j, const char *command) {
    cdb_cli_json_init(j, stdout, 1);
    cdb_json_begin_object(j);
    if (command) {
        cdb_json_key(j, "command");
        cdb_json_str(j, command);
    }
}

void cdb_cli_json_requested(const char *cmd) { g_json_cmd = cmd; }

void cdb_cli_json_failure(int rc) {
    cdb_json j;
    if (!g_json_cmd || rc == CLI_EXIT_OK || g_json_doc || g_stdout_errno) return;
    cdb_cli_json_doc(&j, g_json_cmd); /* the keys an ingest's summary starts with */
    cdb_json_key(&j, "status");
    cdb_json_str(&j, "error");
    cdb_json_key(&j, "exit_code");
    cdb_json_int(&j, rc);
    cdb_json_key(&j, "message");
    cdb_json_str(&j, g_first_error[0] ? g_first_error
                         : rc == CLI_EXIT_INTERRUPTED ? "interrupted"
                                                      : "failed");
    if (g_first_hint[0]) {
        cdb_json_key(&j, "hint");
        cdb_json_str(&j, g_first_hint);
    }
    cdb_json_end_object(&j);
    cdb_json_done(&j);
}

/* A hit's metadata: "taken" and "taken_source" (where the time came from: "file" for
** the file's mtime), and what the photo records of "make", "model", "lens", "lat",
** "lon", "alt" (absent when it records none). */
void cdb_cli_json_photo(cdb_json *j, const cdb_engine_photo *p) {
    const char *text[3][2] = {{"make", p->make}, {"model", p->model}, {"lens", p->lens}};
    cdb_json_key(j, "taken");
    cdb_json_str(j, p->taken);
    cdb_json_key(j, "taken_source");
    cdb_json_str(j, p->taken_source ? p->taken_source : "");
    for (int i = 0; i < 3; i++)
        if (text[i][1][0]) {
            cdb_json_key(j, text[i][0]);
            cdb_json_str(j, text[i][1]);
        }
    if (p->has_gps) {
        cdb_json_key(j, "lat");
        cdb_json_num(j, p->lat, 7);
        cdb_json_key(j, "lon");
        cdb_json_num(j, p->lon, 7);
    }
    if (p->has_alt) {
        cdb_json_key(j, "alt");
        cdb_json_num(j, p->alt, 2);
    }
}
