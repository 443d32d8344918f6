"""Runs the Python tests with pytest and prints the suite's closing line
"N passed, N failed" (", N skipped" when some were). Arguments go to pytest
(e.g. -k gpt2); without a test file or folder among them, every test here
runs. The suite runner sets REMAT_LIB and PYTHONPATH."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


class _Count:
    def __init__(self) -> None:
        self.passed = self.failed = self.skipped = 0

    def pytest_runtest_logreport(self, report) -> None:  # noqa: ANN001 (pytest hook)
        if report.when == "call" and report.passed:
            self.passed += 1
        elif report.failed:
            self.failed += 1
        elif report.skipped:
            self.skipped += 1


def main() -> int:
    count = _Count()
    args = sys.argv[1:]
    paths = [a for a in args if not a.startswith("-") and os.path.exists(a.split("::")[0])]
    rc = pytest.main(["-q", "-p", "no:cacheprovider", "-rs"] + ([] if paths else [HERE]) + args,
                     plugins=[count])
    line = "%d passed, %d failed" % (count.passed, count.failed + (1 if rc not in (0, 1, 5)
                                                                   else 0))
    if count.skipped:
        line += ", %d skipped" % count.skipped
    print(line)
    return 0 if rc in (0, 5) else 1


if __name__ == "__main__":
    sys.exit(main())
