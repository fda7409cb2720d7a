/* A trace generation's tables (read/trace_decoder.h): its strings, the
 * source lines of its addresses (FRAMES), its stacks, its threads and its
 * clock (FREQUENCY), each checked against docs/trace-format.md as it is
 * read, and the lookups the events make in them. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "core/trace_format.h"
#include "read/trace_decoder.h"

static int str_eq(const void *ctx, uint32_t idx) {
  const struct id_key *k = ctx;
  return k->d->strs[idx].id == k->id;
}

static int stk_eq(const void *ctx, uint32_t idx) {
  const struct id_key *k = ctx;
  return k->d->stks[idx].id == k->id;
}

static int fr_eq(const void *ctx, uint32_t idx) {
  const struct id_key *k = ctx;
  return k->d->frs[idx].addr == k->id;
}

static const frames_entry *find_frames(dec *d, uint64_t addr) {
  struct id_key k = {d, addr};
  int64_t i = pprt__table_find(&d->fr_index, pprt__hash_finish(addr), fr_eq, &k);
  return i < 0 ? NULL : &d->frs[i];
}

const pprt__trace_str *pprt__tdec_find_str(dec *d, uint64_t id) {
  struct id_key k = {d, id};
  int64_t i = pprt__table_find(&d->str_index, pprt__hash_finish(id), str_eq, &k);
  return i < 0 ? NULL : &d->strs[i].str;
}

int64_t pprt__tdec_find_stack(dec *d, uint64_t id) {
  struct id_key k = {d, id};
  int64_t i = pprt__table_find(&d->stack_index, pprt__hash_finish(id), stk_eq, &k);
  return i < 0 ? -1 : d->stks[i].index;
}

static int add_string(dec *d, uint64_t id, const uint8_t *p, size_t n, size_t off) {
  struct id_key k = {d, id};
  uint64_t h = pprt__hash_finish(id);
  if (pprt__table_find(&d->str_index, h, str_eq, &k) >= 0)
    return pprt__tdec_fail(
        d, off, -EINVAL, "string id %" PRIu64 " defined twice in generation %" PRIu64, id, d->gen);
  if (PPRT__RESERVE(d->strs, d->cap_strs, d->nstrs + 1) != 0)
    return pprt__tdec_oom(d, off);
  str_entry *e = &d->strs[d->nstrs];
  e->id = id;
  if (pprt__tdec_copy_str(d, p, n, off, &e->str) != 0)
    return d->rc;
  if (pprt__table_intern(&d->str_index, h, str_eq, &k, (uint32_t)d->nstrs) < 0)
    return pprt__tdec_oom(d, off);
  d->nstrs++;
  return 0;
}

int pprt__tdec_strings(dec *d, cur *c) {
  while (c->p < c->end) {
    size_t off = off_of(c);
    uint64_t id, n;
    if (pprt__tdec_get_u(c, &id, "string id") || pprt__tdec_get_u(c, &n, "string length"))
      return d->rc;
    if (id == 0)
      return pprt__tdec_fail(d, off, -EINVAL, "string id 0 (ids start at 1)");
    if (n > PPRT__TRACE_MAX_STRING)
      return pprt__tdec_fail(d, off, -EINVAL, "string of %" PRIu64 " bytes (at most %d)", n,
                             PPRT__TRACE_MAX_STRING);
    if (n > (uint64_t)(c->end - c->p))
      return pprt__tdec_fail(d, off_of(c), -EINVAL,
                             "string of %" PRIu64 " bytes runs past its record", n);
    if (add_string(d, id, c->p, (size_t)n, off) != 0)
      return d->rc;
    c->p += n;
  }
  return 0;
}

/* A new decoded stack with n frames; its arrays are filled by the caller. */
int64_t pprt__tdec_new_stack(dec *d, size_t n, size_t off, uint64_t **pcs,
                             pprt__trace_str **names) {
  pprt__trace *t = d->t;
  if (PPRT__RESERVE(t->stacks, d->cap_stacks, t->nstacks + 1) != 0) {
    pprt__tdec_oom(d, off);
    return -1;
  }
  *pcs = pprt__tdec_alloc(t, n * sizeof **pcs);
  *names = pprt__tdec_alloc(t, n * sizeof **names);
  if (*pcs == NULL || *names == NULL) {
    pprt__tdec_oom(d, off);
    return -1;
  }
  memset(*names, 0, n * sizeof **names);
  t->stacks[t->nstacks] = (pprt__trace_stack){n, *pcs, *names, NULL, NULL};
  return (int64_t)t->nstacks++;
}

/* FRAMES (version 2): entries of an address (a stack pc, minus one but for
 * the leaf), a count (1 to PPRT__TRACE_MAX_INLINE), then per line a
 * function string id, a file string id (0: unknown) and a line. */
int pprt__tdec_frames(dec *d, cur *c) {
  while (c->p < c->end) {
    size_t off = off_of(c);
    uint64_t addr, n;
    if (pprt__tdec_get_u(c, &addr, "frames address") || pprt__tdec_get_u(c, &n, "frames count"))
      return d->rc;
    if (n == 0 || n > PPRT__TRACE_MAX_INLINE)
      return pprt__tdec_fail(d, off, -EINVAL, "frames entry of %" PRIu64 " lines (1 to %d)", n,
                             PPRT__TRACE_MAX_INLINE);
    if (find_frames(d, addr) != NULL)
      return pprt__tdec_fail(d, off, -EINVAL,
                             "frames of address 0x%" PRIx64 " given twice in generation %" PRIu64,
                             addr, d->gen);
    pprt__trace_line *lines = pprt__tdec_alloc(d->t, (size_t)n * sizeof *lines);
    if (lines == NULL)
      return pprt__tdec_oom(d, off);
    for (uint64_t i = 0; i < n; i++) {
      uint64_t ids[2], line;
      for (int k = 0; k < 2; k++) {
        size_t soff = off_of(c);
        if (pprt__tdec_get_u(c, &ids[k], k ? "file name id" : "function name id"))
          return d->rc;
        const pprt__trace_str *str = ids[k] ? pprt__tdec_find_str(d, ids[k]) : NULL;
        if (ids[k] && str == NULL)
          return pprt__tdec_fail(d, soff, -EINVAL,
                                 "string id %" PRIu64 " is not in generation %" PRIu64 "'s strings",
                                 ids[k], d->gen);
        if (k == 0 && str == NULL)
          return pprt__tdec_fail(d, soff, -EINVAL, "frames line without a function name");
        pprt__trace_str none = {NULL, 0};
        if (k)
          lines[i].file = str ? *str : none;
        else
          lines[i].function = *str;
      }
      if (pprt__tdec_get_u(c, &line, "line number"))
        return d->rc;
      lines[i].line = line;
    }
    if (PPRT__RESERVE(d->frs, d->cap_frs, d->nfrs + 1) != 0)
      return pprt__tdec_oom(d, off);
    d->frs[d->nfrs] = (frames_entry){addr, (uint16_t)n, lines};
    struct id_key k = {d, addr};
    if (pprt__table_intern(&d->fr_index, pprt__hash_finish(addr), fr_eq, &k, (uint32_t)d->nfrs) < 0)
      return pprt__tdec_oom(d, off);
    d->nfrs++;
  }
  return 0;
}

/* Gives a stack's frames the generation's source lines for their addresses. */
static int attach_lines(dec *d, pprt__trace_stack *st, size_t off) {
  uint16_t *nlines = pprt__tdec_alloc(d->t, st->n * sizeof *nlines);
  const pprt__trace_line **lines = pprt__tdec_alloc(d->t, st->n * sizeof *lines);
  if (st->n && (nlines == NULL || lines == NULL))
    return pprt__tdec_oom(d, off);
  int any = 0;
  for (size_t f = 0; f < st->n; f++) {
    uint64_t pc = st->pcs[f];
    const frames_entry *e = pc ? find_frames(d, f == 0 ? pc : pc - 1) : NULL;
    nlines[f] = e ? e->n : 0;
    lines[f] = e ? e->lines : NULL;
    any |= e != NULL;
  }
  if (any) {
    st->nlines = nlines;
    st->lines = lines;
  }
  return 0;
}

/* Stacks refer to strings for their function names, so they are parsed
 * after every STRINGS record of the generation: pass 1 remembers where. */
int pprt__tdec_stacks(dec *d, cur *c) {
  while (c->p < c->end) {
    size_t off = off_of(c);
    uint64_t id, n;
    if (pprt__tdec_get_u(c, &id, "stack id") || pprt__tdec_get_u(c, &n, "stack depth"))
      return d->rc;
    if (id == 0)
      return pprt__tdec_fail(d, off, -EINVAL, "stack id 0 (ids start at 1)");
    if (n > PPRT__TRACE_MAX_FRAMES)
      return pprt__tdec_fail(d, off, -EINVAL, "stack of %" PRIu64 " frames (at most %d)", n,
                             PPRT__TRACE_MAX_FRAMES);
    struct id_key k = {d, id};
    uint64_t h = pprt__hash_finish(id);
    if (pprt__table_find(&d->stack_index, h, stk_eq, &k) >= 0)
      return pprt__tdec_fail(
          d, off, -EINVAL, "stack id %" PRIu64 " defined twice in generation %" PRIu64, id, d->gen);
    uint64_t *pcs;
    pprt__trace_str *names;
    int64_t idx = pprt__tdec_new_stack(d, (size_t)n, off, &pcs, &names);
    if (idx < 0)
      return d->rc;
    for (uint64_t f = 0; f < n; f++) {
      uint64_t name;
      if (pprt__tdec_get_u(c, &pcs[f], "stack pc"))
        return d->rc;
      size_t noff = off_of(c);
      if (pprt__tdec_get_u(c, &name, "function name id"))
        return d->rc;
      if (name != 0) {
        const pprt__trace_str *s = pprt__tdec_find_str(d, name);
        if (s == NULL)
          return pprt__tdec_fail(d, noff, -EINVAL,
                                 "function name id %" PRIu64 " is not in generation %" PRIu64
                                 "'s strings",
                                 name, d->gen);
        names[f] = *s;
      }
    }
    if (d->nfrs > 0 && attach_lines(d, &d->t->stacks[idx], off) != 0)
      return d->rc;
    if (PPRT__RESERVE(d->stks, d->cap_stks, d->nstks + 1) != 0)
      return pprt__tdec_oom(d, off);
    d->stks[d->nstks] = (stack_entry){id, idx};
    if (pprt__table_intern(&d->stack_index, h, stk_eq, &k, (uint32_t)d->nstks) < 0)
      return pprt__tdec_oom(d, off);
    d->nstks++;
  }
  return 0;
}

static int thread_eq(const void *ctx, uint32_t idx) {
  const struct id_key *k = ctx;
  return k->d->t->threads[idx].tid == k->id;
}

int pprt__tdec_set_thread_name(dec *d, uint64_t tid, const pprt__trace_str *name, size_t off) {
  pprt__trace *t = d->t;
  struct id_key k = {d, tid};
  uint64_t h = pprt__hash_finish(tid);
  int64_t i = pprt__table_find(&d->thread_index, h, thread_eq, &k);
  if (i >= 0) {
    if (name)
      t->threads[i].name = *name;
    return 0;
  }
  if (PPRT__RESERVE(t->threads, d->cap_threads, t->nthreads + 1) != 0 ||
      pprt__table_intern(&d->thread_index, h, thread_eq, &k, (uint32_t)t->nthreads) < 0)
    return pprt__tdec_oom(d, off);
  t->threads[t->nthreads].tid = tid;
  t->threads[t->nthreads].name = name ? *name : (pprt__trace_str){NULL, 0};
  t->nthreads++;
  return 0;
}

int pprt__tdec_threads(dec *d, cur *c) {
  uint64_t pid;
  if (pprt__tdec_get_u(c, &pid, "process id"))
    return d->rc;
  d->t->pid = pid;
  while (c->p < c->end) {
    size_t off = off_of(c);
    uint64_t tid, name;
    if (pprt__tdec_get_u(c, &tid, "thread id") || pprt__tdec_get_u(c, &name, "thread name id"))
      return d->rc;
    if (tid == 0)
      return pprt__tdec_fail(d, off, -EINVAL, "thread id 0");
    const pprt__trace_str *s = NULL;
    if (name != 0 && (s = pprt__tdec_find_str(d, name)) == NULL)
      return pprt__tdec_fail(
          d, off, -EINVAL, "thread name id %" PRIu64 " is not in generation %" PRIu64 "'s strings",
          name, d->gen);
    if (pprt__tdec_set_thread_name(d, tid, s, off) != 0)
      return d->rc;
  }
  return 0;
}

int pprt__tdec_frequency(dec *d, cur *c, size_t off) {
  if (d->have_freq)
    return pprt__tdec_fail(d, off, -EINVAL, "a second frequency record in generation %" PRIu64,
                           d->gen);
  if (pprt__tdec_get_u(c, &d->hz, "ticks per second") ||
      pprt__tdec_get_u(c, &d->sync_ticks, "sync ticks") ||
      pprt__tdec_get_u(c, &d->sync_ns, "sync monotonic time") ||
      pprt__tdec_get_u(c, &d->sync_wall, "sync wall time"))
    return d->rc;
  if (d->hz == 0)
    return pprt__tdec_fail(d, off, -EINVAL, "frequency of 0 ticks per second");
  if (c->p != c->end)
    return pprt__tdec_fail(d, off_of(c), -EINVAL, "frequency record longer than its fields");
  if (d->sync_ns > INT64_MAX)
    return pprt__tdec_fail(d, off, -EINVAL, "sync time out of range");
  d->have_freq = 1;
  return 0;
}
