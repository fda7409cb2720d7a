/* Per-thread CPU timers on Linux and telling pprt's SIGPROFs from others.
 *
 * A timer is created on the target thread's CPU-time clock, which any
 * thread of the process may name (so pprt can cover threads it did not
 * start), with SIGEV_THREAD_ID so the signal goes to that thread: the fix
 * for setitimer's skew and under-delivery with several busy threads (Go
 * issue 35057). The system calls are made directly: glibc before 2.34 keeps
 * timer_create in librt, which pprt would otherwise have to link for every
 * consumer, and the kernel's timer id is all pprt needs to keep.
 *
 * Errors: the kernel answers timer_create with EINVAL when the thread clock
 * or the SIGEV_THREAD_ID target names no thread of this process (it has
 * exited, or the id was never ours); pprt has checked its other arguments
 * by then, so EINVAL is reported as -ESRCH. EAGAIN is the timer limit.
 * A thread that is exiting (pthread_join has returned, the kernel has not
 * yet let go of it) may still get a timer, which never fires; stop deletes
 * it like any other. Starting a timer that is armed is -EBUSY.
 *
 * Timers are not inherited across fork: a child must not stop its parent's
 * handles (the kernel could have given the same id to one of the child's).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/platform.h"
#include "core/syscalls.h"
#include "platform/linux/cpuclock.h"

/* The kernel's sigevent: 64 bytes, the thread id where SIGEV_THREAD_ID
 * looks for it (glibc calls the field _sigev_un._tid, musl
 * sigev_notify_thread_id). */
#define KERNEL_SIGEV_THREAD_ID 4
struct kernel_sigevent {
  union sigval value;
  int signo;
  int notify;
  union {
    int pad[(64 - 2 * sizeof(int) - sizeof(union sigval)) / sizeof(int)];
    int tid;
  } u;
};
_Static_assert(sizeof(struct kernel_sigevent) == 64, "kernel sigevent size");

/* timer_settime's itimerspec in the kernel's layout for the call used:
 * the original call takes the native long timespec (32-bit on i386,
 * whatever _TIME_BITS libc was built with; musl names it timer_settime32),
 * 32-bit ABIs born after 2038 was planned have only the 64-bit one. */
#if defined(SYS_timer_settime)
#define SYS_TIMER_SETTIME SYS_timer_settime
typedef long kernel_time;
#elif defined(SYS_timer_settime32)
#define SYS_TIMER_SETTIME SYS_timer_settime32
typedef long kernel_time;
#else
#define SYS_TIMER_SETTIME SYS_timer_settime64
typedef long long kernel_time;
#endif
struct kernel_itimerspec {
  kernel_time interval_sec, interval_nsec;
  kernel_time value_sec, value_nsec;
};

/* splitmix64: a cheap, well-mixed PRNG step (no rand(), which has state and
 * a lock behind it). */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The first expiry, in (0, period]: threads started together do not tick
 * together, and a short-lived thread is not always gone before its first
 * tick (Go issues 40435, 40963). */
static uint64_t first_expiry_ns(uint64_t tid, uint64_t period_ns) {
  static atomic_uint calls;
  uint64_t seed = tid ^ pprt__os_monotonic_ns() ^ ((uint64_t)atomic_fetch_add(&calls, 1) << 32);
  return 1 + mix(seed) % period_ns;
}

int pprt__os_thread_timer_start(pprt__os_thread_timer *t, uint64_t tid, int hz, uintptr_t cookie) {
  if (hz <= 0 || tid == 0 || tid > INT_MAX)
    return -EINVAL;
  if (t->armed)
    return -EBUSY;
  struct kernel_sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.value.sival_ptr = (void *)cookie;
  sev.signo = SIGPROF;
  sev.notify = KERNEL_SIGEV_THREAD_ID;
  sev.u.tid = (int)tid;
  int id = -1;
  if (pprt__sys_timer_create(pprt__linux_thread_cpu_clock(tid), &sev, &id) != 0)
    return errno == EINVAL ? -ESRCH : -errno;

  uint64_t period = 1000000000u / (unsigned)hz;
  if (period == 0)
    period = 1;
  uint64_t first = first_expiry_ns(tid, period);
  struct kernel_itimerspec its = {
      (kernel_time)(period / 1000000000u),
      (kernel_time)(period % 1000000000u),
      (kernel_time)(first / 1000000000u),
      (kernel_time)(first % 1000000000u),
  };
  if (syscall(SYS_TIMER_SETTIME, id, 0, &its, NULL) != 0) {
    int err = errno;
    syscall(SYS_timer_delete, id);
    return -err;
  }
  t->handle = (uintptr_t)(unsigned)id;
  t->armed = 1;
  return 0;
}

int pprt__os_thread_timer_stop(pprt__os_thread_timer *t) {
  if (!t->armed)
    return 0;
  /* Deleting works after the thread has exited: the timer belongs to the
   * process, and only its target is gone. EINVAL means no such timer. */
  if (syscall(SYS_timer_delete, (int)t->handle) != 0 && errno != EINVAL)
    return -errno;
  t->armed = 0;
  t->handle = 0;
  return 0;
}

/* Go's validSIGPROF: timer_create's signals carry SI_TIMER and the
 * sigev_value given at creation; setitimer's are sent by the kernel with
 * SI_KERNEL. kill, tgkill, sigqueue and raise use SI_USER, SI_TKILL and
 * SI_QUEUE; another timer has another si_value. */
enum pprt__os_sigprof_source pprt__os_sigprof_source(const siginfo_t *info, uintptr_t cookie) {
  if (info->si_code == SI_TIMER)
    return (uintptr_t)info->si_value.sival_ptr == cookie ? PPRT__OS_SIGPROF_THREAD_TIMER
                                                         : PPRT__OS_SIGPROF_OTHER;
  if (info->si_code == SI_KERNEL)
    return PPRT__OS_SIGPROF_PROCESS_TIMER;
  return PPRT__OS_SIGPROF_OTHER;
}

unsigned pprt__os_sigprof_overrun(const siginfo_t *info) {
  /* The kernel evaluates CPU timers on the scheduler tick: expirations that
   * passed while the thread was off the CPU, or within one tick, are folded
   * into one signal and counted here. */
  return info->si_overrun > 0 ? (unsigned)info->si_overrun : 0;
}
