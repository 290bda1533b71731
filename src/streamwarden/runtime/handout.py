"""A micro-batch's fanned-out rows handed to each of their users, once: the last step of every
delivery, a shared group's and a pipeline of its own.

Each user with rows gets a batch folder of her own in ``DIR/<user>/<query>/``, named by a
prefix and her cursor (:func:`~streamwarden.runtime.deliveries.deliver_once`), holding her
byte range of the one write (:mod:`streamwarden.engine.fanout`); her delivery log then
records it under ``key``, the micro-batch that made it, so that Spark running that batch
again after a crash finds it delivered. Users are handed out side by side (each folder and
log is hers alone: the cost is the file system's latency) and the file system is flushed
once at the end, before Spark commits the batch.

    >>> # hand_out(fanned, [Handout(0, Path("out/ann/q1"), "batch=3fa2b0c91d2e-")], "5f0c…:live-7", Path("out"))
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from streamwarden.engine.fanout import IO_THREADS, PART, FannedOut
from streamwarden.names import PRIVATE_DIR
from streamwarden.runtime.deliveries import deliver_once, flush


@dataclass(frozen=True)
class Handout:
    """One user's share of a fan-out: recipient ``recipient``'s rows into ``folder`` (hers,
    existing and private), in a batch folder named ``prefix`` and her cursor; ``then`` adds to
    that folder once the rows are in it (ON RESULT: SPGen's policy ahead of them)."""

    recipient: int
    folder: Path
    prefix: str
    then: Callable[[str], None] | None = None


def hand_out(fanned: FannedOut, handouts: Sequence[Handout], key: str, output: Path, *, whole_log: bool = False
             ) -> None:
    """Every handout with rows delivered once under ``key`` (see the module docstring), then
    the file system holding ``output`` flushed (``whole_log``: see
    :func:`~streamwarden.runtime.deliveries.deliver_once`)."""
    def one(handout: Handout) -> None:
        def place(name: str) -> None:
            target = handout.folder / name
            shutil.rmtree(target, ignore_errors=True)  # a retried batch's first attempt
            os.mkdir(target, PRIVATE_DIR)
            fanned.copy(handout.recipient, target / PART)
            if handout.then is not None:
                handout.then(name)

        deliver_once(handout.folder, key, fanned.received[handout.recipient], handout.prefix, place, sync=False,
                     whole_log=whole_log)

    with ThreadPoolExecutor(max_workers=IO_THREADS) as pool:
        list(pool.map(one, handouts))
    if handouts:  # every log durable before Spark commits the batch: one flush, not one per user
        flush(output)


def batch_key(checkpoint: Path, kind: str, batch_id: int) -> str:
    """What made a delivery: micro-batch ``batch_id`` (``kind``: ``live``, or ``backfill`` for a
    group's late members) of the Spark query whose checkpoint is ``checkpoint``, by the id that
    checkpoint keeps (a new checkpoint: a new id, so its micro-batch 0 is never taken for an
    older one's; a checkpoint Spark has not started, as when a test runs a batch by hand: none).

        >>> batch_key(Path("/nowhere"), "live", 7)
        'live-7'
    """
    try:
        made_by = str(json.loads((checkpoint / "metadata").read_text(encoding="utf-8"))["id"]) + ":"
    except (OSError, ValueError, KeyError, TypeError):
        made_by = ""
    return f"{made_by}{kind}-{batch_id}"


__all__ = ["Handout", "batch_key", "hand_out"]
