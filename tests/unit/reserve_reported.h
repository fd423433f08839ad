// SPDX-License-Identifier: MIT
// What a report must say of an attempted reservation (SOCKBUF_F_RESERVE_MEM)
// on this kernel, for the tests that ask for one on whatever kernel runs
// them.
#pragma once

#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <cerrno>

namespace sockbuf::test
{

// SOCKBUF_R_RESERVED where the probe @p found SO_RESERVE_MEM usable;
// otherwise SOCKBUF_R_RESERVE_FAILED with -EOPNOTSUPP where the kernel knows
// the option but cannot use it (no memcg socket accounting), -ENOPROTOOPT
// where it does not know it.  For EXPECT_TRUE, which then names the caller.
inline testing::AssertionResult reserve_reported(const struct sockbuf_probe_info &p,
						 const struct sockbuf_report &rep)
{
	if (p.features & SOCKBUF_FEAT_RESERVE_MEM) {
		if (rep.flags & SOCKBUF_R_RESERVED)
			return testing::AssertionSuccess();
		return testing::AssertionFailure() << "SO_RESERVE_MEM usable, but not reserved";
	}
	const int err = (p.known & SOCKBUF_FEAT_RESERVE_MEM) ? -EOPNOTSUPP : -ENOPROTOOPT;
	if (!(rep.flags & SOCKBUF_R_RESERVE_FAILED))
		return testing::AssertionFailure()
		       << "SO_RESERVE_MEM unusable, but no RESERVE_FAILED";
	if (rep.reserve_err != err)
		return testing::AssertionFailure()
		       << "reserve_err " << rep.reserve_err << ", expected " << err;
	return testing::AssertionSuccess();
}

} // namespace sockbuf::test
