/* Loaded ELF images (Linux and FreeBSD): pprt__os_image_each.
 *
 * Divisions: naming the main executable and the vdso (where they are is
 * the OS's hooks' part, core/platform.h); the snapshot, copied out of
 * dl_iterate_phdr with the build id read from each object's PT_NOTE in
 * memory; the resolved paths remembered across snapshots; the executable
 * segments handed to the caller. Paths are resolved after dl_iterate_phdr
 * returns, so realpath's file system calls do not hold up other threads'
 * dlopen.
 */
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/atfork.h"
#include "core/platform.h"
#include "platform/posix/elf.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* ---- the loader's lock across fork ------------------------------------------ */

/* glibc's dl_iterate_phdr holds the loader's write lock while it calls back,
 * and its fork does not make that lock anew in the child. A fork while a
 * pprt thread is in dl_iterate_phdr left the child's lock held for good,
 * and the child's first dl_iterate_phdr (a profile, a C++ throw) hung.
 * pprt's calls go through this lock, which every fork takes first, so no
 * pprt thread is inside the loader when the process forks. */
static pthread_mutex_t g_loader_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_loader_once = PTHREAD_ONCE_INIT;
static const pprt__fork_hooks loader_hooks = {NULL, NULL, NULL};

static void loader_register(void) {
  pprt__fork_register_locked(PPRT__FORK_LOADER, &g_loader_lock, &loader_hooks);
}

PPRT__FORK_REGISTER_AT_LOAD(g_loader_once, loader_register)

int pprt__elf_iterate_phdr(int (*fn)(struct dl_phdr_info *info, size_t size, void *arg),
                           void *arg) {
  pthread_once(&g_loader_once, loader_register);
  pthread_mutex_lock(&g_loader_lock);
  int rc = dl_iterate_phdr(fn, arg);
  pthread_mutex_unlock(&g_loader_lock);
  return rc;
}

/* ---- the main executable and the vdso ---------------------------------------- */

/* Loaders name the vdso each their own way ("linux-vdso.so.1",
 * "linux-gate.so.1" on i386, "[vdso]" on FreeBSD). The auxv address finds it
 * whatever the name; the names cover a kernel that gives no address. */
static int is_vdso_name(const char *name) {
  return strncmp(name, "linux-vdso", 10) == 0 || strncmp(name, "linux-gate", 10) == 0 ||
         strcmp(name, "[vdso]") == 0;
}

/* realpath into a fresh string, or NULL. */
static char *resolve(const char *path) {
  char buf[PATH_MAX];
  if (path == NULL || path[0] == '\0' || realpath(path, buf) == NULL)
    return NULL;
  return strdup(buf);
}

/* Whether exe is obj's program interpreter (PT_INTERP, the dynamic loader). */
static int is_interpreter(const pprt__elf_object *obj, const char *exe) {
  for (size_t i = 0; i < obj->phnum; i++) {
    const pprt__elf_phdr *ph = &obj->phdr[i];
    uintptr_t at = obj->bias + (uintptr_t)ph->p_vaddr;
    if (ph->p_type != PT_INTERP || ph->p_filesz == 0 ||
        !pprt__elf_object_readable(obj, at, ph->p_filesz) ||
        memchr((const void *)at, '\0', ph->p_filesz) == NULL)
      continue;
    char *interp = resolve((const char *)at);
    int same = interp != NULL && strcmp(interp, exe) == 0;
    free(interp);
    return same;
  }
  return 0;
}

/* The absolute path of the main executable obj, as the kernel knows it, and
 * in *file where to read it from when the kernel offers a way that works
 * after the file is deleted or replaced. */
static char *exe_path(const pprt__elf_object *obj, const char **file) {
  char buf[PATH_MAX];
  if (pprt__os_exe_path(buf, sizeof buf) == 0) {
    if (!is_interpreter(obj, buf)) {
      *file = pprt__os_exe_file;
      return strdup(buf);
    }
    /* The loader was run as a command (ld.so ./prog): the kernel's exe is
     * the loader, and glibc leaves the program's name in AT_EXECFN. */
  }
  /* Or no /proc (a chroot, an early sandbox): the path the kernel exec'd. */
  if (pprt__os_exec_path(buf, sizeof buf) == 0)
    return resolve(buf);
  return NULL;
}

/* ---- resolved paths, remembered ---------------------------------------------- */

/* Every profile and every symbolizer takes a snapshot, and resolving each
 * object's path anew cost a realpath per object (a readlink per path
 * component) and a readlink of /proc/self/exe: thousands of system calls a
 * second under an HTTP scrape. An object's path cannot change while it
 * stays loaded, so a path is resolved once per loaded object, identified by
 * the loader's name and load address. An unload (dlpi_subs moves) forgets
 * them all: dlclose and a dlopen of another file under the same name can
 * reuse the address. A relative name keeps the path resolved first, the
 * one nearest its load, where before a later chdir changed it. A fork's
 * child has the same objects, so the list stays right there. All under
 * g_loader_lock, held only to look up and to add, never across realpath. */
typedef struct known_path {
  char *name; /* the loader's name for the object */
  uintptr_t bias;
  char *path;
  int exe_file; /* the object's bytes are read from pprt__os_exe_file */
} known_path;

static known_path *g_known;
static size_t g_nknown, g_capknown;
static unsigned long long g_known_subs;
static atomic_ulong g_resolutions;

unsigned long pprt__elf_path_resolutions(void) {
  return atomic_load_explicit(&g_resolutions, memory_order_relaxed);
}

static void known_forget(void) {
  for (size_t i = 0; i < g_nknown; i++) {
    free(g_known[i].name);
    free(g_known[i].path);
  }
  g_nknown = 0;
}

static const known_path *known_find(const char *name, uintptr_t bias) {
  for (size_t i = 0; i < g_nknown; i++)
    if (g_known[i].bias == bias && strcmp(g_known[i].name, name) == 0)
      return &g_known[i];
  return NULL;
}

/* Remembers name's resolution (nothing if memory runs out: the next
 * snapshot resolves it again). */
static void known_add(const char *name, uintptr_t bias, const pprt__elf_object *obj) {
  if (known_find(name, bias) != NULL)
    return;
  if (g_nknown == g_capknown) {
    size_t cap = g_capknown ? 2 * g_capknown : 16;
    known_path *grown = realloc(g_known, cap * sizeof *grown);
    if (grown == NULL)
      return;
    g_known = grown;
    g_capknown = cap;
  }
  known_path k = {strdup(name), bias, strdup(obj->path), obj->file == pprt__os_exe_file};
  if (k.name == NULL || k.path == NULL) {
    free(k.name);
    free(k.path);
    return;
  }
  g_known[g_nknown++] = k;
}

/* ---- the snapshot --------------------------------------------------------------- */

int pprt__elf_object_readable(const pprt__elf_object *obj, uintptr_t addr, size_t len) {
  for (size_t i = 0; i < obj->phnum; i++) {
    const pprt__elf_phdr *ph = &obj->phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R))
      continue;
    uintptr_t lo = obj->bias + (uintptr_t)ph->p_vaddr;
    if (addr >= lo && addr - lo <= ph->p_filesz && len <= ph->p_filesz - (addr - lo))
      return 1;
  }
  return 0;
}

/* Copies the NT_GNU_BUILD_ID note out of obj's PT_NOTE segments. */
static void object_build_id(pprt__elf_object *obj) {
  for (size_t i = 0; i < obj->phnum; i++) {
    const pprt__elf_phdr *ph = &obj->phdr[i];
    uintptr_t at = obj->bias + (uintptr_t)ph->p_vaddr;
    if (ph->p_type != PT_NOTE || !pprt__elf_object_readable(obj, at, ph->p_filesz))
      continue;
    const uint8_t *id;
    size_t len;
    if (pprt__elf_find_build_id((const void *)at, ph->p_filesz, ph->p_align, &id, &len) == 0 &&
        len <= sizeof obj->build_id) {
      memcpy(obj->build_id, id, len);
      obj->build_id_len = len;
      return;
    }
  }
}

typedef struct collect {
  pprt__elf_snapshot *snap;
  size_t cap;
  uintptr_t vdso;
  int err;
  int has_subs; /* the loader reports dlpi_subs: paths can be remembered */
  unsigned long long subs;
  char **names;    /* the loader's names, for objects resolved after */
  size_t capnames; /* names' length */
} collect;

/* dl_iterate_phdr's callback: runs under the loader's lock, so it copies and
 * reads memory, and leaves path resolution for later. */
static int collect_object(struct dl_phdr_info *info, size_t size, void *arg) {
  collect *c = arg;
  pprt__elf_snapshot *snap = c->snap;
  if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
    snap->adds = info->dlpi_adds;
  if (snap->n == 0 && size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    c->has_subs = 1;
    c->subs = info->dlpi_subs;
    if (c->subs != g_known_subs) {
      known_forget();
      g_known_subs = c->subs;
    }
  }
  if (snap->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 16;
    pprt__elf_object *grown = realloc(snap->obj, cap * sizeof *grown);
    if (grown == NULL)
      return c->err = -ENOMEM;
    snap->obj = grown;
    c->cap = cap;
  }
  if (snap->n == c->capnames) {
    size_t cap = c->capnames ? 2 * c->capnames : 16;
    char **grown = realloc(c->names, cap * sizeof *grown);
    if (grown == NULL)
      return c->err = -ENOMEM;
    c->names = grown;
    c->capnames = cap;
  }
  c->names[snap->n] = NULL;
  pprt__elf_object *obj = &snap->obj[snap->n];
  memset(obj, 0, sizeof *obj);
  obj->bias = (uintptr_t)info->dlpi_addr;
  obj->phnum = info->dlpi_phnum;
  obj->phdr = malloc((obj->phnum ? obj->phnum : 1) * sizeof *obj->phdr);
  /* The raw name for now; resolve_paths replaces it. */
  obj->path = strdup(info->dlpi_name ? info->dlpi_name : "");
  if (obj->phdr == NULL || obj->path == NULL) {
    free(obj->phdr);
    free(obj->path);
    return c->err = -ENOMEM;
  }
  if (obj->phnum != 0)
    memcpy(obj->phdr, info->dlpi_phdr, obj->phnum * sizeof *obj->phdr);
  /* glibc and FreeBSD's rtld both report the main program first. */
  obj->is_main = snap->n == 0;
  for (size_t i = 0; i < obj->phnum; i++) {
    const pprt__elf_phdr *ph = &obj->phdr[i];
    if (ph->p_type == PT_LOAD && ph->p_offset == 0 && c->vdso != 0 &&
        obj->bias + (uintptr_t)ph->p_vaddr == c->vdso)
      obj->is_vdso = 1;
  }
  if (!obj->is_main && is_vdso_name(obj->path))
    obj->is_vdso = 1;
  object_build_id(obj);
  /* A path resolved before replaces the raw name now; otherwise the name
   * stays in names[] for resolve_paths, and to remember the path by. */
  const known_path *k = c->has_subs && !obj->is_vdso ? known_find(obj->path, obj->bias) : NULL;
  if (k != NULL) {
    char *path = strdup(k->path);
    if (path == NULL) {
      free(obj->phdr);
      free(obj->path);
      return c->err = -ENOMEM;
    }
    free(obj->path);
    obj->path = path;
    obj->file = k->exe_file ? pprt__os_exe_file : obj->path;
  } else if (!obj->is_vdso) {
    c->names[snap->n] = strdup(obj->path);
    if (c->names[snap->n] == NULL) {
      free(obj->phdr);
      free(obj->path);
      return c->err = -ENOMEM;
    }
  }
  snap->n++;
  return 0;
}

/* Gives every object not resolved before (names[i] set, or the vdso) an
 * absolute path (see pprt__os_image.path) and the file its symbols are read
 * from. */
static int resolve_paths(pprt__elf_snapshot *snap, char **names) {
  for (size_t i = 0; i < snap->n; i++) {
    pprt__elf_object *obj = &snap->obj[i];
    char *path = NULL;
    if (!obj->is_vdso && names[i] == NULL)
      continue;
    if (!obj->is_vdso)
      atomic_fetch_add_explicit(&g_resolutions, 1, memory_order_relaxed);
    if (obj->is_vdso) {
      path = strdup("[vdso]");
    } else if (obj->is_main) {
      /* glibc names the main program "": the kernel exec'd it, so the
       * kernel knows where it is. FreeBSD's rtld names it by its path. */
      if (obj->path[0] == '\0') {
        path = exe_path(obj, &obj->file);
      } else {
        path = resolve(obj->path);
        if (path == NULL)
          path = exe_path(obj, &obj->file);
      }
      if (path == NULL)
        path = strdup(obj->path[0] ? obj->path : "[exe]");
    } else {
      /* A relative name (dlopen("./x.so")) resolves against the current
       * directory, right unless the program has changed it since. */
      path = resolve(obj->path);
      if (path == NULL)
        path = strdup(obj->path[0] ? obj->path : "[unknown]");
    }
    if (path == NULL)
      return -ENOMEM;
    free(obj->path);
    obj->path = path;
    if (!obj->is_vdso && obj->file == NULL)
      obj->file = obj->path;
  }
  return 0;
}

/* Remembers the paths resolve_paths found, unless an unload came in
 * between (they may name objects no longer loaded). */
static void remember_paths(const pprt__elf_snapshot *snap, const collect *c) {
  if (!c->has_subs)
    return;
  pthread_once(&g_loader_once, loader_register);
  pthread_mutex_lock(&g_loader_lock);
  for (size_t i = 0; i < snap->n && c->subs == g_known_subs; i++)
    if (c->names[i] != NULL)
      known_add(c->names[i], snap->obj[i].bias, &snap->obj[i]);
  pthread_mutex_unlock(&g_loader_lock);
}

int pprt__elf_snapshot_take(pprt__elf_snapshot *snap) {
  memset(snap, 0, sizeof *snap);
  collect c = {snap, 0, pprt__os_vdso_base(), 0, 0, 0, NULL, 0};
  pprt__elf_iterate_phdr(collect_object, &c);
  int rc = c.err ? c.err : resolve_paths(snap, c.names);
  if (rc == 0)
    remember_paths(snap, &c);
  for (size_t i = 0; i < snap->n; i++)
    free(c.names[i]);
  free(c.names);
  if (rc != 0)
    pprt__elf_snapshot_free(snap);
  return rc;
}

void pprt__elf_snapshot_free(pprt__elf_snapshot *snap) {
  for (size_t i = 0; i < snap->n; i++) {
    free(snap->obj[i].path);
    free(snap->obj[i].phdr);
  }
  free(snap->obj);
  memset(snap, 0, sizeof *snap);
}

int pprt__elf_snapshot_renew(pprt__elf_snapshot *snap, void **state, size_t sz, void **retired,
                             size_t *nretired, int (*used)(const void *elem)) {
  pprt__elf_snapshot ns;
  if (pprt__elf_snapshot_take(&ns) != 0)
    return -ENOMEM;
  char *ni = calloc(ns.n ? ns.n : 1, sz);
  int *taken = calloc(ns.n ? ns.n : 1, sizeof *taken);
  char *nr = realloc(*retired, (*nretired + snap->n + 1) * sz);
  if (nr != NULL)
    *retired = nr;
  if (ni == NULL || taken == NULL || nr == NULL) {
    free(ni);
    free(taken);
    pprt__elf_snapshot_free(&ns);
    return -ENOMEM;
  }
  char *old = *state;
  for (size_t i = 0; i < snap->n; i++) {
    size_t k = 0;
    while (k < ns.n && !(ns.obj[k].bias == snap->obj[i].bias &&
                         strcmp(ns.obj[k].path, snap->obj[i].path) == 0 && !taken[k]))
      k++;
    if (k < ns.n) {
      memcpy(ni + k * sz, old + i * sz, sz);
      taken[k] = 1;
    } else if (used(old + i * sz)) {
      memcpy(nr + (*nretired)++ * sz, old + i * sz, sz);
    }
  }
  free(taken);
  free(old);
  pprt__elf_snapshot_free(snap);
  *snap = ns;
  *state = ni;
  return 0;
}

static int read_adds(struct dl_phdr_info *info, size_t size, void *arg) {
  if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
    *(unsigned long long *)arg = info->dlpi_adds;
  return 1; /* the counter is the same in every object's report */
}

unsigned long long pprt__elf_loader_adds(void) {
  unsigned long long adds = 0;
  pprt__elf_iterate_phdr(read_adds, &adds);
  return adds;
}

/* ---- the contract ---------------------------------------------------------------- */

static int object_images(const pprt__elf_object *obj,
                         int (*fn)(const pprt__os_image *img, void *ctx), void *ctx) {
  for (size_t i = 0; i < obj->phnum; i++) {
    const pprt__elf_phdr *ph = &obj->phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || ph->p_memsz == 0)
      continue;
    pprt__os_image img = {
        .path = obj->path,
        .start = obj->bias + (uintptr_t)ph->p_vaddr,
        .limit = obj->bias + (uintptr_t)ph->p_vaddr + (uintptr_t)ph->p_memsz,
        .file_offset = ph->p_offset,
        .load_bias = obj->bias,
        .build_id = obj->build_id_len ? obj->build_id : NULL,
        .build_id_len = obj->build_id_len,
        .is_main = obj->is_main,
    };
    int rc = fn(&img, ctx);
    if (rc != 0)
      return rc;
  }
  return 0;
}

int pprt__os_image_each(int (*fn)(const pprt__os_image *img, void *ctx), void *ctx) {
  pprt__elf_snapshot snap;
  int rc = pprt__elf_snapshot_take(&snap);
  if (rc != 0)
    return rc;
  for (size_t i = 0; i < snap.n && rc == 0; i++)
    rc = object_images(&snap.obj[i], fn, ctx);
  pprt__elf_snapshot_free(&snap);
  return rc;
}
