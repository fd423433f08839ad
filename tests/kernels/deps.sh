#!/bin/sh
# Packages the kernel matrix needs on the machine that runs it (CI calls
# this before tests/kernels/run-matrix --quick).  Debian packages only.
set -e
export DEBIAN_FRONTEND=noninteractive
# dwarves: pahole, which building kmod-proposal's module against 6.12
# headers needs (BTF); run-matrix --kmod.
apt-get update -q
apt-get install -y -q --no-install-recommends \
	qemu-system-x86 busybox-static cpio xz-utils zstd kmod iproute2 \
	dpkg apt debian-archive-keyring python3 gzip dwarves
