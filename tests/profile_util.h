/* Reading decoded profiles in the C tests: a location's function name, a
 * sample's leaf and callers, and a profile file read back and decoded.
 * For cmocka tests, after <cmocka.h>: a file that does not decode fails
 * the test. */
#ifndef PPRT_TESTS_PROFILE_UTIL_H
#define PPRT_TESTS_PROFILE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/profile.h"
#include "read/profile_decode.h"

/* ---- names in a profile --------------------------------------------------------- */

/* The function of location loc_id's first line, "?" if it has none. */
static inline const char *fn_name(const Pprt__Profile *p, uint64_t loc_id) {
  for (size_t i = 0; i < p->n_location; i++) {
    const Pprt__Location *l = p->location[i];
    if (l->id != loc_id)
      continue;
    if (l->n_line == 0)
      return "?";
    for (size_t j = 0; j < p->n_function; j++)
      if (p->function[j]->id == l->line[0]->function_id)
        return p->string_table[p->function[j]->name];
  }
  return "?";
}

/* Whether a function's name is `want` or a compiler's clone of it
 * (want.constprop.0, want.isra.0, want.part.0): optimizers rename. */
static inline int name_is(const char *name, const char *want) {
  size_t n = strlen(want);
  return strncmp(name, want, n) == 0 && (name[n] == '\0' || name[n] == '.');
}

/* The function the sample was in, "" for a sample without frames. */
static inline const char *leaf_name(const Pprt__Profile *p, const Pprt__Sample *s) {
  return s->n_location_id ? fn_name(p, s->location_id[0]) : "";
}

/* Whether a frame of the sample from index `from` on (1: the leaf's
 * callers, 0: any frame) is `want` (or a clone of it). */
static inline int frames_have(const Pprt__Profile *p, const Pprt__Sample *s, size_t from,
                              const char *want) {
  for (size_t i = from; i < s->n_location_id; i++)
    if (name_is(fn_name(p, s->location_id[i]), want))
      return 1;
  return 0;
}

/* Whether a caller of the sample's leaf is `want`. */
static inline int stack_has(const Pprt__Profile *p, const Pprt__Sample *s, const char *want) {
  return frames_have(p, s, 1, want);
}

/* ---- profile files -------------------------------------------------------------- */

/* The whole file, NUL-terminated (for the text ones); NULL if it cannot be
 * read. */
static inline char *read_file(const char *path, size_t *len) {
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *buf = NULL;
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0)
    n = ftell(f);
  if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
    *len = fread(buf, 1, (size_t)n, f);
    buf[*len] = 0;
  }
  fclose(f);
  return buf;
}

/* The profile in a file; the test fails if there is none or it does not
 * decode. */
static inline Pprt__Profile *decode_file(const char *path) {
  size_t len = 0;
  char *buf = read_file(path, &len);
  if (!buf)
    fail_msg("no profile at %s", path);
  Pprt__Profile *p = NULL;
  char err[256];
  if (pprt__profile_decode(buf, len, &p, err, sizeof err) != 0)
    fail_msg("%s does not decode: %s", path, err);
  free(buf);
  return p;
}

/* ---- a CPU profile's comments ---------------------------------------------------- */

/* The first comment that contains needle, or NULL. */
static inline const char *profile_comment(const Pprt__Profile *p, const char *needle) {
  for (size_t i = 0; i < p->n_comment; i++)
    if (strstr(p->string_table[p->comment[i]], needle))
      return p->string_table[p->comment[i]];
  return NULL;
}

/* How much wider than a binomial's a share of a CPU profile's samples
 * spreads: a signal that stands for k periods (a timer's overrun, a late
 * clock signal) counts k samples but is one draw, so a share's variance is
 * p(1-p) f / n with f = sum(k^2) / sum(k), both sums from the comments
 * ("effective rate ... (N samples", "sum of squared periods per signal S").
 * 0 when they are missing or do not parse, for the caller to fail on. */
static inline double profile_fold_factor(const Pprt__Profile *p) {
  const char *rate = profile_comment(p, "effective rate");
  const char *sq = profile_comment(p, "squared periods per signal ");
  unsigned long long samples = 0, squares = 0;
  if (!rate || !strchr(rate, '(') || sscanf(strchr(rate, '('), "(%llu", &samples) != 1 || !sq ||
      sscanf(strstr(sq, "squared periods per signal "), "squared periods per signal %llu",
             &squares) != 1 ||
      samples == 0)
    return 0;
  return (double)squares / (double)samples;
}

#endif /* PPRT_TESTS_PROFILE_UTIL_H */
