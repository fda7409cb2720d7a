/* The seam between `pprt trace` and the readers' trace decoder: the command
 * reads the file and handles options; these functions validate, summarise
 * and export (trace_backend.c, on read/trace_decode.h and read/trace_json.h). */
#ifndef PPRT_TOOLS_TRACE_BACKEND_H
#define PPRT_TOOLS_TRACE_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/trace_format.h"
#include "read/trace_decode.h"

/* Largest trace file worth reading: the decoder's bound, which fits a
 * 32-bit size_t. */
#define CLI_TRACE_MAX_BYTES PPRT__TRACE_MAX_BYTES

/* What `pprt trace check` checks and prints about a valid trace. */
typedef struct cli_trace_summary {
  unsigned version;
  uint64_t pid;
  size_t bytes;                      /* the file's size */
  uint64_t ngens, first_gen;         /* generations */
  uint64_t span_ns;                  /* first event to last; 0 without events */
  size_t nevents;                    /* events decoded */
  uint64_t lost;                     /* events threads could not record */
  size_t by_type[PPRT__EV_LAST + 1]; /* events per enum pprt__trace_event_type */
  size_t nthreads;
  pprt__trace_thread *threads; /* sorted by tid; name.s NULL: no name */
  pprt__trace *trace_;         /* owns threads */
} cli_trace_summary;

/* Validates a whole trace file and fills *s; free it with
 * cli_trace_summary_free. 0; -EINVAL with the reason (and the offset) in err
 * for a malformed trace or an unknown version; -ENOMEM. */
int cli_trace_summarize(const uint8_t *data, size_t len, cli_trace_summary *s, char *err,
                        size_t errlen);
void cli_trace_summary_free(cli_trace_summary *s);

/* Prints a summary (threads, events by type, time span, generations). */
void cli_trace_print_summary(FILE *out, const cli_trace_summary *s);

/* Validates a whole trace file and prints its summary to out. Errors as
 * cli_trace_summarize; -EIO when out could not be written. */
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
