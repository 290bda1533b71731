"""Moving objects on a synthetic road network (in the spirit of Brinkhoff 2002).

Brinkhoff's generator moves objects along the fastest route between nodes of a
real road network, with road classes that limit speed. We keep that model but
replace the real map with a seeded, jittered grid so the data set needs no
external files:

* nodes sit on a ``(blocks + 1) x (blocks + 1)`` grid over ``[0, extent]^2``,
  each displaced by a random jitter so roads are not perfectly straight;
* every ``main_every``-th grid line is a main road (full speed), the others are
  side roads walked at ``side_road_factor`` of the object's speed;
* each object starts at a random node, repeatedly picks a random destination
  node and follows the fastest path to it, at its own base speed with small
  per-report noise.

Example:
    >>> net = build_road_network(seed=7)
    >>> net.n_nodes
    121
    >>> tracks = simulate_tracks(net, objects=3, steps=4, interval_seconds=5.0, seed=7)
    >>> tracks.x.shape
    (4, 3)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["RoadNetwork", "Tracks", "build_road_network", "simulate_tracks"]

# Independent random streams are derived from the user seed with fixed spawn keys,
# so e.g. changing the number of objects never changes the network, and object i's
# route is the same whether 10 or 10,000 objects are simulated.
_KEY_NETWORK = 0
_KEY_ROUTE = 1
_KEY_PACE = 2

#: Base speeds in m/s on a main road (soldiers on foot: walk to jog).
SPEED_RANGE = (1.0, 2.0)
#: Standard deviation of the multiplicative per-report speed noise.
SPEED_NOISE = 0.1


def _rng(seed: int, *key: int) -> np.random.Generator:
    """A generator for one purpose (``key``) derived from the user seed."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


@dataclass(frozen=True, eq=False)
class RoadNetwork:
    """An undirected road graph with precomputed all-pairs fastest routes.

    Attributes:
        xy: ``(n, 2)`` node coordinates in metres.
        edges: ``(m, 2)`` node index pairs.
        length: ``(m,)`` edge lengths in metres.
        cost: ``(m,)`` travel effort of each edge: length divided by the road's
            speed factor, i.e. metres at main-road speed.
        effort: ``(n, n)`` fastest-route effort between any two nodes.
        next_hop: ``(n, n)`` ``next_hop[i, j]`` is the node after ``i`` on the
            fastest route from ``i`` to ``j``.
        extent: side of the square area in metres.
    """

    xy: np.ndarray
    edges: np.ndarray
    length: np.ndarray
    cost: np.ndarray
    effort: np.ndarray
    next_hop: np.ndarray
    extent: float

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return int(self.xy.shape[0])

    def route(self, source: int, target: int) -> np.ndarray:
        """Node indices of the fastest route from ``source`` to ``target`` (both included)."""
        nodes = [source]
        hop = self.next_hop
        while nodes[-1] != target:
            nodes.append(int(hop[nodes[-1], target]))
        return np.asarray(nodes, dtype=np.intp)


def _grid_edges(side: int, main_every: int) -> tuple[np.ndarray, np.ndarray]:
    """Edges of a ``side x side`` grid and whether each lies on a main road."""
    ids = np.arange(side * side).reshape(side, side)  # ids[row, col]
    horizontal = np.stack([ids[:, :-1].ravel(), ids[:, 1:].ravel()], axis=1)
    vertical = np.stack([ids[:-1, :].ravel(), ids[1:, :].ravel()], axis=1)
    rows = np.arange(side)
    main_h = np.repeat(rows % main_every == 0, side - 1)  # the row the edge runs along
    main_v = np.tile(rows % main_every == 0, side - 1)  # the column the edge runs along
    return np.concatenate([horizontal, vertical]), np.concatenate([main_h, main_v])


def _all_pairs_fastest(n: int, edges: np.ndarray, cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Floyd-Warshall, vectorised over the (i, j) plane; fine for a few hundred nodes."""
    effort = np.full((n, n), np.inf)
    next_hop = np.full((n, n), -1, dtype=np.intp)
    u, v = edges[:, 0], edges[:, 1]
    effort[u, v] = effort[v, u] = cost
    next_hop[u, v], next_hop[v, u] = v, u
    diag = np.arange(n)
    effort[diag, diag] = 0.0
    next_hop[diag, diag] = diag
    for k in range(n):
        via = effort[:, k, None] + effort[None, k, :]
        better = via < effort
        effort = np.where(better, via, effort)
        next_hop = np.where(better, next_hop[:, k, None], next_hop)
    return effort, next_hop


def build_road_network(
    seed: int = 7,
    *,
    extent: float = 1000.0,
    blocks: int = 10,
    jitter: float = 0.3,
    main_every: int = 4,
    side_road_factor: float = 0.8,
) -> RoadNetwork:
    """Build a seeded jittered-grid road network covering ``[0, extent]^2``.

    Args:
        seed: random seed (non-negative).
        extent: side of the square area in metres.
        blocks: number of blocks per side (the grid has ``blocks + 1`` nodes per side).
        jitter: maximum node displacement as a fraction of the block size.
        main_every: every this many grid lines is a main road.
        side_road_factor: speed on side roads relative to main roads, in ``(0, 1]``.

    Example:
        >>> net = build_road_network(seed=1, blocks=4)
        >>> bool((net.xy >= 0).all() and (net.xy <= 1000.0).all())
        True
    """
    # Defaults: main roads at 0, 400 and 800 m and a mild side-road penalty. Main roads
    # attract traffic, so a main road through the centre (or a strong penalty) would pile
    # positions up near x = 500 and make "Pos near the target" selectivity jump with delta.
    if blocks < 1 or extent <= 0 or not 0 < side_road_factor <= 1 or main_every < 1:
        raise ValueError("need blocks >= 1, extent > 0, main_every >= 1, 0 < side_road_factor <= 1")
    side = blocks + 1
    spacing = extent / blocks
    rng = _rng(seed, _KEY_NETWORK)
    col, row = np.meshgrid(np.arange(side), np.arange(side))  # node id = row * side + col
    base = np.stack([col.ravel(), row.ravel()], axis=1) * spacing
    # Jitter below half a block keeps grid neighbours in order, so roads never cross.
    xy = np.clip(base + rng.uniform(-jitter, jitter, base.shape) * spacing, 0.0, extent)
    edges, main = _grid_edges(side, main_every)
    length = np.hypot(*(xy[edges[:, 0]] - xy[edges[:, 1]]).T)
    cost = length / np.where(main, 1.0, side_road_factor)
    effort, next_hop = _all_pairs_fastest(side * side, edges, cost)
    return RoadNetwork(xy, edges, length, cost, effort, next_hop, float(extent))


@dataclass(frozen=True, eq=False)
class Tracks:
    """Sampled object positions: ``x[k, i]``, ``y[k, i]`` is object i at report k (metres)."""

    x: np.ndarray
    y: np.ndarray


def _pace(seed: int, obj: int, steps: int, interval_seconds: float) -> np.ndarray:
    """Cumulative travel effort of one object at each report (0 at the first report)."""
    rng = _rng(seed, _KEY_PACE, obj)
    speed = rng.uniform(*SPEED_RANGE)
    noise = np.clip(1.0 + SPEED_NOISE * rng.standard_normal(steps - 1), 0.5, 1.5)
    effort = np.empty(steps)
    effort[0] = 0.0
    np.cumsum(speed * noise * interval_seconds, out=effort[1:])
    return effort


def _waypoints(net: RoadNetwork, seed: int, obj: int, total_effort: float) -> tuple[np.ndarray, np.ndarray]:
    """Route nodes of one object and the cumulative effort at each, covering ``total_effort``."""
    rng = _rng(seed, _KEY_ROUTE, obj)
    n = net.n_nodes
    nodes = [np.array([rng.integers(n)], dtype=np.intp)]
    efforts = [np.zeros(1)]
    reached = 0.0
    while reached < total_effort:
        here = int(nodes[-1][-1])
        there = int(rng.integers(n - 1))
        there += there >= here  # uniform over the other nodes
        path = net.route(here, there)
        # Consecutive route nodes are adjacent, so their fastest effort is the edge cost.
        legs = np.cumsum(net.effort[path[:-1], path[1:]]) + reached
        nodes.append(path[1:])
        efforts.append(legs)
        reached = float(legs[-1])
    return np.concatenate(nodes), np.concatenate(efforts)


def simulate_tracks(
    net: RoadNetwork, *, objects: int, steps: int, interval_seconds: float, seed: int = 7
) -> Tracks:
    """Positions of ``objects`` moving objects reported ``steps`` times, ``interval_seconds`` apart.

    Routing is per-object Python (a few dozen route lookups each); the per-report
    work is one ``np.interp`` per object. Object i's track depends only on
    ``(net, seed, i, interval_seconds)``, and a shorter run is a prefix of a longer one.

    Example:
        >>> net = build_road_network(seed=3)
        >>> t = simulate_tracks(net, objects=2, steps=3, interval_seconds=1.0, seed=3)
        >>> bool(((t.x >= 0) & (t.x <= net.extent)).all())
        True
    """
    if objects < 0 or steps < 1 or interval_seconds <= 0:
        raise ValueError("need objects >= 0, steps >= 1, interval_seconds > 0")
    x = np.empty((steps, objects))
    y = np.empty((steps, objects))
    for obj in range(objects):
        effort = _pace(seed, obj, steps, interval_seconds)
        nodes, at = _waypoints(net, seed, obj, float(effort[-1]))
        # Effort is linear in distance within an edge, so interpolating node
        # coordinates over effort gives the position along the current edge.
        x[:, obj] = np.interp(effort, at, net.xy[nodes, 0])
        y[:, obj] = np.interp(effort, at, net.xy[nodes, 1])
    return Tracks(x, y)
