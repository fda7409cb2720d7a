/* The profile decoder (read/profile_decode.h): gunzip, unpack, and check
 * pprof's structural rules, with a one-line reason for anything wrong. The
 * tests and the pprt command read profiles (pprt's own and other writers')
 * through it, so it must survive any input: every size is bounded and
 * every reference checked before it is followed. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/table.h"
#include "read/profile_decode.h"

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return rc;
}

/* Inflates a gzip stream into a new buffer. */
static int gunzip(const uint8_t *data, size_t len, uint8_t **out, size_t *outlen, char *err,
                  size_t errlen) {
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, 15 + 16) != Z_OK)
    return fail(err, errlen, -ENOMEM, "out of memory starting gzip decoder");
  size_t cap = len * 4 + 4096, n = 0;
  uint8_t *buf = NULL;
  int rc = 0, zrc = Z_OK;
  zs.next_in = (Bytef *)data;
  size_t left = len;
  for (;;) {
    if (n == cap || buf == NULL) {
      if (buf)
        cap *= 2;
      if (cap > PPRT__PROFILE_MAX_BYTES + 1)
        cap = PPRT__PROFILE_MAX_BYTES + 1;
      if (n == cap) {
        rc = fail(err, errlen, -EFBIG, "profile larger than %zu MiB when decompressed",
                  PPRT__PROFILE_MAX_BYTES >> 20);
        break;
      }
      uint8_t *nb = realloc(buf, cap);
      if (nb == NULL) {
        rc = fail(err, errlen, -ENOMEM, "out of memory decompressing");
        break;
      }
      buf = nb;
    }
    if (zs.avail_in == 0 && left > 0) {
      size_t in = left > (1u << 30) ? (1u << 30) : left;
      zs.avail_in = (uInt)in;
      left -= in;
    }
    size_t room = cap - n > (1u << 30) ? (1u << 30) : cap - n;
    zs.next_out = buf + n;
    zs.avail_out = (uInt)room;
    zrc = inflate(&zs, Z_NO_FLUSH);
    n += room - zs.avail_out;
    if (zrc == Z_STREAM_END)
      break;
    if (zrc == Z_BUF_ERROR && zs.avail_in == 0 && left == 0) {
      rc = fail(err, errlen, -EINVAL, "truncated gzip data (ends after %zu bytes)", len);
      break;
    }
    if (zrc != Z_OK && zrc != Z_BUF_ERROR) {
      rc = fail(err, errlen, -EINVAL, "corrupt gzip data: %s",
                zs.msg ? zs.msg : "inflate failed");
      break;
    }
  }
  if (rc == 0 && (zs.avail_in > 0 || left > 0))
    rc = fail(err, errlen, -EINVAL, "unexpected data after the gzip stream");
  inflateEnd(&zs);
  if (rc != 0) {
    free(buf);
    return rc;
  }
  *out = buf;
  *outlen = n;
  return 0;
}

int pprt__profile_decode(const void *data, size_t len, Pprt__Profile **out, char *err,
                         size_t errlen) {
  *out = NULL;
  const uint8_t *bytes = data;
  if (len == 0)
    return fail(err, errlen, -EINVAL, "empty input, not a profile");
  uint8_t *plain = NULL;
  size_t plain_len = len;
  int gz = len >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
  if (gz) {
    int rc = gunzip(bytes, len, &plain, &plain_len, err, errlen);
    if (rc != 0)
      return rc;
  } else if (len > PPRT__PROFILE_MAX_BYTES) {
    return fail(err, errlen, -EFBIG, "input larger than %zu MiB", PPRT__PROFILE_MAX_BYTES >> 20);
  }
  Pprt__Profile *prof =
      pprt__profile__unpack(NULL, plain_len, plain ? plain : (const uint8_t *)bytes);
  free(plain);
  if (prof == NULL)
    return fail(err, errlen, -EINVAL,
                gz ? "gzip data does not hold a pprof profile (protobuf decoding failed)"
                   : "not a pprof profile: neither gzip data nor a protobuf message");
  int rc = pprt__profile_check(prof, err, errlen);
  if (rc != 0) {
    pprt__profile__free_unpacked(prof, NULL);
    return rc;
  }
  *out = prof;
  return 0;
}

void pprt__profile_decoded_free(Pprt__Profile *prof) {
  if (prof)
    pprt__profile__free_unpacked(prof, NULL);
}

/* ---- checks -------------------------------------------------------------------- */

static int id_eq(const void *ctx, uint32_t idx) {
  const uint64_t *want = ((const uint64_t *const *)ctx)[0];
  const uint64_t *ids = ((const uint64_t *const *)ctx)[1];
  return ids[idx] == *want;
}

/* An id -> index map for one kind of entity, checking ids are nonzero and
 * unique. */
typedef struct idmap {
  pprt__table t;
  uint64_t *ids;
  size_t n;
} idmap;

static int idmap_build(idmap *m, const char *what, size_t n, uint64_t (*id_of)(const void *, size_t),
                       const void *arr, char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
  m->ids = malloc((n + 1) * sizeof *m->ids);
  if (m->ids == NULL)
    return fail(err, errlen, -ENOMEM, "out of memory checking %ss", what);
  for (size_t i = 0; i < n; i++) {
    uint64_t id = id_of(arr, i);
    if (id == 0)
      return fail(err, errlen, -EINVAL, "%s #%zu has id 0 (ids must be nonzero)", what, i);
    m->ids[i] = id;
    const uint64_t *ctx[2] = {&m->ids[i], m->ids};
    int64_t got = pprt__table_intern(&m->t, pprt__hash_finish(id), id_eq, ctx, (uint32_t)i);
    if (got < 0)
      return fail(err, errlen, -ENOMEM, "out of memory checking %ss", what);
    if (got != (int64_t)i)
      return fail(err, errlen, -EINVAL, "%s id %llu is used twice (#%lld and #%zu)", what,
                  (unsigned long long)id, (long long)got, i);
    m->n++;
  }
  return 0;
}

static int idmap_has(const idmap *m, uint64_t id) {
  const uint64_t *ctx[2] = {&id, m->ids};
  return pprt__table_find(&m->t, pprt__hash_finish(id), id_eq, ctx) >= 0;
}

static void idmap_free(idmap *m) {
  pprt__table_free(&m->t);
  free(m->ids);
}

static uint64_t mapping_id(const void *arr, size_t i) {
  return ((Pprt__Mapping *const *)arr)[i]->id;
}
static uint64_t location_id(const void *arr, size_t i) {
  return ((Pprt__Location *const *)arr)[i]->id;
}
static uint64_t function_id(const void *arr, size_t i) {
  return ((Pprt__Function *const *)arr)[i]->id;
}

/* A string index field: in range of the string table. */
#define CHECK_STR(value, ...)                                                                    \
  do {                                                                                           \
    int64_t v_ = (value);                                                                        \
    if (v_ < 0 || (size_t)v_ >= nstr) {                                                          \
      char where_[128];                                                                          \
      snprintf(where_, sizeof where_, __VA_ARGS__);                                              \
      rc = fail(err, errlen, -EINVAL, "%s: string index %lld out of range (table has %zu)",      \
                where_, (long long)v_, nstr);                                                    \
      goto out;                                                                                  \
    }                                                                                            \
  } while (0)

int pprt__profile_check(const Pprt__Profile *prof, char *err, size_t errlen) {
  size_t nstr = prof->n_string_table;
  if (nstr == 0)
    return fail(err, errlen, -EINVAL, "string_table is empty (entry 0 must be \"\")");
  if (prof->string_table[0][0] != '\0')
    return fail(err, errlen, -EINVAL, "string_table[0] is \"%.40s\", must be \"\"",
                prof->string_table[0]);
  idmap maps, locs, funcs;
  memset(&maps, 0, sizeof maps);
  memset(&locs, 0, sizeof locs);
  memset(&funcs, 0, sizeof funcs);
  int rc = idmap_build(&maps, "mapping", prof->n_mapping, mapping_id, prof->mapping, err, errlen);
  if (rc == 0)
    rc = idmap_build(&locs, "location", prof->n_location, location_id, prof->location, err,
                     errlen);
  if (rc == 0)
    rc = idmap_build(&funcs, "function", prof->n_function, function_id, prof->function, err,
                     errlen);
  if (rc != 0)
    goto out;

  for (size_t i = 0; i < prof->n_sample_type; i++) {
    CHECK_STR(prof->sample_type[i]->type, "sample_type #%zu type", i);
    CHECK_STR(prof->sample_type[i]->unit, "sample_type #%zu unit", i);
  }
  if (prof->period_type) {
    CHECK_STR(prof->period_type->type, "period_type type");
    CHECK_STR(prof->period_type->unit, "period_type unit");
  }
  for (size_t i = 0; i < prof->n_comment; i++)
    CHECK_STR(prof->comment[i], "comment #%zu", i);
  CHECK_STR(prof->drop_frames, "drop_frames");
  CHECK_STR(prof->keep_frames, "keep_frames");
  CHECK_STR(prof->default_sample_type, "default_sample_type");
  CHECK_STR(prof->doc_url, "doc_url");

  for (size_t i = 0; i < prof->n_sample; i++) {
    const Pprt__Sample *s = prof->sample[i];
    if (s->n_value != prof->n_sample_type) {
      rc = fail(err, errlen, -EINVAL, "sample #%zu has %zu values for %zu sample types", i,
                s->n_value, prof->n_sample_type);
      goto out;
    }
    for (size_t j = 0; j < s->n_location_id; j++)
      if (!idmap_has(&locs, s->location_id[j])) {
        rc = fail(err, errlen, -EINVAL, "sample #%zu frame %zu: location id %llu does not exist",
                  i, j, (unsigned long long)s->location_id[j]);
        goto out;
      }
    for (size_t j = 0; j < s->n_label; j++) {
      const Pprt__Label *l = s->label[j];
      CHECK_STR(l->key, "sample #%zu label %zu key", i, j);
      CHECK_STR(l->str, "sample #%zu label %zu str", i, j);
      CHECK_STR(l->num_unit, "sample #%zu label %zu num_unit", i, j);
      if (l->key == 0) {
        rc = fail(err, errlen, -EINVAL, "sample #%zu label %zu has an empty key", i, j);
        goto out;
      }
    }
  }
  for (size_t i = 0; i < prof->n_mapping; i++) {
    const Pprt__Mapping *m = prof->mapping[i];
    CHECK_STR(m->filename, "mapping id %llu filename", (unsigned long long)m->id);
    CHECK_STR(m->build_id, "mapping id %llu build_id", (unsigned long long)m->id);
    if (m->memory_limit < m->memory_start) {
      rc = fail(err, errlen, -EINVAL, "mapping id %llu ends (0x%llx) before it starts (0x%llx)",
                (unsigned long long)m->id, (unsigned long long)m->memory_limit,
                (unsigned long long)m->memory_start);
      goto out;
    }
  }
  for (size_t i = 0; i < prof->n_location; i++) {
    const Pprt__Location *l = prof->location[i];
    if (l->mapping_id != 0 && !idmap_has(&maps, l->mapping_id)) {
      rc = fail(err, errlen, -EINVAL, "location id %llu: mapping id %llu does not exist",
                (unsigned long long)l->id, (unsigned long long)l->mapping_id);
      goto out;
    }
    /* function_id 0 is "unknown function", which pprof accepts. */
    for (size_t j = 0; j < l->n_line; j++)
      if (l->line[j]->function_id != 0 && !idmap_has(&funcs, l->line[j]->function_id)) {
        rc = fail(err, errlen, -EINVAL, "location id %llu line %zu: function id %llu does not exist",
                  (unsigned long long)l->id, j, (unsigned long long)l->line[j]->function_id);
        goto out;
      }
  }
  for (size_t i = 0; i < prof->n_function; i++) {
    const Pprt__Function *f = prof->function[i];
    CHECK_STR(f->name, "function id %llu name", (unsigned long long)f->id);
    CHECK_STR(f->system_name, "function id %llu system_name", (unsigned long long)f->id);
    CHECK_STR(f->filename, "function id %llu filename", (unsigned long long)f->id);
  }
out:
  idmap_free(&maps);
  idmap_free(&locs);
  idmap_free(&funcs);
  return rc;
}
