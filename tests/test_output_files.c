/* The names the preload library makes up for its outputs (path.tmp for a
 * checkpoint, path.<pid> for a process that inherited the variables) are
 * predictable, so in a shared directory another user can plant a symbolic
 * link there. pprt creates them new and never through a link: the file the
 * link points to is left alone, and the program runs on.
 *
 * pprt trace export's OUT.tmp is made new the same way.
 *
 * Paths come from CMake: PRELOAD_LIB, BURN (tests/cpu_burn.c), PPRT_TOOL
 * (the pprt command; empty when it is not built). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "pprt.h"

static char g_dir[] = "/tmp/pprt-outputs-XXXXXX";
static const char kPrecious[] = "precious contents, not a profile\n";

static void path_in(char *out, size_t n, const char *name) {
  snprintf(out, n, "%s/%s", g_dir, name);
}

static void write_victim(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, kPrecious, sizeof kPrecious - 1), (ssize_t)(sizeof kPrecious - 1));
  close(fd);
}

static void assert_victim_intact(const char *path) {
  char buf[256] = "";
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  assert_true(n >= 0);
  buf[n] = '\0';
  assert_string_equal(buf, kPrecious);
}

/* Runs cpu_burn preloaded with `vars` added; with plant, the child first
 * makes plant_name.<its pid> a link to `target` (its pid is known only
 * there). Returns its exit status. */
static int run_burn(const char *const *vars, const char *plant_name, const char *target) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (plant_name) {
      char link[512];
      int n = snprintf(link, sizeof link, "%s.%d", plant_name, (int)getpid());
      if (n < 0 || (size_t)n >= sizeof link || symlink(target, link) != 0)
        _exit(90);
    }
    for (const char *const *v = vars; *v; v += 2)
      setenv(v[0], v[1], 1);
    setenv("LD_PRELOAD", PRELOAD_LIB, 1);
    execl(BURN, BURN, "0.3", "0", (char *)NULL);
    _exit(91);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_checkpoint_tmp_link_not_followed(void **state) {
  (void)state;
  char victim[512], prof[512], tmp[600];
  path_in(victim, sizeof victim, "victim1");
  path_in(prof, sizeof prof, "cpu1.pb.gz");
  snprintf(tmp, sizeof tmp, "%s.tmp", prof);
  write_victim(victim);
  assert_int_equal(symlink(victim, tmp), 0);
  const char *vars[] = {"PPRT_CPUPROFILE", prof, "PPRT_CHECKPOINT", "0.05", NULL};
  assert_int_equal(run_burn(vars, NULL, NULL), 0);
  assert_victim_intact(victim);
  struct stat st;
  assert_int_equal(lstat(prof, &st), 0);
  assert_true(S_ISREG(st.st_mode)); /* the profile, not a renamed link */
  assert_true(st.st_size > 0);
}

static void test_per_pid_link_not_followed(void **state) {
  (void)state;
  char victim[512], prof[512];
  path_in(victim, sizeof victim, "victim2");
  path_in(prof, sizeof prof, "cpu2.pb.gz");
  write_victim(victim);
  /* Not the owner: writes prof.<pid>, where the link waits. */
  const char *vars[] = {"PPRT_CPUPROFILE", prof, "PPRT_OWNER_PID", "1", NULL};
  assert_int_equal(run_burn(vars, prof, victim), 0);
  assert_victim_intact(victim);
}

/* pprt trace export writes OUT.tmp and renames it to OUT: a link planted
 * at OUT.tmp is neither followed nor renamed into OUT. */
static void test_trace_export_tmp_link_not_followed(void **state) {
  (void)state;
  if (PPRT_TOOL[0] == '\0')
    skip(); /* no pprt command in this build */
  char victim[512], trace[512], json[512], tmp[600];
  path_in(victim, sizeof victim, "victim3");
  path_in(trace, sizeof trace, "t.trace");
  path_in(json, sizeof json, "t.json");
  snprintf(tmp, sizeof tmp, "%s.tmp", json);
  write_victim(victim);
  int fd = open(trace, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  assert_true(fd >= 0);
  pprt_trace_options o = {.size = sizeof o};
  assert_int_equal(pprt_trace_start(&o, pprt_writer_fd(fd)), 0);
  pprt_log("test", "one event");
  assert_int_equal(pprt_trace_stop(), 0);
  close(fd);
  assert_int_equal(symlink(victim, tmp), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    execl(PPRT_TOOL, PPRT_TOOL, "trace", "export", trace, "-o", json, (char *)NULL);
    _exit(91);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 1); /* OUT cannot be written */
  assert_victim_intact(victim);
  struct stat st;
  assert_int_equal(lstat(tmp, &st), 0);
  assert_true(S_ISLNK(st.st_mode));   /* left alone */
  assert_true(lstat(json, &st) != 0); /* and not renamed into OUT */
}

static int setup(void **state) {
  (void)state;
  return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_checkpoint_tmp_link_not_followed),
      cmocka_unit_test(test_per_pid_link_not_followed),
      cmocka_unit_test(test_trace_export_tmp_link_not_followed),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
