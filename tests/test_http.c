/* The HTTP endpoint (pprt_http_start) end to end: a real server on
 * 127.0.0.1 and real clients (tests/http_client.h plays the scrapers; go
 * tool pprof is the reference one, in test_http_preload.c).
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
 *            for SECONDS (default 30): every response valid, no crash
 *   shared   in this process: cumulative heap profiles asked for within
 *            the sharing window get one body; past it, a new one shows
 *            the allocations since; no response is older than the window,
 *            and deltas are never shared
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
#include "read/profile_decode.h"
#include "tests/http_check.h"
#include "tests/http_client.h"
#include "tests/spin.h"

static double load_seconds = 30;

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
  LCG_ROUNDS(x, 20000);
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
      stats s = {process_cpu(), atomic_load(&work_cpu), atomic_load(&rounds)};
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
  /* HTTP/1.1 keeps the connection, as Go's client (Parca's, Alloy's)
   * expects: three answers on one. */
  http_conn kc = http_conn_open(port, 10);
  static const char *const kept_paths[] = {"/debug/pprof/heap", "/debug/pprof/cmdline",
                                           "/debug/pprof/allocs"};
  for (int i = 0; i < 3; i++) {
    r = http_conn_get(&kc, kept_paths[i]);
    assert_int_equal(r.status, 200);
    assert_true(r.len > 0);
    http_free(&r);
  }
  assert_int_equal(kc.connects, 1);
  http_conn_close(&kc);
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

  Pprt__Profile *p =
      get_profile(s.port, "/debug/pprof/heap", 10, "heap", heap_types, "inuse_space");
  assert_true(has_function(p, "http_test_alloc"));
  pprt__profile_decoded_free(p);

  /* "seconds=" is no seconds, as Go's FormValue has it. */
  p = get_profile(s.port, "/debug/pprof/heap?seconds=", 10, "heap", heap_types, "inuse_space");
  pprt__profile_decoded_free(p);

  p = get_profile(s.port, "/debug/pprof/allocs", 10, "allocs", heap_types, "alloc_space");
  int64_t cumulative = total(p, 1);
  pprt__profile_decoded_free(p);

  /* Go >= 1.15's delta: what was allocated during the 2 s. */
  double t0 = now_s();
  r = http_get(s.port, "/debug/pprof/allocs?seconds=2", 20);
  assert_true(now_s() - t0 >= 1.9);
  p = check_profile(&r, "allocs-delta", heap_types, "alloc_space");
  int64_t delta = total(p, 1);
  assert_true(p->duration_nanos >= 1900000000);
  pprt__profile_decoded_free(p);
  http_free(&r);
  p = get_profile(s.port, "/debug/pprof/allocs", 10, "allocs", heap_types, "alloc_space");
  int64_t after = total(p, 1);
  pprt__profile_decoded_free(p);
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

  p = get_profile(s.port, "/debug/pprof/profile?seconds=1", 20, "profile", cpu_types, NULL);
  assert_true(has_function(p, "http_test_hot"));
  /* pprt's own threads are not in it: neither sampled nor charged. */
  assert_false(has_function(p, PPRT__FRAME_BLOCKED));
  pprt__profile_decoded_free(p);

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
    assert_true(get_text_error(s.port, bad_seconds[i], 10, 400, "Bad Request"));
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
  for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++)
    get_text_error(s.port, missing[i], 10, 404, NULL);
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
  assert_true(get_text_error(s.port, "/debug/pprof/profile?seconds=1", 10, 500,
                             "Could not enable CPU profiling: cpu profiling already in use"));
  pthread_join(t, NULL);
  Pprt__Profile *p = check_profile(&first.r, "profile", cpu_types, NULL);
  pprt__profile_decoded_free(p);
  http_free(&first.r);

  /* The program's own CPU profile (PPRT_CPUPROFILE, pprt_cpu_start): 409. */
  assert_int_equal(command(&s, 'c'), 0);
  assert_true(get_text_error(s.port, "/debug/pprof/profile?seconds=1", 10, 409,
                             "already recording a CPU profile of its own"));
  assert_int_equal(command(&s, 'C'), 0);
  p = get_profile(s.port, "/debug/pprof/profile?seconds=1", 20, "profile", cpu_types, NULL);
  pprt__profile_decoded_free(p);
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
  Pprt__Profile *p =
      get_profile(s.port, "/debug/pprof/profile?seconds=1", 20, "profile", cpu_types, NULL);
  assert_true(has_function(p, "http_test_hot"));
  pprt__profile_decoded_free(p);
  p = get_profile(s.port, "/debug/pprof/heap", 20, "heap", heap_types, "inuse_space");
  pprt__profile_decoded_free(p);
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

/* ---- shared --------------------------------------------------------------------------------- */

#ifndef PPRT_TEST_NO_HTTP
#include "core/http.h"

__attribute__((noinline)) void http_shared_before(void);
void http_shared_before(void) {
  static char block[64];
  pprt_alloc_note(block, sizeof block);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void http_shared_after(void);
void http_shared_after(void) {
  static char block[64];
  pprt_alloc_note(block, sizeof block);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void http_shared_during(void);
void http_shared_during(void) {
  static char block[64];
  pprt_alloc_note(block, sizeof block);
  __asm__ volatile("" ::: "memory");
}

typedef struct delta_req {
  int port;
  http_resp r;
  atomic_int done;
} delta_req;

static void *delta_request(void *arg) {
  delta_req *d = arg;
  d->r = http_get(d->port, "/debug/pprof/allocs?seconds=2", 20);
  atomic_store(&d->done, 1);
  return NULL;
}

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A heap profile response: checked, decoded, and no older than the
 * default window allows (its time is when its build began). */
static Pprt__Profile *fresh_heap(int port, const char *name, http_resp *keep) {
  char path[64];
  snprintf(path, sizeof path, "/debug/pprof/%s", name);
  double asked = wall_s();
  *keep = http_get(port, path, 10);
  Pprt__Profile *p = check_profile(keep, name, heap_types,
                                   strcmp(name, "heap") == 0 ? "inuse_space" : "alloc_space");
  assert_true((double)p->time_nanos / 1e9 > asked - 0.25 - 0.01);
  return p;
}
#endif

/* In this process: cumulative heap profiles within the window share one
 * body, and none is older than the window. */
static void test_shared(void **state) {
  (void)state;
#ifndef PPRT_TEST_NO_HTTP
  pprt_heap_set_rate(1); /* every note is sampled */
  int port = 0;
  pprt_http_options o = {.size = sizeof o, .bound_port = &port};
  assert_int_equal(pprt_http_start(&o), 0);

  /* A long window, so that a slow machine does not make the second
   * request miss it: the same bytes, built once (a body's time is in
   * nanoseconds, two builds never agree), without what came after. */
  pprt__http_set_share_window(10 * 1000000000ull);
  http_resp a, b, c;
  Pprt__Profile *pa = fresh_heap(port, "heap", &a);
  http_shared_before();
  Pprt__Profile *pb = fresh_heap(port, "heap", &b);
  assert_int_equal(a.len, b.len);
  assert_memory_equal(a.body, b.body, a.len);
  assert_false(has_function(pb, "http_shared_before"));
  /* allocs has a body of its own (another default type), built now. */
  Pprt__Profile *pc = fresh_heap(port, "allocs", &c);
  assert_true(has_function(pc, "http_shared_before"));
  /* debug=1 is made from the shared body too. */
  http_resp t = http_get(port, "/debug/pprof/heap?debug=1", 10);
  assert_int_equal(t.status, 200);
  assert_null(strstr((char *)t.body, "http_shared_before"));
  http_free(&t);
  pprt__profile_decoded_free(pa);
  pprt__profile_decoded_free(pb);
  pprt__profile_decoded_free(pc);
  http_free(&a);
  http_free(&b);
  http_free(&c);

  /* The default window: past it, the next response is built again and
   * shows what was allocated since. */
  pprt__http_set_share_window(0);
  http_shared_after();
  usleep(300000);
  pa = fresh_heap(port, "heap", &a);
  assert_true(has_function(pa, "http_shared_before"));
  assert_true(has_function(pa, "http_shared_after"));
  pprt__profile_decoded_free(pa);
  http_free(&a);

  /* Deltas are never shared: one taken while the cumulative body is
   * fresh still shows what was allocated during it. */
  pa = fresh_heap(port, "allocs", &a);
  pprt__profile_decoded_free(pa);
  http_free(&a);
  delta_req d = {port, {0}, 0};
  pthread_t th;
  pthread_create(&th, NULL, delta_request, &d);
  while (!atomic_load(&d.done)) { /* whenever the delta's window began */
    http_shared_during();
    usleep(50000);
  }
  pthread_join(th, NULL);
  pa = check_profile(&d.r, "allocs-delta", heap_types, "alloc_space");
  assert_true(has_function(pa, "http_shared_during"));
  pprt__profile_decoded_free(pa);
  http_free(&d.r);
  assert_int_equal(pprt_http_stop(), 0);
#endif
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

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "api";
  if (argc > 2)
    load_seconds = atof(argv[2]);
  signal(SIGPIPE, SIG_IGN);
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
  else if (strcmp(mode, "shared") == 0)
    t[0] = (struct CMUnitTest)cmocka_unit_test(test_shared);
  else {
    fprintf(stderr, "test_http: unknown mode %s\n", mode);
    return 2;
  }
  return cmocka_run_group_tests_name(mode, t, NULL, NULL);
}
