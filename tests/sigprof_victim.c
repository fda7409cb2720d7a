/* A program that execs and sets its own SIGPROF action while the preload
 * library profiles it, for tests/preload_sigprof.c.
 *
 *   sigprof_victim exec thread|handler|ignored
 *     A thread spins for 20 ms of its CPU time and execs this program again,
 *     as "sigprof_victim unblocked", with an environment that has no
 *     LD_PRELOAD; "handler" execs from a SIGUSR1 handler that blocks every
 *     signal (as a crash reporter's does), after 5 ms more of spinning
 *     there; "ignored" sets SIGPROF to SIG_IGN first and execs
 *     "sigprof_victim ignored". The main thread spins meanwhile.
 *
 *   sigprof_victim unblocked
 *     Unblocks every signal and exits 0: a SIGPROF carried over the exec,
 *     pending, kills it (the default action).
 *
 *   sigprof_victim ignored
 *     Exits 0 when SIGPROF's action is SIG_IGN, as exec keeps it, else 1.
 *
 *   sigprof_victim exec-fail
 *     Sets SIGPROF to SIG_IGN, execs a path that does not exist (which
 *     fails), checks that it is told SIG_IGN, and spins for 0.5 s of CPU:
 *     the profile must go on after the failed exec.
 *
 *   sigprof_victim spawn N
 *     N times each: posix_spawn, system and popen of "sigprof_victim
 *     unblocked" (LD_PRELOAD unset first), while a thread spins; each must
 *     exit 0. Prints "spawned N" at the end, or "FAIL ..." and exits 1.
 *
 *   sigprof_victim own-handler
 *     Under PPRT_CPUPROFILE (the profile started before main): installs its
 *     own SIGPROF handler (SA_RESTART, a counter), spins for 1 s of CPU on
 *     two threads, and checks what a program relies on: pprt's samples never
 *     reach its handler, its own SIGPROFs (raise, kill) do, sigaction and
 *     signal report its own actions back, SA_RESETHAND is honoured, one
 *     held while it blocks SIGPROF goes to the handler it has on unblocking;
 *     then stops the profile itself (pprt_cpu_stop, found with dlsym) and
 *     checks that its handler is the installed one again. Prints "ok WHAT"
 *     per check, "FAIL WHAT: WHY" and exit 1 on the first failure.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spin.h"
#include "victim_check.h"

extern char **environ;

static const char *self_path;

static volatile unsigned long sink;

/* Spins for ns of the calling thread's CPU time. */
__attribute__((noinline)) static void spin(uint64_t ns) {
  SPIN_CPU(ns, 2000, sink);
}

static atomic_int stop_spinning;

static void *spinner(void *arg) {
  (void)arg;
  while (!atomic_load(&stop_spinning))
    spin(1000000);
  return NULL;
}

/* ---- exec ------------------------------------------------------------------------------ */

static const char *exec_target = "unblocked";

static void exec_unblocked(void) {
  char *argv[] = {(char *)self_path, (char *)exec_target, NULL};
  char *envp[] = {"PATH=/usr/bin:/bin", NULL};
  execve(self_path, argv, envp);
  _exit(127);
}

static void on_usr1(int sig) {
  (void)sig;
  spin(5000000);
  exec_unblocked();
}

static void *exec_thread(void *from_handler) {
  spin(20000000);
  if (from_handler)
    pthread_kill(pthread_self(), SIGUSR1);
  exec_unblocked();
  return NULL;
}

static int exec_mode(const char *how) {
  int from_handler = strcmp(how, "handler") == 0;
  if (strcmp(how, "ignored") == 0) {
    signal(SIGPROF, SIG_IGN);
    exec_target = "ignored";
  }
  if (from_handler) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigfillset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
  }
  pthread_t t;
  if (pthread_create(&t, NULL, exec_thread, from_handler ? &t : NULL) != 0)
    return 2;
  spinner(NULL); /* until the exec ends this thread */
  return 3;
}

static int unblocked(void) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  return 0;
}

static int ignored(void) {
  struct sigaction sa;
  sigaction(SIGPROF, NULL, &sa);
  return sa.sa_handler == SIG_IGN ? 0 : 1;
}

static int exec_fail(void) {
  signal(SIGPROF, SIG_IGN);
  char *argv[] = {"/nonexistent/sigprof_victim", NULL};
  char *envp[] = {NULL};
  int rc = execve(argv[0], argv, envp);
  CHECK("exec", rc == -1 && errno == ENOENT, "execve returned %d, errno %d", rc, errno);
  CHECK("exec", ignored() == 0, "not told SIG_IGN after the failed exec");
  spin(500000000);
  return 0;
}

/* ---- spawn ------------------------------------------------------------------------------- */

static void expect_exit0(const char *what, int status) {
  CHECK(what, WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s %d",
        WIFSIGNALED(status) ? "killed by signal" : "exit status",
        WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

static int spawn_mode(int n) {
  unsetenv("LD_PRELOAD");
  pthread_t t;
  pthread_create(&t, NULL, spinner, NULL);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "'%s' unblocked", self_path);
  for (int i = 0; i < n; i++) {
    pid_t pid;
    char *argv[] = {(char *)self_path, "unblocked", NULL};
    CHECK("posix_spawn", posix_spawn(&pid, self_path, NULL, NULL, argv, environ) == 0, "failed");
    int status;
    waitpid(pid, &status, 0);
    expect_exit0("posix_spawn", status);
    expect_exit0("system", system(cmd));
    FILE *p = popen(cmd, "r");
    CHECK("popen", p != NULL, "failed");
    expect_exit0("popen", pclose(p));
    spin(2000000);
  }
  atomic_store(&stop_spinning, 1);
  pthread_join(t, NULL);
  printf("spawned %d\n", n);
  return 0;
}

/* ---- own-handler ------------------------------------------------------------------------ */

static atomic_int handled;

static void on_prof(int sig) {
  (void)sig;
  atomic_fetch_add(&handled, 1);
}

static atomic_int handled_other;

static void on_prof_other(int sig) {
  (void)sig;
  atomic_fetch_add(&handled_other, 1);
}

static void expect_handled(const char *what, int n) {
  CHECK(what, atomic_load(&handled) == n, "the program's handler ran %d times, want %d",
        atomic_load(&handled), n);
}

/* Sends the program's own SIGPROF (to this thread, or with kill to the
 * process) until its handler has run `want` times, three tries at most.
 * SIGPROF is not queued: one of pprt's sampling signals pending at the
 * same moment (its clock expiring during the send, more likely on a busy
 * machine) merges with the program's into one, which arrives with pprt's
 * siginfo and is a sample. The kernel does that without pprt too, for any
 * two SIGPROFs; what must not happen is the program's signal lost every
 * time. */
static void send_prof(const char *what, int process_wide, int want) {
  for (int i = 0; i < 3 && atomic_load(&handled) < want; i++) {
    if (i > 0)
      printf("note: %s: the program's SIGPROF merged with one of pprt's; sent again\n", what);
    if (process_wide)
      kill(getpid(), SIGPROF);
    else
      raise(SIGPROF);
  }
  expect_handled(what, want);
}

static struct sigaction current(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigaction(SIGPROF, NULL, &sa);
  return sa;
}

static int own_handler(void) {
  int (*stop)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "pprt_cpu_stop");
  CHECK("preloaded", stop != NULL, "pprt_cpu_stop not found: not preloaded?");
  int n = 0;

  /* 1. Its handler goes in; it is told the action it had, and the one it set. */
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_prof;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  CHECK("sigaction", sigaction(SIGPROF, &sa, &old) == 0, "%s", strerror(errno));
  CHECK("sigaction", old.sa_handler == SIG_DFL, "the previous action is not SIG_DFL");
  struct sigaction now = current();
  CHECK("sigaction", now.sa_handler == on_prof, "sigaction(SIGPROF, NULL, &old) is not ours");
  CHECK("sigaction", (now.sa_flags & SA_RESTART) != 0, "flags %#x lost SA_RESTART", now.sa_flags);
  ok("sigaction reports the program's own SIGPROF actions");

  /* 2. pprt's samples: never the program's. */
  pthread_t t;
  pthread_create(&t, NULL, spinner, NULL);
  spin(1000000000);
  atomic_store(&stop_spinning, 1);
  pthread_join(t, NULL);
  expect_handled("samples", n);
  ok("1 s of CPU on two threads at the profile's rate: the program's handler saw none");

  /* 3. Its own: raise (this thread), kill (the process). */
  send_prof("raise", 0, ++n);
  send_prof("kill", 1, ++n);
  ok("raise and kill reach the program's handler");

  /* 4. signal: the previous handler back; SIG_IGN ignores. */
  CHECK("signal", signal(SIGPROF, SIG_IGN) == on_prof, "signal did not return our handler");
  raise(SIGPROF);
  expect_handled("SIG_IGN", n);
  CHECK("signal", signal(SIGPROF, on_prof) == SIG_IGN, "signal did not return SIG_IGN");
  send_prof("signal", 0, ++n);
  ok("signal returns the previous action; SIG_IGN is honoured");

  /* 5. A one-shot handler is reset to SIG_DFL as it runs. */
  sa.sa_flags = SA_RESTART | SA_RESETHAND;
  sigaction(SIGPROF, &sa, NULL);
  send_prof("SA_RESETHAND", 0, ++n);
  CHECK("SA_RESETHAND", current().sa_handler == SIG_DFL, "not reset to SIG_DFL");
  ok("SA_RESETHAND: reset to SIG_DFL after one signal");

  /* 6. One held while it blocks SIGPROF (core/sigmask.c) goes to the action
   * it has when it unblocks it. */
  sigset_t prof;
  sigemptyset(&prof);
  sigaddset(&prof, SIGPROF);
  pthread_sigmask(SIG_BLOCK, &prof, NULL);
  raise(SIGPROF);
  sa.sa_handler = on_prof_other;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGPROF, &sa, NULL);
  CHECK("held", atomic_load(&handled_other) == 0, "delivered while blocked");
  pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
  CHECK("held", atomic_load(&handled_other) == 1, "the handler set meanwhile ran %d times",
        atomic_load(&handled_other));
  expect_handled("held", n);
  ok("a SIGPROF held while blocked goes to the handler set meanwhile");

  /* 7. Its first handler again; the profile stops: that one is installed. */
  sa.sa_handler = on_prof;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGPROF, &sa, NULL);
  spin(200000000);
  expect_handled("samples", n);
  CHECK("stop", stop() == 0, "pprt_cpu_stop failed");
  CHECK("stop", current().sa_handler == on_prof, "not the program's handler after stop");
  raise(SIGPROF);
  expect_handled("after stop", ++n);
  ok("after stop the program's latest handler is the installed one");
  return 0;
}

int main(int argc, char **argv) {
  self_path = argv[0];
  if (argc == 3 && strcmp(argv[1], "exec") == 0)
    return exec_mode(argv[2]);
  if (argc == 2 && strcmp(argv[1], "unblocked") == 0)
    return unblocked();
  if (argc == 2 && strcmp(argv[1], "ignored") == 0)
    return ignored();
  if (argc == 2 && strcmp(argv[1], "exec-fail") == 0)
    return exec_fail();
  if (argc == 3 && strcmp(argv[1], "spawn") == 0)
    return spawn_mode(atoi(argv[2]));
  if (argc == 2 && strcmp(argv[1], "own-handler") == 0)
    return own_handler();
  fprintf(stderr,
          "usage: %s exec thread|handler|ignored | unblocked | ignored | exec-fail | spawn N | "
          "own-handler\n",
          argv[0]);
  return 2;
}
