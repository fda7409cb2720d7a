/* The CFI unwinder (see unwind.h): the default walk on ELF systems.
 *
 * Divisions:
 *   the table set  one immutable array of images (runtime range, load bias,
 *                  compiled table or none) behind an atomic pointer; built
 *                  and replaced outside any handler (pprt__cfi_refresh),
 *                  when the loader's generation says images came or went;
 *                  a replaced set and the tables only it held are freed
 *                  once no walk is running (g_walkers), so a handler never
 *                  reads freed memory and never waits;
 *   the walk       from the interrupted registers: per pc, the image's row;
 *                  the CFA from sp or fp; the return address and the
 *                  caller's fp from their saved slots, read only inside the
 *                  thread's stack (or probed); the frame-pointer rule for a
 *                  pc no row covers; a signal trampoline's frame read
 *                  through the platform's layout of the signal frame.
 *
 * Why tables and not libunwind or libgcc's unwinder in the handler: both
 * find and parse the unwind information on the fly, under the loader's lock
 * or with allocation (async-profiler issue 215, gperftools 1426); a
 * precompiled table is a binary search and two loads a frame. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atfork.h"
#include "core/cfi.h"
#include "core/platform.h"
#include "core/unwind.h"

#define WORD sizeof(uintptr_t)
#define PAGE ((uintptr_t)4096)
/* The memory all tables together may use: images past it keep frame
 * pointers (a counted reason). */
#define BUDGET_BYTES ((size_t)256 << 20)

const int pprt__have_cfi = 1;

/* ---- the table set ------------------------------------------------------------ */

/* A table's memo: the rules of the pcs walks met lately, each slot one
 * word, pc offset << 32 | rule, so that a handler reads or replaces a slot
 * whole without a lock (and two handlers writing one slot leave one of
 * their entries, never a mix). A pc seen again, as the pcs of a hot stack
 * are sample after sample, costs one load instead of the bucket's search.
 * Empty slots hold an offset no lookup asks for. */
#define MEMO_EMPTY UINT64_MAX
_Static_assert(ATOMIC_LONG_LOCK_FREE == 2 && sizeof(long) == sizeof(uint64_t),
               "a memo slot is read and written whole, without a lock, in signal handlers");
#define MEMO_MAX_BITS 10 /* 8 KiB an image at most */

typedef struct image {
  uintptr_t start, limit, bias;
  pprt__cfi_table *table; /* NULL: this image walks with frame pointers */
  _Atomic uint64_t *memo; /* with the table: same life */
  unsigned memo_shift;    /* 32 - log2(slots) */
  int status;             /* enum pprt__cfi_status */
  double build_ms;
  size_t eh_bytes;
  char *path;
} image;

typedef struct set {
  size_t n;
  uint64_t generation;
  image img[];
} set;

static set *_Atomic g_set;
static atomic_int g_walkers;
static atomic_int g_stale; /* a walk met code in no image of the set */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t table_bytes(const pprt__cfi_table *t) {
  return t ? sizeof *t + t->n * sizeof t->rows[0] + t->nbuckets * sizeof t->buckets[0] : 0;
}

static size_t memo_slots(const image *im) {
  return im->memo ? (size_t)1 << (32 - im->memo_shift) : 0;
}

/* What an image's unwinding holds in memory: its table and memo. */
static size_t image_bytes(const image *im) {
  return table_bytes(im->table) + memo_slots(im) * sizeof im->memo[0];
}

/* A memo for im's table, a slot per row up to 2^MEMO_MAX_BITS. Without
 * memory the image keeps no table. */
static void memo_attach(image *im) {
  unsigned bits = 4;
  while (bits < MEMO_MAX_BITS && ((size_t)1 << bits) < im->table->n)
    bits++;
  im->memo = malloc(sizeof *im->memo << bits);
  if (im->memo == NULL) {
    free(im->table);
    im->table = NULL;
    im->status = PPRT__CFI_NOMEM;
    return;
  }
  for (size_t i = 0; i < (size_t)1 << bits; i++)
    atomic_init(&im->memo[i], MEMO_EMPTY);
  im->memo_shift = 32 - bits;
}

static const image *set_find(const set *s, uintptr_t pc) {
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (pc < s->img[mid].start)
      hi = mid;
    else if (pc >= s->img[mid].limit)
      lo = mid + 1;
    else
      return &s->img[mid];
  }
  return NULL;
}

typedef struct collect {
  const set *old;
  image *v;
  size_t n, cap;
  size_t bytes;
  int err;
} collect;

static int collect_one(const pprt__os_unwind_source *src, void *arg) {
  collect *c = arg;
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 32;
    image *v = realloc(c->v, cap * sizeof *v);
    if (v == NULL)
      return c->err = -ENOMEM;
    c->v = v;
    c->cap = cap;
  }
  image *im = &c->v[c->n];
  memset(im, 0, sizeof *im);
  im->start = src->start;
  im->limit = src->limit;
  im->bias = src->load_bias;
  im->path = strdup(src->path ? src->path : "");
  if (im->path == NULL)
    return c->err = -ENOMEM;
  c->n++;
  /* An image already compiled keeps its table: the loader maps nothing
   * new over a loaded image. */
  const image *was = c->old ? set_find(c->old, src->start) : NULL;
  if (was && was->start == src->start && was->limit == src->limit && was->bias == src->load_bias &&
      strcmp(was->path, im->path) == 0) {
    im->table = was->table;
    im->memo = was->memo;
    im->memo_shift = was->memo_shift;
    im->status = was->status;
    im->build_ms = was->build_ms;
    im->eh_bytes = was->eh_bytes;
    c->bytes += image_bytes(im);
    return 0;
  }
  pprt__cfi_input in = {
      .machine = src->machine,
      .hdr = {src->hdr, src->hdr_len, (uint64_t)(uintptr_t)src->hdr},
      .frame = {src->frame, src->frame_len, src->frame_addr},
      .debug_frame = src->debug_frame,
      .bias = src->debug_frame ? 0 : src->load_bias,
      .text_lo = src->start - src->load_bias,
      .text_hi = src->limit - src->load_bias,
      .max_rows = c->bytes < BUDGET_BYTES ? (BUDGET_BYTES - c->bytes) / sizeof(pprt__cfi_row) : 1,
  };
  im->eh_bytes = src->eh_bytes;
  uint64_t t0 = pprt__os_monotonic_ns();
  im->status = src->frame_len ? (int)pprt__cfi_build(&in, &im->table) : PPRT__CFI_NONE;
  if (im->table)
    memo_attach(im);
  im->build_ms = (double)(pprt__os_monotonic_ns() - t0) / 1e6;
  if (im->table && !src->eh_bytes)
    im->eh_bytes = im->table->src_bytes;
  c->bytes += image_bytes(im);
  return 0;
}

static int image_cmp(const void *x, const void *y) {
  const image *a = x, *b = y;
  return a->start < b->start ? -1 : a->start > b->start;
}

/* Frees what `old` holds that `now` does not, once no walk can read it. */
static void retire(set *old, const set *now) {
  if (old == NULL)
    return;
  /* Walks that loaded the old pointer finish first; new ones see `now`. */
  while (atomic_load_explicit(&g_walkers, memory_order_seq_cst) != 0)
    sched_yield();
  for (size_t i = 0; i < old->n; i++) {
    int kept = 0;
    for (size_t j = 0; now && j < now->n && !kept; j++)
      kept = now->img[j].table == old->img[i].table;
    if (!kept) {
      free(old->img[i].table);
      free(old->img[i].memo);
    }
    free(old->img[i].path);
  }
  free(old);
}

/* fork: the set is whole in the child (g_lock held across the fork, by
 * core/atfork.c), but walks that other threads were in never finish there. */
static void atfork_child(void) {
  atomic_store(&g_walkers, 0);
}

static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

static const pprt__fork_hooks fork_hooks = {NULL, NULL, atfork_child};

static void install_atfork(void) {
  pprt__fork_register_locked(PPRT__FORK_CFI, &g_lock, &fork_hooks);
}

PPRT__FORK_REGISTER_AT_LOAD(g_atfork_once, install_atfork)

int pprt__cfi_refresh(void) {
  pthread_once(&g_atfork_once, install_atfork);
  pthread_mutex_lock(&g_lock);
  set *old = atomic_load_explicit(&g_set, memory_order_relaxed);
  uint64_t gen = pprt__os_loader_generation();
  atomic_store_explicit(&g_stale, 0, memory_order_relaxed);
  if (old != NULL && old->generation == gen) {
    pthread_mutex_unlock(&g_lock);
    return 0;
  }
  collect c = {old, NULL, 0, 0, 0, 0};
  int rc = pprt__os_unwind_each(collect_one, &c);
  set *s = NULL;
  if (rc == 0 && c.err == 0 && (s = malloc(sizeof *s + c.n * sizeof *s->img)) != NULL) {
    s->n = c.n;
    s->generation = gen;
    if (c.n)
      memcpy(s->img, c.v, c.n * sizeof *s->img);
    qsort(s->img, s->n, sizeof *s->img, image_cmp);
    atomic_store_explicit(&g_set, s, memory_order_seq_cst);
    retire(old, s);
  } else {
    /* Keep the set we have; free only what this attempt built. */
    for (size_t i = 0; i < c.n; i++) {
      int shared = 0;
      for (size_t j = 0; old && j < old->n && !shared; j++)
        shared = old->img[j].table == c.v[i].table;
      if (!shared) {
        free(c.v[i].table);
        free(c.v[i].memo);
      }
      free(c.v[i].path);
    }
    rc = rc ? rc : c.err ? c.err : -ENOMEM;
  }
  free(c.v);
  pthread_mutex_unlock(&g_lock);
  return rc;
}

int pprt__cfi_stale(void) {
  return atomic_load_explicit(&g_stale, memory_order_relaxed);
}

void pprt__cfi_stats(pprt__cfi_summary *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&g_lock);
  const set *s = atomic_load_explicit(&g_set, memory_order_relaxed);
  for (size_t i = 0; s && i < s->n; i++) {
    const image *im = &s->img[i];
    out->images++;
    if (im->table) {
      out->tables++;
      out->rows += im->table->n;
      out->bytes += image_bytes(im);
      out->eh_bytes += im->eh_bytes;
      out->build_ms += im->build_ms;
    } else if (im->status > 0 && im->status < PPRT__CFI_NSTATUS) {
      out->by_status[im->status]++;
    }
  }
  pthread_mutex_unlock(&g_lock);
}

int pprt__cfi_image_info(const char *path_part, pprt__cfi_image_stat *out) {
  int rc = -ENOENT;
  pthread_mutex_lock(&g_lock);
  const set *s = atomic_load_explicit(&g_set, memory_order_relaxed);
  for (size_t i = 0; s && i < s->n && rc != 0; i++) {
    const image *im = &s->img[i];
    if (strstr(im->path, path_part) == NULL)
      continue;
    out->status = im->status;
    out->rows = im->table ? im->table->n : 0;
    out->bytes = image_bytes(im);
    out->eh_bytes = im->eh_bytes;
    out->build_ms = im->build_ms;
    rc = 0;
  }
  pthread_mutex_unlock(&g_lock);
  return rc;
}

void pprt__cfi_describe(char *buf, size_t len) {
  pprt__cfi_summary st;
  pprt__cfi_stats(&st);
  int n = snprintf(buf, len,
                   "unwind tables: %zu of %zu images, %zu rows, %.1f KiB (from %.1f KiB of "
                   "unwind info), built in %.1f ms",
                   st.tables, st.images, st.rows, (double)st.bytes / 1024,
                   (double)st.eh_bytes / 1024, st.build_ms);
  for (int k = 1; k < PPRT__CFI_NSTATUS && n > 0 && (size_t)n < len; k++)
    if (st.by_status[k])
      n += snprintf(buf + n, len - (size_t)n, "%s%zu on frame pointers (%s)",
                    n > 0 && buf[n - 1] == ')' ? ", " : "; ", st.by_status[k],
                    pprt__cfi_status_name((enum pprt__cfi_status)k));
}

/* ---- the walk ----------------------------------------------------------------- */

/* Reads the word at addr: inside the stack's bounds when they are known,
 * else after probing its page. */
PPRT__UNWIND_UNCHECKED static inline __attribute__((always_inline)) int read_word(uintptr_t addr, pprt__stack_bounds b,
                                                           uintptr_t *ok_page, uintptr_t *out) {
  if (b.hi) {
    if (addr - b.lo > b.hi - b.lo - WORD) /* one compare: below lo wraps around */
      return 0;
  } else {
    uintptr_t pg = addr & ~(PAGE - 1), last = (addr + WORD - 1) & ~(PAGE - 1);
    if (pg != *ok_page) {
      if (!pprt__os_readable(pg))
        return 0;
      *ok_page = pg;
    }
    if (last != pg) { /* a misaligned slot across two pages */
      if (!pprt__os_readable(last))
        return 0;
      *ok_page = last;
    }
  }
  memcpy(out, (const void *)addr, WORD);
  return 1;
}

/* The interrupted registers saved in a signal frame whose restorer runs
 * with stack pointer sp. */
PPRT__UNWIND_UNCHECKED static int read_sigframe(uintptr_t sp, pprt__stack_bounds b, uintptr_t *ok_page, pprt__os_regs *r) {
  pprt__os_sigframe l;
  if (pprt__os_sigframe_layout(&l) != 0)
    return 0;
  uintptr_t lr = 0;
  if (!read_word(sp + l.pc, b, ok_page, &r->pc) || !read_word(sp + l.sp, b, ok_page, &r->sp) ||
      !read_word(sp + l.fp, b, ok_page, &r->fp) ||
      (l.lr != SIZE_MAX && !read_word(sp + l.lr, b, ok_page, &lr)))
    return 0;
  r->lr = lr;
  return 1;
}

/* A row's rule (everything but its pc) as one word: the walk compares and
 * copies it whole. */
typedef uint32_t rule;
#define RULE(cfa, ra_off, fp_off)                                                                  \
  ((rule)(uint16_t)(cfa) | (rule)(uint8_t)(ra_off) << 16 | (rule)(uint8_t)(fp_off) << 24)
#define RULE_KIND(r) ((unsigned)(r)&7)
#define RULE_OFF(r) ((intptr_t)(int16_t)(uint16_t)(r) >> 3)
#define RULE_RA(r) ((intptr_t)(int8_t)(uint8_t)((r) >> 16))
#define RULE_FP(r) ((intptr_t)(int8_t)(uint8_t)((r) >> 24))
/* No row: the frame-pointer rule (what cfi.c's FP_RULE rows hold too). */
#define RULE_NONE RULE(PPRT__CFI_FP_RULE, 0, 0)
/* The frame-pointer frame of both targets: CFA = fp + 2 words, the return
 * address one word below it, the caller's fp two. */
#define RULE_FP_FRAME RULE(2 << 3 | PPRT__CFI_CFA_FP, -1, -2)

/* The image a walk is in, the fields a memo hit needs copied out: the
 * walk's stores to pcs (uintptr_t, like these) would otherwise make the
 * compiler reload them from the set every frame. A miss reads the rest
 * from the table. */
typedef struct span {
  uintptr_t lo, hi; /* the image's range; both 0: in no image */
  uintptr_t base;   /* runtime address of the table's pc 0 */
  uintptr_t end;    /* the table covers [base, base + end); 0: no table */
  _Atomic uint64_t *memo;
  unsigned memo_shift;
  const pprt__cfi_table *t;
} span;

static inline __attribute__((always_inline)) void span_of(const image *im, span *c) {
  *c = (span){0}; /* no image: an empty range, so every pc searches again */
  if (im == NULL)
    return;
  c->lo = im->start;
  c->hi = im->limit;
  const pprt__cfi_table *t = im->table;
  if (t == NULL || t->n == 0)
    return;
  c->base = im->bias + (uintptr_t)t->base;
  c->end = (uintptr_t)t->end;
  c->t = t;
  c->memo = im->memo;
  c->memo_shift = im->memo_shift;
}

/* pprt__cfi_lookup on a span: the rule of the row covering runtime address
 * at, or RULE_NONE; from the memo when at was met before. */
static inline __attribute__((always_inline)) rule span_rule(const span *c, uintptr_t at) {
  uintptr_t off = at - c->base; /* below base wraps past end */
  if (off >= c->end)
    return RULE_NONE;
  /* end < 2^32 (cfi.c compiles no larger image): off fits above the rule,
   * and a slot holding off = 2^32 - 1 would read as MEMO_EMPTY, so that
   * one is never stored. */
  _Atomic uint64_t *slot = &c->memo[(uint32_t)((uint32_t)off * 0x9e3779b1u) >> c->memo_shift];
  uint64_t e = atomic_load_explicit(slot, memory_order_relaxed);
  if (e >> 32 == off)
    return (rule)e;
  const pprt__cfi_row *r = pprt__cfi_lookup(c->t, off + c->t->base);
  if (r == NULL)
    return RULE_NONE;
  rule found = RULE(r->cfa, r->ra_off, r->fp_off);
  if (off != UINT32_MAX)
    atomic_store_explicit(slot, (uint64_t)off << 32 | found, memory_order_relaxed);
  return found;
}

/* Where a walk is: the frame's registers and what is known of them. */
typedef struct cursor {
  uintptr_t pc, sp, fp, lr;
  int exact; /* pc is the instruction itself, not a return address */
  int lr_ok; /* lr still holds this frame's return address */
  int sp_ok; /* sp is this frame's (an aarch64 fp step loses it) */
} cursor;

/* Up to the caller, whose pc is the return address ra and whose sp is the
 * CFA: how every rule's step ends (a signal frame's aside). */
static inline __attribute__((always_inline)) void cursor_up(cursor *f, uintptr_t ra, uintptr_t cfa,
                                                            uintptr_t fp, int sp_ok) {
  f->pc = ra;
  f->sp = cfa;
  f->fp = fp;
  f->exact = f->lr_ok = 0;
  f->sp_ok = sp_ok;
}

/* The walk; sps, when not NULL, receives each frame's sp. Inlined into its
 * two callers so the handler's copy has no sps branches. */
PPRT__UNWIND_UNCHECKED static inline __attribute__((always_inline)) size_t
walk(const pprt__os_regs *regs, pprt__stack_bounds b, uintptr_t *pcs, uintptr_t *sps, size_t max) {
  /* Sequentially consistent, with the swap and the check in retire: either
   * retire sees this walk's count, or this walk sees the new set. */
  atomic_fetch_add_explicit(&g_walkers, 1, memory_order_seq_cst);
  const set *s = atomic_load_explicit(&g_set, memory_order_seq_cst);
  cursor f = {regs->pc, regs->sp, regs->fp, regs->lr, 1, 1, 1};
  uintptr_t ok_page = 0;
  span im;
  span_of(NULL, &im);
  int probes = 4;                            /* trampoline checks left: each costs system calls */
  const uintptr_t room = b.hi - b.lo - WORD; /* a word at addr is on the stack: addr - lo <= room */
  size_t n = 0;
  while (n < max) {
    if (sps)
      sps[n] = f.sp;
    pcs[n++] = f.pc;
    uintptr_t at = f.pc - !f.exact;    /* a return address may be past its call's function */
    if (at - im.lo >= im.hi - im.lo) { /* outside [lo, hi), or in no image */
      const image *found = s ? set_find(s, at) : NULL;
      span_of(found, &im);
      if (found == NULL && n == 1 && s != NULL &&
          !atomic_load_explicit(&g_stale, memory_order_relaxed))
        atomic_store_explicit(&g_stale, 1, memory_order_relaxed);
    }
    rule r = span_rule(&im, at);
    uintptr_t cfa, ra, nfp = f.fp;
    /* The common rows on a stack of known bounds: the general path below,
     * its checks merged (each slot one compare against [lo, hi - word]). */
    if (b.hi) {
      /* The frame-pointer frame: its slots' addresses come from fp alone,
       * not from the row, so the loads need not wait for the lookup (the
       * branch is predicted): the walk goes at about the pace of a
       * frame-pointer walk. */
      if (r == RULE_FP_FRAME && f.fp != 0) {
        cfa = f.fp + 2 * WORD;
        if (cfa - f.sp - 1 >= PPRT__UNWIND_MAX_FRAME || f.fp - b.lo > room - WORD)
          break; /* both slots inside [lo, hi); cfa <= sp wraps past the bound */
        memcpy(&nfp, (const void *)f.fp, WORD);
        memcpy(&ra, (const void *)(f.fp + WORD), WORD);
        if (ra < PAGE)
          break;
        cursor_up(&f, ra, cfa, nfp, 1);
        continue;
      }
      /* CFA = sp or fp + k, the return address saved, the caller's fp
       * unchanged or saved. */
      unsigned k = RULE_KIND(r);
      intptr_t ra_off = RULE_RA(r), fp_off = RULE_FP(r);
      if (((k == PPRT__CFI_CFA_SP && f.sp_ok) || (k == PPRT__CFI_CFA_FP && f.fp != 0)) &&
          ra_off != 0 && fp_off != PPRT__CFI_FP_LOST) {
        cfa = (k == PPRT__CFI_CFA_SP ? f.sp : f.fp) + (uintptr_t)(RULE_OFF(r) * (intptr_t)WORD);
        uintptr_t ra_at = cfa + (uintptr_t)(ra_off * (intptr_t)WORD);
        if (cfa - f.sp - 1 >= PPRT__UNWIND_MAX_FRAME || cfa > b.hi || ra_at - b.lo > room)
          break; /* cfa <= sp wraps past the bound */
        memcpy(&ra, (const void *)ra_at, WORD);
        if (fp_off != 0) {
          uintptr_t fp_at = cfa + (uintptr_t)(fp_off * (intptr_t)WORD);
          if (fp_at - b.lo > room)
            break;
          memcpy(&nfp, (const void *)fp_at, WORD);
        }
        if (ra < PAGE)
          break;
        cursor_up(&f, ra, cfa, nfp, 1);
        continue;
      }
    }
    unsigned kind = RULE_KIND(r);
    int pac = kind >= PPRT__CFI_CFA_SP_PAC;
    if (pac)
      kind -= PPRT__CFI_CFA_SP_PAC; /* to CFA_SP or CFA_FP */
    if ((kind == PPRT__CFI_CFA_SP || kind == PPRT__CFI_PLT) && !f.sp_ok)
      kind = PPRT__CFI_FP_RULE;
    /* A handler's return into a trampoline outside every image (qemu-user's,
     * a kernel's without a vDSO): recognised by its code. */
    if (im.hi == 0 && !f.exact && probes > 0 && (probes--, pprt__os_is_sigreturn(f.pc)))
      kind = PPRT__CFI_SIGFRAME;
    if (kind == PPRT__CFI_CFA_FP && f.fp == 0)
      break; /* its frame pointer was lost on the way up */
    int sp_ok = 1;
    if (kind == PPRT__CFI_OUTERMOST) {
      break;
    } else if (kind == PPRT__CFI_SIGFRAME) {
      pprt__os_regs sr;
      if (!f.sp_ok || !read_sigframe(f.sp, b, &ok_page, &sr) || sr.sp <= f.sp || sr.pc < PAGE)
        break;
      f = (cursor){sr.pc, sr.sp, sr.fp, sr.lr, 1, 1, 1};
      continue;
    } else if (kind == PPRT__CFI_FP_RULE) {
      /* [fp] = the caller's fp, [fp + word] = the return address. */
      uintptr_t w0, w1;
      if (f.fp < f.sp || f.fp - f.sp > PPRT__UNWIND_MAX_FRAME ||
          !read_word(f.fp, b, &ok_page, &w0) || !read_word(f.fp + WORD, b, &ok_page, &w1))
        break;
      cfa = f.fp + 2 * WORD;
      ra = w1;
      nfp = w0;
      /* x86_64's frame ends at the saved rbp and return address; an
       * aarch64 frame record sits anywhere in its frame. */
      sp_ok = pprt__unwind_fp_gives_sp;
    } else {
      intptr_t off = RULE_OFF(r);
      if (kind == PPRT__CFI_CFA_SP)
        cfa = f.sp + (uintptr_t)(off * (intptr_t)WORD);
      else if (kind == PPRT__CFI_CFA_FP)
        cfa = f.fp + (uintptr_t)(off * (intptr_t)WORD);
      else
        cfa = f.sp + WORD + ((f.pc & 15) >= (uintptr_t)off ? WORD : 0);
      if (RULE_RA(r) == 0) {
        /* Still in the link register: only where the interrupted
         * registers gave it, a leaf that has not saved it yet. */
        if (!f.lr_ok || cfa < f.sp)
          break;
        ra = f.lr;
      } else if (cfa <= f.sp || cfa - f.sp > PPRT__UNWIND_MAX_FRAME ||
                 !read_word(cfa + (uintptr_t)(RULE_RA(r) * (intptr_t)WORD), b, &ok_page, &ra)) {
        break;
      }
      if (RULE_FP(r) == PPRT__CFI_FP_LOST)
        nfp = 0;
      else if (RULE_FP(r) != 0 &&
               !read_word(cfa + (uintptr_t)(RULE_FP(r) * (intptr_t)WORD), b, &ok_page, &nfp))
        break;
      if (pac)
        ra = pprt__unwind_strip_pac(ra);
    }
    /* Stacks grow down: the caller's frame is above, and on this stack.
     * Only a leaf whose return address is still in lr may have CFA = sp
     * (and only rows, not the frame-pointer rule, say so). */
    if (cfa < f.sp || (cfa == f.sp && !(kind != PPRT__CFI_FP_RULE && RULE_RA(r) == 0)) ||
        (b.hi && cfa > b.hi) || ra < PAGE)
      break;
    cursor_up(&f, ra, cfa, nfp, sp_ok);
  }
  atomic_fetch_sub_explicit(&g_walkers, 1, memory_order_release);
  return n;
}

PPRT__UNWIND_UNCHECKED size_t pprt__unwind_cfi(const pprt__os_regs *regs, pprt__stack_bounds b, uintptr_t *pcs,
                        size_t max) {
  return max ? walk(regs, b, pcs, NULL, max) : 0;
}

PPRT__UNWIND_UNCHECKED size_t pprt__unwind_cfi_above(const pprt__os_regs *regs, uintptr_t frame, pprt__stack_bounds b,
                              uintptr_t *pcs, size_t max) {
  uintptr_t all[PPRT__UNWIND_ABOVE_MAX], sps[PPRT__UNWIND_ABOVE_MAX];
  size_t got = walk(regs, b, all, sps, PPRT__UNWIND_ABOVE_MAX), i = 0, n = 0;
  while (i < got && sps[i] <= frame)
    i++;
  if (i == 0 || i == got)
    return 0; /* the walk never passed the entry point's frame */
  for (; i < got && n < max; i++)
    pcs[n++] = all[i];
  return n;
}
