/* Tests of the profile builder and decoder (core/profile.c,
 * read/profile_decode.c): a full round trip compared field by field, each
 * of pprof's rules, deduplication, labels, synthetic frames, mappings and
 * names, and the decoder's answer to bad input. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "core/profile.h"
#include "core/symbolize.h"
#include "read/profile_decode.h"

/* ---- helpers ------------------------------------------------------------------- */

typedef struct membuf {
  uint8_t *data;
  size_t len, cap;
  int fail_after; /* >0: the nth write fails with -ENOSPC */
  int writes;
} membuf;

static int mem_write(void *ctx, const void *data, size_t len) {
  membuf *m = ctx;
  if (m->fail_after && ++m->writes >= m->fail_after)
    return -ENOSPC;
  if (m->len + len > m->cap) {
    m->cap = (m->len + len) * 2;
    m->data = realloc(m->data, m->cap);
    assert_non_null(m->data);
  }
  memcpy(m->data + m->len, data, len);
  m->len += len;
  return 0;
}

static pprt_writer mem_writer(membuf *m) {
  pprt_writer w = {mem_write, m};
  return w;
}

static const pprt__value_type cpu_types[2] = {{"samples", "count"}, {"cpu", "nanoseconds"}};
static const pprt__value_type cpu_period = {"cpu", "nanoseconds"};

/* Names addresses in [0x10000, 0x20000) as fn_<addr / 0x100>, in app.c at
 * line (addr & 0xff) + 1, as if from debug information. */
static size_t fake_sym(void *ctx, uint64_t addr, pprt__frame *out, size_t max, unsigned *flags) {
  static char buf[64];
  (*(int *)ctx)++;
  *flags = 0;
  if (addr < 0x10000 || addr >= 0x20000 || max == 0)
    return 0;
  snprintf(buf, sizeof buf, "fn_%llx", (unsigned long long)(addr / 0x100));
  out[0] = (pprt__frame){buf, NULL, "/src/app.c", (int64_t)(addr & 0xff) + 1, 1};
  *flags = PPRT__FRAMES_DWARF;
  return 1;
}

/* Like a symbolizer over a binary without debug information: names only. */
static size_t names_only(void *ctx, uint64_t addr, pprt__frame *out, size_t max,
                         unsigned *flags) {
  (void)ctx;
  *flags = 0;
  if (max == 0)
    return 0;
  out[0] = (pprt__frame){addr < 0x10200 ? "low" : "high", NULL, NULL, 0, 0};
  return 1;
}

/* 0x10150 is in leaf(), inlined into middle() at line 20, itself inlined
 * into outer() at line 30 (a C++ function: mangled system name). */
static size_t inline_sym(void *ctx, uint64_t addr, pprt__frame *out, size_t max,
                         unsigned *flags) {
  (*(int *)ctx)++;
  *flags = PPRT__FRAMES_DWARF;
  if (addr == 0x10150 && max >= 3) {
    out[0] = (pprt__frame){"leaf", NULL, "/src/a.h", 7, 5};
    out[1] = (pprt__frame){"middle", NULL, "/src/a.h", 20, 18};
    out[2] = (pprt__frame){"ns::outer(int)", "_ZN2ns5outerEi", "/src/a.cc", 30, 28};
    return 3;
  }
  out[0] = (pprt__frame){"main", NULL, "/src/main.c", 4, 2};
  return 1;
}

static Pprt__Profile *write_and_decode(pprt__profile *p, pprt__symbolize_fn sym, void *ctx) {
  membuf m = {0};
  assert_int_equal(pprt__profile_write(p, sym, ctx, mem_writer(&m)), 0);
  assert_true(m.len > 2 && m.data[0] == 0x1f && m.data[1] == 0x8b); /* gzip */
  Pprt__Profile *prof = NULL;
  char err[256] = "";
  int rc = pprt__profile_decode(m.data, m.len, &prof, err, sizeof err);
  if (rc != 0)
    fail_msg("decode failed: %s", err);
  free(m.data);
  return prof;
}

static const char *str(const Pprt__Profile *prof, int64_t i) {
  assert_true(i >= 0 && (size_t)i < prof->n_string_table);
  return prof->string_table[i];
}

static const Pprt__Location *loc(const Pprt__Profile *prof, uint64_t id) {
  for (size_t i = 0; i < prof->n_location; i++)
    if (prof->location[i]->id == id)
      return prof->location[i];
  fail_msg("no location %llu", (unsigned long long)id);
  return NULL;
}

static const Pprt__Function *func(const Pprt__Profile *prof, uint64_t id) {
  for (size_t i = 0; i < prof->n_function; i++)
    if (prof->function[i]->id == id)
      return prof->function[i];
  fail_msg("no function %llu", (unsigned long long)id);
  return NULL;
}

static const Pprt__Mapping *mapping(const Pprt__Profile *prof, uint64_t id) {
  for (size_t i = 0; i < prof->n_mapping; i++)
    if (prof->mapping[i]->id == id)
      return prof->mapping[i];
  fail_msg("no mapping %llu", (unsigned long long)id);
  return NULL;
}

/* The function name of a location's single line, or NULL. */
static const char *loc_name(const Pprt__Profile *prof, uint64_t id) {
  const Pprt__Location *l = loc(prof, id);
  if (l->n_line == 0)
    return NULL;
  assert_int_equal(l->n_line, 1);
  return str(prof, func(prof, l->line[0]->function_id)->name);
}

/* ---- round trip ---------------------------------------------------------------- */

static void test_round_trip_every_field(void **state) {
  (void)state;
  pprt__profile *p;
  assert_int_equal(pprt__profile_new(&p, cpu_types, 2, cpu_period, 10000000), 0);
  pprt__profile_set_time(p, 1700000000123456789, 2500000000);
  assert_int_equal(pprt__profile_add_comment(p, "effective rate 99.5 Hz"), 0);
  pprt__mapping_info main_map = {0x10000, 0x20000, 0x1000, "/usr/bin/app", "0123abcd"};
  pprt__mapping_info lib_map = {0x30000, 0x38000, 0, "/lib/libx.so", NULL};
  assert_int_equal(pprt__profile_add_mapping(p, &main_map), 0);
  assert_int_equal(pprt__profile_add_mapping(p, &lib_map), 0);

  uintptr_t s1[3] = {0x10100, 0x10205, 0x30010}; /* leaf exact, then return addresses */
  uintptr_t s2[2] = {0x10100, 0x50000};          /* 0x50000: in no mapping */
  int64_t v[2] = {1, 10000000};
  pprt__label l1[2] = {{"thread_id", NULL, 4242, "id"}, {"thread_name", "worker", 0, NULL}};
  assert_int_equal(pprt__profile_add(p, s1, 3, PPRT__STACK_LEAF_EXACT, v, l1, 2), 0);
  assert_int_equal(pprt__profile_add(p, s1, 3, PPRT__STACK_LEAF_EXACT, v, l1, 2), 0);
  assert_int_equal(pprt__profile_add(p, s2, 2, PPRT__STACK_LEAF_EXACT, v, NULL, 0), 0);
  int64_t lost[2] = {7, 70000000};
  assert_int_equal(pprt__profile_add_synthetic(p, PPRT__FRAME_LOST, lost, NULL, 0), 0);
  assert_int_equal(pprt__profile_sample_count(p), 3);

  int calls = 0;
  Pprt__Profile *prof = write_and_decode(p, fake_sym, &calls);
  assert_true(calls > 0);

  /* header fields */
  assert_string_equal(prof->string_table[0], "");
  assert_int_equal(prof->n_sample_type, 2);
  assert_string_equal(str(prof, prof->sample_type[0]->type), "samples");
  assert_string_equal(str(prof, prof->sample_type[0]->unit), "count");
  assert_string_equal(str(prof, prof->sample_type[1]->type), "cpu");
  assert_string_equal(str(prof, prof->sample_type[1]->unit), "nanoseconds");
  assert_non_null(prof->period_type);
  assert_string_equal(str(prof, prof->period_type->type), "cpu");
  assert_string_equal(str(prof, prof->period_type->unit), "nanoseconds");
  assert_int_equal(prof->period, 10000000);
  assert_int_equal(prof->time_nanos, 1700000000123456789);
  assert_int_equal(prof->duration_nanos, 2500000000);
  assert_int_equal(prof->n_comment, 1);
  assert_string_equal(str(prof, prof->comment[0]), "effective rate 99.5 Hz");

  /* samples: s1 twice merged, s2, lost */
  assert_int_equal(prof->n_sample, 3);
  const Pprt__Sample *a = prof->sample[0], *b = prof->sample[1], *c = prof->sample[2];
  assert_int_equal(a->n_value, 2);
  assert_int_equal(a->value[0], 2);
  assert_int_equal(a->value[1], 20000000);
  assert_int_equal(a->n_location_id, 3);
  assert_int_equal(loc(prof, a->location_id[0])->address, 0x10100); /* leaf exact */
  assert_int_equal(loc(prof, a->location_id[1])->address, 0x10204); /* return - 1 */
  assert_int_equal(loc(prof, a->location_id[2])->address, 0x3000f);
  assert_int_equal(a->n_label, 2);
  assert_string_equal(str(prof, a->label[0]->key), "thread_id");
  assert_int_equal(a->label[0]->num, 4242);
  assert_string_equal(str(prof, a->label[0]->num_unit), "id");
  assert_int_equal(a->label[0]->str, 0);
  assert_string_equal(str(prof, a->label[1]->key), "thread_name");
  assert_string_equal(str(prof, a->label[1]->str), "worker");
  assert_int_equal(a->label[1]->num, 0);
  assert_int_equal(b->value[0], 1);
  assert_int_equal(b->n_label, 0);
  assert_int_equal(b->location_id[0], a->location_id[0]); /* one location per address */
  assert_int_equal(c->n_location_id, 1);
  assert_int_equal(c->value[0], 7);
  assert_int_equal(c->value[1], 70000000);

  /* mappings: declared ones first, then [anon] for 0x50000 */
  assert_int_equal(prof->n_mapping, 3);
  const Pprt__Mapping *m1 = prof->mapping[0], *m2 = prof->mapping[1], *m3 = prof->mapping[2];
  assert_int_equal(m1->memory_start, 0x10000);
  assert_int_equal(m1->memory_limit, 0x20000);
  assert_int_equal(m1->file_offset, 0x1000);
  assert_string_equal(str(prof, m1->filename), "/usr/bin/app");
  assert_string_equal(str(prof, m1->build_id), "0123abcd");
  assert_true(m1->has_functions); /* every location in it was named */
  assert_string_equal(str(prof, m2->filename), "/lib/libx.so");
  assert_int_equal(m2->build_id, 0);
  assert_false(m2->has_functions); /* fake_sym does not name 0x3000f */
  assert_string_equal(str(prof, m3->filename), "[anon]");
  assert_true(m3->memory_start <= 0x4ffff && m3->memory_limit > 0x4ffff);
  assert_false(m3->has_functions);

  /* locations: mapping, names */
  assert_int_equal(loc(prof, a->location_id[0])->mapping_id, m1->id);
  assert_int_equal(loc(prof, a->location_id[2])->mapping_id, m2->id);
  assert_string_equal(str(prof, mapping(prof, loc(prof, a->location_id[2])->mapping_id)->filename),
                      "/lib/libx.so");
  assert_int_equal(loc(prof, b->location_id[1])->mapping_id, m3->id);
  assert_string_equal(loc_name(prof, a->location_id[0]), "fn_101");
  assert_string_equal(loc_name(prof, a->location_id[1]), "fn_102");
  assert_null(loc_name(prof, a->location_id[2]));
  const Pprt__Location *lost_loc = loc(prof, c->location_id[0]);
  assert_int_equal(lost_loc->mapping_id, 0);
  assert_string_equal(loc_name(prof, lost_loc->id), "pprt_lost_samples");
  const Pprt__Function *f = func(prof, lost_loc->line[0]->function_id);
  assert_string_equal(str(prof, f->system_name), "pprt_lost_samples");
  pprt__profile_decoded_free(prof);
  pprt__profile_free(p);
}

/* ---- pprof's rules --------------------------------------------------------------- */

static void test_ids_nonzero_and_unique(void **state) {
  (void)state;
  pprt__profile *p;
  assert_int_equal(pprt__profile_new(&p, cpu_types, 2, cpu_period, 1), 0);
  pprt__mapping_info mm = {0x10000, 0x20000, 0, "/bin/x", NULL};
  assert_int_equal(pprt__profile_add_mapping(p, &mm), 0);
  int64_t v[2] = {1, 1};
  for (uintptr_t i = 0; i < 500; i++) {
    uintptr_t pcs[4] = {0x10000 + i * 7, 0x10000 + i * 13 + 1, 0x10000 + (i % 17) * 3 + 1,
                        0x90000 + i}; /* the last in no mapping */
    assert_int_equal(pprt__profile_add(p, pcs, 4, 0, v, NULL, 0), 0);
  }
  assert_int_equal(pprt__profile_add_synthetic(p, PPRT__FRAME_EXTERNAL, v, NULL, 0), 0);
  int calls = 0;
  Pprt__Profile *prof = write_and_decode(p, fake_sym, &calls);
  /* The decoder's check already refuses zero and duplicate ids; check here
   * directly too, so this test does not rest on the code under test. */
  for (size_t i = 0; i < prof->n_location; i++) {
    assert_true(prof->location[i]->id != 0);
    for (size_t j = 0; j < i; j++)
      assert_true(prof->location[i]->id != prof->location[j]->id);
  }
  for (size_t i = 0; i < prof->n_function; i++) {
    assert_true(prof->function[i]->id != 0);
    for (size_t j = 0; j < i; j++)
      assert_true(prof->function[i]->id != prof->function[j]->id);
  }
  for (size_t i = 0; i < prof->n_mapping; i++) {
    assert_true(prof->mapping[i]->id != 0);
    for (size_t j = 0; j < i; j++)
      assert_true(prof->mapping[i]->id != prof->mapping[j]->id);
  }
  for (size_t i = 0; i < prof->n_sample; i++)
    assert_int_equal(prof->sample[i]->n_value, prof->n_sample_type);
  pprt__profile_decoded_free(prof);
  pprt__profile_free(p);
}

/* Without LEAF_EXACT (heap stacks) every frame is a return address. */
static void test_return_addresses_minus_one(void **state) {
  (void)state;
  pprt__profile *p;
  pprt__value_type t = {"alloc_space", "bytes"};
  assert_int_equal(pprt__profile_new(&p, &t, 1, (pprt__value_type){"space", "bytes"}, 524288),
                   0);
  uintptr_t pcs[2] = {0x10010, 0x10020};
  int64_t v = 64;
  assert_int_equal(pprt__profile_add(p, pcs, 2, 0, &v, NULL, 0), 0);
  Pprt__Profile *prof = write_and_decode(p, NULL, NULL);
  assert_int_equal(loc(prof, prof->sample[0]->location_id[0])->address, 0x1000f);
  assert_int_equal(loc(prof, prof->sample[0]->location_id[1])->address, 0x1001f);
  pprt__profile_decoded_free(prof);
  pprt__profile_free(p);
}

static void test_labels_split_samples(void **state) {
  (void)state;
  pprt__profile *p;
  assert_int_equal(pprt__profile_new(&p, cpu_types, 2, cpu_period, 1), 0);
  uintptr_t pc = 0x10000;
  int64_t v[2] = {1, 1};
  pprt__label t1 = {"thread_id", NULL, 1, "id"}, t2 = {"thread_id", NULL, 2, "id"};
  pprt__label s1 = {"thread_name", "a", 0, NULL};
  assert_int_equal(pprt__profile_add(p, &pc, 1, PPRT__STACK_LEAF_EXACT, v, &t1, 1), 0);
  assert_int_equal(pprt__profile_add(p, &pc, 1, PPRT__STACK_LEAF_EXACT, v, &t2, 1), 0);
  assert_int_equal(pprt__profile_add(p, &pc, 1, PPRT__STACK_LEAF_EXACT, v, &s1, 1), 0);
  assert_int_equal(pprt__profile_add(p, &pc, 1, PPRT__STACK_LEAF_EXACT, v, &t1, 1), 0);
  assert_int_equal(pprt__profile_add(p, &pc, 1, PPRT__STACK_LEAF_EXACT, v, NULL, 0), 0);
  assert_int_equal(pprt__profile_sample_count(p), 4);
  Pprt__Profile *prof = write_and_decode(p, NULL, NULL);
  assert_int_equal(prof->n_sample, 4);
  assert_int_equal(prof->sample[0]->value[0], 2);
  assert_int_equal(prof->n_location, 1);
  pprt__profile_decoded_free(prof);
  pprt__profile_free(p);
}

/* Inline frames: one Location with its Lines innermost first, Functions
 * with names, system names, files and first lines, and every mapping flag
 * true when every location has them. A second write asks nothing again. */
static void test_inline_frames_and_lines(void **state) {
  (void)state;
  pprt__profile *p;
  assert_int_equal(pprt__profile_new(&p, cpu_types, 2, cpu_period, 1), 0);
  pprt__mapping_info mm = {0x10000, 0x20000, 0, "/bin/x", "ff"};
  assert_int_equal(pprt__profile_add_mapping(p, &mm), 0);
  uintptr_t pcs[2] = {0x10150, 0x10401};
  int64_t v[2] = {1, 1};
  assert_int_equal(pprt__profile_add(p, pcs, 2, PPRT__STACK_LEAF_EXACT, v, NULL, 0), 0);
  int calls = 0;
  Pprt__Profile *prof = write_and_decode(p, inline_sym, &calls);
  assert_int_equal(calls, 2);
  const Pprt__Mapping *m = prof->mapping[0];
  assert_true(m->has_functions && m->has_filenames && m->has_line_numbers &&
              m->has_inline_frames);
  const Pprt__Location *l = loc(prof, prof->sample[0]->location_id[0]);
  assert_int_equal(l->address, 0x10150);
  assert_int_equal(l->n_line, 3);
  const char *want[3] = {"leaf", "middle", "ns::outer(int)"};
  const char *file[3] = {"/src/a.h", "/src/a.h", "/src/a.cc"};
  int64_t line[3] = {7, 20, 30}, start[3] = {5, 18, 28};
  for (int i = 0; i < 3; i++) {
    const Pprt__Function *f = func(prof, l->line[i]->function_id);
    assert_string_equal(str(prof, f->name), want[i]);
    assert_string_equal(str(prof, f->filename), file[i]);
    assert_int_equal(f->start_line, start[i]);
    assert_int_equal(l->line[i]->line, line[i]);
  }
  assert_string_equal(str(prof, func(prof, l->line[2]->function_id)->system_name),
                      "_ZN2ns5outerEi");
  assert_string_equal(str(prof, func(prof, l->line[0]->function_id)->system_name), "leaf");
  /* the caller: a return address, looked up (and shown) at pc - 1 */
  assert_int_equal(loc(prof, prof->sample[0]->location_id[1])->address, 0x10400);
  pprt__profile_decoded_free(prof);
  prof = write_and_decode(p, inline_sym, &calls);
  assert_int_equal(calls, 2); /* each location was symbolized once */
  assert_int_equal(loc(prof, prof->sample[0]->location_id[0])->n_line, 3);
  pprt__profile_decoded_free(prof);
  pprt__profile_free(p);
}

/* Names without lines (no debug information): every flag stays false, so
 * pprof may still symbolize the mapping from the binary; the names are
 * written. */
static void test_names_without_lines_leave_flags_false(void **state) {
  (void)state;
  pprt__profile *p;
  assert_int_equal(pprt__profile_new(&p, cpu_types, 2, cpu_period, 1), 0);
  pprt__mapping_info mm = {0x10000, 0x20000, 0, "/bin/x", "ff"};
  assert_int_equal(pprt__profile_add_mapping(p, &mm), 0);
  uintptr_t pcs[2] = {0x10100, 0x10301};
  int64_t v[2] = {1, 1};
  assert_int_equal(pprt__profile_add(p, pcs, 2, PPRT__STACK_LEAF_EXACT, v, NULL, 0), 0);
  Pprt__Profile *prof = write_and_decode(p, names_only, NULL);
  const Pprt__Mapping *m = prof->mapping[0];
  assert_false(m->has_functions || m->has_filenames || m->has_line_numbers ||
               m->has_inline_frames);
  assert_string_equal(loc_name(prof, prof->sample[0]->location_id[0]), "low");
  assert_string_equal(loc_name(prof, prof->sample[0]->location_id[1]), "high");
  const Pprt__Location *l = loc(prof, prof->sample[0]->location_id[0]);
  assert_int_equal(l->line[0]->line, 0);
  assert_int_equal(func(prof, l->line[0]->function_id)->filename, 0);
  pprt__profile_decoded_free(prof);
  pprt__profile_free(p);
}

/* A function of this test, never inlined, as a return address would find
 * it: somewhere inside. */
__attribute__((noinline)) int mode_probe(int x);
int mode_probe(int x) {
  return x * 3 + 1;
}

static Pprt__Profile *write_os_in_mode(pprt_symbolize mode, uintptr_t pc) {
  assert_int_equal(pprt_set_symbolize(mode), 0);
  pprt__profile *p;
  assert_int_equal(pprt__profile_new(&p, cpu_types, 2, cpu_period, 1), 0);
  assert_int_equal(pprt__profile_add_os_mappings(p), 0);
  int64_t v[2] = {1, 1};
  assert_int_equal(pprt__profile_add(p, &pc, 1, PPRT__STACK_LEAF_EXACT, v, NULL, 0), 0);
  membuf m = {0};
  assert_int_equal(pprt__profile_write_os(p, 1, mem_writer(&m)), 0);
  Pprt__Profile *prof = NULL;
  char err[256] = "";
  if (pprt__profile_decode(m.data, m.len, &prof, err, sizeof err) != 0)
    fail_msg("decode failed: %s", err);
  free(m.data);
  pprt__profile_free(p);
  return prof;
}

static int has_comment(const Pprt__Profile *prof, const char *prefix) {
  for (size_t i = 0; i < prof->n_comment; i++)
    if (strncmp(str(prof, prof->comment[i]), prefix, strlen(prefix)) == 0)
      return 1;
  return 0;
}

/* The symbolization modes on a real address: none leaves it bare, names
 * gives the function with every mapping flag false, lines gives its file
 * and line where this build reads DWARF and the test has it (-g), else
 * names and a comment saying why. */
static void test_symbolize_modes(void **state) {
  (void)state;
  uintptr_t pc = (uintptr_t)&mode_probe + 1;
  assert_int_equal(pprt_set_symbolize((pprt_symbolize)7), -EINVAL);

  Pprt__Profile *prof = write_os_in_mode(PPRT_SYMBOLIZE_NONE, pc);
  const Pprt__Location *l = loc(prof, prof->sample[0]->location_id[0]);
  assert_int_equal(l->n_line, 0);
  assert_false(mapping(prof, l->mapping_id)->has_functions);
  pprt__profile_decoded_free(prof);

  prof = write_os_in_mode(PPRT_SYMBOLIZE_NAMES, pc);
  l = loc(prof, prof->sample[0]->location_id[0]);
  assert_string_equal(loc_name(prof, l->id), "mode_probe");
  assert_int_equal(l->line[0]->line, 0);
  assert_false(mapping(prof, l->mapping_id)->has_functions);
  assert_false(has_comment(prof, "symbolized:"));
  pprt__profile_decoded_free(prof);

  prof = write_os_in_mode(PPRT_SYMBOLIZE_LINES, pc);
  l = loc(prof, prof->sample[0]->location_id[0]);
  assert_true(l->n_line >= 1);
  const Pprt__Function *f = func(prof, l->line[l->n_line - 1]->function_id);
  assert_string_equal(str(prof, f->name), "mode_probe");
  if (has_comment(prof, "symbolized: names only")) {
    print_message("no DWARF reader in this build: names, and the comment says so\n");
    assert_int_equal(f->filename, 0);
  } else if (f->filename != 0) {
    assert_non_null(strstr(str(prof, f->filename), "test_profile.c"));
    assert_true(l->line[0]->line > 0 && f->start_line > 0);
    const Pprt__Mapping *m = mapping(prof, l->mapping_id);
    assert_true(m->has_functions && m->has_filenames && m->has_line_numbers &&
                m->has_inline_frames);
  } else {
    print_message("test built without -g: names only\n");
  }
  pprt__profile_decoded_free(prof);
  assert_int_equal(pprt_set_symbolize(PPRT_SYMBOLIZE_DEFAULT), 0);
}

/* With names off, real locations carry only addresses and mappings say
 * has_functions = false, so pprof symbolizes from the binaries; synthetic
 * frames keep their names. */
static void test_symbolization_off(void **state) {
  (void)state;
  pprt__profile *p;
  assert_int_equal(pprt__profile_new(&p, cpu_types, 2, cpu_period, 1), 0);
  pprt__mapping_info mm = {0x10000, 0x20000, 0, "/bin/x", "ff"};
  assert_int_equal(pprt__profile_add_mapping(p, &mm), 0);
  uintptr_t pc = 0x10100;
  int64_t v[2] = {1, 1};
  assert_int_equal(pprt__profile_add(p, &pc, 1, PPRT__STACK_LEAF_EXACT, v, NULL, 0), 0);
  assert_int_equal(pprt__profile_add_synthetic(p, PPRT__FRAME_LOST, v, NULL, 0), 0);
  Pprt__Profile *prof = write_and_decode(p, NULL, NULL);
  assert_int_equal(prof->n_mapping, 1);
  assert_false(prof->mapping[0]->has_functions);
  assert_int_equal(prof->n_function, 1);
  assert_null(loc_name(prof, prof->sample[0]->location_id[0]));
  assert_string_equal(loc_name(prof, prof->sample[1]->location_id[0]), "pprt_lost_samples");
  pprt__profile_decoded_free(prof);
  pprt__profile_free(p);
}

/* A checkpoint's write adds comments and mappings for that write only: after
 * a rewind the profile writes as before, and samples added since are in. */
static void test_checkpoint_rewind(void **state) {
  (void)state;
  pprt__profile *p;
  assert_int_equal(pprt__profile_new(&p, cpu_types, 2, cpu_period, 1), 0);
  pprt__mapping_info mm = {0x10000, 0x20000, 0, "/bin/x", "ff"};
  assert_int_equal(pprt__profile_add_mapping(p, &mm), 0);
  assert_int_equal(pprt__profile_add_comment(p, "kept"), 0);
  uintptr_t pc = 0x10100;
  int64_t v[2] = {1, 1};
  assert_int_equal(pprt__profile_add(p, &pc, 1, PPRT__STACK_LEAF_EXACT, v, NULL, 0), 0);
  pprt__profile_mark m = pprt__profile_get_mark(p);
  assert_int_equal(pprt__profile_add_comment(p, "checkpoint 1"), 0);
  pprt__mapping_info more = {0x30000, 0x40000, 0, "/lib/y.so", NULL};
  assert_int_equal(pprt__profile_add_mapping(p, &more), 0);
  Pprt__Profile *prof = write_and_decode(p, NULL, NULL);
  assert_int_equal(prof->n_comment, 2);
  assert_int_equal(prof->n_mapping, 2);
  pprt__profile_decoded_free(prof);
  pprt__profile_rewind(p, m);
  pc = 0x10200;
  assert_int_equal(pprt__profile_add(p, &pc, 1, PPRT__STACK_LEAF_EXACT, v, NULL, 0), 0);
  prof = write_and_decode(p, NULL, NULL);
  assert_int_equal(prof->n_comment, 1);
  assert_string_equal(str(prof, prof->comment[0]), "kept");
  assert_int_equal(prof->n_mapping, 1);
  assert_int_equal(prof->n_sample, 2);
  pprt__profile_decoded_free(prof);
  pprt__profile_free(p);
}

static void test_default_type_and_empty_stack(void **state) {
  (void)state;
  pprt__value_type heap[4] = {{"alloc_objects", "count"},
                              {"alloc_space", "bytes"},
                              {"inuse_objects", "count"},
                              {"inuse_space", "bytes"}};
  pprt__profile *p;
  assert_int_equal(pprt__profile_new(&p, heap, 4, (pprt__value_type){"space", "bytes"}, 512), 0);
  assert_int_equal(pprt__profile_set_default_type(p, "inuse_space"), 0);
  assert_int_equal(pprt__profile_set_default_type(p, "nope"), -EINVAL);
  int64_t v[4] = {1, 2, 3, 4};
  assert_int_equal(pprt__profile_add(p, NULL, 0, 0, v, NULL, 0), 0);
  Pprt__Profile *prof = write_and_decode(p, NULL, NULL);
  assert_string_equal(str(prof, prof->default_sample_type), "inuse_space");
  assert_int_equal(prof->n_sample, 1);
  assert_int_equal(prof->sample[0]->n_location_id, 0);
  assert_int_equal(prof->sample[0]->value[3], 4);
  pprt__profile_decoded_free(prof);
  pprt__profile_free(p);
}

static void test_bad_arguments(void **state) {
  (void)state;
  pprt__profile *p;
  assert_int_equal(pprt__profile_new(&p, cpu_types, 0, cpu_period, 1), -EINVAL);
  assert_int_equal(pprt__profile_new(&p, cpu_types, 9, cpu_period, 1), -EINVAL);
  assert_int_equal(pprt__profile_new(&p, cpu_types, 2, cpu_period, 1), 0);
  int64_t v[2] = {1, 1};
  assert_int_equal(pprt__profile_add(p, NULL, 2, 0, v, NULL, 0), -EINVAL);
  assert_int_equal(pprt__profile_add_synthetic(p, "", v, NULL, 0), -EINVAL);
  pprt__mapping_info bad = {0x2000, 0x1000, 0, "/x", NULL};
  assert_int_equal(pprt__profile_add_mapping(p, &bad), -EINVAL);
  pprt__profile_free(p);
}

/* A failing writer: the error comes back, nothing crashes, and the builder
 * can write again. */
static void test_writer_error_is_returned(void **state) {
  (void)state;
  pprt__profile *p;
  assert_int_equal(pprt__profile_new(&p, cpu_types, 2, cpu_period, 1), 0);
  int64_t v[2] = {1, 1};
  for (uintptr_t i = 0; i < 20000; i++) {
    uintptr_t pcs[2] = {0x10000 + i * 64, 0x20000 + i * 4096};
    assert_int_equal(pprt__profile_add(p, pcs, 2, 0, v, NULL, 0), 0);
  }
  membuf m = {0};
  m.fail_after = 1;
  assert_int_equal(pprt__profile_write(p, NULL, NULL, mem_writer(&m)), -ENOSPC);
  m.fail_after = 0;
  assert_int_equal(pprt__profile_write(p, NULL, NULL, mem_writer(&m)), 0);
  Pprt__Profile *prof;
  char err[200];
  assert_int_equal(pprt__profile_decode(m.data, m.len, &prof, err, sizeof err), 0);
  assert_int_equal(prof->n_sample, 20000);
  assert_int_equal(prof->n_mapping, 1); /* [anon] only, not one per write */
  pprt__profile_decoded_free(prof);
  free(m.data);
  pprt__profile_free(p);
}

/* ---- the decoder and bad input --------------------------------------------------- */

static size_t gzip_buf(const void *in, size_t len, uint8_t *out, size_t cap) {
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
  zs.next_in = (Bytef *)in;
  zs.avail_in = (uInt)len;
  zs.next_out = out;
  zs.avail_out = (uInt)cap;
  assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
  size_t n = cap - zs.avail_out;
  deflateEnd(&zs);
  return n;
}

static void expect_decode_error(const void *data, size_t len, const char *want) {
  Pprt__Profile *prof = (Pprt__Profile *)1;
  char err[256] = "";
  int rc = pprt__profile_decode(data, len, &prof, err, sizeof err);
  assert_true(rc < 0);
  assert_null(prof);
  if (strstr(err, want) == NULL)
    fail_msg("error \"%s\" does not say \"%s\"", err, want);
}

static void test_decoder_rejects_non_profiles(void **state) {
  (void)state;
  expect_decode_error("", 0, "empty input");
  const char *text = "this is not a profile at all, just text\n";
  expect_decode_error(text, strlen(text), "neither gzip data nor a protobuf message");
  uint8_t gz[256];
  uint8_t garbage[64];
  for (size_t i = 0; i < sizeof garbage; i++)
    garbage[i] = (uint8_t)(i * 37 + 11);
  size_t n = gzip_buf(garbage, sizeof garbage, gz, sizeof gz);
  expect_decode_error(gz, n, "does not hold a pprof profile");
  expect_decode_error(gz, n / 2, "truncated gzip data");
  gz[12] ^= 0xff;
  gz[13] ^= 0xff;
  expect_decode_error(gz, n, "gzip");
}

/* A valid profile (one of everything), packed and gzipped after `breakit`
 * has broken one rule; the decoder must name the broken rule. */
static void expect_rule(void (*breakit)(Pprt__Profile *), const char *want) {
  pprt__profile *p;
  assert_int_equal(pprt__profile_new(&p, cpu_types, 2, cpu_period, 1), 0);
  pprt__mapping_info mm = {0x10000, 0x20000, 0, "/bin/x", NULL};
  assert_int_equal(pprt__profile_add_mapping(p, &mm), 0);
  uintptr_t pcs[2] = {0x10100, 0x10301}; /* two functions: fn_101, fn_103 */
  int64_t v[2] = {1, 1};
  pprt__label l = {"thread_name", "main", 0, NULL};
  assert_int_equal(pprt__profile_add(p, pcs, 2, PPRT__STACK_LEAF_EXACT, v, &l, 1), 0);
  int calls = 0;
  Pprt__Profile *prof = write_and_decode(p, fake_sym, &calls);
  char *str0 = prof->string_table[0];
  size_t nstr = prof->n_string_table;
  breakit(prof);
  size_t len = pprt__profile__get_packed_size(prof);
  uint8_t *raw = malloc(len), *gz = malloc(len + 1024);
  pprt__profile__pack(prof, raw);
  prof->string_table[0] = str0; /* what free_unpacked will free */
  prof->n_string_table = nstr;
  size_t n = gzip_buf(raw, len, gz, len + 1024);
  expect_decode_error(gz, n, want);
  expect_decode_error(raw, len, want); /* and as a bare protobuf message */
  free(raw);
  free(gz);
  pprt__profile_decoded_free(prof);
  pprt__profile_free(p);
}

static char nonempty[] = "x";
static void break_string0(Pprt__Profile *p) {
  p->string_table[0] = nonempty;
}
static void break_location_id_zero(Pprt__Profile *p) {
  p->location[1]->id = 0;
}
static void break_duplicate_location(Pprt__Profile *p) {
  p->location[1]->id = p->location[0]->id;
}
static void break_duplicate_function(Pprt__Profile *p) {
  p->function[1]->id = p->function[0]->id;
}
static void break_value_count(Pprt__Profile *p) {
  p->sample[0]->n_value = 1;
}
static void break_missing_location(Pprt__Profile *p) {
  p->sample[0]->location_id[1] = 999;
}
static void break_missing_mapping(Pprt__Profile *p) {
  p->location[0]->mapping_id = 77;
}
static void break_missing_function(Pprt__Profile *p) {
  p->location[0]->line[0]->function_id = 55;
}
static void break_string_index(Pprt__Profile *p) {
  p->sample[0]->label[0]->str = 1000;
}
static void break_sample_type_string(Pprt__Profile *p) {
  p->sample_type[1]->unit = -3;
}
static void break_mapping_range(Pprt__Profile *p) {
  p->mapping[0]->memory_limit = 1;
}
static void break_empty_string_table(Pprt__Profile *p) {
  p->n_string_table = 0;
  p->sample_type[0]->type = 0; /* keep the rest in range of nothing */
}

static void test_decoder_names_each_broken_rule(void **state) {
  (void)state;
  expect_rule(break_string0, "string_table[0]");
  expect_rule(break_location_id_zero, "location #1 has id 0");
  expect_rule(break_duplicate_location, "location id 1 is used twice");
  expect_rule(break_duplicate_function, "function id 1 is used twice");
  expect_rule(break_value_count, "sample #0 has 1 values for 2 sample types");
  expect_rule(break_missing_location, "location id 999 does not exist");
  expect_rule(break_missing_mapping, "mapping id 77 does not exist");
  expect_rule(break_missing_function, "function id 55 does not exist");
  expect_rule(break_string_index, "label 0 str: string index 1000 out of range");
  expect_rule(break_sample_type_string, "sample_type #1 unit: string index -3");
  expect_rule(break_mapping_range, "ends (0x1) before it starts");
  expect_rule(break_empty_string_table, "string_table is empty");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_every_field),
      cmocka_unit_test(test_ids_nonzero_and_unique),
      cmocka_unit_test(test_return_addresses_minus_one),
      cmocka_unit_test(test_labels_split_samples),
      cmocka_unit_test(test_symbolization_off),
      cmocka_unit_test(test_checkpoint_rewind),
      cmocka_unit_test(test_default_type_and_empty_stack),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_writer_error_is_returned),
      cmocka_unit_test(test_inline_frames_and_lines),
      cmocka_unit_test(test_symbolize_modes),
      cmocka_unit_test(test_names_without_lines_leave_flags_false),
      cmocka_unit_test(test_decoder_rejects_non_profiles),
      cmocka_unit_test(test_decoder_names_each_broken_rule),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
