/* The DWARF line-number program interpreter (dwarf_lineprog.h).
 *
 * Divisions: reading bytes (bounds-checked: the sections come from files
 * pprt did not write); the header (version 2 to 4 tables of strings, v5
 * entry formats); the interpreter (standard and extended opcodes, one row
 * at a time); the sequences and the cursor that answers an address.
 */
#include "platform/posix/dwarf_lineprog.h"

#include "platform/posix/dwarf_bytes.h"
#include "platform/posix/dwarf_constants.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading bytes ------------------------------------------------------------- */

/* A NUL-terminated string at r's position. */
static const char *rd_str(rd *r) {
  if (r->err || r->pos >= r->end)
    return r->err = 1, NULL;
  const char *s = (const char *)r->b + r->pos;
  const char *nul = memchr(s, 0, r->end - r->pos);
  if (nul == NULL)
    return r->err = 1, NULL;
  r->pos += (size_t)(nul - s) + 1;
  return s;
}

/* The string at off of a string section. */
static const char *sec_str(const uint8_t *sec, size_t len, uint64_t off) {
  if (sec == NULL || off >= len || memchr(sec + off, 0, len - off) == NULL)
    return NULL;
  return (const char *)sec + off;
}

/* ---- the header ------------------------------------------------------------------ */

/* One v5 entry's field of form `form`: a path (*str) or a number (*num). */
static int read_form(rd *r, const pprt__dw_lineprog *p, unsigned offset_size, uint64_t form,
                     const char **str, uint64_t *num) {
  *str = NULL;
  *num = 0;
  switch (form) {
  case DW_FORM_string:
    *str = rd_str(r);
    break;
  case DW_FORM_line_strp:
    *str = sec_str(p->s.line_str, p->s.line_str_len, rd_n(r, offset_size));
    break;
  case DW_FORM_strp:
    *str = sec_str(p->s.str, p->s.str_len, rd_n(r, offset_size));
    break;
  case DW_FORM_udata:
    *num = rd_uleb(r);
    break;
  case DW_FORM_data1:
    *num = rd_n(r, 1);
    break;
  case DW_FORM_data2:
    *num = rd_n(r, 2);
    break;
  case DW_FORM_data4:
    *num = rd_n(r, 4);
    break;
  case DW_FORM_data8:
    *num = rd_n(r, 8);
    break;
  case DW_FORM_data16:
    rd_skip(r, 16);
    break;
  case DW_FORM_block:
    rd_skip(r, rd_uleb(r));
    break;
  default:
    return -1; /* strx and the like need .debug_str_offsets: libdw's */
  }
  return r->err ? -1 : 0;
}

/* A v5 directory or file table: its entry format, then n entries. */
static int read_v5_table(rd *r, pprt__dw_lineprog *p, unsigned offset_size, int files) {
  uint64_t fmt[2 * 16];
  unsigned nfmt = (unsigned)rd_n(r, 1);
  if (nfmt > 16)
    return -1;
  for (unsigned i = 0; i < 2 * nfmt; i++)
    fmt[i] = rd_uleb(r);
  uint64_t n = rd_uleb(r);
  if (r->err || n > (r->end - r->pos)) /* each entry takes a byte at least */
    return -1;
  void *v = calloc(n ? n : 1, files ? sizeof(pprt__dw_file) : sizeof(char *));
  if (v == NULL)
    return -ENOMEM;
  if (files) {
    p->files = v;
    p->nfiles = n;
  } else {
    p->dirs = v;
    p->ndirs = n;
  }
  for (uint64_t e = 0; e < n; e++)
    for (unsigned i = 0; i < nfmt; i++) {
      const char *s;
      uint64_t num;
      if (read_form(r, p, offset_size, fmt[2 * i + 1], &s, &num) != 0)
        return -1;
      if (fmt[2 * i] == DW_LNCT_path && files)
        p->files[e].name = s;
      else if (fmt[2 * i] == DW_LNCT_path)
        p->dirs[e] = s;
      else if (fmt[2 * i] == DW_LNCT_directory_index && files)
        p->files[e].dir = num;
    }
  return 0;
}

/* Version 2 to 4 tables: strings up to an empty one; entry 0 is the
 * unit's (the compilation directory, no file). */
static int read_v4_tables(rd *r, pprt__dw_lineprog *p, const char *comp_dir) {
  size_t start = r->pos, n = 1;
  for (const char *s; (s = rd_str(r)) != NULL && *s;)
    n++;
  if (r->err || (p->dirs = calloc(n, sizeof *p->dirs)) == NULL)
    return r->err ? -1 : -ENOMEM;
  r->pos = start;
  p->dirs[0] = comp_dir;
  for (p->ndirs = 1; p->ndirs < n; p->ndirs++)
    p->dirs[p->ndirs] = rd_str(r);
  rd_str(r);
  start = r->pos;
  n = 1;
  for (const char *s; (s = rd_str(r)) != NULL && *s; n++) {
    rd_uleb(r);
    rd_uleb(r);
    rd_uleb(r);
  }
  if (r->err || (p->files = calloc(n, sizeof *p->files)) == NULL)
    return r->err ? -1 : -ENOMEM;
  r->pos = start;
  for (p->nfiles = 1; p->nfiles < n; p->nfiles++) {
    p->files[p->nfiles].name = rd_str(r);
    p->files[p->nfiles].dir = rd_uleb(r);
    rd_uleb(r); /* modification time */
    rd_uleb(r); /* length */
  }
  return r->err ? -1 : 0;
}

static int read_header(pprt__dw_lineprog *p, uint64_t off, unsigned addr_size,
                       const char *comp_dir) {
  if (off >= p->s.line_len)
    return -1;
  rd r = {p->s.line, (size_t)off, p->s.line_len, 0};
  unsigned offset_size = 4;
  uint64_t len = rd_n(&r, 4);
  if (len == 0xffffffff) {
    offset_size = 8;
    len = rd_n(&r, 8);
  }
  if (r.err || len > r.end - r.pos)
    return -1;
  r.end = r.pos + (size_t)len;
  p->end = r.end;
  p->version = (unsigned)rd_n(&r, 2);
  if (p->version < 2 || p->version > 5)
    return -1;
  p->addr_size = addr_size;
  if (p->version >= 5) {
    p->addr_size = (unsigned)rd_n(&r, 1);
    rd_n(&r, 1); /* segment selector size */
  }
  uint64_t hlen = rd_n(&r, offset_size);
  if (r.err || hlen > r.end - r.pos)
    return -1;
  p->prog = r.pos + (size_t)hlen;
  p->min_inst = (unsigned)rd_n(&r, 1);
  p->max_ops = p->version >= 4 ? (unsigned)rd_n(&r, 1) : 1;
  rd_n(&r, 1); /* default_is_stmt: every row counts for a profile */
  p->line_base = (int8_t)rd_n(&r, 1);
  p->line_range = (unsigned)rd_n(&r, 1);
  p->opcode_base = (unsigned)rd_n(&r, 1);
  if (r.err || p->line_range == 0 || p->max_ops == 0 || p->opcode_base == 0 ||
      p->opcode_base - 1 > r.end - r.pos)
    return -1;
  p->std_lens = r.b + r.pos;
  r.pos += p->opcode_base - 1;
  r.end = p->prog; /* the tables end where the opcodes start */
  if (p->version >= 5) {
    int rc = read_v5_table(&r, p, offset_size, 0);
    return rc != 0 ? rc : read_v5_table(&r, p, offset_size, 1);
  }
  return read_v4_tables(&r, p, comp_dir);
}

/* ---- the interpreter ---------------------------------------------------------------- */

static void vm_start(pprt__dw_vm *vm, size_t pos) {
  *vm = (pprt__dw_vm){pos, 0, 1, 0, 1};
}

static void advance(const pprt__dw_lineprog *p, pprt__dw_vm *vm, uint64_t ops) {
  if (p->max_ops == 1) {
    vm->addr += p->min_inst * ops;
    return;
  }
  uint64_t k = vm->op_index + ops; /* VLIW: ops count within a bundle */
  vm->addr += p->min_inst * (k / p->max_ops);
  vm->op_index = (uint32_t)(k % p->max_ops);
}

/* Runs opcodes up to the next row: 1 and *row, 0 at the program's end or
 * on bytes past it. */
static int vm_step(const pprt__dw_lineprog *p, pprt__dw_vm *vm, pprt__dw_row *row) {
  rd r = {p->s.line, vm->pos, p->end, 0};
  while (r.pos < r.end && !r.err) {
    unsigned op = (unsigned)rd_n(&r, 1);
    int emit = 0, end = 0;
    if (op >= p->opcode_base) {
      unsigned adj = op - p->opcode_base;
      advance(p, vm, adj / p->line_range);
      vm->line += p->line_base + (int)(adj % p->line_range);
      emit = 1;
    } else if (op == 0) {
      uint64_t len = rd_uleb(&r);
      if (r.err || len == 0 || len > r.end - r.pos)
        break;
      size_t next = r.pos + (size_t)len;
      unsigned sub = (unsigned)rd_n(&r, 1);
      if (sub == DW_LNE_end_sequence) {
        emit = end = 1;
      } else if (sub == DW_LNE_set_address) {
        vm->addr = rd_n(&r, (unsigned)len - 1);
        vm->op_index = 0;
      }
      r.pos = next;
    } else {
      switch (op) {
      case DW_LNS_copy:
        emit = 1;
        break;
      case DW_LNS_advance_pc:
        advance(p, vm, rd_uleb(&r));
        break;
      case DW_LNS_advance_line:
        vm->line += rd_sleb(&r);
        break;
      case DW_LNS_set_file:
        vm->file = rd_uleb(&r);
        break;
      case DW_LNS_const_add_pc:
        advance(p, vm, (255 - p->opcode_base) / p->line_range);
        break;
      case DW_LNS_fixed_advance_pc:
        vm->addr += rd_n(&r, 2);
        vm->op_index = 0;
        break;
      default: /* column, stmt, blocks, isa and unknown: their operands */
        for (unsigned i = 0; i < p->std_lens[op - 1]; i++)
          rd_uleb(&r);
        break;
      }
    }
    if (emit && !r.err) {
      *row = (pprt__dw_row){vm->addr, vm->file, (uint32_t)vm->line, end};
      vm->pos = r.pos;
      if (end)
        vm_start(vm, r.pos);
      return 1;
    }
  }
  vm->pos = r.end;
  return 0;
}

/* ---- sequences and the cursor --------------------------------------------------------- */

static int seq_order(const void *pa, const void *pb) {
  const pprt__dw_seq *a = pa, *b = pb;
  if (a->lo != b->lo)
    return a->lo < b->lo ? -1 : 1;
  return a->off < b->off ? -1 : a->off > b->off;
}

/* One pass over the program for where each sequence starts and ends. */
static int find_sequences(pprt__dw_lineprog *p) {
  size_t cap = 0;
  pprt__dw_vm vm;
  vm_start(&vm, p->prog);
  pprt__dw_row row;
  size_t start = vm.pos;
  int first = 1;
  uint64_t lo = 0;
  while (vm_step(p, &vm, &row)) {
    if (first)
      lo = row.addr;
    first = 0;
    if (!row.end)
      continue;
    if (row.addr > lo) {
      if (p->nseqs == cap) {
        cap = cap ? 2 * cap : 16;
        pprt__dw_seq *v = realloc(p->seqs, cap * sizeof *v);
        if (v == NULL)
          return -ENOMEM;
        p->seqs = v;
      }
      p->seqs[p->nseqs++] = (pprt__dw_seq){lo, row.addr, start};
    }
    start = vm.pos;
    first = 1;
  }
  if (p->nseqs > 1) /* qsort takes no NULL, even for 0 items */
    qsort(p->seqs, p->nseqs, sizeof *p->seqs, seq_order);
  return 0;
}

int pprt__dw_lineprog_open(pprt__dw_lineprog *p, const pprt__dw_sections *s, uint64_t off,
                           unsigned addr_size, const char *comp_dir) {
  memset(p, 0, sizeof *p);
  p->s = *s;
  int rc = read_header(p, off, addr_size, comp_dir);
  if (rc == 0)
    rc = find_sequences(p);
  if (rc != 0) {
    pprt__dw_lineprog_free(p);
    return rc == -ENOMEM ? rc : -EINVAL;
  }
  return 0;
}

/* The sequence holding pc: of those starting at or before it, the last. */
static size_t seq_for(const pprt__dw_lineprog *p, uint64_t pc) {
  size_t lo = 0, hi = p->nseqs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (p->seqs[mid].lo <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  while (lo-- > 0)
    if (pc < p->seqs[lo].hi)
      return lo + 1;
  return 0;
}

int pprt__dw_lineprog_find(pprt__dw_lineprog *p, uint64_t pc, pprt__dw_row *out) {
  size_t s = seq_for(p, pc);
  if (s == 0)
    return 0;
  if (p->seq != s || p->cur.addr > pc) {
    p->seq = s;
    vm_start(&p->vm, p->seqs[s - 1].off);
    if (!vm_step(p, &p->vm, &p->cur)) {
      p->seq = 0;
      return 0;
    }
    p->has_next = vm_step(p, &p->vm, &p->next);
  }
  /* The last row at or before pc: several rows at one address leave the
   * last, as libdw's sorted table does. */
  while (p->has_next && !p->next.end && p->next.addr <= pc) {
    p->cur = p->next;
    p->has_next = vm_step(p, &p->vm, &p->next);
  }
  if (p->cur.end || p->cur.addr > pc)
    return 0;
  *out = p->cur;
  return 1;
}

char *pprt__dw_lineprog_path(const pprt__dw_lineprog *p, uint64_t file) {
  if (file >= p->nfiles || p->files[file].name == NULL)
    return NULL;
  const char *name = p->files[file].name;
  const char *dir = p->files[file].dir < p->ndirs ? p->dirs[p->files[file].dir] : NULL;
  if (name[0] == '/' || dir == NULL)
    return strdup(name);
  size_t dl = strlen(dir), nl = strlen(name);
  char *path = malloc(dl + nl + 2);
  if (path == NULL)
    return NULL;
  memcpy(path, dir, dl);
  path[dl] = '/';
  memcpy(path + dl + 1, name, nl + 1);
  return path;
}

void pprt__dw_lineprog_free(pprt__dw_lineprog *p) {
  free(p->dirs);
  free(p->files);
  free(p->seqs);
  memset(p, 0, sizeof *p);
}
