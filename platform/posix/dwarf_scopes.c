/* What the libdw source-lines reader (dwarf_lines.c) takes from libdw
 * besides lines: the per-unit index of functions and inlined instances
 * (dwarf_index.h) filled from libdw's DIEs, and the section bytes libdw
 * loaded, for pprt's line-program interpreter.
 *
 * Why: dwarf_getscopes finds the scopes around an address by walking the
 * unit's DIE tree from its root, so a profile with thousands of addresses
 * in a large unit (glibc's malloc.c) walks it thousands of times. One walk
 * collects every function's and inlined instance's address ranges. */
#include "platform/posix/dwarf_scopes.h"

#include <dwarf.h>
#include <gelf.h>
#include <string.h>

/* Records the code ranges of die's children that are functions, and looks
 * inside those and inside the scopes that can hold them (lexical blocks,
 * namespaces). Types are not entered: code there is declared, and defined
 * at the namespace level. */
static void walk(pprt__dw_cu_index *ix, Dwarf_Die *die, uint32_t depth) {
  Dwarf_Die child;
  if (dwarf_child(die, &child) != 0)
    return;
  do {
    int tag = dwarf_tag(&child);
    switch (tag) {
    case DW_TAG_subprogram:
    case DW_TAG_inlined_subroutine:
    case DW_TAG_entry_point: {
      Dwarf_Addr base, start, end;
      ptrdiff_t off = 0;
      while ((off = dwarf_ranges(&child, off, &base, &start, &end)) > 0)
        pprt__dw_index_add(ix, start, end, dwarf_dieoffset(&child), depth);
      walk(ix, &child, depth + 1);
      break;
    }
    case DW_TAG_lexical_block:
    case DW_TAG_namespace:
    case DW_TAG_module:
    case DW_TAG_try_block:
    case DW_TAG_catch_block:
      walk(ix, &child, depth + 1);
      break;
    default:
      break;
    }
  } while (!ix->err && dwarf_siblingof(&child, &child) == 0);
}

int pprt__dw_index_build(Dwarf_Die *cu, pprt__dw_cu_index *out) {
  memset(out, 0, sizeof *out);
  walk(out, cu, 0);
  return pprt__dw_index_finish(out);
}

/* The sections libdw loaded (dwarf_scopes.h). */
void pprt__dw_sections_get(Elf *elf, pprt__dw_sections *out) {
  memset(out, 0, sizeof *out);
  size_t shstrndx;
  if (elf == NULL || elf_getshdrstrndx(elf, &shstrndx) != 0)
    return;
  for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn)) != NULL;) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == NULL || sh.sh_type == SHT_NOBITS ||
        (sh.sh_flags & SHF_COMPRESSED))
      continue;
    const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
    const uint8_t **bytes = NULL;
    size_t *len = NULL;
    if (name == NULL)
      continue;
    if (strcmp(name, ".debug_line") == 0)
      bytes = &out->line, len = &out->line_len;
    else if (strcmp(name, ".debug_line_str") == 0)
      bytes = &out->line_str, len = &out->line_str_len;
    else if (strcmp(name, ".debug_str") == 0)
      bytes = &out->str, len = &out->str_len;
    else
      continue;
    Elf_Data *d = elf_getdata(scn, NULL);
    if (d != NULL && d->d_buf != NULL) {
      *bytes = d->d_buf;
      *len = d->d_size;
    }
  }
}
