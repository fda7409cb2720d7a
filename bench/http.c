/* HTTP endpoint benchmark: what being scraped costs a program. The workload
 * (tests/http_victim.c: CPU in a hot loop, a malloc and free per round)
 * runs under the preload library with PPRT_HTTP, and once without pprt at
 * all. While the endpoint's process runs, the scrapers take turns: after a
 * first scraped phase that is not counted (it reads the debug information
 * for the first time, a cost paid once), a quiet phase, a scraped phase, a
 * quiet phase and so on, phases of equal length, the counted ones
 * beginning and ending quiet. In a scraped phase they ask as
 * Grafana Alloy asks (a CPU profile back to back, which is more than
 * Alloy's 14 s of every 15, plus heap and allocs deltas every second).
 *
 * Comparing phases of one process is the point: two runs of the same
 * program differ by several percent from where the loader and malloc put
 * things (seen here: -6% .. +6% between runs of one configuration), more
 * than the cost being measured, while the phases of one process share
 * their layout. The workload prints its rounds, the process's CPU time and
 * its own thread's every 50 ms; a phase's figures are taken between those
 * lines, from 0.25 s after its start (and in a quiet phase, after the last
 * scrape of the phase before it has been answered) to its end.
 *
 * The figures are rounds of work per second of wall time, and per second
 * of the whole process's CPU time (pprt's threads, signal handlers and the
 * server included): on a machine shared with other work the second is the
 * one to read, since a neighbour moves wall-clock rates by several percent
 * but hardly the work a CPU-second buys. The last column
 * is the CPU time of threads other than the workload's one (pprt's
 * reader, the endpoint's threads) per second of the workload's own; the
 * signal handler's share is inside the workload's time (bench/cpu
 * measures it). Each scraped phase is paired with the mean of the quiet
 * phases on either side of it, so a drift of the machine cancels; the
 * paired line gives the median and the range over all pairs.
 *
 * The scrapers stand for the scraping machine: they run on the machine's
 * last CPU (where it has more than one), keep their connections open as
 * Go's net/http does for Parca and Alloy (HTTP/1.1; "close" makes them
 * open one per request), and keep every answer to decode after the run,
 * so that their own work neither preempts the workload nor costs it its
 * caches.
 *
 * With CLIENTS > 2 the scrapers are that many clients, each cycling
 * through heap, profile?seconds=1, allocs?seconds=1 and allocs (the load
 * test at full length: 20 clients for 30 s); every response is checked.
 *
 * Usage: bench/http [runs, default 3] [seconds per run, default 20]
 *                   [clients, default 2] [keep-alive (default) | close] */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
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

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the scrapers ----------------------------------------------------------------------- */

static int g_port, g_clients, g_keep_alive = 1;
static _Atomic double g_deadline; /* no request starts that would still run then */
static atomic_int g_stop, g_scraping, g_phase, g_inflight, g_ok, g_busy, g_bad, g_connects;

/* The answers of a run, checked once it has ended: their decoding is the
 * scraping machine's work, not to be done beside the workload. */
typedef struct answer {
  const char *path;
  http_resp r;
} answer;
static pthread_mutex_t g_answers_lock = PTHREAD_MUTEX_INITIALIZER;
static answer *g_answers;
static size_t g_nanswers, g_answers_cap;

static void keep_answer(const char *path, http_resp *r) {
  pthread_mutex_lock(&g_answers_lock);
  if (g_nanswers == g_answers_cap) {
    size_t cap = g_answers_cap ? 2 * g_answers_cap : 1024;
    answer *a = realloc(g_answers, cap * sizeof *a);
    if (a == NULL) {
      pthread_mutex_unlock(&g_answers_lock);
      atomic_fetch_add(&g_bad, 1);
      fprintf(stderr, "bench/http: out of memory keeping the answers\n");
      http_free(r);
      return;
    }
    g_answers = a;
    g_answers_cap = cap;
  }
  g_answers[g_nanswers++] = (answer){path, *r};
  pthread_mutex_unlock(&g_answers_lock);
}

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

static void check_answers(void) {
  for (size_t i = 0; i < g_nanswers; i++) {
    check(g_answers[i].path, &g_answers[i].r);
    http_free(&g_answers[i].r);
  }
  g_nanswers = 0;
}

/* Asks for path, which takes `seconds`, in a scraped phase: it may run
 * past the phase's end (the quiet phase after it waits for it), not past
 * the workload's. On the scraper's kept connection, or a new one. */
static void get(http_conn *c, const char *path, double seconds) {
  atomic_fetch_add(&g_inflight, 1);
  if (!atomic_load(&g_scraping) || now_s() + seconds + 0.5 > atomic_load(&g_deadline)) {
    /* Wait for the next scraped phase: asking only for what still fits
     * would end each phase with a burst of the quick paths. */
    atomic_fetch_sub(&g_inflight, 1);
    int k = atomic_load(&g_phase);
    while (!atomic_load(&g_stop) && (atomic_load(&g_phase) == k || !atomic_load(&g_scraping)))
      usleep(20000);
    return;
  }
  http_resp r;
  if (g_keep_alive) {
    r = http_conn_get(c, path);
  } else {
    r = http_get(g_port, path, 60);
    c->connects++;
  }
  atomic_fetch_sub(&g_inflight, 1);
  keep_answer(path, &r);
}

static void scraper_done(http_conn *c) {
  atomic_fetch_add(&g_connects, (int)c->connects);
  http_conn_close(c);
}

static void *scrape_cpu(void *arg) {
  (void)arg;
  http_conn c = http_conn_open(g_port, 60);
  while (!atomic_load(&g_stop))
    get(&c, "/debug/pprof/profile?seconds=2", 2);
  scraper_done(&c);
  return NULL;
}

static void *scrape_memory(void *arg) {
  (void)arg;
  http_conn c = http_conn_open(g_port, 60);
  while (!atomic_load(&g_stop)) {
    get(&c, "/debug/pprof/allocs?seconds=1", 1);
    get(&c, "/debug/pprof/heap", 0);
  }
  scraper_done(&c);
  return NULL;
}

static void *scrape_load(void *arg) {
  static const char *const paths[] = {"/debug/pprof/heap", "/debug/pprof/profile?seconds=1",
                                      "/debug/pprof/allocs?seconds=1", "/debug/pprof/allocs"};
  http_conn c = http_conn_open(g_port, 60);
  for (int i = (int)(intptr_t)arg; !atomic_load(&g_stop); i++)
    get(&c, paths[i % 4], (i % 4 == 1 || i % 4 == 2) ? 1 : 0);
  scraper_done(&c);
  return NULL;
}

/* ---- one run ------------------------------------------------------------------------------ */

enum { TICK_MS = 50, MAX_TICKS = 1 << 16, MAX_PHASES = 64 };

typedef struct tick {
  double rounds, cpu, mine, t; /* rounds so far; process and own thread CPU; monotonic time */
} tick;

/* One configuration's figures over a stretch of a run. */
typedef struct figures {
  double rate, cpu_rate, other; /* rounds per second, per CPU-second; others' CPU per own */
} figures;

/* A phase of a run with the endpoint: the stretch its figures come from. */
typedef struct phase {
  double from, to;
  int valid; /* the stretch had enough ticks: f holds its figures */
  figures f;
  double bench_cpu[2]; /* this process's CPU time (the scrapers') at its start and end */
} phase;

static double process_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The figures between the first tick at or after a and the last at or
 * before b; 0 when under half a second lies between them. */
static int between(const tick *tk, int n, double a, double b, figures *f) {
  int i = 0, j = n - 1;
  while (i < n && tk[i].t < a)
    i++;
  while (j >= 0 && tk[j].t > b)
    j--;
  if (i >= n || j < 0 || tk[j].t - tk[i].t < 0.5)
    return 0;
  double rounds = tk[j].rounds - tk[i].rounds, cpu = tk[j].cpu - tk[i].cpu,
         mine = tk[j].mine - tk[i].mine;
  f->rate = rounds / (tk[j].t - tk[i].t);
  f->cpu_rate = rounds / cpu;
  f->other = (cpu - mine) / mine;
  return 1;
}

/* Starts the workload for `seconds` (with the endpoint, or without pprt);
 * returns its pid and its stdout and stderr as streams, or -1. */
static pid_t start(int endpoint, double seconds, FILE **out, FILE **err) {
  int o[2], e[2];
  if (pipe(o) != 0 || pipe(e) != 0)
    return -1;
  char secs[32], tick_ms[16];
  snprintf(secs, sizeof secs, "%g", seconds);
  snprintf(tick_ms, sizeof tick_ms, "%d", TICK_MS);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(o[1], 1);
    dup2(e[1], 2);
    close(o[0]);
    close(e[0]);
    unsetenv("PPRT_OWNER_PID");
    if (endpoint) {
      setenv("LD_PRELOAD", BENCH_PRELOAD, 1);
      setenv("PPRT_HTTP", "127.0.0.1:0", 1);
    }
    execl(BENCH_HTTP_WORK, BENCH_HTTP_WORK, secs, tick_ms, (char *)NULL);
    _exit(127);
  }
  close(o[1]);
  close(e[1]);
  *out = fdopen(o[0], "r");
  *err = fdopen(e[0], "r");
  return pid < 0 || *out == NULL || *err == NULL ? -1 : pid;
}

/* Waits for the workload; 0 when it exited 0. */
static int finish(pid_t pid, FILE *out, FILE *err, const char *what) {
  int status;
  waitpid(pid, &status, 0);
  fclose(out);
  fclose(err);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "bench/http: the workload failed (%s)\n", what);
    return -1;
  }
  return 0;
}

/* Reads the workload's tick lines into tk until it ends; returns how many,
 * or -1. If phase_len > 0, runs the phases meanwhile: phase k covers
 * [t0 + k phase_len, t0 + (k + 1) phase_len) from the first tick's t0, even
 * phases scraped, and ph[k] receives the stretch its figures come from. */
static int read_ticks(FILE *out, tick *tk, double phase_len, phase *ph) {
  char line[256];
  int n = 0, current = -1;
  double t0 = 0;
  while (fgets(line, sizeof line, out) != NULL) {
    tick t;
    if (sscanf(line, "tick %lf %lf %lf %lf", &t.rounds, &t.cpu, &t.mine, &t.t) != 4)
      continue;
    if (n == 0)
      t0 = t.t;
    if (n < MAX_TICKS)
      tk[n++] = t;
    if (!(phase_len > 0))
      continue;
    int k = (int)((t.t - t0) / phase_len);
    if (k >= MAX_PHASES)
      continue;
    if (k != current) {
      double now_cpu = process_cpu_s();
      if (current >= 0)
        ph[current].bench_cpu[1] = now_cpu;
      ph[k].bench_cpu[0] = now_cpu;
      current = k;
      ph[k].from = t0 + k * phase_len + 0.25;
      ph[k].to = t0 + (k + 1) * phase_len;
      atomic_store(&g_deadline, k % 2 ? 0 : ph[k].to);
      atomic_store(&g_scraping, k % 2 == 0);
      atomic_store(&g_phase, k);
    }
    /* A quiet phase starts counting once the scrapes before it are answered. */
    if (k % 2 == 1 && atomic_load(&g_inflight) > 0)
      ph[k].from = t.t + 0.25;
  }
  if (current >= 0)
    ph[current].bench_cpu[1] = process_cpu_s();
  atomic_store(&g_scraping, 0);
  return n;
}

/* A run without pprt: its figures over the whole run. */
static int run_bare(double seconds, tick *tk, figures *f) {
  FILE *out, *err;
  pid_t pid = start(0, seconds, &out, &err);
  if (pid < 0)
    return -1;
  int n = read_ticks(out, tk, 0, NULL);
  if (finish(pid, out, err, "no pprt") != 0 || !between(tk, n, tk[0].t, tk[n - 1].t, f))
    return -1;
  return 0;
}

/* A run with the endpoint, in nphases alternating phases (phase 0 scraped),
 * each phase's stretch and figures into ph[]. */
static int run_endpoint(double seconds, int nphases, tick *tk, phase *ph) {
  FILE *out, *err;
  pid_t pid = start(1, seconds, &out, &err);
  if (pid < 0)
    return -1;
  char line[256] = "";
  if (fgets(line, sizeof line, err) == NULL || !strstr(line, "serving http://")) {
    fprintf(stderr, "bench/http: the workload did not serve: %s", line);
    kill(pid, SIGKILL);
    finish(pid, out, err, "endpoint");
    return -1;
  }
  g_port = atoi(strstr(line, "127.0.0.1:") + 10);
  atomic_store(&g_stop, 0);
  atomic_store(&g_phase, -1);
  atomic_store(&g_scraping, 0);
  /* The scrapers stand for another machine: on the last CPU, when there is
   * more than one, so that they do not preempt the workload (whose
   * process, pprt's threads too, may run anywhere). */
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t saved, last;
  int pinned = ncpu > 1 && sched_getaffinity(0, sizeof saved, &saved) == 0;
  if (pinned) {
    CPU_ZERO(&last);
    CPU_SET((int)ncpu - 1, &last);
    pinned = sched_setaffinity(0, sizeof last, &last) == 0;
  }
  pthread_t t[64];
  int nt = 0;
  if (g_clients <= 2) {
    pthread_create(&t[nt++], NULL, scrape_cpu, NULL);
    pthread_create(&t[nt++], NULL, scrape_memory, NULL);
  } else {
    for (int i = 0; i < g_clients && nt < 64; i++)
      pthread_create(&t[nt++], NULL, scrape_load, (void *)(intptr_t)i);
  }
  memset(ph, 0, MAX_PHASES * sizeof *ph);
  int n = read_ticks(out, tk, seconds / nphases, ph);
  atomic_store(&g_stop, 1);
  for (int i = 0; i < nt; i++)
    pthread_join(t[i], NULL);
  if (pinned)
    sched_setaffinity(0, sizeof saved, &saved);
  if (finish(pid, out, err, "endpoint") != 0)
    return -1;
  check_answers();
  for (int k = 0; k < nphases; k++)
    ph[k].valid = ph[k].to > 0 && between(tk, n, ph[k].from, ph[k].to, &ph[k].f);
  return 0;
}

/* ---- the report --------------------------------------------------------------------------- */

enum { BARE, QUIET, SCRAPED, NCONFIG };
static const char *const labels[NCONFIG] = {"no pprt (own runs)", "endpoint, quiet phases",
                                            "endpoint, scraped phases"};

/* v[0..n) sorted, as a median and a range in percent off 1. */
static void print_ratios(const char *what, double *v, int n) {
  qsort(v, (size_t)n, sizeof v[0], cmp_double);
  printf("%s median %+.2f%% (%+.2f%% .. %+.2f%%, %d)", what, 100 * (median(v, n) - 1),
         100 * (v[0] - 1), 100 * (v[n - 1] - 1), n);
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 3;
  double seconds = argc > 2 ? atof(argv[2]) : 20;
  g_clients = argc > 3 ? atoi(argv[3]) : 2;
  const char *conn = argc > 4 ? argv[4] : "keep-alive";
  g_keep_alive = strcmp(conn, "keep-alive") == 0;
  if (runs < 1 || runs > 51 || !(seconds >= 6) || seconds > 600 || g_clients < 1 ||
      g_clients > 64 || (!g_keep_alive && strcmp(conn, "close") != 0)) {
    fprintf(stderr, "usage: bench/http [runs 1-51] [seconds 6-600] [clients 1-64] "
                    "[keep-alive|close]\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  /* Phases of about 4 s (room for a 1 s profile and its quiet stretch). The
   * first is scraped but not counted: it reads the debug information for
   * the first time, a cost paid once. An odd number follow it, so that the
   * counted ones begin and end quiet. */
  int nphases = (int)(seconds / 4);
  if (nphases % 2 == 1)
    nphases++;
  if (nphases < 4)
    nphases = 4;
  if (nphases > MAX_PHASES - 2)
    nphases = MAX_PHASES - 2;
  tick *tk = malloc(MAX_TICKS * sizeof *tk);
  /* Every figure, by configuration; the pairs of a scraped phase with the
   * mean of the quiet phases beside it. */
  int cap = runs * MAX_PHASES, count[NCONFIG] = {0}, npairs = 0;
  double *rate[NCONFIG], *cpu[NCONFIG], *other[NCONFIG];
  for (int c = 0; c < NCONFIG; c++) {
    rate[c] = malloc((size_t)cap * sizeof(double));
    cpu[c] = malloc((size_t)cap * sizeof(double));
    other[c] = malloc((size_t)cap * sizeof(double));
  }
  double *scrapers = malloc((size_t)cap * sizeof(double)); /* share of a CPU, scraped phases */
  int nscrapers = 0;
  double *pair_cpu = malloc((size_t)cap * sizeof(double)),
         *pair_rate = malloc((size_t)cap * sizeof(double)),
         *pair_bare = malloc((size_t)cap * sizeof(double));
  if (tk == NULL || scrapers == NULL || pair_cpu == NULL || pair_rate == NULL ||
      pair_bare == NULL)
    return 1;
  double t0 = now_s();
  for (int r = 0; r < runs; r++) {
    figures bare;
    phase ph[MAX_PHASES];
    if (run_bare(seconds, tk, &bare) != 0 || run_endpoint(seconds, nphases, tk, ph) != 0)
      return 1;
    rate[BARE][count[BARE]] = bare.rate;
    cpu[BARE][count[BARE]] = bare.cpu_rate;
    other[BARE][count[BARE]++] = bare.other;
    for (int k = 1; k < nphases; k++) {
      if (!ph[k].valid)
        continue;
      const figures *f = &ph[k].f, *before = &ph[k - 1].f, *after = &ph[k + 1].f;
      int c = k % 2 ? QUIET : SCRAPED;
      if (c == SCRAPED)
        scrapers[nscrapers++] = (ph[k].bench_cpu[1] - ph[k].bench_cpu[0]) / (seconds / nphases);
      rate[c][count[c]] = f->rate;
      cpu[c][count[c]] = f->cpu_rate;
      other[c][count[c]++] = f->other;
      if (c == SCRAPED && ph[k - 1].valid && ph[k + 1].valid) {
        pair_cpu[npairs] = 2 * f->cpu_rate / (before->cpu_rate + after->cpu_rate);
        pair_rate[npairs] = 2 * f->rate / (before->rate + after->rate);
        pair_bare[npairs++] = f->cpu_rate / bare.cpu_rate;
      }
    }
  }
  printf("bench/http: %d run(s) of %.0f s, each in %d phases of %.1f s (the first, scraped, "
         "uncounted), then quiet and scraped in turn; %s; rounds of work, median\n",
         runs, seconds, nphases, seconds / nphases,
         g_clients <= 2 ? "scraper: CPU profiles back to back + allocs?seconds=1 and heap"
                        : "scrapers: clients cycling heap, 1 s CPU, allocs deltas");
  printf("  %-26s %12s %14s %20s\n", "", "per second", "per CPU-second", "pprt's threads' CPU");
  double med[NCONFIG], cmed[NCONFIG];
  for (int c = 0; c < NCONFIG; c++) {
    if (count[c] == 0 || npairs == 0) {
      fprintf(stderr, "bench/http: no phase had enough ticks; is the machine overloaded?\n");
      return 1;
    }
    med[c] = median(rate[c], count[c]);
    cmed[c] = median(cpu[c], count[c]);
    printf("  %-26s %12.0f %14.0f %19.2f%%\n", labels[c], med[c], cmed[c],
           100 * median(other[c], count[c]));
  }
  print_ratios("scraped / quiet, each scraped phase against the quiet ones beside it: per "
               "CPU-second",
               pair_cpu, npairs);
  print_ratios(", per second", pair_rate, npairs);
  printf("\n");
  print_ratios("scraped / no pprt (separate processes, so their layouts differ): per CPU-second",
               pair_bare, npairs);
  qsort(scrapers, (size_t)nscrapers, sizeof scrapers[0], cmp_double);
  printf("\nthe scrapers' own CPU in scraped phases: median %.2f%% of a CPU",
         100 * median(scrapers, nscrapers));
  printf("\nresponses: %d profiles, %d CPU profiles refused as busy, %d invalid (%d client(s), "
         "%s, %d connections; %.0f s in all)\n",
         atomic_load(&g_ok), atomic_load(&g_busy), atomic_load(&g_bad), g_clients,
         g_keep_alive ? "HTTP/1.1 kept connections" : "HTTP/1.0, a connection per request",
         atomic_load(&g_connects), now_s() - t0);
  return atomic_load(&g_bad) == 0 ? 0 : 1;
}
