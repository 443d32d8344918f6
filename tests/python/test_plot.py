"""remat.plot and `remat plot`: the pictures, what is marked on them, and the
command's exit codes. Also run against the installed wheel (make
test-installed)."""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

import remat

try:
    import matplotlib  # noqa: F401
    from matplotlib.image import imread

    import remat.plot as rp
except ImportError:  # pragma: no cover - the suite's venv has matplotlib
    rp = None

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
TINY = os.path.join(EXAMPLES, "tiny.json")
R18 = os.path.join(EXAMPLES, "resnet18-like.json")
JOIN = os.path.join(EXAMPLES, "join", "toy.json")
DATA = os.path.join(ROOT, "tests", "cli", "data")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def remat_cmd(*args, check=None):
    """Runs the package's `remat` entry point (python -m remat)."""
    r = subprocess.run([sys.executable, "-m", "remat"] + list(args), capture_output=True,
                       text=True, timeout=120)
    if check is not None and r.returncode != check:
        raise AssertionError("remat %s: exit %d, stderr %s" % (" ".join(args), r.returncode,
                                                               r.stderr))
    return r


def png_size(path):
    """(width, height) from a PNG header; fails on anything else."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == PNG_MAGIC, "%s is not a PNG" % path
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def by_gid(ax, gid):
    return [line for line in ax.get_lines() if line.get_gid() == gid]


def point(line):
    xs, ys = line.get_data()
    assert len(xs) == 1 and len(ys) == 1
    return float(xs[0]), float(ys[0])


@unittest.skipIf(rp is None, "matplotlib is not installed")
class PlotApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.chain = remat.Chain.load(R18)
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_curve_one_line_per_algorithm_with_marks(self):
        algs = ["optimal", "revolve", "sequential"]
        fig = rp.curve(self.chain, algs)
        ax = fig.axes[0]
        lines = by_gid(ax, "curve")
        self.assertEqual(len(lines), len(algs))
        for line, alg in zip(lines, algs, strict=True):
            self.assertTrue(line.get_label().startswith(alg + " "), line.get_label())
        peak, base = remat.store_all_cost(self.chain)
        (star,) = by_gid(ax, "store-all")
        self.assertEqual(point(star), (float(peak), base))
        mins = by_gid(ax, "min-memory")
        self.assertEqual(len(mins), len(algs))
        for marker, line, alg in zip(mins, lines, algs, strict=True):
            x, y = point(marker)
            cv = remat.curve(self.chain, alg)
            self.assertEqual((x, y), (float(cv.points[0][0]), cv.points[0][1]))
            # the curve starts at the smallest memory: exactly for optimal (its
            # table), within range / (4 K) for the others (docs/bounded.md; K = 50)
            m = remat.min_memory(self.chain, alg)
            self.assertGreaterEqual(x, m, alg)
            rng = peak - self.chain.input_bytes  # the bisection range, from the input up
            self.assertLessEqual(x - m, 0 if alg == "optimal" else rng / 200 + 1, alg)
            self.assertEqual(marker.get_color(), line.get_color())
            # every line starts at its minimum and runs on to the store-all peak
            xs, ys = line.get_data()
            self.assertEqual((float(xs[0]), float(ys[0])), (x, y))
            self.assertEqual(float(xs[-1]), float(peak))
        (vline,) = by_gid(ax, "min-memory-line")
        self.assertEqual(float(vline.get_xdata()[0]),
                         float(min(remat.curve(self.chain, a).min_memory for a in algs)))
        # memory in human units: ticks are round numbers of MiB, in bytes
        self.assertIn("MiB", ax.get_xlabel())
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        self.assertGreaterEqual(len(ticks), 3)
        for t in ticks:  # 450, 500, 550 MiB, not 476.837 MiB (500 MB)
            self.assertAlmostEqual(t / 2 ** 18, round(t / 2 ** 18), places=6)
        self.assertIn("ms", ax.get_ylabel())
        path = os.path.join(self.tmp.name, "curve.png")
        fig.savefig(path, dpi=80)
        w, h = png_size(path)
        self.assertEqual((w, h), (int(fig.get_figwidth() * 80), int(fig.get_figheight() * 80)))
        self.assertEqual(imread(path).shape[:2], (h, w))

    def test_curve_accepts_a_path_and_one_algorithm(self):
        fig = rp.curve(TINY, "store-all")
        self.assertEqual(len(by_gid(fig.axes[0], "curve")), 1)
        self.assertIn("B", fig.axes[0].get_xlabel())  # 171 bytes: plain bytes

    def test_timeline_of_a_plain_schedule_has_one_lane(self):
        sched = remat.solve(self.chain, "500MiB")
        fig = rp.timeline(self.chain, sched)
        mem_ax, lane_ax = fig.axes[:2]
        self.assertEqual([t.get_text() for t in lane_ax.get_yticklabels()], ["compute"])
        res = remat.simulate(self.chain, sched)
        (mem,) = by_gid(mem_ax, "memory")
        xs, ys = mem.get_data()
        self.assertEqual(max(ys), res.peak_bytes)
        self.assertAlmostEqual(float(xs[-1]), res.time, places=6)
        (limit,) = by_gid(mem_ax, "limit")
        self.assertEqual(limit.get_ydata()[0], 500 * 2 ** 20)
        (peak,) = by_gid(mem_ax, "peak")
        self.assertEqual(peak.get_ydata()[0], res.peak_bytes)
        # one bar per compute op (Del takes no time and has no bar)
        bars = sum(len(c.get_paths()) for c in lane_ax.collections)
        self.assertEqual(bars, sum(1 for op in sched.ops if not op.startswith("Del")))

    def test_timeline_of_an_offload_schedule_has_three_lanes(self):
        path = os.path.join(self.tmp.name, "pofo.json")
        remat_cmd("solve", R18, "--memory", "470MiB", "-a", "pofo", "--bandwidth", "12GB/s",
                  "-o", path, check=0)
        sched = remat.Schedule.load(path)
        # the binding solves the same schedule
        same = remat.solve(self.chain, "470MiB", algorithm="pofo", bandwidth="12GB/s")
        self.assertEqual(same.ops, sched.ops)
        no_link = remat.solve(self.chain, "470MiB", algorithm="pofo")
        self.assertFalse(any(op.startswith("Off") for op in no_link.ops))
        self.assertTrue(any(op.startswith("Off") for op in sched.ops))
        tl = remat.timeline(self.chain, sched, "12GB/s")
        self.assertTrue(tl.offloads)
        self.assertEqual({e.lane for e in tl.events}, {"compute", "offload", "prefetch"})
        for e in tl.events:
            self.assertEqual(e.lane == "offload", e.text.startswith("Off"))
            self.assertEqual(e.lane == "prefetch", e.text.startswith("Pre"))
        # 12 GB/s is 1.2e7 bytes per ms, the chain's time unit
        self.assertEqual(tl.bandwidth, 12e9 * 1e-3)
        self.assertEqual(tl, remat.timeline(self.chain, sched, 12e6))
        fig = rp.timeline(self.chain, sched, "12GB/s")
        lane_ax = fig.axes[1]
        self.assertEqual([t.get_text().split("\n")[0] for t in lane_ax.get_yticklabels()],
                         ["compute", "offload", "prefetch"])
        self.assertIn("12 GB/s", fig.axes[0].get_title())
        res = remat.simulate(self.chain, sched, bandwidth=12e6)
        self.assertEqual(tl.time, res.time)
        self.assertEqual(tl.peak_bytes, res.peak_bytes)
        self.assertEqual(max(by_gid(fig.axes[0], "memory")[0].get_ydata()), res.peak_bytes)

    def test_timeline_rejects_an_invalid_schedule(self):
        bad = remat.Schedule.from_ops(["Fall 1", "B 2"])
        with self.assertRaises(remat.InputError) as cm:
            rp.timeline(self.chain, bad)
        self.assertIn("op 1 (B 2)", str(cm.exception))
        with self.assertRaises(remat.InputError):
            remat.timeline(self.chain, remat.solve(self.chain, "500MiB"), "fast")

    def test_join_marks_cmin_and_full_storage(self):
        jc = remat.join_curve(JOIN, compare=True)
        fig = rp.join(JOIN, compare=True)
        ax = fig.axes[0]
        lines = by_gid(ax, "curve")
        self.assertEqual([line.get_label() for line in lines],
                         ["optimal (Theorem 3)", "EQUIV-CHAIN"])
        self.assertEqual(point(by_gid(ax, "min-memory")[0]),
                         (float(jc.min_slots), jc.points[0][1]))
        self.assertEqual(point(by_gid(ax, "store-all")[0]), (float(jc.full_slots), jc.span_star))
        self.assertEqual(jc.points[0][0], jc.min_slots)
        self.assertEqual(jc.points[-1][0], jc.full_slots)
        self.assertEqual(jc.points[-1][1], jc.span_star)
        self.assertEqual(len(by_gid(rp.join(JOIN).axes[0], "curve")), 1)
        with open(JOIN) as f:
            self.assertEqual(remat.join_curve(json.load(f)), remat.join_curve(JOIN))

    def test_join2_curves_in_bytes(self):
        path = os.path.join(EXAMPLES, "join", "clip-like.json")
        net = remat.JoinProblem.load(path)
        fig = rp.join(path, compare=True)
        ax = fig.axes[0]
        lines = by_gid(ax, "curve")
        self.assertEqual([line.get_label().split(" (from")[0] for line in lines],
                         ["join solver", "flat chain (optimal)"])
        cv = net.curve()
        self.assertEqual(point(by_gid(ax, "min-memory")[0]), (float(cv.points[0][0]),
                                                              cv.points[0][1]))
        peak, base = net.store_all_cost()
        self.assertEqual(point(by_gid(ax, "store-all")[0]), (float(peak), base))
        self.assertIn("GiB", ax.get_xlabel())
        self.assertEqual(len(by_gid(rp.join(net).axes[0], "curve")), 1)


@unittest.skipIf(rp is None, "matplotlib is not installed")
class PlotCommandTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def out(self, name):
        return os.path.join(self.tmp.name, name)

    def test_curve_timeline_join_write_pngs(self):
        remat_cmd("plot", "curve", R18, "-a", "optimal", "-a", "revolve", "-o",
                  self.out("c.png"), check=0)
        remat_cmd("solve", R18, "--memory", "470MiB", "-a", "pofo", "--bandwidth", "12GB/s",
                  "-o", self.out("s.json"), check=0)
        remat_cmd("plot", "timeline", R18, self.out("s.json"), "--bandwidth", "12GB/s", "-o",
                  self.out("t.png"), check=0)
        remat_cmd("plot", "join", JOIN, "--compare", "-o", self.out("j.png"), "--dpi", "50",
                  check=0)
        for name in ("c.png", "t.png", "j.png"):
            w, h = png_size(self.out(name))
            self.assertGreater(w, 300)
            self.assertGreater(h, 200)
        self.assertEqual(png_size(self.out("j.png")), (int(8.5 * 50), int(5.8 * 50)))
        remat_cmd("plot", "curve", TINY, "-o", self.out("c.svg"), check=0)
        with open(self.out("c.svg")) as f:
            self.assertIn("<svg", f.read(2000))

    def test_bad_inputs_exit_2_with_one_line(self):
        cases = [
            (["plot", "curve", TINY], "-o/--output"),
            (["plot", "curve", self.out("missing.json"), "-o", self.out("x.png")],
             "missing.json: cannot open file"),
            (["plot", "curve", TINY, "-a", "fastest", "-o", self.out("x.png")], "fastest"),
            (["plot", "curve", TINY, "--points", "many", "-o", self.out("x.png")], "--points"),
            (["plot", "curve", TINY, "-o", self.out("x.nope")], "nope"),
            (["plot", "curve", TINY, "-o", self.out("no/dir/x.png")], "cannot write"),
            (["plot", "timeline", TINY, JOIN, "-o", self.out("x.png")], JOIN),
            (["plot", "timeline", R18, os.path.join(DATA, "storeall.sched.json"),
              "-o", self.out("x.png")], "op "),
            (["plot", "timeline", os.path.join(DATA, "tiny.json"),
              os.path.join(DATA, "storeall.sched.json"), "--bandwidth", "-3",
              "-o", self.out("x.png")], "bandwidth"),
            (["plot", "join", TINY, "-o", self.out("x.png")], "tiny.json"),
            (["plot", "sketch", TINY], "invalid choice"),
            (["plot"], "usage: remat plot"),
        ]
        for args, needle in cases:
            r = remat_cmd(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            if args != ["plot"]:
                self.assertEqual(len(r.stderr.splitlines()), 1, (args, r.stderr))
                self.assertTrue(r.stderr.startswith("remat: "), r.stderr)
            self.assertIn(needle, r.stderr, args)
            self.assertEqual(r.stdout, "", args)
        self.assertFalse(os.path.exists(self.out("x.png")))

    def test_help(self):
        r = remat_cmd("plot", "--help", check=0)
        self.assertIn("remat plot timeline CHAIN SCHEDULE", r.stdout)
        for what in ("curve", "timeline", "join"):
            r = remat_cmd("plot", what, "--help", check=0)
            self.assertIn("usage: remat plot " + what, r.stdout)


if __name__ == "__main__":
    unittest.main()
