/* CPU profiler benchmark: what profiling costs a program, what rate the
 * kernel really delivers, what one sample costs in the handler, how evenly
 * two identical threads are sampled, and whether anything is lost; pprt
 * side by side with gperftools' libprofiler, in one run.
 *
 *   1. Slowdown and rate. The workload (bench/cpu_work: 2 threads, a fixed
 *      amount of arithmetic each, 16 frames deep) runs as a child process,
 *      unprofiled and under each profiler, both loaded the same way
 *      (LD_PRELOAD, profile path and rate from the environment). Rounds
 *      interleave the configurations; a configuration's slowdown is the
 *      median over rounds of its wall time against the same round's
 *      unprofiled run, over the rounds where both runs had the machine to
 *      themselves (other load stretches wall time, not CPU time). The same
 *      ratio on the process's CPU time over the timed window is printed
 *      for every round, and judges when too few rounds were clean. A
 *      second unprofiled run per round shows the noise. The rate is read
 *      from what came: SIGPROF deliveries counted in the workload, and
 *      samples counted in the profile, both per CPU-second of the workers.
 *   2. Handler cost per sample, in this process: raise(SIGPROF) at the
 *      bottom of a recursion, with a handler doing what pprt's does
 *      (context registers, unwind, one ring write; the ring drained
 *      between batches) against the same raise() with an empty handler.
 *      Then single signals paced apart with a reader thread asleep in
 *      pprt__ring_read, as pprt's is between samples, so that each record
 *      also pays for waking it. Part 1's "others' CPU" and "workers
 *      preempted" show the other side of that wake-up.
 *   3. Fairness: the two workers are identical but spin in different leaf
 *      functions, so each profile's samples split by thread.
 *   4. Lost samples: 8 busy threads at 250 Hz under pprt.
 *
 * Linux only (LD_PRELOAD, per-thread CPU timers). gperftools is looked for
 * where Debian and others install it (or BENCH_LIBPROFILER=path); without
 * it its rows are skipped with a line that says how to install it.
 *
 * Usage: bench/cpu [seconds of work per thread and run, default 0.8
 *                   [rounds, default 5]] */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/platform.h"
#include "core/profile.h"
#include "core/ring.h"
#include "core/thread.h"
#include "core/unwind.h"
#include "pprt.h"

#define THREADS 2
#define WORK_DEPTH 16 /* the workload's frames above its leaf */
#define MAX_ROUNDS 64
#define LOST_THREADS 8
#define LOST_HZ 250
#define LOST_DEPTH 48
#define LOST_SECONDS 3.0

static double work_seconds = 0.8;
static int rounds = 5;
static double ips; /* the workload's leaf iterations per CPU-second */
static char tmpdir[] = "/tmp/pprt-bench-cpu.XXXXXX";
static char gperf_lib[4096]; /* "" when gperftools is not there */

/* ---- small helpers -------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(const double *v, int n) {
  double s[MAX_ROUNDS * 64];
  if (n <= 0)
    return NAN;
  memcpy(s, v, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      char *bigger = realloc(buf, 2 * cap + 1);
      if (bigger == NULL) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = bigger;
      cap *= 2;
    }
  }
  fclose(f);
  if (buf) {
    buf[n] = '\0';
    *len = n;
  }
  return buf;
}

/* The value of " key=" in a line of key=value pairs, or NULL. */
static const char *field(const char *line, const char *key) {
  size_t k = strlen(key);
  for (const char *p = line; (p = strstr(p, key)) != NULL; p += k)
    if ((p == line || p[-1] == ' ') && p[k] == '=')
      return p + k + 1;
  return NULL;
}

/* ---- running the workload ---------------------------------------------------------- */

typedef enum prof_kind { PROF_NONE, PROF_PPRT, PROF_GPERF } prof_kind;

typedef struct config {
  const char *name;
  prof_kind kind;
  int hz;
  const char *pprt_timer; /* PPRT_CPUPROFILE_TIMER, NULL: auto */
  int per_thread;         /* gperftools: CPUPROFILE_PER_THREAD_TIMERS=1 */
} config;

typedef struct result {
  int ok;
  double wall_s, cpu_s;   /* the workload's own figures */
  double window_cpu_s;    /* the process's over the same window */
  double preempted;       /* the workers' involuntary context switches */
  double signals;         /* SIGPROF delivered to the workers */
  double samples;         /* in the profile (pprt: weighted by timer overrun) */
  double leaf_samples[2]; /* samples whose leaf pc is in leaf_a / leaf_b */
  double lost_frame;      /* pprt: samples on pprt_lost_samples */
  long lost_comment;      /* pprt: "lost samples N"; -1 when absent */
  char comments[4][200];  /* pprt's profile comments */
  int ncomments;
  char method[64];   /* gperftools' stack trace method */
  char summary[160]; /* gperftools' "PROFILE: interrupts/..." line */
  uintptr_t leaf[2][2];
} result;

static void set_profiler_env(const config *c, const char *profile) {
  const char *vars[] = {"LD_PRELOAD",
                        "PPRT_CPUPROFILE",
                        "PPRT_CPUPROFILE_HZ",
                        "PPRT_CPUPROFILE_TIMER",
                        "PPRT_CPUPROFILE_PID",
                        "PPRT_SYMBOLIZE",
                        "CPUPROFILE",
                        "CPUPROFILE_FREQUENCY",
                        "CPUPROFILE_PER_THREAD_TIMERS",
                        "CPUPROFILE_TIMER_SIGNAL",
                        "CPUPROFILE_REALTIME",
                        "CPUPROFILESIGNAL",
                        "TCMALLOC_STACKTRACE_METHOD",
                        "TCMALLOC_STACKTRACE_METHOD_VERBOSE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    unsetenv(vars[i]);
  char hz[16];
  snprintf(hz, sizeof hz, "%d", c->hz);
  if (c->kind == PROF_PPRT) {
    setenv("LD_PRELOAD", BENCH_PRELOAD, 1);
    setenv("PPRT_CPUPROFILE", profile, 1);
    setenv("PPRT_CPUPROFILE_HZ", hz, 1);
    if (c->pprt_timer)
      setenv("PPRT_CPUPROFILE_TIMER", c->pprt_timer, 1);
  } else if (c->kind == PROF_GPERF) {
    setenv("LD_PRELOAD", gperf_lib, 1);
    setenv("CPUPROFILE", profile, 1);
    setenv("CPUPROFILE_FREQUENCY", hz, 1);
    setenv("TCMALLOC_STACKTRACE_METHOD_VERBOSE", "t", 1); /* names its unwinder */
    if (c->per_thread)
      setenv("CPUPROFILE_PER_THREAD_TIMERS", "1", 1);
  }
}

/* Runs the workload under c: its stdout line into out, stderr into errpath. */
static int spawn(const config *c, const char *profile, char *const argv[], char *out, size_t outlen,
                 const char *errpath) {
  int fds[2];
  if (pipe(fds) != 0)
    return -1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    set_profiler_env(c, profile);
    int err = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0) {
      dup2(err, 2);
      close(err);
    }
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execv(argv[0], argv);
    _exit(127);
  }
  close(fds[1]);
  size_t n = 0;
  for (ssize_t got; n + 1 < outlen && (got = read(fds[0], out + n, outlen - 1 - n)) != 0;) {
    if (got < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    n += (size_t)got;
  }
  out[n] = '\0';
  close(fds[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return -1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static int leaf_of(const result *r, uintptr_t pc) {
  for (int i = 0; i < 2; i++)
    if (pc >= r->leaf[i][0] && pc < r->leaf[i][1])
      return i;
  return -1;
}

static const Pprt__Location *location(const Pprt__Profile *p, uint64_t id) {
  if (id >= 1 && id <= p->n_location && p->location[id - 1]->id == id)
    return p->location[id - 1];
  for (size_t i = 0; i < p->n_location; i++)
    if (p->location[i]->id == id)
      return p->location[i];
  return NULL;
}

static const char *function_name(const Pprt__Profile *p, const Pprt__Location *loc) {
  if (loc == NULL || loc->n_line == 0)
    return "";
  for (size_t i = 0; i < p->n_function; i++)
    if (p->function[i]->id == loc->line[0]->function_id) {
      int64_t s = p->function[i]->name;
      return s >= 0 && (size_t)s < p->n_string_table ? p->string_table[s] : "";
    }
  return "";
}

/* pprt's gzip'd pprof profile, decoded with pprt's own reader. */
static int read_pprt_profile(const char *path, result *r) {
  size_t len;
  char *data = read_file(path, &len);
  if (data == NULL)
    return -1;
  Pprt__Profile *p;
  char err[256];
  int rc = pprt__profile_decode(data, len, &p, err, sizeof err);
  free(data);
  if (rc != 0) {
    fprintf(stderr, "bench/cpu: %s: %s\n", path, err);
    return -1;
  }
  for (size_t i = 0; i < p->n_sample; i++) {
    const Pprt__Sample *s = p->sample[i];
    if (s->n_value < 1 || s->n_location_id < 1)
      continue;
    double v = (double)s->value[0];
    const Pprt__Location *leaf = location(p, s->location_id[0]);
    r->samples += v;
    if (leaf && leaf->address == 0 && strcmp(function_name(p, leaf), PPRT__FRAME_LOST) == 0)
      r->lost_frame += v;
    int which = leaf ? leaf_of(r, (uintptr_t)leaf->address) : -1;
    if (which >= 0)
      r->leaf_samples[which] += v;
  }
  r->lost_comment = -1;
  for (size_t i = 0; i < p->n_comment; i++) {
    int64_t s = p->comment[i];
    if (s < 0 || (size_t)s >= p->n_string_table)
      continue;
    const char *c = p->string_table[s];
    long lost;
    if (sscanf(c, "lost samples %ld", &lost) == 1)
      r->lost_comment = lost;
    if (r->ncomments < 4)
      snprintf(r->comments[r->ncomments++], sizeof r->comments[0], "%s", c);
  }
  pprt__profile_decoded_free(p);
  return 0;
}

/* gperftools' legacy CPU profile (docs/cpuprofile-fileformat): native
 * words; header [0, 3, 0, period_us, 0]; records [count, depth, pcs...]
 * with the interrupted pc first; trailer [0, 1, 0]; then the maps text. */
static int read_gperf_profile(const char *path, result *r) {
  size_t len;
  char *data = read_file(path, &len);
  if (data == NULL)
    return -1;
  size_t n = len / sizeof(uintptr_t);
  uintptr_t *w = malloc(n * sizeof *w + 1);
  if (w == NULL) {
    free(data);
    return -1;
  }
  memcpy(w, data, n * sizeof *w);
  free(data);
  int rc = -1;
  if (n >= 5 && w[0] == 0 && w[1] >= 3 && w[1] < n) {
    for (size_t i = 2 + w[1]; i + 2 <= n;) {
      uintptr_t count = w[i], depth = w[i + 1];
      if (count == 0 && depth == 1 && i + 2 < n && w[i + 2] == 0) {
        rc = 0; /* the trailer */
        break;
      }
      if (depth == 0 || depth > n - i - 2)
        break;
      r->samples += (double)count;
      int which = leaf_of(r, w[i + 2]);
      if (which >= 0)
        r->leaf_samples[which] += (double)count;
      i += 2 + depth;
    }
  }
  free(w);
  if (rc != 0)
    fprintf(stderr, "bench/cpu: %s: not a gperftools CPU profile\n", path);
  return rc;
}

/* gperftools tells on stderr which unwinder it chose and what it saw. */
static void read_gperf_stderr(const char *path, result *r) {
  size_t len;
  char *text = read_file(path, &len);
  if (text == NULL)
    return;
  const char *m = strstr(text, "Chosen stacktrace method is ");
  if (m)
    sscanf(m + strlen("Chosen stacktrace method is "), "%63s", r->method);
  const char *s = strstr(text, "PROFILE: interrupts/evictions/bytes");
  if (s) {
    size_t k = strcspn(s, "\n");
    snprintf(r->summary, sizeof r->summary, "%.*s", (int)(k < 159 ? k : 159), s);
  }
  free(text);
}

static int run_id;

/* One run of the workload under c; nthreads x iterations at depth. */
static result run_workload(const config *c, int nthreads, double iterations, int depth) {
  result r;
  memset(&r, 0, sizeof r);
  r.lost_comment = -1;
  char profile[256], errpath[256], threads[16], iters[32], depths[16], out[4096];
  run_id++;
  snprintf(profile, sizeof profile, "%s/profile-%d", tmpdir, run_id);
  snprintf(errpath, sizeof errpath, "%s/stderr-%d", tmpdir, run_id);
  snprintf(threads, sizeof threads, "%d", nthreads);
  snprintf(iters, sizeof iters, "%.0f", iterations);
  snprintf(depths, sizeof depths, "%d", depth);
  char *argv[] = {BENCH_CPU_WORK, "run", threads, iters, depths, NULL};
  if (spawn(c, profile, argv, out, sizeof out, errpath) != 0) {
    size_t len;
    char *err = read_file(errpath, &len);
    fprintf(stderr, "bench/cpu: %s: the workload failed%s%s\n", c->name, err ? ": " : "",
            err ? err : "");
    free(err);
    goto done;
  }
  const char *v;
  void *a0, *a1, *b0, *b1;
  if ((v = field(out, "wall_ns")) == NULL || (r.wall_s = atof(v) / 1e9) <= 0 ||
      (v = field(out, "cpu_ns")) == NULL || (r.cpu_s = atof(v) / 1e9) <= 0 ||
      (v = field(out, "process_cpu_ns")) == NULL || (r.window_cpu_s = atof(v) / 1e9) <= 0 ||
      (v = field(out, "signals")) == NULL || (r.signals = atof(v)) < 0 ||
      (v = field(out, "preempted")) == NULL || (r.preempted = atof(v)) < 0 ||
      (v = field(out, "leaf_a")) == NULL || sscanf(v, "%p:%p", &a0, &a1) != 2 ||
      (v = field(out, "leaf_b")) == NULL || sscanf(v, "%p:%p", &b0, &b1) != 2) {
    fprintf(stderr, "bench/cpu: %s: cannot read the workload's line: %s\n", c->name, out);
    goto done;
  }
  r.leaf[0][0] = (uintptr_t)a0;
  r.leaf[0][1] = (uintptr_t)a1;
  r.leaf[1][0] = (uintptr_t)b0;
  r.leaf[1][1] = (uintptr_t)b1;
  if (c->kind == PROF_PPRT && read_pprt_profile(profile, &r) != 0)
    goto done;
  if (c->kind == PROF_GPERF) {
    read_gperf_stderr(errpath, &r);
    if (read_gperf_profile(profile, &r) != 0)
      goto done;
  }
  if (r.samples > 0 && r.leaf_samples[0] + r.leaf_samples[1] < 0.9 * r.samples)
    fprintf(stderr, "bench/cpu: %s: only %.0f of %.0f samples in the workers' leaves\n", c->name,
            r.leaf_samples[0] + r.leaf_samples[1], r.samples);
  r.ok = 1;
done:
  unlink(profile);
  unlink(errpath);
  return r;
}

static double calibrate(void) {
  char out[256], errpath[256];
  snprintf(errpath, sizeof errpath, "%s/stderr-calibrate", tmpdir);
  char *argv[] = {BENCH_CPU_WORK, "calibrate", "0.3", NULL};
  config none = {"calibrate", PROF_NONE, 0, NULL, 0};
  double n = 0;
  const char *v;
  if (spawn(&none, "", argv, out, sizeof out, errpath) == 0 && (v = field(out, "ips")))
    n = atof(v);
  unlink(errpath);
  return n;
}

static void find_gperftools(void) {
  const char *env = getenv("BENCH_LIBPROFILER");
  const char *candidates[] = {
      env ? env : "",
      "/usr/lib/x86_64-linux-gnu/libprofiler.so.0",
      "/usr/lib/aarch64-linux-gnu/libprofiler.so.0",
      "/usr/lib/i386-linux-gnu/libprofiler.so.0",
      "/usr/lib64/libprofiler.so.0",
      "/usr/lib/libprofiler.so.0",
      "/usr/local/lib/libprofiler.so.0",
      "/usr/local/lib/libprofiler.so",
  };
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++)
    if (candidates[i][0] && access(candidates[i], R_OK) == 0) {
      snprintf(gperf_lib, sizeof gperf_lib, "%s", candidates[i]);
      return;
    }
}

/* ---- 1 and 3: slowdown, rate, fairness -------------------------------------------- */

enum {
  C_NONE,
  C_PPRT_100,
  C_PPRT_100_PT,
  C_PPRT_1000,
  C_GPERF_100,
  C_GPERF_100_PT,
  C_GPERF_1000,
  C_GPERF_1000_PT,
  C_NONE_AGAIN,
  NCONFIGS
};

static const config configs[NCONFIGS] = {
    [C_NONE] = {"unprofiled", PROF_NONE, 0, NULL, 0},
    [C_PPRT_100] = {"pprt 100 Hz", PROF_PPRT, 100, NULL, 0},
    [C_PPRT_100_PT] = {"pprt 100 Hz, TIMER=per-thread", PROF_PPRT, 100, "per-thread", 0},
    [C_PPRT_1000] = {"pprt 1000 Hz", PROF_PPRT, 1000, NULL, 0},
    [C_GPERF_100] = {"gperftools 100 Hz", PROF_GPERF, 100, NULL, 0},
    [C_GPERF_100_PT] = {"gperftools 100 Hz, per-thread", PROF_GPERF, 100, NULL, 1},
    [C_GPERF_1000] = {"gperftools 1000 Hz", PROF_GPERF, 1000, NULL, 0},
    [C_GPERF_1000_PT] = {"gperftools 1000 Hz, per-thread", PROF_GPERF, 1000, NULL, 1},
    [C_NONE_AGAIN] = {"unprofiled again (the noise)", PROF_NONE, 0, NULL, 0},
};

typedef struct summary {
  int n;                   /* rounds measured */
  int nclean;              /* rounds where this run and the unprofiled one were clean */
  double slowdown, lo, hi; /* wall: median, min, max over clean rounds of ratio - 1 */
  double cpu_slowdown;     /* process CPU over the window: median over rounds of ratio - 1 */
  double cpu_lo, cpu_hi;
  double wall_s;
  double others;      /* CPU of the threads other than the workers / the workers' CPU */
  double preemptions; /* the workers' involuntary context switches per CPU-second */
  double signals_rate, samples_rate;
  double share_a;  /* leaf_a's share of the samples, all rounds pooled */
  double mean_dev; /* mean over runs of |leaf_a's share - 1/2| */
} summary;

static result runs[NCONFIGS][MAX_ROUNDS];
static summary sums[NCONFIGS];
static long ncpu = 1;

/* A run had the machine to itself when its process got the CPU time of all
 * the cores its workers could use over the window: other load on the
 * machine stretches wall time, not CPU time. */
#define CLEAN_UTILIZATION 0.95
#define MIN_CLEAN_PAIRS 3

static int clean(const result *x) {
  double cores = THREADS < ncpu ? THREADS : (double)ncpu;
  return x->window_cpu_s >= CLEAN_UTILIZATION * x->wall_s * cores;
}

static void range(const double *v, int n, double *lo, double *hi) {
  *lo = *hi = v[0];
  for (int i = 1; i < n; i++) {
    *lo = fmin(*lo, v[i]);
    *hi = fmax(*hi, v[i]);
  }
}

static void summarize(int c) {
  double ratio[MAX_ROUNDS], cpu_ratio[MAX_ROUNDS], wall[MAX_ROUNDS], others[MAX_ROUNDS];
  double signals = 0, samples = 0, cpu = 0, preempted = 0, leaf[2] = {0, 0}, dev = 0;
  int n = 0, nclean = 0, nshare = 0;
  summary *s = &sums[c];
  for (int r = 0; r < rounds; r++) {
    const result *x = &runs[c][r], *base = &runs[C_NONE][r];
    if (!x->ok || !base->ok)
      continue;
    if (clean(x) && clean(base))
      ratio[nclean++] = x->wall_s / base->wall_s - 1;
    cpu_ratio[n] = x->window_cpu_s / base->window_cpu_s - 1;
    wall[n] = x->wall_s;
    others[n] = (x->window_cpu_s - x->cpu_s) / x->cpu_s;
    n++;
    signals += x->signals;
    samples += x->samples;
    cpu += x->cpu_s;
    preempted += x->preempted;
    leaf[0] += x->leaf_samples[0];
    leaf[1] += x->leaf_samples[1];
    double t = x->leaf_samples[0] + x->leaf_samples[1];
    if (t > 0) {
      dev += fabs(x->leaf_samples[0] / t - 0.5);
      nshare++;
    }
  }
  s->n = n;
  s->nclean = nclean;
  if (!n)
    return;
  s->slowdown = nclean ? median(ratio, nclean) : NAN;
  if (nclean)
    range(ratio, nclean, &s->lo, &s->hi);
  s->cpu_slowdown = median(cpu_ratio, n);
  range(cpu_ratio, n, &s->cpu_lo, &s->cpu_hi);
  s->wall_s = median(wall, n);
  s->others = median(others, n);
  s->preemptions = preempted / cpu;
  s->signals_rate = signals / cpu;
  s->samples_rate = samples / cpu;
  s->share_a = leaf[0] + leaf[1] > 0 ? leaf[0] / (leaf[0] + leaf[1]) : NAN;
  s->mean_dev = nshare ? dev / nshare : NAN;
}

/* Whether the wall figures can be trusted for c: enough clean rounds for it
 * and for the noise control. */
static int wall_usable(int c) {
  return sums[c].nclean >= MIN_CLEAN_PAIRS && sums[C_NONE_AGAIN].nclean >= MIN_CLEAN_PAIRS;
}

static void bench_workload(void) {
  double iterations = floor(ips * work_seconds);
  printf("\n1, 3. slowdown, rate delivered, fairness\n"
         "  workload: %d threads x %.2f s of CPU (%.0f iterations each), %d frames deep;\n"
         "  %d rounds, the configurations in a different order each round\n",
         THREADS, work_seconds, iterations, WORK_DEPTH, rounds);
  if (!gperf_lib[0])
    printf("  gperftools not found: apt-get install libgoogle-perftools-dev "
           "(or BENCH_LIBPROFILER=/path/to/libprofiler.so); its rows are skipped\n");
  for (int r = 0; r < rounds; r++)
    for (int k = 0; k < NCONFIGS; k++) {
      int c = (k + r) % NCONFIGS;
      if (configs[c].kind == PROF_GPERF && !gperf_lib[0])
        continue;
      runs[c][r] = run_workload(&configs[c], THREADS, iterations, WORK_DEPTH);
    }
  for (int c = 0; c < NCONFIGS; c++)
    summarize(c);

  printf("\n  %-30s %8s %26s %22s %7s %9s\n", "what it costs", "wall", "wall slowdown",
         "CPU slowdown", "others'", "workers");
  printf("  %-30s %8s %26s %22s %7s %9s\n", "", "(median)", "clean rounds: median [range]",
         "median [range]", "CPU", "preempted");
  for (int c = 0; c < NCONFIGS; c++) {
    const summary *s = &sums[c];
    if (!s->n) {
      printf("  %-30s %s\n", configs[c].name,
             configs[c].kind == PROF_GPERF && !gperf_lib[0] ? "skipped (gperftools not found)"
                                                            : "FAILED");
      continue;
    }
    char slow[64], cpu[64] = "";
    if (c == C_NONE)
      snprintf(slow, sizeof slow, "%d: (baseline)", s->nclean);
    else if (s->nclean)
      snprintf(slow, sizeof slow, "%d: %+.2f%% [%+.1f .. %+.1f]", s->nclean, 100 * s->slowdown,
               100 * s->lo, 100 * s->hi);
    else
      snprintf(slow, sizeof slow, "0: -");
    if (c != C_NONE)
      snprintf(cpu, sizeof cpu, "%+.2f%% [%+.1f .. %+.1f]", 100 * s->cpu_slowdown, 100 * s->cpu_lo,
               100 * s->cpu_hi);
    printf("  %-30s %5.0f ms %26s %22s %6.2f%% %5.0f /s\n", configs[c].name, s->wall_s * 1e3, slow,
           cpu, 100 * s->others, s->preemptions);
  }
  printf("\n  %-30s %6s %16s %16s %14s %12s\n", "what came", "asked", "signals", "samples",
         "thread A : B", "mean");
  printf("  %-30s %6s %16s %16s %14s %12s\n", "", "Hz", "per CPU-second", "per CPU-second",
         "all rounds", "|A - 50%|");
  for (int c = 0; c < NCONFIGS; c++) {
    const summary *s = &sums[c];
    if (!s->n || configs[c].kind == PROF_NONE)
      continue;
    printf("  %-30s %6d %16.0f %16.0f %6.1f : %4.1f %11.1f%%\n", configs[c].name, configs[c].hz,
           s->signals_rate, s->samples_rate, 100 * s->share_a, 100 - 100 * s->share_a,
           100 * s->mean_dev);
  }

  printf("\n  wall slowdown: wall time / the same round's unprofiled wall time - 1, over the\n"
         "  rounds where both runs had the machine to themselves (their process got >= %.0f%%\n"
         "  of the CPU time its %d workers could use: other load on the machine stretches\n"
         "  wall time, not CPU time).\n"
         "  CPU slowdown: the same on the process's CPU time over the window (the workers,\n"
         "  their signal handlers, the profiler's own threads), every round.\n"
         "  others' CPU: the CPU time of the threads other than the workers over the window\n"
         "  (the profiler's reader, the main thread), as a share of the workers'.\n"
         "  workers preempted: involuntary context switches per CPU-second of work (a woken\n"
         "  profiler thread takes a busy worker's CPU).\n"
         "  signals: SIGPROF delivered to the two workers, counted in the workload;\n"
         "  samples: what the profile holds (pprt weights a per-thread tick by 1 + its timer\n"
         "  overrun, so its samples can exceed the signals that came). Linux evaluates CPU\n"
         "  timers on the scheduler tick: at most CONFIG_HZ signals per thread per CPU-second.\n"
         "  thread A : B: the workers' shares of the samples (50 : 50 is fair), all rounds\n"
         "  pooled, and the mean over runs of how far A's share was from 50%%.\n",
         100 * CLEAN_UTILIZATION, THREADS);
  const result *p100 = &runs[C_PPRT_100][0], *p1000 = &runs[C_PPRT_1000][0];
  for (int i = 0; i < p100->ncomments; i++)
    printf("  pprt 100 Hz profile says:  %s\n", p100->comments[i]);
  for (int i = 0; i < p1000->ncomments; i++)
    printf("  pprt 1000 Hz profile says: %s\n", p1000->comments[i]);
  if (gperf_lib[0]) {
    const result *g = &runs[C_GPERF_100][0];
    printf("  gperftools: %s, stack trace method %s;\n"
           "  its per-thread rows set CPUPROFILE_PER_THREAD_TIMERS=1 and each worker calls\n"
           "  ProfilerRegisterThread() (gperftools arms a thread's timer only there)\n",
           gperf_lib, g->method[0] ? g->method : "(not reported)");
    if (g->summary[0])
      printf("  gperftools 100 Hz says:    %s\n", g->summary);
  }
}

/* ---- 2: handler cost per sample ------------------------------------------------------ */

enum { H_EMPTY, H_FP, H_LIBUNWIND };

#define HANDLER_MAX_DEPTH 256 /* the pcs array of pprt's record() */
#define EXTRA_FRAMES 8        /* recursion beyond the depth walked */

static pprt__ring g_ring;
static uint64_t *g_readbuf;
static int g_mode, g_time_inside;
static size_t g_depth;
static uint64_t g_frames, g_inside_ns;

/* What pprt's record() does for one sample, after the checks on_sigprof
 * makes: unwind from the interrupted context, one ring write. */
static void bench_handler(int sig, siginfo_t *info, void *ucontext) {
  (void)sig;
  (void)info;
  if (g_mode == H_EMPTY)
    return;
  uint64_t t0 = g_time_inside ? pprt__os_monotonic_ns() : 0;
  uintptr_t pcs[HANDLER_MAX_DEPTH];
  size_t n = 0;
#ifdef BENCH_HAVE_LIBUNWIND
  if (g_mode == H_LIBUNWIND) {
    int got = pprt__unwind_libunwind(ucontext, pcs, g_depth);
    n = got > 0 ? (size_t)got : 0;
  }
#endif
  pprt__os_regs regs;
  if (g_mode == H_FP && pprt__os_context_regs(ucontext, &regs) == 0)
    n = pprt__unwind_fp(&regs, pprt__thread_self()->stack, pcs, g_depth);
  uint64_t hdr[2] = {pprt__thread_id(), 1};
  pprt__ring_write(&g_ring, pprt__os_monotonic_ns(), hdr, pcs, n);
  g_frames += n;
  if (g_time_inside)
    g_inside_ns += pprt__os_monotonic_ns() - t0;
}

static void drain(void) {
  pprt__ring_record rec;
  while (pprt__ring_read(&g_ring, PPRT__RING_NONBLOCK, 0, g_readbuf, &rec) == 1)
    ;
}

/* depth frames of recursion, then n signals raised at the bottom. */
__attribute__((noinline)) static void raise_at_depth(int depth, long n) {
  if (depth > 0) {
    raise_at_depth(depth - 1, n);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
    return;
  }
  for (long i = 0; i < n; i++)
    raise(SIGPROF);
}

typedef struct hcost {
  double empty_ns, full_ns, inside_ns, frames;
} hcost;

/* ns per signal with the empty handler and with mode, batches alternating
 * for about `seconds`, medians of the batches. */
static hcost measure_handler(int mode, size_t depth, long batch, double seconds) {
  static double e[4096], f[4096];
  hcost h = {0, 0, 0, 0};
  g_depth = depth;
  int rd = (int)depth + EXTRA_FRAMES;
  g_mode = mode;
  raise_at_depth(rd, batch / 10 + 1); /* warm up (libunwind's caches) */
  drain();
  int k = 0;
  uint64_t frames = 0, signals = 0, until = pprt__os_monotonic_ns() + (uint64_t)(seconds * 1e9);
  while (k < 4096 && (k < 5 || pprt__os_monotonic_ns() < until)) {
    g_mode = H_EMPTY;
    uint64_t t0 = pprt__os_monotonic_ns();
    raise_at_depth(rd, batch);
    uint64_t t1 = pprt__os_monotonic_ns();
    g_mode = mode;
    g_frames = 0;
    raise_at_depth(rd, batch);
    uint64_t t2 = pprt__os_monotonic_ns();
    drain();
    e[k] = (double)(t1 - t0) / (double)batch;
    f[k] = (double)(t2 - t1) / (double)batch;
    frames += g_frames;
    signals += (uint64_t)batch;
    k++;
  }
  h.empty_ns = median(e, k);
  h.full_ns = median(f, k);
  h.frames = (double)frames / (double)signals;
  g_mode = mode;
  g_time_inside = 1;
  for (k = 0; k < 21; k++) {
    g_inside_ns = 0;
    raise_at_depth(rd, batch);
    drain();
    e[k] = (double)g_inside_ns / (double)batch;
  }
  g_time_inside = 0;
  h.inside_ns = median(e, k);
  g_mode = H_EMPTY;
  return h;
}

struct unregistered_arg {
  hcost h;
};

static void *unregistered_thread(void *p) {
  struct unregistered_arg *a = p;
  a->h = measure_handler(H_FP, 64, 1000, 1.0);
  return NULL;
}

/* pprt's reader, as it waits between samples: asleep in pprt__ring_read. */
static void *live_reader(void *arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  pprt__ring_record rec;
  while (pprt__ring_read(&g_ring, PPRT__RING_BLOCK, 100000000, g_readbuf, &rec) != 0)
    ;
  return NULL;
}

/* At profiling rates the reader is asleep when a record comes, so the
 * handler's ring write also wakes it (a futex wake, a system call). Single
 * signals paced gap_ns apart, empty and full handler alternating, medians
 * of the single raise() times; with live, a reader thread blocked in
 * pprt__ring_read (asleep at each signal), then the ring is closed;
 * without, nobody reads (the ring has room for n records). */
static hcost measure_paced(size_t depth, int n, uint64_t gap_ns, int live) {
  static double e[4096], f[4096];
  hcost h = {NAN, NAN, NAN, 0};
  pthread_t reader;
  if (n > 4096 || (live && pthread_create(&reader, NULL, live_reader, NULL) != 0))
    return h;
  g_depth = depth;
  int rd = (int)depth + EXTRA_FRAMES;
  g_frames = 0;
  uint64_t next = pprt__os_monotonic_ns() + 10000000;
  for (int i = 0; i < 2 * n; i++) {
    while (pprt__os_monotonic_ns() < next)
      ; /* busy, as a profiled thread is */
    g_mode = i & 1 ? H_FP : H_EMPTY;
    uint64_t t0 = pprt__os_monotonic_ns();
    raise_at_depth(rd, 1);
    uint64_t t1 = pprt__os_monotonic_ns();
    (i & 1 ? f : e)[i / 2] = (double)(t1 - t0);
    next = t1 + gap_ns;
  }
  g_mode = H_EMPTY;
  if (live) {
    pprt__ring_close(&g_ring);
    pthread_join(reader, NULL);
  } else {
    drain();
  }
  h.empty_ns = median(e, n);
  h.full_ns = median(f, n);
  h.frames = (double)g_frames / n;
  return h;
}

static double clock_cost_ns(void) {
  uint64_t t0 = pprt__os_monotonic_ns(), sink = 0;
  for (int i = 0; i < 100000; i++)
    sink += pprt__os_monotonic_ns();
  __asm__ volatile("" : "+r"(sink));
  return (double)(pprt__os_monotonic_ns() - t0) / 100000;
}

static void print_hcost(const char *name, size_t depth, hcost h) {
  double cost = h.full_ns - h.empty_ns;
  char inside[32] = "-";
  if (!isnan(h.inside_ns))
    snprintf(inside, sizeof inside, "%.0f ns", h.inside_ns);
  printf("  %-40s %8.0f ns %8.0f ns %8.1f ns %11s %7.1f\n", name, h.full_ns, cost, cost / h.frames,
         inside, h.frames);
  if (fabs(h.frames - (double)depth) > 0.5)
    printf("    (walked %.1f frames, not %zu: the chain ended early)\n", h.frames, depth);
}

static double fp64_cost = NAN, fp64_live_cost = NAN;

static void bench_handler_cost(void) {
  if (pprt__ring_init(&g_ring, (size_t)1 << 17, 2, 100) != 0 ||
      (g_readbuf = malloc(g_ring.max_record * sizeof *g_readbuf)) == NULL) {
    fprintf(stderr, "bench/cpu: ring init failed\n");
    exit(1);
  }
  /* As core/cpu.c sets it: writers wake the reader only at half full. */
  pprt__ring_set_wake_threshold(&g_ring, ((size_t)1 << 17) / 2);
  pprt_thread_register(); /* an alternate stack and known stack bounds, as profiled threads */
  pprt__os_sigsave save;
  memset(&save, 0, sizeof save);
  if (pprt__os_signal_install(SIGPROF, bench_handler, &save) != 0) {
    fprintf(stderr, "bench/cpu: cannot install a SIGPROF handler\n");
    exit(1);
  }
  double clk = clock_cost_ns();
  printf("\n2. handler cost per sample: raise(SIGPROF) at the bottom of a recursion, a handler\n"
         "   doing pprt's record() (context registers, unwind, ring write) vs an empty handler\n"
         "   installed the same way (pprt__os_signal_install); medians of alternating batches\n");
  printf("\n  %-40s %11s %11s %11s %11s %7s\n", "", "per signal", "handler", "per frame", "timed",
         "frames");
  printf("  %-40s %11s %11s %11s %11s %7s\n", "", "(total)", "(- empty)", "", "inside", "");
  hcost h16 = measure_handler(H_FP, 16, 1000, 1.0);
  printf("  %-40s %8.0f ns\n", "empty handler (delivery + raise)", h16.empty_ns);
  print_hcost("frame pointers, 16 frames", 16, h16);
  hcost h64 = measure_handler(H_FP, 64, 1000, 1.0);
  print_hcost("frame pointers, 64 frames", 64, h64);
  fp64_cost = h64.full_ns - h64.empty_ns;
  printf("  %-40s %35.1f ns\n", "  each frame beyond 16 (64 vs 16)",
         (fp64_cost - (h16.full_ns - h16.empty_ns)) / 48);
  struct unregistered_arg ua;
  pthread_t th;
  if (pthread_create(&th, NULL, unregistered_thread, &ua) == 0) {
    pthread_join(th, NULL);
    print_hcost("frame pointers, 64, unregistered thread", 64, ua.h);
  }
#ifdef BENCH_HAVE_LIBUNWIND
  hcost u16 = measure_handler(H_LIBUNWIND, 16, 200, 1.0);
  print_hcost("libunwind, 16 frames", 16, u16);
  hcost u64 = measure_handler(H_LIBUNWIND, 64, 50, 1.5);
  print_hcost("libunwind, 64 frames", 64, u64);
  printf("  %-40s %35.1f ns\n", "  each frame beyond 16 (64 vs 16)",
         ((u64.full_ns - u64.empty_ns) - (u16.full_ns - u16.empty_ns)) / 48);
#else
  printf("  libunwind: not measured (libunwind not found at configure time: "
         "apt-get install libunwind-dev)\n");
#endif
  hcost paced = measure_paced(64, 1000, 500000, 0);
  print_hcost("frame pointers, 64, paced, no reader", 64, paced);
  hcost live = measure_paced(64, 1000, 500000, 1);
  print_hcost("frame pointers, 64, paced, reader asleep", 64, live);
  fp64_live_cost = live.full_ns - live.empty_ns;
  double wake = fp64_live_cost - (paced.full_ns - paced.empty_ns);
  printf("  %-40s %35.0f ns\n", "  of which waking the reader", wake);
  printf("\n  handler = per signal - empty handler; per frame = handler / frames walked;\n"
         "  timed inside: the handler's own clock around its work (includes one clock read,\n"
         "  %.0f ns here). An unregistered thread has no known stack bounds, so the walk\n"
         "  probes each new stack page with a system call. Paced: single signals %.1f ms\n"
         "  apart, the thread busy in between (cold caches: the empty handler costs more\n"
         "  than in batches). \"reader asleep\" has a thread blocked in pprt__ring_read,\n"
         "  as pprt's reader is between samples; \"no reader\" has none. This build:\n"
         "  PPRT_READER=%s.\n",
         clk, 0.5,
         pprt__os_reader_blocks ? "blocking, woken at half full as the CPU profiler's"
                                : "poll, the reader wakes every 100 ms");
  /* What part 1's signals should have cost: raise() makes three system
   * calls where a timer makes none, so this is an upper bound. */
  const int rows[] = {C_PPRT_100, C_PPRT_100_PT, C_PPRT_1000};
  double per_signal = h16.full_ns + (wake > 0 ? wake : 0);
  printf("  part 1's signals at that cost (%.0f ns each: the total at 16 frames and the\n"
         "  reader's wake-up), an upper bound of what they took from the workers:\n",
         per_signal);
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    if (sums[rows[i]].n)
      printf("    %-30s %4.0f signals per CPU-s = %.3f%% of the CPU\n", configs[rows[i]].name,
             sums[rows[i]].signals_rate, 100 * sums[rows[i]].signals_rate * per_signal / 1e9);
  pprt__os_signal_restore(SIGPROF, &save);
  pprt__ring_destroy(&g_ring);
  free(g_readbuf);
}

/* ---- 4: lost samples ---------------------------------------------------------------- */

static long lost_samples = -1;

static void bench_lost(void) {
  double per_thread =
      LOST_SECONDS * (double)(ncpu < LOST_THREADS ? ncpu : LOST_THREADS) / LOST_THREADS;
  double iterations = floor(ips * per_thread);
  config c = {"pprt 250 Hz x 8 threads", PROF_PPRT, LOST_HZ, NULL, 0};
  printf("\n4. lost samples: pprt at %d Hz, %d busy threads x %.2f s of CPU, %d frames deep\n",
         LOST_HZ, LOST_THREADS, per_thread, LOST_DEPTH);
  result r = run_workload(&c, LOST_THREADS, iterations, LOST_DEPTH);
  if (!r.ok) {
    printf("  FAILED: the profiled workload did not complete\n");
    return;
  }
  lost_samples = r.lost_comment;
  printf("  wall %.2f s, CPU %.2f s, signals %.0f per CPU-s, samples %.0f per CPU-s\n", r.wall_s,
         r.cpu_s, r.signals / r.cpu_s, r.samples / r.cpu_s);
  for (int i = 0; i < r.ncomments; i++)
    printf("  profile says: %s\n", r.comments[i]);
  printf("  lost: %ld (comment), %.0f on the %s frame\n", r.lost_comment, r.lost_frame,
         PPRT__FRAME_LOST);
}

/* ---- main ------------------------------------------------------------------------------ */

static void verdict(const char *what, int met) {
  printf("  %s: %s\n", met ? "met   " : "MISSED", what);
}

int main(int argc, char **argv) {
  if (argc > 1)
    work_seconds = atof(argv[1]);
  if (argc > 2)
    rounds = atoi(argv[2]);
  if (!(work_seconds > 0) || rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "usage: %s [seconds of work per thread > 0 [rounds 1-%d]]\n", argv[0],
            MAX_ROUNDS);
    return 2;
  }
  if (mkdtemp(tmpdir) == NULL) {
    perror("bench/cpu: mkdtemp");
    return 1;
  }
  find_gperftools();
  ips = calibrate();
  if (!(ips > 0)) {
    fprintf(stderr, "bench/cpu: cannot run %s\n", BENCH_CPU_WORK);
    rmdir(tmpdir);
    return 1;
  }
  ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 1)
    ncpu = 1;
  printf("pprt CPU profiler benchmark: pprt %s via %s; gperftools %s; %ld CPUs\n", pprt_version(),
         BENCH_PRELOAD, gperf_lib[0] ? gperf_lib : "not found", ncpu);

  bench_workload();
  bench_handler_cost();
  bench_lost();
  rmdir(tmpdir);

  /* Verdicts on wall time where enough rounds ran with the machine to
   * themselves, else on the process's CPU time over the same window; two
   * slowdowns differ only beyond the noise (the unprofiled-vs-unprofiled
   * median or half its range, whichever is larger). */
  const summary *p = &sums[C_PPRT_100], *g = &sums[C_GPERF_100], *noise = &sums[C_NONE_AGAIN];
  int by_wall = wall_usable(C_PPRT_100) && (!g->n || wall_usable(C_GPERF_100));
  const char *how = by_wall ? "wall" : "CPU time; too few clean rounds for wall";
  double ps = by_wall ? p->slowdown : p->cpu_slowdown;
  double gs = by_wall ? g->slowdown : g->cpu_slowdown;
  double tol = by_wall ? fmax(fabs(noise->slowdown), (noise->hi - noise->lo) / 2)
                       : fmax(fabs(noise->cpu_slowdown), (noise->cpu_hi - noise->cpu_lo) / 2);
  printf("\nverdict\n");
  int ok = 1, met;
  char line[256];
  met = p->n > 0 && ps <= 0.01;
  snprintf(line, sizeof line, "slowdown <= 1%% at 100 Hz: pprt %+.2f%% (%s)", 100 * ps, how);
  verdict(line, met);
  ok &= met;
  met = fp64_cost <= 2000;
  snprintf(line, sizeof line, "handler <= 2 us at 64 frames with frame pointers: %.0f ns",
           fp64_cost);
  verdict(line, met);
  ok &= met;
  met = fp64_live_cost <= 2000;
  snprintf(line, sizeof line, "the same with the reader asleep, as in a profile (%s): %.0f ns",
           pprt__os_reader_blocks ? "blocking reader, woken at half full"
                                  : "polling reader: nothing to wake",
           fp64_live_cost);
  verdict(line, met);
  ok &= met;
  met = lost_samples == 0;
  snprintf(line, sizeof line, "no lost samples at %d Hz x %d threads: %ld lost", LOST_HZ,
           LOST_THREADS, lost_samples);
  verdict(line, met);
  ok &= met;
  if (p->n && g->n) {
    met = p->mean_dev <= g->mean_dev && ps <= gs + tol;
    snprintf(line, sizeof line,
             "pprt fairer and no slower than gperftools at 100 Hz: |A - 50| %.1f vs %.1f%%,\n"
             "    slowdown %+.2f vs %+.2f%% (%s; noise %.2f%%)",
             100 * p->mean_dev, 100 * g->mean_dev, 100 * ps, 100 * gs, how, 100 * tol);
    verdict(line, met);
    ok &= met;
  } else {
    printf("  pprt fairer and no slower than gperftools at 100 Hz: not measured "
           "(gperftools not found)\n");
  }
  return ok ? 0 : 1;
}
