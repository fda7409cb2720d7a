/* The profile builder: stacks in, gzip'd pprof out (the decoder, a reader,
 * is read/profile_decode.h).
 *
 * The builder is platform-neutral: callers add samples (raw pcs, values,
 * labels), the mappings of the loaded images, and at write time a function
 * that names addresses. core/profile_os.c fills mappings and names from the
 * platform contract; tests pass their own. Nothing here is AS-safe: the
 * builder runs on the reader thread or the thread that writes the profile.
 */
#ifndef PPRT_CORE_PROFILE_H
#define PPRT_CORE_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "pprt.h"
#include "proto/profile.pb-c.h"

typedef struct pprt__profile pprt__profile;

typedef struct pprt__value_type {
  const char *type; /* e.g. "cpu" */
  const char *unit; /* e.g. "nanoseconds" */
} pprt__value_type;

/* A label on a sample: a string label when str is not NULL, else numeric
 * (num, with num_unit or NULL). */
typedef struct pprt__label {
  const char *key;
  const char *str;
  int64_t num;
  const char *num_unit;
} pprt__label;

/* The names of the synthetic frames. */
#define PPRT__FRAME_LOST "pprt_lost_samples"
#define PPRT__FRAME_EXTERNAL "pprt_external_code"
#define PPRT__FRAME_BLOCKED "pprt_signals_blocked" /* CPU time of a thread that blocked SIGPROF */

/* Creates an empty profile whose samples carry ntypes values (at most 8).
 * period_type and period describe one sampling event. Errors: -EINVAL,
 * -ENOMEM. */
int pprt__profile_new(pprt__profile **out, const pprt__value_type *types, size_t ntypes,
                      pprt__value_type period_type, int64_t period);
void pprt__profile_free(pprt__profile *p);

/* Collection start (Unix ns) and length. */
void pprt__profile_set_time(pprt__profile *p, int64_t time_nanos, int64_t duration_nanos);
/* The sample type a viewer shows first, by type name. -EINVAL if unknown. */
int pprt__profile_set_default_type(pprt__profile *p, const char *type);
int pprt__profile_add_comment(pprt__profile *p, const char *comment);

/* A checkpoint writes a profile that is still being built: the mappings and
 * comments it adds for that one write are dropped again by rewinding to a
 * mark taken before (the strings stay interned, unused). */
typedef struct pprt__profile_mark {
  size_t nmaps, ncomments;
} pprt__profile_mark;
pprt__profile_mark pprt__profile_get_mark(const pprt__profile *p);
void pprt__profile_rewind(pprt__profile *p, pprt__profile_mark m);

/* How the process is ending, when that is not a plain exit ("at SIGTERM",
 * "at a crash (SIGSEGV)", "at _exit"): set once by the preload library
 * before it writes its outputs, and added as a comment ("ending: ...") by
 * the CPU and heap profile writers. NULL: nothing to say. */
void pprt__profile_set_ending(const char *note);
const char *pprt__profile_ending(void);

/* How add interprets pcs. */
enum {
  /* pcs[0] is the exact interrupted instruction (a CPU sample's leaf);
   * without it every pc is a return address. */
  PPRT__STACK_LEAF_EXACT = 1,
};

/* Adds values to the sample with this stack and these labels, creating it
 * the first time. pcs are leaf first; return addresses are stored as
 * address - 1 so they fall inside the call instruction. npcs may be 0.
 * Errors: -ENOMEM (no sample is added or changed), -EINVAL. */
int pprt__profile_add(pprt__profile *p, const uintptr_t *pcs, size_t npcs, unsigned flags,
                      const int64_t *values, const pprt__label *labels, size_t nlabels);

/* Adds values to a sample whose stack is one synthetic frame, the function
 * `name` with no mapping (PPRT__FRAME_LOST, PPRT__FRAME_EXTERNAL). */
int pprt__profile_add_synthetic(pprt__profile *p, const char *name, const int64_t *values,
                                const pprt__label *labels, size_t nlabels);

/* An executable mapping, as pprt__os_image describes one. */
typedef struct pprt__mapping_info {
  uint64_t start, limit, file_offset;
  const char *path;     /* absolute, or a bracketed name: "[vdso]" */
  const char *build_id; /* lowercase hex, or NULL */
} pprt__mapping_info;

/* Declares a mapping; the first one added is the main executable. Addresses
 * in no mapping share one "[anon]" mapping at write time. */
int pprt__profile_add_mapping(pprt__profile *p, const pprt__mapping_info *m);

/* One frame of an address: a function, and where in its source the address
 * is. An address in inlined code has several, innermost first; the last is
 * the function whose code holds the address. */
typedef struct pprt__frame {
  const char *name;        /* as a user reads it (demangled) */
  const char *system_name; /* as the linker knows it (mangled); NULL: name */
  const char *file;        /* source file, or NULL */
  int64_t line;            /* 0: unknown */
  int64_t start_line;      /* the function's first line; 0: unknown */
} pprt__frame;

/* Most frames one address may have (deeper inline chains lose their
 * outermost callers). */
#define PPRT__MAX_FRAMES 32

/* Flags a symbolizer reports with an address's frames. */
enum {
  /* The frames come from debug information: the inline chain is complete. */
  PPRT__FRAMES_DWARF = 1,
};

/* Resolves addr (already adjusted: inside the call instruction for a
 * return address) into at most max frames at out, innermost first; returns
 * how many (0: nothing known) and sets *flags. The strings stay valid until
 * the next call. */
typedef size_t (*pprt__symbolize_fn)(void *ctx, uint64_t addr, pprt__frame *out, size_t max,
                                     unsigned *flags);

/* Encodes, gzips and writes the profile. sym NULL leaves locations as
 * addresses for the reader to symbolize through the mappings. Each location
 * is symbolized at the first write with a sym and keeps what it got for
 * later writes. A mapping's flags (has_functions, has_filenames,
 * has_line_numbers, has_inline_frames) are all set when debug information
 * covered its locations: every location has a name, and every location the
 * debug information covers has a file and a line on each frame (code it
 * does not cover, like crt1's _start, has a name only). Otherwise all four
 * stay false, so pprof may still symbolize the mapping from the binary.
 * Returns 0 or the first error (-ENOMEM, or the writer's). */
int pprt__profile_write(pprt__profile *p, pprt__symbolize_fn sym, void *sym_ctx,
                        pprt_writer out);

/* The addresses of the locations the next write with a symbolizer will
 * look up (those not symbolized by an earlier write), into a malloc'd
 * array at *out (NULL when none) of *n entries, so a symbolizer can resolve
 * them in one batch. Errors: -ENOMEM. */
int pprt__profile_pending_addrs(const pprt__profile *p, uint64_t **out, size_t *n);

/* From the platform (core/profile_os.c): declares the executable mappings
 * of every loaded image, the main executable first. */
int pprt__profile_add_os_mappings(pprt__profile *p);

/* Writes like pprt__profile_write, symbolizing with the process's
 * symbolization mode (core/symbolize.h) when symbolize is nonzero and
 * leaving addresses when it is zero. A comment says how the profile was
 * symbolized when that is less than the mode asked. */
int pprt__profile_write_os(pprt__profile *p, int symbolize, pprt_writer out);

/* Counts, for callers and tests. */
size_t pprt__profile_sample_count(const pprt__profile *p);

#endif /* PPRT_CORE_PROFILE_H */
