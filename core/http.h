/* The HTTP endpoint's two halves (pprt_http_start in pprt.h): core/http.c
 * serves (libmicrohttpd, routing, the worker thread that finishes timed
 * profiles) and core/http_content.c makes the bodies. A reply is built
 * into memory first, so a failure can still be reported with a status. */
#ifndef PPRT_CORE_HTTP_H
#define PPRT_CORE_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "core/heap.h"
#include "pprt.h"

/* A growing buffer and the writer onto it. err is the first failure
 * (-ENOMEM, or -EFBIG past PPRT__HTTP_MAX_BODY). */
typedef struct pprt__http_buf {
  char *data;
  size_t len, cap;
  int err;
} pprt__http_buf;

#define PPRT__HTTP_MAX_BODY ((size_t)1 << 30)

pprt_writer pprt__http_buf_writer(pprt__http_buf *b);
void pprt__http_buf_free(pprt__http_buf *b);

/* What a request is answered with. */
typedef struct pprt__http_reply {
  int status;
  const char *type;  /* Content-Type */
  char filename[32]; /* Content-Disposition: attachment when not empty */
  int go_error;      /* an error pprof's client shows: X-Go-Pprof: 1 */
  pprt__http_buf body;
} pprt__http_reply;

/* A text/plain reply with this status. */
void pprt__http_error(pprt__http_reply *r, int status, int go_error, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* /debug/pprof/: the HTML index. */
void pprt__http_index(pprt__http_reply *r);
/* /debug/pprof/cmdline: the arguments, NUL-separated. */
void pprt__http_cmdline(pprt__http_reply *r);
/* /debug/pprof/symbol: addrs are '+' (or space) separated numbers, or NULL
 * for the probe that only asks whether symbols are served. */
void pprt__http_symbol(pprt__http_reply *r, const char *addrs);
/* /debug/pprof/heap and allocs: name is "heap" or "allocs"; since NULL for
 * the profile as of now, else the change since that mark; debug 1 for the
 * text form. */
void pprt__http_heap(pprt__http_reply *r, const char *name, const pprt__heap_mark *since,
                     int debug);
/* Cumulative heap and allocs bodies are shared by the requests within a
 * window (250 ms) of the moment the body's build began; for tests, another
 * window (0: the default). Called on the thread that serves requests, or
 * with the endpoint stopped. */
void pprt__http_set_share_window(uint64_t ns);
/* Frees the shared bodies (the endpoint stops). */
void pprt__http_shared_clear(void);
/* /debug/pprof/trace?format=json: converts the trace in r->body in place. */
void pprt__http_trace_to_json(pprt__http_reply *r);
/* A finished binary profile or trace in r->body, named filename. */
void pprt__http_attachment(pprt__http_reply *r, const char *filename);

#endif /* PPRT_CORE_HTTP_H */
