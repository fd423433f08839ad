#!/bin/sh
# Lab script for bench/lab/guest/run.py: a bulk transfer's CPU per GB
# with no program set, one (sockbufd's for the host), and K per-process
# sets (K guards with events, each loading its own), the idle sockets
# shared out (guard_events_cost --sets).  lab_sets, lab_secs, lab_rounds,
# lab_n.
/usr/bin/sockbuf_guard_events_cost --sets ${lab_sets:-1,16,38,64} ${lab_secs:-3} ${lab_rounds:-3} ${lab_n:-3200}
echo "@@ sets rc $?"
