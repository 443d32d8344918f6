#!/usr/bin/python3
"""Regenerates the data behind Figures 8-10 of papers/join-networks.md with
`remat join` and renders them into docs/img/join_*.png, with the numbers in
docs/img/join_*.csv. Prints a markdown summary that checks the paper's claims.

Usage: /usr/bin/python3 bench/join_figures.py [--remat build/remat] [--out docs/img]
       [--no-plots]   (data and summary only; matplotlib not needed)
Models (unit costs, as in section 6): CM (L, 5L), SNN (2L, 2L, 2L), RNN (6L);
Span*(L) = 12L + 1 for all three.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

MODELS = {
    "CM": lambda L: [L, 5 * L],
    "SNN": lambda L: [2 * L, 2 * L, 2 * L],
    "RNN": lambda L: [6 * L],
}


class Remat:
    def __init__(self, binary, tmpdir):
        self.binary = binary
        self.tmpdir = tmpdir

    def _problem(self, branches):
        path = os.path.join(self.tmpdir, "p_%s.json" % "_".join(map(str, branches)))
        if not os.path.exists(path):
            with open(path, "w") as f:
                json.dump({"format": "remat-join-1", "branches": branches, "fwd_time": 1,
                           "bwd_time": 1, "turn_time": 1}, f)
        return path

    def _run(self, args):
        r = subprocess.run([self.binary, "join"] + args, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("remat join %s failed: %s" % (" ".join(args), r.stderr.strip()))
        return json.loads(r.stdout)

    def curve(self, branches):
        """[(slots, makespan)] from c_min to full storage."""
        doc = self._run([self._problem(branches), "--curve", "--format", "json"])
        return [(p["slots"], p["makespan"]) for p in doc["points"]], doc["span_star"]

    def compare(self, branches, slots):
        """(optimal makespan, EQUIV-CHAIN makespan or None)."""
        doc = self._run([self._problem(branches), "--compare", "--slots", str(slots),
                         "--format", "json"])
        eq = doc["equiv-chain"]
        return doc["join-optimal"]["makespan"], (eq["makespan"] if eq else None)


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def fig8(remat, out):
    """Makespan/Span* against memory/C_model for L = 5, 10, 15."""
    data = {}
    rows = []
    for model, shape in MODELS.items():
        for L in (5, 10, 15):
            pts, span = remat.curve(shape(L))
            full = pts[-1][0]
            data[(model, L)] = [(c / full, m / span, c) for c, m in pts]
            rows += [(model, L, c, m, round(c / full, 4), round(m / span, 4)) for c, m in pts]
    write_csv(os.path.join(out, "join_fig8.csv"),
              ["model", "L", "slots", "makespan", "memory_ratio", "makespan_ratio"], rows)
    return data


def fig9(remat, out, Ls):
    """Makespan/Span* against L for a fixed memory c."""
    data = {}
    rows = []
    for c in (7, 9, 11, 13):
        for model, shape in MODELS.items():
            for L in Ls:
                opt, _ = remat.compare(shape(L), c)
                span = 12 * L + 1
                data.setdefault((c, model), []).append((L, opt / span))
                rows.append((c, model, L, opt, round(opt / span, 4)))
    write_csv(os.path.join(out, "join_fig9.csv"),
              ["slots", "model", "L", "makespan", "makespan_ratio"], rows)
    return data


def fig10(remat, out, Ls):
    """EQUIV-CHAIN / Opt on balanced SNN against length 2L + 1."""
    data = {}
    rows = []
    for c in (9, 12, 15):
        for L in Ls:
            opt, eq = remat.compare(MODELS["SNN"](L), c)
            if eq is None:
                continue
            data.setdefault(c, []).append((2 * L + 1, eq / opt))
            rows.append((c, L, 2 * L + 1, opt, eq, round(eq / opt, 4)))
    write_csv(os.path.join(out, "join_fig10.csv"),
              ["slots", "L", "length", "optimal", "equiv_chain", "ratio"], rows)
    return data


def plot(d8, d9, d10, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
    for ax, model in zip(axes, MODELS):
        for L in (5, 10, 15):
            xs, ys, _ = zip(*d8[(model, L)])
            ax.plot(xs, ys, marker=".", label="L = %d" % L)
        ax.set_title("%s %s" % (model, {"CM": "(L, 5L)", "SNN": "(2L, 2L, 2L)",
                                          "RNN": "(6L)"}[model]))
        ax.set_xlabel("memory / C_%s" % model)
        ax.axvline(0.5, color="grey", lw=0.5, ls=":")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("makespan / Span* (clipped at 3)")
    axes[0].set_ylim(0.95, 3.0)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "join_fig8_memory.png"), dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 4, figsize=(15, 3.8), sharey=True)
    for ax, c in zip(axes, (7, 9, 11, 13)):
        for model in MODELS:
            xs, ys = zip(*d9[(c, model)])
            ax.plot(xs, ys, marker=".", label=model)
        ax.set_title("c = %d slots" % c)
        ax.set_xlabel("L")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("makespan / Span*")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "join_fig9_fixed_memory.png"), dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for c in (9, 12, 15):
        xs, ys = zip(*d10[c])
        ax.plot(xs, ys, marker=".", label="c = %d" % c)
    ax.set_xlabel("length of the SNN (2L + 1)")
    ax.set_ylabel("EQUIV-CHAIN / Opt")
    ax.set_title("EQUIV-CHAIN against the join optimum, SNN (2L, 2L, 2L)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "join_fig10_equiv_chain.png"), dpi=110)
    plt.close(fig)


def at_memory(points, ratio):
    """Makespan ratio at the largest memory <= ratio * C (points: (x, y, c))."""
    best = None
    for x, y, _ in points:
        if x <= ratio + 1e-9:
            best = y
    return best


def summary(d8, d9, d10):
    print("| model | L | makespan/Span* at memory = C/2 | at c_min + 2 |")
    print("| --- | --- | --- | --- |")
    for (model, L), pts in sorted(d8.items()):
        print("| %s | %d | %.3f | %.3f |" % (model, L, at_memory(pts, 0.5), pts[2][1]))
    print()
    worst11 = max(r for (c, _), v in d9.items() if c == 11 for _, r in v)
    print("Largest makespan/Span* with c = 11 over all models and L: %.3f" % worst11)
    print()
    print("| slots | EQUIV-CHAIN/Opt at the shortest length | at the longest |")
    print("| --- | --- | --- |")
    for c, pts in sorted(d10.items()):
        print("| %d | %.3f (length %d) | %.3f (length %d) |"
              % (c, pts[0][1], pts[0][0], pts[-1][1], pts[-1][0]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--remat", default="build/remat")
    ap.add_argument("--out", default="docs/img")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--max-l", type=int, default=20, help="largest L for Figures 9 and 10")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        remat = Remat(os.path.abspath(args.remat), tmp)
        d8 = fig8(remat, args.out)
        d9 = fig9(remat, args.out, range(1, args.max_l + 1))
        d10 = fig10(remat, args.out, range(1, args.max_l + 6))
    if not args.no_plots:
        plot(d8, d9, d10, args.out)
    summary(d8, d9, d10)


if __name__ == "__main__":
    main()
