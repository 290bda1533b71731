"""What an input reader does with a broken record: stop the job, or quarantine the record.

Every reader (:mod:`streamwarden.engine.sources`, :mod:`streamwarden.engine.shield.reader`)
computes, per record, why it is unusable (``problem``, NULL when it is fine) with Spark SQL
expressions, and its place (file, line). The caller of
:func:`~streamwarden.engine.execute.build_job` chooses the mode:

* ``"fail"`` (``replay``, ``run``): the first broken record stops the job with one error
  naming its stream, problem and place, never its text (``raise_error`` in the check's filter);
* ``"quarantine"`` (the shared network): the broken record is dropped before any operator
  or user expression sees it, and counted: each stream's broken records of a micro-batch
  are the observed metric ``quarantine_<stream><tag>`` (``records``, and ``first``, the place
  of the first in arrival order), which :mod:`streamwarden.runtime.quarantine` reads from the
  query's progress. A punctuated stream's shield also hears of its providers' broken records
  (see :func:`streamwarden.engine.shield.reader.shielded_input`), so that a lost SP never
  turns into access.

Both are one filter per record in the JVM; quarantine only adds the count.

    >>> metric_name("HeartRate", "_p1")
    'quarantine_HeartRate_p1'
"""

from __future__ import annotations

from typing import Literal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

OnBroken = Literal["fail", "quarantine"]
MODES: tuple[OnBroken, ...] = ("fail", "quarantine")
#: The punctuated reader's column saying why a record is broken (NULL: it is not).
BROKEN = "_broken"
#: In quarantine mode, a broken record's place (NULL for every other record), until :func:`quarantined` drops it.
PLACE = "_place"


def check_mode(on_broken: str) -> OnBroken:
    """``on_broken`` if it names a mode, else a ValueError (a caller's mistake, not input)."""
    if on_broken not in MODES:
        raise ValueError(f"on_broken must be one of {', '.join(MODES)}, not {on_broken!r}")
    return on_broken


def metric_name(stream: str, tag: str = "") -> str:
    """The observed metric that counts ``stream``'s quarantined records in a streaming query."""
    return f"quarantine_{stream}{tag}"


def place_of(file: Column, line: Column | None, where: Column) -> Column:
    """A broken record's place: ``file`` and ``line`` (NULL when the reader has none) order
    the records of a micro-batch; ``where`` is the place as a broken record's error names it
    (see :func:`streamwarden.engine.execute.readable_place`)."""
    line = F.lit(None).cast("long") if line is None else line.cast("long")
    return F.struct(file.alias("file"), line.alias("line"), where.alias("at"))


def checked(frame: DataFrame, problem: Column, place: Column, stream: str, on_broken: OnBroken,
            joiner: str = " in ") -> DataFrame:
    """``frame`` with its broken records handled by ``on_broken``.

    ``fail``: a filter that stops the job at the first broken record, naming ``stream``, the
    problem and the place (``place.at``); the record's text is never quoted, since whoever
    reads the error may not be allowed to see it. ``quarantine``: every record, with
    :data:`PLACE`, a broken one's place (NULL for the others), for :func:`quarantined` or the
    shield's reader to drop after counting.
    """
    if on_broken == "fail":
        message = F.concat(F.lit(f"broken record in stream {stream} ("), problem, F.lit(f"){joiner}"), place["at"])
        return frame.filter(F.when(problem.isNotNull(), F.raise_error(message)).otherwise(F.lit(True)))
    return frame.withColumn(PLACE, F.when(problem.isNotNull(), place))


def kept(on_broken: OnBroken) -> list[str]:
    """The columns a reader keeps for :func:`quarantined` in this mode."""
    return [PLACE] if on_broken == "quarantine" else []


def observed_broken(frame: DataFrame, stream: str, *, streaming: bool, tag: str = "") -> DataFrame:
    """``frame`` (with :data:`PLACE`) observed: per micro-batch, how many of its records are
    broken and the place of the first (a streaming query's metric :func:`metric_name`; a
    batch job is not observed)."""
    if not streaming:
        return frame
    return frame.observe(metric_name(stream, tag), F.count(F.col(PLACE)).alias("records"),
                         F.min(F.col(PLACE)).alias("first"))


def quarantined(frame: DataFrame, stream: str, *, streaming: bool, tag: str = "") -> DataFrame:
    """``frame`` (read in quarantine mode) without its broken records, counted first
    (:func:`observed_broken`), and without the column that marked them. A frame that has no
    :data:`PLACE` column (an empty input read in a batch) is returned as it is."""
    if PLACE not in frame.columns:
        return frame
    observed = observed_broken(frame, stream, streaming=streaming, tag=tag)
    return observed.filter(F.col(PLACE).isNull()).drop(PLACE)


__all__ = ["BROKEN", "MODES", "OnBroken", "PLACE", "check_mode", "checked", "kept", "metric_name",
           "observed_broken", "place_of", "quarantined"]
