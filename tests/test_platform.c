/* Tests of the platform contract's clocks, thread ids and reader wait/wake,
 * as the backend chosen for this build implements them. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "core/platform.h"

static void test_monotonic_clock_advances(void **state) {
  (void)state;
  uint64_t a = pprt__os_monotonic_ns();
  struct timespec ts = {0, 20000000};
  nanosleep(&ts, NULL);
  uint64_t b = pprt__os_monotonic_ns();
  assert_true(b - a >= 20000000);
  assert_true(b - a < 2000000000); /* nanoseconds, not a coarser unit */
  uint64_t prev = pprt__os_monotonic_ns();
  for (int i = 0; i < 100000; i++) {
    uint64_t now = pprt__os_monotonic_ns();
    assert_true(now >= prev);
    prev = now;
  }
}

/* The trace clock: advances, never goes back on a thread, and runs at the
 * rate pprt__os_ticks_init states (or, for the TSC, a plausible one). */
static void test_trace_clock(void **state) {
  (void)state;
  uint64_t hz = pprt__os_ticks_init();
  assert_int_equal(pprt__os_ticks_init(), hz); /* decided once */
  uint64_t a = pprt__os_ticks(), n0 = pprt__os_monotonic_ns();
  struct timespec ts = {0, 50000000};
  nanosleep(&ts, NULL);
  uint64_t b = pprt__os_ticks(), n1 = pprt__os_monotonic_ns();
  assert_true(b > a);
  double rate = (double)(b - a) * 1e9 / (double)(n1 - n0);
  if (hz != 0)
    assert_true(rate > 0.9 * (double)hz && rate < 1.1 * (double)hz);
  else
    assert_true(rate > 1e8 && rate < 1e10);
  uint64_t prev = pprt__os_ticks();
  for (int i = 0; i < 100000; i++) {
    uint64_t now = pprt__os_ticks();
    assert_true(now >= prev);
    prev = now;
  }
}

static void test_wall_clock_is_unix_time(void **state) {
  (void)state;
  uint64_t now = pprt__os_wall_ns();
  uint64_t t = (uint64_t)time(NULL);
  assert_true(now / 1000000000u >= t - 1 && now / 1000000000u <= t + 1);
}

static void *record_tid(void *arg) {
  uint64_t *out = arg;
  out[0] = pprt__os_thread_id();
  out[1] = pprt__os_thread_id();
  return NULL;
}

static void test_thread_ids_are_stable_and_distinct(void **state) {
  (void)state;
  uint64_t main_tid = pprt__os_thread_id();
  assert_true(main_tid != 0);
  assert_int_equal(pprt__os_thread_id(), main_tid);
  uint64_t ids[4][2];
  pthread_t th[4];
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&th[i], NULL, record_tid, ids[i]), 0);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(ids[i][0], ids[i][1]);
    assert_true(ids[i][0] != 0 && ids[i][0] != main_tid);
    for (int j = 0; j < i; j++)
      assert_true(ids[i][0] != ids[j][0]); /* the threads overlap in time */
  }
}

static atomic_uint word;

static void *waker(void *arg) {
  (void)arg;
  struct timespec ts = {0, 50000000};
  nanosleep(&ts, NULL);
  atomic_fetch_add(&word, 1);
  pprt__os_wake(&word);
  return NULL;
}

/* wait returns when woken (blocking builds: promptly; polling builds: within
 * the poll period), and at once when the word has already changed. */
static void test_wait_and_wake(void **state) {
  (void)state;
  atomic_store(&word, 5);
  uint64_t t0 = pprt__os_monotonic_ns();
  assert_int_equal(pprt__os_wait(&word, 4, 0), 0);
  assert_true(pprt__os_monotonic_ns() - t0 < 10000000);

  pthread_t th;
  t0 = pprt__os_monotonic_ns();
  assert_int_equal(pthread_create(&th, NULL, waker, NULL), 0);
  while (atomic_load(&word) == 5)
    pprt__os_wait(&word, 5, 0);
  uint64_t ms = (pprt__os_monotonic_ns() - t0) / 1000000;
  pthread_join(th, NULL);
  assert_true(ms >= 50);
  /* 80 ms of slack for scheduling: ctest runs tests in parallel on 2 cores */
  assert_true(ms < (pprt__os_reader_blocks ? 50 + 80 : 50 + 100 + 80));
}

static void test_wait_times_out(void **state) {
  (void)state;
  atomic_store(&word, 1);
  uint64_t t0 = pprt__os_monotonic_ns();
  pprt__os_wait(&word, 1, 20000000);
  uint64_t ms = (pprt__os_monotonic_ns() - t0) / 1000000;
  assert_true(ms < 20 + 100 + 80);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_monotonic_clock_advances),
      cmocka_unit_test(test_wall_clock_is_unix_time),
      cmocka_unit_test(test_trace_clock),
      cmocka_unit_test(test_thread_ids_are_stable_and_distinct),
      cmocka_unit_test(test_wait_and_wake),
      cmocka_unit_test(test_wait_times_out),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
