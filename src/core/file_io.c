/* Files: the capped reader every loader uses and the atomic writer every
 * save uses (the CLI's -o and the Python binding's save() included).
 *
 * Reading stops at REMAT_MAX_DOCUMENT_BYTES whatever the file is: stat() gives
 * 0 for devices and pipes, so the size is checked while reading too.
 * Writing a regular file goes to a temporary file in the target's directory,
 * is flushed and synced, then renamed over the target: on any error the target
 * keeps its old contents and the temporary file is removed. Anything else is
 * written through, never replaced: a descriptor path (/dev/stdout, /dev/fd/N,
 * /proc/self/fd/N) is written on that descriptor, at its offset, as the shell
 * opened it (`>>` appends); a device, a FIFO or another process's descriptor
 * is opened and written in place. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/vfs.h>
#define REMAT__PROC_SUPER_MAGIC 0x9fa0
#endif

#include "internal.h"

#define READ_CHUNK ((size_t)1 << 16)

/* Grows *buf to hold at least need bytes; 0 when out of memory. */
static int grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 1;
    size_t ncap = *cap ? *cap : READ_CHUNK;
    while (ncap < need) ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    char *nb = realloc(*buf, ncap);
    if (!nb) return 0;
    *buf = nb;
    *cap = ncap;
    return 1;
}

static remat_status too_big(const char *path, unsigned long long size, size_t max,
                            remat_error *err) {
    char limit[48];
    if (max % ((size_t)1 << 20) == 0)
        snprintf(limit, sizeof limit, "%zu MiB", max >> 20);
    else
        snprintf(limit, sizeof limit, "%zu bytes", max);
    if (size)
        return remat__fail(err, REMAT_E_INPUT,
                           "%s: %llu bytes, more than the limit of %s for a document", path, size,
                           limit);
    return remat__fail(err, REMAT_E_INPUT, "%s: more than the limit of %s for a document", path,
                       limit);
}

/* Reads all of fd, at most max bytes; hint: the expected size (0 unknown). */
static remat_status read_fd(int fd, const char *path, size_t max, size_t hint, char **out,
                            size_t *len, remat_error *err) {
    char *buf = NULL;
    size_t cap = 0, n = 0;
    if (hint && !grow(&buf, &cap, hint + 1))
        return remat__fail(err, REMAT_E_NOMEM, "%s: out of memory reading %zu bytes", path, hint);
    for (;;) {
        /* One byte past max tells a file of exactly max bytes from a longer one. */
        size_t want = max + 1 - n < READ_CHUNK ? max + 1 - n : READ_CHUNK;
        if (!grow(&buf, &cap, n + want + 1)) {
            free(buf);
            return remat__fail(err, REMAT_E_NOMEM, "%s: out of memory after reading %zu bytes",
                               path, n);
        }
        ssize_t k = read(fd, buf + n, want);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            int e = errno;
            free(buf);
            return remat__fail(err, REMAT_E_IO, "%s: read error: %s", path, strerror(e));
        }
        if (k == 0) break;
        n += (size_t)k;
        if (n > max) {
            free(buf);
            return too_big(path, 0, max, err);
        }
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return REMAT_OK;
}

remat_status remat__read_file_max(const char *path, size_t max, char **out, size_t *len,
                                  remat_error *err) {
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    REMAT__RETURN_IF(fd < 0, err, REMAT_E_IO, "%s: cannot open file: %s", path, strerror(errno));
    struct stat sb;
    remat_status st = REMAT_OK;
    if (fstat(fd, &sb) != 0)
        st = remat__fail(err, REMAT_E_IO, "%s: cannot read file: %s", path, strerror(errno));
    else if (S_ISDIR(sb.st_mode))
        st = remat__fail(err, REMAT_E_IO, "%s: is a directory", path);
    else if (S_ISREG(sb.st_mode) && (unsigned long long)sb.st_size > max)
        st = too_big(path, (unsigned long long)sb.st_size, max, err);
    else
        st = read_fd(fd, path, max, S_ISREG(sb.st_mode) ? (size_t)sb.st_size : 0, out, len, err);
    close(fd);
    return st;
}

remat_status remat_read_file(const char *path, char **out, size_t *len, remat_error *err) {
    remat__clear(err);
    if (out) *out = NULL; /* on failure too, as documented */
    REMAT__RETURN_IF(!path || !out, err, REMAT_E_INPUT, "remat_read_file: NULL argument");
    size_t n = 0;
    remat_status st = remat__read_file_max(path, REMAT_MAX_DOCUMENT_BYTES, out, &n, err);
    if (len) *len = n;
    return st;
}

static remat_status write_all(int fd, const char *path, const char *data, size_t len,
                              remat_error *err) {
    while (len > 0) {
        ssize_t k = write(fd, data, len);
        if (k < 0 && errno == EINTR) continue;
        REMAT__RETURN_IF(k <= 0, err, REMAT_E_IO, "%s: cannot write: %s", path,
                         strerror(k < 0 ? errno : EIO));
        data += k;
        len -= (size_t)k;
    }
    return REMAT_OK;
}

/* fsync of a pipe or a terminal fails with EINVAL: nothing to sync there. */
static remat_status sync_fd(int fd, const char *path, remat_error *err) {
    if (fsync(fd) == 0 || errno == EINVAL || errno == EROFS) return REMAT_OK;
    return remat__fail(err, REMAT_E_IO, "%s: cannot write: %s", path, strerror(errno));
}

/* Devices and pipes (a FIFO, /dev/null) cannot be replaced: write in place.
 * A regular file reached through another process's descriptor is appended
 * to, as the shell that opened it most likely did. */
static remat_status write_in_place(const char *path, int append, const char *data, size_t len,
                                   remat_error *err) {
    int fd = open(path, O_WRONLY | O_CLOEXEC | (append ? O_APPEND : 0));
    REMAT__RETURN_IF(fd < 0, err, REMAT_E_IO, "%s: cannot open for writing: %s", path,
                     strerror(errno));
    remat_status st = write_all(fd, path, data, len, err);
    if (st == REMAT_OK) st = sync_fd(fd, path, err);
    if (close(fd) != 0 && st == REMAT_OK)
        st = remat__fail(err, REMAT_E_IO, "%s: cannot write: %s", path, strerror(errno));
    return st;
}

/* Descriptor fd of this process, named by path: written at its own offset
 * and left open (it is the caller's). */
static remat_status write_descriptor(int fd, const char *path, const char *data, size_t len,
                                     remat_error *err) {
    REMAT__RETURN_IF(fcntl(fd, F_GETFL) < 0, err, REMAT_E_IO,
                     "%s: cannot write: descriptor %d is not open", path, fd);
    REMAT__FORWARD(write_all(fd, path, data, len, err));
    return sync_fd(fd, path, err);
}

/* The directory part of path ("." when none) into dir. */
static void dir_of(const char *path, char *dir, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, cap, ".");
    else if (slash == path)
        snprintf(dir, cap, "/");
    else
        snprintf(dir, cap, "%.*s", (int)(slash - path), path);
}

enum { PATH_PLAIN, PATH_OWN_FD, PATH_OTHER_FD };

/* Whether path, or a symbolic link it leads through, is a descriptor link of
 * /proc (/dev/stdout leads to /proc/self/fd/1, /dev/fd/N to /proc/self/fd/N):
 * PATH_OWN_FD with *fd set when the descriptor is this process's own,
 * PATH_OTHER_FD for another process's, else PATH_PLAIN. Linux only: elsewhere
 * /dev/stdout is a device, written in place anyway. */
static int descriptor_path(const char *path, int *fd) {
#if defined(__linux__)
    char cur[PATH_MAX], next[PATH_MAX], dir[PATH_MAX];
    if (snprintf(cur, sizeof cur, "%s", path) >= (int)sizeof cur) return PATH_PLAIN;
    for (int hops = 0; hops < 40; hops++) {
        struct statfs fs;
        dir_of(cur, dir, sizeof dir);
        const char *base = strrchr(cur, '/');
        base = base ? base + 1 : cur;
        size_t digits = strspn(base, "0123456789"), dl = strlen(dir);
        int in_fd_dir = dl >= 3 && strcmp(dir + dl - 3, "/fd") == 0;
        if (digits && !base[digits] && digits < 10 && in_fd_dir && statfs(dir, &fs) == 0 &&
            fs.f_type == REMAT__PROC_SUPER_MAGIC) {
            struct stat a, b;
            *fd = atoi(base);
            int own = stat(dir, &a) == 0 && stat("/proc/self/fd", &b) == 0 &&
                      a.st_dev == b.st_dev && a.st_ino == b.st_ino;
            return own ? PATH_OWN_FD : PATH_OTHER_FD;
        }
        struct stat lb;
        if (lstat(cur, &lb) != 0 || !S_ISLNK(lb.st_mode)) return PATH_PLAIN;
        ssize_t k = readlink(cur, next, sizeof next - 1);
        if (k <= 0) return PATH_PLAIN;
        next[k] = '\0';
        if (next[0] == '/') {
            memcpy(cur, next, (size_t)k + 1);
        } else {
            char joined[2 * PATH_MAX + 2];
            snprintf(joined, sizeof joined, "%s/%s", dir, next);
            if (strlen(joined) >= sizeof cur) return PATH_PLAIN;
            memcpy(cur, joined, strlen(joined) + 1);
        }
    }
#else
    (void)path;
    (void)fd;
#endif
    return PATH_PLAIN;
}

/* Creates a new temporary file next to target; mode 0666 less the umask, as
 * the target itself would get. */
static int open_temp(const char *target, char *tmp, size_t cap) {
    static atomic_uint counter;
    const char *slash = strrchr(target, '/');
    int dirlen = slash ? (int)(slash - target + 1) : 0;
    const char *base = slash ? slash + 1 : target;
    for (int tries = 0; tries < 100; tries++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned id = atomic_fetch_add(&counter, 1u);
        int k = snprintf(tmp, cap, "%.*s.%.64s.tmp-%ld-%u-%ld", dirlen, target, base,
                         (long)getpid(), id, (long)ts.tv_nsec);
        if (k < 0 || (size_t)k >= cap) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;
}

/* Syncs the directory holding path, so the rename itself is durable. */
static void sync_dir(const char *path) {
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    (void)fsync(fd); /* best effort: the data itself is already synced */
    close(fd);
}

static remat_status write_replace(const char *target, const char *shown, const struct stat *old,
                                  const char *data, size_t len, remat_error *err) {
    char tmp[4096 + 128];
    int fd = open_temp(target, tmp, sizeof tmp);
    REMAT__RETURN_IF(fd < 0, err, REMAT_E_IO, "%s: cannot write (a temporary file beside it): %s",
                     shown, strerror(errno));
    remat_status st = REMAT_OK;
    if (old && fchmod(fd, old->st_mode & 07777) != 0)
        st = remat__fail(err, REMAT_E_IO, "%s: cannot write (keeping its permissions): %s", shown,
                         strerror(errno));
    if (st == REMAT_OK) st = write_all(fd, shown, data, len, err);
    if (st == REMAT_OK && fsync(fd) != 0)
        st = remat__fail(err, REMAT_E_IO, "%s: cannot write: %s", shown, strerror(errno));
    if (close(fd) != 0 && st == REMAT_OK)
        st = remat__fail(err, REMAT_E_IO, "%s: cannot write: %s", shown, strerror(errno));
    if (st == REMAT_OK && rename(tmp, target) != 0)
        st = remat__fail(err, REMAT_E_IO, "%s: cannot write (replacing it): %s", shown,
                         strerror(errno));
    if (st != REMAT_OK) {
        unlink(tmp);
        return st;
    }
    sync_dir(target);
    return REMAT_OK;
}

remat_status remat_write_file(const char *path, const char *data, size_t len, remat_error *err) {
    remat__clear(err);
    REMAT__RETURN_IF(!path || (!data && len), err, REMAT_E_INPUT,
                     "remat_write_file: NULL argument");
    REMAT__RETURN_IF(!path[0], err, REMAT_E_INPUT, "remat_write_file: empty path");
    if (!data) data = "";
    int fd = -1, kind = descriptor_path(path, &fd);
    if (kind == PATH_OWN_FD) return write_descriptor(fd, path, data, len, err);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        REMAT__RETURN_IF(errno != ENOENT || kind != PATH_PLAIN, err, REMAT_E_IO,
                         "%s: cannot write: %s", path, strerror(errno));
        return write_replace(path, path, NULL, data, len, err); /* a new file */
    }
    REMAT__RETURN_IF(S_ISDIR(sb.st_mode), err, REMAT_E_IO, "%s: is a directory", path);
    if (!S_ISREG(sb.st_mode) || kind == PATH_OTHER_FD)
        return write_in_place(path, S_ISREG(sb.st_mode), data, len, err);
    /* Through a symbolic link, replace the file it names and keep the link. */
    char *real = realpath(path, NULL);
    REMAT__RETURN_IF(!real, err, REMAT_E_IO, "%s: cannot write: %s", path, strerror(errno));
    remat_status st = write_replace(real, path, &sb, data, len, err);
    free(real);
    return st;
}
