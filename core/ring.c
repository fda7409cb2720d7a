/* The ring buffer: see ring.h for what it promises.
 *
 * How many writers share it without locks:
 *   1. A writer reserves a contiguous span of words by a CAS on head, after
 *      checking against tail that the span is free. A record that would
 *      cross the end of the array reserves the rest of the array as padding
 *      too, marked with a rewind word, and starts again at word 0.
 *   2. It fills the span, then publishes each record by storing its first
 *      word (kind and length) with release order. Free words are always 0, so
 *      the reader knows a record is complete when its first word is nonzero.
 *   3. The reader consumes records in position order, copies each out, zeroes
 *      its words and advances tail with release order, which hands the space
 *      back to the writers.
 * A writer preempted between steps 1 and 2 holds the reader up at its record
 * but never holds up other writers; they fill the space after it.
 *
 * Losses: a writer that finds no room adds 1 (plus any count it had taken)
 * to lost. The next writer that sees lost != 0 takes the count and reserves
 * room for an overflow record in front of its own; if that fails too it puts
 * the count back. The reader also reports pending losses when it has caught
 * up, and a last time before EOF, so each loss is reported exactly once.
 *
 * Closing: state counts the writers inside pprt__ring_write, plus a CLOSED
 * bit. The reader declares EOF only when CLOSED is set, no writer is inside,
 * the ring is empty and no loss is pending.
 */
#include "core/ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/platform.h"

#define RING_CLOSED ((size_t)1 << (sizeof(size_t) * 8 - 1))

/* The first word of a record: its kind in the top byte, its length below. */
#define KIND_SHIFT 56
#define KIND_REWIND 4u /* the rest of the array is padding */
#define WORD0(kind, len) (((uint64_t)(kind) << KIND_SHIFT) | (uint64_t)(len))
#define WORD0_KIND(w) ((unsigned)((w) >> KIND_SHIFT))
#define WORD0_LEN(w) ((size_t)((w) & ((UINT64_C(1) << KIND_SHIFT) - 1)))

int pprt__ring_init(pprt__ring *r, size_t capacity, size_t hdr_words, uint64_t rate) {
  if (capacity < 64 || (capacity & (capacity - 1)) != 0 || hdr_words < 1 ||
      hdr_words > PPRT__RING_MAX_HDR)
    return -EINVAL;
  memset(r, 0, sizeof *r);
  r->words = calloc(capacity, sizeof *r->words);
  if (r->words == NULL)
    return -ENOMEM;
  r->capacity = capacity;
  r->hdr_words = hdr_words;
  /* A record and the overflow record in front of it must fit in half the
   * array, so that a reservation which needs padding can always succeed once
   * the reader has caught up (see reserve). */
  r->max_record = capacity / 2 - (2 + hdr_words + 1);
  atomic_init(&r->head, 0);
  atomic_init(&r->tail, 0);
  atomic_init(&r->lost, 0);
  atomic_init(&r->state, 0);
  atomic_init(&r->reader_waiting, 0);
  atomic_init(&r->wake_seq, 0);
  r->rate_pending = 1;
  r->rate = rate;
  return 0;
}

void pprt__ring_destroy(pprt__ring *r) {
  free((void *)r->words);
  r->words = NULL;
}

static void wake_reader(pprt__ring *r) {
  atomic_fetch_add_explicit(&r->wake_seq, 1, memory_order_release);
  pprt__os_wake(&r->wake_seq);
}

/* Wakes the reader if it is asleep or about to sleep. Writer and reader
 * both update reader_waiting with a read-modify-write, so the two are
 * ordered: if ours comes first, the reader's exchange reads from it and so
 * sees the record we published before it; if the reader's comes first, we
 * read its 1 and wake it. (RMWs rather than fences: ThreadSanitizer does not
 * model fences, and the CI runs the ring under it.) */
static void notify_reader(pprt__ring *r, size_t end) {
  if (r->wake_words != 0 &&
      end - atomic_load_explicit(&r->tail, memory_order_relaxed) < r->wake_words)
    return; /* not enough waiting yet: the reader's timeout will find it */
  if (atomic_fetch_or_explicit(&r->reader_waiting, 0, memory_order_acq_rel))
    wake_reader(r);
}

void pprt__ring_set_wake_threshold(pprt__ring *r, size_t words) {
  r->wake_words = words;
}

static void writer_leave(pprt__ring *r) {
  size_t prev = atomic_fetch_sub_explicit(&r->state, 1, memory_order_seq_cst);
  if (prev == (RING_CLOSED | 1))
    wake_reader(r); /* the last writer after close: the reader may finish */
}

/* Reserves need contiguous words. Returns the position of the first, after
 * any padding (whose rewind word this writes), or SIZE_MAX when full. */
static size_t reserve(pprt__ring *r, size_t need) {
  size_t cap = r->capacity;
  size_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  size_t pad;
  for (;;) {
    size_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    size_t off = h & (cap - 1);
    pad = off + need > cap ? cap - off : 0;
    if (h + pad + need - t > cap)
      return SIZE_MAX;
    if (atomic_compare_exchange_weak_explicit(&r->head, &h, h + pad + need, memory_order_relaxed,
                                              memory_order_relaxed))
      break;
  }
  if (pad) {
    atomic_store_explicit(&r->words[h & (cap - 1)], WORD0(KIND_REWIND, pad), memory_order_release);
    h += pad;
  }
  return h;
}

/* Fills and publishes one record at absolute position pos. */
static void put_record(pprt__ring *r, size_t pos, enum pprt__ring_kind kind, uint64_t ts,
                       const uint64_t *hdr, const uintptr_t *pcs, size_t npcs) {
  _Atomic uint64_t *w = r->words + (pos & (r->capacity - 1));
  size_t len = pprt__ring_record_words(r, npcs);
  atomic_store_explicit(&w[1], ts, memory_order_relaxed);
  for (size_t i = 0; i < r->hdr_words; i++)
    atomic_store_explicit(&w[2 + i], hdr ? hdr[i] : 0, memory_order_relaxed);
  _Atomic uint64_t *p = w + 2 + r->hdr_words;
  for (size_t i = 0; i < npcs; i++)
    atomic_store_explicit(&p[i], (uint64_t)pcs[i], memory_order_relaxed);
  atomic_store_explicit(&w[0], WORD0(kind, len), memory_order_release);
}

int pprt__ring_write(pprt__ring *r, uint64_t timestamp, const uint64_t *hdr, const uintptr_t *pcs,
                     size_t npcs) {
  size_t len = pprt__ring_record_words(r, npcs);
  if (len > r->max_record)
    return -EMSGSIZE;
  if (atomic_fetch_add_explicit(&r->state, 1, memory_order_acquire) & RING_CLOSED) {
    writer_leave(r);
    return -EPIPE;
  }

  uint64_t lost = 0;
  if (atomic_load_explicit(&r->lost, memory_order_relaxed) != 0)
    lost = atomic_exchange_explicit(&r->lost, 0, memory_order_relaxed);
  size_t overflow_len = lost ? pprt__ring_record_words(r, 1) : 0;

  size_t pos = reserve(r, overflow_len + len);
  if (pos == SIZE_MAX) {
    atomic_fetch_add_explicit(&r->lost, lost + 1, memory_order_relaxed);
    writer_leave(r);
    return -ENOSPC;
  }
  if (lost) {
    uintptr_t count = (uintptr_t)lost;
    put_record(r, pos, PPRT__RING_OVERFLOW, timestamp, NULL, &count, 1);
    pos += overflow_len;
  }
  put_record(r, pos, PPRT__RING_DATA, timestamp, hdr, pcs, npcs);
  notify_reader(r, pos + len);
  writer_leave(r);
  return 0;
}

void pprt__ring_close(pprt__ring *r) {
  atomic_fetch_or_explicit(&r->state, RING_CLOSED, memory_order_seq_cst);
  wake_reader(r);
}

/* Fills rec to describe the record of kind and len words copied to buf. */
static int describe(const pprt__ring *r, const uint64_t *buf, size_t len, enum pprt__ring_kind kind,
                    pprt__ring_record *rec) {
  rec->kind = kind;
  rec->length = len;
  rec->timestamp = buf[1];
  rec->hdr = buf + 2;
  rec->pcs = buf + 2 + r->hdr_words;
  rec->npcs = len - 2 - r->hdr_words;
  return 1;
}

/* Describes a record that the reader builds itself (rate, reported losses). */
static int synthetic(pprt__ring *r, uint64_t *buf, pprt__ring_record *rec,
                     enum pprt__ring_kind kind, uint64_t value) {
  size_t len = pprt__ring_record_words(r, kind == PPRT__RING_OVERFLOW ? 1 : 0);
  memset(buf, 0, len * sizeof *buf);
  buf[0] = len;
  buf[1] = pprt__os_monotonic_ns();
  if (kind == PPRT__RING_RATE)
    buf[2] = value;
  else
    buf[len - 1] = value;
  return describe(r, buf, len, kind, rec);
}

/* Takes the record at tail, if one is published. Returns 1 and fills rec,
 * or 0 when the word at tail is still free. */
static int take(pprt__ring *r, uint64_t *buf, pprt__ring_record *rec) {
  size_t cap = r->capacity;
  for (;;) {
    size_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    _Atomic uint64_t *w = r->words + (t & (cap - 1));
    uint64_t w0 = atomic_load_explicit(&w[0], memory_order_acquire);
    if (w0 == 0)
      return 0;
    size_t len = WORD0_LEN(w0);
    if (WORD0_KIND(w0) == KIND_REWIND) {
      atomic_store_explicit(&w[0], 0, memory_order_relaxed);
      atomic_store_explicit(&r->tail, t + len, memory_order_release);
      continue;
    }
    buf[0] = len;
    for (size_t i = 1; i < len; i++) {
      buf[i] = atomic_load_explicit(&w[i], memory_order_relaxed);
      atomic_store_explicit(&w[i], 0, memory_order_relaxed);
    }
    atomic_store_explicit(&w[0], 0, memory_order_relaxed);
    atomic_store_explicit(&r->tail, t + len, memory_order_release);
    return describe(r, buf, len, (enum pprt__ring_kind)WORD0_KIND(w0), rec);
  }
}

static int published_at_tail(pprt__ring *r) {
  size_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
  return atomic_load_explicit(&r->words[t & (r->capacity - 1)], memory_order_acquire) != 0;
}

/* Sleeps until a writer publishes, the ring closes, or deadline (0: none).
 * Returns -EAGAIN at the deadline, else 0. */
static int wait_for_data(pprt__ring *r, uint64_t deadline) {
  uint64_t timeout = 0;
  if (deadline) {
    uint64_t now = pprt__os_monotonic_ns();
    if (now >= deadline)
      return -EAGAIN;
    timeout = deadline - now;
  }
  unsigned seq = atomic_load_explicit(&r->wake_seq, memory_order_acquire);
  atomic_exchange_explicit(&r->reader_waiting, 1, memory_order_acq_rel);
  int ready = published_at_tail(r) || atomic_load_explicit(&r->lost, memory_order_relaxed) != 0 ||
              atomic_load_explicit(&r->state, memory_order_acquire) == RING_CLOSED;
  if (!ready)
    pprt__os_wait(&r->wake_seq, seq, timeout);
  atomic_store_explicit(&r->reader_waiting, 0, memory_order_relaxed);
  return 0;
}

int pprt__ring_read(pprt__ring *r, enum pprt__ring_wait wait, uint64_t timeout_ns, uint64_t *buf,
                    pprt__ring_record *rec) {
  if (r->rate_pending) {
    r->rate_pending = 0;
    return synthetic(r, buf, rec, PPRT__RING_RATE, r->rate);
  }
  uint64_t deadline = 0;
  if (wait == PPRT__RING_BLOCK && timeout_ns)
    deadline = pprt__os_monotonic_ns() + timeout_ns;
  for (;;) {
    if (r->eof)
      return 0;
    if (take(r, buf, rec))
      return 1;
    /* Caught up: report losses that no later write has carried. */
    uint64_t lost = 0;
    if (atomic_load_explicit(&r->lost, memory_order_relaxed) != 0)
      lost = atomic_exchange_explicit(&r->lost, 0, memory_order_relaxed);
    if (lost)
      return synthetic(r, buf, rec, PPRT__RING_OVERFLOW, lost);
    if (atomic_load_explicit(&r->state, memory_order_acquire) == RING_CLOSED) {
      /* No writer is inside and none can enter: what is published now is
       * all there will be. */
      if (published_at_tail(r) || atomic_load_explicit(&r->lost, memory_order_relaxed))
        continue;
      r->eof = 1;
      return 0;
    }
    if (wait == PPRT__RING_NONBLOCK)
      return -EAGAIN;
    if (wait_for_data(r, deadline) < 0)
      return -EAGAIN;
  }
}
