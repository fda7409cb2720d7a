/* Tests of the platform contract's signal path, with real signals: installing
 * and restoring the handler (raw rt_sigaction or libc sigaction, whichever
 * this build uses), forwarding, alternate stacks, the registers and memory
 * probe the unwinder uses, the process and per-thread CPU timers and where a
 * SIGPROF came from, and the thread list, names and stack bounds.
 *
 * Divisions: helpers; install, restore, forward; alternate stacks; context
 * and memory; timers; threads. Each test leaves SIGPROF at SIG_DFL and the
 * thread's alternate stack as it found it. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#if defined(__FreeBSD__)
#include <pthread_np.h>
#endif
/* backtrace() is glibc's (libgcc's unwinder); FreeBSD keeps it in
 * libexecinfo, musl has none. */
#if defined(PPRT_TEST_RAW_SIGACTION) && defined(__GLIBC__)
#define PPRT_TEST_UNWIND 1
#include <execinfo.h>
#endif

#include <cmocka.h>

#include "core/platform.h"
#include "tests/workload.h"

/* ---- helpers ----------------------------------------------------------------- */

/* A signal far from SIGPROF, to see that the whole set is blocked. */
#if defined(SIGRTMIN)
#define FAR_SIGNAL (SIGRTMIN + 1)
#else
#define FAR_SIGNAL SIGUSR2 /* Darwin has no real-time signals */
#endif

static pprt__os_sigsave save;

/* What the last handler invocation saw. */
static struct {
  atomic_int calls;
  int sig;
  int signo;
  int code;
  pid_t pid;
  int had_ucontext;
  uintptr_t local; /* the address of a local variable of the handler */
  int regs_rc;
  pprt__os_regs regs;
  sigset_t mask;         /* the signal mask while the handler ran */
  int usr1_calls_during; /* SIGUSR1 handler runs seen while inside */
} seen;

static void on_sigprof(int sig, siginfo_t *info, void *uc) {
  volatile char here = 0;
  seen.sig = sig;
  seen.signo = info->si_signo;
  seen.code = info->si_code;
  seen.pid = info->si_pid;
  seen.had_ucontext = uc != NULL;
  seen.local = (uintptr_t)&here;
  seen.regs_rc = pprt__os_context_regs(uc, &seen.regs);
  pthread_sigmask(SIG_SETMASK, NULL, &seen.mask);
  atomic_fetch_add(&seen.calls, 1);
}

static void reset_seen(void) {
  memset(&seen, 0, sizeof seen);
}

static void set_action(int sig, void (*handler)(int), int flags) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(sig, &sa, NULL), 0);
}

static struct sigaction query(int sig) {
  struct sigaction sa;
  assert_int_equal(sigaction(sig, NULL, &sa), 0);
  return sa;
}

/* Each test starts and ends with SIGPROF at SIG_DFL and nothing installed. */
static int reset_sigprof(void **state) {
  (void)state;
  if (save.installed)
    pprt__os_signal_restore(SIGPROF, &save);
  memset(&save, 0, sizeof save);
  set_action(SIGPROF, SIG_DFL, 0);
  reset_seen();
  return 0;
}

/* Whether pc is in the code of fn (a TEST_WORKLOAD function): the symbol
 * that covers pc starts at fn. By address, not name: a name is only what
 * the compiler left in the symbol table. */
static int pc_in(pprt__os_symbolizer *sym, uintptr_t pc, uintptr_t fn) {
  const char *name;
  uintptr_t off;
  return pprt__os_symbolize(sym, pc, &name, &off) == 0 && pc - off == fn;
}

/* ---- install, restore, forward ------------------------------------------------- */

static void test_install_delivers_siginfo(void **state) {
  (void)state;
  assert_int_equal(pprt__os_signal_install(SIGPROF, on_sigprof, &save), 0);
  assert_int_equal(save.installed, 1);

  struct sigaction now = query(SIGPROF);
  assert_true(now.sa_flags & SA_SIGINFO);
  assert_true(now.sa_flags & SA_ONSTACK);
  assert_true(now.sa_flags & SA_RESTART);
  assert_ptr_equal((void *)now.sa_sigaction, (void *)on_sigprof);
  assert_int_equal(sigismember(&now.sa_mask, SIGUSR1), 1);
  assert_int_equal(sigismember(&now.sa_mask, SIGINT), 1);
  assert_int_equal(sigismember(&now.sa_mask, FAR_SIGNAL), 1);

  assert_int_equal(raise(SIGPROF), 0);
  assert_int_equal(atomic_load(&seen.calls), 1);
  assert_int_equal(seen.sig, SIGPROF);
  assert_int_equal(seen.signo, SIGPROF);
  assert_true(seen.code <= 0); /* sent by a user, not by the kernel */
  assert_int_equal(seen.pid, getpid());
  assert_true(seen.had_ucontext);

  /* The handler returns through the restorer: the program carries on, and
   * a second signal is handled the same way. */
  assert_int_equal(raise(SIGPROF), 0);
  assert_int_equal(atomic_load(&seen.calls), 2);

  assert_int_equal(pprt__os_signal_restore(SIGPROF, &save), 0);
  assert_int_equal(save.installed, 0);
}

static atomic_int prev_plain_calls, prev_info_calls;
static int prev_info_sig;
static siginfo_t *prev_info_info;
static void *prev_info_uc;

static void prev_plain(int sig) {
  (void)sig;
  atomic_fetch_add(&prev_plain_calls, 1);
}

static void prev_info(int sig, siginfo_t *info, void *uc) {
  prev_info_sig = sig;
  prev_info_info = info;
  prev_info_uc = uc;
  atomic_fetch_add(&prev_info_calls, 1);
}

/* The previous action, saved, forwarded to in its own form, and put back
 * exactly: handler, flags (with libc's SA_RESTORER) and mask. */
static void check_previous_kept(const struct sigaction *before) {
  assert_int_equal(pprt__os_signal_install(SIGPROF, on_sigprof, &save), 0);
  assert_ptr_equal((void *)save.old.sa_handler, (void *)before->sa_handler);
  assert_int_equal(save.old.sa_flags, before->sa_flags);

  siginfo_t info;
  memset(&info, 0, sizeof info);
  int uc_dummy;
  atomic_store(&prev_plain_calls, 0);
  atomic_store(&prev_info_calls, 0);
  pprt__os_signal_forward(&save, SIGPROF, &info, &uc_dummy);
  if (before->sa_flags & SA_SIGINFO) {
    assert_int_equal(atomic_load(&prev_info_calls), 1);
    assert_int_equal(prev_info_sig, SIGPROF);
    assert_ptr_equal(prev_info_info, &info);
    assert_ptr_equal(prev_info_uc, &uc_dummy);
    assert_int_equal(atomic_load(&prev_plain_calls), 0);
  } else {
    assert_int_equal(atomic_load(&prev_plain_calls), 1);
    assert_int_equal(atomic_load(&prev_info_calls), 0);
  }

  assert_int_equal(pprt__os_signal_restore(SIGPROF, &save), 0);
  struct sigaction after = query(SIGPROF);
  assert_ptr_equal((void *)after.sa_handler, (void *)before->sa_handler);
  assert_int_equal(after.sa_flags, before->sa_flags);
  for (int s = 1; s <= 64; s++) /* -1 on both sides past the OS's last */
    assert_int_equal(sigismember(&after.sa_mask, s), sigismember(&before->sa_mask, s));

  /* And the kernel runs it again, returning through its own restorer. */
  raise(SIGPROF);
  if (before->sa_flags & SA_SIGINFO)
    assert_int_equal(atomic_load(&prev_info_calls), 2);
  else
    assert_int_equal(atomic_load(&prev_plain_calls), 2);
}

/* A previous action installed with plain sigaction, in either form. */
static void check_previous_kept_from(void (*plain)(int), void (*info)(int, siginfo_t *, void *),
                                     int flags, int masked) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  if (info != NULL)
    sa.sa_sigaction = info;
  else
    sa.sa_handler = plain;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, masked);
  assert_int_equal(sigaction(SIGPROF, &sa, NULL), 0);
  struct sigaction before = query(SIGPROF);
  check_previous_kept(&before);
}

static void test_previous_plain_handler_kept(void **state) {
  (void)state;
  check_previous_kept_from(prev_plain, NULL, SA_RESTART, SIGUSR2);
}

static void test_previous_siginfo_handler_kept(void **state) {
  (void)state;
  check_previous_kept_from(NULL, prev_info, SA_SIGINFO | SA_NODEFER, SIGTERM);
}

/* Go issue 19320: after pprt, SIGPROF is ignored rather than fatal. The
 * saved action stays SIG_DFL: it is what the program is told it has. */
static void test_default_action_comes_back_ignored(void **state) {
  (void)state;
  assert_ptr_equal((void *)query(SIGPROF).sa_handler, (void *)SIG_DFL);
  assert_int_equal(pprt__os_signal_install(SIGPROF, on_sigprof, &save), 0);
  assert_ptr_equal((void *)save.old.sa_handler, (void *)SIG_DFL);
  pprt__os_signal_forward(&save, SIGPROF, NULL, NULL); /* does nothing */
  assert_int_equal(pprt__os_signal_restore(SIGPROF, &save), 0);
  assert_ptr_equal((void *)query(SIGPROF).sa_handler, (void *)SIG_IGN);
  assert_int_equal(raise(SIGPROF), 0); /* would end the test run if fatal */
}

/* An action the program sets while pprt's is installed: forwarded to, and
 * installed at restore in a form the kernel can return from (libc's
 * restorer, where the raw installer would otherwise have none). */
static void test_adopted_action(void **state) {
  (void)state;
  assert_int_equal(pprt__os_signal_install(SIGPROF, on_sigprof, &save), 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = prev_info;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGUSR2);
  pprt__os_signal_adopt(&save, &sa);
  assert_int_equal(save.installed, 1);
  assert_ptr_equal((void *)query(SIGPROF).sa_sigaction, (void *)on_sigprof); /* still pprt's */

  atomic_store(&prev_info_calls, 0);
  siginfo_t info;
  memset(&info, 0, sizeof info);
  pprt__os_signal_forward(&save, SIGPROF, &info, NULL);
  assert_int_equal(atomic_load(&prev_info_calls), 1);

  assert_int_equal(pprt__os_signal_restore(SIGPROF, &save), 0);
  struct sigaction after = query(SIGPROF);
  assert_ptr_equal((void *)after.sa_sigaction, (void *)prev_info);
  assert_true(after.sa_flags & SA_SIGINFO);
  assert_true(after.sa_flags & SA_RESTART);
  assert_int_equal(sigismember(&after.sa_mask, SIGUSR2), 1);
  raise(SIGPROF); /* handled, and returned from */
  raise(SIGPROF);
  assert_int_equal(atomic_load(&prev_info_calls), 3);

  /* Adopted SIG_DFL comes back as SIG_IGN, as a saved one does. */
  assert_int_equal(pprt__os_signal_install(SIGPROF, on_sigprof, &save), 0);
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  pprt__os_signal_adopt(&save, &sa);
  assert_int_equal(pprt__os_signal_restore(SIGPROF, &save), 0);
  assert_ptr_equal((void *)query(SIGPROF).sa_handler, (void *)SIG_IGN);
}

/* A pending signal taken off without running a handler: both a thread's
 * and the process's; none left. */
static void test_signal_take(void **state) {
  (void)state;
  assert_int_equal(pprt__os_signal_install(SIGPROF, on_sigprof, &save), 0);
  sigset_t prof, old;
  sigemptyset(&prof);
  sigaddset(&prof, SIGPROF);
  pthread_sigmask(SIG_BLOCK, &prof, &old);
  siginfo_t info;
  int rc = pprt__os_signal_take(SIGPROF, &info);
  if (rc == -ENOTSUP) {
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    print_message("no way to take a pending signal on this OS\n");
    return;
  }
  assert_int_equal(rc, 0);
  pthread_kill(pthread_self(), SIGPROF);
  kill(getpid(), SIGPROF);
  int taken = 0;
  while (pprt__os_signal_take(SIGPROF, &info) == 1) {
    assert_int_equal(info.si_signo, SIGPROF);
    taken++;
  }
  assert_int_equal(taken, 2);
  sigset_t pending;
  sigpending(&pending);
  assert_int_equal(sigismember(&pending, SIGPROF), 0);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  assert_int_equal(atomic_load(&seen.calls), 0);
}

static void test_install_errors(void **state) {
  (void)state;
  assert_int_equal(pprt__os_signal_install(SIGPROF, on_sigprof, &save), 0);
  pprt__os_sigsave copy = save;
  assert_int_equal(pprt__os_signal_install(SIGPROF, on_sigprof, &save), -EBUSY);
  assert_memory_equal(&copy, &save, sizeof save); /* the saved action is intact */
  assert_int_equal(pprt__os_signal_restore(SIGPROF, &save), 0);
  assert_int_equal(pprt__os_signal_restore(SIGPROF, &save), 0); /* again: nothing to do */
  assert_ptr_equal((void *)query(SIGPROF).sa_handler, (void *)SIG_IGN);

  pprt__os_sigsave other;
  memset(&other, 0, sizeof other);
  assert_int_equal(pprt__os_signal_install(SIGKILL, on_sigprof, &other), -EINVAL);
  assert_int_equal(other.installed, 0);
}

static atomic_int order;
static int usr1_at, prof_end_at;

static void on_usr1(int sig) {
  (void)sig;
  usr1_at = atomic_fetch_add(&order, 1);
}

static void on_sigprof_raising_usr1(int sig, siginfo_t *info, void *uc) {
  on_sigprof(sig, info, uc);
  raise(SIGUSR1); /* blocked: runs after this handler returns */
  seen.usr1_calls_during = usr1_at != 0;
  prof_end_at = atomic_fetch_add(&order, 1);
}

/* Every signal is blocked while pprt's handler runs. */
static void test_signals_blocked_in_handler(void **state) {
  (void)state;
  set_action(SIGUSR1, on_usr1, 0);
  atomic_store(&order, 1);
  usr1_at = 0;
  assert_int_equal(pprt__os_signal_install(SIGPROF, on_sigprof_raising_usr1, &save), 0);
  raise(SIGPROF);
  assert_int_equal(atomic_load(&seen.calls), 1);
  assert_int_equal(seen.usr1_calls_during, 0);
  assert_int_equal(prof_end_at, 1);
  assert_int_equal(usr1_at, 2);
  assert_int_equal(sigismember(&seen.mask, SIGUSR1), 1);
  assert_int_equal(sigismember(&seen.mask, SIGTERM), 1);
  assert_int_equal(sigismember(&seen.mask, SIGPROF), 1);
  assert_int_equal(sigismember(&seen.mask, FAR_SIGNAL), 1);
  set_action(SIGUSR1, SIG_DFL, 0);
}

/* A handler that unwinds with libgcc (backtrace) through the signal frame:
 * the unwind information of pprt's restorer (raw rt_sigaction builds) must
 * lead back to the code that was interrupted, here the function that
 * raised. Elsewhere the trampoline is libc's or the kernel's (or, under
 * qemu-user, qemu's, which libgcc cannot step through): not pprt's to test. */
#if defined(PPRT_TEST_UNWIND)
static void *bt[64];
static int bt_n;

static void on_sigprof_backtrace(int sig, siginfo_t *info, void *uc) {
  (void)sig;
  (void)info;
  (void)uc;
  bt_n = backtrace(bt, 64);
}

TEST_WORKLOAD static int raise_from_here(void) {
  int r = raise(SIGPROF);
  __asm__ volatile("" ::: "memory"); /* not a tail call */
  return r;
}

TEST_WORKLOAD static void test_unwind_through_signal_frame(void **state) {
  (void)state;
  void *warm[4];
  backtrace(warm, 4); /* the first call loads libgcc_s: not in a handler */
  assert_int_equal(pprt__os_signal_install(SIGPROF, on_sigprof_backtrace, &save), 0);
  bt_n = 0;
  assert_int_equal(raise_from_here(), 0);
  assert_true(bt_n > 2);

  pprt__os_symbolizer *sym;
  assert_int_equal(pprt__os_symbolizer_open(&sym), 0);
  int found_raiser = 0, found_test = 0;
  for (int i = 0; i < bt_n; i++) {
    found_raiser |= pc_in(sym, (uintptr_t)bt[i], (uintptr_t)&raise_from_here);
    found_test |= pc_in(sym, (uintptr_t)bt[i], (uintptr_t)&test_unwind_through_signal_frame);
  }
  pprt__os_symbolizer_close(sym);
  assert_true(found_raiser);
  assert_true(found_test);
}
#else
static void test_unwind_through_signal_frame(void **state) {
  (void)state;
  skip();
}
#endif

/* ---- alternate stacks -------------------------------------------------------------- */

/* The test thread's own alternate stack (a sanitizer installs one), put
 * aside so each test starts without one. */
static stack_t outer_altstack;

static int altstack_aside(void **state) {
  (void)state;
  reset_sigprof(state);
  assert_int_equal(sigaltstack(NULL, &outer_altstack), 0);
  stack_t off;
  memset(&off, 0, sizeof off);
  off.ss_flags = SS_DISABLE;
  assert_int_equal(sigaltstack(&off, NULL), 0);
  return 0;
}

static int altstack_back(void **state) {
  stack_t back = outer_altstack;
  if (!(back.ss_flags & SS_DISABLE)) {
    back.ss_flags = 0;
    sigaltstack(&back, NULL);
  }
  return reset_sigprof(state);
}

static stack_t current_altstack(void) {
  stack_t ss;
  assert_int_equal(sigaltstack(NULL, &ss), 0);
  return ss;
}

static void test_altstack_installed_and_used(void **state) {
  (void)state;
  pprt__os_altstack st;
  assert_int_equal(pprt__os_altstack_ensure(&st), 0);
  assert_non_null(st.mem);
  stack_t ss = current_altstack();
  assert_false(ss.ss_flags & SS_DISABLE);
  assert_true(ss.ss_size >= PPRT__OS_ALTSTACK_SIZE);
  uintptr_t lo = (uintptr_t)ss.ss_sp, hi = lo + ss.ss_size;
  assert_true(lo > (uintptr_t)st.mem && hi <= (uintptr_t)st.mem + st.size);

  /* The guard page below the stack is not readable. */
  assert_int_equal(pprt__os_readable(lo - 64), 0);
  assert_int_equal(pprt__os_readable(lo), 1);

  assert_int_equal(pprt__os_signal_install(SIGPROF, on_sigprof, &save), 0);
  volatile char outside = 0;
  raise(SIGPROF);
  assert_int_equal(atomic_load(&seen.calls), 1);
  assert_true(seen.local >= lo && seen.local < hi); /* the handler ran on it */
  /* The interrupted stack pointer is on the thread's own stack, near here. */
  uintptr_t tlo, thi;
  assert_int_equal(pprt__os_thread_stack(&tlo, &thi), 0);
  assert_true(seen.regs.sp >= tlo && seen.regs.sp < thi);
  assert_true(seen.regs.sp < (uintptr_t)&outside);
  (void)outside;

  pprt__os_altstack_release(&st);
  assert_null(st.mem);
  assert_true(current_altstack().ss_flags & SS_DISABLE);
}

/* A program's own alternate stack of `size` bytes: kept when it is large
 * enough, else replaced by pprt's and put back by release. */
static void check_user_altstack(char *mem, size_t size, int replaced) {
  stack_t mine = {.ss_sp = mem, .ss_size = size, .ss_flags = 0};
  assert_int_equal(sigaltstack(&mine, NULL), 0);
  pprt__os_altstack st;
  assert_int_equal(pprt__os_altstack_ensure(&st), 0);
  stack_t during = current_altstack();
  if (replaced) {
    assert_non_null(st.mem);
    assert_true(during.ss_sp != mem && during.ss_size >= PPRT__OS_ALTSTACK_SIZE);
  } else {
    assert_null(st.mem);
    assert_ptr_equal(during.ss_sp, mem);
  }
  pprt__os_altstack_release(&st);
  stack_t after = current_altstack();
  assert_ptr_equal(after.ss_sp, mem);
  assert_int_equal(after.ss_size, size);
  assert_false(after.ss_flags & SS_DISABLE);
}

static void test_altstack_large_user_stack_kept(void **state) {
  (void)state;
  static char large[64 * 1024];
  check_user_altstack(large, sizeof large, 0);
}

static void test_altstack_small_user_stack_replaced_and_restored(void **state) {
  (void)state;
  static char small[8 * 1024];
  check_user_altstack(small, sizeof small, 1);
}

/* A stack that was replaced after pprt installed its own is not touched. */
static void test_altstack_release_leaves_a_newer_stack(void **state) {
  (void)state;
  pprt__os_altstack st;
  assert_int_equal(pprt__os_altstack_ensure(&st), 0);
  static char other[40 * 1024];
  stack_t theirs = {.ss_sp = other, .ss_size = sizeof other, .ss_flags = 0};
  assert_int_equal(sigaltstack(&theirs, NULL), 0);
  void *mem = st.mem;
  size_t size = st.size;
  pprt__os_altstack_release(&st);
  assert_ptr_equal(current_altstack().ss_sp, other);
  munmap(mem, size); /* what release left mapped, in case it comes back */
}

/* ---- context and memory --------------------------------------------------------- */

static void test_context_regs_from_raise(void **state) {
  (void)state;
  assert_int_equal(pprt__os_signal_install(SIGPROF, on_sigprof, &save), 0);
  raise(SIGPROF);
  assert_int_equal(seen.regs_rc, 0);
  /* raise stopped in libc's text: an address some loaded object owns. */
  Dl_info dl;
  assert_true(dladdr((void *)seen.regs.pc, &dl) != 0);
  assert_non_null(dl.dli_fname);
  uintptr_t lo, hi;
  assert_int_equal(pprt__os_thread_stack(&lo, &hi), 0);
  assert_true(seen.regs.sp >= lo && seen.regs.sp < hi);
  assert_true(pprt__os_readable(seen.regs.sp));
}

static void test_readable(void **state) {
  (void)state;
  static const long global = 42;
  long local = 7;
  errno = 1234;
  assert_int_equal(pprt__os_readable((uintptr_t)&local), 1);
  assert_int_equal(errno, 1234);
  assert_int_equal(pprt__os_readable((uintptr_t)&global), 1);
  assert_int_equal(pprt__os_readable((uintptr_t)test_readable), 1);
  assert_int_equal(pprt__os_readable(0), 0);
  assert_int_equal(errno, 1234);
  assert_int_equal(pprt__os_readable(0x1000), 0);
  assert_int_equal(pprt__os_readable(UINTPTR_MAX - 2), 0);

  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char *two = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
  assert_true(two != MAP_FAILED);
  assert_int_equal(munmap(two + page, page), 0);
  uintptr_t end = (uintptr_t)two + page;
  assert_int_equal(pprt__os_readable(end - sizeof(uintptr_t)), 1);     /* last word */
  assert_int_equal(pprt__os_readable(end - sizeof(uintptr_t) / 2), 0); /* straddles */
  assert_int_equal(pprt__os_readable(end), 0);
  assert_int_equal(pprt__os_readable(end + 64), 0);
  assert_int_equal(mprotect(two, page, PROT_NONE), 0);
  assert_int_equal(pprt__os_readable((uintptr_t)two + 64), 0);
  assert_int_equal(munmap(two, page), 0);
  assert_int_equal(pprt__os_readable((uintptr_t)two + 64), 0);
  assert_int_equal(errno, 1234);
}

/* ---- timers --------------------------------------------------------------------- */

#define COOKIE ((uintptr_t)0x5eed5eedu)
#define MAX_PCS 512

/* What the timer tests' handler counts, per thread and per source. */
static struct {
  _Atomic uint64_t tid_a, tid_b;
  atomic_int on_a, on_b, on_other_thread;
  atomic_int thread_timer, process_timer, other, wrong_cookie_not_other;
  atomic_int first_seen;
  struct timespec first_cpu; /* thread a's CPU time at its first signal */
  atomic_int npcs;
  uintptr_t pcs[MAX_PCS];
} tick;

static void on_tick(int sig, siginfo_t *info, void *uc) {
  (void)sig;
  uint64_t me = pprt__os_thread_id();
  if (me == atomic_load(&tick.tid_a)) {
    if (atomic_fetch_add(&tick.on_a, 1) == 0) {
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &tick.first_cpu);
      atomic_store(&tick.first_seen, 1);
    }
  } else if (me == atomic_load(&tick.tid_b)) {
    atomic_fetch_add(&tick.on_b, 1);
  } else {
    atomic_fetch_add(&tick.on_other_thread, 1);
  }
  switch (pprt__os_sigprof_source(info, COOKIE)) {
  case PPRT__OS_SIGPROF_THREAD_TIMER:
    atomic_fetch_add(&tick.thread_timer, 1);
    break;
  case PPRT__OS_SIGPROF_PROCESS_TIMER:
    atomic_fetch_add(&tick.process_timer, 1);
    break;
  default:
    atomic_fetch_add(&tick.other, 1);
  }
  if (pprt__os_sigprof_source(info, COOKIE + 1) != PPRT__OS_SIGPROF_OTHER &&
      info->si_code == SI_TIMER)
    atomic_fetch_add(&tick.wrong_cookie_not_other, 1);
  pprt__os_regs regs;
  if (pprt__os_context_regs(uc, &regs) == 0) {
    int i = atomic_fetch_add(&tick.npcs, 1);
    if (i < MAX_PCS)
      tick.pcs[i] = regs.pc;
  }
}

static void reset_tick(void) {
  memset(&tick, 0, sizeof tick);
}

static atomic_int spinners_stop;

/* Burns CPU until told to stop; the timers' signals should land in here. */
TEST_WORKLOAD static void spin_until_stopped(volatile uint64_t *counter) {
  while (!atomic_load_explicit(&spinners_stop, memory_order_relaxed))
    (*counter)++;
}

typedef struct spinner {
  pthread_t thread;
  _Atomic uint64_t tid;
  struct timespec cpu_start; /* its CPU time just before it starts spinning */
  volatile uint64_t counter;
} spinner;

static void *spin_main(void *arg) {
  spinner *s = arg;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &s->cpu_start);
  atomic_store(&s->tid, pprt__os_thread_id());
  spin_until_stopped(&s->counter);
  return NULL;
}

static void start_spinner(spinner *s) {
  memset(s, 0, sizeof *s);
  assert_int_equal(pthread_create(&s->thread, NULL, spin_main, s), 0);
  while (atomic_load(&s->tid) == 0)
    sched_yield();
}

static void stop_spinners(spinner *s, int n) {
  atomic_store(&spinners_stop, 1);
  for (int i = 0; i < n; i++)
    pthread_join(s[i].thread, NULL);
  atomic_store(&spinners_stop, 0);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* Skips the calling test where the OS has only the process timer. Call it
 * with pprt's handler installed: the probe's timer may fire. */
static void skip_without_thread_timers(void) {
  pprt__os_thread_timer t = {0, 0};
  int rc = pprt__os_thread_timer_start(&t, pprt__os_thread_id(), 100, COOKIE);
  if (rc == -ENOTSUP)
    skip();
  assert_int_equal(rc, 0);
  assert_int_equal(pprt__os_thread_timer_stop(&t), 0);
}

static void test_thread_timer_targets_one_thread(void **state) {
  (void)state;
  pprt__os_thread_timer t = {0, 0};
  assert_int_equal(pprt__os_signal_install(SIGPROF, on_tick, &save), 0);
  skip_without_thread_timers();
  reset_tick();
  spinner sp[2];
  start_spinner(&sp[0]);
  start_spinner(&sp[1]);
  atomic_store(&tick.tid_a, atomic_load(&sp[0].tid));
  atomic_store(&tick.tid_b, atomic_load(&sp[1].tid));

  assert_int_equal(pprt__os_thread_timer_start(&t, atomic_load(&sp[0].tid), 1000, COOKIE), 0);
  assert_int_equal(t.armed, 1);
  assert_int_equal(pprt__os_thread_timer_start(&t, atomic_load(&sp[0].tid), 1000, COOKIE), -EBUSY);
  /* 200 ms of the spinner's own CPU time, however long a busy machine (or
   * an emulator) takes to give it that: ~50 ticks at CONFIG_HZ=250. */
  uint64_t cpu0 = 0, cpu = 0;
  assert_int_equal(pprt__os_thread_cpu_ns(atomic_load(&sp[0].tid), &cpu0), 0);
  for (int waited = 0; waited < 60000; waited += 10) {
    sleep_ms(10);
    if (pprt__os_thread_cpu_ns(atomic_load(&sp[0].tid), &cpu) == 0 && cpu - cpu0 >= 200000000)
      break;
  }
  assert_int_equal(pprt__os_thread_timer_stop(&t), 0);
  assert_int_equal(t.armed, 0);
  sleep_ms(20); /* a signal already on its way lands now */
  int on_a = atomic_load(&tick.on_a);
  sleep_ms(100);
  int on_a_later = atomic_load(&tick.on_a);
  stop_spinners(sp, 2);

  print_message("%d ticks over %.3f s of the thread's CPU\n", on_a, (double)(cpu - cpu0) / 1e9);
  assert_true(on_a >= 10);            /* ~50 at CONFIG_HZ=250 over 200 ms of its CPU */
  assert_int_equal(on_a_later, on_a); /* stop stopped it */
  assert_int_equal(atomic_load(&tick.on_b), 0);
  assert_int_equal(atomic_load(&tick.on_other_thread), 0);
  assert_int_equal(atomic_load(&tick.thread_timer), on_a);
  assert_int_equal(atomic_load(&tick.process_timer), 0);
  assert_int_equal(atomic_load(&tick.other), 0);
  assert_int_equal(atomic_load(&tick.wrong_cookie_not_other), 0);

  /* The interrupted pc is in the spinning function, most of the time. */
  pprt__os_symbolizer *sym;
  assert_int_equal(pprt__os_symbolizer_open(&sym), 0);
  int n = atomic_load(&tick.npcs), in_spin = 0;
  if (n > MAX_PCS)
    n = MAX_PCS;
  for (int i = 0; i < n; i++)
    in_spin += pc_in(sym, tick.pcs[i], (uintptr_t)&spin_until_stopped);
  pprt__os_symbolizer_close(sym);
  assert_true(in_spin * 2 >= n);
}

/* The first expiry is random in (0, period]: measured in the thread's CPU
 * time, it comes within one period (plus a scheduler tick or two, when Linux
 * looks at CPU timers), and not always at the end of it. */
static void test_thread_timer_first_expiry(void **state) {
  (void)state;
  const int hz = 20;
  const double period_ms = 1000.0 / hz;
  assert_int_equal(pprt__os_signal_install(SIGPROF, on_tick, &save), 0);
  skip_without_thread_timers();
  pprt__os_thread_timer t = {0, 0};

  int early = 0;
  for (int trial = 0; trial < 8; trial++) {
    reset_tick();
    spinner sp;
    start_spinner(&sp);
    atomic_store(&tick.tid_a, atomic_load(&sp.tid));
    assert_int_equal(pprt__os_thread_timer_start(&t, atomic_load(&sp.tid), hz, COOKIE), 0);
    for (int waited = 0; !atomic_load(&tick.first_seen) && waited < 3000; waited += 5)
      sleep_ms(5);
    assert_int_equal(pprt__os_thread_timer_stop(&t), 0);
    stop_spinners(&sp, 1);
    struct timespec start = sp.cpu_start;
    assert_true(atomic_load(&tick.first_seen));
    double ms = (double)(tick.first_cpu.tv_sec - start.tv_sec) * 1e3 +
                (double)(tick.first_cpu.tv_nsec - start.tv_nsec) / 1e6;
    assert_true(ms > 0 && ms <= period_ms + 25);
    if (ms < 0.75 * period_ms)
      early++;
  }
  assert_true(early > 0);
}

/* A thread that names itself, says its id and waits to be let go. */
typedef struct parked {
  pthread_t thread;
  _Atomic uint64_t tid;
  atomic_int go;
} parked;

static void name_self(const char *name) {
#if defined(__APPLE__)
  pthread_setname_np(name);
#else
  pthread_setname_np(pthread_self(), name);
#endif
}

static void *park_main(void *arg) {
  parked *p = arg;
  name_self("pprt-worker");
  atomic_store(&p->tid, pprt__os_thread_id());
  while (!atomic_load(&p->go))
    sleep_ms(1);
  return NULL;
}

static void start_parked(parked *p) {
  memset(p, 0, sizeof *p);
  assert_int_equal(pthread_create(&p->thread, NULL, park_main, p), 0);
  while (atomic_load(&p->tid) == 0)
    sched_yield();
}

static void finish_parked(parked *p) {
  atomic_store(&p->go, 1);
  pthread_join(p->thread, NULL);
}

static int is_tid(uint64_t tid, void *ctx) {
  return tid == *(uint64_t *)ctx;
}

/* pthread_join returns when the thread has cleared its tid, a little before
 * the kernel stops knowing it: wait until the thread list no longer has it. */
static void wait_gone(uint64_t tid) {
  for (int i = 0; i < 2000 && pprt__os_thread_each(is_tid, &tid) != 0; i++)
    sleep_ms(1);
  assert_int_equal(pprt__os_thread_each(is_tid, &tid), 0);
}

/* Lines of /proc/self/timers that open a timer, or -1 where it is absent. */
static int posix_timer_count(void) {
  FILE *f = fopen("/proc/self/timers", "r");
  if (f == NULL)
    return -1;
  char line[256];
  int n = 0;
  while (fgets(line, sizeof line, f) != NULL)
    n += strncmp(line, "ID:", 3) == 0;
  fclose(f);
  return n;
}

static void test_thread_timer_stop_after_exit(void **state) {
  (void)state;
  assert_int_equal(pprt__os_signal_install(SIGPROF, on_tick, &save), 0);
  skip_without_thread_timers();
  pprt__os_thread_timer t = {0, 0};

  int before = posix_timer_count();
  uint64_t last_tid = 0;
  for (int i = 0; i < 100; i++) {
    parked p;
    start_parked(&p);
    last_tid = atomic_load(&p.tid);
    assert_int_equal(pprt__os_thread_timer_start(&t, last_tid, 100, COOKIE), 0);
    finish_parked(&p);
    assert_int_equal(pprt__os_thread_timer_stop(&t), 0);
    assert_int_equal(pprt__os_thread_timer_stop(&t), 0); /* stopping twice is fine */
  }
  if (before >= 0)
    assert_int_equal(posix_timer_count(), before);
  /* A thread that is gone. */
  wait_gone(last_tid);
  assert_int_equal(pprt__os_thread_timer_start(&t, last_tid, 100, COOKIE), -ESRCH);
  assert_int_equal(t.armed, 0);
  assert_int_equal(pprt__os_thread_timer_start(&t, last_tid, 0, COOKIE), -EINVAL);
}

static void test_process_timer(void **state) {
  (void)state;
  reset_tick();
  atomic_store(&tick.tid_a, pprt__os_thread_id());
  assert_int_equal(pprt__os_signal_install(SIGPROF, on_tick, &save), 0);
  assert_int_equal(pprt__os_process_timer_set(100), 0);
  struct itimerval it;
  assert_int_equal(getitimer(ITIMER_PROF, &it), 0);
  assert_int_equal(it.it_interval.tv_sec, 0);
  assert_int_equal(it.it_interval.tv_usec, 10000);

  volatile uint64_t n = 0;
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    for (int i = 0; i < 100000; i++)
      n++;
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (atomic_load(&tick.process_timer) < 3 && now.tv_sec - t0.tv_sec < 10);

  assert_int_equal(pprt__os_process_timer_set(0), 0);
  assert_int_equal(getitimer(ITIMER_PROF, &it), 0);
  assert_int_equal(it.it_value.tv_sec, 0);
  assert_int_equal(it.it_value.tv_usec, 0);
  assert_true(atomic_load(&tick.process_timer) >= 3);
  assert_int_equal(atomic_load(&tick.thread_timer), 0);
  assert_int_equal(pprt__os_process_timer_set(-1), -EINVAL);
}

/* Signals the program sends are not pprt's ticks, whatever they carry. */
/* Signals the program sends are not pprt's ticks, whatever they carry.
 * Darwin gives a raise() the same siginfo as its timer's (see
 * platform/darwin/sigprof.c), so there only the process timer counts. */
static void test_sigprof_source_of_other_senders(void **state) {
  (void)state;
  reset_tick();
  assert_int_equal(pprt__os_signal_install(SIGPROF, on_tick, &save), 0);
  raise(SIGPROF);
#if defined(__APPLE__)
  assert_int_equal(atomic_load(&tick.process_timer), 1);
#else
  assert_int_equal(atomic_load(&tick.other), 1);
  union sigval v;
  v.sival_ptr = (void *)COOKIE;
  assert_int_equal(sigqueue(getpid(), SIGPROF, v), 0);
  assert_int_equal(atomic_load(&tick.other), 2);
  assert_int_equal(atomic_load(&tick.process_timer), 0);
#endif
  assert_int_equal(atomic_load(&tick.thread_timer), 0);
}

/* ---- threads --------------------------------------------------------------------- */

typedef struct found {
  uint64_t want[2];
  int seen[2];
  int total;
  int stop_after;
} found;

static int note_thread(uint64_t tid, void *ctx) {
  found *f = ctx;
  f->total++;
  for (int i = 0; i < 2; i++)
    f->seen[i] += tid == f->want[i];
  return f->stop_after != 0 && f->total == f->stop_after ? 77 : 0;
}

static void test_thread_each(void **state) {
  (void)state;
  parked p;
  start_parked(&p);
  found f = {{pprt__os_thread_id(), atomic_load(&p.tid)}, {0, 0}, 0, 0};
  assert_int_equal(pprt__os_thread_each(note_thread, &f), 0);
  assert_int_equal(f.seen[0], 1);
  assert_int_equal(f.seen[1], 1);
  assert_true(f.total >= 2);

  found g = {{0, 0}, {0, 0}, 0, 1};
  assert_int_equal(pprt__os_thread_each(note_thread, &g), 77); /* stops at once */
  assert_int_equal(g.total, 1);
  finish_parked(&p);
}

static void test_thread_name(void **state) {
  (void)state;
  parked p;
  start_parked(&p);
  uint64_t tid = atomic_load(&p.tid);
  char name[32];
  assert_int_equal(pprt__os_thread_name(tid, name, sizeof name), 0);
  assert_string_equal(name, "pprt-worker");
  char small[5];
  assert_int_equal(pprt__os_thread_name(tid, small, sizeof small), 0);
  assert_string_equal(small, "pprt");
  assert_int_equal(pprt__os_thread_name(tid, name, 0), -EINVAL);
  finish_parked(&p);
  wait_gone(tid);
  assert_int_equal(pprt__os_thread_name(tid, name, sizeof name), -ESRCH);
  assert_int_equal(pprt__os_thread_name(pprt__os_thread_id(), name, sizeof name), 0);
}

static uintptr_t thread_stack_rc, thread_stack_ok;

static void *check_own_stack(void *arg) {
  (void)arg;
  int local = 0;
  uintptr_t lo = 0, hi = 0;
  thread_stack_rc = (uintptr_t)pprt__os_thread_stack(&lo, &hi);
  thread_stack_ok = lo < (uintptr_t)&local && (uintptr_t)&local < hi;
  return NULL;
}

static void test_thread_stack(void **state) {
  (void)state;
  int local = 0;
  uintptr_t lo, hi;
  assert_int_equal(pprt__os_thread_stack(&lo, &hi), 0);
  assert_true(lo < (uintptr_t)&local && (uintptr_t)&local < hi);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, check_own_stack, NULL), 0);
  pthread_join(th, NULL);
  assert_int_equal(thread_stack_rc, 0);
  assert_true(thread_stack_ok);
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, reset_sigprof, reset_sigprof)
#define A(f) cmocka_unit_test_setup_teardown(f, altstack_aside, altstack_back)
      T(test_install_delivers_siginfo),
      T(test_previous_plain_handler_kept),
      T(test_previous_siginfo_handler_kept),
      T(test_default_action_comes_back_ignored),
      T(test_adopted_action),
      T(test_signal_take),
      T(test_install_errors),
      T(test_signals_blocked_in_handler),
      T(test_unwind_through_signal_frame),
      A(test_altstack_installed_and_used),
      A(test_altstack_large_user_stack_kept),
      A(test_altstack_small_user_stack_replaced_and_restored),
      A(test_altstack_release_leaves_a_newer_stack),
      T(test_context_regs_from_raise),
      T(test_readable),
      T(test_thread_timer_targets_one_thread),
      T(test_thread_timer_first_expiry),
      T(test_thread_timer_stop_after_exit),
      T(test_process_timer),
      T(test_sigprof_source_of_other_senders),
      T(test_thread_each),
      T(test_thread_name),
      T(test_thread_stack),
#undef T
#undef A
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
