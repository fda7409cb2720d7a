/* bench/cpu's unwinder part (`cpu unwind`): the handler's cost with each
 * unwinder, cfi against fp and libunwind in one run, as ratios (targets:
 * cfi <= 2x fp per frame, libunwind >= 10x cfi); then what the CFI
 * unwinder's tables cost to build and hold, for the C library, libstdc++
 * and the largest shared library found, each loaded into this process and
 * compiled by the same refresh the profiler runs (targets: the C library in
 * <= 10 ms and <= 2x its unwind information). */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cpu_handler.h"
#include "core/cfi.h"
#include "core/unwind.h"

/* Tried in order; the first that loads is "the largest binary". Override
 * with BENCH_CFI_LARGE=/path/to/lib.so. */
static const char *const large_candidates[] = {"libLLVM-17.so.1",
                                               "libLLVM-16.so.1",
                                               "libLLVM-15.so.1",
                                               "libLLVM-14.so.1",
                                               "libLLVM.so",
                                               "libicui18n.so.72",
                                               NULL};

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
  printf("  %-28s %12s %15s %12s %12s %7s\n", "", "build", "rows", "table", "unwind info", "ratio");
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

/* "cpu unwind": the three unwinders in one run, as ratios, then the
 * tables' build time and size (bench/cpu_cfi.c). */
void bench_unwinders(void) {
  handler_setup();
  printf("\nunwinders: handler cost per sample, raise(SIGPROF) at the bottom of a recursion\n"
         "(frames built with frame pointers, so all three walk the same chain); handler =\n"
         "per signal - empty handler, medians of alternating batches\n");
  printf("\n  %-40s %11s %11s %11s %11s %7s\n", "", "per signal", "handler", "per frame", "timed",
         "frames");
  hcost f16 = measure_handler(H_FP, 16, 1000, 1.0), f64 = measure_handler(H_FP, 64, 1000, 1.0);
  print_hcost("fp, 16 frames", 16, f16);
  print_hcost("fp, 64 frames", 64, f64);
  hcost c16 = {NAN, NAN, NAN, 1}, c64 = c16, u16 = c16, u64 = c16;
  if (pprt__have_cfi) {
    c16 = measure_handler(H_CFI, 16, 1000, 1.0);
    c64 = measure_handler(H_CFI, 64, 1000, 1.0);
    print_hcost("cfi, 16 frames", 16, c16);
    print_hcost("cfi, 64 frames", 64, c64);
  }
#ifdef BENCH_HAVE_LIBUNWIND
  u16 = measure_handler(H_LIBUNWIND, 16, 200, 1.0);
  u64 = measure_handler(H_LIBUNWIND, 64, 50, 1.5);
  print_hcost("libunwind, 16 frames", 16, u16);
  print_hcost("libunwind, 64 frames", 64, u64);
#endif
  /* Per frame: the slope between 16 and 64 frames, which leaves out the
   * signal, the ring write and the first lookups. */
  double fpf = ((f64.full_ns - f64.empty_ns) - (f16.full_ns - f16.empty_ns)) / 48;
  double cf = ((c64.full_ns - c64.empty_ns) - (c16.full_ns - c16.empty_ns)) / 48;
  double uf = ((u64.full_ns - u64.empty_ns) - (u16.full_ns - u16.empty_ns)) / 48;
  printf("\n  per frame (64 vs 16), by handler: fp %.1f ns, cfi %.1f ns, libunwind %.1f ns\n", fpf,
         cf, uf);
  printf("  cfi / fp per frame: %.2fx (target <= 2x); libunwind / cfi per frame: %.1fx "
         "(target >= 10x)\n",
         cf / fpf, uf / cf);
  /* The same slope from the handler's own clock: no signal delivery in it,
   * so less of the machine's noise. */
  double fpt = (f64.inside_ns - f16.inside_ns) / 48, ct = (c64.inside_ns - c16.inside_ns) / 48,
         ut = (u64.inside_ns - u16.inside_ns) / 48;
  printf("  per frame (64 vs 16), timed inside: fp %.1f ns, cfi %.1f ns, libunwind %.1f ns;\n"
         "    cfi / fp %.2fx, libunwind / cfi %.1fx\n",
         fpt, ct, ut, ct / fpt, ut / ct);
  printf("  at 64 frames, whole handler: cfi / fp %.2fx, libunwind / cfi %.1fx\n",
         (c64.full_ns - c64.empty_ns) / (f64.full_ns - f64.empty_ns),
         (u64.full_ns - u64.empty_ns) / (c64.full_ns - c64.empty_ns));
  handler_teardown();
  bench_cfi_tables();
}
