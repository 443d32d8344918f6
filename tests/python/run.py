"""Runs every tests/python/test_*.py (unittest) and prints a closing line
"N passed, N failed" (", N skipped" when some were). Exit status 1 on failure.
The suite runner sets REMAT_LIB and PYTHONPATH=python."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


class _Result(unittest.TextTestResult):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.passed = 0

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1


def main():
    sys.path.insert(0, HERE)
    root = os.path.dirname(os.path.dirname(HERE))
    if os.path.join(root, "python") not in sys.path:
        sys.path.insert(0, os.path.join(root, "python"))
    pattern = sys.argv[1] if len(sys.argv) > 1 else "test_*.py"
    suite = unittest.defaultTestLoader.discover(HERE, pattern=pattern, top_level_dir=HERE)
    runner = unittest.TextTestRunner(verbosity=2, resultclass=_Result, stream=sys.stdout)
    res = runner.run(suite)
    failed = len(res.failures) + len(res.errors) + len(res.unexpectedSuccesses)
    line = "%d passed, %d failed" % (res.passed + len(res.expectedFailures), failed)
    if res.skipped:
        line += ", %d skipped" % len(res.skipped)
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
