/* _exit and _Exit for Darwin: dyld's __interpose section sends every other
 * image's calls to these, which have the outputs written first (exits.c);
 * our own calls still reach libsystem's. quick_exit is not interposed:
 * libsystem ends it through its own _Exit, not through dyld. */
#include <stdlib.h>
#include <unistd.h>

#include "preload/preload.h"

static void my__exit(int status) {
  pprt__exits_before_exit();
  _exit(status);
}

static void my__Exit(int status) {
  pprt__exits_before_exit();
  _Exit(status);
}

#define INTERPOSE(mine, theirs)                                                                    \
  { (const void *)(mine), (const void *)(theirs) }
__attribute__((used, section("__DATA,__interpose"))) static const struct {
  const void *replacement;
  const void *original;
} exit_interposers[] = {
    INTERPOSE(my__exit, _exit),
    INTERPOSE(my__Exit, _Exit),
};
