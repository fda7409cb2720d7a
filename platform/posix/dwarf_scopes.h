/* What the libdw source-lines reader (dwarf_lines.c) takes from libdw
 * besides lines: the per-unit index (dwarf_index.h) filled from libdw's
 * DIEs, and the section bytes libdw loaded for the line-program
 * interpreter (dwarf_lineprog.h). */
#ifndef PPRT_PLATFORM_POSIX_DWARF_SCOPES_H
#define PPRT_PLATFORM_POSIX_DWARF_SCOPES_H

#include <elfutils/libdw.h>

#include "platform/posix/dwarf_index.h"
#include "platform/posix/dwarf_lineprog.h"

/* Builds the index of cu by one walk of its DIEs. Errors: -ENOMEM (out is
 * left empty). */
int pprt__dw_index_build(Dwarf_Die *cu, pprt__dw_cu_index *out);

/* The sections of elf as libdw's dwarf_begin_elf left them: it
 * decompresses the debug sections in place (elf_compress), so their bytes
 * cost nothing more. A section still compressed, or absent, is empty: a
 * unit's lines then come from libdw. */
void pprt__dw_sections_get(Elf *elf, pprt__dw_sections *out);

#endif /* PPRT_PLATFORM_POSIX_DWARF_SCOPES_H */
