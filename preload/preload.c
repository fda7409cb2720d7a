/* libpprt_preload: profile and trace an unmodified program.
 *
 *   LD_PRELOAD=libpprt_preload.so PPRT_CPUPROFILE=cpu.pb.gz ./program
 *   LD_PRELOAD=libpprt_preload.so PPRT_TRACE=trace.pprt ./program
 *   (macOS: DYLD_INSERT_LIBRARIES=libpprt_preload.dylib)
 *
 * A constructor reads the PPRT_* variables and starts the profilers and the
 * tracer; a destructor stops them at exit and writes what they recorded.
 * Every thread the program creates registers itself first (the per-OS hook
 * in hook_*.c), so it has an alternate signal stack and its per-thread
 * timer from its first instruction, and its start is in the trace. While a
 * CPU profile runs, SIGPROF is kept deliverable on threads whose program
 * blocks it (sigmask_*.c and core/sigmask.c): a new thread starts with the
 * mask its creator's program mask gives it, less SIGPROF. Anything
 * unusable (a bad value, an unwritable path, a setuid program) is one line
 * on stderr and the program runs on without it.
 *
 * Variables:
 *   PPRT_CPUPROFILE=path        where the CPU profile goes; unset: no CPU profile
 *   PPRT_CPUPROFILE_HZ=n        samples per CPU-second asked (1-10000; default 100)
 *   PPRT_CPUPROFILE_TIMER=mode  auto (default), perf, per-thread or process
 *   PPRT_UNWINDER=name          cfi, fp or libunwind; default: the build's
 *                               (cfi on Linux and FreeBSD x86_64/aarch64)
 *   PPRT_SYMBOLIZE=0            leave function names to go tool pprof (and,
 *                               in a trace, sample stacks as addresses)
 *   PPRT_HEAPPROFILE=path       where the heap profile goes, written at exit
 *   PPRT_HEAP_RATE=bytes        mean bytes between allocation samples
 *                               (default 524288; 1 = every allocation)
 *   PPRT_TRACE=path             an execution trace from load to exit; with
 *                               PPRT_CPUPROFILE too, the CPU samples are in it
 * A process started from a profiled one (fork + exec with the same
 * environment) writes to path.<pid>, so it never overwrites the first
 * process's files, as gperftools does.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cpu.h"
#include "core/heap.h"
#include "core/sigmask.h"
#include "core/sigprof.h"
#include "core/thread.h"
#include "core/trace.h"
#include "preload/preload.h"
#include "pprt.h"

static atomic_int profiling; /* threads should register with the CPU profiler */
static atomic_int tracing;   /* threads should record their start */
static int cpu_fd = -1, heap_fd = -1, trace_fd = -1;
static char cpu_path[PATH_MAX], heap_path[PATH_MAX], trace_path[PATH_MAX];

/* Parses a whole decimal number in [lo, hi]; 0 on success. */
static int parse_int(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end != '\0' || v < lo || v > hi)
    return -1;
  *out = v;
  return 0;
}

/* Opens an output named by variable `var` (value `path`): a process that
 * inherited the variables from a profiled parent gets its own file. Returns
 * the descriptor, or -1 after saying why on stderr, ending with "not
 * <doing>". */
static int open_output(const char *var, const char *path, char *out, size_t outlen,
                       const char *doing) {
  char me[32];
  snprintf(me, sizeof me, "%ld", (long)getpid());
  const char *owner = getenv("PPRT_OWNER_PID");
  int n = owner && strcmp(owner, me) != 0 ? snprintf(out, outlen, "%s.%s", path, me)
                                           : snprintf(out, outlen, "%s", path);
  if (n < 0 || (size_t)n >= outlen) {
    fprintf(stderr, "pprt: %s path too long; not %s\n", var, doing);
    return -1;
  }
  int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    fprintf(stderr, "pprt: cannot open %s=%s: %s; not %s\n", var, out, strerror(errno), doing);
  return fd;
}

/* PPRT_SYMBOLIZE: 1 (the default) or 0; -1 after saying why on stderr. */
static int symbolize_setting(const char *doing) {
  const char *v = getenv("PPRT_SYMBOLIZE");
  if (!v || !*v || strcmp(v, "1") == 0)
    return 1;
  if (strcmp(v, "0") == 0)
    return 0;
  fprintf(stderr, "pprt: PPRT_SYMBOLIZE=%s is not 0 or 1; not %s\n", v, doing);
  return -1;
}

static void start_cpu(const char *path) {
  pprt_cpu_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  const char *v = getenv("PPRT_CPUPROFILE_HZ");
  long hz = 0;
  if (v && *v && parse_int(v, 1, 10000, &hz) != 0) {
    fprintf(stderr, "pprt: PPRT_CPUPROFILE_HZ=%s is not a rate in Hz (1-10000); not profiling\n",
            v);
    return;
  }
  o.hz = (int)hz;
  v = getenv("PPRT_CPUPROFILE_TIMER");
  if (v && *v) {
    if (strcmp(v, "auto") == 0)
      o.timer = PPRT_TIMER_AUTO;
    else if (strcmp(v, "per-thread") == 0)
      o.timer = PPRT_TIMER_PER_THREAD;
    else if (strcmp(v, "process") == 0)
      o.timer = PPRT_TIMER_PROCESS;
    else if (strcmp(v, "perf") == 0)
      o.timer = PPRT_TIMER_PERF;
    else {
      fprintf(stderr,
              "pprt: PPRT_CPUPROFILE_TIMER=%s is not auto, perf, per-thread or process; not "
              "profiling\n",
              v);
      return;
    }
  }
  v = getenv("PPRT_UNWINDER");
  if (v && *v) {
    if (strcmp(v, "cfi") == 0)
      o.unwinder = PPRT_UNWIND_CFI;
    else if (strcmp(v, "fp") == 0)
      o.unwinder = PPRT_UNWIND_FP;
    else if (strcmp(v, "libunwind") == 0)
      o.unwinder = PPRT_UNWIND_LIBUNWIND;
    else {
      fprintf(stderr, "pprt: PPRT_UNWINDER=%s is not cfi, fp or libunwind; not profiling\n", v);
      return;
    }
  }
  int sym = symbolize_setting("profiling");
  if (sym < 0)
    return;
  o.no_symbolize = !sym;
  cpu_fd = open_output("PPRT_CPUPROFILE", path, cpu_path, sizeof cpu_path, "profiling");
  if (cpu_fd < 0)
    return;
  atomic_store(&profiling, 1);
  pprt__cpu_threads_hooked(); /* the pthread_create hook registers every thread */
  int rc = pprt_cpu_start(&o, pprt_writer_fd(cpu_fd));
  if (rc != 0) {
    atomic_store(&profiling, 0);
    fprintf(stderr, "pprt: cannot start the CPU profiler: %s; not profiling\n",
            pprt_strerror(rc));
    close(cpu_fd);
    cpu_fd = -1;
  }
}

static void start_heap(const char *path) {
  const char *v = getenv("PPRT_HEAP_RATE");
  long rate = (long)PPRT__HEAP_DEFAULT_RATE;
  if (v && *v && parse_int(v, 1, LONG_MAX, &rate) != 0) {
    fprintf(stderr,
            "pprt: PPRT_HEAP_RATE=%s is not a number of bytes (1 or more); not profiling\n", v);
    return;
  }
  heap_fd = open_output("PPRT_HEAPPROFILE", path, heap_path, sizeof heap_path, "profiling");
  if (heap_fd >= 0)
    pprt_heap_set_rate((size_t)rate);
}

static void start_trace(const char *path) {
  pprt_trace_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  int sym = symbolize_setting("tracing");
  if (sym < 0)
    return;
  o.no_symbolize = !sym;
  trace_fd = open_output("PPRT_TRACE", path, trace_path, sizeof trace_path, "tracing");
  if (trace_fd < 0)
    return;
  atomic_store(&tracing, 1);
  int rc = pprt_trace_start(&o, pprt_writer_fd(trace_fd));
  if (rc != 0) {
    atomic_store(&tracing, 0);
    fprintf(stderr, "pprt: cannot start tracing: %s; not tracing\n", pprt_strerror(rc));
    close(trace_fd);
    trace_fd = -1;
  }
}

/* A process forked from this one (heap_owner != getpid()) has a copy of the
 * sampler's records but not the parent's file to write them to. */
static pid_t heap_owner;

__attribute__((constructor)) static void preload_start(void) {
  /* Also for a profile the program starts through the API. */
  pprt__sigmask_init();
  pprt__sigprof_init();
  const char *cpu = getenv("PPRT_CPUPROFILE"), *heap = getenv("PPRT_HEAPPROFILE");
  const char *trace = getenv("PPRT_TRACE");
  if ((!cpu || !*cpu) && (!heap || !*heap) && (!trace || !*trace))
    return;
  /* A setuid program must not write where its caller's environment says. */
  if (getuid() != geteuid() || getgid() != getegid()) {
    fprintf(stderr, "pprt: not profiling a setuid or setgid program\n");
    return;
  }
  if (heap && *heap) {
    start_heap(heap);
    heap_owner = getpid();
  }
  /* The trace before the CPU profiler, so that it holds the CPU samples
   * from the start. */
  if (trace && *trace)
    start_trace(trace);
  if (cpu && *cpu)
    start_cpu(cpu);
  /* Children that exec with these variables write path.<pid>. */
  if (!getenv("PPRT_OWNER_PID")) {
    char me[32];
    snprintf(me, sizeof me, "%ld", (long)getpid());
    setenv("PPRT_OWNER_PID", me, 1);
  }
}

__attribute__((destructor)) static void preload_stop(void) {
  /* The CPU profiler before the trace: its reader hands its last samples to
   * the trace. */
  if (cpu_fd >= 0) {
    atomic_store(&profiling, 0);
    int rc = pprt_cpu_stop();
    /* -EPIPE: a forked child, whose session was dropped: not its profile. */
    if (rc != 0 && rc != -EPIPE)
      fprintf(stderr, "pprt: writing %s failed: %s\n", cpu_path, pprt_strerror(rc));
    close(cpu_fd);
    cpu_fd = -1;
  }
  if (trace_fd >= 0) {
    atomic_store(&tracing, 0);
    int rc = pprt_trace_stop();
    if (rc != 0 && rc != -EPIPE) /* -EPIPE: a forked child, as above */
      fprintf(stderr, "pprt: writing %s failed: %s\n", trace_path, pprt_strerror(rc));
    close(trace_fd);
    trace_fd = -1;
  }
  if (heap_fd >= 0) {
    if (heap_owner == getpid()) {
      int rc = pprt_heap_write(pprt_writer_fd(heap_fd));
      if (rc != 0)
        fprintf(stderr, "pprt: writing %s failed: %s\n", heap_path, pprt_strerror(rc));
    }
    close(heap_fd);
    heap_fd = -1;
  }
}

/* ---- threads -------------------------------------------------------------------- */

struct start {
  void *(*fn)(void *);
  void *arg;
};

static void *registered_start(void *p) {
  struct start st = *(struct start *)p;
  free(p);
  /* Registration also unblocks SIGPROF if the inherited mask blocks it.
   * The profile may also be one the program started through the API. */
  if (atomic_load(&profiling) || pprt__cpu_running())
    pprt_thread_register();
  /* Its end is recorded by the trace's own thread-exit handler. */
  if (atomic_load(&tracing))
    pprt__trace_thread_start();
  return st.fn(st.arg);
}

static int create(pprt__pthread_create_fn real_create, pthread_t *thread,
                  const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
  if ((!atomic_load(&profiling) && !atomic_load(&tracing) && !pprt__cpu_running()) ||
      pprt__thread_self()->creating_internal)
    return real_create(thread, attr, fn, arg);
  struct start *st = malloc(sizeof *st);
  if (st == NULL)
    return real_create(thread, attr, fn, arg); /* unregistered, still profiled */
  st->fn = fn;
  st->arg = arg;
  int rc = real_create(thread, attr, registered_start, st);
  if (rc != 0)
    free(st);
  return rc;
}

/* The new thread inherits the kernel's mask of its creator: where pprt keeps
 * SIGPROF unblocked against the creator program's wish, it is blocked for
 * the creation, so the new thread starts with the mask the program expects
 * (its registration then lifts SIGPROF again while a profile runs). */
int pprt__preload_create(pprt__pthread_create_fn real_create, pthread_t *thread,
                         const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
  int blocked = pprt__sigmask_block_wished(0);
  int rc = create(real_create, thread, attr, fn, arg);
  pprt__sigmask_unblock_lifted(blocked);
  return rc;
}
