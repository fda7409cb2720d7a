/* libpprt_preload: profile and trace an unmodified program.
 *
 *   LD_PRELOAD=libpprt_preload.so PPRT_CPUPROFILE=cpu.pb.gz ./program
 *   LD_PRELOAD=libpprt_preload.so PPRT_TRACE=trace.pprt ./program
 *   (macOS: DYLD_INSERT_LIBRARIES=libpprt_preload.dylib)
 *
 * A constructor reads the PPRT_* variables and starts the profilers and the
 * tracer; a destructor stops them at exit and writes what they recorded.
 * Every thread the program creates registers itself first (the per-OS
 * pthread_create hook, pthread_create_*.c), so it has an alternate signal
 * stack and its per-thread timer from its first instruction, and its start
 * is in the trace. While a CPU profile runs, SIGPROF is kept deliverable on
 * threads whose program blocks it (sigmask_*.c and core/sigmask.c): a new
 * thread starts with the mask its creator's program mask gives it, less
 * SIGPROF. Anything unusable (a bad value, an unwritable path, a setuid
 * program) is one line on stderr and the program runs on without it.
 *
 * Variables:
 *   PPRT_CPUPROFILE=path        where the CPU profile goes; unset: no CPU profile
 *   PPRT_CPUPROFILE_HZ=n        samples per CPU-second asked (1-10000; default 100)
 *   PPRT_CPUPROFILE_TIMER=mode  auto (default), perf, per-thread or process
 *   PPRT_UNWINDER=name          cfi, fp or libunwind; default: the build's
 *                               (cfi on Linux and FreeBSD x86_64/aarch64)
 *   PPRT_SYMBOLIZE=mode         lines (default on Linux and FreeBSD: names, file:line,
 *                               inline frames), names, or none (addresses
 *                               only, for go tool pprof or a server to
 *                               symbolize); 1 and 0 mean lines and none
 *                               (processes the program starts: names,
 *                               unless it is set; see descendant_names)
 *   PPRT_DEBUG_DIRS=dir:dir     where to look for separate debug files
 *                               (.build-id trees) before /usr/lib/debug
 *   PPRT_HEAPPROFILE=path       where the heap profile goes, written at exit
 *                               (without samples in an ASan or TSan build,
 *                               whose runtime owns malloc: CMakeLists.txt)
 *   PPRT_HEAP_RATE=bytes        mean bytes between allocation samples
 *                               (default 524288; 1 = every allocation)
 *   PPRT_TRACE=path             an execution trace from load to exit; with
 *                               PPRT_CPUPROFILE too, the CPU samples are in it
 *   PPRT_CHECKPOINT=seconds     rewrite the CPU and heap profiles so far at
 *                               this interval (default 0: only at the end),
 *                               each time into path.tmp renamed over path, so
 *                               path always holds a complete profile
 *   PPRT_FLUSH_TIMEOUT=seconds  how long a signal or _exit waits for the
 *                               outputs to be written (default 5; exits.c)
 * Termination signals, crashes and _exit write the outputs too (exits.c).
 *   PPRT_HTTP=addr:port         serve /debug/pprof/ (pprt_http_start) on a
 *                               numeric address ("[::1]:6060" for IPv6; port
 *                               0: any free one; the address and port are
 *                               printed on stderr); the allocation sampler
 *                               runs (PPRT_HEAP_RATE or its default) so that
 *                               heap and allocs have data
 *   PPRT_HTTP_ALLOW_REMOTE=1    allow an address other than loopback
 * A process started from a profiled one (fork + exec with the same
 * environment) writes to path.<pid>, so it never overwrites the first
 * process's files, as gperftools does; an image exec'd later by that same
 * pid writes to path.<pid>.1 (.2, ...) when the earlier one left a file.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/atfork.h"
#include "core/cpu.h"
#include "core/heap.h"
#include "core/parse.h"
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
static int checkpoint_ms;     /* PPRT_CHECKPOINT; 0: none */
static atomic_int stop_state; /* 0 running, 1 writing, 2 written */
/* Guards heap_fd and the heap profile's writes (checkpoints, the last). */
static pthread_mutex_t heap_lock = PTHREAD_MUTEX_INITIALIZER;

/* In a forked child: a writer of the parent's (its last write, a
 * checkpoint of pprt's thread) is not in the child, and its lock is free. */
static void stop_forked(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  heap_lock = fresh;
  atomic_store(&stop_state, 0);
}

/* Creates a file whose name pprt made up (path.<pid>, path.tmp), which
 * anyone who can write the directory can predict: new (O_EXCL), never
 * through a symbolic link (O_NOFOLLOW), so a link or file planted there is
 * not followed or truncated. A regular file of ours already there is
 * replaced (a checkpoint cut short, a file left empty), unless keep_full
 * and it holds something: then -1 with EBUSY. Anything else that has the
 * name: -1 with EEXIST. */
static int create_new(const char *path, int keep_full) {
  int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = open(path, flags, 0644);
  if (fd >= 0 || errno != EEXIST)
    return fd;
  struct stat st;
  if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    errno = EEXIST;
    return -1;
  }
  if (keep_full && st.st_size > 0) {
    errno = EBUSY;
    return -1;
  }
  if (unlink(path) != 0) {
    errno = EEXIST;
    return -1;
  }
  return open(path, flags, 0644);
}

/* Opens path.<pid> (in out) for a process started from a profiled one,
 * made new (create_new). A process that execs keeps its pid: the image
 * before the exec may have written there already (its trace up to the
 * exec, a checkpoint), so a later image takes path.<pid>.1, .2, ...
 * instead of overwriting it; a file left empty (an image that wrote
 * nothing) is taken over. -1 with errno. */
static int open_own(char *out, size_t outlen) {
  size_t base = strlen(out);
  for (int n = 0; n < 100; n++) {
    if (n > 0 && snprintf(out + base, outlen - base, ".%d", n) >= (int)(outlen - base)) {
      errno = ENAMETOOLONG;
      return -1;
    }
    int fd = create_new(out, 1);
    if (fd >= 0 || errno != EBUSY)
      return fd;
  }
  errno = EEXIST;
  return -1;
}

/* Opens an output named by variable `var` (value `path`): a process that
 * inherited the variables from a profiled parent gets its own file, made
 * new (open_own). The path itself is opened as named: the user may mean
 * a link or a device (/dev/stdout). Returns the descriptor, or -1 after
 * saying why on stderr, ending with "not <doing>". */
static int open_output(const char *var, const char *path, char *out, size_t outlen,
                       const char *doing) {
  char me[32];
  snprintf(me, sizeof me, "%ld", (long)getpid());
  const char *owner = getenv("PPRT_OWNER_PID");
  int derived = owner && strcmp(owner, me) != 0;
  int n = derived ? snprintf(out, outlen, "%s.%s", path, me) : snprintf(out, outlen, "%s", path);
  if (n < 0 || (size_t)n >= outlen) {
    fprintf(stderr, "pprt: %s path too long; not %s\n", var, doing);
    return -1;
  }
  int fd = derived ? open_own(out, outlen)
                   : open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 && derived && errno == EEXIST)
    fprintf(stderr,
            "pprt: cannot open %s=%s: it exists and is not a file of ours (pprt makes this name "
            "new, never through a link); not %s\n",
            var, out, doing);
  else if (fd < 0)
    fprintf(stderr, "pprt: cannot open %s=%s: %s; not %s\n", var, out, strerror(errno), doing);
  return fd;
}

/* ---- atomic rewrites (PPRT_CHECKPOINT) ---------------------------------------------- */

/* A file rewritten whole: written to path.tmp, then renamed over path, so
 * that path always holds the last complete version. */
typedef struct rewrite {
  const char *path;
  const int *opened; /* path as opened at start: for a path.tmp that cannot be */
  int regular;       /* path is a regular file, not a link, device or FIFO */
  char tmp[PATH_MAX + 8];
  int fd; /* path.tmp while one is being written, else -1 */
} rewrite;

static rewrite cpu_rewrite = {cpu_path, &cpu_fd, 0, "", -1},
               heap_rewrite = {heap_path, &heap_fd, 0, "", -1};

/* Only a regular file is replaced by a rename: /dev/stdout, a FIFO or a
 * symbolic link must stay what they are, and get the profile written into
 * them once, at the end. */
static void rewrite_check(rewrite *r) {
  struct stat st;
  r->regular = lstat(r->path, &st) == 0 && S_ISREG(st.st_mode);
}

static int rewrite_begin(void *ctx, pprt_writer *out);

/* Opens path.tmp on the first write: the CPU profile's final writer. Where
 * path.tmp cannot be created (path is /dev/stdout, or its directory is not
 * writable), the profile goes to path as opened at start. */
static int rewrite_write(void *ctx, const void *data, size_t len) {
  rewrite *r = ctx;
  pprt_writer unused;
  int fd = r->fd >= 0 || rewrite_begin(r, &unused) == 0 ? r->fd : *r->opened;
  pprt_writer w = pprt_writer_fd(fd);
  return w.write(w.ctx, data, len);
}

static int rewrite_begin(void *ctx, pprt_writer *out) {
  rewrite *r = ctx;
  if (!r->regular)
    return -1;
  snprintf(r->tmp, sizeof r->tmp, "%s.tmp", r->path);
  r->fd = create_new(r->tmp, 0);
  if (r->fd < 0)
    return -1;
  *out = (pprt_writer){rewrite_write, r};
  return 0;
}

static void rewrite_end(void *ctx, int rc) {
  rewrite *r = ctx;
  if (r->fd < 0)
    return;
  close(r->fd);
  r->fd = -1;
  if (rc != 0 || rename(r->tmp, r->path) != 0)
    unlink(r->tmp);
}

/* PPRT_CHECKPOINT in ms: seconds, 0 (none) or 0.05 to 86400. */
static int checkpoint_setting(void) {
  const char *v = getenv("PPRT_CHECKPOINT");
  if (!v || !*v)
    return 0;
  char *end;
  errno = 0;
  double s = strtod(v, &end);
  if (errno || end == v || *end != '\0' || !(s == 0 || (s >= 0.05 && s <= 86400))) {
    fprintf(stderr,
            "pprt: PPRT_CHECKPOINT=%s is not a number of seconds (0, or 0.05-86400); no "
            "checkpoints\n",
            v);
    return 0;
  }
  return (int)(s * 1000);
}

/* PPRT_SYMBOLIZE: lines, names or none (1 and 0 as before: the default and
 * none). Returns 1 to symbolize, 0 for none; -1 after saying why on stderr.
 * The library reads the mode itself at each write (core/symbolize.c). */
static int symbolize_setting(const char *doing) {
  const char *v = getenv("PPRT_SYMBOLIZE");
  if (!v || !*v || strcmp(v, "1") == 0 || strcmp(v, "lines") == 0 || strcmp(v, "names") == 0)
    return 1;
  if (strcmp(v, "0") == 0 || strcmp(v, "none") == 0)
    return 0;
  fprintf(stderr, "pprt: PPRT_SYMBOLIZE=%s is not lines, names or none; not %s\n", v, doing);
  return -1;
}

static void start_cpu(const char *path) {
  pprt_cpu_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  const char *v = getenv("PPRT_CPUPROFILE_HZ");
  long long hz = 0;
  if (v && *v && pprt__parse_int(v, 1, 10000, &hz) != 0) {
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
  pprt_writer out = pprt_writer_fd(cpu_fd);
  rewrite_check(&cpu_rewrite);
  if (checkpoint_ms > 0 && cpu_rewrite.regular) {
    /* The file opened above is replaced by the first checkpoint: the last
     * profile goes the same way. */
    pprt__cpu_checkpoint c = {(uint64_t)checkpoint_ms * 1000000u, rewrite_begin, rewrite_end,
                              &cpu_rewrite};
    pprt__cpu_set_checkpoint(&c);
    out = (pprt_writer){rewrite_write, &cpu_rewrite};
  }
  int rc = pprt_cpu_start(&o, out);
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
  long long rate = (long long)PPRT__HEAP_DEFAULT_RATE;
  if (v && *v && pprt__parse_int(v, 1, LONG_MAX, &rate) != 0) {
    fprintf(stderr,
            "pprt: PPRT_HEAP_RATE=%s is not a number of bytes (1 or more); not profiling\n", v);
    return;
  }
  heap_fd = open_output("PPRT_HEAPPROFILE", path, heap_path, sizeof heap_path, "profiling");
  if (heap_fd >= 0) {
    rewrite_check(&heap_rewrite);
    pprt_heap_set_rate((size_t)rate);
  }
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
    return;
  }
  /* The main thread's start, with the OS's name for it (the program's, as
   * exec set it): an exporter names the process after it, even when the
   * main thread records nothing else. */
  pprt__trace_thread_start();
}

/* Parses PPRT_HTTP's "addr:port" or "[v6addr]:port" into host (NUL-ended)
 * and port; 0 on success. */
static int parse_http(const char *v, char *host, size_t hostlen, long long *port) {
  const char *colon = strrchr(v, ':');
  if (colon == NULL)
    return -1;
  const char *h = v;
  size_t n = (size_t)(colon - v);
  if (n >= 2 && v[0] == '[' && v[n - 1] == ']') {
    h++;
    n -= 2;
  }
  if (n == 0 || n >= hostlen)
    return -1;
  memcpy(host, h, n);
  host[n] = '\0';
  return pprt__parse_int(colon + 1, 0, 65535, port);
}

static int http_on;

static void start_http(const char *v) {
  char host[64];
  long long port;
  if (parse_http(v, host, sizeof host, &port) != 0) {
    fprintf(stderr, "pprt: PPRT_HTTP=%s is not ADDRESS:PORT (e.g. 127.0.0.1:6060); not serving\n",
            v);
    return;
  }
  const char *remote = getenv("PPRT_HTTP_ALLOW_REMOTE");
  if (remote && *remote && strcmp(remote, "0") != 0 && strcmp(remote, "1") != 0) {
    fprintf(stderr, "pprt: PPRT_HTTP_ALLOW_REMOTE=%s is not 0 or 1; not serving\n", remote);
    return;
  }
  const char *rv = getenv("PPRT_HEAP_RATE");
  long long rate = (long long)PPRT__HEAP_DEFAULT_RATE;
  if (rv && *rv && pprt__parse_int(rv, 1, LONG_MAX, &rate) != 0) {
    fprintf(stderr, "pprt: PPRT_HEAP_RATE=%s is not a number of bytes (1 or more); not serving\n",
            rv);
    return;
  }
  pprt_http_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.addr = host;
  o.port = (int)port;
  o.allow_remote = remote && strcmp(remote, "1") == 0;
  int bound = 0;
  o.bound_port = &bound;
  /* The pthread_create hook registers every thread the program starts
   * while a profile the endpoint takes runs. */
  pprt__cpu_threads_hooked();
  int rc = pprt_http_start(&o);
  if (rc == -EACCES) {
    fprintf(stderr,
            "pprt: PPRT_HTTP=%s is not a loopback address; set PPRT_HTTP_ALLOW_REMOTE=1 to serve "
            "profiles to other hosts; not serving\n",
            v);
    return;
  }
  if (rc == -EINVAL) {
    fprintf(stderr, "pprt: PPRT_HTTP=%s: %s is not a numeric IPv4 or IPv6 address; not serving\n",
            v, host);
    return;
  }
  if (rc == -ENOTSUP) {
    fprintf(stderr, "pprt: PPRT_HTTP=%s: this pprt was built without libmicrohttpd; not serving\n",
            v);
    return;
  }
  if (rc != 0) {
    fprintf(stderr, "pprt: cannot serve PPRT_HTTP=%s: %s; not serving\n", v, pprt_strerror(rc));
    return;
  }
  http_on = 1;
  if (pprt_heap_rate() == 0)
    pprt_heap_set_rate((size_t)rate);
  int v6 = strchr(host, ':') != NULL;
  fprintf(stderr, "pprt: serving http://%s%s%s:%d/debug/pprof/\n", v6 ? "[" : "", host,
          v6 ? "]" : "", bound);
}

/* A process forked from this one (heap_owner != getpid()) has a copy of the
 * sampler's records but not the parent's file to write them to. */
static pid_t heap_owner;

/* A process the profiled program started (a build's cc1, as and ld, a
 * shell's commands) writes function names only, unless PPRT_SYMBOLIZE says
 * otherwise: reading DWARF line tables at its exit costs each such process
 * 0.2-0.8 s of CPU, which about doubled the CPU time of `pprt record --
 * make -j2`. The first process that loads pprt marks itself in
 * PPRT_ROOT_PID (an exec keeps its pid, so it stays the root). */
static void descendant_names(void) {
  char me[32];
  snprintf(me, sizeof me, "%ld", (long)getpid());
  const char *root = getenv("PPRT_ROOT_PID");
  if (root == NULL || !*root) {
    setenv("PPRT_ROOT_PID", me, 1);
    return;
  }
  const char *mode = getenv("PPRT_SYMBOLIZE");
  if (strcmp(root, me) != 0 && (mode == NULL || !*mode))
    pprt_set_symbolize(PPRT_SYMBOLIZE_NAMES);
}

__attribute__((constructor)) static void preload_start(void) {
  /* Also for a profile the program starts through the API. */
  pprt__sigmask_init();
  pprt__sigprof_init();
  const char *cpu = getenv("PPRT_CPUPROFILE"), *heap = getenv("PPRT_HEAPPROFILE");
  const char *trace = getenv("PPRT_TRACE"), *http = getenv("PPRT_HTTP");
  if ((!cpu || !*cpu) && (!heap || !*heap) && (!trace || !*trace) && (!http || !*http))
    return;
  checkpoint_ms = checkpoint_setting();
  descendant_names();
  static const pprt__fork_hooks fork_hooks = {NULL, NULL, stop_forked};
  pprt__fork_register(PPRT__FORK_PRELOAD, &fork_hooks);
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
  if (cpu_fd >= 0 || heap_fd >= 0 || trace_fd >= 0)
    pprt__exits_start(heap_fd >= 0 ? checkpoint_ms : 0);
  /* Only the process that was started with it: a child's port would clash.
   * Under `pprt record`, which owns the paths itself, that is its child. */
  const char *owner = getenv("PPRT_OWNER_PID");
  if (http && *http && (!owner || atol(owner) == (long)getppid()))
    start_http(http);
  /* Children that exec with these variables write path.<pid>. */
  if (!getenv("PPRT_OWNER_PID")) {
    char me[32];
    snprintf(me, sizeof me, "%ld", (long)getpid());
    setenv("PPRT_OWNER_PID", me, 1);
  }
}

void pprt__preload_heap_checkpoint(void) {
  pthread_mutex_lock(&heap_lock);
  pprt_writer out;
  if (heap_fd >= 0 && heap_owner == getpid() && rewrite_begin(&heap_rewrite, &out) == 0)
    rewrite_end(&heap_rewrite, pprt_heap_write(out));
  pthread_mutex_unlock(&heap_lock);
}

void pprt__preload_stop(void) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&stop_state, &expected, 1)) {
    /* Another thread writes (the flusher at a signal, or exit()). */
    while (atomic_load(&stop_state) != 2) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    return;
  }
  /* First: a profile the endpoint is taking is one the CPU profiler must
   * stop. */
  if (http_on) {
    http_on = 0;
    pprt_http_stop();
  }
  /* The CPU profiler before the trace: its reader hands its last samples to
   * the trace. */
  if (cpu_fd >= 0) {
    atomic_store(&profiling, 0);
    int rc = pprt_cpu_stop();
    if (checkpoint_ms > 0 && rc != -EPIPE) /* -EPIPE: as below; path.tmp is not its own */
      rewrite_end(&cpu_rewrite, rc);
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
  pthread_mutex_lock(&heap_lock);
  if (heap_fd >= 0) {
    if (heap_owner == getpid()) {
      pprt_writer out = pprt_writer_fd(heap_fd);
      if (checkpoint_ms > 0 && rewrite_begin(&heap_rewrite, &out) != 0)
        out = pprt_writer_fd(heap_fd); /* as rewrite_write does */
      int rc = pprt_heap_write(out);
      if (checkpoint_ms > 0)
        rewrite_end(&heap_rewrite, rc);
      if (rc != 0)
        fprintf(stderr, "pprt: writing %s failed: %s\n", heap_path, pprt_strerror(rc));
    }
    close(heap_fd);
    heap_fd = -1;
  }
  pthread_mutex_unlock(&heap_lock);
  atomic_store(&stop_state, 2);
}

__attribute__((destructor)) static void preload_stop(void) {
  pprt__preload_stop();
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

/* A thread pprt starts for itself, or that a library pprt calls starts
 * for it (libmicrohttpd's, for the HTTP endpoint): not registered, and
 * its allocations are pprt's from its first one, not the program's. */
static void *internal_start(void *p) {
  pprt__heap_ignore_thread();
  struct start st = *(struct start *)p;
  free(p);
  return st.fn(st.arg);
}

static int create(pprt__pthread_create_fn real_create, pthread_t *thread,
                  const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
  if (pprt__thread_self()->creating_internal) {
    struct start *st = malloc(sizeof *st);
    if (st == NULL)
      return real_create(thread, attr, fn, arg);
    st->fn = fn;
    st->arg = arg;
    int rc = real_create(thread, attr, internal_start, st);
    if (rc != 0)
      free(st);
    return rc;
  }
  if (!atomic_load(&profiling) && !atomic_load(&tracing) && !pprt__cpu_running())
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
