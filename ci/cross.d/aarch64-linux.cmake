# pprt cross toolchain: aarch64-linux via zig cc (see zig.cmake and ../cross).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(PPRT_ZIG_TARGET aarch64-linux-gnu.2.31)
include(${CMAKE_CURRENT_LIST_DIR}/zig.cmake)
