/* Trace encoder benchmark: what an annotation costs with tracing off and on
 * (one and two threads writing at once), and how many bytes an event takes
 * in the file.
 *
 * Baselines measured in the same run, so the figures read as ratios on any
 * machine: an empty function call (what an annotation with tracing off can
 * at best cost), a relaxed atomic increment (one locked instruction, which
 * the write path avoids), and the two clocks an event could read.
 *
 * Targets (issue 6): <= 20 ns per event on, <= 2 ns per annotation off,
 * <= 4 bytes per region event on average.
 *
 * Usage: bench/trace [seconds per measurement, default 1] */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/platform.h"
#include "core/trace.h"
#include "pprt.h"

#include "bench_util.h"

static double seconds = 1.0;

static double now_s(void) {
  return (double)pprt__os_monotonic_ns() / 1e9;
}

/* ---- baselines ---------------------------------------------------------------------- */

__attribute__((noinline)) static void empty_call(const char *name) {
  __asm__ volatile("" ::"r"(name) : "memory");
}

/* Through a pointer the compiler cannot see through, as a call into a
 * library is. */
static void (*volatile empty_fn)(const char *) = empty_call;

static double bench_empty_call(int direct) {
  void (*fn)(const char *) = empty_fn;
  long n = 0;
  double t0 = now_s(), t;
  do {
    if (direct)
      for (int i = 0; i < 1000000; i++)
        empty_call("name");
    else
      for (int i = 0; i < 1000000; i++)
        fn("name");
    n += 1000000;
  } while ((t = now_s()) - t0 < seconds);
  return (t - t0) * 1e9 / (double)n;
}

static _Atomic uint64_t counter;

static double bench_atomic_inc(void) {
  long n = 0;
  double t0 = now_s(), t;
  do {
    for (int i = 0; i < 1000000; i++)
      atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);
    n += 1000000;
  } while ((t = now_s()) - t0 < seconds);
  return (t - t0) * 1e9 / (double)n;
}

static volatile uint64_t clock_sink;

static double bench_clock(uint64_t (*clock)(void)) {
  long n = 0;
  double t0 = now_s(), t;
  do {
    uint64_t s = 0;
    for (int i = 0; i < 1000000; i++)
      s += clock();
    clock_sink = s;
    n += 1000000;
  } while ((t = now_s()) - t0 < seconds);
  return (t - t0) * 1e9 / (double)n;
}

/* ---- annotations ----------------------------------------------------------------------- */

static double cpu_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Annotation calls (begin and end counted separately) for secs of wall
 * time: ns per call by the wall clock and by the thread's CPU clock. */
typedef struct loop_result {
  double wall_ns, cpu_ns;
  long events;
} loop_result;

static loop_result region_loop(double secs) {
  long n = 0;
  double c0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
  double t0 = now_s(), t;
  do {
    for (int i = 0; i < 100000; i++) {
      pprt_region_begin("request");
      pprt_region_end();
    }
    n += 200000;
  } while ((t = now_s()) - t0 < secs);
  double c = cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
  return (loop_result){(t - t0) * 1e9 / (double)n, c * 1e9 / (double)n, n};
}

static int discard(void *ctx, const void *data, size_t len) {
  (void)data;
  *(size_t *)ctx += len;
  return 0;
}

struct runner {
  atomic_int *go; /* runners not yet ready (no pthread_barrier on macOS) */
  loop_result r;
};

static void *runner_main(void *p) {
  struct runner *r = p;
  region_loop(0.05); /* warm: the thread's buffer and its name cache */
  atomic_fetch_sub(r->go, 1);
  while (atomic_load(r->go) > 0)
    sched_yield();
  r->r = region_loop(seconds);
  return NULL;
}

typedef struct on_result {
  double wall_ns, cpu_ns; /* per event, per writing thread */
  double writer_ns;       /* the writer thread's CPU per event */
  uint64_t dropped;
} on_result;

/* Tracing on, nthreads writing at once. */
static on_result bench_on(int nthreads) {
  size_t bytes = 0;
  pprt_writer w = {discard, &bytes};
  double proc0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
  if (pprt_trace_start(NULL, w) != 0)
    abort();
  atomic_int go = nthreads;
  struct runner r[8];
  pthread_t th[8];
  for (int i = 0; i < nthreads; i++) {
    r[i].go = &go;
    pthread_create(&th[i], NULL, runner_main, &r[i]);
  }
  on_result res = {0, 0, 0, 0};
  double events = 0, threads_cpu = 0;
  for (int i = 0; i < nthreads; i++) {
    pthread_join(th[i], NULL);
    res.wall_ns += r[i].r.wall_ns / nthreads;
    res.cpu_ns += r[i].r.cpu_ns / nthreads;
    events += (double)r[i].r.events;
    threads_cpu += r[i].r.cpu_ns * (double)r[i].r.events;
  }
  if (pprt_trace_stop() != 0)
    abort();
  /* The process's CPU minus the writing threads' (warm-up and this thread
   * are noise next to a second of writing). */
  double proc = (cpu_s(CLOCK_PROCESS_CPUTIME_ID) - proc0) * 1e9;
  res.writer_ns = (proc - threads_cpu) / events;
  pprt__trace_stats st;
  pprt__trace_get_stats(&st);
  res.dropped = st.events_dropped;
  return res;
}

static int mem_write(void *ctx, const void *data, size_t len) {
  size_t *m = ctx;
  (void)data;
  m[0] += len;
  return 0;
}

/* File bytes per event for n begin/end pairs, gap_ns apart (0: back to
 * back), everything included: header, batch headers, tables, clock. */
static double bytes_per_event(long pairs, uint64_t gap_ns, uint64_t *dropped) {
  size_t total[1] = {0};
  pprt_writer w = {mem_write, total};
  if (pprt_trace_start(NULL, w) != 0)
    abort();
  static const char *const names[4] = {"parse", "plan", "execute", "commit"};
  for (long i = 0; i < pairs; i++) {
    pprt_region_begin(names[i & 3]);
    if (gap_ns) {
      uint64_t until = pprt__os_monotonic_ns() + gap_ns;
      while (pprt__os_monotonic_ns() < until)
        ;
    }
    pprt_region_end();
  }
  if (pprt_trace_stop() != 0)
    abort();
  pprt__trace_stats st;
  pprt__trace_get_stats(&st);
  *dropped = st.events_dropped;
  return (double)total[0] / (double)(2 * pairs);
}

int main(int argc, char **argv) {
  seconds = seconds_arg(argc, argv, seconds);
  pprt__ticks_info clock = pprt__os_ticks_init();
  printf("pprt trace benchmark: trace clock %s\n",
         clock.monotonic ? "the monotonic clock" : "the CPU counter");

  double direct = bench_empty_call(1), call = bench_empty_call(0), inc = bench_atomic_inc();
  double mono = bench_clock(pprt__os_monotonic_ns), ticks = bench_clock(pprt__os_ticks);
  printf("\nbaselines\n");
  printf("  empty function call                       %6.2f ns\n", direct);
  printf("  empty function call (through a pointer)   %6.2f ns\n", call);
  printf("  relaxed atomic increment                  %6.2f ns\n", inc);
  printf("  pprt__os_monotonic_ns                     %6.2f ns\n", mono);
  printf("  pprt__os_ticks (the trace clock)          %6.2f ns\n", ticks);

  double off = region_loop(seconds).wall_ns;
  printf("\ntracing off: one annotation (begin or end)\n");
  printf("  %6.2f ns  = %5.2fx empty call  (target <= 2 ns)\n", off, off / direct);

  /* Per thread, by the thread's CPU clock: what an event costs the thread
   * that records it, whatever else shares the machine's cores (the wall
   * figure includes waiting for a core when writers + the writer thread
   * outnumber them). The writer thread's CPU per event is the rest of the
   * cost, paid on another core. */
  printf("\ntracing on: ns per event, region begin + end in a loop, per thread\n");
  printf("             CPU ns      ratios                        wall ns  writer CPU ns  "
         "dropped\n");
  on_result on[2];
  for (int k = 0; k < 2; k++) {
    on[k] = bench_on(k + 1);
    printf("  %d thread%s  %6.2f  = %5.2fx empty call, %5.2fx atomic inc  %6.2f   %6.2f        "
           "%llu  (target <= 20 ns)\n",
           k + 1, k ? "s" : " ", on[k].cpu_ns, on[k].cpu_ns / call, on[k].cpu_ns / inc,
           on[k].wall_ns, on[k].writer_ns, (unsigned long long)on[k].dropped);
  }
  double on1 = on[0].cpu_ns, on2 = on[1].cpu_ns;

  printf("\nfile size: bytes per region event, all overhead included\n");
  uint64_t db, dg;
  double b0 = bytes_per_event(2000000, 0, &db);
  printf("  back to back          %5.2f bytes  dropped %llu  (target <= 4)\n", b0,
         (unsigned long long)db);
  double b1 = bytes_per_event(200000, 1000, &dg);
  printf("  1 us inside regions   %5.2f bytes  dropped %llu\n", b1, (unsigned long long)dg);

  int ok = off <= 2.0 && on1 <= 20.0 && on2 <= 20.0 && b0 <= 4.0;
  printf("\n%s\n", ok ? "all targets met" : "TARGET MISSED");
  return ok ? 0 : 1;
}
