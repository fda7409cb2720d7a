/* The trace backend for a build without core's trace decoder: every call
 * reports -ENOSYS, which `pprt trace` turns into its "not built" exit code
 * (4). The decoder and the Chrome JSON exporter come with the trace
 * encoder (issue 6); this file is then replaced by one that calls them. */
#include <errno.h>

#include "tools/trace_backend.h"

int cli_trace_check(const uint8_t *data, size_t len, FILE *out, char *err, size_t errlen) {
  (void)data, (void)len, (void)out;
  snprintf(err, errlen,
           "this build of pprt has no trace decoder yet (it comes with the trace "
           "encoder, issue 6)");
  return -ENOSYS;
}

int cli_trace_export(const uint8_t *data, size_t len, FILE *out, char *err, size_t errlen) {
  return cli_trace_check(data, len, out, err, errlen);
}
