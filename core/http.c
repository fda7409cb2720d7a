/* The HTTP endpoint (pprt_http_start, pprt.h): GNU libmicrohttpd serves
 * /debug/pprof/ with net/http/pprof's paths and semantics; the bodies are
 * made by core/http_content.c.
 *
 * Divisions: pprt's own threads; requests (routing, one reply each); timed
 * requests (the worker); start and stop.
 *
 * Threads. libmicrohttpd runs one internal thread that polls every
 * connection (epoll where there is one, else poll): no thread per
 * connection, so 500 idle connections cost 500 descriptors, not 500
 * threads. Requests that take time (profile?seconds=N, trace, heap with
 * seconds) must not hold that thread: the request is suspended
 * (MHD_suspend_connection), the worker thread finishes it at its deadline
 * and resumes it, and the internal thread then sends the reply. Both
 * threads are pprt's, not the program's: started with every signal blocked
 * (no SIGPROF lands on them) and without the preload library's
 * registration (creating_internal), told to the CPU profiler so that they
 * get no sampling source and their CPU time is not charged to
 * pprt_signals_blocked (pprt__cpu_ignore_thread), and ignored by the heap
 * sampler. libmicrohttpd's thread is one we do not start ourselves: the
 * preload library's pthread_create hook, which sees creating_internal,
 * makes the heap sampler ignore it from its first instruction (without the
 * preload library malloc is not sampled at all), and it is told to the CPU
 * profiler at its first connection (the notify-connection callback), before
 * it has served anything.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "core/atfork.h"
#include "core/cpu.h"
#include "core/heap.h"
#include "core/http.h"
#include "core/platform.h"
#include "core/symbolize.h"
#include "core/syscalls.h"
#include "core/thread.h"
#include "pprt.h"

/* libmicrohttpd before 0.9.71 returned int from callbacks. */
#if MHD_VERSION < 0x00097002
typedef int pprt__mhd_result;
#else
typedef enum MHD_Result pprt__mhd_result;
#endif

#define PREFIX "/debug/pprof/"
#define MAX_SECONDS 3600   /* longest profile or trace one request may ask for */
#define MAX_POST 65536     /* a symbol request's body */
#define MAX_TIMED 64       /* requests waiting for their deadline at once */
#define MEMORY_LIMIT 32768 /* per connection: the request line and headers fit in it */
#define KEEP_READERS_NS (30ull * 1000000000u) /* symbol readers kept idle between responses */

/* ---- pprt's own threads ------------------------------------------------------------------- */

static __thread int marked;
static _Atomic uint64_t g_mhd_tid, g_worker_tid;

/* Called on the thread itself. */
static uint64_t mark_own_thread(void) {
  marked = 1;
  pprt__heap_ignore_thread();
  uint64_t tid = pprt__os_thread_id();
  pprt__cpu_ignore_thread(tid);
  return tid;
}

/* ---- requests ------------------------------------------------------------------------------- */

enum kind { K_NONE, K_CPU, K_TRACE, K_HEAP_DELTA };

typedef struct request {
  struct MHD_Connection *conn;
  pprt__http_buf post;
  int post_too_large;
  atomic_int done; /* reply is ready (set by whichever thread made it) */
  int waiting;     /* suspended, on the worker's list */
  pprt__http_reply reply;
  /* a timed request */
  enum kind kind;
  uint64_t deadline_ns;
  char name[16];
  int json;
  pprt__heap_mark mark;
  struct request *next;
} request;

static struct MHD_Daemon *g_daemon;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* the worker's list and flags */
static pthread_cond_t g_wake;
static request *g_timed;
static int g_ntimed;
static int g_stopping;
static int g_cpu_ours, g_trace_ours; /* a CPU profile / trace the endpoint started runs */
static atomic_int g_timed_live;      /* timed requests not yet completed */
static pthread_t g_worker;
static pthread_mutex_t g_control = PTHREAD_MUTEX_INITIALIZER; /* start and stop */

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

static const char *arg(struct MHD_Connection *c, const char *key) {
  return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
}

/* seconds=N: 0 and *out = dflt when absent or empty (as Go's FormValue
 * sees "seconds="); -1 unless a whole number in [1, MAX_SECONDS] (or, with
 * frac, a positive decimal). */
static int seconds_arg(struct MHD_Connection *c, int frac, double dflt, double *out) {
  const char *v = arg(c, "seconds");
  *out = dflt;
  if (v == NULL || *v == '\0')
    return 0;
  char *end;
  errno = 0;
  double d = frac ? strtod(v, &end) : (double)strtol(v, &end, 10);
  if (errno || end == v || *end != '\0' || !(d > 0) || d > MAX_SECONDS)
    return -1;
  *out = d;
  return 0;
}

/* debug=N: 0 when absent or 0, 1 for any other whole number, -1 when not one. */
static int debug_arg(struct MHD_Connection *c) {
  const char *v = arg(c, "debug");
  if (v == NULL || *v == '\0')
    return 0;
  char *end;
  long d = strtol(v, &end, 10);
  if (*end != '\0' || d < 0)
    return -1;
  return d != 0;
}

/* Puts r on the worker's list until its deadline; the connection waits
 * suspended. Called with g_lock held. */
static void wait_for(request *r, double seconds) {
  r->deadline_ns = pprt__os_monotonic_ns() + (uint64_t)(seconds * 1e9);
  r->waiting = 1;
  MHD_suspend_connection(r->conn);
  r->next = g_timed;
  g_timed = r;
  g_ntimed++;
  atomic_fetch_add(&g_timed_live, 1);
  pthread_cond_signal(&g_wake);
}

static void route_cpu(request *r) {
  double sec;
  if (seconds_arg(r->conn, 0, 30, &sec) != 0) {
    pprt__http_error(&r->reply, 400, 1,
                     "Bad Request: seconds must be a whole number of seconds "
                     "from 1 to %d",
                     MAX_SECONDS);
    return;
  }
  pthread_mutex_lock(&g_lock);
  if (g_cpu_ours) {
    /* Go's words, which pprof's client shows as they are. */
    pprt__http_error(&r->reply, 500, 1,
                     "Could not enable CPU profiling: cpu profiling already in use");
  } else if (g_stopping || g_ntimed >= MAX_TIMED) {
    pprt__http_error(&r->reply, 503, 1, "Too many profiles are being taken; try again later");
  } else {
    pprt_cpu_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    int rc = pprt_cpu_start(&o, pprt__http_buf_writer(&r->reply.body));
    if (rc == -EBUSY) {
      pprt__http_error(&r->reply, 409, 1,
                       "Could not enable CPU profiling: this program is already recording a CPU "
                       "profile of its own (PPRT_CPUPROFILE or pprt_cpu_start); it goes to that "
                       "profile's file, and the endpoint does not take it over");
    } else if (rc != 0) {
      pprt__http_error(&r->reply, 500, 1, "Could not enable CPU profiling: %s", pprt_strerror(rc));
    } else {
      g_cpu_ours = 1;
      r->kind = K_CPU;
      wait_for(r, sec);
    }
  }
  pthread_mutex_unlock(&g_lock);
}

static void route_trace(request *r) {
  double sec;
  if (seconds_arg(r->conn, 1, 1, &sec) != 0) {
    pprt__http_error(&r->reply, 400, 1,
                     "Bad Request: seconds must be a positive number of "
                     "seconds up to %d",
                     MAX_SECONDS);
    return;
  }
  const char *f = arg(r->conn, "format");
  if (f && strcmp(f, "json") != 0 && strcmp(f, "pprt") != 0) {
    pprt__http_error(&r->reply, 400, 1, "Bad Request: format must be json or pprt");
    return;
  }
  r->json = f && strcmp(f, "json") == 0;
  pthread_mutex_lock(&g_lock);
  if (g_trace_ours) {
    pprt__http_error(&r->reply, 500, 1, "Could not enable tracing: tracing already in use");
  } else if (g_stopping || g_ntimed >= MAX_TIMED) {
    pprt__http_error(&r->reply, 503, 1, "Too many profiles are being taken; try again later");
  } else {
    int rc = pprt_trace_start(NULL, pprt__http_buf_writer(&r->reply.body));
    if (rc == -EBUSY) {
      pprt__http_error(
          &r->reply, 409, 1,
          "Could not enable tracing: this program is already tracing (PPRT_TRACE, "
          "pprt_trace_start or a flight recorder); the endpoint does not take it over");
    } else if (rc != 0) {
      pprt__http_error(&r->reply, 500, 1, "Could not enable tracing: %s", pprt_strerror(rc));
    } else {
      g_trace_ours = 1;
      r->kind = K_TRACE;
      wait_for(r, sec);
    }
  }
  pthread_mutex_unlock(&g_lock);
}

static void route_heap(request *r, const char *name) {
  int debug = debug_arg(r->conn);
  double sec;
  if (debug < 0) {
    pprt__http_error(&r->reply, 400, 1, "Bad Request: debug must be a whole number");
    return;
  }
  if (seconds_arg(r->conn, 0, 0, &sec) != 0) {
    pprt__http_error(&r->reply, 400, 1,
                     "Bad Request: invalid value for \"seconds\": must be a positive integer");
    return;
  }
  if (sec == 0) {
    pprt__http_heap(&r->reply, name, NULL, debug);
    return;
  }
  if (debug) {
    pprt__http_error(&r->reply, 400, 1,
                     "Bad Request: \"seconds\" and \"debug\" cannot be used together");
    return;
  }
  int rc = pprt__heap_mark_take(&r->mark);
  if (rc != 0) {
    pprt__http_error(&r->reply, 500, 1, "Could not take a heap mark: %s", pprt_strerror(rc));
    return;
  }
  snprintf(r->name, sizeof r->name, "%s", name);
  pthread_mutex_lock(&g_lock);
  if (g_stopping || g_ntimed >= MAX_TIMED) {
    pprt__http_error(&r->reply, 503, 1, "Too many profiles are being taken; try again later");
  } else {
    r->kind = K_HEAP_DELTA;
    wait_for(r, sec);
  }
  pthread_mutex_unlock(&g_lock);
}

/* A GET symbol request's query ("0x1+0x2" arrives as keys, '+' perhaps
 * already turned into spaces): the keys, '+'-separated, into the buffer. */
static pprt__mhd_result collect_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value) {
  (void)kind;
  (void)value;
  pprt__http_buf *b = cls;
  pprt_writer w = pprt__http_buf_writer(b);
  if (b->len > 0)
    w.write(b, "+", 1);
  w.write(b, key, strlen(key));
  return b->len > MAX_POST ? MHD_NO : MHD_YES;
}

/* Decodes %XX in place as libmicrohttpd's own unescaper does, except that
 * %00 stays as it is: a NUL would end the path early, and
 * "/debug/pprof/heap%00" must not be taken for "/debug/pprof/heap". */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s) {
  (void)cls;
  (void)c;
  char *w = s;
  for (const char *p = s; *p; p++) {
    int hi, lo;
    if (p[0] == '%' && (hi = hexval(p[1])) >= 0 && (lo = hexval(p[2])) >= 0 && (hi | lo) != 0) {
      *w++ = (char)(hi * 16 + lo);
      p += 2;
    } else {
      *w++ = *p;
    }
  }
  *w = '\0';
  return (size_t)(w - s);
}

/* Makes r's reply, or starts a timed request. */
static void route(request *r, const char *url, const char *method) {
  int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
  int post = strcmp(method, "POST") == 0;
  /* Only exact names under the prefix: "..", "%2e%2e" (decoded to ".." by
   * then), a trailing slash or anything else matches nothing. */
  if (strncmp(url, PREFIX, strlen(PREFIX)) != 0) {
    pprt__http_error(&r->reply, 404, 0, "404 page not found (pprt serves only " PREFIX ")");
    return;
  }
  const char *name = url + strlen(PREFIX);
  if (!get && !(post && strcmp(name, "symbol") == 0)) {
    pprt__http_error(&r->reply, 405, 0, "Method Not Allowed");
    return;
  }
  if (strcmp(name, "") == 0)
    pprt__http_index(&r->reply);
  else if (strcmp(name, "cmdline") == 0)
    pprt__http_cmdline(&r->reply);
  else if (strcmp(name, "symbol") == 0) {
    if (r->post_too_large) {
      pprt__http_error(&r->reply, 413, 1, "Request Entity Too Large");
      return;
    }
    if (!post) /* GET: the query string is the list (MHD has split it) */
      MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, collect_query, &r->post);
    char nul = '\0';
    pprt__http_buf_writer(&r->post).write(&r->post, &nul, 1);
    if (r->post.err) {
      pprt__http_error(&r->reply, 500, 1, "Could not read the request: out of memory");
      return;
    }
    pprt__http_symbol(&r->reply, r->post.data);
  } else if (strcmp(name, "profile") == 0)
    route_cpu(r);
  else if (strcmp(name, "trace") == 0)
    route_trace(r);
  else if (strcmp(name, "heap") == 0 || strcmp(name, "allocs") == 0)
    route_heap(r, name);
  else if (strcmp(name, "block") == 0 || strcmp(name, "mutex") == 0 ||
           strcmp(name, "goroutine") == 0 || strcmp(name, "threadcreate") == 0)
    pprt__http_error(&r->reply, 404, 1, "Unknown profile: %s (a Go runtime profile; pprt has none)",
                     name);
  else
    pprt__http_error(&r->reply, 404, 1, "Unknown profile");
}

static pprt__mhd_result send_reply(struct MHD_Connection *c, request *r) {
  pprt__http_reply *rep = &r->reply;
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(rep->body.len, rep->body.data, MHD_RESPMEM_MUST_FREE);
  if (resp == NULL)
    return MHD_NO;
  memset(&rep->body, 0, sizeof rep->body); /* the response frees it */
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, rep->type);
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  if (rep->filename[0]) {
    char cd[64];
    snprintf(cd, sizeof cd, "attachment; filename=\"%s\"", rep->filename);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_DISPOSITION, cd);
  }
  if (rep->go_error)
    MHD_add_response_header(resp, "X-Go-Pprof", "1");
  if (rep->status == 405)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD, POST");
  pprt__mhd_result ok = MHD_queue_response(c, (unsigned)rep->status, resp);
  MHD_destroy_response(resp);
  return ok;
}

/* libmicrohttpd's request callback, on its thread: the first call makes the
 * request's state, the next ones take the body, the last routes it; a
 * suspended request is called once more after the worker resumes it. */
static pprt__mhd_result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                   const char *method, const char *version, const char *upload_data,
                                   size_t *upload_data_size, void **con_cls) {
  (void)cls;
  (void)version;
  request *r = *con_cls;
  if (r == NULL) {
    if (!marked) /* a request that arrived before the connection notice */
      atomic_store(&g_mhd_tid, mark_own_thread());
    r = calloc(1, sizeof *r);
    if (r == NULL)
      return MHD_NO;
    r->conn = c;
    *con_cls = r;
    return MHD_YES;
  }
  if (*upload_data_size > 0) {
    if (r->post.len + *upload_data_size > MAX_POST)
      r->post_too_large = 1;
    else
      pprt__http_buf_writer(&r->post).write(&r->post, upload_data, *upload_data_size);
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (!atomic_load(&r->done) && !r->waiting) {
    route(r, url, method);
    if (!r->waiting)
      atomic_store(&r->done, 1);
  }
  if (atomic_load(&r->done))
    return send_reply(c, r);
  return MHD_YES; /* suspended until the worker has the reply */
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  (void)cls;
  (void)c;
  (void)toe;
  request *r = *con_cls;
  if (r == NULL)
    return;
  if (r->waiting)
    atomic_fetch_sub(&g_timed_live, 1);
  pprt__http_buf_free(&r->post);
  pprt__http_buf_free(&r->reply.body);
  pprt__heap_mark_free(&r->mark);
  free(r);
  *con_cls = NULL;
}

/* The first connection marks libmicrohttpd's thread as pprt's own. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
  (void)cls;
  (void)c;
  (void)socket_context;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED && !marked)
    atomic_store(&g_mhd_tid, mark_own_thread());
}

/* ---- timed requests (the worker) --------------------------------------------------------------
 */

/* Makes the reply of a timed request whose time is up (or the endpoint is
 * stopping: then what was recorded so far is discarded). */
static void finish(request *r, int stopping) {
  switch (r->kind) {
  case K_CPU: {
    int rc = pprt_cpu_stop();
    pthread_mutex_lock(&g_lock);
    g_cpu_ours = 0;
    pthread_mutex_unlock(&g_lock);
    if (stopping)
      pprt__http_error(&r->reply, 503, 1, "The profiling endpoint is stopping");
    else if (rc != 0)
      pprt__http_error(&r->reply, 500, 1, "Could not write the CPU profile: %s", pprt_strerror(rc));
    else
      pprt__http_attachment(&r->reply, "profile");
    break;
  }
  case K_TRACE: {
    int rc = pprt_trace_stop();
    pthread_mutex_lock(&g_lock);
    g_trace_ours = 0;
    pthread_mutex_unlock(&g_lock);
    if (stopping)
      pprt__http_error(&r->reply, 503, 1, "The profiling endpoint is stopping");
    else if (rc != 0)
      pprt__http_error(&r->reply, 500, 1, "Could not write the trace: %s", pprt_strerror(rc));
    else if (r->json)
      pprt__http_trace_to_json(&r->reply);
    else
      pprt__http_attachment(&r->reply, "trace");
    break;
  }
  case K_HEAP_DELTA:
    if (stopping)
      pprt__http_error(&r->reply, 503, 1, "The profiling endpoint is stopping");
    else
      pprt__http_heap(&r->reply, r->name, &r->mark, 0);
    break;
  case K_NONE:
    break;
  }
  atomic_store(&r->done, 1);
  /* From here r belongs to libmicrohttpd's thread again. */
  MHD_resume_connection(r->conn);
}

static void *worker_main(void *arg) {
  (void)arg;
  atomic_store(&g_worker_tid, mark_own_thread());
  pthread_mutex_lock(&g_lock);
  for (;;) {
    uint64_t now = pprt__os_monotonic_ns(), next = UINT64_MAX;
    request *due = NULL;
    for (request **pp = &g_timed; *pp;) {
      request *r = *pp;
      if (g_stopping || r->deadline_ns <= now) {
        *pp = r->next;
        g_ntimed--;
        r->next = due;
        due = r;
      } else {
        if (r->deadline_ns < next)
          next = r->deadline_ns;
        pp = &r->next;
      }
    }
    if (due) {
      int stopping = g_stopping;
      pthread_mutex_unlock(&g_lock);
      while (due) {
        request *r = due;
        due = r->next;
        finish(r, stopping);
      }
      pthread_mutex_lock(&g_lock);
      continue;
    }
    if (g_stopping)
      break;
    /* The symbol readers kept between responses go once idle (see
     * http_start). */
    uint64_t idle = pprt__symbolize_release_idle(now);
    if (idle < next)
      next = idle;
    if (next == UINT64_MAX) {
      pthread_cond_wait(&g_wake, &g_lock);
    } else {
      uint64_t wall = pprt__os_wall_ns() + (next - now);
      struct timespec ts = {(time_t)(wall / 1000000000u), (long)(wall % 1000000000u)};
      pthread_cond_timedwait(&g_wake, &g_lock, &ts);
    }
  }
  pthread_mutex_unlock(&g_lock);
  return NULL;
}

/* ---- start and stop -------------------------------------------------------------------------- */

/* Parses addr into sa; sets *loopback. -EINVAL if it is not a numeric
 * address. */
static int parse_addr(const char *addr, int port, struct sockaddr_storage *sa, int *loopback) {
  memset(sa, 0, sizeof *sa);
  struct sockaddr_in *in4 = (struct sockaddr_in *)sa;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
  if (inet_pton(AF_INET, addr, &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons((uint16_t)port);
    *loopback = (ntohl(in4->sin_addr.s_addr) >> 24) == 127;
    return 0;
  }
  if (inet_pton(AF_INET6, addr, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)port);
    *loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    return 0;
  }
  return -EINVAL;
}

/* Creates a thread (libmicrohttpd's, inside fn, or the worker) the way
 * pprt's own threads are: every signal blocked, not registered by the
 * preload library's pthread_create hook. */
static void own_threads_begin(sigset_t *old) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, old);
  pprt__thread_self()->creating_internal = 1;
}

static void own_threads_end(const sigset_t *old) {
  pprt__thread_self()->creating_internal = 0;
  pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* A forked child has neither thread: it does not serve, and a stop there
 * finds nothing to stop (the parent's listening socket stays open in it). */
static void atfork_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  g_lock = fresh;
  g_control = fresh;
  g_daemon = NULL;
  g_timed = NULL;
  g_ntimed = 0;
  atomic_store(&g_timed_live, 0);
  g_cpu_ours = g_trace_ours = 0;
  atomic_store(&g_mhd_tid, 0);
  atomic_store(&g_worker_tid, 0);
}

static void atfork_prepare(void) {
  pthread_mutex_lock(&g_control);
}

static void atfork_parent(void) {
  pthread_mutex_unlock(&g_control);
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_once(void) {
  pthread_cond_init(&g_wake, NULL);
  static const pprt__fork_hooks fork_hooks = {atfork_prepare, atfork_parent, atfork_child};
  pprt__fork_register(PPRT__FORK_HTTP, &fork_hooks);
}

PPRT__FORK_REGISTER_AT_LOAD(g_once, init_once)

static int http_start(const pprt_http_options *opts) {
  pprt_http_options o;
  memset(&o, 0, sizeof o);
  if (opts) {
    size_t n = opts->size && opts->size < sizeof o ? opts->size : sizeof o;
    memcpy(&o, opts, n);
  }
  const char *addr = o.addr ? o.addr : "127.0.0.1";
  if (o.port < 0 || o.port > 65535 || o.max_connections < 0 || o.timeout_seconds < 0 ||
      o.per_ip_limit < 0)
    return -EINVAL;
  struct sockaddr_storage sa;
  int loopback = 0;
  if (parse_addr(addr, o.port, &sa, &loopback) != 0)
    return -EINVAL;
  if (!loopback && !o.allow_remote)
    return -EACCES;
  unsigned max_conn = o.max_connections ? (unsigned)o.max_connections : 1024;
  unsigned timeout = o.timeout_seconds ? (unsigned)o.timeout_seconds : 60;
  unsigned per_ip = o.per_ip_limit ? (unsigned)o.per_ip_limit : o.allow_remote ? 64 : max_conn;

  if (g_daemon)
    return -EBUSY;
  g_stopping = 0;
  sigset_t old;
  own_threads_begin(&old);
  int rc = pprt__sys_pthread_create(&g_worker, NULL, worker_main, NULL);
  if (rc != 0) {
    own_threads_end(&old);
    return -rc; /* EAGAIN, or EPERM from a policy that forbids threads */
  }
  unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
  if (sa.ss_family == AF_INET6)
    flags |= MHD_USE_IPv6;
  errno = 0;
  struct MHD_Daemon *d = MHD_start_daemon(
      flags, (uint16_t)o.port, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR,
      (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT, max_conn,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip, MHD_OPTION_CONNECTION_TIMEOUT, timeout,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MEMORY_LIMIT, MHD_OPTION_NOTIFY_COMPLETED,
      on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
      MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_END);
  int err = errno;
  own_threads_end(&old);
  if (d == NULL) {
    pthread_mutex_lock(&g_lock);
    g_stopping = 1;
    pthread_cond_signal(&g_wake);
    pthread_mutex_unlock(&g_lock);
    pthread_join(g_worker, NULL);
    pprt__cpu_unignore_thread(atomic_exchange(&g_worker_tid, 0));
    return err == EADDRINUSE ? -EADDRINUSE
           : err == EACCES   ? -EACCES
           : err == ENOMEM   ? -ENOMEM
                             : -EIO;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  if (o.bound_port)
    *o.bound_port = info ? info->port : o.port;
  g_daemon = d;
  /* Each 1 s CPU profile has a few addresses no earlier profile had; the
   * symbol readers stay open between responses so those cost no fresh
   * reading of a compressed debug file's start, until a scraper has been
   * away for two of Alloy's 15 s intervals. */
  pprt__symbolize_keep_readers(KEEP_READERS_NS);
  return 0;
}

static int http_stop(void) {
  if (g_daemon == NULL)
    return -EPIPE;
  /* The worker answers every waiting request (503) and resumes it, then
   * exits; libmicrohttpd then closes every connection. */
  pthread_mutex_lock(&g_lock);
  g_stopping = 1;
  pthread_cond_signal(&g_wake);
  pthread_mutex_unlock(&g_lock);
  pthread_join(g_worker, NULL);
  pprt__symbolize_keep_readers(0);
  /* The requests it resumed get their 503 before the connections close
   * (for up to a second: a client that does not read is not waited for). */
  for (int i = 0; i < 100 && atomic_load(&g_timed_live) > 0; i++)
    usleep(10000);
  MHD_stop_daemon(g_daemon);
  g_daemon = NULL;
  pprt__http_shared_clear(); /* its thread is gone */
  pprt__cpu_unignore_thread(atomic_exchange(&g_worker_tid, 0));
  pprt__cpu_unignore_thread(atomic_exchange(&g_mhd_tid, 0));
  return 0;
}

/* The public entry points: the caller's own allocations for the daemon are
 * pprt's, not the program's. */
int pprt_http_start(const pprt_http_options *opts) {
  int paused = pprt__heap_pause();
  pthread_once(&g_once, init_once);
  pthread_mutex_lock(&g_control);
  int rc = http_start(opts);
  pthread_mutex_unlock(&g_control);
  pprt__heap_resume(paused);
  return rc;
}

int pprt_http_stop(void) {
  int paused = pprt__heap_pause();
  pthread_mutex_lock(&g_control);
  int rc = http_stop();
  pthread_mutex_unlock(&g_control);
  pprt__heap_resume(paused);
  return rc;
}
