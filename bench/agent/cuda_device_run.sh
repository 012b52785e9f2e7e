#!/usr/bin/env bash
# The one command a borrowed GPU machine runs, from the repository root, to build convoy's learner against the
# machine's CUDA LibTorch (pip's torch), run its tests there and measure it (docs/testing.md, "The learner
# alone on a GPU machine"). Such a machine has python3 with torch, CMake, Ninja, nvcc and a gcc, but no Abseil,
# glog, Catch2 or OpenSSL headers and no network, and its time is short: everything it needs beyond that comes
# from bench/agent/cuda_device_prepare.sh's output, carried with the tree, and every step is bounded so that the
# whole run fits CONVOY_DEVICE_BUDGET_S. A step that fails is recorded and the next one still runs: one run
# should bring back as much as it can.
#
#   1. $OUT/env.txt: the GPU, the OS, glibc, the compilers, CMake, torch and its C++ string ABI.
#   2. Abseil, glog, Catch2 and libcrypto in a prefix: Debian 12's packages, unpacked, when a probe program built
#      with torch's string ABI links and runs against them; otherwise Abseil and glog built from the carried
#      sources with that ABI (glibc older than Debian 12's, or a torch built with the old ABI), with libcrypto
#      from the packages or, failing that, the machine's own.
#   3. The learner-only build (CONVOY_LEARNER_ONLY: no gRPC) with Ninja; $OUT/build.log.
#   4. Its tests with CTest ($OUT/ctest.log, ctest_junit.xml). With a GPU present, the CUDA test cases must run:
#      one that reports Skipped there is a failure.
#   5. convoy_bench_learner on cuda (AMP off and on) and the CPU, batch 32 and 256, against the PyTorch twin run
#      by the same python; nvidia-smi samples the GPU beside it ($OUT/bench_learner.txt, nvidia_smi.csv).
#   6. $OUT/summary.txt: each step's outcome and time; the exit status is 1 if any step failed.
#
# Environment:
#   OUT                       where the results go (required)
#   PYTHON                    the python whose torch to build against (python3)
#   CONVOY_DEVICE_DEPS        cuda_device_prepare.sh's output (build-device)
#   CONVOY_DEVICE_BUILD       the build tree (build-cuda)
#   CONVOY_DEVICE_BUDGET_S    seconds for the whole run (480); each step gets at most what is left
#   CONVOY_DEVICE_FORCE_SOURCE_BUILD=1   build Abseil and glog from source even where the packages work
#   CONVOY_DEVICE_JOBS        parallel jobs and the CPU rows' thread count (nproc)
#   CONVOY_DEVICE_CAP_SCALE   multiplies each step's own time limit (1; sized for 16 cores): more on a
#                             smaller machine, as when this script is tried on a CPU-only one
#   CONVOY_DEVICE_BENCH_MODELS, _SECONDS, _REPEATS, _CAP_S   the benchmark's models (compact,cookbook), seconds
#                             per timing (1), timings per side (2) and seconds per table (150; the PyTorch
#                             twin's start, about 10 s with CUDA, is in each row)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
: "${OUT:?OUT must name the directory the results go to}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
PYTHON="${PYTHON:-python3}"
DEPS="${CONVOY_DEVICE_DEPS:-$REPO/build-device}"
BUILD="${CONVOY_DEVICE_BUILD:-$REPO/build-cuda}"
BUDGET_S="${CONVOY_DEVICE_BUDGET_S:-480}"
FORCE_SOURCE="${CONVOY_DEVICE_FORCE_SOURCE_BUILD:-0}"
JOBS="${CONVOY_DEVICE_JOBS:-$(nproc)}"
CAP_SCALE="${CONVOY_DEVICE_CAP_SCALE:-1}"
BENCH_MODELS="${CONVOY_DEVICE_BENCH_MODELS:-compact,cookbook}"
BENCH_SECONDS="${CONVOY_DEVICE_BENCH_SECONDS:-1}"
BENCH_REPEATS="${CONVOY_DEVICE_BENCH_REPEATS:-2}"
BENCH_CAP_S="${CONVOY_DEVICE_BENCH_CAP_S:-150}"
# Kept back from every step for what follows the last one (the summary).
RESERVE_S=10
# Debian's multiarch directory: where the packages keep their libraries, CMake files and some headers.
ARCH=x86_64-linux-gnu
DEB_PREFIX="$BUILD/deps/debian"
DEB_LIB="$DEB_PREFIX/usr/lib/$ARCH"
SRC_PREFIX="$BUILD/deps/source"
CONVOY_BUILD="$BUILD/convoy"
# Abseil 20220623's headers use uint8_t without <cstdint>, which GCC 13's libstdc++ no longer brings in.
CXX_EXTRA_FLAGS="-include cstdint"
# --as-needed: a binary needs only the libraries it calls, so the CUDA runtime is the one torch's own libraries
# find (pip's), not the toolkit's linked beside them (LibTorch's CMake files keep torch_cuda needed themselves).
# --disable-new-dtags: the run path applies to the packages' libraries' own dependencies (glog's gflags and
# libunwind), which a RUNPATH would not reach, so nothing needs LD_LIBRARY_PATH.
LINKER_FLAGS="-Wl,--as-needed -Wl,--disable-new-dtags"

START_S=$SECONDS
mkdir -p "$BUILD"
exec > >(tee -a "$OUT/run.log") 2>&1

STEPS=()
FAILURES=()
note() { printf '[%3ds] %s\n' "$((SECONDS - START_S))" "$*"; }
left_s() { echo $((BUDGET_S - (SECONDS - START_S) - RESERVE_S)); }

# bounded CAP COMMAND...: COMMAND for at most CAP (times CAP_SCALE) seconds, or what is left of the budget if
# that is less.
bounded() {
  local cap=$(($1 * CAP_SCALE)) left
  shift
  left=$(left_s)
  if [ "$left" -lt "$cap" ]; then cap=$left; fi
  if [ "$cap" -lt 5 ]; then
    note "no time left for: $*"
    return 124
  fi
  timeout --kill-after=10 "$cap" "$@"
}

# step NAME FUNCTION [ARGS...]: one step, timed and recorded; its failure does not stop the run. The functions
# below check each command themselves (errexit does not hold inside a function called here).
step() {
  local name=$1 t0=$SECONDS rc=0 how
  shift
  note "$name: start"
  "$@" || rc=$?
  if [ "$rc" -eq 0 ]; then
    how="ok"
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    how="FAILED: out of time (exit $rc)"
  else
    how="FAILED (exit $rc)"
  fi
  note "$name: $how after $((SECONDS - t0)) s"
  STEPS+=("$(printf '%-28s %-36s %4d s' "$name" "$how" "$((SECONDS - t0))")")
  if [ "$rc" -ne 0 ]; then FAILURES+=("$name"); fi
  return "$rc"
}

summary() {
  {
    echo "cuda_device_run.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ), $((SECONDS - START_S)) s of a ${BUDGET_S} s budget"
    echo "torch ${TORCH_VERSION:-?} (CUDA ${TORCH_CUDA:-?}, C++11 string ABI ${TORCH_ABI:-?}); GPU: ${GPU_NAME:-none}"
    echo "dependencies: ${DEPS_KIND:-none}"
    printf '%s\n' "${STEPS[@]}"
    if [ "${#FAILURES[@]}" -eq 0 ]; then echo "all steps ok"; else echo "failed: ${FAILURES[*]}"; fi
  } | tee "$OUT/summary.txt"
}

SMI_PID=""
finish() {
  if [ -n "$SMI_PID" ]; then kill "$SMI_PID" 2>/dev/null || true; fi
}
trap finish EXIT

# --- 1. The machine --------------------------------------------------------------------------------------------
section() { printf '\n== %s\n' "$1"; }
collect_env() {
  {
    section "date"; date -u
    section "nvidia-smi"; timeout 30 nvidia-smi || echo "(nvidia-smi: exit $?)"
    section "nvidia-smi -L"; timeout 30 nvidia-smi -L || true
    section "os-release"; cat /etc/os-release || true
    section "uname -a"; uname -a
    section "glibc (ldd --version)"; ldd --version 2>&1 | head -n 1 || true
    section "gcc"; gcc --version 2>&1 | head -n 1 || true; g++ --version 2>&1 | head -n 1 || true
    section "cmake"; cmake --version 2>&1 | head -n 1 || true
    section "ninja"; ninja --version 2>&1 || true
    section "nvcc"; "${NVCC:-nvcc}" --version 2>&1 || true
    section "cpus and memory"; nproc; free -g 2>&1 || true
    section "tools"; for t in dpkg ar tar xz gzip readelf ldconfig; do echo "$t: $(command -v "$t" || echo missing)"; done
    section "python and torch ($PYTHON)"
    timeout 120 "$PYTHON" -c 'import sys, torch
print("python", sys.version.split()[0])
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
print("compiled_with_cxx11_abi", torch.compiled_with_cxx11_abi())
print("cuda available", torch.cuda.is_available(), "devices", torch.cuda.device_count())
print("cmake_prefix_path", torch.utils.cmake_prefix_path)' 2>&1 || echo "(python or torch failed)"
    section "environment"; env | grep -E '^(PATH|LD_LIBRARY_PATH|CUDA_[A-Z_]*|CUDACXX|CC|CXX|TORCH_[A-Z_]*)=' || true
  } >"$OUT/env.txt" 2>&1
}

find_nvcc() {
  NVCC="$(command -v nvcc || true)"
  local candidate
  for candidate in "${CUDA_HOME:-}/bin/nvcc" /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc; do
    if [ -z "$NVCC" ] && [ -x "$candidate" ]; then NVCC="$candidate"; fi
  done
}

# TORCH_VERSION, TORCH_CUDA ("None" without CUDA), TORCH_ABI (0 or 1), TORCH_CMAKE_PREFIX (empty when torch's
# python package has no CMake files, as Debian's python3-torch: CMake then finds libtorch-dev itself).
torch_facts() {
  local facts key value
  facts=$(bounded 120 "$PYTHON" -c 'import os, torch
print("TORCH_VERSION=" + torch.__version__)
print("TORCH_CUDA=" + str(torch.version.cuda))
print("TORCH_ABI=" + str(int(torch.compiled_with_cxx11_abi())))
prefix = torch.utils.cmake_prefix_path
print("TORCH_CMAKE_PREFIX=" + (prefix if os.path.exists(os.path.join(prefix, "Torch", "TorchConfig.cmake")) else ""))
') || return
  while IFS='=' read -r key value; do
    case "$key" in
      TORCH_VERSION) TORCH_VERSION=$value ;;
      TORCH_CUDA) TORCH_CUDA=$value ;;
      TORCH_ABI) TORCH_ABI=$value ;;
      TORCH_CMAKE_PREFIX) TORCH_CMAKE_PREFIX=$value ;;
    esac
  done <<<"$facts"
  note "torch $TORCH_VERSION, CUDA $TORCH_CUDA, _GLIBCXX_USE_CXX11_ABI=$TORCH_ABI, CMake files: ${TORCH_CMAKE_PREFIX:-none (CMake finds LibTorch itself)}"
  [ -n "${TORCH_ABI:-}" ]
}

# --- 2. Abseil, glog, Catch2, libcrypto --------------------------------------------------------------------------
# A .deb is an ar archive whose data.tar.* holds the files; dpkg unpacks it where it is installed, else ar and
# tar, else python's own readers.
unpack_deb() {
  local deb=$1 into=$2 work
  if command -v dpkg >/dev/null; then
    dpkg -x "$deb" "$into"
    return
  fi
  work=$(mktemp -d)
  if command -v ar >/dev/null && (cd "$work" && ar x "$deb" && tar -xf data.tar.* -C "$into"); then
    rm -rf "$work"
    return
  fi
  rm -rf "$work"
  "$PYTHON" - "$deb" "$into" <<'PY'
import io, sys, tarfile
data = open(sys.argv[1], "rb").read()
# The archive is Debian's own: its absolute links are as dpkg would make them.
trusted = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
offset = 8  # "!<arch>\n", then 60-byte member headers, members padded to even lengths.
while offset < len(data):
    name, size = data[offset:offset + 16].decode().strip(), int(data[offset + 48:offset + 58])
    if name.rstrip("/").startswith("data.tar"):
        tarfile.open(fileobj=io.BytesIO(data[offset + 60:offset + 60 + size])).extractall(sys.argv[2], **trusted)
    offset += 60 + size + size % 2
PY
}

unpack_debs() {
  local deb
  rm -rf "$DEB_PREFIX"
  mkdir -p "$DEB_PREFIX"
  for deb in "$DEPS"/debs/*.deb; do
    [ -f "$deb" ] || { note "no packages in $DEPS/debs: run bench/agent/cuda_device_prepare.sh first"; return 1; }
    unpack_deb "$deb" "$DEB_PREFIX" || { note "cannot unpack $deb"; return 1; }
  done
  # OpenSSL's configuration headers live in the multiarch include directory, which only Debian's compilers
  # search: beside the others they are found through OPENSSL_INCLUDE_DIR alone.
  cp -r "$DEB_PREFIX/usr/include/$ARCH/openssl/." "$DEB_PREFIX/usr/include/openssl/"
  # liblzma (libunwind's) is installed under /lib, not /usr/lib: beside the others, the binaries' run path
  # finds it where the machine has none.
  cp -a "$DEB_PREFIX/lib/$ARCH/." "$DEB_LIB/"
}

# The packages' CMake files, found by path: the host need not be Debian (no multiarch search of its own).
debian_dependency_args() {
  DEP_PREFIX="$DEB_PREFIX/usr"
  DEP_ARGS=(
    -DCMAKE_LIBRARY_ARCHITECTURE="$ARCH"
    -Dabsl_DIR="$DEB_LIB/cmake/absl" -Dglog_DIR="$DEB_LIB/cmake/glog" -Dgflags_DIR="$DEB_LIB/cmake/gflags"
    # glog's package file adds /usr/share/glog/cmake for its FindUnwind; here it is under the prefix.
    -DCMAKE_MODULE_PATH="$DEB_PREFIX/usr/share/glog/cmake"
    -DUnwind_INCLUDE_DIR="$DEB_PREFIX/usr/include/$ARCH" -DUnwind_LIBRARY="$DEB_LIB/libunwind.so"
    -DCatch2_DIR="$DEB_PREFIX/usr/lib/cmake/Catch2"
    -DOPENSSL_INCLUDE_DIR="$DEB_PREFIX/usr/include" -DOPENSSL_CRYPTO_LIBRARY="$DEB_LIB/libcrypto.so"
    -DISAL_INCLUDE_DIR="$DEB_PREFIX/usr/include" -DISAL_LIBRARY="$DEB_LIB/libisal.so"
  )
}

source_dependency_args() {
  DEP_PREFIX="$SRC_PREFIX"
  DEP_ARGS=(
    -Dabsl_DIR="$SRC_PREFIX/lib/cmake/absl" -Dglog_DIR="$SRC_PREFIX/lib/cmake/glog"
    -DCatch2_DIR="$DEB_PREFIX/usr/lib/cmake/Catch2"
    -DOPENSSL_INCLUDE_DIR="$DEB_PREFIX/usr/include" -DOPENSSL_CRYPTO_LIBRARY="$CRYPTO_LIBRARY"
    -DISAL_INCLUDE_DIR="$DEB_PREFIX/usr/include" -DISAL_LIBRARY="$DEB_LIB/libisal.so"
  )
}

# A program that uses what convoy uses of each library, in torch's string ABI: a std::string flag (parsed by
# Abseil's out-of-line code), StrCat and StatusOr, glog, and libcrypto's SHA-256. It links only when the ABIs
# agree, and runs only when the machine's glibc is new enough for the libraries.
write_probe() {
  mkdir -p "$BUILD/probe/src"
  cat >"$BUILD/probe/src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(convoy_device_probe CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(absl CONFIG REQUIRED)
find_package(glog CONFIG REQUIRED)
find_package(OpenSSL REQUIRED)
add_executable(probe probe.cc)
target_compile_definitions(probe PRIVATE _GLIBCXX_USE_CXX11_ABI=${TORCH_ABI})
target_link_libraries(probe PRIVATE absl::flags absl::flags_parse absl::strings absl::statusor glog::glog
                      OpenSSL::Crypto)
CMAKE
  cat >"$BUILD/probe/src/probe.cc" <<'CC'
#include <openssl/evp.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

ABSL_FLAG(std::string, word, "probe", "A string flag.");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  const absl::StatusOr<std::string> text = absl::StrCat(absl::GetFlag(FLAGS_word), "-", 42);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(text->data(), text->size(), digest, &length, EVP_sha256(), nullptr);
  LOG(INFO) << "probe: " << *text;
  std::printf("probe ok: %s, SHA-256 of %u bytes\n", text->c_str(), length);
  return length == 32 ? 0 : 1;
}
CC
}

# probe NAME: configures, builds and runs the probe against DEP_PREFIX and DEP_ARGS.
probe() {
  local dir="$BUILD/probe/$1" log="$OUT/probe_$1.log" rc
  rm -rf "$dir"
  if bounded 90 cmake -S "$BUILD/probe/src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DTORCH_ABI="$TORCH_ABI" -DCMAKE_PREFIX_PATH="$DEP_PREFIX" "${DEP_ARGS[@]}" \
    -DCMAKE_CXX_FLAGS="$CXX_EXTRA_FLAGS" -DCMAKE_EXE_LINKER_FLAGS="$LINKER_FLAGS" >"$log" 2>&1 &&
    bounded 90 cmake --build "$dir" >>"$log" 2>&1 &&
    bounded 30 "$dir/probe" --word=convoy >>"$log" 2>&1; then
    tail -n 1 "$log"
  else
    rc=$?
    tail -n 15 "$log"
    return "$rc"
  fi
}

debian_dependencies() {
  unpack_debs || return
  debian_dependency_args
  probe debian
}

# libcrypto for the source build: the package's when a C program built against it runs here, else the
# machine's own (OpenSSL 3, else 1.1: the EVP calls convoy_digest makes are the same in both).
choose_libcrypto() {
  local dir="$BUILD/probe/crypto" library ldconfig
  mkdir -p "$dir"
  printf '%s\n' '#include <openssl/evp.h>' \
    'int main(void) { unsigned char d[EVP_MAX_MD_SIZE]; unsigned int n = 0;' \
    '  return !(EVP_Digest("a", 1, d, &n, EVP_sha256(), 0) && n == 32); }' >"$dir/crypto.c"
  ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
  for library in "$DEB_LIB/libcrypto.so.3" \
    $("$ldconfig" -p 2>/dev/null | awk '/libcrypto\.so\.3 .*x86-64/ {print $NF}') \
    $("$ldconfig" -p 2>/dev/null | awk '/libcrypto\.so\.1\.1 .*x86-64/ {print $NF}'); do
    if gcc -I"$DEB_PREFIX/usr/include" "$dir/crypto.c" "$library" -Wl,-rpath,"$(dirname "$library")" \
      -o "$dir/crypto" >>"$OUT/probe_crypto.log" 2>&1 && "$dir/crypto" >>"$OUT/probe_crypto.log" 2>&1; then
      CRYPTO_LIBRARY=$library
      note "libcrypto: $library"
      return 0
    fi
    note "libcrypto: $library does not work here"
  done
  return 1
}

# Abseil and glog from the carried sources (Debian's, patched), static, in torch's string ABI; glog without
# gflags and libunwind, which it can do without.
build_source_dependencies() {
  local work="$BUILD/deps/source-build" flags="-D_GLIBCXX_USE_CXX11_ABI=$TORCH_ABI $CXX_EXTRA_FLAGS" absl glog
  rm -rf "$work"
  mkdir -p "$work"
  tar -xzf "$(ls "$DEPS"/src/abseil-*.tar.gz)" -C "$work" &&
    tar -xzf "$(ls "$DEPS"/src/google-glog-*.tar.gz)" -C "$work" || return
  absl=$(ls -d "$work"/abseil-*/) glog=$(ls -d "$work"/google-glog-*/)
  local common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DCMAKE_CXX_FLAGS="$flags"
    -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_TESTING=OFF
    -DCMAKE_INSTALL_PREFIX="$SRC_PREFIX" -DCMAKE_INSTALL_LIBDIR=lib)
  local log="$OUT/source_deps.log" rc
  note "building Abseil from $(basename "$absl") and glog from $(basename "$glog") with $JOBS jobs"
  if bounded 240 cmake -S "$absl" -B "$work/absl-build" "${common[@]}" -DABSL_PROPAGATE_CXX_STD=ON \
    -DABSL_BUILD_TESTING=OFF -DABSL_ENABLE_INSTALL=ON >"$log" 2>&1 &&
    bounded 240 cmake --build "$work/absl-build" -j "$JOBS" --target install >>"$log" 2>&1 &&
    bounded 120 cmake -S "$glog" -B "$work/glog-build" "${common[@]}" -DWITH_GFLAGS=OFF -DWITH_UNWIND=OFF \
      -DWITH_GTEST=OFF >>"$log" 2>&1 &&
    bounded 120 cmake --build "$work/glog-build" -j "$JOBS" --target install >>"$log" 2>&1; then
    note "Abseil and glog installed in $SRC_PREFIX"
  else
    rc=$?
    tail -n 20 "$log"
    return "$rc"
  fi
}

source_dependencies() {
  [ -d "$DEB_PREFIX/usr/include/openssl" ] || unpack_debs || return
  rm -rf "$SRC_PREFIX"
  mkdir -p "$SRC_PREFIX/lib"
  choose_libcrypto || return
  # libcrypto beside the static Abseil and glog, so the binaries' run path names no directory of the packages'
  # other libraries.
  cp -L "$CRYPTO_LIBRARY" "$SRC_PREFIX/lib/" || return
  CRYPTO_LIBRARY="$SRC_PREFIX/lib/$(basename "$CRYPTO_LIBRARY")"
  build_source_dependencies || return
  source_dependency_args
  probe source
}

# --- 3. The build ------------------------------------------------------------------------------------------------
cuda_args() {
  CUDA_ARGS=()
  if [ "${TORCH_CUDA:-None}" = None ]; then return 0; fi
  if [ -z "${NVCC:-}" ]; then
    note "torch has CUDA $TORCH_CUDA but no nvcc was found: LibTorch's CMake files need the toolkit"
    return 0
  fi
  local root nvtx candidate
  root=$(cd "$(dirname "$NVCC")/.." && pwd)
  # LibTorch's CMake files look for NVTX 3's headers only in PyTorch's source tree and otherwise want the old
  # nvToolsExt library, which CUDA 12.9 dropped: point them at the toolkit's (or pip's nvidia-nvtx) headers.
  nvtx=""
  for candidate in "$root/include" "$root/targets/x86_64-linux/include" \
    "$("$PYTHON" -c 'import os, nvidia; print(os.path.join(list(nvidia.__path__)[0], "nvtx", "include"))' 2>/dev/null)"; do
    if [ -z "$nvtx" ] && [ -d "$candidate/nvtx3" ]; then nvtx=$candidate; fi
  done
  # LibTorch's CMake files find the toolkit through FindCUDA (nvcc on PATH, CUDA_HOME) and FindCUDAToolkit and
  # stop when the two disagree: both are given this nvcc's. CMake's check of the CUDA compiler builds with the
  # host gcc, which may be newer than this nvcc knows (NVCC_APPEND_FLAGS reaches every nvcc call).
  export PATH="$root/bin:$PATH" CUDA_HOME="$root" CUDACXX="$NVCC"
  export NVCC_APPEND_FLAGS="${NVCC_APPEND_FLAGS:+$NVCC_APPEND_FLAGS }-allow-unsupported-compiler"
  CUDA_ARGS=(-DCMAKE_CUDA_COMPILER="$NVCC" -DCUDA_TOOLKIT_ROOT_DIR="$root" -DCUDAToolkit_ROOT="$root")
  if [ -n "$nvtx" ]; then CUDA_ARGS+=(-Dnvtx3_dir="$nvtx"); fi
  note "CUDA toolkit: $root (nvcc $("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')), NVTX 3 headers: ${nvtx:-none}"
}

copy_cmake_logs() {
  mkdir -p "$OUT/cmake"
  local f
  for f in CMakeCache.txt CMakeFiles/CMakeOutput.log CMakeFiles/CMakeError.log CMakeFiles/CMakeConfigureLog.yaml; do
    if [ -f "$CONVOY_BUILD/$f" ]; then cp "$CONVOY_BUILD/$f" "$OUT/cmake/"; fi
  done
}

configure() {
  local prefix_path="$DEP_PREFIX"
  if [ -n "${TORCH_CMAKE_PREFIX:-}" ]; then prefix_path="$prefix_path;$TORCH_CMAKE_PREFIX"; fi
  # The H200's architecture: LibTorch's CMake files otherwise build and run a program to ask the GPUs.
  TORCH_CUDA_ARCH_LIST=9.0 bounded 180 cmake -S "$REPO" -B "$CONVOY_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCONVOY_LEARNER_ONLY=ON -DCMAKE_PREFIX_PATH="$prefix_path" "${DEP_ARGS[@]}" ${CUDA_ARGS[@]+"${CUDA_ARGS[@]}"} \
    -DCMAKE_CXX_FLAGS="$CXX_EXTRA_FLAGS" -DCMAKE_EXE_LINKER_FLAGS="$LINKER_FLAGS" >"$OUT/configure.log" 2>&1 ||
    { local rc=$?; tail -n 30 "$OUT/configure.log"; copy_cmake_logs; return "$rc"; }
  grep -E '^-- convoy:|CMake Warning' "$OUT/configure.log" || true
}

build() {
  # -k 0: on an error, everything that does not depend on it is still built (the tests, or the benchmark).
  bounded 330 cmake --build "$CONVOY_BUILD" -j "$JOBS" -- -k 0 >"$OUT/build.log" 2>&1 ||
    { local rc=$?; grep -E -A5 'error|FAILED' "$OUT/build.log" | head -n 60; copy_cmake_logs; return "$rc"; }
  tail -n 1 "$OUT/build.log"
  {
    echo "== ldd convoy_bench_learner"
    ldd "$CONVOY_BUILD/bin/convoy_bench_learner"
    echo "== readelf -d convoy_bench_learner (NEEDED, RPATH, RUNPATH)"
    readelf -d "$CONVOY_BUILD/bin/convoy_bench_learner" | grep -E 'NEEDED|RPATH|RUNPATH'
  } >"$OUT/binaries.txt" 2>&1 || true
}

# --- 4. The tests ------------------------------------------------------------------------------------------------
run_tests() {
  local rc=0 skipped
  bounded 150 ctest --test-dir "$CONVOY_BUILD" -j "$JOBS" --timeout 120 --output-on-failure \
    --output-junit "$OUT/ctest_junit.xml" >"$OUT/ctest.log" 2>&1 || rc=$?
  cp "$CONVOY_BUILD/Testing/Temporary/LastTest.log" "$OUT/ctest_last_test.log" 2>/dev/null || true
  grep -E 'tests passed|tests failed|Skipped|\*\*\*Failed|Timeout' "$OUT/ctest.log" || true
  if [ -n "${GPU_NAME:-}" ]; then
    skipped=$(grep -E 'On CUDA.*(Skipped|Not Run)' "$OUT/ctest.log" || true)
    if [ -n "$skipped" ]; then
      note "a GPU is present, yet CUDA test cases skipped:"
      echo "$skipped"
      [ "$rc" -ne 0 ] || rc=3
    fi
    note "CUDA test cases passed: $(grep -cE 'On CUDA.*Passed' "$OUT/ctest.log" || true)"
  fi
  return "$rc"
}

# --- 5. The benchmark --------------------------------------------------------------------------------------------
# bench BATCH CAP THREADS WARMUP: one table; CUDA's rows first, so a run cut short by the budget loses CPU rows.
bench() {
  local batch=$1 cap=$2 threads=$3 warmup=$4 rc=0
  # shellcheck disable=SC2054  # The commas separate a flag's values.
  local command=("$CONVOY_BUILD/bin/convoy_bench_learner" --models="$BENCH_MODELS" --devices=cuda,cpu
    --amp=off,on --threads="$threads" --batch_size="$batch" --seconds="$BENCH_SECONDS"
    --repeats="$BENCH_REPEATS" --warmup_steps="$warmup" --python="$PYTHON")
  {
    echo
    echo "== $(date -u +%H:%M:%S) ${command[*]#"$CONVOY_BUILD/"}"
  } >>"$OUT/bench_learner.txt"
  bounded "$cap" "${command[@]}" >>"$OUT/bench_learner.txt" 2>"$OUT/bench_learner_batch_$batch.err" || rc=$?
  echo "== $(date -u +%H:%M:%S) exit $rc" >>"$OUT/bench_learner.txt"
  sed -n '/^== /,$p' "$OUT/bench_learner.txt" | grep -vE '^RESULT' | tail -n 12
  if [ -n "${GPU_NAME:-}" ] && grep -q '^cuda: skipped' "$OUT/bench_learner.txt"; then
    note "a GPU is present, yet the benchmark's cuda rows were skipped"
    [ "$rc" -ne 0 ] || rc=3
  fi
  return "$rc"
}

start_gpu_sampling() {
  [ -n "${GPU_NAME:-}" ] || return 0
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,memory.total,power.draw --format=csv -l 1 \
    >"$OUT/nvidia_smi.csv" 2>&1 &
  SMI_PID=$!
}

# --- The run -----------------------------------------------------------------------------------------------------
note "cuda_device_run.sh in $REPO: results in $OUT, build in $BUILD, dependencies from $DEPS, budget ${BUDGET_S} s"
find_nvcc
step "environment" collect_env || true
GPU_NAME=$(timeout 30 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || true)
note "GPU: ${GPU_NAME:-none (nvidia-smi lists none): the CUDA rows and test cases will say so}"
if ! step "torch" torch_facts; then
  note "no usable torch in $PYTHON: nothing to build against"
  summary
  exit 1
fi
cuda_args
write_probe
DEPS_KIND=""
if [ "$FORCE_SOURCE" = 1 ]; then
  note "CONVOY_DEVICE_FORCE_SOURCE_BUILD=1: Abseil and glog are built from source, the packages not tried"
fi
if [ "$FORCE_SOURCE" != 1 ] && step "dependencies (packages)" debian_dependencies; then
  DEPS_KIND="Debian 12 packages"
elif step "dependencies (source)" source_dependencies; then
  DEPS_KIND="built from source (Abseil, glog), libcrypto $CRYPTO_LIBRARY"
  # The packages' failure, if they were tried, is what the source build is for: not the run's.
  if [ "$FORCE_SOURCE" != 1 ]; then
    unset 'FAILURES[-1]'
    STEPS[-2]="${STEPS[-2]}  (the source build stood in)"
  fi
else
  DEPS_KIND="none working; the build is tried with the packages"
  debian_dependency_args
fi
if step "configure" configure; then
  step "build" build || true
  if [ -x "$CONVOY_BUILD/bin/learner_tests" ]; then step "tests" run_tests || true; fi
  if [ -x "$CONVOY_BUILD/bin/convoy_bench_learner" ]; then
    start_gpu_sampling
    step "bench batch 32" bench 32 "$BENCH_CAP_S" "$JOBS" 5 || true
    step "bench batch 256" bench 256 "$BENCH_CAP_S" "$JOBS" 3 || true
  fi
fi
summary
[ "${#FAILURES[@]}" -eq 0 ]
