"""The shepherd as its own streaming query: each input read once for every level processor.

Without it, every level processor reads and parses each input again and levels every
tuple itself, so k levels in use cost k parses of everything. With it (``run_levels``
starts it for each stream its processors read as it is), the trusted shepherd reads and
checks the stream once, gives each tuple its level
(:func:`~streamwarden.engine.levels.shepherd.with_level`) and writes the tuples as
Parquet, into a private folder beside the processors' checkpoints: like a checkpoint, it
holds tuples of every level, so no user's output folder may contain it. A processor reads it through Spark's file source
(:func:`~streamwarden.engine.levels.shepherd.routed_input`), which takes only the files
the shepherd's sink has committed, exactly once across restarts of either, and only the
columns its queries use.

``level`` is a column of the files, not a partition folder: a file source fixes its
partition columns when it starts, from the folders it finds, so a processor started before
the shepherd's first tuples would read ``level`` as missing.

Isolation is as before: the shepherd keeps no state and runs no user's expression; each
level's processor keeps its own streaming query, checkpoint, state and watermark (set
after its guard, on the tuples it may see). A broken record stops the shepherd, with the
same error, naming its file, as it would have stopped each processor.

    >>> route_folder("/state/levels-1a2b", "MessageLog").as_posix()
    '/state/levels-1a2b/_shepherd/MessageLog'
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from streamwarden.catalog.lattice import Lattice
from streamwarden.catalog.model import Catalog, StreamDef
from streamwarden.engine.levels.shepherd import with_level
from streamwarden.engine.sinks import start_writer, stream_writer
from streamwarden.engine.sources import read_input
from streamwarden.errors import InputError
from streamwarden.names import open_private, private_dir, safe_path
from streamwarden.plan.nodes import sources
from streamwarden.security.rewrite.algorithm import Rewriting

#: The shepherd's folder under the processors' checkpoint root. No level's folder can be
#: named so: :func:`~streamwarden.engine.levels.processors.level_slug` never starts with ``_``.
SHEPHERD = "_shepherd"


@dataclass(frozen=True)
class Route:
    """One stream's shepherd: the Parquet folder of its levelled tuples and its streaming query."""

    stream: str
    tuples: Path
    query: StreamingQuery


def route_folder(root: str | Path, stream: str) -> Path:
    """Where the shepherd of ``stream`` keeps its checkpoint and tuples, under ``root``."""
    return safe_path(Path(root), SHEPHERD, stream)


def route_tuples(root: str | Path, stream: StreamDef, lattice: Lattice) -> Path:
    """The folder of the shepherd's levelled tuples of ``stream`` (created, private): the
    processors' input, which must exist before they start.

    A level is stored as bits, a bit per company in the lattice's order, so tuples levelled
    under one lattice would mean other companies under another: the folder records what its
    tuples were written under (the lattice, the stream's schema and level source), and a
    catalog that changed any of them is refused until the level checkpoints are removed.
    """
    folder = route_folder(root, stream.name)
    written_under = json.dumps({"lattice": [[name, list(members)] for name, members in lattice.classes],
                                "schema": [list(column) for column in stream.schema],
                                "level": str(stream.level_source)}, ensure_ascii=False)
    record = folder / "levelled_under.json"
    if record.exists():
        if record.read_text(encoding="utf-8") != written_under:
            raise InputError(f"the shepherd's tuples of stream {stream.name} in {folder} were levelled under another "
                             "lattice, schema or level source than the catalog's: remove the level checkpoints "
                             f"{Path(root)} to start the processors over")
    else:
        private_dir(folder)
        with open_private(record) as out:
            out.write(written_under)
    return private_dir(folder / "tuples")


def shared_streams(catalog: Catalog, rewritings: Iterable[Rewriting]) -> set[str]:
    """The streams the shepherd's query reads for the processors: every stream some query
    reads as it is (neither punctuated, whose shield reads it, nor counted by a ``[ROWS n]``
    window, which needs the input's arrival order).

    It does not depend on how many levels are in use: a processor's checkpoint remembers
    which files of which folder it has read, so a stream must not move between the input
    and the shepherd's folder when queries of other levels come or go (it would be read
    again from the start)."""
    if catalog.lattice is None:
        return set()
    return {source.stream for rewriting in rewritings for source in sources(rewriting.plan)
            if not (source.window is not None and source.window.kind == "rows")
            and not catalog.streams[source.stream].punctuated}


def start_shepherds(spark: SparkSession, catalog: Catalog, streams: Iterable[str], inputs: Mapping[str, str | Path],
                    root: str | Path, *, trigger: str | None = None, available_now: bool = False) -> dict[str, Route]:
    """Start one shepherd per stream of ``streams`` (each reading ``inputs[stream]``).

    With ``available_now`` each processes what is there and stops, and this waits until
    it has (a processor started after it then sees every tuple); a failure (a broken
    record) is raised here, before any processor starts.
    """
    lattice = catalog.lattice
    if lattice is None:
        raise ValueError("the shepherd levels tuples: the catalog has no lattice")
    routes = {}
    for name in sorted(set(streams)):
        stream = catalog.streams[name]
        folder, tuples = route_folder(root, name), route_tuples(root, stream, lattice)
        levelled = with_level(read_input(spark, stream, inputs[name], streaming=True), stream, lattice)
        writer = (stream_writer(levelled, folder / "checkpoint", trigger=trigger, available_now=available_now,
                                query_name=f"streamwarden shepherd {name}")
                  .format("parquet").option("path", str(tuples)))
        routes[name] = Route(name, tuples, start_writer(writer, spark))
    if available_now:
        for route in routes.values():
            route.query.awaitTermination()
    return routes


__all__ = ["SHEPHERD", "Route", "route_folder", "route_tuples", "shared_streams", "start_shepherds"]
