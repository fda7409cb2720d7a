/* pprt's calls into the loader against fork (platform/posix/elf_images.c:
 * pprt__elf_iterate_phdr). glibc's fork does not make the loader's lock
 * anew in the child, so a fork while a pprt thread is inside
 * dl_iterate_phdr left the child's loader locked: its next
 * dl_iterate_phdr hung (one child in a few hundred on i386 and aarch64).
 * A program of its own, labelled qemu-unsafe: qemu-user itself can hang a
 * child forked from a threaded process. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/platform.h"
#include "tests/asan_fork.h"

static int count_image(const pprt__os_image *img, void *ctx) {
  (void)img;
  ++*(int *)ctx;
  return 0;
}

static atomic_int g_listing;

static void *list_images(void *arg) {
  (void)arg;
  while (atomic_load(&g_listing)) {
    int n = 0;
    pprt__os_image_each(count_image, &n);
  }
  return NULL;
}

/* A fork while another thread lists the images leaves the child able to
 * list them. A child stuck in the loader is killed by its alarm, which
 * fails the test. */
static void test_fork_while_listing_images(void **state) {
  (void)state;
  pthread_t th;
  atomic_store(&g_listing, 1);
  assert_int_equal(pthread_create(&th, NULL, list_images, NULL), 0);
  for (int i = 0; i < 300; i++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      if (!CHILD_MAY_ALLOCATE)
        _exit(0);
      alarm(30);
      int n = 0;
      _exit(pprt__os_image_each(count_image, &n) == 0 && n > 0 ? 0 : 3);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status))
      print_message("child %d of the fork: killed by signal %d\n", i,
                    WIFSIGNALED(status) ? WTERMSIG(status) : -1);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  atomic_store(&g_listing, 0);
  pthread_join(th, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fork_while_listing_images),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
