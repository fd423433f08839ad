// SPDX-License-Identifier: MIT
// What the suite's helper processes (the cutter, the daemon mode's
// served process and daemon) do after fork(): system calls only.
#pragma once

#include <cstddef>
#include <vector>

namespace sockbuf::contract
{

// Closes every descriptor from 3 up but @keep (close_range(2), Linux 5.9;
// before it, nothing is closed).
void close_all_but(std::vector<int> keep);

// Writes @n bytes of @p to @fd, through EINTR and short writes; false on
// an error or a write of 0.
bool write_all(int fd, const void *p, size_t n);

} // namespace sockbuf::contract
