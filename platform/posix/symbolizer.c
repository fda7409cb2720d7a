/* The symbolizer of core/platform.h, its format-neutral shell (see
 * platform/posix/symbolizer.h): the images seen and their executable
 * ranges, refreshed when the loader changes; each image read on first use;
 * dladdr as the fallback for an image whose table cannot be read.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/platform.h"
#include "platform/posix/symbolizer.h"

enum { IMAGE_UNREAD, IMAGE_TABLE, IMAGE_DLADDR };

typedef struct sym_slot {
  pprt__sym_image *img;
  int state;
  int live; /* still loaded as of the last snapshot */
} sym_slot;

/* An executable range of a live image: what an address is looked up in. */
typedef struct sym_range {
  uintptr_t start, limit;
  size_t slot;
} sym_range;

struct pprt__os_symbolizer {
  sym_slot *slot; /* every image ever seen: names stay valid until close */
  size_t nslot, slot_cap;
  sym_range *range; /* sorted by start */
  size_t nrange;
  uint64_t generation; /* the loader's when the last snapshot was taken */
};

typedef struct sym_snapshot_builder {
  pprt__sym_snapshot snap;
  size_t cap;
} sym_snapshot_builder;

int pprt__sym_snapshot_add(pprt__sym_snapshot *snap, pprt__sym_image *img) {
  sym_snapshot_builder *b = (sym_snapshot_builder *)snap;
  if (b->snap.n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 16;
    pprt__sym_image **grown = realloc(b->snap.img, cap * sizeof *grown);
    if (grown == NULL) {
      pprt__sym_image_free(img);
      return -ENOMEM;
    }
    b->snap.img = grown;
    b->cap = cap;
  }
  b->snap.img[b->snap.n++] = img;
  return 0;
}

/* The format's snapshot, or an error with nothing left to free. */
static int take_snapshot(sym_snapshot_builder *b) {
  memset(b, 0, sizeof *b);
  int rc = pprt__sym_snapshot_take(&b->snap);
  if (rc != 0) {
    for (size_t k = 0; k < b->snap.n; k++)
      pprt__sym_image_free(b->snap.img[k]);
    free(b->snap.img);
  }
  return rc;
}

static int range_order(const void *pa, const void *pb) {
  const sym_range *a = pa, *b = pb;
  return a->start < b->start ? -1 : a->start > b->start;
}

typedef struct range_builder {
  sym_range *r;
  size_t n, cap, slot;
} range_builder;

static int add_range(uintptr_t start, uintptr_t limit, void *ctx) {
  range_builder *b = ctx;
  if (b->n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 16;
    sym_range *grown = realloc(b->r, cap * sizeof *grown);
    if (grown == NULL)
      return -ENOMEM;
    b->r = grown;
    b->cap = cap;
  }
  b->r[b->n++] = (sym_range){start, limit, b->slot};
  return 0;
}

static int build_ranges(pprt__os_symbolizer *s) {
  range_builder b = {0};
  for (size_t i = 0; i < s->nslot; i++) {
    b.slot = i;
    if (s->slot[i].live && pprt__sym_image_ranges(s->slot[i].img, add_range, &b) != 0) {
      free(b.r);
      return -ENOMEM;
    }
  }
  qsort(b.r, b.n, sizeof *b.r, range_order);
  free(s->range);
  s->range = b.r;
  s->nrange = b.n;
  return 0;
}

/* Brings the image list up to date with a new snapshot: images still
 * loaded keep their tables, new ones are added, gone ones stop matching
 * addresses (their names stay valid until close). Consumes snap. */
static int merge_snapshot(pprt__os_symbolizer *s, pprt__sym_snapshot *snap) {
  for (size_t i = 0; i < s->nslot; i++)
    s->slot[i].live = 0;
  int rc = 0;
  for (size_t k = 0; k < snap->n; k++) {
    pprt__sym_image *img = snap->img[k];
    size_t i = 0;
    while (i < s->nslot && !pprt__sym_image_same(s->slot[i].img, img))
      i++;
    if (i < s->nslot || rc != 0) {
      if (i < s->nslot)
        s->slot[i].live = 1;
      pprt__sym_image_free(img);
      continue;
    }
    if (s->nslot == s->slot_cap) {
      size_t cap = s->slot_cap ? 2 * s->slot_cap : 16;
      sym_slot *grown = realloc(s->slot, cap * sizeof *grown);
      if (grown == NULL) {
        rc = -ENOMEM;
        pprt__sym_image_free(img);
        continue;
      }
      s->slot = grown;
      s->slot_cap = cap;
    }
    s->slot[s->nslot++] = (sym_slot){img, IMAGE_UNREAD, 1};
  }
  s->generation = snap->generation;
  free(snap->img);
  return rc != 0 ? rc : build_ranges(s);
}

int pprt__os_symbolizer_open(pprt__os_symbolizer **out) {
  pprt__os_symbolizer *s = calloc(1, sizeof *s);
  if (s == NULL)
    return -ENOMEM;
  sym_snapshot_builder b;
  int rc = take_snapshot(&b);
  if (rc == 0)
    rc = merge_snapshot(s, &b.snap);
  if (rc != 0) {
    pprt__os_symbolizer_close(s);
    return rc;
  }
  *out = s;
  return 0;
}

size_t pprt__sym_at_or_below(const void *v, size_t n, size_t stride, uintptr_t addr) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    uintptr_t at;
    memcpy(&at, (const char *)v + mid * stride, sizeof at);
    if (at <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static int count_underscores(const char *s) {
  int n = 0;
  while (s[n] == '_')
    n++;
  return n;
}

int pprt__sym_alias_order(int rank_a, const char *a, int rank_b, const char *b, int by_length) {
  if (rank_a != rank_b)
    return rank_a - rank_b;
  int ua = count_underscores(a), ub = count_underscores(b);
  if (ua != ub)
    return ua - ub;
  if (by_length) {
    size_t la = strlen(a), lb = strlen(b);
    if (la != lb)
      return la < lb ? -1 : 1;
  }
  return strcmp(a, b);
}

static const sym_range *find_range(const pprt__os_symbolizer *s, uintptr_t addr) {
  size_t lo = pprt__sym_at_or_below(s->range, s->nrange, sizeof *s->range, addr);
  if (lo == 0 || addr >= s->range[lo - 1].limit)
    return NULL;
  return &s->range[lo - 1];
}

int pprt__os_symbolize(pprt__os_symbolizer *s, uintptr_t addr, const char **name,
                       uintptr_t *offset) {
  const sym_range *r = find_range(s, addr);
  if (r == NULL && pprt__sym_generation() != s->generation) {
    /* Something was loaded since the snapshot. */
    sym_snapshot_builder b;
    if (take_snapshot(&b) == 0 && merge_snapshot(s, &b.snap) == 0)
      r = find_range(s, addr);
  }
  if (r == NULL)
    return -ENOENT;
  sym_slot *slot = &s->slot[r->slot];
  if (slot->state == IMAGE_UNREAD)
    slot->state = pprt__sym_image_read(slot->img) ? IMAGE_TABLE : IMAGE_DLADDR;
  if (slot->state == IMAGE_TABLE) {
    uintptr_t func;
    const char *found = pprt__sym_image_lookup(slot->img, addr, r->start, &func);
    if (found == NULL)
      return -ENOENT;
    *name = found;
    *offset = addr - func;
    return 0;
  }
  /* dladdr knows no sizes: trust its nearest symbol only within the
   * range. */
  Dl_info info;
  if (dladdr((const void *)addr, &info) == 0 || info.dli_sname == NULL || info.dli_saddr == NULL ||
      (uintptr_t)info.dli_saddr > addr || (uintptr_t)info.dli_saddr < r->start)
    return -ENOENT;
  *name = info.dli_sname;
  *offset = addr - (uintptr_t)info.dli_saddr;
  return 0;
}

void pprt__os_symbolizer_close(pprt__os_symbolizer *s) {
  if (s == NULL)
    return;
  for (size_t i = 0; i < s->nslot; i++)
    pprt__sym_image_free(s->slot[i].img);
  free(s->slot);
  free(s->range);
  free(s);
}
