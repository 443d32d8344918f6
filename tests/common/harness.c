#include <stdio.h>
#include <string.h>

#include "test.h"

int test_failed_;

int remat_test_main(const test_case *cases, size_t n, int argc, char **argv) {
    int passed = 0, failed = 0, includes = 0;
    for (int a = 1; a < argc; a++) includes += argv[a][0] != '-';
    for (size_t i = 0; i < n; i++) {
        /* NAME runs only the cases named; -NAME leaves a case out. */
        int wanted = includes == 0;
        for (int a = 1; a < argc; a++) {
            if (argv[a][0] == '-' && strcmp(argv[a] + 1, cases[i].name) == 0) wanted = -1;
            else if (wanted >= 0 && strcmp(argv[a], cases[i].name) == 0) wanted = 1;
        }
        if (wanted <= 0) continue;
        test_failed_ = 0;
        cases[i].fn();
        printf("%s %s\n", test_failed_ ? "FAIL" : "ok  ", cases[i].name);
        fflush(stdout);
        if (test_failed_) failed++; else passed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
