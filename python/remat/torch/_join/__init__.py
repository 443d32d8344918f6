"""Join networks in the PyTorch front-end: models whose towers meet at the
loss (docs/join.md), captured, measured, solved and run as joins."""
from . import prepared  # noqa: F401  (registers join_entry with _prepare.SHAPES)
