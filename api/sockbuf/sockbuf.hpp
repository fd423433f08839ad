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

#include <chrono>
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
	T &value()
	{
		if (!has_value())
			throw std::system_error(error());
		return std::get<0>(v_);
	}
	const T &operator*() const { return value(); }
	const T *operator->() const { return &value(); }
	T &operator*() { return value(); }
	T *operator->() { return &value(); }
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

// A floor guard owned by a scope: destroyed (thread stopped, timer closed)
// with the object.  Movable, not copyable.
//
//   auto g = sockbuf::guard::make();
//   g->add(conn_fd, r->floor());
//   g->start(std::chrono::milliseconds(10));   // or poll g->timer_fd(...)
class guard
{
public:
	enum class flags : unsigned int {
		none = 0,
		allow_force = SOCKBUF_GUARD_ALLOW_FORCE,
		reserve_mem = SOCKBUF_GUARD_RESERVE_MEM,
		no_diag = SOCKBUF_GUARD_NO_DIAG,
		run_in_child = SOCKBUF_GUARD_RUN_IN_CHILD,
		no_uring = SOCKBUF_GUARD_NO_URING,
		bpf = SOCKBUF_GUARD_BPF,
		events = SOCKBUF_GUARD_EVENTS,
	};

	static result<guard> make(flags f = flags::none)
	{
		int id = sockbuf_guard_new(unsigned(f));
		if (id < 0)
			return make_error(id);
		return guard(id);
	}

	guard(guard &&o) noexcept : id_(std::exchange(o.id_, -1)) {}
	guard &operator=(guard &&o) noexcept
	{
		if (this != &o) {
			reset();
			id_ = std::exchange(o.id_, -1);
		}
		return *this;
	}
	guard(const guard &) = delete;
	guard &operator=(const guard &) = delete;
	~guard() { reset(); }

	int id() const noexcept { return id_; }

	std::error_code add(int fd, const floor &f) { return ec(sockbuf_guard_add(id_, fd, &f)); }
	// Every connection accepted from listening socket @fd, whoever
	// accepts it, gets @f (sockbuf_guard_add_listener()).
	std::error_code add_listener(int fd, const floor &f)
	{
		return ec(sockbuf_guard_add_listener(id_, fd, &f));
	}
	std::error_code remove(int fd) { return ec(sockbuf_guard_remove(id_, fd)); }

	result<sockbuf_guard_report> pass()
	{
		sockbuf_guard_report r{};
		int ret = sockbuf_guard_pass(id_, &r);
		if (ret < 0)
			return make_error(ret);
		return r;
	}

	std::error_code start(std::chrono::microseconds interval)
	{
		return ec(sockbuf_guard_start(id_, interval_us(interval)));
	}
	std::error_code stop() { return ec(sockbuf_guard_stop(id_)); }

	// The timerfd to poll; the guard owns it.
	result<int> timer_fd(std::chrono::microseconds interval)
	{
		int ret = sockbuf_guard_timerfd(id_, interval_us(interval));
		if (ret < 0)
			return make_error(ret);
		return ret;
	}

	result<sockbuf_guard_totals> stats() const
	{
		sockbuf_guard_totals t{};
		int ret = sockbuf_guard_stats(id_, &t);
		if (ret < 0)
			return make_error(ret);
		return t;
	}

	// flags::events: what the event source did, or why it is off (err).
	result<sockbuf_guard_event_totals> event_stats() const
	{
		sockbuf_guard_event_totals t{};
		int ret = sockbuf_guard_event_stats(id_, &t);
		if (ret < 0)
			return make_error(ret);
		return t;
	}
	// flags::events: the safety net's interval (1 s by default).
	std::error_code set_net_interval(std::chrono::microseconds interval)
	{
		return ec(sockbuf_guard_set_net_interval(id_, interval_us(interval)));
	}

private:
	explicit guard(int id) : id_(id) {}
	static std::error_code ec(int ret) { return ret < 0 ? make_error(ret) : std::error_code{}; }
	// Out of range (0, or past what unsigned holds) stays out of range, so
	// the C call refuses it with -EINVAL instead of a silent wrap.
	static unsigned int interval_us(std::chrono::microseconds d)
	{
		auto n = d.count();
		return n <= 0 ? 0u : n > 0xffffffffLL ? 0xffffffffu : unsigned(n);
	}
	void reset()
	{
		if (id_ >= 0)
			sockbuf_guard_destroy(std::exchange(id_, -1));
	}
	int id_ = -1;
};

constexpr guard::flags operator|(guard::flags a, guard::flags b)
{
	return guard::flags(unsigned(a) | unsigned(b));
}

} // namespace sockbuf
