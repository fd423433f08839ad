"""What a kernel's run amounts to, beyond "the guest finished": a run whose
contract suite ran nothing (every scenario aborted or skipped) is a failed
run, and a C3 library pass from samples further apart than the repair bound
proves nothing.  Shared by run-matrix (the status it records) and render.py
(the status it shows, also for results recorded before these rules)."""

# tests/contract/clauses/clauses.h repair_bound_us: how long the library's
# floor guard may leave a buffer under its floor.
REPAIR_BOUND_MS = 50.0


def contract_failure(res):
    """The reason a kernel's contract run counts as failed, or None.

    Failed: the contract section is missing or unreadable where the guest
    was meant to run it, or not one of its scenarios carried traffic
    (every one aborted at setup or was skipped)."""
    sections = res.get("sections") or {}
    if "contract" not in sections:
        return None  # a build without sockbuf-contract: nothing was promised
    c = sections.get("contract")
    if not isinstance(c, dict) or not isinstance(c.get("scenarios"), list):
        return "contract: no readable result (exit %s)" % res.get("section_rc", {}).get("contract")
    scenarios = c["scenarios"]
    if not scenarios:
        return "contract: no scenario ran"
    ran = [s for s in scenarios if not s.get("skip_reason") and not aborted(s)]
    if ran:
        return None
    reasons = sorted({aborted(s) or s.get("skip_reason", "") for s in scenarios})
    return "contract: all %d scenarios aborted or skipped, nothing judged (%s)" % (
        len(scenarios), "; ".join(reasons))


def aborted(scenario):
    """Why a scenario stopped before any traffic, or "" if it did not.

    Newer results say so ("aborted"); older ones show it as no flow at all
    with an error recorded."""
    if scenario.get("aborted"):
        return scenario["aborted"]
    i = scenario.get("integrity", {})
    if not scenario.get("skip_reason") and i.get("flows", 0) == 0 and i.get("errors"):
        return i["errors"][0]
    return ""


def trace_dip(res):
    """("pass"|"fail"|"skip", why) for the guest's trace-dip section (a
    tcp_mem dip made on purpose with sockbuf-contract --trace on), or None
    when the guest did not run it.  pass: a C3 violation of the pressure
    scenario carries a kernel event recorded before it."""
    sec = (res.get("sections") or {}).get("trace-dip")
    if sec is None:
        return None
    if not isinstance(sec, dict) or "skip" in sec:
        why = sec.get("skip") if isinstance(sec, dict) else "unreadable"
        return "skip", "sockbuf-contract --trace on did not run: %s" % why
    t = sec.get("trace", {})
    if not t.get("active"):
        return "skip", "no kernel events: %s" % t.get("reason", "recorder inactive")
    violations = []
    for s in sec.get("scenarios", []):
        if s.get("skip_reason"):
            return "skip", "pressure skipped: %s" % s["skip_reason"]
        for v in s.get("verdicts", []):
            if v.get("clause") == "C3":
                for side in ("raw", "library"):
                    violations += v.get(side, {}).get("violations", [])
    if not violations:
        lock = (sec.get("features") or {}).get("SO_BUF_LOCK", {})
        if not lock.get("usable", True):
            # Without SO_BUF_LOCK nothing sets a send buffer and leaves it
            # unlocked: the raw recipe stays locked and set_initial leaves
            # the send side at the kernel's size, with no floor to dip under.
            return "skip", ("no unlocked send buffer with a floor on a kernel without "
                            "SO_BUF_LOCK: no dip to attribute")
        return "fail", "no dip below the floor was made: nothing to attribute"
    for x in violations:
        k = x.get("kernel_events", {})
        ev = [e for e in k.get("events", []) if e.get("before_ms", -1) >= 0]
        if k.get("found") and ev:
            return "pass", "%s at %.1f ms: %s %.3f ms before (%s)" % (
                x["socket"], x["t_ms"], ev[0]["name"], ev[0]["before_ms"], ev[0]["match"])
    return "fail", "%d violation(s), none with a kernel event before it (first: %s)" % (
        len(violations), violations[0].get("kernel_events", {}).get("reason", "no record"))


def stuck_steps(res):
    """The guest steps init.sh's step limit stopped (it killed them and kept
    what their tasks were waiting in, "stuck"), as one reason, or None."""
    stuck = [name for name, sec in (res.get("sections") or {}).items()
             if isinstance(sec, dict) and "stuck" in sec]
    if not stuck:
        return None
    return "%s: did not finish within the step limit, killed (its tasks' stacks " \
        "in the JSON)" % ", ".join(stuck)


def effective_status(res):
    """(status, reason) with a step stopped by the guest's step limit, a
    failed contract run, or a dip the kernel-event recorder could not
    attribute, counted as a failure."""
    st, why = res.get("status", "?"), res.get("reason")
    if st == "ok":
        fail = stuck_steps(res) or contract_failure(res)
        if fail:
            return "fail", fail
        td = trace_dip(res)
        if td and td[0] == "fail":
            return "fail", "trace-dip: " + td[1]
    return st, why


def library_verdict(scenario, verdict):
    """A scenario's library verdict, lower case ("pass", "fail", "skip",
    "unverified"), with a C3 pass from samples further apart than the
    repair bound read as unverified (results from before the suite said
    so itself).  On the kernel's clock (floor_judge.clock) every dip was
    timed whatever the gaps: the pass stands."""
    lib = verdict.get("library", {})
    v = lib.get("verdict", "skip").lower()
    kernel_clock = scenario.get("floor_judge", {}).get("clock") == "kernel"
    if v == "pass" and verdict.get("clause") == "C3" and not kernel_clock:
        gap = lib.get("max_gap_ms", scenario.get("sampler", {}).get("max_gap_ms", 0))
        if gap > lib.get("bound_ms", REPAIR_BOUND_MS):
            return "unverified"
    return v
