# pprt cross toolchain: aarch64-macos via zig cc (see zig.cmake and ../cross).
set(CMAKE_SYSTEM_NAME Darwin)
set(CMAKE_SYSTEM_PROCESSOR arm64)
set(PPRT_ZIG_TARGET aarch64-macos-none)
include(${CMAKE_CURRENT_LIST_DIR}/zig.cmake)
