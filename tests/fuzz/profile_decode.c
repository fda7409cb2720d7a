/* libFuzzer target: the profile decoder must give 0 or a clean error for
 * any input, never crash, hang or leak. Valid decodes are re-checked. */
#include <stddef.h>
#include <stdint.h>

#include "core/profile.h"
#include "read/profile_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  Pprt__Profile *prof = NULL;
  char err[256];
  if (pprt__profile_decode(data, len, &prof, err, sizeof err) == 0) {
    if (pprt__profile_check(prof, err, sizeof err) != 0)
      __builtin_trap(); /* decode accepted what check refuses */
    pprt__profile_decoded_free(prof);
  } else if (prof != NULL || err[0] == '\0') {
    __builtin_trap(); /* an error must come with a reason and no result */
  }
  return 0;
}
