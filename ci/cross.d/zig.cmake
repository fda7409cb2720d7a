# Common part of pprt's zig cc cross toolchains (see ../cross). A per-target
# file sets CMAKE_SYSTEM_NAME, CMAKE_SYSTEM_PROCESSOR and PPRT_ZIG_TARGET (a
# zig target triple), then includes this file. Usable on its own too:
#   cmake -DCMAKE_TOOLCHAIN_FILE=ci/cross.d/aarch64-linux.cmake \
#         -DCMAKE_PREFIX_PATH=<zlib, protobuf-c, cmocka built for the target> ...
#
# The zig executable: -DPPRT_ZIG=<path>, else $PPRT_ZIG, else the one in the
# `ziglang` Python package (pip install ziglang).
if(NOT PPRT_ZIG_TARGET)
  message(FATAL_ERROR "zig.cmake: include it from a per-target toolchain file that sets PPRT_ZIG_TARGET")
endif()

if(NOT PPRT_ZIG AND DEFINED ENV{PPRT_ZIG})
  set(PPRT_ZIG "$ENV{PPRT_ZIG}")
endif()
if(NOT PPRT_ZIG)
  execute_process(
    COMMAND python3 -c "import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), 'zig'))"
    OUTPUT_VARIABLE PPRT_ZIG OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0 OR NOT EXISTS "${PPRT_ZIG}")
    message(FATAL_ERROR "zig.cmake: no zig (pip install ziglang, or pass -DPPRT_ZIG=/path/to/zig)")
  endif()
endif()
set(PPRT_ZIG "${PPRT_ZIG}" CACHE FILEPATH "The zig executable used as cross compiler")
# try_compile projects re-read this file without the cache: hand them both.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES PPRT_ZIG PPRT_ZIG_TARGET)

# "zig cc -target <triple>"; CMake keeps the extra words as CMAKE_C_COMPILER_ARG1.
set(CMAKE_C_COMPILER "${PPRT_ZIG}" cc -target ${PPRT_ZIG_TARGET})
# ar and ranlib take no target; these wrappers run `zig ar` / `zig ranlib`
# ($PPRT_ZIG when set, as ../cross does, else python3 -m ziglang).
set(CMAKE_AR "${CMAKE_CURRENT_LIST_DIR}/zig-ar" CACHE FILEPATH "")
set(CMAKE_RANLIB "${CMAKE_CURRENT_LIST_DIR}/zig-ranlib" CACHE FILEPATH "")

if(CMAKE_SYSTEM_NAME STREQUAL "Darwin")
  set(CMAKE_USER_MAKE_RULES_OVERRIDE "${CMAKE_CURRENT_LIST_DIR}/zig-darwin-rules.cmake")
endif()

# zig ships no nm. llvm-nm reads ELF and Mach-O alike; binutils nm reads the
# ELF targets. tests/check_symbols.cmake (the symbols_are_prefixed test) uses it.
find_program(PPRT_CROSS_NM NAMES llvm-nm llvm-nm-22 llvm-nm-21 llvm-nm-20 llvm-nm-19 llvm-nm-18
             llvm-nm-17 llvm-nm-16 llvm-nm-15 llvm-nm-14 NO_CMAKE_FIND_ROOT_PATH)
if(NOT PPRT_CROSS_NM AND NOT CMAKE_SYSTEM_NAME STREQUAL "Darwin")
  find_program(PPRT_CROSS_NM NAMES nm NO_CMAKE_FIND_ROOT_PATH)
endif()
if(PPRT_CROSS_NM)
  set(CMAKE_NM "${PPRT_CROSS_NM}" CACHE FILEPATH "")
endif()

# Libraries and headers come only from the target prefixes; programs from
# the host.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
