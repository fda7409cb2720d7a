/* Shared between the preload library's start-up code and its per-OS
 * pthread_create hook. */
#ifndef PPRT_PRELOAD_H
#define PPRT_PRELOAD_H

#include <pthread.h>

typedef int (*pprt__pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                                       void *);

/* Creates a thread through real_create that registers itself with pprt
 * before running fn(arg), when profiling is on in this process. */
int pprt__preload_create(pprt__pthread_create_fn real_create, pthread_t *thread,
                         const pthread_attr_t *attr, void *(*fn)(void *), void *arg);

#endif /* PPRT_PRELOAD_H */
