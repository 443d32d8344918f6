"""Peak memory of reading documents: writes five documents into a temporary
folder and runs the remat command line on each under /usr/bin/time -f %M,
printing a markdown table of the peak RSS and the peak per input byte.

    python3 bench/json_memory.py --remat build/remat [--remat OTHER ...] [--runs 3]

With several --remat binaries (e.g. an older build), their runs are
interleaved and each gets its own columns. Standard library only."""
import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile

LAYER_OPS = ["aten::convolution", "aten::batch_norm", "aten::relu", "aten::add", "aten::linear"]


def real_stage(rng, i):
    """A stage as a profiler would write it, with fields remat ignores."""
    side = [28, 56, 125]
    shape = [16, rng.choice([64, 128, 256, 512]), rng.choice(side), rng.choice(side)]
    out = 4 * shape[0] * shape[1] * shape[2] * shape[3]
    return ('{"name": "layer%d.%d.conv%d", "fwd_time": %r, "bwd_time": %r, "out_bytes": %d, '
            '"saved_bytes": %d, "grad_bytes": %d, "fwd_overhead": %d, "bwd_overhead": %d, '
            '"op": "%s", "shape": [%d, %d, %d, %d], "dtype": "float32"}'
            % (i // 1000, i % 1000, i % 3, rng.uniform(0.01, 2.0), rng.uniform(0.02, 4.0), out,
               out * rng.choice([1, 2, 3]), out, rng.choice([0, 1 << 20]),
               rng.choice([0, 1 << 21]),
               rng.choice(LAYER_OPS), *shape))


MIN_STAGE = '{"fwd_time": 1, "bwd_time": 1, "out_bytes": 1, "saved_bytes": 1}'


def chain_doc(stages, extra=""):
    return ('{"format": "remat-chain-1", "name": "bench", "input_bytes": 1000, %s'
            '"stages": [\n%s\n]}\n' % (extra, ",\n".join(stages)))


def quadratic_ops(n):
    """A valid schedule that recomputes from a[0] before every backward."""
    for i in range(n, 0, -1):
        if i > 1:
            yield "Fck 1"
            for j in range(2, i):
                yield "Fn %d" % j
        yield "Fall %d" % i
        yield "B %d" % i


def schedule_doc(n):
    ops = ['"%s"' % op for op in quadratic_ops(n)]
    lines = [", ".join(ops[k:k + 8]) for k in range(0, len(ops), 8)]
    return ('{"format": "remat-schedule-1", "algorithm": "bench", "ops": [\n%s\n]}\n'
            % ",\n".join(lines))


def write(folder, name, text):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def documents(folder):
    """(label, input file whose size is reported, remat arguments)."""
    rng = random.Random(1)
    real = write(folder, "real.json", chain_doc([real_stage(rng, i) for i in range(90000)]))
    minimal = write(folder, "minimal.json", chain_doc([MIN_STAGE] * 100000))
    sched_chain = write(folder, "u1680.json", chain_doc([MIN_STAGE] * 1680))
    sched = write(folder, "schedule.json", schedule_doc(1680))
    zeros = "[" + ",".join(["0"] * 25000000) + "]"
    patho = write(folder, "numbers.json", chain_doc([MIN_STAGE], '"trace": %s, ' % zeros))
    small = "[" + ",".join(["0"] * 780000) + "]"
    patho_small = write(folder, "numbers-small.json",
                        chain_doc([MIN_STAGE], '"trace": %s, ' % small))
    solve = ["solve", None, "-a", "store-all", "--memory", "8000T", "-o", "/dev/null"]
    return [
        ("chain, 90000 stages with profiler fields", real, [a or real for a in solve]),
        ("chain, 100000 minimal stages", minimal, [a or minimal for a in solve]),
        ("schedule, %d ops (1680 stages)" % sum(1 for _ in quadratic_ops(1680)), sched,
         ["simulate", sched_chain, sched]),
        ("chain + 25M zeros in an ignored field", patho, [a or patho for a in solve]),
        ("chain + 780k zeros in an ignored field", patho_small, [a or patho_small for a in solve]),
    ]


def peak_kib(remat, args):
    r = subprocess.run(["/usr/bin/time", "-f", "%M", remat] + args, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    return int(r.stderr.strip().splitlines()[-1]), r.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--remat", action="append", required=True, help="a remat binary (repeatable)")
    ap.add_argument("--runs", type=int, default=3, help="runs per cell; the median is shown")
    opt = ap.parse_args()
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print("load average before: %s" % " ".join(load))
    with tempfile.TemporaryDirectory() as folder:
        docs = documents(folder)
        head = "| document | MB |" + "".join(
            " %s: peak MiB | per byte | exit |" % os.path.relpath(r) for r in opt.remat)
        print(head)
        print("|" + " --- |" * (2 + 3 * len(opt.remat)))
        for label, path, args in docs:
            size = os.path.getsize(path)
            runs = {r: [] for r in opt.remat}
            codes = {}
            for _ in range(opt.runs):
                for r in opt.remat:  # interleaved, so that load hits every binary alike
                    kib, codes[r] = peak_kib(r, args)
                    runs[r].append(kib)
            cells = ""
            for r in opt.remat:
                med = statistics.median(runs[r]) * 1024
                spread = (max(runs[r]) - min(runs[r])) / 1024
                cells += " %.0f (±%.0f) | %.1f | %d |" % (med / 2**20, spread / 2, med / size,
                                                          codes[r])
            print("| %s | %.1f |%s" % (label, size / 1e6, cells))
            sys.stdout.flush()
    with open("/proc/loadavg") as f:
        print("load average after: %s" % " ".join(f.read().split()[:3]))


if __name__ == "__main__":
    main()
