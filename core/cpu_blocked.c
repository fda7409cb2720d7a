/* The CPU profiler's accounting of threads that block SIGPROF: such a
 * thread gets no sample, so the reader finds it (its signal mask, once a
 * second) and charges its CPU time to a synthetic frame, and the profile's
 * totals stay honest. All of it runs on the reader thread, or at stop once
 * the reader is done. */
#include <signal.h>
#include <stdlib.h>

#include "core/cpu_session.h"
#include "core/process.h"

static void update_blocked(session *s, blocked_entry *b, uint64_t cpu);

static blocked_entry *find_blocked(session *s, uint64_t tid) {
  for (size_t i = 0; i < s->nblocked; i++)
    if (s->blocked[i].tid == tid)
      return &s->blocked[i];
  return NULL;
}

/* A sample of thread tid arrived with this weight. Returns the weight to
 * count: a thread that unblocks SIGPROF receives the signal its source sent
 * meanwhile, weighted (from its clock, or a timer's overruns) with the CPU
 * time that was already charged to the synthetic frame; that part is taken
 * off. */
uint64_t pprt__cpu_blocked_saw_sample(session *s, uint64_t tid, uint64_t weight) {
  blocked_entry *b = s->nblocked ? find_blocked(s, tid) : NULL;
  if (b == NULL)
    return weight;
  uint64_t take = b->credit < weight ? b->credit : weight;
  b->credit -= take;
  b->seen_ns += weight - take;
  return weight - take;
}

static void charge_blocked(session *s, blocked_entry *b, uint64_t ns) {
  char name_buf[64];
  const char *name = NULL;
  if (pprt__os_thread_name(b->tid, name_buf, sizeof name_buf) == 0)
    name = name_buf;
  pprt__label labels[2 + PPRT__PROCESS_LABELS] = {{"thread_id", NULL, (int64_t)b->tid, "id"},
                                                  {"thread_name", name, 0, NULL}};
  size_t nlabels = name ? 2 : 1;
  nlabels += pprt__process_labels(labels + nlabels);
  int64_t v[2] = {(int64_t)((ns + s->period_ns / 2) / s->period_ns), (int64_t)ns};
  pprt__profile_add_synthetic(s->prof, PPRT__FRAME_BLOCKED, v, labels, nlabels);
  b->charged += ns;
  b->credit += ns;
  s->blocked_ns += ns;
}

/* A suspected thread had no sample since it was suspected (cpu: its CPU
 * time now, or at the suspicion when it has exited): it blocks SIGPROF. A
 * thread that has had no sample at all blocked it all along, so its CPU
 * time since the session started (or since it was created) went
 * unsampled; for one that had samples, the unsampled part begins
 * somewhere after its last one and is counted from the suspicion on. */
static void confirm_blocked(session *s, blocked_entry *b, uint64_t cpu) {
  uint64_t base = b->cpu_ns + b->seen_ns;
  if (!pprt__cpu_had_samples(s, b->tid)) {
    base = 0;
    for (size_t i = 0; i < s->nat_start; i++)
      if (s->at_start[i].tid == b->tid)
        base = s->at_start[i].cpu_ns;
  }
  b->blocks = BLOCKS_YES;
  b->cpu_ns = cpu;
  b->seen_ns = 0;
  if (cpu > base)
    charge_blocked(s, b, cpu - base);
}

/* One thread: if it blocks SIGPROF, the CPU time it used since the last
 * check that no sample covered is charged to the synthetic frame.
 *
 * A mask that shows SIGPROF blocked is only a suspicion while sampling
 * runs: inside pprt's own handler (and from the kernel's signal delivery
 * up to the handler's first instruction, where the thread may be
 * preempted) SIGPROF is blocked as well. Taken at its word, a thread
 * sampled at 1000 Hz caught there had its unsampled tail charged at every
 * rescan for a second: 11% more samples than its CPU time allows, seen on
 * a loaded 2-core machine. A suspected thread is confirmed by the next
 * check (a second later) only if it still shows SIGPROF blocked and had no
 * sample in between; any sample clears it at once (update_known_blocked);
 * one that exits meanwhile without a sample is confirmed with its CPU time
 * at the last rescan. At stop (final), with the sources disarmed, the mask
 * is the truth. Confirmation charges the time since the suspicion, so
 * nothing is lost by the wait. */
static void check_blocked_one_at(session *s, uint64_t tid, int final) {
  if (tid == atomic_load(&s->reader_tid) || pprt__cpu_is_ignored(tid))
    return; /* pprt's own: blocks everything, on purpose */
  int blocks = 0;
  uint64_t cpu = 0;
  if (pprt__os_thread_blocks(tid, SIGPROF, &blocks) != 0)
    return;
  blocked_entry *b = find_blocked(s, tid);
  if (b == NULL && !blocks)
    return;
  if (pprt__os_thread_cpu_ns(tid, &cpu) != 0)
    return;
  if (b == NULL) {
    if (s->nblocked == s->blocked_cap) {
      size_t ncap = s->blocked_cap ? 2 * s->blocked_cap : 16;
      blocked_entry *n = realloc(s->blocked, ncap * sizeof *n);
      if (n == NULL)
        return;
      s->blocked = n;
      s->blocked_cap = ncap;
    }
    b = &s->blocked[s->nblocked++];
    *b = (blocked_entry){tid, cpu, 0, 0, 0, cpu, BLOCKS_NO};
  } else if (b->blocks == BLOCKS_SUSPECTED) {
    if (blocks && (final || b->seen_ns == 0)) {
      confirm_blocked(s, b, cpu);
      return;
    }
    b->blocks = BLOCKS_NO;
  } else {
    update_blocked(s, b, cpu);
    if (!blocks)
      b->blocks = BLOCKS_NO;
  }
  if (blocks && b->blocks == BLOCKS_NO) {
    b->blocks = BLOCKS_SUSPECTED;
    b->cpu_ns = b->latest_ns = cpu;
    b->seen_ns = 0;
    if (final)
      confirm_blocked(s, b, cpu);
  }
}

static int check_blocked_one(uint64_t tid, void *ctx) {
  check_blocked_one_at(ctx, tid, 0);
  return 0;
}

static int check_blocked_final(uint64_t tid, void *ctx) {
  check_blocked_one_at(ctx, tid, 1);
  return 0;
}

/* Blocked now or at the last check: what its samples did not cover. */
static void update_blocked(session *s, blocked_entry *b, uint64_t cpu) {
  uint64_t used = cpu > b->cpu_ns ? cpu - b->cpu_ns : 0;
  if (b->blocks == BLOCKS_YES && used > b->seen_ns)
    charge_blocked(s, b, used - b->seen_ns);
  b->cpu_ns = cpu;
  b->seen_ns = 0;
}

/* Every thread's mask: once a second, as it costs a file read each. */
void pprt__cpu_check_blocked(session *s) {
  pprt__os_thread_each(check_blocked_one, s);
}

/* The last word, at stop. */
void pprt__cpu_check_blocked_at_stop(session *s) {
  pprt__os_thread_each(check_blocked_final, s);
}

/* The threads known or suspected to block: their CPU time, at every
 * rescan (a clock read each), so that one that exits loses little. */
void pprt__cpu_update_known_blocked(session *s) {
  for (size_t i = 0; i < s->nblocked; i++) {
    blocked_entry *b = &s->blocked[i];
    uint64_t cpu;
    if (b->blocks == BLOCKS_NO)
      continue;
    int alive = pprt__os_thread_cpu_ns(b->tid, &cpu) == 0;
    if (b->blocks == BLOCKS_YES) {
      if (alive)
        update_blocked(s, b, cpu);
    } else if (b->seen_ns > 0) {
      b->blocks = BLOCKS_NO; /* sampled: the mask was read inside a handler */
    } else if (alive) {
      b->latest_ns = cpu;
    } else {
      confirm_blocked(s, b, b->latest_ns);
    }
  }
}

int pprt__cpu_snapshot_one(uint64_t tid, void *ctx) {
  session *s = ctx;
  uint64_t cpu;
  if (pprt__os_thread_cpu_ns(tid, &cpu) != 0)
    return 0;
  if (s->nat_start == s->at_start_cap) {
    size_t ncap = s->at_start_cap ? 2 * s->at_start_cap : 16;
    blocked_entry *n = realloc(s->at_start, ncap * sizeof *n);
    if (n == NULL)
      return 1;
    s->at_start = n;
    s->at_start_cap = ncap;
  }
  s->at_start[s->nat_start++] = (blocked_entry){.tid = tid, .cpu_ns = cpu};
  return 0;
}
