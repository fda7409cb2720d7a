/* The symbolizer of core/platform.h is one shell (platform/posix/symbolizer.c)
 * around one object format's reader (ELF: platform/posix/elf_symbols.c;
 * Mach-O: platform/darwin/symbols.c). The shell keeps every image it has
 * seen, finds the image an address falls in through a sorted table of
 * executable ranges, takes a new snapshot when an address falls in none
 * and the loader has changed, has each image's symbols read the first time
 * an address falls in it, and asks dladdr where they cannot be read. The
 * format's reader supplies the images and their tables through the
 * functions declared here.
 */
#ifndef PPRT_PLATFORM_POSIX_SYMBOLIZER_H
#define PPRT_PLATFORM_POSIX_SYMBOLIZER_H

#include <stddef.h>
#include <stdint.h>

/* One loaded image as the format's reader knows it; opaque to the shell,
 * which owns each one it keeps until pprt__os_symbolizer_close. */
typedef struct pprt__sym_image pprt__sym_image;

/* The loaded images, the main executable first, each allocated by the
 * reader, and the loader's generation when they were listed. */
typedef struct pprt__sym_snapshot {
  pprt__sym_image **img;
  size_t n;
  uint64_t generation;
} pprt__sym_snapshot;

/* Lists the loaded images into snap, which starts empty, adding each with
 * pprt__sym_snapshot_add, and sets its generation. On an error the shell
 * frees what was added. Errors: -ENOMEM. */
int pprt__sym_snapshot_take(pprt__sym_snapshot *snap);

/* Appends img to snap, which then owns it (and frees it on failure).
 * Errors: -ENOMEM. */
int pprt__sym_snapshot_add(pprt__sym_snapshot *snap, pprt__sym_image *img);

/* The loader's generation now, which differs from a snapshot's once an
 * image has been loaded since: cheap enough to ask for every address that
 * falls in no known image. */
uint64_t pprt__sym_generation(void);

/* 1 when a (from an earlier snapshot) and b (from a new one) are the same
 * loaded image, so the table read for a still serves. */
int pprt__sym_image_same(const pprt__sym_image *a, const pprt__sym_image *b);

/* Calls fn(start, limit, ctx) for each executable range of img; stops and
 * returns fn's value when it is nonzero. */
int pprt__sym_image_ranges(const pprt__sym_image *img,
                           int (*fn)(uintptr_t start, uintptr_t limit, void *ctx), void *ctx);

/* Reads img's symbols, once. Returns 1 when it has a table to look up, 0
 * when it has none (the shell then asks dladdr). A failure only makes the
 * result poorer. */
int pprt__sym_image_read(pprt__sym_image *img);

/* The name of the function covering addr in img's table, with its first
 * address in *func; NULL when no symbol covers it. seg_start is the first
 * address of the executable range addr is in. */
const char *pprt__sym_image_lookup(const pprt__sym_image *img, uintptr_t addr, uintptr_t seg_start,
                                   uintptr_t *func);

/* Releases img, its table and any file it mapped. */
void pprt__sym_image_free(pprt__sym_image *img);

/* ---- for the readers' tables ---- */

/* How many entries of the sorted array v (n entries, stride bytes apart,
 * each starting with its address as a uintptr_t) have an address at or
 * below addr: entry count - 1 is the last one that can hold addr. */
size_t pprt__sym_at_or_below(const void *v, size_t n, size_t stride, uintptr_t addr);

/* Which of two names of one address to show: the lower rank first (the
 * format's binding preference), then fewer leading underscores (the name a
 * user wrote, not an internal alias), then, with by_length, the shorter
 * name (glibc's free is also cfree), then strcmp, a stable choice from run
 * to run. Negative when a goes first. */
int pprt__sym_alias_order(int rank_a, const char *a, int rank_b, const char *b, int by_length);

#endif /* PPRT_PLATFORM_POSIX_SYMBOLIZER_H */
