/* The CPU profiler's reader: a thread that drains the ring into the
 * profile builder (labels: thread id and name, the process's), rescans
 * threads, accounts for threads that block SIGPROF (core/cpu_blocked.c),
 * writes checkpoints of the profile so far when asked to, and ends when
 * stop closes the ring. Also the profile's comments, which stop adds once
 * the reader is done.
 *
 * Which thread: the reader alone, one per session, with every signal
 * blocked; then stop, once it has joined the reader.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/heap.h"
#include "core/platform.h"
#include "core/process.h"
#include "core/profile.h"
#include "core/ring.h"
#include "core/trace.h"
#include "core/unwind.h"
#include "pprt.h"
/* Last: its type names (slot, session) are the CPU profiler's own. */
#include "core/cpu_session.h"

#define RESCAN_NS 250000000ull

/* The thread's name, asked once per thread; NULL when unknown. */
static const char *thread_name(session *s, uint64_t tid) {
  int added;
  int64_t idx = PPRT__TABLE_U64(&s->name_index, s->names, s->nnames, s->names_cap, tid, &added);
  if (idx < 0)
    return NULL;
  if (added) {
    char buf[64];
    s->names[idx].name = pprt__os_thread_name(tid, buf, sizeof buf) == 0 ? strdup(buf) : NULL;
  }
  return s->names[idx].name;
}

/* Whether thread tid has had a sample (every sample's thread is named). */
int pprt__cpu_had_samples(session *s, uint64_t tid) {
  return pprt__table_u64_find(&s->name_index, s->names, sizeof *s->names, tid) >= 0;
}

static void take_record(session *s, const pprt__ring_record *rec) {
  int64_t period = (int64_t)s->period_ns;
  if (rec->kind == PPRT__RING_OVERFLOW) {
    int64_t n = (int64_t)rec->pcs[0];
    int64_t v[2] = {n, n * period};
    s->lost += (uint64_t)n;
    pprt__label labels[PPRT__PROCESS_LABELS];
    size_t nlabels = pprt__process_labels(labels);
    pprt__profile_add_synthetic(s->prof, PPRT__FRAME_LOST, v, labels, nlabels);
    return;
  }
  if (rec->kind != PPRT__RING_DATA)
    return;
  uint64_t tid = rec->hdr[0];
  int64_t count = (int64_t)(rec->hdr[1] & 0xffffffffu);
  uint64_t weight = pprt__cpu_blocked_saw_sample(s, tid, rec->hdr[2]);
  if (weight < rec->hdr[2]) {
    /* The part of the count whose time was already charged to
     * pprt_signals_blocked leaves it with the time; the signal itself
     * stays a sample. */
    double part = (double)(rec->hdr[2] - weight) / (double)rec->hdr[2];
    int64_t taken = (int64_t)(part * (double)count + 0.5);
    count = count - 1 > taken ? count - taken : 1;
  }
  int64_t v[2] = {count, (int64_t)weight};
  const char *name = thread_name(s, tid);
  pprt__label labels[2 + PPRT__PROCESS_LABELS] = {{"thread_id", NULL, (int64_t)tid, "id"},
                                                  {"thread_name", name, 0, NULL}};
  size_t nlabels = name ? 2 : 1;
  nlabels += pprt__process_labels(labels + nlabels);
  s->samples += (uint64_t)count;
  s->signals++;
  s->folds_sq += (uint64_t)count * (uint64_t)count;
  s->sample_ns += weight;
  /* Into a running trace too (it does nothing otherwise). */
  pprt__trace_cpu_sample(tid, rec->timestamp, rec->pcs, rec->npcs, (uint64_t)count);
  if (rec->hdr[1] & PPRT__CPU_FLAG_EXTERNAL) {
    s->external += (uint64_t)count;
    pprt__profile_add_synthetic(s->prof, PPRT__FRAME_EXTERNAL, v, labels, nlabels);
  } else {
    /* The ring holds 64-bit words; on 32-bit systems a pc is narrower. */
    uintptr_t pcs[MAX_DEPTH];
    size_t n = rec->npcs < MAX_DEPTH ? rec->npcs : MAX_DEPTH;
    for (size_t i = 0; i < n; i++)
      pcs[i] = (uintptr_t)rec->pcs[i];
    pprt__profile_add(s->prof, pcs, n, PPRT__STACK_LEAF_EXACT, v, labels, nlabels);
  }
}

/* Writes the profile so far through the checkpoint's writer: the comments
 * and mappings of a full profile are added for this write only. */
static void write_checkpoint(session *s, uint64_t now) {
  pprt_writer out;
  if (s->checkpoint.begin(s->checkpoint.ctx, &out) != 0)
    return;
  pprt__profile_mark mark = pprt__profile_get_mark(s->prof);
  double cpu = pprt__cpu_seconds() - s->start_cpu;
  pprt__profile_set_time(s->prof, s->start_wall, (int64_t)(now - s->start_mono));
  pprt__cpu_add_comments(s, cpu);
  char c[160];
  snprintf(c, sizeof c,
           "checkpoint %llu: the profile so far, at %.3f s of CPU and %.3f s of wall time; "
           "rewritten every %.3f s",
           (unsigned long long)++s->checkpoints, cpu, (double)(now - s->start_mono) / 1e9,
           (double)s->checkpoint.interval_ns / 1e9);
  pprt__profile_add_comment(s->prof, c);
  int rc = pprt__profile_add_os_mappings(s->prof);
  if (rc == 0)
    rc = pprt__profile_write_os(s->prof, s->symbolize, out);
  pprt__profile_rewind(s->prof, mark);
  s->checkpoint.end(s->checkpoint.ctx, rc);
}

static __thread int t_reader __attribute__((tls_model("initial-exec")));

int pprt__cpu_on_reader(void) {
  return t_reader;
}

void *pprt__cpu_reader_main(void *arg) {
  session *s = arg;
  t_reader = 1;
  pprt__heap_ignore_thread(); /* the profile builder's memory is pprt's */
  atomic_store(&s->reader_tid, pprt__os_thread_id());
  /* cpu_start sets the session's start times after this thread exists,
   * under g_control: wait for it to let go (TSan saw the first pass race
   * with those writes). */
  pprt__cpu_await_start();
  pprt__ring_record rec;
  for (;;) {
    int rc = pprt__ring_read(&s->ring, PPRT__RING_BLOCK, 100000000, s->readbuf, &rec);
    if (rc == 0)
      break;
    if (rc == 1)
      take_record(s, &rec);
    if (s->unwinder == PPRT_UNWIND_CFI && pprt__cfi_stale())
      pprt__cfi_refresh();
    uint64_t now = pprt__os_monotonic_ns();
    if (now - s->last_blocked_check >= BLOCKED_CHECK_NS) {
      s->last_blocked_check = now;
      pprt__cpu_check_blocked(s);
    }
    if (now - s->last_rescan >= RESCAN_NS) {
      s->last_rescan = now;
      pprt__cpu_update_known_blocked(s);
      /* Tables for images dlopen'ed since (cheap when there are none). */
      if (s->unwinder == PPRT_UNWIND_CFI)
        pprt__cfi_refresh();
      if (s->thread_timers)
        pprt__cpu_rescan_current(s);
    }
    if (s->checkpoint.interval_ns && now - s->last_checkpoint >= s->checkpoint.interval_ns) {
      write_checkpoint(s, now);
      /* From the end of the write: a slow write never runs back to back. */
      s->last_checkpoint = pprt__os_monotonic_ns();
    }
  }
  return NULL;
}

/* ---- what the profile says about itself ------------------------------------------------ */

double pprt__cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* The profile's comments: which source sampled and why a better one did
 * not, and what it delivered against the CPU time the process used. */
void pprt__cpu_add_comments(session *s, double cpu) {
  char c[320];
  const char *source = s->source == SOURCE_CLOCK
                           ? (s->user_only ? "perf task clock (user time only)" : "perf task clock")
                       : s->source == SOURCE_TIMER ? "per-thread CPU timers"
                                                   : "process timer";
  char net[64] = "";
  if (s->thread_timers && s->process_timer)
    snprintf(net, sizeof net, " (process timer at %d Hz for threads not yet seen)", s->process_hz);
  snprintf(c, sizeof c, "pprt %s: asked %d Hz, source %s%s, unwinder %s", pprt_version(), s->hz,
           source, net,
           s->unwinder == PPRT_UNWIND_LIBUNWIND ? "libunwind"
           : s->unwinder == PPRT_UNWIND_CFI     ? "cfi (DWARF tables, frame pointers where none)"
                                                : "frame pointers");
  pprt__profile_add_comment(s->prof, c);
  if (s->unwinder == PPRT_UNWIND_CFI) {
    pprt__cfi_describe(c, sizeof c);
    pprt__profile_add_comment(s->prof, c);
  }
  if (s->source == SOURCE_CLOCK)
    snprintf(c, sizeof c,
             "sampling intervals: exponential, mean %.3f ms of the thread's CPU time, at least "
             "%.3f ms; each sample weighted by the CPU time its clock counted%s",
             (double)s->period_ns / 1e6,
             (double)(s->period_ns > 2 * MIN_INTERVAL_NS ? MIN_INTERVAL_NS : s->period_ns / 2) /
                 1e6,
             s->user_only ? " (kernel time, not sampled, goes to the next sample)" : "");
  else
    snprintf(c, sizeof c,
             "sampling on the scheduler tick: every %.3f ms of CPU, a tick that folds several "
             "periods weighted by them; periodic programs can alias with the tick",
             (double)s->period_ns / 1e6);
  pprt__profile_add_comment(s->prof, c);
  if (s->fallback[0]) {
    snprintf(c, sizeof c, "fallback: %s", s->fallback);
    pprt__profile_add_comment(s->prof, c);
  }
  if (s->budget_timers) {
    snprintf(c, sizeof c,
             "fallback: %zu thread(s) got per-thread CPU timers instead of a perf task clock: "
             "at most %zu clocks (a quarter of the descriptor limit) or out of descriptors",
             s->budget_timers, s->clock_budget);
    pprt__profile_add_comment(s->prof, c);
  }
  snprintf(c, sizeof c,
           "effective rate %.1f samples per CPU-second (%llu samples over %.3f s of CPU, "
           "%.3f s sampled)",
           cpu > 0 ? (double)s->samples / cpu : 0.0, (unsigned long long)s->samples, cpu,
           (double)s->sample_ns / 1e9);
  pprt__profile_add_comment(s->prof, c);
  /* What the kernel delivered: a per-thread tick that folded several
   * periods (si_overrun) is one signal weighted as several samples. */
  snprintf(c, sizeof c,
           "timer signals %.1f per CPU-second (%llu signals; sum of squared periods per "
           "signal %llu)",
           cpu > 0 ? (double)s->signals / cpu : 0.0, (unsigned long long)s->signals,
           (unsigned long long)s->folds_sq);
  pprt__profile_add_comment(s->prof, c);
  if (s->source == SOURCE_CLOCK) {
    snprintf(c, sizeof c,
             "unsampled tails %.6f s: the threads' CPU time after their clocks' last signals, "
             "in no sample",
             (double)s->unsampled_ns / 1e9);
    pprt__profile_add_comment(s->prof, c);
  }
  snprintf(c, sizeof c, "lost samples %llu, unwalkable stacks %llu", (unsigned long long)s->lost,
           (unsigned long long)s->external);
  pprt__profile_add_comment(s->prof, c);
  if (s->blocked_ns == 0)
    return;
  size_t n = 0, listed = 0;
  for (size_t i = 0; i < s->nblocked; i++)
    n += s->blocked[i].charged > 0;
  snprintf(c, sizeof c,
           "signals blocked: %zu thread(s) blocked SIGPROF; %.3f s of their CPU time is "
           "under " PPRT__FRAME_BLOCKED,
           n, (double)s->blocked_ns / 1e9);
  pprt__profile_add_comment(s->prof, c);
  for (size_t i = 0; i < s->nblocked && listed < 16; i++) {
    const blocked_entry *b = &s->blocked[i];
    if (b->charged == 0)
      continue;
    const char *name = thread_name(s, b->tid);
    snprintf(c, sizeof c, "signals blocked: thread %llu (%s) %.3f s", (unsigned long long)b->tid,
             name ? name : "?", (double)b->charged / 1e9);
    pprt__profile_add_comment(s->prof, c);
    listed++;
  }
  if (n > listed) {
    snprintf(c, sizeof c, "signals blocked: %zu more thread(s)", n - listed);
    pprt__profile_add_comment(s->prof, c);
  }
}
