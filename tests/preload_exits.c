/* How a profiled process ends, under the preload library: real processes
 * (tests/exit_victim.c) ended by real signals, a Ctrl-C typed on a
 * pseudo-terminal, crashes and _exit. Each case runs the victim twice, with
 * and without the preload library, and asserts the same ending (exit
 * status, or signal and core dump); with it, a CPU profile whose sampled
 * CPU time covers at least 90% of the CPU time the child used (its rusage,
 * from wait4), a heap profile, and the ending in their comments.
 *
 *   preload_exits term     SIGTERM
 *   preload_exits int_pty  ^C on the victim's controlling terminal
 *   preload_exits hup      SIGHUP
 *   preload_exits segv     a null-pointer write
 *   preload_exits abort    abort()
 *   preload_exits exit     _exit, _Exit and quick_exit
 *   preload_exits kill9    SIGKILL with PPRT_CHECKPOINT=0.5: the profile on
 *                          disk is valid and holds the samples up to its
 *                          checkpoint, which is at most 2 s of CPU old (0.5 s
 *                          intervals; slack for a loaded machine)
 *   preload_exits handler  the program's own SIGTERM handler runs and it
 *                          exits through exit(), which writes the profiles
 *   preload_exits hup_ign  SIGHUP ignored by the parent stays ignored (and
 *                          the program is told so); SIGTERM then ends it
 *   preload_exits record_int  `pprt record` on a terminal, ^C typed: the
 *                          program writes and dies of SIGINT, pprt waits,
 *                          says how it ended and which ending the profiles
 *                          saw, and ends by SIGINT itself (a shell's 130)
 *   preload_exits fork     forked children without a session: one's _exit
 *                          and the other's SIGTERM end them at once (well
 *                          under the 5 s bound) with their own status, and
 *                          the parent's profiles are written by its exit
 *   preload_exits flush_timeout  PPRT_FLUSH_TIMEOUT=soon: one line saying
 *                          so, and the default bound
 *   preload_exits corrupt  a wild free on a scribbled heap: the process
 *                          still dies of its signal within the crash bound
 *                          (PPRT_FLUSH_TIMEOUT=1: 1 s) plus slack, with a
 *                          core dump wherever the run without pprt gets
 *                          one (RLIMIT_CORE raised)
 *
 * In an ASan build (PRELOAD_ASAN_RUNTIME: tests/CMakeLists.txt) the preload
 * library is instrumented and leaves malloc to ASan, so both runs get ASan's
 * runtime preloaded first and the heap profiles' samples are not asserted
 * (their endings are); corrupt is skipped there (test_corrupt says why). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "read/profile_decode.h"
#include "tests/preload_run.h"

#ifndef PRELOAD_ASAN_RUNTIME
#define PRELOAD_ASAN_RUNTIME ""
#endif
static const char kAsanRuntime[] = PRELOAD_ASAN_RUNTIME; /* "": not an ASan build */

/* ASan's options for both runs of the victim, after the ones inherited.
 * ASan's own SIGSEGV, SIGBUS and SIGFPE handlers (and SIGABRT's, if on)
 * would replace the default action the cases are about: the victim's
 * crash would be ASan's report and exit, not the signal, and pprt's
 * handler, which stands in only for a default action, would not be there.
 * The leak check at exit would change the exit status compared (pprt's own
 * leaks are the unit tests' business under ASan). A pprt run under
 * `pprt record` has pprt's library ahead of ASan's in LD_PRELOAD (pprt
 * puts its own first): ASan accepts that order only when told not to
 * check it; malloc still binds to ASan, as nothing before it defines one. */
static void set_asan_env(int record) {
  const char *old = getenv("ASAN_OPTIONS");
  char opts[1024];
  snprintf(opts, sizeof opts,
           "%s%shandle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0:detect_leaks=0%s",
           old ? old : "", old && *old ? ":" : "", record ? ":verify_asan_link_order=0" : "");
  setenv("ASAN_OPTIONS", opts, 1);
}

/* A heap profile holds the memory the victim keeps, unless ASan owns malloc. */
static void assert_heap_samples(const Pprt__Profile *p) {
  if (kAsanRuntime[0]) {
    printf("heap samples not asserted: in an ASan build the preload library leaves malloc "
           "to ASan and samples no allocation\n");
    return;
  }
  assert_true(p->n_sample > 0);
}

enum how { BY_NONE, BY_KILL, BY_PTY };

typedef struct run_spec {
  const char *mode;
  double ready;       /* CPU seconds before "ready" */
  enum how how;       /* what ends it after "ready" */
  int sig;            /* for BY_KILL */
  int hup_ignored;    /* SIGHUP ignored before exec, as nohup does */
  int core;           /* RLIMIT_CORE raised */
  int record;         /* run under `pprt record`, not preloaded directly */
  const char *env[4]; /* more variables */
} run_spec;

typedef struct run_result {
  int status;
  struct rusage ru;
  double end_s; /* from "ready" to the end */
  char first[128];
  char out[65536]; /* everything it printed */
} run_result;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char g_dir[512];

/* A fresh directory for one case's outputs (and any core file). */
static const char *case_dir(const char *name, int preloaded) {
  mkdir(EXITS_OUT, 0755);
  snprintf(g_dir, sizeof g_dir, "%s/%s%s", EXITS_OUT, name, preloaded ? "" : "-plain");
  mkdir(g_dir, 0755);
  static const char *const files[] = {"cpu.pb.gz", "heap.pb.gz", "cpu.pb.gz.tmp", "heap.pb.gz.tmp",
                                      "core"};
  char path[700];
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    snprintf(path, sizeof path, "%s/%s", g_dir, files[i]);
    unlink(path);
  }
  return g_dir;
}

/* Reads what the child prints into r->out until `want` appears or
 * timeout_s passes; 1 when it appeared. */
static int read_until(int fd, run_result *r, const char *want, double timeout_s) {
  double end = now_s() + timeout_s;
  size_t n = strlen(r->out);
  while (strstr(r->out, want) == NULL) {
    double left = end - now_s();
    if (left <= 0)
      return 0;
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
      continue;
    ssize_t k = read(fd, r->out + n, sizeof r->out - 1 - n);
    if (k <= 0)
      return strstr(r->out, want) != NULL;
    n += (size_t)k;
    r->out[n] = '\0';
    if (n == sizeof r->out - 1)
      break;
  }
  return 1;
}

/* Runs the victim as spec says, preloaded or not, in dir. */
static void run_victim(const run_spec *spec, const char *dir, int preloaded, run_result *r) {
  memset(r, 0, sizeof *r);
  int fds[2] = {-1, -1}, master = -1;
  char *slave = NULL;
  if (spec->how == BY_PTY) {
    master = posix_openpt(O_RDWR | O_NOCTTY);
    assert_true(master >= 0);
    assert_int_equal(grantpt(master), 0);
    assert_int_equal(unlockpt(master), 0);
    slave = ptsname(master);
    assert_non_null(slave);
  } else {
    assert_int_equal(pipe(fds), 0);
  }
  char ready[32];
  snprintf(ready, sizeof ready, "%g", spec->ready);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (chdir(dir) != 0)
      _exit(126);
    struct rlimit core = {0, 0};
    if (spec->core && getrlimit(RLIMIT_CORE, &core) == 0)
      core.rlim_cur = core.rlim_max;
    setrlimit(RLIMIT_CORE, &core);
    if (spec->hup_ignored)
      signal(SIGHUP, SIG_IGN);
    if (spec->how == BY_PTY) {
      /* Its own session, with the pty as its controlling terminal: the
       * terminal's ^C goes to its foreground process group. */
      setsid();
      int fd = open(slave, O_RDWR);
      if (fd < 0)
        _exit(126);
      ioctl(fd, TIOCSCTTY, 0);
      struct termios t;
      if (tcgetattr(fd, &t) == 0) {
        t.c_lflag |= ISIG;
        t.c_cc[VINTR] = 3;
        tcsetattr(fd, TCSANOW, &t);
      }
      dup2(fd, 1);
      dup2(fd, 2);
      close(master);
    } else {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
    }
    if (kAsanRuntime[0]) {
      /* The instrumented preload library needs ASan's runtime, first. The
       * run without pprt gets it too: the two runs differ by pprt alone. */
      set_asan_env(spec->record);
      char list[2048];
      snprintf(list, sizeof list, "%s%s%s", kAsanRuntime, preloaded && !spec->record ? ":" : "",
               preloaded && !spec->record ? PRELOAD_LIB : "");
      setenv("LD_PRELOAD", list, 1);
    }
    /* Names only: the ground truth is the process's CPU time, which
     * includes writing the profiles at the ending; reading libc's DWARF for
     * source lines there (where its debug file is installed) costs a tenth
     * of a short run, and no profile can hold its own writing. */
    if (preloaded)
      setenv("PPRT_SYMBOLIZE", "names", 1);
    if (preloaded && spec->record) {
      execl(PPRT_TOOL, PPRT_TOOL, "record", "-o", ".", "--preload", PRELOAD_LIB, "--", VICTIM,
            spec->mode, ready, (char *)NULL);
      _exit(127);
    }
    if (preloaded) {
      if (!kAsanRuntime[0])
        setenv("LD_PRELOAD", PRELOAD_LIB, 1);
      setenv("PPRT_CPUPROFILE", "cpu.pb.gz", 1);
      setenv("PPRT_HEAPPROFILE", "heap.pb.gz", 1);
      for (size_t i = 0; i < 4 && spec->env[i]; i++)
        putenv((char *)spec->env[i]);
    }
    execl(VICTIM, VICTIM, spec->mode, ready, (char *)NULL);
    _exit(127);
  }
  int in = spec->how == BY_PTY ? master : fds[0];
  if (fds[1] >= 0)
    close(fds[1]);
  if (!read_until(in, r, "ready", 120))
    fail_msg("%s: no \"ready\" from the victim; it printed: %s", spec->mode, r->out);
  char *nl = strpbrk(r->out, "\r\n");
  size_t fl = nl ? (size_t)(nl - r->out) : strlen(r->out);
  snprintf(r->first, sizeof r->first, "%.*s", (int)fl, r->out);
  double t0 = now_s();
  if (spec->how == BY_KILL)
    assert_int_equal(kill(pid, spec->sig), 0);
  if (spec->how == BY_PTY)
    assert_int_equal(write(master, "\003", 1), 1);
  if (spec->hup_ignored) {
    /* It must live on: wait, then end it with SIGTERM. */
    struct timespec ts = {0, 500 * 1000 * 1000};
    nanosleep(&ts, NULL);
    int st;
    assert_int_equal(waitpid(pid, &st, WNOHANG), 0);
    kill(pid, SIGTERM);
  }
  /* Ends within a generous bound (loaded machines); drain its output. */
  pid_t w = 0;
  while ((w = wait4(pid, &r->status, WNOHANG, &r->ru)) == 0) {
    if (now_s() - t0 > 120) {
      kill(pid, SIGKILL);
      fail_msg("%s: still running 120 s after it was told to end", spec->mode);
    }
    read_until(in, r, "\x01never", 0.02);
  }
  assert_int_equal(w, pid);
  r->end_s = now_s() - t0;
  read_until(in, r, "\x01never", 0.05);
  close(in);
}

static double rusage_s(const struct rusage *ru) {
  return (double)ru->ru_utime.tv_sec + (double)ru->ru_utime.tv_usec / 1e6 +
         (double)ru->ru_stime.tv_sec + (double)ru->ru_stime.tv_usec / 1e6;
}

static const char *find_comment(const Pprt__Profile *p, const char *part) {
  for (size_t i = 0; i < p->n_comment; i++)
    if (strstr(p->string_table[p->comment[i]], part))
      return p->string_table[p->comment[i]];
  return NULL;
}

static void describe(char *buf, size_t len, int status) {
  if (WIFSIGNALED(status))
    snprintf(buf, len, "signal %d%s", WTERMSIG(status), WCOREDUMP(status) ? " (core)" : "");
  else
    snprintf(buf, len, "exit %d", WEXITSTATUS(status));
}

/* The same ending with and without pprt. */
static void assert_same_ending(const run_result *with, const run_result *without) {
  char a[64], b[64];
  describe(a, sizeof a, with->status);
  describe(b, sizeof b, without->status);
  printf("ending: %s with pprt, %s without\n", a, b);
  if (strcmp(a, b) != 0)
    fail_msg("ended with %s under pprt, %s without", a, b);
}

/* The profiles cover the run: CPU sampled >= 90% of the rusage CPU time;
 * the heap profile has the memory kept; both say the ending (NULL: no
 * "ending:" comment, the normal exit path). */
static void assert_profiles(const char *dir, const run_result *r, const char *ending) {
  char path[700];
  snprintf(path, sizeof path, "%s/cpu.pb.gz", dir);
  Pprt__Profile *p = decode_file(path);
  /* The ground truth: the CPU time in the wait status, less what the
   * victim used before main and what its own children used (both printed
   * by it), which no profile of this process can hold. */
  double sampled = sampled_seconds(p, 0), used = rusage_s(&r->ru);
  const char *at_main = strstr(r->out, "cpu at main: "), *kids = strstr(r->out, "children cpu: ");
  if (at_main)
    used -= atof(at_main + strlen("cpu at main: "));
  if (kids)
    used -= atof(kids + strlen("children cpu: "));
  printf("%s: sampled %.3f s of %.3f s CPU (%.1f%%)\n", dir, sampled, used,
         used > 0 ? 100 * sampled / used : 0);
  if (sampled < 0.9 * used)
    fail_msg("the CPU profile covers %.3f s of the %.3f s the process used", sampled, used);
  const char *c = find_comment(p, "ending: ");
  if (ending ? c == NULL || strstr(c, ending) == NULL : c != NULL)
    fail_msg("CPU profile's ending comment: %s (want %s)", c ? c : "none",
             ending ? ending : "none");
  pprt__profile_decoded_free(p);
  snprintf(path, sizeof path, "%s/heap.pb.gz", dir);
  p = decode_file(path);
  assert_heap_samples(p);
  c = find_comment(p, "ending: ");
  if (ending ? c == NULL || strstr(c, ending) == NULL : c != NULL)
    fail_msg("heap profile's ending comment: %s (want %s)", c ? c : "none",
             ending ? ending : "none");
  pprt__profile_decoded_free(p);
}

/* One case: the victim without pprt (quickly), then with it. */
static void run_case(const char *name, run_spec spec, const char *ending, run_result *with) {
  run_result without;
  run_spec plain = spec;
  plain.ready = 0.1;
  run_victim(&plain, case_dir(name, 0), 0, &without);
  const char *dir = case_dir(name, 1);
  run_victim(&spec, dir, 1, with);
  assert_same_ending(with, &without);
  if (ending != (const char *)-1)
    assert_profiles(dir, with, ending);
}

static void test_term(void **state) {
  (void)state;
  run_result r;
  run_case("term", (run_spec){"wait", 2, BY_KILL, SIGTERM, 0, 0, 0, {0}}, "at SIGTERM", &r);
  assert_string_equal(r.first, "INT=dfl TERM=dfl HUP=dfl"); /* pprt's handlers do not show */
}

static void test_int_pty(void **state) {
  (void)state;
  run_result r;
  run_case("int_pty", (run_spec){"wait", 2, BY_PTY, 0, 0, 0, 0, {0}}, "at SIGINT", &r);
  assert_true(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGINT);
}

static void test_hup(void **state) {
  (void)state;
  run_result r;
  run_case("hup", (run_spec){"wait", 2, BY_KILL, SIGHUP, 0, 0, 0, {0}}, "at SIGHUP", &r);
}

static void test_segv(void **state) {
  (void)state;
  run_result r;
  run_case("segv", (run_spec){"segv", 2, BY_NONE, 0, 0, 0, 0, {0}}, "at a crash (SIGSEGV)", &r);
  assert_true(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGSEGV);
}

static void test_abort(void **state) {
  (void)state;
  run_result r;
  run_case("abort", (run_spec){"abort", 2, BY_NONE, 0, 0, 0, 0, {0}}, "at a crash (SIGABRT", &r);
  assert_true(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGABRT);
}

static void test_exit(void **state) {
  (void)state;
  static const char *const modes[] = {"_exit", "_Exit", "quick_exit"};
  static const int codes[] = {3, 4, 5};
  for (size_t i = 0; i < 3; i++) {
    run_result r;
    run_case(modes[i], (run_spec){modes[i], 1.5, BY_NONE, 0, 0, 0, 0, {0}}, "at _exit", &r);
    assert_true(WIFEXITED(r.status) && WEXITSTATUS(r.status) == codes[i]);
  }
}

static void test_kill9(void **state) {
  (void)state;
  run_result r;
  run_case("kill9",
           (run_spec){"wait", 3.5, BY_KILL, SIGKILL, 0, 0, 0, {"PPRT_CHECKPOINT=0.5", NULL}},
           (const char *)-1, &r);
  char path[700];
  snprintf(path, sizeof path, "%s/cpu.pb.gz", g_dir);
  Pprt__Profile *p = decode_file(path);
  const char *c = find_comment(p, "checkpoint ");
  if (c == NULL)
    fail_msg("no checkpoint comment in %s", path);
  double at = 0;
  const char *a = strstr(c, "at ");
  assert_non_null(a);
  at = atof(a + 3);
  double sampled = sampled_seconds(p, 0), used = rusage_s(&r.ru);
  printf("kill9: %s\nsampled %.3f s; checkpoint at %.3f s of CPU; %.3f s CPU used in all\n", c,
         sampled, at, used);
  if (sampled < 0.9 * at)
    fail_msg("the checkpoint holds %.3f s of samples, written at %.3f s of CPU", sampled, at);
  if (at < used - 2.0)
    fail_msg("the last checkpoint was at %.3f s of CPU; the process used %.3f s", at, used);
  pprt__profile_decoded_free(p);
  snprintf(path, sizeof path, "%s/heap.pb.gz", g_dir);
  p = decode_file(path);
  assert_heap_samples(p);
  pprt__profile_decoded_free(p);
}

static void test_handler(void **state) {
  (void)state;
  run_result r;
  run_case("handler", (run_spec){"handler", 2, BY_KILL, SIGTERM, 0, 0, 0, {0}}, NULL, &r);
  assert_true(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 7);
  assert_non_null(strstr(r.out, "handler ran"));
  assert_string_equal(r.first, "INT=dfl TERM=handler HUP=dfl");
}

static void test_hup_ign(void **state) {
  (void)state;
  run_result r;
  run_case("hup_ign", (run_spec){"wait", 2, BY_KILL, SIGHUP, 1, 0, 0, {0}}, "at SIGTERM", &r);
  assert_string_equal(r.first, "INT=dfl TERM=dfl HUP=ign");
  assert_true(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGTERM);
}

static void test_record_int(void **state) {
  (void)state;
  run_result r;
  run_spec spec = {"wait", 2, BY_PTY, 0, 0, 0, 1, {0}};
  run_case("record_int", spec, "at SIGINT", &r);
  assert_true(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGINT);
  if (!strstr(r.out, "killed by SIGINT") ||
      !strstr(r.out, "ending seen: profiles written at SIGINT"))
    fail_msg("pprt record's summary does not say how the program ended:\n%s", r.out);
}

static void test_flush_timeout(void **state) {
  (void)state;
  run_result r;
  run_case("flush_timeout",
           (run_spec){"wait", 1, BY_KILL, SIGTERM, 0, 0, 0, {"PPRT_FLUSH_TIMEOUT=soon", NULL}},
           "at SIGTERM", &r);
  if (!strstr(r.out, "pprt: PPRT_FLUSH_TIMEOUT=soon is not a number of seconds (0-3600); using 5"))
    fail_msg("no one-line error for PPRT_FLUSH_TIMEOUT=soon; the program printed:\n%s", r.out);
}

static void test_fork(void **state) {
  (void)state;
  run_result r;
  run_case("fork", (run_spec){"fork", 1, BY_NONE, 0, 0, 0, 0, {0}}, NULL, &r);
  assert_true(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
  double ms1 = 1e9, ms2 = 1e9;
  const char *c1 = strstr(r.out, "child exit 9 in "), *c2 = strstr(r.out, "child signal 15 in ");
  if (c1)
    ms1 = atof(c1 + strlen("child exit 9 in "));
  if (c2)
    ms2 = atof(c2 + strlen("child signal 15 in "));
  printf("fork: children ended in %.0f ms (_exit) and %.0f ms (SIGTERM)\n", ms1, ms2);
  if (ms1 > 3000 || ms2 > 3000)
    fail_msg("forked children did not end at once:\n%s", r.out);
}

static void test_corrupt(void **state) {
  (void)state;
  if (kAsanRuntime[0]) {
    /* Under ASan the scribble past the block is caught as it happens (its
     * memset checks the range against the redzone) and the process ends in
     * ASan's report, before the wild free: the ending this case is about,
     * a crash inside a corrupt heap that pprt's flusher then meets, never
     * happens. */
    printf("SKIP: corrupt: under ASan the scribble is an ASan report, not a corrupt heap\n");
    return;
  }
  run_result r;
  /* The profiles are best effort here: the flusher meets the scribbled
   * heap; only the ending is asserted. */
  run_case("corrupt", (run_spec){"corrupt", 1, BY_NONE, 0, 0, 1, 0, {"PPRT_FLUSH_TIMEOUT=1", NULL}},
           (const char *)-1, &r);
  assert_true(WIFSIGNALED(r.status));
  printf("corrupt: died %.3f s after \"ready\"%s\n", r.end_s,
         WCOREDUMP(r.status) ? ", core dumped" : "");
  /* The crash bound is 1 s; the rest is the core dump and a loaded machine. */
  if (r.end_s > 30)
    fail_msg("the crash took %.3f s to end the process", r.end_s);
  char path[700];
  snprintf(path, sizeof path, "%s/core", g_dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/core", case_dir("corrupt", 0));
  unlink(path);
}

int main(int argc, char **argv) {
  static const struct {
    const char *name;
    CMUnitTestFunction fn;
  } cases[] = {{"term", test_term},
               {"int_pty", test_int_pty},
               {"hup", test_hup},
               {"segv", test_segv},
               {"abort", test_abort},
               {"exit", test_exit},
               {"kill9", test_kill9},
               {"handler", test_handler},
               {"hup_ign", test_hup_ign},
               {"record_int", test_record_int},
               {"flush_timeout", test_flush_timeout},
               {"fork", test_fork},
               {"corrupt", test_corrupt}};
  const char *which = argc > 1 ? argv[1] : "";
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    if (strcmp(which, cases[i].name) == 0) {
      const struct CMUnitTest t[] = {{cases[i].name, cases[i].fn, NULL, NULL, NULL}};
      return cmocka_run_group_tests(t, NULL, NULL);
    }
  fprintf(stderr,
          "usage: %s term|int_pty|hup|segv|abort|exit|kill9|handler|hup_ign|record_int|"
          "flush_timeout|fork|corrupt\n",
          argv[0]);
  return 2;
}
