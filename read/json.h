/* JSON string literals (read/json.c): the one escaper behind every JSON
 * the readers write (the trace exporter, the flame graph page), so that
 * they agree on what a name with control characters or broken UTF-8
 * becomes. */
#ifndef PPRT_READ_JSON_H
#define PPRT_READ_JSON_H

#include <stdarg.h>
#include <stddef.h>

/* Where the escaper's output goes, a run of bytes at a time. */
typedef void (*pprt__json_put)(void *ctx, const char *s, size_t n);

enum {
  /* Also escape '<', '>' and '&' (as \u003c...), so that no string can
   * end an HTML <script> element the JSON sits in. */
  PPRT__JSON_HTML = 1,
};

/* Writes s[0..n) as a JSON string, quotes included: '"' and '\' escaped,
 * control characters as \n, \t, \r or \u00XX, every byte that does not
 * start a valid UTF-8 sequence (stray continuation bytes, overlong forms,
 * surrogates, code points past U+10FFFF, a sequence cut short) replaced by
 * \ufffd, the rest copied as it is. Every JSON parser takes the result. s
 * NULL is the empty string. */
void pprt__json_string(const char *s, size_t n, unsigned flags, pprt__json_put put, void *ctx);

/* Formats as vsnprintf does and hands the whole text to put: from the
 * stack when it is short, else from one allocation. The JSON writers'
 * numbers and the HTTP endpoint's text replies go through it. Returns 0,
 * -ENOMEM (nothing written), or -EINVAL (a format vsnprintf refused). */
int pprt__put_vformat(pprt__json_put put, void *ctx, const char *fmt, va_list ap);

#endif /* PPRT_READ_JSON_H */
