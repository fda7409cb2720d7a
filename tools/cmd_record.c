/* `pprt record`: runs a program under the preload library and summarises
 * what it wrote.
 *
 * The program runs as pprt's child with libpprt_preload in LD_PRELOAD
 * (DYLD_INSERT_LIBRARIES on macOS) and the PPRT_* variables pointing into
 * the output directory; the preload library does the profiling and writes
 * the files when the program exits. pprt itself only waits: it shows a live
 * status line on a terminal (elapsed time and the child's CPU time; the
 * number of samples is known only once the profile is written), then a
 * summary read from the files, and exits as the program did: its exit
 * status, or the same fatal signal re-raised.
 *
 * Divisions: options, finding the preload library, the output directory,
 * the environment, running and waiting, the summary, exiting. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/cli.h"
#include "tools/cmd_record_tree.h"
#include "tools/trace_backend.h"

extern char **environ;

static const char usage[] =
    "usage: pprt record [-o DIR] [--cpu] [--heap] [--trace] [--hz N] [--heap-rate BYTES]\n"
    "                   [--timer MODE] [--unwinder NAME] [--checkpoint SECONDS]\n"
    "                   [--preload PATH] [--no-procs] [-q]\n"
    "                   [--] PROGRAM [ARGS...]\n"
    "\n"
    "Runs PROGRAM with pprt's preload library and writes into DIR (default\n"
    "pprt-out) the outputs chosen, all three when none is:\n"
    "  --cpu              cpu.pb.gz, the CPU profile (PPRT_CPUPROFILE)\n"
    "  --heap             heap.pb.gz, the heap profile (PPRT_HEAPPROFILE)\n"
    "  --trace            trace.pprt, the execution trace (PPRT_TRACE)\n"
    "PROGRAM and every process it starts (fork + exec, their children, what\n"
    "they exec) write their own files into DIR/procs/ (FILE.<pid>); at the end\n"
    "cpu.pb.gz and heap.pb.gz are their merge (each sample labelled with its\n"
    "pid and process: pprt top --by process), trace.json holds every process's\n"
    "trace on one timeline, and trace.pprt is PROGRAM's own trace.\n"
    "\n"
    "  -o DIR             output directory, created if missing\n"
    "  --hz N             CPU samples per CPU-second asked (PPRT_CPUPROFILE_HZ;\n"
    "                     default 100; Linux delivers at most CONFIG_HZ per thread)\n"
    "  --heap-rate BYTES  mean bytes between heap samples (PPRT_HEAP_RATE;\n"
    "                     default 524288)\n"
    "  --timer MODE       auto, perf, per-thread or process (PPRT_CPUPROFILE_TIMER)\n"
    "  --unwinder NAME    the stack walk: cfi (DWARF unwind tables; the default on\n"
    "                     Linux and FreeBSD x86_64/aarch64), fp (frame pointers) or\n"
    "                     libunwind (when built in) (PPRT_UNWINDER)\n"
    "  --checkpoint SECONDS\n"
    "                     rewrite the profiles so far at this interval, so a\n"
    "                     program killed without warning (kill -9) leaves them as\n"
    "                     of the last one (PPRT_CHECKPOINT; default 5, 0: off)\n"
    "  --preload PATH     the preload library to use (default: next to pprt, or\n"
    "                     in its install's library directory)\n"
    "  --no-procs         remove DIR/procs/ once merged: the merged outputs only\n"
    "  -q, --quiet        no live status and no summary\n"
    "\n"
    "On a terminal a status line shows the time elapsed and the CPU time the\n"
    "program has used; at exit a summary on stderr gives the duration, CPU\n"
    "samples, lost samples, the effective rate, the top processes by CPU and\n"
    "the top 5 functions across them all; files that could not be merged (a\n"
    "process killed while it wrote) are named and left out.\n"
    "\n"
    "A terminal's ^C or ^\\ goes to PROGRAM, which writes its profiles and ends;\n"
    "pprt waits for it, then says how it ended (exit status, termination signal,\n"
    "crash, _exit, or killed before it could write) and summarises.\n"
    "\n"
    "Exit status: PROGRAM's own; when PROGRAM is killed by a signal, pprt\n"
    "re-raises it, so a shell sees 128+N (or exits 128+N if it cannot).\n"
    "Otherwise: 2 bad usage, 125 pprt itself failed (no preload library, DIR not\n"
    "writable), 126 PROGRAM cannot be run, 127 PROGRAM not found.\n";

/* ---- options ---------------------------------------------------------------------- */

typedef struct record_opts {
  const char *dir, *hz, *heap_rate, *timer, *unwinder, *preload, *checkpoint;
  int cpu, heap, trace, quiet, no_procs;
  char **argv; /* the program and its arguments */
} record_opts;

static int parse(int argc, char **argv, record_opts *o) {
  memset(o, 0, sizeof *o);
  o->dir = "pprt-out";
  /* One checkpoint of a large profile (10,000 stacks) costs about 40 ms,
   * of a typical one 3 ms (bench/checkpoint): every 5 s, under 1% of a
   * core at worst. */
  o->checkpoint = "5";
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i], *v;
    int missing = 0;
    long long n;
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (a[0] != '-' || a[1] == '\0')
      break;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      return CLI_OK;
    } else if (strcmp(a, "--cpu") == 0) {
      o->cpu = 1;
    } else if (strcmp(a, "--heap") == 0) {
      o->heap = 1;
    } else if (strcmp(a, "--trace") == 0) {
      o->trace = 1;
    } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
      o->quiet = 1;
    } else if (strcmp(a, "--no-procs") == 0) {
      o->no_procs = 1;
    } else if ((v = cli_option_value(argc, argv, &i, "-o", &missing)) ||
               (!missing && (v = cli_option_value(argc, argv, &i, "--output", &missing)))) {
      o->dir = v;
    } else if (!missing && (v = cli_option_value(argc, argv, &i, "--hz", &missing))) {
      if (cli_parse_long(v, 1, 10000, &n) != 0)
        return cli_error(CLI_EUSAGE, "record", "--hz %s: not a rate in Hz (1-10000)", v);
      o->hz = v;
    } else if (!missing && (v = cli_option_value(argc, argv, &i, "--heap-rate", &missing))) {
      if (cli_parse_long(v, 0, (long long)1 << 40, &n) != 0)
        return cli_error(CLI_EUSAGE, "record", "--heap-rate %s: not a number of bytes (0 to 2^40)",
                         v);
      o->heap_rate = v;
    } else if (!missing && (v = cli_option_value(argc, argv, &i, "--timer", &missing))) {
      if (strcmp(v, "auto") != 0 && strcmp(v, "perf") != 0 && strcmp(v, "per-thread") != 0 &&
          strcmp(v, "process") != 0)
        return cli_error(CLI_EUSAGE, "record", "--timer %s: not auto, perf, per-thread or process",
                         v);
      o->timer = v;
    } else if (!missing && (v = cli_option_value(argc, argv, &i, "--unwinder", &missing))) {
      if (strcmp(v, "cfi") != 0 && strcmp(v, "fp") != 0 && strcmp(v, "libunwind") != 0)
        return cli_error(CLI_EUSAGE, "record", "--unwinder %s: not cfi, fp or libunwind", v);
      o->unwinder = v;
    } else if (!missing && (v = cli_option_value(argc, argv, &i, "--checkpoint", &missing))) {
      char *end;
      double sec = strtod(v, &end);
      if (end == v || *end != '\0' || !(sec == 0 || (sec >= 0.05 && sec <= 86400)))
        return cli_error(CLI_EUSAGE, "record",
                         "--checkpoint %s: not a number of seconds (0, or 0.05 to 86400)", v);
      o->checkpoint = v;
    } else if (!missing && (v = cli_option_value(argc, argv, &i, "--preload", &missing))) {
      o->preload = v;
    } else if (missing) {
      return cli_error(CLI_EUSAGE, "record", "%s needs a value (see pprt record --help)", a);
    } else {
      return cli_error(CLI_EUSAGE, "record", "unknown option '%s' (see pprt record --help)", a);
    }
  }
  if (i >= argc)
    return cli_error(CLI_EUSAGE, "record", "missing PROGRAM (see pprt record --help)");
  o->argv = argv + i;
  if (!o->cpu && !o->heap && !o->trace)
    o->cpu = o->heap = o->trace = 1;
  return -1;
}

/* ---- the preload library ---------------------------------------------------------- */

static int readable_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, R_OK) == 0;
}

/* Finds libpprt_preload; an absolute path into out (the program may change
 * directory before it execs anything). */
static int find_preload(const record_opts *o, char *out, size_t len) {
  if (len < PATH_MAX)
    return cli_error(CLI_ERECORD, "record", "internal error: path buffer too small");
  if (o->preload) {
    if (!readable_file(o->preload))
      return cli_error(CLI_ERECORD, "record", "--preload %s: %s", o->preload,
                       access(o->preload, F_OK) == 0 ? "not a readable file" : "no such file");
    if (realpath(o->preload, out) == NULL)
      return cli_error(CLI_ERECORD, "record", "--preload %s: %s", o->preload, strerror(errno));
    return CLI_OK;
  }
  char self[PATH_MAX], dir[PATH_MAX], tried[4 * PATH_MAX] = "";
  const char *dirs[4];
  size_t ndirs = 0;
  if (cli_os_self_exe(self, sizeof self) == 0) {
    snprintf(dir, sizeof dir, "%s", self);
    char *slash = strrchr(dir, '/');
    if (slash)
      *slash = '\0';
    dirs[ndirs++] = dir;
  }
  char rel[PATH_MAX];
  if (ndirs && snprintf(rel, sizeof rel, "%s/%s", dir, PPRT_TOOL_REL_LIBDIR) < (int)sizeof rel)
    dirs[ndirs++] = rel;
  dirs[ndirs++] = PPRT_TOOL_BUILD_PRELOAD_DIR;
  dirs[ndirs++] = PPRT_TOOL_LIBDIR;
  for (size_t i = 0; i < ndirs; i++) {
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s", dirs[i], cli_os_preload_lib);
    if (n < (int)sizeof path && readable_file(path) && realpath(path, out) != NULL)
      return CLI_OK;
    size_t used = strlen(tried);
    snprintf(tried + used, sizeof tried - used, "%s%s", i ? ", " : "", dirs[i]);
  }
  return cli_error(CLI_ERECORD, "record", "cannot find %s (looked in %s); pass --preload PATH",
                   cli_os_preload_lib, tried);
}

/* ---- the output directory --------------------------------------------------------- */

static const char *const kOutputs[] = {"cpu.pb.gz", "heap.pb.gz", "trace.pprt"};

/* mkdir -p */
static int make_dirs(const char *dir) {
  char buf[PATH_MAX];
  if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
      return -1;
    *p = '/';
  }
  if (mkdir(buf, 0777) != 0 && errno != EEXIST)
    return -1;
  struct stat st;
  if (stat(buf, &st) != 0)
    return -1;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return -1;
  }
  return 0;
}

/* NAME, NAME.<pid>, NAME.<pid>.<n>, NAME.tmp and the like: every file an
 * earlier run's processes may have left. */
static int is_output_any(const char *name, const char *out) {
  size_t n = strlen(out);
  return strncmp(name, out, n) == 0 && (name[n] == '\0' || name[n] == '.');
}

static void remove_outputs_in(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    for (size_t i = 0; i < 3; i++)
      if (is_output_any(e->d_name, kOutputs[i])) {
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path)
          unlink(path);
      }
  closedir(d);
}

/* Earlier runs' files would be mistaken for this run's: they go first, from
 * DIR and DIR/procs/ (trace.json too). */
static void remove_old_outputs(const char *dir) {
  char path[PATH_MAX];
  remove_outputs_in(dir);
  if (snprintf(path, sizeof path, "%s/procs", dir) < (int)sizeof path)
    remove_outputs_in(path);
  if (snprintf(path, sizeof path, "%s/trace.json", dir) < (int)sizeof path)
    unlink(path);
}

/* ---- the environment -------------------------------------------------------------- */

/* Sets the variables the program starts with; pprt's own environment is
 * the child's, so they are set here before fork. */
static int set_env(const record_opts *o, const char *dir, const char *preload) {
  /* Inherited settings for outputs not chosen, and the "which process owns
   * the file" markers the preload library leaves for its children
   * (PPRT_CPUPROFILE_PID...), must not reach the program. */
  static const char *const clear[] = {"PPRT_CPUPROFILE", "PPRT_HEAPPROFILE", "PPRT_TRACE"};
  for (size_t i = 0; i < 3; i++)
    unsetenv(clear[i]);
  for (int again = 1; again;) {
    again = 0;
    for (char **e = environ; *e; e++) {
      const char *eq = strchr(*e, '=');
      if (strncmp(*e, "PPRT_", 5) == 0 && eq && eq - *e > 4 && strncmp(eq - 4, "_PID", 4) == 0) {
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
        unsetenv(name);
        again = 1; /* environ changed under us */
        break;
      }
    }
  }
  char path[PATH_MAX + 32];
  int rc = 0;
  const int want[] = {o->cpu, o->heap, o->trace};
  for (size_t i = 0; i < 3; i++)
    if (want[i]) {
      snprintf(path, sizeof path, "%s/procs/%s", dir, kOutputs[i]);
      rc |= setenv(clear[i], path, 1);
    }
  /* Owned by pprt, which writes none: the program itself writes FILE.<pid>
   * too, like every process of its tree (tools/cmd_record_tree.c). */
  char me[32];
  snprintf(me, sizeof me, "%ld", (long)getpid());
  rc |= setenv("PPRT_OWNER_PID", me, 1);
  unsetenv("PPRT_ROOT_PID"); /* the program is the root of its tree */
  if (o->hz)
    rc |= setenv("PPRT_CPUPROFILE_HZ", o->hz, 1);
  if (o->heap_rate)
    rc |= setenv("PPRT_HEAP_RATE", o->heap_rate, 1);
  if (o->timer)
    rc |= setenv("PPRT_CPUPROFILE_TIMER", o->timer, 1);
  if (o->unwinder)
    rc |= setenv("PPRT_UNWINDER", o->unwinder, 1);
  rc |= setenv("PPRT_CHECKPOINT", o->checkpoint, 1);
  /* Ahead of any library already preloaded. */
  const char *old = getenv(cli_os_preload_var);
  char *joined = malloc(strlen(preload) + (old ? strlen(old) : 0) + 2);
  if (joined == NULL)
    return -1;
  if (old && *old)
    sprintf(joined, "%s:%s", preload, old);
  else
    strcpy(joined, preload);
  rc |= setenv(cli_os_preload_var, joined, 1);
  free(joined);
  return rc;
}

/* ---- running and waiting ---------------------------------------------------------- */

static volatile sig_atomic_t g_child;
/* SIGINT and SIGQUIT as pprt found them: the program gets them back (a
 * program started in the background with them ignored keeps them so). */
static struct sigaction g_old_int, g_old_quit;
/* SIGTERM and SIGHUP as pprt found them, for the program. */
static struct sigaction g_old_term, g_old_hup;

/* A SIGTERM or SIGHUP meant for pprt goes to the program, which decides
 * what to do with it; pprt waits to write the summary. */
static void forward(int sig) {
  if (g_child > 0)
    kill((pid_t)g_child, sig);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Starts the program; on an exec failure reports it and returns its exit
 * code (126, 127), else 0 with *pid set. The exec error comes back through
 * a close-on-exec pipe: it stays empty when exec succeeds.
 *
 * The forwarders of SIGTERM and SIGHUP are in place before the fork, with
 * both signals blocked until the child's pid is known: one that came
 * between the fork and their installation killed pprt and left the
 * program running, orphaned. One that comes while they are blocked waits,
 * and is forwarded once g_child is set. */
static int spawn(char **argv, pid_t *pid) {
  int fds[2];
  if (pipe(fds) != 0 || fcntl(fds[0], F_SETFD, FD_CLOEXEC) != 0 ||
      fcntl(fds[1], F_SETFD, FD_CLOEXEC) != 0)
    return cli_error(CLI_ERECORD, "record", "pipe: %s", strerror(errno));
  sigset_t fwd, old_mask;
  sigemptyset(&fwd);
  sigaddset(&fwd, SIGTERM);
  sigaddset(&fwd, SIGHUP);
  sigprocmask(SIG_BLOCK, &fwd, &old_mask);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = forward;
  sigaction(SIGTERM, &sa, &g_old_term);
  sigaction(SIGHUP, &sa, &g_old_hup);
  fflush(NULL);
  pid_t p = fork();
  if (p < 0) {
    int e = errno;
    sigaction(SIGTERM, &g_old_term, NULL);
    sigaction(SIGHUP, &g_old_hup, NULL);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    return cli_error(CLI_ERECORD, "record", "fork: %s", strerror(e));
  }
  if (p == 0) {
    close(fds[0]);
    sigaction(SIGINT, &g_old_int, NULL);
    sigaction(SIGQUIT, &g_old_quit, NULL);
    sigaction(SIGTERM, &g_old_term, NULL);
    sigaction(SIGHUP, &g_old_hup, NULL);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    execvp(argv[0], argv);
    int e = errno;
    ssize_t w = write(fds[1], &e, sizeof e);
    (void)w;
    _exit(127);
  }
  g_child = p;
  sigprocmask(SIG_SETMASK, &old_mask, NULL);
  close(fds[1]);
  int e = 0;
  ssize_t n;
  do
    n = read(fds[0], &e, sizeof e);
  while (n < 0 && errno == EINTR);
  close(fds[0]);
  if (n == (ssize_t)sizeof e) {
    g_child = 0; /* its pid is free again once reaped */
    waitpid(p, NULL, 0);
    if (e == ENOENT)
      return cli_error(CLI_ENOTFOUND, "record", "%s: %s", argv[0],
                       strchr(argv[0], '/') ? "no such file" : "command not found");
    return cli_error(e == ENOTDIR ? CLI_ENOTFOUND : CLI_ENOEXEC, "record", "%s: cannot run it: %s",
                     argv[0], strerror(e));
  }
  *pid = p;
  return CLI_OK;
}

static void status_line(double start, pid_t pid) {
  int64_t cpu = cli_os_child_cpu_ns((int)pid);
  char c[64] = "";
  if (cpu >= 0)
    snprintf(c, sizeof c, ", %.1f s CPU", (double)cpu / 1e9);
  fprintf(stderr, "\rpprt record: %.1f s elapsed%s (pid %d)\033[K", now_s() - start, c, (int)pid);
  fflush(stderr);
}

static int wait_child(pid_t pid, int live, double start, int *status, struct rusage *ru) {
  for (;;) {
    pid_t r = wait4(pid, status, live ? WNOHANG : 0, ru);
    if (r == pid)
      break;
    if (r < 0 && errno != EINTR)
      return -1;
    if (r == 0) {
      status_line(start, pid);
      struct timespec ts = {0, 200 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  if (live) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
  }
  return 0;
}

/* ---- the summary ------------------------------------------------------------------ */

/* A number after `key` in one of the profile's comments. */
static int comment_number(const Pprt__Profile *p, const char *key, double *out) {
  for (size_t i = 0; i < p->n_comment; i++) {
    const char *c = strstr(cli_str(p, p->comment[i]), key);
    if (c && sscanf(c + strlen(key), " %lf", out) == 1)
      return 0;
  }
  return -1;
}

static long value_index(const Pprt__Profile *p, const char *type) {
  for (size_t i = 0; i < p->n_sample_type; i++)
    if (strcmp(cli_str(p, p->sample_type[i]->type), type) == 0)
      return (long)i;
  return -1;
}

static const char *signal_name(int sig) {
  switch (sig) {
  case SIGHUP:
    return "SIGHUP";
  case SIGINT:
    return "SIGINT";
  case SIGQUIT:
    return "SIGQUIT";
  case SIGILL:
    return "SIGILL";
  case SIGABRT:
    return "SIGABRT";
  case SIGBUS:
    return "SIGBUS";
  case SIGFPE:
    return "SIGFPE";
  case SIGKILL:
    return "SIGKILL";
  case SIGSEGV:
    return "SIGSEGV";
  case SIGPIPE:
    return "SIGPIPE";
  case SIGALRM:
    return "SIGALRM";
  case SIGTERM:
    return "SIGTERM";
  case SIGPROF:
    return "SIGPROF";
  default:
    return "a signal";
  }
}

/* Whether the program wrote path. The preload library creates its files
 * when it starts and fills them at its end or at a checkpoint, so an empty
 * one means neither happened; it is removed, as it is not a profile. */
static int written(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0)
    return 0;
  if (st.st_size > 0)
    return 1;
  unlink(path);
  return 0;
}

/* Set when any chosen output was written: then the exit handlers ran, and
 * a missing file means the preload library does not write that kind. */
static int g_any_written;

/* Why a file is missing, from how the program ended. */
static void why_missing(const char *what, int status) {
  if (g_any_written)
    fprintf(stderr, "  no %s: this preload library did not write one\n", what);
  else if (WIFSIGNALED(status))
    fprintf(stderr,
            "  no %s: the program was killed by %s (%d) before its exit handlers could "
            "write it\n",
            what, signal_name(WTERMSIG(status)), WTERMSIG(status));
  else
    fprintf(stderr,
            "  no %s: the program ended without writing it (an exec that did not return, "
            "PPRT_FLUSH_TIMEOUT=0), or pprt could not start in it (see any \"pprt:\" line "
            "above; a static or setuid program cannot be preloaded)\n",
            what);
}

/* How the profiles say they were written: at an ending other than exit()
 * (their "ending:" comment), or as a checkpoint the program never
 * replaced. Printed once, from the first profile summarised. */
static void print_ending(const Pprt__Profile *p, int status) {
  static int printed;
  if (printed)
    return;
  printed = 1;
  /* In a merge, the program's own profile says how the program ended. */
  if (cli_record_root_profile())
    p = cli_record_root_profile();
  const char *checkpoint = NULL;
  for (size_t i = 0; i < p->n_comment; i++) {
    const char *c = cli_str(p, p->comment[i]);
    if (strncmp(c, "ending: ", 8) == 0) {
      fprintf(stderr, "  ending seen: profiles %s\n", c + 8);
      return;
    }
    if (strncmp(c, "checkpoint ", 11) == 0)
      checkpoint = c;
  }
  if (checkpoint || WIFSIGNALED(status))
    fprintf(stderr,
            "  ending seen: none; the program ended before it could write: these are its last "
            "checkpoints%s%s\n",
            checkpoint ? ", CPU profile's " : "", checkpoint ? checkpoint : "");
  else
    fprintf(stderr, "  ending seen: exit (written by the exit handlers)\n");
}

static void summarize_cpu(const char *dir, int status) {
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/cpu.pb.gz", dir);
  if (!written(path)) {
    why_missing("CPU profile", status);
    return;
  }
  cli_profile cp;
  if (cli_profile_load(&cp, "record", path, NULL, 0) != CLI_OK) {
    cli_profile_free(&cp);
    return;
  }
  const Pprt__Profile *p = cp.p;
  print_ending(p, status);
  long isamples = value_index(p, "samples");
  double lost = 0, rate = -1;
  int64_t samples = 0;
  for (size_t i = 0; i < p->n_sample && isamples >= 0; i++)
    samples += p->sample[i]->value[isamples];
  /* The pprt_lost_samples frames carry them: counted there, they add up
   * over the processes of a merge, whose comments each give their own. */
  lost = (double)cli_record_lost(&cp, isamples);
  samples -= (int64_t)lost;
  comment_number(p, "effective rate", &rate);
  char cpu[64];
  cli_format_value(cpu, sizeof cpu, cli_profile_total(&cp), cp.unit);
  fprintf(stderr, "  %s: %lld CPU samples (%s %s), %.0f lost", path, (long long)samples, cpu,
          cp.type, lost);
  if (rate >= 0)
    fprintf(stderr, ", effective rate %.1f samples per CPU-second", rate);
  fputc('\n', stderr);
  /* Which source sampled and which unwinder walked, and why a better
   * source did not. */
  for (size_t i = 0; i < p->n_comment; i++) {
    const char *c = cli_str(p, p->comment[i]);
    const char *src = strstr(c, "source ");
    const char *unw = strstr(c, ", unwinder ");
    if (src) {
      size_t n = strcspn(src, ",");
      fprintf(stderr, "  sampled by: %.*s\n", (int)(n - 7), src + 7);
      if (unw)
        fprintf(stderr, "  unwound by: %s\n", unw + 11);
    } else if (strncmp(c, "fallback: ", 10) == 0) {
      fprintf(stderr, "  %s\n", c);
    }
  }
  cli_print_top(stderr, &cp, 5, 0, 0);
  cli_profile_free(&cp);
}

/* The total of one sample type, formatted; "?" when the profile has none. */
static void type_total(const cli_profile *cp, const char *type, char *buf, size_t len) {
  long i = value_index(cp->p, type);
  int64_t t = 0;
  if (i < 0) {
    snprintf(buf, len, "?");
    return;
  }
  for (size_t k = 0; k < cp->p->n_sample; k++)
    t += cp->p->sample[k]->value[i];
  cli_format_value(buf, len, t, cli_str(cp->p, cp->p->sample_type[i]->unit));
}

static void summarize_heap(const char *dir, int status) {
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/heap.pb.gz", dir);
  if (!written(path)) {
    why_missing("heap profile", status);
    return;
  }
  cli_profile cp;
  if (cli_profile_load(&cp, "record", path, NULL, 0) != CLI_OK) {
    cli_profile_free(&cp);
    return;
  }
  print_ending(cp.p, status);
  char in_b[64], in_n[64], all_b[64], all_n[64];
  type_total(&cp, "inuse_space", in_b, sizeof in_b);
  type_total(&cp, "inuse_objects", in_n, sizeof in_n);
  type_total(&cp, "alloc_space", all_b, sizeof all_b);
  type_total(&cp, "alloc_objects", all_n, sizeof all_n);
  double rate = 0;
  fprintf(stderr, "  %s: in use at exit %s (%s objects), allocated %s (%s objects)", path, in_b,
          in_n, all_b, all_n);
  if (comment_number(cp.p, "one sample per", &rate) == 0)
    fprintf(stderr, ", one sample per %.0f bytes", rate);
  fputc('\n', stderr);
  /* Where the memory was allocated says more than what was left at exit. */
  if (value_index(cp.p, "alloc_space") >= 0 &&
      cli_profile_select(&cp, "record", "alloc_space") != CLI_OK) {
    cli_profile_free(&cp);
    return;
  }
  fprintf(stderr, "  top allocation sites by %s:\n", cp.type);
  cli_print_top(stderr, &cp, 5, 0, 0);
  cli_profile_free(&cp);
}

/* The trace's check summary, condensed to one line: validity, events,
 * threads, time span. */
static void summarize_trace(const char *dir, int status) {
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/trace.pprt", dir);
  if (!written(path)) {
    why_missing("trace", status);
    return;
  }
  uint8_t *data;
  size_t len;
  char err[512];
  if (cli_read_file(path, CLI_TRACE_MAX_BYTES, &data, &len, err, sizeof err) != CLI_OK) {
    fprintf(stderr, "  %s: %s\n", path, err);
    return;
  }
  cli_trace_summary sum;
  int rc = cli_trace_summarize(data, len, &sum, err, sizeof err);
  fprintf(stderr, "  %s: %.1f KiB", path, (double)len / 1024);
  if (rc == 0) {
    fprintf(stderr, ", valid; events %zu (lost %" PRIu64 "); threads %zu; time span %.6f s",
            sum.nevents, sum.lost, sum.nthreads, (double)sum.span_ns / 1e9);
    cli_trace_summary_free(&sum);
  } else {
    fprintf(stderr, ", not valid: %s", err);
  }
  fprintf(stderr, "\n    pprt trace check %s; pprt trace export %s\n", path, path);
  free(data);
}

/* ---- exiting ---------------------------------------------------------------------- */

/* Ends pprt the way the program ended. */
static int exit_like(int status) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (!WIFSIGNALED(status))
    return CLI_ERECORD;
  int sig = WTERMSIG(status);
  /* The program has dumped its core already, if it did. */
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  fflush(NULL);
  signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  raise(sig);
  return 128 + sig; /* a signal whose default is not to terminate */
}

int cli_cmd_record(int argc, char **argv) {
  record_opts o;
  int rc = parse(argc, argv, &o);
  if (rc >= 0)
    return rc;
  char preload[PATH_MAX];
  rc = find_preload(&o, preload, sizeof preload);
  if (rc != CLI_OK)
    return rc;
  char dir[PATH_MAX];
  char procs[PATH_MAX + 8];
  if (make_dirs(o.dir) != 0 || realpath(o.dir, dir) == NULL || access(dir, W_OK) != 0)
    return cli_error(CLI_ERECORD, "record", "output directory %s: %s", o.dir, strerror(errno));
  snprintf(procs, sizeof procs, "%s/procs", dir);
  if (make_dirs(procs) != 0)
    return cli_error(CLI_ERECORD, "record", "output directory %s/procs: %s", o.dir,
                     strerror(errno));
  remove_old_outputs(dir);
  if (set_env(&o, dir, preload) != 0)
    return cli_error(CLI_ERECORD, "record", "cannot set the environment: %s", strerror(errno));

  /* The terminal's ^C and ^\ reach the program directly; pprt stays to
   * summarise whatever the program does with them. */
  struct sigaction ign;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ign, &g_old_int);
  sigaction(SIGQUIT, &ign, &g_old_quit);
  double start = now_s();
  pid_t pid = -1;
  rc = spawn(o.argv, &pid);
  if (rc != CLI_OK)
    return rc;

  int status = 0;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  int live = !o.quiet && isatty(STDERR_FILENO);
  int waited = wait_child(pid, live, start, &status, &ru);
  g_child = 0; /* reaped: its pid may be another process's now */
  if (waited != 0)
    return cli_error(CLI_ERECORD, "record", "waiting for %s: %s", o.argv[0], strerror(errno));
  double wall = now_s() - start;
  double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;

  if (!o.quiet) {
    if (WIFSIGNALED(status))
      fprintf(stderr, "pprt record: %s killed by %s (%d) after %.2f s (%.2f s CPU)\n", o.argv[0],
              signal_name(WTERMSIG(status)), WTERMSIG(status), wall, cpu);
    else
      fprintf(stderr, "pprt record: %s exited with status %d after %.2f s (%.2f s CPU)\n",
              o.argv[0], WEXITSTATUS(status), wall, cpu);
    /* Paths as the user gave them (pprt never changes directory); the
     * program got absolute ones, as it may. */
    const char *shown = o.dir;
    cli_record_tree(shown, (long)pid, o.cpu, o.heap, o.trace, 0, o.no_procs);
    const int want[] = {o.cpu, o.heap, o.trace};
    for (size_t i = 0; i < 3; i++) {
      char path[PATH_MAX + 16];
      /* A checkpoint the program was killed in the middle of. */
      snprintf(path, sizeof path, "%s/procs/%s.tmp", shown, kOutputs[i]);
      unlink(path);
      snprintf(path, sizeof path, "%s/%s", shown, kOutputs[i]);
      struct stat st;
      if (want[i] && stat(path, &st) == 0 && st.st_size > 0)
        g_any_written = 1;
    }
    if (o.cpu)
      summarize_cpu(shown, status);
    if (o.heap)
      summarize_heap(shown, status);
    if (o.trace)
      summarize_trace(shown, status);
  } else {
    cli_record_tree(o.dir, (long)pid, o.cpu, o.heap, o.trace, 1, o.no_procs);
  }
  return exit_like(status);
}
