/* Runtime defects found by review, each reproduced here:
 *
 *   fork           a fork from one thread while another writes a flight
 *                  recorder snapshot whose writer allocates (sampled):
 *                  no deadlock (pprt's fork handlers keep one lock order,
 *                  and no user writer runs under pprt's locks)
 *   lost frees     a block the program frees inside a writer callback, on
 *                  its own thread or on pprt's trace writer thread, leaves
 *                  the heap profile; a note at an address already sampled
 *                  replaces the entry instead of duplicating it; a
 *                  realloc in a writer callback keeps its bookkeeping
 *   trace exit     threads that exit while the trace stops: no chunk is
 *                  freed twice or leaked (the budget's count comes back)
 *
 * A watchdog ends the process if a test hangs, so a deadlock fails the
 * test instead of stalling ci/test. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/heap.h"
#include "core/profile.h"
#include "core/trace.h"
#include "pprt.h"
#include "read/profile_decode.h"
#include "read/trace_decode.h"
#include "tests/membuf.h"

/* ---- the watchdog ---------------------------------------------------------------- */

static atomic_int g_progress;

static void *watchdog(void *arg) {
  (void)arg;
  int last = -1, still = 0;
  for (;;) {
    sleep(1);
    int now = atomic_load(&g_progress);
    still = now == last ? still + 1 : 0;
    last = now;
    if (still >= 60) {
      fprintf(stderr, "test_hardening: no progress for 60 s: deadlocked\n");
      _exit(3);
    }
  }
  return NULL;
}

static void progress(void) {
  atomic_fetch_add(&g_progress, 1);
}

/* ---- heap profiles ----------------------------------------------------------------- */

static Pprt__Profile *decode(const membuf *m) {
  Pprt__Profile *p = NULL;
  char err[256];
  if (pprt__profile_decode(m->data, m->len, &p, err, sizeof err) != 0)
    fail_msg("heap profile does not decode: %s", err);
  return p;
}

/* The four values summed over the samples of blocks of `size` bytes (the
 * "bytes" label). */
static void size_values(const Pprt__Profile *p, int64_t size, int64_t v[4]) {
  assert_int_equal(p->n_sample_type, 4);
  v[0] = v[1] = v[2] = v[3] = 0;
  for (size_t i = 0; i < p->n_sample; i++) {
    const Pprt__Sample *s = p->sample[i];
    for (size_t j = 0; j < s->n_label; j++)
      if (strcmp(p->string_table[s->label[j]->key], "bytes") == 0 && s->label[j]->num == size)
        for (int k = 0; k < 4; k++)
          v[k] += s->value[k];
  }
}

static void heap_values(int64_t size, int64_t v[4]) {
  membuf m = {0};
  assert_int_equal(pprt_heap_write(mem_writer(&m)), 0);
  Pprt__Profile *p = decode(&m);
  size_values(p, size, v);
  pprt__profile_decoded_free(p);
  mem_free(&m);
}

/* ---- fork against a snapshot that allocates --------------------------------------- */

static atomic_int g_snap_stop;
static char g_snap_arena[4096];

/* A writer that allocates, as one that formats or compresses would: with
 * sampling at every byte, each call is sampled and takes the heap lock. */
static int allocating_write(void *ctx, const void *data, size_t len) {
  (void)ctx;
  (void)data;
  pprt_alloc_note(g_snap_arena + (len & 1023), 32);
  pprt_free_note(g_snap_arena + (len & 1023));
  return 0;
}

static void *snapshot_loop(void *arg) {
  (void)arg;
  while (!atomic_load(&g_snap_stop)) {
    pprt_log("test", "event before the snapshot");
    int rc = pprt_flight_write((pprt_writer){allocating_write, NULL});
    if (rc != 0)
      return (void *)(intptr_t)rc;
  }
  return NULL;
}

/* The flight recorder starts before heap sampling: with each component's
 * own fork handlers, that order made every run of this deadlock. */
static void test_fork_while_snapshot_allocates(void **state) {
  (void)state;
#if defined(__SANITIZE_THREAD__)
  skip(); /* TSan's runtime can hang a child forked while another thread runs */
#endif
  /* The children check pprt's locks, not its symbols: with lines each of
   * 300 children would read the debug information afresh (0.4 s apiece
   * where libc's compressed debug file is installed; the test took 111 s
   * of its 300 s limit on a quiet machine and ran out on a busy one). */
  assert_int_equal(pprt_set_symbolize(PPRT_SYMBOLIZE_NAMES), 0);
  pprt_flight_options fo = {.size = sizeof fo};
  assert_int_equal(pprt_flight_start(&fo), 0);
  assert_int_equal(pprt_heap_set_rate(1), 0);
  atomic_store(&g_snap_stop, 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, snapshot_loop, NULL), 0);
  for (int i = 0; i < 300; i++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      /* The child's pprt works: its locks are free. */
      pprt_alloc_note(g_snap_arena, 8);
      int fd = open("/dev/null", O_WRONLY);
      _exit(pprt_heap_write(pprt_writer_fd(fd)) == 0 ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    progress();
  }
  atomic_store(&g_snap_stop, 1);
  void *ret;
  pthread_join(th, &ret);
  assert_int_equal((int)(intptr_t)ret, 0);
  assert_int_equal(pprt_flight_stop(), 0);
  pprt_heap_set_rate(0);
  pprt_set_symbolize(PPRT_SYMBOLIZE_DEFAULT);
}

/* A slow snapshot writer holds no lock of pprt's: the recorder can be
 * stopped meanwhile (the snapshot keeps its generations alive), and the
 * snapshot still decodes. Before, stop waited for the writer, which here
 * waits for stop: the writer's wait timed out. */
static pthread_mutex_t g_slow_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_slow_cv = PTHREAD_COND_INITIALIZER;
static int g_slow_in_writer, g_slow_stopped, g_slow_timed_out;

static int slow_write(void *ctx, const void *data, size_t len) {
  pthread_mutex_lock(&g_slow_mu);
  if (!g_slow_in_writer) {
    g_slow_in_writer = 1;
    pthread_cond_broadcast(&g_slow_cv);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    while (!g_slow_stopped && !g_slow_timed_out)
      if (pthread_cond_timedwait(&g_slow_cv, &g_slow_mu, &until) == ETIMEDOUT)
        g_slow_timed_out = 1;
  }
  pthread_mutex_unlock(&g_slow_mu);
  return mem_write(ctx, data, len);
}

static void *slow_snapshot(void *arg) {
  return (void *)(intptr_t)pprt_flight_write((pprt_writer){slow_write, arg});
}

static void test_stop_while_snapshot_writes(void **state) {
  (void)state;
  pprt_flight_options fo = {.size = sizeof fo};
  assert_int_equal(pprt_flight_start(&fo), 0);
  for (int i = 0; i < 1000; i++)
    pprt_log("test", "before the snapshot");
  assert_int_equal(pprt__trace_advance(), 0);
  for (int i = 0; i < 1000; i++)
    pprt_log("test", "in the last generation");
  membuf m = {0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, slow_snapshot, &m), 0);
  pthread_mutex_lock(&g_slow_mu);
  while (!g_slow_in_writer)
    pthread_cond_wait(&g_slow_cv, &g_slow_mu);
  pthread_mutex_unlock(&g_slow_mu);
  int rc = pprt_flight_stop();
  pthread_mutex_lock(&g_slow_mu);
  g_slow_stopped = 1;
  int timed_out = g_slow_timed_out;
  pthread_cond_broadcast(&g_slow_cv);
  pthread_mutex_unlock(&g_slow_mu);
  void *ret;
  pthread_join(th, &ret);
  assert_int_equal(rc, 0);
  assert_int_equal((int)(intptr_t)ret, 0);
  assert_false(timed_out);
  pprt__trace *t = NULL;
  char err[256];
  if (pprt__trace_decode(m.data, m.len, 0, &t, err, sizeof err) != 0)
    fail_msg("snapshot does not decode: %s", err);
  assert_true(t->ngens >= 2);
  pprt__trace_free(t);
  mem_free(&m);
}

/* ---- frees inside pprt's callbacks ------------------------------------------------- */

#define FREED_SIZE 12345
static char g_block[FREED_SIZE];
static atomic_int g_freed;

static int freeing_write(void *ctx, const void *data, size_t len) {
  if (atomic_exchange(&g_freed, 1) == 0)
    pprt_free_note(g_block);
  return mem_write(ctx, data, len);
}

static void test_free_in_heap_writer_is_recorded(void **state) {
  (void)state;
  assert_int_equal(pprt_heap_set_rate(1), 0);
  pprt_alloc_note(g_block, FREED_SIZE);
  int64_t v[4];
  heap_values(FREED_SIZE, v);
  assert_int_equal(v[2], 1);
  /* The program frees it in the writer of a heap profile: pprt_heap_write
   * runs it on the program's thread with sampling paused. */
  atomic_store(&g_freed, 0);
  membuf m = {0};
  assert_int_equal(pprt_heap_write((pprt_writer){freeing_write, &m}), 0);
  mem_free(&m);
  assert_int_equal(atomic_load(&g_freed), 1);
  heap_values(FREED_SIZE, v);
  assert_int_equal(v[0], 1);
  assert_int_equal(v[2], 0); /* was 1: the free was skipped */
  assert_int_equal(v[3], 0);
  pprt_heap_set_rate(0);
}

static void test_free_on_trace_writer_thread_is_recorded(void **state) {
  (void)state;
  assert_int_equal(pprt_heap_set_rate(1), 0);
  int64_t before[4], v[4];
  heap_values(FREED_SIZE, before);
  pprt_alloc_note(g_block, FREED_SIZE);
  heap_values(FREED_SIZE, v);
  assert_int_equal(v[2], before[2] + 1);
  /* The trace's writer thread calls the writer: pprt's own thread. */
  atomic_store(&g_freed, 0);
  membuf m = {0};
  pprt_trace_options o = {.size = sizeof o};
  assert_int_equal(pprt_trace_start(&o, (pprt_writer){freeing_write, &m}), 0);
  pprt_log("test", "one event");
  assert_int_equal(pprt_trace_stop(), 0);
  mem_free(&m);
  assert_int_equal(atomic_load(&g_freed), 1);
  heap_values(FREED_SIZE, v);
  assert_int_equal(v[2], before[2]);
  pprt_heap_set_rate(0);
}

/* What the preload library's malloc and realloc do, around the program's
 * own (so this runs under the sanitizers too). */
__attribute__((noinline)) static void *hooked_malloc(size_t n) {
  void *p = malloc(n);
  if (p)
    pprt__heap_on_alloc(p, n, __builtin_frame_address(0), PPRT__HEAP_MALLOC);
  return p;
}

__attribute__((noinline)) static void *hooked_realloc(void *p, size_t n) {
  pprt__heap_held h;
  pprt__heap_realloc_begin(p, &h);
  void *q = realloc(p, n);
  pprt__heap_realloc_end(&h, q != NULL);
  if (q)
    pprt__heap_on_alloc(q, n, __builtin_frame_address(0), PPRT__HEAP_MALLOC);
  return q;
}

static void *g_grown;

/* A writer that grows a block the program sampled: realloc's bookkeeping
 * (the old block is gone) must be kept, though sampling is paused. */
static int realloc_write(void *ctx, const void *data, size_t len) {
  if (atomic_exchange(&g_freed, 1) == 0)
    g_grown = hooked_realloc(g_grown, 3 * 4321);
  return mem_write(ctx, data, len);
}

static void test_realloc_in_heap_writer_is_recorded(void **state) {
  (void)state;
  assert_int_equal(pprt_heap_set_rate(1), 0);
  int64_t before[4], v[4];
  heap_values(4321, before);
  g_grown = hooked_malloc(4321);
  assert_non_null(g_grown);
  heap_values(4321, v);
  assert_int_equal(v[2], before[2] + 1);
  atomic_store(&g_freed, 0);
  membuf m = {0};
  assert_int_equal(pprt_heap_write((pprt_writer){realloc_write, &m}), 0);
  mem_free(&m);
  assert_int_equal(atomic_load(&g_freed), 1);
  heap_values(4321, v);
  assert_int_equal(v[2], before[2]); /* was one more: the old block stayed */
  free(g_grown);
  pprt_heap_set_rate(0);
}

/* A custom allocator whose free was not noted gives the address out again:
 * one block there, not two. */
static void test_note_at_sampled_address_replaces_it(void **state) {
  (void)state;
  static char arena[64];
  assert_int_equal(pprt_heap_set_rate(1), 0);
  pprt_alloc_note(arena, 777);
  pprt_alloc_note(arena, 777);
  int64_t v[4];
  heap_values(777, v);
  assert_int_equal(v[0], 2);
  assert_int_equal(v[2], 1); /* was 2 */
  pprt_free_note(arena);
  heap_values(777, v);
  assert_int_equal(v[2], 0);
  pprt_heap_set_rate(0);
}

/* ---- trace stop against thread exit ---------------------------------------------- */

#define EXIT_THREADS 4
/* 1000 cycles crashed the code before the fix in 5 runs of 5 (300: about
 * half); ThreadSanitizer, slower by 10x, runs fewer and watches the races. */
#if defined(__SANITIZE_THREAD__)
#define EXIT_CYCLES 200
#else
#define EXIT_CYCLES 1000
#endif
static atomic_int g_logged, g_go;

static int discard_write(void *ctx, const void *data, size_t len) {
  (void)ctx;
  (void)data;
  (void)len;
  return 0;
}

/* Fills many small buffers (so its spare and given-back lists are long),
 * then exits when told: as the trace stops. */
static void *log_then_exit(void *arg) {
  (void)arg;
  for (int i = 0; i < 400; i++)
    pprt_log("test", "an event to fill buffers with");
  atomic_fetch_add(&g_logged, 1);
  while (!atomic_load(&g_go))
    sched_yield();
  return NULL;
}

/* Threads exit while the trace stops: each buffer is freed once (a double
 * free read unmapped memory or counted the budget down twice), and none is
 * left counted against the budget once the threads are gone. */
static void test_trace_stop_against_thread_exit(void **state) {
  (void)state;
  pprt__trace_set_batch_limit(64);
  size_t base = pprt__trace_chunk_bytes();
  for (int cycle = 0; cycle < EXIT_CYCLES; cycle++) {
    pprt_trace_options o = {.size = sizeof o};
    assert_int_equal(pprt_trace_start(&o, (pprt_writer){discard_write, NULL}), 0);
    atomic_store(&g_logged, 0);
    atomic_store(&g_go, 0);
    pthread_t th[EXIT_THREADS];
    for (int i = 0; i < EXIT_THREADS; i++)
      assert_int_equal(pthread_create(&th[i], NULL, log_then_exit, NULL), 0);
    while (atomic_load(&g_logged) < EXIT_THREADS)
      sched_yield();
    atomic_store(&g_go, 1);
    assert_int_equal(pprt_trace_stop(), 0);
    for (int i = 0; i < EXIT_THREADS; i++)
      pthread_join(th[i], NULL);
    size_t now = pprt__trace_chunk_bytes();
    if (now != base)
      fail_msg("cycle %d: %zu bytes of buffers counted, %zu before", cycle, now, base);
    progress();
  }
  pprt__trace_set_batch_limit(0);
}

/* An argument selects tests by name pattern (cmocka's filter). */
int main(int argc, char **argv) {
  if (argc > 1)
    cmocka_set_test_filter(argv[1]);
  pthread_t wd;
  pthread_create(&wd, NULL, watchdog, NULL);
  pthread_detach(wd);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fork_while_snapshot_allocates),
      cmocka_unit_test(test_stop_while_snapshot_writes),
      cmocka_unit_test(test_free_in_heap_writer_is_recorded),
      cmocka_unit_test(test_free_on_trace_writer_thread_is_recorded),
      cmocka_unit_test(test_realloc_in_heap_writer_is_recorded),
      cmocka_unit_test(test_note_at_sampled_address_replaces_it),
      cmocka_unit_test(test_trace_stop_against_thread_exit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
