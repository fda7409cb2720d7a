/* The seam between `pprt trace` and the trace decoder in core: the command
 * reads the file and handles options; these functions validate, summarise
 * and export (trace_backend.c, on core/trace.h). */
#ifndef PPRT_TOOLS_TRACE_BACKEND_H
#define PPRT_TOOLS_TRACE_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/trace.h"
#include "read/trace_decode.h"

/* Largest trace file worth reading: the decoder's bound, which fits a
 * 32-bit size_t. */
#define CLI_TRACE_MAX_BYTES PPRT__TRACE_MAX_BYTES

/* Validates a whole trace file and prints a summary (threads, events by
 * type, time span, generations) to out. 0; -EINVAL with the reason (and
 * the offset) in err for a malformed trace or an unknown version; -ENOMEM;
 * -EIO when out could not be written. */
int cli_trace_check(const uint8_t *data, size_t len, FILE *out, char *err, size_t errlen);

/* Writes the trace as Chrome Trace Event JSON. Errors as cli_trace_check;
 * -EIO when out could not be written. */
int cli_trace_export(const uint8_t *data, size_t len, FILE *out, char *err, size_t errlen);

/* Reads, decodes and exports the n trace files in paths as one document
 * (tools/trace_many.c). A bad file is an error (CLI_EINPUT, after its
 * message), or with skip_bad a line on stderr naming it, and left out;
 * a file cut short keeps its complete generations then. *exported (may be
 * NULL) receives how many traces went in. */
int cli_trace_export_files(const char *cmd, char *const *paths, size_t n, int skip_bad, FILE *out,
                           size_t *exported);

#endif /* PPRT_TOOLS_TRACE_BACKEND_H */
