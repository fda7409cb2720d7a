/* Tests of the allocation sampler and heap profiles.
 *
 *   accuracy       heap_sites under the preload library: each site's four
 *                  values against the truth, with tolerances from the
 *                  estimator's variance (Var = n s^2 (1-p)/p for bytes,
 *                  n (1-p)/p for objects, p = 1 - exp(-s/rate)); exact at
 *                  rate 1; go tool pprof -top shows the sites
 *   entry points   heap_entry's checks of the malloc family give the same
 *                  answers with and without the preload library
 *   notes          pprt_alloc_note/pprt_free_note with an arena allocator
 *   threads        allocate here, free there, under the sanitizers too
 *   bad settings   PPRT_HEAP_RATE=garbage: one line, program unharmed
 *
 * The programs and the preload library come from CMake: HEAP_SITES,
 * HEAP_ENTRY, PRELOAD_LIB, GO (empty when go is not installed). */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/heap.h"
#include "core/profile.h"
#include "pprt.h"
#include "read/profile_decode.h"
#include "tests/membuf.h"
#include "tests/profile_util.h"

extern char **environ;


/* ---- helpers ------------------------------------------------------------------ */

#ifdef PRELOAD_TESTS
/* Runs argv with extra environment variables; returns its exit status, or
 * -1 if it did not exit normally. Output goes to out_path when given. */
static int run(char *const argv[], const char *const *env, const char *out_path) {
  size_t n = 0, k = 0;
  while (environ[n])
    n++;
  while (env && env[k])
    k++;
  char **envp = calloc(n + k + 1, sizeof *envp);
  assert_non_null(envp);
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "PPRT_", 5) != 0 && strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
      envp[m++] = environ[i];
  for (size_t i = 0; i < k; i++)
    envp[m++] = (char *)env[i];
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (out_path) {
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
  }
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  free(envp);
  assert_int_equal(rc, 0);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#endif

/* Sums the four heap values of the samples whose leaf frame is `site`. */
static void site_values(const Pprt__Profile *p, const char *site, double v[4]) {
  assert_int_equal(p->n_sample_type, 4);
  v[0] = v[1] = v[2] = v[3] = 0;
  for (size_t i = 0; i < p->n_sample; i++)
    if (name_is(leaf_name(p, p->sample[i]), site))
      for (int j = 0; j < 4; j++)
        v[j] += (double)p->sample[i]->value[j];
}

static char tmpdir[] = "/tmp/pprt-heap-XXXXXX";

static int setup_dir(void **state) {
  (void)state;
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_dir(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

#ifdef PRELOAD_TESTS
/* Runs argv under the preload library with a heap profile to `profile`
 * and `rate_env` (PPRT_HEAP_RATE=...) set; returns its exit status. */
static int run_preloaded(char *const argv[], const char *profile, const char *rate_env,
                         const char *out_path) {
  char penv[512];
  snprintf(penv, sizeof penv, "PPRT_HEAPPROFILE=%s", profile);
  const char *env[] = {"LD_PRELOAD=" PRELOAD_LIB, penv, rate_env, NULL};
  return run(argv, env, out_path);
}

/* Runs heap_sites MIB under the preload at `rate`; returns the profile. */
static Pprt__Profile *profile_sites(size_t mib, size_t rate, const char *name) {
  char path[256], renv[64], mibs[32];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  snprintf(renv, sizeof renv, "PPRT_HEAP_RATE=%zu", rate);
  snprintf(mibs, sizeof mibs, "%zu", mib);
  char *argv[] = {(char *)HEAP_SITES, mibs, NULL};
  assert_int_equal(run_preloaded(argv, path, renv, NULL), 0);
  return decode_file(path);
}

struct site {
  const char *name;
  double size;
};
static const struct site sites[3] = {{"site_a", 64}, {"site_b", 8192}, {"site_c", 1 << 20}};

/* Checks each site's values: |estimate - truth| <= max(rel * truth, k
 * standard deviations); returns the largest deviation in sigmas. */
static double check_sites(const Pprt__Profile *p, size_t mib, double rate, double rel, double k) {
  double worst = 0;
  for (int s = 0; s < 3; s++) {
    double size = sites[s].size, n = (double)(mib << 20) / size, live = ceil(n / 2);
    double prob = 1 - exp(-size / rate), q = (1 - prob) / prob;
    double truth[4] = {n, n * size, live, live * size};
    double sd[4] = {sqrt(n * q), sqrt(n * q) * size, sqrt(live * q), sqrt(live * q) * size};
    double v[4];
    site_values(p, sites[s].name, v);
    for (int j = 0; j < 4; j++) {
      double dev = fabs(v[j] - truth[j]);
      double sig = sd[j] > 0 ? dev / sd[j] : (dev > 0 ? INFINITY : 0);
      worst = sig > worst ? sig : worst;
      print_message("  %s value %d: %.0f, truth %.0f, off %.2f%% = %.2f sd\n", sites[s].name, j,
                    v[j], truth[j], 100 * dev / truth[j], sig);
      if (rel > 0) {
        /* The premise of a 10% bound: it is beyond k standard deviations. */
        assert_true(rel * truth[j] >= k * sd[j]);
        assert_true(dev <= rel * truth[j]);
      } else {
        assert_true(dev <= k * sd[j]);
      }
    }
  }
  return worst;
}

/* ---- accuracy ------------------------------------------------------------------- */

static void test_accuracy_at_64k(void **state) {
  (void)state;
  Pprt__Profile *p = profile_sites(256, 65536, "64k.pb.gz");
  check_sites(p, 256, 65536, 0.10, 4);
  pprt__profile_decoded_free(p);
}

static void test_accuracy_at_512k(void **state) {
  (void)state;
  Pprt__Profile *p = profile_sites(256, 524288, "512k.pb.gz");
  /* period and types as pprof expects */
  assert_int_equal(p->period, 524288);
  assert_string_equal(p->string_table[p->period_type->type], "space");
  const char *want[4] = {"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"};
  for (int i = 0; i < 4; i++)
    assert_string_equal(p->string_table[p->sample_type[i]->type], want[i]);
  assert_string_equal(p->string_table[p->default_sample_type], "inuse_space");
  check_sites(p, 256, 524288, 0, 4);
  pprt__profile_decoded_free(p);

  if (GO[0]) {
    char cmd[1024], line[512];
    snprintf(cmd, sizeof cmd, "'%s' tool pprof -sample_index=inuse_space -top '%s/512k.pb.gz' 2>&1",
             GO, tmpdir);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    int seen = 0;
    while (fgets(line, sizeof line, f))
      for (int s = 0; s < 3; s++)
        if (strstr(line, sites[s].name))
          seen |= 1 << s;
    assert_int_equal(pclose(f), 0);
    assert_int_equal(seen, 7);
  }
}

static void test_rate_one_is_exact(void **state) {
  (void)state;
  Pprt__Profile *p = profile_sites(8, 1, "exact.pb.gz");
  for (int s = 0; s < 3; s++) {
    double v[4], n = (double)(8 << 20) / sites[s].size, live = ceil(n / 2);
    site_values(p, sites[s].name, v);
    assert_true(v[0] == n && v[1] == n * sites[s].size);
    assert_true(v[2] == live && v[3] == live * sites[s].size);
  }
  pprt__profile_decoded_free(p);
}

/* ---- the malloc family unchanged ------------------------------------------------------ */

static void test_entry_points_keep_libc_semantics(void **state) {
  (void)state;
  char plain[256], hooked[256], path[300];
  snprintf(plain, sizeof plain, "%s/entry-plain.txt", tmpdir);
  snprintf(hooked, sizeof hooked, "%s/entry-hooked.txt", tmpdir);
  snprintf(path, sizeof path, "%s/entry.pb.gz", tmpdir);
  char *argv[] = {(char *)HEAP_ENTRY, NULL};
  assert_int_equal(run(argv, NULL, plain), 0);
  assert_int_equal(run_preloaded(argv, path, "PPRT_HEAP_RATE=1", hooked), 0);
  size_t a, b;
  char *x = read_file(plain, &a), *y = read_file(hooked, &b);
  assert_non_null(x);
  assert_non_null(y);
  assert_true(a > 0);
  assert_string_equal(y, x);
  free(x);
  free(y);
  /* and every call was seen: the profile has the program's allocations */
  Pprt__Profile *p = decode_file(path);
  assert_true(p->n_sample > 5);
  pprt__profile_decoded_free(p);
}

static void test_bad_rate_is_one_line(void **state) {
  (void)state;
  char out[256], path[300];
  snprintf(out, sizeof out, "%s/bad.txt", tmpdir);
  snprintf(path, sizeof path, "%s/bad.pb.gz", tmpdir);
  char *argv[] = {(char *)HEAP_SITES, "1", NULL};
  assert_int_equal(run_preloaded(argv, path, "PPRT_HEAP_RATE=lots", out), 0);
  size_t n;
  char *text = read_file(out, &n);
  assert_non_null(text);
  assert_string_equal(text,
                      "pprt: PPRT_HEAP_RATE=lots is not a number of bytes (1 or more); not profiling\n");
  free(text);
  assert_int_equal(access(path, F_OK), -1);
}

#ifdef HEAP_NOFP
/* The allocation sampler's cfi walk in a program without frame pointers:
 * the site's callers up to main on every sample. */
static void test_nofp_program_keeps_callers(void **state) {
  (void)state;
  char path[256];
  snprintf(path, sizeof path, "%s/nofp.pb.gz", tmpdir);
  char *argv[] = {(char *)HEAP_NOFP, "16", NULL};
  assert_int_equal(run_preloaded(argv, path, "PPRT_HEAP_RATE=4096", NULL), 0);
  Pprt__Profile *p = decode_file(path);
  int64_t at_site = 0, whole = 0;
  for (size_t i = 0; i < p->n_sample; i++) {
    const Pprt__Sample *s = p->sample[i];
    if (!name_is(leaf_name(p, s), "nofp_site"))
      continue;
    at_site += s->value[0];
    if (stack_has(p, s, "nofp_run") && stack_has(p, s, "nofp_outer") && stack_has(p, s, "main"))
      whole += s->value[0];
  }
  print_message("heap_nofp: %lld of %lld sampled allocations at nofp_site have nofp_run, "
                "nofp_outer and main above\n",
                (long long)whole, (long long)at_site);
  assert_true(at_site > 0);
  assert_true(whole >= at_site * 95 / 100);
  pprt__profile_decoded_free(p);
}
#endif

#endif /* PRELOAD_TESTS */

/* ---- notes from a custom allocator ------------------------------------------------------ */

typedef struct arena {
  char *base;
  size_t used, cap;
} arena;

__attribute__((noinline)) static void *arena_alloc(arena *a, size_t n) {
  if (a->used + n > a->cap)
    return NULL;
  void *p = a->base + a->used;
  a->used += n;
  pprt_alloc_note(p, n);
  return p;
}

__attribute__((noinline)) void *arena_site(arena *a);
void *arena_site(arena *a) {
  void *p = arena_alloc(a, 24); /* odd-sized objects at every alignment */
  __asm__ volatile("" ::"r"(p) : "memory");
  return p;
}


static Pprt__Profile *write_heap(membuf *m) {
  m->len = 0;
  assert_int_equal(pprt_heap_write((pprt_writer){mem_write, m}), 0);
  Pprt__Profile *p = NULL;
  char err[256];
  if (pprt__profile_decode(m->data, m->len, &p, err, sizeof err) != 0)
    fail_msg("heap profile does not decode: %s", err);
  return p;
}

static void test_custom_allocator_notes(void **state) {
  (void)state;
  pprt_heap_set_rate(1);
  arena a = {malloc(1 << 20), 0, 1 << 20};
  void *objs[1000];
  for (int i = 0; i < 1000; i++)
    objs[i] = arena_site(&a);
  for (int i = 0; i < 1000; i += 4)
    pprt_free_note(objs[i]);
  membuf m = {0};
  Pprt__Profile *p = write_heap(&m);
  double v[4];
  site_values(p, "arena_alloc", v);
  assert_true(v[0] == 1000 && v[1] == 24000 && v[2] == 750 && v[3] == 750 * 24);
  pprt__profile_decoded_free(p);
  for (int i = 1; i < 1000; i++)
    if (i % 4)
      pprt_free_note(objs[i]);
  p = write_heap(&m);
  site_values(p, "arena_alloc", v);
  assert_true(v[0] == 1000 && v[2] == 0 && v[3] == 0);
  pprt__profile_decoded_free(p);
  pprt_heap_set_rate(0);
  free(a.base);
  free(m.data);
}

/* ---- threads: allocate here, free there -------------------------------------------------- */

#define STRESS_THREADS 4
#define STRESS_N 50000

/* What the preload library's malloc and free do, without replacing the
 * program's malloc (so it runs under ASan and TSan too). */
__attribute__((noinline)) static void *hooked_malloc(size_t n) {
  void *p = malloc(n);
  if (p)
    pprt__heap_on_alloc(p, n, __builtin_frame_address(0), PPRT__HEAP_MALLOC);
  return p;
}

static void hooked_free(void *p) {
  pprt__heap_on_free(p, PPRT__HEAP_MALLOC);
  free(p);
}

static void *stress_blocks[STRESS_THREADS][STRESS_N];

static void *stress_alloc(void *arg) {
  int t = (int)(intptr_t)arg;
  for (int i = 0; i < STRESS_N; i++)
    stress_blocks[t][i] = hooked_malloc(16 + (size_t)(i % 7) * 40);
  return NULL;
}

static void *stress_free(void *arg) {
  int t = (int)(intptr_t)arg;
  /* frees another thread's blocks */
  for (int i = 0; i < STRESS_N; i++)
    hooked_free(stress_blocks[(t + 1) % STRESS_THREADS][i]);
  return NULL;
}

static void test_threads_alloc_here_free_there(void **state) {
  (void)state;
  pprt_heap_set_rate(512);
  pthread_t th[STRESS_THREADS];
  for (int round = 0; round < 3; round++) {
    for (int t = 0; t < STRESS_THREADS; t++)
      assert_int_equal(pthread_create(&th[t], NULL, stress_alloc, (void *)(intptr_t)t), 0);
    for (int t = 0; t < STRESS_THREADS; t++)
      pthread_join(th[t], NULL);
    for (int t = 0; t < STRESS_THREADS; t++)
      assert_int_equal(pthread_create(&th[t], NULL, stress_free, (void *)(intptr_t)t), 0);
    for (int t = 0; t < STRESS_THREADS; t++)
      pthread_join(th[t], NULL);
  }
  membuf m = {0};
  Pprt__Profile *p = write_heap(&m);
  double v[4];
  site_values(p, "stress_alloc", v); /* the stack starts at malloc's caller */
  print_message("sampled %.0f allocations (estimate), in use now %.0f\n", v[0], v[2]);
  assert_true(v[0] > 0);
  /* Every block was freed: nothing sampled is left in use. */
  assert_true(v[2] == 0 && v[3] == 0);
  pprt__profile_decoded_free(p);
  pprt_heap_set_rate(0);
  free(m.data);
}

/* fork while another thread is inside the sampler: the child's sampler
 * works (its lock was taken around fork and re-created, not inherited
 * held). */
static atomic_int fork_stop;

static void *noting_thread(void *arg) {
  (void)arg;
  static char block[4096];
  while (!atomic_load(&fork_stop)) {
    pprt_alloc_note(block, 64);
    pprt_free_note(block);
  }
  return NULL;
}

static void test_fork_child_keeps_sampling(void **state) {
  (void)state;
#if defined(__SANITIZE_THREAD__)
  skip(); /* ThreadSanitizer's runtime can hang a child forked while another
           * thread is running; the default and ASan builds run this */
#endif
  pprt_heap_set_rate(1);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, noting_thread, NULL), 0);
  for (int i = 0; i < 20; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      static char mine[64];
      pprt_heap_set_rate(1);
      for (int j = 0; j < 10; j++)
        pprt_alloc_note(mine + j, 1);
      int fd = open("/dev/null", O_WRONLY);
      _exit(pprt_heap_write(pprt_writer_fd(fd)) == 0 ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  atomic_store(&fork_stop, 1);
  pthread_join(th, NULL);
  pprt_heap_set_rate(0);
}

/* "test_heap accuracy" runs the tests that compare sampled estimates with
 * the truth: they pass or fail by chance (bounds of 4 standard deviations),
 * so ctest runs them as a test of their own, labelled statistical. */
int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_custom_allocator_notes),
      cmocka_unit_test(test_fork_child_keeps_sampling),
      cmocka_unit_test(test_threads_alloc_here_free_there),
#ifdef PRELOAD_TESTS
      cmocka_unit_test(test_bad_rate_is_one_line),
      cmocka_unit_test(test_entry_points_keep_libc_semantics),
      cmocka_unit_test(test_rate_one_is_exact),
#endif
#ifdef HEAP_NOFP
      cmocka_unit_test(test_nofp_program_keeps_callers),
#endif
  };
#ifdef PRELOAD_TESTS
  const struct CMUnitTest accuracy[] = {
      cmocka_unit_test(test_accuracy_at_64k),
      cmocka_unit_test(test_accuracy_at_512k),
  };
  if (argc > 1 && strcmp(argv[1], "accuracy") == 0)
    return cmocka_run_group_tests(accuracy, setup_dir, remove_dir);
#endif
  if (argc > 1) {
    fprintf(stderr, "usage: %s [accuracy]\n", argv[0]);
    return 2;
  }
  return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
