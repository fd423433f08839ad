// SPDX-License-Identifier: MIT
// Watches every buffer of a scenario while it changes: getsockopt
// SO_SNDBUF/SO_RCVBUF on each socket plus one inet_diag dump of SK_MEMINFO
// per cycle, paced at a fixed period on its own thread.  The sampler only
// reads the sockets and writes its own records, so a slow cycle delays the
// next sample, never a transfer.  Records are read after stop().
#pragma once

#include "diag.h"
#include "model.h"

#include <atomic>
#include <functional>
#include <thread>
#include <unordered_map>
#include <vector>

namespace sockbuf::contract
{

enum class source { getsockopt, inet_diag };

// Lets a test change what the sampler read before it is recorded (an
// injected violation).  Arguments: time since start, socket, source, send
// and receive value (changeable).
using sample_filter =
    std::function<void(int64_t t_us, const socket_record &, source, int64_t *snd, int64_t *rcv)>;

class sampler
{
public:
	sampler(std::vector<socket_record> *sockets, int64_t t0_ns, uint32_t period_us);
	~sampler();
	void set_filter(sample_filter f) { filter_ = std::move(f); }
	void start();
	void stop();
	const sampler_stats &stats() const { return stats_; }

	// One sample of one socket (the sampler's own path, public for tests).
	static void record(socket_record *s, source src, int64_t snd, int64_t rcv, int64_t t_us);
	static void keep_first_below(socket_record *s, const diag::socket_info &si, int64_t snd,
				     int64_t rcv, int64_t t_us);

private:
	void loop();
	void cycle(int64_t t_us);
	void learn_ids();

	std::vector<socket_record> *sockets_;
	std::unordered_map<uint32_t, size_t> by_inode_;
	std::vector<diag::socket_info> ids_; // what inet_diag is asked about
	diag::session session_;
	int64_t t0_ns_;
	uint32_t period_us_;
	sample_filter filter_;
	std::atomic<bool> stop_{false};
	std::thread thread_;
	sampler_stats stats_;
};

} // namespace sockbuf::contract
