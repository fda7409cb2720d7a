/* `pprt trace check` and `pprt trace export`: execution traces (PPRT_TRACE,
 * pprt_trace_start) validated and summarised, or converted to the Chrome
 * Trace Event JSON that ui.perfetto.dev, chrome://tracing and speedscope
 * open. The decoding itself is the readers' (read/), behind
 * tools/trace_backend.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"
#include "tools/trace_backend.h"

static const char usage[] =
    "usage: pprt trace check FILE\n"
    "       pprt trace export FILE... [-o OUT.json]\n"
    "\n"
    "check   validates a pprt trace (trace.pprt) and prints a summary: threads,\n"
    "        events by type, time span, generations; a malformed file is one\n"
    "        line naming the offset and the problem\n"
    "export  writes it as Chrome Trace Event JSON for ui.perfetto.dev,\n"
    "        chrome://tracing and speedscope (default OUT: FILE with .json in\n"
    "        place of .pprt; \"-\" for standard output); several FILEs (the\n"
    "        traces of a process tree) go into one document, each process its\n"
    "        own pid named after its program, all on one time axis\n"
    "\n"
    "Exit status: 0 ok, 1 OUT cannot be written, 2 bad usage, 3 FILE unreadable,\n"
    "malformed or of an unknown version.\n";

static char *default_output(const char *in) {
  static const char *const exts[] = {".pprt"};
  return cli_output_name(in, exts, 1, ".json");
}

/* Several traces into one document; frees files. */
static int export_many(char **files, size_t n, const char *outpath) {
  const char *cmd = "trace export";
  char *defpath = NULL;
  if (outpath == NULL)
    outpath = defpath = default_output(files[0]);
  char tmp[4096] = "";
  FILE *out = stdout;
  int rc = CLI_OK;
  if (outpath == NULL) {
    rc = cli_error(CLI_EFAIL, cmd, "out of memory");
  } else if (strcmp(outpath, "-") != 0) {
    snprintf(tmp, sizeof tmp, "%s.tmp", outpath);
    if ((out = fopen(tmp, "w")) == NULL)
      rc = cli_error(CLI_EFAIL, cmd, "%s: cannot write: %s", outpath, strerror(errno));
  }
  if (rc == CLI_OK) {
    rc = cli_trace_export_files(cmd, files, n, 0, out, NULL);
    if ((out == stdout ? fflush(out) : fclose(out)) != 0 && rc == CLI_OK)
      rc = cli_error(CLI_EFAIL, cmd, "%s: writing failed: %s", outpath, strerror(errno));
    if (*tmp && rc == CLI_OK && rename(tmp, outpath) != 0)
      rc = cli_error(CLI_EFAIL, cmd, "%s: cannot write: %s", outpath, strerror(errno));
    if (*tmp && rc != CLI_OK)
      remove(tmp);
    else if (*tmp)
      fprintf(stderr, "pprt trace export: wrote %s (%zu traces)\n", outpath, n);
  }
  free(defpath);
  free(files);
  return rc;
}

int cli_cmd_trace(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    if (argc < 2)
      return cli_error(CLI_EUSAGE, "trace", "missing check or export (see pprt trace --help)");
    fputs(usage, stdout);
    return CLI_OK;
  }
  const char *sub = argv[1];
  int export = strcmp(sub, "export") == 0;
  if (!export && strcmp(sub, "check") != 0)
    return cli_error(CLI_EUSAGE, "trace", "unknown subcommand '%s' (check or export)", sub);
  const char *cmd = export ? "trace export" : "trace check";
  const char *file = NULL, *outpath = NULL;
  char **files = calloc((size_t)argc, sizeof *files);
  size_t nfiles = 0;
  if (files == NULL)
    return cli_error(CLI_EFAIL, cmd, "out of memory");
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v;
    int missing = 0;
    int rc = -1;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      rc = CLI_OK;
    } else if (export && (v = cli_option_value(argc, argv, &i, "-o", &missing)))
      outpath = v;
    else if (missing)
      rc = cli_error(CLI_EUSAGE, cmd, "%s needs a value (see pprt trace --help)", a);
    else if (a[0] == '-' && a[1] != '\0')
      rc = cli_error(CLI_EUSAGE, cmd, "unknown option '%s' (see pprt trace --help)", a);
    else if (file && !export)
      rc = cli_error(CLI_EUSAGE, cmd, "one FILE only, got '%s' and '%s'", file, a);
    else if (!file)
      file = files[nfiles++] = argv[i];
    else
      files[nfiles++] = argv[i];
    if (rc >= 0) {
      free(files);
      return rc;
    }
  }
  if (file == NULL) {
    free(files);
    return cli_error(CLI_EUSAGE, cmd, "missing FILE (see pprt trace --help)");
  }
  if (nfiles > 1)
    return export_many(files, nfiles, outpath);
  free(files);

  uint8_t *data;
  size_t len;
  char err[512];
  int rc = cli_read_file(file, CLI_TRACE_MAX_BYTES, &data, &len, err, sizeof err);
  if (rc != CLI_OK)
    return cli_error(rc, cmd, "%s: %s", file, err);
  char *defpath = NULL;
  FILE *out = stdout;
  if (export) {
    if (outpath == NULL)
      outpath = defpath = default_output(file);
    if (outpath == NULL) {
      free(data);
      return cli_error(CLI_EFAIL, cmd, "out of memory");
    }
  }
  /* An export is written to OUT.tmp and renamed, so a bad trace leaves no
   * half-written OUT behind. */
  char tmp[4096] = "";
  if (export && strcmp(outpath, "-") != 0) {
    snprintf(tmp, sizeof tmp, "%s.tmp", outpath);
    out = cli_create_new(tmp); /* a predictable name: never through a link */
    if (out == NULL && errno == EEXIST) {
      rc = cli_error(CLI_EFAIL, cmd,
                     "%s: cannot write: %s exists and is not a file of ours (pprt makes it "
                     "new, never through a link)",
                     outpath, tmp);
      goto done;
    }
    if (out == NULL) {
      rc = cli_error(CLI_EFAIL, cmd, "%s: cannot write: %s", outpath, strerror(errno));
      goto done;
    }
  }
  int brc = export ? cli_trace_export(data, len, out, err, sizeof err)
                   : cli_trace_check(data, len, out, err, sizeof err);
  int crc = out == stdout ? fflush(out) : fclose(out);
  if (brc == -ENOMEM)
    rc = cli_error(CLI_EFAIL, cmd, "%s: out of memory", file);
  else if (brc == -EIO || (brc == 0 && crc != 0))
    rc = cli_error(CLI_EFAIL, cmd, "%s: writing failed: %s", outpath ? outpath : "stdout",
                   strerror(errno));
  else if (brc != 0)
    rc = cli_error(CLI_EINPUT, cmd, "%s: %s", file, err);
  if (*tmp) {
    if (rc == CLI_OK && rename(tmp, outpath) != 0)
      rc = cli_error(CLI_EFAIL, cmd, "%s: cannot write: %s", outpath, strerror(errno));
    if (rc != CLI_OK)
      remove(tmp);
    else
      fprintf(stderr, "pprt trace export: wrote %s\n", outpath);
  }
done:
  free(defpath);
  free(data);
  return rc;
}
