#include <stdio.h>
#include <string.h>

#include "test.h"

int test_failed_;

int remat_test_main(const test_case *cases, size_t n, int argc, char **argv) {
    int passed = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        int wanted = argc <= 1;
        for (int a = 1; a < argc; a++) wanted |= strcmp(argv[a], cases[i].name) == 0;
        if (!wanted) continue;
        test_failed_ = 0;
        cases[i].fn();
        printf("%s %s\n", test_failed_ ? "FAIL" : "ok  ", cases[i].name);
        fflush(stdout);
        if (test_failed_) failed++; else passed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
