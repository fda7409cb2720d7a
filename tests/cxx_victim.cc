// The C++ program of the demangling test (tests/cxx_test.cmake): a CPU
// profile of a method that throws and catches in a loop, so its stacks hold
// mangled names from the program (demo::Thrower::run) and from libstdc++
// (operator new, std::runtime_error).
//
// Usage: cxx_victim OUT.pb.gz
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <stdexcept>

#include "pprt.h"

namespace demo {

struct Thrower {
  int run(int n);
};

__attribute__((noinline)) static void raise_it(int i) {
  throw std::runtime_error(i % 2 ? "odd" : "even");
}

int Thrower::run(int n) {
  int caught = 0;
  for (int i = 0; i < n; i++) {
    try {
      raise_it(i);
    } catch (const std::exception &) {
      caught++;
    }
  }
  return caught;
}

} // namespace demo

static double cpu_seconds() {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.pb.gz\n", argv[0]);
    return 2;
  }
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    perror(argv[1]);
    return 1;
  }
  pprt_cpu_options o = {};
  o.size = sizeof o;
  o.hz = 500;
  int rc = pprt_cpu_start(&o, pprt_writer_fd(fd));
  if (rc != 0) {
    fprintf(stderr, "pprt_cpu_start: %s\n", pprt_strerror(rc));
    return 1;
  }
  demo::Thrower t;
  double t0 = cpu_seconds();
  long caught = 0;
  while (cpu_seconds() - t0 < 0.5)
    caught += t.run(100);
  if ((rc = pprt_cpu_stop()) != 0) {
    fprintf(stderr, "pprt_cpu_stop: %s\n", pprt_strerror(rc));
    return 1;
  }
  close(fd);
  printf("caught %ld\n", caught);
  return 0;
}
