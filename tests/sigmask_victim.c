/* A program that blocks signals in its threads the way thread pools do, for
 * the preload library's signal-mask tests (preload_sigmask.c runs it).
 *
 *   sigmask_victim workers SECONDS
 *     Two workers each spin for SECONDS of their own CPU time: "inherited",
 *     created while its creator blocks every signal (liblzma's way), and
 *     "self", which blocks every signal itself first. Each prints
 *     "worker NAME tid TID cpu_ns N", N measured with CLOCK_THREAD_CPUTIME_ID
 *     around its work.
 *
 *   sigmask_victim semantics PROFILE
 *     Installs its own SIGPROF handler, starts the preloaded library's CPU
 *     profiler itself (found with dlsym, so that the profiler forwards to
 *     that handler) writing PROFILE, and checks on one thread what a
 *     program relies on: the masks it is told, and that its own SIGPROFs
 *     reach its handler only once it unblocks SIGPROF, during the profile
 *     and after it stops. Prints "ok WHAT" per check; on the first failure
 *     "FAIL WHAT: WHY" and exits 1.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#ifdef __linux__
#include <sys/syscall.h>
#elif defined(__FreeBSD__)
#include <sys/thr.h>
#endif

#include "pprt.h"
#include "sigprof_mask.h"
#include "spin.h"
#include "victim_check.h"

static uint64_t thread_id(void) {
#ifdef __linux__
  return (uint64_t)syscall(SYS_gettid);
#elif defined(__FreeBSD__)
  long tid = 0;
  thr_self(&tid);
  return (uint64_t)tid;
#else
  return 0;
#endif
}

static volatile unsigned long sink;

/* Spins for ns of the calling thread's CPU time. */
__attribute__((noinline)) static void spin(uint64_t ns) {
  SPIN_CPU(ns, 20000, sink);
}

/* ---- workers ------------------------------------------------------------------------ */

static double seconds;

static void *work(void *name) {
  if (strcmp(name, "self") == 0) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, NULL);
  }
  uint64_t t0 = thread_cpu_ns();
  spin((uint64_t)(seconds * 1e9));
  uint64_t t1 = thread_cpu_ns();
  printf("worker %s tid %llu cpu_ns %llu\n", (const char *)name, (unsigned long long)thread_id(),
         (unsigned long long)(t1 - t0));
  return NULL;
}

static int workers(void) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_t th[2];
  /* liblzma's way: the worker inherits a mask that blocks everything. */
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&th[0], NULL, work, "inherited");
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc == 0)
    rc = pthread_create(&th[1], NULL, work, "self");
  if (rc != 0) {
    fprintf(stderr, "pthread_create: %s\n", strerror(rc));
    return 1;
  }
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  return 0;
}

/* ---- semantics ------------------------------------------------------------------------ */

static atomic_int handled;         /* the program's handler has run this often */
static _Atomic pthread_t handler_thread;
static atomic_int handler_code, handler_pid;

static void on_sigprof(int sig, siginfo_t *info, void *uc) {
  (void)sig;
  (void)uc;
  atomic_store(&handler_thread, pthread_self());
  atomic_store(&handler_code, info->si_code);
  atomic_store(&handler_pid, (int)info->si_pid);
  atomic_fetch_add(&handled, 1);
}

/* What the kernel says (SigBlk in /proc), or -1 where it cannot be read. */
static int kernel_blocks(uint64_t tid) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/self/task/%llu/status", (unsigned long long)tid);
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  const char *p = strstr(buf, "\nSigBlk:");
  if (p == NULL)
    return -1;
  unsigned long long mask = strtoull(p + 8, NULL, 16);
  return (int)((mask >> (SIGPROF - 1)) & 1u);
}

static int pending_here(void) {
  sigset_t p;
  sigpending(&p);
  return sigismember(&p, SIGPROF) == 1;
}

/* The handler has run n times, the last time on this thread. */
static void expect_handled(const char *what, int n) {
  CHECK(what, atomic_load(&handled) == n, "the program's handler ran %d times, want %d",
        atomic_load(&handled), n);
  if (n > 0)
    CHECK(what, pthread_equal(atomic_load(&handler_thread), pthread_self()),
          "the handler ran on another thread");
}

/* The steps between the main thread (profile start and stop, signals from
 * outside) and the checking thread. */
static atomic_int step;

static void wait_step(int n) {
  for (int i = 0; atomic_load(&step) < n; i++) {
    CHECK("progress", i < 20000, "step %d never came", n);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

static pthread_t checker;
static uint64_t checker_tid;

static void *inherits(void *arg) {
  (void)arg;
  const char *what = "a thread created under a full mask";
  CHECK(what, prof_masked(), "is not told SIGPROF is blocked");
  int k = kernel_blocks(thread_id());
  CHECK(what, k != 1, "has SIGPROF blocked in the kernel: no samples");
  ok("a thread created under a full mask is told its full mask, and is sampled");
  return NULL;
}

static void *check(void *arg) {
  (void)arg;
  checker_tid = thread_id();
  sigset_t prof = prof_set(), all, old, saved, s1, s2;
  sigfillset(&all);
  int n = 0;

  /* 1. The mask a program is told: its own. */
  pthread_sigmask(SIG_BLOCK, &prof, &old);
  CHECK("old mask", sigismember(&old, SIGPROF) == 0, "SIGPROF reported blocked before");
  CHECK("told blocked", prof_masked(), "pthread_sigmask does not report SIGPROF blocked");
  sigprocmask(SIG_BLOCK, NULL, &s1);
  CHECK("told blocked", sigismember(&s1, SIGPROF) == 1, "sigprocmask does not report it");
  CHECK("kernel", kernel_blocks(checker_tid) != 1, "SIGPROF blocked in the kernel while profiling");
  ok("pthread_sigmask and sigprocmask report SIGPROF blocked; the kernel lets it through");

  /* 2. Its own SIGPROF waits until it unblocks it. */
  pthread_kill(pthread_self(), SIGPROF);
  spin(50000000);
  expect_handled("held while blocked", n);
  CHECK("held while blocked", !pending_here(), "pending in the kernel");
  pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
  expect_handled("delivered on unblock", ++n);
#ifdef __linux__
  CHECK("siginfo", atomic_load(&handler_code) == SI_TKILL, "si_code %d, want SI_TKILL",
        atomic_load(&handler_code));
  CHECK("siginfo", atomic_load(&handler_pid) == (int)getpid(), "si_pid %d",
        atomic_load(&handler_pid));
#endif
  ok("pthread_kill to itself: handled only when pthread_sigmask unblocks SIGPROF, before it "
     "returns");

  /* 3. A full mask, as pools set it; a SIGPROF from another thread; a
   * thread created meanwhile inherits the full mask as the program sees it. */
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  CHECK("saved mask", sigismember(&saved, SIGPROF) == 0, "SIGPROF in the saved mask");
  pthread_t child;
  pthread_create(&child, NULL, inherits, NULL);
  pthread_join(child, NULL);
  atomic_store(&step, 1);
  wait_step(2); /* the main thread has sent it */
  spin(100000000);
  expect_handled("held under a full mask", n);
  pthread_sigmask(SIG_SETMASK, &saved, NULL);
  expect_handled("delivered on restoring the saved mask", ++n);
  ok("pthread_kill from another thread: handled only when the saved mask is restored");

  /* 4. Masks saved and restored in nested steps. */
  pthread_sigmask(SIG_BLOCK, &prof, &s1);
  pthread_sigmask(SIG_SETMASK, &all, &s2);
  CHECK("nested", sigismember(&s2, SIGPROF) == 1, "the inner save lost SIGPROF");
  pthread_sigmask(SIG_SETMASK, &s2, NULL);
  CHECK("nested", prof_masked(), "restoring the inner save unblocked SIGPROF");
  pthread_kill(pthread_self(), SIGPROF);
  expect_handled("nested", n);
  pthread_sigmask(SIG_SETMASK, &s1, NULL);
  expect_handled("nested", ++n);
  ok("nested save and restore keep SIGPROF blocked until the outer restore");

  /* 5. sigprocmask alike. */
  sigprocmask(SIG_BLOCK, &prof, &s1);
  pthread_kill(pthread_self(), SIGPROF);
  expect_handled("sigprocmask", n);
  sigprocmask(SIG_SETMASK, &s1, NULL);
  expect_handled("sigprocmask", ++n);
  ok("sigprocmask: held, then handled on unblock");

  /* 6. sigsuspend with a mask that lets SIGPROF through ends with it. */
  sigprocmask(SIG_BLOCK, &prof, &s1);
  pthread_kill(pthread_self(), SIGPROF);
  expect_handled("sigsuspend", n);
  int rc = sigsuspend(&s1);
  CHECK("sigsuspend", rc == -1 && errno == EINTR, "returned %d, errno %d", rc, errno);
  expect_handled("sigsuspend", ++n);
  CHECK("sigsuspend", prof_masked(), "the mask after sigsuspend lost SIGPROF");
  sigprocmask(SIG_SETMASK, &s1, NULL);
  expect_handled("sigsuspend", n);
  ok("sigsuspend: a held SIGPROF ends the wait");

  /* 7. Blocked with one held when the profile stops. */
  pthread_sigmask(SIG_BLOCK, &prof, NULL);
  pthread_kill(pthread_self(), SIGPROF);
  expect_handled("held at stop", n);
  atomic_store(&step, 3);
  wait_step(4); /* the profile has stopped */
  expect_handled("after stop", n);
  /* The next mask call, a query here, gives the kernel the program's mask
   * back, with the held signal pending there. */
  CHECK("after stop", prof_masked(), "SIGPROF not reported blocked");
  CHECK("after stop", kernel_blocks(checker_tid) != 0, "SIGPROF still unblocked in the kernel");
  CHECK("after stop", pending_here(), "the held SIGPROF is not pending");
  expect_handled("after stop", n);
  pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
  expect_handled("after stop", ++n);
  ok("after stop: the next mask call blocks SIGPROF in the kernel, the held one is pending "
     "and handled on unblock");

  /* 8. And then pprt stays out of the way. */
  pthread_sigmask(SIG_BLOCK, &prof, NULL);
  CHECK("no profile", kernel_blocks(checker_tid) != 0, "SIGPROF unblocked in the kernel");
  pthread_kill(pthread_self(), SIGPROF);
  CHECK("no profile", pending_here(), "not pending");
  pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
  expect_handled("no profile", ++n);
  ok("with no profile, masks are the kernel's");
  return NULL;
}

typedef int (*start_fn)(const pprt_cpu_options *, pprt_writer);
typedef int (*stop_fn)(void);
typedef pprt_writer (*writer_fd_fn)(int);

static int semantics(const char *path) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigprof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGPROF, &sa, NULL);
  start_fn start = (start_fn)dlsym(RTLD_DEFAULT, "pprt_cpu_start");
  stop_fn stop = (stop_fn)dlsym(RTLD_DEFAULT, "pprt_cpu_stop");
  writer_fd_fn writer_fd = (writer_fd_fn)dlsym(RTLD_DEFAULT, "pprt_writer_fd");
  CHECK("preloaded", start && stop && writer_fd, "pprt_cpu_start not found: not preloaded?");
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  CHECK("profile", fd >= 0, "cannot open %s", path);
  pprt_cpu_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.hz = 100;
  int rc = start(&o, writer_fd(fd));
  CHECK("start", rc == 0, "pprt_cpu_start: %d", rc);

  pthread_create(&checker, NULL, check, NULL);
  wait_step(1);
  pthread_kill(checker, SIGPROF);
  atomic_store(&step, 2);
  wait_step(3);
  rc = stop();
  CHECK("stop", rc == 0, "pprt_cpu_stop: %d", rc);
  atomic_store(&step, 4);
  pthread_join(checker, NULL);
  close(fd);
  printf("checker tid %llu\n", (unsigned long long)checker_tid);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "workers") == 0) {
    seconds = atof(argv[2]);
    return workers();
  }
  if (argc == 3 && strcmp(argv[1], "semantics") == 0)
    return semantics(argv[2]);
  fprintf(stderr, "usage: %s workers SECONDS | semantics PROFILE\n", argv[0]);
  return 2;
}
