// SPDX-License-Identifier: MIT
// sockbuf.hpp - a thin C++20 layer over sockbuf.h.
//
// Same operations, same unit (the size the kernel stores), errors as
// std::error_code in the generic category instead of -errno:
//
//   auto r = sockbuf::set_initial_bufsize(fd, {.snd = 256 << 10,
//                                              .rcv = 256 << 10});
//   if (!r) log(r.error().message());
//   sockbuf::floor f = r->floor();   // keep it with the socket
//   ...
//   if (auto below = sockbuf::check_floor(fd, f); below && *below)
//           sockbuf::restore_floor(fd, f);
//
// Formatting for fmt lives in <sockbuf/format.hpp>, so this header needs
// nothing beyond the standard library.
#pragma once

#include <sockbuf/sockbuf.h>

#include <system_error>
#include <utility>
#include <variant>

namespace sockbuf
{

// A value or the error that prevented it (std::expected is C++23).
template <class T> class result
{
public:
	result(T value) : v_(std::move(value)) {}
	result(std::error_code ec) : v_(ec) {}

	bool has_value() const noexcept { return v_.index() == 0; }
	explicit operator bool() const noexcept { return has_value(); }
	const T &value() const
	{
		if (!has_value())
			throw std::system_error(error());
		return std::get<0>(v_);
	}
	const T &operator*() const { return value(); }
	const T *operator->() const { return &value(); }
	std::error_code error() const noexcept
	{
		return has_value() ? std::error_code{} : std::get<1>(v_);
	}

private:
	std::variant<T, std::error_code> v_;
};

// Turns a negative errno into an error_code.
inline std::error_code make_error(int neg_errno)
{
	return {-neg_errno, std::generic_category()};
}

// Sizes for both directions; 0 leaves a direction alone.
struct sizes {
	int snd = 0;
	int rcv = 0;
};

using floor = sockbuf_floor;
using state = sockbuf_state;
using probe_result = sockbuf_probe_info;

struct report : sockbuf_report {
	// Assigned rather than base-initialised: clang 14's analyzer does not
	// see a value-initialised aggregate base as initialised.
	report() : sockbuf_report() { static_cast<sockbuf_report &>(*this) = sockbuf_report{}; }
	sockbuf::floor floor() const { return {snd.floor, rcv.floor}; }
};

// Flags, as a type that only combines with itself.
enum class flags : unsigned int {
	none = 0,
	fallback_lock = SOCKBUF_F_FALLBACK_LOCK,
	fallback_default = SOCKBUF_F_FALLBACK_DEFAULT,
	allow_force = SOCKBUF_F_ALLOW_FORCE,
	reserve_mem = SOCKBUF_F_RESERVE_MEM,
};
constexpr flags operator|(flags a, flags b)
{
	return flags(unsigned(a) | unsigned(b));
}

inline result<probe_result> probe(bool fresh = false)
{
	probe_result p{};
	int ret = sockbuf_probe(&p, fresh ? SOCKBUF_PROBE_FRESH : 0);
	if (ret < 0)
		return make_error(ret);
	return p;
}

inline result<report> set_initial_bufsize(int fd, sizes s, flags f = flags::none)
{
	report r;
	int ret = sockbuf_set_initial_bufsize(fd, s.snd, s.rcv, unsigned(f), &r);
	if (ret < 0)
		return make_error(ret);
	return r;
}

inline result<report> lock_bufsize(int fd, sizes s, flags f = flags::none)
{
	report r;
	int ret = sockbuf_lock_bufsize(fd, s.snd, s.rcv, unsigned(f), &r);
	if (ret < 0)
		return make_error(ret);
	return r;
}

inline result<state> get_state(int fd)
{
	state st{};
	int ret = sockbuf_get_state(fd, &st);
	if (ret < 0)
		return make_error(ret);
	return st;
}

// The directions below the floor: 0, SOCKBUF_SND, SOCKBUF_RCV or both.
inline result<int> check_floor(int fd, const floor &f)
{
	int ret = sockbuf_check_floor(fd, &f, nullptr);
	if (ret < 0)
		return make_error(ret);
	return ret;
}

inline result<report> restore_floor(int fd, const floor &f, flags fl = flags::none)
{
	report r;
	int ret = sockbuf_restore_floor(fd, &f, unsigned(fl), &r);
	if (ret < 0)
		return make_error(ret);
	return r;
}

} // namespace sockbuf
