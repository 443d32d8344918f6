"""The disk cache of profiles: the only file that reads or writes it.

A profile is a remat chain file (remat-chain-1) whose "profile" metadata
holds what the chain cannot (the key it was measured under, the stage names,
held bytes, what is held in the backward only, the stages
compile=True runs eager, the measured host link). Its name is a hash of the
key: the program's own key (code, shapes, dtypes, devices, autocast), the
profile's format version, torch's and remat's versions, whether partial
saves are measured (_saves.enabled).
"""
from __future__ import annotations

import hashlib
import os
import warnings
from typing import Optional

import torch

import remat

from ._config import CacheSetting
from ._saves import enabled as partial_saves

PROFILE_VERSION = 10  # bump when what a profile measures changes: old cache files go stale


def cache_dir(cache: CacheSetting) -> Optional[str]:
    """Where profiles are kept: None (no cache), ~/.cache/remat (or
    $XDG_CACHE_HOME/remat) for True, else the directory given."""
    if cache is None or cache is False:
        return None
    if cache is True:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.join(base, "remat")
    return os.fspath(cache)


class ProfileCache:
    """The cache entry of one program's profile (`path` None: no cache)."""

    def __init__(self, cache: CacheSetting, program_key: str) -> None:
        self.key = hashlib.sha256(("%d|%s|%s|%s|%d" % (
            PROFILE_VERSION, program_key, torch.__version__, remat.__version__,
            partial_saves())).encode()).hexdigest()[:40]
        self.dir = cache_dir(cache)
        self.path = os.path.join(self.dir, "profile-%s.json" % self.key) if self.dir else None

    def load(self, stage_names: object) -> Optional["remat.Chain"]:
        """The cached chain when its key and stage names match, else None."""
        if not self.path or not os.path.exists(self.path):
            return None
        try:
            chain = remat.Chain.load(self.path)
            p = chain.meta.get("profile", {})
            if p.get("key") == self.key and p.get("stages") == stage_names:
                return chain
        except (remat.RematError, KeyError, ValueError):
            pass
        return None

    def save(self, chain: "remat.Chain", stacklevel: int = 5) -> None:
        """Writes the chain (atomically: a reader never sees half a profile);
        a failure is a warning, never an error."""
        if not self.path or not self.dir:
            return
        try:
            os.makedirs(self.dir, exist_ok=True)
            chain.save(self.path)
        except (OSError, remat.RematError) as e:
            warnings.warn("remat: cannot write the profile cache %s: %s" % (self.path, e),
                          stacklevel=stacklevel)
