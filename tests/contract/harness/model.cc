// SPDX-License-Identifier: MIT
#include "model.h"

namespace sockbuf::contract
{

const char *arm_name(arm a)
{
	switch (a) {
	case arm::untouched:
		return "untouched";
	case arm::raw_unlock:
		return "raw_unlock";
	case arm::lib_initial:
		return "lib_initial";
	case arm::raw_locked:
		return "raw_locked";
	case arm::lib_locked:
		return "lib_locked";
	case arm::lib_reserve:
		return "lib_reserve";
	}
	return "?";
}

const char *role_name(role r)
{
	switch (r) {
	case role::client:
		return "client";
	case role::server:
		return "server";
	case role::listener:
		return "listener";
	}
	return "?";
}

const char *driver_name(guard_driver d)
{
	switch (d) {
	case guard_driver::thread:
		return "thread";
	case guard_driver::timerfd:
		return "timerfd";
	case guard_driver::events:
		return "events";
	case guard_driver::daemon:
		return "daemon";
	}
	return "?";
}

guard_driver driver_from_name(const std::string &name)
{
	for (int d = 0; d <= int(guard_driver::daemon); d++)
		if (name == driver_name(guard_driver(d)))
			return guard_driver(d);
	return guard_driver::thread;
}

const char *outcome_name(outcome o)
{
	switch (o) {
	case outcome::pass:
		return "pass";
	case outcome::fail:
		return "FAIL";
	case outcome::skip:
		return "skip";
	case outcome::unverified:
		return "unverified";
	}
	return "?";
}

bool outcome_from_name(const std::string &name, outcome *out)
{
	for (outcome o : all_outcomes)
		if (name == outcome_name(o)) {
			*out = o;
			return true;
		}
	return false;
}

} // namespace sockbuf::contract
