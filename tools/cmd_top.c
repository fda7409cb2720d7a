/* `pprt top` and `pprt collapse`: a profile as a table of functions, and
 * as folded stacks for other flame graph tools. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

static const char top_usage[] =
    "usage: pprt top FILE [-n N] [--cum] [--lines] [--sample-index NAME]\n"
    "\n"
    "Prints the functions of a pprof profile (pprt's, Go's runtime/pprof, any\n"
    "pprof writer's; gzip'd or not) with their flat and cumulative values, like\n"
    "go tool pprof -top.\n"
    "\n"
    "  -n N                  rows to print (default 20; 0: all)\n"
    "  --cum                 sort by cumulative value instead of flat\n"
    "  --lines               one row per source line (\"name file.c:42\"), as\n"
    "                        go tool pprof -lines; inlined functions have rows\n"
    "                        of their own either way\n"
    "  --sample-index NAME   the value to show: a sample type (cpu, samples,\n"
    "                        alloc_space, inuse_objects, ...) or its index;\n"
    "                        default: the profile's default type, else its last\n"
    "\n"
    "Exit status: 0 ok, 2 bad usage or unknown sample type, 3 FILE unreadable or\n"
    "not a profile.\n";

static const char collapse_usage[] =
    "usage: pprt collapse FILE [-o OUT] [--lines] [--sample-index NAME]\n"
    "\n"
    "Writes the profile as folded stacks, one line per distinct stack, root\n"
    "first: \"main;work;hash 42\" (flamegraph.pl, speedscope, Perfetto and\n"
    "inferno read them). The numbers are the chosen sample type's values and\n"
    "sum to the profile's total.\n"
    "\n"
    "  -o OUT                write to OUT instead of standard output\n"
    "  --lines               frames with their source line: \"hash hash.c:42\"\n"
    "  --sample-index NAME   as for pprt top\n"
    "\n"
    "Exit status: 0 ok, 1 OUT cannot be written, 2 bad usage, 3 FILE unreadable\n"
    "or not a profile.\n";

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
    } else if (missing) {
      return cli_error(CLI_EUSAGE, cmd, "%s needs a value (see pprt %s --help)", a, cmd);
    } else if (strchr(allow, 'c') && strcmp(a, "--cum") == 0) {
      o->cum = 1;
    } else if (strchr(allow, 'l') && strcmp(a, "--lines") == 0) {
      o->lines = 1;
    } else if (a[0] == '-' && a[1] != '\0') {
      return cli_error(CLI_EUSAGE, cmd, "unknown option '%s' (see pprt %s --help)", a, cmd);
    } else if (o->file) {
      return cli_error(CLI_EUSAGE, cmd, "one FILE only, got '%s' and '%s'", o->file, a);
    } else {
      o->file = a;
    }
  }
  if (o->file == NULL)
    return cli_error(CLI_EUSAGE, cmd, "missing FILE (see pprt %s --help)", cmd);
  return -1;
}

int cli_cmd_top(int argc, char **argv) {
  cli_view_opts o;
  int rc = cli_parse_view(argc, argv, "top", top_usage, "ncl", &o);
  if (rc >= 0)
    return rc;
  cli_profile cp;
  rc = cli_profile_load(&cp, "top", o.file, o.lines ? CLI_VIEW_LINES : 0);
  if (rc == CLI_OK && o.sample_index)
    rc = cli_profile_select(&cp, "top", o.sample_index);
  if (rc == CLI_OK && cli_print_top(stdout, &cp, (size_t)o.n, o.cum, 1) != CLI_OK)
    rc = cli_error(CLI_EFAIL, "top", "%s: out of memory", o.file);
  cli_profile_free(&cp);
  if (rc == CLI_OK && fflush(stdout) != 0)
    rc = cli_error(CLI_EFAIL, "top", "writing the table failed");
  return rc;
}

/* ---- collapse ---------------------------------------------------------------------- */

typedef struct folded {
  char *stack;
  int64_t value;
} folded;

typedef struct fold_acc {
  const cli_profile *cp;
  folded *v;
  size_t n, cap;
} fold_acc;

static int fold_add(void *ctx, const uint32_t *st, size_t n, int64_t value) {
  fold_acc *a = ctx;
  if (n == 0)
    return 0;
  size_t len = 0;
  for (size_t i = 0; i < n; i++)
    len += strlen(a->cp->names[st[i]]) + 1;
  char *s = malloc(len);
  if (s == NULL)
    return -1;
  char *w = s;
  for (size_t i = 0; i < n; i++) {
    size_t l = strlen(a->cp->names[st[i]]);
    memcpy(w, a->cp->names[st[i]], l);
    w += l;
    *w++ = i + 1 < n ? ';' : '\0';
  }
  if (a->n == a->cap) {
    size_t nc = a->cap ? a->cap * 2 : 1024;
    folded *nv = realloc(a->v, nc * sizeof *nv);
    if (nv == NULL) {
      free(s);
      return -1;
    }
    a->v = nv;
    a->cap = nc;
  }
  a->v[a->n++] = (folded){s, value};
  return 0;
}

static int cmp_folded(const void *x, const void *y) {
  return strcmp(((const folded *)x)->stack, ((const folded *)y)->stack);
}

int cli_cmd_collapse(int argc, char **argv) {
  cli_view_opts o;
  int rc = cli_parse_view(argc, argv, "collapse", collapse_usage, "ol", &o);
  if (rc >= 0)
    return rc;
  cli_profile cp;
  rc = cli_profile_load(&cp, "collapse", o.file, o.lines ? CLI_VIEW_LINES : 0);
  if (rc == CLI_OK && o.sample_index)
    rc = cli_profile_select(&cp, "collapse", o.sample_index);
  if (rc != CLI_OK) {
    cli_profile_free(&cp);
    return rc;
  }
  fold_acc a = {&cp, NULL, 0, 0};
  if (cli_profile_stacks(&cp, fold_add, &a) != 0) {
    rc = cli_error(CLI_EFAIL, "collapse", "%s: out of memory", o.file);
    goto out;
  }
  /* Samples that differ only in labels fold into one line. */
  qsort(a.v, a.n, sizeof *a.v, cmp_folded);
  FILE *out = cli_open_output(o.out ? o.out : "-");
  if (out == NULL) {
    rc = cli_error(CLI_EFAIL, "collapse", "%s: cannot write: %s", o.out, strerror(errno));
    goto out;
  }
  for (size_t i = 0; i < a.n;) {
    int64_t sum = 0;
    size_t j = i;
    for (; j < a.n && strcmp(a.v[j].stack, a.v[i].stack) == 0; j++)
      sum += a.v[j].value;
    if (sum != 0)
      fprintf(out, "%s %lld\n", a.v[i].stack, (long long)sum);
    i = j;
  }
  if ((out == stdout ? fflush(out) : fclose(out)) != 0)
    rc = cli_error(CLI_EFAIL, "collapse", "%s: writing failed: %s", o.out ? o.out : "stdout",
                   strerror(errno));
out:
  for (size_t i = 0; i < a.n; i++)
    free(a.v[i].stack);
  free(a.v);
  cli_profile_free(&cp);
  return rc;
}
