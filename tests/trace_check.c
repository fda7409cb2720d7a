/* A test tool: decodes a trace file, prints what is in it, one fact a line,
 * and writes its Chrome Trace Event JSON export. The preload test reads the
 * facts; the JSON goes to the python3 check where there is one.
 *
 * Usage: trace_check TRACE [JSON_OUT]
 * Exit status: 0, or 1 with the decoder's "offset N: reason" on stderr. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/trace_format.h"
#include "pprt.h"
#include "read/trace_decode.h"
#include "read/trace_json.h"

static int file_write(void *ctx, const void *data, size_t len) {
  return fwrite(data, 1, len, ctx) == len ? 0 : -EIO;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s TRACE [JSON_OUT]\n", argv[0]);
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (f == NULL) {
    perror(argv[1]);
    return 1;
  }
  size_t cap = 1 << 20, len = 0;
  unsigned char *data = malloc(cap);
  size_t n;
  while (data && (n = fread(data + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap)
      data = realloc(data, cap *= 2);
  }
  fclose(f);
  if (data == NULL)
    return 1;
  pprt__trace *t;
  char err[256];
  if (pprt__trace_decode(data, len, 0, &t, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", argv[1], err);
    return 1;
  }
  printf("bytes %zu\ngenerations %" PRIu64 "\nevents %zu\n", len, t->ngens, t->nevents);
  size_t by_type[PPRT__EV_LAST + 1] = {0};
  for (size_t i = 0; i < t->nevents; i++)
    by_type[t->events[i].type]++;
  for (unsigned k = PPRT__EV_FIRST; k <= PPRT__EV_LAST; k++)
    printf("%s %zu\n", pprt__trace_spec(k)->name, by_type[k]);
  for (size_t i = 0; i < t->nthreads; i++) {
    int start = 0, end = 0;
    for (size_t k = 0; k < t->nevents; k++)
      if (t->events[k].emitter == t->threads[i].tid) {
        start |= t->events[k].type == PPRT__EV_THREAD_START;
        end |= t->events[k].type == PPRT__EV_THREAD_END;
      }
    printf("thread %" PRIu64 " name=%s start=%d end=%d\n", t->threads[i].tid,
           t->threads[i].name.s ? t->threads[i].name.s : "-", start, end);
  }
  uint64_t lost = 0;
  for (size_t i = 0; i < t->nlost; i++)
    lost += t->lost[i].count;
  printf("lost %" PRIu64 "\n", lost);
  int rc = 0;
  if (argc > 2) {
    FILE *out = fopen(argv[2], "w");
    pprt_writer w = {file_write, out};
    rc = out ? pprt__trace_export_json(t, w) : -errno;
    if (out && fclose(out) != 0 && rc == 0)
      rc = -EIO;
    if (rc != 0)
      fprintf(stderr, "export to %s: %s\n", argv[2], pprt_strerror(rc));
  }
  pprt__trace_free(t);
  free(data);
  return rc ? 1 : 0;
}
