/* Tests of the platform contract's images and symbols, as this build's
 * backend implements them: the list a profile's mappings come from (main
 * executable first, real paths, build ids) and the symbolizer that names its
 * functions (static functions, libc, a library dlopen'ed later, the vdso).
 * On ELF systems also the parser's refusal of truncated and corrupted files.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cmocka.h>

#include "core/platform.h"
#include "tests/workload.h"

#if defined(__linux__) || defined(__FreeBSD__)
#define HAVE_ELF 1
#include "platform/posix/elf.h"
#endif
#if defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__APPLE__)
#include <mach-o/dyld.h>
#endif

#ifndef PPRT_TEST_DLOPEN_LIB
#error "CMake passes the test library's path in PPRT_TEST_DLOPEN_LIB"
#endif

/* ---- helpers ---------------------------------------------------------------------- */

static volatile int sink;

/* The function the test symbolizes: static, so only .symtab names it. */
TEST_WORKLOAD static int images_static_target(int x) {
  for (int i = 0; i < x; i++)
    sink += i ^ x;
  return sink;
}

typedef struct image_copy {
  char path[PATH_MAX];
  uintptr_t start, limit, load_bias;
  uint64_t file_offset;
  uint8_t build_id[64];
  size_t build_id_len;
  int is_main;
} image_copy;

typedef struct image_list {
  image_copy img[1024];
  size_t n;
} image_list;

static int copy_image(const pprt__os_image *img, void *ctx) {
  image_list *list = ctx;
  if (list->n == sizeof list->img / sizeof list->img[0])
    return 1;
  image_copy *c = &list->img[list->n++];
  snprintf(c->path, sizeof c->path, "%s", img->path);
  c->start = img->start;
  c->limit = img->limit;
  c->load_bias = img->load_bias;
  c->file_offset = img->file_offset;
  c->build_id_len = img->build_id_len <= sizeof c->build_id ? img->build_id_len : 0;
  if (c->build_id_len)
    memcpy(c->build_id, img->build_id, c->build_id_len);
  c->is_main = img->is_main;
  return 0;
}

static image_list *images(void) {
  image_list *list = calloc(1, sizeof *list);
  assert_non_null(list);
  assert_int_equal(pprt__os_image_each(copy_image, list), 0);
  assert_true(list->n > 0);
  return list;
}

static const image_copy *image_of(const image_list *list, uintptr_t addr) {
  for (size_t i = 0; i < list->n; i++)
    if (addr >= list->img[i].start && addr < list->img[i].limit)
      return &list->img[i];
  return NULL;
}

/* The main executable's path as the OS reports it, resolved. */
static int exe_path(char *out) {
#if defined(__linux__)
  return realpath("/proc/self/exe", out) != NULL;
#elif defined(__APPLE__)
  char exe[PATH_MAX];
  uint32_t size = sizeof exe;
  return _NSGetExecutablePath(exe, &size) == 0 && realpath(exe, out) != NULL;
#else
  (void)out;
  return 0;
#endif
}

static void expect_symbol(pprt__os_symbolizer *s, uintptr_t addr, const char *want,
                          uintptr_t want_offset) {
  const char *name = NULL;
  uintptr_t offset = 12345;
  int rc = pprt__os_symbolize(s, addr, &name, &offset);
  if (rc != 0 || strcmp(name, want) != 0 || offset != want_offset)
    fail_msg("symbolize(%#lx): rc %d, name %s, offset %lu; want %s+%lu", (unsigned long)addr, rc,
             rc == 0 ? name : "-", (unsigned long)offset, want, (unsigned long)want_offset);
}

/* ---- images ------------------------------------------------------------------------- */

static void test_main_executable_first(void **state) {
  (void)state;
  image_list *list = images();
  assert_true(list->img[0].is_main);
  assert_true(list->img[0].path[0] == '/');
  char want[PATH_MAX];
  if (exe_path(want))
    assert_string_equal(list->img[0].path, want);
  int seen_other = 0;
  for (size_t i = 0; i < list->n; i++) {
    const image_copy *c = &list->img[i];
    assert_true(c->start < c->limit);
    assert_true(c->path[0] == '/' || strcmp(c->path, "[vdso]") == 0);
    /* Mappings of the main executable come before every other one. */
    if (!c->is_main)
      seen_other = 1;
    else
      assert_false(seen_other);
    /* The file offset is exact: it maps start the way the segment does. */
    assert_int_equal((c->start - c->load_bias) % 4096, c->file_offset % 4096);
  }
  /* This test's own code is in the main executable. */
  const image_copy *own = image_of(list, (uintptr_t)&images_static_target);
  assert_non_null(own);
  assert_true(own->is_main);
  free(list);
}

static void test_libc_and_dlopen_images(void **state) {
  (void)state;
  void *lib = dlopen(PPRT_TEST_DLOPEN_LIB, RTLD_NOW);
  assert_non_null(lib);
  void *fn = dlsym(lib, "pprt_test_dlopen_fn");
  assert_non_null(fn);
  image_list *list = images();
  const image_copy *c = image_of(list, (uintptr_t)fn);
  assert_non_null(c);
  char want[PATH_MAX];
  assert_non_null(realpath(PPRT_TEST_DLOPEN_LIB, want));
  assert_string_equal(c->path, want);
  assert_false(c->is_main);
  c = image_of(list, (uintptr_t)&getenv);
  assert_non_null(c);
  assert_false(c->is_main);
  assert_true(c->path[0] == '/');
  free(list);
  dlclose(lib);
}

#if HAVE_ELF
/* What `readelf -n` says the build id of path is, in lowercase hex. */
static int readelf_build_id(const char *path, char *out, size_t len) {
  if (system("readelf --version >/dev/null 2>&1") != 0)
    return 0;
  char cmd[PATH_MAX + 64];
  snprintf(cmd, sizeof cmd, "readelf -n '%s' 2>/dev/null", path);
  FILE *p = popen(cmd, "r");
  if (p == NULL)
    return 0;
  char line[512];
  int found = 0;
  while (fgets(line, sizeof line, p)) {
    const char *at = strstr(line, "Build ID: ");
    if (at && !found) {
      snprintf(out, len, "%s", at + 10);
      out[strcspn(out, " \r\n")] = '\0';
      found = 1;
    }
  }
  pclose(p);
  return found;
}

static void test_main_build_id_matches_readelf(void **state) {
  (void)state;
  image_list *list = images();
  char want[256];
  if (!readelf_build_id(list->img[0].path, want, sizeof want)) {
    free(list);
    skip(); /* no readelf here */
  }
  char got[256] = "";
  for (size_t i = 0; i < list->img[0].build_id_len; i++)
    snprintf(got + 2 * i, sizeof got - 2 * i, "%02x", list->img[0].build_id[i]);
  assert_string_equal(got, want);
  free(list);
}
#endif

#if defined(__linux__)
static void test_vdso(void **state) {
  (void)state;
  uintptr_t base = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
  if (base == 0)
    skip(); /* booted with vdso=0 */
  image_list *list = images();
  const image_copy *vdso = NULL;
  for (size_t i = 0; i < list->n; i++)
    if (strcmp(list->img[i].path, "[vdso]") == 0)
      vdso = &list->img[i];
  assert_non_null(vdso);
  assert_false(vdso->is_main);
  assert_true(vdso->start >= base);

  /* Its clock_gettime (__vdso_clock_gettime on x86, __kernel_clock_gettime
   * on arm64) is named from the vdso's dynamic symbols in memory. */
  pprt__os_symbolizer *s;
  assert_int_equal(pprt__os_symbolizer_open(&s), 0);
  const char *found = NULL;
  uintptr_t found_at = 0;
  for (uintptr_t a = vdso->start; a < vdso->limit && !found; a++) {
    const char *name;
    uintptr_t offset;
    if (pprt__os_symbolize(s, a, &name, &offset) == 0 && offset == 0 &&
        strstr(name, "clock_gettime")) {
      found = name;
      found_at = a;
    }
  }
  assert_non_null(found);
  expect_symbol(s, found_at + 1, found, 1);
  /* Where the loader lets us look the symbol up by name, the two agree. */
  static const char *const sonames[] = {"linux-vdso.so.1", "linux-gate.so.1", "linux-vdso32.so.1"};
  for (size_t i = 0; i < sizeof sonames / sizeof sonames[0]; i++) {
    void *h = dlopen(sonames[i], RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL)
      continue;
    void *p = dlsym(h, found);
    if (p != NULL)
      assert_int_equal((uintptr_t)p, found_at);
    dlclose(h);
  }
  pprt__os_symbolizer_close(s);
  free(list);
}
#endif

/* ---- symbols ------------------------------------------------------------------------ */

static void test_symbolize_static_function(void **state) {
  (void)state;
  pprt__os_symbolizer *s;
  assert_int_equal(pprt__os_symbolizer_open(&s), 0);
  uintptr_t addr = (uintptr_t)&images_static_target;
  expect_symbol(s, addr, "images_static_target", 0);
  expect_symbol(s, addr + 1, "images_static_target", 1);
  /* Asked again, the same answer from the table already read. */
  expect_symbol(s, addr + 2, "images_static_target", 2);
  pprt__os_symbolizer_close(s);
}

static void test_symbolize_libc(void **state) {
  (void)state;
  pprt__os_symbolizer *s;
  assert_int_equal(pprt__os_symbolizer_open(&s), 0);
  /* getenv, not qsort: sanitizers interpose qsort with their own. */
  uintptr_t addr = (uintptr_t)&getenv;
  expect_symbol(s, addr, "getenv", 0);
  expect_symbol(s, addr + 1, "getenv", 1);
  pprt__os_symbolizer_close(s);
}

static void test_symbolize_library_loaded_later(void **state) {
  (void)state;
  pprt__os_symbolizer *s;
  assert_int_equal(pprt__os_symbolizer_open(&s), 0);
  /* Loaded after the symbolizer's snapshot. */
  void *lib = dlopen(PPRT_TEST_DLOPEN_LIB, RTLD_NOW);
  assert_non_null(lib);
  uintptr_t fn = (uintptr_t)dlsym(lib, "pprt_test_dlopen_fn");
  uintptr_t (*static_addr)(void) = (uintptr_t(*)(void))dlsym(lib, "pprt_test_dlopen_static_addr");
  assert_true(fn != 0 && static_addr != NULL);
  expect_symbol(s, fn, "pprt_test_dlopen_fn", 0);
  expect_symbol(s, fn + 3, "pprt_test_dlopen_fn", 3);
  expect_symbol(s, static_addr(), "dlopen_static_helper", 0);
  expect_symbol(s, static_addr() + 1, "dlopen_static_helper", 1);
  pprt__os_symbolizer_close(s);
  dlclose(lib);
}

static void test_symbolize_outside_images(void **state) {
  (void)state;
  pprt__os_symbolizer *s;
  assert_int_equal(pprt__os_symbolizer_open(&s), 0);
  const char *name = "untouched";
  uintptr_t offset = 7;
  /* A large block comes from its own anonymous mapping; the stack and the
   * null page are in no image either. */
  char *heap = malloc(1 << 22);
  assert_non_null(heap);
  assert_int_equal(pprt__os_symbolize(s, (uintptr_t)heap + 4096, &name, &offset), -ENOENT);
  assert_int_equal(pprt__os_symbolize(s, (uintptr_t)&name, &name, &offset), -ENOENT);
  assert_int_equal(pprt__os_symbolize(s, 16, &name, &offset), -ENOENT);
  assert_int_equal(pprt__os_symbolize(s, UINTPTR_MAX, &name, &offset), -ENOENT);
  assert_string_equal(name, "untouched");
  assert_int_equal(offset, 7);
  free(heap);
  pprt__os_symbolizer_close(s);
  pprt__os_symbolizer_close(NULL);
}

/* ---- the ELF parser ------------------------------------------------------------------ */

#if HAVE_ELF
/* The table's rules on a hand-made table: nesting, unsized symbols, gaps,
 * aliases. */
static void test_elf_symtab_rules(void **state) {
  (void)state;
  static const struct {
    uintptr_t addr, size;
    const char *name;
    int rank;
  } in[] = {
      {100, 100, "outer", 0},      {120, 10, "inner", 0},      {300, 0, "asm_label", 0},
      {400, 10, "sized", 0},       {500, 8, "local_alias", 2}, {500, 8, "global_name", 0},
      {500, 8, "__weak_alias", 1},
      /* glibc's free: three global names, the shortest is the one users know */
      {600, 8, "cfree", 0},        {600, 8, "__libc_free", 0}, {600, 8, "free", 0},
  };
  pprt__elf_symtab tab = {0};
  tab.cap = tab.n = sizeof in / sizeof in[0];
  tab.sym = calloc(tab.n, sizeof *tab.sym);
  assert_non_null(tab.sym);
  for (size_t i = 0; i < tab.n; i++)
    tab.sym[i] = (pprt__elf_sym){in[i].addr, in[i].size, 0, in[i].name, in[i].rank};
  pprt__elf_symtab_finish(&tab);
  assert_int_equal(tab.n, 6);
  const struct {
    uintptr_t addr, seg_start;
    const char *want;
  } cases[] = {
      {99, 0, NULL},     {100, 0, "outer"}, {125, 0, "inner"},     {150, 0, "outer"},
      {199, 0, "outer"}, {200, 0, NULL},    {300, 0, "asm_label"}, {350, 0, "asm_label"},
      {350, 310, NULL},  {405, 0, "sized"}, {420, 0, NULL},        {504, 0, "global_name"},
      {508, 0, NULL},    {603, 0, "free"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const pprt__elf_sym *sym = pprt__elf_symtab_lookup(&tab, cases[i].addr, cases[i].seg_start);
    if (cases[i].want == NULL ? sym != NULL : sym == NULL || strcmp(sym->name, cases[i].want))
      fail_msg("lookup(%lu): got %s, want %s", (unsigned long)cases[i].addr,
               sym ? sym->name : "none", cases[i].want ? cases[i].want : "none");
  }
  pprt__elf_symtab_free(&tab);
}

/* This executable's bytes in a heap block of exactly its size, so that a
 * read past the end is a sanitizer error, not a silent one. */
static uint8_t *own_file(size_t *size) {
  image_list *list = images();
  const void *data;
  assert_int_equal(pprt__elf_map_file(list->img[0].path, &data, size), 0);
  free(list);
  uint8_t *copy = malloc(*size);
  assert_non_null(copy);
  memcpy(copy, data, *size);
  pprt__elf_unmap_file(data, *size);
  return copy;
}

/* Parses data[0, len) in a block of exactly len bytes; every name found
 * must lie inside it. Returns the parser's result. */
static int parse_copy(const uint8_t *data, size_t len, const uint8_t *id, size_t id_len) {
  uint8_t *copy = malloc(len ? len : 1);
  assert_non_null(copy);
  memcpy(copy, data, len);
  pprt__elf_symtab tab = {0};
  int rc = pprt__elf_symtab_add_file(&tab, copy, len, 0, id, id_len);
  assert_true(rc == -ENOEXEC || rc >= 0);
  assert_true(rc < 0 || (size_t)rc == tab.n);
  for (size_t i = 0; rc > 0 && i < tab.n; i++) {
    const char *name = tab.sym[i].name;
    assert_true((const uint8_t *)name >= copy && (const uint8_t *)name < copy + len);
    assert_non_null(memchr(name, '\0', (size_t)(copy + len - (const uint8_t *)name)));
  }
  pprt__elf_symtab_finish(&tab);
  pprt__elf_symtab_free(&tab);
  free(copy);
  return rc;
}

static void test_elf_reads_own_file(void **state) {
  (void)state;
  size_t size;
  uint8_t *file = own_file(&size);
  image_list *list = images();
  pprt__elf_symtab tab = {0};
  int n = pprt__elf_symtab_add_file(&tab, file, size, list->img[0].load_bias, list->img[0].build_id,
                                    list->img[0].build_id_len);
  assert_true(n > 0);
  pprt__elf_symtab_finish(&tab);
  const pprt__elf_sym *sym = pprt__elf_symtab_lookup(&tab, (uintptr_t)&images_static_target + 1, 0);
  assert_non_null(sym);
  assert_string_equal(sym->name, "images_static_target");
  assert_int_equal(sym->addr, (uintptr_t)&images_static_target);
  pprt__elf_symtab_free(&tab);
  /* The same file with another build id is not the loaded image. */
  if (list->img[0].build_id_len) {
    uint8_t other[64];
    memcpy(other, list->img[0].build_id, list->img[0].build_id_len);
    other[0] ^= 0xff;
    assert_int_equal(parse_copy(file, size, other, list->img[0].build_id_len), -ENOEXEC);
  }
  free(list);
  free(file);
}

static void test_elf_refuses_truncated_files(void **state) {
  (void)state;
  size_t size;
  uint8_t *file = own_file(&size);
  PPRT__ELF(Ehdr) eh;
  memcpy(&eh, file, sizeof eh);
  uint64_t sh_end = eh.e_shoff + (uint64_t)eh.e_shnum * eh.e_shentsize;
  assert_true(sh_end <= size);
  const size_t small[] = {0, 1, 4, SELFMAG, EI_NIDENT, sizeof eh - 1, sizeof eh};
  for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
    assert_int_equal(parse_copy(file, small[i], NULL, 0), -ENOEXEC);
  /* Cut anywhere before the end of the section headers: refused whole. */
  size_t step = size / 300 + 1;
  for (size_t len = sizeof eh; len < size; len += step)
    if (len < sh_end)
      assert_int_equal(parse_copy(file, len, NULL, 0), -ENOEXEC);
  for (size_t len = (size_t)sh_end - 64; len < sh_end; len++)
    assert_int_equal(parse_copy(file, len, NULL, 0), -ENOEXEC);
  assert_true(parse_copy(file, size, NULL, 0) > 0);
  free(file);
}

static uint32_t rng_state = 2463534242u;
static uint32_t rng(void) { /* xorshift32: reproducible corruption */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}

static void test_elf_refuses_corrupt_files(void **state) {
  (void)state;
  size_t size;
  uint8_t *file = own_file(&size);
  uint8_t *bad = malloc(size);
  assert_non_null(bad);
  PPRT__ELF(Ehdr) eh;
  memcpy(&eh, file, sizeof eh);

  /* Not ELF, or not this process's kind of ELF. */
  for (size_t i = 0; i < size; i++)
    bad[i] = (uint8_t)rng();
  assert_int_equal(parse_copy(bad, size, NULL, 0), -ENOEXEC);
  memcpy(bad, file, size);
  bad[EI_CLASS] = PPRT__ELF_CLASS == ELFCLASS64 ? ELFCLASS32 : ELFCLASS64;
  assert_int_equal(parse_copy(bad, size, NULL, 0), -ENOEXEC);
  memcpy(bad, file, size);
  bad[EI_DATA] = bad[EI_DATA] == ELFDATA2LSB ? ELFDATA2MSB : ELFDATA2LSB;
  assert_int_equal(parse_copy(bad, size, NULL, 0), -ENOEXEC);

  /* Section headers out of the file. */
  PPRT__ELF(Ehdr) e = eh;
  e.e_shoff = (size_t)-64;
  memcpy(bad, file, size);
  memcpy(bad, &e, sizeof e);
  assert_int_equal(parse_copy(bad, size, NULL, 0), -ENOEXEC);
  e = eh;
  e.e_shnum = 0xfff0;
  memcpy(bad, &e, sizeof e);
  assert_int_equal(parse_copy(bad, size, NULL, 0), -ENOEXEC);

  /* Each symbol table and string table pointed outside the file, linked to
   * a bogus string table, or its strings unterminated: that table gives no
   * symbols, nothing crashes. */
  for (size_t i = 0; i < eh.e_shnum; i++) {
    PPRT__ELF(Shdr) sh;
    size_t at = (size_t)eh.e_shoff + i * sizeof sh;
    memcpy(&sh, file + at, sizeof sh);
    if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_STRTAB)
      continue;
    for (int how = 0; how < 6; how++) {
      PPRT__ELF(Shdr) b = sh;
      switch (how) {
      case 0:
        b.sh_offset = size - 8;
        break;
      case 1:
        b.sh_size = size;
        break;
      case 2:
        b.sh_link = 0xffff;
        break;
      case 3:
        b.sh_entsize = 1;
        break;
      case 4:
        b.sh_offset = (size_t)-16;
        break;
      }
      memcpy(bad, file, size);
      memcpy(bad + at, &b, sizeof b);
      if (how == 5 && sh.sh_type == SHT_STRTAB && sh.sh_size > 0)
        bad[sh.sh_offset + sh.sh_size - 1] = 'x'; /* the last string unterminated */
      parse_copy(bad, size, NULL, 0);
    }
  }

  /* Random damage to the headers and the tables, where a parser's bounds
   * checks matter (flipping bytes in .text would test nothing). */
  size_t regions[8][2];
  size_t nregion = 0;
  regions[nregion][0] = 0;
  regions[nregion++][1] = sizeof eh;
  regions[nregion][0] = (size_t)eh.e_shoff;
  regions[nregion++][1] = (size_t)eh.e_shnum * sizeof(PPRT__ELF(Shdr));
  for (size_t i = 0; i < eh.e_shnum && nregion < 8; i++) {
    PPRT__ELF(Shdr) sh;
    memcpy(&sh, file + (size_t)eh.e_shoff + i * sizeof sh, sizeof sh);
    if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_NOTE) {
      regions[nregion][0] = (size_t)sh.sh_offset;
      regions[nregion++][1] = (size_t)sh.sh_size;
    }
  }
  for (int iter = 0; iter < 3000; iter++) {
    memcpy(bad, file, size);
    int flips = 1 + (int)(rng() % 8);
    for (int f = 0; f < flips; f++) {
      size_t r = rng() % nregion;
      if (regions[r][1] == 0)
        continue;
      bad[regions[r][0] + rng() % regions[r][1]] ^= (uint8_t)(1u << (rng() % 8));
    }
    parse_copy(bad, size, NULL, 0);
  }
  free(bad);
  free(file);
}

static void test_elf_files_that_are_not_files(void **state) {
  (void)state;
  const void *data;
  size_t size;
  char dir[] = "/tmp/pprt-images-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[PATH_MAX];

  snprintf(path, sizeof path, "%s/empty", dir);
  int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(pprt__elf_map_file(path, &data, &size), -ENOEXEC);
  unlink(path);

  /* A garbage file maps fine and is then refused by the parser. */
  snprintf(path, sizeof path, "%s/garbage.so", dir);
  fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
  assert_true(fd >= 0);
  char junk[4096];
  memcpy(junk, ELFMAG, SELFMAG);
  for (size_t i = SELFMAG; i < sizeof junk; i++)
    junk[i] = (char)rng();
  assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
  close(fd);
  assert_int_equal(pprt__elf_map_file(path, &data, &size), 0);
  pprt__elf_symtab tab = {0};
  assert_true(pprt__elf_symtab_add_file(&tab, data, size, 0, NULL, 0) <= 0);
  pprt__elf_symtab_free(&tab);
  pprt__elf_unmap_file(data, size);
  unlink(path);

  /* A FIFO where a library should be must not block the profiler. */
  snprintf(path, sizeof path, "%s/fifo.so", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  assert_int_equal(pprt__elf_map_file(path, &data, &size), -ENOEXEC);
  unlink(path);

  assert_int_equal(pprt__elf_map_file(dir, &data, &size), -ENOEXEC);
  assert_int_equal(pprt__elf_map_file("/nonexistent/pprt", &data, &size), -ENOENT);
  rmdir(dir);
}

/* An object whose program headers promise a dynamic section that is not in
 * any readable segment is refused without being read. */
static void test_elf_memory_refuses_bad_objects(void **state) {
  (void)state;
  pprt__elf_phdr ph[2];
  memset(ph, 0, sizeof ph);
  ph[0].p_type = PT_LOAD;
  ph[0].p_flags = PF_R;
  ph[0].p_vaddr = 0x1000;
  ph[0].p_filesz = ph[0].p_memsz = 0x100;
  ph[1].p_type = PT_DYNAMIC;
  ph[1].p_vaddr = 0x4000;
  ph[1].p_filesz = 0x100;
  char path[] = "[test]";
  pprt__elf_object obj = {.path = path, .bias = 0, .phdr = ph, .phnum = 2};
  pprt__elf_symtab tab = {0};
  assert_int_equal(pprt__elf_symtab_add_memory(&tab, &obj), -ENOEXEC);
  obj.phnum = 1; /* no PT_DYNAMIC at all */
  assert_int_equal(pprt__elf_symtab_add_memory(&tab, &obj), -ENOEXEC);
  assert_int_equal(tab.n, 0);
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_main_executable_first),
    cmocka_unit_test(test_libc_and_dlopen_images),
#if HAVE_ELF
    cmocka_unit_test(test_main_build_id_matches_readelf),
#endif
#if defined(__linux__)
    cmocka_unit_test(test_vdso),
#endif
    cmocka_unit_test(test_symbolize_static_function),
    cmocka_unit_test(test_symbolize_libc),
    cmocka_unit_test(test_symbolize_library_loaded_later),
    cmocka_unit_test(test_symbolize_outside_images),
#if HAVE_ELF
    cmocka_unit_test(test_elf_symtab_rules),
    cmocka_unit_test(test_elf_reads_own_file),
    cmocka_unit_test(test_elf_refuses_truncated_files),
    cmocka_unit_test(test_elf_refuses_corrupt_files),
    cmocka_unit_test(test_elf_files_that_are_not_files),
    cmocka_unit_test(test_elf_memory_refuses_bad_objects),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
