/* The JSON string escaper (read/json.h): a UTF-8 validator and the escapes,
 * writing runs of unchanged bytes in one call. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "read/json.h"

/* Length of the valid UTF-8 sequence at s (of at most n bytes), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len;
  unsigned min;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
    min = 0x80;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    min = 0x800;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (n < len)
    return 0;
  unsigned cp = c & (0x7f >> len);
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return len;
}

int pprt__put_vformat(pprt__json_put put, void *ctx, const char *fmt, va_list ap) {
  char small[512];
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  if (n < 0 || (size_t)n < sizeof small) {
    va_end(again);
    if (n < 0)
      return -EINVAL;
    put(ctx, small, (size_t)n);
    return 0;
  }
  char *big = malloc((size_t)n + 1);
  int rc = big != NULL ? 0 : -ENOMEM;
  if (rc == 0) {
    vsnprintf(big, (size_t)n + 1, fmt, again);
    put(ctx, big, (size_t)n);
    free(big);
  }
  va_end(again);
  return rc;
}

void pprt__json_string(const char *s, size_t n, unsigned flags, pprt__json_put put, void *ctx) {
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  if (s == NULL)
    n = 0;
  int html = (flags & PPRT__JSON_HTML) != 0;
  put(ctx, "\"", 1);
  size_t run = 0; /* bytes copied as they are, pending */
  for (size_t i = 0; i < n;) {
    unsigned c = p[i];
    size_t k = 1;
    const char *esc = NULL;
    char tmp[8];
    if (c == '"')
      esc = "\\\"";
    else if (c == '\\')
      esc = "\\\\";
    else if (c == '\n')
      esc = "\\n";
    else if (c == '\t')
      esc = "\\t";
    else if (c == '\r')
      esc = "\\r";
    else if (c < 0x20 || (html && (c == '<' || c == '>' || c == '&'))) {
      snprintf(tmp, sizeof tmp, "\\u%04x", c);
      esc = tmp;
    } else if (c >= 0x80 && (k = utf8_seq(p + i, n - i)) == 0) {
      esc = "\\ufffd";
      k = 1;
    }
    if (esc) {
      if (run)
        put(ctx, (const char *)p + i - run, run);
      run = 0;
      put(ctx, esc, strlen(esc));
    } else {
      run += k;
    }
    i += k;
  }
  if (run)
    put(ctx, (const char *)p + n - run, run);
  put(ctx, "\"", 1);
}
