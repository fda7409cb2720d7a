/* pprt's one set of fork handlers (see atfork.c). */
#ifndef PPRT_CORE_ATFORK_H
#define PPRT_CORE_ATFORK_H

#include <pthread.h>

/* The components that take part, in lock order: a thread that holds one
 * component's lock may take the lock of a component below it, never of one
 * above. The fork's prepare step takes them in this order, the parent and
 * child steps run in the reverse order. Why this order:
 *   preload  the preload library writes the heap profile under its lock
 *            (only reset in the child);
 *   http     starts and stops profiles and traces under its own lock;
 *   trace    its writer thread allocates and frees under the trace's locks;
 *   cpu      starts threads' timers under its lock (no allocation there);
 *   symbolize the symbol cache (core/symbolize.c): profile writers look
 *            addresses up under it, from under the locks above;
 *   sigprof  a spin lock around SIGPROF's action, only reset in the child,
 *            before the CPU profiler's child step restores that action;
 *   cfi      builds unwind tables (allocates, frees) under its lock;
 *   loader   held around pprt's calls into the loader's image list
 *            (platform/posix/elf_images.c), which copy (allocate) there;
 *   heap     a leaf: nothing is called under it that takes a pprt lock;
 *   sigmask  per-thread state only, reset in the child. */
enum pprt__fork_rank {
  PPRT__FORK_PRELOAD,
  PPRT__FORK_HTTP,
  PPRT__FORK_TRACE,
  PPRT__FORK_CPU,
  PPRT__FORK_SYMBOLIZE,
  PPRT__FORK_SIGPROF,
  PPRT__FORK_CFI,
  PPRT__FORK_LOADER,
  PPRT__FORK_HEAP,
  PPRT__FORK_SIGMASK,
  PPRT__FORK_NRANKS
};

typedef struct pprt__fork_hooks {
  void (*prepare)(void); /* takes the component's locks; may be NULL */
  void (*parent)(void);  /* releases them; may be NULL */
  void (*child)(void);   /* leaves the child consistent; may be NULL */
} pprt__fork_hooks;

/* Makes `hooks` (static storage) run at every fork from now on, in `rank`'s
 * place. Registering a rank again replaces its hooks. */
void pprt__fork_register(enum pprt__fork_rank rank, const pprt__fork_hooks *hooks);

/* The same for a component whose lock is a mutex: `lock` (static storage)
 * is held across the fork, taken before hooks->prepare, released after
 * hooks->parent, and made anew in the child (where its holder, the forking
 * thread, is the only thread) before hooks->child. */
void pprt__fork_register_locked(enum pprt__fork_rank rank, pthread_mutex_t *lock,
                                const pprt__fork_hooks *hooks);

/* Runs `install` (which registers a component's hooks, through `once`)
 * when the library is loaded, before the program starts threads, as well
 * as at the component's first use. Registered only at first use, a fork in
 * another thread could pass its prepare step just before the registration
 * and copy the component's lock, held, into the child: the loader's lock
 * did that once (test_loader_fork's child hung in dl_iterate_phdr). */
#define PPRT__FORK_REGISTER_AT_LOAD(once, install)                                                  \
  __attribute__((constructor)) static void install##_at_load(void) {                             \
    pthread_once(&(once), install);                                                                \
  }

#endif /* PPRT_CORE_ATFORK_H */
