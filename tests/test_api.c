/* Tests of the public API that exists for every component: version, error
 * strings and the file-descriptor writer. Linked against the shared library,
 * so it also proves these are exported. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <pprt.h>

static void test_version_matches_header(void **state) {
  (void)state;
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", PPRT_VERSION_MAJOR, PPRT_VERSION_MINOR,
           PPRT_VERSION_PATCH);
  assert_string_equal(pprt_version(), want);
}

static void test_strerror_names_errors(void **state) {
  (void)state;
  assert_string_equal(pprt_strerror(-EBUSY), "already in use");
  assert_string_equal(pprt_strerror(EBUSY), "already in use");
  assert_string_equal(pprt_strerror(0), "success");
  assert_string_equal(pprt_strerror(-ENOSPC), "no space left (buffer full or device full)");
  assert_string_equal(pprt_strerror(-123456), "unknown error");
}

static void test_fd_writer_writes_everything(void **state) {
  (void)state;
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pprt_writer w = pprt_writer_fd(fds[1]);
  assert_int_equal(w.write(w.ctx, "hello, ", 7), 0);
  assert_int_equal(w.write(w.ctx, "pprt", 4), 0);
  close(fds[1]);
  char got[32] = {0};
  assert_int_equal(read(fds[0], got, sizeof got), 11);
  assert_string_equal(got, "hello, pprt");
  close(fds[0]);
}

static void test_fd_writer_reports_errors(void **state) {
  (void)state;
  pprt_writer w = pprt_writer_fd(-1);
  assert_int_equal(w.write(w.ctx, "x", 1), -EBADF);
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  close(fds[0]);
  signal(SIGPIPE, SIG_IGN);
  w = pprt_writer_fd(fds[1]);
  assert_int_equal(w.write(w.ctx, "x", 1), -EPIPE);
  close(fds[1]);
}

static void test_fd_writer_full_disk(void **state) {
  (void)state;
  int fd = open("/dev/full", O_WRONLY);
  if (fd < 0)
    skip(); /* /dev/full exists on Linux only */
  pprt_writer w = pprt_writer_fd(fd);
  assert_int_equal(w.write(w.ctx, "x", 1), -ENOSPC);
  close(fd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version_matches_header),
      cmocka_unit_test(test_strerror_names_errors),
      cmocka_unit_test(test_fd_writer_writes_everything),
      cmocka_unit_test(test_fd_writer_reports_errors),
      cmocka_unit_test(test_fd_writer_full_disk),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
