/* The snapshot of the loaded objects (platform/posix/elf_images.c): a
 * second snapshot resolves no path again; a library dlopen'ed later gets its
 * real path, and after a dlclose and a dlopen of another file (which may load
 * at the same address) the new file's path; a fork's child resolves nothing
 * again either. */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
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

#include "platform/posix/elf.h"

/* The snapshot's object whose path is path, or NULL. */
static const pprt__elf_object *find_path(const pprt__elf_snapshot *snap, const char *path) {
  for (size_t i = 0; i < snap->n; i++)
    if (strcmp(snap->obj[i].path, path) == 0)
      return &snap->obj[i];
  return NULL;
}

static void test_second_snapshot_resolves_nothing(void **state) {
  (void)state;
  pprt__elf_snapshot a, b;
  assert_int_equal(pprt__elf_snapshot_take(&a), 0);
  unsigned long before = pprt__elf_path_resolutions();
  assert_int_equal(pprt__elf_snapshot_take(&b), 0);
  assert_int_equal(pprt__elf_path_resolutions(), before);
  assert_int_equal(a.n, b.n);
  for (size_t i = 0; i < a.n; i++) {
    assert_string_equal(a.obj[i].path, b.obj[i].path);
    assert_true((a.obj[i].file == NULL) == (b.obj[i].file == NULL));
    if (a.obj[i].file != NULL)
      assert_string_equal(a.obj[i].file, b.obj[i].file);
  }
  assert_true(a.obj[0].is_main && a.obj[0].path[0] == '/');
  pprt__elf_snapshot_free(&a);
  pprt__elf_snapshot_free(&b);
}

/* Copies file to a new temporary file; returns its path. */
static char *copy_file(const char *from) {
  char *to = strdup("/tmp/pprt-test-elf-XXXXXX.so");
  assert_non_null(to);
  int out = mkstemps(to, 3);
  assert_true(out >= 0);
  int in = open(from, O_RDONLY);
  assert_true(in >= 0);
  char buf[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    assert_int_equal(write(out, buf, (size_t)n), n);
  close(in);
  close(out);
  return to;
}

static void test_dlopen_then_another(void **state) {
  (void)state;
  char first[PATH_MAX], second[PATH_MAX];
  assert_non_null(realpath(PPRT_TEST_DLOPEN_LIB, first));
  char *copy = copy_file(PPRT_TEST_DLOPEN_LIB);
  assert_non_null(realpath(copy, second));

  void *h = dlopen(PPRT_TEST_DLOPEN_LIB, RTLD_NOW);
  assert_non_null(h);
  unsigned long before = pprt__elf_path_resolutions();
  pprt__elf_snapshot s;
  assert_int_equal(pprt__elf_snapshot_take(&s), 0);
  const pprt__elf_object *o = find_path(&s, first);
  assert_non_null(o);
  uintptr_t first_bias = o->bias;
  assert_true(pprt__elf_path_resolutions() > before);
  pprt__elf_snapshot_free(&s);
  /* Once seen, not resolved again. */
  before = pprt__elf_path_resolutions();
  assert_int_equal(pprt__elf_snapshot_take(&s), 0);
  assert_non_null(find_path(&s, first));
  assert_int_equal(pprt__elf_path_resolutions(), before);
  pprt__elf_snapshot_free(&s);

  assert_int_equal(dlclose(h), 0);
  h = dlopen(copy, RTLD_NOW);
  assert_non_null(h);
  assert_int_equal(pprt__elf_snapshot_take(&s), 0);
  assert_null(find_path(&s, first));
  o = find_path(&s, second);
  assert_non_null(o);
  fprintf(stderr, "the other file loaded %s the first's address\n",
          o->bias == first_bias ? "at" : "away from");
  pprt__elf_snapshot_free(&s);
  assert_int_equal(dlclose(h), 0);
  unlink(copy);
  free(copy);
}

static void test_fork_child_resolves_nothing(void **state) {
  (void)state;
  pprt__elf_snapshot s;
  assert_int_equal(pprt__elf_snapshot_take(&s), 0);
  pprt__elf_snapshot_free(&s);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    alarm(30);
    unsigned long before = pprt__elf_path_resolutions();
    if (pprt__elf_snapshot_take(&s) != 0)
      _exit(2);
    int ok = s.n > 0 && s.obj[0].path[0] == '/';
    pprt__elf_snapshot_free(&s);
    _exit(ok && pprt__elf_path_resolutions() == before ? 0 : 3);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_second_snapshot_resolves_nothing),
      cmocka_unit_test(test_dlopen_then_another),
      cmocka_unit_test(test_fork_child_resolves_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
