/* The pprt command: the entry point, the overall help and the version. Each
 * subcommand lives in its own file (cmd_*.c) and prints its own --help. */
#include <string.h>

#include "pprt.h"
#include "tools/cli.h"

static const char usage[] =
    "usage: pprt COMMAND [ARGS...]\n"
    "\n"
    "Commands:\n"
    "  record [-o DIR] [--cpu] [--heap] [--trace] [--hz N] [--heap-rate BYTES] -- PROGRAM "
    "[ARGS...]\n"
    "                       run PROGRAM and the processes it starts under the preload\n"
    "                       library; write cpu.pb.gz, heap.pb.gz (their merge),\n"
    "                       trace.pprt, trace.json into DIR and print a summary\n"
    "  top FILE... [-n N] [--cum] [--lines] [--by KEY] [--sample-index NAME]\n"
    "                       the top functions of pprof profiles (pprt's or Go's),\n"
    "                       or their values per process (--by process)\n"
    "  flame FILE... [-o OUT.html] [--lines] [--by KEY] [--sample-index NAME]\n"
    "                       a self-contained HTML flame graph\n"
    "  collapse FILE... [-o OUT] [--lines] [--by KEY] [--sample-index NAME]\n"
    "                       folded stacks (\"a;b;c 42\") for other flame graph tools\n"
    "  merge -o OUT FILE... several profiles as one (pprof's rules)\n"
    "  trace check FILE     validate a trace and summarise it\n"
    "  trace export FILE... [-o OUT.json]\n"
    "                       traces as Chrome Trace Event JSON (Perfetto, chrome://tracing),\n"
    "                       several on one time axis, a pid per process\n"
    "\n"
    "  pprt COMMAND --help  what a command does and its options\n"
    "  pprt --version       pprt's version\n"
    "\n"
    "Exit status:\n"
    "  0    success\n"
    "  1    an output could not be written (or out of memory)\n"
    "  2    bad usage: unknown command or option, missing argument\n"
    "  3    an input file is unreadable, not a profile or trace, truncated, of\n"
    "       an unknown version, or a profile beyond what top, flame and collapse\n"
    "       expand (see pprt top --help)\n"
    "  record exits with its program's status, or re-raises the signal that\n"
    "  killed it (128+N if it cannot); and 125 when pprt itself fails there (no\n"
    "  preload library, output directory not writable), 126 when the program\n"
    "  cannot be run, 127 when it is not found.\n"
    "\n"
    "Guide: docs/guide.md in pprt's sources.\n";

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return CLI_EUSAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    fputs(usage, stdout);
    return CLI_OK;
  }
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
    printf("pprt %s\n", pprt_version());
    return CLI_OK;
  }
  static const struct {
    const char *name;
    int (*run)(int, char **);
  } cmds[] = {{"record", cli_cmd_record},     {"top", cli_cmd_top},     {"flame", cli_cmd_flame},
              {"collapse", cli_cmd_collapse}, {"merge", cli_cmd_merge}, {"trace", cli_cmd_trace}};
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (strcmp(cmd, cmds[i].name) == 0)
      return cmds[i].run(argc - 1, argv + 1);
  return cli_error(CLI_EUSAGE, NULL, "unknown command '%s' (see pprt --help)", cmd);
}
