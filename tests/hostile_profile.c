/* Writes a valid pprof profile that is small on disk but expands to a huge
 * number of frames: one function, one location with LINES lines (each an
 * inlined call of that function), and SAMPLES samples whose stack is that
 * one location. LINES 400000, SAMPLES 1 is a stack 400,000 frames deep in
 * a 1.6 KB file; LINES 2000000, SAMPLES 200000 is 4e11 frames in 10 KB.
 * The pprt views must refuse both quickly (tools/cli.h's bounds).
 *
 *   hostile_profile OUT LINES SAMPLES [distinct|name=BYTES|zero-first]
 *
 * Gzip'd like every pprof file when OUT ends in ".gz", else the protobuf
 * message alone (which pprt and pprof read too): the fuzz seeds are bare,
 * so that the fuzzer's mutations reach the message instead of breaking the
 * gzip CRC.
 * "distinct" gives each sample a root frame of its own (function "r<i>"
 * under the deep location), so that no two stacks share a path: the most
 * nodes a flame graph's tree can have for that many frames. "name=BYTES"
 * makes the function's name that long, which folded stacks repeat on every
 * frame. "zero-first" puts a sample type "zero" before "samples", with 0 in
 * every sample: the stacks are only shown for "samples" (the default, as
 * the last type). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "proto/profile.pb-c.h"

static int fail(const char *what) {
  fprintf(stderr, "hostile_profile: %s\n", what);
  return 1;
}

int main(int argc, char **argv) {
  static const char usage[] =
      "usage: hostile_profile OUT LINES SAMPLES [distinct|name=BYTES|zero-first]";
  if (argc < 4 || argc > 5)
    return fail(usage);
  const char *mode = argc == 5 ? argv[4] : "";
  char *end;
  size_t name_len = 0;
  if (strncmp(mode, "name=", 5) == 0) {
    name_len = strtoul(mode + 5, &end, 10);
    if (*end || name_len == 0 || name_len > 100000000)
      return fail("name=BYTES: a number in [1, 1e8]");
  } else if (*mode && strcmp(mode, "distinct") != 0 && strcmp(mode, "zero-first") != 0) {
    return fail(usage);
  }
  int distinct = strcmp(mode, "distinct") == 0, zero_first = strcmp(mode, "zero-first") == 0;
  unsigned long long nlines = strtoull(argv[2], &end, 10);
  if (*end || nlines == 0 || nlines > 100000000)
    return fail("LINES: a number in [1, 1e8]");
  unsigned long long nsamples = strtoull(argv[3], &end, 10);
  if (*end || nsamples == 0 || nsamples > 100000000)
    return fail("SAMPLES: a number in [1, 1e8]");

  /* Strings: "", "samples", "count", "hostile", then "r<i>" when distinct,
   * or "zero". */
  size_t nroots = distinct ? nsamples : 0;
  size_t nstrings = 4 + nroots + (size_t)zero_first, nfns = 1 + nroots, nlocs = 1 + nroots;
  char **strings = calloc(nstrings, sizeof *strings);
  Pprt__Function *fn = calloc(nfns, sizeof *fn), **fns = calloc(nfns, sizeof *fns);
  Pprt__Line *rline = calloc(nroots + 1, sizeof *rline),
             **rlines = calloc(nroots + 1, sizeof *rlines);
  Pprt__Location *loc = calloc(nlocs, sizeof *loc), **locs = calloc(nlocs, sizeof *locs);
  Pprt__Sample *sample = calloc(nroots + 1, sizeof *sample);
  uint64_t *loc_ids = calloc(2 * (nroots + 1), sizeof *loc_ids);
  Pprt__Line **lines = malloc(nlines * sizeof *lines);
  Pprt__Sample **samples = malloc(nsamples * sizeof *samples);
  if (!strings || !fn || !fns || !rline || !rlines || !loc || !locs || !sample || !loc_ids ||
      !lines || !samples)
    return fail("out of memory");
  strings[0] = "";
  strings[1] = "samples";
  strings[2] = "count";
  strings[3] = "hostile";
  if (name_len) {
    if ((strings[3] = malloc(name_len + 1)) == NULL)
      return fail("out of memory");
    memset(strings[3], 'x', name_len);
    strings[3][name_len] = '\0';
  }
  Pprt__ValueType st = PPRT__VALUE_TYPE__INIT;
  st.type = 1;
  st.unit = 2;
  Pprt__ValueType zero = PPRT__VALUE_TYPE__INIT;
  zero.type = (int64_t)nstrings - 1;
  if (zero_first)
    strings[nstrings - 1] = "zero";
  zero.unit = 2;
  Pprt__ValueType *sts[] = {&zero, &st};
  int64_t values[] = {0, 1};
  for (size_t i = 0; i < nfns; i++) {
    fn[i] = (Pprt__Function)PPRT__FUNCTION__INIT;
    fn[i].id = i + 1;
    fn[i].name = (int64_t)(i + 3);
    fns[i] = &fn[i];
    loc[i] = (Pprt__Location)PPRT__LOCATION__INIT;
    loc[i].id = i + 1;
    locs[i] = &loc[i];
    if (i > 0) {
      char buf[32];
      snprintf(buf, sizeof buf, "r%zu", i - 1);
      if ((strings[i + 3] = strdup(buf)) == NULL)
        return fail("out of memory");
      rline[i] = (Pprt__Line)PPRT__LINE__INIT;
      rline[i].function_id = i + 1;
      rlines[i] = &rline[i];
      loc[i].n_line = 1;
      loc[i].line = &rlines[i];
    }
  }
  /* Every line of the deep location is the same message; the encoder
   * writes each one. */
  Pprt__Line line = PPRT__LINE__INIT;
  line.function_id = 1;
  for (unsigned long long i = 0; i < nlines; i++)
    lines[i] = &line;
  loc[0].n_line = nlines;
  loc[0].line = lines;
  /* A sample's stack, leaf first: the deep location, then its own root. */
  for (size_t i = 0; i < nroots + 1; i++) {
    sample[i] = (Pprt__Sample)PPRT__SAMPLE__INIT;
    loc_ids[2 * i] = 1;
    loc_ids[2 * i + 1] = i + 1;
    sample[i].n_location_id = i ? 2 : 1;
    sample[i].location_id = &loc_ids[2 * i];
    sample[i].n_value = zero_first ? 2 : 1;
    sample[i].value = zero_first ? values : values + 1;
  }
  for (unsigned long long i = 0; i < nsamples; i++)
    samples[i] = &sample[distinct ? i + 1 : 0];

  Pprt__Profile prof = PPRT__PROFILE__INIT;
  prof.n_sample_type = zero_first ? 2 : 1;
  prof.sample_type = zero_first ? sts : sts + 1;
  prof.n_sample = nsamples;
  prof.sample = samples;
  prof.n_location = nlocs;
  prof.location = locs;
  prof.n_function = nfns;
  prof.function = fns;
  prof.n_string_table = nstrings;
  prof.string_table = strings;

  size_t len = pprt__profile__get_packed_size(&prof);
  uint8_t *buf = malloc(len);
  if (buf == NULL)
    return fail("out of memory");
  pprt__profile__pack(&prof, buf);
  int rc = 0;
  size_t olen = strlen(argv[1]);
  if (olen < 3 || strcmp(argv[1] + olen - 3, ".gz") != 0) {
    FILE *f = fopen(argv[1], "wb");
    if (f == NULL || fwrite(buf, 1, len, f) != len || fclose(f) != 0)
      rc = fail("cannot write OUT");
  } else {
    gzFile gz = gzopen(argv[1], "wb9");
    if (gz == NULL || gzwrite(gz, buf, (unsigned)len) != (int)len || gzclose(gz) != Z_OK)
      rc = fail("cannot write OUT");
  }
  free(buf);
  if (name_len)
    free(strings[3]);
  for (size_t i = 4; i < nstrings - (size_t)zero_first; i++)
    free(strings[i]);
  free(strings);
  free(fn);
  free(fns);
  free(rline);
  free(rlines);
  free(loc);
  free(locs);
  free(sample);
  free(loc_ids);
  free(lines);
  free(samples);
  return rc;
}
