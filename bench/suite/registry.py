"""The experiments the suite knows, by name: each one's declaring function.

A declaration takes the workload's size (``events``, None for its default) and ``quick``,
and returns an :class:`~bench.suite.experiment.Experiment`. Folding an experiment into the
suite is one line here.

    >>> list(EXPERIMENTS)[:3]
    ['rewriting', 'runtime', 'punctuation']
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from bench.suite.experiment import Experiment

#: In the order ``bench/run.py`` runs them and its README shows them.
EXPERIMENTS: dict[str, str] = {
    "rewriting": "bench.rewriting:experiment",
    "runtime": "bench.runtime:experiment",
    "punctuation": "bench.punctuation:experiment",
    "levels": "bench.levels:experiment",
    "network_sim": "bench.network_sim:experiment",
    "network_spark": "bench.network_spark:experiment",
    "network_engine": "bench.network_engine:experiment",
    "network_scale": "bench.network_scale:experiment",
    "network_latency": "bench.network_latency:experiment",
    "network_register": "bench.network_register:experiment",
    "network_compile": "bench.network_compile:experiment",
    "service_load": "bench.service_load:experiment",
    "replay_output": "bench.replay_output:experiment",
    "nexmark": "bench.nexmark:experiment",
    "jvm": "bench.jvm_mechanisms:experiment",
}


def declaration(name: str) -> Callable[..., Experiment]:
    """The function declaring experiment ``name``."""
    module, _, function = EXPERIMENTS[name].partition(":")
    return getattr(importlib.import_module(module), function)
