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

/* ---- CPU profiling ------------------------------------------------------------ */

/* Which timers drive the CPU profiler. */
typedef enum pprt_timer_mode {
  /* Per-thread CPU timers where the OS has them (Linux), with the process
   * timer as a fallback for threads pprt has not seen yet; the process
   * timer alone elsewhere. */
  PPRT_TIMER_AUTO = 0,
  /* Per-thread CPU timers only (Linux); pprt_cpu_start fails with -ENOTSUP
   * where there are none. */
  PPRT_TIMER_PER_THREAD = 1,
  /* One process-wide timer (setitimer ITIMER_PROF) only. On Linux it
   * under-samples once more than ~2.5 threads are busy and splits samples
   * unevenly between threads (Go issue 35057). */
  PPRT_TIMER_PROCESS = 2,
} pprt_timer_mode;

typedef enum pprt_unwinder {
  PPRT_UNWIND_DEFAULT = 0,  /* the build's default (PPRT_UNWINDER) */
  PPRT_UNWIND_FP = 1,       /* frame pointers: ~1 ns a frame */
  PPRT_UNWIND_LIBUNWIND = 2 /* DWARF unwind tables; -ENOTSUP if not built in */
} pprt_unwinder;

/* CPU profiler options. Zero-initialise, then set what you need; every zero
 * field means its default. */
typedef struct pprt_cpu_options {
  /* sizeof(pprt_cpu_options) as the caller was compiled with, or 0; lets
   * later versions add fields without breaking older callers. */
  size_t size;
  int hz;                  /* samples per CPU-second asked; 0: 100 */
  int max_depth;           /* frames kept per sample; 0: 64; at most 256 */
  pprt_timer_mode timer;   /* 0: PPRT_TIMER_AUTO */
  pprt_unwinder unwinder;  /* 0: the build's default */
  int no_symbolize;        /* 1: leave function names to the reader (go tool
                              pprof symbolizes from the binaries) */
} pprt_cpu_options;

/* Starts the CPU profiler: SIGPROF at opts->hz per CPU-second on every
 * thread, stacks recorded into a ring buffer that a reader thread drains.
 * The profile (gzip'd pprof, sample types samples/count and
 * cpu/nanoseconds) is written to out when pprt_cpu_stop is called.
 * opts NULL means defaults. Errors: -EBUSY (already running), -EINVAL (a
 * bad option), -ENOTSUP (an option this OS or build lacks), -ENOMEM,
 * -EAGAIN (no thread could be started). */
PPRT_API int pprt_cpu_start(const pprt_cpu_options *opts, pprt_writer out);

/* Stops the CPU profiler and writes the profile; returns after it is
 * written, with the writer's error if writing failed. -EPIPE when no
 * profile is running. */
PPRT_API int pprt_cpu_stop(void);

/* Tells pprt about the calling thread: gives it a 32 KiB alternate signal
 * stack (unless it has one), records its stack bounds for the unwinder and,
 * while a CPU profile runs, starts its per-thread timer at once instead of
 * at the next rescan. Optional (pprt finds threads on its own, and the
 * preload library registers every thread it sees created); undone
 * automatically when the thread exits. */
PPRT_API int pprt_thread_register(void);

/* Undoes pprt_thread_register on the calling thread now. */
PPRT_API int pprt_thread_unregister(void);

/* ---- heap profiling -------------------------------------------------------------- */

/* Sets the mean number of bytes allocated between samples: 0 turns the
 * allocation sampler off (the default), 1 samples every allocation, and
 * 524288 (512 KiB, Go's MemProfileRate) is the usual setting. Allocations
 * are seen through the preload library's malloc family and through
 * pprt_alloc_note. A thread picks up a new rate at its next sample point
 * (within 64 MiB of its allocations when sampling was off). */
PPRT_API int pprt_heap_set_rate(size_t bytes);

/* The current rate. */
PPRT_API size_t pprt_heap_rate(void);

/* Writes a heap profile as of now (gzip'd pprof): sample types
 * alloc_objects, alloc_space, inuse_objects, inuse_space (the default), each
 * an estimate of the real totals from the samples; period_type space/bytes,
 * period = the rate. Errors: the writer's, -ENOMEM. */
PPRT_API int pprt_heap_write(pprt_writer out);

/* For programs and libraries with their own allocators (arenas, pools):
 * report an allocation of size bytes at ptr, and its release. Sampled like
 * malloc, shown in the same heap profile, kept apart from malloc's blocks
 * (an arena's block may share an address with the malloc block under it). */
PPRT_API void pprt_alloc_note(void *ptr, size_t size);
PPRT_API void pprt_free_note(void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* PPRT_H */
