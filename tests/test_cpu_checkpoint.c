/* CPU profile checkpoints (core/cpu_reader.c, PPRT_CHECKPOINT): while a
 * profile runs, the reader writes the profile so far at the interval asked;
 * each checkpoint is a complete profile that says it is one, later ones
 * hold at least the samples of earlier ones, and the final profile carries
 * none of the checkpoints' comments. In process, no preload library. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/cpu.h"
#include "core/profile.h"
#include "pprt.h"
#include "read/profile_decode.h"
#include "tests/membuf.h"

#define MAX_CHECKPOINTS 64

typedef struct checkpoints {
  membuf cur;
  int n, failed;
  int64_t samples[MAX_CHECKPOINTS];
  char bad[256];
} checkpoints;

static int64_t total_samples(const Pprt__Profile *p) {
  int64_t n = 0;
  for (size_t i = 0; i < p->n_sample; i++)
    n += p->sample[i]->value[0];
  return n;
}

static int comments_with(const Pprt__Profile *p, const char *part) {
  int n = 0;
  for (size_t i = 0; i < p->n_comment; i++)
    n += strstr(p->string_table[p->comment[i]], part) != NULL;
  return n;
}

static int begin(void *ctx, pprt_writer *out) {
  checkpoints *c = ctx;
  c->cur.len = 0;
  *out = mem_writer(&c->cur);
  return 0;
}

/* On the reader thread: decode what was written, keep its sample count. */
static void end(void *ctx, int rc) {
  checkpoints *c = ctx;
  Pprt__Profile *p = NULL;
  if (rc != 0 || pprt__profile_decode(c->cur.data, c->cur.len, &p, c->bad, sizeof c->bad) != 0) {
    c->failed++;
    return;
  }
  if (comments_with(p, "checkpoint ") != 1)
    c->failed++;
  if (c->n < MAX_CHECKPOINTS)
    c->samples[c->n++] = total_samples(p);
  pprt__profile_decoded_free(p);
}

static volatile double g_sink;

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void burn(double seconds) {
  double end_at = cpu_now() + seconds, x = g_sink;
  while (cpu_now() < end_at)
    for (int i = 0; i < 100000; i++)
      x = x * 1.0000001 + 0.5;
  g_sink = x;
}

static void test_checkpoints_are_complete_profiles(void **state) {
  (void)state;
  checkpoints c;
  memset(&c, 0, sizeof c);
  pprt__cpu_checkpoint cp = {100000000u, begin, end, &c}; /* every 0.1 s */
  pprt__cpu_set_checkpoint(&cp);
  membuf final = {0};
  assert_int_equal(pprt_cpu_start(NULL, mem_writer(&final)), 0);
  /* Wall time bounds the number of checkpoints: CPU burnt on a loaded
   * machine may take longer, never less. */
  burn(1.0);
  assert_int_equal(pprt_cpu_stop(), 0);
  pprt__cpu_set_checkpoint(NULL);
  if (c.failed)
    fail_msg("%d checkpoint(s) were not complete profiles: %s", c.failed, c.bad);
  printf("%d checkpoints, samples:", c.n);
  for (int i = 0; i < c.n; i++)
    printf(" %lld", (long long)c.samples[i]);
  putchar('\n');
  assert_true(c.n >= 3);
  for (int i = 1; i < c.n; i++)
    assert_true(c.samples[i] >= c.samples[i - 1]);
  Pprt__Profile *p = NULL;
  char err[256];
  if (pprt__profile_decode(final.data, final.len, &p, err, sizeof err) != 0)
    fail_msg("the final profile does not decode: %s", err);
  assert_int_equal(comments_with(p, "checkpoint "), 0);
  assert_int_equal(comments_with(p, "effective rate"), 1); /* one set of comments */
  assert_true(total_samples(p) >= c.samples[c.n - 1]);
  pprt__profile_decoded_free(p);
  mem_free(&final);
  mem_free(&c.cur);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_checkpoints_are_complete_profiles),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
