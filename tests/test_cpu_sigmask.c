/* SIGPROF and a linked program's signal masks (core/sigmask.c through
 * pprt_thread_register and pprt_thread_unregister), with real signals: a
 * thread that blocks SIGPROF and registers while a profile runs is sampled,
 * its own SIGPROFs are held until it unregisters (then pending in the
 * kernel, as without pprt), and with no profile registration leaves masks
 * alone. The preload library's interposers are tested end to end in
 * preload_sigmask.c. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/platform.h"
#include "core/profile.h"
#include "pprt.h"
#include "read/profile_decode.h"
#include "tests/membuf.h"
#include "tests/sigprof_mask.h"
#include "tests/spin.h"

static atomic_int handled;

static void on_sigprof(int sig) {
  (void)sig;
  atomic_fetch_add(&handled, 1);
}

static int pending_here(void) {
  sigset_t p;
  sigpending(&p);
  return sigismember(&p, SIGPROF) == 1;
}

static volatile unsigned long sink;

static void spin(uint64_t ns) {
  SPIN_CPU(ns, 10000, sink);
}

struct result {
  uint64_t tid;
  int lifted, held_while_registered, pending_after, handled_after;
};

static void *blocked_worker(void *arg) {
  struct result *r = arg;
  r->tid = pprt__os_thread_id();
  sigset_t prof = prof_set();
  pthread_sigmask(SIG_BLOCK, &prof, NULL);
  assert_int_equal(pprt_thread_register(), 0);
  r->lifted = !prof_masked();
  pthread_kill(pthread_self(), SIGPROF);
  spin(300000000);
  r->held_while_registered = atomic_load(&handled) == 0 && !pending_here();
  assert_int_equal(pprt_thread_unregister(), 0);
  r->pending_after = prof_masked() && pending_here() && atomic_load(&handled) == 0;
  pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
  r->handled_after = atomic_load(&handled) == 1;
  return NULL;
}

static void test_register_lifts_sigprof(void **state) {
  (void)state;
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigprof;
  sigaction(SIGPROF, &sa, &old);
  atomic_store(&handled, 0);
  membuf m = {0};
  pprt_cpu_options o = {sizeof o, 100, 0, PPRT_TIMER_AUTO, 0, 0};
  assert_int_equal(pprt_cpu_start(&o, mem_writer(&m)), 0);
  struct result r = {0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, blocked_worker, &r), 0);
  pthread_join(th, NULL);
  assert_int_equal(pprt_cpu_stop(), 0);
  sigaction(SIGPROF, &old, NULL);

  assert_true(r.lifted);
  assert_true(r.held_while_registered);
  assert_true(r.pending_after);
  assert_true(r.handled_after);

  Pprt__Profile *p = NULL;
  char err[256];
  if (pprt__profile_decode(m.data, m.len, &p, err, sizeof err) != 0)
    fail_msg("profile does not decode: %s", err);
  int64_t samples = 0;
  for (size_t i = 0; i < p->n_sample; i++)
    for (size_t j = 0; j < p->sample[i]->n_label; j++)
      if (strcmp(p->string_table[p->sample[i]->label[j]->key], "thread_id") == 0 &&
          p->sample[i]->label[j]->num == (int64_t)r.tid)
        samples += p->sample[i]->value[0];
  print_message("a thread that blocks SIGPROF and registers: %lld samples in 300 ms of CPU\n",
                (long long)samples);
  /* 30 expected at 100 Hz; any at all shows it is no longer invisible. */
  assert_true(samples > 0);
  pprt__profile_decoded_free(p);
  mem_free(&m);
}

static void *register_without_profile(void *arg) {
  int *still_blocked = arg;
  sigset_t prof = prof_set();
  pthread_sigmask(SIG_BLOCK, &prof, NULL);
  pprt_thread_register();
  *still_blocked = prof_masked();
  pprt_thread_unregister();
  return NULL;
}

static void test_no_profile_no_change(void **state) {
  (void)state;
  int still_blocked = 0;
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, register_without_profile, &still_blocked), 0);
  pthread_join(th, NULL);
  assert_true(still_blocked);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_register_lifts_sigprof),
      cmocka_unit_test(test_no_profile_no_change),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
