// SPDX-License-Identifier: MIT
// The payload check the transports rely on must catch what a broken
// transport does: flipped bytes, a message delivered for another, a shift.
#include "../common/pattern.h"

#include <gtest/gtest.h>

#include <vector>

using examples::pattern;

TEST(Pattern, FilledPayloadVerifies)
{
	pattern p(1 << 20);
	std::vector<char> buf(100 * 1024);
	p.fill(buf.data(), buf.size(), 42, 1);
	EXPECT_TRUE(p.verify(buf.data(), buf.size(), 42, 1));
}

TEST(Pattern, FlippedByteInTemplateOrStampFails)
{
	pattern p(1 << 20);
	std::vector<char> buf(64 * 1024);
	p.fill(buf.data(), buf.size(), 7, 1);
	buf[5000] ^= 1; // template part of block 1
	EXPECT_FALSE(p.verify(buf.data(), buf.size(), 7, 1));
	buf[5000] ^= 1;
	buf[4096 * 3 + 2] ^= 0x80; // stamp of block 3
	EXPECT_FALSE(p.verify(buf.data(), buf.size(), 7, 1));
}

TEST(Pattern, OtherIdOrSaltFails)
{
	pattern p(1 << 20);
	std::vector<char> buf(8192);
	p.fill(buf.data(), buf.size(), 7, 1);
	EXPECT_FALSE(p.verify(buf.data(), buf.size(), 8, 1));
	EXPECT_FALSE(p.verify(buf.data(), buf.size(), 7, 2));
}

TEST(Pattern, SwappedBlocksFail)
{
	pattern p(1 << 20);
	std::vector<char> buf(8192), swapped(8192);
	p.fill(buf.data(), buf.size(), 9, 1);
	std::copy(buf.begin() + 4096, buf.end(), swapped.begin());
	std::copy(buf.begin(), buf.begin() + 4096, swapped.begin() + 4096);
	EXPECT_FALSE(p.verify(swapped.data(), swapped.size(), 9, 1));
}

TEST(Pattern, ShortTailVerifiesAndLongerThanTemplateFails)
{
	pattern p(10000);
	std::vector<char> buf(10000);
	p.fill(buf.data(), 4099, 3, 1); // 3-byte stamp in the last block
	EXPECT_TRUE(p.verify(buf.data(), 4099, 3, 1));
	EXPECT_FALSE(p.verify(buf.data(), 10001, 3, 1));
}
