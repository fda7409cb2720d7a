/* libFuzzer target: the pprt command's profile views (top, collapse, flame,
 * tools/) on any input, through the command's own code: each must finish
 * with output or a clean refusal, never crash, hang, leak or overflow.
 *
 * The bounds are lowered from the command's (tools/cli.h) so that one input
 * costs about a second at most under the sanitizers: the fuzzer's per-input
 * time limit (-timeout, tests/CMakeLists.txt) then means a view that
 * escapes its bound, not one that works within it. The seeds
 * (tests/fuzz/seeds/profile_views) include the hostile shapes of
 * tests/cli_bounds.cmake, unzipped so that mutations reach the message.
 *
 * Frames are named four ways (source lines or not, inlined frames marked or
 * not: CLI_VIEW_*), chosen by a hash of the input so that a crash
 * reproduces from the input alone and mutations try every way. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tools/cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

/* What each input may expand to: 2^17 frames, 16 MiB of folded text. The
 * costliest input within them (no two stacks sharing a frame) took 0.5 s
 * of CPU here with ASan, UBSan and libFuzzer's instrumentation (and up to
 * 8 s of wall-clock time on a machine loaded 10 times over). */
#define FUZZ_MAX_FRAMES ((uint64_t)1 << 17)
#define FUZZ_MAX_FOLDED ((uint64_t)1 << 24)

/* CLI_VIEW_LINES, CLI_VIEW_INLINE, both or neither, by the input. */
static unsigned view_flags(const uint8_t *data, size_t len) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < len; i++)
    h = (h ^ data[i]) * 16777619u;
  return ((h >> 16) & 1 ? CLI_VIEW_LINES : 0) | ((h >> 17) & 1 ? CLI_VIEW_INLINE : 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  static FILE *sink;
  if (sink == NULL) {
    cli_errors_silent = 1;
    sink = fopen("/dev/null", "w");
    if (sink == NULL)
      __builtin_trap();
  }
  cli_profile cp;
  if (cli_profile_load_mem(&cp, "fuzz", "input", data, len, NULL, view_flags(data, len)) ==
      CLI_OK) {
    cp.max_frames = FUZZ_MAX_FRAMES;
    /* Every sample type in turn: a bound passed for one value may fail for
     * another, since only the samples with a nonzero value are shown. */
    for (size_t i = 0; i < cp.p->n_sample_type && i < 4; i++) {
      char idx[24];
      snprintf(idx, sizeof idx, "%zu", i);
      if (cli_profile_select(&cp, "fuzz", idx) != CLI_OK)
        continue;
      if (cli_print_top(sink, &cp, 0, (int)(i & 1), 1) != CLI_OK)
        __builtin_trap(); /* only out of memory may fail, and ASan's limit aborts first */
      if (cli_write_collapse(sink, &cp, FUZZ_MAX_FOLDED) == -ENOMEM)
        __builtin_trap();
      if (cli_write_flame(sink, &cp, "fuzz") != 0)
        __builtin_trap();
    }
  }
  cli_profile_free(&cp);
  return 0;
}
