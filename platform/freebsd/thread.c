/* FreeBSD thread ids: thr_self(2), the id ps -H and procstat show. */
#include <sys/thr.h>

#include "core/platform.h"

uint64_t pprt__os_thread_id(void) {
  long tid = 0;
  thr_self(&tid);
  return (uint64_t)tid;
}
