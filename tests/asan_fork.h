/* CHILD_MAY_ALLOCATE: 0 under AddressSanitizer, whose allocator (GCC 12's
 * libasan among others) takes no lock across fork, so a child that
 * allocates can wait forever on a lock another of the parent's threads
 * held at the fork, whatever pprt does. Tests and the soak that fork from
 * a threaded process let such a child only exit or exec there. */
#ifndef PPRT_TESTS_ASAN_FORK_H
#define PPRT_TESTS_ASAN_FORK_H

#if defined(__SANITIZE_ADDRESS__)
#define CHILD_MAY_ALLOCATE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHILD_MAY_ALLOCATE 0
#endif
#endif
#ifndef CHILD_MAY_ALLOCATE
#define CHILD_MAY_ALLOCATE 1
#endif

#endif /* PPRT_TESTS_ASAN_FORK_H */
