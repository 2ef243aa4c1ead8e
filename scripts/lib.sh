# shellcheck shell=bash
# Shared by scripts/setup, test, run-bench and gpu-check (sourced, not run).
# Finds the tools the build needs; installs nothing.

# The repository root.
TALLY_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The project needs CMake 3.25 (Debian 12's); scripts/setup puts one from
# PyPI here only when the system's is older.
TALLY_TOOLS_DIR="$TALLY_ROOT/build-tools"
TALLY_MIN_CMAKE=3.25

# Prints the version of the cmake at $1 (e.g. 3.25.1), or nothing.
cmake_version() { "$1" --version 2>/dev/null | sed -n 's/^cmake version \([0-9.]*\).*/\1/p'; }

# True when version $1 >= version $2.
version_at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]; }

# Sets CMAKE and CTEST to a cmake new enough for the project, or returns 1.
find_cmake() {
  local candidate
  for candidate in "$(command -v cmake 2>/dev/null)" "$TALLY_TOOLS_DIR/cmake-venv/bin/cmake"; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    if version_at_least "$(cmake_version "$candidate")" "$TALLY_MIN_CMAKE"; then
      CMAKE=$candidate
      CTEST=$(dirname "$candidate")/ctest
      [ -x "$CTEST" ] || CTEST=ctest
      return 0
    fi
  done
  return 1
}

# Puts nvcc on PATH (and in CUDACXX) when it is installed in the usual place.
find_cuda() {
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  command -v nvcc >/dev/null 2>&1 || return 1
  export CUDACXX=${CUDACXX:-$(command -v nvcc)}
}

# The build's device and optimisation settings for `test` or `bench` (sets
# archs, check_only, host_release, batch and the CMake definitions
# device_flags). With a GPU (or TALLY_CUDA_ARCHITECTURES set): the full
# Release build for it, the same for both. Without one no device code can
# run, so it is compiled to PTX only (unoptimised) and each target's sources
# in batches (cmake/batch_sources.cmake); host code at -O1 for `test` (the
# CPU tests run the same code in a third of CI's build time) but at -O3 for
# `bench`, whose CPU rows are the measurement.
build_settings() {
  host_release="-O3 -DNDEBUG"
  batch=OFF
  if [ -n "${TALLY_CUDA_ARCHITECTURES:-}" ]; then
    archs=$TALLY_CUDA_ARCHITECTURES check_only=OFF
  elif nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    archs=90 check_only=OFF
  else
    archs=90-virtual check_only=ON batch=ON
    [ "$1" = test ] && host_release="-O1 -DNDEBUG"
  fi
  device_flags=(-DCMAKE_CUDA_ARCHITECTURES="$archs" -DTALLY_DEVICE_CODE_CHECK_ONLY=$check_only
    -DCMAKE_CXX_FLAGS_RELEASE="$host_release" -DCMAKE_CUDA_FLAGS_RELEASE="$host_release"
    -DTALLY_BATCH_SOURCES=$batch)
}

# Parallel build jobs: one per core.
build_jobs() { nproc 2>/dev/null || echo 2; }

# scripts/gpu-ab builds branches' versions of files in a build directory and
# lists those files in <build>/gpu-ab-swapped. The lent machine copies the
# tree with the times the files have here, older than the objects built from
# a branch, so a later build would keep those objects: this touches the
# listed files (a rebuild of what depends on them) and drops the list.
touch_swapped() {
  local list="$1/gpu-ab-swapped" file
  [ -f "$list" ] || return 0
  while IFS= read -r file; do
    [ -e "$file" ] && touch "$file"
  done <"$list"
  rm -f "$list"
}
