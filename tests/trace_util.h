/* Helpers shared by the trace tests: an in-memory writer, decoding with
 * cmocka assertions, and a small JSON reader that checks the exporter's
 * output the way the viewers read it (syntax, then B/E nesting per thread). */
#ifndef PPRT_TESTS_TRACE_UTIL_H
#define PPRT_TESTS_TRACE_UTIL_H

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/trace.h"
#include "pprt.h"
#include "tests/membuf.h"


/* ---- a JSON reader -------------------------------------------------------------------- */

/* A piece of the JSON text: a string's raw (still escaped) contents, or a
 * whole value. The tests use plain ASCII names, so raw is enough. */
typedef struct jslice {
  const char *p;
  size_t n;
} jslice;

/* One event of the export, with the fields the checks need; slices point
 * into the text, which the jdoc keeps. Small, because exports hold
 * millions of events and the tests run on 32-bit too. */
typedef struct jev {
  char ph[4];
  int has_ts;
  double ts;
  unsigned long long tid;
  jslice name, id, args;
} jev;

typedef struct jdoc {
  jev *ev;
  size_t n, cap;
  const char *err;
  char *text; /* owned, when set */
} jdoc;

static int slice_is(jslice s, const char *want) {
  return s.n == strlen(want) && memcmp(s.p, want, s.n) == 0;
}

static int slice_has(jslice s, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= s.n; i++)
    if (memcmp(s.p + i, needle, k) == 0)
      return 1;
  return 0;
}

typedef struct jp {
  const char *p, *end;
  const char *err;
} jp;

static void jp_ws(jp *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r'))
    j->p++;
}

static int jp_fail(jp *j, const char *why) {
  if (!j->err)
    j->err = why;
  return -1;
}

/* A string; its raw (still escaped) contents into *out when out. */
static int jp_string(jp *j, jslice *out) {
  jp_ws(j);
  if (j->p >= j->end || *j->p != '"')
    return jp_fail(j, "expected a string");
  const char *s = ++j->p;
  while (j->p < j->end && *j->p != '"') {
    unsigned char c = (unsigned char)*j->p;
    if (c < 0x20)
      return jp_fail(j, "control character in a string");
    if (c == '\\') {
      j->p++;
      if (j->p >= j->end)
        return jp_fail(j, "string ends in an escape");
      if (*j->p == 'u') {
        for (int k = 1; k <= 4; k++)
          if (j->p + k >= j->end || !isxdigit((unsigned char)j->p[k]))
            return jp_fail(j, "bad \\u escape");
        j->p += 4;
      } else if (!strchr("\"\\/bfnrt", *j->p)) {
        return jp_fail(j, "bad escape");
      }
    }
    j->p++;
  }
  if (j->p >= j->end)
    return jp_fail(j, "unterminated string");
  if (out) {
    out->p = s;
    out->n = (size_t)(j->p - s);
  }
  j->p++;
  return 0;
}

static int jp_value(jp *j, int depth);

static int jp_number(jp *j, double *out) {
  jp_ws(j);
  char *end;
  double v = strtod(j->p, &end);
  if (end == j->p)
    return jp_fail(j, "expected a value");
  j->p = end;
  if (out)
    *out = v;
  return 0;
}

static int jp_value(jp *j, int depth) {
  if (depth > 64)
    return jp_fail(j, "nested too deep");
  jp_ws(j);
  if (j->p >= j->end)
    return jp_fail(j, "unexpected end");
  char c = *j->p;
  if (c == '"')
    return jp_string(j, NULL);
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    j->p++;
    jp_ws(j);
    if (j->p < j->end && *j->p == close) {
      j->p++;
      return 0;
    }
    for (;;) {
      if (c == '{') {
        if (jp_string(j, NULL))
          return -1;
        jp_ws(j);
        if (j->p >= j->end || *j->p++ != ':')
          return jp_fail(j, "expected ':'");
      }
      if (jp_value(j, depth + 1))
        return -1;
      jp_ws(j);
      if (j->p < j->end && *j->p == ',') {
        j->p++;
        continue;
      }
      if (j->p < j->end && *j->p == close) {
        j->p++;
        return 0;
      }
      return jp_fail(j, "expected ',' or a closing bracket");
    }
  }
  if (j->end - j->p >= 4 && (!strncmp(j->p, "true", 4) || !strncmp(j->p, "null", 4))) {
    j->p += 4;
    return 0;
  }
  if (j->end - j->p >= 5 && !strncmp(j->p, "false", 5)) {
    j->p += 5;
    return 0;
  }
  return jp_number(j, NULL);
}

/* One event object of traceEvents. */
static int jp_event(jp *j, jev *e) {
  memset(e, 0, sizeof *e);
  jp_ws(j);
  if (j->p >= j->end || *j->p++ != '{')
    return jp_fail(j, "an event is not an object");
  for (;;) {
    jslice key;
    if (jp_string(j, &key))
      return -1;
    jp_ws(j);
    if (j->p >= j->end || *j->p++ != ':')
      return jp_fail(j, "expected ':'");
    jp_ws(j);
    const char *vstart = j->p;
    if (slice_is(key, "ph")) {
      jslice ph;
      if (jp_string(j, &ph))
        return -1;
      if (ph.n >= sizeof e->ph)
        return jp_fail(j, "ph longer than a letter");
      memcpy(e->ph, ph.p, ph.n);
    } else if (slice_is(key, "name")) {
      if (jp_string(j, &e->name))
        return -1;
    } else if (slice_is(key, "id")) {
      if (jp_string(j, &e->id))
        return -1;
    } else if (slice_is(key, "ts")) {
      if (jp_number(j, &e->ts))
        return -1;
      e->has_ts = 1;
    } else if (slice_is(key, "tid")) {
      double v;
      if (jp_number(j, &v))
        return -1;
      e->tid = (unsigned long long)v;
    } else {
      if (jp_value(j, 1))
        return -1;
      if (slice_is(key, "args")) {
        e->args.p = vstart;
        e->args.n = (size_t)(j->p - vstart);
      }
    }
    jp_ws(j);
    if (j->p < j->end && *j->p == ',') {
      j->p++;
      continue;
    }
    if (j->p < j->end && *j->p == '}') {
      j->p++;
      return 0;
    }
    return jp_fail(j, "expected ',' or '}' in an event");
  }
}

/* Parses the export: the whole text must be one JSON object whose
 * traceEvents is an array of event objects. Returns 0, or -1 with doc->err. */
static int json_read(const char *text, size_t len, jdoc *doc) {
  memset(doc, 0, sizeof *doc);
  jp j = {text, text + len, NULL};
  jp_ws(&j);
  if (j.p >= j.end || *j.p++ != '{') {
    doc->err = "not an object";
    return -1;
  }
  int found = 0;
  for (;;) {
    jslice key;
    if (jp_string(&j, &key))
      break;
    jp_ws(&j);
    if (j.p >= j.end || *j.p++ != ':') {
      jp_fail(&j, "expected ':'");
      break;
    }
    if (slice_is(key, "traceEvents")) {
      found = 1;
      jp_ws(&j);
      if (j.p >= j.end || *j.p++ != '[') {
        jp_fail(&j, "traceEvents is not an array");
        break;
      }
      jp_ws(&j);
      if (j.p < j.end && *j.p == ']') {
        j.p++;
      } else {
        for (;;) {
          if (doc->n == doc->cap) {
            size_t ncap = doc->cap ? 2 * doc->cap : 256;
            jev *n = realloc(doc->ev, ncap * sizeof *n);
            if (n == NULL) {
              jp_fail(&j, "out of memory");
              break;
            }
            doc->ev = n;
            doc->cap = ncap;
          }
          if (jp_event(&j, &doc->ev[doc->n]))
            break;
          doc->n++;
          jp_ws(&j);
          if (j.p < j.end && *j.p == ',') {
            j.p++;
            continue;
          }
          if (j.p < j.end && *j.p == ']') {
            j.p++;
            break;
          }
          jp_fail(&j, "expected ',' or ']' in traceEvents");
          break;
        }
        if (j.err)
          break;
      }
    } else if (jp_value(&j, 1)) {
      break;
    }
    jp_ws(&j);
    if (j.p < j.end && *j.p == ',') {
      j.p++;
      continue;
    }
    if (j.p < j.end && *j.p == '}') {
      j.p++;
      jp_ws(&j);
      if (j.p != j.end)
        jp_fail(&j, "text after the object");
      break;
    }
    jp_fail(&j, "expected ',' or '}'");
    break;
  }
  if (!j.err && !found)
    j.err = "no traceEvents";
  doc->err = j.err;
  return j.err ? -1 : 0;
}

static void json_free(jdoc *doc) {
  free(doc->ev);
  free(doc->text);
  memset(doc, 0, sizeof *doc);
}

/* Checks what speedscope and the Perfetto UI need of B/E: per thread, in
 * file order, timestamps never decrease, every E closes the innermost open
 * B of the same name, and nothing is left open. Returns NULL or a reason. */
static const char *json_check_nesting(const jdoc *doc) {
  unsigned long long tids[1024];
  size_t ntids = 0;
  for (size_t i = 0; i < doc->n; i++) {
    const jev *e = &doc->ev[i];
    if (strcmp(e->ph, "B") && strcmp(e->ph, "E"))
      continue;
    if (!e->has_ts)
      return "B/E without ts";
    size_t k = 0;
    while (k < ntids && tids[k] != e->tid)
      k++;
    if (k == ntids) {
      if (ntids == 1024)
        return "too many threads for the check";
      tids[ntids++] = e->tid;
    }
  }
  static jslice stack[1 << 16];
  for (size_t t = 0; t < ntids; t++) {
    size_t sp = 0;
    double last = -1;
    for (size_t k = 0; k < doc->n; k++) {
      const jev *f = &doc->ev[k];
      if (f->tid != tids[t] || (strcmp(f->ph, "B") && strcmp(f->ph, "E")))
        continue;
      if (f->ts < last)
        return "B/E timestamps go backwards on a thread";
      last = f->ts;
      if (!strcmp(f->ph, "B")) {
        if (sp == sizeof stack / sizeof stack[0])
          return "regions nested too deep for the check";
        stack[sp++] = f->name;
      } else {
        if (sp == 0)
          return "E without an open B";
        jslice b = stack[--sp];
        if (b.n != f->name.n || memcmp(b.p, f->name.p, b.n) != 0)
          return "E's name differs from its B's";
      }
    }
    if (sp != 0)
      return "B left open at the end";
  }
  return NULL;
}

#endif /* PPRT_TESTS_TRACE_UTIL_H */
