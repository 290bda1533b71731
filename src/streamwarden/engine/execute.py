"""Run authorized graphs on Spark: replay over recorded files, or continuously.

Both modes build the same DataFrames (see :mod:`streamwarden.engine.compiler`) and the
same output rows: the query's columns with timestamps as ISO-8601 UTC strings, plus
``_policies`` (ids of the policies that authorized the row) and ``_graph`` (the
authorized graph that produced it).
"""

from __future__ import annotations

import re
from datetime import datetime
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping
from urllib.parse import unquote

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamwarden.catalog.lattice import Lattice, Level
from streamwarden.catalog.model import Catalog
from streamwarden.engine.actions import actions_frame
from streamwarden.engine.columns import CARRIED, GRAPH_OF_MEMBER, physical_name
from streamwarden.engine.failures import root_cause
from streamwarden.engine.compiler import (EVENT, POLICIES, PROVENANCE, Inputs, action_names, compile_graph,
                                          iso_instant)
from streamwarden.engine.levels.columns import ROW_LEVEL, level_text
from streamwarden.engine.levels.shepherd import guarded, routed_input
from streamwarden.engine.plan_sql import quote as quoted_name
from streamwarden.engine.quarantine import OnBroken, check_mode
from streamwarden.engine.shield.files import INVALID_UTF8
from streamwarden.engine.shield.reader import shielded_input, unshielded_input
from streamwarden.engine.sources import as_relation, ordered_input, read_input
from streamwarden.errors import InputError, UnsupportedError
from streamwarden.records import bad_byte, utf8_position
from streamwarden.language.expressions import parse_timestamp
from streamwarden.plan.nodes import LevelGuard, Node, Shield, sources, walk
from streamwarden.security.punctuation.spgen import spgen_lines
from streamwarden.security.rewrite.algorithm import AuthorizedGraph, Rewriting

GRAPH = "_graph"


def iso_timestamp(column: SparkColumn) -> SparkColumn:
    """``2026-03-01T10:00:00Z`` (``.ffffff`` only when there are microseconds)."""
    micros = F.pmod(F.unix_micros(column), F.lit(1_000_000))  # before 1970 too: date_format gives the floor second
    fraction = F.when(micros != 0, F.concat(F.lit("."), F.lpad(micros.cast("string"), 6, "0"))).otherwise(F.lit(""))
    return F.concat(F.date_format(column, "yyyy-MM-dd'T'HH:mm:ss"), fraction, F.lit("Z"))


def single_value(frame: DataFrame) -> Any:
    """The value of a one-row, one-column frame, such as a global aggregate's."""
    row = frame.first()
    assert row is not None, "a global aggregate has one row"
    return row[0]


def iso_timestamp_of(name: str) -> SparkColumn:
    """:func:`iso_timestamp` of the column ``name`` (see :func:`~streamwarden.engine.compiler.iso_instant`)."""
    return iso_instant(quoted_name(name))


def provenance(root: Node, frame: DataFrame, lattice: Lattice | None) -> SparkColumn:
    """What authorized each row of ``frame`` (compiled from ``root``), as its ``_policies``: the
    role policies whose views held (their ids), each Security Shield's provider policy
    (``SP HeartRate of 2026-03-01T10:00:00Z``; an aggregate names the stream) and the level
    rule (``level [1] read at [1, ⊥]``: the row's level, dominated by the level the query runs
    at). A row that no mechanism let through is never output, so this is never empty."""
    parts = [F.col(c) for c in (POLICIES, PROVENANCE) if c in frame.columns]
    guards = sorted({str(n.level) for n in walk(root) if isinstance(n, LevelGuard)})
    if guards and lattice is not None:
        level = level_text(ROW_LEVEL if ROW_LEVEL in frame.columns else "level", lattice)
        parts.append(F.array(F.concat(F.lit("level "), level, F.lit(f" read at {', '.join(guards)}"))))
    if not parts:
        return F.array().cast("array<string>")
    return parts[0] if len(parts) == 1 else F.concat(*parts)


def output_frame(graph: AuthorizedGraph, frame: DataFrame, lattice: Lattice | None = None) -> DataFrame:
    """The rows a user receives from ``graph``: its columns, ``_policies`` (:func:`provenance`)
    and ``_graph`` (and, with security levels, ``level``: the LUB of the row's tuples' levels)."""
    columns = []
    names = set()
    for f in graph.root.fields:
        name = f.name
        names.add(name)
        column = F.col(quoted_name(name))
        if f.dtype == "timestamp":
            column = iso_timestamp_of(name)
        elif f.dtype == "level" and lattice is not None:
            column = level_text(name, lattice)
        columns.append(column.alias(name))
    if lattice is not None and "level" not in names:
        columns.append(level_text(ROW_LEVEL, lattice).alias("level"))
    policies = provenance(graph.root, frame, lattice)
    if EVENT in frame.columns:
        columns.append(F.col(EVENT))
    # a shared template's rows: each member's own graph id, and the member (streamwarden.runtime.groups)
    graph_id = F.col(GRAPH_OF_MEMBER) if GRAPH_OF_MEMBER in frame.columns else F.lit(graph.id)
    columns += [F.col(c) for c in frame.columns if c.startswith(CARRIED) and c != GRAPH_OF_MEMBER]
    return frame.select(*columns, policies.alias(POLICIES), graph_id.alias(GRAPH))


def with_progress(frame: DataFrame, relation: str, lateness: str, tag: str = "") -> DataFrame:
    """The input's event-time watermark, behind a barrier security filters cannot cross.

    Spark pushes filters that do not read the event time below ``withWatermark``; then a
    user's watermark, and so when their windows close, would follow only the tuples they
    may see, and replay and run would disagree. An observation (CollectMetrics) stops that
    push-down, and reports the rows each input delivered per micro-batch.
    """
    watermarked = frame.withWatermark(physical_name(relation, "ts"), lateness)
    return watermarked.observe(f"input_{relation}{tag}", F.count(F.lit(1)).alias("rows"))


@dataclass
class Job:
    """The compiled DataFrames of every deployed graph of one rewriting."""

    rewriting: Rewriting
    frames: list[tuple[AuthorizedGraph, DataFrame]]
    lattice: Lattice | None = None
    shepherd_counts: dict[str, DataFrame] = field(default_factory=dict)  # replay: per stream, see guarded()

    def unknown_sources(self) -> dict[str, int]:
        """Per stream, the tuples the shepherd put at the top for an unknown source (replay: one
        small job per stream, run when asked).

        Only a query running at the top level may know: those tuples are at the top, so for
        any lower level their number describes data it does not dominate (empty then)."""
        level = self.rewriting.level
        if self.lattice is None or level is None or not self.lattice.top <= level:
            return {}
        with input_errors():
            return {stream: int(frame.collect()[0]["unknown_source"]) for stream, frame in self.shepherd_counts.items()}

    def union(self) -> DataFrame | None:
        outputs = [output_frame(g, f, self.lattice) for g, f in self.frames]
        if not outputs:
            return None
        result = outputs[0]
        for other in outputs[1:]:
            result = result.unionByName(other)
        return result


def read_relations(
    spark: SparkSession,
    catalog: Catalog,
    plan: Node,
    inputs: Mapping[str, str | Path],
    *,
    streaming: bool,
    lateness: str = "0 seconds",
    max_files_per_trigger: int | None = None,
    shields: Mapping[str, Shield] | None = None,
    level: tuple[Lattice, Level] | None = None,
    shepherd_counts: dict[str, DataFrame] | None = None,
    metrics_tag: str = "",
    unsecured: bool = False,
    routed: Mapping[str, Path] | None = None,
    on_broken: OnBroken = "fail",
) -> dict[str, DataFrame]:
    """One DataFrame per relation of ``plan`` (each stream read once), with physical names.

    A punctuated stream with a shield in ``shields`` (by stream) goes through the Security
    Shield for that shield's roles; without one its SP records are just dropped (the
    unsecured pipeline benchmarks compare against). With ``level`` (the lattice and the
    query's level) every stream passes the trusted shepherd before its watermark: only
    the tuples the level dominates, each with its ``level`` (counts go to ``shepherd_counts``).
    A stream in ``routed`` (streaming, with ``level``) is read from the folder the
    shepherd's own query writes its levelled tuples to (:mod:`streamwarden.engine.levels.routing`),
    not from its input, unless the query counts it in a ``[ROWS n]`` window (which needs
    the input's arrival order). ``on_broken`` is what every reader does with a broken
    record (:mod:`streamwarden.engine.quarantine`).
    """
    needed = {s.stream for s in sources(plan)}
    check_streams_given(catalog, needed, inputs)
    shields = shields or {}
    if not unsecured:  # a protected stream is read through its protection, or not at all
        bare = sorted(n for n in needed if catalog.streams[n].punctuated and n not in shields)
        if bare:
            raise UnsupportedError(f"stream {bare[0]} carries security punctuations: it is read only through its "
                                   "Security Shield")
        if catalog.lattice is not None and level is None:
            raise UnsupportedError("the catalog has security levels: every stream is read only through its level guard")
    counted = {s.stream for s in sources(plan) if s.window is not None and s.window.kind == "rows"}
    raw = {}
    for name in sorted(needed):
        stream = catalog.streams[name]
        if stream.punctuated:
            ordered = name in counted  # a [ROWS n] window orders ties in ts by arrival, through the shield too
            raw[name] = (shielded_input(spark, stream, inputs[name], shields[name].roles, streaming=streaming,
                                        ordered=ordered, on_broken=on_broken, metrics_tag=metrics_tag)
                         if name in shields else unshielded_input(spark, stream, inputs[name], streaming=streaming,
                                                                  ordered=ordered, on_broken=on_broken,
                                                                  metrics_tag=metrics_tag))
        elif name in counted:
            raw[name] = ordered_input(spark, stream, inputs[name], streaming=streaming, on_broken=on_broken,
                                      metrics_tag=metrics_tag)
        elif routed and name in routed and streaming and level is not None:
            raw[name] = routed_input(spark, stream, routed[name])  # the shepherd's query read (and checked) it
        else:
            raw[name] = read_input(spark, stream, inputs.get(name, ""), streaming=streaming,
                                   max_files_per_trigger=max_files_per_trigger, on_broken=on_broken,
                                   metrics_tag=metrics_tag)
        if level is not None:
            raw[name], counts = guarded(raw[name], stream, *level, streaming=streaming, tag=metrics_tag)
            if counts is not None and shepherd_counts is not None:
                shepherd_counts[name] = counts
    frames = {}
    for s in sources(plan):
        frame = as_relation(raw[s.stream], catalog.streams[s.stream], s.relation)
        frames[s.relation] = with_progress(frame, s.relation, lateness, metrics_tag) if streaming else frame
    return frames


def build_job(
    spark: SparkSession,
    catalog: Catalog,
    rewriting: Rewriting,
    inputs: Mapping[str, str | Path],
    *,
    streaming: bool,
    store_url: str | None = None,
    lateness: str = "0 seconds",
    max_files_per_trigger: int | None = None,
    metrics_tag: str = "",
    event_time: bool = False,
    routed: Mapping[str, Path] | None = None,
    on_broken: OnBroken = "fail",
) -> Job:
    """Read the inputs and compile each deployed graph of ``rewriting``.

    ``metrics_tag`` suffixes the names of its observed metrics, so several jobs can run in
    one streaming query (a level's processor); ``routed`` names the streams read from the
    shepherd's query (see :func:`read_relations`).

    ``on_broken`` chooses what a broken input record does (:mod:`streamwarden.engine.quarantine`):
    ``"fail"`` (``replay`` and ``run``) stops the job with one error naming its file and line;
    ``"quarantine"`` (the shared network) drops it before any operator or user expression
    sees it and counts it per stream and micro-batch (the observed metric
    ``quarantine_<stream><metrics_tag>``), so that no provider's broken record stops the
    delivery of another's data.

    Authorized graphs only ever read the query's own inputs, so the relations of
    ``rewriting.plan`` are all there is to read.
    """
    graphs = rewriting.deployed
    on_broken = check_mode(on_broken)
    check_secured(catalog, rewriting)
    check_on_result(rewriting)
    lattice = catalog.lattice if rewriting.level is not None else None
    if not graphs:  # nothing is authorized: nothing is read
        return Job(rewriting, [], lattice)
    shields = {n.stream: n for g in graphs for n in walk(g.root) if isinstance(n, Shield)}
    lattice = catalog.lattice if rewriting.level is not None else None
    level = (lattice, rewriting.level) if lattice is not None and rewriting.level is not None else None
    counts: dict[str, DataFrame] = {}
    frames = read_relations(spark, catalog, rewriting.plan, inputs, streaming=streaming, lateness=lateness,
                            max_files_per_trigger=max_files_per_trigger, shields=shields,
                            level=level, shepherd_counts=counts, metrics_tag=metrics_tag, routed=routed,
                            on_broken=on_broken)
    names = sorted({a for g in graphs for a in action_names(g.root)})
    actions = actions_frame(spark, store_url, names, dict(catalog.actions)) if names else None
    context = Inputs(frames, actions, streaming, lattice, event_time)
    return Job(rewriting, [(graph, compile_graph(graph.root, context)) for graph in graphs],
               lattice, counts)


def check_secured(catalog: Catalog, rewriting: Rewriting) -> None:
    """The engine runs only what every security pass produced: a rewriting from
    :func:`streamwarden.security.passes.secure`, each of whose graphs reads a punctuated stream only
    through its shield and, where the catalog has security levels, every stream through its
    level guard at the query's level. Anything else (a bare :func:`~streamwarden.security.rewrite.algorithm.rewrite`,
    a graph edited by hand) is refused before anything is read, so no path runs a
    protected stream unprotected.
    """
    if not rewriting.secured:
        raise UnsupportedError("the engine runs only secured rewritings: pass the query through "
                               "streamwarden.security.passes.secure (or streamwarden.api.authorize) first")
    levels = catalog.lattice is not None
    if levels and rewriting.level is None:
        raise UnsupportedError("the catalog has security levels, but the rewriting runs at none: refused")
    for graph in rewriting.deployed:
        nodes = list(walk(graph.root))
        shielded = {n.relation for n in nodes if isinstance(n, Shield)}
        guarded = {n.relation for n in nodes if isinstance(n, LevelGuard) and n.level == rewriting.level}
        for source in sources(graph.root):
            if catalog.streams[source.stream].punctuated and source.relation not in shielded:
                raise UnsupportedError(f"graph {graph.id} reads the punctuated stream {source.stream} without its "
                                       "Security Shield: refused")
            if levels and source.relation not in guarded:
                raise UnsupportedError(f"graph {graph.id} reads {source.stream} without a level guard at "
                                       f"{rewriting.level}: refused")


def check_on_result(rewriting: Rewriting) -> None:
    """``ON RESULT`` dates the new policy by the earliest result (SPGen): refuse, before
    anything runs, a query whose results carry no timestamp, which would publish nothing."""
    if not rewriting.on_result:
        return
    for graph in rewriting.deployed:
        if not any(f.dtype == "timestamp" for f in graph.root.fields):
            raise UnsupportedError(
                "ON RESULT needs a timestamp among the query's results (select ts, or MIN(ts)/MAX(ts) of a "
                "window): SPGen dates the new policy by the earliest result, so without one nothing could be "
                "published")


#: The file endings a stream's input folder is read by: plain streams, and streams read line
#: by line (punctuated, or read by a [ROWS n] window).
READ_SUFFIXES = (".jsonl", ".parquet")
LINE_SUFFIXES = (".jsonl", ".json")
FILE_SUFFIXES = (".jsonl", ".json", ".parquet")


def check_streams_given(catalog: Catalog, streams: Iterable[str], inputs: Mapping[str, str | Path]) -> None:
    """Every stream of ``streams`` has an input (given, or its catalog's Kafka source), and every
    input names a catalog stream."""
    missing = sorted(s for s in set(streams) - set(inputs) if s not in catalog.streams or
                     catalog.streams[s].source is None)
    if missing:
        raise InputError(f"no input given for stream {', '.join(missing)} (use --input {missing[0]}=PATH)")
    unknown = sorted(set(inputs) - set(catalog.streams))
    if unknown:
        raise InputError(f"--input names unknown stream {unknown[0]!r} (catalog streams: {', '.join(catalog.streams)})")
    declared = sorted(n for n in inputs if catalog.streams[n].source is not None)
    if declared:  # two sources for one stream: which one a user meant is not guessed
        source = catalog.streams[declared[0]].source
        assert source is not None
        raise InputError(f"stream {declared[0]} is read from Kafka ({source.where} at {source.bootstrap}), as its "
                         f"catalog declares: give no --input for it")


class InputWarning(UserWarning):
    """Input files a reader will skip (the CLI prints these as ``warning: ...``)."""


def check_inputs(catalog: Catalog, streams: Iterable[str], inputs: Mapping[str, str | Path], *,
                 line_read: Iterable[str] = (), must_exist: bool = True, recorded: bool = False) -> None:
    """Refuse inputs a run would wait on forever or fail on late, before Spark starts.

    Every stream of ``streams`` needs an input; every input must name a catalog stream;
    with ``must_exist`` each path must exist (a continuous run never creates a mistyped
    folder to wait on). A folder holding files of which the reader reads none is refused;
    one holding some files the reader skips gives an :class:`InputWarning` naming them.
    ``line_read`` are the streams read in arrival order (``[ROWS n]`` windows: JSON lines
    and Parquet); punctuated streams are read line by line (``.jsonl``/``.json`` only).
    ``recorded``: a replay's inputs, files already written (a missing one is a wrong path, not a
    folder to create and wait on).
    """
    import warnings

    streams = sorted(set(streams))
    check_streams_given(catalog, streams, inputs)
    line_read = set(line_read)
    for name in streams:
        if catalog.streams[name].source is not None:
            if not recorded:  # fail closed: continuous runs and the network over Kafka are not built yet
                raise UnsupportedError(f"stream {name} is read from Kafka, and only replay reads Kafka yet: "
                                       "a continuous run or the network over it is not supported (docs/kafka.md)")
            if name in line_read:
                raise UnsupportedError(f"stream {name} is read from Kafka: a [ROWS n] window over it is not "
                                       "supported yet (docs/kafka.md)")
            continue  # read from its Kafka topic: checked when Spark reads it
        path = Path(inputs[name])
        if not path.exists():
            if must_exist:
                hint = ("a replay reads files already recorded: check the path" if recorded else
                        "create the folder first: a continuous run reads the files that land in an existing folder")
                raise InputError(f"input for stream {name} not found: {path} ({hint})")
            continue
        readable = (LINE_SUFFIXES if catalog.streams[name].punctuated else
                    FILE_SUFFIXES if name in line_read else READ_SUFFIXES)
        if path.is_file():
            if path.suffix not in FILE_SUFFIXES:
                raise InputError(f"input for stream {name} must be a .jsonl, .json or .parquet file, or a folder: "
                                 f"{path}")
            continue
        files = [p for p in path.iterdir() if p.is_file() and not p.name.startswith((".", "_"))]
        skipped = sorted({p.suffix or "(no ending)" for p in files if p.suffix not in readable})
        reads = " and ".join(f"*{s}" for s in readable)
        if skipped and not any(p.suffix in readable for p in files):
            raise InputError(f"input folder {path} for stream {name} holds no file the reader reads: it reads {reads}, "
                             f"and the folder holds {', '.join(skipped)} files")
        if skipped:
            warnings.warn(f"input folder {path} for stream {name}: files ending in {', '.join(skipped)} are skipped "
                          f"(the reader reads {reads})", InputWarning, stacklevel=2)


def unsecured_frame(spark: SparkSession, catalog: Catalog, rewriting: Rewriting,
                    inputs: Mapping[str, str | Path]) -> DataFrame:
    """The query as written, with no access control (benchmarks and the demo compare to it)."""
    frames = read_relations(spark, catalog, rewriting.plan, inputs, streaming=False, unsecured=True)
    return compile_graph(rewriting.plan, Inputs(frames))


# The readers' checks raise ``raise_error(...)``, which Spark reports as the error class
# USER_RAISED_EXCEPTION with our message, or (the punctuated readers' Python kernels) a
# ValueError whose message starts the line of a Python traceback. Only those are broken
# records. The plan text Spark prints with a failed streaming query also holds "broken
# record in stream" (the check's own expression), whatever the real failure was, so the
# message is matched right after the error class, never anywhere in the text.
_BROKEN = re.compile(r"(?:\[USER_RAISED_EXCEPTION\] |(?:^|\n)\s*(?:ValueError|[\w.]*InputError): )"
                     r"(broken record in stream [^\n]*?)(?= SQLSTATE:|\n|$)")


@contextmanager
def input_errors() -> Iterator[None]:
    """Turn Spark's failure on a broken input record into one clear :class:`InputError`
    (any other failure passes through unchanged, for :func:`describe_failure` to name)."""
    try:
        yield
    except Exception as exc:  # py4j and pyspark raise several unrelated types
        record = broken_record(exc)
        if record is None:
            raise
        raise InputError(record) from None


def broken_record(exc: BaseException) -> str | None:
    """The reader's "broken record in stream ..." message if ``exc`` is that failure, else None."""
    match = _BROKEN.search(_error_text(exc))
    return readable_place(match.group(1).strip()) if match else None


# The place is last and has no whitespace: Spark names files by URI, a space as %20. So a
# record's own text in the problem, or a file named "x) at /etc/...", cannot move it.
_AT = re.compile(r"^(broken record in stream .*?) \((.*)\) at (?:file:)?(\S+)$")
_IN_SPLIT = re.compile(r"^(.*):@(\d+)\+(\d+)$")
_AT_LINE = re.compile(r"^(.*):(\d+)$")


def readable_place(message: str) -> str:
    """A broken record's message with its place as the user wrote it: Spark names files by
    URI (``%20`` for a space); a line read in a later split of a large file
    (``FILE:@BLOCK+INDEX``, see :func:`streamwarden.engine.shield.files.line_place`) gets its
    line number, and a line that is not UTF-8 the line and column of its file's first bad
    byte, both read here on the driver.

        >>> readable_place("broken record in stream S (record has no ts) at /tmp/my%20data/a.jsonl:3")
        'broken record in stream S (record has no ts) at /tmp/my data/a.jsonl:3'
    """
    match = _AT.match(message)
    if match is None:
        return message
    head, problem, place = match.group(1), match.group(2), unquote(match.group(3))
    split, line = _IN_SPLIT.match(place), _AT_LINE.match(place)
    path = split.group(1) if split else line.group(1) if line else place
    try:
        data = Path(path).read_bytes() if split or problem == INVALID_UTF8 else b""
    except OSError:  # the file is on executors only, or gone: the place Spark gave is what we know
        return f"{head} ({problem}) at {place}"
    if problem == INVALID_UTF8:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"{head} ({bad_byte(data, exc.start)}) at {path}:{utf8_position(data, exc.start)}"
    if split:
        place = f"{path}:{_line_in_split(data, int(split.group(2)), int(split.group(3)))}"
    return f"{head} ({problem}) at {place}"


def _line_in_split(data: bytes, block: int, index: int) -> int:
    """The line number of the ``index``-th line (from 0) of the file split that starts at byte ``block``."""
    # Hadoop's line reader starts a split after the first LF at or beyond its first byte.
    first = data.find(b"\n", block) + 1
    return data.count(b"\n", 0, first) + 1 + index


def readable_location(place: str) -> str:
    """A place as a reader's check writes it (a file's URI, ``FILE:LINE`` or ``FILE:@BLOCK+INDEX``,
    see :func:`streamwarden.engine.shield.files.line_place`) as the user wrote the path, with
    the line number (a later split's is read here, on the driver).

        >>> readable_location("file:/tmp/my%20data/a.jsonl:3")
        '/tmp/my data/a.jsonl:3'
    """
    place = unquote(place.removeprefix("file:"))
    split = _IN_SPLIT.match(place)
    if split is None:
        return place
    try:
        data = Path(split.group(1)).read_bytes()
    except OSError:  # the file is on executors only, or gone: the place Spark gave is what we know
        return place
    return f"{split.group(1)}:{_line_in_split(data, int(split.group(2)), int(split.group(3)))}"


def _error_text(exc: BaseException) -> str:
    """The exception's own message, without the query plan Spark appends to a streaming failure."""
    text = str(exc)
    for marker in ("\n=== Streaming Query ===", "\nJVM stacktrace:"):
        text = text.split(marker, 1)[0]
    return text


# What a failure's message says, and what it means for the user (the first that matches wins).
_CAUSES = (
    (re.compile(r"No space left on device"), "the disk is full (no space left on device)"),
    (re.compile(r"Multiple streaming queries are concurrently using (\S+)"),
     "another query is running on the same checkpoint {0}: stop it, or give this run its own --checkpoint"),
    (re.compile(r"ConcurrentModificationException[^\n]*?:\s*([^\n]+)"), "the checkpoint is in use: {0}"),
    (re.compile(r"(?:AccessDeniedException|Permission denied)[:\s]*([^\n]*)"), "permission denied {0}"),
    (re.compile(r"\[PATH_NOT_FOUND\] ([^\n]*?)(?= SQLSTATE:|\n|$)"), "{0}"),
    (re.compile(r"java\.lang\.OutOfMemoryError[:\s]*([^\n]*)"), "Spark ran out of memory {0}"),
)


def describe_failure(exc: BaseException) -> str:
    """One line naming what actually failed: a broken record, a full disk, a checkpoint another
    query uses, ... else the exception's type and the first line of its own message."""
    record = broken_record(exc)
    if record is not None:
        return record
    text = _error_text(exc)
    for cause in (text, str(exc)):
        for pattern, meaning in _CAUSES:
            found = pattern.search(cause)
            if found:
                return meaning.format(*(g.strip() for g in found.groups())).strip()
    # Py4J's "An error occurred while calling o1.start.\n: java.lang.SomeException: what"
    java = re.search(r"(?:^|\n): ([\w.$]+(?:Exception|Error)\b[^\n]*)", text)
    first = java.group(1) if java else root_cause(exc)
    first = re.sub(r"\s*SQLSTATE: \w+\s*$", "", first)
    name = type(exc).__name__
    return f"{name}: {first}" if first and first != name else name


def replay_rows(job: Job) -> Iterator[str]:
    """JSON lines of every result row, in a stable order (graph, then columns).

    With ``ON RESULT``, SPGen's policy records come first and every row names it.
    """
    frame = job.union()
    if frame is None:
        return
    with input_errors():
        rows = ordered_lines(frame)
        if job.rewriting.on_result:
            earliest = earliest_result_time(job)
            if earliest is None:  # rows whose timestamps are all NULL: no policy can be dated to cover them
                for _ in rows:
                    raise UnsupportedError("ON RESULT: every timestamp of the results is NULL, so SPGen cannot date "
                                           "the policy that must cover them; nothing was written")
                return
            yield from spgen_lines(job.rewriting.on_result, earliest, rows)
        else:
            yield from rows


def ordered_lines(frame: DataFrame) -> Iterator[str]:
    """The frame's rows as JSON lines in a stable order (graph, then columns)."""
    order = [F.col(GRAPH)] + [F.col(f"`{c}`") for c in frame.columns if c not in (GRAPH, POLICIES)]
    return frame.orderBy(*order).toJSON().toLocalIterator()


def earliest_result_time(job: Job) -> datetime | None:
    """The earliest timestamp among the results (SPGen's policy timestamp)."""
    earliest = None
    for graph, frame in job.frames:
        times = [F.col(f"`{f.name}`") for f in graph.root.fields if f.dtype == "timestamp"]
        if not times:
            continue
        # Formatted by Spark in the session's UTC: collected datetimes would be in local time.
        text = single_value(frame.agg(iso_timestamp(F.min(F.least(*times) if len(times) > 1 else times[0]))))
        if text is not None:
            value = parse_timestamp(text)
            earliest = value if earliest is None else min(earliest, value)
    return earliest

