/* `pprt top` and `pprt collapse`: a profile as a table of functions, and
 * as folded stacks for other flame graph tools. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

static const char top_usage[] =
    "usage: pprt top FILE... [-n N] [--cum] [--lines] [--by KEY] [--sample-index NAME]\n"
    "\n"
    "Prints the functions of a pprof profile (pprt's, Go's runtime/pprof, any\n"
    "pprof writer's; gzip'd or not) with their flat and cumulative values, like\n"
    "go tool pprof -top. Several FILEs are merged first, with pprof's rules:\n"
    "they must have the same sample types.\n"
    "\n"
    "  -n N                  rows to print (default 20; 0: all)\n"
    "  --cum                 sort by cumulative value instead of flat\n"
    "  --lines               one row per source line (\"name file.c:42\"), as\n"
    "                        go tool pprof -lines; inlined functions have rows\n"
    "                        of their own either way\n"
    "  --by KEY              the value per sample label KEY instead of per\n"
    "                        function or line: process (per program, with how\n"
    "                        many pids ran it), pid (per process), thread_name,\n"
    "                        ...; --lines and --cum do not change this table\n"
    "  --sample-index NAME   the value to show: a sample type (cpu, samples,\n"
    "                        alloc_space, inuse_objects, ...) or its index;\n"
    "                        default: the profile's default type, else its last\n"
    "\n"
    "Exit status: 0 ok, 2 bad usage or unknown sample type, 3 FILE unreadable, not\n"
    "a profile, or beyond the views' bounds (stacks deeper than 4096 frames, or\n"
    "more than 16777216 frames in all; inlined frames count).\n";

static const char collapse_usage[] =
    "usage: pprt collapse FILE... [-o OUT] [--lines] [--by KEY] [--sample-index NAME]\n"
    "\n"
    "Writes the profile as folded stacks, one line per distinct stack, root\n"
    "first: \"main;work;hash 42\" (flamegraph.pl, speedscope, Perfetto and\n"
    "inferno read them). The numbers are the chosen sample type's values and\n"
    "sum to the profile's total. Several FILEs are merged first, as for top.\n"
    "\n"
    "  -o OUT                write to OUT instead of standard output\n"
    "  --lines               frames with their source line: \"hash hash.c:42\"\n"
    "  --by KEY              a root frame \"KEY VALUE\" per value of sample label\n"
    "                        KEY: --by process puts each program at the root;\n"
    "                        with --lines, the frames under it have their lines\n"
    "  --sample-index NAME   as for pprt top\n"
    "\n"
    "Exit status: 0 ok, 1 OUT cannot be written, 2 bad usage, 3 FILE unreadable,\n"
    "not a profile, or beyond the views' bounds (as for pprt top; and folded\n"
    "text longer than 1 GiB).\n";

int cli_parse_view(int argc, char **argv, const char *cmd, const char *usage, const char *allow,
                   cli_view_opts *o) {
  memset(o, 0, sizeof *o);
  o->n = 20;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    int missing = 0;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      return CLI_OK;
    }
    if ((v = cli_option_value(argc, argv, &i, "--sample-index", &missing))) {
      o->sample_index = v;
    } else if (strchr(allow, 'n') && (v = cli_option_value(argc, argv, &i, "-n", &missing))) {
      if (cli_parse_long(v, 0, 1000000000, &o->n) != 0)
        return cli_error(CLI_EUSAGE, cmd, "-n %s: not a number of rows", v);
    } else if (strchr(allow, 'o') && (v = cli_option_value(argc, argv, &i, "-o", &missing))) {
      o->out = v;
    } else if (strchr(allow, 'b') && (v = cli_option_value(argc, argv, &i, "--by", &missing))) {
      if (!*v)
        return cli_error(CLI_EUSAGE, cmd, "--by needs a label key (process, pid, thread_name...)");
      o->by = v;
    } else if (missing) {
      return cli_error(CLI_EUSAGE, cmd, "%s needs a value (see pprt %s --help)", a, cmd);
    } else if (strchr(allow, 'c') && strcmp(a, "--cum") == 0) {
      o->cum = 1;
    } else if (strchr(allow, 'l') && strcmp(a, "--lines") == 0) {
      o->lines = 1;
    } else if (a[0] == '-' && a[1] != '\0') {
      return cli_error(CLI_EUSAGE, cmd, "unknown option '%s' (see pprt %s --help)", a, cmd);
    } else {
      if (o->files == NULL && (o->files = calloc((size_t)argc, sizeof *o->files)) == NULL)
        return cli_error(CLI_EFAIL, cmd, "out of memory");
      o->files[o->nfiles++] = argv[i];
      o->file = o->files[0];
    }
  }
  if (o->file == NULL)
    return cli_error(CLI_EUSAGE, cmd, "missing FILE (see pprt %s --help)", cmd);
  return -1;
}

int cli_load_view(int argc, char **argv, const char *cmd, const char *usage, const char *allow,
                  int group, unsigned flags, cli_view_opts *o, cli_profile *cp) {
  memset(cp, 0, sizeof *cp);
  int rc = cli_parse_view(argc, argv, cmd, usage, allow, o);
  if (rc < 0) {
    rc = cli_profile_load_many(cp, cmd, o->files, o->nfiles, group ? o->by : NULL, o->sample_index,
                               flags | (o->lines ? CLI_VIEW_LINES : 0));
    if (rc == CLI_OK)
      rc = -1;
    else
      cli_profile_free(cp);
  }
  free(o->files);
  o->files = NULL; /* o->file still points into argv */
  return rc;
}

int cli_cmd_top(int argc, char **argv) {
  cli_view_opts o;
  cli_profile cp;
  int rc = cli_load_view(argc, argv, "top", top_usage, "nclb", 0, 0, &o, &cp);
  if (rc >= 0)
    return rc;
  rc = CLI_OK;
  if (o.by) {
    if (cli_print_by(stdout, &cp, o.by, (size_t)o.n, 1) != CLI_OK)
      rc = cli_error(CLI_EFAIL, "top", "%s: out of memory", o.file);
  } else if (cli_print_top(stdout, &cp, (size_t)o.n, o.cum, 1) != CLI_OK) {
    rc = cli_error(CLI_EFAIL, "top", "%s: out of memory", o.file);
  }
  cli_profile_free(&cp);
  if (rc == CLI_OK && fflush(stdout) != 0)
    rc = cli_error(CLI_EFAIL, "top", "writing the table failed");
  return rc;
}

/* ---- collapse ---------------------------------------------------------------------- */

/* A line for each node where stacks end: the names from the root down to
 * it, and the value of the samples that end there (samples that differ
 * only in labels share the node, so they fold into one line). */
static int fold_enter(void *ctx, const cli_tree *t, const uint32_t *path, size_t depth) {
  FILE *f = ((void **)ctx)[0];
  const cli_profile *cp = ((void **)ctx)[1];
  int64_t self = t->v[path[depth]].self;
  if (depth == 0 || self == 0)
    return 0;
  for (size_t i = 1; i <= depth; i++) {
    fputs(cp->names[t->v[path[i]].name - 1], f);
    fputc(i < depth ? ';' : ' ', f);
  }
  fprintf(f, "%lld\n", (long long)self);
  return 0;
}

static int fold_leave(void *ctx, const cli_tree *t, uint32_t node) {
  (void)ctx, (void)t, (void)node;
  return 0;
}

/* The length of the folded text, counted before any of it is written:
 * each node's path (names, separators) is its parent's plus its own. */
static uint64_t folded_bytes(const cli_tree *t, const cli_profile *cp, uint64_t max,
                             uint64_t *path_len) {
  uint64_t total = 0;
  path_len[0] = 0;
  for (size_t i = 1; i < t->n && total <= max; i++) {
    const cli_tree_node *nd = &t->v[i];
    path_len[i] = path_len[nd->parent] + strlen(cp->names[nd->name - 1]) + 1;
    if (nd->self != 0) /* the line: path, value (at most 20 digits), newline */
      total += path_len[i] + 21;
  }
  return total;
}

int cli_write_collapse(FILE *out, const cli_profile *cp, uint64_t max_bytes) {
  cli_tree t;
  int rc = cli_tree_build(&t, cp);
  uint64_t *path_len = rc == 0 ? malloc(t.n * sizeof *path_len) : NULL;
  if (rc == 0 && path_len == NULL)
    rc = -ENOMEM;
  /* Nodes come after their parents (cli_tree_build adds them root down). */
  if (rc == 0 && folded_bytes(&t, cp, max_bytes, path_len) > max_bytes)
    rc = -EFBIG;
  free(path_len);
  if (rc == 0)
    rc = cli_tree_order(&t, cp, CLI_TREE_BY_NAME);
  if (rc == 0) {
    void *ctx[2] = {out, (void *)cp};
    rc = cli_tree_walk(&t, (cli_tree_visit){fold_enter, fold_leave, ctx});
  }
  cli_tree_free(&t);
  return rc < 0 ? rc : rc != 0 ? -ENOMEM : 0;
}

int cli_cmd_collapse(int argc, char **argv) {
  cli_view_opts o;
  cli_profile cp;
  int rc = cli_load_view(argc, argv, "collapse", collapse_usage, "olb", 1, 0, &o, &cp);
  if (rc >= 0)
    return rc;
  rc = CLI_OK;
  FILE *out = cli_open_output(o.out ? o.out : "-");
  if (out == NULL) {
    rc = cli_error(CLI_EFAIL, "collapse", "%s: cannot write: %s", o.out, strerror(errno));
    goto out;
  }
  int wrc = cli_write_collapse(out, &cp, CLI_COLLAPSE_MAX_BYTES);
  if ((out == stdout ? fflush(out) : fclose(out)) != 0 || wrc == -ENOMEM)
    rc = cli_error(CLI_EFAIL, "collapse", "%s: writing failed: %s", o.out ? o.out : "stdout",
                   wrc ? "out of memory" : strerror(errno));
  else if (wrc == -EFBIG)
    rc = cli_error(CLI_EINPUT, "collapse",
                   "%s: the folded stacks would be more than %llu bytes, more than pprt "
                   "collapse writes",
                   o.file, (unsigned long long)CLI_COLLAPSE_MAX_BYTES);
out:
  cli_profile_free(&cp);
  return rc;
}
