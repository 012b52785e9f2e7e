#!/usr/bin/env bash
# Builds convoy's libFuzzer targets with clang (convoy configured with CONVOY_SANITIZE=fuzzer, only the
# targets and the libraries they link built) and runs each for a bounded time over its seed corpus. Fails when a target crashes, leaks, hangs or breaks an invariant;
# the input that did it is kept under <build>/artifacts/<target>/. Exit 77 (CTest: skipped) when clang
# or its libFuzzer runtime is missing.
#
#   run_fuzzers.sh --source <convoy checkout> --build <dir> [--cxx clang++] [--cc clang]
#                  [--seconds 20] [target...]
#
# Inputs the fuzzers find are kept in <build>/corpus/<target>/, so later runs start from them; the
# committed seeds in tests/fuzz/corpus/ are only read.
set -euo pipefail

source_dir=""
build_dir=""
cxx="clang++"
cc="clang"
seconds=20
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --source) source_dir="$2"; shift 2 ;;
    --build) build_dir="$2"; shift 2 ;;
    --cxx) cxx="$2"; shift 2 ;;
    --cc) cc="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    -*) echo "run_fuzzers.sh: unknown flag $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ -n "$source_dir" ] && [ -n "$build_dir" ] || { sed -n '2,12p' "$0" >&2; exit 2; }
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_push_assembler fuzz_airsim_rpc fuzz_checkpoint_manifest fuzz_tensor_chunk)
fuzz_src="$source_dir/tests/fuzz"
jobs="${CONVOY_JOBS:-$(nproc)}"

log() { printf 'run_fuzzers: %s\n' "$*"; }

# The system's Abseil is not built with ASan, but its headers poison a hash table's empty slots when they see
# ASan, and its out-of-line insert does not unpoison them: ASan would report convoy's own inserts as
# use-after-poison. Manual poisoning off; ASan's own checks stay. A caller's ASAN_OPTIONS come after.
export ASAN_OPTIONS="allow_user_poisoning=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"

if ! command -v "$cxx" >/dev/null 2>&1 || ! command -v "$cc" >/dev/null 2>&1; then
  log "SKIPPED: no clang ('$cxx'); install the clang-N and libclang-rt-N-dev of ./convoy's package table"
  exit 77
fi
mkdir -p "$build_dir"
# A build directory configured from another source (an older checkout's tests/fuzz project) starts afresh;
# the corpus it found stays.
if [ -f "$build_dir/CMakeCache.txt" ] &&
   ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$(cd "$source_dir" && pwd)" "$build_dir/CMakeCache.txt"; then
  log "$build_dir was configured from another source: configuring again"
  rm -rf "$build_dir/CMakeCache.txt" "$build_dir/CMakeFiles"
fi
# So does one configured with another compiler (another clang was named since).
cached_cxx="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)"
if [ -n "$cached_cxx" ] && [ "$(command -v "$cached_cxx" || true)" != "$(command -v "$cxx")" ]; then
  log "$build_dir was configured with another compiler than $cxx: configuring again"
  rm -rf "$build_dir/CMakeCache.txt" "$build_dir/CMakeFiles"
fi
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  probe="$build_dir/libfuzzer_probe"
  if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
      "$cxx" -fsanitize=fuzzer,address,undefined -x c++ - -o "$probe" >/dev/null 2>&1; then
    log "SKIPPED: $cxx cannot link -fsanitize=fuzzer,address,undefined; install its libclang-rt-N-dev"
    exit 77
  fi
  rm -f "$probe"
  log "configuring $build_dir"
  cmake -S "$source_dir" -B "$build_dir" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCONVOY_SANITIZE=fuzzer -DCONVOY_WERROR=ON >/dev/null
else
  cmake "$build_dir" >/dev/null  # Again, so a target added since the last configure is known to make.
fi
start=$SECONDS
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"
log "build: $((SECONDS - start)) s"

failed=()
for t in "${targets[@]}"; do
  corpus="$build_dir/corpus/$t"
  artifacts="$build_dir/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  args=(-max_total_time="$seconds" -rss_limit_mb=4096 -timeout=60 -print_final_stats=1
        -artifact_prefix="$artifacts/")
  [ -f "$fuzz_src/$t.dict" ] && args+=(-dict="$fuzz_src/$t.dict")
  logfile="$build_dir/$t.log"
  log "$t: ${seconds} s"
  if "$build_dir/bin/$t" "${args[@]}" "$corpus" "$fuzz_src/corpus/$t" >"$logfile" 2>&1; then
    grep -E '^stat::(number_of_executed_units|peak_rss_mb)|^#[0-9]+.*DONE' "$logfile" | sed "s/^/  /" || true
  else
    log "$t FAILED; its log ($logfile) ends:"
    tail -n 60 "$logfile"
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  log "failed: ${failed[*]} (inputs under $build_dir/artifacts/)"
  exit 1
fi
log "all ${#targets[@]} fuzz targets ran ${seconds} s each without a finding"
