// SPDX-License-Identifier: MIT
// Watches every buffer of a scenario while it changes: getsockopt
// SO_SNDBUF/SO_RCVBUF on each socket plus inet_diag's SK_MEMINFO for it,
// paced at a fixed period on its own thread.  The sockets whose verdict has
// a time bound (time_bounded(): the floor guard's arms, restored within
// the bound) are read every cycle; the others take turns, a slice per
// cycle of a third of the bounded set (at least 16): a cycle over
// hundreds of sockets then stays short where the bound needs it.  The
// sampler only reads the sockets and writes its own records, so a slow
// cycle delays the next sample, never a transfer.  Records are read after
// stop().
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

// Which sampled sockets (indices into @sockets; listeners and sockets
// without an fd are not sampled) are read on every cycle, *@every (the
// time-bounded arms), and which take turns, *@turns.
void split_for_cycles(const std::vector<socket_record> &sockets, std::vector<size_t> *every,
		      std::vector<size_t> *turns);

// The sockets one cycle reads (indices): all of @every, then the next
// slice of @turns from *@pos (a third as many as @every, at least 16; all
// of @turns while they are no more), advancing *@pos.
std::vector<size_t> cycle_plan(const std::vector<size_t> &every, const std::vector<size_t> &turns,
			       size_t *pos);

class cycle_watch;

class sampler
{
public:
	sampler(std::vector<socket_record> *sockets, int64_t t0_ns, uint32_t period_us);
	~sampler();
	void set_filter(sample_filter f) { filter_ = std::move(f); }
	// Reads @w's kernel counters once a cycle, after the sockets (set
	// before start()).
	void set_watch(cycle_watch *w) { watch_ = w; }
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
	void sample(size_t i, int64_t t_us);
	std::vector<size_t> this_cycle();

	// Indices into *sockets_ of the sampled sockets: every cycle, in turns.
	std::vector<size_t> every_, turns_;
	size_t turn_pos_ = 0;
	std::vector<int> id_of_; // socket index -> index into ids_, or -1
	std::vector<diag::socket_info> ids_now_;

	std::vector<socket_record> *sockets_;
	std::unordered_map<uint32_t, size_t> by_inode_;
	std::vector<diag::socket_info> ids_; // what inet_diag is asked about
	diag::session session_;
	int64_t t0_ns_;
	uint32_t period_us_;
	sample_filter filter_;
	cycle_watch *watch_ = nullptr;
	std::atomic<bool> stop_{false};
	std::thread thread_;
	sampler_stats stats_;
};

} // namespace sockbuf::contract
