/* The HTTP endpoint (pprt_http_start) end to end: a real server on
 * 127.0.0.1 and real clients (tests/http_client.h plays the scrapers; go
 * tool pprof is the reference one).
 *
 * Usage: test_http MODE [SECONDS]
 *   api      the API in this process: options, -EACCES, -EBUSY, -EPIPE, the
 *            per-address limit and the idle timeout; a
 *            build without libmicrohttpd returns -ENOTSUP
 *   paths    every path as Alloy and Parca check it: status, content type,
 *            gzip, decodable with the expected sample types; a 2 s delta
 *            allocs profile differs from the cumulative one
 *   errors   400, 404, 405, path traversal, a 64 KiB header, a second CPU
 *            profile refused as Go does, 409 while the program profiles
 *   abuse    500 idle connections and a slow-loris client: a real scrape
 *            still works and pprt's threads take < 1% of the program's CPU
 *   load     20 clients scraping heap, allocs deltas and 1 s CPU profiles
 *            for SECONDS (default 10): every response valid, no crash
 *   gopprof  go tool pprof -seconds 2 over http against an unmodified
 *            program run with the preload library, and over /heap
 *   preload  PPRT_HTTP's bad values and a remote address without opt-in:
 *            one stderr line, nothing served, the program unharmed
 *
 * The server modes fork a child that serves and runs a workload (CPU in
 * http_test_hot, allocations reported with pprt_alloc_note) and answers
 * commands on a pipe; this process is the client. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/profile.h"
#include "pprt.h"
#include "tests/http_client.h"

static double load_seconds = 10;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the serving child ------------------------------------------------------------------- */

typedef struct stats {
  double proc_cpu, work_cpu; /* seconds */
  unsigned long rounds;
} stats;

static volatile unsigned long sink;
static _Atomic unsigned long rounds;
static _Atomic double work_cpu;
static void *kept[64];

__attribute__((noinline)) void http_test_hot(void);
void http_test_hot(void) {
  unsigned long x = sink;
  for (int i = 0; i < 20000; i++) {
    x = x * 2862933555777941757ul + 3037000493ul;
    __asm__ volatile("" : "+r"(x));
  }
  sink = x;
}

__attribute__((noinline)) void http_test_alloc(unsigned long r);
void http_test_alloc(unsigned long r) {
  size_t i = r % 64;
  if (kept[i]) {
    pprt_free_note(kept[i]);
    free(kept[i]);
  }
  kept[i] = malloc(16384);
  pprt_alloc_note(kept[i], 16384);
  __asm__ volatile("" ::: "memory"); /* no tail call: this frame must be in the stack */
}

static double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *workload(void *arg) {
  (void)arg;
  for (unsigned long r = 0;; r++) {
    http_test_hot();
    http_test_alloc(r);
    atomic_store(&rounds, r);
    if ((r & 15) == 0)
      atomic_store(&work_cpu, thread_cpu());
  }
  return NULL;
}

static double proc_cpu(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

typedef struct server {
  pid_t pid;
  int port;
  int cmd, reply; /* pipes to and from the child */
} server;

/* The child: serves, works, and answers commands: 'm' stats, 'c' / 'C'
 * start / stop a CPU profile of its own (to /dev/null), 'q' quit. */
static void child_main(int cmd, int reply) {
  pprt_heap_set_rate(65536);
  pthread_t t;
  pthread_create(&t, NULL, workload, NULL);
  int port = 0;
  pprt_http_options o = {.size = sizeof o, .bound_port = &port};
  int rc = pprt_http_start(&o);
  if (rc != 0)
    port = rc;
  if (write(reply, &port, sizeof port) != sizeof port)
    _exit(3);
  int devnull = -1;
  for (;;) {
    char c;
    if (read(cmd, &c, 1) != 1)
      break;
    if (c == 'm') {
      stats s = {proc_cpu(), atomic_load(&work_cpu), atomic_load(&rounds)};
      if (write(reply, &s, sizeof s) != sizeof s)
        _exit(3);
    } else if (c == 'c') {
      devnull = open("/dev/null", O_WRONLY);
      rc = pprt_cpu_start(NULL, pprt_writer_fd(devnull));
      if (write(reply, &rc, sizeof rc) != sizeof rc)
        _exit(3);
    } else if (c == 'C') {
      rc = pprt_cpu_stop();
      close(devnull);
      if (write(reply, &rc, sizeof rc) != sizeof rc)
        _exit(3);
    } else if (c == 'q') {
      break;
    }
  }
  /* exit, not _exit: LeakSanitizer checks the server side too. */
  exit(pprt_http_stop() == 0 ? 0 : 4);
}

static server serve(void) {
  int a[2], b[2];
  assert_int_equal(pipe(a), 0);
  assert_int_equal(pipe(b), 0);
  server s;
  s.pid = fork();
  assert_true(s.pid >= 0);
  if (s.pid == 0) {
    close(a[1]);
    close(b[0]);
    child_main(a[0], b[1]);
  }
  close(a[0]);
  close(b[1]);
  s.cmd = a[1];
  s.reply = b[0];
  assert_int_equal(read(s.reply, &s.port, sizeof s.port), sizeof s.port);
  assert_true(s.port > 0);
  return s;
}

static stats measure(server *s) {
  stats st;
  assert_int_equal(write(s->cmd, "m", 1), 1);
  assert_int_equal(read(s->reply, &st, sizeof st), sizeof st);
  return st;
}

static int command(server *s, char c) {
  int rc;
  assert_int_equal(write(s->cmd, &c, 1), 1);
  assert_int_equal(read(s->reply, &rc, sizeof rc), sizeof rc);
  return rc;
}

/* Stops the child and checks it exited cleanly (the endpoint stopped). */
static void finish(server *s) {
  int status;
  assert_int_equal(waitpid(s->pid, &status, WNOHANG), 0); /* still alive */
  assert_int_equal(write(s->cmd, "q", 1), 1);
  assert_int_equal(waitpid(s->pid, &status, 0), s->pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  close(s->cmd);
  close(s->reply);
}

/* ---- checking responses -------------------------------------------------------------------- */

/* A profile response as Alloy validates it: 200, octet-stream, gzip, and
 * it decodes with these sample types (NULL-ended) and default type. */
static Pprt__Profile *check_profile(const http_resp *r, const char *filename,
                                    const char *const *types, const char *dflt) {
  assert_int_equal(r->status, 200);
  assert_string_equal(r->type, "application/octet-stream");
  char want[64];
  snprintf(want, sizeof want, "attachment; filename=\"%s\"", filename);
  assert_string_equal(r->disposition, want);
  assert_true(r->len > 2 && r->body[0] == 0x1f && r->body[1] == 0x8b);
  Pprt__Profile *p;
  char err[128];
  int rc = pprt__profile_decode(r->body, r->len, &p, err, sizeof err);
  if (rc != 0)
    fail_msg("profile does not decode: %s", err);
  size_t n = 0;
  while (types[n])
    n++;
  assert_int_equal(p->n_sample_type, n);
  for (size_t i = 0; i < n; i++)
    assert_string_equal(p->string_table[p->sample_type[i]->type], types[i]);
  if (dflt)
    assert_string_equal(p->string_table[p->default_sample_type], dflt);
  return p;
}

static const char *const heap_types[] = {"alloc_objects", "alloc_space", "inuse_objects",
                                         "inuse_space", NULL};
static const char *const cpu_types[] = {"samples", "cpu", NULL};

static int64_t total(const Pprt__Profile *p, size_t idx) {
  int64_t t = 0;
  for (size_t i = 0; i < p->n_sample; i++)
    t += p->sample[i]->value[idx];
  return t;
}

/* Whether a function of this name is in the profile. */
static int has_function(const Pprt__Profile *p, const char *name) {
  for (size_t i = 0; i < p->n_function; i++)
    if (strcmp(p->string_table[p->function[i]->name], name) == 0)
      return 1;
  return 0;
}

static void check_text_error(const http_resp *r, int status, const char *needle) {
  if (r->status != status)
    fail_msg("status %d, want %d: %s", r->status, status, r->body ? (char *)r->body : "");
  assert_string_equal(r->type, "text/plain; charset=utf-8");
  if (needle && strstr((char *)r->body, needle) == NULL)
    fail_msg("body [%s] lacks [%s]", (char *)r->body, needle);
}

/* ---- api ------------------------------------------------------------------------------------ */

static void test_api(void **state) {
  (void)state;
#ifdef PPRT_TEST_NO_HTTP
  assert_int_equal(pprt_http_start(NULL), -ENOTSUP);
  assert_int_equal(pprt_http_stop(), -EPIPE);
#else
  pprt_http_options o = {.size = sizeof o, .addr = "0.0.0.0"};
  assert_int_equal(pprt_http_start(&o), -EACCES);
  o.addr = "::";
  assert_int_equal(pprt_http_start(&o), -EACCES);
  o.addr = "localhost"; /* numeric only */
  assert_int_equal(pprt_http_start(&o), -EINVAL);
  o.addr = NULL;
  o.port = 70000;
  assert_int_equal(pprt_http_start(&o), -EINVAL);
  assert_int_equal(pprt_http_stop(), -EPIPE);
  int port = 0;
  o.port = 0;
  o.bound_port = &port;
  assert_int_equal(pprt_http_start(&o), 0);
  assert_true(port > 0);
  assert_int_equal(pprt_http_start(&o), -EBUSY);
  http_resp r = http_get(port, "/debug/pprof/", 10);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr((char *)r.body, "profile"));
  http_free(&r);
  assert_int_equal(pprt_http_stop(), 0);
  assert_int_equal(pprt_http_stop(), -EPIPE);
  /* The limits: two connections from one address, idle ones closed after
   * a second. */
  o.per_ip_limit = 2;
  o.timeout_seconds = 1;
  assert_int_equal(pprt_http_start(&o), 0);
  int c1 = http_connect(port, 3), c2 = http_connect(port, 3);
  assert_true(c1 >= 0 && c2 >= 0);
  usleep(200000);
  r = http_get(port, "/debug/pprof/cmdline", 3);
  assert_int_equal(r.status, 0); /* a third: closed at once */
  http_free(&r);
  char byte;
  double t0 = now_s();
  assert_int_equal(recv(c1, &byte, 1, 0), 0); /* closed by the idle timeout */
  assert_true(now_s() - t0 < 2.5);
  close(c1);
  close(c2);
  usleep(200000);
  r = http_get(port, "/debug/pprof/cmdline", 3);
  assert_int_equal(r.status, 200);
  http_free(&r);
  assert_int_equal(pprt_http_stop(), 0);
  o.per_ip_limit = 0;
  o.timeout_seconds = 0;
  /* And again, on IPv6 loopback where the system has it. */
  o.addr = "::1";
  int rc = pprt_http_start(&o);
  assert_true(rc == 0 || rc == -EIO || rc == -EINVAL);
  if (rc == 0)
    assert_int_equal(pprt_http_stop(), 0);
#endif
}

/* ---- paths ---------------------------------------------------------------------------------- */

static void test_paths(void **state) {
  (void)state;
  server s = serve();
  usleep(300000); /* some allocations to show */

  http_resp r = http_get(s.port, "/debug/pprof/", 10);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.type, "text/html; charset=utf-8");
  assert_non_null(strstr((char *)r.body, "href='profile'"));
  http_free(&r);

  r = http_get(s.port, "/debug/pprof/heap", 10);
  Pprt__Profile *p = check_profile(&r, "heap", heap_types, "inuse_space");
  assert_true(has_function(p, "http_test_alloc"));
  pprt__profile_decoded_free(p);
  http_free(&r);

  /* "seconds=" is no seconds, as Go's FormValue has it. */
  r = http_get(s.port, "/debug/pprof/heap?seconds=", 10);
  p = check_profile(&r, "heap", heap_types, "inuse_space");
  pprt__profile_decoded_free(p);
  http_free(&r);

  r = http_get(s.port, "/debug/pprof/allocs", 10);
  p = check_profile(&r, "allocs", heap_types, "alloc_space");
  int64_t cumulative = total(p, 1);
  pprt__profile_decoded_free(p);
  http_free(&r);

  /* Go >= 1.15's delta: what was allocated during the 2 s. */
  double t0 = now_s();
  r = http_get(s.port, "/debug/pprof/allocs?seconds=2", 20);
  assert_true(now_s() - t0 >= 1.9);
  p = check_profile(&r, "allocs-delta", heap_types, "alloc_space");
  int64_t delta = total(p, 1);
  assert_true(p->duration_nanos >= 1900000000);
  pprt__profile_decoded_free(p);
  http_free(&r);
  r = http_get(s.port, "/debug/pprof/allocs", 10);
  p = check_profile(&r, "allocs", heap_types, "alloc_space");
  int64_t after = total(p, 1);
  pprt__profile_decoded_free(p);
  http_free(&r);
  printf("alloc_space: cumulative %lld, delta over 2 s %lld, cumulative after %lld\n",
         (long long)cumulative, (long long)delta, (long long)after);
  assert_true(delta > 0);
  assert_true(delta != after && delta < after);

  r = http_get(s.port, "/debug/pprof/heap?debug=1", 10);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.type, "text/plain; charset=utf-8");
  assert_true(strncmp((char *)r.body, "heap profile: ", 14) == 0);
  assert_non_null(strstr((char *)r.body, "http_test_alloc"));
  http_free(&r);

  r = http_get(s.port, "/debug/pprof/profile?seconds=1", 20);
  p = check_profile(&r, "profile", cpu_types, NULL);
  assert_true(has_function(p, "http_test_hot"));
  /* pprt's own threads are not in it: neither sampled nor charged. */
  assert_false(has_function(p, PPRT__FRAME_BLOCKED));
  pprt__profile_decoded_free(p);
  http_free(&r);

  r = http_get(s.port, "/debug/pprof/trace?seconds=0.5", 20);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.type, "application/octet-stream");
  assert_string_equal(r.disposition, "attachment; filename=\"trace\"");
  assert_true(r.len > 16 && memcmp(r.body, "\x7fPPRTTRC", 8) == 0);
  http_free(&r);
  r = http_get(s.port, "/debug/pprof/trace?seconds=0.5&format=json", 20);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.type, "application/json");
  assert_true(r.len > 0 && r.body[0] == '{');
  http_free(&r);

  /* symbolz: the child is a fork of this process, so addresses agree. */
  char body[64];
  snprintf(body, sizeof body, "%p+%p", (void *)((uintptr_t)http_test_hot + 4),
           (void *)((uintptr_t)http_test_alloc + 4));
  r = http_do(s.port, "POST", "/debug/pprof/symbol", NULL, body, 10);
  assert_int_equal(r.status, 200);
  assert_true(strncmp((char *)r.body, "num_symbols: 1\n", 15) == 0);
  assert_non_null(strstr((char *)r.body, " http_test_hot\n"));
  assert_non_null(strstr((char *)r.body, " http_test_alloc\n"));
  http_free(&r);
  char path[96];
  snprintf(path, sizeof path, "/debug/pprof/symbol?%p", (void *)((uintptr_t)http_test_hot + 4));
  r = http_get(s.port, path, 10);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr((char *)r.body, " http_test_hot\n"));
  http_free(&r);
  r = http_get(s.port, "/debug/pprof/symbol", 10);
  assert_int_equal(r.status, 200);
  assert_string_equal((char *)r.body, "num_symbols: 1\n");
  http_free(&r);

  r = http_get(s.port, "/debug/pprof/cmdline", 10);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr((char *)r.body, "test_http"));
  assert_non_null(memchr(r.body, '\0', r.len)); /* NUL between arguments */
  http_free(&r);
  finish(&s);
}

/* ---- errors --------------------------------------------------------------------------------- */

typedef struct cpu_req {
  int port;
  http_resp r;
} cpu_req;

static void *cpu_request(void *arg) {
  cpu_req *c = arg;
  c->r = http_get(c->port, "/debug/pprof/profile?seconds=2", 20);
  return NULL;
}

static void test_errors(void **state) {
  (void)state;
  server s = serve();
  static const char *const bad_seconds[] = {
      "/debug/pprof/profile?seconds=abc", "/debug/pprof/profile?seconds=0",
      "/debug/pprof/profile?seconds=-5",  "/debug/pprof/profile?seconds=1e9",
      "/debug/pprof/heap?seconds=abc",    "/debug/pprof/allocs?seconds=1.5",
      "/debug/pprof/trace?seconds=x",     "/debug/pprof/heap?seconds=1&debug=1"};
  for (size_t i = 0; i < sizeof bad_seconds / sizeof bad_seconds[0]; i++) {
    http_resp r = http_get(s.port, bad_seconds[i], 10);
    check_text_error(&r, 400, "Bad Request");
    assert_true(r.go_pprof);
    http_free(&r);
  }
  static const char *const missing[] = {"/debug/pprof/block",
                                        "/debug/pprof/mutex",
                                        "/debug/pprof/goroutine",
                                        "/debug/pprof/nosuch",
                                        "/debug/pprof/heap/",
                                        "/debug/pprof",
                                        "/",
                                        "/metrics",
                                        "/debug/pprof/heap/../heap"};
  for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
    http_resp r = http_get(s.port, missing[i], 10);
    check_text_error(&r, 404, NULL);
    http_free(&r);
  }
  /* Traversal, raw and encoded: never a 200. */
  static const char *const traversal[] = {"/debug/pprof/../x",
                                          "/debug/pprof/../../etc/passwd",
                                          "/debug/pprof/%2e%2e/heap",
                                          "/debug/pprof/%2E%2E%2Fheap",
                                          "/debug/pprof/..%2fcmdline",
                                          "/debug/pprof/%2fetc%2fpasswd",
                                          "/debug/%2e%2e/debug/pprof/heap",
                                          "/debug/pprof/heap%00",
                                          "/debug/pprof/./heap"};
  for (size_t i = 0; i < sizeof traversal / sizeof traversal[0]; i++) {
    http_resp r = http_get(s.port, traversal[i], 10);
    if (r.status == 200)
      fail_msg("%s: 200", traversal[i]);
    http_free(&r);
  }
  http_resp r = http_do(s.port, "POST", "/debug/pprof/heap", NULL, "x", 10);
  assert_int_equal(r.status, 405);
  http_free(&r);
  r = http_do(s.port, "DELETE", "/debug/pprof/symbol", NULL, NULL, 10);
  assert_int_equal(r.status, 405);
  http_free(&r);

  /* A 64 KiB header: refused, and the server keeps serving. */
  size_t big = 65536;
  char *hdr = malloc(big + 16);
  memcpy(hdr, "X-Big: ", 7);
  memset(hdr + 7, 'a', big);
  memcpy(hdr + 7 + big, "\r\n", 3);
  r = http_do(s.port, "GET", "/debug/pprof/cmdline", hdr, NULL, 10);
  printf("64 KiB header: status %d\n", r.status);
  assert_true(r.status != 200);
  http_free(&r);
  free(hdr);
  r = http_get(s.port, "/debug/pprof/cmdline", 10);
  assert_int_equal(r.status, 200);
  http_free(&r);

  /* A second CPU profile while one runs: refused as Go refuses it. */
  cpu_req first = {s.port, {0}};
  pthread_t t;
  pthread_create(&t, NULL, cpu_request, &first);
  usleep(500000);
  r = http_get(s.port, "/debug/pprof/profile?seconds=1", 10);
  check_text_error(&r, 500, "Could not enable CPU profiling: cpu profiling already in use");
  assert_true(r.go_pprof);
  http_free(&r);
  pthread_join(t, NULL);
  Pprt__Profile *p = check_profile(&first.r, "profile", cpu_types, NULL);
  pprt__profile_decoded_free(p);
  http_free(&first.r);

  /* The program's own CPU profile (PPRT_CPUPROFILE, pprt_cpu_start): 409. */
  assert_int_equal(command(&s, 'c'), 0);
  r = http_get(s.port, "/debug/pprof/profile?seconds=1", 10);
  check_text_error(&r, 409, "already recording a CPU profile of its own");
  assert_true(r.go_pprof);
  http_free(&r);
  assert_int_equal(command(&s, 'C'), 0);
  r = http_get(s.port, "/debug/pprof/profile?seconds=1", 20);
  p = check_profile(&r, "profile", cpu_types, NULL);
  pprt__profile_decoded_free(p);
  http_free(&r);
  finish(&s);
}

/* ---- abuse ----------------------------------------------------------------------------------- */

static atomic_int loris_stop;

/* A slow-loris client: a request whose headers never end, a byte at a time. */
static void *slow_loris(void *arg) {
  int port = *(int *)arg;
  int fd = http_connect(port, 1);
  if (fd < 0)
    return NULL;
  http_send_all(fd, "GET /debug/pprof/heap HTTP/1.1\r\nX-Slow: ", 40);
  while (!atomic_load(&loris_stop)) {
    if (send(fd, "a", 1, MSG_NOSIGNAL) != 1)
      break; /* the server gave up on it: fine */
    usleep(100000);
  }
  close(fd);
  return NULL;
}

static void test_abuse(void **state) {
  (void)state;
  server s = serve();
  usleep(200000);
  stats b0 = measure(&s);
  usleep(2000000);
  stats b1 = measure(&s);
  enum { IDLE = 500 };
  int *fds = malloc(IDLE * sizeof *fds);
  int open_ok = 0;
  for (int i = 0; i < IDLE; i++) {
    fds[i] = http_connect(s.port, 1);
    open_ok += fds[i] >= 0;
  }
  assert_int_equal(open_ok, IDLE);
  /* A partial request line on half of them. */
  for (int i = 0; i < IDLE; i += 2)
    http_send_all(fds[i], "GET /debug/pp", 13);
  pthread_t loris;
  atomic_store(&loris_stop, 0);
  pthread_create(&loris, NULL, slow_loris, &s.port);
  usleep(300000);
  stats a0 = measure(&s);
  usleep(3000000);
  stats a1 = measure(&s);
  double work = a1.work_cpu - a0.work_cpu, other = (a1.proc_cpu - a0.proc_cpu) - work;
  double rate_before = (double)(b1.rounds - b0.rounds) / 2.0;
  double rate_during = (double)(a1.rounds - a0.rounds) / 3.0;
  printf("500 idle connections + slow loris: pprt's threads used %.4f s of CPU against the "
         "program's %.3f s (%.3f%%); program rate %.0f/s before, %.0f/s during\n",
         other, work, 100 * other / work, rate_before, rate_during);
  assert_true(other < 0.01 * work);

  /* A real scrape meanwhile. */
  double t0 = now_s();
  http_resp r = http_get(s.port, "/debug/pprof/profile?seconds=1", 20);
  Pprt__Profile *p = check_profile(&r, "profile", cpu_types, NULL);
  assert_true(has_function(p, "http_test_hot"));
  pprt__profile_decoded_free(p);
  http_free(&r);
  r = http_get(s.port, "/debug/pprof/heap", 20);
  p = check_profile(&r, "heap", heap_types, "inuse_space");
  pprt__profile_decoded_free(p);
  http_free(&r);
  printf("scrape with 500 idle connections open: %.2f s\n", now_s() - t0);
  assert_true(now_s() - t0 < 5);

  atomic_store(&loris_stop, 1);
  pthread_join(loris, NULL);
  for (int i = 0; i < IDLE; i++)
    if (fds[i] >= 0)
      close(fds[i]);
  free(fds);
  finish(&s);
}

/* ---- load ----------------------------------------------------------------------------------- */

static atomic_int load_ok, load_busy, load_bad;
static char load_first_bad[256];
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static double load_end;

static void load_fail(const char *path, const http_resp *r, const char *why) {
  atomic_fetch_add(&load_bad, 1);
  pthread_mutex_lock(&load_lock);
  if (!load_first_bad[0])
    snprintf(load_first_bad, sizeof load_first_bad, "%s: status %d: %s", path, r->status, why);
  pthread_mutex_unlock(&load_lock);
}

/* Valid: a 200 with a profile that decodes, or (a CPU profile) Go's
 * already-in-use refusal. */
static void load_check(const char *path, const http_resp *r) {
  if (r->status == 500 && strstr(path, "profile") &&
      strstr((char *)r->body, "cpu profiling already in use") && r->go_pprof) {
    atomic_fetch_add(&load_busy, 1);
    return;
  }
  if (r->status != 200 || strcmp(r->type, "application/octet-stream") != 0) {
    load_fail(path, r, r->body ? (char *)r->body : "no body");
    return;
  }
  Pprt__Profile *p;
  char err[128];
  if (pprt__profile_decode(r->body, r->len, &p, err, sizeof err) != 0) {
    load_fail(path, r, err);
    return;
  }
  pprt__profile_decoded_free(p);
  atomic_fetch_add(&load_ok, 1);
}

static void *load_client(void *arg) {
  int port = ((int *)arg)[0], id = ((int *)arg)[1];
  static const char *const paths[] = {"/debug/pprof/heap", "/debug/pprof/profile?seconds=1",
                                      "/debug/pprof/allocs?seconds=1", "/debug/pprof/allocs"};
  for (int i = id; now_s() < load_end; i++) {
    const char *path = paths[i % 4];
    http_resp r = http_get(port, path, 30);
    load_check(path, &r);
    http_free(&r);
  }
  return NULL;
}

static void test_load(void **state) {
  (void)state;
  server s = serve();
  enum { CLIENTS = 20 };
  pthread_t t[CLIENTS];
  int args[CLIENTS][2];
  load_end = now_s() + load_seconds;
  for (int i = 0; i < CLIENTS; i++) {
    args[i][0] = s.port;
    args[i][1] = i;
    pthread_create(&t[i], NULL, load_client, args[i]);
  }
  for (int i = 0; i < CLIENTS; i++)
    pthread_join(t[i], NULL);
  printf("%d clients for %.0f s: %d profiles, %d CPU profiles refused as busy, %d invalid%s%s\n",
         CLIENTS, load_seconds, atomic_load(&load_ok), atomic_load(&load_busy),
         atomic_load(&load_bad), load_first_bad[0] ? "; first: " : "", load_first_bad);
  assert_int_equal(atomic_load(&load_bad), 0);
  assert_true(atomic_load(&load_ok) > CLIENTS);
  finish(&s);
}

/* ---- with the preload library --------------------------------------------------------------- */

#if defined(PRELOAD_LIB) && defined(VICTIM)
extern char **environ;

/* Starts VICTIM for `seconds` with LD_PRELOAD and the variables in env,
 * its stderr into err_path. */
static pid_t start_victim(const char *const env[], const char *seconds, const char *err_path) {
  unlink(err_path); /* not the last run's port */
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int null = open("/dev/null", O_WRONLY);
    if (fd < 0 || dup2(fd, 2) < 0 || dup2(null, 1) < 0)
      _exit(126);
    setenv("LD_PRELOAD", PRELOAD_LIB, 1);
    unsetenv("PPRT_OWNER_PID");
    for (size_t i = 0; env[i]; i++)
      putenv((char *)env[i]);
    execl(VICTIM, VICTIM, seconds, (char *)NULL);
    _exit(127);
  }
  return pid;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return strdup("");
  char *buf = calloc(1, 65536);
  size_t n = fread(buf, 1, 65535, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* The port the victim printed ("pprt: serving http://127.0.0.1:PORT/..."). */
static int victim_port(const char *err_path) {
  for (int i = 0; i < 100; i++) {
    char *e = slurp(err_path);
    const char *p = strstr(e, "serving http://127.0.0.1:");
    int port = p ? atoi(p + strlen("serving http://127.0.0.1:")) : 0;
    free(e);
    if (port > 0)
      return port;
    usleep(50000);
  }
  return 0;
}

static char out_dir[512];

static void test_gopprof(void **state) {
  (void)state;
  if (GO[0] == '\0') {
    printf("SKIP: go not found (go tool pprof is the reference client)\n");
    return;
  }
  char err_path[600];
  snprintf(err_path, sizeof err_path, "%s/gopprof-victim.err", out_dir);
  const char *const env[] = {"PPRT_HTTP=127.0.0.1:0", NULL};
  pid_t pid = start_victim(env, "8", err_path);
  int port = victim_port(err_path);
  assert_true(port > 0);
  setenv("PPROF_TMPDIR", out_dir, 1);
  static const struct {
    const char *args, *want;
  } runs[] = {{"-top -seconds 2", "/debug/pprof/profile"},
              {"-top -sample_index=alloc_space", "/debug/pprof/heap"}};
  for (size_t i = 0; i < 2; i++) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s tool pprof %s http://127.0.0.1:%d%s 2>&1", GO, runs[i].args, port,
             runs[i].want);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char *outp = calloc(1, 1 << 16);
    size_t n = fread(outp, 1, (1 << 16) - 1, f);
    outp[n] = '\0';
    int rc = pclose(f);
    const char *fn = i == 0 ? "http_hot_loop" : "http_alloc_site";
    printf("%s: %s\n", cmd, strstr(outp, fn) ? fn : "(missing)");
    if (rc != 0 || strstr(outp, fn) == NULL)
      fail_msg("%s: exit %d, no %s in:\n%s", cmd, rc, fn, outp);
    free(outp);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char *e = slurp(err_path);
  printf("victim's stderr: %s", e);
  free(e);
}

/* A port nothing listens on, as far as we can tell. */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  bind(fd, (struct sockaddr *)&a, sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &len);
  close(fd);
  return ntohs(a.sin_port);
}

static void test_preload(void **state) {
  (void)state;
  char err_path[600], v1[64], v2[64];
  snprintf(err_path, sizeof err_path, "%s/preload-victim.err", out_dir);
  int port = free_port();
  snprintf(v1, sizeof v1, "PPRT_HTTP=0.0.0.0:%d", port);
  /* An address taken already. */
  int busy = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(busy, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(busy, 1), 0);
  socklen_t alen = sizeof a;
  getsockname(busy, (struct sockaddr *)&a, &alen);
  snprintf(v2, sizeof v2, "PPRT_HTTP=127.0.0.1:%d", ntohs(a.sin_port));
  const struct {
    const char *env[3], *want;
  } cases[] = {
      {{v1, NULL}, "is not a loopback address; set PPRT_HTTP_ALLOW_REMOTE=1"},
      {{"PPRT_HTTP=abc", NULL}, "PPRT_HTTP=abc is not ADDRESS:PORT"},
      {{"PPRT_HTTP=127.0.0.1:99999", NULL}, "is not ADDRESS:PORT"},
      {{"PPRT_HTTP=localhost:6060", NULL}, "localhost is not a numeric IPv4 or IPv6 address"},
      {{"PPRT_HTTP=127.0.0.1:0", "PPRT_HTTP_ALLOW_REMOTE=yes"},
       "PPRT_HTTP_ALLOW_REMOTE=yes is not 0 or 1"},
      {{v2, NULL}, "address already in use; not serving"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pid_t pid = start_victim(cases[i].env, "0.5", err_path);
    if (i == 0) {
      usleep(300000);
      int fd = http_connect(port, 1);
      if (fd >= 0)
        fail_msg("something listens on %d", port);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    char *e = slurp(err_path);
    printf("%s %s -> %s", cases[i].env[0], cases[i].env[1] ? cases[i].env[1] : "", e);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_non_null(strstr(e, cases[i].want));
    assert_non_null(strstr(e, "not serving\n"));
    assert_ptr_equal(strchr(e, '\n'), e + strlen(e) - 1); /* one line */
    free(e);
  }
  close(busy);
  /* Allowed: a remote address serves (on every interface here, so loopback too). */
  /* Every allocation sampled (PPRT_HEAP_RATE=1), so that one made by the
   * endpoint's threads would show. */
  const char *const ok[] = {"PPRT_HTTP=0.0.0.0:0", "PPRT_HTTP_ALLOW_REMOTE=1", "PPRT_HEAP_RATE=1",
                            NULL};
  pid_t pid = start_victim(ok, "2", err_path);
  for (int i = 0; i < 100; i++) {
    char *e = slurp(err_path);
    int done = strstr(e, "serving http://0.0.0.0:") != NULL;
    free(e);
    if (done)
      break;
    usleep(50000);
  }
  char *e = slurp(err_path);
  const char *p = strstr(e, "serving http://0.0.0.0:");
  assert_non_null(p);
  int rport = atoi(p + strlen("serving http://0.0.0.0:"));
  free(e);
  http_resp r = http_get(rport, "/debug/pprof/heap", 10);
  Pprt__Profile *prof = check_profile(&r, "heap", heap_types, "inuse_space");
  assert_true(has_function(prof, "http_alloc_site")); /* the sampler runs */
  pprt__profile_decoded_free(prof);
  http_free(&r);
  /* Again, after requests enough: none of the endpoint's own allocations
   * (libmicrohttpd's connections, pprt's replies) is the program's. */
  r = http_get(rport, "/debug/pprof/heap", 10);
  prof = check_profile(&r, "heap", heap_types, "inuse_space");
  for (size_t i = 0; i < prof->n_location; i++) {
    const Pprt__Location *l = prof->location[i];
    for (size_t m = 0; m < prof->n_mapping; m++)
      if (prof->mapping[m]->id == l->mapping_id &&
          strstr(prof->string_table[prof->mapping[m]->filename], "microhttpd"))
        fail_msg("a heap sample in libmicrohttpd at %#llx", (unsigned long long)l->address);
  }
  assert_false(has_function(prof, "pprt__http_heap"));
  assert_false(has_function(prof, "MHD_start_daemon"));
  pprt__profile_decoded_free(prof);
  http_free(&r);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
#endif

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "api";
  if (argc > 2)
    load_seconds = atof(argv[2]);
  signal(SIGPIPE, SIG_IGN);
#if defined(PRELOAD_LIB) && defined(VICTIM)
  snprintf(out_dir, sizeof out_dir, "%s", HTTP_OUT);
  mkdir(out_dir, 0755);
#endif
  struct CMUnitTest t[1];
  if (strcmp(mode, "api") == 0)
    t[0] = (struct CMUnitTest)cmocka_unit_test(test_api);
  else if (strcmp(mode, "paths") == 0)
    t[0] = (struct CMUnitTest)cmocka_unit_test(test_paths);
  else if (strcmp(mode, "errors") == 0)
    t[0] = (struct CMUnitTest)cmocka_unit_test(test_errors);
  else if (strcmp(mode, "abuse") == 0)
    t[0] = (struct CMUnitTest)cmocka_unit_test(test_abuse);
  else if (strcmp(mode, "load") == 0)
    t[0] = (struct CMUnitTest)cmocka_unit_test(test_load);
#if defined(PRELOAD_LIB) && defined(VICTIM)
  else if (strcmp(mode, "gopprof") == 0)
    t[0] = (struct CMUnitTest)cmocka_unit_test(test_gopprof);
  else if (strcmp(mode, "preload") == 0)
    t[0] = (struct CMUnitTest)cmocka_unit_test(test_preload);
#endif
  else {
    fprintf(stderr, "test_http: unknown mode %s\n", mode);
    return 2;
  }
  return cmocka_run_group_tests_name(mode, t, NULL, NULL);
}
