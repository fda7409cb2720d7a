/* pprt: the portable profiling runtime.
 *
 * The one public header. Everything a program or a vendoring library uses is
 * declared here; nothing else in pprt is a public symbol. Conventions:
 *
 *   - Every function that can fail returns 0 or a negative errno value;
 *     pprt_strerror() names it.
 *   - Output goes to a pprt_writer. pprt calls it only from its own threads
 *     (or the thread that called the pprt function that writes), never from a
 *     signal handler.
 *   - Nothing happens until a start function is called: linking pprt installs
 *     no handler, starts no thread and allocates nothing.
 */
#ifndef PPRT_H
#define PPRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The one export macro. pprt is built with hidden visibility; PPRT_API marks
 * the public functions. */
#if defined(__GNUC__) || defined(__clang__)
#define PPRT_API __attribute__((visibility("default")))
#else
#define PPRT_API
#endif

#define PPRT_VERSION_MAJOR 0
#define PPRT_VERSION_MINOR 1
#define PPRT_VERSION_PATCH 0

/* The version of the library actually linked, as "MAJOR.MINOR.PATCH". */
PPRT_API const char *pprt_version(void);

/* A short description of a pprt return value: pprt_strerror(-ENOSPC).
 * Accepts the negative errno values pprt returns (positive ones too). */
PPRT_API const char *pprt_strerror(int err);

/* Where profiles and traces go. write() returns 0 when all len bytes were
 * taken, or a negative errno; pprt stops writing that output on error and
 * reports the error from the call that was writing. */
typedef struct pprt_writer {
  int (*write)(void *ctx, const void *data, size_t len);
  void *ctx;
} pprt_writer;

/* A writer onto an open file descriptor. Short writes and EINTR are retried;
 * the descriptor is not closed by pprt. */
PPRT_API pprt_writer pprt_writer_fd(int fd);

#ifdef __cplusplus
}
#endif

#endif /* PPRT_H */
