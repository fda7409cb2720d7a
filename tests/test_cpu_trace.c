/* The CPU profiler running with a trace: its samples go into the trace too,
 * on the sampled thread, with their stacks named and their own times.
 * Real timers and signals: labelled qemu-unsafe, like test_cpu. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/platform.h"
#include "core/trace.h"
#include "core/trace_format.h"
#include "pprt.h"
#include "read/trace_decode.h"
#include "read/trace_json.h"
#include "tests/trace_util.h"
#include "tests/workload.h"

static volatile uint64_t sink;
static uint64_t give_up_at; /* monotonic ns: a burner stops then, CPU time or not */

/* Each burner spends BURN_CPU_NS of its own CPU time in trace_burn_loop,
 * however busy the machine is: at 250 Hz that is ~150 samples a thread. */
#define BURN_CPU_NS 600000000u

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

TEST_WORKLOAD static void trace_burn_loop(void) {
  uint64_t x = 1, end = thread_cpu_ns() + BURN_CPU_NS;
  while (thread_cpu_ns() < end && pprt__os_monotonic_ns() < give_up_at)
    for (int i = 0; i < 100000; i++)
      x = x * 6364136223846793005u + 1442695040888963407u;
  sink = x;
}

static void *burner(void *p) {
  *(uint64_t *)p = pprt__os_thread_id();
  pprt_region_begin("burn");
  trace_burn_loop();
  pprt_region_end();
  return NULL;
}

/* Whether pc is in fn's code: the symbol that covers it starts at fn. */
static int pc_in(pprt__os_symbolizer *sym, uint64_t pc, uintptr_t fn) {
  const char *name;
  uintptr_t off;
  return pprt__os_symbolize(sym, (uintptr_t)pc, &name, &off) == 0 && (uintptr_t)pc - off == fn;
}

static int str_equal(pprt__trace_str s, const char *want) {
  return s.s != NULL && s.len == strlen(want) && memcmp(s.s, want, s.len) == 0;
}

static void test_cpu_samples_in_trace(void **state) {
  (void)state;
  membuf tr = {0}, prof = {0};
  assert_int_equal(pprt_trace_start(NULL, mem_writer(&tr)), 0);
  pprt_cpu_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  o.hz = 250;
  assert_int_equal(pprt_cpu_start(&o, mem_writer(&prof)), 0);
  give_up_at = pprt__os_monotonic_ns() + 60 * 1000000000ull;
  uint64_t tids[2];
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&th[i], NULL, burner, &tids[i]), 0);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  /* The profiler first: its reader hands the last samples to the trace. */
  assert_int_equal(pprt_cpu_stop(), 0);
  assert_int_equal(pprt_trace_stop(), 0);

  pprt__trace *t = NULL;
  char err[256];
  if (pprt__trace_decode(tr.data, tr.len, 0, &t, err, sizeof err) != 0)
    fail_msg("decode: %s", err);
  /* The burn loop is found by address; its frames must carry the name the
   * symbol table gives that address. */
  pprt__os_symbolizer *sym;
  assert_int_equal(pprt__os_symbolizer_open(&sym), 0);
  const uintptr_t fn = (uintptr_t)&trace_burn_loop;
  const char *fn_name;
  uintptr_t fn_off;
  assert_int_equal(pprt__os_symbolize(sym, fn, &fn_name, &fn_off), 0);
  assert_int_equal(fn_off, 0);
  size_t samples[2] = {0, 0}, in_fn = 0, named = 0, outside = 0;
  uint64_t begin[2] = {0, 0}, end[2] = {0, 0};
  for (size_t i = 0; i < t->nevents; i++) {
    const pprt__trace_event *e = &t->events[i];
    for (int k = 0; k < 2; k++)
      if (e->emitter == tids[k] && e->type == PPRT__EV_REGION_BEGIN)
        begin[k] = e->ts;
      else if (e->emitter == tids[k] && e->type == PPRT__EV_REGION_END)
        end[k] = e->ts;
  }
  for (size_t i = 0; i < t->nevents; i++) {
    const pprt__trace_event *e = &t->events[i];
    if (e->type != PPRT__EV_CPU_SAMPLE)
      continue;
    assert_true(e->emitter != e->tid); /* carried by the profiler's reader */
    assert_true(e->value >= 1);
    assert_true(e->stack >= 0);
    const pprt__trace_stack *st = &t->stacks[e->stack];
    for (int k = 0; k < 2; k++) {
      if (e->tid != tids[k])
        continue;
      samples[k]++;
      /* Its own time: inside the thread's region, give or take a tick. A
       * thread preempted between a sample and its region's edge (for tens
       * of milliseconds on a loaded machine) puts a sample just outside:
       * a few are allowed, none far outside. */
      assert_true(e->ts + 1000000000 >= begin[k] && e->ts <= end[k] + 1000000000);
      outside += !(e->ts + 10000000 >= begin[k] && e->ts <= end[k] + 10000000);
      for (size_t f = 0; f < st->n; f++)
        if (pc_in(sym, st->pcs[f], fn)) {
          in_fn++;
          named += str_equal(st->names[f], fn_name);
        }
    }
  }
  print_message("samples %zu + %zu, %zu in %s (%zu named so), %zu outside the region\n",
                samples[0], samples[1], in_fn, fn_name, named, outside);
  assert_true(outside * 20 <= samples[0] + samples[1]);
  /* 0.6 s of CPU at 250 Hz is ~150 per thread; leave room for timer slack. */
  assert_true(samples[0] >= 20 && samples[1] >= 20);
  assert_true(in_fn >= (samples[0] + samples[1]) / 2);
  assert_int_equal(named, in_fn);

  membuf j = {0};
  assert_int_equal(pprt__trace_export_json(t, mem_writer(&j)), 0);
  jdoc doc;
  if (json_read((const char *)j.data, j.len, &doc) != 0)
    fail_msg("export: %s", doc.err);
  assert_null(json_check_nesting(&doc));
  size_t inst = 0;
  for (size_t i = 0; i < doc.n; i++)
    if (slice_is(doc.ev[i].name, "cpu sample") && slice_has(doc.ev[i].args, fn_name))
      inst++;
  assert_true(inst >= named / 2);
  pprt__os_symbolizer_close(sym);
  json_free(&doc);
  mem_free(&j);
  pprt__trace_free(t);
  mem_free(&tr);
  mem_free(&prof);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_samples_in_trace),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
