/* The profile builder's link to the platform: mappings from the loaded
 * images and frames from the write-time symbolizer (core/symbolize.h), so
 * the CPU and heap profilers write profiles in one call. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/platform.h"
#include "core/profile.h"
#include "core/symbolize.h"

static int add_image(const pprt__os_image *img, void *ctx) {
  pprt__profile *p = ctx;
  /* Build ids as pprof and `readelf -n` print them: lowercase hex. */
  char hex[2 * 64 + 1];
  size_t n = img->build_id_len < 64 ? img->build_id_len : 64;
  for (size_t i = 0; i < n; i++)
    snprintf(hex + 2 * i, 3, "%02x", img->build_id[i]);
  hex[2 * n] = '\0';
  pprt__mapping_info m = {img->start, img->limit, img->file_offset, img->path,
                          n ? hex : NULL};
  int rc = pprt__profile_add_mapping(p, &m);
  return rc == -EINVAL ? 0 : rc; /* an empty segment is nothing to map */
}

int pprt__profile_add_os_mappings(pprt__profile *p) {
  return pprt__os_image_each(add_image, p);
}

int pprt__profile_write_os(pprt__profile *p, int symbolize, pprt_writer out) {
  pprt__symbolizer *s = NULL;
  /* Without a symbolizer the profile is still complete: addresses and
   * mappings, which pprof symbolizes from the binaries. */
  if (symbolize && pprt__symbolizer_open(&s, PPRT_SYMBOLIZE_DEFAULT) != 0)
    s = NULL;
  uint64_t *addrs = NULL;
  size_t naddrs = 0;
  /* Best effort: without the batch each address is looked up on its own. */
  if (s != NULL && pprt__profile_pending_addrs(p, &addrs, &naddrs) == 0)
    (void)pprt__symbolizer_prepare(s, addrs, naddrs);
  free(addrs);
  /* The note belongs to this write: a checkpoint's profile is written again. */
  pprt__profile_mark mark = pprt__profile_get_mark(p);
  const char *note = pprt__symbolizer_note(s);
  int rc = note ? pprt__profile_add_comment(p, note) : 0;
  if (rc == 0)
    rc = pprt__profile_write(p, s ? pprt__symbolizer_frames : NULL, s, out);
  pprt__profile_rewind(p, mark);
  pprt__symbolizer_close(s);
  return rc;
}
