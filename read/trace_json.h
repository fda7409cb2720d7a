/* The Chrome Trace Event JSON exporter (read/trace_json.c): decoded traces
 * as the JSON that ui.perfetto.dev, chrome://tracing and speedscope open. */
#ifndef PPRT_READ_TRACE_JSON_H
#define PPRT_READ_TRACE_JSON_H

#include "pprt.h"
#include "read/trace_decode.h"

/* Writes t as Chrome Trace Event JSON (object form) to out: regions as B/E,
 * properly nested per thread (a region_end with no open region on its
 * thread closes a region "(begun before the trace)" that opens just before
 * the thread's first event; regions still open at the end close just after
 * the thread's last event, innermost first; docs/trace-format.md has the
 * details), thread names as M metadata,
 * counters as C, logs as instant events, tasks as async b/e with their ids,
 * CPU and allocation samples as instant events with their stacks (function
 * names where the trace has them, else hex pcs) in args, lost events as
 * instant events. Timestamps in microseconds. Returns 0 or the writer's
 * error (-ENOMEM). */
int pprt__trace_export_json(const pprt__trace *t, pprt_writer out);
/* The same for the n traces of a process tree in one document: each
 * process its own pid, named (process_name metadata) after its main
 * thread, all on one time axis (their origins on the monotonic clock,
 * which every process shares; otherData.origin_wall_ns is the earliest). */
int pprt__trace_export_json_many(const pprt__trace *const *ts, size_t n, pprt_writer out);

#endif /* PPRT_READ_TRACE_JSON_H */
