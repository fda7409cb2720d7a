/* The HTTP endpoint's bodies (core/http.h): the index, cmdline, symbol,
 * the heap profiles and their text form, and the trace's JSON form. Each
 * fills a reply in memory; core/http.c sends it. Runs on the endpoint's
 * own threads, whose allocations the heap sampler ignores.
 *
 * Divisions: the buffer writer; replies; the small pages; heap profiles;
 * traces. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/heap.h"
#include "core/http.h"
#include "core/platform.h"
#include "core/profile.h"
#include "pprt.h"
#include "read/json.h"
#include "read/profile_decode.h"
#include "read/trace_decode.h"
#include "read/trace_json.h"

/* ---- the buffer writer ------------------------------------------------------------- */

static int buf_write(void *ctx, const void *data, size_t len) {
  pprt__http_buf *b = ctx;
  if (b->err)
    return b->err;
  if (len > PPRT__HTTP_MAX_BODY - b->len)
    return b->err = -EFBIG;
  if (b->len + len > b->cap) {
    size_t ncap = b->cap ? b->cap : 4096;
    while (ncap < b->len + len)
      ncap *= 2;
    char *n = realloc(b->data, ncap);
    if (n == NULL)
      return b->err = -ENOMEM;
    b->data = n;
    b->cap = ncap;
  }
  memcpy(b->data + b->len, data, len);
  b->len += len;
  return 0;
}

pprt_writer pprt__http_buf_writer(pprt__http_buf *b) {
  pprt_writer w = {buf_write, b};
  return w;
}

void pprt__http_buf_free(pprt__http_buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

static void buf_printf(pprt__http_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void buf_put(void *ctx, const char *s, size_t n) {
  buf_write(ctx, s, n);
}

static void buf_printf(pprt__http_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = pprt__put_vformat(buf_put, b, fmt, ap);
  va_end(ap);
  if (rc != 0 && b->err == 0)
    b->err = rc;
}

/* ---- replies ------------------------------------------------------------------------ */

void pprt__http_error(pprt__http_reply *r, int status, int go_error, const char *fmt, ...) {
  pprt__http_buf_free(&r->body);
  r->status = status;
  r->type = "text/plain; charset=utf-8";
  r->filename[0] = '\0';
  r->go_error = go_error;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  buf_printf(&r->body, "%s\n", msg);
}

/* A body that could not be made is a 500 that says why. */
static void fail(pprt__http_reply *r, const char *what, int err) {
  pprt__http_error(r, 500, 1, "Could not %s: %s", what, pprt_strerror(err));
}

void pprt__http_attachment(pprt__http_reply *r, const char *filename) {
  if (r->body.err) {
    fail(r, "write the profile", r->body.err);
    return;
  }
  r->status = 200;
  r->type = "application/octet-stream";
  snprintf(r->filename, sizeof r->filename, "%s", filename);
}

/* ---- the small pages -------------------------------------------------------------------- */

static const struct {
  const char *name, *what;
} pages[] = {
    {"allocs", "A sampling of all past memory allocations"},
    {"cmdline", "The command line invocation of the current program"},
    {"heap", "A sampling of memory allocations of live objects. You can specify the gc GET "
             "parameter to run GC before taking the heap sample (pprt: ignored)."},
    {"profile", "CPU profile. You can specify the duration in the seconds GET parameter. After "
                "you get the profile file, use the go tool pprof command to investigate the "
                "profile."},
    {"symbol", "Maps program counters to function names (pprof's symbolz protocol)."},
    {"trace", "A trace of execution of the current program in pprt's trace format (format=json: "
              "Chrome Trace Event JSON). You can specify the duration in the seconds GET "
              "parameter."},
};

void pprt__http_index(pprt__http_reply *r) {
  pprt__http_buf *b = &r->body;
  buf_printf(b, "<html>\n<head>\n<title>/debug/pprof/</title>\n</head>\n<body>\n"
                "/debug/pprof/<br>\n<br>\nTypes of profiles available:\n<table>\n"
                "<thead><td>Count</td><td>Profile</td></thead>\n");
  for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++)
    buf_printf(b, "<tr><td></td><td><a href='%s%s'>%s</a></td></tr>\n", pages[i].name,
               strcmp(pages[i].name, "heap") == 0 || strcmp(pages[i].name, "allocs") == 0
                   ? "?debug=1"
                   : "",
               pages[i].name);
  buf_printf(b, "</table>\n<br>\n<p>\nProfile Descriptions:\n<ul>\n");
  for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++)
    buf_printf(b, "<li><div class=profile-name>%s: </div> %s</li>\n", pages[i].name, pages[i].what);
  buf_printf(b, "</ul>\n</p>\n<p>Served by pprt %s.</p>\n</body>\n</html>\n", pprt_version());
  if (b->err) {
    fail(r, "write the index", b->err);
    return;
  }
  r->status = 200;
  r->type = "text/html; charset=utf-8";
}

void pprt__http_cmdline(pprt__http_reply *r) {
  char line[65536];
  size_t n = 0;
  int rc = pprt__os_cmdline(line, sizeof line, &n);
  if (rc != 0) {
    fail(r, "read the command line", rc);
    return;
  }
  /* Go joins the arguments with NULs, with none after the last. */
  if (n > 0 && line[n - 1] == '\0')
    n--;
  buf_write(&r->body, line, n);
  r->status = 200;
  r->type = "text/plain; charset=utf-8";
}

void pprt__http_symbol(pprt__http_reply *r, const char *addrs) {
  pprt__http_buf *b = &r->body;
  /* pprof first asks with no address: this line says symbols are served. */
  buf_printf(b, "num_symbols: 1\n");
  pprt__os_symbolizer *s = NULL;
  if (addrs && *addrs && pprt__os_symbolizer_open(&s) != 0) {
    fail(r, "open the symbolizer", -ENOMEM);
    return;
  }
  const char *p = addrs ? addrs : "";
  while (*p) {
    size_t k = strcspn(p, "+ ");
    char word[32];
    if (k > 0 && k < sizeof word) {
      memcpy(word, p, k);
      word[k] = '\0';
      char *end;
      uint64_t pc = strtoull(word, &end, 0);
      const char *name;
      uintptr_t off;
      if (*end == '\0' && pc != 0 && pprt__os_symbolize(s, (uintptr_t)pc, &name, &off) == 0)
        buf_printf(b, "%#" PRIx64 " %s\n", pc, name);
    }
    p += k;
    if (*p)
      p++;
  }
  pprt__os_symbolizer_close(s);
  if (b->err) {
    fail(r, "write the symbols", b->err);
    return;
  }
  r->status = 200;
  r->type = "text/plain; charset=utf-8";
}

/* ---- heap profiles ----------------------------------------------------------------------- */

static const char *str_at(const Pprt__Profile *p, int64_t i) {
  return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "";
}

static const Pprt__Location *find_location(const Pprt__Profile *p, uint64_t id) {
  /* pprt's builder numbers locations 1..n in order. */
  if (id >= 1 && id <= p->n_location && p->location[id - 1]->id == id)
    return p->location[id - 1];
  for (size_t i = 0; i < p->n_location; i++)
    if (p->location[i]->id == id)
      return p->location[i];
  return NULL;
}

static const char *function_name(const Pprt__Profile *p, uint64_t id) {
  for (size_t i = 0; i < p->n_function; i++)
    if (p->function[i]->id == id)
      return str_at(p, p->function[i]->name);
  return "";
}

/* Go's debug=1 heap form: a header with the totals, then one line per
 * sample ("inuse_objects: inuse_bytes [alloc_objects: alloc_bytes] @ pcs")
 * followed by a "#" line per frame. Made from the profile itself, so the
 * two forms never disagree. */
static void heap_text(pprt__http_reply *r, const pprt__http_buf *gz, size_t rate) {
  Pprt__Profile *p;
  char err[128];
  int rc = pprt__profile_decode(gz->data, gz->len, &p, err, sizeof err);
  if (rc != 0) {
    fail(r, "read back the heap profile", rc);
    return;
  }
  int64_t tot[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < p->n_sample; i++)
    for (size_t j = 0; j < 4 && j < p->sample[i]->n_value; j++)
      tot[j] += p->sample[i]->value[j];
  pprt__http_buf *b = &r->body;
  buf_printf(b, "heap profile: %" PRId64 ": %" PRId64 " [%" PRId64 ": %" PRId64 "] @ heap/%zu\n",
             tot[2], tot[3], tot[0], tot[1], rate * 2);
  for (size_t i = 0; i < p->n_sample; i++) {
    const Pprt__Sample *s = p->sample[i];
    if (s->n_value < 4)
      continue;
    buf_printf(b, "%" PRId64 ": %" PRId64 " [%" PRId64 ": %" PRId64 "] @", s->value[2], s->value[3],
               s->value[0], s->value[1]);
    for (size_t k = 0; k < s->n_location_id; k++) {
      const Pprt__Location *l = find_location(p, s->location_id[k]);
      buf_printf(b, " %#" PRIx64, l ? l->address : 0);
    }
    buf_printf(b, "\n");
    for (size_t k = 0; k < s->n_location_id; k++) {
      const Pprt__Location *l = find_location(p, s->location_id[k]);
      if (l == NULL)
        continue;
      const char *fn = l->n_line ? function_name(p, l->line[0]->function_id) : "";
      buf_printf(b, "#\t%#" PRIx64 "\t%s\n", l->address, *fn ? fn : "?");
    }
    buf_printf(b, "\n");
  }
  pprt__profile_decoded_free(p);
  if (b->err) {
    fail(r, "write the heap profile", b->err);
    return;
  }
  r->status = 200;
  r->type = "text/plain; charset=utf-8";
}

/* The cumulative profiles (heap and allocs without seconds) are shared:
 * a body is served again to the requests that come within the window of
 * the moment its build began. Twenty scrapers each paid a whole build
 * (the table walk, symbolizing, encoding, gzip) for bodies that differed
 * only by a few milliseconds of allocations; a cumulative profile 250 ms
 * old is indistinguishable for a scraper, and no response is older than
 * that. Requests that arrive while a body is built wait for it anyway:
 * libmicrohttpd's one thread makes these replies in turn, and it is the
 * only thread that reads or fills the slots (the worker makes only
 * deltas, which have their own baselines and are never shared). */
#define SHARE_WINDOW_NS ((uint64_t)250 * 1000 * 1000)

static struct shared {
  pprt__http_buf body; /* gzip'd profile; empty: none */
  uint64_t begun_ns;   /* monotonic, before the heap was read */
} g_shared[2];         /* heap, allocs */
static _Atomic uint64_t g_share_window_ns = SHARE_WINDOW_NS;

void pprt__http_set_share_window(uint64_t ns) {
  atomic_store(&g_share_window_ns, ns ? ns : SHARE_WINDOW_NS);
}

void pprt__http_shared_clear(void) {
  for (size_t i = 0; i < sizeof g_shared / sizeof g_shared[0]; i++)
    pprt__http_buf_free(&g_shared[i].body);
}

/* The shared body of this profile, built now unless the one there is
 * recent enough; NULL (*rc set) when it could not be built. */
static const pprt__http_buf *shared_body(int allocs, int *rc) {
  struct shared *s = &g_shared[allocs];
  uint64_t now = pprt__os_monotonic_ns();
  if (s->body.len > 0 && now - s->begun_ns < atomic_load(&g_share_window_ns))
    return &s->body;
  pprt__http_buf gz = {0};
  *rc = pprt__heap_write_profile(pprt__http_buf_writer(&gz), allocs ? "alloc_space" : "inuse_space",
                                 NULL);
  if (*rc != 0) {
    pprt__http_buf_free(&gz);
    return NULL;
  }
  pprt__http_buf_free(&s->body);
  s->body = gz;
  s->begun_ns = now;
  return &s->body;
}

void pprt__http_heap(pprt__http_reply *r, const char *name, const pprt__heap_mark *since,
                     int debug) {
  int allocs = strcmp(name, "allocs") == 0;
  pprt__http_buf gz = {0};
  const pprt__http_buf *body = &gz;
  int rc = 0;
  if (since == NULL)
    body = shared_body(allocs, &rc);
  else
    rc = pprt__heap_write_profile(pprt__http_buf_writer(&gz),
                                  allocs ? "alloc_space" : "inuse_space", since);
  if (rc != 0) {
    pprt__http_buf_free(&gz);
    fail(r, "write the heap profile", rc);
    return;
  }
  if (debug) {
    heap_text(r, body, pprt_heap_rate());
    pprt__http_buf_free(&gz);
    return;
  }
  pprt__http_buf_free(&r->body);
  if (since != NULL) {
    r->body = gz;
  } else {
    /* The reply owns its copy (libmicrohttpd frees it when sent); a few
     * kilobytes copied, where a build costs milliseconds. */
    buf_write(&r->body, body->data, body->len);
  }
  char file[32];
  snprintf(file, sizeof file, "%s%s", name, since ? "-delta" : "");
  pprt__http_attachment(r, file);
}

/* ---- traces ----------------------------------------------------------------------------- */

void pprt__http_trace_to_json(pprt__http_reply *r) {
  pprt__trace *t;
  char err[128];
  int rc = pprt__trace_decode(r->body.data, r->body.len, PPRT__TRACE_DECODE_PARTIAL, &t, err,
                              sizeof err);
  if (rc != 0) {
    pprt__http_error(r, 500, 1, "Could not read back the trace: %s", err);
    return;
  }
  pprt__http_buf json = {0};
  rc = pprt__trace_export_json(t, pprt__http_buf_writer(&json));
  pprt__trace_free(t);
  if (rc != 0) {
    pprt__http_buf_free(&json);
    fail(r, "export the trace", rc);
    return;
  }
  pprt__http_buf_free(&r->body);
  r->body = json;
  r->status = 200;
  r->type = "application/json";
  snprintf(r->filename, sizeof r->filename, "trace.json");
}
