// SPDX-License-Identifier: MIT
// The BPF programs a guard loaded, found by the judge from the kernel's
// list of programs (the ids present before and after the guard was made),
// and the runs of them the kernel skipped (bpf_prog_info's
// recursion_misses, 5.12: a trampoline does not run a program that is
// already running on the same CPU, so the cut that run would have seen
// posts no record).  Read by the judge itself, not asked of the guard.
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace sockbuf::contract
{

// The ids of the BPF programs loaded now (empty without the right to
// list them, or without libbpf).
std::set<uint32_t> bpf_program_ids();

// Opens the programs of @after that @before lacks: their fds (the
// caller closes them), or none with the reason in @why.
std::vector<int> open_new_programs(const std::set<uint32_t> &before,
				   const std::set<uint32_t> &after, std::string *why);

// The runs of the programs @fds (0 or less: none) the kernel skipped so
// far, together; -1 when none could be read.  For the guard's programs
// and the kernel clock's own.
int64_t skipped_runs(std::span<const int> fds);

} // namespace sockbuf::contract
