/* `pprt record`'s process trees (tools/cmd_record_tree.c). */
#ifndef PPRT_TOOLS_CMD_RECORD_TREE_H
#define PPRT_TOOLS_CMD_RECORD_TREE_H

#include <stdint.h>

#include "tools/cli.h"

/* After the program ended: merges DIR/procs/ into DIR's cpu.pb.gz and
 * heap.pb.gz (the outputs chosen), links the root process's trace as
 * DIR/trace.pprt and exports every trace to DIR/trace.json, reporting
 * files left out by name; unless quiet, summarises the tree (how many
 * processes, the top processes by CPU). root_pid is the program's pid.
 * no_procs: then removes DIR/procs/ (DIR/trace.pprt, a hard link or a
 * copy, keeps the program's trace). */
void cli_record_tree(const char *dir, long root_pid, int cpu, int heap, int trace, int quiet,
                     int no_procs);

/* The program's own profile (its last image's; CPU, else heap) as the
 * merge read it, for what its comments say of its ending; NULL when it
 * wrote none. Valid until exit. */
const Pprt__Profile *cli_record_root_profile(void);

/* The lost samples in a CPU profile (value index isamples, -1: none): the
 * values of its pprt_lost_samples samples, summed over every process of a
 * merged tree. */
int64_t cli_record_lost(const cli_profile *cp, long isamples);

#endif /* PPRT_TOOLS_CMD_RECORD_TREE_H */
