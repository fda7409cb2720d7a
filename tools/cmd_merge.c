/* `pprt merge`: several pprof profiles written as one (tools/merge.c), for
 * go tool pprof and other viewers that read a single file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/profile.h"
#include "read/profile_decode.h"
#include "tools/cli.h"
#include "tools/merge.h"

static const char usage[] =
    "usage: pprt merge -o OUT.pb.gz FILE...\n"
    "\n"
    "Merges pprof profiles into one gzip'd profile, with pprof's rules: the\n"
    "same sample types (else an error naming both files), the earliest start,\n"
    "durations summed, the largest period, each comment once. Samples keep\n"
    "their labels (pprt's pid, process, thread), so `pprt top --by process` and\n"
    "`go tool pprof -tagfocus` still tell the processes apart; each input's\n"
    "mappings and addresses are kept as its own.\n"
    "\n"
    "Exit status: 0 ok, 1 OUT cannot be written, 2 bad usage, 3 a FILE is\n"
    "unreadable, not a profile, or of other sample types.\n";

int cli_cmd_merge(int argc, char **argv) {
  const char *out = NULL;
  char **files = calloc((size_t)argc, sizeof *files);
  size_t n = 0;
  if (files == NULL)
    return cli_error(CLI_EFAIL, "merge", "out of memory");
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    int missing = 0;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      free(files);
      return CLI_OK;
    }
    if ((v = cli_option_value(argc, argv, &i, "-o", &missing))) {
      out = v;
    } else if (missing || (a[0] == '-' && a[1] != '\0')) {
      free(files);
      return cli_error(CLI_EUSAGE, "merge",
                       missing ? "%s needs a value (see pprt merge --help)"
                               : "unknown option '%s' (see pprt merge --help)",
                       a);
    } else {
      files[n++] = argv[i];
    }
  }
  if (out == NULL || n == 0) {
    free(files);
    return cli_error(CLI_EUSAGE, "merge", "missing %s (see pprt merge --help)",
                     out ? "FILE" : "-o OUT");
  }
  cli_merge *m = cli_merge_new();
  int rc = m ? CLI_OK : cli_error(CLI_EFAIL, "merge", "out of memory");
  for (size_t i = 0; i < n && rc == CLI_OK; i++) {
    Pprt__Profile *p;
    rc = cli_profile_decode_file("merge", files[i], &p);
    if (rc == CLI_OK)
      rc = cli_merge_add(m, "merge", p, files[i]);
    if (p)
      pprt__profile_decoded_free(p);
  }
  uint8_t *data = NULL;
  size_t len = 0;
  if (rc == CLI_OK && cli_merge_pack(m, &data, &len) != CLI_OK)
    rc = cli_error(CLI_EFAIL, "merge", "out of memory");
  if (rc == CLI_OK && cli_write_gzip(out, data, len) != 0)
    rc = cli_error(CLI_EFAIL, "merge", "%s: cannot write: %s", out, strerror(errno));
  if (rc == CLI_OK)
    fprintf(stderr, "pprt merge: wrote %s (%zu profiles)\n", out, n);
  free(data);
  cli_merge_free(m);
  free(files);
  return rc;
}
