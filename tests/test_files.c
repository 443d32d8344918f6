/* Files: the capped reader (any kind of file) and the atomic writer (the old
 * contents survive a failed write; no temporary file is left behind). */
#define _XOPEN_SOURCE 700 /* mkdtemp, symlink */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "test.h"
#include "common/testlib.h"

static char dir[64];

static void remove_dir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (dir[0] && system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
    dir[0] = '\0';
}

static void make_dir(void) {
    remove_dir();
    snprintf(dir, sizeof dir, "/tmp/remat-test-files-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(2);
    }
}

static void path_in(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
}

/* Number of entries in the test directory (besides . and ..). */
static int entries(void) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.' || strstr(e->d_name, ".tmp-") != NULL;
    if (d) closedir(d);
    return n;
}

static char *slurp(const char *path) {
    char *text = NULL;
    if (remat_read_file(path, &text, NULL, NULL) != REMAT_OK) return NULL;
    return text;
}

static void write_then_replace(void) {
    make_dir();
    char p[128];
    path_in(p, sizeof p, "a.txt");
    ASSERT_STATUS(remat_write_file(p, "hello\n", 6, NULL), REMAT_OK);
    char *t = slurp(p);
    ASSERT_TRUE(t && strcmp(t, "hello\n") == 0);
    remat_free(t);
    ASSERT_TRUE(chmod(p, 0640) == 0);
    ASSERT_STATUS(remat_write_file(p, "bye", 3, NULL), REMAT_OK);
    struct stat sb;
    ASSERT_TRUE(stat(p, &sb) == 0);
    ASSERT_EQ_INT(sb.st_mode & 0777, 0640); /* the permissions are kept */
    t = slurp(p);
    ASSERT_TRUE(t && strcmp(t, "bye") == 0);
    remat_free(t);
    /* Through a symbolic link: the link stays, the file it names changes. */
    char l[128];
    path_in(l, sizeof l, "link.txt");
    ASSERT_TRUE(symlink(p, l) == 0);
    ASSERT_STATUS(remat_write_file(l, "via link", 8, NULL), REMAT_OK);
    struct stat lb;
    ASSERT_TRUE(lstat(l, &lb) == 0 && S_ISLNK(lb.st_mode));
    t = slurp(p);
    ASSERT_TRUE(t && strcmp(t, "via link") == 0);
    remat_free(t);
    ASSERT_EQ_INT(entries(), 2); /* no temporary file left */
}

static void write_errors_keep_old_contents(void) {
    make_dir();
    char p[128];
    path_in(p, sizeof p, "old.json");
    ASSERT_STATUS(remat_write_file(p, "old contents\n", 13, NULL), REMAT_OK);
    /* A file size limit makes the write fail midway, as a full disk would. */
    char big[8192];
    memset(big, 'x', sizeof big);
    struct rlimit saved, lim;
    ASSERT_TRUE(getrlimit(RLIMIT_FSIZE, &saved) == 0);
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = saved;
    lim.rlim_cur = 1000;
    ASSERT_TRUE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    remat_error e;
    remat_status st = remat_write_file(p, big, sizeof big, &e);
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, old_handler);
    ASSERT_STATUS(st, REMAT_E_IO);
    ASSERT_CONTAINS(e.message, "old.json: cannot write");
    char *t = slurp(p);
    ASSERT_TRUE(t && strcmp(t, "old contents\n") == 0);
    remat_free(t);
    ASSERT_EQ_INT(entries(), 1);
    /* A directory, a missing directory, a device that is full. */
    ASSERT_STATUS(remat_write_file(dir, "x", 1, &e), REMAT_E_IO);
    ASSERT_CONTAINS(e.message, "is a directory");
    char q[160];
    snprintf(q, sizeof q, "%s/no/such/dir.json", dir);
    ASSERT_STATUS(remat_write_file(q, "x", 1, &e), REMAT_E_IO);
    ASSERT_EQ_INT(entries(), 1);
    if (access("/dev/full", W_OK) == 0) {
        ASSERT_STATUS(remat_write_file("/dev/full", big, sizeof big, &e), REMAT_E_IO);
        ASSERT_CONTAINS(e.message, "/dev/full: cannot write");
    }
    ASSERT_STATUS(remat_write_file(NULL, "x", 1, &e), REMAT_E_INPUT);
    ASSERT_STATUS(remat_write_file(p, NULL, 1, &e), REMAT_E_INPUT);
}

static void save_is_atomic(void) {
    make_dir();
    remat_stage st[2] = {test_stage(1, 2, 10, 20), test_stage(1, 1, 1, 2)};
    remat_chain *c = NULL;
    ASSERT_STATUS(remat_chain_create("two", 5, 5, st, 2, &c, NULL), REMAT_OK);
    char p[128];
    path_in(p, sizeof p, "chain.json");
    ASSERT_STATUS(remat_write_file(p, "precious\n", 9, NULL), REMAT_OK);
    struct rlimit saved, lim;
    ASSERT_TRUE(getrlimit(RLIMIT_FSIZE, &saved) == 0);
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = saved;
    lim.rlim_cur = 100; /* the chain's JSON is longer */
    ASSERT_TRUE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    remat_error e;
    remat_status s1 = remat_chain_save(c, p, &e);
    remat_schedule *s = NULL;
    remat_solve_options o;
    remat_solve_options_init(&o);
    o.memory = 1000;
    remat_status s2 = remat_solve(c, &o, &s, NULL);
    remat_status s3 = s ? remat_schedule_save(s, p, NULL) : REMAT_E_INTERNAL;
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, old_handler);
    ASSERT_STATUS(s1, REMAT_E_IO);
    ASSERT_STATUS(s2, REMAT_OK);
    ASSERT_STATUS(s3, REMAT_E_IO);
    char *t = slurp(p);
    ASSERT_TRUE(t && strcmp(t, "precious\n") == 0);
    remat_free(t);
    ASSERT_EQ_INT(entries(), 1);
    /* Without the limit both saves work and read back. */
    ASSERT_STATUS(remat_chain_save(c, p, NULL), REMAT_OK);
    remat_chain *back = NULL;
    ASSERT_STATUS(remat_chain_load(p, &back, NULL), REMAT_OK);
    ASSERT_EQ_U64(back->n, 2);
    remat_chain_free(back);
    remat_schedule_free(s);
    remat_chain_free(c);
}

static void reads_stop_at_the_cap(void) {
    char *t = NULL;
    size_t n = 0;
    remat_error e;
    /* Devices report size 0: the cap holds while reading. */
    ASSERT_STATUS(remat__read_file_max("/dev/zero", 1 << 20, &t, &n, &e), REMAT_E_INPUT);
    ASSERT_TRUE(t == NULL);
    ASSERT_CONTAINS(e.message, "/dev/zero: more than the limit of 1 MiB");
    ASSERT_STATUS(remat__read_file_max("/dev/null", 1 << 20, &t, &n, &e), REMAT_OK);
    ASSERT_EQ_U64(n, 0);
    ASSERT_TRUE(t && t[0] == '\0');
    remat_free(t);
    ASSERT_STATUS(remat_read_file("/", &t, &n, &e), REMAT_E_IO);
    ASSERT_CONTAINS(e.message, "is a directory");
    ASSERT_STATUS(remat_read_file("/no/such/file.json", &t, &n, &e), REMAT_E_IO);
    ASSERT_STATUS(remat_read_file(NULL, &t, &n, &e), REMAT_E_INPUT);
    /* A regular file exactly at the cap reads; one byte more does not. */
    make_dir();
    char p[128];
    path_in(p, sizeof p, "cap.txt");
    char buf[300];
    memset(buf, 'y', sizeof buf);
    ASSERT_STATUS(remat_write_file(p, buf, 300, NULL), REMAT_OK);
    ASSERT_STATUS(remat__read_file_max(p, 300, &t, &n, &e), REMAT_OK);
    ASSERT_EQ_U64(n, 300);
    remat_free(t);
    ASSERT_STATUS(remat__read_file_max(p, 299, &t, &n, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "300 bytes, more than the limit of 299 bytes");
    /* A loader over a device stops the same way. */
    remat_chain *c = NULL;
    ASSERT_STATUS(remat_chain_load("/dev/zero", &c, &e), REMAT_E_INPUT);
    ASSERT_CONTAINS(e.message, "more than the limit of 128 MiB");
    remat_join_problem jp;
    ASSERT_STATUS(remat_join_problem_load("/dev/zero", &jp, &e), REMAT_E_INPUT);
    ASSERT_STATUS(remat_join_problem_load("/", &jp, &e), REMAT_E_IO);
    ASSERT_CONTAINS(e.message, "is a directory");
}

static const test_case cases[] = {
    {"write_then_replace", write_then_replace},
    {"write_errors_keep_old_contents", write_errors_keep_old_contents},
    {"save_is_atomic", save_is_atomic},
    {"reads_stop_at_the_cap", reads_stop_at_the_cap},
};

int main(int argc, char **argv) {
    int rc = remat_test_main(cases, sizeof cases / sizeof cases[0], argc, argv);
    remove_dir();
    return rc;
}
