/* A small HTTP/1.0 client for the endpoint's tests and bench/http: one
 * request per connection (Connection: close), the whole response read into
 * memory, status and two headers picked out. It plays the scrapers (go tool
 * pprof, Parca, Alloy) well enough to check what they check; nothing here
 * is pprt's own HTTP handling. */
#ifndef PPRT_TESTS_HTTP_CLIENT_H
#define PPRT_TESTS_HTTP_CLIENT_H

#include <arpa/inet.h>
#include <netinet/in.h>
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

/* Reads a whole response from fd into r. */
static void http_read(int fd, http_resp *r) {
  size_t cap = 65536, len = 0;
  unsigned char *buf = malloc(cap);
  for (;;) {
    if (len == cap) {
      cap *= 2;
      buf = realloc(buf, cap);
    }
    ssize_t n = recv(fd, buf + len, cap - len, 0);
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  memset(r, 0, sizeof *r);
  unsigned char *end = NULL;
  for (size_t i = 0; i + 3 < len; i++)
    if (memcmp(buf + i, "\r\n\r\n", 4) == 0) {
      end = buf + i;
      break;
    }
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
    http_read(fd, &r);
  close(fd);
  return r;
}

static http_resp http_get(int port, const char *path, int timeout_s) {
  return http_do(port, "GET", path, NULL, NULL, timeout_s);
}

static void http_free(http_resp *r) {
  free(r->body);
  r->body = NULL;
}

#endif /* PPRT_TESTS_HTTP_CLIENT_H */
