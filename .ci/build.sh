#!/usr/bin/env bash
# build.sh DIR [cmake options...]: configure and build the project in DIR.
set -euo pipefail
dir=$1
shift
top=$(cd "$(dirname "$0")/.." && pwd)
cmake -S "$top" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
