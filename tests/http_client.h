/* A small HTTP client for the endpoint's tests and bench/http: HTTP/1.0,
 * one request per connection (http_get, http_do), or HTTP/1.1 on a kept
 * connection (http_conn_get: what Go's net/http, and so Parca and Alloy,
 * do); the whole response read into memory, status and two headers picked
 * out. It plays the scrapers (go tool pprof, Parca, Alloy) well enough to
 * check what they check; nothing here is pprt's own HTTP handling. */
#ifndef PPRT_TESTS_HTTP_CLIENT_H
#define PPRT_TESTS_HTTP_CLIENT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* macOS has no MSG_NOSIGNAL; the tests ignore SIGPIPE anyway. */
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

typedef struct http_resp {
  int status; /* 0: no response (connection failed or closed early) */
  char type[128];
  char disposition[128];
  int go_pprof; /* X-Go-Pprof: 1 was present */
  unsigned char *body;
  size_t len;
} http_resp;

/* A connected socket to 127.0.0.1:port, or -1. timeout_s bounds each read. */
static int http_connect(int port, int timeout_s) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int http_send_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static void http_header(const char *head, const char *name, char *out, size_t outlen) {
  size_t n = strlen(name);
  out[0] = '\0';
  for (const char *p = head; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
    if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
      const char *v = p + n + 1;
      while (*v == ' ')
        v++;
      size_t k = strcspn(v, "\r\n");
      if (k >= outlen)
        k = outlen - 1;
      memcpy(out, v, k);
      out[k] = '\0';
      return;
    }
  }
}

/* Where the head in buf[0, len) ends (its blank line), or NULL. */
static unsigned char *http_head_end(unsigned char *buf, size_t len) {
  for (size_t i = 0; i + 3 < len; i++)
    if (memcmp(buf + i, "\r\n\r\n", 4) == 0)
      return buf + i;
  return NULL;
}

/* Reads a response from fd into r: until the connection closes, or, with
 * kept set, as far as its Content-Length (0 in *kept when it has none and
 * so ran to the close). */
static void http_read_until(int fd, http_resp *r, int *kept) {
  size_t cap = 65536, len = 0, want = SIZE_MAX;
  unsigned char *buf = malloc(cap), *end = NULL;
  while (len < want) {
    if (len == cap) {
      cap *= 2;
      buf = realloc(buf, cap);
    }
    ssize_t n = recv(fd, buf + len, cap - len, 0);
    if (n <= 0)
      break;
    len += (size_t)n;
    if (kept && end == NULL && (end = http_head_end(buf, len)) != NULL) {
      char cl[32];
      *end = '\0';
      http_header((char *)buf, "Content-Length", cl, sizeof cl);
      *end = '\r';
      if (cl[0])
        want = (size_t)(end + 4 - buf) + strtoull(cl, NULL, 10);
    }
  }
  if (kept)
    *kept = want != SIZE_MAX && len == want;
  memset(r, 0, sizeof *r);
  end = http_head_end(buf, len);
  if (end == NULL || sscanf((char *)buf, "HTTP/1.%*d %d", &r->status) != 1) {
    r->status = 0;
    free(buf);
    return;
  }
  *end = '\0';
  char go[8];
  http_header((char *)buf, "Content-Type", r->type, sizeof r->type);
  http_header((char *)buf, "Content-Disposition", r->disposition, sizeof r->disposition);
  http_header((char *)buf, "X-Go-Pprof", go, sizeof go);
  r->go_pprof = strcmp(go, "1") == 0;
  r->len = len - (size_t)(end + 4 - buf);
  r->body = malloc(r->len + 1);
  memcpy(r->body, end + 4, r->len);
  r->body[r->len] = '\0';
  free(buf);
}

/* One request: method and path (with query), extra header lines (each
 * ending "\r\n") or NULL, a body or NULL. */
static http_resp http_do(int port, const char *method, const char *path, const char *extra,
                         const char *body, int timeout_s) {
  http_resp r;
  memset(&r, 0, sizeof r);
  int fd = http_connect(port, timeout_s);
  if (fd < 0)
    return r;
  char head[1024];
  int n = snprintf(head, sizeof head,
                   "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\nUser-Agent: pprt-test\r\n%s"
                   "Content-Length: %zu\r\n\r\n",
                   method, path, extra ? extra : "", body ? strlen(body) : (size_t)0);
  if (http_send_all(fd, head, (size_t)n) == 0 &&
      (!body || http_send_all(fd, body, strlen(body)) == 0))
    http_read_until(fd, &r, NULL);
  close(fd);
  return r;
}

static http_resp http_get(int port, const char *path, int timeout_s) {
  return http_do(port, "GET", path, NULL, NULL, timeout_s);
}

/* A kept connection: fd -1 until the first request connects it. */
typedef struct http_conn {
  int port, timeout_s, fd;
  unsigned connects; /* connections made, the first one included */
} http_conn;

static inline http_conn http_conn_open(int port, int timeout_s) {
  http_conn c = {port, timeout_s, -1, 0};
  return c;
}

static inline void http_conn_close(http_conn *c) {
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
}

/* A GET on the kept connection, HTTP/1.1; connects when there is none,
 * and once more when the server had closed a kept one. */
static inline http_resp http_conn_get(http_conn *c, const char *path) {
  http_resp r;
  memset(&r, 0, sizeof r);
  char head[1024];
  int n = snprintf(head, sizeof head,
                   "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: pprt-test\r\n\r\n", path);
  for (int attempt = 0; attempt < 2; attempt++) {
    int reused = c->fd >= 0;
    if (!reused) {
      if ((c->fd = http_connect(c->port, c->timeout_s)) < 0)
        return r;
      c->connects++;
    }
    int kept = 0;
    if (http_send_all(c->fd, head, (size_t)n) == 0)
      http_read_until(c->fd, &r, &kept);
    if (!kept)
      http_conn_close(c); /* a response without a status has no body to free */
    if (r.status != 0 || !reused)
      break; /* else the server had closed the kept connection: once more */
  }
  return r;
}

static void http_free(http_resp *r) {
  free(r->body);
  r->body = NULL;
}

#endif /* PPRT_TESTS_HTTP_CLIENT_H */
