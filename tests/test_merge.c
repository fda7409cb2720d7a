/* Tests of the profile merge (tools/merge.c) that `pprt record` uses for a
 * process tree and the views use for several FILEs: pprof's header rules,
 * samples and their labels kept, functions shared and mappings kept per
 * input, a mismatch refused, the --by root frames, and that the result
 * passes the decoder's checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/profile.h"
#include "read/profile_decode.h"
#include "tests/membuf.h"
#include "tools/cli.h"
#include "tools/merge.h"

static const pprt__value_type cpu_types[2] = {{"samples", "count"}, {"cpu", "nanoseconds"}};
static const pprt__value_type heap_types[2] = {{"alloc_objects", "count"},
                                               {"alloc_space", "bytes"}};

/* Names every address fn_<addr / 0x100>: one frame, no file or line. */
static size_t name_of(void *ctx, uint64_t addr, pprt__frame *out, size_t max, unsigned *flags) {
  static char buf[64];
  (void)ctx;
  (void)max;
  snprintf(buf, sizeof buf, "fn_%llx", (unsigned long long)(addr / 0x100));
  out[0] = (pprt__frame){.name = buf};
  *flags = 0;
  return 1;
}

/* A profile of process `pid` named `name`: two stacks sharing their root
 * function fn_100, one mapping. */
static Pprt__Profile *make(const pprt__value_type *types, int64_t pid, const char *name,
                           int64_t period, int64_t time, int64_t duration, const char *comment) {
  pprt__profile *p;
  assert_int_equal(pprt__profile_new(&p, types, 2, types[1], period), 0);
  pprt__profile_set_time(p, time, duration);
  assert_int_equal(pprt__profile_add_comment(p, "shared comment"), 0);
  assert_int_equal(pprt__profile_add_comment(p, comment), 0);
  pprt__mapping_info m = {0x10000, 0x20000, 0, "/bin/prog", "abcd"};
  assert_int_equal(pprt__profile_add_mapping(p, &m), 0);
  pprt__label labels[2] = {{"pid", NULL, pid, "id"}, {"process", name, 0, NULL}};
  uintptr_t a[2] = {0x10210, 0x10010}, b[2] = {0x10310, 0x10010};
  int64_t va[2] = {3, 30}, vb[2] = {1, 10};
  assert_int_equal(pprt__profile_add(p, a, 2, PPRT__STACK_LEAF_EXACT, va, labels, 2), 0);
  assert_int_equal(pprt__profile_add(p, b, 2, PPRT__STACK_LEAF_EXACT, vb, labels, 2), 0);
  membuf out = {0};
  assert_int_equal(pprt__profile_write(p, name_of, NULL, mem_writer(&out)), 0);
  pprt__profile_free(p);
  Pprt__Profile *d;
  char err[256];
  assert_int_equal(pprt__profile_decode(out.data, out.len, &d, err, sizeof err), 0);
  mem_free(&out);
  return d;
}

static Pprt__Profile *merged(cli_merge *m) {
  uint8_t *data;
  size_t len;
  assert_int_equal(cli_merge_pack(m, &data, &len), CLI_OK);
  Pprt__Profile *d;
  char err[256];
  int rc = pprt__profile_decode(data, len, &d, err, sizeof err);
  if (rc != 0)
    fail_msg("the merge does not decode: %s", err);
  free(data);
  return d;
}

/* A new merge, grouped by a label when `by` is not NULL. */
static cli_merge *new_merge(const char *by) {
  cli_merge *m = cli_merge_new();
  if (by)
    assert_int_equal(cli_merge_group_by(m, by), CLI_OK);
  return m;
}

/* Adds a profile that the merge must take. */
static void add_ok(cli_merge *m, Pprt__Profile *p, const char *file) {
  assert_int_equal(cli_merge_add(m, "test", p, file), CLI_OK);
}

/* Frees a merged profile, the two made for it and the merge. */
static void free_merge(Pprt__Profile *merged, Pprt__Profile *a, Pprt__Profile *b, cli_merge *m) {
  pprt__profile_decoded_free(merged);
  pprt__profile_decoded_free(a);
  pprt__profile_decoded_free(b);
  cli_merge_free(m);
}

static const Pprt__Label *label(const Pprt__Profile *p, const Pprt__Sample *s, const char *key) {
  for (size_t i = 0; i < s->n_label; i++)
    if (strcmp(cli_str(p, s->label[i]->key), key) == 0)
      return s->label[i];
  return NULL;
}

static const char *fn_name(const Pprt__Profile *p, uint64_t loc_id) {
  for (size_t i = 0; i < p->n_location; i++)
    if (p->location[i]->id == loc_id) {
      uint64_t f = p->location[i]->line[0]->function_id;
      for (size_t k = 0; k < p->n_function; k++)
        if (p->function[k]->id == f)
          return cli_str(p, p->function[k]->name);
    }
  return NULL;
}

static void test_header_rules_and_samples(void **state) {
  (void)state;
  Pprt__Profile *a = make(cpu_types, 11, "cc1", 4000000, 2000, 50, "lost samples 0");
  Pprt__Profile *b = make(cpu_types, 12, "as", 10000000, 1000, 70, "lost samples 2");
  cli_merge *m = new_merge(NULL);
  assert_non_null(m);
  add_ok(m, a, "a.pb.gz");
  add_ok(m, b, "b.pb.gz");
  assert_int_equal(cli_merge_count(m), 2);
  Pprt__Profile *p = merged(m);
  /* pprof's rules: earliest start, durations summed, largest period,
   * each comment once in first-seen order. */
  assert_int_equal(p->time_nanos, 1000);
  assert_int_equal(p->duration_nanos, 120);
  assert_int_equal(p->period, 10000000);
  assert_int_equal(p->n_sample_type, 2);
  assert_string_equal(cli_str(p, p->sample_type[1]->type), "cpu");
  assert_string_equal(cli_str(p, p->period_type->unit), "nanoseconds");
  assert_int_equal(p->n_comment, 3);
  assert_string_equal(cli_str(p, p->comment[0]), "shared comment");
  assert_string_equal(cli_str(p, p->comment[1]), "lost samples 0");
  assert_string_equal(cli_str(p, p->comment[2]), "lost samples 2");
  /* Every sample with its values and its process's labels. */
  assert_int_equal(p->n_sample, a->n_sample + b->n_sample);
  int64_t by_pid[2] = {0, 0};
  for (size_t i = 0; i < p->n_sample; i++) {
    const Pprt__Label *pid = label(p, p->sample[i], "pid");
    const Pprt__Label *name = label(p, p->sample[i], "process");
    assert_non_null(pid);
    assert_non_null(name);
    assert_string_equal(cli_str(p, name->str), pid->num == 11 ? "cc1" : "as");
    assert_string_equal(cli_str(p, pid->num_unit), "id");
    by_pid[pid->num - 11] += p->sample[i]->value[1];
  }
  assert_int_equal(by_pid[0], 40);
  assert_int_equal(by_pid[1], 40);
  /* Mappings kept per input; functions of the same name shared. */
  assert_int_equal(p->n_mapping, a->n_mapping + b->n_mapping);
  assert_int_equal(p->n_location, a->n_location + b->n_location);
  assert_int_equal(p->n_function, a->n_function);
  free_merge(p, a, b, m);
}

static void test_other_sample_types_refused(void **state) {
  (void)state;
  Pprt__Profile *a = make(cpu_types, 11, "cc1", 4000000, 2000, 50, "x");
  Pprt__Profile *h = make(heap_types, 12, "as", 524288, 1000, 0, "y");
  cli_merge *m = new_merge(NULL);
  add_ok(m, a, "cpu.pb.gz");
  assert_int_equal(cli_merge_add(m, "test", h, "heap.pb.gz"), CLI_EINPUT);
  assert_int_equal(cli_merge_count(m), 1);
  /* The merge is still whole without it. */
  Pprt__Profile *p = merged(m);
  assert_int_equal(p->n_sample, a->n_sample);
  free_merge(p, a, h, m);
}

static void test_group_by_adds_a_root(void **state) {
  (void)state;
  cli_merge *m = new_merge("process");
  Pprt__Profile *a = make(cpu_types, 11, "cc1", 4000000, 2000, 50, "x");
  Pprt__Profile *b = make(cpu_types, 12, "as", 4000000, 1000, 70, "y");
  add_ok(m, a, "a");
  add_ok(m, b, "b");
  Pprt__Profile *p = merged(m);
  for (size_t i = 0; i < p->n_sample; i++) {
    const Pprt__Sample *s = p->sample[i];
    const char *root = fn_name(p, s->location_id[s->n_location_id - 1]);
    const Pprt__Label *pid = label(p, s, "pid");
    assert_non_null(root);
    assert_string_equal(root, pid->num == 11 ? "process cc1" : "process as");
    assert_int_equal(s->n_location_id, 3); /* the two frames and the root */
  }
  /* One root location per process, shared by its samples. */
  assert_int_equal(p->n_location, a->n_location + b->n_location + 2);
  free_merge(p, a, b, m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_header_rules_and_samples),
      cmocka_unit_test(test_other_sample_types_refused),
      cmocka_unit_test(test_group_by_adds_a_root),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
