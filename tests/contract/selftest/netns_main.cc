// SPDX-License-Identifier: MIT
// main() of the selftests whose tests share one fresh network namespace
// (unprivileged: inside a new user namespace), entered before gtest starts
// any thread; exit 77 (a ctest skip) with the reason where none can be made.
#include "netns.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

int main(int argc, char **argv)
{
	testing::InitGoogleTest(&argc, argv);
	using namespace sockbuf::contract;
	if (geteuid() != 0 && enter_user_netns() < 0) {
		std::fprintf(stderr, "skip: not root and no user namespace\n");
		return 77;
	}
	std::string what;
	if (int err = enter_fresh_netns(&what); err < 0) {
		std::fprintf(stderr, "skip: no network namespace (%s: %s)\n", what.c_str(),
			     std::strerror(-err));
		return 77;
	}
	return RUN_ALL_TESTS();
}
