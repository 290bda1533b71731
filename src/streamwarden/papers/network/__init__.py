"""Shared-operator networks with privacy switches (Zaki et al., DBSec 2021), engine-independent.

* :mod:`~streamwarden.papers.network.dag` — the network of Definition 1 (vertices, edges, labels,
  common prefix), DOT rendering;
* :mod:`~streamwarden.papers.network.switches` — Algorithm 2 (where the initial, in-network and
  terminal switches go);
* :mod:`~streamwarden.papers.network.optimizer` and :mod:`~streamwarden.papers.network.draw` —
  the network ``explain --network`` draws.

Algorithm 1 (the switches as stateful objects) and a reference executor of the switched
network are the tests' model of the paper (``tests/oracles/switches.py``, ``tests/oracles/network.py``);
§6's simulator is ``bench/network_simulator.py``.
"""

from streamwarden.papers.network.dag import Edge, Kind, Network, NetworkBuilder, NetworkError, Vertex, render
from streamwarden.papers.network.switches import PlacedNetwork, SwitchKind, SwitchSite, place_switches

__all__ = ["Edge", "Kind", "Network", "NetworkBuilder", "NetworkError", "Vertex", "render", "PlacedNetwork",
           "SwitchKind", "SwitchSite", "place_switches"]
