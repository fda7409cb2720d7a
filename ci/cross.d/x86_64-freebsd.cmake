# pprt cross toolchain: x86_64-freebsd via zig cc (see zig.cmake and ../cross).
set(CMAKE_SYSTEM_NAME FreeBSD)
set(CMAKE_SYSTEM_PROCESSOR amd64)
set(PPRT_ZIG_TARGET x86_64-freebsd.14.0-none)
include(${CMAKE_CURRENT_LIST_DIR}/zig.cmake)
