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
#include "core/platform.h"
#include "core/thread.h"
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

/* ---- the walk alone ---------------------------------------------------------- */

/* The walks called directly at the bottom of a recursion, no signal: what
 * an unwinder costs without the signal's delivery around it. Each batch
 * walks the same registers `batch` times; the minimum over batches is the
 * figure least disturbed by other work on the machine. */
enum { W_FP, W_CFI, W_NMODES };
static double g_walk_ns[W_NMODES];
static volatile size_t g_walk_sink;

__attribute__((noinline)) static void walk_at_depth(int depth, size_t max, int batches,
                                                    long batch) {
  if (depth > 0) {
    walk_at_depth(depth - 1, max, batches, batch);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
    return;
  }
  pprt__os_regs r;
  PPRT__UNWIND_REGS_HERE(&r);
  pprt__stack_bounds b = pprt__thread_self()->stack;
  uintptr_t pcs[256];
  for (int m = 0; m < W_NMODES; m++)
    g_walk_ns[m] = INFINITY;
  /* Modes alternate batch by batch, so both see the same machine. */
  for (int k = 0; k < batches; k++)
    for (int m = 0; m < W_NMODES; m++) {
      uint64_t t0 = pprt__os_monotonic_ns();
      size_t got = 0;
      for (long i = 0; i < batch; i++)
        got += m == W_FP ? pprt__unwind_fp(&r, b, pcs, max) : pprt__unwind_cfi(&r, b, pcs, max);
      double ns = (double)(pprt__os_monotonic_ns() - t0) / (double)batch;
      g_walk_sink += got;
      if (got != (size_t)batch * max)
        ns = NAN; /* the chain ended early: not the walk asked for */
      if (!(ns >= g_walk_ns[m]))
        g_walk_ns[m] = ns;
    }
}

/* Per walk of 16 and 64 frames, fp and cfi; per frame the slope. */
static void bench_walk_direct(void) {
  double w16[W_NMODES], w64[W_NMODES];
  walk_at_depth(16 + 8, 16, 200, 2000);
  memcpy(w16, g_walk_ns, sizeof w16);
  walk_at_depth(64 + 8, 64, 200, 500);
  memcpy(w64, g_walk_ns, sizeof w64);
  double fpf = (w64[W_FP] - w16[W_FP]) / 48, cf = (w64[W_CFI] - w16[W_CFI]) / 48;
  printf("\n  the walk alone (called directly, no signal; minimum of 200 alternating batches):\n"
         "    fp  %6.1f ns at 16 frames, %6.1f ns at 64\n"
         "    cfi %6.1f ns at 16 frames, %6.1f ns at 64\n"
         "    per frame (64 vs 16): fp %.2f ns, cfi %.2f ns; cfi / fp %.2fx (target <= 2x)\n",
         w16[W_FP], w64[W_FP], w16[W_CFI], w64[W_CFI], fpf, cf, cf / fpf);
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
  hcost c16 = {NAN, NAN, NAN, 1, NAN}, c64 = c16, u16 = c16, u64 = c16;
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
  /* The fastest batch: what the handler costs when nothing else on the
   * machine gets in its way (the median moves with the load). */
  fpt = (f64.inside_min_ns - f16.inside_min_ns) / 48;
  ct = (c64.inside_min_ns - c16.inside_min_ns) / 48;
  ut = (u64.inside_min_ns - u16.inside_min_ns) / 48;
  printf("  per frame (64 vs 16), timed inside, fastest of 21 batches: fp %.1f ns, cfi %.1f ns,\n"
         "    libunwind %.1f ns; cfi / fp %.2fx (target <= 2x), libunwind / cfi %.1fx\n",
         fpt, ct, ut, ct / fpt, ut / ct);
  printf("  at 64 frames, whole handler: cfi / fp %.2fx, libunwind / cfi %.1fx\n",
         (c64.full_ns - c64.empty_ns) / (f64.full_ns - f64.empty_ns),
         (u64.full_ns - u64.empty_ns) / (c64.full_ns - c64.empty_ns));
  if (pprt__have_cfi)
    bench_walk_direct();
  handler_teardown();
  bench_cfi_tables();
}
