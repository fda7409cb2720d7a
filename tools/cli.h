/* The pprt command: what its subcommands share.
 *
 * Exit codes (documented in `pprt --help` and docs/guide.md), one meaning
 * each so that scripts and tests can tell failures apart. `pprt record`
 * exits with its program's status instead, and uses 125-127 and 128+N the
 * way env(1) and shells do. */
#ifndef PPRT_TOOLS_CLI_H
#define PPRT_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "proto/profile.pb-c.h"

enum {
  CLI_OK = 0,
  CLI_EFAIL = 1,      /* an output could not be written, out of memory */
  CLI_EUSAGE = 2,     /* bad command line: unknown option, missing argument */
  CLI_EINPUT = 3,     /* an input file unreadable or not what it must be */
  CLI_ERECORD = 125,  /* record itself failed: no preload library, no output dir */
  CLI_ENOEXEC = 126,  /* record: the program exists but cannot be run */
  CLI_ENOTFOUND = 127 /* record: the program was not found */
};

/* One-line errors: "pprt CMD: message\n" on stderr; returns code. */
int cli_error(int code, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Nonzero: cli_error prints nothing (the fuzz targets, which call the views
 * millions of times, set it). */
extern int cli_errors_silent;

/* Reads a whole file (at most max bytes). Returns 0, or CLI_EINPUT with
 * the reason in err. */
int cli_read_file(const char *path, size_t max, uint8_t **data, size_t *len, char *err,
                  size_t errlen);

/* Opens path for writing ("-" is stdout). NULL with errno on failure. */
FILE *cli_open_output(const char *path);

/* Creates a file whose name pprt made up (OUT.tmp), which others who can
 * write the directory can predict: new (O_EXCL), never through a link
 * (O_NOFOLLOW). A regular file of ours already there is replaced; anything
 * else fails with EEXIST. NULL with errno on failure. */
FILE *cli_create_new(const char *path);

/* Parses a whole decimal number in [lo, hi]; 0 on success, else -1. The
 * runtime's pprt__parse_int (core/parse.h), which reads PPRT_* variables. */
int cli_parse_long(const char *s, long long lo, long long hi, long long *out);

/* Matches "--name" and "--name=value" / "-n value" style options:
 * returns the value (from "=value" or the next argument, advancing *i), or
 * NULL when argv[*i] is not this option. *missing is set when the option
 * was given without its value. */
const char *cli_option_value(int argc, char **argv, int *i, const char *name, int *missing);

/* ---- hash indexes (tools/util.c) ------------------------------------------------- */

/* An open-addressing index over items kept in an array elsewhere: each slot
 * holds an item's index + 1 (0: empty), found by linear probing from its
 * hash; n is a power of two, at least twice the number of items. Lookups
 * and insertions are the caller's (what makes two items the same is). */
typedef struct cli_slots {
  uint32_t *v;
  size_t n;
} cli_slots;

/* FNV-1a over len bytes, continuing from h (CLI_FNV_BASIS to start). */
#define CLI_FNV_BASIS 1469598103934665603ull
uint64_t cli_hash_bytes(const void *data, size_t len, uint64_t h);

/* Makes room for item `count` (the next to be added): when count + 1 items
 * would fill more than half the slots, builds them anew, twice as many
 * (`first` the first time), with items [from, count) placed by hash(i,
 * ctx). 0, or -1 out of memory with the index as it was. */
int cli_slots_reserve(cli_slots *s, size_t count, size_t first, size_t from,
                      uint64_t (*hash)(size_t i, const void *ctx), const void *ctx);

/* The index of the first of the n entries of the sorted array v (stride
 * bytes apart, each starting with a uint64_t key) whose key is not below
 * key; n when there is none. */
size_t cli_lower_bound(const void *v, size_t n, size_t stride, uint64_t key);

/* The first slot to look at for hash h, and the one after slot j. */
static inline size_t cli_slots_at(const cli_slots *s, uint64_t h) {
  return (size_t)h & (s->n - 1);
}
static inline size_t cli_slots_next(const cli_slots *s, size_t j) {
  return (j + 1) & (s->n - 1);
}

/* ---- profiles, as the subcommands read them (tools/profile_view.c) ---------------- */

/* What the views (top, flame, collapse) expand, at most: a small file can
 * describe a stack of millions of frames (one location with that many
 * inlined lines) and have every sample use it, so the views check before
 * they expand anything, and a profile beyond either bound is refused
 * (CLI_EINPUT) with a message naming the bound. docs/guide.md states both.
 *   depth: frames in one sample's stack, inlined frames included (Go keeps
 *          at most 128 pcs, pprt 256, Linux perf 127 by default); flame's
 *          page draws a stack this deep (tests/cli_test.cmake, chromium);
 *   total: frames over all the samples shown. The worst case at this bound,
 *          no two stacks sharing a frame, took 0.05 s of CPU for top and
 *          3.5 s (collapse) to 6.5 s (flame) and 860 MB for the call tree
 *          (tests/hostile_profile.c OUT 4095 4096 distinct). */
#define CLI_VIEW_MAX_DEPTH 4096
#define CLI_VIEW_MAX_FRAMES ((uint64_t)1 << 24)
/* collapse writes each stack's names in full, so long names multiply too
 * (4096 frames of a 60 KB name is 240 MB a line): it refuses a profile
 * whose folded text would be longer than this. */
#define CLI_COLLAPSE_MAX_BYTES ((uint64_t)1 << 30)

/* A frame as a viewer shows it: a function name, or for an address no one
 * named, "<mapping basename>+0x<offset>" (or "0x<address>"). */
typedef struct cli_profile {
  Pprt__Profile *p;
  const char *path;
  /* Per location (same order as p->location): its frames, innermost
   * (inlined) first; a name index into names. */
  uint32_t *loc_first, *loc_count; /* into frames */
  uint32_t *frames;
  char **names;  /* interned display names */
  char **where;  /* per name: "file:line" (or the function's file and first
                    line), NULL when the profile does not say */
  void *loc_ids; /* location id -> index (sorted pairs) */
  size_t nnames;
  int sample_index; /* the value shown */
  const char *type, *unit;
  /* The total bound the next cli_profile_select checks (load sets
   * CLI_VIEW_MAX_FRAMES; the fuzz targets lower it). */
  uint64_t max_frames;
} cli_profile;

/* How frames are named. */
enum {
  CLI_VIEW_LINES = 1,  /* "name file.c:42": one frame per source line */
  CLI_VIEW_INLINE = 2, /* "name (inline)" for a frame inlined into its caller */
};

/* Loads and checks a profile, names its frames as flags (CLI_VIEW_*) say,
 * and selects the value to show as cli_profile_select does (type NULL: the
 * default). Returns CLI_OK, or an error code after printing the one-line
 * message for `cmd`. */
int cli_profile_load(cli_profile *cp, const char *cmd, const char *path, const char *type,
                     unsigned flags);
/* The same on a profile already in memory; path only names it in messages.
 * data stays the caller's. */
int cli_profile_load_mem(cli_profile *cp, const char *cmd, const char *path, const uint8_t *data,
                         size_t len, const char *type, unsigned flags);
/* Loads n profiles as one: a single file as cli_profile_load does, several
 * merged with pprof's rules (tools/merge.h), named by the first path. With
 * group_by (a label key, e.g. "process"), every stack gets a root frame
 * "KEY VALUE" (tools/profile_group.c). type and flags as for
 * cli_profile_load. */
int cli_profile_load_many(cli_profile *cp, const char *cmd, char *const *paths, size_t n,
                          const char *group_by, const char *type, unsigned flags);
/* Reads and decodes one profile file; CLI_OK, or an error code after the
 * one-line message for cmd (*out is then NULL). */
int cli_profile_decode_file(const char *cmd, const char *path, Pprt__Profile **out);
/* The same on a profile already in memory; path only names it in messages. */
int cli_profile_decode_mem(const char *cmd, const char *path, const uint8_t *data, size_t len,
                           Pprt__Profile **out);
/* The table of `pprt top --by KEY`: the selected value summed per value of
 * label KEY ("process": per program name, with how many pids ran it;
 * "pid": per process, with its name), n rows (0: all); header: the type
 * and total above it. */
int cli_print_by(FILE *out, const cli_profile *cp, const char *key, size_t n, int header);
/* Selects the value to show: NAME (a sample type) or an index; NULL: the
 * profile's default_sample_type, else the last type (pprof's rule). Then
 * checks the stacks of the samples with a nonzero value against
 * CLI_VIEW_MAX_DEPTH and cp->max_frames: CLI_EINPUT beyond either. */
int cli_profile_select(cli_profile *cp, const char *cmd, const char *name);
void cli_profile_free(cli_profile *cp);

/* The location index of a location id, or -1. */
long cli_profile_location(const cli_profile *cp, uint64_t id);

/* Calls fn for each sample with a nonzero selected value, with its frames'
 * name indices root first (at most CLI_VIEW_MAX_DEPTH of them, as
 * cli_profile_select made sure). Returns fn's first nonzero result. */
typedef int (*cli_stack_fn)(void *ctx, const uint32_t *names, size_t n, int64_t value);
int cli_profile_stacks(const cli_profile *cp, cli_stack_fn fn, void *ctx);

/* Sum of the selected value over all samples. Sums here wrap around on
 * overflow, as pprof's int64 arithmetic does, rather than being undefined. */
int64_t cli_profile_total(const cli_profile *cp);

/* A value in the profile's unit, as pprof prints it: "1.25s", "12ms",
 * "3.50MB", "42". */
void cli_format_value(char *buf, size_t len, int64_t v, const char *unit);

/* The string at index i of the profile's table ("" when out of range). */
const char *cli_str(const Pprt__Profile *p, int64_t i);

/* a + b, wrapping around on overflow. */
static inline int64_t cli_add(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a + (uint64_t)b);
}

/* The top-N table (`pprt top`): flat and cumulative values per function,
 * sorted by flat (or cum), N rows (0: all). */
int cli_print_top(FILE *out, const cli_profile *cp, size_t n, int by_cum, int header);

/* ---- the call tree (tools/stack_tree.c) ------------------------------------------ */

/* The samples' stacks merged into a tree, one node per distinct path from
 * the root: what flame draws and collapse prints. Node 0 is the root
 * ("all"); a node's name is a name index + 1. */
typedef struct cli_tree_node {
  uint32_t name, parent;
  int64_t value; /* the samples through this node */
  int64_t self;  /* the samples whose stack ends here */
} cli_tree_node;

typedef struct cli_tree {
  cli_tree_node *v;
  size_t n, cap;
  cli_slots slots; /* by (parent, name) */
  /* After cli_tree_order: node i's children are kids[kid_at[i]] up to
   * kids[kid_at[i + 1]], in the order asked for. */
  uint32_t *kids, *kid_at;
} cli_tree;

/* Builds the tree of cp's selected value. 0 or -ENOMEM. */
int cli_tree_build(cli_tree *t, const cli_profile *cp);
/* Orders every node's children: by value, widest first (ties by name), or
 * by name. 0 or -ENOMEM. */
enum { CLI_TREE_BY_VALUE, CLI_TREE_BY_NAME };
int cli_tree_order(cli_tree *t, const cli_profile *cp, int order);
void cli_tree_free(cli_tree *t);

/* Walks the ordered tree depth first without recursion (the depth is the
 * profile's, so the walk keeps its own stack): enter(node, path, depth) on
 * the way down, where path[0..depth] are the nodes from the root to it, and
 * leave(node) on the way up. Returns the first nonzero result of either,
 * or -ENOMEM. */
typedef struct cli_tree_visit {
  int (*enter)(void *ctx, const cli_tree *t, const uint32_t *path, size_t depth);
  int (*leave)(void *ctx, const cli_tree *t, uint32_t node);
  void *ctx;
} cli_tree_visit;
int cli_tree_walk(const cli_tree *t, cli_tree_visit v);

/* ---- the views, onto any stream (what the subcommands and the fuzz targets call) -- */

/* The flame graph page for cp, titled title. 0, or -1 (out of memory). */
int cli_write_flame(FILE *out, const cli_profile *cp, const char *title);
/* Folded stacks, one line per distinct stack, in name order. 0, -ENOMEM,
 * or -EFBIG (nothing written) when they would be more than max_bytes. */
int cli_write_collapse(FILE *out, const cli_profile *cp, uint64_t max_bytes);

/* Options common to the profile commands. */
typedef struct cli_view_opts {
  const char *file, *out, *sample_index;
  long long n;
  int cum, lines;
  char **files; /* all the FILEs (file is the first); free() it */
  size_t nfiles;
  const char *by; /* --by KEY */
} cli_view_opts;

/* Parses argv for a profile command: FILE..., --sample-index, and those
 * of -n (n), --cum (c), -o (o), --lines (l), --by (b) that allow names.
 * Returns -1 to go on, else the exit code (after --help: 0). */
int cli_parse_view(int argc, char **argv, const char *cmd, const char *usage, const char *allow,
                   cli_view_opts *o);
/* cli_parse_view, then the FILEs loaded into cp as cli_profile_load_many
 * loads them: grouped by --by when group is set (else --by is the
 * caller's), frames named as flags say, plus CLI_VIEW_LINES for --lines.
 * o->files is freed. Returns -1 to go on (cli_profile_free cp after), else
 * the exit code with nothing left to free. */
int cli_load_view(int argc, char **argv, const char *cmd, const char *usage, const char *allow,
                  int group, unsigned flags, cli_view_opts *o, cli_profile *cp);

/* The output file named after input in: in less the first of the nexts
 * extensions exts it ends with, then ext. NULL when out of memory. */
char *cli_output_name(const char *in, const char *const *exts, size_t nexts, const char *ext);

/* ---- subcommands --------------------------------------------------------------- */
int cli_cmd_record(int argc, char **argv);
int cli_cmd_top(int argc, char **argv);
int cli_cmd_flame(int argc, char **argv);
int cli_cmd_collapse(int argc, char **argv);
int cli_cmd_trace(int argc, char **argv);
int cli_cmd_merge(int argc, char **argv);

/* ---- per-OS helpers (tools/os_<os>.c, except the first) -------------------------- */

/* The absolute path of the running pprt executable; 0 or -1. The runtime's
 * pprt__os_exe_path (tools/util.c). */
int cli_os_self_exe(char *buf, size_t len);
/* CPU time (user + system) a running child has used so far, in ns; -1 if
 * the OS will not say. */
int64_t cli_os_child_cpu_ns(int pid);
/* The environment variable that preloads a library, and the preload
 * library's file name. */
extern const char cli_os_preload_var[];
extern const char cli_os_preload_lib[];

#endif /* PPRT_TOOLS_CLI_H */
