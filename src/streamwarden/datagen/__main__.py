"""Command line: ``python -m streamwarden.datagen {drill,health,objects,cloud,nexmark} --out PATH [options]``.

Example:
    $ python -m streamwarden.datagen drill --out /tmp/drill --soldiers 1000 --minutes 60 --interval 1
    Position=3600000 Health=3600000 normHealth=3600000 rows; 1000 soldiers in 4 platoons; ...
    $ python -m streamwarden.datagen health --out /tmp/health --patients 12 --minutes 30
    HeartRate=2226 BodyTemperature=2226 BreathingRate=2226 records; 12 patients, 3 policies each; ...
    $ python -m streamwarden.datagen objects --out /tmp/objects.jsonl --tuples 1000000 --sp-ratio 10 --roles 10
    Objects=1100000 records (1000000 tuples, 100000 policies); ...
    $ python -m streamwarden.datagen cloud --out /tmp/cloud --minutes 10 --services 6 --seed 7
    MessageLog=2620 records (1441 sends, 304 failures, 0 unknown senders); 6 services, 5 companies ...
    $ python -m streamwarden.datagen nexmark --events 1000000 --out /tmp/nexmark --format parquet --seed 7
    Person=20000 Auction=60000 Bid=920000 PunctuatedBid=962011 records from 1000000 events ...
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from .drill import DEFAULT_START, generate_drill
from .cloud import DEFAULT_CLASSES, message_log, write_message_log
from .nexmark import DEFAULT_RATE, generate_nexmark
from .punctuated import moving_objects, write_health, write_jsonl


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


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text}")
    return value


def _coi_class(text: str) -> tuple[str, list[str]]:
    """``COI1=1,2`` -> ("COI1", ["1", "2"])."""
    name, _, companies = text.partition("=")
    codes = [c.strip() for c in companies.split(",")]
    if not name.strip() or not all(codes):
        raise argparse.ArgumentTypeError(f"expected NAME=CODE,CODE,... like COI1=1,2, got {text!r}")
    return name.strip(), codes


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
    health = commands.add_parser("health", help="punctuated health streams (HeartRate, BodyTemperature, "
                                                "BreathingRate)")
    health.add_argument("--out", required=True, help="output directory (one folder per stream)")
    health.add_argument("--patients", type=_at_least(1), default=12)
    health.add_argument("--minutes", type=_positive_float, default=30.0, help="run length")
    health.add_argument("--interval", type=_positive_float, default=10.0, help="seconds between readings")
    health.add_argument("--changes", type=_at_least(0), default=2, help="policy changes per patient")
    health.add_argument("--seed", type=_at_least(0), default=7)
    objects = commands.add_parser("objects", help="punctuated moving-object stream (the SP benchmarks)")
    objects.add_argument("--out", required=True, help="output JSON-lines file")
    objects.add_argument("--tuples", type=_at_least(1), required=True)
    objects.add_argument("--sp-ratio", type=_at_least(1), required=True, help="tuples per policy")
    objects.add_argument("--roles", type=_at_least(1), required=True, help="roles named by each policy")
    objects.add_argument("--seed", type=_at_least(0), default=7)
    default_classes = " ".join(f"{n}={','.join(c)}" for n, c in DEFAULT_CLASSES.items())
    cloud = commands.add_parser("cloud", help="cloud audit stream (MessageLog) with DoS and delay episodes")
    cloud.add_argument("--out", required=True, help="output directory")
    cloud.add_argument("--minutes", type=_positive_float, default=10.0, help="run length")
    cloud.add_argument("--services", type=_at_least(1), default=6, help="services (invocation chains)")
    cloud.add_argument("--rate", type=_positive_float, default=2.0, help="invocations per second")
    cloud.add_argument("--dos", type=_at_least(0), default=1, help="denial-of-service episodes")
    cloud.add_argument("--delays", type=_at_least(0), default=1, help="delay episodes")
    cloud.add_argument("--unknown", type=_fraction, default=0.0, help="fraction of records with an unknown sender")
    cloud.add_argument("--class", dest="classes", type=_coi_class, action="append", metavar="NAME=CODES",
                       help=f"a COI class and its company codes, repeated (default: {default_classes})")
    cloud.add_argument("--files", type=_at_least(1), default=1, help="time-sliced files")
    cloud.add_argument("--seed", type=_at_least(0), default=7)
    cloud.add_argument("--start", default=DEFAULT_START, help="first invocation time (ISO-8601, UTC)")
    nexmark = commands.add_parser("nexmark", help="NEXMark auction streams (Person, Auction, Bid, PunctuatedBid)")
    nexmark.add_argument("--out", required=True, help="output directory (one folder per stream)")
    nexmark.add_argument("--events", type=_at_least(1), required=True, help="events (1 person : 3 auctions : 46 bids)")
    nexmark.add_argument("--format", choices=["jsonl", "parquet"], default="parquet",
                         help="Person, Auction and Bid (PunctuatedBid is always JSON lines)")
    nexmark.add_argument("--rate", type=_positive_float, default=DEFAULT_RATE, help="events per second of event time")
    nexmark.add_argument("--no-punctuated", dest="punctuated", action="store_false",
                         help="skip the punctuated Bid stream")
    nexmark.add_argument("--seed", type=_at_least(0), default=7)
    nexmark.add_argument("--start", default=DEFAULT_START, help="first event time (ISO-8601, UTC)")
    return parser


def _drill(args: argparse.Namespace) -> str:
    return generate_drill(
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
    ).describe()


def _health(args: argparse.Namespace) -> str:
    # Generated in full before anything is written, so a bad combination writes nothing.
    folders = write_health(args.out, patients=args.patients, minutes=args.minutes, interval_s=args.interval,
                           changes=args.changes, seed=args.seed)
    counts = " ".join(f"{stream}={_line_count(folder / 'part-00000.jsonl')}" for stream, folder in folders.items())
    return (f"{counts} records; {args.patients} patients, {args.changes + 1} policies each; "
            f"written to {args.out}")


def _line_count(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def _objects(args: argparse.Namespace) -> str:
    records = moving_objects(tuples=args.tuples, sp_ratio=args.sp_ratio, roles=args.roles, seed=args.seed)
    write_jsonl(records, args.out)
    policies = len(records) - args.tuples
    return f"Objects={len(records)} records ({args.tuples} tuples, {policies} policies); written to {args.out}"


def _cloud(args: argparse.Namespace) -> str:
    classes = dict(args.classes) if args.classes else DEFAULT_CLASSES
    if args.classes and len(classes) < len(args.classes):
        raise ValueError("each --class needs its own name")
    audit = message_log(classes=classes, services=args.services, minutes=args.minutes, rate_per_s=args.rate,
                        dos_episodes=args.dos, delay_episodes=args.delays, unknown_fraction=args.unknown,
                        seed=args.seed, start=args.start)
    counts = write_message_log(audit, args.out, files=args.files)
    records = audit.records
    sends = sum(r["msgType"] == "send" for r in records)
    failures = sum(r["outcome"] == "failure" for r in records)
    unknown = sum(not r["sender"].startswith("Company") for r in records)
    companies = sum(len(c) for c in classes.values())
    episodes = ", ".join(f"{e.kind} {e.target} on {e.service_id} {e.start:%H:%M:%S}-{e.end:%H:%M:%S}"
                         for e in audit.episodes) or "none"
    return (f"MessageLog={len(records)} records ({sends} sends, {failures} failures, {unknown} unknown senders); "
            f"{len(audit.services)} services, {companies} companies in {len(classes)} COI classes; "
            f"episodes: {episodes}; {len(counts)} file(s) written to {args.out}")


def _nexmark(args: argparse.Namespace) -> str:
    return generate_nexmark(args.out, events=args.events, fmt=args.format, seed=args.seed, rate=args.rate,
                            start=args.start, punctuated=args.punctuated).describe()


_COMMANDS: dict[str, Callable[[argparse.Namespace], str]] = {
    "drill": _drill, "health": _health, "objects": _objects, "cloud": _cloud, "nexmark": _nexmark,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (usage errors exit with 2)."""
    parser = _parser()
    args = parser.parse_args(argv)
    began = time.perf_counter()
    try:
        summary = _COMMANDS[args.command](args)
    except ValueError as exc:  # argument combinations only the generators can judge
        parser.error(str(exc))
    print(f"{summary} ({time.perf_counter() - began:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
