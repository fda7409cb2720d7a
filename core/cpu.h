/* The CPU profiler's internal interface to the rest of pprt. The public API
 * (pprt_cpu_start, pprt_cpu_stop) is in pprt.h. */
#ifndef PPRT_CORE_CPU_H
#define PPRT_CORE_CPU_H

#include <stdint.h>

#include "pprt.h"

/* A thread was registered / is exiting: while a session runs with
 * per-thread timers, start / delete its timer now rather than at the next
 * rescan. Not AS-safe. */
void pprt__cpu_thread_started(uint64_t tid);
void pprt__cpu_thread_exiting(uint64_t tid);

/* Around an exec in the profiled process. The new image has SIGPROF's
 * default action, which ends it, until it installs a handler; it inherits
 * the process timer (setitimer) and every SIGPROF pending on the exec'ing
 * thread or on the process. prepare disarms the process timer, stops the
 * calling thread's own clock or timer (a signal it sent while the exec runs
 * in the kernel would be pending in the new image), and takes the pending
 * SIGPROFs off: pprt's are dropped, the program's delivered to it before
 * the exec (core/sigprof.h). failed re-arms what prepare stopped when the
 * exec did not happen. Other threads' sources end with the exec, which ends
 * their threads. Does nothing in a vfork child. Not AS-safe. */
void pprt__cpu_exec_prepare(void);
void pprt__cpu_exec_failed(void);

/* 1 on the CPU profiler's reader thread, else 0. AS-safe. */
int pprt__cpu_on_reader(void);

/* 1 while a CPU profile runs (from start until stop detaches it), else 0.
 * core/sigmask.c keeps SIGPROF deliverable only then. AS-safe. */
int pprt__cpu_running(void);

/* The caller registers every thread as it starts (the preload library's
 * pthread_create hook): auto then needs no process timer beside the
 * per-thread sources. Call before pprt_cpu_start. */
void pprt__cpu_threads_hooked(void);

/* Checkpoints: every interval_ns of wall time the reader writes the
 * profile so far, so that a process that dies without writing (kill -9)
 * leaves a complete profile up to the last one. begin(ctx, &out) gives the
 * writer (nonzero: skip this checkpoint); end(ctx, rc) gets the write's
 * result, to move a temporary file into place. Both run on the reader
 * thread. Set before pprt_cpu_start (a copy is taken at start);
 * interval_ns 0 turns them off. Not AS-safe. */
typedef struct pprt__cpu_checkpoint {
  uint64_t interval_ns;
  int (*begin)(void *ctx, pprt_writer *out);
  void (*end)(void *ctx, int rc);
  void *ctx;
} pprt__cpu_checkpoint;
void pprt__cpu_set_checkpoint(const pprt__cpu_checkpoint *c);
/* pprt's own threads other than the reader (the HTTP endpoint's), which
 * block every signal: never given a sampling source, never charged to
 * PPRT__FRAME_BLOCKED, not registered by pprt_cpu_start when they call it.
 * At most 8; ignore returns -ENOSPC past that. Not AS-safe. */
int pprt__cpu_ignore_thread(uint64_t tid);
void pprt__cpu_unignore_thread(uint64_t tid);

/* Header words of a CPU sample record in the ring: [tid, count | flags,
 * weight]: count is the number of sampling periods the signal stands for,
 * weight the CPU nanoseconds they cover. */
#define PPRT__CPU_HDR_WORDS 3
#define PPRT__CPU_FLAG_EXTERNAL (UINT64_C(1) << 32) /* no stack could be walked */

#endif /* PPRT_CORE_CPU_H */
