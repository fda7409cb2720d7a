/* How a profiled process ends, when it does not end through exit():
 * termination signals, crashes and _exit. While the preload library has
 * outputs to write, each ending gets them written first, within a bound,
 * and then ends the process the way it would have ended without pprt.
 *
 *   signals   SIGINT, SIGTERM, SIGHUP, SIGQUIT (termination) and SIGSEGV,
 *             SIGBUS, SIGFPE, SIGILL, SIGABRT (crashes) get pprt's handler
 *             where the program left the default action (one it ignores or
 *             handles is left alone). The handler only hands off: one byte
 *             down a pipe to pprt's flusher thread, then it waits (poll on
 *             a second pipe) for at most the bound, puts the default action
 *             back and re-raises, so the parent sees the same signal and
 *             the same core dump. A crash's fault is not raised again: the
 *             handler returns and the faulting instruction faults once
 *             more, under the default action, so the core shows it;
 *   the flusher  pprt's own thread: writes the CPU profile, the heap
 *             profile and the end of the trace (the destructor's work),
 *             and between endings rewrites the heap profile at each
 *             checkpoint. A crash may have left the heap corrupt: if the
 *             flusher or the CPU profiler's reader crashes in turn, its
 *             handler tells the waiting thread the writing is over, and if
 *             it hangs on a lock the bound runs out; either way the crash
 *             goes on;
 *   the program's actions  sigaction and the signal family for these
 *             signals come here (pprt__exits_sigaction): while pprt's
 *             handler stands for the default action the program is told
 *             SIG_DFL, and a handler or SIG_IGN it sets replaces pprt's,
 *             so it decides as without pprt (its exit() then writes the
 *             profiles through the destructor);
 *   _exit     _exit, _Exit and quick_exit (the per-OS exit_*.c files) hand
 *             off the same way before they end the process.
 *
 * A forked child has no outputs (the parent's session is not its own): its
 * inherited handler re-raises at once and its _exit goes straight on.
 *
 * Bounds: PPRT_FLUSH_TIMEOUT seconds for termination signals and _exit
 * (default 5), and the smaller of that and 2 s for crashes; 0 turns the
 * writing at these endings off. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/cpu.h"
#include "core/heap.h"
#include "core/profile.h"
#include "core/sigprof.h"
#include "core/thread.h"
#include "preload/preload.h"

#define MAXSIG 32 /* every signal watched is below it */
#define DEFAULT_TIMEOUT_MS 5000
#define CRASH_TIMEOUT_MS 2000
#define EXIT_REQUEST 0xff /* the byte an _exit sends; a signal sends its number */

static const int kTermination[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
static const int kCrash[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

static pprt__sigaction_fn g_real;        /* libc's sigaction */
static pid_t g_owner;                    /* the process whose outputs these are */
static int g_req[2] = {-1, -1};          /* endings -> flusher */
static int g_done[2] = {-1, -1};         /* flusher -> endings: readable once written */
static atomic_int g_ours[MAXSIG];        /* pprt's handler stands for SIG_DFL */
static struct sigaction g_found[MAXSIG]; /* the default action as found */
static atomic_int g_ending;              /* the first ending that handed off */
static int g_term_ms = DEFAULT_TIMEOUT_MS, g_crash_ms = CRASH_TIMEOUT_MS;
static int g_checkpoint_ms = -1; /* heap checkpoints: -1 none */
static __thread int t_flusher __attribute__((tls_model("initial-exec")));

static int is_crash(int sig) {
  for (size_t i = 0; i < sizeof kCrash / sizeof *kCrash; i++)
    if (kCrash[i] == sig)
      return 1;
  return 0;
}

int pprt__exits_watched(int sig) {
  if (is_crash(sig))
    return 1;
  for (size_t i = 0; i < sizeof kTermination / sizeof *kTermination; i++)
    if (kTermination[i] == sig)
      return 1;
  return 0;
}

/* The comment the profiles get: a literal, so the handler can pick it. */
static const char *ending_note(int sig) {
  switch (sig) {
  case SIGINT:
    return "at SIGINT (termination signal)";
  case SIGTERM:
    return "at SIGTERM (termination signal)";
  case SIGHUP:
    return "at SIGHUP (termination signal)";
  case SIGQUIT:
    return "at SIGQUIT (termination signal)";
  case SIGSEGV:
    return "at a crash (SIGSEGV), best effort";
  case SIGBUS:
    return "at a crash (SIGBUS), best effort";
  case SIGFPE:
    return "at a crash (SIGFPE), best effort";
  case SIGILL:
    return "at a crash (SIGILL), best effort";
  case SIGABRT:
    return "at a crash (SIGABRT, abort), best effort";
  default:
    return "at _exit";
  }
}

/* ---- the hand-off (async-signal-safe) ------------------------------------------------ */

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Waits until the flusher says it is done, at most ms. */
static void wait_done(int ms) {
  uint64_t end = now_ms() + (uint64_t)ms;
  for (;;) {
    uint64_t now = now_ms();
    if (now >= end)
      return;
    struct pollfd p = {g_done[0], POLLIN, 0};
    int rc = poll(&p, 1, (int)(end - now));
    if (rc > 0 || (rc < 0 && errno != EINTR))
      return;
  }
}

/* Hands the ending to the flusher (the first one only) and waits for it.
 * 0 when there is nothing of this process's to write. */
static int hand_off(int code, int ms) {
  if (g_req[1] < 0 || getpid() != g_owner || ms == 0)
    return 0;
  int expected = 0;
  if (atomic_compare_exchange_strong(&g_ending, &expected, code)) {
    pprt__profile_set_ending(ending_note(code));
    unsigned char b = (unsigned char)code;
    ssize_t n = write(g_req[1], &b, 1);
    (void)n;
  }
  wait_done(ms);
  return 1;
}

/* The default action back, and the signal again. */
static void reraise(int sig, const siginfo_t *info) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  g_real(sig, &dfl, NULL);
  if (getpid() == g_owner)
    atomic_store(&g_ours[sig], 0);
  /* A fault the kernel raised recurs as the handler returns, now fatal,
   * and the core shows where it was. */
  if (is_crash(sig) && sig != SIGABRT && info != NULL && info->si_code > 0)
    return;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  raise(sig); /* pending: blocked in its handler */
  pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

static void on_ending(int sig, siginfo_t *info, void *ucontext) {
  (void)ucontext;
  int err = errno;
  if (t_flusher || pprt__cpu_on_reader()) {
    /* One of pprt's threads. A fault of its own (a corrupt heap: the C
     * library's abort, or a bad pointer) while it writes at an ending:
     * the writing is over, and the thread that handed off ends the process
     * with its own signal, as it would have ended without pprt. The same
     * outside an ending (a checkpoint), or a signal sent to the process
     * that the kernel gave this thread, ends the process now. */
    int own = info == NULL || info->si_code > 0 || info->si_pid == getpid();
    if (atomic_load(&g_ending) == 0 || getpid() != g_owner) {
      reraise(sig, info);
    } else if (own) {
      unsigned char b = 0;
      ssize_t n = write(g_done[1], &b, 1);
      (void)n;
      for (;;)
        pause();
    }
    errno = err; /* else: the process is ending already */
    return;
  }
  hand_off(sig, is_crash(sig) ? g_crash_ms : g_term_ms);
  reraise(sig, info);
  errno = err;
}

/* ---- _exit -------------------------------------------------------------------------- */

void pprt__exits_before_exit(void) {
  if (t_flusher)
    return;
  int err = errno;
  hand_off(EXIT_REQUEST, g_term_ms);
  errno = err;
}

/* ---- the flusher --------------------------------------------------------------------- */

static void *flusher_main(void *arg) {
  (void)arg;
  t_flusher = 1;
  pprt__heap_ignore_thread(); /* its allocations are pprt's */
  /* Every signal blocked but the crashes: a fault here must reach
   * on_ending, not end the process by itself under another signal. */
  sigset_t set;
  sigfillset(&set);
  for (size_t i = 0; i < sizeof kCrash / sizeof *kCrash; i++)
    sigdelset(&set, kCrash[i]);
  pthread_sigmask(SIG_SETMASK, &set, NULL);
  for (;;) {
    struct pollfd p = {g_req[0], POLLIN, 0};
    int rc = poll(&p, 1, g_checkpoint_ms);
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc == 0) {
      pprt__preload_heap_checkpoint();
      continue;
    }
    unsigned char b;
    if (rc < 0 || read(g_req[0], &b, 1) != 1)
      return NULL;
    pprt__preload_stop();
    ssize_t n = write(g_done[1], &b, 1);
    (void)n;
    return NULL;
  }
}

/* ---- the program's actions ------------------------------------------------------------ */

int pprt__exits_sigaction(pprt__sigaction_fn real, int sig, const struct sigaction *act,
                          struct sigaction *old) {
  if (sig <= 0 || sig >= MAXSIG || !atomic_load(&g_ours[sig]) || getpid() != g_owner)
    return pprt__sigprof_sigaction(real, sig, act, old);
  struct sigaction was = g_found[sig];
  if (act != NULL && (void (*)(int))act->sa_handler != SIG_DFL) {
    /* The program's own action: pprt steps aside for good. */
    atomic_store(&g_ours[sig], 0);
    if (real(sig, act, NULL) != 0) {
      atomic_store(&g_ours[sig], 1);
      return -1;
    }
  }
  if (old != NULL)
    *old = was;
  return 0;
}

void (*pprt__exits_signal(pprt__sigaction_fn real, int sig, void (*h)(int), int flags))(int) {
  if (h == SIG_ERR) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = h;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  if (!(flags & SA_NODEFER) && sigaddset(&sa.sa_mask, sig) != 0)
    return SIG_ERR; /* EINVAL */
  if (pprt__exits_sigaction(real, sig, &sa, &old) != 0)
    return SIG_ERR;
  return old.sa_handler;
}

/* ---- start ----------------------------------------------------------------------------- */

/* PPRT_FLUSH_TIMEOUT: seconds, 0 to 3600, decimals allowed. */
static void read_timeout(void) {
  const char *v = getenv("PPRT_FLUSH_TIMEOUT");
  if (!v || !*v)
    return;
  char *end;
  errno = 0;
  double s = strtod(v, &end);
  if (errno || end == v || *end != '\0' || !(s >= 0 && s <= 3600)) {
    fprintf(stderr, "pprt: PPRT_FLUSH_TIMEOUT=%s is not a number of seconds (0-3600); using %d\n",
            v, DEFAULT_TIMEOUT_MS / 1000);
    return;
  }
  g_term_ms = (int)(s * 1000);
  g_crash_ms = g_term_ms < CRASH_TIMEOUT_MS ? g_term_ms : CRASH_TIMEOUT_MS;
}

static int make_pipe(int fds[2]) {
  if (pipe(fds) != 0)
    return -1;
  for (int i = 0; i < 2; i++)
    fcntl(fds[i], F_SETFD, FD_CLOEXEC);
  fcntl(fds[1], F_SETFL, O_NONBLOCK); /* a handler never blocks on a write */
  return 0;
}

void pprt__exits_start(int checkpoint_ms) {
  g_real = pprt__preload_real_sigaction();
  if (g_real == NULL)
    return;
  read_timeout();
  g_checkpoint_ms = checkpoint_ms > 0 ? checkpoint_ms : -1;
  if (make_pipe(g_req) != 0 || make_pipe(g_done) != 0) {
    fprintf(stderr, "pprt: pipe: %s; profiles are written at exit() only\n", strerror(errno));
    return;
  }
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pprt__thread_self()->creating_internal = 1; /* not one of the program's */
  pthread_t t;
  int rc = pthread_create(&t, NULL, flusher_main, NULL);
  pprt__thread_self()->creating_internal = 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    fprintf(stderr, "pprt: cannot start a thread: %s; profiles are written at exit() only\n",
            strerror(rc));
    close(g_req[1]);
    g_req[1] = -1;
    return;
  }
  pthread_detach(t);
  g_owner = getpid();

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_ending;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigfillset(&sa.sa_mask);
  for (int sig = 1; sig < MAXSIG; sig++) {
    if (!pprt__exits_watched(sig))
      continue;
    struct sigaction cur;
    /* Only where the program (or what started it: nohup) left SIG_DFL. */
    if (g_real(sig, NULL, &cur) != 0 || (void (*)(int))cur.sa_handler != SIG_DFL ||
        (cur.sa_flags & SA_SIGINFO))
      continue;
    g_found[sig] = cur;
    atomic_store(&g_ours[sig], 1);
    if (g_real(sig, &sa, NULL) != 0)
      atomic_store(&g_ours[sig], 0);
  }
}
