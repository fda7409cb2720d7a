/* The process's symbol cache (core/symbolize.c): a second profile of the
 * same addresses is answered from the cache with the same names, files and
 * lines and opens no reader; the cache is emptied when the loader adds an
 * image and when the mode changes; a fork while other threads write
 * profiles leaves the child able to write its own. */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/platform.h"
#include "core/profile.h"
#include "core/symbolize.h"
#include "read/profile_decode.h"
#include "tests/membuf.h"
#include "tests/asan_fork.h"

#define NADDRS 6

static Pprt__Profile *write_profile(void);

static void *write_profile_addr(void) {
  return (void *)write_profile;
}

/* Code addresses from this program and from libc, as return addresses
 * (the profile builder looks up pc - 1 for frames after the leaf). */
static void code_addrs(uint64_t out[NADDRS]) {
  void *fns[NADDRS] = {(void *)code_addrs, (void *)write_profile_addr(), (void *)qsort,
                       (void *)strlen, (void *)pthread_create, (void *)malloc};
  for (int i = 0; i < NADDRS; i++)
    out[i] = (uint64_t)(uintptr_t)fns[i] + 16;
}

/* Writes a profile of one sample with those addresses as its stack, in the
 * process's mode, and decodes it. */
static Pprt__Profile *write_profile(void) {
  uint64_t addrs[NADDRS];
  code_addrs(addrs);
  uintptr_t pcs[NADDRS];
  for (int i = 0; i < NADDRS; i++)
    pcs[i] = (uintptr_t)addrs[i];
  pprt__value_type types[1] = {{"samples", "count"}};
  pprt__profile *p;
  assert_int_equal(pprt__profile_new(&p, types, 1, types[0], 1), 0);
  assert_int_equal(pprt__profile_add_os_mappings(p), 0);
  int64_t v[1] = {1};
  assert_int_equal(pprt__profile_add(p, pcs, NADDRS, PPRT__STACK_LEAF_EXACT, v, NULL, 0), 0);
  membuf m = {0};
  assert_int_equal(pprt__profile_write_os(p, 1, mem_writer(&m)), 0);
  pprt__profile_free(p);
  Pprt__Profile *prof = NULL;
  char err[128];
  assert_int_equal(pprt__profile_decode(m.data, m.len, &prof, err, sizeof err), 0);
  mem_free(&m);
  return prof;
}

/* Every location's lines as text: function, system name, file and line. */
static char *describe(const Pprt__Profile *prof) {
  size_t cap = 1 << 16, len = 0;
  char *out = calloc(1, cap);
  assert_non_null(out);
  for (size_t i = 0; i < prof->n_location; i++)
    for (size_t j = 0; j < prof->location[i]->n_line; j++) {
      const Pprt__Line *l = prof->location[i]->line[j];
      const Pprt__Function *f = NULL;
      for (size_t k = 0; k < prof->n_function; k++)
        if (prof->function[k]->id == l->function_id)
          f = prof->function[k];
      assert_non_null(f);
      len += (size_t)snprintf(out + len, cap - len, "%zu.%zu %s %s %s:%lld\n", i, j,
                              prof->string_table[f->name], prof->string_table[f->system_name],
                              prof->string_table[f->filename], (long long)l->line);
      assert_true(len < cap);
    }
  return out;
}

static void test_second_write_from_cache(void **state) {
  (void)state;
  Pprt__Profile *first = write_profile();
  pprt__symbolize_stats a, b;
  pprt__symbolize_get_stats(&a);
  Pprt__Profile *second = write_profile();
  pprt__symbolize_get_stats(&b);
  /* Every address was answered from the cache; no reader was opened. */
  assert_int_equal(b.resolved, a.resolved);
  assert_int_equal(b.reader_opens, a.reader_opens);
  assert_true(b.hits >= a.hits + NADDRS);
  char *d1 = describe(first), *d2 = describe(second);
  assert_string_equal(d1, d2);
  /* The cache held real answers: this file's function has a name. */
  assert_non_null(strstr(d1, "code_addrs"));
  free(d1);
  free(d2);
  pprt__profile_decoded_free(first);
  pprt__profile_decoded_free(second);
}

/* The function a fresh address inside describe() (never asked for before:
 * the offset grows with each call) resolves to, through symbolizer s's
 * prepare and close. */
static void resolve_new(pprt_symbolize mode, const char *want) {
  static uintptr_t next = 1;
  uint64_t addr = (uint64_t)(uintptr_t)describe + next++;
  pprt__symbolizer *s;
  assert_int_equal(pprt__symbolizer_open(&s, mode), 0);
  assert_int_equal(pprt__symbolizer_prepare(s, &addr, 1), 0);
  pprt__frame fr[PPRT__MAX_FRAMES];
  unsigned flags;
  size_t n = pprt__symbolizer_frames(s, addr, fr, PPRT__MAX_FRAMES, &flags);
  assert_true(n >= 1);
  assert_string_equal(fr[n - 1].name, want);
  pprt__symbolizer_close(s);
}

/* With the readers kept (the HTTP endpoint's setting), a write's new
 * addresses are resolved by the readers the last write opened, with the
 * same answers; idle past the linger, or when keeping stops, they close. */
static void test_kept_readers(void **state) {
  (void)state;
  pprt__symbolize_stats a, b;
  pprt__symbolize_keep_readers(60ull * 1000000000u);
  resolve_new(PPRT_SYMBOLIZE_NAMES, "describe");
  pprt__symbolize_get_stats(&a);
  resolve_new(PPRT_SYMBOLIZE_NAMES, "describe");
  resolve_new(PPRT_SYMBOLIZE_NAMES, "describe");
  pprt__symbolize_get_stats(&b);
  assert_int_equal(b.reader_opens, a.reader_opens);
  assert_int_equal(b.reader_reuses, a.reader_reuses + 2);
  assert_int_equal(b.resolved, a.resolved + 2);
  /* Not yet idle for the linger: kept, and due then. */
  uint64_t now = pprt__os_monotonic_ns();
  uint64_t due = pprt__symbolize_release_idle(now);
  assert_true(due != UINT64_MAX && due > now);
  /* Idle past it: closed, and the next write opens its own. */
  assert_int_equal(pprt__symbolize_release_idle(due), UINT64_MAX);
  resolve_new(PPRT_SYMBOLIZE_NAMES, "describe");
  pprt__symbolize_get_stats(&a);
  assert_true(a.reader_opens > b.reader_opens);
  assert_int_equal(a.reader_reuses, b.reader_reuses);
  /* Readers of another mode are not taken. */
  resolve_new(PPRT_SYMBOLIZE_LINES, "describe");
  pprt__symbolize_get_stats(&b);
  assert_int_equal(b.reader_reuses, a.reader_reuses);
  /* Keeping stopped: what was kept is closed, and nothing more is kept. */
  pprt__symbolize_keep_readers(0);
  assert_int_equal(pprt__symbolize_release_idle(pprt__os_monotonic_ns()), UINT64_MAX);
  resolve_new(PPRT_SYMBOLIZE_NAMES, "describe");
  resolve_new(PPRT_SYMBOLIZE_NAMES, "describe");
  pprt__symbolize_get_stats(&a);
  assert_int_equal(a.reader_reuses, b.reader_reuses);
  assert_int_equal(pprt__symbolize_release_idle(pprt__os_monotonic_ns()), UINT64_MAX);
}

static void test_mode_change_empties(void **state) {
  (void)state;
  pprt__profile_decoded_free(write_profile());
  pprt__symbolize_stats a, b;
  pprt__symbolize_get_stats(&a);
  pprt_symbolize was = pprt__symbolize_mode();
  pprt_set_symbolize(was == PPRT_SYMBOLIZE_NAMES ? PPRT_SYMBOLIZE_LINES : PPRT_SYMBOLIZE_NAMES);
  Pprt__Profile *other = write_profile();
  pprt__symbolize_get_stats(&b);
  pprt_set_symbolize(PPRT_SYMBOLIZE_DEFAULT);
  assert_true(b.clears > a.clears);
  assert_true(b.resolved >= a.resolved + NADDRS);
  pprt__profile_decoded_free(other);
}

static void test_dlopen_empties(void **state) {
  (void)state;
  pprt__profile_decoded_free(write_profile());
  pprt__symbolize_stats a, b;
  pprt__symbolize_get_stats(&a);
  void *h = dlopen(PPRT_TEST_DLOPEN_LIB, RTLD_NOW);
  assert_non_null(h);
  Pprt__Profile *after = write_profile();
  pprt__symbolize_get_stats(&b);
  assert_true(b.clears > a.clears);
  assert_true(b.resolved >= a.resolved + NADDRS);
  char *d = describe(after);
  assert_non_null(strstr(d, "code_addrs"));
  free(d);
  pprt__profile_decoded_free(after);
  dlclose(h);
}

static _Atomic int g_stop;

static void *writer_thread(void *arg) {
  (void)arg;
  while (!g_stop) {
    pprt_set_symbolize(PPRT_SYMBOLIZE_NAMES); /* the mode flips: the cache is rebuilt often */
    pprt__profile_decoded_free(write_profile());
    pprt_set_symbolize(PPRT_SYMBOLIZE_DEFAULT);
    pprt__profile_decoded_free(write_profile());
  }
  return NULL;
}

/* A fork while two threads fill and empty the cache: each child writes a
 * profile (the cache's lock is usable there) and exits. A child stuck on
 * a lock held at the fork is killed by the alarm and fails the test.
 * Under ASan (tests/asan_fork.h) the children only exit; the parent's side
 * of the fork handlers is still exercised. */
static void test_fork_while_writing(void **state) {
  (void)state;
  pthread_t th[2];
  g_stop = 0;
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&th[i], NULL, writer_thread, NULL), 0);
  for (int i = 0; i < 20; i++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      if (!CHILD_MAY_ALLOCATE)
        _exit(0);
      alarm(60);
      Pprt__Profile *p = write_profile();
      char *d = describe(p);
      _exit(strstr(d, "code_addrs") ? 0 : 3);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status))
      fprintf(stderr, "child %d: killed by signal %d\n", (int)pid,
              WIFSIGNALED(status) ? WTERMSIG(status) : -1);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  g_stop = 1;
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_second_write_from_cache),
      cmocka_unit_test(test_kept_readers),
      cmocka_unit_test(test_mode_change_empties),
      cmocka_unit_test(test_dlopen_empties),
      cmocka_unit_test(test_fork_while_writing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
