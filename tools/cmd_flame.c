/* `pprt flame`: a profile as a self-contained HTML flame graph.
 *
 * The stacks become a tree (one node per distinct path from the root),
 * written as compact JSON into the page template tools/flame.html, which
 * the build embeds (tools/embed.cmake): the page needs no network and no
 * other file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

extern const unsigned char cli_flame_html[];
extern const unsigned long cli_flame_html_len;

static const char usage[] =
    "usage: pprt flame FILE [-o OUT.html] [--lines] [--sample-index NAME]\n"
    "\n"
    "Writes a flame graph of a pprof profile as one self-contained HTML file\n"
    "(inline script and style, nothing fetched): the root at the top, widths in\n"
    "the chosen value, a search box (regular expression) and click-to-zoom.\n"
    "Functions inlined into their callers have frames of their own, marked\n"
    "\"(inline)\"; a frame's tooltip says where it is (file:line).\n"
    "\n"
    "  -o OUT.html           where to write it (default: FILE's name with .html\n"
    "                        for .pb.gz/.pb/.pprof, e.g. cpu.pb.gz -> cpu.html;\n"
    "                        \"-\" for standard output)\n"
    "  --lines               one frame per source line (\"name file.c:42\")\n"
    "  --sample-index NAME   as for pprt top\n"
    "\n"
    "Exit status: 0 ok, 1 OUT cannot be written, 2 bad usage, 3 FILE unreadable\n"
    "or not a profile.\n";

/* A node: a name under a parent; children found through a hash map keyed
 * by (parent, name). */
typedef struct node {
  uint32_t name, parent, first_child, next_sibling;
  int64_t value;
} node;

typedef struct tree {
  node *v;
  size_t n, cap;
  uint32_t *slots; /* node index + 1 */
  size_t nslots;
} tree;

static size_t slot_of(const tree *t, uint32_t parent, uint32_t name) {
  uint64_t h = ((uint64_t)parent << 32 | name) * 0x9e3779b97f4a7c15ull;
  return (size_t)(h >> 20) & (t->nslots - 1);
}

static int grow(tree *t) {
  size_t ns = t->nslots ? t->nslots * 2 : 4096;
  uint32_t *slots = calloc(ns, sizeof *slots);
  if (slots == NULL)
    return -1;
  free(t->slots);
  t->slots = slots;
  t->nslots = ns;
  for (size_t i = 1; i < t->n; i++) {
    size_t j = slot_of(t, t->v[i].parent, t->v[i].name);
    while (t->slots[j])
      j = (j + 1) & (ns - 1);
    t->slots[j] = (uint32_t)i + 1;
  }
  return 0;
}

/* The child of parent called name, created if new; UINT32_MAX on OOM. */
static uint32_t child(tree *t, uint32_t parent, uint32_t name) {
  if ((t->n + 1) * 2 > t->nslots && grow(t) != 0)
    return UINT32_MAX;
  size_t j = slot_of(t, parent, name);
  for (; t->slots[j]; j = (j + 1) & (t->nslots - 1)) {
    const node *c = &t->v[t->slots[j] - 1];
    if (c->parent == parent && c->name == name)
      return t->slots[j] - 1;
  }
  if (t->n == t->cap) {
    size_t nc = t->cap * 2;
    node *nv = realloc(t->v, nc * sizeof *nv);
    if (nv == NULL)
      return UINT32_MAX;
    t->v = nv;
    t->cap = nc;
  }
  uint32_t id = (uint32_t)t->n++;
  t->v[id] = (node){name, parent, UINT32_MAX, t->v[parent].first_child, 0};
  t->v[parent].first_child = id;
  t->slots[j] = id + 1;
  return id;
}

static int tree_add(void *ctx, const uint32_t *st, size_t n, int64_t value) {
  tree *t = ctx;
  uint32_t at = 0;
  t->v[0].value += value;
  for (size_t i = 0; i < n; i++) {
    /* Names are shifted by one: 0 is the root's "all". */
    at = child(t, at, st[i] + 1);
    if (at == UINT32_MAX)
      return -1;
    t->v[at].value += value;
  }
  return 0;
}

/* JSON string contents; '<', '>' and '&' escaped so no name can end the
 * script element. */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\')
      fprintf(f, "\\%c", *c);
    else if (*c < 0x20 || *c == '<' || *c == '>' || *c == '&')
      fprintf(f, "\\u%04x", *c);
    else
      fputc(*c, f);
  }
  fputc('"', f);
}

static const tree *g_tree;

static int cmp_value(const void *a, const void *b) {
  int64_t x = g_tree->v[*(const uint32_t *)a].value, y = g_tree->v[*(const uint32_t *)b].value;
  if (x != y)
    return x > y ? -1 : 1;
  return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* [name, value, [children...]], children widest first. */
static int emit(FILE *f, const tree *t, uint32_t id) {
  const node *nd = &t->v[id];
  fprintf(f, "[%u,%lld", nd->name, (long long)nd->value);
  size_t nk = 0;
  for (uint32_t c = nd->first_child; c != UINT32_MAX; c = t->v[c].next_sibling)
    nk++;
  if (nk) {
    uint32_t *kids = malloc(nk * sizeof *kids);
    if (kids == NULL)
      return -1;
    nk = 0;
    for (uint32_t c = nd->first_child; c != UINT32_MAX; c = t->v[c].next_sibling)
      kids[nk++] = c;
    qsort(kids, nk, sizeof *kids, cmp_value);
    fputs(",[", f);
    for (size_t i = 0; i < nk; i++) {
      if (i)
        fputc(',', f);
      if (emit(f, t, kids[i]) != 0) {
        free(kids);
        return -1;
      }
    }
    fputc(']', f);
    free(kids);
  }
  fputc(']', f);
  return 0;
}

static void html_escaped(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '<')
      fputs("&lt;", f);
    else if (*s == '>')
      fputs("&gt;", f);
    else if (*s == '&')
      fputs("&amp;", f);
    else
      fputc(*s, f);
  }
}

/* Writes the page: the template with its title and data markers filled. */
static int write_page(FILE *f, const cli_profile *cp, const tree *t, const char *title) {
  const char *tpl = (const char *)cli_flame_html;
  const char *tmark = strstr(tpl, "@PPRT_TITLE@"), *dmark = strstr(tpl, "@PPRT_DATA@");
  if (!tmark || !dmark || dmark < tmark)
    return -1;
  fwrite(tpl, 1, (size_t)(tmark - tpl), f);
  html_escaped(f, title);
  const char *after_t = tmark + strlen("@PPRT_TITLE@");
  fwrite(after_t, 1, (size_t)(dmark - after_t), f);
  fputs("{\"title\":", f);
  json_str(f, title);
  fputs(",\"type\":", f);
  json_str(f, cp->type);
  fputs(",\"unit\":", f);
  json_str(f, cp->unit);
  fprintf(f, ",\"total\":%lld,\"names\":[\"all\"", (long long)t->v[0].value);
  for (size_t i = 0; i < cp->nnames; i++) {
    fputc(',', f);
    json_str(f, cp->names[i]);
  }
  fputs("],\"where\":[null", f);
  for (size_t i = 0; i < cp->nnames; i++) {
    fputc(',', f);
    if (cp->where[i])
      json_str(f, cp->where[i]);
    else
      fputs("null", f);
  }
  fputs("],\"root\":", f);
  g_tree = t;
  if (emit(f, t, 0) != 0)
    return -1;
  fputc('}', f);
  const char *after_d = dmark + strlen("@PPRT_DATA@");
  fputs(after_d, f);
  return 0;
}

/* cpu.pb.gz -> cpu.html */
static char *default_output(const char *in) {
  size_t n = strlen(in);
  char *out = malloc(n + 6);
  if (out == NULL)
    return NULL;
  memcpy(out, in, n + 1);
  static const char *const exts[] = {".pb.gz", ".pprof.gz", ".pb", ".pprof", ".gz"};
  for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) {
    size_t e = strlen(exts[i]);
    if (n > e && strcmp(out + n - e, exts[i]) == 0) {
      out[n - e] = '\0';
      break;
    }
  }
  strcat(out, ".html");
  return out;
}

int cli_cmd_flame(int argc, char **argv) {
  cli_view_opts o;
  int rc = cli_parse_view(argc, argv, "flame", usage, "ol", &o);
  if (rc >= 0)
    return rc;
  cli_profile cp;
  rc = cli_profile_load(&cp, "flame", o.file, CLI_VIEW_INLINE | (o.lines ? CLI_VIEW_LINES : 0));
  if (rc == CLI_OK && o.sample_index)
    rc = cli_profile_select(&cp, "flame", o.sample_index);
  if (rc != CLI_OK) {
    cli_profile_free(&cp);
    return rc;
  }
  tree t;
  memset(&t, 0, sizeof t);
  t.cap = 1024;
  t.v = malloc(t.cap * sizeof *t.v);
  char *outpath = o.out ? NULL : default_output(o.file);
  const char *path = o.out ? o.out : outpath;
  if (t.v == NULL || path == NULL) {
    rc = cli_error(CLI_EFAIL, "flame", "out of memory");
    goto out;
  }
  t.v[0] = (node){0, UINT32_MAX, UINT32_MAX, UINT32_MAX, 0};
  t.n = 1;
  if (grow(&t) != 0 || cli_profile_stacks(&cp, tree_add, &t) != 0) {
    rc = cli_error(CLI_EFAIL, "flame", "%s: out of memory", o.file);
    goto out;
  }
  FILE *f = cli_open_output(path);
  if (f == NULL) {
    rc = cli_error(CLI_EFAIL, "flame", "%s: cannot write: %s", path, strerror(errno));
    goto out;
  }
  const char *base = strrchr(o.file, '/');
  char title[512];
  snprintf(title, sizeof title, "%s: %s", base ? base + 1 : o.file, cp.type);
  int wrc = write_page(f, &cp, &t, title);
  if ((f == stdout ? fflush(f) : fclose(f)) != 0 || wrc != 0)
    rc = cli_error(CLI_EFAIL, "flame", "%s: writing failed: %s", path,
                   wrc ? "out of memory" : strerror(errno));
  else if (f != stdout)
    fprintf(stderr, "pprt flame: wrote %s\n", path);
out:
  free(outpath);
  free(t.v);
  free(t.slots);
  cli_profile_free(&cp);
  return rc;
}
