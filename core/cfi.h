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
  PPRT__CFI_CFA_SP = 0,    /* CFA = sp + cfa_off */
  PPRT__CFI_CFA_FP = 1,    /* CFA = fp + cfa_off */
  PPRT__CFI_FP_RULE = 2,   /* no rule a row can express: use the frame pointer */
  PPRT__CFI_OUTERMOST = 3, /* return address undefined: the end of the stack */
  PPRT__CFI_PLT = 4,       /* x86_64 PLT: CFA = sp + 8, + 8 when (pc & 15) >= cfa_off */
  PPRT__CFI_SIGFRAME = 5   /* a signal trampoline ('S'): registers in the signal frame */
};

/* fp_off value for "the caller's frame pointer cannot be known". */
#define PPRT__CFI_FP_UNKNOWN 1

/* One row: from pc (relative to the table's base) up to the next row's pc.
 * 12 bytes, so a table stays near the size of the .eh_frame it came from. */
typedef struct pprt__cfi_row {
  uint32_t pc;
  int32_t cfa;    /* cfa_off << 4 | ra_signed << 3 | kind */
  int16_t fp_off; /* caller's fp saved at CFA + fp_off; 0: fp unchanged */
  int16_t ra_off; /* return address at CFA + ra_off; 0: in the link register */
} pprt__cfi_row;

#define PPRT__CFI_ROW_KIND(r) ((unsigned)((r)->cfa & 7))
#define PPRT__CFI_ROW_RA_SIGNED(r) (((r)->cfa >> 3) & 1)
#define PPRT__CFI_ROW_OFF(r) ((r)->cfa >> 4)

/* An image's table: rows sorted by pc, covering link-time addresses
 * [base, base + end). Immutable once built. */
typedef struct pprt__cfi_table {
  uint64_t base;
  uint64_t end;
  unsigned machine;
  size_t src_bytes; /* the span of CFI records it was compiled from */
  size_t n;
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
  size_t max_rows;       /* the memory budget in rows; 0: unbounded */
} pprt__cfi_input;

/* Compiles in into *out (malloc'd; free with free()). Never reads outside
 * the bytes it was given. Returns PPRT__CFI_OK or why not (*out NULL). */
enum pprt__cfi_status pprt__cfi_build(const pprt__cfi_input *in, pprt__cfi_table **out);

/* The row covering link-time address pc, or NULL. AS-safe. */
const pprt__cfi_row *pprt__cfi_lookup(const pprt__cfi_table *t, uint64_t pc);

#endif /* PPRT_CORE_CFI_H */
