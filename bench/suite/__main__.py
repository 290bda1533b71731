"""Run one declared experiment and write ``bench/results/<name>.json``, ``.md`` and its plots.

    python -m bench.suite nexmark [--events N] [--repeats K] [--quick] [--only q0,q4]
    python -m bench.suite network_scale --full       # its largest sizes too
    python -m bench.suite nexmark --report-only      # re-render from the saved JSON

The experiments are those of :data:`bench.suite.registry.EXPERIMENTS`.
"""

from __future__ import annotations

import argparse
import inspect
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.suite import report, runner
from bench.suite.registry import EXPERIMENTS, declaration


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.suite", description=__doc__.splitlines()[0])
    parser.add_argument("experiment", choices=sorted(EXPERIMENTS))
    parser.add_argument("--events", type=_positive, default=None, help="workload size (default: the experiment's)")
    parser.add_argument("--repeats", type=_positive, default=None, help="runs per pipeline (default 3, quick 1)")
    parser.add_argument("--quick", action="store_true", help="smoke version: small workload, one run each")
    parser.add_argument("--full", action="store_true",
                        help="also the largest sizes, for an experiment that declares them (network_scale)")
    parser.add_argument("--no-warmup", action="store_true", help="time in-process pipelines from their first run")
    parser.add_argument("--workdir", type=Path, default=None, help="keep inputs here (default: a scratch folder)")
    parser.add_argument("--results", type=Path, default=runner.RESULTS, help="results folder (default bench/results)")
    parser.add_argument("--only", default=None, metavar="GROUP[,GROUP]",
                        help="run only these groups' pipelines (e.g. q0,q4); targets on others: not measured")
    parser.add_argument("--report-only", action="store_true", help="re-render the saved results, measure nothing")
    args = parser.parse_args(argv)
    saved = args.results / f"{args.experiment}.json"
    if args.report_only:
        if not saved.exists():
            parser.error(f"no {saved}")
        results = json.loads(saved.read_text(encoding="utf-8"))
    else:
        declare = declaration(args.experiment)
        sized: dict[str, bool] = {}
        if args.full:
            if "full" not in inspect.signature(declare).parameters:
                parser.error(f"experiment {args.experiment} has no --full size")
            sized["full"] = True
        experiment = declare(events=args.events, quick=args.quick, **sized)
        if args.only:
            experiment = experiment.only(args.only.split(","))
        repeats = args.repeats or (1 if args.quick else 3)
        command = shlex.join(["python", "-m", "bench.suite", *(argv if argv is not None else sys.argv[1:])])
        results = runner.run(experiment, repeats=repeats, workdir=args.workdir, results_dir=args.results,
                             command=command, warmup=not args.no_warmup)
    written = report.render(results, args.results)
    print("wrote " + ", ".join(str(p) for p in [saved, *written]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
