#!/usr/bin/python3
"""Section 5 of the pofo paper, re-run with remat's solvers and simulator.

Drives the CLI (build/remat by default) through subprocess:
  remat solve CHAIN --memory M --bandwidth B --algorithm A   (schedule JSON)
  remat simulate CHAIN SCHEDULE --bandwidth B                (simulated time)
and reports simulated times relative to the sequential (store-all) time.

Figure 2: alpha in [0, 1], M = (1 - alpha) M_low + alpha M_high, 12 GB/s.
Figure 3: 12..36 GB/s at alpha = 0.2.
Also one run at 40 GB/s (an H100's pinned host link, not measured here),
the share of recomputation overhead that offloading removes, and the memory
reduction pofo reaches for < 20 % extra time.

Plots go to docs/img/pofo_*.png (python3-matplotlib from Debian); tables to
stdout as markdown. `--quick` uses fewer points.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

CHAINS = ["resnet50-b16-500", "resnet101-b16-500", "densenet121-b16-500", "inception3-b16-500"]
ALGS = ["optimal", "pofo", "offload-only", "opportunist", "autocapper"]
GB = 1e9  # the CLI's GB is 10^9 bytes; chains are in ms, so B/ms = GB/s * 1e6


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


class Remat:
    def __init__(self, exe, tmp):
        self.exe = exe
        self.tmp = tmp

    def store_all(self, chain):
        p = run([self.exe, "solve", chain, "--memory", str(2**52), "--algorithm", "store-all"])
        d = json.loads(p.stdout)
        return d["peak_bytes"], d["time"]

    def min_memory(self, chain):
        """M_low: the smallest memory optimal (rematerialization) can meet."""
        p = run([self.exe, "curve", chain, "--points", "2"])
        rows = [line for line in p.stdout.splitlines() if re.match(r"^\d", line)]
        if p.returncode != 0 or not rows:
            raise RuntimeError("remat curve failed: " + p.stderr)
        return int(rows[0].split(",")[0])

    def time(self, chain, alg, memory, gbps):
        """Simulated time of alg's schedule, or None when it finds none."""
        cmd = [self.exe, "solve", chain, "--memory", str(int(memory)), "--algorithm", alg]
        if alg != "optimal":
            cmd += ["--bandwidth", "%gGB/s" % gbps]
        p = run(cmd)
        if p.returncode == 1:
            return None
        if p.returncode != 0:
            raise RuntimeError(" ".join(cmd) + ": " + p.stderr)
        path = os.path.join(self.tmp, "s.json")
        with open(path, "w") as f:
            f.write(p.stdout)
        sim = [self.exe, "simulate", chain, path]
        if alg != "optimal":
            sim += ["--bandwidth", "%gGB/s" % gbps]
        q = run(sim)
        d = json.loads(q.stdout)
        if not d.get("valid"):
            raise RuntimeError("invalid schedule from %s: %s" % (alg, q.stdout[:300]))
        if d["peak_bytes"] > memory:
            raise RuntimeError("%s exceeds the memory: %d > %d" % (alg, d["peak_bytes"], memory))
        return d["time"]


def memory_at(low, high, alpha):
    return (1 - alpha) * low + alpha * high


def fig2(r, chains, alphas, out):
    res = {}
    for name, path in chains:
        low, (high, seq) = r.min_memory(path), r.store_all(path)
        res[name] = {a: [] for a in ALGS}
        for al in alphas:
            m = memory_at(low, high, al)
            for a in ALGS:
                t = r.time(path, a, m, 12)
                res[name][a].append(None if t is None else t / seq)
        print("fig2", name, "done", file=sys.stderr)
    return res


def fig3(r, chains, bws, alpha):
    res = {}
    for name, path in chains:
        low, (high, seq) = r.min_memory(path), r.store_all(path)
        m = memory_at(low, high, alpha)
        res[name] = {a: [] for a in ALGS}
        for b in bws:
            for a in ALGS:
                t = r.time(path, a, m, b)
                res[name][a].append(None if t is None else t / seq)
        print("fig3", name, "done", file=sys.stderr)
    return res


def min_memory_within(r, path, alg, seq, low, high, gbps, slack=1.2, steps=10):
    """Smallest memory (bisection) where alg stays within slack x sequential time."""
    lo, hi = low, high
    t = r.time(path, alg, hi, gbps)
    if t is None or t > slack * seq:
        return None
    for _ in range(steps):
        mid = (lo + hi) / 2
        t = r.time(path, alg, mid, gbps)
        if t is not None and t <= slack * seq:
            hi = mid
        else:
            lo = mid
    return hi


def plot(res, xs, xlabel, title, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(res)
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names):
        for a in ALGS:
            ys = res[name][a]
            pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=a,
                        color="C%d" % ALGS.index(a))
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylim(0.95, 2.0)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("time / sequential time")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(res, xs, xname):
    lines = []
    for name in res:
        lines.append("\n%s\n" % name)
        lines.append("| %s | %s |" % (xname, " | ".join(ALGS)))
        lines.append("| ---: |" + " ---: |" * len(ALGS))
        for k, x in enumerate(xs):
            cells = []
            for a in ALGS:
                y = res[name][a][k]
                cells.append("-" if y is None else "%.3f" % y)
            lines.append("| %g | %s |" % (x, " | ".join(cells)))
    return "\n".join(lines)


def scale_sweep(r, chains, alpha, factors, img):
    """Slower compute is a faster link: the share of optimal's overhead that
    pofo removes at 12 GB/s x f (= every time multiplied by f), and the
    ratio gap / (forward time x link) that says how much of the memory to
    save the link can move during one forward pass."""
    rows = {}
    print("## Scale sweep (alpha = %g): share of optimal's overhead removed by pofo" % alpha)
    print("| chain | forward ms | gap GB | R = gap / (fwd x 12 GB/s) | " +
          " | ".join("x%g" % f for f in factors) + " | one third at |")
    print("| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in factors) + " | ---: |")
    for name, path in chains:
        with open(path) as fh:
            ch = json.load(fh)
        fwd = sum(st["fwd_time"] for st in ch["stages"])
        low, (high, seq) = r.min_memory(path), r.store_all(path)
        m = memory_at(low, high, alpha)
        gap = high - m
        ratio = gap / (fwd * 12 * GB / 1000)
        opt = r.time(path, "optimal", m, 12)
        shares = []
        for f in factors:
            p = r.time(path, "pofo", m, 12 * f)
            shares.append(None if p is None or opt - seq < 1e-9 else (opt - p) / (opt - seq))
        rows[name] = (ratio, shares)
        # first factor where the share reaches one third, interpolated
        third = None
        pts = [(f, x) for f, x in zip(factors, shares) if x is not None]
        for (f0, x0), (f1, x1) in zip(pts, pts[1:]):
            if x0 >= 1 / 3:
                third = f0
            elif x1 >= 1 / 3:
                third = f0 + (f1 - f0) * (1 / 3 - x0) / (x1 - x0)
            if third is not None:
                break
        print("| %s | %.0f | %.2f | %.2f | %s | %s |" % (
            name, fwd, gap / GB, ratio,
            " | ".join("-" if x is None else "%.2f" % x for x in shares),
            "-" if third is None else "x%.2f (R = %.2f)" % (third, ratio / third)))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, (ratio, shares) in rows.items():
        xs = [ratio / f for f, x in zip(factors, shares) if x is not None]
        ys = [x for x in shares if x is not None]
        ax.plot(xs, ys, "o-", label=name.split("-")[0])
    ax.axhline(1 / 3, color="gray", ls="--", label="paper: one third")
    ax.set_xscale("log")
    ax.set_xlabel("R = (store-all peak - M) / (forward time x link bandwidth)")
    ax.set_ylabel("share of optimal's overhead removed")
    ax.set_title("pofo, alpha = %g, link 12 GB/s x f" % alpha)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(img, "pofo_scale.png"), dpi=100)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--remat", default="build/remat")
    ap.add_argument("--examples", default="examples")
    ap.add_argument("--img", default="docs/img")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--scale", action="store_true",
                    help="only the time-scale (bandwidth) sweep, docs/img/pofo_scale.png")
    args = ap.parse_args()
    chains = [(c, os.path.join(args.examples, c + ".json")) for c in CHAINS]
    chains = [c for c in chains if os.path.exists(c[1])]
    if not chains:
        sys.exit("no chains found in " + args.examples)
    if args.quick:
        chains = chains[:2]
    alphas = ([0.05, 0.2, 0.5, 0.8] if args.quick else
              [0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0])
    bws = [12, 24, 36] if args.quick else [12, 16, 20, 24, 28, 32, 36]
    os.makedirs(args.img, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        r = Remat(args.remat, tmp)
        if args.scale:
            scale_sweep(r, chains, 0.2, [1, 1.25, 1.5, 1.75, 2, 2.5, 3, 4, 6], args.img)
            return
        f2 = fig2(r, chains, alphas, args.img)
        plot(f2, alphas, "memory ratio alpha", "12 GB/s, M = (1-alpha) M_low + alpha M_high",
             os.path.join(args.img, "pofo_fig2.png"))
        f3 = fig3(r, chains, bws, 0.2)
        plot(f3, bws, "bandwidth GB/s", "alpha = 0.2", os.path.join(args.img, "pofo_fig3.png"))
        h100 = fig3(r, chains, [40], 0.2)
        print("## Figure 2 (12 GB/s): time / sequential time")
        print(table(f2, alphas, "alpha"))
        print("\n## Figure 3 (alpha = 0.2): time / sequential time")
        print(table(f3, bws, "GB/s"))
        print("\n## 40 GB/s (H100 pinned host link, assumed), alpha = 0.2")
        print(table(h100, [40], "GB/s"))
        # Share of the recomputation overhead that offloading removes.
        print("\n## Overhead of optimal removed by pofo, 12 GB/s (alpha > 0 and < 1)")
        print("| chain | mean share removed | per alpha |")
        print("| --- | ---: | --- |")
        for name in f2:
            shares = []
            for k, al in enumerate(alphas):
                o, p = f2[name]["optimal"][k], f2[name]["pofo"][k]
                if o is None or p is None or o - 1 < 1e-6 or al in (0.0, 1.0):
                    continue
                shares.append((al, (o - p) / (o - 1)))
            mean = sum(s for _, s in shares) / len(shares) if shares else float("nan")
            print("| %s | %.2f | %s |" % (name, mean, ", ".join("%g: %.2f" % s for s in shares)))
        # Memory reduction for < 20 % extra time.
        print("\n## Memory for at most 20 % extra time, 12 GB/s (activations, M_high / M)")
        print("| chain | M_high MiB | optimal | pofo |")
        print("| --- | ---: | ---: | ---: |")
        for name, path in chains:
            low, (high, seq) = r.min_memory(path), r.store_all(path)
            cells = []
            for a in ["optimal", "pofo"]:
                m = min_memory_within(r, path, a, seq, low, high, 12, steps=5 if args.quick else 8)
                cells.append("-" if m is None else "%.2fx" % (high / m))
            print("| %s | %.0f | %s |" % (name, high / 2**20, " | ".join(cells)))


if __name__ == "__main__":
    main()
