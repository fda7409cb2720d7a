/* Shared between the preload library's start-up code and its per-OS
 * pthread_create hook. */
#ifndef PPRT_PRELOAD_H
#define PPRT_PRELOAD_H

#include <pthread.h>
#include <signal.h>

#include "core/sigprof.h"

typedef int (*pprt__pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                                       void *);

/* Creates a thread through real_create that registers itself with pprt
 * before running fn(arg), when profiling is on in this process. */
int pprt__preload_create(pprt__pthread_create_fn real_create, pthread_t *thread,
                         const pthread_attr_t *attr, void *(*fn)(void *), void *arg);

/* libc's sigaction, as the per-OS interposer file reaches it. */
pprt__sigaction_fn pprt__preload_real_sigaction(void);

/* Stops the profilers and the tracer and writes what they recorded: the
 * destructor's work, also done by the flusher thread at an ending (a
 * signal, _exit). The first caller writes; a later one waits until that is
 * done. Not AS-safe. */
void pprt__preload_stop(void);

/* Rewrites the heap profile so far, atomically (PPRT_CHECKPOINT). */
void pprt__preload_heap_checkpoint(void);

/* ---- endings other than exit() (exits.c) ---- */

/* Installs the ending handlers and starts the flusher thread, which also
 * writes heap checkpoints every checkpoint_ms (0: none). Once, from the
 * constructor, when there are outputs. Not AS-safe. */
void pprt__exits_start(int checkpoint_ms);

/* 1 for the signals whose endings are handled. AS-safe. */
int pprt__exits_watched(int sig);

/* sigaction(sig, act, old) as the program sees it: for a watched signal
 * whose default pprt's handler stands for, SIG_DFL is reported and kept,
 * and another action replaces pprt's; everything else goes on to
 * pprt__sigprof_sigaction. AS-safe when real is. */
int pprt__exits_sigaction(pprt__sigaction_fn real, int sig, const struct sigaction *act,
                          struct sigaction *old);

/* signal(sig, h) for SIGPROF or a watched signal, as the sigaction it
 * stands for, through pprt__exits_sigaction: h with flags (SA_RESTART for
 * BSD semantics, SA_RESETHAND | SA_NODEFER for System V's), sig blocked in
 * its handler unless SA_NODEFER. Returns the previous handler, or SIG_ERR
 * with errno (EINVAL for h SIG_ERR or a bad signal). */
void (*pprt__exits_signal(pprt__sigaction_fn real, int sig, void (*h)(int), int flags))(int);

/* From _exit, _Exit and quick_exit: writes the outputs first (bounded by
 * PPRT_FLUSH_TIMEOUT). Nothing in a process that has no outputs of its
 * own (a forked child). AS-safe (it hands off to the flusher thread). */
void pprt__exits_before_exit(void);

#endif /* PPRT_PRELOAD_H */
