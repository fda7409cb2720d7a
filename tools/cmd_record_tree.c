/* `pprt record` on a process tree: every process the program starts (fork +
 * exec, children of children, images a process execs) writes its own files
 * into DIR/procs/, NAME.<pid> (NAME.<pid>.1, ... for a later exec'd image
 * of the same pid); at the end they are merged into DIR's cpu.pb.gz and
 * heap.pb.gz, the traces exported together to DIR/trace.json, and the
 * summary gives the processes by CPU.
 *
 * Why procs/ and not DIR: a build or a test suite starts hundreds of
 * processes, three files each; the top directory keeps the four outputs a
 * user opens, and procs/ keeps each process's own profile for a viewer that
 * wants one (go tool pprof, speedscope) and for `pprt merge` again.
 *
 * Bounds: a merge decodes one file at a time (memory is the merge's and one
 * input's); the trace export holds the traces it writes, at most
 * TRACE_BUDGET bytes of files, the largest processes' first.
 *
 * Divisions: listing procs/; merging profiles; the traces; the summary. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/profile.h"
#include "read/profile_decode.h"
#include "tools/cli.h"
#include "tools/cmd_record_tree.h"
#include "tools/merge.h"
#include "tools/trace_backend.h"

#define TRACE_BUDGET ((size_t)512 << 20)

/* ---- listing procs/ ---------------------------------------------------------------- */

typedef struct proc_file {
  char *path;
  long pid, image; /* NAME.<pid>.<image>; image 0 for NAME.<pid> */
  off_t size;
} proc_file;

/* NAME.<pid> or NAME.<pid>.<n>: the pid and n. */
static int parse_name(const char *file, const char *name, long *pid, long *image) {
  size_t n = strlen(name);
  if (strncmp(file, name, n) != 0 || file[n] != '.')
    return 0;
  char *end;
  const char *p = file + n + 1;
  if (*p < '0' || *p > '9')
    return 0;
  *pid = strtol(p, &end, 10);
  *image = 0;
  if (*end == '.' && end[1] >= '0' && end[1] <= '9')
    *image = strtol(end + 1, &end, 10);
  return *end == '\0';
}

static long g_root;
static Pprt__Profile *g_root_profile; /* kept from the merge */

const Pprt__Profile *cli_record_root_profile(void) {
  return g_root_profile;
}

/* The root process first (its comments lead the merge, as its summary
 * reads them), then by pid and image. */
static int cmp_proc(const void *x, const void *y) {
  const proc_file *a = x, *b = y;
  if ((a->pid == g_root) != (b->pid == g_root))
    return a->pid == g_root ? -1 : 1;
  if (a->pid != b->pid)
    return a->pid < b->pid ? -1 : 1;
  return a->image < b->image ? -1 : a->image > b->image;
}

/* The files of output NAME in procs, sorted; empty ones (a process that
 * wrote nothing: killed first, or exec'd into a program the preload library
 * cannot enter) are removed and counted in *empty. */
static proc_file *list_files(const char *procs, const char *name, size_t *n, size_t *empty) {
  *n = *empty = 0;
  DIR *d = opendir(procs);
  if (d == NULL)
    return NULL;
  proc_file *v = NULL;
  size_t cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    long pid, image;
    char path[PATH_MAX];
    size_t len = strlen(e->d_name);
    if (len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0 &&
        strncmp(e->d_name, name, strlen(name)) == 0 &&
        snprintf(path, sizeof path, "%s/%s", procs, e->d_name) < (int)sizeof path) {
      unlink(path); /* a checkpoint its process was killed in the middle of */
      continue;
    }
    if (!parse_name(e->d_name, name, &pid, &image))
      continue;
    struct stat st;
    if (snprintf(path, sizeof path, "%s/%s", procs, e->d_name) >= (int)sizeof path ||
        lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (st.st_size == 0) {
      unlink(path);
      (*empty)++;
      continue;
    }
    if (*n == cap) {
      size_t nc = cap ? cap * 2 : 64;
      proc_file *nv = realloc(v, nc * sizeof *nv);
      if (nv == NULL)
        break;
      v = nv;
      cap = nc;
    }
    if ((v[*n].path = strdup(path)) == NULL)
      break;
    v[*n].pid = pid;
    v[*n].image = image;
    v[*n].size = st.st_size;
    (*n)++;
  }
  closedir(d);
  if (*n)
    qsort(v, *n, sizeof *v, cmp_proc);
  return v;
}

static void free_files(proc_file *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(v[i].path);
  free(v);
}

/* ---- merging profiles -------------------------------------------------------------- */

/* Merges procs/NAME.* into DIR/NAME. Returns how many processes' files were
 * merged; a file that cannot be read (cut short by a kill while it was
 * written) is named and left out. */
static size_t merge_kind(const char *dir, const char *name, int quiet) {
  char procs[PATH_MAX], out[PATH_MAX];
  snprintf(procs, sizeof procs, "%s/procs", dir);
  snprintf(out, sizeof out, "%s/%s", dir, name);
  size_t n, empty;
  proc_file *files = list_files(procs, name, &n, &empty);
  cli_merge *m = n ? cli_merge_new() : NULL;
  size_t bad = 0;
  int keep_root = 0; /* this kind's root profile replaces an earlier kind's */
  for (size_t i = 0; i < n && m; i++) {
    Pprt__Profile *p;
    /* The message names the file and what is wrong with it. */
    int rc = cli_profile_decode_file("record", files[i].path, &p);
    if (rc == CLI_OK) {
      rc = cli_merge_add(m, "record", p, files[i].path);
      /* The root's files come first, by image: the last is the latest. */
      if (rc == CLI_OK && files[i].pid == g_root && (g_root_profile == NULL || keep_root)) {
        pprt__profile_decoded_free(g_root_profile);
        g_root_profile = p;
        keep_root = 1;
        p = NULL;
      }
      pprt__profile_decoded_free(p);
    }
    if (rc != CLI_OK) {
      bad++;
      fprintf(stderr, "pprt record: %s: left out of %s/%s\n", files[i].path, dir, name);
    }
  }
  size_t merged = m ? cli_merge_count(m) : 0;
  uint8_t *data = NULL;
  size_t len = 0;
  if (merged && cli_merge_pack(m, &data, &len) == CLI_OK && cli_write_gzip(out, data, len) != 0)
    fprintf(stderr, "pprt record: %s: cannot write: %s\n", out, strerror(errno));
  free(data);
  cli_merge_free(m);
  if (!quiet && (merged > 1 || bad || empty)) {
    fprintf(stderr, "  %s: merged from %zu process%s' files in %s", name, merged,
            merged == 1 ? "" : "es", procs);
    if (bad)
      fprintf(stderr, ", %zu left out (named above)", bad);
    if (empty)
      fprintf(stderr,
              ", %zu empty (a process killed before it wrote, or exec'd into a program "
              "that could not be preloaded)",
              empty);
    fputc('\n', stderr);
  }
  free_files(files, n);
  return merged;
}

/* ---- the traces -------------------------------------------------------------------- */

static int cmp_size_desc(const void *x, const void *y) {
  const proc_file *a = x, *b = y;
  if ((a->pid == g_root) != (b->pid == g_root))
    return a->pid == g_root ? -1 : 1;
  return a->size > b->size ? -1 : a->size < b->size;
}

/* DIR/trace.pprt: the root process's trace (its last image's), linked;
 * DIR/trace.json: every process's trace on one time axis. */
static void traces(const char *dir, int quiet) {
  char procs[PATH_MAX], out[PATH_MAX], tmp[PATH_MAX + 8];
  snprintf(procs, sizeof procs, "%s/procs", dir);
  size_t n, empty;
  proc_file *files = list_files(procs, "trace.pprt", &n, &empty);
  const char *root = NULL;
  for (size_t i = 0; i < n; i++)
    if (files[i].pid == g_root)
      root = files[i].path; /* sorted by image: the last is the latest */
  snprintf(out, sizeof out, "%s/trace.pprt", dir);
  unlink(out);
  if (root && link(root, out) != 0) {
    /* A file system without hard links: the summary reads the copy. */
    uint8_t *data;
    size_t len;
    char err[256];
    FILE *f;
    if (cli_read_file(root, CLI_TRACE_MAX_BYTES, &data, &len, err, sizeof err) == CLI_OK) {
      if ((f = fopen(out, "wb")) != NULL) {
        fwrite(data, 1, len, f);
        fclose(f);
      }
      free(data);
    }
  }
  if (n == 0) {
    free_files(files, n);
    return;
  }
  qsort(files, n, sizeof *files, cmp_size_desc);
  size_t take = 0, bytes = 0;
  while (take < n && bytes + (size_t)files[take].size <= TRACE_BUDGET)
    bytes += (size_t)files[take++].size;
  char **paths = malloc(n * sizeof *paths);
  snprintf(out, sizeof out, "%s/trace.json", dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", out);
  FILE *f = paths ? fopen(tmp, "w") : NULL;
  if (f == NULL) {
    fprintf(stderr, "pprt record: %s: cannot write: %s\n", out, strerror(errno));
  } else {
    for (size_t i = 0; i < take; i++)
      paths[i] = files[i].path;
    size_t done = 0;
    int rc = cli_trace_export_files("record", paths, take, 1, f, &done);
    if (fclose(f) != 0 || rc != CLI_OK || rename(tmp, out) != 0)
      unlink(tmp);
    else if (!quiet)
      fprintf(stderr, "  %s: the traces of %zu process%s on one timeline (ui.perfetto.dev)%s\n",
              out, done, done == 1 ? "" : "es",
              take < n ? "; the smallest left out, over the size budget" : "");
  }
  free(paths);
  free_files(files, n);
}

int64_t cli_record_lost(const cli_profile *cp, long isamples) {
  int64_t lost = 0;
  for (size_t i = 0; i < cp->p->n_sample && isamples >= 0; i++) {
    const Pprt__Sample *s = cp->p->sample[i];
    long l = s->n_location_id == 1 ? cli_profile_location(cp, s->location_id[0]) : -1;
    if (l >= 0 && cp->loc_count[l] == 1 &&
        strcmp(cp->names[cp->frames[cp->loc_first[l]]], PPRT__FRAME_LOST) == 0)
      lost += s->value[isamples];
  }
  return lost;
}

/* ---- the summary ------------------------------------------------------------------- */

/* Removes DIR/procs/ and what is in it (only files: the preload library
 * writes nothing else there). */
static void remove_procs(const char *dir) {
  char procs[PATH_MAX];
  snprintf(procs, sizeof procs, "%s/procs", dir);
  DIR *d = opendir(procs);
  if (d == NULL)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char path[PATH_MAX];
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
        snprintf(path, sizeof path, "%s/%s", procs, e->d_name) < (int)sizeof path)
      unlink(path);
  }
  closedir(d);
  rmdir(procs);
}

void cli_record_tree(const char *dir, long root_pid, int cpu, int heap, int trace, int quiet,
                     int no_procs) {
  g_root = root_pid;
  size_t ncpu = cpu ? merge_kind(dir, "cpu.pb.gz", quiet) : 0;
  if (heap)
    merge_kind(dir, "heap.pb.gz", quiet);
  if (trace)
    traces(dir, quiet);
  if (no_procs)
    remove_procs(dir); /* trace.pprt, a hard link, keeps its data */
  if (quiet || ncpu < 2)
    return;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/cpu.pb.gz", dir);
  cli_profile cp;
  if (cli_profile_load(&cp, "record", path, NULL, 0) == CLI_OK) {
    fprintf(stderr, "  top processes by CPU (pprt top --by process %s):\n", path);
    cli_print_by(stderr, &cp, "process", 5, 0);
  }
  cli_profile_free(&cp);
}
