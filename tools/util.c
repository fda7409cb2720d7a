/* Small helpers the pprt subcommands share: one-line errors, reading a
 * whole input file, opening an output, parsing options and numbers, and
 * printing values in a profile's unit. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/parse.h"
#include "core/platform.h"
#include "tools/cli.h"

int cli_errors_silent;

int cli_error(int code, const char *cmd, const char *fmt, ...) {
  if (cli_errors_silent)
    return code;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "pprt%s%s: ", cmd ? " " : "", cmd ? cmd : "");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return code;
}

int cli_read_file(const char *path, size_t max, uint8_t **data, size_t *len, char *err,
                  size_t errlen) {
  *data = NULL;
  *len = 0;
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (f == NULL) {
    snprintf(err, errlen, "cannot open: %s", strerror(errno));
    return CLI_EINPUT;
  }
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    snprintf(err, errlen, "is a directory, not a file");
    if (f != stdin)
      fclose(f);
    return CLI_EINPUT;
  }
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  int rc = CLI_OK;
  while (buf) {
    if (n == cap) {
      if (cap > max) {
        snprintf(err, errlen, "larger than %zu MiB", max >> 20);
        rc = CLI_EINPUT;
        break;
      }
      uint8_t *nb = realloc(buf, cap * 2);
      if (nb == NULL) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) {
        snprintf(err, errlen, "cannot read: %s", strerror(errno));
        rc = CLI_EINPUT;
      }
      break;
    }
  }
  if (buf == NULL) {
    snprintf(err, errlen, "out of memory reading it");
    rc = CLI_EFAIL;
  }
  if (f != stdin)
    fclose(f);
  if (rc != CLI_OK) {
    free(buf);
    return rc;
  }
  *data = buf;
  *len = n;
  return CLI_OK;
}

FILE *cli_open_output(const char *path) {
  if (strcmp(path, "-") == 0)
    return stdout;
  return fopen(path, "w");
}

FILE *cli_create_new(const char *path) {
  int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = open(path, flags, 0644);
  if (fd < 0 && errno == EEXIST) {
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && unlink(path) == 0)
      fd = open(path, flags, 0644);
    else
      errno = EEXIST;
  }
  if (fd < 0)
    return NULL;
  FILE *f = fdopen(fd, "w");
  if (f == NULL) {
    int e = errno;
    close(fd);
    errno = e;
  }
  return f;
}

int cli_parse_long(const char *s, long long lo, long long hi, long long *out) {
  return pprt__parse_int(s, lo, hi, out) == 0 ? 0 : -1;
}

uint64_t cli_hash_bytes(const void *data, size_t len, uint64_t h) {
  const unsigned char *c = data;
  for (size_t i = 0; i < len; i++)
    h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

size_t cli_lower_bound(const void *v, size_t n, size_t stride, uint64_t key) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    uint64_t at;
    memcpy(&at, (const char *)v + mid * stride, sizeof at);
    if (at < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

int cli_slots_reserve(cli_slots *s, size_t count, size_t first, size_t from,
                      uint64_t (*hash)(size_t i, const void *ctx), const void *ctx) {
  if ((count + 1) * 2 <= s->n)
    return 0;
  cli_slots grown = {calloc(s->n ? s->n * 2 : first, sizeof *grown.v), s->n ? s->n * 2 : first};
  if (grown.v == NULL)
    return -1;
  for (size_t i = from; i < count; i++) {
    size_t j = cli_slots_at(&grown, hash(i, ctx));
    while (grown.v[j])
      j = cli_slots_next(&grown, j);
    grown.v[j] = (uint32_t)i + 1;
  }
  free(s->v);
  *s = grown;
  return 0;
}

char *cli_output_name(const char *in, const char *const *exts, size_t nexts, const char *ext) {
  size_t n = strlen(in), e = strlen(ext);
  char *out = malloc(n + e + 1);
  if (out == NULL)
    return NULL;
  memcpy(out, in, n + 1);
  for (size_t i = 0; i < nexts; i++) {
    size_t x = strlen(exts[i]);
    if (n > x && strcmp(out + n - x, exts[i]) == 0) {
      n -= x;
      break;
    }
  }
  memcpy(out + n, ext, e + 1);
  return out;
}

int cli_os_self_exe(char *buf, size_t len) {
  return pprt__os_exe_path(buf, len) == 0 ? 0 : -1;
}

const char *cli_option_value(int argc, char **argv, int *i, const char *name, int *missing) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  *missing = 0;
  if (strncmp(a, name, n) != 0)
    return NULL;
  if (a[n] == '=' && name[1] == '-')
    return a + n + 1;
  if (a[n] != '\0')
    return NULL;
  if (*i + 1 >= argc) {
    *missing = 1;
    return NULL;
  }
  return argv[++*i];
}

/* pprof's scaling: seconds and bytes in the largest unit that keeps the
 * number at least 1. */
void cli_format_value(char *buf, size_t len, int64_t v, const char *unit) {
  double d = (double)v, a = d < 0 ? -d : d;
  if (v == 0) {
    snprintf(buf, len, "0");
    return;
  }
  if (strcmp(unit, "nanoseconds") == 0) {
    if (a >= 1e9)
      snprintf(buf, len, "%.2fs", d / 1e9);
    else if (a >= 1e6)
      snprintf(buf, len, "%.2fms", d / 1e6);
    else if (a >= 1e3)
      snprintf(buf, len, "%.2fus", d / 1e3);
    else
      snprintf(buf, len, "%lldns", (long long)v);
  } else if (strcmp(unit, "bytes") == 0) {
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;
    while (a >= 1024 && u < 4) {
      a /= 1024;
      d /= 1024;
      u++;
    }
    if (u == 0)
      snprintf(buf, len, "%lldB", (long long)v);
    else
      snprintf(buf, len, "%.2f%s", d, units[u]);
  } else {
    snprintf(buf, len, "%lld", (long long)v);
  }
}
