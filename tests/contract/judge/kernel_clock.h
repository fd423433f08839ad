// SPDX-License-Identifier: MIT
// The dip judge on the kernel's clock: BPF programs of the suite's own
// (judge/floor_judge.bpf.c) that timestamp each moment a watched
// socket's buffer is left below its floor and each moment it is back at
// or above, at the exits of the kernel functions that change or read it.
// C3 (library) reads each dip's length from these times instead of from
// samples, which cannot see a dip shorter than their gaps.
//
// Loaded once per run (vmlinux BTF and the verifier take about a second
// under qemu TCG) and reused by every scenario.  Where the programs cannot
// load (no BTF, no fexit, no CAP_BPF/CAP_PERFMON, a build without libbpf)
// available() is false and why() says why: the suite then judges dips by
// its samples, as upper bounds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sockbuf::contract
{

// One dip as the programs posted it, on the kernel's clock
// (CLOCK_MONOTONIC, as now_ns()).
struct clock_record {
	uint32_t ino = 0;
	int dir = 0;	   // 0 send, 1 receive
	int start_fn = -1; // ids: positions in functions()
	int end_fn = -1;   // -1: still open when the scenario ended
	int64_t start_ns = 0, end_ns = 0;
};

class kernel_clock
{
public:
	// The process's one judge, loaded on the first call.
	static kernel_clock &get();
	~kernel_clock();
	kernel_clock(const kernel_clock &) = delete;
	kernel_clock &operator=(const kernel_clock &) = delete;

	bool available() const { return err_ == 0; }
	const std::string &why() const { return why_; }
	// The kernel functions attached, by id ("" where that program has
	// no function in this kernel); ids 0-3 are where cuts are made (the
	// guard's four), the rest around them (floor_judge.bpf.c).
	const std::vector<std::string> &functions() const { return functions_; }

	// Starts a scenario: forgets every watched socket and dip, watches
	// @inos with their floors (kernel unit, 0: that direction is not
	// judged).  -errno where the map refused one.
	struct watch_spec {
		uint32_t ino;
		int floor_snd, floor_rcv;
	};
	int begin(const std::vector<watch_spec> &sockets);
	// Ends it: freezes the programs, then gives the dips closed so far
	// and those still open (end_fn -1, ending at @open_end_ns: when the
	// guards stopped), how many the ring lost, and how many runs of the
	// programs the kernel skipped (recursion on one CPU).
	std::vector<clock_record> end(int64_t open_end_ns, uint64_t *lost, uint64_t *skipped);
	// The programs' runs the kernel skipped so far, all programs together
	// (bpf_prog_info's recursion_misses; the kernel counts them per
	// program, not per socket): read once a sampling cycle, it says when
	// they were skipped (judge/cycle_watch.h).  0 without the programs.
	uint64_t skipped_now() const;

	struct state; // libbpf's objects, where built with it

private:
	kernel_clock();
	void load();
	int err_ = -1;
	std::string why_;
	std::vector<std::string> functions_;
	std::unique_ptr<state> st_;
};

} // namespace sockbuf::contract
