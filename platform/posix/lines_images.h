/* What both source-lines readers (dwarf_read.c, pprt's own; dwarf_lines.c,
 * libdw's) keep besides the debug information itself: the loaded images
 * they read, with one element of reader state per image, and the strings
 * they hand out. */
#ifndef PPRT_PLATFORM_POSIX_LINES_IMAGES_H
#define PPRT_PLATFORM_POSIX_LINES_IMAGES_H

#include <stddef.h>
#include <stdint.h>

#include "platform/posix/elf.h"

/* A snapshot of the loaded objects and, parallel to it, one element of
 * state (size sz) per object; elements of objects unloaded since stay in
 * retired until close, since names handed out from them must stay valid. */
typedef struct pprt__lines_images {
  pprt__elf_snapshot snap;
  void *state; /* snap.n elements of sz bytes, zeroed at first */
  size_t sz;
  void *retired;
  size_t nretired;
  size_t last;                      /* the object of the previous address, + 1 */
  int (*used)(const void *element); /* whether an element holds anything */
} pprt__lines_images;

/* Errors: -ENOMEM. */
int pprt__lines_images_open(pprt__lines_images *im, size_t sz, int (*used)(const void *element));

/* Calls release on every element, current and retired, then frees all. */
void pprt__lines_images_close(pprt__lines_images *im, void (*release)(void *element));

/* The index of the object whose executable segment holds addr (its state
 * is im->state's element of that index), taking a new snapshot when the
 * loader has added objects since; -1 for an address in no object. A new
 * snapshot moves the elements: pointers to them do not survive a call. */
long pprt__lines_image_of(pprt__lines_images *im, uintptr_t addr);

#define PPRT__LINES_PATH_BUCKETS 1024

/* File and function names handed out, one copy of each, kept until close. */
typedef struct pprt__lines_strings {
  struct pprt__lines_string *bucket[PPRT__LINES_PATH_BUCKETS];
} pprt__lines_strings;

/* s (malloc'd, consumed) as a string that stays until
 * pprt__lines_strings_free; NULL for NULL, or on ENOMEM. */
const char *pprt__lines_intern(pprt__lines_strings *t, char *s);
void pprt__lines_strings_free(pprt__lines_strings *t);

#endif /* PPRT_PLATFORM_POSIX_LINES_IMAGES_H */
