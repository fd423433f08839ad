#!/usr/bin/env bash
# Regenerates every document that is made from code or from committed
# results, so that none can go stale:
#   docs/results/perf/syscall_sequences.md  the syscalls each call makes, per
#                                           kernel feature set (and the same
#                                           table inside docs/performance.md)
#   docs/kernel-matrix.md                   from docs/results/kernels/*.json
# usage: docs/generate.sh BUILD_DIR   (a build that has bin/sockbuf_syscall_sequences)
# CI runs it on a clean checkout and fails when `git diff` then shows a change.
set -euo pipefail
build=${1:?usage: docs/generate.sh BUILD_DIR}
top=$(cd "$(dirname "$0")/.." && pwd)
seq_bin=$build/bin/sockbuf_syscall_sequences
[[ -x $seq_bin ]] || { echo "generate: $seq_bin not built (configure with SOCKBUF_BUILD_BENCH=ON)" >&2; exit 2; }

table=$top/docs/results/perf/syscall_sequences.md
"$seq_bin" >"$table.tmp"
mv "$table.tmp" "$table"

# The copy in performance.md sits between two marker lines.
python3 - "$top/docs/performance.md" "$table" <<'PY'
import sys
doc, table = sys.argv[1], sys.argv[2]
begin = "<!-- generated from docs/results/perf/syscall_sequences.md by docs/generate.sh -->"
end = "<!-- end of generated table -->"
text = open(doc).read()
if begin not in text or end not in text:
    sys.exit("generate: %s lacks the markers around the syscall table" % doc)
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(doc, "w").write(head + begin + "\n" + open(table).read() + end + tail)
PY

python3 "$top/tests/kernels/render.py" "$top/docs/results/kernels" -o "$top/docs/kernel-matrix.md"
echo "generate: syscall_sequences.md, performance.md table, kernel-matrix.md"
