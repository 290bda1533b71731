"""The experiments the suite knows, by name: each one's declaring function.

A declaration takes the workload's size (``events``, None for its default) and ``quick``,
and returns an :class:`~bench.suite.experiment.Experiment`. Folding an experiment into the
suite is one line here.

    >>> sorted(EXPERIMENTS)
    ['jvm', 'nexmark']
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from bench.suite.experiment import Experiment

EXPERIMENTS: dict[str, str] = {
    "jvm": "bench.jvm_mechanisms:experiment",
    "nexmark": "bench.nexmark:experiment",
}


def declaration(name: str) -> Callable[..., Experiment]:
    """The function declaring experiment ``name``."""
    module, _, function = EXPERIMENTS[name].partition(":")
    return getattr(importlib.import_module(module), function)
