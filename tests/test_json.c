/* Tests of read/json.c, the JSON string escaper the trace exporter and the
 * flame graph share: what every byte becomes, so that any parser takes the
 * result, and that a name that was valid UTF-8 comes out unchanged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "read/json.h"

typedef struct sink {
  char buf[256];
  size_t len;
  size_t calls;
} sink;

static void put(void *ctx, const char *s, size_t n) {
  sink *k = ctx;
  assert_true(k->len + n < sizeof k->buf);
  assert_true(n > 0); /* no empty runs */
  memcpy(k->buf + k->len, s, n);
  k->len += n;
  k->buf[k->len] = '\0';
  k->calls++;
}

/* s[0..n) escaped, as a string. */
static const char *esc(sink *k, const char *s, size_t n, unsigned flags) {
  memset(k, 0, sizeof *k);
  pprt__json_string(s, n, flags, put, k);
  return k->buf;
}

#define ESC(lit) esc(&k, lit, sizeof lit - 1, 0)

static void test_plain_text_is_copied_in_one_run(void **state) {
  (void)state;
  sink k;
  assert_string_equal(ESC("main"), "\"main\"");
  assert_int_equal(k.calls, 3); /* quote, run, quote */
  assert_string_equal(ESC(""), "\"\"");
  assert_string_equal(esc(&k, NULL, 5, 0), "\"\"");
}

static void test_quotes_backslashes_and_controls(void **state) {
  (void)state;
  sink k;
  assert_string_equal(ESC("a\"b\\c"), "\"a\\\"b\\\\c\"");
  assert_string_equal(ESC("\n\t\r"), "\"\\n\\t\\r\"");
  assert_string_equal(ESC("\x01\x1f\b\f"), "\"\\u0001\\u001f\\u0008\\u000c\"");
  /* A NUL inside the length is a character like any other. */
  assert_string_equal(ESC("a\0b"), "\"a\\u0000b\"");
  /* DEL and '/' need no escape. */
  assert_string_equal(ESC("\x7f/"), "\"\x7f/\"");
}

static void test_html_flag(void **state) {
  (void)state;
  sink k;
  assert_string_equal(ESC("</script>&"), "\"</script>&\"");
  assert_string_equal(esc(&k, "</script>&", 10, PPRT__JSON_HTML),
                      "\"\\u003c/script\\u003e\\u0026\"");
}

static void test_valid_utf8_is_kept(void **state) {
  (void)state;
  sink k;
  /* U+00E9, U+20AC, U+1F600, and the edges: U+0080, U+07FF, U+0800,
   * U+FFFF, U+10000, U+10FFFF, and U+E000 just past the surrogates. */
  static const char *const ok[] = {
      "\xc3\xa9",     "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xc2\x80",         "\xdf\xbf",
      "\xe0\xa0\x80", "\xef\xbf\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "\xee\x80\x80",
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    char want[16];
    snprintf(want, sizeof want, "\"%s\"", ok[i]);
    assert_string_equal(esc(&k, ok[i], strlen(ok[i]), 0), want);
  }
}

static void test_invalid_utf8_is_replaced_byte_by_byte(void **state) {
  (void)state;
  sink k;
  /* A stray continuation byte; bytes that never start a sequence. */
  assert_string_equal(ESC("a\x80z"), "\"a\\ufffdz\"");
  assert_string_equal(ESC("\xc0\xc1\xf5\xff"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
  /* Overlong forms of '/' and of U+07FF. */
  assert_string_equal(ESC("\xc0\xaf"), "\"\\ufffd\\ufffd\"");
  assert_string_equal(ESC("\xe0\x9f\xbf"), "\"\\ufffd\\ufffd\\ufffd\"");
  assert_string_equal(ESC("\xf0\x8f\xbf\xbf"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
  /* A surrogate (U+D800) and a code point past U+10FFFF. */
  assert_string_equal(ESC("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");
  assert_string_equal(ESC("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
  /* A sequence cut short by the end, and by a byte that does not continue
   * it (which is then read on its own). */
  assert_string_equal(ESC("x\xe2\x82"), "\"x\\ufffd\\ufffd\"");
  assert_string_equal(ESC("\xe2\x82y"), "\"\\ufffd\\ufffdy\"");
  assert_string_equal(ESC("\xc3\xc3\xa9"), "\"\\ufffd\xc3\xa9\"");
}

static void test_length_bounds_the_input(void **state) {
  (void)state;
  sink k;
  /* A valid sequence that the length cuts is cut short, not read past. */
  assert_string_equal(esc(&k, "\xc3\xa9", 1, 0), "\"\\ufffd\"");
  assert_string_equal(esc(&k, "abc", 2, 0), "\"ab\"");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plain_text_is_copied_in_one_run),
      cmocka_unit_test(test_quotes_backslashes_and_controls),
      cmocka_unit_test(test_html_flag),
      cmocka_unit_test(test_valid_utf8_is_kept),
      cmocka_unit_test(test_invalid_utf8_is_replaced_byte_by_byte),
      cmocka_unit_test(test_length_bounds_the_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
