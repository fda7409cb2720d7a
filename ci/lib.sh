# Shared by ci/test and ci/demo (sourced, not run): installing what a build
# needs on a fresh machine.
#
#   as_root CMD...          runs CMD as root (directly, or through sudo)
#   apt_install PKG...      installs the Debian packages not installed yet
#   install_build_deps      what building pprt needs (library, preload, pprt
#                           command); on macOS and FreeBSD prints the packages
#   install_test_deps       that, plus what the tests use: cmocka, libunwind,
#                           xz (a real program whose worker threads block
#                           every signal), go (go tool pprof, Go's
#                           runtime/pprof profiles) and chromium (the flame
#                           graph test)
#
# Debian/Ubuntu only install; elsewhere they print what to install and
# return 0, leaving the build to say what is missing.

ci_os=$(uname -s)

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi
}

apt_updated=0
apt_install() { # apt_install PKG... : installs those not installed yet
  local missing=()
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}"
  if [ $apt_updated = 0 ]; then
    # A mirror mid-sync fails one index; the others may still have it all.
    as_root apt-get update -qq || echo "warning: apt-get update reported errors; trying anyway"
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

# libmicrohttpd-dev: the HTTP endpoint; libdw-dev: elfutils' libdw, the
# other source-lines reader (PPRT_SYMBOLIZER=libdw) and the reference the
# tests hold pprt's own DWARF reader to (both optional; the library builds
# with zlib and protobuf-c alone).
build_packages=(cmake make gcc libc6-dev binutils file pkg-config zlib1g-dev libprotobuf-c-dev
                libmicrohttpd-dev libdw-dev)
# g++: the C++ demangling test; dwz: the source-lines test's debug file
# whose shared DIEs live in an alternate file.
test_packages=(protobuf-c-compiler libcmocka-dev libunwind-dev xz-utils g++ dwz)

install_build_deps() {
  case $ci_os in
  Linux)
    if command -v apt-get >/dev/null; then
      apt_install "${build_packages[@]}" || { echo "apt-get install failed"; return 1; }
    else
      echo "not Debian/Ubuntu: install cmake, a C compiler, pkg-config, zlib and protobuf-c" \
           "development packages (and libmicrohttpd's, for the HTTP endpoint) with your package" \
           "manager"
    fi ;;
  Darwin)
    echo "macOS: brew install cmake pkg-config protobuf-c libmicrohttpd" ;;
  FreeBSD)
    echo "FreeBSD: pkg install cmake pkgconf protobuf-c libmicrohttpd elfutils" ;;
  esac
}

install_test_deps() {
  install_build_deps || return 1
  case $ci_os in
  Linux)
    if command -v apt-get >/dev/null; then
      apt_install "${test_packages[@]}" || { echo "apt-get install failed"; return 1; }
      # go tool pprof is the reference reader the interop tests check against.
      command -v go >/dev/null || apt_install golang-go || echo "golang-go could not be installed"
      # Headless Chromium renders the flame graph in the pprt command's tests.
      command -v chromium >/dev/null || apt_install chromium ||
        echo "chromium could not be installed (the flame graph test will SKIP)"
    else
      echo "also for the tests: cmocka, libunwind, protobuf-c-compiler, xz, go, chromium, a C++ compiler"
    fi ;;
  Darwin)
    echo "macOS, for the tests: brew install cmocka go" ;;
  FreeBSD)
    echo "FreeBSD, for the tests: pkg install cmocka libunwind go chromium" ;;
  esac
}
