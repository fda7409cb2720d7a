/* The trace file format's constants and primitives, shared by the encoder
 * (core/trace_event.c, and core/trace_writer.c, whose thread reads back
 * what threads encoded) and the decoder (read/trace_decode.c).
 * docs/trace-format.md is the spec; this header is its mechanical half:
 * record and event numbers, how each event's arguments are laid out,
 * varints, the tick-to-nanosecond conversion. */
#ifndef PPRT_CORE_TRACE_FORMAT_H
#define PPRT_CORE_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The file header: 16 bytes. */
#define PPRT__TRACE_MAGIC "\x7fPPRTTRC"
#define PPRT__TRACE_MAGIC_LEN 8
#define PPRT__TRACE_HEADER_LEN 16
/* The version this code writes, and the newest it reads. A reader reads
 * every version up to its own and rejects newer ones by name. */
#define PPRT__TRACE_VERSION 2

/* Limits every writer keeps and every reader checks. */
#define PPRT__TRACE_MAX_RECORD 65536 /* payload bytes of one record */
#define PPRT__TRACE_MAX_STRING 1024  /* bytes; longer strings are truncated */
#define PPRT__TRACE_MAX_FRAMES 256   /* frames of one stack */
#define PPRT__TRACE_MAX_INLINE 32    /* source lines of one address (FRAMES) */

/* Top-level records: type byte, uvarint generation, (BATCH only: uvarint
 * thread id, uvarint timestamp), u32 little-endian payload length, payload. */
enum pprt__trace_record {
  PPRT__TR_BATCH = 1,     /* one thread's events */
  PPRT__TR_STRINGS = 2,   /* id -> bytes */
  PPRT__TR_STACKS = 3,    /* id -> frames (pc, function-name string id) */
  PPRT__TR_THREADS = 4,   /* pid, then tid -> name string id */
  PPRT__TR_FREQUENCY = 5, /* the clock: ticks per second and a sync point */
  PPRT__TR_LOST = 6,      /* tid -> events dropped in this generation */
  PPRT__TR_GEN_END = 7,   /* the generation is complete */
  PPRT__TR_FRAMES = 8,    /* version 2: address -> source lines (function,
                             file, line), inlined functions first */
};

/* Events inside a batch: type byte, uvarint timestamp delta (>= 1, from the
 * previous event of the batch or the batch's timestamp), then the arguments
 * below. */
enum pprt__trace_event_type {
  PPRT__EV_THREAD_START = 16,
  PPRT__EV_THREAD_END = 17,
  PPRT__EV_THREAD_NAME = 18,
  PPRT__EV_REGION_BEGIN = 19,
  PPRT__EV_REGION_END = 20,
  PPRT__EV_LOG = 21,
  PPRT__EV_COUNTER = 22,
  PPRT__EV_TASK_BEGIN = 23,
  PPRT__EV_TASK_END = 24,
  PPRT__EV_CPU_SAMPLE = 25,
  PPRT__EV_ALLOC_SAMPLE = 26,
  PPRT__EV_FREE_SAMPLE = 27,
  PPRT__EV_FIRST = PPRT__EV_THREAD_START,
  PPRT__EV_LAST = PPRT__EV_FREE_SAMPLE,
};

/* Argument kinds. */
enum pprt__trace_arg {
  PPRT__ARG_U = 1,     /* uvarint */
  PPRT__ARG_S = 2,     /* zigzag varint (signed) */
  PPRT__ARG_STR = 3,   /* uvarint string id; 0: inline uvarint length + bytes */
  PPRT__ARG_BYTES = 4, /* uvarint length + bytes, never interned */
  PPRT__ARG_STACK = 5, /* uvarint stack id; 0: inline uvarint n + n uvarint pcs */
};

#define PPRT__TRACE_MAX_ARGS 5

typedef struct pprt__trace_event_spec {
  const char *name;
  uint8_t nargs;
  uint8_t args[PPRT__TRACE_MAX_ARGS];
} pprt__trace_event_spec;

/* The spec of event type t, or NULL for a type this version does not know. */
static inline const pprt__trace_event_spec *pprt__trace_spec(unsigned t) {
  static const pprt__trace_event_spec specs[PPRT__EV_LAST - PPRT__EV_FIRST + 1] = {
      {"thread_start", 0, {0}},
      {"thread_end", 0, {0}},
      {"thread_name", 1, {PPRT__ARG_STR}},
      {"region_begin", 1, {PPRT__ARG_STR}},
      {"region_end", 0, {0}},
      {"log", 2, {PPRT__ARG_STR, PPRT__ARG_BYTES}},
      {"counter", 2, {PPRT__ARG_STR, PPRT__ARG_S}},
      {"task_begin", 2, {PPRT__ARG_U, PPRT__ARG_STR}},
      {"task_end", 1, {PPRT__ARG_U}},
      /* tid, sample time - event time (ns), stack, count */
      {"cpu_sample", 4, {PPRT__ARG_U, PPRT__ARG_S, PPRT__ARG_STACK, PPRT__ARG_U}},
      /* tid, sample time - event time (ns), address, size, stack */
      {"alloc_sample", 5, {PPRT__ARG_U, PPRT__ARG_S, PPRT__ARG_U, PPRT__ARG_U, PPRT__ARG_STACK}},
      /* tid, sample time - event time (ns), address */
      {"free_sample", 3, {PPRT__ARG_U, PPRT__ARG_S, PPRT__ARG_U}},
  };
  if (t < PPRT__EV_FIRST || t > PPRT__EV_LAST)
    return NULL;
  return &specs[t - PPRT__EV_FIRST];
}

/* ---- varints ------------------------------------------------------------------ */

#define PPRT__VARINT_MAX 10

static inline uint8_t *pprt__put_uvarint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static inline uint64_t pprt__zigzag(int64_t v) {
  return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t pprt__unzigzag(uint64_t v) {
  return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static inline size_t pprt__uvarint_len(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

/* Reads a uvarint from [p, end). Returns the byte after it, or NULL when it
 * runs past end, is longer than 10 bytes or overflows 64 bits. */
static inline const uint8_t *pprt__get_uvarint(const uint8_t *p, const uint8_t *end,
                                               uint64_t *out) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (p >= end)
      return NULL;
    uint8_t b = *p++;
    if (shift == 63 && b > 1)
      return NULL;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (b < 0x80) {
      *out = v;
      return p;
    }
  }
  return NULL;
}

static inline void pprt__put_u32le(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t pprt__get_u32le(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- the clock ------------------------------------------------------------------ */

/* floor(a * b / c) for c >= 1, exactly, and the remainder in *rem; UINT64_MAX
 * (and *rem 0) when the quotient does not fit in 64 bits. The product is
 * formed in 128 bits from 32-bit halves: i386 compilers have no __int128. */
static inline uint64_t pprt__muldiv(uint64_t a, uint64_t b, uint64_t c, uint64_t *rem) {
  uint64_t al = (uint32_t)a, ah = a >> 32, bl = (uint32_t)b, bh = b >> 32;
  uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
  uint64_t mid = (ll >> 32) + (uint32_t)lh + (uint32_t)hl; /* < 3 * 2^32 */
  uint64_t lo = (mid << 32) | (uint32_t)ll;
  uint64_t hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
  if (hi == 0) {
    *rem = lo % c;
    return lo / c;
  }
  if (hi >= c) {
    *rem = 0;
    return UINT64_MAX;
  }
  /* hi:lo / c, one bit at a time; hi < c throughout, so the quotient fits. */
  uint64_t q = 0;
  for (int i = 0; i < 64; i++) {
    uint64_t top = hi >> 63;
    hi = hi << 1 | lo >> 63;
    lo <<= 1;
    q <<= 1;
    if (top || hi >= c) {
      hi -= c;
      q |= 1;
    }
  }
  *rem = hi;
  return q;
}

/* Decoded times are kept within +-2^61 ns (73 years) of the monotonic
 * clock's origin, so that sums of a few of them cannot overflow. */
#define PPRT__TRACE_NS_LIMIT ((int64_t)1 << 61)

/* Nanoseconds in a signed count of ticks at hz ticks a second: the format's
 * conversion, floor(ticks * 1e9 / hz) (rounded down, also below zero, so
 * that it never decreases as ticks grow), computed exactly for any count
 * and rate; clamped to +-PPRT__TRACE_NS_LIMIT. hz >= 1. */
static inline int64_t pprt__trace_ticks_to_ns(int64_t ticks, uint64_t hz) {
  uint64_t mag = ticks < 0 ? 0 - (uint64_t)ticks : (uint64_t)ticks, rem;
  uint64_t ns = pprt__muldiv(mag, 1000000000u, hz, &rem);
  if (ticks < 0 && rem != 0 && ns < UINT64_MAX)
    ns++; /* floor of a negative quotient */
  if (ns > (uint64_t)PPRT__TRACE_NS_LIMIT)
    ns = (uint64_t)PPRT__TRACE_NS_LIMIT;
  return ticks < 0 ? -(int64_t)ns : (int64_t)ns;
}

/* a + b for a within +-PPRT__TRACE_NS_LIMIT, clamped to that range. */
static inline int64_t pprt__trace_add_ns(int64_t a, int64_t b) {
  if (b > PPRT__TRACE_NS_LIMIT - a)
    return PPRT__TRACE_NS_LIMIT;
  if (b < -PPRT__TRACE_NS_LIMIT - a)
    return -PPRT__TRACE_NS_LIMIT;
  return a + b;
}

/* The longest prefix of s[0, len) that is at most max bytes and does not end
 * inside a UTF-8 sequence. */
/* GCC 12 at -O3, inlining this into a caller whose string is a small array
 * (a 64-byte thread name, ""), warns that s[max] is out of its bounds: it
 * does not carry len <= max into the loop. s[k] is read only when len >
 * max, inside s[0, len). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#endif
static inline size_t pprt__utf8_truncate(const char *s, size_t len, size_t max) {
  if (len <= max)
    return len;
  /* s[max] exists. While it is a continuation byte (10xxxxxx), the cut is
   * inside a sequence: move it back to the sequence's lead byte. */
  size_t k = max;
  while (k > 0 && max - k < 3 && ((unsigned char)s[k] & 0xc0) == 0x80)
    k--;
  return k;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif /* PPRT_CORE_TRACE_FORMAT_H */
