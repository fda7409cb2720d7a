/* One debug section of an ELF file, read forward through a bounded window
 * whether it is stored compressed (SHF_COMPRESSED, ELFCOMPRESS_ZLIB) or
 * not: for pprt's own DWARF reader, which asks for a unit's bytes in
 * increasing section offset (addresses come sorted, and units are laid out
 * in address order), so only the window is resident where libdw
 * decompresses every debug section whole when it opens a file (10 MB for
 * glibc's separate debug file). An earlier offset is still served, by
 * inflating again from the section's start. */
#ifndef PPRT_PLATFORM_POSIX_DWARF_SECTION_H
#define PPRT_PLATFORM_POSIX_DWARF_SECTION_H

#include <stddef.h>
#include <stdint.h>

typedef struct pprt__dw_section {
  const uint8_t *raw; /* the section's bytes in the file (mapped) */
  size_t raw_len;
  uint64_t size; /* its bytes once inflated */
  size_t data;   /* compressed: where the zlib stream starts in raw */
  int compressed;
  void *z;      /* the inflate stream, while one is under way */
  uint8_t *win; /* inflated bytes [win_off, win_off + win_len) */
  size_t win_cap, win_len;
  uint64_t win_off;
  uint64_t inflated; /* bytes of the section inflated so far: win_off + win_len */
  unsigned restarts; /* inflations started again from a checkpoint, for tests */
  /* Copies of the inflate stream every cp_every bytes of output, so an
   * earlier offset restarts near it, not at the section's start (a
   * reference into another unit, a range list read out of order). At most
   * PPRT__DW_CHECKPOINTS of them: past that every other one is dropped
   * and cp_every doubles, so a section of any size costs at most that
   * many (about 40 KiB each). */
  void **cp;
  uint64_t *cp_off;
  size_t ncp;
  uint64_t cp_every;
  /* raw is a read-only private mapping of the file, whose pages the window
   * may give back behind it (pprt__dw_pages_drop); set by the caller after
   * init. Never for bytes in ordinary memory, which the kernel would zero. */
  int file_mapped;
  size_t dropped; /* raw bytes before this are given back */
} pprt__dw_section;

/* Bytes of inflated output between checkpoints at first: each holds zlib's
 * 32 KiB history and state (about 40 KiB), and a restart inflates at most
 * this much again (glibc's .debug_info: 22 checkpoints, 900 KiB). */
#define PPRT__DW_CHECKPOINT (256 * 1024)
#define PPRT__DW_CHECKPOINTS 32

/* Sets s over the bytes of a section as stored in the file; compressed is
 * its SHF_COMPRESSED flag, elf64 its file's class (the compression header
 * differs). Errors: -EINVAL (a header this reader does not know: zstd, or
 * too short), s is then empty. */
int pprt__dw_section_init(pprt__dw_section *s, const uint8_t *raw, size_t raw_len, int compressed,
                          int elf64);

/* Bytes [off, off + len) of the section, valid until the next call on s;
 * NULL when they run past its end, on a damaged stream, or on ENOMEM. A
 * compressed section keeps in memory the bytes from the lowest offset asked
 * since the last call onwards, and no more than the largest len asked. */
const uint8_t *pprt__dw_section_get(pprt__dw_section *s, uint64_t off, size_t len);

/* Gives the resident pages of the file's bytes [p, p + len) back to the
 * kernel. The file is mapped read-only and private, and never written, so
 * the pages stay in the page cache and a later read faults the same bytes
 * in again: every pointer into the mapping stays valid. What the reader
 * has read of a file then counts in the process's RSS only while it reads
 * it, as with pread into a buffer. A no-op where madvise cannot do it. */
void pprt__dw_pages_drop(const void *p, size_t len);

/* Frees the window and the inflate stream (not the file's bytes). */
void pprt__dw_section_free(pprt__dw_section *s);

#endif /* PPRT_PLATFORM_POSIX_DWARF_SECTION_H */
