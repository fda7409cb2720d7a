/* A thread id reused within one rescan period gets its own timer.
 *
 * Thread A, which pprt did not see start or end (not registered), gets its
 * source at a rescan and ends; before the next rescan a new thread B gets
 * A's id. B must be sampled: before, the rescan found "its" entry (A's
 * source, dead with A) and kept it, and that entry also made the handler
 * drop the process timer's ticks on B, so B had no sample at all.
 *
 * An id is reused on purpose in a new pid namespace, through
 * /proc/sys/kernel/ns_last_pid (a private /proc is mounted there, so that
 * pprt's rescan lists the namespace's ids). Where namespaces cannot be made
 * (no privilege, no user namespaces) the test skips.
 *
 * Both sources: the perf task clock and per-thread CPU timers.
 * Linux only. Real timers: labelled statistical. The bound is loose: B
 * burns 1 s of CPU at 100 Hz, about 100 samples expected (75 at least once
 * the next rescan gave it a source); fewer than 25 fails. Before the fix it
 * had none. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/profile.h"
#include "pprt.h"
#include "read/profile_decode.h"
#include "tests/membuf.h"
#include "tests/profile_util.h"
#include "tests/spin.h"

#define SKIP_STATUS 77

static volatile unsigned long sink;
static _Atomic pid_t g_tid;

__attribute__((noinline)) void burn_reused(void);
void burn_reused(void) {
  unsigned long x = sink;
  LCG_ROUNDS(x, 100000);
  sink = x;
}

/* A: lives through a rescan or two, idle, then ends. */
static void *thread_a(void *arg) {
  (void)arg;
  g_tid = gettid();
  usleep(700000);
  return NULL;
}

static double g_b_cpu;

/* B: with A's id, burns 1 s of CPU. Another id: ends at once. */
static void *thread_b(void *arg) {
  pid_t want = (pid_t)(intptr_t)arg;
  g_tid = gettid();
  if (g_tid != want)
    return NULL;
  double t0 = thread_cpu();
  while (thread_cpu() - t0 < 1.0)
    burn_reused();
  g_b_cpu = thread_cpu() - t0;
  return NULL;
}

static int set_last_pid(pid_t last) {
  int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY);
  if (fd < 0)
    return -1;
  char buf[32];
  int n = snprintf(buf, sizeof buf, "%d", (int)last);
  int ok = write(fd, buf, (size_t)n) == n;
  close(fd);
  return ok ? 0 : -1;
}

/* In the new namespace, as its pid 1. Returns the exit status. */
static pprt_timer_mode g_mode;

static int scenario(void) {
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
      mount("proc", "/proc", "proc", 0, NULL) != 0)
    return SKIP_STATUS;
  membuf m = {0};
  pprt_cpu_options o = {.size = sizeof o, .hz = 100, .timer = g_mode};
  int rc = pprt_cpu_start(&o, mem_writer(&m));
  if (rc == -ENOTSUP || rc == -EACCES)
    return SKIP_STATUS; /* no such source here */
  if (rc != 0)
    return 2;
  pthread_t a;
  pthread_create(&a, NULL, thread_a, NULL);
  pthread_join(a, NULL);
  pid_t reused = g_tid;
  int got = 0;
  for (int tries = 0; tries < 20 && !got; tries++) {
    if (set_last_pid(reused - 1) != 0) {
      pprt_cpu_stop();
      return SKIP_STATUS;
    }
    pthread_t b;
    pthread_create(&b, NULL, thread_b, (void *)(intptr_t)reused);
    pthread_join(b, NULL);
    got = g_tid == reused;
    if (!got)
      usleep(5000); /* A's id not released yet */
  }
  if (pprt_cpu_stop() != 0)
    return 2;
  if (!got) {
    fprintf(stderr, "could not get id %d again\n", (int)reused);
    return SKIP_STATUS;
  }
  Pprt__Profile *p = NULL;
  char err[256];
  if (pprt__profile_decode(m.data, m.len, &p, err, sizeof err) != 0) {
    fprintf(stderr, "profile does not decode: %s\n", err);
    return 2;
  }
  int64_t samples = 0;
  for (size_t i = 0; i < p->n_sample; i++)
    if (strcmp(leaf_name(p, p->sample[i]), "burn_reused") == 0)
      samples += p->sample[i]->value[0];
  pprt__profile_decoded_free(p);
  mem_free(&m);
  printf("thread with reused id %d: %lld samples in %.2f s of CPU at 100 Hz\n", (int)reused,
         (long long)samples, g_b_cpu);
  fflush(stdout);
  return samples >= 25 ? 0 : 1;
}

/* Enters new pid and mount namespaces (with a user namespace where not
 * privileged) and runs the scenario as their first process. */
static int in_namespace(void) {
  uid_t uid = getuid();
  gid_t gid = getgid();
  if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0) {
    if (unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS) != 0)
      return SKIP_STATUS;
    char map[64];
    int fd = open("/proc/self/setgroups", O_WRONLY);
    if (fd >= 0) {
      (void)!write(fd, "deny", 4);
      close(fd);
    }
    snprintf(map, sizeof map, "0 %d 1", (int)uid);
    fd = open("/proc/self/uid_map", O_WRONLY);
    if (fd < 0 || write(fd, map, strlen(map)) < 0)
      return SKIP_STATUS;
    close(fd);
    snprintf(map, sizeof map, "0 %d 1", (int)gid);
    fd = open("/proc/self/gid_map", O_WRONLY);
    if (fd < 0 || write(fd, map, strlen(map)) < 0)
      return SKIP_STATUS;
    close(fd);
  }
  pid_t init = fork();
  if (init < 0)
    return SKIP_STATUS;
  if (init == 0)
    _exit(scenario());
  int status;
  if (waitpid(init, &status, 0) != init)
    return 2;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}

static void reused_tid_gets_its_own_source(pprt_timer_mode mode) {
  g_mode = mode;
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0)
    _exit(in_namespace());
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) == SKIP_STATUS)
    skip();
  assert_int_equal(WEXITSTATUS(status), 0);
}

/* The default source (a perf task clock where allowed). */
static void test_reused_tid_gets_its_own_source(void **state) {
  (void)state;
  reused_tid_gets_its_own_source(PPRT_TIMER_AUTO);
}

static void test_reused_tid_gets_its_own_timer(void **state) {
  (void)state;
  reused_tid_gets_its_own_source(PPRT_TIMER_PER_THREAD);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reused_tid_gets_its_own_source),
      cmocka_unit_test(test_reused_tid_gets_its_own_timer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
