// SPDX-License-Identifier: MIT
// track.h - one sample of a socket's buffers folded into its socket_track.
#pragma once

#include "transfer.h"

namespace sockbuf::kcheck
{

// Reads @fd's buffers and adds the sample taken @ms after the transfer
// started to @t; @first starts the track, @series also records the sample
// in the time series (which also records every change, up to a bound).  A socket that cannot be
// read adds nothing.
void track_sample(int fd, socket_track &t, bool first, long ms, bool series);

} // namespace sockbuf::kcheck
