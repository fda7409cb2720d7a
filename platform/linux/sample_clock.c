/* Per-thread sampling clocks on Linux: a perf_event software task clock per
 * thread, its overflow delivered as SIGPROF to that thread.
 *
 * Why not a CPU timer: Linux checks POSIX CPU timers on the scheduler tick,
 * so their signals land on a fixed grid of the thread's CPU time (4 ms at
 * CONFIG_HZ=250) and a periodic program is seen at a few phases of its
 * cycle. The task clock is driven by a high-resolution timer that runs while
 * the thread runs (kernel/events/core.c, perf_swevent_hrtimer), so it fires
 * when the period has run out, at any rate, and its period can be changed
 * from the handler (PERF_EVENT_IOC_PERIOD restarts the period from now).
 *
 * The signal: without a ring buffer mapped, an overflow still wakes the
 * event's fasync list, which sends the F_SETSIG signal with si_code
 * POLL_IN and si_fd set (fs/fcntl.c, send_sigio_to_task) to the F_SETOWN_EX
 * owner: F_OWNER_TID names the thread itself.
 *
 * Permissions: a clock that counts kernel time needs perf_event_paranoid
 * <= 1 or CAP_PERFMON; at 2 (the upstream default) only a user-only clock
 * is allowed, and at 3 and above (Debian's and Android's patch) none. The
 * first refusal of a kernel-inclusive clock is remembered, so later threads
 * go straight to the user-only one. Seccomp filters (container runtimes')
 * answer EPERM or ENOSYS.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/platform.h"
#include "core/syscalls.h"

/* 0: not tried yet; 1: kernel-inclusive clocks open; 2: user-only. */
static atomic_int g_mode;

static int open_clock(uint64_t tid, int user_only) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.sample_period = 1000000000; /* set for real by start */
  a.disabled = 1;
  a.exclude_kernel = (unsigned)user_only;
  a.exclude_hv = 1;
  return (int)pprt__sys_perf_event_open(&a, (pid_t)tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

int pprt__os_sample_clock_open(pprt__os_sample_clock *c, uint64_t tid) {
  c->fd = -1;
  c->flags = 0;
  if (tid == 0 || tid > INT32_MAX)
    return -EINVAL;
  int mode = atomic_load_explicit(&g_mode, memory_order_relaxed);
  int fd = -1;
  if (mode != 2) {
    fd = open_clock(tid, 0);
    if (fd < 0 && (errno == EACCES || errno == EPERM)) {
      atomic_store_explicit(&g_mode, 2, memory_order_relaxed);
      mode = 2;
    } else if (fd >= 0) {
      atomic_store_explicit(&g_mode, 1, memory_order_relaxed);
    }
  }
  if (mode == 2)
    fd = open_clock(tid, 1);
  if (fd < 0) {
    switch (errno) {
    case ENOSYS:
    case ENOENT:  /* no software PMU */
    case EOPNOTSUPP:
      return -ENOTSUP;
    case EPERM:
      return -EACCES;
    default:
      return -errno;
    }
  }
  struct f_owner_ex owner = {F_OWNER_TID, (pid_t)tid};
  if (fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, SIGPROF) != 0 ||
      fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0) {
    int err = errno;
    close(fd);
    return err == ESRCH ? -ESRCH : -err;
  }
  c->fd = fd;
  c->flags = mode == 2 ? PPRT__OS_CLOCK_USER_ONLY : 0;
  return 0;
}

int pprt__os_sample_clock_start(const pprt__os_sample_clock *c, uint64_t first_ns) {
  if (c->fd < 0)
    return -EBADF;
  if (ioctl(c->fd, PERF_EVENT_IOC_PERIOD, &first_ns) != 0 ||
      ioctl(c->fd, PERF_EVENT_IOC_ENABLE, 0) != 0)
    return -errno;
  return 0;
}

int pprt__os_sample_clock_rearm(const pprt__os_sample_clock *c, uint64_t period_ns) {
  return ioctl(c->fd, PERF_EVENT_IOC_PERIOD, &period_ns) == 0 ? 0 : -errno;
}

void pprt__os_sample_clock_close(pprt__os_sample_clock *c) {
  if (c->fd < 0)
    return;
  ioctl(c->fd, PERF_EVENT_IOC_DISABLE, 0);
  close(c->fd);
  c->fd = -1;
}

int pprt__os_sigprof_clock_fd(const siginfo_t *info) {
  return info->si_code == POLL_IN ? info->si_fd : -1;
}
