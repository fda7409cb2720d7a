/* Darwin thread ids: pthread_threadid_np, the system-wide 64-bit id that
 * Instruments and `sample` show. */
#include <pthread.h>

#include "core/platform.h"

uint64_t pprt__os_thread_id(void) {
  uint64_t tid = 0;
  pthread_threadid_np(NULL, &tid);
  return tid;
}
