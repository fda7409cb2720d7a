/* Per-thread state and registration (see thread.h). Registration gives the
 * thread an alternate signal stack and known stack bounds, tells the CPU
 * profiler so a running session starts the thread's timer at once, and
 * while a profile runs unblocks SIGPROF if the thread's mask blocks it
 * (core/sigmask.c). A pthread key's destructor undoes the first two when
 * the thread exits, including through pthread_exit. */
#include "core/thread.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "core/cpu.h"
#include "core/sigmask.h"
#include "pprt.h"

/* initial-exec: the handler must not reach __tls_get_addr, which may
 * allocate on a thread's first access to a dlopen'd library's TLS. */
static __thread pprt__thread self __attribute__((tls_model("initial-exec")));

static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

pprt__thread *pprt__thread_self(void) {
  return &self;
}

uint64_t pprt__thread_id(void) {
  if (self.tid == 0)
    self.tid = pprt__os_thread_id();
  return self.tid;
}

void pprt__thread_forget_id(void) {
  self.tid = 0;
}

static void unregister(void) {
  if (!self.registered)
    return;
  pprt__cpu_thread_exiting(pprt__thread_id());
  pprt__os_altstack_release(&self.alt);
  memset(&self.alt, 0, sizeof self.alt);
  self.stack.lo = self.stack.hi = 0;
  self.registered = 0;
}

static void on_thread_exit(void *arg) {
  (void)arg;
  unregister();
}

static void make_exit_key(void) {
  pthread_key_create(&exit_key, on_thread_exit);
}

int pprt_thread_register(void) {
  /* Also for a thread registered before: its mask may have changed. */
  pprt__sigmask_lift();
  if (self.registered)
    return 0;
  pthread_once(&exit_key_once, make_exit_key);
  int rc = pprt__os_altstack_ensure(&self.alt);
  if (rc != 0)
    return rc;
  uintptr_t lo, hi;
  if (pprt__os_thread_stack(&lo, &hi) == 0) {
    self.stack.lo = lo;
    self.stack.hi = hi;
  }
  /* Any non-NULL value makes the destructor run at thread exit. */
  pthread_setspecific(exit_key, &self);
  self.registered = 1;
  pprt__cpu_thread_started(pprt__thread_id());
  return 0;
}

int pprt_thread_unregister(void) {
  pprt__sigmask_give_back();
  unregister();
  pthread_setspecific(exit_key, NULL);
  return 0;
}
