/* The profile decoder (read/profile_decode.c): a pprof profile, pprt's or
 * another writer's, gunzipped, unpacked and checked. Part of the readers'
 * library (pprt_read), which the pprt command, the tests, the fuzzers and
 * the benchmarks link; the runtime links it only for the HTTP endpoint's
 * text form of a heap profile. */
#ifndef PPRT_READ_PROFILE_DECODE_H
#define PPRT_READ_PROFILE_DECODE_H

#include <stddef.h>

#include "proto/profile.pb-c.h"

/* Decodes a profile: gunzips it (data that is not gzip is tried as a bare
 * protobuf message, as pprof does), unpacks it and checks it with
 * pprt__profile_check. On error returns -EINVAL (or -ENOMEM, -EFBIG) and
 * writes a one-line reason into err. Free the result with
 * pprt__profile_decoded_free. */
int pprt__profile_decode(const void *data, size_t len, Pprt__Profile **out, char *err,
                         size_t errlen);
void pprt__profile_decoded_free(Pprt__Profile *prof);

/* Checks pprof's structural rules: string_table[0] is "", string indices in
 * range, ids nonzero and unique, references resolve, len(value) ==
 * len(sample_type). Returns 0, or -EINVAL with the first problem in err. */
int pprt__profile_check(const Pprt__Profile *prof, char *err, size_t errlen);

/* Largest decompressed profile the decoder accepts. */
#define PPRT__PROFILE_MAX_BYTES ((size_t)1 << 30)

#endif /* PPRT_READ_PROFILE_DECODE_H */
