/* `pprt flame`: a profile as a self-contained HTML flame graph.
 *
 * The stacks become a tree (tools/stack_tree.c: one node per distinct path
 * from the root), written as compact JSON into the page template tools/flame.html, which
 * the build embeds (tools/embed.cmake): the page needs no network and no
 * other file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "read/json.h"
#include "tools/cli.h"

extern const unsigned char cli_flame_html[];
extern const unsigned long cli_flame_html_len;

static const char usage[] =
    "usage: pprt flame FILE... [-o OUT.html] [--lines] [--by KEY] [--sample-index NAME]\n"
    "\n"
    "Writes a flame graph of a pprof profile as one self-contained HTML file\n"
    "(inline script and style, nothing fetched): the root at the top, widths in\n"
    "the chosen value, a search box (regular expression) and click-to-zoom.\n"
    "Functions inlined into their callers have frames of their own, marked\n"
    "\"(inline)\"; a frame's tooltip says where it is (file:line). Several FILEs\n"
    "are merged first, as for pprt top (named after the first).\n"
    "\n"
    "  --by KEY              a root frame \"KEY VALUE\" per value of sample label\n"
    "                        KEY: --by process groups the stacks by program\n"
    "                        (with --lines, the frames under it have lines)\n"
    "  -o OUT.html           where to write it (default: FILE's name with .html\n"
    "                        for .pb.gz/.pb/.pprof, e.g. cpu.pb.gz -> cpu.html;\n"
    "                        \"-\" for standard output)\n"
    "  --lines               one frame per source line (\"name file.c:42\")\n"
    "  --sample-index NAME   as for pprt top\n"
    "\n"
    "Exit status: 0 ok, 1 OUT cannot be written, 2 bad usage, 3 FILE unreadable,\n"
    "not a profile, or beyond the views' bounds (as for pprt top).\n";

static void file_put(void *ctx, const char *s, size_t n) {
  fwrite(s, 1, n, ctx);
}

/* A JSON string; '<', '>' and '&' escaped so no name can end the script
 * element. */
static void json_str(FILE *f, const char *s) {
  pprt__json_string(s, strlen(s), PPRT__JSON_HTML, file_put, f);
}

/* The tree as nested arrays, [name, value, [children...]], children
 * widest first: brackets open on the way down and close on the way up. */
static int emit_enter(void *ctx, const cli_tree *t, const uint32_t *path, size_t depth) {
  FILE *f = ctx;
  uint32_t at = path[depth];
  if (depth > 0 && t->kids[t->kid_at[path[depth - 1]]] != at)
    fputc(',', f);
  fprintf(f, "[%u,%lld", t->v[at].name, (long long)t->v[at].value);
  if (t->kid_at[at + 1] > t->kid_at[at])
    fputs(",[", f);
  return 0;
}

static int emit_leave(void *ctx, const cli_tree *t, uint32_t at) {
  FILE *f = ctx;
  fputs(t->kid_at[at + 1] > t->kid_at[at] ? "]]" : "]", f);
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

int cli_write_flame(FILE *f, const cli_profile *cp, const char *title) {
  const char *tpl = (const char *)cli_flame_html;
  const char *tmark = strstr(tpl, "@PPRT_TITLE@"), *dmark = strstr(tpl, "@PPRT_DATA@");
  if (!tmark || !dmark || dmark < tmark)
    return -1;
  cli_tree t;
  if (cli_tree_build(&t, cp) != 0 || cli_tree_order(&t, cp, CLI_TREE_BY_VALUE) != 0) {
    cli_tree_free(&t);
    return -1;
  }
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
  fprintf(f, ",\"total\":%lld,\"names\":[\"all\"", (long long)t.v[0].value);
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
  int rc = cli_tree_walk(&t, (cli_tree_visit){emit_enter, emit_leave, f});
  cli_tree_free(&t);
  if (rc != 0)
    return -1;
  fputc('}', f);
  const char *after_d = dmark + strlen("@PPRT_DATA@");
  fputs(after_d, f);
  return 0;
}

/* cpu.pb.gz -> cpu.html */
static char *default_output(const char *in) {
  static const char *const exts[] = {".pb.gz", ".pprof.gz", ".pb", ".pprof", ".gz"};
  return cli_output_name(in, exts, sizeof exts / sizeof exts[0], ".html");
}

int cli_cmd_flame(int argc, char **argv) {
  cli_view_opts o;
  cli_profile cp;
  int rc = cli_load_view(argc, argv, "flame", usage, "olb", 1, CLI_VIEW_INLINE, &o, &cp);
  if (rc >= 0)
    return rc;
  rc = CLI_OK;
  char *outpath = o.out ? NULL : default_output(o.file);
  const char *path = o.out ? o.out : outpath;
  if (path == NULL) {
    rc = cli_error(CLI_EFAIL, "flame", "out of memory");
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
  int wrc = cli_write_flame(f, &cp, title);
  if ((f == stdout ? fflush(f) : fclose(f)) != 0 || wrc != 0)
    rc = cli_error(CLI_EFAIL, "flame", "%s: writing failed: %s", path,
                   wrc ? "out of memory" : strerror(errno));
  else if (f != stdout)
    fprintf(stderr, "pprt flame: wrote %s\n", path);
out:
  free(outpath);
  cli_profile_free(&cp);
  return rc;
}
