/* SIGPROF and the program's signal masks while a CPU profile runs (see
 * sigmask.h).
 *
 * Per thread, two facts describe SIGPROF: whether the kernel's mask blocks
 * it, and sigprof_lifted, set when the program's mask blocks it but pprt
 * has it unblocked. The program's view of SIGPROF is "kernel blocks it or
 * lifted". The invariants:
 *   - lifted is set only while SIGPROF is unblocked in the kernel, or
 *     about to be, and never the other way round: a SIGPROF the handler
 *     sees on a thread whose program mask blocks it finds lifted set, and
 *     is held rather than given to the program;
 *   - held is set only while lifted is (the handler's test), and is acted
 *     on whenever lifted is cleared: the signal is re-sent, and is then
 *     delivered at once (the program unblocked SIGPROF) or left pending in
 *     the kernel (pprt blocked SIGPROF again for the program).
 *
 * The interposers' bodies are async-signal-safe, as pthread_sigmask and
 * sigprocmask are: a program may call them from its handlers. What is not
 * (the fork handler's registration) is done by pprt__sigmask_init.
 *
 * Divisions: the handler's side (pprt__thread_defer_signal); helpers;
 * the interposers' bodies; lifting and giving back; fork.
 *
 * What pprt does not see (docs/guide.md tells users): masks set with a
 * raw system call or inside the C library (pselect, ppoll and epoll_pwait's
 * temporary masks; posix_spawn, system and popen, which copy the kernel's
 * mask into the child); a handler's sa_mask, which blocks SIGPROF while the
 * handler runs; a mask change inside a handler, which sigreturn undoes. And
 * what it does not do: a program that takes SIGPROF synchronously
 * (sigwait, sigtimedwait, signalfd) with SIGPROF blocked gets only those
 * that arrive while it waits; the others are held until it unblocks
 * SIGPROF, which such a program never does. A program that uses SIGPROF
 * for itself contends with any SIGPROF profiler anyway. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "core/atfork.h"
#include "core/cpu.h"
#include "core/platform.h"
#include "core/sigmask.h"
#include "core/thread.h"

/* ---- the handler's side ---------------------------------------------------------- */

int pprt__thread_defer_signal(int sig, const siginfo_t *info) {
  pprt__thread *t = pprt__thread_self();
  if (sig != SIGPROF || !t->sigprof_lifted)
    return 0;
  /* One held signal, like the kernel's one pending instance of a standard
   * signal: a second one merges with the first. */
  if (!t->sigprof_held) {
    t->sigprof_info.code = info->si_code;
    t->sigprof_info.pid = info->si_pid;
    t->sigprof_info.uid = info->si_uid;
    t->sigprof_info.value = info->si_value;
    atomic_signal_fence(memory_order_release);
    t->sigprof_held = 1;
  }
  return 1;
}

/* ---- helpers ------------------------------------------------------------------------ */

static void sigprof_only(sigset_t *s) {
  sigemptyset(s);
  sigaddset(s, SIGPROF);
}

/* SIGPROF's bit of the kernel's mask, without the preload library's
 * interposer in the way. */
static void kernel_block(int block) {
  sigset_t s;
  sigprof_only(&s);
  pprt__os_thread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &s, NULL);
}

static int kernel_blocks(void) {
  sigset_t cur;
  return pprt__os_thread_sigmask(SIG_BLOCK, NULL, &cur) == 0 && sigismember(&cur, SIGPROF) == 1;
}

/* Re-sends a held SIGPROF. The caller has cleared lifted: the signal is
 * delivered now if the kernel lets SIGPROF through, else left pending. */
static void send_held(pprt__thread *t) {
  if (!t->sigprof_held)
    return;
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_signo = SIGPROF;
  si.si_code = t->sigprof_info.code;
  si.si_pid = t->sigprof_info.pid;
  si.si_uid = t->sigprof_info.uid;
  si.si_value = t->sigprof_info.value;
  atomic_signal_fence(memory_order_acquire);
  t->sigprof_held = 0;
  pprt__os_signal_resend(SIGPROF, &si);
}

static void set_lifted(pprt__thread *t) {
  t->sigprof_lifted = 1;
  atomic_signal_fence(memory_order_seq_cst);
}

/* No profile runs: the kernel gets the program's mask back (SIGPROF
 * blocked), and a held SIGPROF becomes pending there. */
static void settle(pprt__thread *t) {
  kernel_block(1);
  t->sigprof_lifted = 0;
  atomic_signal_fence(memory_order_seq_cst);
  send_held(t);
}

/* ---- the interposers' bodies --------------------------------------------------------- */

int pprt__sigmask_change(pprt__sigmask_fn real, int how, const sigset_t *set, sigset_t *old) {
  pprt__thread *t = pprt__thread_self();
  int active = pprt__cpu_running();
  if (!active) {
    if (!t->sigprof_lifted)
      return real(how, set, old); /* the common case: pprt is not involved */
    int saved = errno;
    settle(t);
    errno = saved;
    return real(how, set, old);
  }
  if (set == NULL) {
    int rc = real(how, NULL, old);
    if (rc == 0 && old != NULL && t->sigprof_lifted)
      sigaddset(old, SIGPROF);
    return rc;
  }
  if (how != SIG_BLOCK && how != SIG_UNBLOCK && how != SIG_SETMASK)
    return real(how, set, old); /* libc's EINVAL */

  /* The program's SIGPROF after the call: 1 blocked, 0 not, -1 as before. */
  sigset_t want = *set; /* set may be old too */
  int names = sigismember(&want, SIGPROF) == 1;
  int wish = how == SIG_SETMASK ? names : names ? how == SIG_BLOCK : -1;
  int lifted_before = t->sigprof_lifted;
  int saved = errno;
  if (wish == 1) {
    /* Lifted before the call: a SIGPROF the kernel held back until now,
     * released by a SIG_SETMASK, is held by pprt, not delivered. */
    set_lifted(t);
    sigdelset(&want, SIGPROF);
  }
  sigset_t kold;
  int rc = real(how, &want, &kold);
  if (rc != 0) {
    t->sigprof_lifted = lifted_before;
    return rc;
  }
  int kernel_blocked = sigismember(&kold, SIGPROF) == 1;
  if (old != NULL) {
    *old = kold;
    if (lifted_before)
      sigaddset(old, SIGPROF);
  }
  int blocked_now = wish >= 0 ? wish : lifted_before || kernel_blocked;
  if (blocked_now) {
    /* A thread pprt had not seen (started before the profile, or not
     * through pthread_create) may still have SIGPROF blocked: SIG_SETMASK
     * unblocked it, the other two left it as it was. */
    set_lifted(t);
    if (kernel_blocked && how != SIG_SETMASK)
      kernel_block(0);
  } else {
    t->sigprof_lifted = 0;
    atomic_signal_fence(memory_order_seq_cst);
    send_held(t); /* delivered before we return, as the kernel would */
  }
  errno = saved;
  return 0;
}

int pprt__sigmask_suspend(pprt__sigsuspend_fn real, const sigset_t *mask) {
  pprt__thread *t = pprt__thread_self();
  if (t->sigprof_lifted && !pprt__cpu_running()) {
    int saved = errno;
    settle(t);
    errno = saved;
  }
  /* Only a wait that lets SIGPROF through while the program's mask blocks
   * it needs pprt: a held SIGPROF must end it, and one arriving during it
   * must reach the program. Blocked in the kernel meanwhile, so that
   * nothing is delivered between the check and the wait, which the kernel
   * makes one step. */
  if (!t->sigprof_lifted || mask == NULL || sigismember(mask, SIGPROF) == 1)
    return real(mask);
  kernel_block(1);
  t->sigprof_lifted = 0;
  atomic_signal_fence(memory_order_seq_cst);
  send_held(t); /* pending: the wait takes it at once */
  int rc = real(mask);
  int err = errno;
  /* The kernel's mask is back to the one above, SIGPROF blocked. */
  set_lifted(t);
  kernel_block(0);
  errno = err;
  return rc;
}

/* ---- lifting and giving back ------------------------------------------------------- */

void pprt__sigmask_lift(void) {
  if (!pprt__cpu_running())
    return;
  pprt__sigmask_init();
  pprt__thread *t = pprt__thread_self();
  int saved = errno;
  if (kernel_blocks()) {
    set_lifted(t); /* first: a SIGPROF pending until now is held */
    kernel_block(0);
  }
  errno = saved;
}

void pprt__sigmask_give_back(void) {
  pprt__thread *t = pprt__thread_self();
  if (!t->sigprof_lifted)
    return;
  int saved = errno;
  settle(t);
  errno = saved;
}

int pprt__sigmask_block_wished(int move_held) {
  pprt__thread *t = pprt__thread_self();
  if (!t->sigprof_lifted)
    return 0;
  int saved = errno;
  if (!pprt__cpu_running()) {
    settle(t); /* for good: nothing to undo */
    errno = saved;
    return 0;
  }
  kernel_block(1);
  if (move_held) {
    /* Pending in the kernel now; if the exec fails, unblocking delivers
     * it to the handler, which holds it again. */
    send_held(t);
  }
  errno = saved;
  return 1;
}

void pprt__sigmask_unblock_lifted(int blocked) {
  if (!blocked)
    return;
  int saved = errno;
  kernel_block(0);
  errno = saved;
}

/* ---- fork -------------------------------------------------------------------------- */

/* The child has no profile: the kernel gets the program's mask back at
 * once, and nothing is held, since a child starts with no pending
 * signals. */
static void atfork_child(void) {
  pprt__thread *t = pprt__thread_self();
  if (!t->sigprof_lifted)
    return;
  kernel_block(1);
  t->sigprof_lifted = 0;
  t->sigprof_held = 0;
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static const pprt__fork_hooks fork_hooks = {NULL, NULL, atfork_child};

static void install_atfork(void) {
  pprt__fork_register(PPRT__FORK_SIGMASK, &fork_hooks);
}

PPRT__FORK_REGISTER_AT_LOAD(atfork_once, install_atfork)

void pprt__sigmask_init(void) {
  pthread_once(&atfork_once, install_atfork);
}
