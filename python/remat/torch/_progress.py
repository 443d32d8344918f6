"""Progress lines on stderr for work that takes more than about 2 s."""
from __future__ import annotations

import sys
import time
from typing import Any, Optional

DELAY = 2.0


class Progress:
    """`enabled`: None shows the line only when stderr is a terminal, True
    always, False never. The line appears once the work has run DELAY
    seconds, is rewritten in place, and ends with a newline."""

    def __init__(self, what: str, enabled: Optional[bool] = None, stream: Any = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.what = what
        self.t0 = time.perf_counter()
        self.shown = False

    def update(self, done: int, total: int, detail: str = "") -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.t0
        if elapsed < DELAY and not self.shown:
            return
        self.shown = True
        line = "remat: %s %d/%d%s (%.1f s)" % (self.what, done, total,
                                              " " + detail if detail else "", elapsed)
        self.stream.write("\r" + line[:100].ljust(60))
        self.stream.flush()

    def note(self, text: str) -> None:
        """A whole line (e.g. which capture path was taken), shown like updates."""
        if self.enabled and (self.shown or time.perf_counter() - self.t0 >= DELAY):
            self.close()
            self.stream.write("remat: %s\n" % text)
            self.stream.flush()

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
