#!/usr/bin/env python3
"""Render docs/kernel-matrix.md from the kernel matrix's JSON results.

  tests/kernels/render.py docs/results/kernels -o docs/kernel-matrix.md

Every figure in the output comes from the JSON files in the folder (one per
kernel, written by run-matrix); nothing here is typed in by hand.
"""
import argparse
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kmatrix import matrix  # noqa: E402
from kmatrix.outcome import (REPAIR_BOUND_MS, contract_failure, effective_status,  # noqa: E402
                             library_verdict)

SIZE = 131072  # the size the guest check asks set_initial/lock for

# The kernel code that shrinks an unlocked send buffer under memory
# pressure, for the rows where that happens.
MODERATE = "sk_stream_moderate_sndbuf"
SHOULD_EXPAND = "tcp_should_expand_sndbuf"


def code_link(release, ident):
    m = re.match(r"(\d+)\.(\d+)", release or "")
    tag = "v%s.%s" % m.groups() if m else "latest"
    return "[`%s`](https://elixir.bootlin.com/linux/%s/A/ident/%s)" % (ident, tag, ident)


def kb(n):
    if n is None:
        return "?"
    if n >= 1 << 20:
        return "%.1fM" % (n / (1 << 20))
    if n >= 1 << 10:
        return "%gK" % round(n / 1024, 1)
    return str(n)


def initial(t, key):
    """The size right after connect()/accept() (before data) where the
    check recorded it, else its first sample."""
    v = t.get("at_setup", {}).get(key, 0)
    return v if v > 0 else t["start"][key]


def runs(res, section_prefix):
    out = []
    for name, sec in sorted(res.get("sections", {}).items()):
        if name.startswith(section_prefix) and isinstance(sec, dict):
            for r in sec.get("runs", []):
                out.append(r)
    return out


def by_scenario(rs, scenario):
    return [r for r in rs if r.get("scenario") == scenario and "sender" in r]


def features(res):
    probe = res.get("sections", {}).get("probe", {})
    facts = res.get("sections", {}).get("facts", {})
    f = probe.get("features", {})
    words = []
    for key, label in (("buf_lock", "SO_BUF_LOCK"), ("rcvlowat_raise", "SO_RCVLOWAT raise"),
                       ("reserve_mem", "SO_RESERVE_MEM")):
        v = f.get(key, {})
        if v.get("usable"):
            words.append(label)
        elif v.get("known"):
            words.append(label + " (known, unusable)")
        else:
            words.append("no " + label)
    cg = facts.get("cgroup2_controllers", "")
    words.append("memcg v2" if "memory" in cg.split() else "no memcg v2")
    words.append("netem" if facts.get("netem") == "yes" else "no netem")
    return ", ".join(words)


def c1(res):
    """C1 initial size in force: what a 128 KB request reads back, and its lock."""
    rs = runs(res, "check-")
    lib = by_scenario(rs, "initial")
    raw = by_scenario(rs, "locked")
    if not lib:
        return "-", "-"

    def lock(v):
        return {-1: "lock ?", 0: "unlocked", 1: "snd locked", 2: "rcv locked", 3: "locked"}.get(v, str(v))
    r0 = raw[0] if raw else None
    raw_cell = "-" if not r0 else "SO_*BUF: rcv %s, snd %s, %s" % (
        kb(initial(r0["receiver"], "rcvbuf")), kb(initial(r0["sender"], "sndbuf")),
        lock(r0["receiver"]["start"]["lock"]))
    l0 = lib[0]

    # Both directions must read the request: a send buffer left at the
    # kernel's default (no unlocked way before SO_BUF_LOCK) is not in force.
    # Above it is: an unlocked buffer the kernel grew at the handshake
    # (tcp_init_buffer_space -> tcp_sndbuf_expand: 2 x 10 segments of a
    # 64 KB loopback MSS is 1.3M) started at the request and autotunes.
    def in_force(v, t):
        return v == SIZE or (v > SIZE and t["start"]["lock"] == 0)
    ok = all(in_force(initial(r["receiver"], "rcvbuf"), r["receiver"]) and
             in_force(initial(r["sender"], "sndbuf"), r["sender"]) for r in lib)
    snd = [initial(r["sender"], "sndbuf") for r in lib]
    strat = "%s/%s" % (l0["receiver"]["strategy"]["rcv"], l0["sender"]["strategy"]["snd"])
    lib_cell = "%s rcv %s, snd %s of %s (%s), %s" % (
        "holds:" if ok else "FAILS:", kb(initial(l0["receiver"], "rcvbuf")),
        "/".join(sorted({kb(s) for s in snd})), kb(SIZE), strat,
        lock(l0["receiver"]["start"]["lock"]))
    if ok and max(snd) > SIZE:
        lib_cell += "; snd grown by the kernel at the handshake (unlocked, autotuning)"
    return raw_cell, lib_cell


def growth(rs, scenario, rtt_min=10):
    """(holds, text): receive and send buffers over the delayed runs."""
    sel = [r for r in by_scenario(rs, scenario) if r.get("rtt_ms", 0) >= rtt_min]
    if not sel:
        return None, "no delayed run"
    parts, ok = [], True
    for r in sorted(sel, key=lambda r: r["rtt_ms"]):
        rc, sd = r["receiver"], r["sender"]
        grew = rc["max"]["rcvbuf"] > initial(rc, "rcvbuf")
        ok = ok and grew
        parts.append("%d ms: rcv %s→%s, snd %s→%s, %.1f MB/s" % (
            r["rtt_ms"], kb(initial(rc, "rcvbuf")), kb(rc["max"]["rcvbuf"]),
            kb(initial(sd, "sndbuf")), kb(sd["max"]["sndbuf"]), r.get("mbytes_per_s", 0)))
    return ok, "; ".join(parts)


def c2(res):
    rs = runs(res, "check-")
    raw_ok, raw_t = growth(rs, "untouched")
    lib_ok, lib_t = growth(rs, "initial")
    lk_ok, lk_t = growth(rs, "locked")

    def v(ok):
        return "-" if ok is None else ("grows" if ok else "DOES NOT GROW")
    return ("%s: %s" % (v(raw_ok), raw_t),
            "%s: %s<br>locked 128K for contrast: %s" % (v(lib_ok), lib_t, lk_t))


def c3(res):
    """Floor: lowest buffer seen against the initial size / the floor."""
    rs = runs(res, "check-")
    rel = res.get("release")
    notes = []
    # Without pressure: did any buffer fall below its start?
    fell = []
    for r in by_scenario(rs, "untouched") + by_scenario(rs, "initial"):
        for side, key in (("sender", "sndbuf"), ("receiver", "rcvbuf")):
            t = r[side]
            if t["min"][key] < initial(t, key):
                fell.append("%s %s %s at %d ms: %s→%s" % (r["scenario"], side, key, r["rtt_ms"],
                                                           kb(initial(t, key)), kb(t["min"][key])))
    raw = ["no pressure: " + ("never below its start" if not fell else "; ".join(fell))]
    lib = []
    for sec, label in (("pressure-tcp_mem", "tcp_mem"), ("pressure-memcg", "memcg")):
        s = res.get("sections", {}).get(sec, {})
        if sec == "pressure-memcg" and memcg_arm_runs(s):
            arm_raw, arm_lib = c3_memcg(res, memcg_arm_runs(s))
            raw.extend(arm_raw)
            lib.extend(arm_lib)
            continue
        prs = s.get("runs", []) if isinstance(s, dict) else []
        rc = res.get("section_rc", {}).get(sec)
        if not prs:
            why = s.get("skip") if isinstance(s, dict) else None
            if rc is not None and rc > 128:
                why = "check killed by signal %d (memcg OOM)" % (rc - 128)
            raw.append("%s: %s" % (label, why or "not run"))
            continue
        for r in prs:
            if "skip" in r or "error" in r:
                (lib if r["scenario"].endswith("_restore") else raw).append(
                    "%s: %s" % (label, r.get("skip") or r.get("error")))
                continue
            sd = r["sender"]
            floor = sd["floor"]["snd"]
            start = initial(sd, "sndbuf")
            if r["scenario"].endswith("_restore"):
                # The kernel's cut shows here too, before the library's
                # restore: a raw fact of this kernel.
                if sd["min"]["sndbuf"] < start:
                    raw.append("**FAILS raw** %s (run with restore): snd %s→peak %s, lowest %s "
                               "(start %s), %s" % (label, kb(start), kb(sd["peak"]["sndbuf"]),
                                                   kb(sd["min"]["sndbuf"]), kb(start),
                                                   code_link(rel, MODERATE)))
                after = sd["min_sndbuf_after_restore"]
                if not sd["restores"]:
                    lib.append("%s: never below the floor %s" % (label, kb(floor)))
                else:
                    held = after >= floor
                    lib.append("%s: %s after %d restores (floor %s, lowest read %s, via %s)" % (
                        label, "restored" if held else "NOT RESTORED", sd["restores"], kb(floor),
                        kb(after), sd["strategy"]["snd"]))
            else:
                low = sd["min"]["sndbuf"]
                # Raw: below the size the socket had when connected.
                below = low < start
                txt = "%s: snd %s→peak %s→%s (lowest %s; start %s, floor %s)" % (
                    label, kb(start), kb(sd["peak"]["sndbuf"]),
                    kb(sd["low_after_peak"]["sndbuf"] or sd["peak"]["sndbuf"]), kb(low),
                    kb(start), kb(floor))
                if below:
                    txt = "**FAILS raw** " + txt + ", " + code_link(rel, MODERATE)
                rfall = r["receiver"]["min"]["rcvbuf"] < initial(r["receiver"], "rcvbuf")
                txt += "; rcv %s" % ("FELL" if rfall else "held")
                raw.append(txt)
    return "<br>".join(raw), "<br>".join(lib) or "-"


MEMCG_ARMS = {"raw": "raw SO_*BUF + SO_BUF_LOCK 0", "initial": "set_initial",
              "reserve": "set_initial + SOCKBUF_F_RESERVE_MEM", "lock": "lock 128K for contrast",
              "guard": "set_initial + floor guard (10 ms)"}


GUARD_BOUND_MS = 60  # guard interval 10 ms + scheduling allowance 50 ms


def memcg_arm_runs(section):
    """The memcg section's runs, one per sender arm (only the sender in the
    limited group), or [] for results written before the arms existed."""
    rs = section.get("runs", []) if isinstance(section, dict) else []
    return [r for r in rs if "arm" in r]


def c3_memcg(res, arm_runs):
    """C3 under memcg pressure, one line per arm: (raw lines, library lines).
    raw and lock go to the raw column, the library's arms to its own."""
    rel = res.get("release")
    raw, lib = [], []
    for r in arm_runs:
        arm = r["arm"]
        label = "memcg %s" % MEMCG_ARMS.get(arm, arm)
        out = lib if arm in ("initial", "reserve", "guard") else raw
        if "sender" not in r:
            out.append("%s: %s" % (label, r.get("skip") or r.get("error") or "no result"))
            continue
        sd, m = r["sender"], r.get("memcg", {})
        floor = sd["floor"]["snd"]
        low = sd["min"]["sndbuf"]
        below_ms = sd.get("below_floor_ms", {}).get("snd", 0)
        txt = "%s: snd %s→peak %s, lowest %s (floor %s, below it %d ms" % (
            label, kb(initial(sd, "sndbuf")), kb(sd["peak"]["sndbuf"]), kb(low), kb(floor),
            below_ms)
        if "max_sample_gap_ms" in sd:
            txt += ", samples up to %d ms apart" % sd["max_sample_gap_ms"]
        txt += ")"
        if m.get("unlock_err"):
            txt += ", SO_BUF_LOCK 0 failed (%s): locked" % m["unlock_err"]
        if arm == "reserve":
            res_ = m.get("reservation", {})
            if res_.get("reported"):
                txt += ", reservation in force (%s..%s)" % (kb(res_.get("sampled_min")),
                                                          kb(res_.get("sampled_max")))
            else:
                txt += ", no reservation (%s)" % (res_.get("reserve_err") or "not reported")
        if arm == "guard":
            g = r.get("guard", {})
            txt += ", guard: %s passes, %s dips, %s restored" % (
                g.get("passes", "?"), g.get("below", "?"), g.get("restored", "?"))
            if g.get("err"):
                txt += " (guard error %s)" % g["err"]
        ev = m.get("events", {})
        txt += "; group: sock peak %s, max %s, oom %s, oom_kill %s" % (
            kb(m.get("sock_peak")), ev.get("max", "?"), ev.get("oom", "?"), ev.get("oom_kill", "?"))
        integ = r.get("integrity", {})
        txt += "; %s" % ("%s bytes verified" % integ["received"] if integ.get("verified")
                         else "BYTES NOT VERIFIED (sent %s, received %s, corrupt at %s)" % (
                             integ.get("sent"), integ.get("received"), integ.get("corrupt_at")))
        # The guard's promise is "restored within one interval plus one pass"
        # (10 ms + a pass + the suite's 50 ms scheduling allowance).  Each
        # dip is bounded by the samples (dips_snd: at least first to last
        # sample under the floor, at most sample before to sample after):
        # it held if every upper bound is within the bound, failed if a
        # lower bound passes it, and is unverified in between.  Results
        # without dips_snd carry only the total time below, an upper bound.
        d = sd.get("dips_snd")
        bound = GUARD_BOUND_MS
        g = r.get("guard", {})
        if arm == "guard" and (g.get("max_pass_us") or -1) >= 0:
            # The mode's own bound, as the contract suite judges it: the
            # interval, the longest pass (a restore waits for the socket's
            # lock), and the 50 ms scheduling allowance.
            bound = GUARD_BOUND_MS + (g["max_pass_us"] + 999) // 1000
            txt += "; bound %d ms (10 ms + longest pass %.1f ms + 50 ms)" % (
                bound, g["max_pass_us"] / 1000.0)
        if arm == "guard" and d and d.get("count"):
            txt += "; %d dips, the longest %d..%s ms" % (
                d["count"], d["longest_lower_ms"],
                "open at the end" if d["open_at_end"] else d["longest_upper_ms"])
        if low >= floor:
            pass
        elif arm == "initial":
            # set_initial alone keeps no floor (the guard or a reservation
            # does): what the kernel did to it is shown, not judged.
            txt += "; not judged: set_initial alone keeps no floor (guard or reserve does)"
        elif arm == "guard" and d:
            if d["open_at_end"] or d["longest_lower_ms"] > bound:
                txt = "**FAILS library** %s, %s" % (txt, code_link(rel, MODERATE))
            elif d["longest_upper_ms"] <= bound:
                txt += "; every dip restored within %d ms" % bound
            else:
                txt = ("*unverified* %s: samples too far apart to tell whether the "
                       "longest dip passed the %d ms bound" % (txt, bound))
        elif arm == "guard" and below_ms <= GUARD_BOUND_MS:
            txt += "; every dip restored within %d ms" % GUARD_BOUND_MS
        else:
            txt = "**FAILS %s** %s, %s" % ("library" if out is lib else "raw", txt,
                                           code_link(rel, MODERATE))
        out.append(txt)
    return raw, lib


def c5(res):
    rs = runs(res, "check-")
    u, i, lk = (by_scenario(rs, s) for s in ("untouched", "initial", "locked"))
    if not (u and i):
        return "-", "-"

    def ws(r):
        return r["receiver"]["start"]["rcv_wscale"]
    raw = "untouched %s, locked 128K %s" % (
        "/".join(sorted({str(ws(r)) for r in u})), "/".join(sorted({str(ws(r)) for r in lk})) or "-")
    same = {ws(r) for r in i} == {ws(r) for r in u}
    lib = "%s: set_initial %s" % ("holds" if same else "FAILS",
                                  "/".join(sorted({str(ws(r)) for r in i})))
    return raw, lib


def c6(res):
    lk = by_scenario(runs(res, "check-"), "locked")
    if not lk:
        return "-"
    ok = all(r["receiver"]["min"]["rcvbuf"] == r["receiver"]["max"]["rcvbuf"] and
             r["sender"]["min"]["sndbuf"] == r["sender"]["max"]["sndbuf"] for r in lk)
    return "%s: rcv %s..%s, snd %s..%s" % (
        "holds" if ok else "MOVED",
        kb(min(r["receiver"]["min"]["rcvbuf"] for r in lk)),
        kb(max(r["receiver"]["max"]["rcvbuf"] for r in lk)),
        kb(min(r["sender"]["min"]["sndbuf"] for r in lk)),
        kb(max(r["sender"]["max"]["sndbuf"] for r in lk)))


def contract_rows(res):
    c = res.get("sections", {}).get("contract")
    if not isinstance(c, dict) or not c:
        return None
    return c


FAIL_WORDS = ("FAILS", "DOES NOT GROW", "NOT RESTORED", "MOVED", "FAIL ")


def _cell_fails(cell):
    return any(w in cell for w in FAIL_WORDS)


def has_checks(res):
    """Whether the kernel check ran (its cells mean something even when
    the contract suite failed on that kernel)."""
    return any(k.startswith("check-") for k in (res.get("sections") or {}))


def judged_contract(res):
    """The contract document when it judged something, else None."""
    c = contract_rows(res)
    return c if c and not contract_failure(res) else None


def summary_rows(results):
    """[clause, raw holds, raw fails, library holds, library fails,
    library unverified]."""
    ok = [r for r in results if has_checks(r) or judged_contract(r)]
    checks = {"C1": c1, "C2": c2, "C3": c3, "C5": c5}
    rows = []
    for cl in ("C1", "C2", "C3", "C4", "C5", "C6", "C7"):
        cols = {"raw": ([], []), "library": ([], [])}
        unverified = []
        for r in ok:
            cells = None
            if cl in checks:
                cells = checks[cl](r)
            elif cl == "C6":
                cells = (c6(r), c6(r))
            con = _verdicts(judged_contract(r) or {}).get(cl, {})
            for i, side in enumerate(("raw", "library")):
                failed = False
                seen = False
                if cells and cells[i] not in ("-", ""):
                    seen = True
                    failed = _cell_fails(cells[i])
                d = con.get(side)
                if d and (d["pass"] or d["fail"]):
                    seen = True
                    if d["fail"]:
                        failed = True
                        tag = "%s (%s)" % (r["name"], ", ".join(sorted({n for n, _ in d["fail"]})))
                    else:
                        tag = r["name"]
                else:
                    tag = r["name"]
                if failed and cells and _cell_fails(cells[i]) and not (d and d["fail"]):
                    tag = "%s (check)" % r["name"]
                elif failed and cells and _cell_fails(cells[i]):
                    tag = tag[:-1] + ", check)" if tag.endswith(")") else tag + " (check)"
                if d and d["unverified"] and side == "library":
                    unverified.append("%s (%s)" % (r["name"], ", ".join(d["unverified"])))
                if seen:
                    cols[side][1 if failed else 0].append(tag)
        rows.append([cl] + [", ".join(x) or "-" for side in ("raw", "library") for x in cols[side]]
                    + [", ".join(unverified) or "-"])
    return rows


def esc(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def booted_twice(r):
    """What the runner's second boot (run-matrix _boot) hides otherwise:
    the first boot's guest kernel panicked, untainted."""
    first = (r.get("earlier_boots") or [None])[0]
    if not first:
        return ""
    return " (booted twice: the first boot's kernel panicked after %s s, untainted: %s; " \
        "console %s)" % (first.get("guest_seconds", "?"), first.get("kernel_crash"),
                         first.get("console_log"))


# What marks a line of a C2/C3 cell as a failure or as unverified.
FAIL_MARKS = ("**FAILS", "NOT RESTORED", "DOES NOT GROW", "NOT VERIFIED")


def detail_heading(kernel):
    return "Kernel %s" % kernel


def detail_anchor(kernel):
    """GitHub's anchor for detail_heading(kernel)."""
    return re.sub(r"[^a-z0-9 -]", "", detail_heading(kernel).lower()).replace(" ", "-")


def short_verdict(text, kernel):
    """A C2/C3 cell's verdict in a few words, linked to its figures (the
    lines of @text, shown under the table)."""
    lines = [x for x in text.split("<br>") if x]
    link = " ([figures](#%s))" % detail_anchor(kernel)
    if not lines or text.startswith("-"):
        return text
    bad = [x for x in lines if any(m in x for m in FAIL_MARKS)]
    unverified = [x for x in lines if x.startswith("*unverified*")]
    if text.startswith(("grows", "DOES NOT GROW")):
        rtts = re.findall(r"(\d+) ms: rcv", lines[0])
        head = lines[0].split(":")[0]
        return "%s at %s ms%s" % (head, ", ".join(rtts), link) if rtts else head + link
    if bad:
        labels = []
        for x in bad:
            m = re.match(r"\*\*FAILS (?:raw|library)\*\* ([^:(]+)", x)
            labels.append(m.group(1).strip() if m else x.split(":")[0].strip("* "))
        labels = list(dict.fromkeys(labels))  # each once, in order
        return "**FAILS** %d of %d: %s%s" % (len(bad), len(lines), "; ".join(labels), link)
    if unverified:
        return "*unverified* %d of %d%s" % (len(unverified), len(lines), link)
    return "holds, %d run%s%s" % (len(lines), "" if len(lines) == 1 else "s", link)


def render(results, summary):
    L = []
    L.append("# Kernel matrix")
    L.append("")
    L.append("Generated by `tests/kernels/render.py` from `docs/results/kernels/*.json`, "
             "which `tests/kernels/run-matrix --full` wrote; do not edit by hand.")
    L.append("")
    head = run_header(results, summary)
    if head:
        L.append(head)
        L.append("")
    L.append("Each guest runs `sockbuf-kernel-check` on a veth pair between two network "
             "namespaces (netem delay on both sides; 198.18.0.0/15 addresses), "
             "request 128 KB. *Raw* is the kernel's own behaviour (untouched or plain "
             "`SO_*BUF`); *library* is what `sockbuf_set_initial_bufsize()` / "
             "`sockbuf_restore_floor()` give on the same kernel. Memory pressure "
             "(`net.ipv4.tcp_mem` lowered to an eighth of the pages in use for the middle half "
             "of a transfer; a cgroup v2 `memory.max`) is applied inside guests only.")
    L.append("")
    L.append("## Kernels")
    L.append("")
    L.append("| kernel | release | where | packages | features (probed) | tcp_rmem / tcp_wmem | status | wall s |")
    L.append("|---|---|---|---|---|---|---|---|")
    for r in results:
        facts = r.get("sections", {}).get("facts", {})
        pk = "<br>".join("%s %s (%s)" % (p["name"], p["version"], p["suite"])
                         for p in r.get("packages", [])) or "-"
        status, reason = effective_status(r)
        st = status + ((": " + reason) if reason else "") + booted_twice(r)
        L.append("| %s |" % " | ".join(esc(x) for x in (
            r["name"], r.get("release", "-"), r.get("where", "-"), pk,
            features(r) if r.get("sections") else "-",
            "%s / %s" % (" ".join(str(facts.get("tcp_rmem", "?")).split()),
                         " ".join(str(facts.get("tcp_wmem", "?")).split())),
            st, r.get("wall_seconds", "-"))))
    L.append("")
    L.append("## Clauses: raw kernel property and library guarantee")
    L.append("")
    L.append("C1 initial size in force, C2 autotuning grows (RTT 10 ms and up), "
             "C3 floor (nothing shrinks a buffer below its initial size), "
             "C5 window scale as untouched, C6 a lock holds.  Sizes are what "
             "`getsockopt` reads (the kernel's doubled unit); min/max are over "
             "samples every 2 ms.")
    L.append("")
    details = []
    L.append("| kernel | C1 raw | C1 library | C2 raw | C2 library | C3 raw | C3 library | C5 raw | C5 library | C6 |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        # A kernel whose contract run failed still has its check's cells.
        if not has_checks(r):
            L.append("| %s | %s |" % (r["name"], " | ".join(["skipped" if r.get("status") == "skip" else "failed"] * 9)))
            continue
        cells = [*c1(r), *c2(r), *c3(r), *c5(r), c6(r)]
        # C2 and C3 get a verdict here and their figures below.
        for i, name in ((2, "C2 raw"), (3, "C2 library"), (4, "C3 raw"), (5, "C3 library")):
            details.append((r["name"], name, cells[i]))
            cells[i] = short_verdict(cells[i], r["name"])
        L.append("| %s | %s |" % (r["name"], " | ".join(esc(c) for c in cells)))
    L.append("")
    if details:
        L.append("### Clause details")
        L.append("")
        L.append("The figures behind the C2 and C3 cells above, one line per run.")
        L.append("")
        shown = None
        for kernel, name, text in details:
            if kernel != shown:
                if shown is not None:
                    L.append("")
                L.append("#### %s" % detail_heading(kernel))
                L.append("")
                shown = kernel
            lines = [x for x in text.split("<br>") if x]
            L.append("- **%s**: %s" % (name, lines[0] if len(lines) == 1 else ""))
            if len(lines) > 1:
                L.extend("  - %s" % x for x in lines)
        L.append("")
    L.append("## Summary: where each clause holds")
    L.append("")
    L.append("From the table above (the check's own runs) and, where present, the "
             "contract suite's verdicts below.")
    L.append("")
    L.append("| clause | raw holds | raw fails | library holds | library fails | library unverified |")
    L.append("|---|---|---|---|---|---|")
    for row in summary_rows(results):
        L.append("| %s |" % " | ".join(esc(c) for c in row))
    L.append("")
    L.append("## Send buffer below its initial size")
    L.append("")
    fallen = []
    for r in results:
        for sec in ("pressure-tcp_mem", "pressure-memcg"):
            s = r.get("sections", {}).get(sec, {})
            for x in (s.get("runs", []) if isinstance(s, dict) else []):
                if "sender" not in x:
                    continue
                sd = x["sender"]
                if sd["min"]["sndbuf"] < initial(sd, "sndbuf"):
                    chain = check_event_chain(x)
                    fallen.append("- %s (%s), %s: send buffer %s at start, peak %s, "
                                  "lowest %s; %sshrunk by %s." % (
                                      r["name"], r.get("release"), x["scenario"],
                                      kb(initial(sd, "sndbuf")), kb(sd["peak"]["sndbuf"]),
                                      kb(sd["min"]["sndbuf"]),
                                      chain + "; " if chain else "",
                                      code_link(r.get("release"), MODERATE)))
    for r in results:
        c = judged_contract(r)
        if not c:
            continue
        for cl, sides in _verdicts(c).items():
            if cl != "C3":
                continue
            for side in ("raw", "library"):
                for name, why in sides.get(side, {}).get("fail", []):
                    chain = c3_event_chain(c, name, side)
                    mem = c3_memory(c, name, side)
                    writer = sndbuf_writer(c3_violations(c, name, side))
                    fallen.append("- %s (%s), sockbuf-contract scenario `%s`, C3 %s: %s; %s%s." % (
                        r["name"], r.get("release"), name, side, why,
                        mem + "; " if mem else "",
                        chain or code_link(r.get("release"), writer)))
    L.extend(fallen or ["- none observed"])
    L.append("")
    force = render_force_ceiling(results)
    if force:
        L.append("## Above the autotuning ceiling (`force-ceiling`)")
        L.append("")
        L.extend(force)
    con = [(r["name"], r, contract_rows(r)) for r in results if contract_rows(r)]
    if con:
        L.append("## sockbuf-contract in each guest")
        L.append("")
        L.extend(render_contract(con))
    dips = render_guard_dips(results)
    if dips:
        L.append("## Floor guard: time under the floor per dip, event against poll")
        L.append("")
        L.extend(dips)
    # Its own heading: results from before the floor judge add nothing.
    L.extend(render_floor_judge(results))
    tests = render_guest_tests(results)
    if tests:
        L.append("## The floor guard's BPF and event tests in each guest")
        L.append("")
        L.extend(tests)
    return "\n".join(L) + "\n"


def guard_name(g):
    """A floor guard's name: its driver, "reserve/events" for the
    lib_reserve arm's own guard."""
    name = g.get("driver", "?")
    return "reserve/" + name if g.get("arm") == "lib_reserve" else name


def event_source_text(g, secs=0):
    """Where an events guard's programs ran, or why it polled."""
    ev = g.get("event_source")
    if not isinstance(ev, dict):
        return "-"
    if ev.get("err", 0) == 0:
        fns = [n for bit, n in ((1, "__sk_mem_raise_allocated"), (2, "tcp_check_space"),
                                (4, "__tcp_check_space"), (8, "sk_page_frag_refill"),
                                (16, "tcp_stream_alloc_skb"), (32, "sk_stream_alloc_skb"),
                                (64, "sk_setsockopt"))
               if ev.get("attached", 0) & bit]
        rate = " (%.0f/s)" % (ev.get("records", 0) / secs) if secs else ""
        return "events (%s): %d records%s, %d restored on a record, %d by passes" % (
            ", ".join(fns) or "none", ev.get("records", 0), rate, ev.get("restored_events", 0),
            ev.get("restored_passes", 0))
    return "polled: %s" % (ev.get("error") or ev.get("err"))


def late_text(g):
    """How late the guard's due passes began, ms; "-" in results from
    before the guard said."""
    return "%.1f" % (g["max_late_us"] / 1e3) if "max_late_us" in g else "-"


def busy_text(g, secs):
    """The guard's passes and rounds, wall time, as a share of one core
    over @secs; "-" in results from before the suite recorded them."""
    if "pass_total_us" not in g or not secs:
        return "-"
    return "%.2f %%" % (100.0 * (g["pass_total_us"] + g.get("round_total_us", 0)) / (secs * 1e6))


def render_guard_dips(results):
    """Per kernel, per scenario with dips, per floor guard driver: the
    contract's per-dip figures (floor_guard.drivers[].dips, first to last
    sample under the floor), the bound, and for an events guard where its
    programs ran or why it polled."""
    rows = []
    for r in results:
        c = (r.get("sections") or {}).get("contract")
        if not isinstance(c, dict):
            continue
        for sc in c.get("scenarios", []):
            drv = sc.get("floor_guard", {}).get("drivers", [])
            if not any(g.get("dips", {}).get("count", 0) for g in drv):
                continue
            secs = sc.get("seconds") or 0
            for g in drv:
                d = g.get("dips", {})
                n = d.get("count", 0)
                ms = lambda k: "%.1f" % d.get(k, 0) if n else "-"
                rows.append("| %s | %s | %s | %d | %d | %s | %s | %s | %.1f | %s | %s | %s |" % (
                    r["name"], sc.get("name"), guard_name(g), g.get("sockets", 0), n,
                    ms("p50_ms"), ms("p99_ms"), ms("max_ms"), g.get("bound_us", 0) / 1e3,
                    late_text(g), busy_text(g, secs), esc(event_source_text(g, secs))))
    if not rows:
        return []
    return ["Scenarios of the contract run in which a floor guard's sockets went under "
            "their floor.  Per driver: the dips of its sockets (one buffer under its floor, "
            "first to last sample under it, both sources: a lower bound), nearest-rank "
            "percentiles, ms.  thread and timerfd poll every 10 ms; events wakes on the "
            "kernel's cuts (a safety net pass every 60 s, the library's default) where its "
            "programs load, else polls at 10 ms; reserve/events is reserve mode's own guard, "
            "the same.", "",
            "bound: the driver's, as the run that made the result computed it (runs judged "
            "before the bound came from the configuration alone added the guard's longest "
            "pass and lateness to it).  late: the longest a due pass of the guard began "
            "after it was due, by the guard's own account (its thread, or the loop around "
            "its timer, scheduled late); no bound includes it now.  busy: the guard's "
            "passes and rounds on records, wall time, as a share of one core over the "
            "scenario (an upper bound on its CPU).", "",
            "| kernel | scenario | driver | sockets | dips | p50 | p99 | max | bound | "
            "late | busy | event source |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"] + rows + [""]


# The floor judge's modes, in the order the guard drivers are named (daemon:
# the cuts scenario's served process, docs/contract.md).
JUDGE_MODES = ("thread", "timerfd", "events", "reserve", "daemon")


def judge_cell(m, key):
    """One integer figure of a judged mode, "-" where the suite left it out."""
    v = m.get(key)
    return "-" if v is None else "%d" % v


def excused_cell(m):
    """The scheduler wait the judge excused (the most on one dip, µs, read
    from the kernel); results judged before it was measured carry the
    guard's own lateness instead, which their bound included."""
    if "max_sched_wait_us" in m:
        return "%d" % m["max_sched_wait_us"]
    if "late_us" in m:
        return "late %d, in bound" % m["late_us"]
    return "-"


def measured_text(d):
    """What else the judge read of a dip's time, never excused: the guard's
    thread blocked in it and the huge pages khugepaged collapsed meanwhile;
    "" in results from before it read them."""
    parts = []
    if "blocked_us" in d:
        parts.append("blocked %d" % d["blocked_us"])
    if "thp_collapses" in d:
        parts.append("%d huge-page collapses" % d["thp_collapses"])
    return "".join(", " + p for p in parts)


def verdict_cell(m):
    """The mode's verdict, and for any other than a plain pass, why: the
    first dip past its bound or not ruled out, as the judge named it."""
    v = m.get("verdict", "?")
    for key in ("over", "unproven"):
        dips = m.get(key) or []
        if dips:
            d = dips[0]
            return "**%s**: %s %s %d µs (bound %d, %d excused%s), %s" % (
                v, d.get("socket", "?"), d.get("dir", ""), d.get("us", 0),
                d.get("bound_us", 0), d.get("sched_wait_us", 0), measured_text(d),
                d.get("how", ""))
    if v == "pass" and m.get("max_us", 0) > m.get("bound_us", 0):
        # Results judged before every dip was held to its mode's bound:
        # the longest were held to the safety net.
        return "pass: longer dips held to the safety net's %s µs (an older judge)" % (
            judge_cell(m, "net_bound_us"))
    return v if v == "pass" else "**%s**" % v


def render_floor_judge(results):
    """Per kernel, per contract scenario with a floor judge, per guard mode
    that held sockets: each dip's time under the floor on the kernel's clock
    (floor_judge), or the sampler's upper bound where the kernel clock could
    not attach; the functions it attached to and why a kernel fell back."""
    rows, notes = [], []
    for r in results:
        c = (r.get("sections") or {}).get("contract")
        if not isinstance(c, dict):
            continue
        # First-seen order: the list below must not shuffle between runs.
        fns, whys = [], []
        for sc in c.get("scenarios", []):
            fj = sc.get("floor_judge")
            if not isinstance(fj, dict):
                continue
            clock = fj.get("clock", "?")
            if clock == "kernel":
                fns += [f for f in fj.get("functions", []) if f not in fns]
                # Sampled dips the clock did not see, and its dips the
                # samples saw end sooner (runs the kernel skipped).
                extra = ["%d %s" % (fj[k], w) for k, w in
                         (("missed", "missed"), ("cut_by_samples", "ended by samples"))
                         if fj.get(k)]
                clock_cell = "kernel (%s)" % ", ".join(extra) if extra else "kernel"
            else:
                why = fj.get("why")
                if why and why not in whys:
                    whys.append(why)
                clock_cell = clock
            for mode in JUDGE_MODES:
                m = fj.get(mode)
                if not isinstance(m, dict):
                    continue
                # Only events and reserve restore on a kernel record.
                rec = judge_cell(m, "restored_by_record") if mode in ("events", "reserve") else "-"
                rows.append("| %s |" % " | ".join(esc(x) for x in (
                    r["name"], sc.get("name"), clock_cell, mode, judge_cell(m, "sockets"),
                    judge_cell(m, "dips"), judge_cell(m, "p50_us"), judge_cell(m, "p99_us"),
                    judge_cell(m, "max_us"), judge_cell(m, "bound_us"),
                    excused_cell(m), rec, verdict_cell(m))))
        parts = []
        if fns:
            parts.append("kernel clock at the exit of %s" % ", ".join("`%s`" % f for f in fns))
        if whys:
            parts.append("sampled clock: %s" % "; ".join(whys))
        if parts:
            notes.append("- %s: %s." % (r["name"], "; ".join(parts)))
    if not rows:
        return []
    return ["## Time under the floor per dip, kernel clock", "",
            "Each dip of a guarded buffer under its floor, from the moment the kernel left "
            "it below (the exit of the function that lowered it) to the moment a write "
            "brought it back, on the kernel's clock, µs; nearest-rank percentiles.  Rows "
            "whose clock is sampled are upper bounds: from the last sample above the floor "
            "to the first sample above it after the dip.  bound: the mode's bound from its "
            "configuration (docs/contract.md, \"Bounds known in advance\"); for events and "
            "reserve the event bound, the safety net's applying to writes and unwatched cut "
            "points only.  excused: the most scheduler wait (the guard's thread runnable "
            "and not run, read by the judge from the kernel) taken off one dip; results "
            "judged before the judge measured it show the guard's own lateness, which "
            "their bound included (\"late N, in bound\").  by record: dips restored on a "
            "kernel record (events, reserve).  A mode fails on a dip longer than its bound "
            "(less its excused wait), or, for events and reserve, on cuts none of which a "
            "record restored; a verdict other than pass names its first such dip, with "
            "what the judge read of it and never excuses: the guard's thread blocked "
            "(µs, its sum_block_runtime) and the huge pages khugepaged collapsed "
            "meanwhile.  A dip during which the kernel skipped a run of the events "
            "guard's own programs is held to the skip bound (1 s plus the event bound).", "",
            "| kernel | scenario | clock | mode | sockets | dips | p50 | p99 | max | bound | "
            "excused | by record | verdict |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"] + rows + [""] + \
        (notes + [""] if notes else [])


def gtest_counts(doc):
    """(passed, failed, skipped names, failed names) of a gtest JSON
    document."""
    passed, failed, skipped = [], [], []
    for suite in doc.get("testsuites", []):
        for t in suite.get("testsuite", []):
            name = "%s.%s" % (suite.get("name"), t.get("name"))
            if t.get("failures"):
                failed.append(name)
            elif t.get("result") == "SKIPPED" or t.get("skipped"):
                skipped.append(name)
            else:
                passed.append(name)
    return passed, failed, skipped


def render_guest_tests(results):
    """The unit tests of the floor guard's BPF pass and event source
    (GuardEvents, GuardBpf, GuardReserve) and the check's kernel-event
    tests, as each guest ran them (guest/init.sh)."""
    rows, skipped = [], []
    for r in results:
        secs = r.get("sections") or {}
        for key, what in (("unit", "GuardEvents, GuardBpf, GuardReserve"),
                          ("kevents", "kernel-event attribution")):
            if key not in secs:
                continue
            doc = secs[key]
            rc = r.get("section_rc", {}).get(key, "?")
            if isinstance(doc, dict) and "timeout_s" in doc:
                rows.append("| %s | %s | %s | - | - | - | **timed out** after %s s in `%s` |" % (
                    r["name"], what, rc, doc["timeout_s"], esc(doc.get("running", "?"))))
                continue
            if not isinstance(doc, dict) or "testsuites" not in doc:
                rows.append("| %s | %s | %s | - | - | - | no result: %s |" % (
                    r["name"], what, rc, esc(str(doc)[:200])))
                continue
            p, f, sk = gtest_counts(doc)
            # Failures named in the cell; skips listed under the table.
            rows.append("| %s | %s | %s | %d | %d | %d | %s |" % (
                r["name"], what, rc, len(p), len(f), len(sk),
                esc("; ".join("**FAIL** " + n for n in f) or "-")))
            if sk:
                skipped.append("- %s, %s: %s" % (r["name"], what, ", ".join(sk)))
    if not rows:
        return []
    return (["`sockbuf_unit_tests --gtest_filter='GuardEvents*:GuardBpf*:GuardReserve*'` "
             "and `sockbuf_kernel_check_kevents_tests` in each guest (as root) and on the "
             "host; a skip is a reported one (`GTEST_SKIP` with its reason, in the run's "
             "JSON).", "",
             "| kernel | tests | exit | pass | fail | skip | failed |",
             "|---|---|---|---|---|---|---|"] + rows + [""] +
            (["Skipped:", ""] + skipped + [""] if skipped else []))


def run_header(results, summary):
    """When the results were made.  Each kernel's JSON carries the start of
    the run-matrix invocation that made it ("date"); matrix.json describes
    only the last invocation, which a `--only` rerun replaces.  One
    invocation behind every result: its date, profile and wall time.
    Several: each invocation's date, profile and kernels, the matrix wall
    time only for the one matrix.json describes, if it made them all."""
    summary = summary or {}
    groups = {}
    for r in results:
        if r.get("date"):
            groups.setdefault(r["date"], []).append(r)
    host = summary.get("host_release") or next(
        (r.get("release") for r in results if r.get("where") == "host"), None)
    host_txt = ", host kernel %s" % host if host else ""
    if not groups:
        return ""
    if len(groups) == 1:
        date, rs = next(iter(groups.items()))
        named = {k.get("name") for k in summary.get("kernels", [])}
        if summary.get("date") == date and named >= {r["name"] for r in rs}:
            return ("Run: %s, profile `%s`, matrix wall time %ss on this machine's 2 cores "
                    "(qemu TCG, no KVM)%s." % (date, summary.get("profile"),
                                               summary.get("wall_seconds"), host_txt))
        return ("Run: %s, profile `%s` (kernels %s); per-kernel wall times in the table "
                "below (qemu TCG, no KVM, this machine's 2 cores)%s." % (
                    date, "/".join(sorted({r.get("profile", "?") for r in rs})),
                    ", ".join(r["name"] for r in rs), host_txt))
    parts = []
    dates = sorted(groups)
    biggest = max(dates, key=lambda d: len(groups[d]))
    for d in dates:
        rs = groups[d]
        txt = "%s, profile `%s`: %s" % (d, "/".join(sorted({r.get("profile", "?") for r in rs})),
                                        ", ".join(r["name"] for r in rs))
        if d != biggest:
            txt += " (run separately)"
        if summary.get("date") == d and {k.get("name") for k in summary.get("kernels", [])} >= {
                r["name"] for r in rs}:
            txt += ", wall time %ss" % summary.get("wall_seconds")
        parts.append(txt)
    return ("Results from %d runs of `run-matrix`, %s to %s (qemu TCG, no KVM, this "
            "machine's 2 cores)%s: %s.  Per-kernel wall times in the table below." % (
                len(dates), dates[0], dates[-1], host_txt, "; ".join(parts)))


def _force_side(raw, held, side):
    """FORCE stored, SO_BUF_LOCK 0 keeps it, lowest over the transfer, for
    "snd" or "rcv"."""
    d = raw.get(side, {})
    if d.get("force_err"):
        stored = "FORCE failed: %s" % d["force_err"]
    else:
        stored = "stored %s" % kb(d.get("stored"))
    if d.get("unlock_err"):
        unlock = "`SO_BUF_LOCK` 0: %s" % d["unlock_err"]
    else:
        unlock = "unlock %s" % ("keeps it" if d.get("unlock_keeps") else
                                "→ %s" % kb(d.get("after_unlock")))
    key, who = ("sender", "sndbuf") if side == "snd" else ("receiver", "rcvbuf")
    start = held.get("%s_at_setup" % key)
    low = held.get("%s_min" % key)
    kept = held.get("%s_kept" % who)
    transfer = "transfer: %s at connect, lowest %s%s" % (
        kb(start), kb(low), "" if kept else " (**not kept**)")
    return "; ".join((stored, unlock, transfer))


def _netns_cell(ns):
    out = []
    for key in ("net/core/wmem_max", "net/core/rmem_max", "net/ipv4/tcp_wmem"):
        f = ns.get(key)
        if f is None:
            continue
        name = key.rsplit("/", 1)[1]
        if not f.get("exists"):
            out.append("%s: not in a netns" % name)
        elif "per_netns" in f:
            out.append("%s: %s" % (name, "per netns" if f["per_netns"] else "shared"))
        else:
            out.append("%s: %s" % (name, "writable" if f.get("writable") else "read-only"))
    if ns and not ns.get("written"):
        out.append("(not written: no --allow-global-changes)")
    return ", ".join(out) or "-"


def render_force_ceiling(results):
    """The check's force-ceiling section (scenario initial_force): a size
    above net.core.[wr]mem_max and tcp_[wr]mem[2] forced with
    SOCKBUF_F_ALLOW_FORCE, per kernel.  [] when no result has it."""
    rows = []
    for r in results:
        sec = r.get("sections", {}).get("force-ceiling")
        if not isinstance(sec, dict):
            continue
        rs = sec.get("runs", [])
        if not rs:
            rows.append("| %s | - | %s | | | |" % (r["name"], esc(sec.get("skip") or sec.get(
                "error") or "no run")))
            continue
        x = rs[0]
        if "error" in x or "skip" in x:
            rows.append("| %s | - | %s | | | |" % (r["name"], esc(x.get("error") or x["skip"])))
            continue
        raw, held = x.get("force_raw", {}), x.get("force_held", {})
        rows.append("| %s | %s | %s | %s | %s | %s |" % tuple(esc(c) for c in (
            r["name"], kb(held.get("size") or raw.get("size")), _force_side(raw, held, "snd"),
            _force_side(raw, held, "rcv"), _netns_cell(x.get("netns_sysctls", {})),
            "%.1f MB/s" % x["mbytes_per_s"] if "mbytes_per_s" in x else "-")))
    if not rows:
        return []
    return ["`sockbuf-kernel-check --scenarios initial_force`: `SO_SNDBUFFORCE`/"
            "`SO_RCVBUFFORCE` of the size on a fresh socket, read back, then `SO_BUF_LOCK` 0 "
            "(does the forced size stay once unlocked?); then a transfer at the pressure RTT "
            "with `sockbuf_set_initial_bufsize(SOCKBUF_F_ALLOW_FORCE)` on both ends: the size "
            "at connect and the lowest sample.  Last column: which sysctls a new network "
            "namespace has of its own.", "",
            "| kernel | size | send buffer | receive buffer | sysctls in a new netns | "
            "throughput |", "|---|---|---|---|---|---|"] + rows + [""]


def c3_event_chain(contract, scenario, side):
    """The kernel events the suite recorded before the first C3 violation of
    @scenario's @side ("" when the results carry none: older runs, or no
    tracefs in the guest, whose reason is then given)."""
    viol = c3_violations(contract, scenario, side)
    k = viol[0].get("kernel_events") if viol else None
    if not k:
        return ""
    if not k.get("found"):
        return "kernel events: none (%s)" % k.get("reason", "")
    return event_chain(k.get("events", []), "any socket, same ms")


def c3_violations(contract, scenario, side):
    """The C3 violations of @scenario's @side as the suite listed them."""
    for s in contract.get("scenarios", []):
        if s.get("name") == scenario:
            for v in s.get("verdicts", []):
                if v.get("clause") == "C3":
                    return v.get(side, {}).get("violations", [])
    return []


def c3_memory(contract, scenario, side):
    """The socket's SK_MEMINFO at the first inet_diag sample under the floor
    of @scenario's first C3 violation on @side ("" for results without it)."""
    viol = c3_violations(contract, scenario, side)
    m = viol[0].get("memory") if viol else None
    if not m:
        return ""
    return ("memory at %.1f ms: sndbuf %d, wmem_queued %d, rmem_alloc %d, fwd_alloc %d" % (
        m["t_ms"], m["sndbuf"], m["wmem_queued"], m["rmem_alloc"], m["fwd_alloc"]))


def event_chain(events, window_label):
    """"kernel events: `name` 0.090 ms before (same socket): allocated=..., ...
    <- ...", nearest first, with the memory state the tracepoint printed.
    @window_label says how an event that names no socket was matched."""
    chain = []
    for e in events:
        f = e.get("fields", {})
        mem = ", ".join("%s=%s" % (key, f[key]) for key in (
            "allocated", "sysctl_mem", "wmem_queued", "kind") if key in f)
        chain.append("`%s` %.3f ms before (%s)%s" % (
            e["name"], e["before_ms"],
            "same socket" if e.get("match") == "socket" else window_label,
            ": " + mem if mem else ""))
    return "kernel events: " + " <- ".join(chain)


def check_event_chain(run):
    """The kernel events sockbuf-kernel-check recorded before @run's first
    sample below the send buffer's initial size; "" for results written
    before it recorded them (or a run that never went below)."""
    b = (run.get("kernel_events") or {}).get("below_initial")
    if not b:
        return ""
    if not b.get("found"):
        reason = b.get("reason", "")
        prefix = "no event seen: "
        return "no event seen (%s)" % (reason[len(prefix):] if reason.startswith(prefix)
                                       else reason)
    return event_chain(b.get("events", []),
                       "any socket, since the sample before (%.1f ms)" % b.get("window_ms", 0))


def _verdicts(c):
    """{clause: {"raw"|"library": {"pass": [...], "fail": [(scenario, why)], "skip": [...],
    "unverified": [...], "gap_ms": longest gap of the unverified ones}}}"""
    agg = {}
    for sc in c.get("scenarios", []):
        for v in sc.get("verdicts", []):
            for side in ("raw", "library"):
                d = agg.setdefault(v["clause"], {}).setdefault(
                    side, {"pass": [], "fail": [], "skip": [], "unverified": [], "gap_ms": 0,
                           "bounds": {}, "writer": {}})
                verdict = (library_verdict(sc, v) if side == "library"
                           else v.get(side, {}).get("verdict", "skip").lower())
                key = verdict if verdict in ("pass", "fail", "unverified") else "skip"
                d[key].append((sc["name"], v.get(side, {}).get("why", "")) if key == "fail"
                              else sc["name"])
                half = v.get(side, {})
                if key == "fail":
                    d["writer"][sc["name"]] = sndbuf_writer(half.get("violations", []))
                if key == "unverified":
                    gap = half.get("max_gap_ms", sc.get("sampler", {}).get("max_gap_ms", 0))
                    d["gap_ms"] = max(d["gap_ms"], gap)
                    d["bounds"][sc["name"]] = (gap, half.get("bound_ms", REPAIR_BOUND_MS))
                first = earlier_unverified(sc, v["clause"], side)
                if first:
                    d.setdefault("second", []).append((sc["name"], first))
                if v["clause"] == "C3" and side == "library":
                    guard_dips(sc, d.setdefault("dips", {}))
    return agg


def guard_dips(sc, into):
    """Adds @sc's dips per floor guard driver (floor_guard.drivers[].dips,
    docs/contract.md "Dips") to @into: {driver: [dips, longest ms,
    scenarios]}; reserve mode's own guard is "reserve/events".  Results written before the suite reported them have
    none."""
    for g in sc.get("floor_guard", {}).get("drivers", []):
        dips = g.get("dips", {})
        name = g.get("driver", "?")
        if g.get("arm") == "lib_reserve":
            name = "reserve/" + name
        t = into.setdefault(name, [0, 0.0, 0])
        t[0] += dips.get("count", 0)
        t[1] = max(t[1], dips.get("max_ms", 0.0))
        t[2] += 1


def dips_text(dips):
    """"floor guard dips: thread 3 in 4 scenarios (longest 1.5 ms); ..."""
    where = lambda scs: "%d scenario%s" % (scs, "" if scs == 1 else "s")
    return "floor guard dips: " + "; ".join(
        "%s %d in %s (longest %.1f ms)" % (drv, n, where(scs), longest) if n
        else "%s none in %s" % (drv, where(scs))
        for drv, (n, longest, scs) in sorted(dips.items()))


def earlier_unverified(sc, clause, side):
    """(gap, bound) of the first attempt when the suite ran @sc twice
    because @clause's @side came out unverified (harness/attempts.h);
    None for a scenario run once."""
    for e in sc.get("earlier_attempts", [])[:1]:
        for v in e.get("verdicts", []):
            h = v.get(side, {})
            if v.get("clause") == clause and h.get("verdict") == "unverified":
                return (h.get("max_gap_ms", 0), h.get("bound_ms", REPAIR_BOUND_MS))
    return None


def sndbuf_writer(violations):
    """The kernel function that set the first violation's send buffer: a
    reserved socket whose buffer equals its forward allocation (the unused
    reservation: reserved - queued - rmem_alloc) was set by
    tcp_should_expand_sndbuf() under TCP memory pressure; otherwise the
    moderation, sk_stream_moderate_sndbuf()."""
    for x in violations[:1]:
        m = x.get("memory") or {}
        if ("SO_RESERVE_MEM" in x.get("what", "") and m.get("sndbuf", -1) > 0
                and m.get("sndbuf") == m.get("fwd_alloc")):
            return SHOULD_EXPAND
    return MODERATE


def _side_cell(d, release, clause, notes, where):
    """One cell: counts and short verdicts; each failure's reason goes to
    @notes (listed under the table, @where naming kernel, clause and side)
    and the cell refers to it by number: tables hold figures."""
    if not d:
        return "-"
    parts = ["%d pass" % len(d["pass"])] if d["pass"] else []
    for name, why in d["fail"]:
        txt = "%s, %s: %s" % (where, name, why)
        # A send buffer under its floor: the kernel function that set it.
        if clause == "C3" and "sndbuf" in why.lower():
            txt += " (" + code_link(release, d.get("writer", {}).get(name, MODERATE)) + ")"
        notes.append(txt)
        parts.append("**FAIL %s** [%d]" % (name, len(notes)))
    if d["unverified"]:
        bounds = d.get("bounds", {})
        parts.append("%d unverified (%s)" % (len(d["unverified"]), "; ".join(
            "%s: samples up to %.0f ms apart, bound %.0f ms" % (
                (n,) + bounds.get(n, (d["gap_ms"], REPAIR_BOUND_MS))) for n in d["unverified"])))
    if d.get("second"):
        # The verdicts above are these scenarios' second attempts.
        parts.append("run twice: %s" % "; ".join(
            "%s (its first attempt unverified: samples up to %.0f ms apart, bound %.0f ms)"
            % ((n,) + first) for n, first in d["second"]))
    if d["skip"]:
        parts.append("%d skip" % len(d["skip"]))
    if d.get("dips"):
        parts.append(dips_text(d["dips"]))
    return "; ".join(parts)


def render_contract(con):
    """Clause verdicts as sockbuf-contract reported them, per kernel: raw
    kernel property and library guarantee, counted over its scenarios."""
    L = ["`sockbuf-contract` (docs/contract.md) inside each guest, "
         "`--allow-global-changes` (its `pressure` scenario lowers `tcp_mem`); "
         "the host runs it without global changes.  Each cell counts the "
         "scenarios; each failure is numbered and its reason, the suite's own, "
         "listed under the table.  A C3 "
         "library verdict that the samples alone cannot settle (a dip whose "
         "upper bound is past its guard's bound, or samples further apart "
         "than it; the tightest socket's gap and bound given per scenario) is "
         "*unverified*, not a pass "
         "(results recorded before the suite reported that itself are read "
         "against %.0f ms).  The suite runs a scenario whose library verdict "
         "was unverified, and that failed nothing, a second time; the second "
         "attempt's verdicts are counted and the cell says \"run twice\" with "
         "the first attempt's gap.  Where the suite reports them, the C3 "
         "library cell also counts the floor guard's dips under the floor per "
         "driver (the library's thread, a timerfd in a poll() loop, the thread "
         "woken by the kernel's cuts: events; reserve mode's own guard: "
         "reserve/events) and the "
         "longest (docs/contract.md, \"Dips\").  A run in which no scenario carried traffic judged "
         "nothing: it is listed as failed, without verdicts.  A send buffer "
         "under its floor links the kernel function that set it: "
         "`tcp_should_expand_sndbuf` where a reserved socket's buffer equals "
         "its unused reservation (the suite's memory snapshot), else "
         "`sk_stream_moderate_sndbuf`." % REPAIR_BOUND_MS, ""]
    clauses = []
    for _, _, c in con:
        for cl in _verdicts(c):
            if cl not in clauses:
                clauses.append(cl)
    L.append("| kernel | exit | clause | raw kernel property | library guarantee |")
    L.append("|---|---|---|---|---|")
    notes = []
    for name, res, c in con:
        rc = res.get("section_rc", {}).get("contract", "?")
        failure = contract_failure(res)
        if failure:
            L.append("| %s | %s | all | **FAILED RUN**: %s | **FAILED RUN** |" % (
                name, rc, esc(failure)))
            continue
        agg = _verdicts(c)
        for cl in clauses:
            d = agg.get(cl, {})
            L.append("| %s | %s | %s | %s | %s |" % (
                name, rc, cl,
                esc(_side_cell(d.get("raw"), res.get("release"), cl, notes,
                               "%s %s raw" % (name, cl))),
                esc(_side_cell(d.get("library"), res.get("release"), cl, notes,
                               "%s %s library" % (name, cl)))))
    L.append("")
    for k, txt in enumerate(notes, 1):
        L.append("%d. %s" % (k, txt))
    if notes:
        L.append("")
    return L


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="folder with <kernel>.json and matrix.json")
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args()
    summary = None
    sp = os.path.join(a.results, "matrix.json")
    if os.path.exists(sp):
        summary = json.load(open(sp))
    # matrix.txt's order; matrix.json names only the last run's kernels.
    order = [e.name for e in matrix.load(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "matrix.txt"))]
    order += [k["name"] for k in (summary or {}).get("kernels", []) if k["name"] not in order]
    results = []
    for p in sorted(glob.glob(os.path.join(a.results, "*.json"))):
        if os.path.basename(p) == "matrix.json":
            continue
        results.append(json.load(open(p)))
    results.sort(key=lambda r: order.index(r["name"]) if r["name"] in order else 99)
    text = render(results, summary)
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
