/* libFuzzer target: the trace decoder must give 0 or a clean error for any
 * input, never crash, hang or leak; whatever it accepts must export. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "read/trace_decode.h"
#include "read/trace_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static int discard(void *ctx, const void *p, size_t n) {
  (void)ctx;
  (void)p;
  (void)n;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  for (unsigned flags = 0; flags <= PPRT__TRACE_DECODE_PARTIAL; flags++) {
    pprt__trace *t = NULL;
    char err[256];
    if (pprt__trace_decode(data, len, flags, &t, err, sizeof err) == 0) {
      pprt_writer w = {discard, NULL};
      if (t == NULL || pprt__trace_export_json(t, w) != 0)
        __builtin_trap(); /* accepted, but not exportable */
      pprt__trace_free(t);
    } else if (t != NULL || strncmp(err, "offset ", 7) != 0) {
      __builtin_trap(); /* an error must come with an offset and no result */
    }
  }
  return 0;
}
