/* Ring buffer benchmark: what one write costs, how writers scale, how fast
 * the reader drains, and whether a live reader loses anything at 10x the
 * CPU profiler's heaviest load.
 *
 * Baselines measured in the same run, so the figures read as ratios on any
 * machine: the delivery of one signal to an empty handler (what every CPU
 * sample pays before pprt does anything) and a plain copy of the record.
 *
 * Usage: bench/ring [seconds per measurement, default 1] */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/platform.h"
#include "core/ring.h"

#include "bench_util.h"

#define HDR 2
#define RING_WORDS (1u << 17) /* the CPU profiler's ring: 1 MiB */

static double seconds = 1.0;

static double now_s(void) {
  return (double)pprt__os_monotonic_ns() / 1e9;
}

static void empty_handler(int sig) {
  (void)sig;
}

/* ns for raise() to deliver SIGPROF to an empty handler and return. */
static double bench_signal(void) {
  signal(SIGPROF, empty_handler);
  long n = 0;
  double t0 = now_s(), t;
  do {
    for (int i = 0; i < 1000; i++)
      raise(SIGPROF);
    n += 1000;
  } while ((t = now_s()) - t0 < seconds);
  signal(SIGPROF, SIG_DFL);
  return (t - t0) * 1e9 / (double)n;
}

static uint64_t sink[2 + HDR + 64];

/* ns to copy a record of npcs pcs into memory: the floor for any write. */
static double bench_copy(size_t npcs) {
  uintptr_t pcs[64];
  for (size_t i = 0; i < 64; i++)
    pcs[i] = 0x400000 + i * 16;
  long n = 0;
  double t0 = now_s(), t;
  do {
    for (int i = 0; i < 10000; i++) {
      sink[0] = 2 + HDR + npcs;
      sink[1] = (uint64_t)i;
      sink[2] = 1;
      sink[3] = 2;
      for (size_t j = 0; j < npcs; j++)
        sink[4 + j] = pcs[j];
      __asm__ volatile("" ::"r"(sink) : "memory");
    }
    n += 10000;
  } while ((t = now_s()) - t0 < seconds);
  return (t - t0) * 1e9 / (double)n;
}

static uint64_t rbuf[RING_WORDS];

static void drain(pprt__ring *r) {
  pprt__ring_record rec;
  while (pprt__ring_read(r, PPRT__RING_NONBLOCK, 0, rbuf, &rec) == 1)
    ;
}

/* ns per write by one thread into a ring with room: batches that fit, the
 * ring drained (untimed) between batches. */
static double bench_uncontended(size_t npcs) {
  pprt__ring r;
  if (pprt__ring_init(&r, RING_WORDS, HDR, 100) != 0)
    abort();
  uintptr_t pcs[64];
  for (size_t i = 0; i < 64; i++)
    pcs[i] = 0x400000 + i * 16;
  uint64_t hdr[HDR] = {1, 1};
  size_t batch = RING_WORDS / 2 / (2 + HDR + npcs);
  double spent = 0;
  long n = 0;
  while (spent < seconds) {
    double t0 = now_s();
    for (size_t i = 0; i < batch; i++)
      if (pprt__ring_write(&r, i, hdr, pcs, npcs) != 0)
        abort();
    spent += now_s() - t0;
    n += (long)batch;
    drain(&r);
  }
  pprt__ring_destroy(&r);
  return spent * 1e9 / (double)n;
}

struct writer_arg {
  pprt__ring *r;
  size_t npcs;
  double rate; /* writes per second to aim for; 0: as fast as possible */
  double until;
  long ok, lost;
};

static void *writer(void *p) {
  struct writer_arg *a = p;
  uintptr_t pcs[64];
  for (size_t i = 0; i < 64; i++)
    pcs[i] = 0x400000 + i * 16;
  uint64_t hdr[HDR] = {1, pprt__os_thread_id()};
  double start = now_s();
  for (long i = 0;; i++) {
    if ((i & 255) == 0 && now_s() >= a->until)
      break;
    if (a->rate > 0) {
      double due = start + (double)i / a->rate;
      double wait = due - now_s();
      if (wait > 0) {
        struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        nanosleep(&ts, NULL);
      }
      if (now_s() >= a->until)
        break;
    }
    int rc = pprt__ring_write(a->r, pprt__os_monotonic_ns(), hdr, pcs, a->npcs);
    if (rc == 0)
      a->ok++;
    else
      a->lost++;
  }
  return NULL;
}

struct result {
  double writes_per_s; /* records written, all writers together */
  double ns_per_write; /* wall time per write, per writer */
  long read, lost_reported, lost_seen;
};

/* nthreads writers with a live blocking reader on this thread. */
static struct result bench_writers(int nthreads, size_t npcs, double rate) {
  pprt__ring r;
  if (pprt__ring_init(&r, RING_WORDS, HDR, 100) != 0)
    abort();
  struct writer_arg args[16];
  pthread_t th[16];
  double t0 = now_s();
  for (int i = 0; i < nthreads; i++) {
    args[i] = (struct writer_arg){&r, npcs, rate, t0 + seconds, 0, 0};
    pthread_create(&th[i], NULL, writer, &args[i]);
  }
  struct result res = {0};
  pprt__ring_record rec;
  int closed = 0;
  for (;;) {
    if (!closed && now_s() >= t0 + seconds) {
      for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
      pprt__ring_close(&r);
      closed = 1;
    }
    int rc = pprt__ring_read(&r, PPRT__RING_BLOCK, 10000000, rbuf, &rec);
    if (rc == 0)
      break;
    if (rc != 1)
      continue;
    if (rec.kind == PPRT__RING_DATA)
      res.read++;
    else if (rec.kind == PPRT__RING_OVERFLOW)
      res.lost_reported += (long)rec.pcs[0];
  }
  double elapsed = now_s() - t0;
  long ok = 0;
  for (int i = 0; i < nthreads; i++) {
    ok += args[i].ok;
    res.lost_seen += args[i].lost;
  }
  res.writes_per_s = (double)(ok + res.lost_seen) / elapsed;
  res.ns_per_write = elapsed * 1e9 / ((double)(ok + res.lost_seen) / nthreads);
  if (ok != res.read || res.lost_seen != res.lost_reported) {
    fprintf(stderr, "accounting broken: wrote %ld read %ld, lost %ld reported %ld\n", ok, res.read,
            res.lost_seen, res.lost_reported);
    exit(1);
  }
  pprt__ring_destroy(&r);
  return res;
}

/* Records per second the reader takes out of a full ring. */
static double bench_reader(size_t npcs) {
  pprt__ring r;
  if (pprt__ring_init(&r, RING_WORDS, HDR, 100) != 0)
    abort();
  uintptr_t pcs[64] = {0};
  uint64_t hdr[HDR] = {1, 1};
  pprt__ring_record rec;
  pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, rbuf, &rec); /* the rate record */
  double spent = 0;
  long n = 0;
  while (spent < seconds) {
    while (pprt__ring_write(&r, 0, hdr, pcs, npcs) == 0)
      ;
    drain(&r); /* reports the one failed write as an overflow record */
    pprt__ring_write(&r, 0, hdr, pcs, npcs);
    drain(&r);
    long batch = 0;
    while (pprt__ring_write(&r, 0, hdr, pcs, npcs) == 0)
      batch++;
    double t0 = now_s();
    while (pprt__ring_read(&r, PPRT__RING_NONBLOCK, 0, rbuf, &rec) == 1)
      ;
    spent += now_s() - t0;
    n += batch;
  }
  pprt__ring_destroy(&r);
  return (double)n / spent;
}

int main(int argc, char **argv) {
  seconds = seconds_arg(argc, argv, seconds);
  printf("pprt ring benchmark: %u-word ring, %d header words, reader %s\n", RING_WORDS, HDR,
         pprt__os_reader_blocks ? "blocking" : "poll");

  double sig = bench_signal();
  printf("\nbaselines\n");
  printf("  signal delivery to an empty handler   %8.1f ns\n", sig);
  double copy16 = bench_copy(16), copy64 = bench_copy(64);
  printf("  plain copy of a 16-frame record       %8.1f ns\n", copy16);
  printf("  plain copy of a 64-frame record       %8.1f ns\n", copy64);

  printf("\nuncontended write (one thread, room in the ring)\n");
  double w16 = bench_uncontended(16), w64 = bench_uncontended(64);
  printf("  16 frames  %6.1f ns  = %5.2fx copy, %5.3fx signal\n", w16, w16 / copy16, w16 / sig);
  printf("  64 frames  %6.1f ns  = %5.2fx copy, %5.3fx signal   (target <= 100 ns)\n", w64,
         w64 / copy64, w64 / sig);

  printf("\nwriters flat out with a live reader (writes/s all threads; ns per write per thread)\n");
  size_t depths[2] = {16, 64};
  int counts[3] = {1, 2, 4};
  for (int d = 0; d < 2; d++)
    for (int c = 0; c < 3; c++) {
      struct result res = bench_writers(counts[c], depths[d], 0);
      printf("  %d writer%s %2zu frames  %12.0f writes/s  %7.1f ns/write  %5.2fx uncontended  "
             "lost %ld (%.1f%%)\n",
             counts[c], counts[c] > 1 ? "s" : " ", depths[d], res.writes_per_s, res.ns_per_write,
             res.ns_per_write / (depths[d] == 16 ? w16 : w64), res.lost_seen,
             100.0 * (double)res.lost_seen / (double)(res.read + res.lost_seen));
    }

  printf("\nreader throughput (records/s out of a full ring)\n");
  double rd16 = bench_reader(16), rd64 = bench_reader(64);
  printf("  16 frames  %12.0f records/s\n", rd16);
  printf("  64 frames  %12.0f records/s\n", rd64);

  /* The CPU profiler's worst case here: CONFIG_HZ=250 samples per CPU-second
   * per thread, 8 busy threads = 2,000 records/s. Ten times that, paced. */
  const int threads = 8;
  const double per_thread = 10 * 250.0;
  struct result res = bench_writers(threads, 64, per_thread);
  printf("\nlive reader at 10x the profiler's peak (%d threads x %.0f/s, 64 frames)\n", threads,
         per_thread);
  printf("  %.0f records/s written, %ld read, %ld lost  %s\n", res.writes_per_s, res.read,
         res.lost_seen, res.lost_seen == 0 ? "(target: none lost)" : "(TARGET MISSED)");
  return res.lost_seen == 0 && w64 <= 100 ? 0 : 1;
}
