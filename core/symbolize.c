/* The write-time symbolizer (see symbolize.h): the process's mode, and the
 * frames of one address from the symbol tables, the debug information and
 * the C++ demangler together.
 *
 * Divisions: the mode (pprt_set_symbolize, else PPRT_SYMBOLIZE); the
 * demangler; the symbolizer.
 */
#include "core/symbolize.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/atfork.h"
#include "core/platform.h"
#include "core/table.h"

/* ---- the mode ------------------------------------------------------------------- */

static _Atomic int g_mode; /* PPRT_SYMBOLIZE_DEFAULT until set */

int pprt_set_symbolize(pprt_symbolize mode) {
  if ((int)mode < PPRT_SYMBOLIZE_DEFAULT || (int)mode > PPRT_SYMBOLIZE_NONE)
    return -EINVAL;
  atomic_store(&g_mode, (int)mode);
  return 0;
}

pprt_symbolize pprt__symbolize_mode(void) {
  int m = atomic_load(&g_mode);
  if (m != PPRT_SYMBOLIZE_DEFAULT)
    return (pprt_symbolize)m;
  /* Read at write time, never in a handler; the preload library checks the
   * value at start and says what is wrong with it. */
  const char *v = getenv("PPRT_SYMBOLIZE");
  if (v && (strcmp(v, "names") == 0))
    return PPRT_SYMBOLIZE_NAMES;
  if (v && (strcmp(v, "none") == 0 || strcmp(v, "0") == 0))
    return PPRT_SYMBOLIZE_NONE;
  return PPRT_SYMBOLIZE_LINES; /* names, with a note, where lines cannot be had */
}

/* ---- the demangler ---------------------------------------------------------------- */

typedef char *(*cxa_demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

/* __cxa_demangle from the C++ runtime already in the process: C++ code
 * brought it in, and only C++ code has mangled names. Looked up again while
 * missing, since a C++ library may be loaded later. */
static cxa_demangle_fn demangler(void) {
  static _Atomic(cxa_demangle_fn) found;
  cxa_demangle_fn f = atomic_load_explicit(&found, memory_order_acquire);
  if (f == NULL) {
    void *p = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    memcpy(&f, &p, sizeof f);
    if (f != NULL)
      atomic_store_explicit(&found, f, memory_order_release);
  }
  return f;
}

char *pprt__demangle(const char *name) {
  if (name == NULL || strncmp(name, "_Z", 2) != 0)
    return NULL;
  cxa_demangle_fn f = demangler();
  if (f == NULL)
    return NULL;
  int status = -1;
  char *out = f(name, NULL, NULL, &status);
  if (status != 0) {
    free(out);
    return NULL;
  }
  return out;
}

/* ---- the cache ------------------------------------------------------------------------ */

/* What each address resolved to, kept for the process's life (across
 * profiles, checkpoints and HTTP responses), so an address is resolved once
 * and the debug information is opened only for addresses not seen before:
 * a service scraped every few seconds would otherwise read its DWARF again
 * for every response. Entries are copied out under the lock (a caller's
 * strings must outlive another thread's insert). Emptied when the loader
 * adds or removes an image (an address may now be other code), when a
 * symbolizer asks for another mode, and when it outgrows CACHE_MAX_BYTES. */

#define CACHE_MAX_BYTES ((size_t)16 << 20)

typedef struct cached_frame {
  uint32_t name, system_name, file; /* offsets into strs; 0: NULL */
  int32_t line, start_line;
} cached_frame;

typedef struct cached_addr {
  uint64_t addr;
  uint32_t first; /* into frames */
  uint16_t n;
  uint16_t flags;
} cached_addr;

/* Outside the cache's struct, which emptying the cache clears. */
static pthread_mutex_t g_cache_lock = PTHREAD_MUTEX_INITIALIZER;

static struct {
  int mode; /* the entries' mode; PPRT_SYMBOLIZE_DEFAULT while empty */
  uint64_t loader_gen;
  pprt__table addr_index, str_index;
  cached_addr *addrs;
  size_t naddrs, addrs_cap;
  cached_frame *frames;
  size_t nframes, frames_cap;
  char *strs; /* NUL-terminated strings; offset 0 is "" and means NULL */
  size_t nstrs, strs_cap;
} g_cache;

static _Atomic uint64_t g_hits, g_resolved, g_opens, g_clears;

static void cache_clear_locked(void) {
  if (g_cache.naddrs > 0)
    atomic_fetch_add(&g_clears, 1);
  pprt__table_free(&g_cache.addr_index);
  pprt__table_free(&g_cache.str_index);
  free(g_cache.addrs);
  free(g_cache.frames);
  free(g_cache.strs);
  memset(&g_cache, 0, sizeof g_cache);
}

/* A fork may come while another thread holds the lock: the fork handlers
 * take it around the fork and give the child a fresh one. The entries stay
 * good there (the same images are mapped). */
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;

static void register_fork_hooks(void) {
  static const pprt__fork_hooks none = {NULL, NULL, NULL};
  pprt__fork_register_locked(PPRT__FORK_SYMBOLIZE, &g_cache_lock, &none);
}

PPRT__FORK_REGISTER_AT_LOAD(g_fork_once, register_fork_hooks)

static void cache_lock(void) {
  pthread_once(&g_fork_once, register_fork_hooks);
  pthread_mutex_lock(&g_cache_lock);
}

/* Empties the cache when its entries no longer answer for mode. */
static void cache_check_locked(pprt_symbolize mode) {
  uint64_t gen = pprt__os_loader_generation();
  size_t bytes = g_cache.addrs_cap * sizeof *g_cache.addrs +
                 g_cache.frames_cap * sizeof *g_cache.frames + g_cache.strs_cap +
                 (g_cache.addr_index.cap + g_cache.str_index.cap) * sizeof(pprt__table_slot);
  if ((g_cache.mode != PPRT_SYMBOLIZE_DEFAULT && g_cache.mode != (int)mode) ||
      g_cache.loader_gen != gen || bytes > CACHE_MAX_BYTES)
    cache_clear_locked();
  g_cache.mode = (int)mode;
  g_cache.loader_gen = gen;
}

static int addr_eq(const void *ctx, uint32_t idx) {
  return g_cache.addrs[idx].addr == *(const uint64_t *)ctx;
}

static int64_t cache_find_locked(uint64_t addr) {
  return pprt__table_find(&g_cache.addr_index, pprt__hash_finish(addr), addr_eq, &addr);
}

static int str_eq(const void *ctx, uint32_t idx) {
  return strcmp(g_cache.strs + idx, ctx) == 0;
}

/* The offset of s in the cache's strings (0 for NULL), or -1 on ENOMEM. */
static int64_t cache_str_locked(const char *s) {
  if (s == NULL)
    return 0;
  if (g_cache.nstrs == 0) {
    if (PPRT__RESERVE(g_cache.strs, g_cache.strs_cap, 1) != 0)
      return -1;
    g_cache.strs[g_cache.nstrs++] = '\0';
  }
  size_t len = strlen(s);
  if (g_cache.nstrs + len + 1 > UINT32_MAX)
    return -1;
  uint64_t h = pprt__hash_bytes(s, len);
  int64_t at = pprt__table_find(&g_cache.str_index, h, str_eq, s);
  if (at >= 0)
    return at;
  if (PPRT__RESERVE(g_cache.strs, g_cache.strs_cap, g_cache.nstrs + len + 1) != 0)
    return -1;
  if (pprt__table_intern(&g_cache.str_index, h, str_eq, s, (uint32_t)g_cache.nstrs) < 0)
    return -1;
  memcpy(g_cache.strs + g_cache.nstrs, s, len + 1);
  at = (int64_t)g_cache.nstrs;
  g_cache.nstrs += len + 1;
  return at;
}

/* Records addr's frames; a failure (ENOMEM) only leaves addr uncached. */
static void cache_insert_locked(uint64_t addr, const pprt__frame *fr, size_t n, unsigned flags) {
  if (cache_find_locked(addr) >= 0 ||
      PPRT__RESERVE(g_cache.addrs, g_cache.addrs_cap, g_cache.naddrs + 1) != 0 ||
      PPRT__RESERVE(g_cache.frames, g_cache.frames_cap, g_cache.nframes + n) != 0)
    return;
  for (size_t i = 0; i < n; i++) {
    int64_t name = cache_str_locked(fr[i].name);
    int64_t sys = cache_str_locked(fr[i].system_name);
    int64_t file = cache_str_locked(fr[i].file);
    if (name < 0 || sys < 0 || file < 0)
      return;
    g_cache.frames[g_cache.nframes + i] =
        (cached_frame){(uint32_t)name, (uint32_t)sys, (uint32_t)file, (int32_t)fr[i].line,
                       (int32_t)fr[i].start_line};
  }
  uint64_t key = addr;
  if (pprt__table_intern(&g_cache.addr_index, pprt__hash_finish(addr), addr_eq, &key,
                         (uint32_t)g_cache.naddrs) < 0)
    return;
  g_cache.addrs[g_cache.naddrs++] =
      (cached_addr){addr, (uint32_t)g_cache.nframes, (uint16_t)n, (uint16_t)flags};
  g_cache.nframes += n;
}

/* ---- the symbolizer ------------------------------------------------------------------ */

struct pprt__symbolizer {
  pprt_symbolize mode;
  /* The readers, opened on the first address the cache does not hold. */
  pprt__os_symbolizer *names;
  pprt__os_lines *lines; /* mode lines only */
  int names_tried, lines_tried;
  int lines_failed; /* lines could not be opened: answers are not cached */
  const char *note;
  char *owned[PPRT__MAX_FRAMES]; /* demangled names of the last resolved address */
  size_t nowned;
  char *copy; /* the strings of the last cached answer */
  size_t copy_cap;
  uint64_t gen; /* the loader's generation when the readers were opened */
};

/* ---- the kept readers ----------------------------------------------------------------- */

/* A service scraped every second writes a profile a second, and each has a
 * few addresses no earlier one had (the samples' PCs in libc's malloc, say).
 * Opened afresh, the DWARF reader inflates a compressed debug file from its
 * start up to those addresses' units for every such write. While
 * pprt__symbolize_keep_readers asks for it (the HTTP endpoint does), the
 * last symbolizer to close leaves its readers here for the next to take;
 * they are closed once idle for the linger, when another symbolizer leaves
 * its own, and whenever the loader's generation moves. Under the cache's
 * lock; a forked child keeps them (the same files are mapped). */
static struct {
  pprt__os_symbolizer *names;
  pprt__os_lines *lines;
  int mode; /* PPRT_SYMBOLIZE_DEFAULT: nothing kept */
  uint64_t gen, since_ns;
} g_kept;
static _Atomic uint64_t g_linger_ns, g_reuses;

/* Whether this build has a source-lines reader, asked once. */
static int lines_supported(void) {
  static _Atomic int known; /* 0: not asked yet, 1: yes, 2: no */
  int k = atomic_load(&known);
  if (k == 0) {
    pprt__os_lines *l = NULL;
    k = pprt__os_lines_open(&l, NULL) == -ENOTSUP ? 2 : 1;
    pprt__os_lines_close(l);
    atomic_store(&known, k);
  }
  return k == 1;
}

int pprt__symbolizer_open(pprt__symbolizer **out, pprt_symbolize mode) {
  *out = NULL;
  if (mode == PPRT_SYMBOLIZE_DEFAULT)
    mode = pprt__symbolize_mode();
  if (mode == PPRT_SYMBOLIZE_NONE)
    return 0;
  pprt__symbolizer *s = calloc(1, sizeof *s);
  if (s == NULL)
    return -ENOMEM;
  s->mode = mode;
  if (mode == PPRT_SYMBOLIZE_LINES && !lines_supported())
    s->note = "symbolized: names only (this build of pprt has no DWARF reader: PPRT_SYMBOLIZER=elf)";
  *out = s;
  return 0;
}

const char *pprt__symbolizer_note(const pprt__symbolizer *s) {
  return s ? s->note : NULL;
}

static void drop_owned(pprt__symbolizer *s) {
  for (size_t i = 0; i < s->nowned; i++)
    free(s->owned[i]);
  s->nowned = 0;
}

/* Closes a symbolizer's readers (each may be NULL). */
static void readers_close(pprt__symbolizer *r) {
  pprt__os_lines_close(r->lines);
  pprt__os_symbolizer_close(r->names);
}

/* Empties the kept readers into *out (to be closed outside the lock). */
static void unkeep_locked(pprt__symbolizer *out) {
  out->names = g_kept.names;
  out->lines = g_kept.lines;
  memset(&g_kept, 0, sizeof g_kept);
}

/* Closes the readers: the debug information they hold goes back, or they
 * are kept for the next symbolizer (see g_kept). */
static void close_readers(pprt__symbolizer *s) {
  drop_owned(s);
  if (atomic_load(&g_linger_ns) > 0 && !s->lines_failed && (s->names || s->lines)) {
    pprt__symbolizer old;
    cache_lock();
    unkeep_locked(&old);
    g_kept.names = s->names;
    g_kept.lines = s->lines;
    g_kept.mode = (int)s->mode;
    g_kept.gen = s->gen;
    g_kept.since_ns = pprt__os_monotonic_ns();
    pthread_mutex_unlock(&g_cache_lock);
    s->names = old.names;
    s->lines = old.lines;
  }
  readers_close(s);
  s->lines = NULL;
  s->names = NULL;
  s->names_tried = s->lines_tried = s->lines_failed = 0;
}

/* Takes the kept readers if they answer for s's mode and the loader has
 * not changed since they were opened; 1 if taken. */
static int take_kept(pprt__symbolizer *s) {
  pprt__symbolizer old = {0};
  int taken = 0;
  cache_lock();
  if (g_kept.mode == (int)s->mode && g_kept.gen == s->gen) {
    unkeep_locked(s);
    taken = 1;
  } else if (g_kept.mode != PPRT_SYMBOLIZE_DEFAULT && g_kept.gen != s->gen) {
    unkeep_locked(&old); /* an image may have gone: no symbolizer can use them */
  }
  pthread_mutex_unlock(&g_cache_lock);
  readers_close(&old);
  if (taken) {
    s->names_tried = s->lines_tried = 1;
    atomic_fetch_add(&g_reuses, 1);
  }
  return taken;
}

void pprt__symbolize_keep_readers(uint64_t linger_ns) {
  atomic_store(&g_linger_ns, linger_ns);
  if (linger_ns == 0)
    pprt__symbolize_release_idle(pprt__os_monotonic_ns());
}

uint64_t pprt__symbolize_release_idle(uint64_t now_ns) {
  uint64_t linger = atomic_load(&g_linger_ns), due = UINT64_MAX;
  pprt__symbolizer old = {0};
  cache_lock();
  if (g_kept.mode != PPRT_SYMBOLIZE_DEFAULT) {
    /* now_ns may have been read before another thread kept them. */
    if (linger == 0 || (now_ns >= g_kept.since_ns && now_ns - g_kept.since_ns >= linger))
      unkeep_locked(&old);
    else
      due = g_kept.since_ns + linger;
  }
  pthread_mutex_unlock(&g_cache_lock);
  readers_close(&old);
  return due;
}

/* Opens the readers the mode needs, the first time only. */
static void open_readers(pprt__symbolizer *s) {
  if (!s->names_tried && !s->lines_tried) {
    s->gen = pprt__os_loader_generation();
    if (take_kept(s))
      return;
  }
  if (!s->names_tried) {
    s->names_tried = 1;
    if (pprt__os_symbolizer_open(&s->names) != 0)
      s->names = NULL;
    atomic_fetch_add(&g_opens, 1);
  }
  if (!s->lines_tried && s->mode == PPRT_SYMBOLIZE_LINES && s->note == NULL) {
    s->lines_tried = 1;
    int rc = pprt__os_lines_open(&s->lines, getenv("PPRT_DEBUG_DIRS"));
    atomic_fetch_add(&g_opens, 1);
    s->lines_failed = rc != 0;
    if (rc != 0)
      s->lines = NULL;
  }
}

/* Resolves addr from the readers into at most PPRT__MAX_FRAMES frames; the
 * strings live until the next call. */
static size_t resolve(pprt__symbolizer *s, uint64_t addr, pprt__frame *out, unsigned *flags) {
  open_readers(s);
  const char *sym = NULL;
  uintptr_t off;
  if (s->names == NULL || pprt__os_symbolize(s->names, (uintptr_t)addr, &sym, &off) != 0)
    sym = NULL;
  pprt__os_frame fr[PPRT__MAX_FRAMES];
  int n = s->lines ? pprt__os_lines_resolve(s->lines, (uintptr_t)addr, fr, PPRT__MAX_FRAMES) : 0;
  if (n > 0) {
    *flags |= PPRT__FRAMES_DWARF;
    for (int i = 0; i < n; i++)
      out[i] = (pprt__frame){fr[i].name, NULL, fr[i].file, fr[i].line, fr[i].start_line};
    /* The function the code is in: the symbol table's preferred alias
     * (free rather than __libc_free, the name DWARF gives). */
    if (sym != NULL)
      out[n - 1].name = sym;
    else if (out[n - 1].name == NULL)
      return 0; /* a line in code no table names */
    for (int i = 0; i < n; i++)
      if (out[i].name == NULL)
        out[i].name = "??"; /* an inlined function whose DIE has no name */
  } else if (sym != NULL) {
    out[0] = (pprt__frame){sym, NULL, NULL, 0, 0};
    n = 1;
  } else {
    return 0;
  }
  for (int i = 0; i < n; i++) {
    char *d = pprt__demangle(out[i].name);
    if (d != NULL) {
      s->owned[s->nowned++] = d;
      out[i].system_name = out[i].name;
      out[i].name = d;
    }
  }
  return (size_t)n;
}

/* Copies cache entry idx into out (at most max frames), its strings into
 * the symbolizer's own buffer. Returns the count, SIZE_MAX on ENOMEM. */
static size_t copy_out_locked(pprt__symbolizer *s, int64_t idx, pprt__frame *out, size_t max,
                              unsigned *flags) {
  const cached_addr *a = &g_cache.addrs[idx];
  size_t n = a->n < max ? a->n : max, bytes = 0;
  const cached_frame *cf = g_cache.frames + a->first;
  for (size_t i = 0; i < n; i++)
    bytes += strlen(g_cache.strs + cf[i].name) + strlen(g_cache.strs + cf[i].system_name) +
             strlen(g_cache.strs + cf[i].file) + 3;
  if (bytes > s->copy_cap) {
    char *c = realloc(s->copy, bytes);
    if (c == NULL)
      return SIZE_MAX;
    s->copy = c;
    s->copy_cap = bytes;
  }
  char *p = s->copy;
  for (size_t i = 0; i < n; i++) {
    const char *str[3] = {NULL, NULL, NULL};
    uint32_t off[3] = {cf[i].name, cf[i].system_name, cf[i].file};
    for (int k = 0; k < 3; k++) {
      if (off[k] == 0)
        continue;
      size_t len = strlen(g_cache.strs + off[k]) + 1;
      memcpy(p, g_cache.strs + off[k], len);
      str[k] = p;
      p += len;
    }
    out[i] = (pprt__frame){str[0], str[1], str[2], cf[i].line, cf[i].start_line};
  }
  *flags = a->flags;
  return n;
}

size_t pprt__symbolizer_frames(void *ctx, uint64_t addr, pprt__frame *out, size_t max,
                               unsigned *flags) {
  pprt__symbolizer *s = ctx;
  drop_owned(s);
  *flags = 0;
  if (max > PPRT__MAX_FRAMES)
    max = PPRT__MAX_FRAMES;
  if (max == 0)
    return 0;
  cache_lock();
  cache_check_locked(s->mode);
  int64_t idx = cache_find_locked(addr);
  size_t n = idx >= 0 ? copy_out_locked(s, idx, out, max, flags) : SIZE_MAX;
  pthread_mutex_unlock(&g_cache_lock);
  if (n != SIZE_MAX) {
    atomic_fetch_add(&g_hits, 1);
    return n;
  }
  atomic_fetch_add(&g_resolved, 1);
  /* Resolved without the lock: the debug information may take a while, and
   * other writers (and fork) need not wait on it. */
  pprt__frame fr[PPRT__MAX_FRAMES];
  n = resolve(s, addr, fr, flags);
  if (!s->lines_failed) {
    cache_lock();
    cache_check_locked(s->mode);
    cache_insert_locked(addr, fr, n, *flags);
    pthread_mutex_unlock(&g_cache_lock);
  }
  if (n > max)
    n = max;
  memcpy(out, fr, n * sizeof *out);
  return n;
}

static int addr_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

int pprt__symbolizer_prepare(pprt__symbolizer *s, const uint64_t *addrs, size_t n) {
  if (s == NULL || n == 0)
    return 0;
  uint64_t *miss = malloc(n * sizeof *miss);
  if (miss == NULL)
    return -ENOMEM;
  size_t m = 0;
  cache_lock();
  cache_check_locked(s->mode);
  for (size_t i = 0; i < n; i++)
    if (cache_find_locked(addrs[i]) < 0)
      miss[m++] = addrs[i];
  pthread_mutex_unlock(&g_cache_lock);
  /* Sorted, each once. */
  qsort(miss, m, sizeof *miss, addr_cmp);
  size_t k = 0;
  for (size_t i = 0; i < m; i++)
    if (i == 0 || miss[i] != miss[i - 1])
      miss[k++] = miss[i];
  if (k > 0) {
    /* Then as the lines reader reads fastest (pprt's own DWARF reader: a
     * compilation unit at a time, in the order of the units in the file). */
    open_readers(s);
    if (s->lines != NULL)
      pprt__os_lines_order(s->lines, miss, k);
  }
  pprt__frame fr[PPRT__MAX_FRAMES];
  unsigned flags;
  for (size_t i = 0; i < k; i++)
    pprt__symbolizer_frames(s, miss[i], fr, PPRT__MAX_FRAMES, &flags);
  free(miss);
  close_readers(s);
  return 0;
}

void pprt__symbolizer_close(pprt__symbolizer *s) {
  if (s == NULL)
    return;
  close_readers(s);
  free(s->copy);
  free(s);
}

void pprt__symbolize_get_stats(pprt__symbolize_stats *out) {
  cache_lock();
  out->entries = g_cache.naddrs;
  pthread_mutex_unlock(&g_cache_lock);
  out->hits = atomic_load(&g_hits);
  out->resolved = atomic_load(&g_resolved);
  out->reader_opens = atomic_load(&g_opens);
  out->reader_reuses = atomic_load(&g_reuses);
  out->clears = atomic_load(&g_clears);
}
