/* The CFI unwinder end to end: the CPU profiler with the cfi walk over a
 * workload built without frame pointers (tests/cfi_work.c, compiled
 * several ways), each sample's stack checked for the callers the program
 * really had, and the shares of the two shapes against the CPU time the
 * workload measured in each; the tables' life cycle (an image dlopen'ed
 * after start) and their bounds on bad input.
 *
 * argv: the workload libraries, in the order of `builds` below; LATE is
 * dlopen'ed only after the profiler has started. */
#include <dlfcn.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/cfi.h"
#include "core/platform.h"
#include "core/profile.h"
#include "core/unwind.h"
#include "pprt.h"
#include "read/profile_decode.h"
#include "tests/membuf.h"
#include "tests/profile_util.h"

static const char *const builds[] = {
    "-O2 (GCC default: no frame pointers)", "-O2 -fno-omit-frame-pointer (frameless leaves)",
    "-O3 -foptimize-sibling-calls", "-O2, dlopen'ed after the profiler started",
    "-O2, no .eh_frame: .debug_frame only (-g)"};
#define NBUILDS (sizeof builds / sizeof builds[0])
#define LATE 3 /* the build dlopen'ed once the profiler runs */
static const char *g_libs[NBUILDS];
/* Under an emulator (PPRT_TEST_EMULATED, set by tests/CMakeLists.txt when
 * cross-compiled tests run under one): qemu-user delivers a signal only
 * between translated blocks and runs the handler's code hundreds of times
 * slower, so where the samples fall is not a fair draw; the callers are
 * still checked on every sample, the shares are printed, not asserted. */
static int g_emulated;

/* Samples with `a` anywhere in their stack, and with `b` (neither both). */
static void count_parts(const Pprt__Profile *p, const char *a, const char *b, int64_t out[2]) {
  out[0] = out[1] = 0;
  for (size_t i = 0; i < p->n_sample; i++) {
    const Pprt__Sample *s = p->sample[i];
    int in_a = frames_have(p, s, 0, a), in_b = frames_have(p, s, 0, b);
    if (in_a != in_b)
      out[in_a ? 0 : 1] += s->value[0];
  }
}

typedef struct shape_count {
  int64_t samples, whole;
} shape_count;

/* Of the samples whose leaf is `leaf`, how many have every caller in
 * `callers` (NULL-terminated) above it. */
static shape_count count_shape(const Pprt__Profile *p, const char *leaf,
                               const char *const *callers) {
  shape_count c = {0, 0};
  for (size_t i = 0; i < p->n_sample; i++) {
    const Pprt__Sample *s = p->sample[i];
    if (s->n_location_id == 0 || !name_is(fn_name(p, s->location_id[0]), leaf))
      continue;
    int all = 1;
    for (const char *const *w = callers; *w && all; w++)
      all = stack_has(p, s, *w);
    c.samples += s->value[0];
    c.whole += all ? s->value[0] : 0;
  }
  return c;
}

/* The leaf's callers inside the program's own signal handler: the
 * handler, then across the signal frame, the function that raised it. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

static void profile_in_handler(void **state) {
  (void)state;
#ifdef UNDER_TSAN
  /* ThreadSanitizer holds asynchronous signals back until an intercepted
   * call, and the handler's loop makes none: SIGPROF arrives after it. */
  skip();
#endif
  void *h = dlopen(g_libs[0], RTLD_NOW | RTLD_LOCAL);
  assert_non_null(h);
  void (*run)(double) = (void (*)(double))dlsym(h, "cfi_work_in_handler");
  assert_non_null(run);
  membuf m = {0};
  pprt_cpu_options o = {.size = sizeof o, .hz = 1000, .unwinder = PPRT_UNWIND_CFI};
  assert_int_equal(pprt_cpu_start(&o, mem_writer(&m)), 0);
  run(2.0);
  assert_int_equal(pprt_cpu_stop(), 0);
  Pprt__Profile *p = NULL;
  char err[256];
  if (pprt__profile_decode(m.data, m.len, &p, err, sizeof err) != 0)
    fail_msg("profile does not decode: %s", err);
  static const char *const callers[] = {
      "cfi_middle",         "cfi_outer", "cfi_on_signal", "cfi_raise_caller", "cfi_work_in_handler",
      "profile_in_handler", NULL};
  shape_count c = count_shape(p, "cfi_leaf", callers);
  double share = c.samples ? (double)c.whole / (double)c.samples : 0;
  printf("in the program's signal handler: leaf %5.1f%% of %lld with every caller across the "
         "signal frame\n",
         100 * share, (long long)c.samples);
  assert_true(c.samples >= 50);
  if (share < 0.95)
    fail_msg("callers across the signal frame on %.1f%% of samples, want >= 95%%", 100 * share);
  pprt__profile_decoded_free(p);
  mem_free(&m);
}

/* Profiles `run` for `seconds` of CPU with unwinder u; checks both shapes. */
static void profile_build(size_t which, pprt_unwinder u, double min_share) {
  void *h = NULL;
  if (which != LATE) {
    h = dlopen(g_libs[which], RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
  }
  membuf m = {0};
  pprt_cpu_options o = {.size = sizeof o, .hz = 1000, .unwinder = u};
  assert_int_equal(pprt_cpu_start(&o, mem_writer(&m)), 0);
  if (h == NULL) {
    h = dlopen(g_libs[which], RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
    /* Its frames walk by frame pointers until the reader's next rescan
     * builds its table: wait for that (a slow or emulated machine takes
     * longer; the shares below are then the table's, not the race's). */
    const char *name = strrchr(g_libs[which], '/');
    name = name ? name + 1 : g_libs[which];
    uint64_t t0 = pprt__os_monotonic_ns(), waited = 0;
    pprt__cfi_image_stat st = {.status = -1};
    while ((pprt__cfi_image_info(name, &st) != 0 || st.status != PPRT__CFI_OK) &&
           (waited = pprt__os_monotonic_ns() - t0) < 20000000000u) {
      struct timespec ms = {0, 10000000};
      nanosleep(&ms, NULL);
    }
    if (st.status != PPRT__CFI_OK)
      fail_msg("%s, dlopen'ed after the profiler started, has no table after %.1f s (status %d)",
               name, (double)waited / 1e9, st.status);
    printf("  the reader built the table of %s %.0f ms after its dlopen\n", name,
           (double)(pprt__os_monotonic_ns() - t0) / 1e6);
  }
  void (*run)(double) = (void (*)(double))dlsym(h, "cfi_work_run");
  void (*truth)(double[2]) = (void (*)(double[2]))dlsym(h, "cfi_work_truth");
  assert_non_null(run);
  assert_non_null(truth);
  run(3.0);
  assert_int_equal(pprt_cpu_stop(), 0);
  double seconds[2];
  truth(seconds);
  Pprt__Profile *p = NULL;
  char err[256];
  if (pprt__profile_decode(m.data, m.len, &p, err, sizeof err) != 0)
    fail_msg("profile does not decode: %s", err);
  static const char *const leaf_callers[] = {"cfi_middle", "cfi_outer", "cfi_work_run",
                                             "profile_build", NULL};
  static const char *const cmp_callers[] = {"cfi_sort_caller", "cfi_work_run", "profile_build",
                                            NULL};
  shape_count leaf = count_shape(p, "cfi_leaf", leaf_callers);
  shape_count cmp = count_shape(p, "cfi_cmp", cmp_callers);
  double ls = leaf.samples ? (double)leaf.whole / (double)leaf.samples : 0;
  double cs = cmp.samples ? (double)cmp.whole / (double)cmp.samples : 0;
  printf("%-48s %-9s leaf %5.1f%% of %lld, qsort callback %5.1f%% of %lld with every caller\n",
         builds[which], u == PPRT_UNWIND_FP ? "fp" : "cfi", 100 * ls, (long long)leaf.samples,
         100 * cs, (long long)cmp.samples);
  /* Shares: the samples under cfi_outer against those under the qsort
   * caller, and the CPU time the workload measured in each. A sample is
   * a draw with the measured share as its probability: 4 sigma of a
   * binomial share of n draws, widened where signals stood for several
   * periods (profile_fold_factor). */
  int64_t parts[2];
  count_parts(p, "cfi_outer", "cfi_sort_caller", parts);
  int64_t np = parts[0] + parts[1];
  double want = seconds[0] / (seconds[0] + seconds[1]);
  double got = np ? (double)parts[0] / (double)np : 0;
  double fold = profile_fold_factor(p);
  if (!(fold > 0))
    fail_msg("the profile's comments give no sample and squared-period counts");
  double tol = np ? 4 * sqrt(want * (1 - want) * fold / (double)np) : 0;
  printf("  shares: cfi_outer %.1f%%, qsort caller %.1f%% of %lld samples; measured CPU time "
         "%.1f%% / %.1f%% of %.2f s (4 sigma: %.1f points, variance factor %.3f)\n",
         100 * got, 100 * (1 - got), (long long)np, 100 * want, 100 * (1 - want),
         seconds[0] + seconds[1], 100 * tol, fold);
  /* The tables' memory is reported in the profile: "unwind tables: N of
   * M images, R rows, X KiB (from Y KiB of unwind info), built in T ms". */
  int reported = 0;
  for (size_t i = 0; i < p->n_comment; i++) {
    const char *c = p->string_table[p->comment[i]];
    size_t tables = 0, images = 0, rows = 0;
    double kib = 0;
    if (sscanf(c, "unwind tables: %zu of %zu images, %zu rows, %lf KiB", &tables, &images, &rows,
               &kib) == 4) {
      printf("  %s\n", c);
      reported = tables > 0 && tables <= images && rows > 0 && kib > 0;
    }
  }
  if (u == PPRT_UNWIND_CFI && !reported)
    fail_msg("the profile's comments do not report the unwind tables' memory");
  if (min_share > 0) {
    assert_true(leaf.samples >= 50 && cmp.samples >= 50);
    if (ls < min_share || cs < min_share)
      fail_msg("%s: callers on %.1f%% (leaf) and %.1f%% (qsort callback) of samples, want "
               ">= %.0f%%",
               builds[which], 100 * ls, 100 * cs, 100 * min_share);
    if (!g_emulated && fabs(got - want) > tol)
      fail_msg("%s: cfi_outer has %.1f%% of the samples, the CPU time measured says %.1f%% "
               "(4 sigma: %.1f points)",
               builds[which], 100 * got, 100 * want, 100 * tol);
  }
  pprt__profile_decoded_free(p);
  mem_free(&m);
}

static void cfi_default_o2(void **state) {
  (void)state;
  profile_build(0, PPRT_UNWIND_CFI, 0.95);
}

static void cfi_fno_omit_frame_pointer(void **state) {
  (void)state;
  profile_build(1, PPRT_UNWIND_CFI, 0.95);
}

static void cfi_o3(void **state) {
  (void)state;
  profile_build(2, PPRT_UNWIND_CFI, 0.95);
}

static void cfi_dlopen_after_start(void **state) {
  (void)state;
  profile_build(LATE, PPRT_UNWIND_CFI, 0.95);
}

static void cfi_debug_frame_only(void **state) {
  (void)state;
  profile_build(4, PPRT_UNWIND_CFI, 0.95);
}

/* What the frame-pointer walk gets on the same code, for the record: the
 * reason the default changed. Not asserted. */
static void fp_for_comparison(void **state) {
  (void)state;
  profile_build(0, PPRT_UNWIND_FP, 0);
}

/* The C library's table is built, and within twice its unwind info. */
static void libc_table(void **state) {
  (void)state;
  assert_int_equal(pprt__cfi_refresh(), 0);
  pprt__cfi_image_stat st;
  assert_int_equal(pprt__cfi_image_info("libc.so", &st), 0);
  printf("libc: %zu rows, %zu bytes of table from %zu bytes of unwind info, %.2f ms\n", st.rows,
         st.bytes, st.eh_bytes, st.build_ms);
  assert_int_equal(st.status, PPRT__CFI_OK);
  assert_true(st.rows > 1000);
  assert_true(st.bytes <= 2 * st.eh_bytes);
}

/* ---- the rows of hand-assembled CFI ---------------------------------------------- */

/* An .eh_frame being written: a CIE ("zR", pc-relative sdata4 pointers),
 * FDEs, a terminator, at address EH_ADDR. */
#define EH_ADDR 0x10000u
typedef struct ehf {
  uint8_t b[512];
  size_t n;
} ehf;

static void eh_put(ehf *e, const void *p, size_t n) {
  assert_true(e->n + n <= sizeof e->b);
  memcpy(e->b + e->n, p, n);
  e->n += n;
}

static void eh_u32(ehf *e, uint32_t v) {
  eh_put(e, &v, 4);
}

/* Pads the record opened at `at` with nops and writes its length. */
static void eh_close(ehf *e, size_t at) {
  while ((e->n - at) % 4)
    e->b[e->n++] = 0;
  uint32_t len = (uint32_t)(e->n - at - 4);
  memcpy(e->b + at, &len, 4);
}

/* A CIE: code and data alignment (one uleb / sleb byte each), the return
 * address register, initial instructions. Returns its offset. */
static size_t eh_cie(ehf *e, uint8_t code_align, uint8_t data_align_sleb, uint8_t ra,
                     const uint8_t *ins, size_t n) {
  size_t at = e->n;
  eh_u32(e, 0);
  eh_u32(e, 0); /* CIE id */
  const uint8_t head[] = {1, 'z', 'R', 0, code_align, data_align_sleb, ra, 1, 0x1b};
  eh_put(e, head, sizeof head);
  eh_put(e, ins, n);
  eh_close(e, at);
  return at;
}

/* An FDE of cie for [pc, pc + range). */
static void eh_fde(ehf *e, size_t cie, uint32_t pc, uint32_t range, const uint8_t *ins, size_t n) {
  size_t at = e->n;
  eh_u32(e, 0);
  eh_u32(e, (uint32_t)(e->n - cie)); /* back to the CIE, from this field */
  eh_u32(e, (uint32_t)(int32_t)((int64_t)pc - (int64_t)(EH_ADDR + e->n)));
  eh_u32(e, range);
  e->b[e->n++] = 0; /* augmentation data: none */
  eh_put(e, ins, n);
  eh_close(e, at);
}

static pprt__cfi_table *eh_build(ehf *e, unsigned machine) {
  eh_u32(e, 0); /* terminator */
  pprt__cfi_input in = {
      .machine = machine, .frame = {e->b, e->n, EH_ADDR}, .text_lo = 0x1000, .text_hi = 0x3000};
  pprt__cfi_table *t = NULL;
  assert_int_equal(pprt__cfi_build(&in, &t), PPRT__CFI_OK);
  return t;
}

/* The row at pc: its kind, CFA offset (words) and the two slots. */
static void want_row(const pprt__cfi_table *t, uint64_t pc, unsigned kind, int off, int ra,
                     int fp) {
  const pprt__cfi_row *r = pprt__cfi_lookup(t, pc);
  if (r == NULL)
    fail_msg("no row at %#llx", (unsigned long long)pc);
  if (PPRT__CFI_ROW_KIND(r) != kind || PPRT__CFI_ROW_OFF(r) != off || r->ra_off != ra ||
      r->fp_off != fp)
    fail_msg("row at %#llx: kind %u off %d ra %d fp %d, want kind %u off %d ra %d fp %d",
             (unsigned long long)pc, PPRT__CFI_ROW_KIND(r), PPRT__CFI_ROW_OFF(r), r->ra_off,
             r->fp_off, kind, off, ra, fp);
}

/* What GCC and Clang emit on x86_64: a prologue (def_cfa_offset, offset,
 * def_cfa_register), an early return inside remember_state /
 * restore_state, same_value, advance_loc1/2, the outermost frame
 * (undefined return address), and the PLT's CFA expression. */
static void x86_64_rows(void **state) {
  (void)state;
  ehf e = {0};
  const uint8_t cie_ins[] = {0x0c, 7, 8, 0x90, 1}; /* CFA = rsp + 8; ra at CFA - 8 */
  size_t cie = eh_cie(&e, 1, 0x78, 16, cie_ins, sizeof cie_ins);
  const uint8_t fn[] = {
      0x41, 0x0e, 0x10, 0x86, 0x02,       /* +1: push %rbp: CFA = rsp + 16, rbp at CFA - 16 */
      0x43, 0x0d, 6,                      /* +3: mov %rsp,%rbp: CFA = rbp + 16 */
      0x50, 0x0a, 0x0c, 7,    8,    0xc6, /* +16: remember; leave: CFA = rsp + 8, rbp restored */
      0x41, 0x0b,                         /* +1: ret; restore_state: back to CFA = rbp + 16 */
      0x02, 0x20, 0x08, 6,                /* +32 (advance_loc1): rbp same_value */
      0x03, 0x10, 0x00, 0x07, 16,         /* +16 (advance_loc2): return address undefined */
  };
  eh_fde(&e, cie, 0x1000, 0x100, fn, sizeof fn);
  const uint8_t plt[] = {0x0e, 0x10, 0x46, 0x0e, 0x18, 0x4a, 0x0f, 11,   0x77, 0x08,
                         0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22};
  eh_fde(&e, cie, 0x2000, 0x40, plt, sizeof plt);
  pprt__cfi_table *t = eh_build(&e, PPRT__CFI_X86_64);
  want_row(t, 0x1000, PPRT__CFI_CFA_SP, 1, -1, 0);
  want_row(t, 0x1001, PPRT__CFI_CFA_SP, 2, -1, -2);
  want_row(t, 0x1004, PPRT__CFI_CFA_FP, 2, -1, -2);
  want_row(t, 0x1013, PPRT__CFI_CFA_FP, 2, -1, -2);
  want_row(t, 0x1014, PPRT__CFI_CFA_SP, 1, -1, 0);
  want_row(t, 0x1015, PPRT__CFI_CFA_FP, 2, -1, -2);
  want_row(t, 0x1035, PPRT__CFI_CFA_FP, 2, -1, 0);
  want_row(t, 0x1045, PPRT__CFI_OUTERMOST, 0, 0, 0);
  want_row(t, 0x10ff, PPRT__CFI_OUTERMOST, 0, 0, 0);
  /* The PLT: CFA = rsp + 16 at the stub's first push, + 24 at the second,
   * then the expression: rsp + 8, + 8 more where (rip & 15) >= 11. */
  want_row(t, 0x2000, PPRT__CFI_CFA_SP, 2, -1, 0);
  want_row(t, 0x2006, PPRT__CFI_CFA_SP, 3, -1, 0);
  want_row(t, 0x2010, PPRT__CFI_PLT, 11, -1, 0);
  want_row(t, 0x203f, PPRT__CFI_PLT, 11, -1, 0);
  /* Past each FDE: no rule, the frame pointer's. */
  want_row(t, 0x1100, PPRT__CFI_FP_RULE, 0, 0, 0);
  free(t);
}

/* What GCC and Clang emit on aarch64: a leaf whose return address stays
 * in x30 (no row slot: "in the link register"), pointer authentication
 * (negate_ra_state after paciasp), a frame record at the CFA, and the
 * same opcodes with code alignment 4. */
static void aarch64_rows(void **state) {
  (void)state;
  ehf e = {0};
  const uint8_t cie_ins[] = {0x0c, 31, 0}; /* CFA = sp */
  size_t cie = eh_cie(&e, 4, 0x78, 30, cie_ins, sizeof cie_ins);
  const uint8_t fn[] = {
      0x41, 0x2d,                                     /* +4, past paciasp: return address signed */
      0x41, 0x0e, 0x10, 0x9d, 0x02, 0x9e, 0x01,       /* +4, past stp x29, x30: CFA = sp + 16 */
      0x41, 0x0d, 29,                                 /* +4, past mov x29, sp: CFA = x29 + 16 */
      0x42, 0x0a, 0x0c, 31,   0,    0xdd, 0xde, 0x2d, /* +8: remember; ldp, autiasp: CFA = sp */
      0x41, 0x0b,                                     /* +4: ret; restore_state */
  };
  eh_fde(&e, cie, 0x1000, 0x40, fn, sizeof fn);
  const uint8_t leaf[] = {0};
  eh_fde(&e, cie, 0x1100, 0x20, leaf, sizeof leaf);
  pprt__cfi_table *t = eh_build(&e, PPRT__CFI_AARCH64);
  want_row(t, 0x1000, PPRT__CFI_CFA_SP, 0, 0, 0);
  want_row(t, 0x1004, PPRT__CFI_CFA_SP_PAC, 0, 0, 0);
  want_row(t, 0x1008, PPRT__CFI_CFA_SP_PAC, 2, -1, -2);
  want_row(t, 0x100c, PPRT__CFI_CFA_FP_PAC, 2, -1, -2);
  want_row(t, 0x1014, PPRT__CFI_CFA_SP, 0, 0, 0);
  want_row(t, 0x1018, PPRT__CFI_CFA_FP_PAC, 2, -1, -2);
  want_row(t, 0x1110, PPRT__CFI_CFA_SP, 0, 0, 0); /* the leaf: all in registers */
  free(t);
  /* negate_ra_state means SPARC's window_save elsewhere: not x86_64's. */
  ehf x = {0};
  const uint8_t x_ins[] = {0x0c, 7, 8, 0x90, 1};
  size_t xc = eh_cie(&x, 1, 0x78, 16, x_ins, sizeof x_ins);
  eh_fde(&x, xc, 0x1000, 0x10, (const uint8_t[]){0x2d, 0x41}, 2);
  eh_u32(&x, 0);
  pprt__cfi_input in = {.machine = PPRT__CFI_X86_64,
                        .frame = {x.b, x.n, EH_ADDR},
                        .text_lo = 0x1000,
                        .text_hi = 0x3000};
  assert_int_equal(pprt__cfi_build(&in, &t), PPRT__CFI_BAD_OPCODE);
  assert_null(t);
}

/* The walk's stops, on a made-up stack whose pcs lie in no image (so every
 * frame takes the frame-pointer rule): a frame pointer that does not go
 * up, one outside the stack, a null return address, the depth limit. It
 * ends there, never reads outside [lo, hi). */
static void walk_stops(void **state) {
  (void)state;
  assert_int_equal(pprt__cfi_refresh(), 0);
  static uintptr_t st[64], outside[4];
  pprt__stack_bounds b = {(uintptr_t)st, (uintptr_t)(st + 64)};
  const uintptr_t nowhere = 0x7ff0dead0000u; /* code in no image */
  uintptr_t pcs[16];
  pprt__os_regs r = {nowhere, (uintptr_t)st, (uintptr_t)&st[10], 0};
  /* A chain of frames two words apart, the last one's return address 0. */
  for (int i = 10; i < 60; i += 2) {
    st[i] = (uintptr_t)&st[i + 2];
    st[i + 1] = nowhere + (uintptr_t)i;
  }
  st[61] = 0;
  assert_int_equal(pprt__unwind_cfi(&r, b, pcs, 8), 8); /* the depth asked */
  assert_int_equal(pprt__unwind_cfi(&r, b, pcs, 16), 16);
  assert_int_equal(pcs[1], nowhere + 10);
  /* The 7th frame's pc comes from st[21], its frame pointer from st[20]. */
  st[20] = (uintptr_t)&st[20]; /* a frame pointer to itself: no progress */
  assert_int_equal(pprt__unwind_cfi(&r, b, pcs, 16), 7);
  st[20] = (uintptr_t)&st[12]; /* back down the stack */
  assert_int_equal(pprt__unwind_cfi(&r, b, pcs, 16), 7);
  st[20] = (uintptr_t)outside; /* off this stack */
  outside[0] = (uintptr_t)&st[22];
  outside[1] = nowhere;
  assert_int_equal(pprt__unwind_cfi(&r, b, pcs, 16), 7);
  st[20] = (uintptr_t)&st[22];
  st[15] = 0; /* a null return address ends the stack */
  assert_int_equal(pprt__unwind_cfi(&r, b, pcs, 16), 3);
  r.fp = (uintptr_t)&st[63]; /* a frame whose second word is past hi */
  assert_int_equal(pprt__unwind_cfi(&r, b, pcs, 16), 1);
}

/* Malformed input: every truncation and byte flip of a real .eh_frame
 * either builds or fails with a status, never reads outside its bytes
 * (ASan builds check the reads). */
static void malformed_input(void **state) {
  (void)state;
  /* A CIE (x86_64, zR, pcrel|sdata4) and one FDE for 0x1000..0x1010. */
  uint8_t eh[] = {0x14, 0,    0,    0,    0,    0,    0, 0, 1,    'z', 'R', 0,
                  1,    0x78, 0x10, 1,    0x1b, 0x0c, 7, 8, 0x90, 1,   0,   0, /* CIE, padded */
                  0x14, 0,    0,    0,    0x1c, 0,    0, 0, 0,    0,   0,   0,
                  0x10, 0,    0,    0,                      /* FDE: pc filled in below */
                  0,    0x41, 0x0e, 0x10, 0x86, 0x02, 0, 0, /* aug 0; advance 1; cfa+16; rbp */
                  0,    0,    0,    0};
  uint64_t addr = 0x10000;
  int32_t rel = (int32_t)(0x1000 - (int64_t)(addr + 32));
  memcpy(eh + 32, &rel, 4);
  pprt__cfi_input in = {.machine = PPRT__CFI_X86_64,
                        .frame = {eh, sizeof eh, addr},
                        .text_lo = 0x1000,
                        .text_hi = 0x2000};
  pprt__cfi_table *t = NULL;
  assert_int_equal(pprt__cfi_build(&in, &t), PPRT__CFI_OK);
  const pprt__cfi_row *r = pprt__cfi_lookup(t, 0x1004);
  assert_non_null(r);
  assert_int_equal(PPRT__CFI_ROW_KIND(r), PPRT__CFI_CFA_SP);
  assert_int_equal(PPRT__CFI_ROW_OFF(r), 2); /* words */
  assert_int_equal(r->fp_off, -2);
  assert_int_equal(r->ra_off, -1);
  free(t);
  int failed = 0;
  for (size_t len = 0; len < sizeof eh; len++) {
    uint8_t *copy = malloc(len ? len : 1);
    memcpy(copy, eh, len);
    in.frame = (pprt__cfi_bytes){copy, len, addr};
    if (pprt__cfi_build(&in, &t) != PPRT__CFI_OK)
      failed++;
    free(t);
    free(copy);
  }
  for (size_t i = 0; i < sizeof eh; i++)
    for (int bit = 0; bit < 8; bit++) {
      uint8_t copy[sizeof eh];
      memcpy(copy, eh, sizeof eh);
      copy[i] ^= (uint8_t)(1u << bit);
      in.frame = (pprt__cfi_bytes){copy, sizeof copy, addr};
      t = NULL;
      enum pprt__cfi_status st = pprt__cfi_build(&in, &t);
      assert_true((st == PPRT__CFI_OK) == (t != NULL));
      free(t);
    }
  assert_true(failed > 0);
  /* An FDE outside the image is the image's failure, with its reason. */
  in.frame = (pprt__cfi_bytes){eh, sizeof eh, addr};
  in.text_lo = 0x4000;
  in.text_hi = 0x5000;
  assert_int_equal(pprt__cfi_build(&in, &t), PPRT__CFI_FDE_OUTSIDE);
  assert_null(t);
}

int main(int argc, char **argv) {
  if (argc != NBUILDS + 1) {
    fprintf(stderr, "usage: test_cfi LIB...  (%zu workload libraries)\n", NBUILDS);
    return 2;
  }
  for (size_t i = 0; i < NBUILDS; i++)
    g_libs[i] = argv[i + 1];
  g_emulated = getenv("PPRT_TEST_EMULATED") != NULL;
  if (g_emulated)
    printf("under an emulator: shares printed, not asserted\n");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(x86_64_rows),
      cmocka_unit_test(aarch64_rows),
      cmocka_unit_test(malformed_input),
      cmocka_unit_test(walk_stops),
      cmocka_unit_test(libc_table),
      cmocka_unit_test(cfi_default_o2),
      cmocka_unit_test(cfi_fno_omit_frame_pointer),
      cmocka_unit_test(cfi_o3),
      cmocka_unit_test(cfi_dlopen_after_start),
      cmocka_unit_test(cfi_debug_frame_only),
      cmocka_unit_test(profile_in_handler),
      cmocka_unit_test(fp_for_comparison),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
