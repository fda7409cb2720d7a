/* Checks of the HTTP endpoint's responses for its tests (test_http.c,
 * test_http_preload.c), after <cmocka.h>: a profile as Grafana Alloy
 * validates one (200, application/octet-stream, gzip, decodable, the
 * expected sample types), and text errors. */
#ifndef PPRT_TESTS_HTTP_CHECK_H
#define PPRT_TESTS_HTTP_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/profile.h"
#include "read/profile_decode.h"
#include "tests/http_client.h"

/* A profile response as Alloy validates it: 200, octet-stream, gzip, and
 * it decodes with these sample types (NULL-ended) and default type. */
static inline Pprt__Profile *check_profile(const http_resp *r, const char *filename,
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

/* GETs a profile path and checks the response as check_profile does; the
 * decoded profile outlives the response, which is freed. */
static inline Pprt__Profile *get_profile(int port, const char *path, int timeout_s,
                                         const char *filename, const char *const *types,
                                         const char *dflt) {
  http_resp r = http_get(port, path, timeout_s);
  Pprt__Profile *p = check_profile(&r, filename, types, dflt);
  http_free(&r);
  return p;
}

__attribute__((unused)) static const char *const heap_types[] = {
    "alloc_objects", "alloc_space", "inuse_objects", "inuse_space", NULL};
__attribute__((unused)) static const char *const cpu_types[] = {"samples", "cpu", NULL};

static inline int64_t total(const Pprt__Profile *p, size_t idx) {
  int64_t t = 0;
  for (size_t i = 0; i < p->n_sample; i++)
    t += p->sample[i]->value[idx];
  return t;
}

/* Whether a function of this name is in the profile. */
static inline int has_function(const Pprt__Profile *p, const char *name) {
  for (size_t i = 0; i < p->n_function; i++)
    if (strcmp(p->string_table[p->function[i]->name], name) == 0)
      return 1;
  return 0;
}

static inline void check_text_error(const http_resp *r, int status, const char *needle) {
  if (r->status != status)
    fail_msg("status %d, want %d: %s", r->status, status, r->body ? (char *)r->body : "");
  assert_string_equal(r->type, "text/plain; charset=utf-8");
  if (needle && strstr((char *)r->body, needle) == NULL)
    fail_msg("body [%s] lacks [%s]", (char *)r->body, needle);
}

/* GETs path and checks the text error as check_text_error does; returns
 * whether the response marked itself as Go's pprof would (go_pprof). */
static inline int get_text_error(int port, const char *path, int timeout_s, int status,
                                 const char *needle) {
  http_resp r = http_get(port, path, timeout_s);
  check_text_error(&r, status, needle);
  int go_pprof = r.go_pprof;
  http_free(&r);
  return go_pprof;
}

#endif /* PPRT_TESTS_HTTP_CHECK_H */
