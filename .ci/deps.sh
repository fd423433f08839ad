#!/usr/bin/env bash
# Installs every Debian package the build and the tests use, and nothing
# when they are all present already.  Needs root (apt-get).
set -euo pipefail

packages=(
	# build
	build-essential cmake ninja-build pkg-config git
	libcap-ng-dev libfmt-dev nlohmann-json3-dev libbpf-dev
	# sockbufd: its metrics and systemd readiness
	prometheus-cpp-dev libsystemd-dev systemd
	libgtest-dev libgmock-dev googletest libbenchmark-dev
	# sanitizers, fuzzing, lint
	clang clang-tidy clang-format libclang-rt-14-dev
	# tests: namespaces, veth, tc, real programs, capabilities
	iproute2 iptables iperf3 python3 python3-yaml procps kmod libcap-ng-utils
	# sockbufd's metrics checked with the Prometheus text parser
	python3-prometheus-client
	# the system calls a trapped setsockopt costs (tests/shim/syscall_budget.py)
	strace
	# sockbuf run --via seccomp: a Go server built at test time (static, cgo)
	golang-go
	# pre-fork workers and the shim's floors (tests/shim/nginx_workers.py)
	nginx-light
	# lab: NFQUEUE delay line, plots
	libnetfilter-queue-dev python3-matplotlib
	# RPC frameworks the examples size (docs/frameworks.md): ONC RPC
	# (libtirpc, rpcgen) and Boost.Asio
	libtirpc-dev rpcsvc-proto libboost-dev
	# Debian packages: checked with lintian, installed into a debootstrap root
	lintian debootstrap dpkg-dev file
	# kmod-proposal/check.sh: checkpatch's SPDX check and --codespell
	# (kmod-proposal fetches its kernel source bases, linux-source-7.2
	# and linux-source-6.12, itself)
	python3-ply codespell
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
if ((${#missing[@]})); then
	if [[ $(id -u) != 0 ]]; then
		echo "deps: missing packages (${missing[*]}): run as root to install them" >&2
		exit 1
	fi
	echo "deps: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# Install servers (nginx) without starting their system services: the
	# tests run their own instances in network namespaces.
	rcd=/usr/sbin/policy-rc.d
	if [[ ! -e $rcd ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$rcd"
		chmod +x "$rcd"
		trap 'rm -f "$rcd"' EXIT
	fi
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
