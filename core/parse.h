/* Numbers in settings: the preload library's PPRT_* variables and the pprt
 * command's options are read by one parser, so that both accept and refuse
 * the same strings. */
#ifndef PPRT_CORE_PARSE_H
#define PPRT_CORE_PARSE_H

/* Parses s, a whole decimal number (an optional sign, digits, nothing
 * after them), into *out when it lies in [lo, hi]. Returns 0, or -EINVAL
 * (not a number, trailing characters, out of range) with *out untouched.
 * Not AS-safe (strtoll may use the locale); errno is left as it was. */
int pprt__parse_int(const char *s, long long lo, long long hi, long long *out);

#endif /* PPRT_CORE_PARSE_H */
