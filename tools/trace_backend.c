/* `pprt trace` on the readers' trace decoder and JSON exporter (read/):
 * validate and summarise, or export to Chrome Trace Event JSON. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "core/trace_format.h"
#include "read/trace_decode.h"
#include "read/trace_json.h"
#include "tools/trace_backend.h"

static int decode(const uint8_t *data, size_t len, pprt__trace **t, char *err, size_t errlen) {
  int rc = pprt__trace_decode(data, len, 0, t, err, errlen);
  return rc;
}

int cli_trace_summarize(const uint8_t *data, size_t len, cli_trace_summary *s, char *err,
                        size_t errlen) {
  memset(s, 0, sizeof *s);
  pprt__trace *t;
  int rc = decode(data, len, &t, err, errlen);
  if (rc != 0)
    return rc;
  uint64_t first = UINT64_MAX, last = 0;
  for (size_t i = 0; i < t->nevents; i++) {
    const pprt__trace_event *e = &t->events[i];
    s->by_type[e->type]++;
    first = e->ts < first ? e->ts : first;
    last = e->ts > last ? e->ts : last;
  }
  for (size_t i = 0; i < t->nlost; i++)
    s->lost += t->lost[i].count;
  s->version = t->version;
  s->pid = t->pid;
  s->bytes = len;
  s->ngens = t->ngens;
  s->first_gen = t->first_gen;
  s->span_ns = t->nevents ? last - first : 0;
  s->nevents = t->nevents;
  s->nthreads = t->nthreads;
  s->threads = t->threads;
  s->trace_ = t;
  return 0;
}

void cli_trace_summary_free(cli_trace_summary *s) {
  pprt__trace_free(s->trace_);
  memset(s, 0, sizeof *s);
}

void cli_trace_print_summary(FILE *out, const cli_trace_summary *s) {
  fprintf(out, "trace format version %u, process %" PRIu64 ", %zu bytes: valid\n", s->version,
          s->pid, s->bytes);
  fprintf(out, "generations  %" PRIu64 " (first %" PRIu64 ")\n", s->ngens, s->first_gen);
  fprintf(out, "time span    %.6f s\n", (double)s->span_ns / 1e9);
  fprintf(out, "events       %zu (lost %" PRIu64 ")\n", s->nevents, s->lost);
  for (unsigned k = PPRT__EV_FIRST; k <= PPRT__EV_LAST; k++)
    if (s->by_type[k])
      fprintf(out, "  %-14s %zu\n", pprt__trace_spec(k)->name, s->by_type[k]);
  fprintf(out, "threads      %zu\n", s->nthreads);
  for (size_t i = 0; i < s->nthreads; i++)
    fprintf(out, "  %-10" PRIu64 " %s\n", s->threads[i].tid,
            s->threads[i].name.s ? s->threads[i].name.s : "(no name)");
}

int cli_trace_check(const uint8_t *data, size_t len, FILE *out, char *err, size_t errlen) {
  cli_trace_summary s;
  int rc = cli_trace_summarize(data, len, &s, err, errlen);
  if (rc != 0)
    return rc;
  cli_trace_print_summary(out, &s);
  cli_trace_summary_free(&s);
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
