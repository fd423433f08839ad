#!/usr/bin/env python3
"""Self-tests of the kernel-matrix runner's pieces that need no qemu:
marker parsing, the matrix file, package choice, and the renderer."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from kmatrix import console, fetch, matrix  # noqa: E402
import render  # noqa: E402


class ConsoleTest(unittest.TestCase):
    def test_sections_steps_and_noise(self):
        steps = []
        c = console.Collector(on_step=steps.append)
        for line in ["SeaBIOS noise\r\n", "@@SBK STEP probe@@\r\n", "@@SBK-BEGIN probe@@\r\n",
                     '{"a":\r\n', ' 1}\r\n', "@@SBK-END probe rc=0@@\r\n",
                     "@@SBK-BEGIN bad@@", "{not json", "@@SBK-END bad rc=1@@", "@@SBK DONE@@"]:
            c.feed(line)
        self.assertEqual(steps, ["probe"])
        self.assertEqual(c.sections["probe"], {"a": 1})
        self.assertEqual(c.rc, {"probe": 0, "bad": 1})
        self.assertIn("unparsed", c.sections["bad"])
        self.assertTrue(c.done)

    def test_unfinished_section_is_not_reported(self):
        c = console.Collector()
        c.feed("@@SBK-BEGIN x@@")
        c.feed("{}")
        self.assertEqual(c.sections, {})
        self.assertFalse(c.done)


# The console of CI's 6.12.117 guest that panicked (trimmed).
PANIC_CONSOLE = """kernel-check: rtt 50 ms memcg_lock: done
[   51.633384] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI
[   51.633662] CPU: 0 UID: 0 PID: 0 Comm: swapper/0 Not tainted 6.12.117+deb13-amd64 #1  Debian 6.12.117-1
[   51.633767] RIP: 0010:ttwu_do_activate+0x8d/0x240
[   51.634630] Call Trace:
[   51.637710] RIP: 0010:ttwu_do_activate+0x8d/0x240
[   51.638232] Kernel panic - not syncing: Fatal exception in interrupt
[   54.830296] Shutting down cpus with NMI""".splitlines()


class KernelCrashTest(unittest.TestCase):
    def test_untainted_panic_is_named_where_it_happened(self):
        c = console.Collector()
        for line in PANIC_CONSOLE:
            c.feed(line + "\r\n")
        self.assertTrue(c.untainted_crash())
        self.assertEqual(c.kernel_crash(), "Oops: int3: 0000 [#1] PREEMPT SMP NOPTI at "
                         "ttwu_do_activate+0x8d/0x240 (not tainted)")

    def test_tainted_panic_is_not_untainted(self):
        # The kmod guest's kernel carries our unsigned module: "OE".
        c = console.Collector()
        for line in PANIC_CONSOLE:
            c.feed(line.replace("Not tainted", "Tainted: G           OE     "))
        self.assertFalse(c.untainted_crash())
        self.assertIn("(tainted: g           oe)", c.kernel_crash())

    def test_oops_without_panic_is_no_crash(self):
        # An oops the kernel survived (a killed task) does not stop the plan.
        c = console.Collector()
        for line in PANIC_CONSOLE[:4]:
            c.feed(line)
        self.assertIsNone(c.kernel_crash())
        self.assertFalse(c.untainted_crash())


class BootRetryTest(unittest.TestCase):
    """run-matrix's _boot with run_guest stubbed: which outcomes boot twice."""

    def boot(self, consoles):
        import importlib.machinery
        import importlib.util
        from kmatrix import boot
        path = os.path.join(HERE, "run-matrix")
        spec = importlib.util.spec_from_loader(
            "run_matrix", importlib.machinery.SourceFileLoader("run_matrix", path))
        rm = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(rm)
        calls = []

        def run_guest(cmd, timeout, log, progress):
            lines = consoles[len(calls)]
            calls.append(log)
            with open(log, "w") as f:
                f.write("\n".join(lines))
            c = console.Collector()
            for line in lines:
                c.feed(line)
            return c, 0

        saved = (boot.run_guest, boot.qemu_command)
        boot.run_guest = run_guest
        boot.qemu_command = lambda *a, **k: ["qemu"]
        steps = []
        try:
            with tempfile.TemporaryDirectory() as d:
                args = type("A", (), {"cache": d, "smp": 2, "mem": 1024, "timeout": 5})()
                res = rm._boot({}, "6.12", "vmlinuz", "initrd", {}, args, {"name": "quick"},
                               lambda *a: steps.append(a))
                logs = sorted(os.listdir(os.path.join(d, "logs")))
        finally:
            boot.run_guest, boot.qemu_command = saved
        return res, len(calls), logs, steps

    def test_untainted_panic_boots_again_and_says_so(self):
        ok = ["@@SBK DONE@@"]
        res, boots, logs, steps = self.boot([PANIC_CONSOLE, ok])
        self.assertEqual((res["status"], boots), ("ok", 2))
        self.assertEqual(logs, ["6.12-quick.boot1.console.log", "6.12-quick.console.log"])
        first = res["earlier_boots"][0]
        self.assertEqual(first["console_log"], "6.12-quick.boot1.console.log")
        self.assertIn("ttwu_do_activate", first["kernel_crash"])
        self.assertIn("retry", [s[0] for s in steps])
        # The table says it beside "ok".
        cell = render.booted_twice(res)
        self.assertIn("booted twice: the first boot's kernel panicked", cell)
        self.assertIn("console 6.12-quick.boot1.console.log", cell)

    def test_second_panic_fails_and_names_both(self):
        res, boots, _, _ = self.boot([PANIC_CONSOLE, PANIC_CONSOLE])
        self.assertEqual((res["status"], boots), ("fail", 2))
        self.assertIn("guest kernel panicked: Oops: int3", res["reason"])
        self.assertIn("the first boot panicked too (6.12-quick.boot1.console.log)", res["reason"])

    def test_tainted_panic_or_plain_stop_fails_at_once(self):
        tainted = [l.replace("Not tainted", "Tainted: G           OE     ") for l in PANIC_CONSOLE]
        res, boots, _, _ = self.boot([tainted])
        self.assertEqual((res["status"], boots), ("fail", 1))
        self.assertIn("guest kernel panicked", res["reason"])
        res, boots, _, _ = self.boot([["@@SBK STEP unit@@"]])
        self.assertEqual((res["status"], boots), ("fail", 1))
        self.assertIn("guest stopped before its plan ended", res["reason"])
        self.assertNotIn("earlier_boots", res)
        self.assertEqual(render.booted_twice(res), "")


class MatrixTest(unittest.TestCase):
    def test_repository_matrix_has_quick_and_full(self):
        entries = matrix.load(os.path.join(HERE, "matrix.txt"))
        quick = [e.name for e in entries if "quick" in e.sets]
        full = [e.name for e in entries if "full" in e.sets]
        self.assertGreaterEqual(len(quick), 2)
        self.assertGreaterEqual(len([n for n in full if n != "host"]), 4)
        self.assertTrue(any(e.is_host for e in entries))

    def test_bad_line_is_an_error(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("5.10 bullseye\n")
        try:
            with self.assertRaises(ValueError):
                matrix.load(f.name)
        finally:
            os.unlink(f.name)


class MirrorLookupTest(unittest.TestCase):
    """`fetch.py mirror`, which packaging/check.sh runs for debootstrap,
    against each apt layout a Debian 12 machine can have, in a temporary
    /etc/apt."""

    DEB822 = ("Types: deb\nURIs: http://deb.example.org/debian\n"
              "Suites: bookworm bookworm-updates\nComponents: main\n"
              "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
              "Types: deb\nURIs: http://security.example.org/debian-security\n"
              "Suites: bookworm-security\nComponents: main\n")
    CLASSIC = ("# installer's list\n"
               "deb http://security.example.org/debian-security bookworm-security main\n"
               "deb [arch=amd64] http://ftp.example.org/debian bookworm main\n")

    def etc(self, files):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        os.makedirs(os.path.join(d, "sources.list.d"))
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        return d

    def run_cli(self, etc):
        return subprocess.run([sys.executable, "-B", os.path.join(HERE, "kmatrix", "fetch.py"),
                               "mirror", etc], capture_output=True, text=True)

    def test_deb822_sources_only(self):
        etc = self.etc({"sources.list.d/debian.sources": self.DEB822})
        self.assertEqual(fetch.archive_uris(etc), ("http://deb.example.org/debian",
                                                   "http://security.example.org/debian-security"))
        r = self.run_cli(etc)
        self.assertEqual((r.returncode, r.stdout), (0, "http://deb.example.org/debian\n"))

    def test_classic_sources_list_only(self):
        # debootstrap and the installer write this and no debian.sources.
        etc = self.etc({"sources.list": self.CLASSIC})
        r = self.run_cli(etc)
        self.assertEqual((r.returncode, r.stdout), (0, "http://ftp.example.org/debian\n"))

    def test_list_file_in_sources_list_d(self):
        etc = self.etc({"sources.list.d/mirror.list": self.CLASSIC})
        self.assertEqual(fetch.archive_uris(etc)[0], "http://ftp.example.org/debian")

    def test_disabled_stanza_and_other_archives_are_passed_over(self):
        etc = self.etc({"sources.list.d/a.sources": self.DEB822.replace(
            "Types: deb\nURIs: http://deb.", "Types: deb\nEnabled: no\nURIs: http://deb."),
            "sources.list.d/b.list": "deb http://apt.example.com/node bookworm main\n",
            "sources.list.d/c.list": "deb http://mirror.example.net/debian bookworm main\n"})
        self.assertEqual(fetch.archive_uris(etc)[0], "http://mirror.example.net/debian")

    def test_minbase_gets_the_security_suites_from_the_default_archive(self):
        # debootstrap writes the release alone: the security suites (6.1's
        # updates, 6.12+deb12) must still be looked up, and it is said.
        etc = self.etc({"sources.list": "deb http://deb.debian.org/debian bookworm main\n"})
        said = []
        apt = fetch.Apt(self.etc({}), ["bookworm", "bookworm-security"], said.append, etc)
        with open(apt.sourcelist) as f:
            lines = f.read().splitlines()
        self.assertIn("deb [signed-by=%s] http://deb.debian.org/debian bookworm main"
                      % fetch.KEYRING, lines)
        self.assertIn("deb [signed-by=%s] %s bookworm-security main"
                      % (fetch.KEYRING, fetch.DEFAULT_SECURITY), lines)
        self.assertEqual(len(said), 1)
        self.assertIn("bookworm-security", said[0])

    def test_mirror_file_list_is_resolved_for_debootstrap(self):
        # Debian's cloud images: apt reads a list of mirrors, debootstrap
        # needs one of them.
        mirrors = self.etc({"debian.list": "# the list\nhttp://cloud.example.org/debian\n"})
        etc = self.etc({"sources.list.d/debian.sources": self.DEB822.replace(
            "http://deb.example.org/debian", "mirror+file://%s/debian.list" % mirrors)})
        r = self.run_cli(etc)
        self.assertEqual((r.returncode, r.stdout), (0, "http://cloud.example.org/debian\n"))

    def test_none_names_what_was_looked_for(self):
        etc = self.etc({"sources.list.d/node.sources":
                        "Types: deb\nURIs: http://apt.example.com/node\nSuites: nodistro\n"})
        r = self.run_cli(etc)
        self.assertEqual((r.returncode, r.stdout), (2, ""))
        for looked in ("sources.list,", "sources.list.d/*.list", "sources.list.d/*.sources"):
            self.assertIn(etc + "/" + looked, r.stderr)
        self.assertEqual(self.run_cli(os.path.join(etc, "missing")).returncode, 2)


def _track(start_snd, min_snd, peak_snd, floor_snd, rcv_start=131072, rcv_max=131072, ws=7,
           lock=0):
    return {"setup_err": 0, "strategy": {"snd": "unlock", "rcv": "unlock"}, "report_flags": 0,
            "floor": {"snd": floor_snd, "rcv": 131072},
            "start": {"sndbuf": start_snd, "rcvbuf": rcv_start, "lock": lock, "snd_wscale": ws,
                      "rcv_wscale": ws, "tcp_state": 1},
            "end": {"sndbuf": min_snd, "rcvbuf": rcv_max, "lock": lock},
            "min": {"sndbuf": min_snd, "rcvbuf": rcv_start},
            "max": {"sndbuf": peak_snd, "rcvbuf": rcv_max}, "samples": 10,
            "below_floor_samples": {"snd": 0, "rcv": 0}, "restores": 0, "restore_err": 0,
            "min_sndbuf_after_restore": 0, "peak": {"sndbuf": peak_snd, "rcvbuf": rcv_max},
            "max_fall": {"sndbuf": peak_snd - min_snd, "rcvbuf": 0},
            "low_after_peak": {"sndbuf": min_snd, "rcvbuf": 0}, "drops": {"sndbuf": 1, "rcvbuf": 0},
            "series_ms_snd_rcv": []}


class RenderTest(unittest.TestCase):
    def result(self):
        run = lambda sc, snd, rcv: {"scenario": sc, "rtt_ms": 50, "bytes": 1, "seconds": 1,
                                    "mbytes_per_s": 1.0, "sender": snd, "receiver": rcv}
        grow = _track(131072, 131072, 4194304, 131072, rcv_max=6291456)
        return {"name": "9.9", "release": "9.9.0-1-amd64", "where": "qemu-tcg", "status": "ok",
                "packages": [{"name": "linux-image-9.9.0-1-amd64", "version": "9.9-1",
                              "suite": "sid"}],
                "sections": {
                    "facts": {"cgroup2_controllers": "memory", "netem": "yes"},
                    "probe": {"features": {"buf_lock": {"usable": True, "known": True}}},
                    "check-rtt50": {"runs": [run("untouched", grow, grow), run("initial", grow, grow),
                                             run("locked", _track(131072, 131072, 131072, 0, ws=1, lock=3),
                                                 _track(131072, 131072, 131072, 0, ws=1, lock=3))]},
                    "pressure-tcp_mem": {"runs": [run("tcp_mem", _track(131072, 4608, 4194304, 131072),
                                                      grow)]}},
                "section_rc": {}}

    def test_shrink_below_start_is_named_with_code_link(self):
        text = render.render([self.result()], None)
        self.assertIn("**FAILS raw** tcp_mem", text)
        self.assertIn("sk_stream_moderate_sndbuf", text)
        self.assertIn("v9.9/A/ident/sk_stream_moderate_sndbuf", text)
        self.assertIn("lowest 4.5K", text)
        self.assertNotIn("none observed", text)

    def test_clause_cells_hold_a_verdict_and_the_figures_go_below(self):
        text = render.render([self.result()], None)
        row = [l for l in text.splitlines() if l.startswith("| 9.9 | SO_*BUF")][0]
        # The C3 raw cell: the verdict, the failing run's label, the link.
        self.assertIn("| **FAILS** 1 of 3: tcp_mem ([figures](#kernel-99)) |", row)
        self.assertIn("| grows at 50 ms ([figures](#kernel-99)) |", row)
        self.assertNotIn("lowest", row)
        # The figures, under the heading the link names.
        details = text.split("#### Kernel 9.9", 1)[1].split("\n## ", 1)[0]
        self.assertIn("- **C3 raw**: ", details)
        self.assertIn("  - **FAILS raw** tcp_mem: snd 128K→peak 4.0M", details)
        self.assertIn("- **C2 library**: ", details)

    def test_held_floor_is_not_a_failure(self):
        r = self.result()
        r["sections"]["pressure-tcp_mem"]["runs"][0]["sender"] = _track(131072, 131072, 4194304,
                                                                        131072)
        text = render.render([r], None)
        self.assertNotIn("FAILS raw", text)
        self.assertIn("- none observed", text)

    def test_window_scale_difference_fails_c5(self):
        r = self.result()
        runs = r["sections"]["check-rtt50"]["runs"]
        runs[1]["receiver"] = _track(131072, 131072, 131072, 131072, ws=1)
        self.assertIn("FAILS: set_initial 1", render.render([r], None))

    def test_library_c1_needs_both_directions(self):
        # A send buffer left at the kernel's 85K (no SO_BUF_LOCK) is not
        # the 128K asked for, whatever the receive side does.
        r = self.result()
        for x in r["sections"]["check-rtt50"]["runs"][1:2]:
            x["sender"] = _track(87040, 87040, 4194304, 16384)
            x["sender"]["strategy"]["snd"] = "default"
        text = render.render([r], None)
        self.assertIn("FAILS: rcv 128K, snd 85K of 128K (unlock/default)", text)
        self.assertNotIn("holds: rcv 128K, snd 85K", text)

    def test_library_c1_holds_when_the_kernel_grew_an_unlocked_buffer(self):
        # On loopback tcp_sndbuf_expand raises an unlocked send buffer to
        # 1.3M at the handshake: the request was in force and autotunes.
        r = self.result()
        for x in r["sections"]["check-rtt50"]["runs"][1:2]:
            x["sender"] = _track(1320192, 1320192, 4194304, 131072)
        text = render.render([r], None)
        self.assertIn("holds: rcv 128K, snd 1.3M of 128K (unlock/unlock)", text)
        self.assertIn("grown by the kernel at the handshake", text)
        # Locked and above the request is not the request.
        for x in r["sections"]["check-rtt50"]["runs"][1:2]:
            x["sender"] = _track(1320192, 1320192, 4194304, 131072, lock=3)
        self.assertIn("FAILS: rcv 128K, snd 1.3M of 128K", render.render([r], None))

    def contract(self, scenarios):
        return {"suite": "sockbuf-contract", "scenarios": scenarios}

    def scenario(self, name, c3_lib="pass", gap=10.0, errors=(), flows=5, **extra):
        half = lambda v: {"verdict": v, "why": "w", "violations_total": 0, "violations": []}
        s = {"name": name, "sampler": {"max_gap_ms": gap},
             "integrity": {"flows": flows, "errors": list(errors)},
             "verdicts": [{"clause": "I", "raw": half("pass"), "library": half("pass")},
                          {"clause": "C3", "raw": half("pass"), "library": half(c3_lib)}]}
        s.update(extra)
        return s

    def test_c3_library_lists_the_guard_drivers_dips(self):
        r = self.result()
        drv = lambda name, n, mx: {"driver": name, "sockets": 2, "bound_us": 51300,
                                   "dips": {"count": n, "p50_ms": 0.5, "p99_ms": mx,
                                            "max_ms": mx}}
        a = self.scenario("bulk", floor_guard={"drivers": [drv("thread", 3, 1.5)]})
        b = self.scenario("pressure", floor_guard={"drivers": [drv("timerfd", 0, 0.0),
                                                               drv("thread", 2, 7.3)]})
        r["sections"]["contract"] = self.contract([a, b])
        r["section_rc"]["contract"] = 0
        self.assertIn("floor guard dips: thread 5 in 2 scenarios (longest 7.3 ms); "
                      "timerfd none in 1 scenario", render.render([r], None))
        # Results from before the suite reported dips: nothing added.
        r["sections"]["contract"] = self.contract([self.scenario("bulk")])
        self.assertNotIn("floor guard dips", render.render([r], None))

    def test_event_and_poll_dips_per_kernel_and_why_events_polled(self):
        r = self.result()
        drv = lambda name, n, mx, **kw: dict({"driver": name, "sockets": 2, "bound_us": 61000,
                                             "dips": {"count": n, "p50_ms": 0.2,
                                                      "p99_ms": mx, "max_ms": mx}}, **kw)
        ev = {"err": 0, "error": "", "attached": 3, "records": 9, "restored_events": 4,
              "restored_passes": 0}
        sc = self.scenario("pressure", floor_guard={"drivers": [
            drv("thread", 3, 12.5), drv("events", 4, 0.4, event_source=ev),
            drv("events", 1, 0.3, arm="lib_reserve",
                event_source={"err": -1, "error": "Operation not permitted"})]})
        r["sections"]["contract"] = self.contract([sc])
        r["section_rc"]["contract"] = 0
        out = render.render([r], None)
        self.assertIn("## Floor guard: time under the floor per dip", out)
        self.assertIn("| pressure | thread | 2 | 3 | 0.2 | 12.5 | 12.5 | 61.0 | - | - | - |",
                      out)
        self.assertIn("| pressure | events | 2 | 4 | 0.2 | 0.4 | 0.4 | 61.0 | - | - | events "
                      "(__sk_mem_raise_allocated, tcp_check_space): 9 records, 4", out)
        self.assertIn("| pressure | reserve/events | 2 | 1 |", out)
        self.assertIn("polled: Operation not permitted", out)

    def test_guard_lateness_time_and_record_rate(self):
        r = self.result()
        ev = {"err": 0, "error": "", "attached": 1, "records": 30, "restored_events": 3,
              "restored_passes": 0}
        g = {"driver": "events", "sockets": 2, "bound_us": 300000, "max_late_us": 240000,
             "pass_total_us": 20000, "round_total_us": 30000, "event_source": ev,
             "dips": {"count": 1, "p50_ms": 1.0, "p99_ms": 1.0, "max_ms": 1.0}}
        sc = self.scenario("parallel", seconds=10.0, floor_guard={"drivers": [g]})
        r["sections"]["contract"] = self.contract([sc])
        r["section_rc"]["contract"] = 0
        out = render.render([r], None)
        # 240 ms late; 50 ms of 10 s busy; 30 records in 10 s.
        self.assertIn("| 300.0 | 240.0 | 0.50 % | events (__sk_mem_raise_allocated): "
                      "30 records (3/s), 3 restored", out)

    def judged(self, *scenarios):
        """A result whose contract scenarios carry these floor judges."""
        r = self.result()
        r["sections"]["contract"] = self.contract(
            [self.scenario(name, floor_judge=fj) for name, fj in scenarios])
        r["section_rc"]["contract"] = 0
        return r

    def judge_mode(self, dips, mx, verdict="pass", **kw):
        return dict({"sockets": 2, "dips": dips, "p50_us": 120, "p99_us": mx, "max_us": mx,
                     "bound_us": 20500, "late_us": 400, "verdict": verdict}, **kw)

    def test_floor_judge_kernel_clock_rows_in_microseconds(self):
        fj = {"clock": "kernel", "why": "fexit on the lowering functions",
              "functions": ["__sk_mem_raise_allocated", "sock_setsockopt"], "missed": 0,
              "thread": self.judge_mode(3, 900),
              "events": self.judge_mode(5, 30000, "fail", restored_by_record=0,
                                        cuts_by_function={"__sk_mem_raise_allocated": 4})}
        out = render.render([self.judged(("pressure", fj))], None)
        self.assertIn("## Time under the floor per dip, kernel clock", out)
        self.assertIn("| 9.9 | pressure | kernel | thread | 2 | 3 | 120 | 900 | 900 | 20500 "
                      "| late 400, in bound | - | pass |", out)
        self.assertIn("| 9.9 | pressure | kernel | events | 2 | 5 | 120 | 30000 | 30000 | "
                      "20500 | late 400, in bound | 0 | **fail** |", out)
        # Only the modes that held sockets get a row.
        self.assertNotIn("| pressure | kernel | timerfd |", out)
        self.assertIn("- 9.9: kernel clock at the exit of `__sk_mem_raise_allocated`, "
                      "`sock_setsockopt`.", out)

    def test_floor_judge_names_why_a_mode_did_not_pass(self):
        over = [{"socket": "pressure/lib_initial/c0/client", "dir": "SO_SNDBUF",
                 "start_us": 100, "us": 300000, "bound_us": 15120, "sched_wait_us": 2000,
                 "how": "left below in sock_setsockopt, back at sock_setsockopt"}]
        fj = {"clock": "kernel", "why": "w", "functions": ["sock_setsockopt"],
              "thread": self.judge_mode(1, 300000, "fail", over=over, max_sched_wait_us=2000),
              "reserve": self.judge_mode(1, 673532, net_bound_us=60010000,
                                         restored_by_record=0)}
        out = render.render([self.judged(("parallel", fj))], None)
        self.assertIn("| 300000 | 20500 | 2000 | - | **fail**: pressure/lib_initial/c0/client "
                      "SO_SNDBUF 300000 µs (bound 15120, 2000 excused), left below in "
                      "sock_setsockopt, back at sock_setsockopt |", out)
        # An older judge's pass past the bound says what it held it to.
        self.assertIn("| 673532 | 20500 | late 400, in bound | 0 | pass: longer dips held to "
                      "the safety net's 60010000 µs (an older judge) |", out)

    def test_floor_judge_sampled_clock_says_why_once(self):
        why = "fexit refused: Operation not permitted"
        fj = lambda: {"clock": "sampled", "why": why,
                      "reserve": self.judge_mode(1, 8000, restored_by_record=1,
                                                 cuts_by_function={})}
        out = render.render([self.judged(("bulk", fj()), ("pressure", fj()))], None)
        self.assertIn("| 9.9 | bulk | sampled | reserve | 2 | 1 | 120 | 8000 | 8000 | 20500 "
                      "| late 400, in bound | 1 | pass |", out)
        self.assertIn("| 9.9 | pressure | sampled | reserve |", out)
        self.assertIn("- 9.9: sampled clock: %s." % why, out)
        self.assertEqual(out.count(why), 1)

    def test_floor_judge_has_a_row_for_the_daemon_mode(self):
        # The cuts scenario's served process (docs/contract.md, "The
        # daemon mode"): judged as the others, rendered as the others.
        fj = {"clock": "kernel", "why": "w", "functions": ["sk_setsockopt"],
              "daemon": self.judge_mode(10, 25500, bound_us=105040, max_sched_wait_us=0)}
        out = render.render([self.judged(("cuts", fj))], None)
        self.assertIn("| 9.9 | cuts | kernel | daemon | 2 | 10 | 120 | 25500 | 25500 | "
                      "105040 | 0 | - | pass |", out)

    def test_floor_judge_counts_the_dips_the_kernel_clock_missed(self):
        fj = {"clock": "kernel", "why": "w", "functions": ["__sk_mem_raise_allocated"],
              "missed": 2, "timerfd": self.judge_mode(4, 700)}
        out = render.render([self.judged(("parallel", fj))], None)
        self.assertIn("| 9.9 | parallel | kernel (2 missed) | timerfd | 2 | 4 | 120 | 700 |",
                      out)
        fj["missed"] = 0
        out = render.render([self.judged(("parallel", fj))], None)
        self.assertIn("| 9.9 | parallel | kernel | timerfd |", out)
        self.assertNotIn("missed)", out)

    def test_no_floor_judge_no_section(self):
        fj = {"clock": "kernel", "thread": self.judge_mode(1, 100)}
        r = self.judged(("bulk", fj))
        self.assertIn("## Time under the floor per dip, kernel clock", render.render([r], None))
        # Results from before the judge render as they did: no heading, no
        # extra lines.
        del r["sections"]["contract"]["scenarios"][0]["floor_judge"]
        self.assertEqual(render.render_floor_judge([r]), [])
        self.assertNotIn("kernel clock", render.render([r], None))

    def test_guest_tests_count_failures_and_skips(self):
        r = self.result()
        r["sections"]["unit"] = {"testsuites": [{"name": "GuardEvents", "testsuite": [
            {"name": "A", "result": "COMPLETED"},
            {"name": "B", "result": "SKIPPED"},
            {"name": "C", "result": "COMPLETED", "failures": [{"failure": "x"}]}]}]}
        r["section_rc"]["unit"] = 1
        out = render.render([r], None)
        self.assertIn("| 1 | 1 | 1 | **FAIL** GuardEvents.C |", out)
        # Skips by name under the table, not in the cell.
        self.assertIn("- 9.9, GuardEvents, GuardBpf, GuardReserve: GuardEvents.B", out)

    def test_c3_raw_violation_prints_its_kernel_event_chain(self):
        r = self.result()
        s = self.scenario("pressure")
        viol = {"socket": "pressure/raw_unlock/c1/client", "what": "SO_SNDBUF (getsockopt)",
                "t_ms": 424.2, "value": 4608, "expected": 1048576}
        s["verdicts"][1]["raw"] = {"verdict": "FAIL", "why": "1 violation(s)",
                                   "violations_total": 1, "violations": [viol]}
        r["sections"]["contract"] = self.contract([s])
        r["section_rc"]["contract"] = 0
        # Without recorded events the code link stays.
        self.assertIn("sk_stream_moderate_sndbuf", render.render([r], None))
        viol["kernel_events"] = {"found": True, "events": [
            {"name": "sock:sock_exceed_buf_limit", "before_ms": 0.25, "match": "window",
             "fields": {"allocated": "2870", "sysctl_mem": "1433,1911,2866",
                        "wmem_queued": "1048576", "kind": "SK_MEM_SEND"}}]}
        text = render.render([r], None)
        self.assertIn("kernel events: `sock:sock_exceed_buf_limit` 0.250 ms before (any socket, "
                      "same ms): allocated=2870, sysctl_mem=1433,1911,2866", text)
        viol["kernel_events"] = {"found": False, "reason": "no tracefs"}
        self.assertIn("kernel events: none (no tracefs)", render.render([r], None))

    def test_c3_library_violation_lists_its_memory_state(self):
        # Reserve mode under TCP memory pressure: the send buffer equals the
        # unused reservation; the line carries the suite's memory snapshot.
        r = self.result()
        s = self.scenario("pressure")
        viol = {"socket": "pressure/lib_reserve/c5/client", "t_ms": 1026.7, "value": 281360,
                "expected": 425984, "what": "SO_SNDBUF (getsockopt) under the floor with "
                "SO_RESERVE_MEM in force",
                "memory": {"t_ms": 1026.74, "sndbuf": 281360, "rcvbuf": 425984,
                           "wmem_queued": 1062128, "rmem_alloc": 0, "fwd_alloc": 281360}}
        s["verdicts"][1]["library"] = {"verdict": "FAIL", "why": "1 violation(s)",
                                       "violations_total": 1, "violations": [viol]}
        r["sections"]["contract"] = self.contract([s])
        r["section_rc"]["contract"] = 0
        text = render.render([r], None)
        self.assertIn("scenario `pressure`, C3 library: 1 violation(s); memory at 1026.7 ms: "
                      "sndbuf 281360, wmem_queued 1062128, rmem_alloc 0, fwd_alloc 281360", text)
        # The buffer equals the unused reservation: tcp_should_expand_sndbuf set it.
        s["verdicts"][1]["library"]["why"] = "1 violation(s); first: ... SO_SNDBUF ..."
        self.assertIn("ident/tcp_should_expand_sndbuf", render.render([r], None))
        viol["memory"]["fwd_alloc"] = 999
        self.assertNotIn("ident/tcp_should_expand_sndbuf", render.render([r], None))

    def test_failure_reason_is_a_numbered_note_under_the_table(self):
        # Tables hold figures: the cell names the failed scenario and a
        # number; the suite's reason is that numbered line under the table.
        r = self.result()
        s = self.scenario("pressure")
        why = "1 violation(s); first: pressure/lib_initial/c1/client SO_SNDBUF = 4608"
        s["verdicts"][1]["library"] = {"verdict": "FAIL", "why": why,
                                       "violations_total": 1, "violations": []}
        r["sections"]["contract"] = self.contract([s])
        r["section_rc"]["contract"] = 0
        text = render.render([r], None)
        rows = [line for line in text.splitlines() if "**FAIL pressure** [1]" in line]
        self.assertEqual(len(rows), 1, text)
        self.assertNotIn("violation", rows[0])
        self.assertIn("\n1. %s C3 library, pressure: %s" % (r["name"], why), text)

    def test_trace_dip_needs_a_kernel_event_before_the_dip(self):
        from kmatrix import outcome
        r = self.result()
        self.assertIsNone(outcome.trace_dip(r))
        viol = {"socket": "pressure/raw_unlock/c1/client", "t_ms": 424.2,
                "kernel_events": {"found": False, "reason": "none recorded in the window"}}
        s = self.scenario("pressure")
        s["verdicts"][1]["raw"]["violations"] = [viol]
        r["sections"]["trace-dip"] = {"trace": {"active": True}, "scenarios": [s]}
        self.assertEqual(outcome.trace_dip(r)[0], "fail")
        self.assertEqual(outcome.effective_status(r)[0], "fail")
        viol["kernel_events"] = {"found": True, "events": [
            {"name": "kprobe:tcp_enter_memory_pressure", "before_ms": 0.4, "match": "socket"}]}
        self.assertEqual(outcome.trace_dip(r)[0], "pass")
        self.assertEqual(outcome.effective_status(r), ("ok", None))
        r["sections"]["trace-dip"] = {"trace": {"active": False, "reason": "no tracefs"},
                                      "scenarios": [s]}
        self.assertEqual(outcome.trace_dip(r), ("skip", "no kernel events: no tracefs"))
        s["verdicts"][1]["raw"]["violations"] = []
        r["sections"]["trace-dip"]["trace"]["active"] = True
        self.assertEqual(outcome.trace_dip(r)[0], "fail")  # no dip was made
        # ... unless the kernel has no SO_BUF_LOCK: nothing can make one.
        r["sections"]["trace-dip"]["features"] = {"SO_BUF_LOCK": {"usable": False}}
        self.assertEqual(outcome.trace_dip(r)[0], "skip")

    def test_every_scenario_aborted_is_a_failed_run(self):
        r = self.result()
        why = "raw_unlock listener setup: Protocol not available"
        r["sections"]["contract"] = self.contract(
            [self.scenario(n, errors=[why], flows=0) for n in ("bulk", "parallel")])
        r["section_rc"]["contract"] = 1
        text = render.render([r], None)
        row = [l for l in text.splitlines() if l.startswith("| 9.9 | 9.9.0-1-amd64")][0]
        self.assertNotIn("| ok |", row)
        self.assertIn("| fail: contract: all 2 scenarios aborted or skipped, nothing judged "
                      "(%s) |" % why, row)
        self.assertIn("| 9.9 | 1 | all | **FAILED RUN**", text)
        # No clause verdict is taken from a run that judged nothing.
        self.assertNotIn("bulk", text)
        # The newer form says it outright.
        r["sections"]["contract"] = self.contract(
            [self.scenario("bulk", aborted=why, flows=0, errors=[why])])
        self.assertEqual(render.effective_status(r)[0], "fail")
        # One scenario with traffic: the run judged something.
        r["sections"]["contract"]["scenarios"].append(self.scenario("jitter"))
        self.assertEqual(render.effective_status(r), ("ok", None))

    def test_step_stopped_by_the_guest_step_limit_fails_the_kernel(self):
        r = self.result()
        self.assertEqual(render.effective_status(r), ("ok", None))
        r["sections"]["pressure-memcg"] = {
            "error": "did not finish within 120 s (step limit): killed",
            "stuck": "task 307 of 307 (sockbuf-kernel-) State: D (disk sleep)"}
        r["section_rc"]["pressure-memcg"] = 124
        st, why = render.effective_status(r)
        self.assertEqual(st, "fail")
        self.assertIn("pressure-memcg: did not finish within the step limit", why)

    def test_contract_that_ran_nothing_is_a_failed_run(self):
        r = self.result()
        r["sections"]["contract"] = self.contract([])
        self.assertEqual(render.effective_status(r), ("fail", "contract: no scenario ran"))
        r["sections"]["contract"] = {"unparsed": "..."}
        self.assertEqual(render.effective_status(r)[0], "fail")

    def test_second_attempt_is_said(self):
        # The suite ran "shaped" twice: its first C3 library verdict was
        # unverified; the second attempt's pass is counted, and said so.
        r = self.result()
        sc = self.scenario("shaped", gap=12.0)
        sc["earlier_attempts"] = [{"verdicts": [
            {"clause": "C3", "raw": {"verdict": "pass", "why": ""},
             "library": {"verdict": "unverified", "why": "", "max_gap_ms": 204.0,
                         "bound_ms": 75.2}}]}]
        r["sections"]["contract"] = self.contract([self.scenario("bulk", gap=12.0), sc])
        text = render.render([r], None)
        self.assertIn("2 pass; run twice: shaped (its first attempt unverified: samples up "
                      "to 204 ms apart, bound 75 ms)", text)
        # Run once: nothing said.
        del sc["earlier_attempts"]
        self.assertNotIn("run twice:", render.render([r], None))

    def test_c3_pass_with_sparse_samples_is_unverified(self):
        r = self.result()
        r["sections"]["contract"] = self.contract(
            [self.scenario("bulk", gap=414.0), self.scenario("jitter", gap=12.0),
             self.scenario("shaped", c3_lib="unverified", gap=80.0)])
        text = render.render([r], None)
        self.assertIn("1 pass; 2 unverified (bulk: samples up to 414 ms apart, bound 50 ms; "
                      "shaped: samples up to 80 ms apart, bound 50 ms)", text)
        # The suite's own bound, where it reported one.
        r["sections"]["contract"]["scenarios"][2]["verdicts"][1]["library"]["bound_ms"] = 64.3
        self.assertIn("shaped: samples up to 80 ms apart, bound 64 ms)", render.render([r], None))
        summary = [l for l in text.splitlines() if l.startswith("| C3 |")][0]
        self.assertTrue(summary.endswith("| 9.9 (bulk, shaped) |"), summary)

    def test_skipped_kernel_row(self):
        text = render.render([{"name": "5.10", "status": "skip", "reason": "no package"}], None)
        self.assertIn("skip: no package", text)


class CheckEventsRenderTest(unittest.TestCase):
    """The guest check's own runs: the kernel events recorded before the
    first sample below the send buffer's initial size."""

    def result(self, kernel_events=None):
        r = RenderTest().result()
        run = r["sections"]["pressure-tcp_mem"]["runs"][0]
        if kernel_events is not None:
            run["kernel_events"] = kernel_events
        return r

    @staticmethod
    def dip(**k):
        d = {"t_ms": 812, "sndbuf": 4608, "reference": 131072, "window_ms": 6.5,
             "found": False}
        d.update(k)
        return {"recorder": {"active": True, "enabled": ["sock:sock_exceed_buf_limit"]},
                "sender_ports": [40000, 5201], "below_initial": d, "below_floor": d}

    def line(self, text):
        lines = [ln for ln in text.splitlines() if ln.startswith("- 9.9 (") and "tcp_mem" in ln]
        self.assertEqual(len(lines), 1, text)
        return lines[0]

    def test_event_chain_before_the_source_link(self):
        ev = [{"name": "kprobe:sk_stream_wait_memory", "before_ms": 0.09, "match": "socket",
               "fields": {"sk": "0xffff1"}},
              {"name": "sock:sock_exceed_buf_limit", "before_ms": 2.5, "match": "window",
               "fields": {"allocated": "300", "sysctl_mem": "264,264,264",
                          "wmem_queued": "91136", "kind": "SK_MEM_SEND"}}]
        line = self.line(render.render([self.result(self.dip(found=True, events=ev))], None))
        self.assertIn("lowest 4.5K; kernel events: `kprobe:sk_stream_wait_memory` 0.090 ms "
                      "before (same socket) <- `sock:sock_exceed_buf_limit` 2.500 ms before "
                      "(any socket, since the sample before (6.5 ms)): allocated=300, "
                      "sysctl_mem=264,264,264, wmem_queued=91136, kind=SK_MEM_SEND; "
                      "shrunk by [`sk_stream_moderate_sndbuf`]", line)

    def test_no_event_seen_gives_the_reason(self):
        k = self.dip(reason="no event seen: no tracefs (neither /sys/kernel/tracing nor "
                            "/sys/kernel/debug/tracing is mounted)")
        line = self.line(render.render([self.result(k)], None))
        self.assertIn("lowest 4.5K; no event seen (no tracefs (neither /sys/kernel/tracing "
                      "nor /sys/kernel/debug/tracing is mounted)); shrunk by", line)

    def test_results_before_the_recorder_keep_their_text(self):
        line = self.line(render.render([self.result()], None))
        self.assertIn("lowest 4.5K; shrunk by [`sk_stream_moderate_sndbuf`]", line)
        self.assertNotIn("kernel events", line)
        self.assertNotIn("no event seen", line)


class HeaderTest(unittest.TestCase):
    def test_one_run_for_all_results_keeps_its_wall_time(self):
        rs = [{"name": "5.10", "date": "D1", "profile": "full"},
              {"name": "6.12", "date": "D1", "profile": "full"}]
        summary = {"date": "D1", "profile": "full", "wall_seconds": 900, "host_release": "h",
                   "kernels": [{"name": "5.10"}, {"name": "6.12"}]}
        self.assertEqual(render.run_header(rs, summary),
                         "Run: D1, profile `full`, matrix wall time 900s on this machine's "
                         "2 cores (qemu TCG, no KVM), host kernel h.")

    def test_no_dates_no_header(self):
        self.assertEqual(render.run_header([{"name": "9.9"}], None), "")

    def test_a_kernel_rerun_alone_is_not_the_matrix(self):
        # run-matrix --only 5.10 replaced matrix.json: its wall time is
        # 5.10's alone, and the other kernels ran earlier.
        rs = [{"name": "5.10", "date": "D2", "profile": "full"},
              {"name": "6.1", "date": "D1", "profile": "full"},
              {"name": "6.12", "date": "D1", "profile": "full"}]
        summary = {"date": "D2", "profile": "full", "wall_seconds": 395, "host_release": "h",
                   "kernels": [{"name": "5.10"}]}
        head = render.run_header(rs, summary)
        self.assertIn("Results from 2 runs of `run-matrix`, D1 to D2", head)
        self.assertIn("D1, profile `full`: 6.1, 6.12;", head)
        self.assertIn("D2, profile `full`: 5.10 (run separately), wall time 395s", head)
        self.assertNotIn("matrix wall time", head)
        text = render.render([dict(r, sections={}) for r in rs], summary)
        self.assertNotIn("matrix wall time 395", text)

    def test_force_ceiling_section(self):
        r = RenderTest().result()
        side = {"force_err": None, "stored": 16777216, "unlock_err": None,
                "after_unlock": 16777216, "unlock_keeps": True}
        r["sections"]["force-ceiling"] = {"runs": [{
            "scenario": "initial_force", "mbytes_per_s": 59.5,
            "force_raw": {"size": 16777216, "snd": side, "rcv": side},
            "netns_sysctls": {"written": True,
                              "net/core/wmem_max": {"exists": True, "per_netns": False},
                              "net/ipv4/tcp_wmem": {"exists": True, "per_netns": True}},
            "force_held": {"size": 16777216, "sender_at_setup": 16777216,
                           "receiver_at_setup": 16777216, "sender_min": 4194304,
                           "receiver_min": 16777216, "sndbuf_kept": False,
                           "rcvbuf_kept": True}}]}
        text = render.render([r], None)
        self.assertIn("## Above the autotuning ceiling (`force-ceiling`)", text)
        self.assertIn("| 9.9 | 16.0M | stored 16.0M; unlock keeps it; transfer: 16.0M at "
                      "connect, lowest 4.0M (**not kept**) | stored 16.0M; unlock keeps it; "
                      "transfer: 16.0M at connect, lowest 16.0M | wmem_max: shared, "
                      "tcp_wmem: per netns | 59.5 MB/s |", text)
        self.assertNotIn("force-ceiling", render.render([RenderTest().result()], None))


class MemcgRenderTest(unittest.TestCase):
    @staticmethod
    def arm(name, min_snd, verified=True, reserved=False):
        t = _track(131072, min_snd, 4194304, 131072)
        t["below_floor_ms"] = {"snd": 0 if min_snd >= 131072 else 700, "rcv": 0}
        t["max_sample_gap_ms"] = 40
        return {"scenario": "memcg_" + name, "arm": name, "rtt_ms": 50, "sender": t,
                "receiver": _track(131072, 131072, 131072, 131072),
                "memcg": {"sock_peak": 4 << 20, "events": {"max": 9, "oom": 3, "oom_kill": 0},
                          "reservation": {"reported": reserved, "reserve_err": None if reserved
                                          else "Operation not supported",
                                          "sampled_min": 262144 if reserved else -1,
                                          "sampled_max": 262144 if reserved else -1}},
                "integrity": {"sent": 1000, "received": 1000 if verified else 10,
                              "corrupt_at": -1, "verified": verified}}

    def test_each_arm_in_its_column(self):
        res = {"release": "9.9.0-1-amd64", "sections": {}}
        raw, lib = render.c3_memcg(res, [self.arm("raw", 4608), self.arm("initial", 9000),
                                         self.arm("reserve", 131072, reserved=True),
                                         self.arm("lock", 131072, verified=False)])
        self.assertEqual(len(raw), 2)
        self.assertEqual(len(lib), 2)
        self.assertTrue(raw[0].startswith("**FAILS raw** memcg raw"))
        self.assertIn("below it 700 ms, samples up to 40 ms apart)", raw[0])
        self.assertIn("1000 bytes verified", raw[0])
        self.assertIn("BYTES NOT VERIFIED", raw[1])
        # set_initial alone keeps no floor: shown, never a library failure.
        self.assertTrue(lib[0].startswith("memcg set_initial:"), lib[0])
        self.assertIn("not judged: set_initial alone keeps no floor", lib[0])
        self.assertFalse(render._cell_fails(lib[0]), lib[0])
        self.assertIn("reservation in force (256K..256K)", lib[1])
        self.assertNotIn("FAILS", lib[1])

    def test_raw_arm_left_locked_says_so(self):
        run = self.arm("raw", 131072)
        run["memcg"]["unlock_err"] = "Protocol not available"
        raw, _ = render.c3_memcg({"release": "5.10.0"}, [run])
        self.assertIn("SO_BUF_LOCK 0 failed (Protocol not available): locked", raw[0])
        self.assertNotIn("FAILS", raw[0])

    def test_no_reservation_says_why(self):
        _, lib = render.c3_memcg({"release": "6.1.0"}, [self.arm("reserve", 131072)])
        self.assertIn("no reservation (Operation not supported)", lib[0])

    def guard_run(self, lower, upper, open_at_end=False):
        run = self.arm("guard", 60000)
        run["sender"]["dips_snd"] = {"count": 3, "longest_lower_ms": lower,
                                     "longest_upper_ms": upper, "open_at_end": open_at_end}
        return render.c3_memcg({"release": "6.1.0"}, [run])[1][0]

    def test_guard_dips_bounded_by_samples(self):
        # Held: every dip's upper bound within 60 ms, whatever the total.
        held = self.guard_run(5, 55)
        self.assertIn("every dip restored within 60 ms", held)
        self.assertIn("3 dips, the longest 5..55 ms", held)
        self.assertNotIn("FAILS", held)
        # Failed: a dip seen under the floor for longer than the bound.
        self.assertTrue(self.guard_run(70, 900).startswith("**FAILS library**"))
        self.assertTrue(self.guard_run(0, 0, open_at_end=True).startswith("**FAILS library**"))
        # Neither provable: samples too sparse.
        unv = self.guard_run(0, 800)
        self.assertTrue(unv.startswith("*unverified*"), unv)
        self.assertNotIn("FAILS", unv)

    def test_guard_bound_includes_its_longest_pass(self):
        # A restore that waited 300 ms for the socket: the bound is
        # 10 + 300 + 50 ms, as in the contract suite.
        run = self.arm("guard", 60000)
        run["guard"] = {"passes": 10, "below": 1, "restored": 1, "max_pass_us": 300000}
        run["sender"]["dips_snd"] = {"count": 1, "longest_lower_ms": 200,
                                     "longest_upper_ms": 340, "open_at_end": False}
        lib = render.c3_memcg({"release": "6.1.0"}, [run])[1][0]
        self.assertIn("bound 360 ms (10 ms + longest pass 300.0 ms + 50 ms)", lib)
        self.assertIn("every dip restored within 360 ms", lib)


if __name__ == "__main__":
    unittest.main()
