/* Mach-O images as dyld lists them, shared by the Darwin images and symbols
 * files: a snapshot of dyld's image list (main executable first) and a
 * bounds-checked walk over an image's load commands. Only 64-bit images:
 * every macOS pprt supports runs 64-bit processes only.
 */
#ifndef PPRT_PLATFORM_DARWIN_MACHO_H
#define PPRT_PLATFORM_DARWIN_MACHO_H

#include <stddef.h>
#include <stdint.h>

#include <mach-o/loader.h>

/* One image from dyld's list. */
typedef struct pprt__macho_image {
  const struct mach_header_64 *header; /* in memory, mapped while loaded */
  intptr_t slide;                      /* runtime minus link-time address */
  char *path;                          /* absolute; realpath where the file exists */
  uint8_t uuid[16];                    /* LC_UUID */
  int has_uuid;
  int is_main; /* filetype MH_EXECUTE */
} pprt__macho_image;

/* dyld's images, the main executable first. Errors: -ENOMEM. */
typedef struct pprt__macho_snapshot {
  pprt__macho_image *img;
  size_t n;
  uint32_t dyld_count; /* _dyld_image_count() when taken */
} pprt__macho_snapshot;
int pprt__macho_snapshot_take(pprt__macho_snapshot *snap);
void pprt__macho_snapshot_free(pprt__macho_snapshot *snap);

/* The load command after prev (the first when prev is NULL), or NULL at the
 * end or at a command whose size would leave header->sizeofcmds. */
const struct load_command *pprt__macho_next_command(const struct mach_header_64 *header,
                                                    const struct load_command *prev);

/* The executable, nonempty segment after prev (the first when prev is
 * NULL), or NULL: an image's code, as the image list and the symbolizer
 * see it. */
const struct segment_command_64 *pprt__macho_next_code(const struct mach_header_64 *header,
                                                       const struct segment_command_64 *prev);

#endif /* PPRT_PLATFORM_DARWIN_MACHO_H */
