/* The CFI compiler (see cfi.h): DWARF call frame information to rows.
 *
 * Divisions: a bounds-checked reader of the encodings DWARF uses; CIEs;
 * the CFA instruction interpreter, which tracks only what the walk needs
 * (the CFA rule, where the return address and the frame pointer were
 * saved) and turns every other state into an explicit fallback row; the
 * FDE loop over .eh_frame_hdr's sorted table, or over the section when
 * there is none; sorting and merging the rows.
 *
 * Every length, pointer and opcode comes from the file and is checked
 * before it is used: a malformed section makes the whole image fall back
 * to frame pointers (a status says why), it never makes a row that reads
 * the wrong slot. The fuzzer (tests/fuzz/cfi_build.c) holds it to that. */
#include "core/cfi.h"

#include <stdlib.h>
#include <string.h>

/* ---- reading ----------------------------------------------------------------- */

typedef struct rd {
  const uint8_t *p, *end;
  uint64_t addr; /* the address of p */
  int bad;
} rd;

static int rd_need(rd *r, size_t n) {
  if (r->bad || (size_t)(r->end - r->p) < n) {
    r->bad = 1;
    return 0;
  }
  return 1;
}

static uint64_t rd_u(rd *r, size_t n) {
  if (!rd_need(r, n))
    return 0;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) /* little-endian: every target pprt supports */
    v |= (uint64_t)r->p[i] << (8 * i);
  r->p += n;
  r->addr += n;
  return v;
}

/* A LEB128 number; a signed one is sign-extended from its last byte's bit
 * 6. Bits beyond 64 are dropped; more than ten bytes mark the reader bad. */
static uint64_t rd_leb(rd *r, int is_signed) {
  uint64_t v = 0;
  for (unsigned shift = 0;; shift += 7) {
    if (!rd_need(r, 1))
      return 0;
    uint8_t b = *r->p++;
    r->addr++;
    if (shift < 64)
      v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      if (is_signed && shift + 7 < 64 && (b & 0x40))
        v |= ~(uint64_t)0 << (shift + 7);
      return v;
    }
    if (shift > 70) {
      r->bad = 1;
      return 0;
    }
  }
}

static uint64_t rd_uleb(rd *r) {
  return rd_leb(r, 0);
}

static int64_t rd_sleb(rd *r) {
  return (int64_t)rd_leb(r, 1);
}

static void rd_skip(rd *r, uint64_t n) {
  if (!rd_need(r, n > SIZE_MAX ? SIZE_MAX : (size_t)n))
    return;
  r->p += n;
  r->addr += n;
}

/* DW_EH_PE_* */
#define PE_OMIT 0xff
#define PE_PCREL 0x10
#define PE_DATAREL 0x30

/* A pointer in encoding enc; datarel is relative to `data` (.eh_frame_hdr's
 * start). Unsupported encodings mark the reader bad. */
static uint64_t rd_ptr(rd *r, uint8_t enc, uint64_t data) {
  uint64_t at = r->addr, v;
  switch (enc & 0x0f) {
  case 0x00: /* absptr: pprt's ELF targets are 64-bit */
    v = rd_u(r, 8);
    break;
  case 0x01:
    v = rd_uleb(r);
    break;
  case 0x02:
    v = rd_u(r, 2);
    break;
  case 0x03:
    v = rd_u(r, 4);
    break;
  case 0x04:
    v = rd_u(r, 8);
    break;
  case 0x09:
    v = (uint64_t)rd_sleb(r);
    break;
  case 0x0a:
    v = (uint64_t)(int64_t)(int16_t)rd_u(r, 2);
    break;
  case 0x0b:
    v = (uint64_t)(int64_t)(int32_t)rd_u(r, 4);
    break;
  case 0x0c:
    v = rd_u(r, 8);
    break;
  default:
    r->bad = 1;
    return 0;
  }
  switch (enc & 0x70) {
  case 0x00:
    break;
  case PE_PCREL:
    v += at;
    break;
  case PE_DATAREL:
    v += data;
    break;
  default:
    r->bad = 1;
    return 0;
  }
  return v;
}

/* Products of file values wrap instead of overflowing (undefined in C);
 * an absurd offset then fails the range checks of make_row. */
static int64_t mul(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a * (uint64_t)b);
}

/* ---- registers ---------------------------------------------------------------- */

typedef struct arch {
  unsigned sp, fp, ra; /* DWARF register numbers */
} arch;

static int arch_of(unsigned machine, arch *a) {
  if (machine == PPRT__CFI_X86_64)
    *a = (arch){7, 6, 16};
  else if (machine == PPRT__CFI_AARCH64)
    *a = (arch){31, 29, 30};
  else
    return 0;
  return 1;
}

/* ---- CIEs --------------------------------------------------------------------- */

typedef struct cie {
  uint64_t off; /* where it starts, in the frame bytes */
  uint64_t code_align;
  int64_t data_align;
  unsigned ra_reg;
  uint8_t fde_enc;
  int has_z, signal, addr_size;
  const uint8_t *insns, *insns_end;
  uint64_t insns_addr;
} cie;

/* Reads one record's length; *body is where its id field starts, *next
 * the record after it. Returns 0 for the zero terminator, -1 when bad. */
static int record_at(const pprt__cfi_bytes *b, uint64_t off, rd *body, uint64_t *next) {
  if (off >= b->len)
    return -1;
  rd r = {b->data + off, b->data + b->len, b->addr + off, 0};
  uint64_t len = rd_u(&r, 4);
  if (len == 0xffffffffu)
    len = rd_u(&r, 8);
  if (r.bad)
    return -1;
  if (len == 0)
    return 0;
  uint64_t start = (uint64_t)(r.p - b->data);
  if (len > b->len - start)
    return -1;
  *body = (rd){r.p, r.p + len, r.addr, 0};
  *next = start + len;
  return 1;
}

static enum pprt__cfi_status parse_cie(const pprt__cfi_input *in, uint64_t off, cie *c) {
  rd r;
  uint64_t next;
  if (record_at(&in->frame, off, &r, &next) != 1)
    return PPRT__CFI_TRUNCATED;
  memset(c, 0, sizeof *c);
  c->off = off;
  c->addr_size = 8;
  uint64_t id = in->debug_frame ? rd_u(&r, 4) : rd_u(&r, 4);
  if (r.bad || id != (in->debug_frame ? 0xffffffffu : 0))
    return PPRT__CFI_BAD_CIE;
  unsigned version = (unsigned)rd_u(&r, 1);
  if (version != 1 && version != 3 && version != 4)
    return PPRT__CFI_BAD_CIE;
  const char *aug = (const char *)r.p;
  const uint8_t *nul = r.bad ? NULL : memchr(r.p, 0, (size_t)(r.end - r.p));
  if (nul == NULL)
    return PPRT__CFI_TRUNCATED;
  rd_skip(&r, (uint64_t)(nul - r.p) + 1);
  if (version == 4) {
    c->addr_size = (int)rd_u(&r, 1);
    if (rd_u(&r, 1) != 0 || (c->addr_size != 8 && c->addr_size != 4))
      return PPRT__CFI_BAD_CIE; /* segment selectors: never on these targets */
  }
  c->code_align = rd_uleb(&r);
  c->data_align = rd_sleb(&r);
  c->ra_reg = version == 1 ? (unsigned)rd_u(&r, 1) : (unsigned)rd_uleb(&r);
  c->fde_enc = 0; /* absptr */
  if (aug[0] == 'z') {
    c->has_z = 1;
    uint64_t alen = rd_uleb(&r);
    if (r.bad || alen > (uint64_t)(r.end - r.p))
      return PPRT__CFI_TRUNCATED;
    rd a = {r.p, r.p + alen, r.addr, 0};
    for (const char *s = aug + 1; *s && !a.bad; s++) {
      if (*s == 'R') {
        c->fde_enc = (uint8_t)rd_u(&a, 1);
      } else if (*s == 'L') {
        rd_u(&a, 1);
      } else if (*s == 'P') {
        uint8_t penc = (uint8_t)rd_u(&a, 1);
        rd_ptr(&a, penc & 0x7f, 0);
      } else if (*s == 'S') {
        c->signal = 1;
      } else if (*s == 'B' || *s == 'G') {
        /* aarch64 BTI / MTE markers: nothing to read */
      } else {
        break; /* the length still says where the instructions start */
      }
    }
    if (a.bad)
      return PPRT__CFI_BAD_CIE;
    rd_skip(&r, alen);
  } else if (aug[0] != '\0') {
    return PPRT__CFI_BAD_CIE; /* "eh" and the like: pre-standard */
  }
  if (r.bad || c->code_align == 0)
    return PPRT__CFI_BAD_CIE;
  c->insns = r.p;
  c->insns_end = r.end;
  c->insns_addr = r.addr;
  return PPRT__CFI_OK;
}

/* ---- the interpreter ---------------------------------------------------------- */

enum rule { R_SAME, R_OFFSET, R_UNDEF, R_OTHER };
enum cfa_rule { C_REG, C_PLT, C_OTHER };

typedef struct state {
  uint8_t cfa_how, fp_how, ra_how, ra_signed;
  unsigned cfa_reg;
  int64_t cfa_off, fp_off, ra_off;
} state;

#define STATE_STACK 16

/* The rows being built. */
typedef struct rows {
  pprt__cfi_row *v;
  size_t n, cap, max;
  int too_big, nomem;
} rows;

static int rows_push(rows *rs, pprt__cfi_row row) {
  if (rs->n > 0 && rs->v[rs->n - 1].pc == row.pc) {
    rs->v[rs->n - 1] = row; /* same pc: the later state wins */
    return 1;
  }
  if (rs->max && rs->n >= rs->max) {
    rs->too_big = 1;
    return 0;
  }
  if (rs->n == rs->cap) {
    size_t cap = rs->cap ? 2 * rs->cap : 1024;
    pprt__cfi_row *v = realloc(rs->v, cap * sizeof *v);
    if (v == NULL) {
      rs->nomem = 1;
      return 0;
    }
    rs->v = v;
    rs->cap = cap;
  }
  rs->v[rs->n++] = row;
  return 1;
}

/* The row for state st at link-time pc (relative to 0; rebased later).
 * Anything the row's fields cannot hold exactly becomes a frame-pointer
 * row, or (for the caller's fp alone) PPRT__CFI_FP_LOST. */
static pprt__cfi_row make_row(const arch *a, unsigned machine, const state *st, int signal,
                              uint64_t pc) {
  pprt__cfi_row row = {(uint32_t)pc, PPRT__CFI_FP_RULE, 0, 0};
  int64_t off = st->cfa_off;
  unsigned kind;
  if (signal) {
    row.cfa = PPRT__CFI_SIGFRAME;
    return row;
  }
  if (st->ra_how == R_UNDEF) {
    row.cfa = PPRT__CFI_OUTERMOST;
    return row;
  }
  if (st->cfa_how == C_PLT)
    kind = PPRT__CFI_PLT;
  else if (st->cfa_how == C_REG && st->cfa_reg == a->sp)
    kind = st->ra_signed ? PPRT__CFI_CFA_SP_PAC : PPRT__CFI_CFA_SP;
  else if (st->cfa_how == C_REG && st->cfa_reg == a->fp)
    kind = st->ra_signed ? PPRT__CFI_CFA_FP_PAC : PPRT__CFI_CFA_FP;
  else
    return row;
  if (kind != PPRT__CFI_PLT) {
    if (off % 8 != 0)
      return row;
    off /= 8;
  }
  if (off < -4096 || off > 4095)
    return row;
  /* The return address: saved in the frame, or (aarch64) still in x30. */
  int64_t ra = 0, fp = 0;
  if (st->ra_how == R_OFFSET && st->ra_off != 0 && st->ra_off % 8 == 0 && st->ra_off / 8 >= -127 &&
      st->ra_off / 8 <= 127)
    ra = st->ra_off / 8;
  else if (!(st->ra_how == R_SAME && machine == PPRT__CFI_AARCH64))
    return row;
  if (st->fp_how == R_SAME)
    fp = 0;
  else if (st->fp_how == R_OFFSET && st->fp_off != 0 && st->fp_off % 8 == 0 &&
           st->fp_off / 8 >= -127 && st->fp_off / 8 <= 127)
    fp = st->fp_off / 8;
  else
    fp = PPRT__CFI_FP_LOST;
  row.cfa = (int16_t)(off * 8 + (int64_t)kind);
  row.ra_off = (int8_t)ra;
  row.fp_off = (int8_t)fp;
  return row;
}

/* The x86_64 PLT's CFA expression: rsp + 8 + ((rip & 15) >= k) << 3, as
 * binutils and lld emit it for .plt (k = 11) and .plt.sec/.plt.got (k = 10).
 * Returns k, or -1 for any other expression. */
static int plt_expression(const uint8_t *e, uint64_t len) {
  static const uint8_t head[] = {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a};
  static const uint8_t tail[] = {0x2a, 0x33, 0x24, 0x22};
  if (len != 11 || memcmp(e, head, sizeof head) != 0 || memcmp(e + 7, tail, sizeof tail) != 0 ||
      e[6] < 0x30 || e[6] > 0x4f)
    return -1;
  return e[6] - 0x30;
}

typedef struct interp {
  const pprt__cfi_input *in;
  const arch *a;
  const cie *c;
  state init, cur, stack[STATE_STACK];
  int depth;
  uint64_t loc; /* link-time */
  rows *rs;
} interp;

static void set_reg(interp *it, unsigned reg, uint8_t how, int64_t off) {
  if (reg == it->a->fp) {
    it->cur.fp_how = how;
    it->cur.fp_off = off;
  } else if (reg == it->c->ra_reg) {
    it->cur.ra_how = how;
    it->cur.ra_off = off;
  }
}

static void restore_reg(interp *it, unsigned reg) {
  if (reg == it->a->fp) {
    it->cur.fp_how = it->init.fp_how;
    it->cur.fp_off = it->init.fp_off;
  } else if (reg == it->c->ra_reg) {
    it->cur.ra_how = it->init.ra_how;
    it->cur.ra_off = it->init.ra_off;
  }
}

static int emit(interp *it) {
  if (it->rs == NULL)
    return 1;
  return rows_push(it->rs, make_row(it->a, it->in->machine, &it->cur, it->c->signal, it->loc));
}

/* Runs the instructions in r up to end_pc (exclusive); rows for each
 * location go to it->rs (NULL while running a CIE's initial instructions). */
static enum pprt__cfi_status run(interp *it, rd *r, uint64_t end_pc) {
  const cie *c = it->c;
  while (r->p < r->end && !r->bad) {
    uint8_t op = (uint8_t)rd_u(r, 1);
    uint64_t delta = 0, reg;
    int adv = 0;
    switch (op & 0xc0) {
    case 0x40:
      delta = (op & 0x3f) * c->code_align;
      adv = 1;
      break;
    case 0x80:
      reg = op & 0x3f;
      set_reg(it, (unsigned)reg, R_OFFSET, mul((int64_t)rd_uleb(r), c->data_align));
      continue;
    case 0xc0:
      restore_reg(it, op & 0x3f);
      continue;
    }
    if (!adv) {
      switch (op) {
      case 0x00: /* nop */
        break;
      case 0x01: { /* set_loc */
        uint64_t to = rd_ptr(r, c->fde_enc, 0) - it->in->bias;
        if (to < it->loc)
          return PPRT__CFI_BAD_OPCODE;
        delta = to - it->loc;
        adv = 1;
        break;
      }
      case 0x02:
        delta = rd_u(r, 1) * c->code_align;
        adv = 1;
        break;
      case 0x03:
        delta = rd_u(r, 2) * c->code_align;
        adv = 1;
        break;
      case 0x04:
        delta = rd_u(r, 4) * c->code_align;
        adv = 1;
        break;
      case 0x05: /* offset_extended */
        reg = rd_uleb(r);
        set_reg(it, (unsigned)reg, R_OFFSET, mul((int64_t)rd_uleb(r), c->data_align));
        break;
      case 0x06: /* restore_extended */
        restore_reg(it, (unsigned)rd_uleb(r));
        break;
      case 0x07: /* undefined */
        set_reg(it, (unsigned)rd_uleb(r), R_UNDEF, 0);
        break;
      case 0x08: /* same_value */
        set_reg(it, (unsigned)rd_uleb(r), R_SAME, 0);
        break;
      case 0x09: /* register */
        reg = rd_uleb(r);
        rd_uleb(r);
        set_reg(it, (unsigned)reg, R_OTHER, 0);
        break;
      case 0x0a: /* remember_state */
        if (it->depth == STATE_STACK)
          return PPRT__CFI_BAD_OPCODE;
        it->stack[it->depth++] = it->cur;
        break;
      case 0x0b: { /* restore_state: the CFA rule is kept? No: the whole row. */
        if (it->depth == 0)
          return PPRT__CFI_BAD_OPCODE;
        it->cur = it->stack[--it->depth];
        break;
      }
      case 0x0c: /* def_cfa */
        it->cur.cfa_reg = (unsigned)rd_uleb(r);
        it->cur.cfa_off = (int64_t)rd_uleb(r);
        it->cur.cfa_how = C_REG;
        break;
      case 0x0d: /* def_cfa_register */
        it->cur.cfa_reg = (unsigned)rd_uleb(r);
        if (it->cur.cfa_how != C_REG)
          it->cur.cfa_how = C_OTHER; /* an offset from an expression: undefined */
        break;
      case 0x0e: /* def_cfa_offset */
        it->cur.cfa_off = (int64_t)rd_uleb(r);
        break;
      case 0x0f: { /* def_cfa_expression */
        uint64_t len = rd_uleb(r);
        const uint8_t *e = r->p;
        rd_skip(r, len);
        if (r->bad)
          break;
        int k = it->in->machine == PPRT__CFI_X86_64 ? plt_expression(e, len) : -1;
        it->cur.cfa_how = k >= 0 ? C_PLT : C_OTHER;
        it->cur.cfa_off = k;
        break;
      }
      case 0x10: /* expression */
      case 0x16: /* val_expression */
        reg = rd_uleb(r);
        rd_skip(r, rd_uleb(r));
        set_reg(it, (unsigned)reg, R_OTHER, 0);
        break;
      case 0x11: /* offset_extended_sf */
        reg = rd_uleb(r);
        set_reg(it, (unsigned)reg, R_OFFSET, mul(rd_sleb(r), c->data_align));
        break;
      case 0x12: /* def_cfa_sf */
        it->cur.cfa_reg = (unsigned)rd_uleb(r);
        it->cur.cfa_off = mul(rd_sleb(r), c->data_align);
        it->cur.cfa_how = C_REG;
        break;
      case 0x13: /* def_cfa_offset_sf */
        it->cur.cfa_off = mul(rd_sleb(r), c->data_align);
        break;
      case 0x14: /* val_offset */
        reg = rd_uleb(r);
        rd_uleb(r);
        set_reg(it, (unsigned)reg, R_OTHER, 0);
        break;
      case 0x15: /* val_offset_sf */
        reg = rd_uleb(r);
        rd_sleb(r);
        set_reg(it, (unsigned)reg, R_OTHER, 0);
        break;
      case 0x2d: /* AArch64 negate_ra_state (SPARC's window_save elsewhere) */
        if (it->in->machine != PPRT__CFI_AARCH64)
          return PPRT__CFI_BAD_OPCODE;
        it->cur.ra_signed ^= 1;
        break;
      case 0x2e: /* GNU_args_size */
        rd_uleb(r);
        break;
      case 0x2f: /* GNU_negative_offset_extended */
        reg = rd_uleb(r);
        set_reg(it, (unsigned)reg, R_OFFSET, mul(mul((int64_t)rd_uleb(r), c->data_align), -1));
        break;
      default:
        return PPRT__CFI_BAD_OPCODE;
      }
    }
    if (adv && !r->bad) {
      if (it->rs == NULL)
        return PPRT__CFI_BAD_OPCODE; /* a CIE's instructions do not advance */
      if (it->loc >= end_pc)
        break; /* rows past the FDE's end describe nothing */
      if (!emit(it))
        return it->rs->nomem ? PPRT__CFI_NOMEM : PPRT__CFI_TOO_BIG;
      it->loc += delta;
    }
  }
  if (r->bad)
    return PPRT__CFI_TRUNCATED;
  return PPRT__CFI_OK;
}

/* ---- FDEs --------------------------------------------------------------------- */

#define CIE_CACHE 8

typedef struct builder {
  const pprt__cfi_input *in;
  arch a;
  cie cache[CIE_CACHE];
  size_t ncache, next_slot;
  rows rs;
  uint64_t lo, hi;         /* link-time span of the rows */
  uint64_t rec_lo, rec_hi; /* span of the records read */
} builder;

static enum pprt__cfi_status cie_get(builder *b, uint64_t off, const cie **out) {
  for (size_t i = 0; i < b->ncache; i++)
    if (b->cache[i].off == off) {
      *out = &b->cache[i];
      return PPRT__CFI_OK;
    }
  cie *c = &b->cache[b->next_slot];
  b->next_slot = (b->next_slot + 1) % CIE_CACHE;
  if (b->ncache < CIE_CACHE)
    b->ncache++;
  enum pprt__cfi_status st = parse_cie(b->in, off, c);
  if (st != PPRT__CFI_OK) {
    c->off = UINT64_MAX;
    return st;
  }
  *out = c;
  return PPRT__CFI_OK;
}

/* Compiles the FDE at off (or skips a CIE there). *next: the record after. */
static enum pprt__cfi_status do_record(builder *b, uint64_t off, uint64_t *next, int want_fde) {
  const pprt__cfi_input *in = b->in;
  rd r;
  int got = record_at(&in->frame, off, &r, next);
  if (got <= 0)
    return got == 0 ? PPRT__CFI_OK : PPRT__CFI_TRUNCATED;
  if (off < b->rec_lo)
    b->rec_lo = off;
  if (*next > b->rec_hi)
    b->rec_hi = *next;
  uint64_t id_addr = r.addr;
  uint64_t id = rd_u(&r, 4);
  if (r.bad)
    return PPRT__CFI_TRUNCATED;
  uint64_t cie_off;
  if (in->debug_frame) {
    if (id == 0xffffffffu)
      return want_fde ? PPRT__CFI_BAD_CIE : PPRT__CFI_OK;
    cie_off = id;
  } else {
    if (id == 0)
      return want_fde ? PPRT__CFI_BAD_CIE : PPRT__CFI_OK;
    uint64_t here = id_addr - in->frame.addr;
    if (id > here)
      return PPRT__CFI_BAD_CIE;
    cie_off = here - id;
  }
  const cie *c;
  enum pprt__cfi_status st = cie_get(b, cie_off, &c);
  if (st != PPRT__CFI_OK)
    return st;
  uint64_t pc, range;
  if (in->debug_frame) {
    pc = rd_u(&r, (size_t)c->addr_size);
    range = rd_u(&r, (size_t)c->addr_size);
  } else {
    pc = rd_ptr(&r, c->fde_enc, 0) - in->bias;
    range = rd_ptr(&r, c->fde_enc & 0x0f, 0);
  }
  if (c->has_z)
    rd_skip(&r, rd_uleb(&r));
  if (r.bad)
    return PPRT__CFI_TRUNCATED;
  if (range == 0 || (in->debug_frame && pc == 0))
    return PPRT__CFI_OK; /* a function the linker discarded */
  if (pc < in->text_lo || pc > in->text_hi || range > in->text_hi - pc)
    return PPRT__CFI_FDE_OUTSIDE;

  interp it;
  memset(&it, 0, sizeof it);
  it.in = in;
  it.a = &b->a;
  it.c = c;
  it.cur.cfa_how = C_OTHER;
  it.cur.fp_how = R_SAME;
  it.cur.ra_how = R_SAME;
  rd ci = {c->insns, c->insns_end, c->insns_addr, 0};
  st = run(&it, &ci, UINT64_MAX);
  if (st != PPRT__CFI_OK)
    return st;
  it.init = it.cur;
  it.depth = 0;
  it.loc = pc;
  it.rs = &b->rs;
  st = run(&it, &r, pc + range);
  if (st != PPRT__CFI_OK)
    return st;
  if (!emit(&it))
    return b->rs.nomem ? PPRT__CFI_NOMEM : PPRT__CFI_TOO_BIG;
  /* After the function: nothing known until the next FDE's first row. */
  pprt__cfi_row gap = {(uint32_t)(pc + range), PPRT__CFI_FP_RULE, 0, 0};
  if (!rows_push(&b->rs, gap))
    return b->rs.nomem ? PPRT__CFI_NOMEM : PPRT__CFI_TOO_BIG;
  if (pc < b->lo)
    b->lo = pc;
  if (pc + range > b->hi)
    b->hi = pc + range;
  return PPRT__CFI_OK;
}

/* The FDEs listed by .eh_frame_hdr (version 1, sorted table of datarel
 * sdata4 pairs): sets *done when it compiled them all. */
static enum pprt__cfi_status from_hdr(builder *b, int *done) {
  const pprt__cfi_input *in = b->in;
  rd r = {in->hdr.data, in->hdr.data + in->hdr.len, in->hdr.addr, 0};
  uint8_t version = (uint8_t)rd_u(&r, 1), ptr_enc = (uint8_t)rd_u(&r, 1);
  uint8_t count_enc = (uint8_t)rd_u(&r, 1), table_enc = (uint8_t)rd_u(&r, 1);
  if (r.bad || version != 1)
    return PPRT__CFI_BAD_HDR;
  uint64_t eh = rd_ptr(&r, ptr_enc, in->hdr.addr);
  if (r.bad || eh < in->frame.addr || eh - in->frame.addr >= in->frame.len)
    return PPRT__CFI_BAD_HDR;
  if (count_enc == PE_OMIT || table_enc != (PE_DATAREL | 0x0b))
    return PPRT__CFI_OK; /* no usable index: walk the section */
  uint64_t count = rd_ptr(&r, count_enc, in->hdr.addr);
  if (r.bad || count > (uint64_t)(r.end - r.p) / 8)
    return PPRT__CFI_TRUNCATED;
  for (uint64_t i = 0; i < count; i++) {
    rd_u(&r, 4); /* initial location: the FDE says it again */
    uint64_t fde = in->hdr.addr + (uint64_t)(int64_t)(int32_t)rd_u(&r, 4);
    if (fde < in->frame.addr || fde - in->frame.addr >= in->frame.len)
      return PPRT__CFI_BAD_HDR;
    uint64_t next;
    enum pprt__cfi_status st = do_record(b, fde - in->frame.addr, &next, 1);
    if (st != PPRT__CFI_OK)
      return st;
  }
  *done = 1;
  return PPRT__CFI_OK;
}

/* Every record from off to the terminator or the end of the bytes. */
static enum pprt__cfi_status from_section(builder *b, uint64_t off) {
  const pprt__cfi_bytes *f = &b->in->frame;
  while (off < f->len) {
    uint64_t next = f->len;
    rd probe = {f->data + off, f->data + f->len, 0, 0};
    if (f->len - off >= 4 && rd_u(&probe, 4) == 0)
      break; /* the terminator */
    enum pprt__cfi_status st = do_record(b, off, &next, 0);
    if (st != PPRT__CFI_OK)
      return st;
    if (next <= off)
      break;
    off = next;
  }
  return PPRT__CFI_OK;
}

/* A row and the order it was made in: sorting must keep that order among
 * rows at the same pc (the last one wins). */
typedef struct seq_row {
  pprt__cfi_row row;
  size_t seq;
} seq_row;

static int seq_row_cmp(const void *x, const void *y) {
  const seq_row *a = x, *b = y;
  if (a->row.pc != b->row.pc)
    return a->row.pc < b->row.pc ? -1 : 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Sorts rows by pc, stably. Returns 0, or -1 without memory. */
static int sort_rows(pprt__cfi_row *v, size_t n) {
  seq_row *t = malloc(n * sizeof *t);
  if (t == NULL)
    return -1;
  for (size_t i = 0; i < n; i++)
    t[i] = (seq_row){v[i], i};
  qsort(t, n, sizeof *t, seq_row_cmp);
  for (size_t i = 0; i < n; i++)
    v[i] = t[i].row;
  free(t);
  return 0;
}

enum pprt__cfi_status pprt__cfi_build(const pprt__cfi_input *in, pprt__cfi_table **out) {
  *out = NULL;
  builder b;
  memset(&b, 0, sizeof b);
  b.in = in;
  b.lo = UINT64_MAX;
  b.rec_lo = UINT64_MAX;
  b.rs.max = in->max_rows;
  if (!arch_of(in->machine, &b.a))
    return PPRT__CFI_ARCH;
  if (in->frame.len == 0 || in->frame.data == NULL)
    return PPRT__CFI_NONE;
  if (in->text_hi - in->text_lo > UINT32_MAX)
    return PPRT__CFI_TOO_BIG; /* row pcs are 32-bit offsets */
  enum pprt__cfi_status st = PPRT__CFI_OK;
  int done = 0;
  if (in->hdr.len > 0 && !in->debug_frame) {
    st = from_hdr(&b, &done);
    if (st == PPRT__CFI_OK && !done) {
      rd r = {in->hdr.data + 4, in->hdr.data + in->hdr.len, in->hdr.addr + 4, 0};
      uint64_t eh = rd_ptr(&r, in->hdr.data[1], in->hdr.addr);
      st = from_section(&b, eh - in->frame.addr);
    }
  } else if (st == PPRT__CFI_OK) {
    st = from_section(&b, 0);
  }
  if (st == PPRT__CFI_OK && b.rs.n == 0)
    st = PPRT__CFI_NONE;
  if (st != PPRT__CFI_OK) {
    free(b.rs.v);
    return st;
  }
  /* Rows were made with link-time pcs truncated to 32 bits; rebase them on
   * the image's code so that the offsets are exact. */
  pprt__cfi_row *v = b.rs.v;
  size_t n = b.rs.n;
  uint64_t base = in->text_lo;
  for (size_t i = 0; i < n; i++)
    v[i].pc = (uint32_t)((uint32_t)v[i].pc - (uint32_t)base);
  int sorted = 1;
  for (size_t i = 1; i < n && sorted; i++)
    sorted = v[i - 1].pc <= v[i].pc;
  /* .debug_frame has no index, and FDEs may overlap. */
  if (!sorted && sort_rows(v, n) != 0) {
    free(v);
    return PPRT__CFI_NOMEM;
  }
  /* Merge: a row equal to the one before it adds nothing; of rows at the
   * same pc the last (a function's first row after another's gap) wins. */
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (i + 1 < n && v[i + 1].pc == v[i].pc)
      continue;
    if (m > 0 && v[m - 1].cfa == v[i].cfa && v[m - 1].fp_off == v[i].fp_off &&
        v[m - 1].ra_off == v[i].ra_off)
      continue;
    v[m++] = v[i];
  }
  size_t nb = (size_t)((b.hi - base) >> PPRT__CFI_BUCKET_SHIFT) + 1;
  pprt__cfi_table *t = malloc(sizeof *t + m * sizeof *v + nb * sizeof(uint32_t));
  if (t == NULL) {
    free(v);
    return PPRT__CFI_NOMEM;
  }
  t->base = base;
  t->end = b.hi - base;
  t->machine = in->machine;
  t->src_bytes = (size_t)(b.rec_hi - b.rec_lo) + in->hdr.len;
  t->n = m;
  t->nbuckets = nb;
  memcpy(t->rows, v, m * sizeof *v);
  free(v);
  /* Each bucket: the last row starting at or before its first byte (row 0
   * when none does; the lookup checks). */
  t->buckets = (uint32_t *)(void *)(t->rows + m);
  size_t r = 0;
  for (size_t k = 0; k < nb; k++) {
    uint64_t at = (uint64_t)k << PPRT__CFI_BUCKET_SHIFT;
    while (r + 1 < m && t->rows[r + 1].pc <= at)
      r++;
    t->buckets[k] = (uint32_t)r;
  }
  *out = t;
  return PPRT__CFI_OK;
}

const char *pprt__cfi_status_name(enum pprt__cfi_status st) {
  static const char *const names[PPRT__CFI_NSTATUS] = {
      "ok",      "no unwind tables", "unknown machine",       "bad .eh_frame_hdr", "truncated",
      "bad CIE", "unknown opcode",   "FDE outside the image", "over budget",       "out of memory"};
  return (unsigned)st < PPRT__CFI_NSTATUS ? names[st] : "?";
}
