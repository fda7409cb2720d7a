/* The write-time symbolizer: what names a profile's or trace's addresses,
 * in the process's mode (pprt_set_symbolize, PPRT_SYMBOLIZE). It combines
 * the OS symbolizer (names from the symbol tables), the source-lines reader
 * (file:line and inline frames from DWARF, core/platform.h) and the C++
 * demangler, giving pprt__frame lists as the profile builder takes them.
 * What an address resolved to is kept for the process's life in one cache
 * that every symbolizer shares, so repeated profiles (checkpoints, HTTP
 * scrapes) read debug information only for addresses not seen before. Not
 * AS-safe; one symbolizer is used by one thread at a time, several
 * symbolizers by several threads. */
#ifndef PPRT_CORE_SYMBOLIZE_H
#define PPRT_CORE_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#include "core/profile.h"
#include "pprt.h"

typedef struct pprt__symbolizer pprt__symbolizer;

/* The mode in force: never PPRT_SYMBOLIZE_DEFAULT. */
pprt_symbolize pprt__symbolize_mode(void);

/* Opens a symbolizer in mode (PPRT_SYMBOLIZE_DEFAULT: the process's);
 * *out is NULL in mode none. Errors: -ENOMEM. */
int pprt__symbolizer_open(pprt__symbolizer **out, pprt_symbolize mode);

/* Resolves the addresses (adjusted, as pprt__symbolize_fn takes them) that
 * the process's symbol cache does not hold yet, in one pass in address
 * order, then closes the debug information it opened; the frames calls
 * that follow are answered from the cache. Errors: -ENOMEM (the frames
 * calls then resolve one address at a time). */
int pprt__symbolizer_prepare(pprt__symbolizer *s, const uint64_t *addrs, size_t n);

/* Frames for addr as pprt__symbolize_fn gives them (ctx is the
 * symbolizer): from the process's cache, else from the symbol tables and
 * the debug information (opened on the first such address). */
size_t pprt__symbolizer_frames(void *ctx, uint64_t addr, pprt__frame *out, size_t max,
                               unsigned *flags);

/* A one-line note for the profile's comments when the symbolizer gives less
 * than its mode asked (lines in a build without a DWARF reader); NULL otherwise. */
const char *pprt__symbolizer_note(const pprt__symbolizer *s);

void pprt__symbolizer_close(pprt__symbolizer *s);

/* With linger_ns > 0, the readers the last symbolizer opened are kept when
 * it closes, for the next symbolizer of the same mode to take, until they
 * have been idle for linger_ns (pprt__symbolize_release_idle closes them)
 * or the loader adds or removes an image. For a process that writes
 * profiles every few seconds (the HTTP endpoint): each write's few new
 * addresses then cost no fresh reading of the debug files' starts. 0 (the
 * default) closes the readers after every write, and closes any kept. */
void pprt__symbolize_keep_readers(uint64_t linger_ns);

/* Closes the kept readers if they have been idle for the linger at now_ns
 * (pprt__os_monotonic_ns); returns when they will have been, UINT64_MAX
 * when none are kept. */
uint64_t pprt__symbolize_release_idle(uint64_t now_ns);

/* What the process's symbol cache has done, for tests and benchmarks. */
typedef struct pprt__symbolize_stats {
  uint64_t hits;         /* addresses answered from the cache */
  uint64_t resolved;     /* addresses resolved from the readers */
  uint64_t reader_opens; /* symbol-table and debug-information readers opened */
  uint64_t reader_reuses; /* times a symbolizer took the kept readers */
  uint64_t clears;       /* times the cache was emptied */
  uint64_t entries;      /* addresses held now */
} pprt__symbolize_stats;

void pprt__symbolize_get_stats(pprt__symbolize_stats *out);

/* The demangled form of a C++ (Itanium ABI) name, malloc'd, or NULL when
 * name is not mangled or no demangler is loaded (__cxa_demangle comes with
 * the C++ runtime that any C++ code in the process brought in). */
char *pprt__demangle(const char *name);

#endif /* PPRT_CORE_SYMBOLIZE_H */
