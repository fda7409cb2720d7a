/* Tests of the platform contract as the backend chosen for this build
 * implements it, for what an ordinary process can check: clocks, thread
 * ids, the walk over threads, their names and start times, what it tells
 * of other threads (blocked signals, CPU time), the signal mask, the
 * executable's path, the command line, and reader wait/wake. Signals,
 * alternate stacks, stack bounds and the readable-word probe are tested
 * with real signals in tests/test_signals.c; images and symbols in
 * tests/test_images.c. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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
 * rate pprt__os_ticks_init states (within the slack the platform contract
 * allows a stated rate, which covers the monotonic clock's own NTP
 * steering), or for the TSC at a plausible one. Where it says the ticks are
 * the monotonic clock, they are. */
static void test_trace_clock(void **state) {
  (void)state;
  pprt__ticks_info clock = pprt__os_ticks_init();
  pprt__ticks_info again = pprt__os_ticks_init(); /* decided once */
  assert_int_equal(again.hz, clock.hz);
  assert_int_equal(again.monotonic, clock.monotonic);
  if (clock.monotonic)
    assert_int_equal(clock.hz, 1000000000u);
  uint64_t n0 = pprt__os_monotonic_ns(), a = pprt__os_ticks(), n1 = pprt__os_monotonic_ns();
  if (clock.monotonic)
    assert_true(n0 <= a && a <= n1);
  struct timespec ts = {0, 50000000};
  nanosleep(&ts, NULL);
  uint64_t b = pprt__os_ticks(), n2 = pprt__os_monotonic_ns();
  assert_true(b > a);
  double rate = (double)(b - a) * 1e9 / (double)(n2 - n0);
  double slack = 1.0 / PPRT__TICKS_RATE_SLACK_DIV;
  if (clock.hz != 0)
    assert_true(rate > (1 - slack) * (double)clock.hz && rate < (1 + slack) * (double)clock.hz);
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

/* ---- another thread's blocked signals and CPU time ----------------------------- */

/* A thread that steps through phases when the main thread says: it moves
 * to phase n + 1 when `go` reaches n + 1 and reports where it is in `at`.
 * It sleeps while it waits, so its CPU time stands still. */
struct stepper {
  atomic_int go, at;
  _Atomic uint64_t tid;
  uint64_t cpu0, cpu1; /* its own CLOCK_THREAD_CPUTIME_ID around the spin */
};

static void nap(void) {
  struct timespec ts = {0, 1000000};
  nanosleep(&ts, NULL);
}

static void wait_for(atomic_int *v, int want) {
  while (atomic_load(v) < want)
    nap();
}

/* pthread_join returns when the thread is done with its stack; the kernel
 * may hold on to the thread a little longer. Waits up to a second for
 * probe(tid) to say -ESRCH, and returns what it last said. */
static int once_gone(uint64_t tid, int (*probe)(uint64_t tid)) {
  int rc = 0;
  for (int i = 0; i < 1000 && (rc = probe(tid)) != -ESRCH; i++)
    nap();
  return rc;
}

static int probe_blocks(uint64_t tid) {
  int blocked;
  return pprt__os_thread_blocks(tid, SIGPROF, &blocked);
}

static int probe_cpu(uint64_t tid) {
  uint64_t ns;
  return pprt__os_thread_cpu_ns(tid, &ns);
}

static uint64_t own_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Phase 1: SIGPROF blocked; phase 2: unblocked; then it exits. */
static void *blocker(void *arg) {
  struct stepper *st = arg;
  atomic_store(&st->tid, pprt__os_thread_id());
  sigset_t prof;
  sigemptyset(&prof);
  sigaddset(&prof, SIGPROF);
  pthread_sigmask(SIG_BLOCK, &prof, NULL);
  atomic_store(&st->at, 1);
  wait_for(&st->go, 2);
  pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
  atomic_store(&st->at, 2);
  wait_for(&st->go, 3);
  return NULL;
}

/* A thread that blocks SIGPROF is reported so, from another thread, and no
 * longer once it unblocks it; a thread that has gone is -ESRCH. */
static void test_thread_blocks(void **state) {
  (void)state;
  int blocked = -1;
  int rc = pprt__os_thread_blocks(pprt__os_thread_id(), SIGPROF, &blocked);
  if (rc == -ENOTSUP)
    skip();
  assert_int_equal(rc, 0);
  assert_int_equal(blocked, 0);
  assert_int_equal(pprt__os_thread_blocks(pprt__os_thread_id(), 0, &blocked), -EINVAL);

  struct stepper st = {0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, blocker, &st), 0);
  wait_for(&st.at, 1);
  uint64_t tid = atomic_load(&st.tid);
  assert_int_equal(pprt__os_thread_blocks(tid, SIGPROF, &blocked), 0);
  assert_int_equal(blocked, 1);
  assert_int_equal(pprt__os_thread_blocks(tid, SIGUSR2, &blocked), 0);
  assert_int_equal(blocked, 0);
  atomic_store(&st.go, 2);
  wait_for(&st.at, 2);
  assert_int_equal(pprt__os_thread_blocks(tid, SIGPROF, &blocked), 0);
  assert_int_equal(blocked, 0);
  atomic_store(&st.go, 3);
  pthread_join(th, NULL);
  assert_int_equal(once_gone(tid, probe_blocks), -ESRCH);
}

/* Waits for go 1, spins for 200 ms of its own CPU time, then waits for go 2. */
static void *spinner(void *arg) {
  struct stepper *st = arg;
  atomic_store(&st->tid, pprt__os_thread_id());
  atomic_store(&st->at, 1);
  wait_for(&st->go, 1);
  st->cpu0 = own_cpu_ns();
  volatile uint64_t x = 1;
  while (own_cpu_ns() - st->cpu0 < 200000000u)
    for (int i = 0; i < 10000; i++)
      x = x * 6364136223846793005u + 1;
  st->cpu1 = own_cpu_ns();
  atomic_store(&st->at, 2);
  wait_for(&st->go, 2);
  return NULL;
}

/* The calling thread's CPU time agrees with CLOCK_THREAD_CPUTIME_ID, and a
 * spinning thread's, read from another thread, grows by what it spun. */
static void test_thread_cpu_ns(void **state) {
  (void)state;
  uint64_t ns = 0;
  uint64_t before = own_cpu_ns();
  int rc = pprt__os_thread_cpu_ns(pprt__os_thread_id(), &ns);
  uint64_t after = own_cpu_ns();
  if (rc == -ENOTSUP)
    skip();
  assert_int_equal(rc, 0);
  /* 1 us of slack: Darwin counts in microseconds. */
  assert_true(ns + 1000 >= before && ns <= after + 1000);

  struct stepper st = {0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, spinner, &st), 0);
  wait_for(&st.at, 1);
  uint64_t tid = atomic_load(&st.tid), a0 = 0, a1 = 0;
  assert_int_equal(pprt__os_thread_cpu_ns(tid, &a0), 0);
  atomic_store(&st.go, 1);
  wait_for(&st.at, 2);
  assert_int_equal(pprt__os_thread_cpu_ns(tid, &a1), 0);
  atomic_store(&st.go, 2);
  pthread_join(th, NULL);
  double seen = (double)(a1 - a0) / 1e6, spun = (double)(st.cpu1 - st.cpu0) / 1e6;
  print_message("spinning thread: %.1f ms of CPU read from outside, %.1f ms measured inside\n",
                seen, spun);
  /* Outside, the count also holds the waits' wake-ups around the spin. */
  assert_true(seen >= spun - 1.0);
  assert_true(seen <= spun * 1.05 + 5.0);
  assert_int_equal(once_gone(tid, probe_cpu), -ESRCH);
}

/* ---- the walk over threads, names, start times ----------------------------------- */

struct seen_tids {
  uint64_t want[2];
  int found[2];
  int count;
};

static int note_tid(uint64_t tid, void *ctx) {
  struct seen_tids *s = ctx;
  s->count++;
  for (int i = 0; i < 2; i++)
    if (tid == s->want[i])
      s->found[i] = 1;
  return 0;
}

static int stop_at_first(uint64_t tid, void *ctx) {
  (void)tid;
  (*(int *)ctx)++;
  return 7;
}

/* Parks until go reaches 1. */
static void *parked(void *arg) {
  struct stepper *st = arg;
  atomic_store(&st->tid, pprt__os_thread_id());
  atomic_store(&st->at, 1);
  wait_for(&st->go, 1);
  return NULL;
}

/* The walk reports the calling thread and a live one it started, by the
 * ids pprt__os_thread_id gives, and stops at fn's first nonzero value. */
static void test_thread_each(void **state) {
  (void)state;
  struct stepper st = {0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, parked, &st), 0);
  wait_for(&st.at, 1);
  struct seen_tids seen = {{pprt__os_thread_id(), atomic_load(&st.tid)}, {0, 0}, 0};
  int rc = pprt__os_thread_each(note_tid, &seen);
  atomic_store(&st.go, 1);
  pthread_join(th, NULL);
  assert_int_equal(rc, 0);
  assert_true(seen.found[0]);
  assert_true(seen.found[1]);
  assert_true(seen.count >= 2);
  int calls = 0;
  assert_int_equal(pprt__os_thread_each(stop_at_first, &calls), 7);
  assert_int_equal(calls, 1);
}

static int probe_name(uint64_t tid) {
  char name[64];
  return pprt__os_thread_name(tid, name, sizeof name);
}

static int probe_start(uint64_t tid) {
  uint64_t start;
  return pprt__os_thread_start_time(tid, &start);
}

/* A thread's name is a NUL-terminated string; its start time is nonzero
 * and stays the same; a gone thread has neither. */
static void test_thread_name_and_start(void **state) {
  (void)state;
  char name[64];
  memset(name, 'x', sizeof name);
  int rc = pprt__os_thread_name(pprt__os_thread_id(), name, sizeof name);
  if (rc != -ENOTSUP) {
    assert_int_equal(rc, 0);
    assert_non_null(memchr(name, '\0', sizeof name));
  }
  uint64_t start = 0, again = 0;
  rc = pprt__os_thread_start_time(pprt__os_thread_id(), &start);
  if (rc != -ENOTSUP) {
    assert_int_equal(rc, 0);
    assert_true(start != 0);
    assert_int_equal(pprt__os_thread_start_time(pprt__os_thread_id(), &again), 0);
    assert_int_equal(again, start);
  }

  struct stepper st = {0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, parked, &st), 0);
  wait_for(&st.at, 1);
  uint64_t tid = atomic_load(&st.tid);
  atomic_store(&st.go, 1);
  pthread_join(th, NULL);
  if (probe_name(tid) != -ENOTSUP)
    assert_int_equal(once_gone(tid, probe_name), -ESRCH);
  if (rc != -ENOTSUP)
    assert_int_equal(once_gone(tid, probe_start), -ESRCH);
}

/* ---- the calling thread's signal mask ---------------------------------------------- */

static int blocked_now(int sig) {
  sigset_t cur;
  pthread_sigmask(SIG_BLOCK, NULL, &cur);
  return sigismember(&cur, sig);
}

/* pprt__os_thread_sigmask changes the calling thread's mask as
 * pthread_sigmask does, reports the old one, and refuses a bad how. */
static void test_thread_sigmask(void **state) {
  (void)state;
  sigset_t usr2, old;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  assert_false(blocked_now(SIGUSR2));
  assert_int_equal(pprt__os_thread_sigmask(SIG_BLOCK, &usr2, &old), 0);
  assert_false(sigismember(&old, SIGUSR2));
  assert_true(blocked_now(SIGUSR2));
  assert_int_equal(pprt__os_thread_sigmask(SIG_UNBLOCK, &usr2, &old), 0);
  assert_true(sigismember(&old, SIGUSR2));
  assert_false(blocked_now(SIGUSR2));
  assert_int_equal(pprt__os_thread_sigmask(12345, &usr2, NULL), -EINVAL);
  assert_false(blocked_now(SIGUSR2));
}

/* ---- the program's files and command line ------------------------------------------ */

static char **test_argv;

static int main_image_path(const pprt__os_image *img, void *ctx) {
  if (!img->is_main)
    return 0;
  strncpy(ctx, img->path, PATH_MAX - 1);
  return 1;
}

/* The executable's path is absolute, the main image's, and is refused
 * when it does not fit. */
static void test_exe_path(void **state) {
  (void)state;
  char path[PATH_MAX], image[PATH_MAX] = "";
  assert_int_equal(pprt__os_exe_path(path, sizeof path), 0);
  assert_true(path[0] == '/');
  assert_int_equal(pprt__os_image_each(main_image_path, image), 1);
  assert_string_equal(path, image);
  char tiny[4];
  assert_int_equal(pprt__os_exe_path(tiny, sizeof tiny), -ENAMETOOLONG);
}

/* The command line is the arguments, each NUL-terminated, and is cut at
 * the buffer's length. */
static void test_cmdline(void **state) {
  (void)state;
  char buf[4096];
  size_t n = 0;
  int rc = pprt__os_cmdline(buf, sizeof buf, &n);
  if (rc == -ENOTSUP)
    skip();
  assert_int_equal(rc, 0);
  size_t want = 0;
  for (char **a = test_argv; *a != NULL; a++) {
    assert_true(n >= want + strlen(*a) + 1);
    assert_string_equal(buf + want, *a);
    want += strlen(*a) + 1;
  }
  assert_int_equal(n, want);
  assert_int_equal(pprt__os_cmdline(buf, 3, &n), 0);
  assert_int_equal(n, 3);
  assert_memory_equal(buf, test_argv[0], 3);
}

/* ---- reader wait/wake ------------------------------------------------------------ */

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
  /* 80 ms of slack for scheduling (labelled statistical: ctest runs it alone) */
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

int main(int argc, char **argv) {
  (void)argc;
  test_argv = argv;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_monotonic_clock_advances),
      cmocka_unit_test(test_wall_clock_is_unix_time),
      cmocka_unit_test(test_trace_clock),
      cmocka_unit_test(test_thread_ids_are_stable_and_distinct),
      cmocka_unit_test(test_thread_blocks),
      cmocka_unit_test(test_thread_cpu_ns),
      cmocka_unit_test(test_thread_each),
      cmocka_unit_test(test_thread_name_and_start),
      cmocka_unit_test(test_thread_sigmask),
      cmocka_unit_test(test_exe_path),
      cmocka_unit_test(test_cmdline),
      cmocka_unit_test(test_wait_and_wake),
      cmocka_unit_test(test_wait_times_out),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
