/* Several profiles as one, and profiles broken down by a label: the parts
 * of `pprt top`, `flame` and `collapse` that read process trees (the
 * labels core/process.h puts on every sample: pid, process, ppid).
 *
 * Divisions: loading several as one; the --by table. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/profile.h"
#include "read/profile_decode.h"
#include "tools/cli.h"
#include "tools/merge.h"

/* ---- several as one ------------------------------------------------------------------ */

int cli_profile_load_many(cli_profile *cp, const char *cmd, char *const *paths, size_t n,
                          const char *group_by, const char *type, unsigned flags) {
  memset(cp, 0, sizeof *cp);
  if (n == 1 && group_by == NULL)
    return cli_profile_load(cp, cmd, paths[0], type, flags);
  cli_merge *m = cli_merge_new();
  if (m == NULL || (group_by && cli_merge_group_by(m, group_by) != CLI_OK)) {
    cli_merge_free(m);
    return cli_error(CLI_EFAIL, cmd, "out of memory");
  }
  int rc = CLI_OK;
  /* One input decoded at a time: memory is the merge's and one file's. */
  for (size_t i = 0; i < n && rc == CLI_OK; i++) {
    Pprt__Profile *p;
    rc = cli_profile_decode_file(cmd, paths[i], &p);
    if (rc == CLI_OK)
      rc = cli_merge_add(m, cmd, p, paths[i]);
    if (p)
      pprt__profile_decoded_free(p);
  }
  uint8_t *data = NULL;
  size_t len = 0;
  if (rc == CLI_OK && cli_merge_pack(m, &data, &len) != CLI_OK)
    rc = cli_error(CLI_EFAIL, cmd, "out of memory merging the profiles");
  cli_merge_free(m);
  if (rc == CLI_OK)
    rc = cli_profile_load_mem(cp, cmd, paths[0], data, len, type, flags);
  free(data);
  return rc;
}

/* ---- the --by table ------------------------------------------------------------------ */

typedef struct by_row {
  char *name;
  int64_t value;
  size_t nsamples;
  int64_t *pids; /* distinct pids seen (key "process") */
  size_t npids, pids_cap;
} by_row;

static const Pprt__Label *find_label(const Pprt__Profile *p, const Pprt__Sample *s,
                                     const char *key) {
  for (size_t i = 0; i < s->n_label; i++)
    if (strcmp(cli_str(p, s->label[i]->key), key) == 0)
      return s->label[i];
  return NULL;
}

/* The row name of sample s: the label's value; for "pid", with the
 * process's name. */
static void row_name(char *buf, size_t len, const Pprt__Profile *p, const Pprt__Sample *s,
                     const char *key) {
  const Pprt__Label *l = find_label(p, s, key);
  if (l == NULL) {
    snprintf(buf, len, "(no %s label)", key);
    return;
  }
  if (l->str) {
    snprintf(buf, len, "%s", cli_str(p, l->str));
    return;
  }
  const Pprt__Label *name = strcmp(key, "pid") == 0 ? find_label(p, s, "process") : NULL;
  if (name && name->str)
    snprintf(buf, len, "%lld %s", (long long)l->num, cli_str(p, name->str));
  else
    snprintf(buf, len, "%lld", (long long)l->num);
}

static int cmp_by_row(const void *x, const void *y) {
  const by_row *a = x, *b = y;
  if (a->value != b->value)
    return a->value > b->value ? -1 : 1;
  return strcmp(a->name, b->name);
}

int cli_print_by(FILE *out, const cli_profile *cp, const char *key, size_t n, int header) {
  const Pprt__Profile *p = cp->p;
  by_row *rows = NULL;
  size_t nrows = 0, cap = 0;
  int rc = CLI_OK, count_pids = strcmp(key, "pid") != 0;
  /* Rows found by a linear scan per distinct sample name: processes number
   * in the thousands at most, and samples are already grouped per process
   * in a merge, so the last row is the usual hit. */
  for (size_t i = 0; i < p->n_sample && rc == CLI_OK; i++) {
    const Pprt__Sample *s = p->sample[i];
    int64_t v = s->value[cp->sample_index];
    char name[320];
    row_name(name, sizeof name, p, s, key);
    size_t r = nrows;
    if (nrows && strcmp(rows[nrows - 1].name, name) == 0)
      r = nrows - 1;
    for (size_t k = 0; k < nrows && r == nrows; k++)
      if (strcmp(rows[k].name, name) == 0)
        r = k;
    if (r == nrows) {
      if (nrows == cap) {
        size_t nc = cap ? cap * 2 : 64;
        by_row *nv = realloc(rows, nc * sizeof *nv);
        if (nv == NULL) {
          rc = CLI_EFAIL;
          break;
        }
        rows = nv;
        cap = nc;
      }
      memset(&rows[nrows], 0, sizeof rows[nrows]);
      if ((rows[nrows].name = strdup(name)) == NULL) {
        rc = CLI_EFAIL;
        break;
      }
      nrows++;
    }
    by_row *row = &rows[r];
    row->value += v;
    row->nsamples++;
    const Pprt__Label *pid = count_pids ? find_label(p, s, "pid") : NULL;
    if (pid) {
      size_t k = 0;
      while (k < row->npids && row->pids[k] != pid->num)
        k++;
      if (k == row->npids) {
        if (row->npids == row->pids_cap) {
          size_t nc = row->pids_cap ? row->pids_cap * 2 : 8;
          int64_t *nv = realloc(row->pids, nc * sizeof *nv);
          if (nv == NULL) {
            rc = CLI_EFAIL;
            break;
          }
          row->pids = nv;
          row->pids_cap = nc;
        }
        row->pids[row->npids++] = pid->num;
      }
    }
  }
  if (rc == CLI_OK) {
    qsort(rows, nrows, sizeof *rows, cmp_by_row);
    int64_t total = cli_profile_total(cp), running = 0;
    size_t shown = n == 0 || n > nrows ? nrows : n;
    char t[64];
    cli_format_value(t, sizeof t, total, cp->unit);
    if (header)
      fprintf(out, "Type: %s (%s)\nTotal %s = %s, by %s: %zu\n", cp->type, cp->unit, cp->type, t,
              key, nrows);
    if (count_pids)
      fprintf(out, "%10s %7s %7s %6s  %s\n", "flat", "flat%", "sum%", "pids", key);
    else
      fprintf(out, "%10s %7s %7s  %s\n", "flat", "flat%", "sum%", key);
    for (size_t i = 0; i < shown; i++) {
      running += rows[i].value;
      cli_format_value(t, sizeof t, rows[i].value, cp->unit);
      double pf = total ? 100.0 * (double)rows[i].value / (double)total : 0;
      double ps = total ? 100.0 * (double)running / (double)total : 0;
      if (count_pids)
        fprintf(out, "%10s %6.2f%% %6.2f%% %6zu  %s\n", t, pf, ps, rows[i].npids, rows[i].name);
      else
        fprintf(out, "%10s %6.2f%% %6.2f%%  %s\n", t, pf, ps, rows[i].name);
    }
  }
  for (size_t i = 0; i < nrows; i++) {
    free(rows[i].name);
    free(rows[i].pids);
  }
  free(rows);
  return rc;
}
