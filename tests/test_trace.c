/* Tests of the trace encoder, decoder and exporter, in this process.
 *
 *   round trip    every event type with its arguments, through the file and
 *                 the decoder; annotations without a trace record nothing
 *   concurrency   8 threads x 100,000 events while generations end under
 *                 them: every event present, per-thread order, strictly
 *                 increasing timestamps, consistent tables
 *   boundaries    a generation boundary and a batch boundary at every event
 *                 position; a flight snapshot mid-run decodes alone and ends
 *                 with the most recent events
 *   edge cases    stop mid-region, region_end without begin, strings longer
 *                 than a batch, a signal handler annotating inside an
 *                 annotation, full buffers (losses counted, never silent),
 *                 thread start/end, fork
 *   the decoder   every prefix of a small trace, random byte flips, a newer
 *                 version: an error with an offset, never a crash
 *   the export    parses as JSON; B/E balanced and nested per thread; names,
 *                 counters, tasks, samples where they belong
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/platform.h"
#include "core/trace.h"
#include "core/trace_format.h"
#include "pprt.h"
#include "read/trace_decode.h"
#include "read/trace_json.h"
#include "tests/trace_util.h"

/* ---- helpers ----------------------------------------------------------------------- */

static pprt__trace *decode_ok(const membuf *m) {
  pprt__trace *t = NULL;
  char err[256];
  int rc = pprt__trace_decode(m->data, m->len, 0, &t, err, sizeof err);
  if (rc != 0)
    fail_msg("decode failed (%d): %s", rc, err);
  return t;
}

static int str_is(const pprt__trace_str *s, const char *want) {
  return s->s && s->len == strlen(want) && memcmp(s->s, want, s->len) == 0;
}

/* The events a thread wrote itself, in file order. The thread-name event
 * a named thread writes first in every trace is left out except by
 * events_of_all. */
static size_t events_filtered(const pprt__trace *t, uint64_t emitter, const pprt__trace_event **out,
                              size_t max, int names) {
  size_t n = 0;
  for (size_t i = 0; i < t->nevents; i++)
    if (t->events[i].emitter == emitter && (names || t->events[i].type != PPRT__EV_THREAD_NAME)) {
      if (n < max)
        out[n] = &t->events[i];
      n++;
    }
  return n;
}

static size_t events_of(const pprt__trace *t, uint64_t emitter, const pprt__trace_event **out,
                        size_t max) {
  return events_filtered(t, emitter, out, max, 0);
}

static size_t events_of_all(const pprt__trace *t, uint64_t emitter, const pprt__trace_event **out,
                            size_t max) {
  return events_filtered(t, emitter, out, max, 1);
}

static const pprt__trace_thread *find_thread(const pprt__trace *t, uint64_t tid) {
  for (size_t i = 0; i < t->nthreads; i++)
    if (t->threads[i].tid == tid)
      return &t->threads[i];
  return NULL;
}

static uint64_t lost_total(const pprt__trace *t) {
  uint64_t n = 0;
  for (size_t i = 0; i < t->nlost; i++)
    n += t->lost[i].count;
  return n;
}

/* Exports t and checks the JSON the way the viewers read it. */
static void export_check(const pprt__trace *t, jdoc *doc) {
  membuf j = {0};
  assert_int_equal(pprt__trace_export_json(t, mem_writer(&j)), 0);
  if (json_read((const char *)j.data, j.len, doc) != 0)
    fail_msg("export is not valid JSON: %s", doc->err);
  doc->text = (char *)j.data; /* the events point into it */
  const char *why = json_check_nesting(doc);
  if (why)
    fail_msg("export's regions: %s", why);
}

static size_t count_ph(const jdoc *doc, const char *ph, const char *name) {
  size_t n = 0;
  for (size_t i = 0; i < doc->n; i++)
    if (!strcmp(doc->ev[i].ph, ph) && (!name || slice_is(doc->ev[i].name, name)))
      n++;
  return n;
}

static pprt_trace_options quick_options(void) {
  pprt_trace_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  return o;
}

/* ---- round trip ------------------------------------------------------------------- */

struct ender {
  uint64_t task;
  uint64_t tid;
};

static void *end_task_elsewhere(void *p) {
  struct ender *e = p;
  e->tid = pprt__os_thread_id();
  pprt_task_end(e->task);
  return NULL;
}

static void test_round_trip_every_event(void **state) {
  (void)state;
  membuf m = {0};
  pprt_trace_options o = quick_options();
  o.generation_ns = 600000000000ull; /* one generation: one clock sync point */
  assert_int_equal(pprt_trace_start(&o, mem_writer(&m)), 0);
  uint64_t me = pprt__os_thread_id();
  assert_int_equal(pprt_thread_name("the main thread"), 0);
  pprt_region_begin("outer");
  pprt_region_begin("inner");
  pprt_log("net", "connected to \"example\"\n");
  pprt_counter("queue depth", -42);
  pprt_counter("queue depth", INT64_MAX);
  pprt_region_end();
  uint64_t task = pprt_task_begin("request 7");
  assert_true(task != 0);
  struct ender en = {task, 0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, end_task_elsewhere, &en), 0);
  pthread_join(th, NULL);
  uint64_t pcs[3] = {(uintptr_t)&test_round_trip_every_event + 1, 0x1234, 0x5678};
  uintptr_t apcs[2] = {0x1234, 0x5678};
  uint64_t now = pprt__os_monotonic_ns();
  pprt__trace_cpu_sample(4242, now - 1000000, pcs, 3, 3);
  uint64_t mid = pprt__os_monotonic_ns();
  pprt__trace_alloc_sample(me, now, 0xdead0000, 4096, apcs, 2);
  uint64_t end = pprt__os_monotonic_ns();
  pprt__trace_free_sample(me, now, 0xdead0000);
  pprt_region_end();
  assert_int_equal(pprt_trace_stop(), 0);

  pprt__trace *t = decode_ok(&m);
  assert_int_equal(t->version, PPRT__TRACE_VERSION);
  assert_int_equal(t->pid, (uint64_t)getpid());
  const pprt__trace_event *ev[32];
  size_t n = events_of_all(t, me, ev, 32);
  static const uint8_t want[] = {
      PPRT__EV_THREAD_NAME, PPRT__EV_REGION_BEGIN, PPRT__EV_REGION_BEGIN, PPRT__EV_LOG,
      PPRT__EV_COUNTER,     PPRT__EV_COUNTER,      PPRT__EV_REGION_END,   PPRT__EV_TASK_BEGIN,
      PPRT__EV_CPU_SAMPLE,  PPRT__EV_ALLOC_SAMPLE, PPRT__EV_FREE_SAMPLE,  PPRT__EV_REGION_END};
  assert_int_equal(n, sizeof want);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(ev[i]->type, want[i]);
    /* Samples keep their own times; the rest increase strictly. */
    if (i > 0 && ev[i]->type < PPRT__EV_CPU_SAMPLE && ev[i - 1]->type < PPRT__EV_CPU_SAMPLE)
      assert_true(ev[i]->ts > ev[i - 1]->ts);
  }
  assert_true(str_is(&ev[0]->name, "the main thread"));
  assert_true(str_is(&ev[1]->name, "outer"));
  assert_true(str_is(&ev[2]->name, "inner"));
  assert_true(str_is(&ev[3]->name, "net"));
  assert_true(str_is(&ev[3]->msg, "connected to \"example\"\n"));
  assert_true(str_is(&ev[4]->name, "queue depth"));
  assert_int_equal(ev[4]->value, -42);
  assert_int_equal(ev[5]->value, INT64_MAX);
  assert_int_equal(ev[7]->id, task);
  assert_true(str_is(&ev[7]->name, "request 7"));
  /* The CPU sample is about thread 4242 and keeps its own time: 1 ms
   * before the allocation sample's, up to the clock error that
   * docs/trace-format.md ("Clock error") documents, for two samples of one
   * generation: none when the trace clock is the monotonic clock; else each
   * sample is off by the time between the writer's two clock reads, both
   * inside the call (so at most the call's duration), and the two events'
   * ticks, read within [now, end], by the rate error over that span (at
   * most 1/PPRT__TICKS_RATE_SLACK_DIV of it), plus 1 ns of rounding each. */
  assert_int_equal(ev[8]->tid, 4242);
  assert_int_equal(ev[8]->value, 3);
  assert_int_equal(ev[8]->gen, ev[9]->gen);
  int64_t bound = 0;
  if (!pprt__os_ticks_init().monotonic) {
    uint64_t call = mid - now > end - mid ? mid - now : end - mid;
    bound = (int64_t)(call + (end - now) / PPRT__TICKS_RATE_SLACK_DIV + 2);
  }
  int64_t apart = (int64_t)(ev[9]->ts - ev[8]->ts);
  if (apart < 1000000 - bound || apart > 1000000 + bound)
    fail_msg("samples %" PRId64 " ns apart, want 1000000 +- %" PRId64, apart, bound);
  assert_true(ev[8]->stack >= 0);
  const pprt__trace_stack *st = &t->stacks[ev[8]->stack];
  assert_int_equal(st->n, 3);
  assert_int_equal(st->pcs[0], (uint64_t)pcs[0]);
  assert_int_equal(st->pcs[2], 0x5678);
  /* Frame 0 is in this function: named by the writer's symbolizer. */
  assert_non_null(st->names[0].s);
  assert_non_null(strstr(st->names[0].s, "test_round_trip_every_event"));
  assert_int_equal(ev[9]->id, 0xdead0000);
  assert_int_equal(ev[9]->value, 4096);
  assert_int_equal(t->stacks[ev[9]->stack].n, 2);
  assert_int_equal(ev[10]->id, 0xdead0000);
  /* The task ended on the other thread. */
  const pprt__trace_event *other[4];
  assert_int_equal(events_of(t, en.tid, other, 4), 2);
  assert_int_equal(other[0]->type, PPRT__EV_TASK_END);
  assert_int_equal(other[0]->id, task);
  assert_int_equal(other[1]->type, PPRT__EV_THREAD_END);
  const pprt__trace_thread *th_main = find_thread(t, me);
  assert_non_null(th_main);
  assert_true(str_is(&th_main->name, "the main thread"));
  assert_int_equal(lost_total(t), 0);

  jdoc doc;
  export_check(t, &doc);
  assert_int_equal(count_ph(&doc, "B", NULL), 2);
  assert_int_equal(count_ph(&doc, "E", NULL), 2);
  assert_int_equal(count_ph(&doc, "C", "queue depth"), 2);
  assert_int_equal(count_ph(&doc, "b", "request 7"), 1);
  assert_int_equal(count_ph(&doc, "e", "request 7"), 1);
  /* Ours, and the other thread's OS name, taken as it exited. */
  assert_int_equal(count_ph(&doc, "M", "thread_name"), 2);
  assert_int_equal(count_ph(&doc, "i", "cpu sample"), 1);
  assert_int_equal(count_ph(&doc, "i", "alloc sample"), 1);
  for (size_t i = 0; i < doc.n; i++)
    if (slice_is(doc.ev[i].name, "cpu sample")) {
      assert_int_equal(doc.ev[i].tid, 4242);
      assert_true(slice_has(doc.ev[i].args, "test_round_trip_every_event"));
      assert_true(slice_has(doc.ev[i].args, "\"0x1234\""));
    }
  json_free(&doc);
  pprt__trace_free(t);
  mem_free(&m);
}

static void test_annotations_without_trace(void **state) {
  (void)state;
  pprt_region_begin("nothing");
  pprt_region_end();
  pprt_log("a", "b");
  pprt_counter("c", 1);
  assert_int_equal(pprt_task_begin("t"), 0);
  pprt_task_end(0);
  pprt_task_end(12345);
  assert_int_equal(pprt_trace_stop(), -EPIPE);
  assert_int_equal(pprt_flight_stop(), -EPIPE);
  membuf m = {0};
  assert_int_equal(pprt_flight_write(mem_writer(&m)), -EPIPE);
  assert_int_equal(pprt__trace_advance(), -EPIPE);
  /* Nothing recorded before the start shows up after it. */
  assert_int_equal(pprt_trace_start(NULL, mem_writer(&m)), 0);
  assert_int_equal(pprt_trace_start(NULL, mem_writer(&m)), -EBUSY);
  assert_int_equal(pprt_flight_start(NULL), -EBUSY);
  assert_int_equal(pprt_trace_stop(), 0);
  pprt__trace *t = decode_ok(&m);
  for (size_t i = 0; i < t->nevents; i++)
    assert_int_not_equal(t->events[i].type, PPRT__EV_REGION_BEGIN);
  pprt__trace_free(t);
  mem_free(&m);
}

static void test_bad_options(void **state) {
  (void)state;
  membuf m = {0};
  pprt_writer none = {NULL, NULL};
  assert_int_equal(pprt_trace_start(NULL, none), -EINVAL);
  pprt_trace_options o = quick_options();
  o.buffer_limit = 1000;
  assert_int_equal(pprt_trace_start(&o, mem_writer(&m)), -EINVAL);
  o = quick_options();
  o.generation_ns = 10;
  assert_int_equal(pprt_trace_start(&o, mem_writer(&m)), -EINVAL);
  pprt_flight_options f;
  memset(&f, 0, sizeof f);
  f.max_bytes = 100;
  assert_int_equal(pprt_flight_start(&f), -EINVAL);
  assert_int_equal(m.len, 0);
}

/* ---- concurrency ------------------------------------------------------------------ */

#define NTHREADS 8
#define PER_THREAD 100000

static const char *const region_names[4] = {"parse", "plan", "execute", "commit"};

struct worker {
  atomic_int *go; /* threads not yet ready; all start at 0 (no
                     pthread_barrier on macOS) */
  uint64_t tid;
  int index;
};

static void start_together(atomic_int *go) {
  atomic_fetch_sub(go, 1);
  while (atomic_load(go) > 0)
    sched_yield();
}

/* Event k of thread w: a repeating pattern of begin, counter (its
 * sequence number), log, end. */
static void *worker_main(void *p) {
  struct worker *w = p;
  w->tid = pprt__os_thread_id();
  char cname[32];
  snprintf(cname, sizeof cname, "seq %d", w->index);
  start_together(w->go);
  for (int k = 0; k < PER_THREAD; k++) {
    switch (k % 4) {
    case 0:
      pprt_region_begin(region_names[(k / 4) % 4]);
      break;
    case 1:
      pprt_counter(cname, k);
      break;
    case 2:
      pprt_log("worker", "step");
      break;
    default:
      pprt_region_end();
    }
  }
  return NULL;
}

static atomic_int advancing;

static void *advancer_main(void *p) {
  (void)p;
  while (atomic_load(&advancing)) {
    pprt__trace_advance();
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static void test_threads_all_events_in_order(void **state) {
  (void)state;
  membuf m = {0};
  assert_int_equal(pprt_trace_start(NULL, mem_writer(&m)), 0);
  atomic_int go = NTHREADS + 1;
  struct worker w[NTHREADS];
  pthread_t th[NTHREADS], adv;
  atomic_store(&advancing, 1);
  assert_int_equal(pthread_create(&adv, NULL, advancer_main, NULL), 0);
  for (int i = 0; i < NTHREADS; i++) {
    w[i] = (struct worker){&go, 0, i};
    assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
  }
  start_together(&go);
  for (int i = 0; i < NTHREADS; i++)
    pthread_join(th[i], NULL);
  atomic_store(&advancing, 0);
  pthread_join(adv, NULL);
  assert_int_equal(pprt_trace_stop(), 0);

  pprt__trace *t = decode_ok(&m);
  pprt__trace_stats stats;
  pprt__trace_get_stats(&stats);
  assert_int_equal(stats.events_dropped, 0);
  assert_int_equal(lost_total(t), 0);
  assert_true(t->ngens >= 2); /* boundaries fell while the threads wrote */
  const pprt__trace_event **ev = malloc((PER_THREAD + 8) * sizeof *ev);
  for (int i = 0; i < NTHREADS; i++) {
    size_t n = events_of(t, w[i].tid, ev, PER_THREAD + 8);
    /* Its thread_end too: it exited while tracing. */
    assert_int_equal(n, PER_THREAD + 1);
    assert_int_equal(ev[n - 1]->type, PPRT__EV_THREAD_END);
    char cname[32];
    snprintf(cname, sizeof cname, "seq %d", w[i].index);
    for (int k = 0; k < PER_THREAD; k++) {
      const pprt__trace_event *e = ev[k];
      if (k > 0 && e->ts <= ev[k - 1]->ts)
        fail_msg("thread %d event %d: time %llu after %llu", i, k, (unsigned long long)e->ts,
                 (unsigned long long)ev[k - 1]->ts);
      switch (k % 4) {
      case 0:
        assert_int_equal(e->type, PPRT__EV_REGION_BEGIN);
        assert_true(str_is(&e->name, region_names[(k / 4) % 4]));
        break;
      case 1:
        assert_int_equal(e->type, PPRT__EV_COUNTER);
        assert_true(str_is(&e->name, cname));
        assert_int_equal(e->value, k);
        break;
      case 2:
        assert_int_equal(e->type, PPRT__EV_LOG);
        assert_true(str_is(&e->name, "worker") && str_is(&e->msg, "step"));
        break;
      default:
        assert_int_equal(e->type, PPRT__EV_REGION_END);
      }
    }
  }
  free(ev);
  jdoc doc;
  export_check(t, &doc);
  json_free(&doc);
  pprt__trace_free(t);
  mem_free(&m);
}

/* ---- boundaries ------------------------------------------------------------------- */

/* A mix of event sizes: the i-th event of a fixed sequence. */
static void emit_nth(int i) {
  static char big[300];
  if (big[0] == 0) {
    memset(big, 'x', sizeof big - 1);
  }
  switch (i % 6) {
  case 0:
    pprt_region_begin(i % 12 ? "a" : "a longer region name");
    break;
  case 1:
    pprt_counter("n", (int64_t)i * 1000003);
    break;
  case 2:
    pprt_log("l", i % 4 ? "short" : big);
    break;
  case 3:
    pprt_region_end();
    break;
  case 4: {
    uint64_t pcs[4] = {0x1000 + (uint64_t)i, 0x2000, 0x3000, 0x4000};
    pprt__trace_cpu_sample(pprt__os_thread_id(), pprt__os_monotonic_ns(), pcs, (size_t)(1 + i % 4),
                           1);
    break;
  }
  default:
    pprt_task_end(pprt_task_begin("t"));
  }
}

/* Checks that the sequence's events are all there, in order. Tasks are two
 * events; everything is counted by emitting thread. */
static void check_sequence(const pprt__trace *t, int total) {
  const pprt__trace_event *ev[256];
  size_t n = events_of(t, pprt__os_thread_id(), ev, 256);
  size_t k = 0;
  for (int i = 0; i < total; i++) {
    static const uint8_t types[6] = {PPRT__EV_REGION_BEGIN, PPRT__EV_COUNTER,
                                     PPRT__EV_LOG,          PPRT__EV_REGION_END,
                                     PPRT__EV_CPU_SAMPLE,   PPRT__EV_TASK_BEGIN};
    if (k >= n)
      fail_msg("event %d of %d missing", i, total);
    assert_int_equal(ev[k]->type, types[i % 6]);
    if (i % 6 == 1)
      assert_int_equal(ev[k]->value, (int64_t)i * 1000003);
    if (i % 6 == 4)
      assert_int_equal(t->stacks[ev[k]->stack].pcs[0], 0x1000 + (uint64_t)i);
    if (k > 0 && ev[k]->type != PPRT__EV_CPU_SAMPLE && ev[k - 1]->type != PPRT__EV_CPU_SAMPLE)
      assert_true(ev[k]->ts > ev[k - 1]->ts);
    k++;
    if (i % 6 == 5) {
      assert_int_equal(ev[k]->type, PPRT__EV_TASK_END);
      k++;
    }
  }
  assert_int_equal(k, n);
}

static void test_generation_boundary_at_every_position(void **state) {
  (void)state;
  const int total = 40;
  for (int cut = 0; cut <= total; cut++) {
    membuf m = {0};
    assert_int_equal(pprt_trace_start(NULL, mem_writer(&m)), 0);
    for (int i = 0; i < total; i++) {
      if (i == cut)
        assert_int_equal(pprt__trace_advance(), 0);
      emit_nth(i);
    }
    assert_int_equal(pprt_trace_stop(), 0);
    pprt__trace *t = decode_ok(&m);
    assert_int_equal(t->ngens, cut < total ? 2 : 1);
    check_sequence(t, total);
    pprt__trace_free(t);
    mem_free(&m);
  }
}

static void test_batch_boundary_at_every_position(void **state) {
  (void)state;
  const int total = 60;
  /* Batch limits from smaller than most events up: each puts the cuts
   * between different events, so that over the range every event starts a
   * batch somewhere. */
  for (size_t limit = 8; limit <= 400; limit += 3) {
    membuf m = {0};
    pprt__trace_set_batch_limit(limit);
    assert_int_equal(pprt_trace_start(NULL, mem_writer(&m)), 0);
    for (int i = 0; i < total; i++)
      emit_nth(i);
    assert_int_equal(pprt_trace_stop(), 0);
    pprt__trace_stats stats;
    pprt__trace_get_stats(&stats);
    if (stats.batches <= 1)
      fail_msg("limit %zu: %llu batches", limit, (unsigned long long)stats.batches);
    pprt__trace *t = decode_ok(&m);
    check_sequence(t, total);
    pprt__trace_free(t);
    mem_free(&m);
  }
  pprt__trace_set_batch_limit(0);
}

static void test_string_longer_than_a_batch(void **state) {
  (void)state;
  size_t len = 100000;
  char *name = malloc(len + 1);
  memset(name, 'n', len);
  /* A three-byte character straddling the 1024-byte cut: it is dropped
   * whole, not split. */
  memcpy(name + 1022, "\xe2\x82\xac", 3);
  name[len] = '\0';
  membuf m = {0};
  pprt__trace_set_batch_limit(512);
  assert_int_equal(pprt_trace_start(NULL, mem_writer(&m)), 0);
  pprt_region_begin(name);
  pprt_log(name, name);
  pprt_region_end();
  assert_int_equal(pprt_trace_stop(), 0);
  pprt__trace_set_batch_limit(0);
  pprt__trace *t = decode_ok(&m);
  const pprt__trace_event *ev[8];
  assert_int_equal(events_of(t, pprt__os_thread_id(), ev, 8), 3);
  assert_int_equal(ev[0]->name.len, 1022);
  assert_int_equal(ev[1]->name.len, 1022);
  assert_int_equal(ev[1]->msg.len, 1022);
  assert_memory_equal(ev[0]->name.s, name, 1022);
  pprt__trace_free(t);
  free(name);
  mem_free(&m);
}

/* ---- the flight recorder ------------------------------------------------------------- */

static atomic_int flying;
static _Atomic int64_t flight_done; /* the last counter value fully recorded */

static void *flight_worker(void *p) {
  (void)p;
  for (int64_t k = 1; atomic_load(&flying); k++) {
    pprt_counter("flight", k);
    atomic_store(&flight_done, k);
  }
  return NULL;
}

static void test_flight_snapshot_holds_recent_events(void **state) {
  (void)state;
  pprt_flight_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.max_bytes = 256 << 10;
  assert_int_equal(pprt_flight_start(&o), 0);
  atomic_store(&flying, 1);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, flight_worker, NULL), 0);
  /* Let it run past several budgets. */
  while (atomic_load(&flight_done) < 2000000)
    sched_yield();
  int64_t before = atomic_load(&flight_done);
  membuf m = {0};
  assert_int_equal(pprt_flight_write(mem_writer(&m)), 0);
  atomic_store(&flying, 0);
  pthread_join(th, NULL);
  assert_int_equal(pprt_flight_stop(), 0);

  /* Alone: header and the kept generations, nothing else needed. */
  pprt__trace *t = decode_ok(&m);
  print_message("snapshot: %zu bytes, generations %llu..%llu\n", m.len,
                (unsigned long long)t->first_gen,
                (unsigned long long)(t->first_gen + t->ngens - 1));
  assert_true(m.len < 2 * o.max_bytes);
  assert_true(t->first_gen > 1); /* older generations were dropped */
  /* The counter's values run on without a gap, except where the trace
   * itself says events were lost (a writer thread starved of CPU). */
  int64_t first = 0, last = 0;
  uint64_t gaps = 0;
  for (size_t i = 0; i < t->nevents; i++) {
    const pprt__trace_event *e = &t->events[i];
    if (e->type != PPRT__EV_COUNTER)
      continue;
    if (first == 0)
      first = e->value;
    else if (e->value <= last)
      fail_msg("out of order in the snapshot: %lld after %lld", (long long)e->value,
               (long long)last);
    else
      gaps += (uint64_t)(e->value - last - 1);
    last = e->value;
  }
  if (gaps > lost_total(t))
    fail_msg("%llu events missing from the snapshot, %llu reported lost", (unsigned long long)gaps,
             (unsigned long long)lost_total(t));
  assert_true(first > 1);
  /* Everything recorded before the snapshot began is in it. */
  assert_true(last >= before);
  pprt__trace_free(t);
  mem_free(&m);
  /* The recorder is gone. */
  assert_int_equal(pprt_flight_write(mem_writer(&m)), -EPIPE);
}

static void test_flight_time_budget(void **state) {
  (void)state;
  pprt_flight_options o;
  memset(&o, 0, sizeof o);
  o.max_age_ns = 40000000; /* 40 ms: generations of 10 ms */
  assert_int_equal(pprt_flight_start(&o), 0);
  pprt_counter("old", 1);
  struct timespec ts = {0, 150000000};
  nanosleep(&ts, NULL);
  pprt_counter("new", 2);
  membuf m = {0};
  assert_int_equal(pprt_flight_write(mem_writer(&m)), 0);
  assert_int_equal(pprt_flight_stop(), 0);
  pprt__trace *t = decode_ok(&m);
  int saw_old = 0, saw_new = 0;
  for (size_t i = 0; i < t->nevents; i++) {
    saw_old |= str_is(&t->events[i].name, "old");
    saw_new |= str_is(&t->events[i].name, "new");
  }
  assert_false(saw_old);
  assert_true(saw_new);
  pprt__trace_free(t);
  mem_free(&m);
}

/* ---- edge cases -------------------------------------------------------------------- */

static void test_unbalanced_regions_export_nested(void **state) {
  (void)state;
  membuf m = {0};
  assert_int_equal(pprt_trace_start(NULL, mem_writer(&m)), 0);
  pprt_region_end(); /* begun before the trace */
  pprt_region_end();
  pprt_region_begin("a");
  pprt_region_begin("b");
  pprt_region_end();
  pprt_region_begin("c"); /* still open at stop, inside a */
  assert_int_equal(pprt_trace_stop(), 0);
  pprt__trace *t = decode_ok(&m);
  jdoc doc;
  export_check(t, &doc); /* nesting, balance and names checked there */
  assert_int_equal(count_ph(&doc, "B", "(begun before the trace)"), 2);
  assert_int_equal(count_ph(&doc, "E", "(begun before the trace)"), 2);
  assert_int_equal(count_ph(&doc, "B", "a"), 1);
  assert_int_equal(count_ph(&doc, "E", "a"), 1);
  assert_int_equal(count_ph(&doc, "E", "c"), 1);
  /* c closes before a, after everything the thread did. */
  size_t ec = 0, ea = 0;
  for (size_t i = 0; i < doc.n; i++) {
    if (!strcmp(doc.ev[i].ph, "E") && slice_is(doc.ev[i].name, "c"))
      ec = i;
    if (!strcmp(doc.ev[i].ph, "E") && slice_is(doc.ev[i].name, "a"))
      ea = i;
  }
  assert_true(ec < ea && doc.ev[ec].ts < doc.ev[ea].ts);
  json_free(&doc);
  pprt__trace_free(t);
  mem_free(&m);
}

static atomic_int sig_count;

static void annotate_in_handler(int sig) {
  (void)sig;
  pprt_region_begin("handler");
  pprt_counter("in handler", 1);
  pprt_region_end();
  atomic_fetch_add(&sig_count, 1);
}

/* Signals land in the middle of annotations: the interrupted event and the
 * handler's must not corrupt each other; what the handler could not record
 * is counted. */
static void test_signal_handler_annotations(void **state) {
  (void)state;
  membuf m = {0};
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = annotate_in_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, &old);
  assert_int_equal(pprt_trace_start(NULL, mem_writer(&m)), 0);
  struct itimerval it = {{0, 200}, {0, 200}};
  setitimer(ITIMER_REAL, &it, NULL);
  /* A bounded amount of work, paced so that the trace stays small. */
  uint64_t emitted = 0;
  for (int i = 0; i < 100000 || atomic_load(&sig_count) < 100; i++) {
    pprt_region_begin("main");
    pprt_log("main", "a message long enough to take a while to copy into the buffer");
    pprt_region_end();
    emitted += 3;
    uint64_t until = pprt__os_monotonic_ns() + 500;
    while (pprt__os_monotonic_ns() < until)
      ;
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  assert_int_equal(pprt_trace_stop(), 0);
  sigaction(SIGALRM, &old, NULL);
  pprt__trace *t = decode_ok(&m);
  /* Every event the loop and the handlers wrote is recorded or counted
   * lost: this thread's events plus the losses make emitted + 3 per
   * signal, exactly. The handler's own counters show it did record. */
  uint64_t signals = (uint64_t)atomic_load(&sig_count);
  uint64_t handler = 0;
  const pprt__trace_event **ev = malloc((emitted + 3 * signals + 16) * sizeof *ev);
  size_t n = events_of(t, pprt__os_thread_id(), ev, emitted + 3 * signals + 16);
  for (size_t i = 0; i < n && i < emitted + 3 * signals + 16; i++)
    handler += ev[i]->type == PPRT__EV_COUNTER;
  free(ev);
  pprt__trace_stats stats;
  pprt__trace_get_stats(&stats);
  assert_int_equal(lost_total(t), stats.events_dropped);
  assert_int_equal(n + lost_total(t), emitted + 3 * signals);
  assert_true(handler > 0 && handler <= signals);
  print_message("%llu signals, %llu of their events lost\n", (unsigned long long)signals,
                (unsigned long long)lost_total(t));
  jdoc doc;
  export_check(t, &doc);
  json_free(&doc);
  pprt__trace_free(t);
  mem_free(&m);
}

/* A writer that stalls: threads fill their buffers, events are dropped and
 * counted, and recorded + lost = emitted. */
/* A writer that takes the file's first bytes, then nothing until the test
 * opens the gate: the buffers fill whatever the machine's speed (a fixed
 * delay per write was outrun under qemu on a busy machine). */
static atomic_int write_gate, writes_seen;
static int gated_write(void *ctx, const void *data, size_t len) {
  if (atomic_fetch_add(&writes_seen, 1) > 0)
    for (int i = 0; i < 60000 && !atomic_load(&write_gate); i++) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  return mem_write(ctx, data, len);
}

static void test_full_buffers_count_losses(void **state) {
  (void)state;
  membuf m = {0};
  pprt_writer w = {gated_write, &m};
  pprt_trace_options o = quick_options();
  o.buffer_limit = 256 << 10;
  o.generation_ns = 1000000;
  atomic_store(&write_gate, 0);
  atomic_store(&writes_seen, 0);
  assert_int_equal(pprt_trace_start(&o, w), 0);
  const uint64_t emitted = 2000000;
  for (uint64_t k = 0; k < emitted; k++)
    pprt_counter("c", (int64_t)k);
  atomic_store(&write_gate, 1);
  assert_int_equal(pprt_trace_stop(), 0);
  pprt__trace *t = decode_ok(&m);
  uint64_t recorded = 0;
  for (size_t i = 0; i < t->nevents; i++)
    recorded += t->events[i].type == PPRT__EV_COUNTER;
  assert_true(lost_total(t) > 0);
  assert_int_equal(recorded + lost_total(t), emitted);
  jdoc doc;
  export_check(t, &doc);
  assert_true(count_ph(&doc, "i", NULL) > 0); /* the losses are shown */
  json_free(&doc);
  pprt__trace_free(t);
  mem_free(&m);
}

static void *started_thread(void *p) {
  pprt__trace_thread_start();
  pprt_thread_name("short-lived");
  pprt_region_begin("work");
  pprt_region_end();
  *(uint64_t *)p = pprt__os_thread_id();
  return NULL;
}

static void test_thread_start_end_and_names(void **state) {
  (void)state;
  membuf m = {0};
  /* A name given before the trace is recorded when the thread first
   * writes. */
  assert_int_equal(pprt_thread_name("named early"), 0);
  assert_int_equal(pprt_trace_start(NULL, mem_writer(&m)), 0);
  uint64_t tids[20];
  for (int round = 0; round < 20; round++) {
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, started_thread, &tids[round]), 0);
    pthread_join(th, NULL);
  }
  pprt_region_begin("main");
  pprt_region_end();
  assert_int_equal(pprt_trace_stop(), 0);
  pprt__trace *t = decode_ok(&m);
  for (int round = 0; round < 20; round++) {
    const pprt__trace_event *ev[8];
    size_t n = events_of_all(t, tids[round], ev, 8);
    assert_int_equal(n, 5);
    assert_int_equal(ev[0]->type, PPRT__EV_THREAD_START);
    assert_int_equal(ev[1]->type, PPRT__EV_THREAD_NAME);
    assert_int_equal(ev[4]->type, PPRT__EV_THREAD_END);
    /* Named through pprt: no OS name at the end. */
    assert_true(str_is(&ev[1]->name, "short-lived"));
  }
  const pprt__trace_thread *me = find_thread(t, pprt__os_thread_id());
  assert_non_null(me);
  assert_true(str_is(&me->name, "named early"));
  jdoc doc;
  export_check(t, &doc);
  assert_true(count_ph(&doc, "M", "thread_name") >= 2);
  json_free(&doc);
  pprt__trace_free(t);
  mem_free(&m);
}

static void test_fork_child_does_not_trace(void **state) {
  (void)state;
  membuf m = {0};
  assert_int_equal(pprt_trace_start(NULL, mem_writer(&m)), 0);
  pprt_region_begin("parent");
  pid_t pid = fork();
  if (pid == 0) {
    pprt_region_end();
    pprt_counter("child", 1);
    _exit(pprt_trace_stop() == -EPIPE && !pprt__trace_running() ? 0 : 1);
  }
  int status;
  waitpid(pid, &status, 0);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  pprt_region_end();
  assert_int_equal(pprt_trace_stop(), 0);
  pprt__trace *t = decode_ok(&m);
  for (size_t i = 0; i < t->nevents; i++)
    assert_false(str_is(&t->events[i].name, "child"));
  pprt__trace_free(t);
  mem_free(&m);
}

static void test_start_stop_cycles(void **state) {
  (void)state;
  for (int i = 0; i < 200; i++) {
    membuf m = {0};
    assert_int_equal(pprt_trace_start(NULL, mem_writer(&m)), 0);
    pprt_region_begin("cycle");
    pprt_region_end();
    assert_int_equal(pprt_trace_stop(), 0);
    pprt__trace *t = decode_ok(&m);
    pprt__trace_free(t);
    mem_free(&m);
  }
}

static int failing_write(void *ctx, const void *data, size_t len) {
  int *calls = ctx;
  (void)data;
  (void)len;
  return ++*calls == 1 ? 0 : -ENOSPC;
}

static void test_writer_error_reported_by_stop(void **state) {
  (void)state;
  int calls = 0;
  pprt_writer w = {failing_write, &calls};
  assert_int_equal(pprt_trace_start(NULL, w), 0);
  pprt_region_begin("x");
  assert_int_equal(pprt_trace_stop(), -ENOSPC);
}

/* ---- the decoder on bad input ----------------------------------------------------------- */

static void small_trace(membuf *m) {
  assert_int_equal(pprt_trace_start(NULL, mem_writer(m)), 0);
  for (int i = 0; i < 12; i++)
    emit_nth(i);
  assert_int_equal(pprt__trace_advance(), 0);
  for (int i = 12; i < 24; i++)
    emit_nth(i);
  assert_int_equal(pprt_trace_stop(), 0);
}

static void test_decoder_every_prefix(void **state) {
  (void)state;
  membuf m = {0};
  small_trace(&m);
  size_t whole = 0;
  for (size_t len = 0; len < m.len; len++) {
    pprt__trace *t = (pprt__trace *)1;
    char err[256];
    int rc = pprt__trace_decode(m.data, len, 0, &t, err, sizeof err);
    if (rc == 0) {
      /* Cut exactly after the first generation: a complete, shorter trace. */
      assert_int_equal(t->ngens, 1);
      pprt__trace_free(t);
      whole++;
      continue;
    }
    assert_null(t);
    assert_int_equal(strncmp(err, "offset ", 7), 0);
    /* With PARTIAL, a cut inside the second generation keeps the first. */
    rc = pprt__trace_decode(m.data, len, PPRT__TRACE_DECODE_PARTIAL, &t, err, sizeof err);
    if (rc == 0) {
      assert_int_equal(t->ngens, 1);
      assert_true(t->truncated_at > 0 && t->truncated_at <= len);
      pprt__trace_free(t);
    }
  }
  assert_int_equal(whole, 1);
  mem_free(&m);
}

static void test_decoder_byte_flips(void **state) {
  (void)state;
  membuf m = {0};
  small_trace(&m);
  unsigned char *copy = malloc(m.len);
  uint64_t x = 0x9e3779b97f4a7c15u;
  size_t ok = 0;
  for (int round = 0; round < 20000; round++) {
    memcpy(copy, m.data, m.len);
    int flips = 1 + round % 4;
    for (int f = 0; f < flips; f++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      copy[x % m.len] ^= (unsigned char)(1u << (x >> 32) % 8);
    }
    pprt__trace *t = NULL;
    char err[256] = "";
    int rc = pprt__trace_decode(copy, m.len, 0, &t, err, sizeof err);
    if (rc == 0) {
      ok++;
      membuf j = {0};
      assert_int_equal(pprt__trace_export_json(t, mem_writer(&j)), 0);
      jdoc doc;
      if (json_read((const char *)j.data, j.len, &doc) != 0)
        fail_msg("export of a decodable file is not JSON: %s", doc.err);
      const char *why = json_check_nesting(&doc);
      if (why)
        fail_msg("export of a decodable file: %s", why);
      json_free(&doc);
      mem_free(&j);
      pprt__trace_free(t);
    } else {
      assert_null(t);
      assert_int_equal(strncmp(err, "offset ", 7), 0);
    }
  }
  print_message("byte flips: %zu of 20000 still decoded\n", ok);
  free(copy);
  mem_free(&m);
}

static void test_decoder_rejects_newer_version(void **state) {
  (void)state;
  membuf m = {0};
  small_trace(&m);
  m.data[8] = PPRT__TRACE_VERSION + 1;
  pprt__trace *t = NULL;
  char err[256];
  assert_int_equal(pprt__trace_decode(m.data, m.len, 0, &t, err, sizeof err), -ENOTSUP);
  char want[128];
  snprintf(want, sizeof want, "version %d is newer than this reader (version %d)",
           PPRT__TRACE_VERSION + 1, PPRT__TRACE_VERSION);
  assert_non_null(strstr(err, want));
  assert_int_equal(strncmp(err, "offset 8:", 9), 0);
  m.data[8] = 0;
  assert_int_equal(pprt__trace_decode(m.data, m.len, 0, &t, err, sizeof err), -EINVAL);
  m.data[8] = PPRT__TRACE_VERSION;
  m.data[0] = 'X';
  assert_int_equal(pprt__trace_decode(m.data, m.len, 0, &t, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "not a pprt trace"));
  mem_free(&m);
}

/* A file of one generation: FRAMES with the given payload, FREQUENCY, GEN_END. */
static size_t frames_file(uint8_t *f, unsigned version, const uint8_t *frames, uint8_t len) {
  static const uint8_t magic[8] = {0x7f, 'P', 'P', 'R', 'T', 'T', 'R', 'C'};
  size_t n = 0;
  memcpy(f, magic, 8);
  n = 8;
  f[n++] = (uint8_t)version;
  for (int i = 0; i < 7; i++)
    f[n++] = 0;
  const uint8_t rec_frames[] = {PPRT__TR_FRAMES, 1, len, 0, 0, 0};
  memcpy(f + n, rec_frames, sizeof rec_frames);
  n += sizeof rec_frames;
  memcpy(f + n, frames, len);
  n += len;
  /* FREQUENCY: 1e9 ticks a second (uvarint 0x80 0x94 0xeb 0xdc 0x03), sync 0 0 0 */
  const uint8_t freq[] = {PPRT__TR_FREQUENCY, 1, 8, 0, 0, 0, 0x80, 0x94, 0xeb, 0xdc, 0x03, 0, 0, 0,
                          PPRT__TR_GEN_END,   1, 0, 0, 0, 0};
  memcpy(f + n, freq, sizeof freq);
  return n + sizeof freq;
}

/* FRAMES (source lines) is a version 2 record: unknown in version 1, and
 * checked in version 2. */
static void test_decoder_checks_frames(void **state) {
  (void)state;
  uint8_t f[128];
  pprt__trace *t = NULL;
  char err[256];
  const uint8_t empty_entry[] = {0x10, 0}; /* address 0x10, 0 lines */
  size_t n = frames_file(f, 1, empty_entry, sizeof empty_entry);
  assert_int_equal(pprt__trace_decode(f, n, 0, &t, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "offset 16: unknown record type 8"));
  n = frames_file(f, 2, empty_entry, sizeof empty_entry);
  assert_int_equal(pprt__trace_decode(f, n, 0, &t, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "frames entry of 0 lines"));
  const uint8_t unknown_string[] = {0x10, 1, 5, 0, 42}; /* function string 5: not defined */
  n = frames_file(f, 2, unknown_string, sizeof unknown_string);
  assert_int_equal(pprt__trace_decode(f, n, 0, &t, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "string id 5 is not in generation 1's strings"));
  const uint8_t no_function[] = {0x10, 1, 0, 0, 42};
  n = frames_file(f, 2, no_function, sizeof no_function);
  assert_int_equal(pprt__trace_decode(f, n, 0, &t, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "frames line without a function name"));
  assert_null(t);
}

/* ---- the clock --------------------------------------------------------------------- */

/* The format's tick conversion is exact (floor of the exact quotient) for
 * any count and rate, including products far beyond 64 bits: a long trace
 * at 3 GHz passes 2^64 / 1e9 ticks (6 s) from its sync point. */
static void test_tick_conversion_is_exact(void **state) {
  (void)state;
  uint64_t rem;
  assert_true(pprt__muldiv(UINT64_MAX, UINT64_MAX, UINT64_MAX, &rem) == UINT64_MAX && rem == 0);
  assert_true(pprt__muldiv(UINT64_MAX, 2, 3, &rem) == (UINT64_MAX / 3) * 2 && rem == 0);
  assert_true(pprt__muldiv(UINT64_MAX, 2, 1, &rem) == UINT64_MAX); /* does not fit */
  assert_true(pprt__muldiv(0, 7, 3, &rem) == 0 && rem == 0);
  /* A day at 3 GHz, and ten years at 24 MHz, to the nanosecond. */
  uint64_t day = 86400ull * 1000000000u;
  assert_true(pprt__trace_ticks_to_ns((int64_t)(86400ull * 3000000000u + 2), 3000000000u) ==
              (int64_t)day);
  uint64_t years = 10 * 365 * 86400ull;
  assert_true(pprt__trace_ticks_to_ns((int64_t)(years * 24000000u), 24000000u) ==
              (int64_t)(years * 1000000000u));
  /* 1 tick at 62.5 MHz is 16 ns; at 3 GHz a third of a ns, rounded down,
   * also below zero (so the conversion never decreases). */
  assert_true(pprt__trace_ticks_to_ns(1, 62500000u) == 16);
  assert_true(pprt__trace_ticks_to_ns(1, 3000000000u) == 0);
  assert_true(pprt__trace_ticks_to_ns(-1, 3000000000u) == -1);
  assert_true(pprt__trace_ticks_to_ns(-3, 3000000000u) == -1);
  assert_true(pprt__trace_ticks_to_ns(-4, 3000000000u) == -2);
  assert_true(pprt__trace_ticks_to_ns(INT64_MAX, 1) == PPRT__TRACE_NS_LIMIT);
  assert_true(pprt__trace_ticks_to_ns(INT64_MIN, 1) == -PPRT__TRACE_NS_LIMIT);
  assert_true(pprt__trace_add_ns(PPRT__TRACE_NS_LIMIT, INT64_MAX) == PPRT__TRACE_NS_LIMIT);
  assert_true(pprt__trace_add_ns(-PPRT__TRACE_NS_LIMIT, INT64_MIN) == -PPRT__TRACE_NS_LIMIT);
  assert_true(pprt__trace_add_ns(5, -7) == -2);
  /* Against a 128-bit reference where the compiler has one (not i386), and
   * never decreasing, over pseudo-random counts and rates. */
  uint64_t x = 0x9e3779b97f4a7c15ull;
  int64_t prev = INT64_MIN;
  for (int i = 0; i < 200000; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint64_t a = x >> (x & 63), b = (x * 0x2545f4914f6cdd1dull) >> (x >> 58), c = (x >> 17) | 1;
    uint64_t q = pprt__muldiv(a, b, c, &rem);
#ifdef __SIZEOF_INT128__
    unsigned __int128 p = (unsigned __int128)a * b, want = p / c;
    if (want > UINT64_MAX)
      assert_true(q == UINT64_MAX);
    else
      assert_true(q == (uint64_t)want && rem == (uint64_t)(p % c));
#else
    if (q != UINT64_MAX)
      assert_true(rem < c);
#endif
    int64_t ns = pprt__trace_ticks_to_ns((int64_t)i * 977 - 100000000, 2999999999u);
    assert_true(ns >= prev);
    prev = ns;
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_every_event),
      cmocka_unit_test(test_annotations_without_trace),
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_threads_all_events_in_order),
      cmocka_unit_test(test_generation_boundary_at_every_position),
      cmocka_unit_test(test_batch_boundary_at_every_position),
      cmocka_unit_test(test_string_longer_than_a_batch),
      cmocka_unit_test(test_flight_snapshot_holds_recent_events),
      cmocka_unit_test(test_flight_time_budget),
      cmocka_unit_test(test_unbalanced_regions_export_nested),
      cmocka_unit_test(test_signal_handler_annotations),
      cmocka_unit_test(test_full_buffers_count_losses),
      cmocka_unit_test(test_thread_start_end_and_names),
      cmocka_unit_test(test_fork_child_does_not_trace),
      cmocka_unit_test(test_start_stop_cycles),
      cmocka_unit_test(test_writer_error_reported_by_stop),
      cmocka_unit_test(test_decoder_every_prefix),
      cmocka_unit_test(test_decoder_byte_flips),
      cmocka_unit_test(test_decoder_rejects_newer_version),
      cmocka_unit_test(test_decoder_checks_frames),
      cmocka_unit_test(test_tick_conversion_is_exact),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
