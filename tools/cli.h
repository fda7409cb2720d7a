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

/* Reads a whole file (at most max bytes). Returns 0, or CLI_EINPUT with
 * the reason in err. */
int cli_read_file(const char *path, size_t max, uint8_t **data, size_t *len, char *err,
                  size_t errlen);

/* Opens path for writing ("-" is stdout). NULL with errno on failure. */
FILE *cli_open_output(const char *path);

/* Parses a whole decimal number in [lo, hi]; 0 on success. */
int cli_parse_long(const char *s, long long lo, long long hi, long long *out);

/* Matches "--name" and "--name=value" / "-n value" style options:
 * returns the value (from "=value" or the next argument, advancing *i), or
 * NULL when argv[*i] is not this option. *missing is set when the option
 * was given without its value. */
const char *cli_option_value(int argc, char **argv, int *i, const char *name, int *missing);

/* ---- profiles, as the subcommands read them (tools/profile_view.c) ---------------- */

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
} cli_profile;

/* How frames are named. */
enum {
  CLI_VIEW_LINES = 1,  /* "name file.c:42": one frame per source line */
  CLI_VIEW_INLINE = 2, /* "name (inline)" for a frame inlined into its caller */
};

/* Loads and checks a profile; returns CLI_OK, or an error code after
 * printing the one-line message for `cmd`. flags: CLI_VIEW_*. */
int cli_profile_load(cli_profile *cp, const char *cmd, const char *path, unsigned flags);
/* Selects the value to show: NAME (a sample type) or an index; NULL: the
 * profile's default_sample_type, else the last type (pprof's rule). */
int cli_profile_select(cli_profile *cp, const char *cmd, const char *name);
void cli_profile_free(cli_profile *cp);

/* The location index of a location id, or -1. */
long cli_profile_location(const cli_profile *cp, uint64_t id);

/* Calls fn for each sample with a nonzero selected value, with its frames'
 * name indices root first. Returns fn's first nonzero result. */
typedef int (*cli_stack_fn)(void *ctx, const uint32_t *names, size_t n, int64_t value);
int cli_profile_stacks(const cli_profile *cp, cli_stack_fn fn, void *ctx);

/* Sum of the selected value over all samples. */
int64_t cli_profile_total(const cli_profile *cp);

/* A value in the profile's unit, as pprof prints it: "1.25s", "12ms",
 * "3.50MB", "42". */
void cli_format_value(char *buf, size_t len, int64_t v, const char *unit);

/* The string at index i of the profile's table ("" when out of range). */
const char *cli_str(const Pprt__Profile *p, int64_t i);

/* The top-N table (`pprt top`): flat and cumulative values per function,
 * sorted by flat (or cum), N rows (0: all). */
int cli_print_top(FILE *out, const cli_profile *cp, size_t n, int by_cum, int header);

/* Options common to the profile commands. */
typedef struct cli_view_opts {
  const char *file, *out, *sample_index;
  long long n;
  int cum, lines;
} cli_view_opts;

/* Parses argv for a profile command: one FILE, --sample-index, and those
 * of -n (n), --cum (c), -o (o), --lines (l) that allow names. Returns -1 to go on, else
 * the exit code (after --help: 0). */
int cli_parse_view(int argc, char **argv, const char *cmd, const char *usage, const char *allow,
                   cli_view_opts *o);

/* ---- subcommands --------------------------------------------------------------- */
int cli_cmd_record(int argc, char **argv);
int cli_cmd_top(int argc, char **argv);
int cli_cmd_flame(int argc, char **argv);
int cli_cmd_collapse(int argc, char **argv);
int cli_cmd_trace(int argc, char **argv);

/* ---- per-OS helpers (tools/os_<os>.c) ------------------------------------------ */

/* The absolute path of the running pprt executable; 0 or -1. */
int cli_os_self_exe(char *buf, size_t len);
/* CPU time (user + system) a running child has used so far, in ns; -1 if
 * the OS will not say. */
int64_t cli_os_child_cpu_ns(int pid);
/* The environment variable that preloads a library, and the preload
 * library's file name. */
extern const char cli_os_preload_var[];
extern const char cli_os_preload_lib[];

#endif /* PPRT_TOOLS_CLI_H */
