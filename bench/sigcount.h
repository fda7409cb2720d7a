/* Counting, in a workload that knows nothing of the profiler it runs
 * under, the signals that profiler samples with: the workloads of
 * bench/cpu (cpu_work.c, cpu_periodic.c) include it.
 *
 * A preloaded profiler installs its handlers in a constructor, before
 * main. sigcount_install() then puts a counting handler, with the same
 * flags and mask, in front of each handler it finds for a signal that
 * profilers sample with, and calls the profiler's with the same siginfo
 * and ucontext. Which signal that is depends on the source: SIGPROF for
 * setitimer and POSIX CPU timers, and for a perf_event whatever signal its
 * owner chose (F_SETSIG: SIGPROF, SIGIO or a real-time signal; SIGTRAP for
 * the kernel's sigtrap events); so all of those are watched, and faults
 * (SIGSEGV, SIGBUS), which a profiler may handle for other reasons, are
 * not. Each thread counts its own deliveries (sigcount_thread). */
#ifndef PPRT_BENCH_SIGCOUNT_H
#define PPRT_BENCH_SIGCOUNT_H

#include <signal.h>
#include <stdio.h>
#include <string.h>

static _Thread_local volatile unsigned long sigcount_thread;
static struct sigaction sigcount_prev[NSIG];

static void sigcount_handler(int sig, siginfo_t *info, void *ucontext) {
  sigcount_thread++;
  const struct sigaction *prev = &sigcount_prev[sig];
  if (prev->sa_flags & SA_SIGINFO)
    prev->sa_sigaction(sig, info, ucontext);
  else if (prev->sa_handler != SIG_IGN && prev->sa_handler != SIG_DFL)
    prev->sa_handler(sig);
}

static int sigcount_sampling_signal(int sig) {
  return sig == SIGPROF || sig == SIGVTALRM || sig == SIGALRM || sig == SIGIO ||
         sig == SIGTRAP || (sig >= SIGRTMIN && sig <= SIGRTMAX);
}

/* Counts each watched signal that has a handler; writes their numbers,
 * comma-separated, into which ("-" when none has one). */
static void sigcount_install(char *which, size_t len) {
  size_t n = 0;
  which[0] = '\0';
  for (int sig = 1; sig < NSIG; sig++) {
    if (!sigcount_sampling_signal(sig) || sigaction(sig, NULL, &sigcount_prev[sig]) != 0)
      continue;
    const struct sigaction *prev = &sigcount_prev[sig];
    if (!(prev->sa_flags & SA_SIGINFO) &&
        (prev->sa_handler == SIG_IGN || prev->sa_handler == SIG_DFL))
      continue;
    struct sigaction sa = *prev;
    sa.sa_sigaction = sigcount_handler;
    sa.sa_flags |= SA_SIGINFO;
    if (sigaction(sig, &sa, NULL) != 0)
      continue;
    int k = snprintf(which + n, len - n, "%s%d", n ? "," : "", sig);
    if (k > 0 && (size_t)k < len - n)
      n += (size_t)k;
  }
  if (n == 0)
    snprintf(which, len, "-");
}

#endif
