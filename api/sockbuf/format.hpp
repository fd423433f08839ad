// SPDX-License-Identifier: MIT
// format.hpp - fmt formatters for sockbuf's reports, states and probe.
//
//   fmt::print("{}\n", report);   // snd 262144 (unlock, unlocked, floor ...)
#pragma once

#include <sockbuf/sockbuf.hpp>

#include <fmt/format.h>

#include <string>

namespace sockbuf::detail
{

inline std::string lock_word(int locked)
{
	return locked < 0 ? "lock unknown" : locked ? "locked" : "unlocked";
}

inline std::string clamp_words(uint32_t clamps)
{
	char buf[128];
	sockbuf_clamp_names(clamps, buf, sizeof(buf));
	return buf;
}

} // namespace sockbuf::detail

template <> struct fmt::formatter<sockbuf_dir_report> : formatter<string_view> {
	template <class Ctx> auto format(const sockbuf_dir_report &d, Ctx &ctx) const
	{
		if (d.strategy == SOCKBUF_STRAT_NONE)
			return fmt::format_to(ctx.out(), "untouched");
		auto out = fmt::format_to(ctx.out(), "{} -> {} ({}, {}, floor {})", d.requested,
					  d.effective, sockbuf_strategy_name(d.strategy),
					  sockbuf::detail::lock_word(d.locked), d.floor);
		if (d.clamps)
			out = fmt::format_to(out, " [{}]", sockbuf::detail::clamp_words(d.clamps));
		return out;
	}
};

template <> struct fmt::formatter<sockbuf_report> : formatter<string_view> {
	template <class Ctx> auto format(const sockbuf_report &r, Ctx &ctx) const
	{
		auto out = fmt::format_to(ctx.out(), "snd {}; rcv {}", r.snd, r.rcv);
		if (r.flags & SOCKBUF_R_AFTER_HANDSHAKE)
			out = fmt::format_to(out, "; after handshake: window scale already fixed");
		if (r.flags & SOCKBUF_R_LISTENER)
			out = fmt::format_to(out, "; listener: accepted sockets inherit");
		if (r.flags & SOCKBUF_R_FALLBACK)
			out = fmt::format_to(out, "; fallback taken");
		if (r.flags & SOCKBUF_R_FORCE_DENIED)
			out = fmt::format_to(out, "; force denied");
		if (r.flags & SOCKBUF_R_WINDOW_CLAMPED)
			out = fmt::format_to(
			    out, "; window clamp left by SO_RCVLOWAT: window scale capped");
		if (r.flags & SOCKBUF_R_RESERVED)
			out = fmt::format_to(out, "; floor memory reserved");
		if (r.flags & SOCKBUF_R_RESERVE_FAILED)
			out = fmt::format_to(out, "; reservation refused ({})", r.reserve_err);
		if (r.flags & SOCKBUF_R_PARTIAL)
			out = fmt::format_to(out, "; PARTIAL");
		return out;
	}
};

template <> struct fmt::formatter<sockbuf::report> : formatter<sockbuf_report> {
};

template <> struct fmt::formatter<sockbuf_state> : formatter<string_view> {
	template <class Ctx> auto format(const sockbuf_state &s, Ctx &ctx) const
	{
		std::string lock = s.lock < 0
				       ? "unknown"
				       : fmt::format("{}{}", s.lock & SOCKBUF_SND ? "snd " : "",
						     s.lock & SOCKBUF_RCV ? "rcv" : "");
		if (s.lock == 0)
			lock = "none";
		return fmt::format_to(ctx.out(), "sndbuf {} rcvbuf {} locked {} wscale {}/{}",
				      s.sndbuf, s.rcvbuf, lock, s.snd_wscale, s.rcv_wscale);
	}
};
