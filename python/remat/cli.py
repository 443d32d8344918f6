"""The `remat` command that `pip install` puts on the PATH.

`remat plot ...` is answered here, in Python (it needs matplotlib); every
other command is the C command-line tool shipped inside the package
(remat/bin/remat), run with exec so that its output, its exit status (0 done,
1 no schedule fits, 2 bad input or usage) and its stdin stay as they are.
The C tool itself never calls Python.
"""
from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from . import _lib

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PLOT_USAGE = ("  plot curve|timeline|join ... -o FILE                           draw a picture "
              "(Python)\n")
_PLOT_HELP = """\
usage: remat plot curve CHAIN [-a ALGORITHM ...] [options] -o FILE
       remat plot timeline CHAIN SCHEDULE [--bandwidth B] -o FILE
       remat plot join PROBLEM [--compare] [--slots S] -o FILE

Draws what the other commands print (the picture's format follows FILE's
extension: png, svg, pdf).

  curve      time per step against the memory limit, one line per algorithm
             (-a may repeat; default optimal), the store-all point and each
             algorithm's smallest feasible memory marked
  timeline   memory in use over time while SCHEDULE runs, the compute lane
             below it and, for offload schedules, the offload and prefetch
             lanes (--bandwidth: the host link, bytes per time unit or SIZE/s)
  join       makespan against memory slots for a remat-join-1 problem
             (--compare: EQUIV-CHAIN too); time against memory in bytes for
             a remat-join-2 network (--compare: optimal on the network
             flattened to one chain)

Run `remat plot COMMAND --help` for a command's options.
Exit status: 0 done, 1 no schedule fits, 2 bad input or usage.
"""


def cli_binary() -> str:
    """The C command-line tool: $REMAT_CLI, else bin/remat inside the installed
    package, else the Makefile's build/remat (development)."""
    env = os.environ.get("REMAT_CLI")
    if env:
        return env
    inside = _lib.package_file(os.path.join("bin", "remat"))
    return inside if inside else os.path.normpath(_lib.build_tree_file("remat"))


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr, as the C tool writes them."""
    sys.stderr.write("remat: %s\n" % message.replace("\n", " "))
    raise _Exit(code)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        _fail("%s: %s; see %s --help" % (self.prog.replace("remat ", ""), message, self.prog))


def _parsers() -> argparse.ArgumentParser:
    top = _Parser(prog="remat plot", add_help=False)
    sub = top.add_subparsers(dest="what", metavar="COMMAND", parser_class=_Parser)
    c = sub.add_parser("curve", prog="remat plot curve",
                       description="Time per step against the memory limit.")
    c.add_argument("chain", metavar="CHAIN")
    c.add_argument("-a", "--algorithm", action="append", dest="algorithms", metavar="ALGORITHM",
                   help="one line per algorithm; repeat for several (default: optimal)")
    c.add_argument("--points", type=int, default=0, metavar="K",
                   help="at most K points per line (default: every step for optimal, 50 else)")
    c.add_argument("-m", "--memory", metavar="M", help="top of the curve (default: store-all peak)")
    c.add_argument("--slots", type=int, metavar="S", help="memory slots of optimal (default 500)")
    c.add_argument("--segments", type=int, metavar="K", help="segments of sequential")
    c.add_argument("-b", "--bandwidth", metavar="B", help="host link of the offload algorithms")
    t = sub.add_parser("timeline", prog="remat plot timeline",
                       description="Memory in use over time while a schedule runs.")
    t.add_argument("chain", metavar="CHAIN")
    t.add_argument("schedule", metavar="SCHEDULE")
    t.add_argument("-b", "--bandwidth", metavar="B", default="0",
                   help="host link, bytes per time unit or SIZE/s such as 12GB/s")
    j = sub.add_parser("join", prog="remat plot join",
                       description="Makespan against memory slots for a remat-join-1 problem; "
                                   "time against memory in bytes for a remat-join-2 one.")
    j.add_argument("problem", metavar="PROBLEM")
    j.add_argument("--compare", action="store_true",
                   help="remat-join-1: EQUIV-CHAIN's makespan too; remat-join-2: optimal on "
                        "the network flattened to one chain")
    j.add_argument("--slots", type=int, metavar="S",
                   help="remat-join-2: memory slots of the solvers (default 500)")
    for p in (c, t, j):
        p.add_argument("-o", "--output", required=True, metavar="FILE",
                       help="the picture (png, svg, pdf, by the extension)")
        p.add_argument("--title", help="replaces the title")
        p.add_argument("--dpi", type=int, default=120, help="resolution of png output")
    return top


def _draw(ns: argparse.Namespace) -> Figure:
    from . import plot
    if ns.what == "curve":
        return plot.curve(ns.chain, ns.algorithms or ["optimal"], points=ns.points,
                          memory=ns.memory, slots=ns.slots, segments=ns.segments,
                          bandwidth=ns.bandwidth, title=ns.title)
    if ns.what == "timeline":
        return plot.timeline(ns.chain, ns.schedule, ns.bandwidth, title=ns.title)
    return plot.join(ns.problem, ns.compare, title=ns.title, slots=ns.slots)


def _plot(args: Sequence[str]) -> int:
    if not args or args[0] in ("-h", "--help", "help"):
        (sys.stdout if args else sys.stderr).write(_PLOT_HELP)
        return 0 if args else 2
    ns = _parsers().parse_args(list(args))
    inputs = [getattr(ns, k) for k in ("chain", "schedule", "problem") if getattr(ns, k, None)]
    for path in inputs:  # -o naming an input would destroy it: refused, as the C tool does
        if os.path.exists(ns.output) and os.path.exists(path) and os.path.samefile(ns.output, path):
            _fail("-o %s: that is the input file %s; write the output elsewhere"
                  % (ns.output, path))
    try:
        import matplotlib  # noqa: F401
    except ImportError as e:
        _fail("plot needs matplotlib (pip install 'remat[plot]'): %s" % e)
    try:
        fig = _draw(ns)
    except _lib.InfeasibleError as e:
        _fail(str(e), 1)
    except (_lib.RematError, ValueError) as e:
        _fail(str(e))
    # Drawn in memory, then written atomically: a failed write keeps the old file.
    buf = io.BytesIO()
    fmt = os.path.splitext(ns.output)[1].lstrip(".").lower() or "png"
    try:
        fig.savefig(buf, format=fmt, dpi=ns.dpi)
    except (OSError, ValueError) as e:
        _fail("%s: cannot write the picture: %s" % (ns.output, e))
    try:
        from ._convert import _write_bytes
        _write_bytes(ns.output, buf.getvalue())
    except _lib.RematError as e:
        _fail(str(e))
    return 0


def _help(binary: str, args: list[str]) -> int:
    """The C tool's usage with the plot line added."""
    r = subprocess.run([binary] + args, capture_output=True, text=True)
    out = r.stdout or r.stderr
    marker = "  version"
    out = out.replace(marker, PLOT_USAGE + marker, 1) if marker in out else out + PLOT_USAGE
    (sys.stdout if r.stdout else sys.stderr).write(out)
    return r.returncode


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `remat` and `python -m remat`."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] == "plot":
            return _plot(args[1:])
        binary = cli_binary()
        if not os.access(binary, os.X_OK):
            _fail("cannot find the command-line tool (looked for %s); reinstall remat or set "
                  "REMAT_CLI" % binary)
        if not args or args[0] in ("-h", "--help", "help"):
            return _help(binary, args)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(binary, ["remat"] + args)
    except _Exit as e:
        return e.code
    return 2  # not reached: execv does not return


if __name__ == "__main__":
    sys.exit(main())
