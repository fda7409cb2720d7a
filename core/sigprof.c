/* SIGPROF's action while a CPU profile runs (see sigprof.h).
 *
 * One lock guards the kernel's SIGPROF action together with the program's
 * action that pprt keeps (g_save): pprt's install and restore, the
 * program's sigaction calls and a forward each hold it for a few
 * instructions or one system call, so that a program's call can never land
 * between pprt's install and pprt's taking note of it. The program may call
 * sigaction from a signal handler, and pprt's handler forwards under the
 * lock, so it is a spinlock held with every signal blocked: a thread never
 * meets it held by itself, except in pprt's own sigaction calls (the libc
 * installer goes through the preload library's interposer), which are
 * recognised by the owner and go straight to libc.
 *
 * Divisions: the lock; install, restore, forward; the program's calls;
 * exec; fork. */
#include "core/sigprof.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "core/atfork.h"
#include "core/thread.h"

static pprt__os_sigsave g_save;    /* the program's action; installed: pprt's is in */
static pprt__os_handler g_handler; /* pprt's, to install again after a failed exec */
static pid_t g_pid;                /* the process that installed it (not a vfork child) */
static int g_exec_ignoring;        /* execs under way that installed SIG_IGN */
static __thread int t_exec_ignoring __attribute__((tls_model("initial-exec")));

/* ---- the lock ---------------------------------------------------------------------- */

static atomic_flag g_lock = ATOMIC_FLAG_INIT;
static _Atomic(pprt__thread *) g_owner;

static void lock(sigset_t *saved) {
  sigset_t all;
  sigfillset(&all);
  pprt__os_thread_sigmask(SIG_BLOCK, &all, saved);
  while (atomic_flag_test_and_set_explicit(&g_lock, memory_order_acquire))
    sched_yield(); /* its holder is on another thread, between two instructions or in one call */
  atomic_store_explicit(&g_owner, pprt__thread_self(), memory_order_relaxed);
}

static void unlock(const sigset_t *saved) {
  atomic_store_explicit(&g_owner, NULL, memory_order_relaxed);
  atomic_flag_clear_explicit(&g_lock, memory_order_release);
  pprt__os_thread_sigmask(SIG_SETMASK, saved, NULL);
}

/* In a fork child, whatever another thread of the parent was doing. */
static void fork_child_unlock(void) {
  atomic_store_explicit(&g_owner, NULL, memory_order_relaxed);
  atomic_flag_clear_explicit(&g_lock, memory_order_release);
}

static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

static const pprt__fork_hooks fork_hooks = {NULL, NULL, fork_child_unlock};

static void install_atfork(void) {
  pprt__fork_register(PPRT__FORK_SIGPROF, &fork_hooks);
}

PPRT__FORK_REGISTER_AT_LOAD(g_atfork_once, install_atfork)

void pprt__sigprof_init(void) {
  pthread_once(&g_atfork_once, install_atfork);
}

/* pprt's handler is installed in this process, not in a vfork child that
 * shares its memory (the child has its own actions). Under the lock. */
static int owned(void) {
  return g_save.installed && g_pid == getpid();
}

/* ---- install, restore, forward ----------------------------------------------------- */

int pprt__sigprof_install(pprt__os_handler fn) {
  pprt__sigprof_init();
  sigset_t mask;
  lock(&mask);
  g_handler = fn;
  /* Still in after a restore that failed: keep it and the action saved. */
  int rc = owned() ? 0 : pprt__os_signal_install(SIGPROF, fn, &g_save);
  if (rc == 0)
    g_pid = getpid();
  unlock(&mask);
  return rc;
}

int pprt__sigprof_restore(void) {
  sigset_t mask;
  lock(&mask);
  int rc = pprt__os_signal_restore(SIGPROF, &g_save);
  unlock(&mask);
  return rc;
}

void pprt__sigprof_forward(int sig, siginfo_t *info, void *ucontext) {
  sigset_t mask;
  lock(&mask);
  pprt__os_sigsave now = g_save;
  /* The kernel resets a one-shot action as it delivers the signal. */
  if (g_save.installed && (now.old.sa_flags & SA_RESETHAND) && now.old.sa_handler != SIG_IGN &&
      now.old.sa_handler != SIG_DFL) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    pprt__os_signal_adopt(&g_save, &dfl);
  }
  unlock(&mask);
  /* Outside the lock: the program's handler may call sigaction. */
  pprt__os_signal_forward(&now, sig, info, ucontext);
}

/* ---- the program's calls ------------------------------------------------------------ */

int pprt__sigprof_sigaction(pprt__sigaction_fn real, int sig, const struct sigaction *act,
                            struct sigaction *old) {
  if (sig != SIGPROF || atomic_load_explicit(&g_owner, memory_order_relaxed) == pprt__thread_self())
    return real(sig, act, old);
  int err = errno;
  sigset_t mask;
  lock(&mask);
  int rc = 0;
  if (owned()) {
    struct sigaction was = g_save.old;
    if (act != NULL) {
      struct sigaction want = *act; /* act and old may be the same */
      pprt__os_signal_adopt(&g_save, &want);
    }
    if (old != NULL)
      *old = was;
  } else {
    rc = real(sig, act, old);
    if (rc != 0)
      err = errno;
  }
  unlock(&mask);
  errno = err;
  return rc;
}

/* ---- exec ------------------------------------------------------------------------------ */

void pprt__sigprof_exec_prepare(int (*stop)(void *ctx),
                                int (*own)(const siginfo_t *info, void *ctx), void *ctx) {
  int err = errno;
  /* Blocked before the sources stop: a signal still on its way from them
   * is then taken off below, not delivered (pprt's handler would find no
   * clock of this thread's and forward it to the program). */
  sigset_t prof, before;
  sigemptyset(&prof);
  sigaddset(&prof, SIGPROF);
  if (pprt__os_thread_sigmask(SIG_BLOCK, &prof, &before) != 0) {
    errno = err;
    return;
  }
  int unblock = sigismember(&before, SIGPROF) != 1;
  if (!stop(ctx)) {
    if (unblock)
      pprt__os_thread_sigmask(SIG_UNBLOCK, &prof, NULL);
    errno = err;
    return;
  }

  /* A program that ignores SIGPROF hands SIG_IGN to the image it execs,
   * where pprt's handler would become SIG_DFL. Installing SIG_IGN also
   * discards every pending SIGPROF (POSIX); other threads' ticks are
   * ignored until the exec is done or has failed. */
  sigset_t mask;
  lock(&mask);
  int ignoring = 0;
  if (owned() && g_save.old.sa_handler == SIG_IGN)
    ignoring = pprt__os_signal_restore(SIGPROF, &g_save) == 0;
  else if (!g_save.installed && g_exec_ignoring > 0)
    ignoring = 1; /* another thread's exec installed it */
  if (ignoring) {
    g_exec_ignoring++;
    t_exec_ignoring = 1;
  }
  unlock(&mask);

  /* One of the program's is kept: the kernel keeps one pending instance of
   * a standard signal per thread, so more would merge anyway. The bound
   * stops a sender that never stops. */
  siginfo_t keep;
  int kept = 0;
  for (int i = 0; i < 64 && !ignoring; i++) {
    siginfo_t si;
    if (pprt__os_signal_take(SIGPROF, &si) != 1)
      break;
    if (!kept && !own(&si, ctx)) {
      keep = si;
      kept = 1;
    }
  }
  if (kept)
    pprt__os_signal_resend(SIGPROF, &keep); /* pending: SIGPROF is blocked */
  if (unblock)
    pprt__os_thread_sigmask(SIG_UNBLOCK, &prof, NULL); /* delivered now */
  errno = err;
}

void pprt__sigprof_exec_failed(int running) {
  if (!t_exec_ignoring)
    return;
  int err = errno;
  sigset_t mask;
  lock(&mask);
  t_exec_ignoring = 0;
  /* A profile that stopped meanwhile has nothing to install again; the
   * program's action, SIG_IGN or what it set since, stays. Installing over
   * a profile started since fails with -EBUSY and changes nothing. */
  if (--g_exec_ignoring == 0 && running &&
      pprt__os_signal_install(SIGPROF, g_handler, &g_save) == 0)
    g_pid = getpid();
  unlock(&mask);
  errno = err;
}

/* ---- fork ------------------------------------------------------------------------------- */

void pprt__sigprof_fork_child(void) {
  fork_child_unlock();
  g_exec_ignoring = 0;
  t_exec_ignoring = 0;
  if (g_save.installed)
    pprt__os_signal_restore(SIGPROF, &g_save);
}
