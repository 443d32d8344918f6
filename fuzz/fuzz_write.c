/* libFuzzer target: remat_write_file, the write path of every -o and save(),
 * on every kind of target a path may name (issue 23): a new or an existing
 * regular file, one behind a symbolic link, a file reached through a
 * descriptor (/dev/fd/N, /proc/self/fd/N, a link to one) as the shell's `>>`
 * opens it, a pipe, a FIFO, /dev/null, /dev/full, a closed descriptor, a
 * directory, a missing directory, and a regular file on a "full disk" (a file
 * size limit). The bytes choose the target and the data.
 *
 * Properties: the status is REMAT_OK or REMAT_E_IO with a message; after OK a
 * regular file holds exactly the data, after a failure its old contents; a
 * file behind a descriptor gets the data appended and is never replaced (same
 * inode); a pipe or FIFO delivers the data and stays what it was; nothing is
 * ever left behind (no temporary file). */
#define _XOPEN_SOURCE 700 /* mkdtemp, symlink, mkfifo */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.h"

static char dir[64];

static void cleanup(void) {
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (dir[0] && system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

static void setup(void) {
    if (dir[0]) return;
    snprintf(dir, sizeof dir, "/tmp/remat-fuzz-write-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    atexit(cleanup);
    signal(SIGXFSZ, SIG_IGN); /* a write past the size limit fails instead */
    signal(SIGPIPE, SIG_IGN);
}

static void path_of(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
}

/* Reads a whole small file; NULL when it cannot be read. */
static char *contents(const char *path, size_t *len) {
    char *text = NULL;
    if (remat_read_file(path, &text, len, NULL) != REMAT_OK) return NULL;
    return text;
}

static void check_same(const char *path, const char *want, size_t len) {
    size_t n = 0;
    char *t = contents(path, &n);
    CHECK(t != NULL);
    CHECK(n == len && memcmp(t, want, len) == 0);
    remat_free(t);
}

static void check_no_temp(void) {
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    for (struct dirent *e; (e = readdir(d));) CHECK(strstr(e->d_name, ".tmp-") == NULL);
    closedir(d);
}

static void check_status(remat_status st, const remat_error *e) {
    CHECK(st == REMAT_OK || st == REMAT_E_IO);
    if (st != REMAT_OK) check_error(st, e);
}

static const char old[] = "old contents\n";

/* A regular file, written by path (kind 0: new; 1: existing; 2: through a
 * symbolic link; 3: existing, with a file size limit below the data). */
static void regular(unsigned kind, const char *data, size_t len) {
    char f[128], l[128];
    path_of(f, sizeof f, "file");
    path_of(l, sizeof l, "link");
    unlink(f);
    unlink(l);
    if (kind) CHECK(remat_write_file(f, old, sizeof old - 1, NULL) == REMAT_OK);
    if (kind == 2) CHECK(symlink("file", l) == 0);
    struct rlimit saved;
    if (kind == 3) { /* the disk fills up midway */
        CHECK(getrlimit(RLIMIT_FSIZE, &saved) == 0);
        struct rlimit lim = {len / 2, saved.rlim_max};
        CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    }
    remat_error e;
    remat_status st = remat_write_file(kind == 2 ? l : f, data, len, &e);
    if (kind == 3) CHECK(setrlimit(RLIMIT_FSIZE, &saved) == 0);
    check_status(st, &e);
    if (kind == 3 && len > 1) CHECK(st == REMAT_E_IO);
    if (st == REMAT_OK)
        check_same(f, data, len);
    else if (kind)
        check_same(f, old, sizeof old - 1); /* nothing lost */
    if (kind == 2) {
        struct stat lb;
        CHECK(lstat(l, &lb) == 0 && S_ISLNK(lb.st_mode));
    }
    check_no_temp();
}

/* A file behind a descriptor opened for appending: named as /dev/fd/N,
 * /proc/self/fd/N or a link to one (via 0..2); closed first when `closed`. */
static void descriptor(unsigned via, int closed, const char *data, size_t len) {
    char f[128], l[128], p[64];
    path_of(f, sizeof f, "log");
    path_of(l, sizeof l, "to-fd");
    unlink(l);
    CHECK(remat_write_file(f, old, sizeof old - 1, NULL) == REMAT_OK);
    struct stat before, after;
    CHECK(stat(f, &before) == 0);
    int fd = open(f, O_WRONLY | O_APPEND | O_CLOEXEC);
    CHECK(fd >= 0);
    snprintf(p, sizeof p, via == 1 ? "/proc/self/fd/%d" : "/dev/fd/%d", fd);
    if (via == 2) CHECK(symlink(p, l) == 0);
    if (closed) close(fd);
    remat_error e;
    remat_status st = remat_write_file(via == 2 ? l : p, data, len, &e);
    check_status(st, &e);
    if (closed) {
        CHECK(st == REMAT_E_IO);
        check_same(f, old, sizeof old - 1);
    } else {
        CHECK(st == REMAT_OK);
        close(fd);
        size_t n = 0;
        char *t = contents(f, &n);
        CHECK(t && n == sizeof old - 1 + len);
        CHECK(memcmp(t, old, sizeof old - 1) == 0 && memcmp(t + sizeof old - 1, data, len) == 0);
        remat_free(t);
    }
    CHECK(stat(f, &after) == 0 && after.st_ino == before.st_ino); /* never replaced */
    check_no_temp();
}

/* A pipe through /dev/fd/N (fifo 0) or a FIFO by its path (fifo 1); the data
 * fits the pipe's buffer, so a reader is not needed while writing. */
static void pipe_like(int fifo, const char *data, size_t len) {
    int rd, wr = -1;
    char p[128];
    if (fifo) {
        path_of(p, sizeof p, "fifo");
        struct stat sb;
        if (stat(p, &sb) != 0) CHECK(mkfifo(p, 0600) == 0);
        rd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        CHECK(rd >= 0);
    } else {
        int fds[2];
        CHECK(pipe(fds) == 0);
        rd = fds[0];
        wr = fds[1];
        snprintf(p, sizeof p, "/dev/fd/%d", wr);
    }
    remat_error e;
    remat_status st = remat_write_file(p, data, len, &e);
    CHECK(st == REMAT_OK);
    char buf[4096];
    ssize_t n = read(rd, buf, sizeof buf);
    CHECK(len == 0 ? n <= 0 : (size_t)n == len && memcmp(buf, data, len) == 0);
    close(rd);
    if (wr >= 0) close(wr);
    if (fifo) {
        struct stat sb;
        CHECK(stat(p, &sb) == 0 && S_ISFIFO(sb.st_mode));
    }
    check_no_temp();
}

int LLVMFuzzerTestOneInput(const uint8_t *bytes, size_t size) {
    setup();
    reader r = {bytes, size};
    unsigned kind = byte(&r) % 12;
    const char *data = (const char *)r.p;
    size_t len = r.n < 4000 ? r.n : 4000; /* below a pipe's buffer (PIPE_BUF and more) */
    remat_error e;
    remat_status st;
    char p[128];
    switch (kind) {
    case 0: case 1: case 2: case 3: regular(kind, data, len); break;
    case 4: case 5: case 6: descriptor(kind - 4, 0, data, len); break;
    case 7: descriptor(len % 3, 1, data, len); break;
    case 8: pipe_like((int)(len & 1), data, len); break;
    case 9:
        st = remat_write_file((len & 1) ? "/dev/full" : "/dev/null", data, len, &e);
        check_status(st, &e);
        if (!(len & 1)) CHECK(st == REMAT_OK);
        if ((len & 1) && access("/dev/full", W_OK) == 0) CHECK(st == REMAT_E_IO);
        break;
    case 10: /* a directory */
        st = remat_write_file(dir, data, len, &e);
        CHECK(st == REMAT_E_IO);
        check_error(st, &e);
        break;
    default: /* in a directory that does not exist */
        path_of(p, sizeof p, "missing/file");
        st = remat_write_file(p, data, len, &e);
        CHECK(st == REMAT_E_IO);
        check_error(st, &e);
        check_no_temp();
        break;
    }
    return 0;
}
