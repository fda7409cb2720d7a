/* What pprt learns about a Darwin process's threads: the list of them
 * (task_threads, each port's THREAD_IDENTIFIER_INFO for the 64-bit id that
 * pthread_threadid_np gives), their names and CPU time (proc_pidinfo
 * PROC_PIDTHREADID64INFO) and the calling thread's stack bounds
 * (pthread_get_stackaddr_np, the top, and pthread_get_stacksize_np). No
 * interface shows another thread's signal mask. */
#include <errno.h>
#include <libproc.h>
#include <mach/mach.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/proc_info.h>
#include <unistd.h>

#include "core/platform.h"

int pprt__os_thread_each(int (*fn)(uint64_t tid, void *ctx), void *ctx) {
  mach_port_t task = mach_task_self();
  thread_act_array_t threads = NULL;
  mach_msg_type_number_t n = 0;
  kern_return_t kr = task_threads(task, &threads, &n);
  if (kr != KERN_SUCCESS)
    return kr == KERN_RESOURCE_SHORTAGE ? -ENOMEM : -EPERM;
  int r = 0;
  for (mach_msg_type_number_t i = 0; i < n; i++) {
    if (r == 0) {
      thread_identifier_info_data_t info;
      mach_msg_type_number_t count = THREAD_IDENTIFIER_INFO_COUNT;
      /* A thread that ended since task_threads fails here: skip it. */
      if (thread_info(threads[i], THREAD_IDENTIFIER_INFO, (thread_info_t)&info, &count) ==
          KERN_SUCCESS)
        r = fn(info.thread_id, ctx);
    }
    /* Every port in the list holds a send right, also after an early stop. */
    mach_port_deallocate(task, threads[i]);
  }
  vm_deallocate(task, (vm_address_t)threads, n * sizeof *threads);
  return r;
}

int pprt__os_thread_name(uint64_t tid, char *buf, size_t len) {
  if (len == 0)
    return -EINVAL;
  struct proc_threadinfo info;
  int n = proc_pidinfo(getpid(), PROC_PIDTHREADID64INFO, tid, &info, (int)sizeof info);
  if (n != (int)sizeof info)
    return -ESRCH;
  snprintf(buf, len, "%s", info.pth_name);
  return 0;
}

int pprt__os_thread_blocks(uint64_t tid, int sig, int *blocked) {
  (void)tid;
  (void)sig;
  (void)blocked;
  return -ENOTSUP;
}

int pprt__os_thread_cpu_ns(uint64_t tid, uint64_t *ns) {
  struct proc_threadinfo info;
  int n = proc_pidinfo(getpid(), PROC_PIDTHREADID64INFO, tid, &info, (int)sizeof info);
  if (n != (int)sizeof info)
    return -ESRCH;
  /* Both in nanoseconds, counted in microseconds by the kernel. */
  *ns = info.pth_user_time + info.pth_system_time;
  return 0;
}

int pprt__os_thread_stack(uintptr_t *lo, uintptr_t *hi) {
  pthread_t self = pthread_self();
  uintptr_t top = (uintptr_t)pthread_get_stackaddr_np(self);
  size_t size = pthread_get_stacksize_np(self);
  if (top == 0 || size == 0)
    return -ENOTSUP;
  *lo = top - size;
  *hi = top;
  return 0;
}
