"""Run every streamwarden benchmark and write ``bench/results/``.

    python -m bench.run            # full run (~10-15 min on 2 cores)
    python -m bench.run --quick    # smoke version (~2 min)

Everything runs in this one process: the rewriting benchmark first (pure Python), then
the Spark runtime benchmark on ``streamwarden.engine.session.get_spark()``. Outputs:
``README.md`` (the report), ``results.json`` (raw numbers) and the PNG plots.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from bench import machine as machine_info
from bench import observations, plots, report
from bench import rewriting as rewriting_bench
from bench import runtime as runtime_bench

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _json_safe(value: Any) -> Any:
    """NaN is not JSON: write it as null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke version: small data, few repetitions")
    parser.add_argument("--only", choices=("rewriting", "runtime"), help="run one experiment (for development)")
    parser.add_argument("--output", type=Path, default=RESULTS, help="results directory (default bench/results)")
    parser.add_argument("--report-only", action="store_true",
                        help="re-render README.md and the plots from an existing results.json, measuring nothing")
    args = parser.parse_args(argv)
    if args.report_only:
        saved = _from_json(json.loads((args.output / "results.json").read_text(encoding="utf-8")))
        _write_outputs(args.output, saved["mode"], saved["machine"], saved["duration_s"], saved["rewriting"],
                       saved["runtime"])
        return 0
    mode = "quick" if args.quick else "full"
    args.output.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    _log(f"streamwarden benchmarks, {mode} run")
    info = machine_info.collect(REPO).as_dict()
    rewriting: dict[str, Any] | None = None
    runtime: dict[str, Any] | None = None

    if args.only in (None, "rewriting"):
        _log("experiment 1: rewriting time")
        settings = rewriting_bench.Settings.quick() if args.quick else rewriting_bench.Settings()
        rewriting = rewriting_bench.run(settings, log=_log)

    if args.only in (None, "runtime"):
        _log("experiment 2: runtime on the drill scenario (starting Spark)")
        from streamwarden.engine.session import get_spark  # Spark only when needed

        spark = get_spark()
        info["spark_java"] = str(spark._jvm.java.lang.System.getProperty("java.runtime.version"))  # type: ignore[attr-defined]
        settings_rt = runtime_bench.Settings.quick() if args.quick else runtime_bench.Settings()
        runtime = runtime_bench.run(spark, settings_rt, log=_log)

    duration = time.perf_counter() - started
    (args.output / "results.json").write_text(json.dumps(_json_safe({
        "mode": mode, "duration_s": round(duration, 1), "machine": info, "rewriting": rewriting, "runtime": runtime,
    }), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    _write_outputs(args.output, mode, info, duration, rewriting, runtime)
    return 0


def _from_json(value: Any) -> Any:
    """Inverse of :func:`_json_safe` for the numbers: null back to NaN."""
    if value is None:
        return math.nan
    if isinstance(value, dict):
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def _write_outputs(out: Path, mode: str, info: dict[str, Any], duration: float, rewriting: dict[str, Any] | None,
                   runtime: dict[str, Any] | None) -> None:
    rewriting = rewriting if isinstance(rewriting, dict) else None  # a skipped experiment is null (NaN) in JSON
    runtime = runtime if isinstance(runtime, dict) else None
    notes = (observations.rewriting(rewriting) if rewriting else []) + (
        observations.runtime(runtime) if runtime else [])
    written = plots.all_plots(rewriting, runtime, out)
    text = report.render(machine=info, mode=mode, duration_s=duration, rewriting=rewriting, runtime=runtime,
                         notes=notes)
    (out / "README.md").write_text(text, encoding="utf-8")
    _log(f"wrote {out / 'README.md'}, results.json and {', '.join(written)} in {duration / 60:.1f} min")


if __name__ == "__main__":
    sys.exit(main())
