/*
** cdb_test.h: clipdb's minimal test harness (no external framework).
**
**   CDB_TEST(name) { CHECK(...); CHECK_EQ_INT(a, b); ... }
**   CDB_TEST_MAIN(name1, name2, ...)
**
** A failing CHECK prints file:line, the expression and both values, marks the
** current test failed and returns from it. CDB_SKIP("why") marks it skipped.
** The executable runs every test (or those named on the command line), prints one
** line per test and a closing "N passed, N failed, N skipped" line, and exits 0 if
** none failed, 77 (ctest's SKIP_RETURN_CODE) if all were skipped, 1 otherwise.
** Checks are not asserts: they still run under NDEBUG.
*/
#ifndef CDB_TEST_H
#define CDB_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cdb_test_ctx {
    int failed;
    int skipped;
} cdb_test_ctx;

typedef void (*cdb_test_fn)(cdb_test_ctx *cdb_t_);

typedef struct cdb_test_entry {
    const char *name;
    cdb_test_fn fn;
} cdb_test_entry;

#define CDB_TEST(name) static void name(cdb_test_ctx *cdb_t_)

#define CDB_TEST_FAIL_(...)                                          \
    do {                                                             \
        fprintf(stderr, "    %s:%d: ", __FILE__, __LINE__);          \
        fprintf(stderr, __VA_ARGS__);                                \
        fprintf(stderr, "\n");                                       \
        cdb_t_->failed = 1;                                          \
        return;                                                      \
    } while (0)

#define CDB_SKIP(...)                                                \
    do {                                                             \
        fprintf(stderr, "    skip: ");                               \
        fprintf(stderr, __VA_ARGS__);                                \
        fprintf(stderr, "\n");                                       \
        cdb_t_->skipped = 1;                                         \
        return;                                                      \
    } while (0)

#define CHECK(cond)                                                  \
    do {                                                             \
        if (!(cond)) CDB_TEST_FAIL_("CHECK(%s) failed", #cond);      \
    } while (0)

#define CHECK_MSG(cond, ...)                                         \
    do {                                                             \
        if (!(cond)) CDB_TEST_FAIL_(__VA_ARGS__);                    \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                         \
    do {                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                        \
        if (a_ != b_) CDB_TEST_FAIL_("%s == %s: %lld != %lld", #a, #b, a_, b_);     \
    } while (0)

#define CHECK_NE_INT(a, b)                                                         \
    do {                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                        \
        if (a_ == b_) CDB_TEST_FAIL_("%s != %s: both %lld", #a, #b, a_);            \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                         \
    do {                                                                           \
        const char *a_ = (a), *b_ = (b);                                           \
        if (!a_ || !b_ || strcmp(a_, b_))                                          \
            CDB_TEST_FAIL_("%s == %s: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)", \
                           b_ ? b_ : "(null)");                                    \
    } while (0)

/* |a - b| <= tol, printed with full precision. */
#define CHECK_NEAR(a, b, tol)                                                      \
    do {                                                                           \
        double a_ = (double)(a), b_ = (double)(b), t_ = (double)(tol);             \
        if (!(fabs(a_ - b_) <= t_))                                                \
            CDB_TEST_FAIL_("%s ~= %s: %.9g vs %.9g (diff %.3g > %.3g)", #a, #b, a_, b_, \
                           fabs(a_ - b_), t_);                                     \
    } while (0)

/* Expects a cdb_status call to return CDB_OK; prints the status and cdb_errmsg(). */
#define CHECK_OK(call)                                                             \
    do {                                                                           \
        int rc_ = (int)(call);                                                     \
        if (rc_ != 0)                                                              \
            CDB_TEST_FAIL_("%s -> %d (%s): %s", #call, rc_,                        \
                           cdb_status_str((cdb_status)rc_), cdb_errmsg());         \
    } while (0)

/* Runs call, a helper that takes cdb_t_ and checks, and ends the test there when the
** helper failed or skipped it. */
#define CHECK_CALL(call)                                                           \
    do {                                                                           \
        call;                                                                      \
        if (cdb_t_->failed || cdb_t_->skipped) return;                             \
    } while (0)

/* Expects a specific cdb_status. */
#define CHECK_RC(call, want)                                                       \
    do {                                                                           \
        int rc_ = (int)(call), w_ = (int)(want);                                   \
        if (rc_ != w_)                                                             \
            CDB_TEST_FAIL_("%s -> %s, want %s (msg: %s)", #call,                   \
                           cdb_status_str((cdb_status)rc_),                        \
                           cdb_status_str((cdb_status)w_), cdb_errmsg());          \
    } while (0)

/* The next state of the xorshift64 stream (13, 7, 17) at *state: the tests' reproducible
** random numbers (each test keeps its own state and seed, so its stream is its own). */
static inline uint64_t cdb_test_xorshift(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

static inline int cdb_test_run_(const cdb_test_entry *tests, int n, int argc, char **argv) {
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < n; i++) {
        int selected = argc <= 1;
        for (int a = 1; a < argc; a++)
            if (!strcmp(argv[a], tests[i].name)) selected = 1;
        if (!selected) continue;
        cdb_test_ctx ctx = {0, 0};
        tests[i].fn(&ctx);
        if (ctx.failed) {
            failed++;
            printf("FAIL %s\n", tests[i].name);
        } else if (ctx.skipped) {
            skipped++;
            printf("SKIP %s\n", tests[i].name);
        } else {
            passed++;
            printf("ok   %s\n", tests[i].name);
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    if (failed) return 1;
    if (passed == 0 && skipped > 0) return 77;
    return 0;
}

/* cdb_test_run_, then the scratch folder tmp (when one was made: tmp set and not empty) is
** removed with rm if the run passed (rc 0) and $CLIPDB_KEEP_TMP is unset: a failure leaves the
** evidence. */
static inline int cdb_test_run_tmp_(const cdb_test_entry *tests, int n, int argc, char **argv,
                                    const char *tmp, void (*rm)(const char *)) {
    int rc = cdb_test_run_(tests, n, argc, argv);
    if (tmp && tmp[0] && rm && rc == 0 && !getenv("CLIPDB_KEEP_TMP")) rm(tmp);
    return rc;
}

#define CDB_TEST_ENTRY_(fn) {#fn, fn},
#define CDB_TEST_MAP_(M, ...) CDB_TEST_FOREACH_(M, __VA_ARGS__)
/* Up to 32 tests per executable (see CDB_TEST_MAIN). */
#define CDB_TEST_FE_1(M, x) M(x)
#define CDB_TEST_FE_2(M, x, ...) M(x) CDB_TEST_FE_1(M, __VA_ARGS__)
#define CDB_TEST_FE_3(M, x, ...) M(x) CDB_TEST_FE_2(M, __VA_ARGS__)
#define CDB_TEST_FE_4(M, x, ...) M(x) CDB_TEST_FE_3(M, __VA_ARGS__)
#define CDB_TEST_FE_5(M, x, ...) M(x) CDB_TEST_FE_4(M, __VA_ARGS__)
#define CDB_TEST_FE_6(M, x, ...) M(x) CDB_TEST_FE_5(M, __VA_ARGS__)
#define CDB_TEST_FE_7(M, x, ...) M(x) CDB_TEST_FE_6(M, __VA_ARGS__)
#define CDB_TEST_FE_8(M, x, ...) M(x) CDB_TEST_FE_7(M, __VA_ARGS__)
#define CDB_TEST_FE_9(M, x, ...) M(x) CDB_TEST_FE_8(M, __VA_ARGS__)
#define CDB_TEST_FE_10(M, x, ...) M(x) CDB_TEST_FE_9(M, __VA_ARGS__)
#define CDB_TEST_FE_11(M, x, ...) M(x) CDB_TEST_FE_10(M, __VA_ARGS__)
#define CDB_TEST_FE_12(M, x, ...) M(x) CDB_TEST_FE_11(M, __VA_ARGS__)
#define CDB_TEST_FE_13(M, x, ...) M(x) CDB_TEST_FE_12(M, __VA_ARGS__)
#define CDB_TEST_FE_14(M, x, ...) M(x) CDB_TEST_FE_13(M, __VA_ARGS__)
#define CDB_TEST_FE_15(M, x, ...) M(x) CDB_TEST_FE_14(M, __VA_ARGS__)
#define CDB_TEST_FE_16(M, x, ...) M(x) CDB_TEST_FE_15(M, __VA_ARGS__)
#define CDB_TEST_FE_17(M, x, ...) M(x) CDB_TEST_FE_16(M, __VA_ARGS__)
#define CDB_TEST_FE_18(M, x, ...) M(x) CDB_TEST_FE_17(M, __VA_ARGS__)
#define CDB_TEST_FE_19(M, x, ...) M(x) CDB_TEST_FE_18(M, __VA_ARGS__)
#define CDB_TEST_FE_20(M, x, ...) M(x) CDB_TEST_FE_19(M, __VA_ARGS__)
#define CDB_TEST_FE_21(M, x, ...) M(x) CDB_TEST_FE_20(M, __VA_ARGS__)
#define CDB_TEST_FE_22(M, x, ...) M(x) CDB_TEST_FE_21(M, __VA_ARGS__)
#define CDB_TEST_FE_23(M, x, ...) M(x) CDB_TEST_FE_22(M, __VA_ARGS__)
#define CDB_TEST_FE_24(M, x, ...) M(x) CDB_TEST_FE_23(M, __VA_ARGS__)
#define CDB_TEST_FE_25(M, x, ...) M(x) CDB_TEST_FE_24(M, __VA_ARGS__)
#define CDB_TEST_FE_26(M, x, ...) M(x) CDB_TEST_FE_25(M, __VA_ARGS__)
#define CDB_TEST_FE_27(M, x, ...) M(x) CDB_TEST_FE_26(M, __VA_ARGS__)
#define CDB_TEST_FE_28(M, x, ...) M(x) CDB_TEST_FE_27(M, __VA_ARGS__)
#define CDB_TEST_FE_29(M, x, ...) M(x) CDB_TEST_FE_28(M, __VA_ARGS__)
#define CDB_TEST_FE_30(M, x, ...) M(x) CDB_TEST_FE_29(M, __VA_ARGS__)
#define CDB_TEST_FE_31(M, x, ...) M(x) CDB_TEST_FE_30(M, __VA_ARGS__)
#define CDB_TEST_FE_32(M, x, ...) M(x) CDB_TEST_FE_31(M, __VA_ARGS__)
#define CDB_TEST_NARG_(...) CDB_TEST_NARG2_(__VA_ARGS__, 32, 31, 30, 29, 28, 27, 26, 25, 24, \
    23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define CDB_TEST_NARG2_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, \
    _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, _30, _31, _32, N, ...) N
#define CDB_TEST_CAT_(a, b) CDB_TEST_CAT2_(a, b)
#define CDB_TEST_CAT2_(a, b) a##b
#define CDB_TEST_FOREACH_(M, ...) \
    CDB_TEST_CAT_(CDB_TEST_FE_, CDB_TEST_NARG_(__VA_ARGS__))(M, __VA_ARGS__)

/* A static table var[] of up to 32 tests, each named once, and its length: for a main()
** that does more than run them (a teardown, options of its own, a shared server). */
#define CDB_TEST_LIST(var, ...) \
    static const cdb_test_entry var[] = {CDB_TEST_MAP_(CDB_TEST_ENTRY_, __VA_ARGS__)}
#define CDB_TEST_N(var) ((int)(sizeof var / sizeof var[0]))

/* Up to 32 test names. Split larger suites into several executables. */
#define CDB_TEST_MAIN(...) CDB_TEST_MAIN_TMP(NULL, NULL, __VA_ARGS__)

/* CDB_TEST_MAIN for tests that make a scratch folder tmp (a char array, empty until made):
** rm removes it after a run without failures (see cdb_test_run_tmp_). */
#define CDB_TEST_MAIN_TMP(tmp, rm, ...)                                            \
    int main(int argc, char **argv) {                                              \
        CDB_TEST_LIST(tests_, __VA_ARGS__);                                        \
        return cdb_test_run_tmp_(tests_, CDB_TEST_N(tests_), argc, argv, tmp, rm); \
    }

/* Where the test data lives: CDB_SOURCE_DIR is defined by CMake. */
#ifndef CDB_SOURCE_DIR
#define CDB_SOURCE_DIR "."
#endif

#endif /* CDB_TEST_H */
