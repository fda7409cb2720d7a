/* The CFI walk against libunwind's, frame by frame, on the same contexts:
 * worker threads run a workload built without frame pointers (GCC's -O2
 * default; a qsort callback through the C library; the vDSO's clock; code
 * inside the program's own signal handler, across the signal frame), the
 * main thread interrupts them with pthread_kill at thousands of random
 * points, and the handler walks its ucontext both ways: pprt's cfi walk
 * from the registers, libunwind's unw_init_local2 with
 * UNW_INIT_SIGNAL_FRAME. Prints the agreement rate and each class of
 * disagreement; fails below 99.9%.
 *
 * Disagreement classes:
 *   pprt_shorter  pprt stopped where libunwind went on (a pc no row covers
 *                 and no frame pointer, or a slot outside the stack)
 *   pprt_longer   libunwind stopped first
 *   differ        same depth reached, a different pc at some frame */
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/platform.h"
#include "core/thread.h"
#include "core/unwind.h"
#include "pprt.h"

void cfi_work_run(double seconds);
void cfi_work_in_handler(double seconds);

#define MAXF 64
#define WORKERS 2

static atomic_long g_sigframes, g_frames, g_total, g_agree, g_shorter, g_longer, g_differ;
static atomic_int g_stop;

typedef struct example {
  uintptr_t a[MAXF], b[MAXF];
  size_t na, nb;
} example;
static example g_ex[4];
static atomic_int g_nex;

static void on_usr2(int sig, siginfo_t *info, void *uc) {
  (void)sig;
  (void)info;
  pprt__os_regs regs;
  uintptr_t a[MAXF], b[MAXF];
  size_t na = 0, nb = 0;
  if (pprt__os_context_regs(uc, &regs) == 0)
    na = pprt__unwind_cfi(&regs, pprt__thread_self()->stack, a, MAXF);
  unw_cursor_t c;
  int crossed = 0;
  if (unw_init_local2(&c, (unw_context_t *)uc, UNW_INIT_SIGNAL_FRAME) == 0) {
    do {
      unw_word_t ip;
      if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || ip == 0)
        break;
      b[nb++] = (uintptr_t)ip;
      crossed |= nb > 1 && unw_is_signal_frame(&c) > 0;
    } while (nb < MAXF && unw_step(&c) > 0);
  }
  if (crossed)
    atomic_fetch_add(&g_sigframes, 1);
  atomic_fetch_add(&g_total, 1);
  atomic_fetch_add(&g_frames, (long)na);
  size_t same = 0;
  while (same < na && same < nb && a[same] == b[same])
    same++;
  int kind; /* 0 agree, 1 shorter, 2 longer, 3 differ */
  if (same == na && same == nb)
    kind = 0;
  else if (same == na)
    kind = 1;
  else if (same == nb)
    kind = 2;
  else
    kind = 3;
  atomic_fetch_add(kind == 0   ? &g_agree
                   : kind == 1 ? &g_shorter
                   : kind == 2 ? &g_longer
                               : &g_differ,
                   1);
  if (kind != 0) {
    int i = atomic_fetch_add(&g_nex, 1);
    if (i < 4) {
      memcpy(g_ex[i].a, a, sizeof a);
      memcpy(g_ex[i].b, b, sizeof b);
      g_ex[i].na = na;
      g_ex[i].nb = nb;
    }
  }
}

/* Worker 0 also spends half its time in its own SIGUSR1 handler, so some
 * contexts are walked across a signal frame (only one worker: the handler
 * is process-wide and each call installs and restores it). */
static void *worker(void *arg) {
  int in_handler = arg != NULL;
  pprt_thread_register(); /* the stack bounds both walks are held to */
  while (!atomic_load(&g_stop)) {
    cfi_work_run(0.05);
    if (in_handler)
      cfi_work_in_handler(0.05);
  }
  return NULL;
}

static void print_pc(const char *who, size_t i, uintptr_t pc) {
  Dl_info di;
  const char *name = dladdr((void *)pc, &di) && di.dli_sname ? di.dli_sname : "?";
  printf("    %s[%zu] %#lx %s\n", who, i, (unsigned long)pc, name);
}

int main(int argc, char **argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 5000;
  if (pprt__cfi_refresh() != 0) {
    fprintf(stderr, "cfi tables could not be built\n");
    return 1;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_usr2;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigfillset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, NULL);
  pthread_t t[WORKERS];
  for (int i = 0; i < WORKERS; i++)
    pthread_create(&t[i], NULL, worker, i == 0 ? (void *)1 : NULL);
  unsigned seed = (unsigned)time(NULL);
  for (long r = 0; r < rounds; r++) {
    pthread_kill(t[rand_r(&seed) % WORKERS], SIGUSR2);
    usleep(100 + (unsigned)(rand_r(&seed) % 400));
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < WORKERS; i++)
    pthread_join(t[i], NULL);
  long total = atomic_load(&g_total), agree = atomic_load(&g_agree);
  double rate = total ? (double)agree / (double)total : 0;
  printf("cfi vs libunwind: %ld of %ld interrupted contexts agree frame by frame (%.3f%%); "
         "%.1f frames a stack, %ld across a signal frame; pprt shorter %ld, pprt longer %ld, a pc "
         "differs %ld\n",
         agree, total, 100 * rate, total ? (double)atomic_load(&g_frames) / (double)total : 0.0,
         atomic_load(&g_sigframes), atomic_load(&g_shorter), atomic_load(&g_longer),
         atomic_load(&g_differ));
  int nex = atomic_load(&g_nex);
  for (int i = 0; i < nex && i < 4; i++) {
    printf("  disagreement %d:\n", i + 1);
    for (size_t k = 0; k < g_ex[i].na; k++)
      print_pc("cfi", k, g_ex[i].a[k]);
    for (size_t k = 0; k < g_ex[i].nb; k++)
      print_pc("libunwind", k, g_ex[i].b[k]);
  }
  if (total < rounds / 10) { /* signals sent while one is pending merge */
    printf("FAIL: only %ld of %ld signals were handled\n", total, rounds);
    return 1;
  }
  if (rate < 0.999) {
    printf("FAIL: agreement below 99.9%%\n");
    return 1;
  }
  return 0;
}
