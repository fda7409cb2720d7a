/* Threads that block signals, under the preload library: real processes,
 * real signals (tests/sigmask_victim.c, xz).
 *
 *   preload_sigmask workers    a worker created under a full signal mask
 *                              and one that blocks every signal itself are
 *                              sampled for at least 90% of their CPU time
 *                              (100 Hz);
 *   preload_sigmask xz         so is xz -T2, whose liblzma workers start
 *                              with every signal blocked (SKIP: without xz);
 *   preload_sigmask semantics  the program is told its own masks, and its
 *                              own SIGPROFs reach its handler only once it
 *                              unblocks SIGPROF, during a profile and after.
 *
 * The sampled CPU time of a thread is the sum of the profile's
 * cpu/nanoseconds values whose thread_id label is that thread's. */
#include <errno.h>
#include <fcntl.h>
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
  mkdir(SIGMASK_OUT, 0755);
  return SIGMASK_OUT;
}

/* ---- sampling ------------------------------------------------------------------------ */

static void test_workers(void **state) {
  (void)state;
  char prof[512], out[512];
  snprintf(prof, sizeof prof, "%s/workers.pb.gz", out_dir());
  snprintf(out, sizeof out, "%s/workers.out", out_dir());
  char env_prof[600];
  snprintf(env_prof, sizeof env_prof, "PPRT_CPUPROFILE=%s", prof);
  const char *env[] = {"LD_PRELOAD=" PRELOAD_LIB, env_prof, "PPRT_CPUPROFILE_HZ=100", NULL};
  char *argv[] = {VICTIM, "workers", "2", NULL};
  struct rusage ru;
  int status = run(argv, env, out, &ru);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  size_t len;
  char *text = read_file(out, &len);
  assert_non_null(text);
  Pprt__Profile *p = decode_file(prof);
  int seen = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char name[32];
    unsigned long long tid, ns;
    if (sscanf(line, "worker %31s tid %llu cpu_ns %llu", name, &tid, &ns) != 3)
      continue;
    double measured = (double)ns / 1e9, sampled = sampled_seconds(p, tid);
    print_message("worker %-9s (%s): %.3f s of CPU measured, %.3f s sampled (%.1f%%)\n", name,
                  strcmp(name, "inherited") == 0 ? "created under a full mask"
                                                 : "blocks every signal itself",
                  measured, sampled, 100 * sampled / measured);
    assert_true(sampled >= 0.9 * measured);
    seen++;
  }
  assert_int_equal(seen, 2);
  pprt__profile_decoded_free(p);
  free(text);
}

/* About `bytes` of text that compresses like prose: words drawn from a
 * made-up vocabulary by a fixed generator. */
static void write_text(const char *path, size_t bytes) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  uint64_t x = 88172645463325252u;
  char words[4096][10];
  for (int i = 0; i < 4096; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int n = 2 + (int)(x % 8);
    for (int j = 0; j < n; j++)
      words[i][j] = (char)('a' + (x >> (8 + 5 * j)) % 26);
    words[i][n] = '\0';
  }
  size_t written = 0;
  for (int col = 0; written < bytes; col++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const char *w = words[x % 4096];
    written += (size_t)fprintf(f, "%s%s", w, col % 12 == 11 ? "\n" : " ");
  }
  fclose(f);
}

static void test_xz(void **state) {
  (void)state;
  if (access(XZ, X_OK) != 0) {
    print_message("SKIP: no xz program (Debian: apt-get install xz-utils)\n");
    skip();
  }
  char input[512], prof[512], out[512], env_prof[600];
  snprintf(input, sizeof input, "%s/xz-input.txt", out_dir());
  snprintf(prof, sizeof prof, "%s/xz.pb.gz", out_dir());
  snprintf(out, sizeof out, "%s/xz-input.txt.xz", out_dir());
  snprintf(env_prof, sizeof env_prof, "PPRT_CPUPROFILE=%s", prof);
  write_text(input, 4u << 20);
  const char *env[] = {"LD_PRELOAD=" PRELOAD_LIB, env_prof, "PPRT_CPUPROFILE_HZ=100", NULL};
  /* Blocks of 1 MiB, so that both workers have some. */
  char *argv[] = {XZ, "-6", "-T2", "--block-size=1MiB", "-c", input, NULL};
  struct rusage ru;
  int status = run(argv, env, out, &ru);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
  Pprt__Profile *p = decode_file(prof);
  double sampled = sampled_seconds(p, 0);
  print_message("xz -6 -T2, 4 MiB: %.3f s of CPU (wait4), %.3f s sampled (%.1f%%)\n", cpu, sampled,
                100 * sampled / cpu);
  assert_true(sampled >= 0.9 * cpu);
  pprt__profile_decoded_free(p);
}

/* ---- semantics ------------------------------------------------------------------------ */

static void test_semantics(void **state) {
  (void)state;
  char prof[512], out[512];
  snprintf(prof, sizeof prof, "%s/semantics.pb.gz", out_dir());
  snprintf(out, sizeof out, "%s/semantics.out", out_dir());
  const char *env[] = {"LD_PRELOAD=" PRELOAD_LIB, NULL};
  char *argv[] = {VICTIM, "semantics", prof, NULL};
  struct rusage ru;
  int status = run(argv, env, out, &ru);
  size_t len;
  char *text = read_file(out, &len);
  print_message("%s", text ? text : "(no output)\n");
  free(text);
  if (WIFSIGNALED(status))
    fail_msg("killed by signal %d", WTERMSIG(status));
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  Pprt__Profile *p = decode_file(prof);
  pprt__profile_decoded_free(p);
}

int main(int argc, char **argv) {
  const struct CMUnitTest workers[] = {cmocka_unit_test(test_workers)};
  const struct CMUnitTest xz[] = {cmocka_unit_test(test_xz)};
  const struct CMUnitTest semantics[] = {cmocka_unit_test(test_semantics)};
  const char *which = argc > 1 ? argv[1] : "";
  if (strcmp(which, "workers") == 0)
    return cmocka_run_group_tests(workers, NULL, NULL);
  if (strcmp(which, "xz") == 0)
    return cmocka_run_group_tests(xz, NULL, NULL);
  if (strcmp(which, "semantics") == 0)
    return cmocka_run_group_tests(semantics, NULL, NULL);
  fprintf(stderr, "usage: %s workers|xz|semantics\n", argv[0]);
  return 2;
}
