/* SIGPROF's action and exec under the preload library: real processes, real
 * signals (tests/sigprof_victim.c, sort), all at 1000 Hz so that a tick is
 * often in flight.
 *
 *   preload_sigprof exec         200 profiled processes exec from a busy
 *                                thread, 100 more from a signal handler
 *                                that blocks every signal, into a program
 *                                without the preload library that unblocks
 *                                every signal: each must exit 0, not die of
 *                                a SIGPROF carried over the exec; 20 that
 *                                ignore SIGPROF pass SIG_IGN on; after a
 *                                failed exec the profile goes on;
 *   preload_sigprof spawn        posix_spawn, system and popen from a
 *                                profiled process: their children exit 0;
 *   preload_sigprof own_handler  a program that installs its own SIGPROF
 *                                handler while profiled: it survives, its
 *                                handler gets its own SIGPROFs and none of
 *                                pprt's, it is told its own actions, and the
 *                                profile has samples;
 *   preload_sigprof sort         GNU sort, which installs a cleanup handler
 *                                for SIGPROF, sorts a generated file and
 *                                exits 0 (SKIP: without sort). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "read/profile_decode.h"
#include "tests/preload_run.h"

static const char *out_dir(void) {
  mkdir(SIGPROF_OUT, 0755);
  return SIGPROF_OUT;
}

static void print_output(const char *path) {
  size_t len;
  char *text = read_file(path, &len);
  print_message("%s", text ? text : "(no output)\n");
  free(text);
}

static void assert_exit0(int status) {
  if (WIFSIGNALED(status))
    fail_msg("killed by signal %d", WTERMSIG(status));
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Runs `sigprof_victim mode [arg]` under the preload library with a
 * 1000 Hz CPU profile to <mode>.pb.gz (its path in prof), prints what it
 * printed and fails unless it exited 0. */
static void run_victim(const char *mode, const char *arg, char prof[512]) {
  char out[512], env_prof[600];
  snprintf(prof, 512, "%s/%s.pb.gz", out_dir(), mode);
  snprintf(out, sizeof out, "%s/%s.out", out_dir(), mode);
  snprintf(env_prof, sizeof env_prof, "PPRT_CPUPROFILE=%s", prof);
  const char *env[] = {"LD_PRELOAD=" PRELOAD_LIB, env_prof, "PPRT_CPUPROFILE_HZ=1000", NULL};
  char *argv[] = {VICTIM, (char *)mode, (char *)arg, NULL};
  struct rusage ru;
  int status = run(argv, env, out, &ru);
  print_output(out);
  assert_exit0(status);
}

/* The profile at prof has at least min_s of the spun_s seconds the victim
 * spun sampled; what the message starts with says which run it was. */
static void assert_sampled(const char *prof, const char *what, double spun_s, double min_s) {
  Pprt__Profile *p = decode_file(prof);
  double sampled = sampled_seconds(p, 0);
  print_message("%s: %.3f s sampled of %.1f s spun\n", what, sampled, spun_s);
  assert_true(sampled >= min_s);
  pprt__profile_decoded_free(p);
}

/* ---- exec ----------------------------------------------------------------------------- */

/* Runs `sigprof_victim exec how` n times; returns how many did not exit 0. */
static int exec_runs(const char *how, int n) {
  char prof[512], out[512], env_prof[600];
  snprintf(prof, sizeof prof, "%s/exec.pb.gz", out_dir());
  snprintf(out, sizeof out, "%s/exec.out", out_dir());
  snprintf(env_prof, sizeof env_prof, "PPRT_CPUPROFILE=%s", prof);
  const char *env[] = {"LD_PRELOAD=" PRELOAD_LIB, env_prof, "PPRT_CPUPROFILE_HZ=1000", NULL};
  char *argv[] = {VICTIM, "exec", (char *)how, NULL};
  int failed = 0, signaled = 0;
  for (int i = 0; i < n; i++) {
    struct rusage ru;
    int status = run(argv, env, out, &ru);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failed++;
      signaled += WIFSIGNALED(status) && WTERMSIG(status) == SIGPROF;
    }
  }
  const char *from = strcmp(how, "thread") == 0    ? "a busy thread"
                     : strcmp(how, "handler") == 0 ? "a signal handler"
                                                   : "a program that ignores SIGPROF";
  print_message("exec from %s: %d of %d exec'd programs did not exit 0 (%d killed by SIGPROF)\n",
                from, failed, n, signaled);
  return failed;
}

static void test_exec(void **state) {
  (void)state;
  int failed = exec_runs("thread", 200);
  failed += exec_runs("handler", 100);
  failed += exec_runs("ignored", 20);
  assert_int_equal(failed, 0);

  char prof[512];
  run_victim("exec-fail", NULL, prof);
  assert_sampled(prof, "after a failed exec", 0.5, 0.3);
}

/* ---- spawn ------------------------------------------------------------------------------- */

static void test_spawn(void **state) {
  (void)state;
  char prof[512];
  run_victim("spawn", "30", prof);
}

/* ---- own_handler --------------------------------------------------------------------------- */

static void test_own_handler(void **state) {
  (void)state;
  char prof[512];
  run_victim("own-handler", NULL, prof);
  assert_sampled(prof, "profile", 2.2, 1.0);
}

/* ---- sort ---------------------------------------------------------------------------------- */

/* n lines of made-up words from a fixed generator. */
static void write_lines(const char *path, int n) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  uint64_t x = 88172645463325252u;
  for (int i = 0; i < n; i++) {
    int words = 1 + i % 5;
    for (int w = 0; w < words; w++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      int len = 2 + (int)(x % 9);
      for (int j = 0; j < len; j++)
        fputc('a' + (int)((x >> (8 + 5 * j)) % 26), f);
      fputc(w + 1 < words ? ' ' : '\n', f);
    }
  }
  fclose(f);
}

static void test_sort(void **state) {
  (void)state;
  if (SORT[0] == '\0' || access(SORT, X_OK) != 0) {
    print_message("SKIP: no sort program (Debian: coreutils)\n");
    skip();
  }
  const int lines = 300000;
  char input[512], out[512], prof[512], env_prof[600];
  snprintf(input, sizeof input, "%s/sort-input.txt", out_dir());
  snprintf(out, sizeof out, "%s/sort-output.txt", out_dir());
  snprintf(prof, sizeof prof, "%s/sort.pb.gz", out_dir());
  snprintf(env_prof, sizeof env_prof, "PPRT_CPUPROFILE=%s", prof);
  write_lines(input, lines);
  const char *env[] = {"LD_PRELOAD=" PRELOAD_LIB, env_prof, "PPRT_CPUPROFILE_HZ=1000", "LC_ALL=C",
                       NULL};
  char *argv[] = {SORT, input, NULL};
  struct rusage ru;
  int status = run(argv, env, out, &ru);
  assert_exit0(status);

  size_t len;
  char *text = read_file(out, &len);
  assert_non_null(text);
  int n = 0;
  const char *prev = NULL;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    if (prev != NULL && strcmp(prev, line) > 0)
      fail_msg("line %d out of order: \"%s\" after \"%s\"", n + 1, line, prev);
    prev = line;
    n++;
  }
  free(text);
  assert_int_equal(n, lines);
  Pprt__Profile *p = decode_file(prof);
  print_message("sort: %d lines in order; %.3f s sampled\n", n, sampled_seconds(p, 0));
  pprt__profile_decoded_free(p);
}

int main(int argc, char **argv) {
  const struct CMUnitTest exec[] = {cmocka_unit_test(test_exec)};
  const struct CMUnitTest spawn[] = {cmocka_unit_test(test_spawn)};
  const struct CMUnitTest own_handler[] = {cmocka_unit_test(test_own_handler)};
  const struct CMUnitTest sort[] = {cmocka_unit_test(test_sort)};
  const char *which = argc > 1 ? argv[1] : "";
  if (strcmp(which, "exec") == 0)
    return cmocka_run_group_tests(exec, NULL, NULL);
  if (strcmp(which, "spawn") == 0)
    return cmocka_run_group_tests(spawn, NULL, NULL);
  if (strcmp(which, "own_handler") == 0)
    return cmocka_run_group_tests(own_handler, NULL, NULL);
  if (strcmp(which, "sort") == 0)
    return cmocka_run_group_tests(sort, NULL, NULL);
  fprintf(stderr, "usage: %s exec|spawn|own_handler|sort\n", argv[0]);
  return 2;
}
