// SPDX-License-Identifier: MIT
// text::wrap, the 80-column wrapping of the tools' sentences.
#include "text_wrap.h"

#include <gtest/gtest.h>

using sockbuf::text::wrap;

TEST(TextWrap, ShortTextIsOneLine)
{
	EXPECT_EQ(wrap("send buffer unlocked", "  - ", "    "), "  - send buffer unlocked\n");
}

TEST(TextWrap, BreaksBetweenWordsWithHangingIndent)
{
	// Width 20: "  - aaaa bbbb cccc" is 18, adding " dddd" would be 23.
	EXPECT_EQ(wrap("aaaa bbbb cccc dddd eeee", "  - ", "    ", 20),
		  "  - aaaa bbbb cccc\n    dddd eeee\n");
}

TEST(TextWrap, LineOfExactlyTheWidthStays)
{
	EXPECT_EQ(wrap("aaaa bbbb", "", "", 9), "aaaa bbbb\n");
	EXPECT_EQ(wrap("aaaa bbbb", "", "", 8), "aaaa\nbbbb\n");
}

TEST(TextWrap, LongWordStandsAloneUncut)
{
	EXPECT_EQ(wrap("x parallel/lib_initial/c7/client y", "", "  ", 10),
		  "x\n  parallel/lib_initial/c7/client\n  y\n");
}

TEST(TextWrap, RepeatedSpacesCollapse)
{
	EXPECT_EQ(wrap("a   b ", "", "", 80), "a b\n");
}
