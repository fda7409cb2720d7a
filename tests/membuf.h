/* An in-memory pprt_writer for tests: what a profile or trace writes lands
 * in a growing buffer, and a failed allocation is reported as -ENOMEM. */
#ifndef PPRT_TESTS_MEMBUF_H
#define PPRT_TESTS_MEMBUF_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pprt.h"

typedef struct membuf {
  unsigned char *data;
  size_t len, cap;
} membuf;

static inline int mem_write(void *ctx, const void *data, size_t len) {
  membuf *m = ctx;
  if (m->len + len > m->cap) {
    size_t ncap = m->cap ? m->cap : 4096;
    while (ncap < m->len + len)
      ncap *= 2;
    unsigned char *p = realloc(m->data, ncap);
    if (p == NULL)
      return -ENOMEM;
    m->data = p;
    m->cap = ncap;
  }
  memcpy(m->data + m->len, data, len);
  m->len += len;
  return 0;
}

static inline pprt_writer mem_writer(membuf *m) {
  pprt_writer w = {mem_write, m};
  return w;
}

static inline void mem_free(membuf *m) {
  free(m->data);
  memset(m, 0, sizeof *m);
}

#endif /* PPRT_TESTS_MEMBUF_H */
