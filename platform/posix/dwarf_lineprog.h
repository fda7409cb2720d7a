/* A DWARF line-number program interpreter (.debug_line, versions 2 to 5)
 * for the source-lines reader (dwarf_lines.c). It reads the section bytes
 * the debug information reader has loaded and keeps only what answering
 * needs: the unit's directory and file tables, where each sequence starts,
 * and one cursor. libdw's dwarf_getsrclines expands a unit's whole table
 * into rows (40 bytes each, 15 MB for the units a 10,000-address profile
 * touches in glibc); addresses asked in increasing order run each sequence
 * once, and an earlier address restarts its sequence. */
#ifndef PPRT_PLATFORM_POSIX_DWARF_LINEPROG_H
#define PPRT_PLATFORM_POSIX_DWARF_LINEPROG_H

#include <stddef.h>
#include <stdint.h>

/* The sections a line program reads: its own, and the string sections its
 * v5 file table may point into (len 0 when absent). */
typedef struct pprt__dw_sections {
  const uint8_t *line, *line_str, *str;
  size_t line_len, line_str_len, str_len;
} pprt__dw_sections;

typedef struct pprt__dw_file {
  const char *name; /* into the sections; NULL for an entry without one */
  uint64_t dir;
} pprt__dw_file;

/* One sequence: rows for [lo, hi), starting at byte off of .debug_line. */
typedef struct pprt__dw_seq {
  uint64_t lo, hi;
  size_t off;
} pprt__dw_seq;

/* One row of the line table. file indexes the unit's file table (from 0 in
 * DWARF 5, from 1 before, as DW_AT_call_file does). */
typedef struct pprt__dw_row {
  uint64_t addr;
  uint64_t file;
  uint32_t line;
  int end; /* DW_LNE_end_sequence: addr is one past the sequence */
} pprt__dw_row;

/* The interpreter's registers and where it reads next. */
typedef struct pprt__dw_vm {
  size_t pos;
  uint64_t addr, file;
  uint32_t op_index;
  int64_t line;
} pprt__dw_vm;

typedef struct pprt__dw_lineprog {
  pprt__dw_sections s;
  unsigned version, addr_size;
  unsigned min_inst, max_ops, line_range, opcode_base;
  int line_base;
  const uint8_t *std_lens; /* operand counts of standard opcodes 1.. */
  size_t prog, end;        /* the opcodes, as offsets in s.line */
  const char **dirs;       /* DWARF 4 and before: dirs[0] is the unit's comp_dir */
  size_t ndirs;
  pprt__dw_file *files;
  size_t nfiles;
  pprt__dw_seq *seqs; /* by lo */
  size_t nseqs;
  /* The cursor: sequence seq - 1 (0 for none), its row at or before the
   * last address asked, the row after it, and the registers after that. */
  size_t seq;
  pprt__dw_row cur, next;
  int has_next;
  pprt__dw_vm vm;
} pprt__dw_lineprog;

/* Reads the header of the line program at byte off of s->line and finds
 * its sequences. addr_size is the unit's (DWARF 5 headers say their own);
 * comp_dir is the unit's DW_AT_comp_dir or NULL. Strings and s's bytes
 * must outlive p. Errors: -EINVAL (a header or form this reader does not
 * know, or bytes past the section's end), -ENOMEM; p is then empty. */
int pprt__dw_lineprog_open(pprt__dw_lineprog *p, const pprt__dw_sections *s, uint64_t off,
                           unsigned addr_size, const char *comp_dir);

/* The row whose [addr, next row's addr) holds pc: 1 and *out, or 0 when
 * no sequence covers pc. Fastest when pcs come in increasing order. */
int pprt__dw_lineprog_find(pprt__dw_lineprog *p, uint64_t pc, pprt__dw_row *out);

/* File entry i's path as libdw's dwarf_filesrc gives it (its directory
 * joined in front of a relative name), malloc'd; NULL for an index out of
 * the table or on ENOMEM. */
char *pprt__dw_lineprog_path(const pprt__dw_lineprog *p, uint64_t file);

void pprt__dw_lineprog_free(pprt__dw_lineprog *p);

#endif /* PPRT_PLATFORM_POSIX_DWARF_LINEPROG_H */
