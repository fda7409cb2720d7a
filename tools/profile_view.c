/* Profiles as the pprt command shows them: a decoded pprof profile (pprt's
 * or any other writer's, Go's runtime/pprof included) turned into stacks of
 * display names and one chosen value per sample, and the top table.
 *
 * Names: a location's Line entries give its frames, innermost (inlined)
 * first; a location without them (an address nobody symbolized) becomes
 * one frame "<mapping basename>+0x<file offset>", which stays the same
 * from run to run of the same binary, unlike the address. With
 * CLI_VIEW_LINES a frame's name carries its line ("name file.c:42", the
 * file's base name), as go tool pprof -lines shows it; with CLI_VIEW_INLINE
 * an inlined frame is marked ("name (inline)"). Each name also keeps where
 * it is (its file:line, or the function's file and first line) for the
 * flame graph's tooltips. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/profile.h"
#include "read/profile_decode.h"
#include "tools/cli.h"

const char *cli_str(const Pprt__Profile *p, int64_t i) {
  if (i < 0 || (size_t)i >= p->n_string_table)
    return "";
  return p->string_table[i];
}

/* ---- interned names ---------------------------------------------------------------- */

typedef struct names {
  char **v;
  char **where; /* per name: "file:line", or NULL */
  size_t n, cap;
  cli_slots slots;
} names;

static uint64_t hash_str(const char *s) {
  return cli_hash_bytes(s, strlen(s), CLI_FNV_BASIS);
}

static uint64_t hash_name(size_t i, const void *ctx) {
  const names *t = ctx;
  return hash_str(t->v[i]);
}

/* Returns the index of s, adding a copy; -1 on out of memory. */
static long names_intern(names *t, const char *s) {
  if (cli_slots_reserve(&t->slots, t->n, 1024, 0, hash_name, t) != 0)
    return -1;
  size_t j = cli_slots_at(&t->slots, hash_str(s));
  while (t->slots.v[j]) {
    if (strcmp(t->v[t->slots.v[j] - 1], s) == 0)
      return (long)t->slots.v[j] - 1;
    j = cli_slots_next(&t->slots, j);
  }
  if (t->n == t->cap) {
    size_t nc = t->cap ? t->cap * 2 : 256;
    char **nv = realloc(t->v, nc * sizeof *nv);
    if (nv == NULL)
      return -1;
    t->v = nv;
    char **nw = realloc(t->where, nc * sizeof *nw);
    if (nw == NULL)
      return -1;
    t->where = nw;
    t->cap = nc;
  }
  t->where[t->n] = NULL;
  char *copy = strdup(s);
  if (copy == NULL)
    return -1;
  /* Folded stacks separate frames with ';' and lines with '\n'. */
  for (char *c = copy; *c; c++)
    if (*c == ';' || *c == '\n' || *c == '\r')
      *c = ':';
  t->v[t->n] = copy;
  t->slots.v[j] = (uint32_t)t->n + 1;
  return (long)t->n++;
}

/* ---- id lookups -------------------------------------------------------------------- */

typedef struct id_index {
  uint64_t id;
  uint32_t index;
} id_index;

static int cmp_id(const void *a, const void *b) {
  uint64_t x = ((const id_index *)a)->id, y = ((const id_index *)b)->id;
  return x < y ? -1 : x > y;
}

static id_index *index_ids(size_t n, uint64_t (*id_of)(const Pprt__Profile *, size_t),
                           const Pprt__Profile *p) {
  id_index *v = malloc((n + 1) * sizeof *v);
  if (v == NULL)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    v[i].id = id_of(p, i);
    v[i].index = (uint32_t)i;
  }
  qsort(v, n, sizeof *v, cmp_id);
  return v;
}

static long find_id(const id_index *v, size_t n, uint64_t id) {
  size_t lo = cli_lower_bound(v, n, sizeof *v, id);
  return lo < n && v[lo].id == id ? (long)v[lo].index : -1;
}

static uint64_t loc_id(const Pprt__Profile *p, size_t i) {
  return p->location[i]->id;
}
static uint64_t fn_id(const Pprt__Profile *p, size_t i) {
  return p->function[i]->id;
}
static uint64_t map_id(const Pprt__Profile *p, size_t i) {
  return p->mapping[i]->id;
}

long cli_profile_location(const cli_profile *cp, uint64_t id) {
  return find_id(cp->loc_ids, cp->p->n_location, id);
}

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* The display name of an address that has no function. */
static void address_name(char *buf, size_t len, const Pprt__Profile *p, const Pprt__Location *l,
                         const id_index *maps) {
  long m = l->mapping_id ? find_id(maps, p->n_mapping, l->mapping_id) : -1;
  if (m >= 0) {
    const Pprt__Mapping *mp = p->mapping[m];
    const char *file = base_name(cli_str(p, mp->filename));
    if (*file && l->address >= mp->memory_start) {
      snprintf(buf, len, "%s+0x%llx", file,
               (unsigned long long)(l->address - mp->memory_start + mp->file_offset));
      return;
    }
  }
  snprintf(buf, len, "0x%llx", (unsigned long long)l->address);
}

/* Interns the display name of one frame: name (a function's, or an
 * address's), decorated as flags ask with where it is (file, line) and
 * whether it was inlined; its where is kept for the flame graph. -1 on out
 * of memory. */
static long frame_name(names *nm, const char *name, const char *file, int64_t line, int inl,
                       unsigned flags) {
  char shown[1024], where[320] = "";
  if (*file)
    snprintf(where, sizeof where, line > 0 ? "%s:%lld" : "%s", file, (long long)line);
  int with_line = (flags & CLI_VIEW_LINES) && *where;
  if (with_line || inl) {
    snprintf(shown, sizeof shown, "%.640s%s%s%s", name, with_line ? " " : "",
             with_line ? where : "", inl ? " (inline)" : "");
    name = shown;
  }
  long id = names_intern(nm, name);
  if (id >= 0 && *where && nm->where[id] == NULL && (nm->where[id] = strdup(where)) == NULL)
    return -1;
  return id;
}

/* The name a function (or a location's address) was last given at a line,
 * so that a location with millions of lines of one function, which a small
 * file can describe, makes its name once and not once per line. */
typedef struct name_memo {
  long id; /* -1: none yet */
  long fn; /* the function (for an address's name) */
  int64_t line;
} name_memo;

int cli_profile_decode_file(const char *cmd, const char *path, Pprt__Profile **out) {
  *out = NULL;
  uint8_t *data;
  size_t len;
  char err[256];
  int rc = cli_read_file(path, PPRT__PROFILE_MAX_BYTES, &data, &len, err, sizeof err);
  if (rc != CLI_OK)
    return cli_error(rc, cmd, "%s: %s", path, err);
  rc = cli_profile_decode_mem(cmd, path, data, len, out);
  free(data);
  return rc;
}

int cli_profile_decode_mem(const char *cmd, const char *path, const uint8_t *data, size_t len,
                           Pprt__Profile **out) {
  *out = NULL;
  char err[256];
  int drc = pprt__profile_decode(data, len, out, err, sizeof err);
  if (drc == -ENOMEM)
    return cli_error(CLI_EFAIL, cmd, "%s: out of memory decoding it", path);
  if (drc != 0)
    return cli_error(CLI_EINPUT, cmd, "%s: %s", path, err);
  if ((*out)->n_sample_type == 0) {
    pprt__profile_decoded_free(*out);
    *out = NULL;
    return cli_error(CLI_EINPUT, cmd, "%s: the profile has no sample types", path);
  }
  return CLI_OK;
}

static int load_decoded(cli_profile *cp, const char *cmd, const char *path, const char *type,
                        unsigned flags);

int cli_profile_load(cli_profile *cp, const char *cmd, const char *path, const char *type,
                     unsigned flags) {
  memset(cp, 0, sizeof *cp);
  int rc = cli_profile_decode_file(cmd, path, &cp->p);
  return rc != CLI_OK ? rc : load_decoded(cp, cmd, path, type, flags);
}

int cli_profile_load_mem(cli_profile *cp, const char *cmd, const char *path, const uint8_t *data,
                         size_t len, const char *type, unsigned flags) {
  memset(cp, 0, sizeof *cp);
  int rc = cli_profile_decode_mem(cmd, path, data, len, &cp->p);
  return rc != CLI_OK ? rc : load_decoded(cp, cmd, path, type, flags);
}

/* Names the frames of the profile decoded into cp->p and selects the
 * value to show. */
static int load_decoded(cli_profile *cp, const char *cmd, const char *path, const char *type,
                        unsigned flags) {
  cp->path = path;
  cp->max_frames = CLI_VIEW_MAX_FRAMES;
  const Pprt__Profile *p = cp->p;

  id_index *fns = index_ids(p->n_function, fn_id, p);
  id_index *maps = index_ids(p->n_mapping, map_id, p);
  id_index *locs = index_ids(p->n_location, loc_id, p);
  cp->loc_ids = locs;
  names nm;
  memset(&nm, 0, sizeof nm);
  size_t nframes = 0;
  for (size_t i = 0; i < p->n_location; i++)
    nframes += p->location[i]->n_line ? p->location[i]->n_line : 1;
  cp->loc_first = malloc((p->n_location + 1) * sizeof *cp->loc_first);
  cp->loc_count = malloc((p->n_location + 1) * sizeof *cp->loc_count);
  cp->frames = malloc((nframes + 1) * sizeof *cp->frames);
  name_memo *fn_memo = NULL;
  int oom = 1; /* until the loop below is done */
  if (!fns || !maps || !locs || !cp->loc_first || !cp->loc_count || !cp->frames)
    goto out;
  /* Two per function: as an outer frame and as an inlined one. */
  fn_memo = malloc((2 * p->n_function + 1) * sizeof *fn_memo);
  if (fn_memo == NULL)
    goto out;
  for (size_t i = 0; i < 2 * p->n_function; i++)
    fn_memo[i] = (name_memo){-1, 0, 0};
  size_t k = 0;
  for (size_t i = 0; i < p->n_location; i++) {
    const Pprt__Location *l = p->location[i];
    cp->loc_first[i] = (uint32_t)k;
    /* A location without lines has one frame: its address (j == 0, no
     * function). */
    name_memo addr_memo[2] = {{-1, 0, 0}, {-1, 0, 0}};
    for (size_t j = 0; j < l->n_line || (j == 0 && l->n_line == 0); j++) {
      long f = j < l->n_line ? find_id(fns, p->n_function, l->line[j]->function_id) : -1;
      const char *name = "", *file = "";
      int64_t line = 0;
      if (f >= 0) {
        const Pprt__Function *fn = p->function[f];
        name = cli_str(p, fn->name);
        if (!*name)
          name = cli_str(p, fn->system_name);
        file = base_name(cli_str(p, fn->filename));
        line = l->line[j]->line;
        if (!(flags & CLI_VIEW_LINES) || line == 0)
          line = fn->start_line;
      }
      int inl = (flags & CLI_VIEW_INLINE) && j + 1 < l->n_line;
      /* A function without a name is shown by its address, per location. */
      name_memo *m = *name ? &fn_memo[2 * f + inl] : &addr_memo[inl];
      if (m->id < 0 || m->fn != f || m->line != line) {
        char buf[320];
        if (!*name) {
          address_name(buf, sizeof buf, p, l, maps);
          name = buf;
        }
        *m = (name_memo){frame_name(&nm, name, file, line, inl, flags), f, line};
        if (m->id < 0)
          goto out;
      }
      cp->frames[k++] = (uint32_t)m->id;
    }
    cp->loc_count[i] = (uint32_t)(k - cp->loc_first[i]);
  }
  oom = 0;
out:
  free(fn_memo);
  free(fns);
  free(maps);
  free(nm.slots.v);
  cp->names = nm.v;
  cp->where = nm.where;
  cp->nnames = nm.n;
  if (oom)
    return cli_error(CLI_EFAIL, cmd, "%s: out of memory", path);
  /* The bounds are checked on the type asked for only: another may have
   * nonzero values on stacks this one leaves out. */
  return cli_profile_select(cp, cmd, type);
}

/* The views' bounds (cli.h), checked before anything is expanded: this
 * pass costs one step per location reference, which the file paid for in
 * bytes, while expanding costs one per frame, which it did not. */
static int check_bounds(const cli_profile *cp, const char *cmd) {
  const Pprt__Profile *p = cp->p;
  uint64_t total = 0;
  for (size_t i = 0; i < p->n_sample; i++) {
    const Pprt__Sample *s = p->sample[i];
    if (s->value[cp->sample_index] == 0)
      continue;
    uint64_t depth = 0;
    for (size_t j = 0; j < s->n_location_id && depth <= CLI_VIEW_MAX_DEPTH; j++) {
      long l = cli_profile_location(cp, s->location_id[j]);
      if (l >= 0)
        depth += cp->loc_count[l];
    }
    if (depth > CLI_VIEW_MAX_DEPTH)
      return cli_error(CLI_EINPUT, cmd,
                       "%s: sample %zu's stack is more than %d frames deep (inlined frames "
                       "included), deeper than pprt's views show",
                       cp->path, i, CLI_VIEW_MAX_DEPTH);
    total += depth;
    if (total > cp->max_frames)
      return cli_error(CLI_EINPUT, cmd,
                       "%s: the samples' stacks add up to more than %llu frames (inlined "
                       "frames included), more than pprt's views expand",
                       cp->path, (unsigned long long)cp->max_frames);
  }
  return CLI_OK;
}

int cli_profile_select(cli_profile *cp, const char *cmd, const char *name) {
  const Pprt__Profile *p = cp->p;
  long idx = -1;
  if (name == NULL) {
    const char *def = cli_str(p, p->default_sample_type);
    for (size_t i = 0; *def && i < p->n_sample_type; i++)
      if (strcmp(cli_str(p, p->sample_type[i]->type), def) == 0)
        idx = (long)i;
    if (idx < 0)
      idx = (long)p->n_sample_type - 1;
  } else {
    long long n;
    for (size_t i = 0; i < p->n_sample_type; i++)
      if (strcmp(cli_str(p, p->sample_type[i]->type), name) == 0)
        idx = (long)i;
    if (idx < 0 && cli_parse_long(name, 0, (long long)p->n_sample_type - 1, &n) == 0)
      idx = (long)n;
    if (idx < 0) {
      char have[256] = "";
      for (size_t i = 0; i < p->n_sample_type; i++) {
        size_t used = strlen(have);
        snprintf(have + used, sizeof have - used, "%s%s", i ? ", " : "",
                 cli_str(p, p->sample_type[i]->type));
      }
      return cli_error(CLI_EUSAGE, cmd, "%s: no sample type '%s' (the profile has: %s)", cp->path,
                       name, have);
    }
  }
  cp->sample_index = (int)idx;
  cp->type = cli_str(p, p->sample_type[idx]->type);
  cp->unit = cli_str(p, p->sample_type[idx]->unit);
  return check_bounds(cp, cmd);
}

void cli_profile_free(cli_profile *cp) {
  for (size_t i = 0; i < cp->nnames; i++) {
    free(cp->names[i]);
    free(cp->where[i]);
  }
  free(cp->names);
  free(cp->where);
  free(cp->loc_first);
  free(cp->loc_count);
  free(cp->frames);
  free(cp->loc_ids);
  pprt__profile_decoded_free(cp->p);
  memset(cp, 0, sizeof *cp);
}

int cli_profile_stacks(const cli_profile *cp, cli_stack_fn fn, void *ctx) {
  const Pprt__Profile *p = cp->p;
  uint32_t *stack = malloc(CLI_VIEW_MAX_DEPTH * sizeof *stack);
  if (stack == NULL)
    return -ENOMEM;
  int rc = 0;
  for (size_t i = 0; i < p->n_sample && rc == 0; i++) {
    const Pprt__Sample *s = p->sample[i];
    int64_t v = s->value[cp->sample_index];
    if (v == 0)
      continue;
    size_t n = 0;
    for (size_t j = s->n_location_id; j-- > 0;) {
      long l = cli_profile_location(cp, s->location_id[j]);
      if (l < 0)
        continue; /* pprt__profile_check made sure this cannot happen */
      uint32_t first = cp->loc_first[l], count = cp->loc_count[l];
      if (count > CLI_VIEW_MAX_DEPTH - n) { /* check_bounds made sure it cannot */
        rc = -E2BIG;
        break;
      }
      /* Outermost (the caller the others were inlined into) first. */
      for (uint32_t f = count; f-- > 0;)
        stack[n++] = cp->frames[first + f];
    }
    if (rc == 0)
      rc = fn(ctx, stack, n, v);
  }
  free(stack);
  return rc;
}

int64_t cli_profile_total(const cli_profile *cp) {
  int64_t t = 0;
  for (size_t i = 0; i < cp->p->n_sample; i++)
    t = cli_add(t, cp->p->sample[i]->value[cp->sample_index]);
  return t;
}

/* ---- the top table ------------------------------------------------------------------ */

typedef struct top_acc {
  int64_t *flat, *cum;
  uint64_t *seen; /* the sample number that last added to cum */
  uint64_t sample;
} top_acc;

static int top_add(void *ctx, const uint32_t *st, size_t n, int64_t v) {
  top_acc *a = ctx;
  a->sample++;
  if (n == 0)
    return 0;
  a->flat[st[n - 1]] = cli_add(a->flat[st[n - 1]], v);
  for (size_t i = 0; i < n; i++)
    if (a->seen[st[i]] != a->sample) { /* recursion counts once */
      a->seen[st[i]] = a->sample;
      a->cum[st[i]] = cli_add(a->cum[st[i]], v);
    }
  return 0;
}

typedef struct top_row {
  uint32_t name;
  int64_t flat, cum;
} top_row;

static const cli_profile *g_sort_cp;
static int g_sort_cum;

static int cmp_row(const void *x, const void *y) {
  const top_row *a = x, *b = y;
  int64_t ka = g_sort_cum ? a->cum : a->flat, kb = g_sort_cum ? b->cum : b->flat;
  if (ka != kb)
    return ka > kb ? -1 : 1;
  /* Ties: by cum, callers (less flat) first, as they sit above their
   * callees; by flat, the larger cum first. */
  if (g_sort_cum && a->flat != b->flat)
    return a->flat < b->flat ? -1 : 1;
  if (!g_sort_cum && a->cum != b->cum)
    return a->cum > b->cum ? -1 : 1;
  return strcmp(g_sort_cp->names[a->name], g_sort_cp->names[b->name]);
}

static double pct(int64_t v, int64_t total) {
  return total ? 100.0 * (double)v / (double)total : 0.0;
}

int cli_print_top(FILE *out, const cli_profile *cp, size_t n, int by_cum, int header) {
  const Pprt__Profile *p = cp->p;
  top_acc a;
  memset(&a, 0, sizeof a);
  size_t nn = cp->nnames ? cp->nnames : 1;
  a.flat = calloc(nn, sizeof *a.flat);
  a.cum = calloc(nn, sizeof *a.cum);
  a.seen = calloc(nn, sizeof *a.seen);
  top_row *rows = calloc(nn, sizeof *rows);
  int rc = CLI_OK;
  if (!a.flat || !a.cum || !a.seen || !rows || cli_profile_stacks(cp, top_add, &a) != 0) {
    rc = CLI_EFAIL;
    goto out;
  }
  size_t nrows = 0;
  for (size_t i = 0; i < cp->nnames; i++)
    if (a.flat[i] != 0 || a.cum[i] != 0)
      rows[nrows++] = (top_row){(uint32_t)i, a.flat[i], a.cum[i]};
  g_sort_cp = cp;
  g_sort_cum = by_cum;
  qsort(rows, nrows, sizeof *rows, cmp_row);
  int64_t total = cli_profile_total(cp);
  size_t shown = n == 0 || n > nrows ? nrows : n;
  char t[64], d[64];
  if (header) {
    const char *file = p->n_mapping ? cli_str(p, p->mapping[0]->filename) : "";
    if (*file)
      fprintf(out, "File: %s\n", base_name(file));
    fprintf(out, "Type: %s (%s)\n", cp->type, cp->unit);
    if (p->time_nanos) {
      time_t secs = (time_t)(p->time_nanos / 1000000000);
      struct tm tm;
      char when[64];
      strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&secs, &tm));
      fprintf(out, "Time: %s\n", when);
    }
    cli_format_value(t, sizeof t, total, cp->unit);
    if (p->duration_nanos) {
      cli_format_value(d, sizeof d, p->duration_nanos, "nanoseconds");
      if (strcmp(cp->unit, "nanoseconds") == 0)
        fprintf(out, "Duration: %s, Total samples = %s (%.2f%%)\n", d, t,
                pct(total, p->duration_nanos));
      else
        fprintf(out, "Duration: %s, Total %s = %s\n", d, cp->type, t);
    } else {
      fprintf(out, "Total %s = %s\n", cp->type, t);
    }
    int64_t sum = 0;
    for (size_t i = 0; i < shown; i++)
      sum = cli_add(sum, rows[i].flat);
    cli_format_value(d, sizeof d, sum, cp->unit);
    fprintf(out, "Showing %zu of %zu functions, accounting for %s (%.2f%%) of %s total\n", shown,
            nrows, d, pct(sum, total), t);
  }
  fprintf(out, "%10s %7s %7s %10s %7s  %s\n", "flat", "flat%", "sum%", "cum", "cum%", "name");
  int64_t running = 0;
  for (size_t i = 0; i < shown; i++) {
    running = cli_add(running, rows[i].flat);
    cli_format_value(t, sizeof t, rows[i].flat, cp->unit);
    cli_format_value(d, sizeof d, rows[i].cum, cp->unit);
    fprintf(out, "%10s %6.2f%% %6.2f%% %10s %6.2f%%  %s\n", t, pct(rows[i].flat, total),
            pct(running, total), d, pct(rows[i].cum, total), cp->names[rows[i].name]);
  }
out:
  free(a.flat);
  free(a.cum);
  free(a.seen);
  free(rows);
  return rc;
}
