/* Writes two profiles of this process's own stacks for the reference reader
 * (go tool pprof) to check, through tests/profile_interop.cmake:
 *
 *   OUT/names.pb.gz  functions named in-process (has_functions set)
 *   OUT/addrs.pb.gz  addresses and mappings only: pprof must find the same
 *                    names from the binaries, which proves the mappings'
 *                    offsets and build ids right
 *
 * The stack: interop_static_leaf (a static function: dladdr cannot name it,
 * only .symtab can) <- interop_middle <- main, plus a frame in a static
 * function of a library loaded with dlopen after start. Before writing, it checks here what needs
 * no pprof: the main executable's build id against `readelf -n`.
 *
 * Usage: profile_interop OUT_DIR LIBRARY_PATH */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/platform.h"
#include "core/profile.h"
#include "read/profile_decode.h"
#include "tests/workload.h"

#define NPC 4

TEST_WORKLOAD static uintptr_t caller_pc(void) {
  return (uintptr_t)__builtin_return_address(0);
}

TEST_WORKLOAD static void interop_static_leaf(uintptr_t *pcs) {
  pcs[0] = caller_pc();
  __asm__ volatile("" ::: "memory");
}

TEST_WORKLOAD void interop_middle(uintptr_t *pcs);
TEST_WORKLOAD void interop_middle(uintptr_t *pcs) {
  interop_static_leaf(pcs);
  pcs[1] = caller_pc();
  __asm__ volatile("" ::: "memory");
}

static int write_file(pprt__profile *p, const char *dir, const char *name, int symbolize) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    perror(path);
    return 1;
  }
  int rc = pprt__profile_write_os(p, symbolize, pprt_writer_fd(fd));
  close(fd);
  if (rc != 0) {
    fprintf(stderr, "writing %s: %d\n", path, rc);
    return 1;
  }
  return 0;
}

/* The main executable's build id as `readelf -n` prints it. */
static int readelf_build_id(char *out, size_t len) {
  char cmd[4200], exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return -1;
  exe[n] = '\0';
  snprintf(cmd, sizeof cmd, "readelf -n '%s' 2>/dev/null", exe);
  FILE *f = popen(cmd, "r");
  if (!f)
    return -1;
  char line[512];
  int found = -1;
  while (fgets(line, sizeof line, f)) {
    char *b = strstr(line, "Build ID: ");
    if (b && sscanf(b + 10, "%127s", out) == 1 && strlen(out) < len)
      found = 0;
  }
  pclose(f);
  return found;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s OUT_DIR LIBRARY_PATH\n", argv[0]);
    return 2;
  }
  void *lib = dlopen(argv[2], RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  /* The library's static function: named only from its .symtab. */
  uintptr_t (*lib_fn)(void) = (uintptr_t(*)(void))dlsym(lib, "pprt_test_dlopen_static_addr");
  if (!lib_fn)
    return 1;

  uintptr_t pcs[NPC];
  interop_middle(pcs);
  pcs[2] = caller_pc(); /* in main */
  pcs[3] = lib_fn() + 1; /* a "return address" just inside it */

  pprt__value_type types[2] = {{"samples", "count"}, {"cpu", "nanoseconds"}};
  pprt__profile *p;
  if (pprt__profile_new(&p, types, 2, types[1], 10000000) != 0)
    return 1;
  pprt__profile_set_time(p, (int64_t)pprt__os_wall_ns(), 1000000000);
  if (pprt__profile_add_os_mappings(p) != 0)
    return 1;
  int64_t v[2] = {5, 50000000};
  pprt__label l[2] = {{"thread_id", NULL, (int64_t)pprt__os_thread_id(), "id"},
                      {"thread_name", "main", 0, NULL}};
  if (pprt__profile_add(p, pcs, NPC, 0, v, l, 2) != 0)
    return 1;
  if (write_file(p, argv[1], "names.pb.gz", 1) || write_file(p, argv[1], "addrs.pb.gz", 0))
    return 1;

  /* The main executable's mapping carries its build id. */
  char want[128] = "";
  if (readelf_build_id(want, sizeof want) != 0) {
    fprintf(stderr, "readelf -n found no build id (is binutils installed?)\n");
    return 1;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/names.pb.gz", argv[1]);
  FILE *f = fopen(path, "rb");
  static unsigned char buf[1 << 20];
  size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
  if (f)
    fclose(f);
  Pprt__Profile *prof;
  char err[256];
  if (pprt__profile_decode(buf, n, &prof, err, sizeof err) != 0) {
    fprintf(stderr, "our own profile does not decode: %s\n", err);
    return 1;
  }
  const char *got = prof->n_mapping ? prof->string_table[prof->mapping[0]->build_id] : "";
  int ok = strcmp(got, want) == 0;
  printf("main executable build id: profile %s, readelf %s: %s\n", got, want,
         ok ? "equal" : "DIFFERENT");
  pprt__profile_decoded_free(prof);
  pprt__profile_free(p);
  return ok ? 0 : 1;
}
