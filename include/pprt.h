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
 * reports the error from the call that was writing. pprt calls it with
 * none of its locks held: it may allocate, and free the program's memory
 * (the heap profile sees that free). */
typedef struct pprt_writer {
  int (*write)(void *ctx, const void *data, size_t len);
  void *ctx;
} pprt_writer;

/* A writer onto an open file descriptor. Short writes and EINTR are retried;
 * the descriptor is not closed by pprt. */
PPRT_API pprt_writer pprt_writer_fd(int fd);

/* ---- symbolization ------------------------------------------------------------ */

/* How profiles and traces name their addresses, at write time (never in a
 * signal handler). Every mode keeps the addresses, the mappings and their
 * build ids, so a reader can always symbolize again. */
typedef enum pprt_symbolize {
  /* PPRT_SYMBOLIZE from the environment when set (lines, names, none; 1 and
   * 0 for names-or-lines and none), else lines where this build reads DWARF
   * (Linux and FreeBSD) and names elsewhere. */
  PPRT_SYMBOLIZE_DEFAULT = 0,
  /* Function names, source file:line and inlined functions, from the debug
   * information (DWARF, read by pprt itself or by elfutils' libdw), found
   * in the binary or in a separate debug file (by build id or
   * .gnu_debuglink, under /usr/lib/debug and the directories of
   * PPRT_DEBUG_DIRS). An image without debug information gets names. In a
   * build without a DWARF reader (macOS, or PPRT_SYMBOLIZER=elf): names,
   * and the profile's comments say so. */
  PPRT_SYMBOLIZE_LINES = 1,
  /* Function names from the symbol tables only. */
  PPRT_SYMBOLIZE_NAMES = 2,
  /* Addresses only, for symbolization elsewhere (pprof from the binaries,
   * or a server by build id). */
  PPRT_SYMBOLIZE_NONE = 3
} pprt_symbolize;

/* Sets the process's symbolization mode for every later profile and trace
 * written (a CPU profile or trace started with no_symbolize stays
 * unsymbolized). Errors: -EINVAL (not a mode). */
PPRT_API int pprt_set_symbolize(pprt_symbolize mode);

/* ---- CPU profiling ------------------------------------------------------------ */

/* Which timers drive the CPU profiler. */
typedef enum pprt_timer_mode {
  /* The best source the system allows: PPRT_TIMER_PERF where
   * perf_event_open works (Linux), else per-thread CPU timers (Linux),
   * else the process timer. The profile's comments say which ran and why
   * a better one was refused. */
  PPRT_TIMER_AUTO = 0,
  /* Per-thread CPU timers only (Linux); pprt_cpu_start fails with -ENOTSUP
   * where there are none. */
  PPRT_TIMER_PER_THREAD = 1,
  /* One process-wide timer (setitimer ITIMER_PROF) only. On Linux it
   * under-samples once more than ~2.5 threads are busy and splits samples
   * unevenly between threads (Go issue 35057). */
  PPRT_TIMER_PROCESS = 2,
  /* A per-thread perf_event task clock (Linux): driven by a high-resolution
   * timer rather than the scheduler tick, at randomized intervals, each
   * sample weighted by the CPU time of the interval that ended. Rates above
   * the kernel's tick rate are honoured and periodic programs do not alias.
   * pprt_cpu_start fails with -EACCES where perf events are refused
   * (perf_event_paranoid 3 and above, a seccomp filter) and -ENOTSUP where
   * there are none (not Linux). */
  PPRT_TIMER_PERF = 3,
} pprt_timer_mode;

typedef enum pprt_unwinder {
  PPRT_UNWIND_DEFAULT = 0,   /* the build's default (PPRT_UNWINDER): cfi where
                                available, else fp */
  PPRT_UNWIND_FP = 1,        /* frame pointers: ~1 ns a frame */
  PPRT_UNWIND_LIBUNWIND = 2, /* libunwind; -ENOTSUP if not built in */
  PPRT_UNWIND_CFI = 3        /* DWARF call frame information compiled into
                                tables (Linux, FreeBSD; x86_64, aarch64):
                                correct stacks without frame pointers;
                                -ENOTSUP elsewhere */
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
 * automatically when the thread exits.
 *
 * Signal masks: a thread that blocks SIGPROF gets no samples, and thread
 * pools often block every signal. While a CPU profile runs, this call
 * unblocks SIGPROF on the calling thread if its mask blocks it, and
 * remembers that the program wants it blocked: a SIGPROF that is not
 * pprt's (kill, sigqueue, pthread_kill, the program's own timer) is then
 * held and reaches the program's handler only when the thread unblocks
 * SIGPROF. A linked program's own pthread_sigmask calls go straight to the
 * C library (only the preload library interposes them), so pprt learns of
 * a later change only when the thread calls pprt_thread_register again
 * (which looks at the mask anew, and lifts SIGPROF again if the thread
 * blocked it) or pprt_thread_unregister. A thread that unblocks SIGPROF
 * itself after registering should call pprt_thread_unregister first, or
 * SIGPROFs sent to it stay held. Set the mask, then register. */
PPRT_API int pprt_thread_register(void);

/* Undoes pprt_thread_register on the calling thread now. If registration
 * had unblocked SIGPROF, it is blocked again, and a held SIGPROF becomes
 * pending in the kernel, as if pprt had never been there. */
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

/* ---- execution traces ------------------------------------------------------------ */

/* A trace is a timeline of what the program's threads did: regions, logs,
 * counters, tasks, thread names, and CPU samples while the CPU profiler runs
 * too. Events go into per-thread buffers without locks and a writer thread
 * streams them out; the format is in docs/trace-format.md, and pprt's
 * decoder exports it as Chrome Trace Event JSON (ui.perfetto.dev,
 * chrome://tracing, speedscope).
 *
 * One trace session runs at a time: a streaming trace (pprt_trace_start) or
 * a flight recorder (pprt_flight_start). A forked child does not trace. */

/* Trace options. Zero-initialise, then set what you need; every zero field
 * means its default. */
typedef struct pprt_trace_options {
  /* sizeof(pprt_trace_options) as the caller was compiled with, or 0. */
  size_t size;
  /* Bytes of event buffers all threads together may hold before the writer
   * has taken them; past it, events are dropped and the count recorded in
   * the trace. 0: 64 MiB; at least 256 KiB. */
  size_t buffer_limit;
  /* A new generation (a self-contained stretch of the trace) starts at least
   * this often. 0: 1 s; at least 1 ms. */
  uint64_t generation_ns;
  /* 1: leave sample stacks as addresses (no function names in the trace). */
  int no_symbolize;
} pprt_trace_options;

/* Starts tracing into out: the 16-byte header at once, then generations as
 * the writer thread takes them. opts NULL means defaults. Errors: -EBUSY (a
 * trace or flight recorder runs), -EINVAL, -ENOMEM, -EAGAIN (no writer
 * thread), or the writer's error on the header. */
PPRT_API int pprt_trace_start(const pprt_trace_options *opts, pprt_writer out);

/* Stops tracing; returns once every event recorded before the call is
 * written, with the first error the writer returned, if any. Regions still
 * open stay open in the file (the exporter closes them at the end). -EPIPE
 * when no trace runs. */
PPRT_API int pprt_trace_stop(void);

/* Annotations. Each records one event on the calling thread while a trace
 * or flight recorder runs; otherwise it costs one load and a branch. They
 * return nothing: they cannot fail in a way the caller could act on, and an
 * event that cannot be recorded (buffers full, or the call interrupted a
 * pprt call on the same thread, as from a signal handler) is counted in the
 * trace as lost, never silently. Strings are copied (interned); at most 1024
 * bytes of each are kept, cut at a UTF-8 character boundary. NULL strings
 * are recorded as "". Safe to call from signal handlers. */

/* Opens a region (a span of time on this thread; regions nest). */
PPRT_API void pprt_region_begin(const char *name);
/* Closes the innermost open region of this thread. */
PPRT_API void pprt_region_end(void);
/* A timestamped message. */
PPRT_API void pprt_log(const char *category, const char *message);
/* The value of a named counter from now on. */
PPRT_API void pprt_counter(const char *name, int64_t value);
/* Begins a task: work that may end on another thread. Returns its id, or 0
 * when no trace runs (pprt_task_end(0) does nothing). */
PPRT_API uint64_t pprt_task_begin(const char *name);
PPRT_API void pprt_task_end(uint64_t id);

/* Names the calling thread in traces, including traces started later (the
 * name is kept with the thread). Otherwise a thread is shown with the OS's
 * name for it. Errors: -ENOMEM. */
PPRT_API int pprt_thread_name(const char *name);

/* Flight recorder options. */
typedef struct pprt_flight_options {
  size_t size;         /* sizeof(pprt_flight_options), or 0 */
  size_t max_bytes;    /* keep at most about this much trace; 0: 10 MiB */
  uint64_t max_age_ns; /* and nothing older than this; 0: 10 s */
  size_t buffer_limit; /* as in pprt_trace_options */
  int no_symbolize;    /* as in pprt_trace_options */
} pprt_flight_options;

/* Starts a flight recorder: the trace is recorded as for pprt_trace_start
 * but kept in memory, in generations cut every max_age/4 or max_bytes/4,
 * and only the most recent generations within both budgets are kept (the
 * latest complete one always). Errors as pprt_trace_start. */
PPRT_API int pprt_flight_start(const pprt_flight_options *opts);

/* Writes a snapshot: ends the current generation, then writes a complete
 * trace file (header and the generations kept) to out, from the calling
 * thread. It decodes on its own. The recorder keeps running; a slow writer
 * holds up neither it nor pprt_flight_stop. -EPIPE when no flight recorder
 * runs; the writer's error. */
PPRT_API int pprt_flight_write(pprt_writer out);

/* Stops the flight recorder and frees what it kept. -EPIPE when none runs. */
PPRT_API int pprt_flight_stop(void);

/* ---- the HTTP endpoint ------------------------------------------------------------ */

/* A net/http/pprof-compatible endpoint, so that go tool pprof, Parca and
 * Grafana Alloy (pyroscope.scrape) can pull profiles from a running
 * program: /debug/pprof/ (an index), profile?seconds=N (CPU), heap,
 * allocs (with ?seconds=N: the difference over N seconds), trace?seconds=N
 * (pprt's trace format; &format=json: Chrome Trace Event JSON), symbol and
 * cmdline. Served by GNU libmicrohttpd from pprt's own threads, which are
 * neither profiled nor sampled as the program's. The endpoint is in
 * libpprt_http (CMake pprt::http, pkg-config pprt-http), the runtime and
 * the endpoint in one library that a program links instead of libpprt,
 * built where libmicrohttpd was found (CMake option PPRT_HTTP). In libpprt
 * pprt_http_start returns -ENOTSUP. One endpoint runs at a time. */

/* Endpoint options. Zero-initialise, then set what you need; every zero
 * field means its default. */
typedef struct pprt_http_options {
  size_t size;       /* sizeof(pprt_http_options), or 0 */
  const char *addr;  /* a numeric IPv4 or IPv6 address; NULL: "127.0.0.1" */
  int port;          /* 0: any free port (see bound_port) */
  int allow_remote;  /* 1: an address other than loopback is allowed; without
                        it such an address fails with -EACCES */
  int max_connections; /* open connections at most; 0: 1024 */
  int timeout_seconds; /* an idle connection is closed after this; 0: 60 */
  int per_ip_limit;    /* connections from one address at most; 0: 64 when
                          allow_remote, else max_connections */
  int *bound_port;     /* if not NULL, receives the port listened on */
} pprt_http_options;

/* Starts serving. Returns once the socket listens. Errors: -ENOTSUP
 * (libpprt, without the endpoint), -EBUSY (already serving), -EINVAL (a bad option
 * or address), -EACCES (a remote address without allow_remote),
 * -EADDRINUSE, -ENOMEM, -EAGAIN (no thread could be started). */
PPRT_API int pprt_http_start(const pprt_http_options *opts);

/* Stops serving: requests that wait for a profile are answered at once
 * (503), connections are closed, the threads joined. -EPIPE when no
 * endpoint runs. */
PPRT_API int pprt_http_stop(void);

#ifdef __cplusplus
}
#endif

#endif /* PPRT_H */
