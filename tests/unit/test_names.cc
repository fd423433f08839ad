// SPDX-License-Identifier: MIT
#include <sockbuf/sockbuf.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

namespace
{

TEST(Names, Strategies)
{
	EXPECT_STREQ(sockbuf_strategy_name(SOCKBUF_STRAT_UNLOCK), "unlock");
	EXPECT_STREQ(sockbuf_strategy_name(SOCKBUF_STRAT_RCVLOWAT), "rcvlowat");
	EXPECT_STREQ(sockbuf_strategy_name(SOCKBUF_STRAT_FORCE_LOCK), "force-lock");
	EXPECT_STREQ(sockbuf_strategy_name(SOCKBUF_STRAT_HELD), "held");
	EXPECT_STREQ(sockbuf_strategy_name(99), "?");
	EXPECT_STREQ(sockbuf_strategy_name(-1), "?");
}

TEST(Names, Features)
{
	EXPECT_STREQ(sockbuf_feature_name(SOCKBUF_FEAT_BUF_LOCK), "SO_BUF_LOCK");
	EXPECT_STREQ(sockbuf_feature_name(SOCKBUF_FEAT_BUF_LOCK | SOCKBUF_FEAT_FORCE), "?");
}

TEST(Names, ClampsJoinedAndTruncatedSafely)
{
	char buf[64];
	uint32_t c = SOCKBUF_CLAMP_MEM_MAX | SOCKBUF_CLAMP_ODD;
	EXPECT_EQ(sockbuf_clamp_names(c, buf, sizeof(buf)), (int)std::strlen("mem_max,odd"));
	EXPECT_STREQ(buf, "mem_max,odd");
	char small[5];
	std::memset(small, 'x', sizeof(small));
	EXPECT_EQ(sockbuf_clamp_names(c, small, sizeof(small)), 11);
	EXPECT_STREQ(small, "mem_"); // like snprintf: cut, terminated
	EXPECT_EQ(sockbuf_clamp_names(0, buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "");
	EXPECT_EQ(sockbuf_clamp_names(c, nullptr, 0), 11); // size query
	EXPECT_EQ(sockbuf_clamp_names(c, nullptr, 4), -EINVAL);
}

TEST(Names, Version)
{
	EXPECT_EQ(sockbuf_version(), SOCKBUF_VERSION);
}

} // namespace
