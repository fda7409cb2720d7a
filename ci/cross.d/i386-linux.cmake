# pprt toolchain: i386 Linux with the host's gcc -m32 (Debian's gcc-multilib);
# the binaries run natively on an x86_64 host. Not a zig toolchain: it tests
# the i386 code paths (the raw rt_sigaction SA_RESTORER trampoline) as built
# by the compiler i386 users use. Dependencies come from CMAKE_PREFIX_PATH
# (../cross builds them with gcc -m32), never from the 64-bit system.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR i686)
set(CMAKE_C_COMPILER gcc)
set(CMAKE_C_FLAGS_INIT -m32)
set(CMAKE_EXE_LINKER_FLAGS_INIT -m32)
set(CMAKE_SHARED_LINKER_FLAGS_INIT -m32)
set(CMAKE_MODULE_LINKER_FLAGS_INIT -m32)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
