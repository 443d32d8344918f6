/* Minimal test harness: each tests/test_*.c file lists its cases in a table and
 * calls remat_test_main(). Assertions print both values and end the case. */
#ifndef REMAT_TEST_H
#define REMAT_TEST_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct test_case {
    const char *name;
    void (*fn)(void);
} test_case;

extern int test_failed_; /* set by assertions in the current case */

#define TEST_FAIL_(...)                                          \
    do {                                                         \
        fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);        \
        fprintf(stderr, __VA_ARGS__);                            \
        fprintf(stderr, "\n");                                   \
        test_failed_ = 1;                                        \
        return;                                                  \
    } while (0)

#define ASSERT_TRUE(c) do { if (!(c)) TEST_FAIL_("expected %s", #c); } while (0)
#define ASSERT_EQ_U64(a, b) do { uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b); \
    if (a_ != b_) TEST_FAIL_("%s == %s: %" PRIu64 " != %" PRIu64, #a, #b, a_, b_); } while (0)
#define ASSERT_EQ_INT(a, b) do { long long a_ = (long long)(a), b_ = (long long)(b); \
    if (a_ != b_) TEST_FAIL_("%s == %s: %lld != %lld", #a, #b, a_, b_); } while (0)
#define ASSERT_LE_U64(a, b) do { uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b); \
    if (!(a_ <= b_)) TEST_FAIL_("%s <= %s: %" PRIu64 " > %" PRIu64, #a, #b, a_, b_); } while (0)
#define ASSERT_NEAR(a, b, tol) do { double a_ = (a), b_ = (b); \
    if (!(fabs(a_ - b_) <= (tol))) TEST_FAIL_("%s ~= %s: %.17g vs %.17g", #a, #b, a_, b_); } while (0)
#define ASSERT_LE_DBL(a, b, tol) do { double a_ = (a), b_ = (b); \
    if (!(a_ <= b_ + (tol))) TEST_FAIL_("%s <= %s: %.17g > %.17g", #a, #b, a_, b_); } while (0)
#define ASSERT_STATUS(expr, want) do { int s_ = (int)(expr); \
    if (s_ != (int)(want)) TEST_FAIL_("%s: status %d, expected %s", #expr, s_, #want); } while (0)
#define ASSERT_CONTAINS(hay, needle) do { const char *h_ = (hay); \
    if (!h_ || !strstr(h_, (needle))) TEST_FAIL_("\"%s\" does not contain \"%s\"", h_ ? h_ : "(null)", (needle)); } while (0)

/* Runs the cases (only those named on the command line, if any; none named
 * -NAME); prints one line
 * per case and a closing "N passed, N failed". Returns the exit code. */
int remat_test_main(const test_case *cases, size_t n, int argc, char **argv);
#define TEST_MAIN(table) \
    int main(int argc, char **argv) { return remat_test_main(table, sizeof table / sizeof table[0], argc, argv); }

#endif
