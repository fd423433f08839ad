// SPDX-License-Identifier: MIT
#include "flow_traffic.h"

namespace sockbuf::contract
{

traffic_fn flow_traffic(uint64_t bytes_per_flow, send_policy sp, read_policy rp, int threads)
{
	return [=](connection_set &set, int64_t deadline, integrity *data) {
		std::vector<flow> flows(set.conns.size());
		for (size_t i = 0; i < set.conns.size(); i++) {
			flows[i].snd_fd = set.sockets[set.conns[i].client].fd;
			flows[i].rcv_fd = set.sockets[set.conns[i].server].fd;
			flows[i].salt = 0x5bc0000000000000ull + i * 0x1000193ull;
			flows[i].to_send = bytes_per_flow;
			flows[i].sp = sp;
			flows[i].rp = rp;
		}
		run_flows(flows, threads, deadline, data);
	};
}

} // namespace sockbuf::contract
