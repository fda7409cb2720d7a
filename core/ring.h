/* The ring buffer between signal handlers and the reader thread.
 *
 * Go's profBuf, generalised to many writers: an array of 64-bit words holding
 * records [length, timestamp, header words..., pcs...]. Writers are signal
 * handlers on any number of threads at once (Linux per-thread timers make
 * concurrent handlers the normal case) and ordinary threads; there is one
 * reader. A writer never blocks and never waits for the reader: when the
 * ring is full it counts the record as lost, and the next record that fits
 * is preceded by an overflow record carrying that count. Every record
 * written is either read or reported lost, exactly.
 *
 * The first record a reader sees is the rate record (header word 0 = the
 * rate given to pprt__ring_init); an overflow record has an all-zero header
 * and one pc, the number of records lost (Go's lostProfileEvent shape).
 */
#ifndef PPRT_CORE_RING_H
#define PPRT_CORE_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Header words per record, fixed per ring. */
#define PPRT__RING_MAX_HDR 4

enum pprt__ring_kind {
  PPRT__RING_DATA = 1,     /* a record a writer wrote */
  PPRT__RING_OVERFLOW = 2, /* pcs[0] records were lost before this point */
  PPRT__RING_RATE = 3,     /* the first record: hdr[0] is the rate */
};

/* A record as the reader sees it. hdr and pcs point into the buffer passed
 * to pprt__ring_read and stay valid until it is reused. */
typedef struct pprt__ring_record {
  enum pprt__ring_kind kind;
  size_t length; /* words: 2 + hdr_words + npcs, as Go's profBuf */
  uint64_t timestamp;
  const uint64_t *hdr; /* hdr_words words */
  const uint64_t *pcs;
  size_t npcs;
} pprt__ring_record;

typedef struct pprt__ring {
  _Atomic uint64_t *words; /* capacity words, zero where free */
  size_t capacity;         /* a power of two */
  size_t hdr_words;
  size_t max_record; /* words; at most capacity / 2 */

  /* Writers: absolute word positions. A writer reserves [head, head + n)
   * with a CAS; the reader frees up to tail. Free words are always zero, so
   * a nonzero first word means "record committed". */
  _Alignas(64) atomic_size_t head;
  atomic_uint_least64_t lost; /* records dropped, not yet reported */
  atomic_size_t state;        /* writers inside write(), | CLOSED bit */
  atomic_uint reader_waiting; /* reader is (about to be) asleep */
  atomic_uint wake_seq;       /* the word the reader sleeps on */

  /* Writers wake a sleeping reader only once this many words are waiting
   * (0: on every write). See pprt__ring_set_wake_threshold. */
  size_t wake_words;

  /* Reader. */
  _Alignas(64) atomic_size_t tail;
  int rate_pending; /* rate record not yet returned */
  uint64_t rate;
  int eof;
} pprt__ring;

/* Reader modes for pprt__ring_read. */
enum pprt__ring_wait {
  PPRT__RING_NONBLOCK, /* return -EAGAIN when nothing is ready */
  PPRT__RING_BLOCK,    /* wait for a record, the close, or the timeout */
};

/* Sets up a ring of capacity words (a power of two, >= 64) with hdr_words
 * header words per record, and queues the rate record. Allocates; not
 * AS-safe. Errors: -EINVAL, -ENOMEM. */
int pprt__ring_init(pprt__ring *r, size_t capacity, size_t hdr_words, uint64_t rate);

/* Writers wake a reader that sleeps in pprt__ring_read only once `words`
 * words are waiting (0, the default: on every write). Waking is a system
 * call that costs the writer microseconds (17 us measured in a signal
 * handler here, against 0.2 us for the rest of a CPU sample), so the CPU
 * profiler wakes its reader at half full and lets it find smaller amounts
 * by its read timeout, as Go's profile writer polls. A reader of such a
 * ring must read with a timeout. Call before the first write. */
void pprt__ring_set_wake_threshold(pprt__ring *r, size_t words);

/* Frees the ring's memory. No writer or reader may be inside it. */
void pprt__ring_destroy(pprt__ring *r);

/* Appends one record. hdr has hdr_words words. AS-safe, lock-free, never
 * waits. Returns 0 when written; -ENOSPC when the ring was full (the record
 * is counted as lost and will be reported); -EPIPE after pprt__ring_close
 * (not written, not counted); -EMSGSIZE when 2 + hdr_words + npcs exceeds
 * the ring's maximum record (not written, not counted). */
int pprt__ring_write(pprt__ring *r, uint64_t timestamp, const uint64_t *hdr, const uintptr_t *pcs,
                     size_t npcs);

/* Stops the ring: later writes return -EPIPE, and the reader, once it has
 * drained every record and the final loss count, gets EOF. Wakes the
 * reader. AS-safe. Idempotent. */
void pprt__ring_close(pprt__ring *r);

/* Reads the next record into buf (at least max_record words) and describes
 * it in rec. One reader at a time. Returns 1 for a record, -EAGAIN when none
 * is ready (NONBLOCK, or BLOCK and the timeout passed; timeout_ns 0 means
 * none), 0 at EOF (closed and drained). */
int pprt__ring_read(pprt__ring *r, enum pprt__ring_wait wait, uint64_t timeout_ns, uint64_t *buf,
                    pprt__ring_record *rec);

/* Words a record with npcs pcs occupies. */
static inline size_t pprt__ring_record_words(const pprt__ring *r, size_t npcs) {
  return 2 + r->hdr_words + npcs;
}

#endif /* PPRT_CORE_RING_H */
