/* pprt's fork handlers: one pthread_atfork registration for all of pprt,
 * which runs each component's hooks in the lock order of atfork.h.
 *
 * Handlers registered by each component on its own ran in the order the
 * components were first used, so a program that started the flight
 * recorder before heap sampling and forked from one thread while another
 * wrote a snapshot deadlocked: the forking thread held the heap lock and
 * waited for the trace's, the other held the trace's and waited for the
 * heap's. One registration makes the order a fixed, documented one. */
#include "core/atfork.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

static const pprt__fork_hooks *_Atomic g_hooks[PPRT__FORK_NRANKS];
static pthread_mutex_t *_Atomic g_locks[PPRT__FORK_NRANKS];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* What this fork's prepare step ran, for its parent and child steps (the
 * forking thread runs all three): a component that registers while
 * another thread forks must not be unlocked there without having been
 * locked (ThreadSanitizer, the soak: the symbol cache registering on its
 * first use, between a fork's prepare and parent steps). */
static __thread const pprt__fork_hooks *t_hooks[PPRT__FORK_NRANKS];
static __thread pthread_mutex_t *t_locks[PPRT__FORK_NRANKS];

static void prepare_all(void) {
  for (int i = 0; i < PPRT__FORK_NRANKS; i++) {
    const pprt__fork_hooks *h = atomic_load(&g_hooks[i]);
    pthread_mutex_t *lock = atomic_load(&g_locks[i]);
    t_hooks[i] = h;
    t_locks[i] = lock;
    if (lock)
      pthread_mutex_lock(lock);
    if (h && h->prepare)
      h->prepare();
  }
}

static void parent_all(void) {
  for (int i = PPRT__FORK_NRANKS - 1; i >= 0; i--) {
    const pprt__fork_hooks *h = t_hooks[i];
    pthread_mutex_t *lock = t_locks[i];
    if (h && h->parent)
      h->parent();
    if (lock)
      pthread_mutex_unlock(lock);
  }
}

static void child_all(void) {
  for (int i = PPRT__FORK_NRANKS - 1; i >= 0; i--) {
    const pprt__fork_hooks *h = t_hooks[i];
    pthread_mutex_t *lock = t_locks[i];
    if (lock) {
      pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
      *lock = fresh;
    }
    if (h && h->child)
      h->child();
  }
}

static void install(void) {
  pthread_atfork(prepare_all, parent_all, child_all);
}

void pprt__fork_register_locked(enum pprt__fork_rank rank, pthread_mutex_t *lock,
                                const pprt__fork_hooks *hooks) {
  pthread_once(&g_once, install);
  if ((int)rank >= 0 && rank < PPRT__FORK_NRANKS) {
    atomic_store(&g_locks[rank], lock);
    atomic_store(&g_hooks[rank], hooks);
  }
}

void pprt__fork_register(enum pprt__fork_rank rank, const pprt__fork_hooks *hooks) {
  pprt__fork_register_locked(rank, NULL, hooks);
}
