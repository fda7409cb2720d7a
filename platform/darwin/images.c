/* Loaded Mach-O images (Darwin): pprt__os_image_each, and the snapshot of
 * dyld's image list that the symbolizer shares.
 *
 * dyld's list is read by index (_dyld_image_count, _dyld_get_image_header),
 * which another thread's dlopen or dlclose can shift under the walk; an
 * index that no longer has an image is skipped, as the contract allows.
 * Paths are resolved with realpath; images in the dyld shared cache have no
 * file on disk since macOS 11 and keep the path dyld gives them.
 */
#include <errno.h>
#include <limits.h>
#include <mach-o/dyld.h>
#include <stdlib.h>
#include <string.h>

#include "core/platform.h"
#include "platform/darwin/macho.h"

#if !defined(__LP64__)
#error "pprt's Darwin backend reads 64-bit Mach-O images only"
#endif

const struct load_command *pprt__macho_next_command(const struct mach_header_64 *header,
                                                    const struct load_command *prev) {
  const uint8_t *first = (const uint8_t *)(header + 1);
  const uint8_t *end = first + header->sizeofcmds;
  const uint8_t *at = prev ? (const uint8_t *)prev + prev->cmdsize : first;
  if (at >= end || (size_t)(end - at) < sizeof(struct load_command))
    return NULL;
  const struct load_command *lc = (const struct load_command *)at;
  if (lc->cmdsize < sizeof *lc || lc->cmdsize > (size_t)(end - at))
    return NULL;
  return lc;
}

const struct segment_command_64 *pprt__macho_next_code(const struct mach_header_64 *header,
                                                       const struct segment_command_64 *prev) {
  for (const struct load_command *lc =
           pprt__macho_next_command(header, (const struct load_command *)prev);
       lc; lc = pprt__macho_next_command(header, lc)) {
    if (lc->cmd != LC_SEGMENT_64 || lc->cmdsize < sizeof(struct segment_command_64))
      continue;
    const struct segment_command_64 *seg = (const struct segment_command_64 *)lc;
    if ((seg->initprot & VM_PROT_EXECUTE) && seg->vmsize != 0)
      return seg;
  }
  return NULL;
}

static char *image_path(const char *name, int is_main) {
  char buf[PATH_MAX];
  if (name != NULL && realpath(name, buf) != NULL)
    return strdup(buf);
  /* dyld's name for the main executable can be the relative argv path. */
  if (is_main && pprt__os_exe_path(buf, sizeof buf) == 0)
    return strdup(buf);
  return strdup(name != NULL && name[0] != '\0' ? name : "[unknown]");
}

static void image_uuid(pprt__macho_image *img) {
  for (const struct load_command *lc = pprt__macho_next_command(img->header, NULL); lc;
       lc = pprt__macho_next_command(img->header, lc)) {
    if (lc->cmd == LC_UUID && lc->cmdsize >= sizeof(struct uuid_command)) {
      memcpy(img->uuid, ((const struct uuid_command *)lc)->uuid, sizeof img->uuid);
      img->has_uuid = 1;
      return;
    }
  }
}

int pprt__macho_snapshot_take(pprt__macho_snapshot *snap) {
  memset(snap, 0, sizeof *snap);
  uint32_t count = _dyld_image_count();
  snap->dyld_count = count;
  snap->img = calloc(count ? count : 1, sizeof *snap->img);
  if (snap->img == NULL)
    return -ENOMEM;
  for (uint32_t i = 0; i < count; i++) {
    const struct mach_header *mh = _dyld_get_image_header(i);
    if (mh == NULL || mh->magic != MH_MAGIC_64)
      continue;
    pprt__macho_image *img = &snap->img[snap->n];
    img->header = (const struct mach_header_64 *)mh;
    img->slide = _dyld_get_image_vmaddr_slide(i);
    img->is_main = mh->filetype == MH_EXECUTE;
    img->path = image_path(_dyld_get_image_name(i), img->is_main);
    if (img->path == NULL) {
      pprt__macho_snapshot_free(snap);
      return -ENOMEM;
    }
    image_uuid(img);
    snap->n++;
  }
  /* dyld lists the main executable first; make sure of it. */
  for (size_t i = 1; i < snap->n; i++) {
    if (snap->img[i].is_main && !snap->img[0].is_main) {
      pprt__macho_image main = snap->img[i];
      memmove(&snap->img[1], &snap->img[0], i * sizeof main);
      snap->img[0] = main;
      break;
    }
  }
  return 0;
}

void pprt__macho_snapshot_free(pprt__macho_snapshot *snap) {
  for (size_t i = 0; i < snap->n; i++)
    free(snap->img[i].path);
  free(snap->img);
  memset(snap, 0, sizeof *snap);
}

static int image_segments(const pprt__macho_image *mi,
                          int (*fn)(const pprt__os_image *img, void *ctx), void *ctx) {
  for (const struct segment_command_64 *seg = pprt__macho_next_code(mi->header, NULL); seg;
       seg = pprt__macho_next_code(mi->header, seg)) {
    pprt__os_image img = {
        .path = mi->path,
        .start = (uintptr_t)seg->vmaddr + (uintptr_t)mi->slide,
        .limit = (uintptr_t)seg->vmaddr + (uintptr_t)mi->slide + (uintptr_t)seg->vmsize,
        .file_offset = seg->fileoff,
        .load_bias = (uintptr_t)mi->slide,
        .build_id = mi->has_uuid ? mi->uuid : NULL,
        .build_id_len = mi->has_uuid ? sizeof mi->uuid : 0,
        .is_main = mi->is_main,
    };
    int rc = fn(&img, ctx);
    if (rc != 0)
      return rc;
  }
  return 0;
}

int pprt__os_image_each(int (*fn)(const pprt__os_image *img, void *ctx), void *ctx) {
  pprt__macho_snapshot snap;
  int rc = pprt__macho_snapshot_take(&snap);
  for (size_t i = 0; rc == 0 && i < snap.n; i++)
    rc = image_segments(&snap.img[i], fn, ctx);
  pprt__macho_snapshot_free(&snap);
  return rc;
}

/* dyld has no add/remove counter to read (its callbacks cannot be removed
 * again, which a library that may be unloaded must not leave behind): the
 * image count, and the header of the newest image, which a dlopen appends.
 * A dlclose of the newest image followed by a dlopen of another at the
 * same address goes unseen. */
uint64_t pprt__os_loader_generation(void) {
  uint32_t n = _dyld_image_count();
  const struct mach_header *last = n ? _dyld_get_image_header(n - 1) : NULL;
  return (uint64_t)n ^ ((uint64_t)(uintptr_t)last << 16);
}
