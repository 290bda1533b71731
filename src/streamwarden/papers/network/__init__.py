"""Shared-operator networks with privacy switches (Zaki et al., DBSec 2021), engine-independent.

* :mod:`~streamwarden.papers.network.dag` — the network of Definition 1 (vertices, edges, labels,
  common prefix), DOT rendering;
* :mod:`~streamwarden.papers.network.switches` — Algorithm 2 (placement) and Algorithm 1 (the
  initial, in-network and terminal switches as stateful objects);
* :mod:`~streamwarden.papers.network.optimizer` and :mod:`~streamwarden.papers.network.draw` —
  the network ``explain --network`` draws.

The reference executor the tests hold the switches to is ``tests/oracles/network.py``; §6's
simulator is ``bench/network_simulator.py``.
"""

from streamwarden.papers.network.dag import Edge, Kind, Network, NetworkBuilder, NetworkError, Vertex, render
from streamwarden.papers.network.switches import (SP, InitialSwitch, InNetworkSwitch, PlacedNetwork, SwitchKind,
                                           SwitchSite, TerminalSwitch, changes_only, place_switches)

__all__ = ["Edge", "Kind", "Network", "NetworkBuilder", "NetworkError", "Vertex", "render", "SP", "InitialSwitch",
           "InNetworkSwitch", "PlacedNetwork", "SwitchKind", "SwitchSite", "TerminalSwitch", "changes_only",
           "place_switches"]
