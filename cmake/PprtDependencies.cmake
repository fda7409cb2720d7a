# Finds what pprt links against, gives each an imported target named
# pprt_dep::<name> and lists the library's in pprt_dep_targets (private to
# pprt: the static library passes them on as link-only). Used at configure
# time and again by the installed pprtConfig.cmake, so a consumer of the
# installed static library re-finds the same libraries. pkg-config is tried first, then a plain header + library search
# (which is what cross builds use, through CMAKE_PREFIX_PATH or
# CMAKE_FIND_ROOT_PATH). A missing dependency stops configure and names the
# package that provides it on each OS pprt supports.

find_package(PkgConfig QUIET)

# pprt_find_dependency(<name> [FOR_TESTS] [FOR_HTTP] PKG <pkg-config module>
#                      HEADER <header> LIBS <library names...>
#                      DEBIAN <hint> MACOS <hint> FREEBSD <hint>)
# adds pprt_dep::<name> to pprt_dep_targets, what the runtime library links;
# FOR_HTTP to pprt_http_dep_targets, what only the HTTP endpoint's library
# adds; FOR_TESTS to neither.
function(pprt_find_dependency name)
  cmake_parse_arguments(arg "FOR_TESTS;FOR_HTTP" "PKG;HEADER;DEBIAN;MACOS;FREEBSD" "LIBS" ${ARGN})
  if(arg_FOR_HTTP)
    set(pprt_http_dep_targets ${pprt_http_dep_targets} pprt_dep::${name} PARENT_SCOPE)
  elseif(NOT arg_FOR_TESTS)
    set(pprt_dep_targets ${pprt_dep_targets} pprt_dep::${name} PARENT_SCOPE)
  endif()
  if(TARGET pprt_dep::${name})
    return()
  endif()
  # Cache variables, so a user can also point at a dependency by hand:
  # -DPPRT_<NAME>_INCLUDE_DIR=... -DPPRT_<NAME>_LIBRARY=...
  string(TOUPPER ${name} uname)
  set(inc_var PPRT_${uname}_INCLUDE_DIR)
  set(lib_var PPRT_${uname}_LIBRARY)
  if(PKG_CONFIG_FOUND AND NOT CMAKE_CROSSCOMPILING)
    pkg_check_modules(pprt_pc_${name} QUIET ${arg_PKG})
  endif()
  find_path(${inc_var} ${arg_HEADER} HINTS ${pprt_pc_${name}_INCLUDE_DIRS})
  find_library(${lib_var} NAMES ${arg_LIBS} HINTS ${pprt_pc_${name}_LIBRARY_DIRS})
  set(inc ${${inc_var}})
  set(lib ${${lib_var}})
  if(NOT inc OR NOT lib)
    message(FATAL_ERROR
      "pprt: ${name} not found (looked for ${arg_HEADER} and lib${arg_LIBS}).\n"
      "  Debian/Ubuntu: ${arg_DEBIAN}\n"
      "  macOS:         ${arg_MACOS}\n"
      "  FreeBSD:       ${arg_FREEBSD}\n"
      "  or point CMAKE_PREFIX_PATH (or PPRT_${uname}_INCLUDE_DIR and\n"
      "  PPRT_${uname}_LIBRARY) at an installation.")
  endif()
  add_library(pprt_dep::${name} UNKNOWN IMPORTED)
  set_target_properties(pprt_dep::${name} PROPERTIES
    IMPORTED_LOCATION "${lib}" INTERFACE_INCLUDE_DIRECTORIES "${inc}")
  set(pprt_dep_${name}_LIBRARY "${lib}" PARENT_SCOPE)
endfunction()

set(pprt_dep_targets "")
set(pprt_http_dep_targets "")
pprt_find_dependency(zlib PKG zlib HEADER zlib.h LIBS z
  DEBIAN "apt-get install zlib1g-dev" MACOS "part of the SDK, or brew install zlib"
  FREEBSD "part of the base system")
pprt_find_dependency(protobuf_c PKG libprotobuf-c HEADER protobuf-c/protobuf-c.h
  LIBS protobuf-c DEBIAN "apt-get install libprotobuf-c-dev" MACOS "brew install protobuf-c"
  FREEBSD "pkg install protobuf-c")

# On Darwin libunwind is part of the system library.
if(PPRT_UNWINDER STREQUAL "libunwind" AND NOT CMAKE_SYSTEM_NAME STREQUAL "Darwin")
  pprt_find_dependency(libunwind PKG libunwind HEADER libunwind.h LIBS unwind
    DEBIAN "apt-get install libunwind-dev" MACOS "part of the SDK"
    FREEBSD "pkg install libunwind")
endif()

# libmicrohttpd, for the HTTP endpoint's library (libpprt_http): optional.
# PPRT_HTTP is ON where it is found (pkg-config); without it only the
# runtime library is built (whose pprt_http_start returns -ENOTSUP). ON
# when it is missing stops configure and names the package.
if(NOT DEFINED PPRT_HTTP OR PPRT_HTTP)
  if(PKG_CONFIG_FOUND AND NOT CMAKE_CROSSCOMPILING)
    pkg_check_modules(pprt_pc_microhttpd QUIET libmicrohttpd)
  endif()
  set(pprt_microhttpd_found OFF)
  if(pprt_pc_microhttpd_FOUND)
    set(pprt_microhttpd_found ON)
  endif()
  if(NOT DEFINED PPRT_HTTP)
    option(PPRT_HTTP "The HTTP endpoint (/debug/pprof/) with libmicrohttpd" ${pprt_microhttpd_found})
  endif()
  if(PPRT_HTTP)
    pprt_find_dependency(microhttpd FOR_HTTP PKG libmicrohttpd HEADER microhttpd.h LIBS microhttpd
      DEBIAN "apt-get install libmicrohttpd-dev" MACOS "brew install libmicrohttpd"
      FREEBSD "pkg install libmicrohttpd (www/libmicrohttpd); or configure with -DPPRT_HTTP=OFF")
  endif()
endif()

# elfutils' libdw: the symbolizer with PPRT_SYMBOLIZER=libdw (libdw.pc asks
# for libelf too); otherwise, where pkg-config finds it, the reference the
# tests hold pprt's own DWARF reader to (tests/lines_units.c and others).
set(pprt_libdw_use "not used")
set(pprt_libdw_hints DEBIAN "apt-get install libdw-dev" MACOS "not available (Darwin uses macho)"
    FREEBSD "pkg install elfutils; or configure with -DPPRT_SYMBOLIZER=dwarf")
set(pprt_libelf_hints DEBIAN "apt-get install libelf-dev" MACOS "not available"
    FREEBSD "part of the base system")
if(PPRT_SYMBOLIZER STREQUAL "libdw")
  pprt_find_dependency(libdw PKG libdw HEADER elfutils/libdwfl.h LIBS dw ${pprt_libdw_hints})
  pprt_find_dependency(libelf PKG libelf HEADER libelf.h LIBS elf ${pprt_libelf_hints})
  set(pprt_libdw_use "the symbolizer")
elseif(PPRT_BUILD_TESTS AND PKG_CONFIG_FOUND AND NOT CMAKE_CROSSCOMPILING
       AND NOT PPRT_OS STREQUAL "Darwin")
  pkg_check_modules(pprt_pc_libdw QUIET libdw)
  if(pprt_pc_libdw_FOUND)
    pprt_find_dependency(libdw FOR_TESTS PKG libdw HEADER elfutils/libdwfl.h LIBS dw
                         ${pprt_libdw_hints})
    pprt_find_dependency(libelf FOR_TESTS PKG libelf HEADER libelf.h LIBS elf ${pprt_libelf_hints})
    set(pprt_libdw_use "the tests' reference")
  else()
    set(pprt_libdw_use "not found (the tests that compare with it are left out)")
  endif()
endif()

if(PPRT_BUILD_TESTS)
  pprt_find_dependency(cmocka FOR_TESTS PKG cmocka HEADER cmocka.h LIBS cmocka
    DEBIAN "apt-get install libcmocka-dev" MACOS "brew install cmocka"
    FREEBSD "pkg install cmocka")
endif()
