/* libFuzzer target: the CFI compiler (core/cfi.c) must give a table or a
 * status for any bytes, never read outside them, crash, hang or leak; a
 * table it gives must be sorted and hold only kinds the walk knows.
 *
 * Input: one byte of flags (bit 0 aarch64 instead of x86_64, bit 1
 * .debug_frame, bit 2 no .eh_frame_hdr), the header's length and the
 * address the bytes sit at (4 bytes each, little-endian), then the bytes:
 * .eh_frame_hdr at their start, .eh_frame somewhere after it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/cfi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  if (len < 9)
    return 0;
  unsigned flags = data[0];
  size_t hlen = le32(data + 1);
  uint64_t addr = le32(data + 5);
  /* A copy of exactly the bytes, so ASan sees any read past them. */
  size_t n = len - 9;
  uint8_t *bytes = malloc(n ? n : 1);
  memcpy(bytes, data + 9, n);
  pprt__cfi_input in = {
      .machine = (flags & 1) ? PPRT__CFI_AARCH64 : PPRT__CFI_X86_64,
      .frame = {bytes, n, addr},
      .debug_frame = (flags & 2) != 0,
      .text_lo = 0,
      .text_hi = (uint64_t)1 << 24, /* the bucket index grows with the code's span */
      .max_rows = 1 << 16,
  };
  if (!(flags & 6) && hlen <= n)
    in.hdr = (pprt__cfi_bytes){bytes, hlen, addr};
  pprt__cfi_table *t = NULL;
  enum pprt__cfi_status st = pprt__cfi_build(&in, &t);
  if ((st == PPRT__CFI_OK) != (t != NULL))
    __builtin_trap();
  if (t != NULL) {
    for (size_t i = 0; i < t->n; i++) {
      if (PPRT__CFI_ROW_KIND(&t->rows[i]) > PPRT__CFI_CFA_FP_PAC ||
          (i > 0 && t->rows[i - 1].pc >= t->rows[i].pc))
        __builtin_trap();
      const pprt__cfi_row *r = pprt__cfi_lookup(t, t->base + t->rows[i].pc);
      if (r == NULL && t->rows[i].pc < t->end)
        __builtin_trap();
    }
    free(t);
  }
  free(bytes);
  return 0;
}
