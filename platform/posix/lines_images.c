/* The images and strings of the source-lines readers (lines_images.h). */
#include "platform/posix/lines_images.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int pprt__lines_images_open(pprt__lines_images *im, size_t sz, int (*used)(const void *element)) {
  memset(im, 0, sizeof *im);
  im->sz = sz;
  im->used = used;
  int rc = pprt__elf_snapshot_take(&im->snap);
  if (rc != 0)
    return rc;
  im->state = calloc(im->snap.n ? im->snap.n : 1, sz);
  if (im->state == NULL) {
    pprt__elf_snapshot_free(&im->snap);
    return -ENOMEM;
  }
  return 0;
}

void pprt__lines_images_close(pprt__lines_images *im, void (*release)(void *element)) {
  char *state = im->state, *retired = im->retired;
  for (size_t i = 0; state && i < im->snap.n; i++)
    release(state + i * im->sz);
  for (size_t i = 0; i < im->nretired; i++)
    release(retired + i * im->sz);
  free(im->state);
  free(im->retired);
  pprt__elf_snapshot_free(&im->snap);
  memset(im, 0, sizeof *im);
}

static int object_holds(const pprt__elf_object *obj, uintptr_t addr) {
  for (size_t j = 0; j < obj->phnum; j++) {
    const pprt__elf_phdr *ph = &obj->phdr[j];
    uintptr_t start = obj->bias + (uintptr_t)ph->p_vaddr;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && addr - start < (uintptr_t)ph->p_memsz)
      return 1;
  }
  return 0;
}

static size_t find(const pprt__lines_images *im, uintptr_t addr) {
  size_t i = 1;
  while (i <= im->snap.n && !object_holds(&im->snap.obj[i - 1], addr))
    i++;
  return i <= im->snap.n ? i : 0;
}

long pprt__lines_image_of(pprt__lines_images *im, uintptr_t addr) {
  size_t i = im->last;
  if (i == 0 || !object_holds(&im->snap.obj[i - 1], addr)) {
    i = find(im, addr);
    /* A reader kept for a whole trace session sees libraries loaded
     * after it opened: a new snapshot, the state of objects still loaded
     * kept, that of unloaded ones retired. */
    if (i == 0 && pprt__elf_loader_adds() != im->snap.adds &&
        pprt__elf_snapshot_renew(&im->snap, &im->state, im->sz, &im->retired, &im->nretired,
                                 im->used) == 0) {
      im->last = 0;
      i = find(im, addr);
    }
    if (i == 0)
      return -1;
    im->last = i;
  }
  return (long)i - 1;
}

struct pprt__lines_string {
  struct pprt__lines_string *next;
  char s[];
};

const char *pprt__lines_intern(pprt__lines_strings *t, char *s) {
  if (s == NULL)
    return NULL;
  size_t h = 5381;
  for (const char *c = s; *c; c++)
    h = h * 33 + (unsigned char)*c;
  h %= PPRT__LINES_PATH_BUCKETS;
  for (struct pprt__lines_string *j = t->bucket[h]; j != NULL; j = j->next)
    if (strcmp(j->s, s) == 0) {
      free(s);
      return j->s;
    }
  size_t n = strlen(s) + 1;
  struct pprt__lines_string *j = malloc(sizeof *j + n);
  if (j == NULL) {
    free(s);
    return NULL;
  }
  memcpy(j->s, s, n);
  free(s);
  j->next = t->bucket[h];
  t->bucket[h] = j;
  return j->s;
}

void pprt__lines_strings_free(pprt__lines_strings *t) {
  for (size_t b = 0; b < PPRT__LINES_PATH_BUCKETS; b++)
    for (struct pprt__lines_string *j = t->bucket[b], *next; j != NULL; j = next) {
      next = j->next;
      free(j);
    }
  memset(t, 0, sizeof *t);
}
