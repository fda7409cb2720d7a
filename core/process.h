/* Which process a sample came from: the labels every CPU and heap sample
 * carries, so that profiles of a process tree merged into one still say
 * where each sample ran (`pprt top --by process`, pprof's -tagfocus). */
#ifndef PPRT_CORE_PROCESS_H
#define PPRT_CORE_PROCESS_H

#include <stddef.h>

#include "core/profile.h"

/* The most labels pprt__process_labels writes. */
#define PPRT__PROCESS_LABELS 3

/* Writes this process's labels into out (room for PPRT__PROCESS_LABELS):
 * "pid" and "ppid" (numeric, unit "id") and "process", the base name of
 * argv[0] as the image that runs now was started with (so a process that
 * execs is named after its new program). Returns how many were written.
 * The strings stay valid while this process lives. Not AS-safe; safe from
 * any thread. */
size_t pprt__process_labels(pprt__label *out);

#endif /* PPRT_CORE_PROCESS_H */
