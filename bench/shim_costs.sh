#!/usr/bin/env bash
# What one setsockopt(SO_RCVBUF) costs under `sockbuf run`, side by side
# (docs/performance.md, "sockbuf run: the preload shim against the seccomp
# supervisor"): ROUNDS rounds, each running in turn bench_shim plain and
# shimmed, the same under the seccomp supervisor, the bare round trip of a
# trapped call, and optionally a second build's shim and supervisor (the
# code before a change).  Run it with nothing else on the machine; the
# load average is printed around each round.
#
#   bench/shim_costs.sh BUILD_DIR [OLD_BUILD_DIR] [ROUNDS]
set -euo pipefail
new=${1:?usage: bench/shim_costs.sh BUILD_DIR [OLD_BUILD_DIR] [ROUNDS]}
old=${2:-}
rounds=${3:-3}
args=(--benchmark_repetitions=5 --benchmark_report_aggregates_only=true
	--benchmark_min_time=0.2)
for b in "$new" ${old:+"$old"}; do
	[[ -x $b/bin/bench_shim && -x $b/bin/sockbuf ]] ||
		{ echo "shim_costs: $b has no bin/bench_shim or bin/sockbuf" >&2; exit 2; }
done
medians() { grep median | sed "s/^/$1 /"; }
for ((r = 1; r <= rounds; r++)); do
	echo "== round $r of $rounds, load $(cut -d' ' -f1-3 /proc/loadavg)"
	"$new/bin/bench_shim" "${args[@]}" 2>&1 | medians new
	"$new/bin/sockbuf" run -q --via seccomp -- "$new/bin/bench_shim" \
		--benchmark_filter=plain "${args[@]}" 2>&1 | medians new-supervised
	if [[ -n $old ]]; then
		"$old/bin/bench_shim" --benchmark_filter=setsockopt_shim "${args[@]}" 2>&1 |
			medians old
		"$old/bin/sockbuf" run -q --via seccomp -- "$old/bin/bench_shim" \
			--benchmark_filter=setsockopt_plain "${args[@]}" 2>&1 | medians old-supervised
	fi
	if [[ -x $new/bin/sockbuf_notif_round_trip ]]; then
		"$new/bin/sockbuf_notif_round_trip" 200000 5
	fi
done
echo "== end, load $(cut -d' ' -f1-3 /proc/loadavg)"
