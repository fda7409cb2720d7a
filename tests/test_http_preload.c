/* The HTTP endpoint with the preload library (LD_PRELOAD) on an unmodified
 * program (tests/http_victim.c): go tool pprof, the reference client, over
 * HTTP, and PPRT_HTTP's refusals.
 *
 * Usage: test_http_preload MODE
 *   gopprof  go tool pprof -top -seconds 2 over http shows the victim's hot
 *            function; over /heap its allocation site
 *   preload  PPRT_HTTP's bad values and a remote address without opt-in:
 *            one stderr line, nothing listens, the program unharmed; with
 *            PPRT_HTTP_ALLOW_REMOTE=1 it serves, and no heap sample is the
 *            endpoint's own */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/profile.h"
#include "read/profile_decode.h"
#include "tests/http_check.h"
#include "tests/http_client.h"

extern char **environ;

/* Starts VICTIM for `seconds` with LD_PRELOAD and the variables in env,
 * its stderr into err_path. */
static pid_t start_victim(const char *const env[], const char *seconds, const char *err_path) {
  unlink(err_path); /* not the last run's port */
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int null = open("/dev/null", O_WRONLY);
    if (fd < 0 || dup2(fd, 2) < 0 || dup2(null, 1) < 0)
      _exit(126);
    setenv("LD_PRELOAD", PRELOAD_LIB, 1);
    unsetenv("PPRT_OWNER_PID");
    for (size_t i = 0; env[i]; i++)
      putenv((char *)env[i]);
    execl(VICTIM, VICTIM, seconds, (char *)NULL);
    _exit(127);
  }
  return pid;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return strdup("");
  char *buf = calloc(1, 65536);
  size_t n = fread(buf, 1, 65535, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* The port the victim printed ("pprt: serving http://127.0.0.1:PORT/..."). */
static int victim_port(const char *err_path) {
  for (int i = 0; i < 100; i++) {
    char *e = slurp(err_path);
    const char *p = strstr(e, "serving http://127.0.0.1:");
    int port = p ? atoi(p + strlen("serving http://127.0.0.1:")) : 0;
    free(e);
    if (port > 0)
      return port;
    usleep(50000);
  }
  return 0;
}

/* Ends a victim started to run longer than any test needs: a short fixed
 * run raced the clients on a loaded machine, the victim gone before the
 * last request (120 s, so one a failed assertion leaves behind still
 * ends). It must still be running: being scraped did not end it. */
static void stop_victim(pid_t pid) {
  int status;
  assert_int_equal(waitpid(pid, &status, WNOHANG), 0);
  assert_int_equal(kill(pid, SIGTERM), 0);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true((WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) ||
              (WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

static char out_dir[512];

static void test_gopprof(void **state) {
  (void)state;
  if (GO[0] == '\0') {
    printf("SKIP: go not found (go tool pprof is the reference client)\n");
    return;
  }
  char err_path[600];
  snprintf(err_path, sizeof err_path, "%s/gopprof-victim.err", out_dir);
  const char *const env[] = {"PPRT_HTTP=127.0.0.1:0", NULL};
  pid_t pid = start_victim(env, "120", err_path);
  int port = victim_port(err_path);
  assert_true(port > 0);
  setenv("PPROF_TMPDIR", out_dir, 1);
  static const struct {
    const char *args, *want;
  } runs[] = {{"-top -seconds 2", "/debug/pprof/profile"},
              {"-top -sample_index=alloc_space", "/debug/pprof/heap"}};
  for (size_t i = 0; i < 2; i++) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s tool pprof %s http://127.0.0.1:%d%s 2>&1", GO, runs[i].args, port,
             runs[i].want);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char *outp = calloc(1, 1 << 16);
    size_t n = fread(outp, 1, (1 << 16) - 1, f);
    outp[n] = '\0';
    int rc = pclose(f);
    const char *fn = i == 0 ? "http_hot_loop" : "http_alloc_site";
    printf("%s: %s\n", cmd, strstr(outp, fn) ? fn : "(missing)");
    if (rc != 0 || strstr(outp, fn) == NULL)
      fail_msg("%s: exit %d, no %s in:\n%s", cmd, rc, fn, outp);
    free(outp);
  }
  stop_victim(pid);
  char *e = slurp(err_path);
  printf("victim's stderr: %s", e);
  free(e);
}

/* A port nothing listens on, as far as we can tell. */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  bind(fd, (struct sockaddr *)&a, sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &len);
  close(fd);
  return ntohs(a.sin_port);
}

static void test_preload(void **state) {
  (void)state;
  char err_path[600], v1[64], v2[64];
  snprintf(err_path, sizeof err_path, "%s/preload-victim.err", out_dir);
  int port = free_port();
  snprintf(v1, sizeof v1, "PPRT_HTTP=0.0.0.0:%d", port);
  /* An address taken already. */
  int busy = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(busy, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(busy, 1), 0);
  socklen_t alen = sizeof a;
  getsockname(busy, (struct sockaddr *)&a, &alen);
  snprintf(v2, sizeof v2, "PPRT_HTTP=127.0.0.1:%d", ntohs(a.sin_port));
  const struct {
    const char *env[3], *want;
  } cases[] = {
      {{v1, NULL}, "is not a loopback address; set PPRT_HTTP_ALLOW_REMOTE=1"},
      {{"PPRT_HTTP=abc", NULL}, "PPRT_HTTP=abc is not ADDRESS:PORT"},
      {{"PPRT_HTTP=127.0.0.1:99999", NULL}, "is not ADDRESS:PORT"},
      {{"PPRT_HTTP=localhost:6060", NULL}, "localhost is not a numeric IPv4 or IPv6 address"},
      {{"PPRT_HTTP=127.0.0.1:0", "PPRT_HTTP_ALLOW_REMOTE=yes"},
       "PPRT_HTTP_ALLOW_REMOTE=yes is not 0 or 1"},
      {{v2, NULL}, "address already in use; not serving"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pid_t pid = start_victim(cases[i].env, "0.5", err_path);
    if (i == 0) {
      usleep(300000);
      int fd = http_connect(port, 1);
      if (fd >= 0)
        fail_msg("something listens on %d", port);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    char *e = slurp(err_path);
    printf("%s %s -> %s", cases[i].env[0], cases[i].env[1] ? cases[i].env[1] : "", e);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_non_null(strstr(e, cases[i].want));
    assert_non_null(strstr(e, "not serving\n"));
    assert_ptr_equal(strchr(e, '\n'), e + strlen(e) - 1); /* one line */
    free(e);
  }
  close(busy);
  /* Allowed: a remote address serves (on every interface here, so loopback too). */
  /* Every allocation sampled (PPRT_HEAP_RATE=1), so that one made by the
   * endpoint's threads would show. */
  const char *const ok[] = {"PPRT_HTTP=0.0.0.0:0", "PPRT_HTTP_ALLOW_REMOTE=1", "PPRT_HEAP_RATE=1",
                            NULL};
  pid_t pid = start_victim(ok, "120", err_path);
  for (int i = 0; i < 100; i++) {
    char *e = slurp(err_path);
    int done = strstr(e, "serving http://0.0.0.0:") != NULL;
    free(e);
    if (done)
      break;
    usleep(50000);
  }
  char *e = slurp(err_path);
  const char *p = strstr(e, "serving http://0.0.0.0:");
  assert_non_null(p);
  int rport = atoi(p + strlen("serving http://0.0.0.0:"));
  free(e);
  /* The sampler runs: the victim's allocations show. The endpoint serves
   * before main() starts (the preload library's constructor prints the
   * line above), so on a busy machine the first profile may come before
   * the first allocation: ask again until it shows, for up to 20 s. */
  Pprt__Profile *prof = NULL;
  int tries = 0;
  for (time_t until = time(NULL) + 20;; tries++) {
    prof = get_profile(rport, "/debug/pprof/heap", 10, "heap", heap_types, "inuse_space");
    if (has_function(prof, "http_alloc_site") || time(NULL) > until)
      break;
    pprt__profile_decoded_free(prof);
    usleep(100000);
  }
  printf("http_alloc_site in the heap profile after %d earlier profiles without it\n", tries);
  assert_true(has_function(prof, "http_alloc_site"));
  pprt__profile_decoded_free(prof);
  /* Again, after requests enough: none of the endpoint's own allocations
   * (libmicrohttpd's connections, pprt's replies) is the program's. */
  prof = get_profile(rport, "/debug/pprof/heap", 10, "heap", heap_types, "inuse_space");
  for (size_t i = 0; i < prof->n_location; i++) {
    const Pprt__Location *l = prof->location[i];
    for (size_t m = 0; m < prof->n_mapping; m++)
      if (prof->mapping[m]->id == l->mapping_id &&
          strstr(prof->string_table[prof->mapping[m]->filename], "microhttpd"))
        fail_msg("a heap sample in libmicrohttpd at %#llx", (unsigned long long)l->address);
  }
  assert_false(has_function(prof, "pprt__http_heap"));
  assert_false(has_function(prof, "MHD_start_daemon"));
  pprt__profile_decoded_free(prof);
  stop_victim(pid);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  signal(SIGPIPE, SIG_IGN);
  snprintf(out_dir, sizeof out_dir, "%s", HTTP_OUT);
  mkdir(out_dir, 0755);
  struct CMUnitTest t[1];
  if (strcmp(mode, "gopprof") == 0)
    t[0] = (struct CMUnitTest)cmocka_unit_test(test_gopprof);
  else if (strcmp(mode, "preload") == 0)
    t[0] = (struct CMUnitTest)cmocka_unit_test(test_preload);
  else {
    fprintf(stderr, "test_http_preload: unknown mode %s\n", mode);
    return 2;
  }
  return cmocka_run_group_tests_name(mode, t, NULL, NULL);
}
