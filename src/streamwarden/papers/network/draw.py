"""Draw a shared-operator network as PNG or SVG: Graphviz when installed, else matplotlib.

Graphviz (``dot``) lays DAGs out best, but it is not a Python package; without it the
network is drawn with matplotlib (already needed by the benchmarks): input streams at
the bottom, each operator one layer above its deepest input, the common prefix shaded,
and every privacy switch a marker on its edge (initial ▼ blue, in-network ◆ orange,
terminal ⬣ green above the query's output).

    >>> # draw(placed, "network.png", title="CQ1 and CQ2")
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from streamwarden.papers.network.dag import Kind, Network, NetworkError
from streamwarden.papers.network.switches import PlacedNetwork, SwitchKind

_COLORS = {SwitchKind.INITIAL: "#3182bd", SwitchKind.IN_NETWORK: "#e6550d", SwitchKind.TERMINAL: "#31a354"}
_MARKERS = {SwitchKind.INITIAL: "v", SwitchKind.IN_NETWORK: "D", SwitchKind.TERMINAL: "h"}


def draw(placed: PlacedNetwork, path: str | Path, *, title: str | None = None) -> Path:
    """Write the network with its switches to ``path`` (``.png`` or ``.svg``)."""
    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg"):
        raise NetworkError(f"cannot draw a network into {path.name}: use a .png or .svg file name")
    if shutil.which("dot"):
        return placed.render(path, title=title)
    return _matplotlib(placed, path, title)


def layout(network: Network) -> dict[str, tuple[float, float]]:
    """(x, layer) per vertex: layer 0 for streams, else one above the deepest input."""
    layer: dict[str, int] = {}
    for vid in network.topological_order():
        inputs = network.vertex(vid).inputs
        layer[vid] = 0 if not inputs else 1 + max(layer[i] for i in inputs)
    rows: dict[int, list[str]] = {}
    for vid, depth in layer.items():
        rows.setdefault(depth, []).append(vid)
    positions = {}
    for depth, members in rows.items():
        for i, vid in enumerate(members):
            positions[vid] = (2.4 * (i - (len(members) - 1) / 2), float(depth))
    return positions


def _matplotlib(placed: PlacedNetwork, path: Path, title: str | None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    network = placed.network
    pos = layout(network)
    xs, top = [x for x, _ in pos.values()], max(y for _, y in pos.values())
    width = max(6.0, 1.5 * (max(xs) - min(xs) + 3))
    height = max(4.0, 1.6 * (top + 2))
    fig, ax = plt.subplots(figsize=(width, height))
    for v in network.vertices:
        for i in v.inputs:
            (x0, y0), (x1, y1) = pos[i], pos[v.id]
            ax.annotate("", xy=(x1, y1 - 0.18), xytext=(x0, y0 + 0.18),
                        arrowprops={"arrowstyle": "->", "color": "#636363"})
    for v in network.vertices:
        x, y = pos[v.id]
        shared = v.id in network.common_prefix
        face = "#fff7bc" if shared else ("#deebf7" if v.kind is Kind.SOURCE else "white")
        text = "\n".join(textwrap.wrap(f"{v.id}: {v.label}", 30)) + (
            f"\n[{', '.join(sorted(v.queries))}]" if v.queries else "")
        ax.text(x, y, text, ha="center", va="center", fontsize=8,
                bbox={"boxstyle": "round", "facecolor": face, "edgecolor": "#fec44f" if shared else "#636363",
                      "linestyle": "--" if shared else "-"})
    for site in placed.switches:
        x0, y0 = pos[site.tail]
        if site.head is None:
            x1, y1 = x0, y0 + 0.7
        else:
            x1, y1 = pos[site.head]
        x, y = (x0 + x1) / 2, (y0 + y1) / 2
        ax.plot([x], [y], marker=_MARKERS[site.kind], color=_COLORS[site.kind], markersize=10, linestyle="none")
        ax.text(x + 0.08, y, site.query, fontsize=7, color=_COLORS[site.kind], va="center")
    for q, out in network.outputs:
        x, y = pos[out]
        ax.text(x, y + 0.95, f"⇒ {q}", ha="center", fontsize=9, weight="bold")
    handles = [plt.Line2D([], [], marker=_MARKERS[k], color=_COLORS[k], linestyle="none", label=f"{k.value} switch")
               for k in SwitchKind]
    ax.legend(handles=handles, loc="lower right", fontsize=8)
    ax.set_xlim(min(xs) - 1.2, max(xs) + 1.2)
    ax.set_ylim(-0.7, top + 1.5)
    ax.axis("off")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


__all__ = ["draw", "layout"]
