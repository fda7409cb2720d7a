/* Merging pprof profiles, one input at a time (tools/merge.c), for the views
 * that take several files and for `pprt record`'s process trees. */
#ifndef PPRT_TOOLS_MERGE_H
#define PPRT_TOOLS_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "proto/profile.pb-c.h"

typedef struct cli_merge cli_merge;

/* An empty merge; NULL on out of memory. */
cli_merge *cli_merge_new(void);
void cli_merge_free(cli_merge *m);

/* Adds decoded profile p (read from path) to the merge, pprof's rules:
 * the same sample types (type and unit, in order) and period type as the
 * first profile added, else CLI_EINPUT after a one-line message for cmd
 * naming both files and their types. The earliest time_nanos, the sum of
 * the durations, the largest period, the comments once each, the first
 * default sample type. Mappings and locations are kept per input (a
 * process's addresses mean nothing in another's), functions shared by
 * name, file and start line; samples keep their labels. p may be freed
 * afterwards. CLI_OK, or CLI_EFAIL on out of memory (after a message). */
int cli_merge_add(cli_merge *m, const char *cmd, const Pprt__Profile *p, const char *path);

/* From now on, every sample added gets one more frame at its root: a
 * function named "KEY VALUE" for its label key (e.g. "process cc1"), or
 * "KEY ?" when it has no such label, so a flame graph groups by it. */
int cli_merge_group_by(cli_merge *m, const char *key);

/* Profiles added so far. */
size_t cli_merge_count(const cli_merge *m);

/* The merge as an encoded (not gzip'd) profile in *data (malloc'd).
 * CLI_OK, or CLI_EFAIL on out of memory. */
int cli_merge_pack(cli_merge *m, uint8_t **data, size_t *len);

/* Writes data gzip'd to path through path.tmp renamed over it, so a failed
 * write leaves no half a profile. 0, or -1 with errno. */
int cli_write_gzip(const char *path, const uint8_t *data, size_t len);

#endif /* PPRT_TOOLS_MERGE_H */
