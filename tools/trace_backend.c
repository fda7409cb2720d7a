/* `pprt trace` on core's trace decoder (core/trace_decode.c): validate and
 * summarise, or export to Chrome Trace Event JSON. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "core/trace.h"
#include "core/trace_format.h"
#include "read/trace_decode.h"
#include "read/trace_json.h"
#include "tools/trace_backend.h"

static int decode(const uint8_t *data, size_t len, pprt__trace **t, char *err, size_t errlen) {
  int rc = pprt__trace_decode(data, len, 0, t, err, errlen);
  return rc;
}

int cli_trace_check(const uint8_t *data, size_t len, FILE *out, char *err, size_t errlen) {
  pprt__trace *t;
  int rc = decode(data, len, &t, err, errlen);
  if (rc != 0)
    return rc;
  uint64_t first = UINT64_MAX, last = 0, lost = 0;
  size_t by_type[PPRT__EV_LAST + 1] = {0};
  for (size_t i = 0; i < t->nevents; i++) {
    const pprt__trace_event *e = &t->events[i];
    by_type[e->type]++;
    first = e->ts < first ? e->ts : first;
    last = e->ts > last ? e->ts : last;
  }
  for (size_t i = 0; i < t->nlost; i++)
    lost += t->lost[i].count;
  fprintf(out, "trace format version %u, process %" PRIu64 ", %zu bytes: valid\n", t->version,
          t->pid, len);
  fprintf(out, "generations  %" PRIu64 " (first %" PRIu64 ")\n", t->ngens, t->first_gen);
  fprintf(out, "time span    %.6f s\n",
          t->nevents ? (double)(last - first) / 1e9 : 0.0);
  fprintf(out, "events       %zu (lost %" PRIu64 ")\n", t->nevents, lost);
  for (unsigned k = PPRT__EV_FIRST; k <= PPRT__EV_LAST; k++)
    if (by_type[k])
      fprintf(out, "  %-14s %zu\n", pprt__trace_spec(k)->name, by_type[k]);
  fprintf(out, "threads      %zu\n", t->nthreads);
  for (size_t i = 0; i < t->nthreads; i++)
    fprintf(out, "  %-10" PRIu64 " %s\n", t->threads[i].tid,
            t->threads[i].name.s ? t->threads[i].name.s : "(no name)");
  pprt__trace_free(t);
  if (ferror(out)) {
    snprintf(err, errlen, "cannot write the summary: %s", strerror(errno));
    return -EIO;
  }
  return 0;
}

static int file_write(void *ctx, const void *data, size_t len) {
  return fwrite(data, 1, len, ctx) == len ? 0 : -EIO;
}

int cli_trace_export(const uint8_t *data, size_t len, FILE *out, char *err, size_t errlen) {
  pprt__trace *t;
  int rc = decode(data, len, &t, err, errlen);
  if (rc != 0)
    return rc;
  pprt_writer w = {file_write, out};
  rc = pprt__trace_export_json(t, w);
  pprt__trace_free(t);
  if (rc != 0)
    snprintf(err, errlen, "cannot write the JSON: %s", pprt_strerror(rc));
  return rc;
}
