/* One compilation unit's DIEs (dwarf_unit.h).
 *
 * Divisions: reading bytes; forms (the size of each, and its value);
 * the unit (header, abbreviations, the unit DIE's bases); DIEs and their
 * ranges.
 */
#include "platform/posix/dwarf_unit.h"

#include "platform/posix/dwarf_bytes.h"
#include "platform/posix/dwarf_constants.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading bytes ------------------------------------------------------------- */

/* A string in one of the string sections, NUL-terminated in its window. */
static const char *str_at(pprt__dw_section *s, uint64_t off) {
  if (s->size == 0 || off >= s->size)
    return NULL;
  /* Names are short; a longer one is read again with more room. */
  for (size_t want = 256;; want *= 4) {
    size_t len = off + want > s->size ? (size_t)(s->size - off) : want;
    const uint8_t *p = pprt__dw_section_get(s, off, len);
    if (p == NULL)
      return NULL;
    if (memchr(p, 0, len) != NULL)
      return (const char *)p;
    if (off + want >= s->size)
      return NULL;
  }
}

/* ---- forms ----------------------------------------------------------------------- */

/* Reads one value of form at r; is_ref: an offset in .debug_info (of the
 * alternate file for PPRT__DW_REF_ALT). */
static void read_form(const pprt__dw_unit *u, pprt__dw_info *inf, rd *r, uint32_t form,
                      int64_t implicit, pprt__dw_value *v) {
  memset(v, 0, sizeof *v);
  v->form = form;
  unsigned osz = u->offset_size;
  switch (form) {
  case DW_FORM_addr:
    v->u = rd_n(r, u->addr_size);
    break;
  case DW_FORM_block2:
    rd_skip(r, rd_n(r, 2));
    break;
  case DW_FORM_block4:
    rd_skip(r, rd_n(r, 4));
    break;
  case DW_FORM_data2:
    v->u = rd_n(r, 2);
    break;
  case DW_FORM_data4:
    v->u = rd_n(r, 4);
    break;
  case DW_FORM_data8:
  case DW_FORM_ref_sig8:
    v->u = rd_n(r, 8);
    break;
  case DW_FORM_string:
    if (!r->err && r->pos < r->end) {
      const char *s = (const char *)r->b + r->pos;
      const char *nul = memchr(s, 0, r->end - r->pos);
      if (nul == NULL)
        r->err = 1;
      else {
        v->str = s;
        r->pos += (size_t)(nul - s) + 1;
      }
    } else {
      r->err = 1;
    }
    break;
  case DW_FORM_block:
  case DW_FORM_exprloc:
    rd_skip(r, rd_uleb(r));
    break;
  case DW_FORM_block1:
    rd_skip(r, rd_n(r, 1));
    break;
  case DW_FORM_data1:
  case DW_FORM_flag:
    v->u = rd_n(r, 1);
    break;
  case DW_FORM_sdata:
    v->u = (uint64_t)rd_sleb(r);
    break;
  case DW_FORM_strp:
    v->u = rd_n(r, osz);
    v->str = inf ? str_at(&inf->str, v->u) : NULL;
    break;
  case DW_FORM_line_strp:
    v->u = rd_n(r, osz);
    v->str = inf ? str_at(&inf->line_str, v->u) : NULL;
    break;
  case DW_FORM_udata:
    v->u = rd_uleb(r);
    break;
  case DW_FORM_ref_addr:
    v->u = rd_n(r, u->version <= 2 ? u->addr_size : osz);
    v->is_ref = 1;
    break;
  case DW_FORM_ref1:
  case DW_FORM_ref2:
  case DW_FORM_ref4:
  case DW_FORM_ref8:
    v->u = u->off + rd_n(r, form == DW_FORM_ref1   ? 1
                            : form == DW_FORM_ref2 ? 2
                            : form == DW_FORM_ref4 ? 4
                                                   : 8);
    v->is_ref = 1;
    break;
  case DW_FORM_ref_udata:
    v->u = u->off + rd_uleb(r);
    v->is_ref = 1;
    break;
  case DW_FORM_indirect:
    read_form(u, inf, r, (uint32_t)rd_uleb(r), implicit, v);
    break;
  case DW_FORM_sec_offset:
    v->u = rd_n(r, osz);
    break;
  case DW_FORM_strp_sup:
  case DW_FORM_GNU_strp_alt: /* in the alternate file's .debug_str (dwz) */
    v->u = rd_n(r, osz);
    v->str = inf && inf->alt_str ? str_at(inf->alt_str, v->u) : NULL;
    break;
  case DW_FORM_GNU_ref_alt: /* a DIE of the alternate file */
    v->u = rd_n(r, osz);
    v->is_ref = PPRT__DW_REF_ALT;
    break;
  case DW_FORM_flag_present:
    v->u = 1;
    break;
  case DW_FORM_implicit_const:
    v->u = (uint64_t)implicit;
    break;
  case DW_FORM_data16:
    rd_skip(r, 16);
    break;
  case DW_FORM_ref_sup4:
    v->u = rd_n(r, 4);
    v->is_ref = PPRT__DW_REF_ALT;
    break;
  case DW_FORM_ref_sup8:
    v->u = rd_n(r, 8);
    v->is_ref = PPRT__DW_REF_ALT;
    break;
  case DW_FORM_strx:
  case DW_FORM_strx1:
  case DW_FORM_strx2:
  case DW_FORM_strx3:
  case DW_FORM_strx4: {
    uint64_t i = form == DW_FORM_strx ? rd_uleb(r) : rd_n(r, form - DW_FORM_strx1 + 1);
    const uint8_t *p =
        inf ? pprt__dw_section_get(&inf->str_offsets, u->str_offsets_base + i * osz, osz) : NULL;
    if (p != NULL) {
      rd o = {p, 0, osz, 0};
      v->u = rd_n(&o, osz);
      v->str = str_at(&inf->str, v->u);
    }
    break;
  }
  case DW_FORM_addrx:
  case DW_FORM_addrx1:
  case DW_FORM_addrx2:
  case DW_FORM_addrx3:
  case DW_FORM_addrx4:
  case DW_FORM_GNU_addr_index: {
    uint64_t i = form == DW_FORM_addrx || form == DW_FORM_GNU_addr_index
                     ? rd_uleb(r)
                     : rd_n(r, form - DW_FORM_addrx1 + 1);
    const uint8_t *p =
        inf ? pprt__dw_section_get(&inf->addr, u->addr_base + i * u->addr_size, u->addr_size)
            : NULL;
    if (p != NULL) {
      rd o = {p, 0, u->addr_size, 0};
      v->u = rd_n(&o, u->addr_size);
    }
    v->form = DW_FORM_addr;
    break;
  }
  case DW_FORM_loclistx:
  case DW_FORM_rnglistx:
  case DW_FORM_GNU_str_index:
    v->u = rd_uleb(r);
    break;
  default:
    r->err = 1; /* a form whose size is unknown: the rest cannot be read */
    break;
  }
}

/* ---- the unit ---------------------------------------------------------------------- */

static int by_code(const void *pa, const void *pb) {
  const pprt__dw_abbrev *a = pa, *b = pb;
  return a->code < b->code ? -1 : a->code > b->code;
}

static int read_abbrevs(pprt__dw_unit *u, pprt__dw_section *s, uint64_t off) {
  /* A table ends with code 0; read in growing pieces until it does. */
  for (size_t want = 4096;; want *= 4) {
    size_t len = off + want > s->size ? (size_t)(s->size - off) : want;
    const uint8_t *p = off < s->size ? pprt__dw_section_get(s, off, len) : NULL;
    if (p == NULL)
      return -EINVAL;
    rd r = {p, 0, len, 0};
    size_t na = 0, ns = 0, capa = 0, caps = 0;
    for (;;) {
      uint64_t code = rd_uleb(&r);
      if (r.err || code == 0)
        break;
      if (na == capa) {
        capa = capa ? 2 * capa : 64;
        pprt__dw_abbrev *v = realloc(u->abbrevs, capa * sizeof *v);
        if (v == NULL)
          return -ENOMEM;
        u->abbrevs = v;
      }
      pprt__dw_abbrev *a = &u->abbrevs[na++];
      a->code = code;
      a->tag = (uint32_t)rd_uleb(&r);
      a->children = (int)rd_n(&r, 1);
      a->first = (uint32_t)ns;
      for (;;) {
        uint32_t at = (uint32_t)rd_uleb(&r), form = (uint32_t)rd_uleb(&r);
        int64_t implicit = form == DW_FORM_implicit_const ? rd_sleb(&r) : 0;
        if (r.err || (at == 0 && form == 0))
          break;
        if (ns == caps) {
          caps = caps ? 2 * caps : 256;
          pprt__dw_attr_spec *v = realloc(u->specs, caps * sizeof *v);
          if (v == NULL)
            return -ENOMEM;
          u->specs = v;
        }
        u->specs[ns++] = (pprt__dw_attr_spec){at, form, implicit};
      }
      a->n = (uint32_t)ns - a->first;
    }
    if (!r.err) {
      u->nabbrevs = na;
      u->nspecs = ns;
      if (na > 1) /* qsort takes no NULL, even for 0 items */
        qsort(u->abbrevs, na, sizeof *u->abbrevs, by_code);
      return 0;
    }
    if (len < want)
      return -EINVAL; /* the section ended inside the table */
  }
}

static const pprt__dw_abbrev *abbrev_for(const pprt__dw_unit *u, uint64_t code) {
  if (code - 1 < u->nabbrevs && u->abbrevs[code - 1].code == code)
    return &u->abbrevs[code - 1]; /* codes are usually 1..n */
  size_t lo = 0, hi = u->nabbrevs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (u->abbrevs[mid].code < code)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < u->nabbrevs && u->abbrevs[lo].code == code ? &u->abbrevs[lo] : NULL;
}

int pprt__dw_unit_extent(pprt__dw_section *info, uint64_t off, uint64_t *len,
                         unsigned *offset_size) {
  const uint8_t *p = pprt__dw_section_get(info, off, 4);
  if (p == NULL)
    return -EINVAL;
  rd r = {p, 0, 4, 0};
  uint64_t body = rd_n(&r, 4);
  size_t hdr = 4;
  *offset_size = 4;
  if (body == 0xffffffff) {
    if ((p = pprt__dw_section_get(info, off + 4, 8)) == NULL)
      return -EINVAL;
    r = (rd){p, 0, 8, 0};
    body = rd_n(&r, 8);
    hdr = 12;
    *offset_size = 8;
  }
  if (body > info->size - off - hdr || body > SIZE_MAX - hdr)
    return -EINVAL;
  *len = body + hdr;
  return 0;
}

int pprt__dw_unit_open(pprt__dw_unit *u, pprt__dw_info *inf, uint64_t off) {
  return pprt__dw_unit_open_in(u, inf, &inf->info, off);
}

int pprt__dw_unit_open_in(pprt__dw_unit *u, pprt__dw_info *inf, pprt__dw_section *info,
                          uint64_t off) {
  memset(u, 0, sizeof *u);
  uint64_t len;
  if (pprt__dw_unit_extent(info, off, &len, &u->offset_size) != 0)
    return -EINVAL;
  size_t hdr = u->offset_size == 8 ? 12 : 4;
  u->len = (size_t)len;
  if ((u->bytes = pprt__dw_section_get(info, off, u->len)) == NULL)
    return -EINVAL;
  u->off = off;
  rd r = {u->bytes, hdr, u->len, 0};
  u->version = (unsigned)rd_n(&r, 2);
  uint64_t abbrev_off;
  if (u->version >= 5) {
    u->unit_type = (unsigned)rd_n(&r, 1);
    u->addr_size = (unsigned)rd_n(&r, 1);
    abbrev_off = rd_n(&r, u->offset_size);
    if (u->unit_type == DW_UT_skeleton || u->unit_type == DW_UT_split_compile)
      rd_n(&r, 8); /* dwo id */
    if (u->unit_type != DW_UT_compile && u->unit_type != DW_UT_partial &&
        u->unit_type != DW_UT_skeleton) /* split DWARF: its lines, not its DIEs */
      return -EINVAL;
  } else {
    u->unit_type = DW_UT_compile;
    abbrev_off = rd_n(&r, u->offset_size);
    u->addr_size = (unsigned)rd_n(&r, 1);
  }
  if (r.err || u->version < 2 || u->version > 5 || (u->addr_size != 4 && u->addr_size != 8))
    return -EINVAL;
  u->die = r.pos;
  /* The abbreviations are read after the unit: the unit's bytes stay in
   * .debug_info's window, a section of its own. */
  int rc = read_abbrevs(u, &inf->abbrev, abbrev_off);
  if (rc != 0) {
    pprt__dw_unit_free(u);
    return rc;
  }
  pprt__dw_die d;
  if (pprt__dw_die_at(u, u->die, &d) != 1) {
    pprt__dw_unit_free(u);
    return -EINVAL;
  }
  /* The bases first: the x forms of the unit DIE's other attributes need
   * them (DWARF 5 puts them anywhere in the DIE). */
  pprt__dw_value v;
  if (pprt__dw_die_attr(u, inf, &d, DW_AT_str_offsets_base, &v) == 1)
    u->str_offsets_base = v.u;
  else if (u->version >= 5)
    u->str_offsets_base = u->offset_size == 8 ? 16 : 8;
  if (pprt__dw_die_attr(u, inf, &d, DW_AT_addr_base, &v) == 1 ||
      pprt__dw_die_attr(u, inf, &d, DW_AT_GNU_addr_base, &v) == 1)
    u->addr_base = v.u;
  if (pprt__dw_die_attr(u, inf, &d, DW_AT_rnglists_base, &v) == 1)
    u->rnglists_base = v.u;
  if (pprt__dw_die_attr(u, inf, &d, DW_AT_low_pc, &v) == 1)
    u->low_pc = v.u;
  if (pprt__dw_die_attr(u, inf, &d, DW_AT_stmt_list, &v) == 1) {
    u->stmt_list = v.u;
    u->has_stmt_list = 1;
  }
  if (pprt__dw_die_attr(u, inf, &d, DW_AT_comp_dir, &v) == 1)
    u->comp_dir = v.str;
  if (pprt__dw_die_attr(u, inf, &d, DW_AT_name, &v) == 1)
    u->name = v.str;
  /* Strings read above point into string windows that later reads move. */
  u->comp_dir = u->comp_dir ? strdup(u->comp_dir) : NULL;
  u->name = u->name ? strdup(u->name) : NULL;
  /* The reads above may have moved no window of .debug_info: the unit's
   * bytes are still where u->bytes says. */
  return 0;
}

void pprt__dw_unit_free(pprt__dw_unit *u) {
  free(u->abbrevs);
  free(u->specs);
  free((char *)u->comp_dir);
  free((char *)u->name);
  memset(u, 0, sizeof *u);
}

/* ---- DIEs and their ranges ------------------------------------------------------------ */

int pprt__dw_die_at(const pprt__dw_unit *u, size_t pos, pprt__dw_die *d) {
  rd r = {u->bytes, pos, u->len, 0};
  uint64_t code = rd_uleb(&r);
  if (r.err)
    return -1;
  if (code == 0) {
    d->off = u->off + pos;
    d->ab = NULL;
    d->attrs = d->next = r.pos;
    return 0;
  }
  const pprt__dw_abbrev *ab = abbrev_for(u, code);
  if (ab == NULL)
    return -1;
  d->off = u->off + pos;
  d->ab = ab;
  d->attrs = r.pos;
  /* Skip the attributes to find the next DIE: read without the other
   * sections, which no value's size depends on. */
  for (uint32_t i = 0; i < ab->n && !r.err; i++) {
    const pprt__dw_attr_spec *s = &u->specs[ab->first + i];
    pprt__dw_value v;
    read_form(u, NULL, &r, s->form, s->implicit, &v);
  }
  if (r.err)
    return -1;
  d->next = r.pos;
  return 1;
}

int pprt__dw_die_attr(const pprt__dw_unit *u, pprt__dw_info *inf, const pprt__dw_die *d,
                      uint32_t at, pprt__dw_value *v) {
  rd r = {u->bytes, d->attrs, u->len, 0};
  for (uint32_t i = 0; i < d->ab->n && !r.err; i++) {
    const pprt__dw_attr_spec *s = &u->specs[d->ab->first + i];
    if (s->at == at) {
      read_form(u, inf, &r, s->form, s->implicit, v);
      return r.err ? 0 : 1;
    }
    pprt__dw_value skip; /* another attribute: read without its sections */
    read_form(u, NULL, &r, s->form, s->implicit, &skip);
  }
  return 0;
}

/* DWARF 5 range lists (.debug_rnglists) from byte off. */
static int rnglist(const pprt__dw_unit *u, pprt__dw_info *inf, uint64_t off,
                   void (*fn)(void *, uint64_t, uint64_t), void *ctx) {
  uint64_t base = u->low_pc;
  int n = 0;
  pprt__dw_section *s = &inf->rnglists;
  for (int guard = 0; guard < 100000; guard++) {
    /* An entry is at most 1 + two 10-byte ulebs or two addresses. */
    size_t len = off + 32 > s->size ? (size_t)(s->size - off) : 32;
    const uint8_t *p = off < s->size ? pprt__dw_section_get(s, off, len) : NULL;
    if (p == NULL)
      return -1;
    rd r = {p, 0, len, 0};
    unsigned kind = (unsigned)rd_n(&r, 1);
    uint64_t a = 0, b = 0;
    int emit = 0;
    switch (kind) {
    case DW_RLE_end_of_list:
      return n;
    case DW_RLE_base_addressx: {
      uint64_t i = rd_uleb(&r);
      const uint8_t *q =
          pprt__dw_section_get(&inf->addr, u->addr_base + i * u->addr_size, u->addr_size);
      if (q == NULL)
        return -1;
      rd o = {q, 0, u->addr_size, 0};
      base = rd_n(&o, u->addr_size);
      break;
    }
    case DW_RLE_startx_endx:
    case DW_RLE_startx_length: {
      uint64_t i = rd_uleb(&r), j = rd_uleb(&r);
      const uint8_t *q =
          pprt__dw_section_get(&inf->addr, u->addr_base + i * u->addr_size, u->addr_size);
      if (q == NULL)
        return -1;
      rd o = {q, 0, u->addr_size, 0};
      a = rd_n(&o, u->addr_size);
      if (kind == DW_RLE_startx_length) {
        b = a + j;
      } else {
        q = pprt__dw_section_get(&inf->addr, u->addr_base + j * u->addr_size, u->addr_size);
        if (q == NULL)
          return -1;
        o = (rd){q, 0, u->addr_size, 0};
        b = rd_n(&o, u->addr_size);
      }
      emit = 1;
      break;
    }
    case DW_RLE_offset_pair:
      a = base + rd_uleb(&r);
      b = base + rd_uleb(&r);
      emit = 1;
      break;
    case DW_RLE_base_address:
      base = rd_n(&r, u->addr_size);
      break;
    case DW_RLE_start_end:
      a = rd_n(&r, u->addr_size);
      b = rd_n(&r, u->addr_size);
      emit = 1;
      break;
    case DW_RLE_start_length:
      a = rd_n(&r, u->addr_size);
      b = a + rd_uleb(&r);
      emit = 1;
      break;
    default:
      return -1;
    }
    if (r.err)
      return -1;
    if (emit && b > a) {
      fn(ctx, a, b);
      n++;
    }
    off += r.pos;
  }
  return -1;
}

/* DWARF 2-4 range lists (.debug_ranges) from byte off. */
static int ranges_v4(const pprt__dw_unit *u, pprt__dw_info *inf, uint64_t off,
                     void (*fn)(void *, uint64_t, uint64_t), void *ctx) {
  uint64_t base = u->low_pc, all = u->addr_size == 8 ? ~(uint64_t)0 : 0xffffffffu;
  int n = 0;
  for (;; off += 2 * u->addr_size) {
    const uint8_t *p = pprt__dw_section_get(&inf->ranges, off, 2 * u->addr_size);
    if (p == NULL)
      return -1;
    rd r = {p, 0, 2 * u->addr_size, 0};
    uint64_t a = rd_n(&r, u->addr_size), b = rd_n(&r, u->addr_size);
    if (a == 0 && b == 0)
      return n;
    if (a == all) {
      base = b;
      continue;
    }
    if (b > a) {
      fn(ctx, base + a, base + b);
      n++;
    }
  }
}

int pprt__dw_die_ranges(const pprt__dw_unit *u, pprt__dw_info *inf, const pprt__dw_die *d,
                        void (*fn)(void *ctx, uint64_t lo, uint64_t hi), void *ctx) {
  pprt__dw_value lo, hi, rg;
  if (pprt__dw_die_attr(u, inf, d, DW_AT_low_pc, &lo) == 1 &&
      pprt__dw_die_attr(u, inf, d, DW_AT_high_pc, &hi) == 1) {
    uint64_t end = hi.form == DW_FORM_addr ? hi.u : lo.u + hi.u;
    if (end > lo.u)
      fn(ctx, lo.u, end);
    return end > lo.u;
  }
  if (pprt__dw_die_attr(u, inf, d, DW_AT_ranges, &rg) != 1)
    return 0;
  if (u->version >= 5) {
    uint64_t off = rg.u;
    if (rg.form == DW_FORM_rnglistx) {
      uint64_t at = u->rnglists_base + rg.u * u->offset_size;
      const uint8_t *p = pprt__dw_section_get(&inf->rnglists, at, u->offset_size);
      if (p == NULL)
        return -1;
      rd r = {p, 0, u->offset_size, 0};
      off = u->rnglists_base + rd_n(&r, u->offset_size);
    }
    return rnglist(u, inf, off, fn, ctx);
  }
  return ranges_v4(u, inf, rg.u, fn, ctx);
}

/* ---- the walk ---------------------------------------------------------------------------- */

typedef struct walker {
  const pprt__dw_unit *u;
  pprt__dw_info *inf;
  void (*fn)(void *ctx, uint64_t lo, uint64_t hi, uint64_t die, uint32_t depth);
  void *ctx;
  uint64_t die;
  uint32_t depth;
} walker;

static void walk_range(void *ctx, uint64_t lo, uint64_t hi) {
  walker *w = ctx;
  w->fn(w->ctx, lo, hi, w->die, w->depth);
}

/* The children of the DIE whose children start at pos; returns where the
 * list ends, or 0 when damaged. report 0: a subtree with no code (a type's
 * members), only passed over. */
static size_t walk_children(walker *w, size_t pos, uint32_t depth, int report) {
  for (;;) {
    pprt__dw_die d;
    int rc = pprt__dw_die_at(w->u, pos, &d);
    if (rc < 0)
      return 0;
    if (rc == 0)
      return d.next;
    pos = d.next;
    int inside = 0;
    switch (report ? d.ab->tag : 0) {
    case DW_TAG_subprogram:
    case DW_TAG_inlined_subroutine:
    case DW_TAG_entry_point:
      w->die = d.off;
      w->depth = depth;
      pprt__dw_die_ranges(w->u, w->inf, &d, walk_range, w);
      inside = 1;
      break;
    case DW_TAG_lexical_block:
    case DW_TAG_namespace:
    case DW_TAG_module:
    case DW_TAG_try_block:
    case DW_TAG_catch_block:
      inside = 1;
      break;
    default:
      break;
    }
    if (!d.ab->children)
      continue;
    if (!inside) {
      /* A subtree with no code: DW_AT_sibling, where given, skips it;
       * else it is read through, reporting nothing. */
      pprt__dw_value sib;
      if (pprt__dw_die_attr(w->u, NULL, &d, DW_AT_sibling, &sib) == 1 && sib.is_ref &&
          sib.u > d.off && sib.u - w->u->off < w->u->len) {
        pos = (size_t)(sib.u - w->u->off);
        continue;
      }
    }
    pos = walk_children(w, pos, depth + 1, report && inside);
    if (pos == 0)
      return 0;
  }
}

int pprt__dw_unit_walk(const pprt__dw_unit *u, pprt__dw_info *inf,
                       void (*fn)(void *ctx, uint64_t lo, uint64_t hi, uint64_t die,
                                  uint32_t depth),
                       void *ctx) {
  pprt__dw_die root;
  if (pprt__dw_die_at(u, u->die, &root) != 1)
    return -1;
  if (!root.ab->children)
    return 0;
  walker w = {u, inf, fn, ctx, 0, 0};
  return walk_children(&w, root.next, 0, 1) ? 0 : -1;
}

/* ---- names ------------------------------------------------------------------------------- */

int pprt__dw_die_integrate(const pprt__dw_unit *u, pprt__dw_info *inf, uint64_t off, uint32_t at,
                           pprt__dw_value *v, const pprt__dw_refs *refs) {
  /* DW_AT_abstract_origin and DW_AT_specification lead from an inlined
   * instance or an out-of-line definition to the DIE with the name; a
   * few steps at most (instance, abstract definition, declaration). */
  int alt = 0;
  for (int step = 0; step < 4; step++) {
    if (alt || off < u->off || off - u->off >= u->len) {
      /* Another unit's DIE (DW_FORM_ref_addr), or the alternate file's. */
      if (refs == NULL || (u = refs->unit_at(refs->ctx, alt, off, &inf)) == NULL)
        return 0;
      alt = 0; /* offsets within the unit found are its file's */
    }
    pprt__dw_die d;
    if (off < u->off || off - u->off >= u->len || pprt__dw_die_at(u, off - u->off, &d) != 1)
      return 0;
    if (pprt__dw_die_attr(u, inf, &d, at, v) == 1)
      return 1;
    pprt__dw_value ref;
    if ((pprt__dw_die_attr(u, inf, &d, DW_AT_abstract_origin, &ref) != 1 &&
         pprt__dw_die_attr(u, inf, &d, DW_AT_specification, &ref) != 1) ||
        !ref.is_ref)
      return 0;
    off = ref.u;
    alt = ref.is_ref == PPRT__DW_REF_ALT;
  }
  return 0;
}
