/* The Chrome Trace Event JSON exporter (read/trace_json.h): a decoded trace
 * (read/trace_decode.h) as one JSON object. Events are sorted per thread,
 * regions paired into properly nested B/E, the rest written as metadata,
 * counter, async and instant events, streamed out through a buffer;
 * strings go through the readers' one escaper (read/json.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/table.h"
#include "core/trace_format.h"
#include "read/json.h"
#include "read/trace_json.h"

/* Exported timestamps are shifted by this much so that the regions the
 * exporter opens before a thread's first event never go below zero. */
#define EXPORT_SHIFT_NS 1000u

static const char BEGUN_BEFORE[] = "(begun before the trace)";

typedef struct jout {
  pprt_writer out;
  char *buf;
  size_t len, cap;
  int err;
  int first;      /* no event written yet */
  uint64_t shift; /* ns from the export's origin to this trace's */
} jout;

static void jflush(jout *j) {
  if (j->len && j->err == 0)
    j->err = j->out.write(j->out.ctx, j->buf, j->len);
  j->len = 0;
}

static void jput(jout *j, const char *s, size_t n) {
  if (j->len + n > j->cap) {
    jflush(j);
    if (n > j->cap) {
      if (j->err == 0)
        j->err = j->out.write(j->out.ctx, s, n);
      return;
    }
  }
  memcpy(j->buf + j->len, s, n);
  j->len += n;
}

static void jputs(jout *j, const char *s) {
  jput(j, s, strlen(s));
}

static void jput_cb(void *ctx, const char *s, size_t n) {
  jput(ctx, s, n);
}

static void jprintf(jout *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jprintf(jout *j, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = pprt__put_vformat(jput_cb, j, fmt, ap);
  va_end(ap);
  if (rc != 0 && j->err == 0)
    j->err = rc;
}

static void jstr(jout *j, const char *s, size_t n) {
  pprt__json_string(s, n, 0, jput_cb, j);
}

/* Starts an event object: {"ph":..,"pid":..,"tid":.. */
static void jmeta(jout *j, const pprt__trace *t, const char *ph, uint64_t tid) {
  jputs(j, j->first ? "\n" : ",\n");
  j->first = 0;
  jprintf(j, "{\"ph\":\"%s\",\"pid\":%" PRIu64 ",\"tid\":%" PRIu64, ph, t->pid, tid);
}

/* The same with "ts": ts + adj nanoseconds after the origin, shifted, in
 * microseconds. Decoded times are below 2^63 and adj is small. */
static void jevent_at(jout *j, const pprt__trace *t, const char *ph, uint64_t ts, int64_t adj,
                      uint64_t tid) {
  jmeta(j, t, ph, tid);
  uint64_t ns = ts + EXPORT_SHIFT_NS + j->shift + (uint64_t)adj;
  jprintf(j, ",\"ts\":%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

static void jevent(jout *j, const pprt__trace *t, const char *ph, uint64_t ts, uint64_t tid) {
  jevent_at(j, t, ph, ts, 0, tid);
}

static void jname(jout *j, const char *key, const pprt__trace_str *s) {
  jprintf(j, ",\"%s\":", key);
  jstr(j, s->s, s->len);
}

/* Ends an event with its one string argument: ,"args":{"key":"..."}} */
static void jend_arg(jout *j, const char *key, const pprt__trace_str *s) {
  jprintf(j, ",\"args\":{\"%s\":", key);
  jstr(j, s->s, s->len);
  jputs(j, "}}");
}

static void jstack(jout *j, const pprt__trace *t, int64_t idx) {
  jputs(j, "\"stack\":[");
  if (idx >= 0 && (size_t)idx < t->nstacks) {
    const pprt__trace_stack *st = &t->stacks[idx];
    for (size_t f = 0; f < st->n; f++) {
      if (f)
        jput(j, ",", 1);
      if (st->nlines && st->nlines[f]) {
        /* "function file:line", inlined functions first and marked */
        for (size_t k = 0; k < st->nlines[f]; k++) {
          const pprt__trace_line *l = &st->lines[f][k];
          char buf[2 * PPRT__TRACE_MAX_STRING + 64];
          int len = snprintf(buf, sizeof buf, "%.*s", (int)l->function.len, l->function.s);
          if (l->file.s && len >= 0 && (size_t)len < sizeof buf)
            len += snprintf(buf + len, sizeof buf - (size_t)len, " %.*s:%" PRIu64, (int)l->file.len,
                            l->file.s, l->line);
          if (k + 1 < st->nlines[f] && len >= 0 && (size_t)len < sizeof buf)
            len += snprintf(buf + len, sizeof buf - (size_t)len, " (inline)");
          if (len < 0 || (size_t)len >= sizeof buf)
            len = (int)strlen(buf);
          if (k)
            jput(j, ",", 1);
          jstr(j, buf, (size_t)len);
        }
      } else if (st->names[f].s) {
        jstr(j, st->names[f].s, st->names[f].len);
      } else {
        jprintf(j, "\"0x%" PRIx64 "\"", st->pcs[f]);
      }
    }
  }
  jputs(j, "]");
}

static void region_b(jout *j, const pprt__trace *t, uint64_t ts, int64_t adj, uint64_t tid,
                     const pprt__trace_str *name, const char *ph) {
  jevent_at(j, t, ph, ts, adj, tid);
  jname(j, "name", name);
  jputs(j, ",\"cat\":\"region\"}");
}

static void instant(jout *j, const pprt__trace *t, const pprt__trace_event *e, const char *name,
                    const char *cat) {
  jevent(j, t, "i", e->ts, e->tid);
  jprintf(j, ",\"s\":\"t\",\"name\":\"%s\",\"cat\":\"%s\"", name, cat);
}

/* Tasks by id: their names, and whether the trace has their begin / end. */
typedef struct task {
  uint64_t id;
  pprt__trace_str name;
  int begun, ended;
} task;

typedef struct tasks {
  task *v;
  size_t n, cap;
  pprt__table index;
} tasks;

struct task_key {
  const tasks *ts;
  uint64_t id;
};

static int task_eq(const void *ctx, uint32_t idx) {
  const struct task_key *k = ctx;
  return k->ts->v[idx].id == k->id;
}

static task *task_get(tasks *ts, uint64_t id) {
  struct task_key k = {ts, id};
  uint64_t h = pprt__hash_finish(id);
  int64_t i = pprt__table_find(&ts->index, h, task_eq, &k);
  if (i >= 0)
    return &ts->v[i];
  if (PPRT__RESERVE(ts->v, ts->cap, ts->n + 1) != 0 ||
      pprt__table_intern(&ts->index, h, task_eq, &k, (uint32_t)ts->n) < 0)
    return NULL;
  task *tk = &ts->v[ts->n++];
  memset(tk, 0, sizeof *tk);
  tk->id = id;
  return tk;
}

static const pprt__trace *sort_trace;

/* Per thread, then by time, then in file order. */
static int event_order(const void *a, const void *b) {
  const pprt__trace_event *x = &sort_trace->events[*(const size_t *)a];
  const pprt__trace_event *y = &sort_trace->events[*(const size_t *)b];
  if (x->tid != y->tid)
    return x->tid < y->tid ? -1 : 1;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* Every event but regions (paired by the caller). */
static void export_event(jout *j, const pprt__trace *t, const pprt__trace_event *e, tasks *tk) {
  switch (e->type) {
  case PPRT__EV_THREAD_START:
    instant(j, t, e, "thread start", "thread");
    jputs(j, "}");
    break;
  case PPRT__EV_THREAD_END:
    instant(j, t, e, "thread end", "thread");
    jputs(j, "}");
    break;
  case PPRT__EV_THREAD_NAME:
    instant(j, t, e, "thread name", "thread");
    jend_arg(j, "name", &e->name);
    break;
  case PPRT__EV_LOG:
    jevent(j, t, "i", e->ts, e->tid);
    jputs(j, ",\"s\":\"t\"");
    jname(j, "name", &e->msg);
    jname(j, "cat", &e->name);
    jend_arg(j, "category", &e->name);
    break;
  case PPRT__EV_COUNTER:
    jevent(j, t, "C", e->ts, e->tid);
    jname(j, "name", &e->name);
    jprintf(j, ",\"args\":{\"value\":%" PRId64 "}}", e->value);
    break;
  case PPRT__EV_TASK_BEGIN:
  case PPRT__EV_TASK_END: {
    task *k = task_get(tk, e->id);
    pprt__trace_str begun = {BEGUN_BEFORE, sizeof BEGUN_BEFORE - 1};
    const pprt__trace_str *name = e->type == PPRT__EV_TASK_BEGIN ? &e->name
                                  : k && k->begun                ? &k->name
                                                                 : &begun;
    jevent(j, t, e->type == PPRT__EV_TASK_BEGIN ? "b" : "e", e->ts, e->emitter);
    jname(j, "name", name);
    jprintf(j, ",\"cat\":\"task\",\"id\":\"0x%" PRIx64 "\"}", e->id);
    break;
  }
  case PPRT__EV_CPU_SAMPLE:
    instant(j, t, e, "cpu sample", "cpu");
    jprintf(j, ",\"args\":{\"count\":%" PRId64 ",", e->value);
    jstack(j, t, e->stack);
    jputs(j, "}}");
    break;
  case PPRT__EV_ALLOC_SAMPLE:
    instant(j, t, e, "alloc sample", "heap");
    jprintf(j, ",\"args\":{\"address\":\"0x%" PRIx64 "\",\"size\":%" PRId64 ",", e->id, e->value);
    jstack(j, t, e->stack);
    jputs(j, "}}");
    break;
  case PPRT__EV_FREE_SAMPLE:
    instant(j, t, e, "free sample", "heap");
    jprintf(j, ",\"args\":{\"address\":\"0x%" PRIx64 "\"}}", e->id);
    break;
  }
}

/* One thread's events (ix[0..n), sorted by time), its regions paired: see
 * pprt__trace_export_json in read/trace_json.h for what happens to unpaired ones. */
static int export_thread(jout *j, const pprt__trace *t, const size_t *ix, size_t n, tasks *tk) {
  uint64_t tid = t->events[ix[0]].tid;
  size_t depth = 0, unmatched = 0, maxdepth = 0;
  for (size_t i = 0; i < n; i++) {
    uint8_t type = t->events[ix[i]].type;
    if (type == PPRT__EV_REGION_BEGIN) {
      if (++depth > maxdepth)
        maxdepth = depth;
    } else if (type == PPRT__EV_REGION_END) {
      if (depth > 0)
        depth--;
      else
        unmatched++;
    }
  }
  size_t cap = unmatched + maxdepth;
  const pprt__trace_str **stack = malloc((cap ? cap : 1) * sizeof *stack);
  if (stack == NULL)
    return -ENOMEM;
  static const pprt__trace_str begun = {BEGUN_BEFORE, sizeof BEGUN_BEFORE - 1};
  size_t sp = 0;
  /* Regions begun before the trace open just before the thread's first
   * event, 1 ns apart, outermost first; never below zero (they all have
   * the same name, so a tie there changes nothing). */
  uint64_t first = t->events[ix[0]].ts;
  for (; sp < unmatched; sp++) {
    stack[sp] = &begun;
    uint64_t back = unmatched - sp;
    if (back > first + EXPORT_SHIFT_NS)
      back = first + EXPORT_SHIFT_NS;
    region_b(j, t, first, -(int64_t)back, tid, &begun, "B");
  }
  for (size_t i = 0; i < n; i++) {
    const pprt__trace_event *e = &t->events[ix[i]];
    if (e->type == PPRT__EV_REGION_BEGIN) {
      stack[sp++] = &e->name;
      region_b(j, t, e->ts, 0, tid, &e->name, "B");
    } else if (e->type == PPRT__EV_REGION_END) {
      /* sp > 0: every end without a begin got one above. */
      region_b(j, t, e->ts, 0, tid, stack[--sp], "E");
    } else {
      export_event(j, t, e, tk);
    }
  }
  /* Regions still open close just after the thread's last event, innermost
   * first, one nanosecond apart so that no two ends tie. */
  uint64_t last = t->events[ix[n - 1]].ts;
  for (int64_t k = 1; sp > 0; k++) {
    sp--;
    region_b(j, t, last, k, tid, stack[sp], "E");
  }
  free(stack);
  return 0;
}

/* One trace's events into an export (of one or several). */
static int export_one(jout *jp, const pprt__trace *t) {
  size_t *ix = malloc((t->nevents ? t->nevents : 1) * sizeof *ix);
  tasks tk = {0};
  if (ix == NULL)
    return -ENOMEM;
  int rc = 0;
  jout j = *jp; /* written back at the end */
  /* The process's name: its main thread's (the preload library records the
   * main thread's start, under the name exec gave the program), else its
   * first named thread's. */
  const pprt__trace_str *pname = NULL;
  for (size_t i = 0; i < t->nthreads; i++)
    if (t->threads[i].name.s && (t->threads[i].tid == t->pid || pname == NULL))
      pname = &t->threads[i].name;
  jmeta(&j, t, "M", 0);
  if (pname) {
    jputs(&j, ",\"name\":\"process_name\",\"args\":{\"name\":");
    jstr(&j, pname->s, pname->len);
    jputs(&j, "}}");
  } else {
    jprintf(&j, ",\"name\":\"process_name\",\"args\":{\"name\":\"pid %" PRIu64 "\"}}", t->pid);
  }
  for (size_t i = 0; i < t->nthreads; i++) {
    if (t->threads[i].name.s == NULL)
      continue;
    jmeta(&j, t, "M", t->threads[i].tid);
    jputs(&j, ",\"name\":\"thread_name\",\"args\":{\"name\":");
    jstr(&j, t->threads[i].name.s, t->threads[i].name.len);
    jputs(&j, "}}");
  }

  /* Which tasks have a begin and an end in the trace. */
  uint64_t last_ts = 0;
  for (size_t i = 0; i < t->nevents; i++) {
    const pprt__trace_event *e = &t->events[i];
    if (e->ts > last_ts)
      last_ts = e->ts;
    if (e->type != PPRT__EV_TASK_BEGIN && e->type != PPRT__EV_TASK_END)
      continue;
    task *k = task_get(&tk, e->id);
    if (k == NULL) {
      rc = -ENOMEM;
      goto out;
    }
    if (e->type == PPRT__EV_TASK_BEGIN && !k->begun) {
      k->begun = 1;
      k->name = e->name;
    } else if (e->type == PPRT__EV_TASK_END) {
      k->ended = 1;
    }
  }
  /* Tasks that end in the trace but began before it begin at its start. */
  static const pprt__trace_str begun = {BEGUN_BEFORE, sizeof BEGUN_BEFORE - 1};
  for (size_t i = 0; i < tk.n; i++)
    if (!tk.v[i].begun) {
      jevent(&j, t, "b", 0, 0);
      jname(&j, "name", &begun);
      jprintf(&j, ",\"cat\":\"task\",\"id\":\"0x%" PRIx64 "\"}", tk.v[i].id);
    }

  for (size_t i = 0; i < t->nevents; i++)
    ix[i] = i;
  sort_trace = t;
  if (t->nevents > 1)
    qsort(ix, t->nevents, sizeof *ix, event_order);
  for (size_t i = 0; i < t->nevents && rc == 0;) {
    size_t k = i;
    while (k < t->nevents && t->events[ix[k]].tid == t->events[ix[i]].tid)
      k++;
    rc = export_thread(&j, t, ix + i, k - i, &tk);
    i = k;
  }

  /* Tasks still running end at the end of the trace. */
  for (size_t i = 0; i < tk.n && rc == 0; i++)
    if (!tk.v[i].ended) {
      jevent_at(&j, t, "e", last_ts, 1, 0);
      jname(&j, "name", &tk.v[i].name);
      jprintf(&j, ",\"cat\":\"task\",\"id\":\"0x%" PRIx64 "\"}", tk.v[i].id);
    }
  for (size_t i = 0; i < t->nlost && rc == 0; i++) {
    jevent(&j, t, "i", t->lost[i].ts, t->lost[i].tid);
    jprintf(&j,
            ",\"s\":\"t\",\"name\":\"pprt: %" PRIu64 " events lost\",\"cat\":\"pprt\","
            "\"args\":{\"lost\":%" PRIu64 ",\"generation\":%" PRIu64 "}}",
            t->lost[i].count, t->lost[i].count, t->lost[i].gen);
  }
out:
  *jp = j;
  free(ix);
  free(tk.v);
  pprt__table_free(&tk.index);
  return rc;
}

int pprt__trace_export_json_many(const pprt__trace *const *ts, size_t n, pprt_writer out) {
  if (n == 0)
    return -EINVAL;
  jout j = {out, malloc(65536), 0, 65536, 0, 1, 0};
  if (j.buf == NULL)
    return -ENOMEM;
  /* One time axis: CLOCK_MONOTONIC is the machine's, so the traces' origins
   * on it place them against each other. */
  uint64_t origin = ts[0]->origin_mono_ns, wall = ts[0]->origin_wall_ns;
  for (size_t i = 1; i < n; i++)
    if (ts[i]->origin_mono_ns < origin) {
      origin = ts[i]->origin_mono_ns;
      wall = ts[i]->origin_wall_ns;
    }
  jprintf(&j,
          "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"pprt\","
          "\"trace_format_version\":%u,\"generations\":%" PRIu64 ",\"origin_wall_ns\":%" PRIu64
          ",\"processes\":%zu},\n\"traceEvents\":[",
          ts[0]->version, ts[0]->ngens, wall, n);
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    j.shift = ts[i]->origin_mono_ns - origin;
    rc = export_one(&j, ts[i]);
  }
  jputs(&j, "\n]}\n");
  jflush(&j);
  if (rc == 0)
    rc = j.err;
  free(j.buf);
  return rc;
}

int pprt__trace_export_json(const pprt__trace *t, pprt_writer out) {
  return pprt__trace_export_json_many(&t, 1, out);
}
