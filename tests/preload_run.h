/* Running a program under the preload library and reading what it wrote
 * (the profile through tests/profile_util.h),
 * for the cmocka drivers of preload tests (preload_sigmask.c,
 * preload_sigprof.c), after <cmocka.h>: failures are cmocka assertions. */
#ifndef PPRT_TESTS_PRELOAD_RUN_H
#define PPRT_TESTS_PRELOAD_RUN_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/profile.h"
#include "read/profile_decode.h"
#include "tests/profile_util.h"

extern char **environ;

/* ---- running a program ---------------------------------------------------------- */

/* Runs argv with the variables in env added to ours and its stdout in
 * out_path; returns its wait status and fills *ru with its resource use. */
__attribute__((unused)) static int run(char *const argv[], const char *const env[],
                                       const char *out_path, struct rusage *ru) {
  size_t n = 0, k = 0;
  while (environ[n])
    n++;
  while (env[k])
    k++;
  char **envp = calloc(n + k + 1, sizeof *envp);
  assert_non_null(envp);
  for (size_t i = 0; i < k; i++)
    envp[i] = (char *)env[i];
  for (size_t i = 0; i < n; i++)
    envp[k + i] = environ[i]; /* ours come first: getenv finds them */
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, 1) < 0)
      _exit(126);
    execve(argv[0], argv, envp);
    _exit(127);
  }
  free(envp);
  int status = 0;
  assert_int_equal(wait4(pid, &status, 0, ru), pid);
  return status;
}

static size_t cpu_index(const Pprt__Profile *p) {
  for (size_t i = 0; i < p->n_sample_type; i++)
    if (strcmp(p->string_table[p->sample_type[i]->type], "cpu") == 0)
      return i;
  fail_msg("no cpu sample type");
  return 0;
}

/* The CPU time sampled on thread tid, or on every thread for tid 0. */
static double sampled_seconds(const Pprt__Profile *p, uint64_t tid) {
  size_t vi = cpu_index(p);
  int64_t ns = 0;
  for (size_t i = 0; i < p->n_sample; i++) {
    const Pprt__Sample *s = p->sample[i];
    int mine = tid == 0;
    for (size_t j = 0; j < s->n_label && !mine; j++)
      mine = strcmp(p->string_table[s->label[j]->key], "thread_id") == 0 &&
             s->label[j]->num == (int64_t)tid;
    if (mine)
      ns += s->value[vi];
  }
  return (double)ns / 1e9;
}

#endif /* PPRT_TESTS_PRELOAD_RUN_H */
