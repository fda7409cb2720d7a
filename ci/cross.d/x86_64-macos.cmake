# pprt cross toolchain: x86_64-macos via zig cc (see zig.cmake and ../cross).
set(CMAKE_SYSTEM_NAME Darwin)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(PPRT_ZIG_TARGET x86_64-macos-none)
include(${CMAKE_CURRENT_LIST_DIR}/zig.cmake)
