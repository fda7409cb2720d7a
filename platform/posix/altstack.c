/* Per-thread alternate signal stacks (Linux, FreeBSD, Darwin): the stack
 * pprt's SA_ONSTACK handler runs on, so a sample taken on a thread whose own
 * stack is nearly used up (or is a small coroutine stack) does not overflow
 * it.
 *
 * A thread's existing stack is kept when it is large enough. Otherwise pprt
 * maps its own: a PROT_NONE guard page, then the stack, then a small record
 * of the stack it replaced (above the stack's top, where signal frames never
 * reach), so that release can put a program's smaller stack back rather than
 * leave the thread with none. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/platform.h"
#include "core/syscalls.h"

/* Kept above the top of pprt's stack. */
typedef struct altstack_record {
  stack_t replaced; /* SS_DISABLE when the thread had none */
} altstack_record;

#define RECORD_SPACE ((sizeof(altstack_record) + 63) & ~(size_t)63)

static size_t page_size(void) {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? (size_t)p : 4096;
}

int pprt__os_altstack_ensure(pprt__os_altstack *st) {
  st->mem = NULL;
  st->size = 0;
  stack_t cur;
  if (pprt__sys_sigaltstack(NULL, &cur) != 0)
    return -errno;
  if (!(cur.ss_flags & SS_DISABLE) && cur.ss_size >= PPRT__OS_ALTSTACK_SIZE)
    return 0;

  size_t page = page_size();
  size_t usable = (PPRT__OS_ALTSTACK_SIZE + RECORD_SPACE + page - 1) & ~(page - 1);
  size_t total = page + usable;
  char *mem = pprt__sys_mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
  if (mem == MAP_FAILED)
    return -ENOMEM;
  if (mprotect(mem, page, PROT_NONE) != 0) {
    munmap(mem, total);
    return -ENOMEM;
  }
  altstack_record *rec = (altstack_record *)(mem + total - RECORD_SPACE);
  rec->replaced = cur;

  stack_t ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_sp = mem + page;
  ss.ss_size = usable - RECORD_SPACE;
  if (pprt__sys_sigaltstack(&ss, NULL) != 0) {
    int err = errno; /* EPERM: the thread is running on its current one */
    munmap(mem, total);
    return -err;
  }
  st->mem = mem;
  st->size = total;
  return 0;
}

void pprt__os_altstack_release(pprt__os_altstack *st) {
  if (st->mem == NULL)
    return;
  char *mem = st->mem;
  stack_t cur;
  if (pprt__sys_sigaltstack(NULL, &cur) != 0 || (cur.ss_flags & SS_DISABLE) ||
      (char *)cur.ss_sp != mem + page_size()) {
    /* Someone replaced pprt's stack and may put it back later: leave it
     * mapped rather than risk a handler running on unmapped memory. */
    st->mem = NULL;
    return;
  }
  const altstack_record *rec = (const altstack_record *)(mem + st->size - RECORD_SPACE);
  stack_t back;
  if (rec->replaced.ss_flags & SS_DISABLE) {
    memset(&back, 0, sizeof back);
    back.ss_flags = SS_DISABLE;
  } else {
    back = rec->replaced;
    back.ss_flags = 0;
  }
  /* Fails (EPERM) only when called on pprt's stack itself: keep it then. */
  if (pprt__sys_sigaltstack(&back, NULL) == 0)
    munmap(mem, st->size);
  st->mem = NULL;
  st->size = 0;
}
