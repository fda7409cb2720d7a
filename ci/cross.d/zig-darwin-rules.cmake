# Darwin link rules for zig cc, read after CMake's Platform/Darwin.cmake
# (through CMAKE_USER_MAKE_RULES_OVERRIDE, set in zig.cmake).
#
# On a Linux host Platform/Darwin.cmake cannot ask sw_vers for the macOS
# version, so it leaves out the rpath flag and shared libraries get their
# absolute build path as install name instead of @rpath/...; and zig cc
# ignores the bare -current_version / -compatibility_version driver flags,
# while it passes the -Wl, forms to its Mach-O linker.
set(CMAKE_SHARED_LIBRARY_RUNTIME_C_FLAG "-Wl,-rpath,")
set(CMAKE_C_OSX_CURRENT_VERSION_FLAG "-Wl,-current_version,")
set(CMAKE_C_OSX_COMPATIBILITY_VERSION_FLAG "-Wl,-compatibility_version,")
