/* HTTP endpoint benchmark: what being scraped costs a program. The workload
 * (tests/http_victim.c: CPU in a hot loop, a malloc and free per round)
 * runs under the preload library with PPRT_HTTP, once left alone and once
 * scraped as Grafana Alloy scrapes (a CPU profile back to back, which is
 * more than Alloy's 14 s of every 15) plus heap and allocs deltas every
 * second; and once without pprt at all. The figures are its rounds of
 * work per second of wall time, and per second of the whole process's CPU
 * time (pprt's threads, signal handlers and the server included): on a
 * machine shared with other work the second is the one to read, since a
 * neighbour moves wall-clock rates by several percent but hardly the work
 * a CPU-second buys. The last column is the CPU time of threads other
 * than the workload's one (pprt's reader, the endpoint's threads) per
 * second of the workload's own; the signal handler's share is inside the
 * workload's time (bench/cpu measures it). Runs go round-robin and each figure is the median over
 * rounds, so a neighbour's burst of load lands on all rows alike; the
 * paired line takes the ratio within each round first (the runs of a round
 * are back to back) and gives the median and the range over rounds.
 *
 * With CLIENTS > 2 the scrapers are that many clients, each cycling
 * through heap, profile?seconds=1, allocs?seconds=1 and allocs (the load
 * test at full length: 20 clients for 30 s); every response is checked.
 *
 * Usage: bench/http [rounds, default 3] [seconds per run, default 10]
 *                   [clients, default 2] */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/profile.h"
#include "read/profile_decode.h"
#include "tests/http_client.h"

#include "bench_util.h"

enum { BARE, IDLE, SCRAPED, NCONFIG };
static const char *const labels[NCONFIG] = {"no pprt", "endpoint, not scraped",
                                            "endpoint, scraped"};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the scrapers ----------------------------------------------------------------------- */

static int g_port, g_clients;
static double g_deadline; /* no request that would still run then: the workload is exiting */
static atomic_int g_stop, g_ok, g_busy, g_bad;

static void check(const char *path, http_resp *r) {
  if (r->status == 500 && strstr((char *)r->body, "cpu profiling already in use")) {
    atomic_fetch_add(&g_busy, 1);
    return;
  }
  Pprt__Profile *p;
  char err[128];
  if (r->status != 200 || pprt__profile_decode(r->body, r->len, &p, err, sizeof err) != 0) {
    if (atomic_fetch_add(&g_bad, 1) == 0)
      fprintf(stderr, "bench/http: %s: status %d\n", path, r->status);
    return;
  }
  pprt__profile_decoded_free(p);
  atomic_fetch_add(&g_ok, 1);
}

/* Asks for path, which takes `seconds`, unless the workload ends first. */
static void get(const char *path, double seconds) {
  if (now_s() + seconds + 0.5 > g_deadline) {
    usleep(100000);
    return;
  }
  http_resp r = http_get(g_port, path, 60);
  check(path, &r);
  http_free(&r);
}

static void *scrape_cpu(void *arg) {
  (void)arg;
  while (!atomic_load(&g_stop))
    get("/debug/pprof/profile?seconds=2", 2);
  return NULL;
}

static void *scrape_memory(void *arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    get("/debug/pprof/allocs?seconds=1", 1);
    get("/debug/pprof/heap", 0);
  }
  return NULL;
}

static void *scrape_load(void *arg) {
  static const char *const paths[] = {"/debug/pprof/heap", "/debug/pprof/profile?seconds=1",
                                      "/debug/pprof/allocs?seconds=1", "/debug/pprof/allocs"};
  for (int i = (int)(intptr_t)arg; !atomic_load(&g_stop); i++)
    get(paths[i % 4], (i % 4 == 1 || i % 4 == 2) ? 1 : 0);
  return NULL;
}

/* ---- one run ------------------------------------------------------------------------------ */

/* Runs the workload for `seconds` in configuration c; returns its rounds
 * per wall second (and per CPU-second in *cpu_rate), or -1. */
static double run(int c, double seconds, double *cpu_rate, double *other) {
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0)
    return -1;
  char secs[32];
  snprintf(secs, sizeof secs, "%g", seconds);
  g_deadline = now_s() + seconds;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(err[0]);
    unsetenv("PPRT_OWNER_PID");
    if (c != BARE) {
      setenv("LD_PRELOAD", BENCH_PRELOAD, 1);
      setenv("PPRT_HTTP", "127.0.0.1:0", 1);
    }
    execl(BENCH_HTTP_WORK, BENCH_HTTP_WORK, secs, (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  pthread_t t[64];
  int nt = 0;
  if (c == SCRAPED) {
    char line[256] = "";
    FILE *e = fdopen(err[0], "r");
    if (e == NULL || fgets(line, sizeof line, e) == NULL || !strstr(line, "serving http://")) {
      fprintf(stderr, "bench/http: the workload did not serve: %s", line);
      return -1;
    }
    g_port = atoi(strstr(line, "127.0.0.1:") + 10);
    atomic_store(&g_stop, 0);
    if (g_clients <= 2) {
      pthread_create(&t[nt++], NULL, scrape_cpu, NULL);
      pthread_create(&t[nt++], NULL, scrape_memory, NULL);
    } else {
      for (int i = 0; i < g_clients && nt < 64; i++)
        pthread_create(&t[nt++], NULL, scrape_load, (void *)(intptr_t)i);
    }
  }
  char buf[256] = "";
  size_t n = 0;
  ssize_t k;
  while ((k = read(out[0], buf + n, sizeof buf - 1 - n)) > 0)
    n += (size_t)k;
  buf[n] = '\0';
  atomic_store(&g_stop, 1);
  for (int i = 0; i < nt; i++)
    pthread_join(t[i], NULL);
  int status;
  waitpid(pid, &status, 0);
  close(out[0]);
  if (c != SCRAPED)
    close(err[0]);
  const char *r = strstr(buf, "\nrate "), *rc = strstr(buf, "cpu_rate ");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || r == NULL || rc == NULL) {
    fprintf(stderr, "bench/http: the workload failed (%s): %s\n", labels[c], buf);
    return -1;
  }
  *cpu_rate = atof(rc + 9);
  const char *ro = strstr(buf, "other_cpu ");
  *other = ro ? atof(ro + 10) : 0;
  return atof(r + 6);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  double seconds = argc > 2 ? atof(argv[2]) : 10;
  g_clients = argc > 3 ? atoi(argv[3]) : 2;
  if (rounds < 1 || rounds > 51 || !(seconds > 0) || g_clients < 1 || g_clients > 64) {
    fprintf(stderr, "usage: bench/http [rounds 1-51] [seconds] [clients 1-64]\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  double rate[NCONFIG][51], cpu[NCONFIG][51], other[NCONFIG][51];
  double t0 = now_s();
  for (int r = 0; r < rounds; r++)
    for (int c = 0; c < NCONFIG; c++)
      if ((rate[c][r] = run(c, seconds, &cpu[c][r], &other[c][r])) < 0)
        return 1;
  /* Each round's runs are back to back, so a ratio within a round is paired:
   * a slow stretch of the machine lands on both sides of it. */
  double pair_idle[51], pair_bare[51];
  for (int r = 0; r < rounds; r++) {
    pair_idle[r] = cpu[SCRAPED][r] / cpu[IDLE][r];
    pair_bare[r] = cpu[SCRAPED][r] / cpu[BARE][r];
  }
  qsort(pair_idle, (size_t)rounds, sizeof pair_idle[0], cmp_double);
  qsort(pair_bare, (size_t)rounds, sizeof pair_bare[0], cmp_double);
  double med[NCONFIG], cmed[NCONFIG], omed[NCONFIG];
  printf("bench/http: %d round(s) of %.0f s; %s; rounds of work, median\n", rounds, seconds,
         g_clients <= 2 ? "scraper: CPU profiles back to back + allocs?seconds=1 and heap"
                        : "scrapers: clients cycling heap, 1 s CPU, allocs deltas");
  printf("  %-24s %12s %14s %18s\n", "", "per second", "per CPU-second", "pprt's threads' CPU");
  for (int c = 0; c < NCONFIG; c++) {
    qsort(rate[c], (size_t)rounds, sizeof rate[c][0], cmp_double);
    qsort(cpu[c], (size_t)rounds, sizeof cpu[c][0], cmp_double);
    qsort(other[c], (size_t)rounds, sizeof other[c][0], cmp_double);
    omed[c] = other[c][rounds / 2];
    med[c] = rate[c][rounds / 2];
    cmed[c] = cpu[c][rounds / 2];
    printf("  %-24s %12.0f %14.0f %17.2f%%\n", labels[c], med[c], cmed[c], 100 * omed[c]);
  }
  printf("scraped / not scraped: %.4f per CPU-second (%+.2f%%), %.4f per second\n",
         cmed[SCRAPED] / cmed[IDLE], 100 * (cmed[SCRAPED] / cmed[IDLE] - 1),
         med[SCRAPED] / med[IDLE]);
  printf("scraped / no pprt:     %.4f per CPU-second (%+.2f%%), %.4f per second\n",
         cmed[SCRAPED] / cmed[BARE], 100 * (cmed[SCRAPED] / cmed[BARE] - 1),
         med[SCRAPED] / med[BARE]);
  printf("paired per round, per CPU-second: scraped / not scraped median %+.2f%% "
         "(%+.2f%% .. %+.2f%%), scraped / no pprt median %+.2f%% (%+.2f%% .. %+.2f%%)\n",
         100 * (pair_idle[rounds / 2] - 1), 100 * (pair_idle[0] - 1),
         100 * (pair_idle[rounds - 1] - 1), 100 * (pair_bare[rounds / 2] - 1),
         100 * (pair_bare[0] - 1), 100 * (pair_bare[rounds - 1] - 1));
  printf("responses: %d profiles, %d CPU profiles refused as busy, %d invalid (%d client(s), "
         "%.0f s in all)\n",
         atomic_load(&g_ok), atomic_load(&g_busy), atomic_load(&g_bad), g_clients, now_s() - t0);
  return atomic_load(&g_bad) == 0 ? 0 : 1;
}
