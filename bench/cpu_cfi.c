/* bench/cpu's table part (`cpu unwind`): what the CFI unwinder's tables
 * cost to build and hold, for the C library, libstdc++ and the largest
 * shared library found, each loaded into this process and compiled by the
 * same refresh the profiler runs. Targets: the C library in <= 10 ms and
 * <= 2x its unwind information. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cfi.h"
#include "core/unwind.h"

/* Tried in order; the first that loads is "the largest binary". Override
 * with BENCH_CFI_LARGE=/path/to/lib.so. */
static const char *const large_candidates[] = {
    "libLLVM-17.so.1", "libLLVM-16.so.1", "libLLVM-15.so.1", "libLLVM-14.so.1",
    "libLLVM.so",      "libicui18n.so.72", NULL};

static void report(const char *label, const char *path_part) {
  pprt__cfi_image_stat st;
  if (pprt__cfi_image_info(path_part, &st) != 0) {
    printf("  %-28s not loaded\n", label);
    return;
  }
  if (st.status != PPRT__CFI_OK) {
    printf("  %-28s no table: %s\n", label,
           pprt__cfi_status_name((enum pprt__cfi_status)st.status));
    return;
  }
  printf("  %-28s %9.2f ms %10zu rows %9.1f KiB %9.1f KiB %6.2fx\n", label, st.build_ms, st.rows,
         (double)st.bytes / 1024, (double)st.eh_bytes / 1024,
         (double)st.bytes / (double)st.eh_bytes);
}

void bench_cfi_tables(void) {
  if (!pprt__have_cfi) {
    printf("\ncfi tables: not in this build (frame pointers)\n");
    return;
  }
  void *cxx = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
  const char *large = getenv("BENCH_CFI_LARGE");
  void *big = NULL;
  if (large)
    big = dlopen(large, RTLD_NOW | RTLD_LOCAL);
  for (size_t i = 0; !large && large_candidates[i] && !big; i++)
    if ((big = dlopen(large_candidates[i], RTLD_NOW | RTLD_LOCAL)) != NULL)
      large = large_candidates[i];
  pprt__cfi_refresh(); /* compiles what was just loaded; the rest is kept */
  printf("\ncfi tables: compiled outside the handler, one per loaded image\n\n");
  printf("  %-28s %12s %15s %12s %12s %7s\n", "", "build", "rows", "table", "unwind info",
         "ratio");
  report("libc", "/libc.so");
  report("libstdc++", "libstdc++");
  if (big)
    report(large, large);
  else
    printf("  no large library found (set BENCH_CFI_LARGE)\n");
  pprt__cfi_summary sum;
  pprt__cfi_stats(&sum);
  printf("  %-28s %9.2f ms %10zu rows %9.1f KiB %9.1f KiB %6.2fx  (%zu images)\n", "all loaded",
         sum.build_ms, sum.rows, (double)sum.bytes / 1024, (double)sum.eh_bytes / 1024,
         sum.eh_bytes ? (double)sum.bytes / (double)sum.eh_bytes : 0.0, sum.images);
  printf("\n  unwind info: .eh_frame_hdr + the .eh_frame records read; ratio = table / that.\n"
         "  table: 8-byte rows (pc, CFA rule, fp and return-address slots; neighbours with\n"
         "  the same rule merged) and a 4-byte index entry per 256 bytes of code.\n");
  (void)cxx;
}
