/* Tests of core/ring.c: record framing across wrap-arounds, the rate and
 * overflow records, exact loss accounting, close/EOF, the reader's blocking
 * and polling waits, and many writers (threads and signal handlers) at once.
 *
 * The same file is built twice: against the OS's blocking wait and against
 * the polling wait (PPRT_READER=poll), so both reader modes are tested on
 * every OS that has both. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/platform.h"
#include "core/ring.h"

#define HDR 2

static uint64_t buf[1 << 16];

/* Reads the rate record that every ring starts with. */
static void expect_rate(pprt__ring *r, uint64_t rate) {
  pprt__ring_record rec;
  assert_int_equal(pprt__ring_read(r, PPRT__RING_NONBLOCK, 0, buf, &rec), 1);
  assert_int_equal(rec.kind, PPRT__RING_RATE);
  assert_int_equal(rec.length, 2 + HDR);
  assert_int_equal(rec.hdr[0], rate);
  assert_int_equal(rec.npcs, 0);
}

/* pcs derived from (seed, i) so a reader can check every word. */
static uintptr_t pc_for(uint64_t seed, size_t i) {
  return (uintptr_t)(seed * 2654435761u + i * 40503u + 1);
}

static void test_init_rejects_bad_arguments(void **state) {
  (void)state;
  pprt__ring r;
  assert_int_equal(pprt__ring_init(&r, 100, HDR, 1), -EINVAL); /* not a power of 2 */
  assert_int_equal(pprt__ring_init(&r, 32, HDR, 1), -EINVAL);  /* too small */
  assert_int_equal(pprt__ring_init(&r, 1024, 0, 1), -EINVAL);
  assert_int_equal(pprt__ring_init(&r, 1024, PPRT__RING_MAX_HDR + 1, 1), -EINVAL);
}

static void test_rate_record_comes_first(void **state) {
  (void)state;
  pprt__ring r;
  assert_int_equal(pprt__ring_init(&r, 1024, HDR, 100), 0);
  uint64_t hdr[HDR] = {1, 7};
  uintptr_t pc = 0x1234;
  assert_int_equal(pprt__ring_write(&r, 5, hdr, &pc, 1), 0);
  expect_rate(&r, 100);
  pprt__ring_record rec;
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, buf, &rec), 1);
  assert_int_equal(rec.kind, PPRT__RING_DATA);
  assert_int_equal(rec.length, 2 + HDR + 1);
  assert_int_equal(rec.timestamp, 5);
  assert_int_equal(rec.hdr[0], 1);
  assert_int_equal(rec.hdr[1], 7);
  assert_int_equal(rec.pcs[0], 0x1234);
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, buf, &rec), -EAGAIN);
  pprt__ring_destroy(&r);
}

/* Every length from 0 pcs to the maximum, written and read one at a time
 * through a small ring, so records land at every offset and wrap many
 * times; each word is checked. */
static void test_every_length_across_wraparounds(void **state) {
  (void)state;
  pprt__ring r;
  assert_int_equal(pprt__ring_init(&r, 256, HDR, 1), 0);
  expect_rate(&r, 1);
  size_t max_pcs = r.max_record - 2 - HDR;
  uintptr_t pcs[256];
  uint64_t seq = 0;
  for (int round = 0; round < 50; round++) {
    for (size_t n = 0; n <= max_pcs; n++, seq++) {
      for (size_t i = 0; i < n; i++)
        pcs[i] = pc_for(seq, i);
      uint64_t hdr[HDR] = {seq, n};
      assert_int_equal(pprt__ring_write(&r, seq + 1, hdr, pcs, n), 0);
      pprt__ring_record rec;
      assert_int_equal(pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, buf, &rec), 1);
      assert_int_equal(rec.kind, PPRT__RING_DATA);
      assert_int_equal(rec.length, 2 + HDR + n);
      assert_int_equal(rec.timestamp, seq + 1);
      assert_int_equal(rec.hdr[0], seq);
      assert_int_equal(rec.npcs, n);
      for (size_t i = 0; i < n; i++)
        assert_int_equal(rec.pcs[i], pc_for(seq, i));
    }
  }
  /* Writes past the maximum are refused and not counted as lost. */
  assert_int_equal(pprt__ring_write(&r, 1, NULL, pcs, max_pcs + 1), -EMSGSIZE);
  pprt__ring_record rec;
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, buf, &rec), -EAGAIN);
  pprt__ring_destroy(&r);
}

/* A record that does not fit before the end of the array goes to the start
 * (behind a rewind marker) and keeps all of its words; the padding is
 * reclaimed, so the ring fills to the same number of records afterwards. */
static void test_rewind_marker(void **state) {
  (void)state;
  pprt__ring r;
  assert_int_equal(pprt__ring_init(&r, 64, HDR, 1), 0);
  expect_rate(&r, 1);
  uintptr_t pcs[16];
  for (size_t i = 0; i < 16; i++)
    pcs[i] = pc_for(9, i);
  /* 3 records of 2+2+16 = 20 words leave 4 words at the end: too few. */
  for (int i = 0; i < 3; i++)
    assert_int_equal(pprt__ring_write(&r, 1, NULL, pcs, 16), 0);
  pprt__ring_record rec;
  for (int i = 0; i < 3; i++)
    assert_int_equal(pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, buf, &rec), 1);
  assert_int_equal(pprt__ring_write(&r, 2, NULL, pcs, 16), 0);
  assert_int_equal(atomic_load(&r.head), 64 + 20); /* padded to the start */
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, buf, &rec), 1);
  assert_int_equal(rec.timestamp, 2);
  assert_int_equal(rec.npcs, 16);
  for (size_t i = 0; i < 16; i++)
    assert_int_equal(rec.pcs[i], pc_for(9, i));
  /* The whole array is free again: three records fit, a fourth does not. */
  for (int i = 0; i < 3; i++)
    assert_int_equal(pprt__ring_write(&r, 3, NULL, pcs, 16), 0);
  assert_int_equal(pprt__ring_write(&r, 3, NULL, pcs, 16), -ENOSPC);
  pprt__ring_destroy(&r);
}

/* With the reader stalled, writes fail once the ring is full; draining
 * returns every record that was written, in order, and the next write is
 * preceded by an overflow record with exactly the number lost. */
static void test_overflow_count_is_exact(void **state) {
  (void)state;
  pprt__ring r;
  assert_int_equal(pprt__ring_init(&r, 1024, HDR, 1), 0);
  expect_rate(&r, 1);
  uintptr_t pcs[10] = {0};
  uint64_t written = 0, lost = 0;
  for (uint64_t i = 0; i < 500; i++) {
    uint64_t hdr[HDR] = {i, 0};
    int rc = pprt__ring_write(&r, i + 1, hdr, pcs, 10);
    if (rc == 0)
      written++;
    else {
      assert_int_equal(rc, -ENOSPC);
      lost++;
    }
  }
  assert_true(written > 0 && lost > 0);
  assert_int_equal(written, 1024 / 14); /* 14-word records, 73 fit */

  pprt__ring_record rec;
  for (uint64_t i = 0; i < written; i++) {
    assert_int_equal(pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, buf, &rec), 1);
    assert_int_equal(rec.kind, PPRT__RING_DATA);
    assert_int_equal(rec.hdr[0], i);
  }
  uint64_t hdr[HDR] = {999, 0};
  assert_int_equal(pprt__ring_write(&r, 1000, hdr, pcs, 10), 0);
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, buf, &rec), 1);
  assert_int_equal(rec.kind, PPRT__RING_OVERFLOW);
  assert_int_equal(rec.npcs, 1);
  assert_int_equal(rec.pcs[0], lost);
  assert_int_equal(rec.hdr[0], 0);
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, buf, &rec), 1);
  assert_int_equal(rec.kind, PPRT__RING_DATA);
  assert_int_equal(rec.hdr[0], 999);
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, buf, &rec), -EAGAIN);
  pprt__ring_destroy(&r);
}

/* Losses with no later write are reported by the reader once it has caught
 * up, and before EOF. */
static void test_losses_reported_without_later_write(void **state) {
  (void)state;
  pprt__ring r;
  assert_int_equal(pprt__ring_init(&r, 64, HDR, 1), 0);
  expect_rate(&r, 1);
  uintptr_t pcs[20] = {0};
  int ok = 0, lost = 0;
  for (int i = 0; i < 10; i++) {
    if (pprt__ring_write(&r, 1, NULL, pcs, 20) == 0)
      ok++;
    else
      lost++;
  }
  assert_int_equal(ok, 2);
  assert_int_equal(lost, 8);
  pprt__ring_record rec;
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, buf, &rec), 1);
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, buf, &rec), 1);
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, buf, &rec), 1);
  assert_int_equal(rec.kind, PPRT__RING_OVERFLOW);
  assert_int_equal(rec.pcs[0], 8);
  /* Then more losses, reported on the way to EOF. */
  for (int i = 0; i < 5; i++)
    assert_int_equal(pprt__ring_write(&r, 1, NULL, pcs, 20), 0 - (i >= 2 ? ENOSPC : 0));
  pprt__ring_close(&r);
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_BLOCK, 0, buf, &rec), 1);
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_BLOCK, 0, buf, &rec), 1);
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_BLOCK, 0, buf, &rec), 1);
  assert_int_equal(rec.kind, PPRT__RING_OVERFLOW);
  assert_int_equal(rec.pcs[0], 3);
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_BLOCK, 0, buf, &rec), 0);
  pprt__ring_destroy(&r);
}

static void test_close_with_pending_data(void **state) {
  (void)state;
  pprt__ring r;
  assert_int_equal(pprt__ring_init(&r, 1024, HDR, 1), 0);
  uintptr_t pc = 42;
  for (uint64_t i = 0; i < 5; i++) {
    uint64_t hdr[HDR] = {i, 0};
    assert_int_equal(pprt__ring_write(&r, 1, hdr, &pc, 1), 0);
  }
  pprt__ring_close(&r);
  pprt__ring_close(&r); /* idempotent */
  assert_int_equal(pprt__ring_write(&r, 1, NULL, &pc, 1), -EPIPE);
  pprt__ring_record rec;
  expect_rate(&r, 1);
  for (uint64_t i = 0; i < 5; i++) {
    assert_int_equal(pprt__ring_read(&r, PPRT__RING_BLOCK, 0, buf, &rec), 1);
    assert_int_equal(rec.hdr[0], i);
  }
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_BLOCK, 0, buf, &rec), 0);
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, buf, &rec), 0);
  pprt__ring_destroy(&r);
}

static void test_close_empty(void **state) {
  (void)state;
  pprt__ring r;
  assert_int_equal(pprt__ring_init(&r, 1024, HDR, 1), 0);
  expect_rate(&r, 1);
  pprt__ring_record rec;
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, buf, &rec), -EAGAIN);
  pprt__ring_close(&r);
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_BLOCK, 0, buf, &rec), 0);
  pprt__ring_destroy(&r);
}

/* ---- the reader's wait ------------------------------------------------------ */

struct delayed {
  pprt__ring *r;
  unsigned delay_ms;
  int close; /* close instead of writing */
  int write_rc;
};

static void sleep_ms(unsigned ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0)
    ;
}

static void *delayed_writer(void *arg) {
  struct delayed *d = arg;
  sleep_ms(d->delay_ms);
  if (d->close) {
    pprt__ring_close(d->r);
  } else {
    uintptr_t pc = 7;
    d->write_rc = pprt__ring_write(d->r, 1, NULL, &pc, 1);
  }
  return NULL;
}

/* How long a blocked reader takes to see a write (or a close) made delay_ms
 * after it started waiting. */
static uint64_t reader_latency_ms(int close, unsigned delay_ms, int *result) {
  pprt__ring r;
  assert_int_equal(pprt__ring_init(&r, 1024, HDR, 1), 0);
  expect_rate(&r, 1);
  struct delayed d = {&r, delay_ms, close, 0};
  pthread_t th;
  uint64_t t0 = pprt__os_monotonic_ns();
  assert_int_equal(pthread_create(&th, NULL, delayed_writer, &d), 0);
  pprt__ring_record rec;
  *result = pprt__ring_read(&r, PPRT__RING_BLOCK, 0, buf, &rec);
  uint64_t waited = (pprt__os_monotonic_ns() - t0) / 1000000;
  pthread_join(th, NULL);
  assert_int_equal(d.write_rc, 0);
  pprt__ring_destroy(&r);
  return waited;
}

/* A blocking reader wakes as soon as a writer publishes; a polling reader
 * within its 100 ms period. Either way the record arrives, never early.
 * SLACK covers scheduling delays: ctest runs tests in parallel on 2 cores. */
#define SLACK 80
static void test_blocked_reader_wakes_on_write(void **state) {
  (void)state;
  int result;
  uint64_t ms = reader_latency_ms(0, 150, &result);
  assert_int_equal(result, 1);
  assert_true(ms >= 150);
  if (pprt__os_reader_blocks)
    assert_true(ms < 150 + SLACK);
  else
    assert_true(ms < 150 + 100 + SLACK);
}

static void test_blocked_reader_wakes_on_close(void **state) {
  (void)state;
  int result;
  uint64_t ms = reader_latency_ms(1, 150, &result);
  assert_int_equal(result, 0);
  assert_true(ms >= 150);
  if (pprt__os_reader_blocks)
    assert_true(ms < 150 + SLACK);
  else
    assert_true(ms < 150 + 100 + SLACK);
}

static void test_read_timeout(void **state) {
  (void)state;
  pprt__ring r;
  assert_int_equal(pprt__ring_init(&r, 1024, HDR, 1), 0);
  expect_rate(&r, 1);
  pprt__ring_record rec;
  uint64_t t0 = pprt__os_monotonic_ns();
  assert_int_equal(pprt__ring_read(&r, PPRT__RING_BLOCK, 30000000, buf, &rec), -EAGAIN);
  uint64_t ms = (pprt__os_monotonic_ns() - t0) / 1000000;
  assert_true(ms >= 30 && ms < 30 + 100 + SLACK);
  pprt__ring_destroy(&r);
}

/* With a wake threshold, a small write leaves the reader asleep until its
 * timeout; a write that fills the ring past the threshold wakes it (in
 * blocking builds) at once. The timeout is long so that "at once" can be
 * told from "at the timeout" on a loaded machine too: woken means found in
 * well under half of it (the write comes after 50 ms). */
#define WAKE_TIMEOUT_MS 1000

struct filler {
  pprt__ring *r;
  unsigned delay_ms;
  size_t records;
};

static void *delayed_fill(void *arg) {
  struct filler *f = arg;
  sleep_ms(f->delay_ms);
  uintptr_t pcs[16] = {0};
  for (size_t i = 0; i < f->records; i++)
    pprt__ring_write(f->r, 1, NULL, pcs, 16);
  return NULL;
}

static uint64_t threshold_latency_ms(size_t records) {
  pprt__ring r;
  assert_int_equal(pprt__ring_init(&r, 1024, HDR, 1), 0);
  pprt__ring_set_wake_threshold(&r, 512);
  expect_rate(&r, 1);
  struct filler f = {&r, 50, records};
  pthread_t th;
  uint64_t t0 = pprt__os_monotonic_ns();
  assert_int_equal(pthread_create(&th, NULL, delayed_fill, &f), 0);
  pprt__ring_record rec;
  assert_int_equal(
      pprt__ring_read(&r, PPRT__RING_BLOCK, (uint64_t)WAKE_TIMEOUT_MS * 1000000, buf, &rec), 1);
  uint64_t ms = (pprt__os_monotonic_ns() - t0) / 1000000;
  pthread_join(th, NULL);
  pprt__ring_destroy(&r);
  return ms;
}

static void test_wake_threshold(void **state) {
  (void)state;
  uint64_t small = threshold_latency_ms(1);  /* 20 words: below 512 */
  uint64_t big = threshold_latency_ms(30);   /* 600 words: past it */
  print_message("first record after %llu ms (below the threshold), %llu ms (past it)\n",
                (unsigned long long)small, (unsigned long long)big);
  if (pprt__os_reader_blocks) {
    assert_true(small >= WAKE_TIMEOUT_MS); /* found at the read timeout, not woken */
    assert_true(big < WAKE_TIMEOUT_MS / 2);
  } else { /* a polling reader looks every 100 ms either way */
    assert_true(small < WAKE_TIMEOUT_MS / 2 && big < WAKE_TIMEOUT_MS / 2);
  }
}

/* ---- many writers at once --------------------------------------------------- */

/* Each record carries: hdr[0] = writer id, hdr[1] = that writer's sequence
 * number; pcs derived from both, and the last pc a checksum of the rest.
 * Writer ids: 0..NTHREADS-1 for the threads' own writes, NTHREADS.. for
 * writes from the signal handler running on thread i. */
#define NTHREADS 4
#define NWRITERS (2 * NTHREADS)

static pprt__ring stress_ring;
static atomic_int stress_stop;
static atomic_ulong stress_ok[NWRITERS], stress_lost[NWRITERS], stress_closed[NWRITERS];
static _Thread_local int stress_thread_index = -1;
static uint64_t handler_seq[NTHREADS]; /* touched only by that thread's handler */

static void stress_write(int writer, uint64_t seq) {
  uintptr_t pcs[64];
  size_t n = (size_t)(seq * 7 + (uint64_t)writer) % 63 + 1;
  uintptr_t sum = 0;
  for (size_t i = 0; i + 1 < n; i++) {
    pcs[i] = pc_for(seq ^ ((uint64_t)writer << 40), i);
    sum += pcs[i] * (i + 1);
  }
  pcs[n - 1] = sum;
  uint64_t hdr[HDR] = {(uint64_t)writer, seq};
  int rc = pprt__ring_write(&stress_ring, pprt__os_monotonic_ns(), hdr, pcs, n);
  if (rc == 0)
    atomic_fetch_add_explicit(&stress_ok[writer], 1, memory_order_relaxed);
  else if (rc == -ENOSPC)
    atomic_fetch_add_explicit(&stress_lost[writer], 1, memory_order_relaxed);
  else if (rc == -EPIPE)
    atomic_fetch_add_explicit(&stress_closed[writer], 1, memory_order_relaxed);
  else
    abort();
}

static void stress_handler(int sig) {
  (void)sig;
  int saved = errno;
  int i = stress_thread_index;
  if (i >= 0)
    stress_write(NTHREADS + i, handler_seq[i]++);
  errno = saved;
}

static pthread_t stress_threads[NTHREADS];

static void *stress_writer(void *arg) {
  int i = (int)(intptr_t)arg;
  stress_thread_index = i;
  uint64_t seq = 0;
  while (!atomic_load_explicit(&stress_stop, memory_order_relaxed)) {
    stress_write(i, seq++);
    if ((seq & 63) == 0)
      sched_yield(); /* let the reader keep up some of the time, not always */
  }
  return NULL;
}

static void *stress_signaller(void *arg) {
  (void)arg;
  while (!atomic_load_explicit(&stress_stop, memory_order_relaxed)) {
    for (int i = 0; i < NTHREADS; i++)
      pthread_kill(stress_threads[i], SIGUSR1);
    struct timespec ts = {0, 20000}; /* 20 us: ~50k signals/s per thread at most */
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static double stress_seconds(void) {
  const char *s = getenv("PPRT_TEST_STRESS_SECONDS");
  double v = s ? atof(s) : 2.0;
  return v > 0 ? v : 2.0;
}

static void test_stress_threads_and_signal_handlers(void **state) {
  (void)state;
  assert_int_equal(pprt__ring_init(&stress_ring, 1 << 14, HDR, 1), 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = stress_handler;
  sigfillset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  struct sigaction old;
  assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);

  for (int i = 0; i < NTHREADS; i++)
    assert_int_equal(pthread_create(&stress_threads[i], NULL, stress_writer, (void *)(intptr_t)i),
                     0);
  pthread_t sig_thread;
  assert_int_equal(pthread_create(&sig_thread, NULL, stress_signaller, NULL), 0);

  uint64_t next_seq[NWRITERS] = {0}, read_count[NWRITERS] = {0};
  uint64_t reported_lost = 0, records = 0;
  uint64_t stop_at = pprt__os_monotonic_ns() + (uint64_t)(stress_seconds() * 1e9);
  static uint64_t rbuf[1 << 14];
  pprt__ring_record rec;
  int stopped = 0, rc;
  expect_rate(&stress_ring, 1);
  for (;;) {
    if (!stopped && pprt__os_monotonic_ns() >= stop_at) {
      atomic_store(&stress_stop, 1);
      pthread_join(sig_thread, NULL);
      for (int i = 0; i < NTHREADS; i++)
        pthread_join(stress_threads[i], NULL);
      pprt__ring_close(&stress_ring);
      stopped = 1;
    }
    rc = pprt__ring_read(&stress_ring, PPRT__RING_BLOCK, 50000000, rbuf, &rec);
    if (rc == 0)
      break;
    if (rc == -EAGAIN)
      continue;
    assert_int_equal(rc, 1);
    if (rec.kind == PPRT__RING_OVERFLOW) {
      assert_int_equal(rec.npcs, 1);
      assert_true(rec.pcs[0] > 0);
      reported_lost += rec.pcs[0];
      continue;
    }
    assert_int_equal(rec.kind, PPRT__RING_DATA);
    records++;
    uint64_t w = rec.hdr[0], seq = rec.hdr[1];
    assert_true(w < NWRITERS);
    /* Each writer's records arrive in the order it wrote them. */
    assert_true(seq >= next_seq[w]);
    next_seq[w] = seq + 1;
    read_count[w]++;
    size_t n = rec.npcs;
    assert_int_equal(n, (size_t)(seq * 7 + w) % 63 + 1);
    uint64_t sum = 0;
    for (size_t i = 0; i + 1 < n; i++) {
      assert_int_equal(rec.pcs[i], (uint64_t)pc_for(seq ^ (w << 40), i));
      sum += (uint64_t)(uintptr_t)(rec.pcs[i] * (i + 1));
    }
    assert_int_equal((uintptr_t)rec.pcs[n - 1], (uintptr_t)sum);
  }
  sigaction(SIGUSR1, &old, NULL);

  uint64_t ok = 0, lost = 0, handler_ok = 0;
  for (int w = 0; w < NWRITERS; w++) {
    assert_int_equal(read_count[w], atomic_load(&stress_ok[w]));
    ok += atomic_load(&stress_ok[w]);
    lost += atomic_load(&stress_lost[w]);
    if (w >= NTHREADS)
      handler_ok += atomic_load(&stress_ok[w]);
  }
  /* Nothing lost silently: every write is read or reported lost. */
  assert_int_equal(records, ok);
  assert_int_equal(reported_lost, lost);
  assert_true(handler_ok > 100); /* the signal path really wrote */
  print_message("stress: %llu records read (%llu from signal handlers), %llu lost and reported\n",
                (unsigned long long)records, (unsigned long long)handler_ok,
                (unsigned long long)lost);
  pprt__ring_destroy(&stress_ring);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_init_rejects_bad_arguments),
      cmocka_unit_test(test_rate_record_comes_first),
      cmocka_unit_test(test_every_length_across_wraparounds),
      cmocka_unit_test(test_rewind_marker),
      cmocka_unit_test(test_overflow_count_is_exact),
      cmocka_unit_test(test_losses_reported_without_later_write),
      cmocka_unit_test(test_close_with_pending_data),
      cmocka_unit_test(test_close_empty),
      cmocka_unit_test(test_blocked_reader_wakes_on_write),
      cmocka_unit_test(test_blocked_reader_wakes_on_close),
      cmocka_unit_test(test_read_timeout),
      cmocka_unit_test(test_wake_threshold),
      cmocka_unit_test(test_stress_threads_and_signal_handlers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
