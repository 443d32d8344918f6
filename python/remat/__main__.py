"""`python -m remat`: the same command as `remat` (see remat/cli.py)."""
import sys

from .cli import main

sys.exit(main())
