/* The write-time symbolizer: what names a profile's or trace's addresses,
 * in the process's mode (pprt_set_symbolize, PPRT_SYMBOLIZE). It combines
 * the OS symbolizer (names from the symbol tables), the source-lines reader
 * (file:line and inline frames from DWARF, core/platform.h) and the C++
 * demangler, giving pprt__frame lists as the profile builder takes them.
 * Not AS-safe; one symbolizer is used by one thread at a time. */
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

/* Frames for addr as pprt__symbolize_fn gives them (ctx is the
 * symbolizer). */
size_t pprt__symbolizer_frames(void *ctx, uint64_t addr, pprt__frame *out, size_t max,
                               unsigned *flags);

/* A one-line note for the profile's comments when the symbolizer gives less
 * than its mode asked (lines without libdw); NULL otherwise. */
const char *pprt__symbolizer_note(const pprt__symbolizer *s);

void pprt__symbolizer_close(pprt__symbolizer *s);

/* The demangled form of a C++ (Itanium ABI) name, malloc'd, or NULL when
 * name is not mangled or no demangler is loaded (__cxa_demangle comes with
 * the C++ runtime that any C++ code in the process brought in). */
char *pprt__demangle(const char *name);

#endif /* PPRT_CORE_SYMBOLIZE_H */
