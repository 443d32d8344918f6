#!/usr/bin/env python3
"""remat's optimal solver side by side with rotor's own C dynamic program.

rotor (topal-team/rockmate, rotor/algorithms/dynamic_programs.c) is built
outside this repository (see BENCHMARKS.md for the commands) and passed with
--rotor DIR, the directory holding the built `dynamic_programs` extension.
Without it, this script says so and exits 0.

For each chain and slot count S it measures, each in a fresh process and
interleaved (remat, rotor, remat, rotor, ...):

  * solve: `remat solve --slots S` at one limit against rotor's
    persistent_compute_table(chain, S) at the same limit (rotor's
    discretization: unit = M // S, sizes rounded up, S slots);
  * curve: `remat curve --slots S` against rotor's table at the store-all
    peak (one rotor table gives every budget of that unit);
  * peak RSS of each process (remat: the whole CLI run; rotor: the process
    at the end of its DP, see below);
  * quality: at every limit of a sweep, remat's makespan and rotor's, each
    schedule checked by `remat simulate` (rotor's is rebuilt from its table
    and may exceed the limit: its Fall check uses the wrong gradient term).

rotor's function converts its whole table into Python dicts after the DP
(~270 bytes per entry: 8 GB at L = 339, S = 500). The child stops at the end
of the DP instead: a gc callback fires at the first Python container the
function allocates (gc threshold 1), which is right after the DP. There it
records the DP's time and RSS, reads the two C tables (found through
/proc/self/maps and glibc's chunk headers, checked against known entries),
rebuilds rotor's schedule from `what` as rotor's persistent_rec does, and
exits. The code of rotor runs unmodified.

usage: bench_rotor.py --rotor DIR [--remat build/remat] [--reps 3] [--quick]
"""
import argparse
import ctypes
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# ---- chains -------------------------------------------------------------

def random_chain(L, seed):
    """L stages plus a loss, CNN-like sizes (as bench_optimal.c), grads = outputs."""
    rng = random.Random(seed)
    stages = []
    for i in range(L + 1):
        f = 0.1 + 5 * rng.random()
        out = int(1e6 + 99e6 * rng.random())
        stages.append({
            "name": "layer%d" % (i + 1), "fwd_time": f, "bwd_time": f * (1 + 2 * rng.random()),
            "out_bytes": out, "saved_bytes": out + int(2 * out * rng.random()),
            "grad_bytes": out, "fwd_overhead": int(1e7 * rng.random()),
            "bwd_overhead": int(2e7 * rng.random())})
    return {"format": "remat-chain-1", "name": "random-%d" % L, "time_unit": "ms",
            "input_bytes": 50000000, "input_grad_bytes": 50000000, "stages": stages}


def with_options(chain, k, seed):
    """The chain with k partial saves per stage (issue 24): each keeps a[i]
    plus a random share of the rest of abar[i], and its backward takes up to
    one forward more (the recomputation of what it did not keep)."""
    rng = random.Random(seed)
    out = json.loads(json.dumps(chain))
    for st in out["stages"]:
        opts = []
        for j in range(k):
            share = rng.random()
            opts.append({"name": "p%d" % (j + 1),
                         "saved_bytes": int(st["out_bytes"] + share * (st["saved_bytes"] -
                                                                       st["out_bytes"])),
                         "fall_overhead": int(st.get("fwd_overhead", 0) * rng.random()),
                         "bwd_time": st["bwd_time"] + (1 - share) * st["fwd_time"],
                         "bwd_overhead": int(st.get("bwd_overhead", 0) * (1 + rng.random()))})
        st["options"] = opts
    return out


def sizes(chain):
    """a, abar, d (d[n] = 0, the seed) as in SPEC section 1."""
    st = chain["stages"]
    n = len(st)
    a = [chain["input_bytes"]] + [s["out_bytes"] for s in st]
    ab = [0] + [s["saved_bytes"] for s in st]
    d = [chain.get("input_grad_bytes", chain["input_bytes"])] + \
        [s.get("grad_bytes", s["out_bytes"]) for s in st]
    d[n] = 0
    return a, ab, d


def rotor_params(chain, unit):
    """rotor's Chain for remat's chain, sizes in units of `unit` bytes rounded
    up as rotor's Checkpointable.discretize does. rotor's stage i is remat's
    stage i+1; its loss (index L) gets remat's loss times and needs."""
    st = chain["stages"]
    n = len(st)
    L = n - 1
    a, ab, d = sizes(chain)
    for i in range(n):
        if d[i] != a[i]:
            raise ValueError("rotor models gradients as big as activations: "
                             "d[%d] != a[%d]" % (i, i))

    def up(v):
        return -(-v // unit)
    loss = st[n - 1]
    loss_need = max(ab[n] + loss.get("fwd_overhead", 0),
                    ab[n] + d[n - 1] + loss.get("bwd_overhead", 0))

    class P:
        pass
    p = P()
    p.length = L
    p.fweigth = [float(s["fwd_time"]) for s in st[:L]]
    p.bweigth = [float(s["bwd_time"]) for s in st[:L]] + [loss["fwd_time"] + loss["bwd_time"]]
    p.cweigth = [up(a[i]) for i in range(L + 1)]
    p.cbweigth = [up(a[0])] + [up(ab[i]) for i in range(1, L + 1)]
    p.fwd_tmp = [up(s.get("fwd_overhead", 0)) for s in st[:L]]
    p.bwd_tmp = [up(s.get("bwd_overhead", 0)) for s in st[:L]] + [up(loss_need - a[L])]
    return p


# ---- the rotor child ------------------------------------------------------

def _maps():
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if parts[1].startswith("rw") and len(parts) < 6:
                out.append((lo, hi))
    return out


def _find_tables(nbytes):
    """User pointers of glibc mmapped chunks of nbytes (opt and what)."""
    found = []
    for lo, hi in _maps():
        addr = lo
        while addr + 16 <= hi:
            size = ctypes.c_size_t.from_address(addr + 8).value
            if size & 2 and (size & ~7) >= nbytes + 16 and (size & ~7) <= nbytes + 16 + 8192 \
                    and addr + (size & ~7) <= hi:
                found.append(addr + 16)
                addr += size & ~7
            else:
                addr += 4096
    return found


def rotor_child(args):
    sys.path.insert(0, args.rotor)
    import dynamic_programs as dp
    chain = json.load(open(args.chain))
    unit = args.memory // args.slots
    p = rotor_params(chain, unit)
    L, S = p.length, args.slots
    budget = S - p.cweigth[0]
    want_curve = args.curve
    state = {}

    W = (L + 1) * (L + 1)
    nbytes = (S + 1) * W * 8

    def at_dp_end(phase, info):
        """A collection before the tables exist (the call's own argument
        handling) is not the DP's end: skip it."""
        t = time.perf_counter()
        if phase != "start" or len(_find_tables(nbytes)) < 2:
            return
        state["t"] = t
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmRSS", "VmHWM")):
                    state[line.split(":")[0]] = int(line.split()[1])
        gc.callbacks.clear()
        gc.disable()
        report()

    def report():
        res = {"dp_s": state["t"] - t0, "rss_kb": state.get("VmHWM", 0), "unit": unit,
               "budget": budget}
        ptrs = _find_tables(nbytes)
        opt = what = None
        for ptr in ptrs:  # opt's diagonal holds fw + bw where it fits; what's is 0
            for i in range(L + 1):
                v = ctypes.c_double.from_address(ptr + 8 * (S * W + i * (L + 1) + i)).value
                w = p.fweigth[i] + p.bweigth[i] if i < L else p.bweigth[L]
                if v != 0 and v != float("inf"):
                    if v == w:
                        opt = ptr
                    break
        what = [q for q in ptrs if q != opt]
        if opt is None or len(what) != 1:
            res["error"] = "rotor tables not found (%d candidates)" % len(ptrs)
            print(json.dumps(res), flush=True)
            os._exit(3)
        what = what[0]
        def OPT(m, i, k):
            return ctypes.c_double.from_address(opt + 8 * (m * W + i * (L + 1) + k)).value

        def WHAT(m, i, k):
            return ctypes.c_long.from_address(what + 8 * (m * W + i * (L + 1) + k)).value
        if want_curve:  # every budget of this unit
            res["curve"] = [[m, OPT(m, 0, L)] for m in range(max(budget, 0) + 1)]
        if budget >= 0 and OPT(budget, 0, L) != float("inf"):
            res["makespan"] = OPT(budget, 0, L)
            res["ops"] = rebuild(p, OPT, WHAT, budget)
        print(json.dumps(res), flush=True)
        os._exit(0)

    call_args = (p, S)  # passed as is: no tuple allocated by the call
    gc.collect()
    gc.set_threshold(1)
    gc.callbacks.append(at_dp_end)
    t0 = time.perf_counter()
    dp.persistent_compute_table(*call_args)
    print(json.dumps({"error": "rotor's DP ended without a collection"}), flush=True)
    os._exit(3)


def rebuild(p, OPT, WHAT, budget):
    """rotor's persistent_rec, as remat ops (rotor stage i = remat stage i+1)."""
    L = p.length
    ops = []
    stack = [("solve", 0, L, budget)]
    while stack:
        kind, lmin, lmax, m = stack.pop()
        if kind == "op":
            ops.append(lmin)
            continue
        if lmin == lmax:
            ops += ["Fall %d" % (lmin + 1), "B %d" % (lmin + 1)]
            continue
        w = WHAT(m, lmin, lmax)
        if w < 0:
            ops.append("Fall %d" % (lmin + 1))
            stack.append(("op", "B %d" % (lmin + 1), 0, 0))
            stack.append(("solve", lmin + 1, lmax, m - p.cbweigth[lmin + 1]))
        else:
            ops.append("Fck %d" % (lmin + 1))
            ops += ["Fn %d" % (k + 1) for k in range(lmin + 1, w)]
            stack.append(("solve", lmin, w - 1, m))
            stack.append(("solve", w, lmax, m - p.cweigth[w]))
    return ops


# ---- the parent -------------------------------------------------------------

def run(cmd):
    """(stdout, stderr, exit code, wall seconds) of a fresh process."""
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return proc.stdout, proc.stderr, proc.returncode, time.perf_counter() - t


def run_rss(cmd):
    """(wall seconds, peak RSS KiB, exit code) of a fresh process, output dropped."""
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.execvp(cmd[0], cmd)
    _, status, ru = os.wait4(pid, 0)
    return time.perf_counter() - t, ru.ru_maxrss, os.waitstatus_to_exitcode(status)


def rotor(args, chain_path, memory, slots, curve=False):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--rotor", args.rotor,
           "--chain", chain_path, "--memory", str(memory), "--slots", str(slots)]
    if curve:
        cmd.append("--curve")
    out, err, rc, _ = run(cmd)
    if rc != 0:
        raise RuntimeError("rotor child failed (%d): %s %s" % (rc, out, err[-400:]))
    return json.loads(out)


def remat_solve(args, chain_path, memory, slots, out_path):
    cmd = [args.remat, "solve", chain_path, "--memory", str(memory), "--slots", str(slots),
           "-o", out_path]
    if args.max_work:
        cmd += ["--max-work", args.max_work]
    wall, rss, rc = run_rss(cmd)
    return wall, rss, rc


def simulate(args, chain_path, sched_path):
    out, err, rc, _ = run([args.remat, "simulate", chain_path, sched_path])
    if rc != 0:
        raise RuntimeError("simulate failed: %s" % err)
    return json.loads(out)


def info(args, chain_path, slots):
    out, _, _, _ = run([args.remat, "info", chain_path, "--slots", str(slots)])
    vals = {}
    for line in out.splitlines():
        k, _, v = line.partition(":")
        vals[k.strip()] = v.strip()
    return int(vals["store-all peak"].split()[0]), int(vals["smallest memory"].split()[0])


def med(xs):
    return statistics.median(xs)


def spread(xs):
    return "%.3g–%.3g" % (min(xs), max(xs))


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def compare(args, name, chain_path, slots, tmp):
    peak, mm = info(args, chain_path, slots)
    rows = []
    # timing at about half the peak, interleaved
    m_half = peak // 2
    sched = os.path.join(tmp, "s.json")
    rt, rr, ct, cr, rt_dp, rr_dp, rct, rcr = [], [], [], [], [], [], [], []
    ot, orr = [], []
    opt_path = None
    if args.options:
        with open(chain_path) as f:
            doc = with_options(json.load(f), args.options, 24)
        opt_path = os.path.join(tmp, "options.json")
        with open(opt_path, "w") as f:
            json.dump(doc, f)
    for _ in range(args.reps):
        wall, rss, rc = remat_solve(args, chain_path, m_half, slots, sched)
        rt.append(wall)
        rr.append(rss)
        if opt_path:
            wall, rss, rc = remat_solve(args, opt_path, m_half, slots, sched)
            if rc != 0:
                raise RuntimeError("remat solve with options failed (%d)" % rc)
            ot.append(wall)
            orr.append(rss)
        r = rotor(args, chain_path, m_half, slots)
        rt_dp.append(r["dp_s"])
        rr_dp.append(r["rss_kb"])
        wall, rss, rc = run_rss([args.remat, "curve", chain_path, "--slots", str(slots),
                                 "--format", "json"])
        ct.append(wall)
        cr.append(rss)
        r = rotor(args, chain_path, peak, slots)
        rct.append(r["dp_s"])
        rcr.append(r["rss_kb"])
    timing = {"solve": (rt, rt_dp), "solve_rss": (rr, rr_dp), "curve": (ct, rct),
              "curve_rss": (cr, rcr), "options": (ot, orr)}
    # quality over a sweep of limits
    for k in range(args.limits):
        frac = k / (args.limits - 1)
        m = int(mm + (peak - 1 - mm) * frac) if k < args.limits - 1 else int(0.95 * peak)
        wall, rss, rc = remat_solve(args, chain_path, m, slots, sched)
        ours = simulate(args, chain_path, sched) if rc == 0 else None
        if ours:
            ours["solve_s"], ours["rss_kb"] = wall, rss
        r = rotor(args, chain_path, m, slots)
        theirs = None
        if "ops" in r:
            with open(sched, "w") as f:
                json.dump({"format": "remat-schedule-1", "algorithm": "rotor", "memory_limit": m,
                           "time": r["makespan"], "peak_bytes": 0, "ops": r["ops"]}, f)
            theirs = simulate(args, chain_path, sched)
        rows.append((m, ours, r.get("makespan"), theirs, r))
    return peak, mm, timing, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rotor", help="directory holding rotor's built dynamic_programs module")
    ap.add_argument("--remat", default=os.path.join(ROOT, "build", "remat"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-work", help="remat solve's --max-work (its table's limit), e.g. 64M")
    ap.add_argument("--limits", type=int, default=11)
    ap.add_argument("--slots", default="500,1000")
    ap.add_argument("--chains", default="resnet1001-like,random-339")
    ap.add_argument("--options", type=int, default=0,
                    help="also time remat solve with this many partial saves per stage")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--chain", help=argparse.SUPPRESS)
    ap.add_argument("--memory", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--curve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.slots = int(args.slots)
        return rotor_child(args)
    if not args.rotor or not os.path.isdir(args.rotor) or not any(
            f.startswith("dynamic_programs") and f.endswith(".so") for f in os.listdir(args.rotor)):
        print("bench_rotor: rotor's dynamic_programs module not given or not built "
              "(--rotor DIR, see BENCHMARKS.md): skipped")
        return 0
    tmp = tempfile.mkdtemp(prefix="bench_rotor")
    chains = []
    for name in args.chains.split(","):
        if name.startswith("random-"):
            path = os.path.join(tmp, name + ".json")
            with open(path, "w") as f:
                json.dump(random_chain(int(name.split("-")[1]), 339), f)
        else:
            path = os.path.join(ROOT, "examples", name + ".json")
        chains.append((name, path))
    print("load before: %s" % loadavg())
    summary = []
    for name, path in chains:
        for slots in (int(s) for s in args.slots.split(",")):
            peak, mm, timing, rows = compare(args, name, path, slots, tmp)
            print("\n### %s, S = %d (store-all peak %d B, smallest limit %d B), load %s\n"
                  % (name, slots, peak, mm, loadavg()))
            print("| limit (B) | limit / peak | remat time | remat peak <= limit | rotor DP time |"
                  " rotor simulated | rotor peak <= limit | remat / rotor | remat solve s, MiB |"
                  " rotor DP s, MiB |")
            print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
            worse = 0
            for m, ours, rmk, theirs, r in rows:
                ot = ours["time"] if ours else None
                tt = theirs["time"] if theirs and theirs.get("valid") else None
                tok = theirs and theirs.get("valid") and theirs["peak_bytes"] <= m
                ratio = "%.5f" % (ot / tt) if ot and tt else "-"
                if ot and tt and tok and ot > tt * (1 + 1e-9):
                    worse += 1
                print("| %d | %.3f | %s | %s | %s | %s | %s | %s | %s | %.2f, %.0f |" % (
                    m, m / peak, "%.4f" % ot if ot else "infeasible",
                    ("yes" if ours["peak_bytes"] <= m else "NO") if ours else "-",
                    "%.4f" % rmk if rmk else "infeasible", "%.4f" % tt if tt else "-",
                    ("yes" if tok else "NO (%d B)" % theirs["peak_bytes"]) if theirs else "-",
                    ratio, "%.2f, %.0f" % (ours["solve_s"], ours["rss_kb"] / 1024) if ours else "-",
                    r["dp_s"], r["rss_kb"] / 1024))
            (rs, ro), (rss_s, rss_o) = timing["solve"], timing["solve_rss"]
            (cs, co), (rss_c, rss_co) = timing["curve"], timing["curve_rss"]
            print("\n| what | remat median (spread) | rotor DP median (spread) | rotor / remat |")
            print("| --- | --- | --- | --- |")
            print("| solve at peak/2 (s) | %.3f (%s) | %.3f (%s) | %.1f |" % (
                med(rs), spread(rs), med(ro), spread(ro), med(ro) / med(rs)))
            print("| curve (s) | %.3f (%s) | %.3f (%s) | %.1f |" % (
                med(cs), spread(cs), med(co), spread(co), med(co) / med(cs)))
            print("| solve peak RSS (MiB) | %.1f | %.1f | %.1f |" % (
                med(rss_s) / 1024, med(rss_o) / 1024, med(rss_o) / med(rss_s)))
            print("| curve peak RSS (MiB) | %.1f | %.1f | %.1f |" % (
                med(rss_c) / 1024, med(rss_co) / 1024, med(rss_co) / med(rss_c)))
            os_, orss = timing["options"]
            if os_:
                print("\n| solve at peak/2 | median (spread) s | / plain remat | rotor / it | "
                      "peak RSS (MiB) |")
                print("| --- | --- | --- | --- | --- |")
                print("| remat, plain chain | %.3f (%s) | 1 | %.1f | %.1f |" % (
                    med(rs), spread(rs), med(ro) / med(rs), med(rss_s) / 1024))
                print("| remat, %d partial saves per stage | %.3f (%s) | %.2f | %.1f | %.1f |" % (
                    args.options, med(os_), spread(os_), med(os_) / med(rs), med(ro) / med(os_),
                    med(orss) / 1024))
            print("\nlimits where remat is slower than a valid rotor schedule: %d of %d"
                  % (worse, len(rows)))
            summary.append((name, slots, worse, len(rows), med(ro) / med(rs), med(co) / med(cs),
                            med(rss_o) / med(rss_s)))
    print("\nload after: %s" % loadavg())
    print("\n| chain | S | remat slower at | solve speedup | curve speedup | RSS ratio (solve) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for s in summary:
        print("| %s | %d | %d of %d | %.1f | %.1f | %.1f |" % s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
