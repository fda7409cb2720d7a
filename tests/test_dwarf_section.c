/* The window over a compressed debug section (platform/posix/dwarf_section.c),
 * on a section made here: 24 MiB of bytes that zlib compresses about 3:1,
 * behind an Elf64_Chdr, read back at increasing and at random offsets and
 * compared with the bytes compressed. Checks that every read is right, that
 * an earlier offset restarts from a checkpoint rather than from the start,
 * that the checkpoints stay within PPRT__DW_CHECKPOINTS however long the
 * section (every other one dropped as it grows), and that reading from a
 * mapped file whose pages the window gives back reads the same bytes. Built with the section's
 * source alone and zlib, in every build. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "platform/posix/dwarf_section.h"

#define SIZE (24u << 20)

static uint8_t *g_plain, *g_raw;
static size_t g_raw_len;

static uint64_t next_rand(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

static int setup(void **state) {
  (void)state;
  g_plain = malloc(SIZE);
  uLongf bound = compressBound(SIZE);
  g_raw = malloc(24 + bound);
  if (g_plain == NULL || g_raw == NULL)
    return -1;
  uint64_t x = 88172645463325252u;
  for (size_t i = 0; i < SIZE; i++) /* a few random bits per byte: compressible */
    g_plain[i] = (uint8_t)((next_rand(&x) & 0x7) + 'a');
  uint32_t type = 1; /* ELFCOMPRESS_ZLIB */
  uint64_t size = SIZE, align = 1;
  memset(g_raw, 0, 24);
  memcpy(g_raw, &type, 4);
  memcpy(g_raw + 8, &size, 8);
  memcpy(g_raw + 16, &align, 8);
  if (compress2(g_raw + 24, &bound, g_plain, SIZE, 1) != Z_OK)
    return -1;
  g_raw_len = 24 + bound;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  free(g_plain);
  free(g_raw);
  return 0;
}

static void check_read(pprt__dw_section *s, uint64_t off, size_t len) {
  const uint8_t *p = pprt__dw_section_get(s, off, len);
  if (p == NULL)
    print_error("no bytes at %llu, length %zu (window at %llu, %zu bytes)\n",
                (unsigned long long)off, len, (unsigned long long)s->win_off, s->win_len);
  assert_non_null(p);
  assert_memory_equal(p, g_plain + off, len);
}

static void reads(const uint8_t *raw, int file_mapped) {
  pprt__dw_section s;
  assert_int_equal(pprt__dw_section_init(&s, raw, g_raw_len, 1, 1), 0);
  s.file_mapped = file_mapped;
  assert_int_equal(s.size, SIZE);
  for (uint64_t off = 0; off + 5000 < SIZE; off += 99991)
    check_read(&s, off, 5000);
  assert_int_equal(s.restarts, 0);
  /* 24 MiB in 256 KiB steps would be 96 checkpoints: at most 32 kept. */
  assert_true(s.ncp > 0 && s.ncp <= PPRT__DW_CHECKPOINTS);
  assert_true(s.cp_every > PPRT__DW_CHECKPOINT);
  uint64_t x = 42;
  for (int i = 0; i < 100; i++) {
    uint64_t off = next_rand(&x) % (SIZE - 70000);
    check_read(&s, off, (size_t)(next_rand(&x) % 70000) + 1);
  }
  assert_true(s.restarts > 0);
  assert_true(s.ncp <= PPRT__DW_CHECKPOINTS);
  assert_null(pprt__dw_section_get(&s, SIZE - 10, 11)); /* past the end */
  check_read(&s, SIZE - 10, 10);
  pprt__dw_section_free(&s);
}

static void forward_then_random(void **state) {
  (void)state;
  reads(g_raw, 0);
}

/* The same from a mapped file, whose pages the window gives back behind
 * it: the bytes read again after that are the same. */
static void from_a_mapped_file(void **state) {
  (void)state;
  const char *dir = getenv("TMPDIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/pprt-dwsec-XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  assert_int_equal(write(fd, g_raw, g_raw_len), (ssize_t)g_raw_len);
  void *map = mmap(NULL, g_raw_len, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  assert_true(map != MAP_FAILED);
  reads(map, 1);
  munmap(map, g_raw_len);
}

static void damaged_stream(void **state) {
  (void)state;
  uint8_t *bad = malloc(g_raw_len);
  assert_non_null(bad);
  memcpy(bad, g_raw, g_raw_len);
  memset(bad + 24 + g_raw_len / 2, 0xff, 4096); /* the middle of the stream */
  pprt__dw_section s;
  assert_int_equal(pprt__dw_section_init(&s, bad, g_raw_len, 1, 1), 0);
  check_read(&s, 100, 100);
  int failed = 0;
  for (uint64_t off = 0; off + 4096 < SIZE && !failed; off += 1 << 20) {
    const uint8_t *p = pprt__dw_section_get(&s, off, 4096);
    failed = p == NULL || memcmp(p, g_plain + off, 4096) != 0;
  }
  assert_true(failed); /* an answer of NULL, never a crash */
  pprt__dw_section_free(&s);
  free(bad);
}

static void unknown_compression(void **state) {
  (void)state;
  uint8_t hdr[24] = {2}; /* ELFCOMPRESS_ZSTD */
  pprt__dw_section s;
  assert_int_equal(pprt__dw_section_init(&s, hdr, sizeof hdr, 1, 1), -22);
  assert_int_equal(pprt__dw_section_init(&s, hdr, 10, 1, 1), -22); /* too short */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(forward_then_random),
      cmocka_unit_test(from_a_mapped_file),
      cmocka_unit_test(damaged_stream),
      cmocka_unit_test(unknown_compression),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
