/* Merging pprof profiles (tools/merge.h): inputs are folded into one growing
 * profile one at a time, so a merge of many processes holds the merge and a
 * single decoded input, never all of them.
 *
 * Divisions: growable vectors and the string table; id maps; the header
 * rules; copying one input; packing and writing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "tools/cli.h"
#include "tools/merge.h"

/* ---- vectors and strings ----------------------------------------------------------- */

/* Appends x to the pointer vector *v (n used, *cap allocated). */
static int push(void ***v, size_t *n, size_t *cap, void *x) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 64;
    void **nv = realloc(*v, nc * sizeof *nv);
    if (nv == NULL)
      return -1;
    *v = nv;
    *cap = nc;
  }
  (*v)[(*n)++] = x;
  return 0;
}
#define PUSH(vec, n, cap, x) push((void ***)&(vec), &(n), &(cap), (x))

typedef struct strtab {
  char **v;
  size_t n, cap;
  cli_slots slots;
} strtab;

static uint64_t hash_string(size_t i, const void *ctx) {
  const strtab *t = ctx;
  return cli_hash_bytes(t->v[i], strlen(t->v[i]), CLI_FNV_BASIS);
}

/* The index of s in the merged table, adding a copy; -1 on out of memory. */
static int64_t strtab_intern(strtab *t, const char *s) {
  if (cli_slots_reserve(&t->slots, t->n, 1024, 0, hash_string, t) != 0)
    return -1;
  size_t j = cli_slots_at(&t->slots, cli_hash_bytes(s, strlen(s), CLI_FNV_BASIS));
  for (; t->slots.v[j]; j = cli_slots_next(&t->slots, j))
    if (strcmp(t->v[t->slots.v[j] - 1], s) == 0)
      return (int64_t)t->slots.v[j] - 1;
  char *copy = strdup(s);
  if (copy == NULL || PUSH(t->v, t->n, t->cap, copy) != 0) {
    free(copy);
    return -1;
  }
  t->slots.v[j] = (uint32_t)t->n;
  return (int64_t)t->n - 1;
}

/* ---- the merge --------------------------------------------------------------------- */

struct cli_merge {
  strtab s;
  size_t nin;
  char *first_path;
  /* The first input's header, in merged string indices. */
  Pprt__ValueType **types, period_type;
  size_t ntypes;
  int64_t time_nanos, duration_nanos, period, default_type, drop_frames, keep_frames;
  int64_t *comments;
  size_t ncomments, comments_cap;
  uint8_t *comment_seen; /* by string index */
  size_t comment_seen_len;
  Pprt__Sample **samples;
  size_t nsamples, samples_cap;
  Pprt__Mapping **maps;
  size_t nmaps, maps_cap;
  Pprt__Location **locs;
  size_t nlocs, locs_cap;
  Pprt__Function **fns;
  size_t nfns, fns_cap;
  cli_slots fn_slots;   /* keyed by a function's four fields */
  int64_t group_key;    /* string index of the label key grouped by; 0 none */
  uint64_t *group_locs; /* by string index of "KEY VALUE": its location id */
  size_t group_len;
};

cli_merge *cli_merge_new(void) {
  cli_merge *m = calloc(1, sizeof *m);
  if (m == NULL)
    return NULL;
  pprt__value_type__init(&m->period_type);
  if (strtab_intern(&m->s, "") != 0) { /* index 0 is "" */
    free(m);
    return NULL;
  }
  return m;
}

void cli_merge_free(cli_merge *m) {
  if (m == NULL)
    return;
  for (size_t i = 0; i < m->s.n; i++)
    free(m->s.v[i]);
  free(m->s.v);
  free(m->s.slots.v);
  free(m->first_path);
  for (size_t i = 0; i < m->ntypes; i++)
    free(m->types[i]);
  free(m->types);
  free(m->comments);
  free(m->comment_seen);
  for (size_t i = 0; i < m->nsamples; i++) {
    Pprt__Sample *s = m->samples[i];
    for (size_t j = 0; j < s->n_label; j++)
      free(s->label[j]);
    free(s->label);
    free(s->location_id);
    free(s->value);
    free(s);
  }
  free(m->samples);
  for (size_t i = 0; i < m->nmaps; i++)
    free(m->maps[i]);
  free(m->maps);
  for (size_t i = 0; i < m->nlocs; i++) {
    for (size_t j = 0; j < m->locs[i]->n_line; j++)
      free(m->locs[i]->line[j]);
    free(m->locs[i]->line);
    free(m->locs[i]);
  }
  free(m->locs);
  for (size_t i = 0; i < m->nfns; i++)
    free(m->fns[i]);
  free(m->fns);
  free(m->fn_slots.v);
  free(m->group_locs);
  free(m);
}

size_t cli_merge_count(const cli_merge *m) {
  return m->nin;
}

/* ---- id maps ----------------------------------------------------------------------- */

typedef struct idpair {
  uint64_t from, to;
} idpair;

static int cmp_pair(const void *a, const void *b) {
  uint64_t x = ((const idpair *)a)->from, y = ((const idpair *)b)->from;
  return x < y ? -1 : x > y;
}

/* The merged id of an input's id; 0 when it has none (the check made sure
 * every reference resolves). */
static uint64_t map_id(const idpair *v, size_t n, uint64_t id) {
  size_t lo = cli_lower_bound(v, n, sizeof *v, id);
  return lo < n && v[lo].from == id ? v[lo].to : 0;
}

/* ---- functions, shared across inputs ----------------------------------------------- */

static uint64_t fn_hash(const Pprt__Function *f) {
  int64_t k[4] = {f->name, f->system_name, f->filename, f->start_line};
  return cli_hash_bytes(k, sizeof k, CLI_FNV_BASIS);
}

static int fn_same(const Pprt__Function *a, const Pprt__Function *b) {
  return a->name == b->name && a->system_name == b->system_name && a->filename == b->filename &&
         a->start_line == b->start_line;
}

static uint64_t fn_hash_at(size_t i, const void *ctx) {
  const cli_merge *m = ctx;
  return fn_hash(m->fns[i]);
}

/* The merged id of a function with f's fields (merged string indices),
 * added if new; 0 on out of memory. */
static uint64_t fn_intern(cli_merge *m, const Pprt__Function *f) {
  if (cli_slots_reserve(&m->fn_slots, m->nfns, 1024, 0, fn_hash_at, m) != 0)
    return 0;
  size_t j = cli_slots_at(&m->fn_slots, fn_hash(f));
  for (; m->fn_slots.v[j]; j = cli_slots_next(&m->fn_slots, j))
    if (fn_same(m->fns[m->fn_slots.v[j] - 1], f))
      return m->fns[m->fn_slots.v[j] - 1]->id;
  Pprt__Function *c = malloc(sizeof *c);
  if (c == NULL)
    return 0;
  *c = *f;
  c->id = m->nfns + 1;
  if (PUSH(m->fns, m->nfns, m->fns_cap, c) != 0) {
    free(c);
    return 0;
  }
  m->fn_slots.v[j] = (uint32_t)m->nfns;
  return c->id;
}

/* ---- the header -------------------------------------------------------------------- */

/* "samples/count, cpu/nanoseconds" */
static void describe_types(char *buf, size_t len, const Pprt__Profile *p) {
  buf[0] = '\0';
  for (size_t i = 0; i < p->n_sample_type; i++) {
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s%s/%s", i ? ", " : "", cli_str(p, p->sample_type[i]->type),
             cli_str(p, p->sample_type[i]->unit));
  }
  if (p->period_type) {
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, " (period %s/%s)", cli_str(p, p->period_type->type),
             cli_str(p, p->period_type->unit));
  }
}

static void describe_merged(char *buf, size_t len, const cli_merge *m) {
  buf[0] = '\0';
  for (size_t i = 0; i < m->ntypes; i++) {
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s%s/%s", i ? ", " : "", m->s.v[m->types[i]->type],
             m->s.v[m->types[i]->unit]);
  }
  if (m->period_type.type || m->period_type.unit) {
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, " (period %s/%s)", m->s.v[m->period_type.type],
             m->s.v[m->period_type.unit]);
  }
}

/* Whether p's sample and period types are the merge's (smap: p's string
 * indices in the merge). */
static int compatible(const cli_merge *m, const Pprt__Profile *p, const int64_t *smap) {
  if (p->n_sample_type != m->ntypes)
    return 0;
  for (size_t i = 0; i < m->ntypes; i++)
    if (smap[p->sample_type[i]->type] != m->types[i]->type ||
        smap[p->sample_type[i]->unit] != m->types[i]->unit)
      return 0;
  int64_t pt = p->period_type ? smap[p->period_type->type] : 0;
  int64_t pu = p->period_type ? smap[p->period_type->unit] : 0;
  return pt == m->period_type.type && pu == m->period_type.unit;
}

static int header(cli_merge *m, const char *cmd, const Pprt__Profile *p, const char *path,
                  const int64_t *smap) {
  if (m->nin == 0) {
    m->first_path = strdup(path);
    m->types = calloc(p->n_sample_type ? p->n_sample_type : 1, sizeof *m->types);
    if (m->first_path == NULL || m->types == NULL)
      return -ENOMEM;
    for (size_t i = 0; i < p->n_sample_type; i++) {
      if ((m->types[i] = malloc(sizeof *m->types[i])) == NULL)
        return -ENOMEM;
      m->ntypes = i + 1;
      pprt__value_type__init(m->types[i]);
      m->types[i]->type = smap[p->sample_type[i]->type];
      m->types[i]->unit = smap[p->sample_type[i]->unit];
    }
    if (p->period_type) {
      m->period_type.type = smap[p->period_type->type];
      m->period_type.unit = smap[p->period_type->unit];
    }
    m->drop_frames = smap[p->drop_frames];
    m->keep_frames = smap[p->keep_frames];
  } else if (!compatible(m, p, smap)) {
    char a[512], b[512];
    describe_merged(a, sizeof a, m);
    describe_types(b, sizeof b, p);
    cli_error(CLI_EINPUT, cmd,
              "cannot merge %s and %s: different sample types (%s has %s; %s has %s)",
              m->first_path, path, m->first_path, a, path, b);
    return -EINVAL;
  }
  if (p->time_nanos && (m->time_nanos == 0 || p->time_nanos < m->time_nanos))
    m->time_nanos = p->time_nanos;
  m->duration_nanos += p->duration_nanos;
  if (p->period > m->period)
    m->period = p->period;
  if (m->default_type == 0)
    m->default_type = smap[p->default_sample_type];
  for (size_t i = 0; i < p->n_comment; i++) {
    int64_t c = smap[p->comment[i]];
    if ((size_t)c >= m->comment_seen_len) {
      size_t nl = ((size_t)c + 1) * 2;
      uint8_t *ns = realloc(m->comment_seen, nl);
      if (ns == NULL)
        return -ENOMEM;
      memset(ns + m->comment_seen_len, 0, nl - m->comment_seen_len);
      m->comment_seen = ns;
      m->comment_seen_len = nl;
    }
    if (m->comment_seen[c])
      continue;
    m->comment_seen[c] = 1;
    if (m->ncomments == m->comments_cap) {
      size_t nc = m->comments_cap ? m->comments_cap * 2 : 16;
      int64_t *nv = realloc(m->comments, nc * sizeof *nv);
      if (nv == NULL)
        return -ENOMEM;
      m->comments = nv;
      m->comments_cap = nc;
    }
    m->comments[m->ncomments++] = c;
  }
  return 0;
}

/* ---- grouping ---------------------------------------------------------------------- */

int cli_merge_group_by(cli_merge *m, const char *key) {
  int64_t k = strtab_intern(&m->s, key);
  if (k < 0)
    return CLI_EFAIL;
  m->group_key = k;
  return CLI_OK;
}

/* The root location for sample s (merged string indices in its labels):
 * one per "KEY VALUE", a function of that name with no mapping. 0 on out
 * of memory. */
static uint64_t group_location(cli_merge *m, const Pprt__Sample *s) {
  char name[512];
  const char *key = m->s.v[m->group_key];
  snprintf(name, sizeof name, "%s ?", key);
  for (size_t i = 0; i < s->n_label; i++)
    if (s->label[i]->key == m->group_key) {
      if (s->label[i]->str)
        snprintf(name, sizeof name, "%s %s", key, m->s.v[s->label[i]->str]);
      else
        snprintf(name, sizeof name, "%s %lld", key, (long long)s->label[i]->num);
      break;
    }
  int64_t n = strtab_intern(&m->s, name);
  if (n < 0)
    return 0;
  if ((size_t)n >= m->group_len) {
    size_t nl = ((size_t)n + 1) * 2;
    uint64_t *nv = realloc(m->group_locs, nl * sizeof *nv);
    if (nv == NULL)
      return 0;
    memset(nv + m->group_len, 0, (nl - m->group_len) * sizeof *nv);
    m->group_locs = nv;
    m->group_len = nl;
  }
  if (m->group_locs[n])
    return m->group_locs[n];
  Pprt__Function f;
  pprt__function__init(&f);
  f.name = n;
  uint64_t fid = fn_intern(m, &f);
  Pprt__Location *l = malloc(sizeof *l);
  Pprt__Line *ln = malloc(sizeof *ln);
  Pprt__Line **lines = malloc(sizeof *lines);
  if (fid == 0 || !l || !ln || !lines || PUSH(m->locs, m->nlocs, m->locs_cap, l) != 0) {
    free(l);
    free(ln);
    free(lines);
    return 0;
  }
  pprt__location__init(l);
  pprt__line__init(ln);
  ln->function_id = fid;
  lines[0] = ln;
  l->id = m->nlocs;
  l->n_line = 1;
  l->line = lines;
  m->group_locs[n] = l->id;
  return l->id;
}

/* ---- one input --------------------------------------------------------------------- */

static idpair *pairs_new(size_t n) {
  return malloc((n ? n : 1) * sizeof(idpair));
}

static int copy_body(cli_merge *m, const Pprt__Profile *p, const int64_t *smap, idpair *fmap,
                     idpair *mmap, idpair *lmap) {
  for (size_t i = 0; i < p->n_function; i++) {
    Pprt__Function f = *p->function[i];
    f.name = smap[f.name];
    f.system_name = smap[f.system_name];
    f.filename = smap[f.filename];
    fmap[i] = (idpair){p->function[i]->id, fn_intern(m, &f)};
    if (fmap[i].to == 0)
      return -ENOMEM;
  }
  qsort(fmap, p->n_function, sizeof *fmap, cmp_pair);
  for (size_t i = 0; i < p->n_mapping; i++) {
    Pprt__Mapping *c = malloc(sizeof *c);
    if (c == NULL)
      return -ENOMEM;
    *c = *p->mapping[i];
    c->id = m->nmaps + 1;
    c->filename = smap[c->filename];
    c->build_id = smap[c->build_id];
    if (PUSH(m->maps, m->nmaps, m->maps_cap, c) != 0) {
      free(c);
      return -ENOMEM;
    }
    mmap[i] = (idpair){p->mapping[i]->id, c->id};
  }
  qsort(mmap, p->n_mapping, sizeof *mmap, cmp_pair);
  for (size_t i = 0; i < p->n_location; i++) {
    const Pprt__Location *l = p->location[i];
    Pprt__Location *c = malloc(sizeof *c);
    if (c == NULL)
      return -ENOMEM;
    *c = *l;
    c->id = m->nlocs + 1;
    c->mapping_id = l->mapping_id ? map_id(mmap, p->n_mapping, l->mapping_id) : 0;
    c->n_line = 0;
    c->line = l->n_line ? calloc(l->n_line, sizeof *c->line) : NULL;
    if ((l->n_line && c->line == NULL) || PUSH(m->locs, m->nlocs, m->locs_cap, c) != 0) {
      free(c->line);
      free(c);
      return -ENOMEM;
    }
    for (size_t j = 0; j < l->n_line; j++) {
      Pprt__Line *ln = malloc(sizeof *ln);
      if (ln == NULL)
        return -ENOMEM;
      *ln = *l->line[j];
      ln->function_id = map_id(fmap, p->n_function, ln->function_id);
      c->line[c->n_line++] = ln;
    }
    lmap[i] = (idpair){l->id, c->id};
  }
  qsort(lmap, p->n_location, sizeof *lmap, cmp_pair);
  for (size_t i = 0; i < p->n_sample; i++) {
    const Pprt__Sample *s = p->sample[i];
    Pprt__Sample *c = calloc(1, sizeof *c);
    if (c == NULL)
      return -ENOMEM;
    pprt__sample__init(c);
    c->location_id = malloc((s->n_location_id + 2) * sizeof *c->location_id);
    c->value = malloc((s->n_value + 1) * sizeof *c->value);
    c->label = calloc(s->n_label + 1, sizeof *c->label);
    if (!c->location_id || !c->value || !c->label ||
        PUSH(m->samples, m->nsamples, m->samples_cap, c)) {
      free(c->location_id);
      free(c->value);
      free(c->label);
      free(c);
      return -ENOMEM;
    }
    for (size_t j = 0; j < s->n_location_id; j++)
      c->location_id[j] = map_id(lmap, p->n_location, s->location_id[j]);
    c->n_location_id = s->n_location_id;
    memcpy(c->value, s->value, s->n_value * sizeof *c->value);
    c->n_value = s->n_value;
    for (size_t j = 0; j < s->n_label; j++) {
      Pprt__Label *lb = malloc(sizeof *lb);
      if (lb == NULL)
        return -ENOMEM;
      *lb = *s->label[j];
      lb->key = smap[lb->key];
      lb->str = smap[lb->str];
      lb->num_unit = smap[lb->num_unit];
      c->label[c->n_label++] = lb;
    }
    if (m->group_key) {
      uint64_t root = group_location(m, c);
      if (root == 0)
        return -ENOMEM;
      c->location_id[c->n_location_id++] = root;
    }
  }
  return 0;
}

int cli_merge_add(cli_merge *m, const char *cmd, const Pprt__Profile *p, const char *path) {
  int64_t *smap = malloc((p->n_string_table + 1) * sizeof *smap);
  idpair *fmap = pairs_new(p->n_function), *mmap = pairs_new(p->n_mapping),
         *lmap = pairs_new(p->n_location);
  int rc = smap && fmap && mmap && lmap ? 0 : -ENOMEM;
  for (size_t i = 0; i < p->n_string_table && rc == 0; i++)
    if ((smap[i] = strtab_intern(&m->s, p->string_table[i])) < 0)
      rc = -ENOMEM;
  if (rc == 0)
    rc = header(m, cmd, p, path, smap);
  if (rc == 0)
    rc = copy_body(m, p, smap, fmap, mmap, lmap);
  free(smap);
  free(fmap);
  free(mmap);
  free(lmap);
  if (rc == -EINVAL)
    return CLI_EINPUT;
  if (rc != 0)
    return cli_error(CLI_EFAIL, cmd, "%s: out of memory merging it", path);
  m->nin++;
  return CLI_OK;
}

/* ---- packing and writing ----------------------------------------------------------- */

int cli_merge_pack(cli_merge *m, uint8_t **data, size_t *len) {
  Pprt__Profile p;
  pprt__profile__init(&p);
  p.n_sample_type = m->ntypes;
  p.sample_type = m->types;
  p.n_sample = m->nsamples;
  p.sample = m->samples;
  p.n_mapping = m->nmaps;
  p.mapping = m->maps;
  p.n_location = m->nlocs;
  p.location = m->locs;
  p.n_function = m->nfns;
  p.function = m->fns;
  p.n_string_table = m->s.n;
  p.string_table = m->s.v;
  p.drop_frames = m->drop_frames;
  p.keep_frames = m->keep_frames;
  p.time_nanos = m->time_nanos;
  p.duration_nanos = m->duration_nanos;
  p.period_type = &m->period_type;
  p.period = m->period;
  p.n_comment = m->ncomments;
  p.comment = m->comments;
  p.default_sample_type = m->default_type;
  size_t n = pprt__profile__get_packed_size(&p);
  *data = malloc(n ? n : 1);
  if (*data == NULL)
    return CLI_EFAIL;
  *len = pprt__profile__pack(&p, *data);
  return CLI_OK;
}

int cli_write_gzip(const char *path, const uint8_t *data, size_t len) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
    errno = ENAMETOOLONG;
    return -1;
  }
  gzFile f = gzopen(tmp, "wb");
  if (f == NULL) {
    if (errno == 0)
      errno = ENOMEM;
    return -1;
  }
  int ok = 1;
  for (size_t off = 0; off < len && ok;) {
    unsigned chunk = len - off > (1u << 30) ? 1u << 30 : (unsigned)(len - off);
    int w = gzwrite(f, data + off, chunk);
    ok = w > 0;
    off += (size_t)(w > 0 ? w : 0);
  }
  int e = errno;
  if (gzclose(f) != Z_OK)
    ok = 0;
  if (!ok || rename(tmp, path) != 0) {
    e = errno ? errno : e ? e : EIO;
    unlink(tmp);
    errno = e;
    return -1;
  }
  return 0;
}
