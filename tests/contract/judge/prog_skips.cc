// SPDX-License-Identifier: MIT
#include "prog_skips.h"

#ifdef SOCKBUF_HAVE_BPF
#include <bpf/bpf.h>
#endif

#include <fmt/core.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sockbuf::contract
{

#ifdef SOCKBUF_HAVE_BPF

std::set<uint32_t> bpf_program_ids()
{
	std::set<uint32_t> out;
	uint32_t id = 0;
	// Bounded by the kernel's list: each call returns a larger id.
	while (bpf_prog_get_next_id(id, &id) == 0)
		out.insert(id);
	return out;
}

std::vector<int> open_new_programs(const std::set<uint32_t> &before,
				   const std::set<uint32_t> &after, std::string *why)
{
	std::vector<int> fds;
	for (const uint32_t id : after) {
		if (before.count(id))
			continue;
		const int fd = bpf_prog_get_fd_by_id(id);
		if (fd < 0) {
			*why = fmt::format("program {}: {}", id, std::strerror(errno));
			continue;
		}
		fds.push_back(fd);
	}
	if (fds.empty() && why->empty())
		*why = "no program of the guard's found in the kernel's list";
	return fds;
}

int64_t skipped_runs(std::span<const int> fds)
{
	int64_t n = 0;
	bool any = false;
	for (const int fd : fds) {
		bpf_prog_info info = {};
		uint32_t len = sizeof(info);
		if (fd > 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0) {
			n += int64_t(info.recursion_misses);
			any = true;
		}
	}
	return any ? n : -1;
}

#else

std::set<uint32_t> bpf_program_ids()
{
	return {};
}

std::vector<int> open_new_programs(const std::set<uint32_t> &, const std::set<uint32_t> &,
				   std::string *why)
{
	*why = "built without libbpf";
	return {};
}

int64_t skipped_runs(std::span<const int>)
{
	return -1;
}

#endif

} // namespace sockbuf::contract
