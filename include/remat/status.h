/* remat: status codes, per-call error reports and the library version.
 *
 * Every fallible public function returns a remat_status and takes an optional
 * `remat_error *err` (may be NULL). On failure the error is filled with the
 * status and a one-line message naming the source, the field and the problem.
 * There is no global error state. */
#ifndef REMAT_STATUS_H
#define REMAT_STATUS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the public API. libremat is built with -fvisibility=hidden, so only
 * the functions declared with REMAT_API are exported from libremat.so. */
#if defined(__GNUC__) || defined(__clang__)
#define REMAT_API __attribute__((visibility("default")))
#else
#define REMAT_API
#endif

/* The one source of the version: the Makefile (remat.pc, the soname),
 * pyproject.toml and the top entry of CHANGELOG.md follow these lines. */
#define REMAT_VERSION_MAJOR 0
#define REMAT_VERSION_MINOR 3
#define REMAT_VERSION_PATCH 0
#define REMAT_VERSION_NUMBER \
    (REMAT_VERSION_MAJOR * 10000 + REMAT_VERSION_MINOR * 100 + REMAT_VERSION_PATCH)

/* The version of the loaded library, so a binding can check compatibility. */
REMAT_API int remat_version_number(void);
REMAT_API const char *remat_version_string(void);

/* Every status, as X(NAME, value, description): the enum, remat_status_name()
 * and remat_strerror() all come from this one list. For E_INFEASIBLE,
 * err->min_memory says what memory would do. */
#define REMAT_STATUS_MAP(X)                                                                     \
    X(OK, 0, "success")                                                                         \
    X(E_INPUT, 1, "bad input: a malformed document, a bad field or a bad argument")             \
    X(E_INFEASIBLE, 2, "no schedule fits the memory")                                           \
    X(E_NOMEM, 3, "out of memory")                                                              \
    X(E_TOO_LARGE, 4, "a table or search would exceed the documented size limit")               \
    X(E_IO, 5, "a file could not be read or written")                                           \
    X(E_INTERNAL, 6, "a bug in remat: please report it")

typedef enum remat_status {
#define REMAT__STATUS_ENUM(name, value, text) REMAT_##name = value,
    REMAT_STATUS_MAP(REMAT__STATUS_ENUM)
#undef REMAT__STATUS_ENUM
} remat_status;

#define REMAT_MESSAGE_MAX 512

typedef struct remat_error {
    remat_status status;
    char message[REMAT_MESSAGE_MAX];
    /* For REMAT_E_INFEASIBLE: the smallest memory limit (bytes, or slots for
     * join problems) that would have been feasible, or 0 when unknown. */
    uint64_t min_memory;
} remat_error;

/* Short stable name of a status, e.g. "REMAT_E_INPUT"; "REMAT_E_UNKNOWN" for a
 * value not in the list. Never NULL; static storage. */
REMAT_API const char *remat_status_name(remat_status s);
/* What a status means, in words, e.g. "out of memory". Never NULL; static
 * storage. The message of a remat_error says more (which file, which field). */
REMAT_API const char *remat_strerror(remat_status s);

/* sizeof of a public struct, by its name ("remat_solve_options", ...), as the
 * loaded library was built; 0 for a name that is not a public struct. A
 * binding that lays the structs out itself (ctypes) checks its sizes against
 * these, so that a field added to a struct cannot silently corrupt it. */
REMAT_API size_t remat_sizeof(const char *type_name);

/* Frees a buffer the library returned (strings from the *_to_json calls). */
REMAT_API void remat_free(void *p);

/* Files. Every loader reads through remat_read_file() and every save writes
 * through remat_write_file(); front-ends (the CLI, the Python binding) use
 * them too, so every document is read and written the same way. */

/* No document may be larger than this. With the readers' bound on the
 * parse tree (16 times the text, at least 64 MiB; docs/formats.md), loading
 * a document never takes much more than 2.3 GiB. */
#define REMAT_MAX_DOCUMENT_BYTES ((size_t)128 << 20)

/* Reads the whole file into a new NUL-terminated buffer *out (free it with
 * remat_free()), *len bytes long (len may be NULL). Any kind of file works
 * (devices, pipes, /dev/stdin), but reading stops with REMAT_E_INPUT past
 * REMAT_MAX_DOCUMENT_BYTES; a directory or an unreadable file is REMAT_E_IO.
 * On failure *out is NULL. */
REMAT_API remat_status remat_read_file(const char *path, char **out, size_t *len,
                                       remat_error *err);

/* Writes len bytes of data to path atomically: into a temporary file in the
 * same directory, flushed and synced, then renamed over path (a symbolic link
 * keeps pointing at the new file; an existing file keeps its permissions). On
 * failure (REMAT_E_IO) path keeps its old contents and no temporary file is
 * left. A device or pipe (e.g. /dev/stdout) is written in place. */
REMAT_API remat_status remat_write_file(const char *path, const char *data, size_t len,
                                        remat_error *err);

#ifdef __cplusplus
}
#endif
#endif
