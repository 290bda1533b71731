"""Command line: ``python -m streamwarden.datagen drill --out DIR [options]``.

Example:
    $ python -m streamwarden.datagen drill --out /tmp/drill --soldiers 1000 --minutes 60 --interval 1
    Position=3600000 Health=3600000 normHealth=3600000 rows; 1000 soldiers in 4 platoons; ...
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import NoReturn

from .drill import DEFAULT_START, generate_drill


class _OneLineParser(argparse.ArgumentParser):
    """Reports a usage error as a single line (no usage dump) and exits with status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def _parser() -> _OneLineParser:
    parser = _OneLineParser(prog="python -m streamwarden.datagen", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    drill = commands.add_parser("drill", help="military drill streams (Position, Health, normHealth)")
    drill.add_argument("--out", required=True, help="output directory")
    drill.add_argument("--soldiers", type=_at_least(1), default=100)
    drill.add_argument("--platoons", type=_at_least(1), default=4)
    drill.add_argument("--minutes", type=_positive_float, default=10.0, help="run length")
    drill.add_argument("--interval", type=_positive_float, default=5.0, help="seconds between reports")
    drill.add_argument("--health", choices=["uni", "norm", "both"], default="both")
    drill.add_argument("--format", choices=["jsonl", "parquet"], default="jsonl")
    drill.add_argument("--seed", type=_at_least(0), default=7)
    drill.add_argument("--start", default=DEFAULT_START, help="first report time (ISO-8601, UTC)")
    drill.add_argument("--files", type=_at_least(1), default=1, help="time-sliced files per stream")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (usage errors exit with 2)."""
    parser = _parser()
    args = parser.parse_args(argv)
    began = time.perf_counter()
    try:
        summary = generate_drill(
            args.out,
            soldiers=args.soldiers,
            platoons=args.platoons,
            minutes=args.minutes,
            interval_seconds=args.interval,
            health=args.health,
            fmt=args.format,
            seed=args.seed,
            start=args.start,
            files_per_stream=args.files,
        )
    except ValueError as exc:  # argument combinations only generate_drill can judge
        parser.error(str(exc))
    print(f"{summary.describe()} ({time.perf_counter() - began:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
