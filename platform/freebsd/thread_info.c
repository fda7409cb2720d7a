/* What pprt learns about a FreeBSD process's threads: the list of them,
 * their names and the signals they block, all from one sysctl
 * (KERN_PROC_PID | KERN_PROC_INC_THREAD: a kinfo_proc per thread, ki_tid,
 * ki_tdname, ki_sigmask), their CPU time (clock_getcpuclockid2) and the
 * calling thread's stack bounds (pthread_attr_get_np). */
#include <errno.h>
#include <pthread.h>
#include <pthread_np.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/types.h>
#include <sys/sysctl.h>
#include <sys/user.h>
#include <unistd.h>

#include "core/platform.h"

/* A snapshot of the process's threads, malloc'd into *out. */
static int thread_snapshot(struct kinfo_proc **out, size_t *count) {
  int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PID | KERN_PROC_INC_THREAD, (int)getpid()};
  /* Threads started between the sizing call and the copy make the copy
   * fail with ENOMEM: ask again with room to spare. */
  for (int attempt = 0; attempt < 8; attempt++) {
    size_t len = 0;
    if (sysctl(mib, 4, NULL, &len, NULL, 0) != 0)
      return -errno;
    len += len / 4 + 4 * sizeof(struct kinfo_proc);
    struct kinfo_proc *kp = malloc(len);
    if (kp == NULL)
      return -ENOMEM;
    if (sysctl(mib, 4, kp, &len, NULL, 0) == 0) {
      *out = kp;
      *count = len / sizeof *kp;
      return 0;
    }
    int err = errno;
    free(kp);
    if (err != ENOMEM)
      return -err;
  }
  return -ENOMEM;
}

int pprt__os_thread_each(int (*fn)(uint64_t tid, void *ctx), void *ctx) {
  struct kinfo_proc *kp;
  size_t n;
  int r = thread_snapshot(&kp, &n);
  if (r != 0)
    return r;
  for (size_t i = 0; i < n && r == 0; i++)
    r = fn((uint64_t)kp[i].ki_tid, ctx);
  free(kp);
  return r;
}

/* Copies thread tid's kinfo_proc out of a new snapshot into *out. Errors:
 * -ESRCH (no such thread), thread_snapshot's. */
static int thread_find(uint64_t tid, struct kinfo_proc *out) {
  struct kinfo_proc *kp;
  size_t n;
  int r = thread_snapshot(&kp, &n);
  if (r != 0)
    return r;
  r = -ESRCH;
  for (size_t i = 0; i < n && r != 0; i++)
    if ((uint64_t)kp[i].ki_tid == tid) {
      *out = kp[i];
      r = 0;
    }
  free(kp);
  return r;
}

int pprt__os_thread_name(uint64_t tid, char *buf, size_t len) {
  struct kinfo_proc kp;
  int r = len == 0 ? -EINVAL : thread_find(tid, &kp);
  if (r != 0)
    return r;
  /* Names longer than ki_tdname continue in ki_moretdname (FreeBSD 12+); a
   * thread never named shows the process's command, as ps -H does. */
  if (kp.ki_tdname[0] != '\0')
    snprintf(buf, len, "%s%s", kp.ki_tdname, kp.ki_moretdname);
  else
    snprintf(buf, len, "%s", kp.ki_comm);
  return 0;
}

int pprt__os_thread_blocks(uint64_t tid, int sig, int *blocked) {
  struct kinfo_proc kp;
  int r = sig < 1 || sig > _SIG_MAXSIG ? -EINVAL : thread_find(tid, &kp);
  if (r != 0)
    return r;
  *blocked = sigismember(&kp.ki_sigmask, sig) == 1;
  return 0;
}

int pprt__os_thread_cpu_ns(uint64_t tid, uint64_t *ns) {
  clockid_t clk;
  int err = clock_getcpuclockid2((id_t)tid, CPUCLOCK_WHICH_TID, &clk);
  if (err != 0)
    return -err;
  struct timespec ts;
  if (clock_gettime(clk, &ts) != 0)
    return errno == EINVAL ? -ESRCH : -errno;
  *ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  return 0;
}

int pprt__os_thread_stack(uintptr_t *lo, uintptr_t *hi) {
  pthread_attr_t attr;
  int err = pthread_attr_init(&attr);
  if (err != 0)
    return -err;
  void *addr = NULL;
  size_t size = 0;
  err = pthread_attr_get_np(pthread_self(), &attr);
  if (err == 0)
    err = pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  if (err != 0)
    return -err;
  *lo = (uintptr_t)addr;
  *hi = (uintptr_t)addr + size;
  return 0;
}
