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
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/platform.h"

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

/* ---- the symbolizer ------------------------------------------------------------------ */

struct pprt__symbolizer {
  pprt__os_symbolizer *names;
  pprt__os_lines *lines; /* NULL in mode names, or without a reader */
  const char *note;
  char *owned[PPRT__MAX_FRAMES]; /* demangled names of the last call */
  size_t nowned;
};

int pprt__symbolizer_open(pprt__symbolizer **out, pprt_symbolize mode) {
  *out = NULL;
  if (mode == PPRT_SYMBOLIZE_DEFAULT)
    mode = pprt__symbolize_mode();
  if (mode == PPRT_SYMBOLIZE_NONE)
    return 0;
  pprt__symbolizer *s = calloc(1, sizeof *s);
  if (s == NULL)
    return -ENOMEM;
  int rc = pprt__os_symbolizer_open(&s->names);
  if (rc == 0 && mode == PPRT_SYMBOLIZE_LINES) {
    int lrc = pprt__os_lines_open(&s->lines, getenv("PPRT_DEBUG_DIRS"));
    if (lrc == -ENOTSUP)
      s->note = "symbolized: names only (this build of pprt has no DWARF reader: no libdw)";
    else if (lrc != 0)
      rc = lrc;
  }
  if (rc != 0) {
    pprt__symbolizer_close(s);
    return rc;
  }
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

size_t pprt__symbolizer_frames(void *ctx, uint64_t addr, pprt__frame *out, size_t max,
                               unsigned *flags) {
  pprt__symbolizer *s = ctx;
  drop_owned(s);
  *flags = 0;
  if (max > PPRT__MAX_FRAMES)
    max = PPRT__MAX_FRAMES;
  if (max == 0)
    return 0;
  const char *sym = NULL;
  uintptr_t off;
  if (pprt__os_symbolize(s->names, (uintptr_t)addr, &sym, &off) != 0)
    sym = NULL;
  pprt__os_frame fr[PPRT__MAX_FRAMES];
  int n = s->lines ? pprt__os_lines_resolve(s->lines, (uintptr_t)addr, fr, max) : 0;
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

void pprt__symbolizer_close(pprt__symbolizer *s) {
  if (s == NULL)
    return;
  drop_owned(s);
  pprt__os_lines_close(s->lines);
  pprt__os_symbolizer_close(s->names);
  free(s);
}
