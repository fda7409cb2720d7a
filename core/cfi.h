/* DWARF call frame information compiled into unwind tables, outside any
 * signal handler: pprt__cfi_build turns an image's .eh_frame (found through
 * .eh_frame_hdr) or .debug_frame into a sorted array of rows that the
 * handler's walk (core/unwind_cfi.c) binary-searches. Platform-neutral: the
 * caller hands over the bytes and the addresses they live at. */
#ifndef PPRT_CORE_CFI_H
#define PPRT_CORE_CFI_H

#include <stddef.h>
#include <stdint.h>

/* The architectures whose CFI pprt compiles, by ELF e_machine. */
#define PPRT__CFI_X86_64 62
#define PPRT__CFI_AARCH64 183

/* What a row says about the frame of the pcs it covers. */
enum pprt__cfi_kind {
  PPRT__CFI_CFA_SP = 0,     /* CFA = sp + cfa_off words */
  PPRT__CFI_CFA_FP = 1,     /* CFA = fp + cfa_off words */
  PPRT__CFI_FP_RULE = 2,    /* no rule a row can express: use the frame pointer */
  PPRT__CFI_OUTERMOST = 3,  /* return address undefined: the end of the stack */
  PPRT__CFI_PLT = 4,        /* x86_64 PLT: CFA = sp + 8, + 8 when (pc & 15) >= cfa_off */
  PPRT__CFI_SIGFRAME = 5,   /* a signal trampoline ('S'): registers in the signal frame */
  PPRT__CFI_CFA_SP_PAC = 6, /* CFA_SP with the return address signed (aarch64 PAC) */
  PPRT__CFI_CFA_FP_PAC = 7  /* CFA_FP likewise */
};

/* fp_off for a caller's frame pointer that cannot be recovered (saved in
 * another register, by an expression, or too far from the CFA). */
#define PPRT__CFI_FP_LOST INT8_MIN

/* One row: from pc (relative to the table's base) up to the next row's pc.
 * 8 bytes, so a table stays near the size of the .eh_frame it came from;
 * a rule these fields cannot hold becomes a PPRT__CFI_FP_RULE row. Offsets
 * are in words (8 bytes: both targets are 64-bit). */
typedef struct pprt__cfi_row {
  uint32_t pc;
  int16_t cfa;   /* cfa_off << 3 | kind; for PLT rows cfa_off is the (pc & 15) threshold */
  int8_t ra_off; /* return address at CFA + ra_off; 0: in the link register */
  int8_t fp_off; /* caller's fp at CFA + fp_off; 0: unchanged; PPRT__CFI_FP_LOST */
} pprt__cfi_row;

#define PPRT__CFI_ROW_KIND(r) ((unsigned)((r)->cfa & 7))
#define PPRT__CFI_ROW_OFF(r) ((int)((r)->cfa >> 3))

/* An image's table: rows sorted by pc, covering link-time addresses
 * [base, base + end), and for each 2^PPRT__CFI_BUCKET_SHIFT bytes of code
 * the index of the row covering its first byte, so that a lookup searches
 * only the few rows of one bucket. Immutable once built. */
#define PPRT__CFI_BUCKET_SHIFT 8
typedef struct pprt__cfi_table {
  uint64_t base;
  uint64_t end;
  unsigned machine;
  size_t src_bytes; /* the span of CFI records it was compiled from */
  size_t n;
  size_t nbuckets;   /* (end >> PPRT__CFI_BUCKET_SHIFT) + 1 */
  uint32_t *buckets; /* in the same allocation, after the rows */
  pprt__cfi_row rows[];
} pprt__cfi_table;

/* Why an image has no table (counted, and named in profile comments). */
enum pprt__cfi_status {
  PPRT__CFI_OK = 0,
  PPRT__CFI_NONE,        /* no .eh_frame or .debug_frame */
  PPRT__CFI_ARCH,        /* a machine pprt has no rules for */
  PPRT__CFI_BAD_HDR,     /* .eh_frame_hdr of an unknown version or encoding */
  PPRT__CFI_TRUNCATED,   /* a length or field past the end of the section */
  PPRT__CFI_BAD_CIE,     /* CIE version, augmentation or pointer not understood */
  PPRT__CFI_BAD_OPCODE,  /* an unknown or malformed CFA instruction */
  PPRT__CFI_FDE_OUTSIDE, /* an FDE for code outside the image */
  PPRT__CFI_TOO_BIG,     /* over the memory budget */
  PPRT__CFI_NOMEM,
  PPRT__CFI_NSTATUS
};

/* The name of a status, for comments. */
const char *pprt__cfi_status_name(enum pprt__cfi_status st);

/* Bytes as they sit at an address: data[0] is at addr, where pc-relative
 * encodings are resolved. */
typedef struct pprt__cfi_bytes {
  const uint8_t *data;
  size_t len;
  uint64_t addr;
} pprt__cfi_bytes;

typedef struct pprt__cfi_input {
  unsigned machine;      /* ELF e_machine */
  pprt__cfi_bytes hdr;   /* .eh_frame_hdr (len 0: none; then frame starts at .eh_frame) */
  pprt__cfi_bytes frame; /* memory holding .eh_frame (the segment, when hdr says where
                            it starts), or the whole .debug_frame */
  int debug_frame;       /* frame is .debug_frame (absolute pcs, CIE id ~0) */
  uint64_t bias;         /* subtracted from decoded pcs: link-time addresses */
  uint64_t text_lo;      /* the image's code, link-time: FDEs must lie within */
  uint64_t text_hi;
  size_t max_rows; /* the memory budget in rows; 0: unbounded */
} pprt__cfi_input;

/* Compiles in into *out (malloc'd; free with free()). Never reads outside
 * the bytes it was given. Returns PPRT__CFI_OK or why not (*out NULL). */
enum pprt__cfi_status pprt__cfi_build(const pprt__cfi_input *in, pprt__cfi_table **out);

/* The row covering link-time address pc, or NULL. AS-safe. Inline: the
 * handler's walk calls it once a frame. */
static inline const pprt__cfi_row *pprt__cfi_lookup(const pprt__cfi_table *t, uint64_t pc) {
  if (pc - t->base >= t->end || pc < t->base)
    return NULL;
  uint32_t off = (uint32_t)(pc - t->base);
  size_t k = off >> PPRT__CFI_BUCKET_SHIFT;
  /* The covering row is between this bucket's and the next one's: a few
   * rows, so a linear scan. */
  size_t lo = t->buckets[k], hi = k + 1 < t->nbuckets ? t->buckets[k + 1] : t->n - 1;
  while (lo < hi && t->rows[lo + 1].pc <= off)
    lo++;
  return t->rows[lo].pc <= off ? &t->rows[lo] : NULL;
}

#endif /* PPRT_CORE_CFI_H */
