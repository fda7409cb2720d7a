/* Several traces (a process tree's) exported as one Chrome Trace Event
 * document: each process its own pid, named, on one time axis
 * (pprt__trace_export_json_many). Traces are decoded one after another and
 * all held until the document is written: a trace is its file's size or
 * so, and the exporter needs every process's events in one pass. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "read/trace_decode.h"
#include "read/trace_json.h"
#include "tools/cli.h"
#include "tools/trace_backend.h"

static int file_write(void *ctx, const void *data, size_t len) {
  return fwrite(data, 1, len, ctx) == len ? 0 : -EIO;
}

int cli_trace_export_files(const char *cmd, char *const *paths, size_t n, int skip_bad, FILE *out,
                           size_t *exported) {
  pprt__trace **ts = calloc(n ? n : 1, sizeof *ts);
  if (ts == NULL)
    return cli_error(CLI_EFAIL, cmd, "out of memory");
  size_t nt = 0;
  int rc = CLI_OK;
  for (size_t i = 0; i < n && rc == CLI_OK; i++) {
    uint8_t *data;
    size_t len;
    char err[512];
    int r = cli_read_file(paths[i], CLI_TRACE_MAX_BYTES, &data, &len, err, sizeof err);
    if (r == CLI_OK) {
      /* A process killed while it wrote leaves its last generation cut
       * short: a tree's export keeps the complete ones. */
      int d = pprt__trace_decode(data, len, skip_bad ? PPRT__TRACE_DECODE_PARTIAL : 0, &ts[nt], err,
                                 sizeof err);
      free(data);
      if (d == -ENOMEM)
        r = cli_error(CLI_EFAIL, cmd, "%s: out of memory", paths[i]);
      else if (d != 0)
        r = CLI_EINPUT;
      else if (ts[nt]->truncated_at)
        fprintf(stderr, "pprt %s: %s: cut short at offset %zu (%s); its complete part is kept\n",
                cmd, paths[i], ts[nt]->truncated_at, ts[nt]->truncated_reason);
      if (d == 0)
        nt++;
    }
    if (r == CLI_EINPUT) {
      if (!skip_bad)
        rc = cli_error(CLI_EINPUT, cmd, "%s: %s", paths[i], err);
      else
        fprintf(stderr, "pprt %s: %s: %s; left out\n", cmd, paths[i], err);
    } else if (r != CLI_OK) {
      rc = r;
    }
  }
  if (rc == CLI_OK && nt == 0)
    rc = cli_error(CLI_EINPUT, cmd, "no trace could be read");
  if (rc == CLI_OK) {
    int e = pprt__trace_export_json_many((const pprt__trace *const *)ts, nt,
                                         (pprt_writer){file_write, out});
    if (e == -ENOMEM)
      rc = cli_error(CLI_EFAIL, cmd, "out of memory");
    else if (e != 0)
      rc = cli_error(CLI_EFAIL, cmd, "writing failed: %s", strerror(errno));
  }
  if (exported)
    *exported = rc == CLI_OK ? nt : 0;
  for (size_t i = 0; i < nt; i++)
    pprt__trace_free(ts[i]);
  free(ts);
  return rc;
}
