/* The profile builder: samples in, gzip'd pprof out (see profile.h).
 *
 * Divisions: growable arrays and the string table; locations (one per
 * distinct adjusted pc, plus the synthetic frames); samples, deduplicated by
 * (stack, labels) through a hash index over their keys; mappings; and the
 * write path, which resolves mappings and names, fills the protobuf-c
 * structs (pointing into the builder's arrays instead of copying), packs and
 * gzips. The decoder, a reader, is read/profile_decode.c.
 */
#include "core/profile.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/table.h"

#define MAX_TYPES 8

/* pprt__reserve (core/table.h), shorter. */
#define RESERVE PPRT__RESERVE

/* What symbolization found for one location. */
enum { SYM_DONE = 1, SYM_DWARF = 2 };
typedef struct loc_sym {
  uint32_t first;
  uint16_t n;
  uint8_t state; /* SYM_* bits */
} loc_sym;

typedef struct line_rec {
  uint64_t func; /* id: index in funcs + 1 */
  int64_t line;
} line_rec;

/* A Function: string indices and its first line. */
typedef struct func_rec {
  int64_t name, system_name, file, start_line;
} func_rec;

typedef struct mapping {
  uint64_t start, limit, offset;
  int64_t path, build_id; /* string indices */
} mapping;

struct pprt__profile {
  /* string table: strs[0] == "" */
  char **strs;
  size_t nstrs, strs_cap;
  pprt__table str_index;

  int64_t types[MAX_TYPES][2]; /* string indices of type, unit */
  size_t ntypes;
  int64_t period_type[2], period;
  int64_t time_nanos, duration_nanos, default_type;
  int64_t *comments;
  size_t ncomments, comments_cap;

  /* locations: id = index + 1 */
  uint64_t *loc_addr;
  int64_t *loc_synth; /* name of a synthetic frame, or 0 */
  size_t nlocs, locs_cap, synth_cap;
  pprt__table loc_index;

  /* samples: key words in keys[key_off[i] ..], location ids in
   * locids[locid_off[i] ..], values at vals[i * ntypes] */
  uint64_t *keys;
  size_t nkeys, keys_cap;
  size_t *key_off;
  uint64_t *locids;
  size_t nlocids, locids_cap;
  size_t *locid_off;
  size_t locid_off_cap;
  int64_t *vals;
  size_t nsamples, key_off_cap, vals_cap;
  pprt__table sample_index;
  uint64_t *scratch; /* the key being built */
  size_t scratch_cap;

  mapping *maps;
  size_t nmaps, maps_cap;

  /* Symbolization, done at the first write that needs it and kept for the
   * later ones (a CPU session's checkpoints): location i's lines, innermost
   * first, are lines[lsym[i].first ..][0, lsym[i].n). */
  loc_sym *lsym;
  size_t lsym_cap;
  line_rec *lines;
  size_t nlines, lines_cap;
  func_rec *funcs;
  size_t nfuncs, funcs_cap;
  pprt__table func_index;
  size_t nlocs_symbolized; /* lsym[0, this) is initialised */
};

/* ---- strings ---------------------------------------------------------------- */

struct str_key {
  const pprt__profile *p;
  const char *s;
};

static int str_eq(const void *ctx, uint32_t idx) {
  const struct str_key *k = ctx;
  return strcmp(k->p->strs[idx], k->s) == 0;
}

/* The index of s in the string table, adding it if new; -1 on ENOMEM. */
static int64_t str_intern(pprt__profile *p, const char *s) {
  if (s == NULL || s[0] == '\0')
    return 0;
  if (RESERVE(p->strs, p->strs_cap, p->nstrs + 1) != 0)
    return -1;
  struct str_key k = {p, s};
  int64_t idx = pprt__table_intern(&p->str_index, pprt__hash_bytes(s, strlen(s)), str_eq, &k,
                                   (uint32_t)p->nstrs);
  if (idx == (int64_t)p->nstrs) {
    char *copy = strdup(s);
    if (copy == NULL) {
      /* Leave the index pointing at a valid string; the entry is unused. */
      p->strs[p->nstrs++] = (char *)"";
      return -1;
    }
    p->strs[p->nstrs++] = copy;
  }
  return idx;
}

/* ---- life cycle ---------------------------------------------------------------- */

int pprt__profile_new(pprt__profile **out, const pprt__value_type *types, size_t ntypes,
                      pprt__value_type period_type, int64_t period) {
  *out = NULL;
  if (ntypes == 0 || ntypes > MAX_TYPES)
    return -EINVAL;
  pprt__profile *p = calloc(1, sizeof *p);
  if (p == NULL)
    return -ENOMEM;
  if (RESERVE(p->strs, p->strs_cap, 1) != 0) {
    free(p);
    return -ENOMEM;
  }
  p->strs[p->nstrs++] = (char *)""; /* index 0, never freed */
  p->ntypes = ntypes;
  int bad = 0;
  for (size_t i = 0; i < ntypes; i++) {
    p->types[i][0] = str_intern(p, types[i].type);
    p->types[i][1] = str_intern(p, types[i].unit);
    bad |= p->types[i][0] < 0 || p->types[i][1] < 0;
  }
  p->period_type[0] = str_intern(p, period_type.type);
  p->period_type[1] = str_intern(p, period_type.unit);
  bad |= p->period_type[0] < 0 || p->period_type[1] < 0;
  p->period = period;
  if (bad) {
    pprt__profile_free(p);
    return -ENOMEM;
  }
  *out = p;
  return 0;
}

void pprt__profile_free(pprt__profile *p) {
  if (p == NULL)
    return;
  for (size_t i = 1; i < p->nstrs; i++)
    if (p->strs[i][0] != '\0')
      free(p->strs[i]);
  free(p->strs);
  pprt__table_free(&p->str_index);
  free(p->comments);
  free(p->loc_addr);
  free(p->loc_synth);
  pprt__table_free(&p->loc_index);
  free(p->keys);
  free(p->key_off);
  free(p->locids);
  free(p->locid_off);
  free(p->vals);
  free(p->scratch);
  pprt__table_free(&p->sample_index);
  free(p->maps);
  free(p->lsym);
  free(p->lines);
  free(p->funcs);
  pprt__table_free(&p->func_index);
  free(p);
}

void pprt__profile_set_time(pprt__profile *p, int64_t time_nanos, int64_t duration_nanos) {
  p->time_nanos = time_nanos;
  p->duration_nanos = duration_nanos;
}

int pprt__profile_set_default_type(pprt__profile *p, const char *type) {
  for (size_t i = 0; i < p->ntypes; i++)
    if (strcmp(p->strs[p->types[i][0]], type) == 0) {
      p->default_type = p->types[i][0];
      return 0;
    }
  return -EINVAL;
}

pprt__profile_mark pprt__profile_get_mark(const pprt__profile *p) {
  return (pprt__profile_mark){p->nmaps, p->ncomments};
}

void pprt__profile_rewind(pprt__profile *p, pprt__profile_mark m) {
  if (m.nmaps < p->nmaps)
    p->nmaps = m.nmaps;
  if (m.ncomments < p->ncomments)
    p->ncomments = m.ncomments;
}

static _Atomic(const char *) g_ending;

void pprt__profile_set_ending(const char *note) {
  atomic_store(&g_ending, note);
}

const char *pprt__profile_ending(void) {
  return atomic_load(&g_ending);
}

int pprt__profile_add_comment(pprt__profile *p, const char *comment) {
  if (RESERVE(p->comments, p->comments_cap, p->ncomments + 1) != 0)
    return -ENOMEM;
  int64_t idx = str_intern(p, comment);
  if (idx < 0)
    return -ENOMEM;
  p->comments[p->ncomments++] = idx;
  return 0;
}

size_t pprt__profile_sample_count(const pprt__profile *p) {
  return p->nsamples;
}

/* ---- locations ---------------------------------------------------------------- */

struct loc_key {
  const pprt__profile *p;
  uint64_t addr;
  int64_t synth;
};

static int loc_eq(const void *ctx, uint32_t idx) {
  const struct loc_key *k = ctx;
  return k->p->loc_addr[idx] == k->addr && k->p->loc_synth[idx] == k->synth;
}

/* The id of the location for (addr, synthetic name), adding it if new; 0 on
 * ENOMEM. */
static uint64_t loc_intern(pprt__profile *p, uint64_t addr, int64_t synth) {
  if (RESERVE(p->loc_addr, p->locs_cap, p->nlocs + 1) != 0 ||
      RESERVE(p->loc_synth, p->synth_cap, p->nlocs + 1) != 0)
    return 0;
  struct loc_key k = {p, addr, synth};
  uint64_t h = pprt__hash_finish(pprt__hash_word(pprt__hash_word(PPRT__HASH_SEED, addr),
                                                 (uint64_t)synth));
  int64_t idx = pprt__table_intern(&p->loc_index, h, loc_eq, &k, (uint32_t)p->nlocs);
  if (idx < 0)
    return 0;
  if (idx == (int64_t)p->nlocs) {
    p->loc_addr[p->nlocs] = addr;
    p->loc_synth[p->nlocs] = synth;
    p->nlocs++;
  }
  return (uint64_t)idx + 1;
}

/* ---- samples ------------------------------------------------------------------ */

/* A sample's key: [nframes, frame words..., nlabels, (key, str, num, unit)
 * per label]. Frame words are the adjusted addresses, so a repeated stack
 * is found by hashing the words the caller passed, without touching the
 * location table; only a new sample interns its frames into locations (its
 * location ids go to locids). A synthetic frame's key has SYNTH in word 0
 * and the frame's name (a string index) as its one frame word. */
#define SYNTH (UINT64_C(1) << 63)
#define KEY_FRAMES(k) ((k)[0] & ~SYNTH)
#define KEY_LEN(k) (1 + KEY_FRAMES(k) + 1 + 4 * (k)[1 + KEY_FRAMES(k)])

struct sample_key {
  const pprt__profile *p;
  const uint64_t *key;
  size_t len;
};

static int sample_eq(const void *ctx, uint32_t idx) {
  const struct sample_key *k = ctx;
  const uint64_t *other = k->p->keys + k->p->key_off[idx];
  return KEY_LEN(other) == k->len && memcmp(other, k->key, k->len * sizeof *other) == 0;
}

/* Makes the sample whose key is in p->scratch (len words): interns its
 * frames and indexes it. Returns its index, or -1 on ENOMEM with no sample
 * added. */
static int64_t new_sample(pprt__profile *p, size_t len, uint64_t hash) {
  size_t nframes = KEY_FRAMES(p->scratch);
  if (RESERVE(p->key_off, p->key_off_cap, p->nsamples + 1) != 0 ||
      RESERVE(p->locid_off, p->locid_off_cap, p->nsamples + 1) != 0 ||
      RESERVE(p->vals, p->vals_cap, (p->nsamples + 1) * p->ntypes) != 0 ||
      RESERVE(p->keys, p->keys_cap, p->nkeys + len) != 0 ||
      RESERVE(p->locids, p->locids_cap, p->nlocids + nframes) != 0)
    return -1;
  for (size_t j = 0; j < nframes; j++) {
    uint64_t w = p->scratch[1 + j];
    uint64_t id = (p->scratch[0] & SYNTH) ? loc_intern(p, 0, (int64_t)w) : loc_intern(p, w, 0);
    if (id == 0)
      return -1;
    p->locids[p->nlocids + j] = id;
  }
  struct sample_key k = {p, p->scratch, len};
  int64_t idx = pprt__table_intern(&p->sample_index, hash, sample_eq, &k, (uint32_t)p->nsamples);
  if (idx < 0)
    return -1;
  p->key_off[idx] = p->nkeys;
  memcpy(p->keys + p->nkeys, p->scratch, len * sizeof *p->keys);
  p->nkeys += len;
  p->locid_off[idx] = p->nlocids;
  p->nlocids += nframes;
  memset(p->vals + idx * p->ntypes, 0, p->ntypes * sizeof *p->vals);
  p->nsamples++;
  return idx;
}

/* Adds values to the sample whose key is in p->scratch (len words). */
static int add_key(pprt__profile *p, size_t len, const int64_t *values) {
  struct sample_key k = {p, p->scratch, len};
  uint64_t h = PPRT__HASH_SEED;
  for (size_t i = 0; i < len; i++)
    h = pprt__hash_word(h, p->scratch[i]);
  h = pprt__hash_finish(h);
  int64_t idx = pprt__table_find(&p->sample_index, h, sample_eq, &k);
  if (idx < 0 && (idx = new_sample(p, len, h)) < 0)
    return -ENOMEM;
  int64_t *v = p->vals + idx * p->ntypes;
  for (size_t i = 0; i < p->ntypes; i++)
    v[i] += values[i];
  return 0;
}

/* Writes the labels part of a key at p->scratch[at]; returns the key's
 * length or -ENOMEM. */
static int64_t put_labels(pprt__profile *p, size_t at, const pprt__label *labels,
                          size_t nlabels) {
  if (RESERVE(p->scratch, p->scratch_cap, at + 1 + 4 * nlabels) != 0)
    return -ENOMEM;
  p->scratch[at++] = nlabels;
  for (size_t i = 0; i < nlabels; i++) {
    const pprt__label *l = &labels[i];
    int64_t key = str_intern(p, l->key);
    int64_t str = l->str ? str_intern(p, l->str) : 0;
    int64_t unit = (!l->str && l->num_unit) ? str_intern(p, l->num_unit) : 0;
    if (key < 0 || str < 0 || unit < 0)
      return -ENOMEM;
    p->scratch[at++] = (uint64_t)key;
    p->scratch[at++] = (uint64_t)str;
    p->scratch[at++] = l->str ? 0 : (uint64_t)l->num;
    p->scratch[at++] = (uint64_t)unit;
  }
  return (int64_t)at;
}

int pprt__profile_add(pprt__profile *p, const uintptr_t *pcs, size_t npcs, unsigned flags,
                      const int64_t *values, const pprt__label *labels, size_t nlabels) {
  if ((npcs && pcs == NULL) || values == NULL || (nlabels && labels == NULL))
    return -EINVAL;
  if (RESERVE(p->scratch, p->scratch_cap, 1 + npcs) != 0)
    return -ENOMEM;
  p->scratch[0] = npcs;
  for (size_t i = 0; i < npcs; i++) {
    uint64_t addr = (uint64_t)pcs[i];
    /* A return address points after the call; minus one lands in it, so
     * the frame is attributed to the calling line, not the next one. */
    if ((i > 0 || !(flags & PPRT__STACK_LEAF_EXACT)) && addr > 0)
      addr--;
    p->scratch[1 + i] = addr;
  }
  int64_t len = put_labels(p, 1 + npcs, labels, nlabels);
  return len < 0 ? (int)len : add_key(p, (size_t)len, values);
}

int pprt__profile_add_synthetic(pprt__profile *p, const char *name, const int64_t *values,
                                const pprt__label *labels, size_t nlabels) {
  if (name == NULL || name[0] == '\0' || values == NULL || (nlabels && labels == NULL))
    return -EINVAL;
  int64_t synth = str_intern(p, name);
  if (synth < 0 || RESERVE(p->scratch, p->scratch_cap, 2) != 0)
    return -ENOMEM;
  p->scratch[0] = 1 | SYNTH;
  p->scratch[1] = (uint64_t)synth;
  int64_t len = put_labels(p, 2, labels, nlabels);
  return len < 0 ? (int)len : add_key(p, (size_t)len, values);
}

/* ---- mappings ------------------------------------------------------------------- */

int pprt__profile_add_mapping(pprt__profile *p, const pprt__mapping_info *m) {
  if (m->limit <= m->start || m->path == NULL)
    return -EINVAL;
  if (RESERVE(p->maps, p->maps_cap, p->nmaps + 1) != 0)
    return -ENOMEM;
  int64_t path = str_intern(p, m->path), bid = m->build_id ? str_intern(p, m->build_id) : 0;
  if (path < 0 || bid < 0)
    return -ENOMEM;
  p->maps[p->nmaps++] = (mapping){m->start, m->limit, m->file_offset, path, bid};
  return 0;
}

/* ---- writing -------------------------------------------------------------------- */

/* Everything the write path allocates, freed together. */
typedef struct encoding {
  Pprt__Profile prof;
  Pprt__ValueType types[MAX_TYPES], *type_ptrs[MAX_TYPES], period_type;
  Pprt__Sample *samples, **sample_ptrs;
  Pprt__Label *labels, **label_ptrs;
  Pprt__Mapping *maps, **map_ptrs;
  Pprt__Location *locs, **loc_ptrs;
  Pprt__Line *lines, **line_ptrs;
  Pprt__Function *funcs, **func_ptrs;
  uint32_t *loc_map;   /* per location: index into maps + 1, or 0 */
  uint8_t *map_flags;  /* per mapping: MAP_* true of every location in it */
  uint32_t *order;     /* location indices in output order */
  uint64_t *new_id;    /* per location index: its id in the output */
  uint64_t *locids;    /* the samples' location ids, renumbered */
  uint8_t *packed;
} encoding;

enum { MAP_FUNCS = 1, MAP_FILES = 2, MAP_LINES = 4, MAP_INLINE = 8, MAP_USED = 16 };

static void encoding_free(encoding *e) {
  free(e->samples);
  free(e->sample_ptrs);
  free(e->labels);
  free(e->label_ptrs);
  free(e->maps);
  free(e->map_ptrs);
  free(e->locs);
  free(e->loc_ptrs);
  free(e->lines);
  free(e->line_ptrs);
  free(e->funcs);
  free(e->func_ptrs);
  free(e->loc_map);
  free(e->map_flags);
  free(e->order);
  free(e->new_id);
  free(e->locids);
  free(e->packed);
}

/* Finds the mapping holding addr among the first n (they may overlap only
 * if the caller declared overlapping ones; the first declared wins). */
static uint32_t find_mapping(const pprt__profile *p, size_t n, uint64_t addr) {
  for (size_t i = 0; i < n; i++)
    if (addr >= p->maps[i].start && addr < p->maps[i].limit)
      return (uint32_t)i + 1;
  return 0;
}

struct func_key {
  const pprt__profile *p;
  func_rec f;
};

static int func_eq(const void *ctx, uint32_t idx) {
  const struct func_key *k = ctx;
  return memcmp(&k->p->funcs[idx], &k->f, sizeof k->f) == 0;
}

/* The id of the Function f, adding it if new; 0 on ENOMEM. */
static uint64_t func_intern(pprt__profile *p, func_rec f) {
  if (RESERVE(p->funcs, p->funcs_cap, p->nfuncs + 1) != 0)
    return 0;
  struct func_key k = {p, f};
  uint64_t h =
      pprt__hash_word(pprt__hash_word(PPRT__HASH_SEED, (uint64_t)f.name), (uint64_t)f.system_name);
  h = pprt__hash_finish(
      pprt__hash_word(pprt__hash_word(h, (uint64_t)f.file), (uint64_t)f.start_line));
  int64_t idx = pprt__table_intern(&p->func_index, h, func_eq, &k, (uint32_t)p->nfuncs);
  if (idx < 0)
    return 0;
  if (idx == (int64_t)p->nfuncs)
    p->funcs[p->nfuncs++] = f;
  return (uint64_t)idx + 1;
}

/* Symbolizes location i once: its frames become lines (innermost first)
 * of interned functions. A location sym knows nothing about gets none. */
static int symbolize_location(pprt__profile *p, size_t i, pprt__symbolize_fn sym, void *ctx) {
  pprt__frame fr[PPRT__MAX_FRAMES];
  unsigned flags = 0;
  size_t n = 0;
  if (p->loc_synth[i])
    fr[n++] = (pprt__frame){p->strs[p->loc_synth[i]], NULL, NULL, 0, 0};
  else
    n = sym(ctx, p->loc_addr[i], fr, PPRT__MAX_FRAMES, &flags);
  if (n > PPRT__MAX_FRAMES)
    n = PPRT__MAX_FRAMES;
  if (RESERVE(p->lines, p->lines_cap, p->nlines + n) != 0)
    return -ENOMEM;
  size_t first = p->nlines;
  for (size_t j = 0; j < n; j++) {
    if (fr[j].name == NULL || fr[j].name[0] == '\0') {
      p->nlines = first; /* a frame without a name makes the location unnamed */
      n = 0;
      break;
    }
    const char *sys = fr[j].system_name ? fr[j].system_name : fr[j].name;
    func_rec f = {str_intern(p, fr[j].name), str_intern(p, sys), str_intern(p, fr[j].file),
                  fr[j].start_line > 0 ? fr[j].start_line : 0};
    uint64_t id = (f.name < 0 || f.system_name < 0 || f.file < 0) ? 0 : func_intern(p, f);
    if (id == 0) {
      p->nlines = first;
      return -ENOMEM;
    }
    p->lines[p->nlines++] = (line_rec){id, fr[j].line > 0 ? fr[j].line : 0};
  }
  p->lsym[i] = (loc_sym){(uint32_t)first, (uint16_t)n,
                         (uint8_t)(SYM_DONE | ((flags & PPRT__FRAMES_DWARF) ? SYM_DWARF : 0))};
  return 0;
}

int pprt__profile_pending_addrs(const pprt__profile *p, uint64_t **out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (p->nlocs == 0)
    return 0;
  uint64_t *a = malloc(p->nlocs * sizeof *a);
  if (a == NULL)
    return -ENOMEM;
  size_t k = 0;
  for (size_t i = 0; i < p->nlocs; i++)
    if (!p->loc_synth[i] && !(i < p->nlocs_symbolized && (p->lsym[i].state & SYM_DONE)))
      a[k++] = p->loc_addr[i];
  *out = a;
  *n = k;
  return 0;
}

/* Resolves each location's mapping (adding "[anon]" for addresses in none)
 * and, with sym, its lines; then what each mapping's flags can claim. */
static int resolve(pprt__profile *p, encoding *e, pprt__symbolize_fn sym, void *sym_ctx) {
  size_t declared = p->nmaps;
  e->loc_map = calloc(p->nlocs + 1, sizeof *e->loc_map);
  if (!e->loc_map)
    return -ENOMEM;

  /* Sorted search would be faster; images number in the tens and this runs
   * once per distinct pc, so a scan with a one-entry cache does. */
  uint64_t anon_lo = UINT64_MAX, anon_hi = 0;
  uint32_t last = 0;
  for (size_t i = 0; i < p->nlocs; i++) {
    if (p->loc_synth[i])
      continue;
    uint64_t a = p->loc_addr[i];
    uint32_t m = 0;
    if (last && a >= p->maps[last - 1].start && a < p->maps[last - 1].limit)
      m = last;
    else
      m = find_mapping(p, declared, a);
    e->loc_map[i] = m;
    if (m)
      last = m;
    else {
      anon_lo = a < anon_lo ? a : anon_lo;
      anon_hi = a > anon_hi ? a : anon_hi;
    }
  }
  if (anon_lo != UINT64_MAX) {
    const uint64_t page = 4096;
    pprt__mapping_info anon = {anon_lo & ~(page - 1), (anon_hi | (page - 1)) + 1, 0, "[anon]",
                               NULL};
    if (anon.limit < anon.start) /* the top page of the address space */
      anon.limit = UINT64_MAX;
    if (pprt__profile_add_mapping(p, &anon) != 0)
      return -ENOMEM;
    for (size_t i = 0; i < p->nlocs; i++)
      if (!p->loc_synth[i] && e->loc_map[i] == 0)
        e->loc_map[i] = (uint32_t)p->nmaps;
  }

  if (RESERVE(p->lsym, p->lsym_cap, p->nlocs) != 0)
    return -ENOMEM;
  e->map_flags = malloc(p->nmaps + 1);
  if (!e->map_flags)
    return -ENOMEM;
  memset(e->map_flags, MAP_FUNCS | MAP_FILES | MAP_LINES, p->nmaps + 1);
  for (size_t i = 0; i < p->nlocs; i++) {
    if (i >= p->nlocs_symbolized)
      p->lsym[i] = (loc_sym){0, 0, 0};
    /* Without sym only the synthetic frames get a name. */
    if (!(p->lsym[i].state & SYM_DONE) && (sym || p->loc_synth[i])) {
      int rc = symbolize_location(p, i, sym, sym_ctx);
      if (rc != 0)
        return rc;
    }
    if (p->loc_synth[i])
      continue;
    const loc_sym *ls = &p->lsym[i];
    uint8_t *f = &e->map_flags[e->loc_map[i]];
    *f |= MAP_USED;
    if (!sym || ls->n == 0) {
      *f &= (uint8_t)~MAP_FUNCS;
      continue;
    }
    /* Code the debug information does not cover (crt1's _start, assembly)
     * has names only; it does not count against the lines of the rest. */
    if (!(ls->state & SYM_DWARF))
      continue;
    *f |= MAP_INLINE;
    for (size_t j = 0; j < ls->n; j++) {
      const line_rec *l = &p->lines[ls->first + j];
      if (p->funcs[l->func - 1].file == 0)
        *f &= (uint8_t)~MAP_FILES;
      if (l->line == 0)
        *f &= (uint8_t)~MAP_LINES;
    }
  }
  p->nlocs_symbolized = p->nlocs;
  for (size_t m = 1; m <= p->nmaps; m++) {
    uint8_t *f = &e->map_flags[m];
    /* pprof re-symbolizes a mapping only when none of has_functions,
     * has_filenames and has_line_numbers is set: a mapping with names but
     * no lines (no debug information) leaves them all false, so it can
     * still add lines from the binary. MAP_INLINE here means some location
     * had debug information. */
    if (!(*f & MAP_USED) || !(*f & MAP_INLINE) || !(*f & MAP_FILES) || !(*f & MAP_LINES))
      *f = 0;
  }
  return 0;
}

struct loc_order {
  uint64_t addr; /* synthetic frames sort last */
  uint32_t index;
};

static int cmp_loc_order(const void *a, const void *b) {
  const struct loc_order *x = a, *y = b;
  if (x->addr != y->addr)
    return x->addr < y->addr ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* Numbers the locations in address order: neighbouring entries then share
 * their high address bytes, which gzip compresses noticeably better than
 * first-seen order. */
static int number_locations(pprt__profile *p, encoding *e) {
  struct loc_order *o = malloc((p->nlocs + 1) * sizeof *o);
  e->order = malloc((p->nlocs + 1) * sizeof *e->order);
  e->new_id = malloc((p->nlocs + 1) * sizeof *e->new_id);
  e->locids = malloc((p->nlocids + 1) * sizeof *e->locids);
  if (!o || !e->order || !e->new_id || !e->locids) {
    free(o);
    return -ENOMEM;
  }
  for (size_t i = 0; i < p->nlocs; i++)
    o[i] = (struct loc_order){p->loc_synth[i] ? UINT64_MAX : p->loc_addr[i], (uint32_t)i};
  qsort(o, p->nlocs, sizeof *o, cmp_loc_order);
  for (size_t r = 0; r < p->nlocs; r++) {
    e->order[r] = o[r].index;
    e->new_id[o[r].index] = r + 1;
  }
  free(o);
  for (size_t i = 0; i < p->nlocids; i++)
    e->locids[i] = e->new_id[p->locids[i] - 1];
  return 0;
}

/* Fills e->prof from the builder, pointing into its arrays. */
static int fill(pprt__profile *p, encoding *e) {
  Pprt__Profile *prof = &e->prof;
  pprt__profile__init(prof);
  for (size_t i = 0; i < p->ntypes; i++) {
    pprt__value_type__init(&e->types[i]);
    e->types[i].type = p->types[i][0];
    e->types[i].unit = p->types[i][1];
    e->type_ptrs[i] = &e->types[i];
  }
  prof->n_sample_type = p->ntypes;
  prof->sample_type = e->type_ptrs;
  pprt__value_type__init(&e->period_type);
  e->period_type.type = p->period_type[0];
  e->period_type.unit = p->period_type[1];
  prof->period_type = &e->period_type;
  prof->period = p->period;
  prof->time_nanos = p->time_nanos;
  prof->duration_nanos = p->duration_nanos;
  prof->default_sample_type = p->default_type;
  prof->n_comment = p->ncomments;
  prof->comment = p->comments;

  size_t nlabels = 0;
  for (size_t i = 0; i < p->nsamples; i++) {
    const uint64_t *k = p->keys + p->key_off[i];
    nlabels += k[1 + KEY_FRAMES(k)];
  }
  e->samples = calloc(p->nsamples + 1, sizeof *e->samples);
  e->sample_ptrs = calloc(p->nsamples + 1, sizeof *e->sample_ptrs);
  e->labels = calloc(nlabels + 1, sizeof *e->labels);
  e->label_ptrs = calloc(nlabels + 1, sizeof *e->label_ptrs);
  e->maps = calloc(p->nmaps + 1, sizeof *e->maps);
  e->map_ptrs = calloc(p->nmaps + 1, sizeof *e->map_ptrs);
  e->locs = calloc(p->nlocs + 1, sizeof *e->locs);
  e->loc_ptrs = calloc(p->nlocs + 1, sizeof *e->loc_ptrs);
  size_t nfuncs = p->nfuncs, nlines = 0;
  for (size_t i = 0; i < p->nlocs; i++)
    nlines += p->lsym[i].n;
  e->lines = calloc(nlines + 1, sizeof *e->lines);
  e->line_ptrs = calloc(nlines + 1, sizeof *e->line_ptrs);
  e->funcs = calloc(nfuncs + 1, sizeof *e->funcs);
  e->func_ptrs = calloc(nfuncs + 1, sizeof *e->func_ptrs);
  if (!e->samples || !e->sample_ptrs || !e->labels || !e->label_ptrs || !e->maps ||
      !e->map_ptrs || !e->locs || !e->loc_ptrs || !e->lines || !e->line_ptrs || !e->funcs ||
      !e->func_ptrs)
    return -ENOMEM;

  Pprt__Label *label = e->labels;
  for (size_t i = 0; i < p->nsamples; i++) {
    uint64_t *k = p->keys + p->key_off[i];
    Pprt__Sample *s = &e->samples[i];
    pprt__sample__init(s);
    s->n_location_id = KEY_FRAMES(k);
    s->location_id = e->locids + p->locid_off[i];
    s->n_value = p->ntypes;
    s->value = p->vals + i * p->ntypes;
    const uint64_t *l = k + 1 + KEY_FRAMES(k);
    s->n_label = l[0];
    s->label = e->label_ptrs + (label - e->labels);
    for (size_t j = 0; j < l[0]; j++, label++) {
      const uint64_t *t = l + 1 + 4 * j;
      pprt__label__init(label);
      label->key = (int64_t)t[0];
      label->str = (int64_t)t[1];
      label->num = (int64_t)t[2];
      label->num_unit = (int64_t)t[3];
      e->label_ptrs[label - e->labels] = label;
    }
    e->sample_ptrs[i] = s;
  }
  prof->n_sample = p->nsamples;
  prof->sample = e->sample_ptrs;

  for (size_t i = 0; i < p->nmaps; i++) {
    Pprt__Mapping *m = &e->maps[i];
    pprt__mapping__init(m);
    m->id = i + 1;
    m->memory_start = p->maps[i].start;
    m->memory_limit = p->maps[i].limit;
    m->file_offset = p->maps[i].offset;
    m->filename = p->maps[i].path;
    m->build_id = p->maps[i].build_id;
    uint8_t f = e->map_flags[i + 1];
    m->has_functions = (f & MAP_FUNCS) != 0;
    m->has_filenames = (f & MAP_FILES) != 0;
    m->has_line_numbers = (f & MAP_LINES) != 0;
    m->has_inline_frames = (f & MAP_INLINE) != 0;
    e->map_ptrs[i] = m;
  }
  prof->n_mapping = p->nmaps;
  prof->mapping = e->map_ptrs;

  Pprt__Line *line = e->lines;
  for (size_t r = 0; r < p->nlocs; r++) {
    size_t i = e->order[r];
    Pprt__Location *l = &e->locs[r];
    pprt__location__init(l);
    l->id = r + 1;
    l->mapping_id = e->loc_map[i];
    l->address = p->loc_addr[i];
    const loc_sym *ls = &p->lsym[i];
    l->n_line = ls->n;
    l->line = &e->line_ptrs[line - e->lines];
    for (size_t j = 0; j < ls->n; j++, line++) {
      pprt__line__init(line);
      line->function_id = p->lines[ls->first + j].func;
      line->line = p->lines[ls->first + j].line;
      e->line_ptrs[line - e->lines] = line;
    }
    e->loc_ptrs[r] = l;
  }
  prof->n_location = p->nlocs;
  prof->location = e->loc_ptrs;

  for (size_t i = 0; i < nfuncs; i++) {
    Pprt__Function *f = &e->funcs[i];
    pprt__function__init(f);
    f->id = i + 1;
    f->name = p->funcs[i].name;
    f->system_name = p->funcs[i].system_name;
    f->filename = p->funcs[i].file;
    f->start_line = p->funcs[i].start_line;
    e->func_ptrs[i] = f;
  }
  prof->n_function = nfuncs;
  prof->function = e->func_ptrs;

  prof->n_string_table = p->nstrs;
  prof->string_table = p->strs;
  return 0;
}

/* gzips len bytes into out, a chunk at a time. */
static int gzip_to(const uint8_t *data, size_t len, pprt_writer out) {
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  /* Fastest level, as Go's runtime/pprof: on profiles (address-sorted
   * locations) level 6 saves ~3% of the bytes for twice the time. The
   * window fits the data (no match reaches further back than its start
   * anyway), and the hash table with it: zlib's full size (15 bits, memory
   * level 8) allocates and clears about 260 KB, most of the cost of a
   * 2 KB body such as an HTTP response's. + 16: a gzip header and trailer,
   * as pprof expects. */
  int bits = 10;
  while (bits < 15 && ((size_t)1 << bits) < len)
    bits++;
  if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, bits + 16, bits - 7, Z_DEFAULT_STRATEGY) !=
      Z_OK)
    return -ENOMEM;
  uint8_t chunk[1 << 16];
  int rc = 0, zrc;
  zs.next_in = (Bytef *)data;
  do {
    size_t in = len > (1u << 30) ? (1u << 30) : len;
    zs.avail_in = (uInt)in;
    len -= in;
    int flush = len == 0 ? Z_FINISH : Z_NO_FLUSH;
    do {
      zs.next_out = chunk;
      zs.avail_out = sizeof chunk;
      zrc = deflate(&zs, flush);
      size_t n = sizeof chunk - zs.avail_out;
      if (n && (rc = out.write(out.ctx, chunk, n)) != 0)
        goto done;
    } while (zs.avail_out == 0);
  } while (len > 0);
  if (zrc != Z_STREAM_END)
    rc = -EIO;
done:
  deflateEnd(&zs);
  return rc;
}

int pprt__profile_write(pprt__profile *p, pprt__symbolize_fn sym, void *sym_ctx,
                        pprt_writer out) {
  encoding e;
  memset(&e, 0, sizeof e);
  size_t declared_maps = p->nmaps;
  int rc = resolve(p, &e, sym, sym_ctx);
  if (rc == 0)
    rc = number_locations(p, &e);
  if (rc == 0)
    rc = fill(p, &e);
  if (rc == 0) {
    size_t size = pprt__profile__get_packed_size(&e.prof);
    e.packed = malloc(size ? size : 1);
    if (e.packed == NULL)
      rc = -ENOMEM;
    else {
      pprt__profile__pack(&e.prof, e.packed);
      rc = gzip_to(e.packed, size, out);
    }
  }
  /* The "[anon]" mapping belongs to this write: a later write may see
   * more addresses. */
  p->nmaps = declared_maps;
  encoding_free(&e);
  return rc;
}
