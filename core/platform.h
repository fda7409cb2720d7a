/* The platform contract: every function an OS backend provides.
 *
 * The core (core/) is platform-neutral: what differs between the OSes it
 * reaches only through the functions declared here. POSIX itself is
 * assumed everywhere, and the core calls it directly where every supported
 * OS behaves alike (mmap, nanosleep, getrusage, pthreads, stdio). Each
 * backend (platform/linux, platform/darwin, platform/freebsd) implements
 * these functions, using the mechanisms shared by several OSes in
 * platform/posix; CMake picks the files when it configures, so there is no
 * OS #ifdef in the core or in platform/posix and no dispatch at run time.
 *
 * Conventions, for every function below unless it says otherwise:
 *   - returns 0 on success or a negative errno value;
 *   - "AS-safe" means async-signal-safe: callable from pprt's signal handler,
 *     and from a writer interrupted by that handler, without locks, allocation
 *     or stdio;
 *   - functions not marked AS-safe may allocate and take locks, and are
 *     called only from ordinary thread context.
 *
 * The system calls that a start or a write can fail in (timers, perf events,
 * signal actions, alternate stacks, mmap, thread creation, open, write) are
 * made through the table of core/syscalls.h, which tests override to make
 * them fail.
 *
 * Sections: clocks; threads; reader wait/wake; signals; alternate stacks;
 * timers; sampling clocks; images; the program's files; unwind tables;
 * symbols; source lines; the process. Every backend implements every
 * function, and where an OS lacks the mechanism the function says what it
 * returns there (-ENOTSUP, 0); the exceptions are marked "ELF systems
 * only": Linux and FreeBSD have them, for code built only there (the ELF
 * image list, the CFI unwinder).
 */
#ifndef PPRT_CORE_PLATFORM_H
#define PPRT_CORE_PLATFORM_H

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* ---- clocks ---------------------------------------------------------------- */

/* Nanoseconds on the system's monotonic clock (CLOCK_MONOTONIC on every
 * supported OS), which does not jump with wall-clock changes. The origin is
 * arbitrary. AS-safe (clock_gettime is on POSIX's list). Never fails. */
uint64_t pprt__os_monotonic_ns(void);

/* Nanoseconds since the Unix epoch, for time_nanos in profiles. AS-safe. */
uint64_t pprt__os_wall_ns(void);

/* The trace clock: cheaper than pprt__os_monotonic_ns (which costs ~16 ns
 * through the vDSO here, most of a trace event's budget). It reads the CPU's
 * counter without a system call (x86 rdtsc, aarch64 cntvct_el0, Darwin
 * mach_absolute_time) where the OS keeps its own clock on that counter, so
 * it runs at a constant rate and agrees across CPUs (Linux: the current
 * clocksource is tsc / arch_sys_counter; FreeBSD: kern.timecounter.hardware
 * is TSC / the ARM timer); elsewhere it is the monotonic clock itself.
 *
 * pprt__os_ticks_init picks the source (once; later calls, from any thread,
 * return the same answer) and describes it:
 *   hz         its rate in ticks per second when the hardware or the OS
 *              states it exactly (1e9 for the monotonic clock, cntfrq_el0,
 *              the Darwin timebase), or 0 when the caller must measure it
 *              against pprt__os_monotonic_ns (the TSC);
 *   monotonic  1 when the ticks are pprt__os_monotonic_ns's own readings
 *              (hz is then 1e9), so a tick count is also a monotonic time.
 * Linux and FreeBSD do not use a counter whose stated rate is off by more
 * than 1/PPRT__TICKS_RATE_SLACK_DIV: the first call compares the two over
 * ~2 ms. Not AS-safe; call it before relying on pprt__os_ticks.
 *
 * pprt__os_ticks: the current tick count. Monotonic per thread; AS-safe.
 * Before pprt__os_ticks_init it reads the monotonic clock. */
typedef struct pprt__ticks_info {
  uint64_t hz;
  int monotonic;
} pprt__ticks_info;
/* The check catches an emulator's counter (old qemu-user read the host's
 * TSC for cntvct_el0 and stated 62.5 MHz) and firmware that left another
 * board's rate in cntfrq_el0 (19.2 vs 24 MHz is off by 1/4), and stays
 * clear of the monotonic clock's own steering: chrony slews it by up to
 * 1/12 by default. */
#define PPRT__TICKS_RATE_SLACK_DIV 8
pprt__ticks_info pprt__os_ticks_init(void);
uint64_t pprt__os_ticks(void);

/* The calling thread's CPU time, user and system, in nanoseconds
 * (CLOCK_THREAD_CPUTIME_ID: the scheduler's runtime, what getrusage and
 * the program's own measurements count). AS-safe; a system call on Linux.
 * Never fails. */
uint64_t pprt__os_thread_cpu_self_ns(void);

/* ---- threads --------------------------------------------------------------- */

/* The OS's id of the calling thread: Linux gettid, FreeBSD thr_self, Darwin
 * pthread_threadid_np. Unique among the live threads of the process, stable
 * for the thread's life, and the id a debugger or `top -H` shows. AS-safe.
 * Never fails. */
uint64_t pprt__os_thread_id(void);

/* Calls fn(tid, ctx) for each thread of the process (Linux: /proc/self/task;
 * FreeBSD: sysctl KERN_PROC_PID|KERN_PROC_INC_THREAD; Darwin: task_threads).
 * A thread created or ended during the walk may or may not be reported.
 * Stops early and returns fn's value when fn returns nonzero. */
int pprt__os_thread_each(int (*fn)(uint64_t tid, void *ctx), void *ctx);

/* The name of thread tid (Linux: /proc/self/task/<tid>/comm; FreeBSD:
 * kinfo_proc ki_tdname; Darwin: proc_pidinfo PROC_PIDTHREADID64INFO),
 * NUL-terminated in buf. Errors: -ESRCH (gone), -ENOTSUP. */
int pprt__os_thread_name(uint64_t tid, char *buf, size_t len);

/* Whether thread tid of this process blocks signal sig right now: *blocked
 * is 1 or 0 (Linux: SigBlk in /proc/self/task/<tid>/status; FreeBSD:
 * ki_sigmask of the thread's kinfo_proc). For the CPU profiler's reader, to
 * say why a thread has no samples. The answer may be stale by the time it
 * is used. Not AS-safe. Errors: -ESRCH (gone), -EINVAL (not a signal),
 * -ENOTSUP (Darwin, which shows no other thread's mask). */
int pprt__os_thread_blocks(uint64_t tid, int sig, int *blocked);

/* The CPU time thread tid of this process has used so far, user and
 * system, in nanoseconds (Linux: clock_gettime on the thread's CPU-time
 * clock, the scheduler's exact runtime; FreeBSD: clock_getcpuclockid2 with
 * CPUCLOCK_WHICH_TID; Darwin: proc_pidinfo PROC_PIDTHREADID64INFO, to the
 * microsecond). Not AS-safe. Errors: -ESRCH (gone), -ENOTSUP. */
int pprt__os_thread_cpu_ns(uint64_t tid, uint64_t *ns);

/* When thread tid of this process started, in units of the OS's choosing
 * (Linux: starttime of /proc/self/task/<tid>/stat, clock ticks since boot):
 * with the tid, it tells a thread from a later one that got the same id
 * (a thread that ends unseen, its id reused before the profiler's next
 * rescan, must not keep the timer of the one before). Never 0 on success.
 * Not AS-safe. Errors: -ESRCH (gone), -ENOTSUP (FreeBSD, Darwin: the
 * check is skipped there). */
int pprt__os_thread_start_time(uint64_t tid, uint64_t *start);

/* ---- reader wait/wake ------------------------------------------------------ */

/* The wait between a ring buffer's reader and its writers. Two builds,
 * chosen by the PPRT_READER option:
 *   blocking (Linux futex, FreeBSD umtx): wait sleeps until woken or timed
 *     out; wake is an AS-safe system call.
 *   poll (every OS; the only mode on Darwin, where no wakeup is AS-safe, see
 *     Go issue 61768): wait sleeps min(timeout, PPRT__OS_POLL_NS), wake does
 *     nothing, so a reader sees new data at most 100 ms late.
 *
 * pprt__os_wait: if *word still equals expected, sleep until a wake on word,
 * the timeout (nanoseconds; 0 means no timeout) or a spurious wakeup.
 * Returns 0 in every case; callers re-check their condition. Not AS-safe
 * (it is the reader's call). */
#define PPRT__OS_POLL_NS 100000000ull
int pprt__os_wait(atomic_uint *word, unsigned expected, uint64_t timeout_ns);

/* Wakes every thread waiting in pprt__os_wait on word. The caller changes
 * *word first. AS-safe. */
void pprt__os_wake(atomic_uint *word);

/* 1 when pprt__os_wait blocks until woken, 0 when it polls. */
extern const int pprt__os_reader_blocks;

/* ---- signals --------------------------------------------------------------- */

/* A signal handler as pprt installs it (SA_SIGINFO form). */
typedef void (*pprt__os_handler)(int sig, siginfo_t *info, void *ucontext);

/* The program's action for a signal pprt has taken over: the one installed
 * before pprt's, or one the program set since (pprt__os_signal_adopt), kept
 * so it can be restored and so signals that are not pprt's can be
 * forwarded to it. */
typedef struct pprt__os_sigsave {
  struct sigaction old; /* the program's action, as the program set it */
  uintptr_t restorer;   /* raw rt_sigaction: the previous SA_RESTORER, or 0 */
  int installed;        /* 1 while pprt's handler is the installed one */
  int adopted;          /* old came from the program's sigaction call, not
                           from the kernel */
} pprt__os_sigsave;

/* Installs fn for sig with SA_SIGINFO | SA_ONSTACK | SA_RESTART and every
 * signal blocked while it runs, and saves the previous action in save. On
 * Linux x86_64/i386 with PPRT_RAW_SIGACTION this is a raw rt_sigaction with
 * SA_RESTORER and pprt's own restorer trampoline (assembly that calls
 * rt_sigreturn); elsewhere it is libc sigaction. Errors: -EINVAL for a
 * signal that cannot be caught, -EBUSY if save->installed is set. */
int pprt__os_signal_install(int sig, pprt__os_handler fn, pprt__os_sigsave *save);

/* Puts back the saved action and clears save->installed. Where that action
 * is SIG_DFL, SIG_IGN is installed instead, so that a late signal of
 * pprt's (a tick still pending) cannot kill the process (Go issue 19320).
 * An action saved from the kernel is put back exactly (the raw installer:
 * flags and restorer too); an adopted one is installed with libc's
 * sigaction, as the program asked for it. */
int pprt__os_signal_restore(int sig, pprt__os_sigsave *save);

/* Records act as the program's action, in place of the one saved: an
 * action the program sets with libc's sigaction while pprt's handler is
 * installed (the preload library's interposer). Later forwards go to it and
 * pprt__os_signal_restore installs it. AS-safe. */
void pprt__os_signal_adopt(pprt__os_sigsave *save, const struct sigaction *act);

/* Hands a signal that was not pprt's to the saved action: calls its handler
 * in the form it was installed with (sa_sigaction with SA_SIGINFO, else
 * sa_handler); does nothing for SIG_IGN and SIG_DFL (see
 * pprt__os_signal_restore). AS-safe. */
void pprt__os_signal_forward(const pprt__os_sigsave *save, int sig, siginfo_t *info,
                             void *ucontext);

/* Takes one pending instance of sig off the calling thread's pending set or
 * the process's, without delivering it, and fills info: returns 1 when one
 * was taken, 0 when none is pending. The caller blocks sig first (else it
 * may be delivered instead). For an exec: pending signals survive it, and
 * the new image has the default action. Linux: rt_sigtimedwait with a zero
 * timeout (the system call: libc's is a cancellation point); FreeBSD:
 * sigtimedwait's system call alike. AS-safe. Errors: -ENOTSUP on Darwin,
 * which has no sigtimedwait (sigwait would wait for good if another thread
 * took a process-wide signal between a sigpending and it). */
int pprt__os_signal_take(int sig, siginfo_t *info);

/* Changes the calling thread's signal mask as pthread_sigmask(how, set, old)
 * does, but never through an interposer of it (the preload library's own
 * pthread_sigmask, which keeps SIGPROF deliverable): Linux and FreeBSD make
 * the system call (rt_sigprocmask, sigprocmask); Darwin calls
 * pthread_sigmask, which dyld's __interpose does not redirect for the image
 * that interposes it. For pprt's own changes to SIGPROF's bit; the C
 * library's reserved signals are left to the caller. AS-safe. Errors:
 * -EINVAL (how). */
int pprt__os_thread_sigmask(int how, const sigset_t *set, sigset_t *old);

/* Sends sig again to the calling thread, as described by info: a signal
 * that pprt held back while the program's mask blocked it (see
 * core/sigmask.c). Delivered before this returns when the thread does not
 * block sig, left pending when it does. Linux: rt_tgsigqueueinfo with
 * info's si_code, si_pid, si_uid and si_value; the kernel lets only the
 * main thread queue a code that claims a sender (kill's SI_USER,
 * tgkill's SI_TKILL), so another thread re-sends those with tgkill, and the
 * handler sees SI_TKILL from this process. FreeBSD: pthread_kill (SI_LWP
 * from this process). Darwin: calls the installed action itself, with
 * info and a NULL ucontext, its sa_mask blocked meanwhile; pthread_kill
 * would be taken for the profiling timer's signal (see
 * platform/darwin/sigprof.c), so it is used only when sig is blocked or
 * its action is the default. Not AS-safe. */
int pprt__os_signal_resend(int sig, const siginfo_t *info);

/* The registers the unwinder starts from, read from a signal's ucontext. */
typedef struct pprt__os_regs {
  uintptr_t pc; /* the interrupted instruction */
  uintptr_t sp; /* stack pointer */
  uintptr_t fp; /* frame pointer: rbp, ebp, x29 */
  uintptr_t lr; /* link register (aarch64 x30), 0 where there is none */
} pprt__os_regs;

/* Fills regs from the ucontext a SA_SIGINFO handler receives. AS-safe.
 * Errors: -ENOTSUP on an architecture the backend does not know. */
int pprt__os_context_regs(const void *ucontext, pprt__os_regs *regs);

/* 1 when the machine word at addr can be read without faulting, else 0.
 * For the unwinder, outside the stack bounds it knows. AS-safe; costs one
 * system call (Linux: rt_sigprocmask reading addr as a signal set, which
 * fails with EFAULT when it is unmapped). */
int pprt__os_readable(uintptr_t addr);

/* ---- alternate signal stacks ----------------------------------------------- */

#define PPRT__OS_ALTSTACK_SIZE (32 * 1024)

/* What pprt did to one thread's alternate stack, so it can undo it. */
typedef struct pprt__os_altstack {
  void *mem; /* pprt's mapping (guard page included), NULL when kept */
  size_t size;
} pprt__os_altstack;

/* Ensures the calling thread has an alternate signal stack of at least
 * PPRT__OS_ALTSTACK_SIZE. An existing one that is large enough is kept
 * (st->mem = NULL); otherwise pprt maps one (with a guard page below it) and
 * installs it. Errors: -ENOMEM. */
int pprt__os_altstack_ensure(pprt__os_altstack *st);

/* Removes and unmaps the stack that pprt__os_altstack_ensure installed on the
 * calling thread, if it is still the installed one; does nothing when it
 * kept the thread's own. Must run on the same thread. */
void pprt__os_altstack_release(pprt__os_altstack *st);

/* The calling thread's stack: [*lo, *hi). For the unwinder's bounds. Not
 * AS-safe (pthread_getattr_np reads /proc for the main thread). Errors:
 * -ENOTSUP, -ENOMEM. */
int pprt__os_thread_stack(uintptr_t *lo, uintptr_t *hi);

/* ---- timers ---------------------------------------------------------------- */

/* The process-wide CPU timer (setitimer ITIMER_PROF): SIGPROF every
 * 1/hz seconds of CPU time consumed by the process. hz = 0 disarms it. */
int pprt__os_process_timer_set(int hz);

/* A per-thread CPU timer: SIGPROF delivered to thread tid every 1/hz
 * seconds of that thread's CPU time, the first expiry randomised in
 * (0, period] so threads started together do not fire together. cookie is
 * carried in si_value so pprt__os_sigprof_source can tell pprt's timers
 * from the program's. Linux only (timer_create on the thread's CPU clock,
 * SIGEV_THREAD_ID); elsewhere returns -ENOTSUP and the process timer is
 * used. Errors: -ESRCH (no such thread), -EAGAIN (timer limit). */
typedef struct pprt__os_thread_timer {
  uintptr_t handle;
  int armed;
} pprt__os_thread_timer;
int pprt__os_thread_timer_start(pprt__os_thread_timer *t, uint64_t tid, int hz, uintptr_t cookie);

/* Disarms and deletes the timer (also when its thread has exited). */
int pprt__os_thread_timer_stop(pprt__os_thread_timer *t);

/* Which timer a SIGPROF came from, from its siginfo (Go's validSIGPROF):
 * Linux: SI_TIMER with si_value == cookie for pprt's per-thread timer,
 * SI_KERNEL for setitimer. Backends with only the process timer report every
 * kernel-sent SIGPROF as PROCESS_TIMER. AS-safe. */
enum pprt__os_sigprof_source {
  PPRT__OS_SIGPROF_PROCESS_TIMER,
  PPRT__OS_SIGPROF_THREAD_TIMER,
  PPRT__OS_SIGPROF_OTHER /* kill, sigqueue, raise, another timer: not pprt's tick */
};
enum pprt__os_sigprof_source pprt__os_sigprof_source(const siginfo_t *info, uintptr_t cookie);

/* For a THREAD_TIMER SIGPROF: how many further expirations this one signal
 * stands for (si_overrun). Linux checks CPU timers on the scheduler tick, so
 * a period shorter than a tick, or a thread that ran while its timer could
 * not fire, folds several expirations into one signal. 0 elsewhere. AS-safe. */
unsigned pprt__os_sigprof_overrun(const siginfo_t *info);

/* ---- sampling clocks -------------------------------------------------------- */

/* A per-thread sampling clock: counts thread tid's CPU time in nanoseconds
 * and sends SIGPROF to that thread each time the current period has run
 * out, off the scheduler tick. Unlike a CPU timer its period can be changed
 * from the handler, so each interval can be drawn at random.
 *
 * Linux: a perf_event software task clock (PERF_COUNT_SW_TASK_CLOCK, driven
 * by a high-resolution timer that runs only while the thread does), opened
 * on tid, close-on-exec, its overflow signal routed with O_ASYNC, F_SETSIG
 * SIGPROF and F_SETOWN_EX F_OWNER_TID. Elsewhere every call is -ENOTSUP.
 *
 * Kernel time: where perf_event_paranoid allows it (<= 1, or CAP_PERFMON)
 * the clock also fires while the thread is in the kernel, and the signal
 * arrives on the way back to user space, as a CPU timer's would. Otherwise
 * it is opened with the kernel excluded (PPRT__OS_CLOCK_USER_ONLY set in
 * flags on return): a period that runs out in the kernel sends
 * nothing and the next signal comes a period later, so the handler must
 * measure how much CPU time passed.
 *
 * open: the clock starts at 0, disabled; start enables it with the first
 * period. Errors: -ENOTSUP (no perf events: not Linux, seccomp, ENOSYS),
 * -EACCES (perf_event_paranoid refuses even user-only clocks), -ESRCH (no
 * such thread), -EMFILE / -ENFILE (out of descriptors), -ENOMEM. Not
 * AS-safe. */
#define PPRT__OS_CLOCK_USER_ONLY 1u
typedef struct pprt__os_sample_clock {
  int fd;         /* -1 when closed */
  unsigned flags; /* PPRT__OS_CLOCK_USER_ONLY */
} pprt__os_sample_clock;
int pprt__os_sample_clock_open(pprt__os_sample_clock *c, uint64_t tid);
int pprt__os_sample_clock_start(const pprt__os_sample_clock *c, uint64_t first_ns);

/* Restarts the current period at period_ns from now. AS-safe; one system
 * call.
 *
 * The clock is a timer, not a measure: it counts the time its thread is
 * scheduled in, by the clock perf uses, which includes interrupt time and,
 * in a virtual machine, time stolen by the host (measured on a busy 2-vCPU
 * guest: 5-12% ahead of CLOCK_THREAD_CPUTIME_ID). Weights come from
 * pprt__os_thread_cpu_self_ns. */
int pprt__os_sample_clock_rearm(const pprt__os_sample_clock *c, uint64_t period_ns);

/* Stops the clock (no further signals are sent; one already sent may still
 * be pending on its thread) and closes it. Harmless on a closed clock. */
void pprt__os_sample_clock_close(pprt__os_sample_clock *c);

/* For a SIGPROF, the descriptor of the sampling clock that sent it, or -1
 * when no sampling clock did (si_code POLL_IN with si_fd on Linux). AS-safe. */
int pprt__os_sigprof_clock_fd(const siginfo_t *info);

/* ---- images ---------------------------------------------------------------- */

/* One executable mapping of a loaded image: what a pprof Mapping describes.
 * A pc belongs to the mapping with start <= pc < limit; its offset in the
 * file is pc - start + file_offset, and its link-time address (what the
 * image's symbol tables and debug info use) is pc - load_bias. */
typedef struct pprt__os_image {
  const char *path;        /* absolute (realpath where the file exists); the
                              main executable's real path, never ""; "[vdso]"
                              for the kernel's vDSO, which has no file */
  uintptr_t start;         /* first address of the executable segment */
  uintptr_t limit;         /* one past its last address */
  uint64_t file_offset;    /* offset in the file that start maps (ELF p_offset,
                              Mach-O fileoff): exact, not rounded to a page */
  uintptr_t load_bias;     /* runtime address minus link-time address */
  const uint8_t *build_id; /* ELF NT_GNU_BUILD_ID or Mach-O LC_UUID bytes */
  size_t build_id_len;     /* 0 when the image has none */
  int is_main;             /* 1 for the main executable */
} pprt__os_image;

/* Calls fn for each executable mapping of each loaded image (Linux/FreeBSD:
 * one per PT_LOAD segment with PF_X, from dl_iterate_phdr; Darwin: one per
 * segment with VM_PROT_EXECUTE, from dyld's image list). The main
 * executable's mappings come first; images without an executable segment are
 * left out. The list is a snapshot taken before the first call, so fn runs
 * without the loader's lock and may itself allocate, dlopen or symbolize;
 * an image loaded or unloaded meanwhile may or may not be reported. Pointers
 * in img are valid only during the call. Stops early and returns fn's value
 * when fn returns nonzero. Errors: -ENOMEM. Never from a signal handler. */
int pprt__os_image_each(int (*fn)(const pprt__os_image *img, void *ctx), void *ctx);

/* ---- the program's files ---------------------------------------------------- */

/* The main executable's absolute path as the kernel knows it, NUL-terminated
 * in buf (Linux: /proc/self/exe, less the " (deleted)" the kernel appends
 * once the file is deleted; FreeBSD: sysctl KERN_PROC_PATHNAME; Darwin:
 * _NSGetExecutablePath through realpath). When the dynamic loader was run
 * as a command (ld.so ./prog) this is the loader. For the image list and
 * for pprt's command, which finds its preload library next to itself. Not
 * AS-safe. Errors: -ENOENT (Linux without /proc), -ENAMETOOLONG (buf too
 * small), or the errno of the failed call. */
int pprt__os_exe_path(char *buf, size_t len);

/* ELF systems only. Where the main executable's bytes can be read even
 * after its file is deleted or replaced: "/proc/self/exe" on Linux, NULL
 * on FreeBSD (which has no such path). */
extern const char *const pprt__os_exe_file;

/* ELF systems only. The path the kernel exec'd, from the aux vector (Linux:
 * AT_EXECFN, as the program was started, perhaps relative; FreeBSD:
 * AT_EXECPATH), NUL-terminated in buf: the main executable's name when
 * pprt__os_exe_path fails or names the loader. Not AS-safe. Errors:
 * -ENOENT (the kernel gave none), -ENAMETOOLONG. */
int pprt__os_exec_path(char *buf, size_t len);

/* ELF systems only. The address of the vDSO's ELF header, 0 when the kernel
 * maps none (Linux: AT_SYSINFO_EHDR; FreeBSD 13 and later: AT_KPRELOAD): how
 * the image list knows the vDSO whatever the loader names it. AS-safe. */
uintptr_t pprt__os_vdso_base(void);

/* ---- unwind tables ----------------------------------------------------------- */

/* Where one loaded image keeps its call frame information, for the CFI
 * unwinder's tables (core/cfi.h). ELF systems only: Darwin keeps frame
 * pointers and has no implementation. */
typedef struct pprt__os_unwind_source {
  const char *path;    /* as pprt__os_image's; valid during the call */
  uintptr_t start;     /* the image's code: first executable address */
  uintptr_t limit;     /* one past the last */
  uintptr_t load_bias; /* runtime address minus link-time address */
  unsigned machine;    /* ELF e_machine */
  const uint8_t *hdr;  /* .eh_frame_hdr in memory (PT_GNU_EH_FRAME), or NULL */
  size_t hdr_len;
  const uint8_t *frame; /* the mapped segment holding .eh_frame, or .debug_frame
                           read from the file when there is no .eh_frame; NULL
                           when the image has neither */
  size_t frame_len;
  uint64_t frame_addr; /* the address frame[0] has: runtime for .eh_frame,
                          0 for .debug_frame (its pcs are link-time) */
  int debug_frame;     /* frame is .debug_frame */
  size_t eh_bytes;     /* the unwind information's own size, for reports */
} pprt__os_unwind_source;

/* Calls fn for each loaded image with executable code (the vDSO included).
 * Bytes passed stay readable during the call only. Stops early and returns
 * fn's value when fn returns nonzero. Not AS-safe. Errors: -ENOMEM,
 * -ENOTSUP (Darwin). */
int pprt__os_unwind_each(int (*fn)(const pprt__os_unwind_source *src, void *ctx), void *ctx);

/* A number that changes whenever the loader adds or removes an image
 * (glibc and FreeBSD: dl_iterate_phdr's dlpi_adds and dlpi_subs; Darwin:
 * the image count and the newest image's header, see darwin/images.c).
 * Cheap: the unwinder asks at every rescan, the symbol cache at every
 * lookup. Not AS-safe. */
uint64_t pprt__os_loader_generation(void);

/* Where the kernel's signal frame keeps the interrupted registers, as byte
 * offsets from the stack pointer that the signal trampoline (the restorer a
 * handler returns into) starts with; lr is SIZE_MAX where there is no link
 * register. For unwinding through a program's own signal handler. AS-safe.
 * Errors: -ENOTSUP (FreeBSD, Darwin: not described yet). */
typedef struct pprt__os_sigframe {
  size_t pc, sp, fp, lr;
} pprt__os_sigframe;
int pprt__os_sigframe_layout(pprt__os_sigframe *l);

/* 1 when the code at pc is the kernel's signal return trampoline (a
 * handler's return address), recognised by its instructions: for a
 * trampoline without unwind information (qemu-user's, an old vDSO's, a
 * C library's without CFI). Probes that the code is readable first.
 * AS-safe. 0 on FreeBSD and Darwin. */
int pprt__os_is_sigreturn(uintptr_t pc);

/* ---- symbols --------------------------------------------------------------- */

/* In-process symbolization for the profile builder: the name of the function
 * containing an address. A symbolizer reads each image's symbol tables at
 * most once (ELF: .symtab and .dynsym of the mapped file, the vDSO's dynamic
 * symbols from memory; Mach-O: the LC_SYMTAB nlist in __LINKEDIT), so a
 * profile's worth of addresses costs one parse per image it touches; dladdr
 * is the fallback for an image whose tables cannot be read. None of these
 * functions is AS-safe, and one symbolizer is used by one thread at a time. */
typedef struct pprt__os_symbolizer pprt__os_symbolizer;

/* Creates a symbolizer over a snapshot of the loaded images. Files are
 * opened lazily, on the first address that falls in each image. Errors:
 * -ENOMEM (*out untouched). */
int pprt__os_symbolizer_open(pprt__os_symbolizer **out);

/* Finds the function containing addr: *name receives its name as the symbol
 * table spells it (C++ and Swift names stay mangled; Mach-O's leading '_' is
 * removed) and *offset receives addr minus the function's first address.
 * A symbol covers addr when addr is in [value, value + size); a symbol of
 * size 0 (hand-written assembly) covers the addresses after it up to the
 * next symbol or the end of its executable segment; Mach-O symbols have no
 * size and end at the next symbol or function start. An image loaded after
 * open is picked up when an address falls in it. *name stays valid until
 * pprt__os_symbolizer_close, as long as the image it came from stays loaded.
 * Errors: -ENOENT when addr is in no executable mapping of a loaded image or
 * no symbol covers it (a PLT stub, a stripped function), with *name and
 * *offset untouched. */
int pprt__os_symbolize(pprt__os_symbolizer *s, uintptr_t addr, const char **name,
                       uintptr_t *offset);

/* Releases the symbolizer, its mapped files and its tables. NULL is allowed. */
void pprt__os_symbolizer_close(pprt__os_symbolizer *s);

/* ---- source lines ---------------------------------------------------------- */

/* Source lines and inline frames from debug information, for the write-time
 * symbolizer (core/symbolize.c). ELF systems: pprt's own DWARF reader
 * (platform/posix/dwarf_read.c), or elfutils' libdw
 * (platform/posix/dwarf_lines.c, PPRT_SYMBOLIZER=libdw): DWARF 2 to 5,
 * compressed sections, separate debug files found by build id and
 * .gnu_debuglink, dwz's alternate files. Elsewhere, or built without
 * either (PPRT_SYMBOLIZER=elf), open returns -ENOTSUP
 * (platform/posix/lines_none.c). Each image's debug information is opened
 * once, on the first address that falls in it. None of these is AS-safe;
 * one reader is used by one thread at a time. */
typedef struct pprt__os_lines pprt__os_lines;

/* One frame of an address's inline chain. name is the function's linkage
 * name (C++ mangled) where the debug information has one, else its source
 * name, and NULL when the debug information has a line for the address but
 * no function (assembly): the caller names it from the symbol table. file
 * is NULL and line 0 when unknown. */
typedef struct pprt__os_frame {
  const char *name;
  const char *file;
  int line;
  int start_line; /* the function's declaration line, or 0 */
} pprt__os_frame;

/* Opens a reader over a snapshot of the loaded images. Separate debug files
 * are looked for in the directories of debug_dirs (colon-separated, each
 * holding a .build-id tree; NULL for none) before the system's
 * (/usr/lib/debug). Errors: -ENOMEM, -ENOTSUP (no debug information reader
 * in this build or on this OS). */
int pprt__os_lines_open(pprt__os_lines **out, const char *debug_dirs);

/* Resolves addr into at most max frames at out, innermost (inlined) first:
 * the last is the function whose code holds addr, and each frame's line is
 * where it calls the frame before it. Returns the number of frames, 0 when
 * no debug information covers addr. The strings (names, files) stay valid
 * until close only: a caller that keeps them copies them.
 * Callers hand a reader its addresses in the order pprt__os_lines_order
 * puts them, each at most once, between one open and one close (the
 * symbolizer orders a write's new addresses so): the reader then keeps
 * only the current compilation unit's function index and line-program
 * cursor, and reads each unit once. Any other order is still answered
 * correctly, at the cost of reading units again. */
int pprt__os_lines_resolve(pprt__os_lines *l, uintptr_t addr, pprt__os_frame *out, size_t max);

/* Puts n distinct addresses, given in increasing order, in the order the
 * reader resolves fastest: for the libdw reader that order itself; for
 * pprt's own (platform/posix/dwarf_read.c) by image, then by compilation
 * unit in the order the units lie in the debug file (a unit's cold code
 * is apart from the rest, so address order visits units twice), then by
 * address. On ENOMEM the order is left as it is. */
void pprt__os_lines_order(pprt__os_lines *l, uint64_t *addrs, size_t n);

/* Releases the reader and every image's debug information. NULL is allowed. */
void pprt__os_lines_close(pprt__os_lines *l);

/* ---- the process ------------------------------------------------------------ */

/* The program's command line for the HTTP endpoint's /debug/pprof/cmdline:
 * its arguments, each followed by a NUL, into buf (cut at len bytes);
 * *outlen receives the bytes written. Linux: /proc/self/cmdline; FreeBSD:
 * sysctl KERN_PROC_ARGS; Darwin: _NSGetArgv. Errors: -EIO, -ENOTSUP. Not
 * AS-safe. */
int pprt__os_cmdline(char *buf, size_t len, size_t *outlen);

#endif /* PPRT_CORE_PLATFORM_H */
