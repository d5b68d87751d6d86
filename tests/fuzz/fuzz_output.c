/*
** fuzz_output.c: libFuzzer target for output/output.h, whose input is untrusted (file
** paths from any disk, query text, model names). The input bytes, cut at the first NUL,
** go through the JSON writer (as a string and with the path rule), the U+FFFD repair,
** base64 and back, and the base64 decoder as text of their own.
** Invariants: the writer's document is valid UTF-8 and parses (jansson) back to the
** repaired text, with path_b64 present exactly when the bytes are not UTF-8, decoding
** to the bytes; the repair is valid UTF-8 and the identity on valid input; the decoder
** never reads past len and its output fits in len / 4 * 3 + 3 bytes.
*/
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"
#include "output/output.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1), *b64;
    size_t n, back_n = 0;
    cdb_buf fixed = {0};
    cdb_json j;
    json_t *doc, *v;
    json_error_t err;
    unsigned char *back;
    char count[32];
    int64_t num = 0;
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    n = strlen(s);

    FUZZ_CHECK(cdb_out_utf8_repair(&fixed, s, n) == 0, "repair failed");
    FUZZ_CHECK(fixed.len == 0 || cdb_utf8_valid(fixed.data, fixed.len), "repair not UTF-8");
    FUZZ_CHECK(cdb_out_path_needs_b64(s) || (fixed.len == n && !memcmp(fixed.data, s, n)),
               "repair changed valid UTF-8");

    cdb_json_init(&j, NULL, size & 1);
    cdb_json_begin_object(&j);
    cdb_json_key(&j, "s");
    cdb_json_strn(&j, s, n);
    cdb_json_path(&j, "path", s);
    cdb_json_end_object(&j);
    cdb_json_done(&j);
    FUZZ_CHECK(!j.out.oom && cdb_utf8_valid(j.out.data, j.out.len), "document not UTF-8");
    doc = json_loadb(j.out.data, j.out.len, 0, &err);
    FUZZ_CHECK(doc, "jansson rejects the document: %s", err.text);
    v = json_object_get(doc, "s");
    FUZZ_CHECK(json_string_length(v) == fixed.len &&
                   !memcmp(json_string_value(v), fixed.len ? fixed.data : "", fixed.len),
               "the string does not read back as the repaired text");
    v = json_object_get(doc, "path_b64");
    FUZZ_CHECK(!v == !cdb_out_path_needs_b64(s), "path_b64 present iff not UTF-8");
    if (v) {
        back = cdb_out_base64_decode(json_string_value(v), json_string_length(v), &back_n);
        FUZZ_CHECK(back && back_n == n && !memcmp(back, s, n), "path_b64 is not the bytes");
        free(back);
    }
    json_decref(doc);
    cdb_json_free(&j);

    b64 = malloc(cdb_out_base64_len(size) + 1);
    if (b64) {
        cdb_out_base64(data, size, b64);
        FUZZ_CHECK(strlen(b64) == cdb_out_base64_len(size), "base64 length");
        back = cdb_out_base64_decode(b64, strlen(b64), &back_n);
        FUZZ_CHECK(back && back_n == size && !memcmp(back, data, size), "base64 round trip");
        free(back);
        free(b64);
    }
    back = cdb_out_base64_decode((const char *)data, size, &back_n);
    FUZZ_CHECK(!back || back_n <= size / 4 * 3 + 3, "decoded more than fits");
    free(back);

    memcpy(&num, data, size < sizeof num ? size : sizeof num);
    FUZZ_CHECK(strlen(cdb_out_fmt_count(num, count, sizeof count)) <= 26, "count length");
    cdb_buf_free(&fixed);
    free(s);
    return 0;
}
