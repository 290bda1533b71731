"""Plain-language observations drawn from one run's numbers, for the report.

Each function returns sentences only when the data support them, so a later run where
things changed does not repeat a stale claim.
"""

from __future__ import annotations

import math
from typing import Any


def rewriting(rw: dict[str, Any]) -> list[str]:
    notes = []
    hot = rw["hotspots"]
    total = hot["total_s"] or math.nan
    unseen = next((h for h in hot["rows"] if h["function"].endswith("(unseen_columns)")), None)
    hashing = next((h for h in hot["rows"] if h["function"].startswith("builtins")), None)
    if unseen and unseen["cumulative_s"] / total > 0.3:
        notes.append(
            f"Rewriting time is dominated by the deployment check, not by Algorithm 1 or the solver: in a cold "
            f"rewrite of {hot['query']} with {hot['policies']:,} policies, `deploy.unseen_columns` takes "
            f"{100 * unseen['cumulative_s'] / total:.0f} % of the time"
            + (f" and the builtin `hash` {hashing['own_s']:.2f} s of own time" if hashing else "")
            + ". `deploy.visible` is an `lru_cache` keyed by plan nodes; nodes are frozen dataclasses whose hash "
            "is recomputed over the whole subtree on every lookup, so each lookup costs O(subtree) and a graph "
            "costs O(nodes²). `algorithm.rewrite` also calls `unseen_columns` twice per deployed graph.")
    blow = rw["blowup"]
    big = [r for r in blow if r["query"] == "Q200" and r["graphs"] > 0]
    if big:
        last = max(big, key=lambda r: r["graphs"])
        per_graph = last["cold_median_ms"] / last["graphs"]
        all_sigma = 2 * 2**13
        extrapolated_s = all_sigma * per_graph / 1000
        text = (f"The number of authorized graphs is multiplicative: with {last['applicable_aggregates']} of Q200's "
                f"13 Σ having one applicable aggregate policy the rewriting yields {last['graphs']} graphs in "
                f"{last['cold_median_ms'] / 1000:.2f} s (~{per_graph:.1f} ms per graph); with all 13 it would be "
                f"{all_sigma:,} graphs, ~{extrapolated_s:.0f} s at the same rate (and as many Spark plans to run).")
        if extrapolated_s > 1:
            text += (" The 1-s target for 200 operators / 1,000 policies therefore holds only while few Σ have an "
                     "applicable aggregate policy, as in the seeded policy mix of the target row.")
        notes.append(text)
    table = {(r["query"], r["policies"]): r for r in rw["table"]}
    by_policies: dict[int, list[dict[str, Any]]] = {}
    for r in rw["table"]:
        by_policies.setdefault(r["policies"], []).append(r)
    non_monotonic = [p for p, rows in by_policies.items()
                     if any(a["cold_median_ms"] > b["cold_median_ms"] for a, b in zip(rows, rows[1:]))]
    if non_monotonic:
        notes.append(
            "Rewriting time does not grow steadily with the operator count (non-monotonic for "
            + ", ".join(f"{p} policies" for p in sorted(non_monotonic))
            + "): it follows the number of solver calls and of graphs produced. With a fixed policy count, "
            "a small query has all its policies on its few streams (Q1 with 50 policies: every join policy "
            "is on S1–S2 and goes to z3), while a large query spreads them and most are rejected by a cheap "
            "stream-name test.")
    denied = [f"{q} with {p}" for (q, p), r in table.items() if r["graphs"] == 0]
    if denied:
        notes.append(
            "With few policies the large queries get no graph at all (" + ", ".join(denied) + " policies): "
            "10 or 50 policies cannot give each of 9–64 inputs a read policy, and an input without one makes "
            "Algorithm 1 deny the whole join. Those rows time a rewriting that denies the query.")
    return notes


def runtime(rt: dict[str, Any]) -> list[str]:
    notes = []
    points, cfg = rt["points"], rt["settings"]
    lambdas = int(rt.get("plan_features", {}).get("rewritten", {}).get("lambda_functions", 0) or 0)
    windows = [p for p in points if p["target_selectivity"] == cfg["window_selectivity"]
               and "post-filtering, pushed down" in p]
    if windows:
        ratios = sorted(p["rewritten"]["wall_s"] / p["post-filtering, pushed down"]["wall_s"] for p in windows)
        faster = sum(r > 1 for r in ratios)
        text = (f"Spark's optimizer on its own turns post-filtering into pre-filtering: with its push-down rules on, "
                f"the SecFilter plan prunes the same tuples before the join as the rewritten plan; the rewritten plan "
                f"took {ratios[0]:.2f}–{ratios[-1]:.2f}× its wall time over the window sweep (slower at {faster}/"
                f"{len(ratios)} points), the difference being the `_policies` column it also computes and carries "
                "through the broadcast.")
        if lambdas:
            text += (f" Its physical plan evaluates {lambdas} lambda function(s) for `_policies`; higher-order "
                     "functions are not code-generated, so those projections run interpreted, row by row.")
        notes.append(text + " The paper's gains over post-filtering assume an engine that does not push filters "
                     "through joins.")
    costly = [p for p in points if not math.isnan(p.get("provenance_cost", math.nan))]
    if costly:
        top = max(costly, key=lambda p: p["provenance_cost"])
        high = max(costly, key=lambda p: (p["target_selectivity"], p["provenance_cost"]))
        costs = sorted(p["provenance_cost"] for p in costly)
        notes.append(
            f"Cost of the `_policies` provenance column: dropping it (same authorized rows, Catalyst prunes its "
            f"computation) changes the rewritten query's wall time by a factor of {costs[len(costs) // 2]:.2f} "
            f"(median over all points; at most {top['provenance_cost']:.2f}× at {top['dataset']}, "
            f"s={top['target_selectivity']}, w={top['window_s']} s; {high['provenance_cost']:.2f}× at "
            f"s={high['target_selectivity']})."
            + (" The plan's lambda functions (see above) make it costly." if lambdas else ""))
    sweep = sorted((p for p in points if p["target_selectivity"] == cfg["window_selectivity"]),
                   key=lambda p: p["window_s"])
    if sweep:
        trends = []
        for dataset in sorted({p["dataset"] for p in sweep}):
            series = [p for p in sweep if p["dataset"] == dataset]
            trends.append((dataset, series[0], series[-1]))
        falling = all(last["relative_executor_cpu_pct"] < first["relative_executor_cpu_pct"] - 5
                      for _, first, last in trends)
        # Both pipelines join on SID plus a time bucket as wide as the window (the engine's
        # replay join), so both compare only nearby tuples; what the window changes is how
        # many pairs each surviving tuple meets, the same factor for both pipelines.
        text = ("Both replays join on SID and a time bucket as wide as the window, so each pipeline compares only "
                "tuples near each other in time and its join work grows with the window.")
        if not falling:
            text += (" Relative CPU time therefore tracks how many tuples the policies prune rather than falling "
                     "steadily with the window as in Fig. 9b ("
                     + "; ".join(f"{d}: {a['relative_executor_cpu_pct']:.0f} % at {a['window_s']} s → "
                                 f"{b['relative_executor_cpu_pct']:.0f} % at {b['window_s']} s" for d, a, b in trends)
                     + "); on 2 cores the per-point noise is about ±20 %.")
        notes.append(text)
    inferred = [p for p in points if p["relative_join_input_rows_pct"] < 100 * (
        p["position_selectivity"] + p["health_selectivity"]) / 2 - 1]
    if inferred:
        notes.append(
            "Fewer tuples enter the rewritten join than the two policies' selectivities suggest: Catalyst infers "
            "the Position policy's `SID <= k` for the health side through the equi-join `Position.SID = H.SID`, "
            "so the health stream is filtered by both policies before the broadcast.")
    heap = [p["relative_heap_pct"] for p in points if not math.isnan(p["relative_heap_pct"])]
    if heap:
        notes.append(
            f"Peak JVM heap is reported for completeness only: it ranged {min(heap):.0f}–{max(heap):.0f} % "
            "(rewritten / post-filtering) and mostly measures young-generation garbage between collections. "
            "The join's hash table (`BroadcastExchange` data size) is the memory that tracks the tuples the "
            "join holds; Spark allocates it in power-of-two pages, so it moves in steps of 2×.")
    return notes


def punctuation(pt: dict[str, Any]) -> list[str]:
    """Experiment 3: where the shield's time goes, and what Spark does to the SCJoin plans."""
    notes = []
    staged = list({(p["sp_ratio"], p["roles"]): p for p in pt["by_ratio"] + pt["by_roles"]
                   if "stages_ms_per_1000" in p}.values())  # Figs. 13a and 13b may share a point
    for p in sorted(staged, key=lambda p: p["roles"]):
        stages = p["stages_ms_per_1000"]
        total = sum(stages.values())
        top, cost = max(stages.items(), key=lambda kv: kv[1])
        notes.append(
            f"Where the shield's time goes at SP ratio {p['sp_ratio']} with {p['roles']} roles: "
            + ", ".join(f"{label} {value:.0f} ms ({100 * value / total:.0f} %)" for label, value in stages.items())
            + f" per 1,000 tuples; the largest part is {top}.")
    ratio_one = sorted((p for p in staged if p["sp_ratio"] == 1), key=lambda p: p["roles"])
    if len(ratio_one) > 1:
        few, many = ratio_one[0], ratio_one[-1]
        label = "shield kernel (shuffle, Arrow, SP encoding, Python)"
        per_sp = [p["stages_ms_per_1000"][label] * p["tuples"] / p["policies"] / 1000 for p in (few, many)]
        notes.append(
            f"The shield kernel costs {per_sp[0]:.3f} ms per SP with {few['roles']} roles and {per_sp[1]:.3f} ms with "
            f"{many['roles']}: `punctuation.encode` parses and matches each distinct SP text once (the workload "
            "repeats its policy templates), so what grows with the roles is mostly moving the longer role lists "
            "through the shuffle and Arrow.")
    fixed = pt.get("fixed")
    if isinstance(fixed, dict):  # null (NaN once reloaded) when not measured
        shield, bare = fixed["pipelines"]["shield"], fixed["pipelines"]["no shield"]
        notes.append(
            f"A shielded job has a fixed cost of about {shield['wall_s']:.1f} s however small its input "
            f"({bare['wall_s']:.1f} s without the shield, {fixed['tuples']} tuples): the shield's `groupBy` "
            "shuffles every record of an unpartitioned stream to one task and one Python worker, in arrival "
            "order, so the shield also runs on one core whatever the cluster.")
    if pt["joins"]:
        pf = pt["joins"][0]["plan_features"]["probe-and-filter"]
        fp = pt["joins"][0]["plan_features"]["filter-and-probe"]
        choices = sorted({(p["sp_ratio"], p["adaptive_choice"]) for p in pt["joins"]})
        if pf["shield_filters_below_join"]:
            notes.append(
                "On Spark, probe-and-filter does not probe first: Catalyst pushes the lifted shields' filter "
                "(`mask & other attributes != 0`, one input's columns only) below the join, so the plan filters "
                f"before the join as filter-and-probe does ({pf['shield_filters_below_join']} shield filter(s) "
                f"below the join), and the join predicate re-checked on the masked pair turns the join keys into "
                f"masked expressions; `from_json` of the governing SPs (`_gov`) appears {pf['gov_decodings']} "
                f"times in the probe-and-filter physical plan against {fp['gov_decodings']} in filter-and-probe "
                "(Spark shares no common subexpressions across operators). "
                "Probe-and-filter is therefore filter-and-probe plus extra work at every point, and the paper's "
                "trade-off cannot appear. The adaptive heuristic only looks at tuples per policy against the "
                "window (it chose " + ", ".join(f"{c} at SP ratio {r}" for r, c in choices) + "), so wherever it "
                "picks probe-and-filter it inherits that extra cost.")
    diagnostic = sorted((p for p in pt["joins"] if "probe-and-filter, no push-down" in p["ms_per_1000"]),
                        key=lambda p: p["target_selectivity"])
    if diagnostic:
        ratios = [p["ms_per_1000"]["probe-and-filter, no push-down"] / p["ms_per_1000"]["filter-and-probe"]
                  for p in diagnostic]
        text = ("Planned with Spark's push-down rules off, probe-and-filter does join first; against "
                "filter-and-probe it took " + ", ".join(f"{r:.2f}× at join selectivity {p['target_selectivity']:g}"
                                                        for r, p in zip(ratios, diagnostic)) + ".")
        if ratios[0] < 1 < ratios[-1]:
            text += " That is the paper's trade-off: probing first pays off when few pairs join."
        elif ratios[-1] > ratios[0]:
            text += (" Its relative cost grows with the join selectivity, as the paper's does, but it is not the "
                     "cheaper strategy at any measured selectivity.")
        notes.append(text)
    sims = [p for p in pt["joins"] if "similarity" in p["sweeps"]]
    if len(sims) > 1:
        notes.append(
            "Policy similarity only changes which B tuples the user may read, not the work: each shield decides "
            "its own stream for the query's roles, and the engine has no policy-compatibility test between the "
            "two inputs (the paper's SCJoin intersects the two policies).")
    if pt["placement"]:
        ratios = [p["ms_per_1000"]["pushed up"] / p["ms_per_1000"]["pushed down"] for p in pt["placement"]]
        notes.append(
            f"Shield placement moves only the masking: the shield kernel runs in the reader, before any operator, "
            f"whatever the placement; with the shield up, Spark evaluates `speed > X` first in the same filter and "
            f"decodes the governing SPs only for the tuples that pass. Up / down ranged {min(ratios):.2f}–"
            f"{max(ratios):.2f} over the placement points.")
    load = pt["load_average"]
    spreads = sorted(p["spread"] for p in pt["by_ratio"] + pt["by_roles"] + pt["placement"] + pt["joins"]
                     if isinstance(p.get("spread"), float) and not math.isnan(p["spread"]))
    if max(load["before"][0], load["after"][0]) > 1.5 and spreads:
        cpus = load.get("cpus")
        notes.append(
            f"The machine was busy with other work during experiment 3 (1-minute load average "
            f"{load['before'][0]:.1f} before, {load['after'][0]:.1f} after"
            + (f", on {cpus} cores" if isinstance(cpus, int) else "") + "): wall times include waiting for a "
            f"core. The run-to-run spread of a configuration ((max − min) / median of its most variable "
            f"pipeline) was {100 * spreads[len(spreads) // 2]:.0f} % in the median and up to "
            f"{100 * spreads[-1]:.0f} %, so differences of that order between two pipelines (Fig. 14 in "
            "particular) are noise; CPU-time columns, shown next to wall times, are not steadier here.")
    return notes


def levels(lv: dict[str, Any]) -> list[str]:
    """Experiment 4: what the level guard costs, where [ROWS n] spends its time, and what one
    processor per level costs."""
    notes: list[str] = []
    top, narrow = "[T, T]", lv["settings"]["narrow_level"]
    points = lv["throughput"]
    if points:
        rel = {_label(p): p["relative_throughput"][top] for p in points}
        within = [name for name, p in zip(rel, points)
                  if _number(p["spread"]) and abs(1 - rel[name]) <= p["spread"] / 2]
        text = (f"At {top} the secured replays ran at {min(rel.values()):.2f}–{max(rel.values()):.2f}× the "
                "unsecured rows/s. The shepherd and the guard are plain Spark SQL (a map lookup of the sender giving "
                "an array of level codes, then a dominance predicate fixed by the query's level), compiled with the "
                "scan")
        if within:
            text += (f"; for {_and(within)} the difference is within half the configuration's run-to-run spread, "
                     "so not a measured difference")
        share = lv["data"]["visible"][narrow] / lv["data"]["tuples"]
        notes.append(text + f". At {narrow} ({100 * share:.0f} % of the tuples visible) the guard drops the rest "
                     "before any window.")
    notes += _rows_notes(lv)
    notes += _processor_notes(lv)
    load = lv["load_average"]
    if _number(load.get("other_cores")) and load["other_cores"] > 0.25:
        notes.append(f"Other processes kept {load['other_cores']:.2f} of the {load['cpus']} cores busy on average "
                     "during experiment 4: wall times include waiting for a core.")
    return notes


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _window(p: dict[str, Any]) -> str:
    return f"[ROWS {p['window']}]" if isinstance(p["window"], int) else f"[RANGE {p['window']}]"


def _label(p: dict[str, Any]) -> str:
    return "the selection" if p["shape"] == "selection" else f"the {p['shape']} aggregate over {_window(p)}"


def _rows_points(points: list[dict[str, Any]], shape: str) -> list[dict[str, Any]]:
    """The ``[ROWS n]`` points of ``shape``, by n."""
    return sorted((p for p in points if p["shape"] == shape and isinstance(p["window"], int)),
                  key=lambda p: p["window"])


def _rows_notes(lv: dict[str, Any]) -> list[str]:
    notes = []
    cfg, points, top = lv["settings"], lv["windows"], "[T, T]"
    at = {(p["shape"], p["window"]): p["ms_per_1000"]["unsecured"] for p in points}
    costlier = []
    for shape in ("count", "per service"):
        rows, rng = at.get((shape, cfg["rows_n"])), at.get((shape, cfg["range_window"]))
        if rows and rng and rows > 1.5 * rng:
            costlier.append(f"{rows / rng:.1f}× ({shape})")
    if costlier:
        notes.append(
            f"The same aggregate costs {' and '.join(costlier)} as much over [ROWS {cfg['rows_n']}] as over [RANGE "
            f"{cfg['range_window']}] (unsecured): a count-based window reads its input through a Python data "
            "source to keep the arrival order (`engine.sources.ordered_input`: every line goes to a Python worker "
            "and back as Arrow), and its replay numbers or frames the whole stream with a window function that has "
            "no partition (`engine.rows.replay_rows`: `Window.orderBy(ts, arrival)`), which Spark runs in one "
            "task: one core, whatever the cluster.")
    counted = _rows_points(points, "count")
    if len(counted) > 1:
        first, last = counted[0], counted[-1]
        a, b = first["relative_throughput"][top], last["relative_throughput"][top]
        if b < 0.9 and b < a - 0.15:
            functions = last.get("window_functions", {})
            plan = (f"; its physical plan has {functions[f'secured {top}']} window functions against "
                    f"{functions['unsecured']} unsecured" if isinstance(functions, dict) and functions else "")
            notes.append(
                f"Secured [ROWS n] aggregates without GROUP BY fall behind as n grows: {a:.2f}× the unsecured rows/s "
                f"at n = {first['window']}, {b:.2f}× at n = {last['window']} (CPU time: "
                f"{first['relative_throughput_cpu'][top]:.2f}× → {last['relative_throughput_cpu'][top]:.2f}×). The "
                "row's level is computed over the same `rowsBetween(-(n - 1), 0)` frame as the aggregates "
                "(`engine.rows.replay_rows`), by `_level_entry(min, max)` per COI class, which uses the `min` three "
                "times; Catalyst keeps each occurrence as a window function of its own" + plan + ", and Spark "
                "re-aggregates a sliding frame for every row, so the level costs O(n) per tuple several times over. "
                "Computing `min` and `max` once (the entry in a projection above) would halve that; running counts "
                "per company and T (a cumulative sum minus its value n rows earlier) would make it O(companies) per "
                "tuple.")
    grouped = _rows_points(points, "per service")
    if len(grouped) > 1:
        first, last = grouped[0], grouped[-1]
        a, b = first["ms_per_1000"]["unsecured"], last["ms_per_1000"]["unsecured"]
        if b > 1.3 * a:
            notes.append(
                f"With GROUP BY a [ROWS n] replay copies every qualifying tuple into the n windows that hold it "
                f"(`explode(sequence(rn, rn + n - 1))`, then a group-by per arrival), so its cost grows with n: "
                f"{a:.0f} ms per 1,000 tuples at n = {first['window']}, {b:.0f} at n = {last['window']} "
                f"({first['pipelines']['unsecured']['rows']:,} → {last['pipelines']['unsecured']['rows']:,} rows), "
                "where an event-time window's cost does not depend on its size.")
    return notes


def _processor_notes(lv: dict[str, Any]) -> list[str]:
    notes = []
    in_use = lv["levels_in_use"]
    points, fits = in_use["points"], in_use["fits"]
    if len(points) < 2:
        return notes
    last = points[-1]
    planning = last["phases_ms"].get("queryPlanning", 0) / max(last["phases_ms"].get("triggerExecution", 0), 1)
    cfg = lv["settings"]
    replay = next((p for p in lv["windows"] if p["shape"] == cfg["level_query"] and p["window"] == cfg["range_window"]),
                  None)
    compared = ""
    if replay:
        cpu = replay["pipelines"]["secured [T, T]"]["cpu_s"]
        compared = (f" ({fits['cpu_s']['b'] / cpu:.0f}× the {cpu:.2f} s a replay of the same query over the same "
                    "input takes at [T, T])")
    first = points[0]
    if "task_cpu_s" in last and "task_cpu_s" in first:
        notes.append(
            f"{last['k']} levels in use against {first['k']}: {last['cpu_s'] / first['cpu_s']:.1f}× the CPU time "
            f"({last['cpu_s']:.1f} s against {first['cpu_s']:.1f} s), {last['task_cpu_s'] / first['task_cpu_s']:.1f}× "
            f"the time of Spark's tasks ({last['task_cpu_s']:.1f} s against {first['task_cpu_s']:.1f} s: the "
            "shepherd's query reads and parses the input once, and each processor reads its Parquet), "
            f"{last['jit_cpu_s'] / max(first['jit_cpu_s'], 1e-9):.1f}× the JIT compiler's ({last['jit_cpu_s']:.1f} s "
            f"against {first['jit_cpu_s']:.1f} s: each processor's plans run Spark code the JVM has not compiled "
            "yet, a cost that fades as a long-running JVM warms up), and the rest is each processor's own micro-"
            "batches: planning, offset and commit logs, state and its `foreachBatch` writes.")
    notes.append(
        f"One processor per level costs about {fits['cpu_s']['b']:.1f} s of CPU time per level here, by least "
        f"squares over k = {', '.join(str(p['k']) for p in points)}{compared}: every processor reads its input "
        "(the shepherd's Parquet: the input itself is parsed once), plans each of its "
        "micro-batches "
        f"({100 * planning:.0f} % of the summed trigger time at k = {last['k']}), checkpoints its offsets and state, "
        f"and writes through its own `foreachBatch`. `run_levels` authorizes and compiles every query "
        "(`build_job`, DataFrames built through py4j), then starts the processors one after the other, all on the "
        f"driver: at k = {last['k']} the `run_levels` call took {last['start_s']:.1f} s of the "
        f"{last['wall_s']:.1f} s wall time, "
        + " → ".join(f"{p['start_s'] / p['k']:.2f} s" for p in points)
        + f" per processor at k = {', '.join(str(p['k']) for p in points)}"
        + (", and the wall time grows faster than the CPU time." if fits["wall_s"]["excess"] > fits["cpu_s"]["excess"]
           else "."))
    shared = in_use.get("shared")
    twin = next((p for p in points if isinstance(shared, dict) and p["k"] == shared["queries"]), None)
    if isinstance(shared, dict) and twin and shared["tasks"] > twin["tasks"]:
        q = shared["queries"]
        notes.append(
            f"Sharing a processor is not cheaper here: {q} queries at one level (one processor) took "
            f"{shared['cpu_s']:.1f} s of CPU time and {shared['wall_s']:.1f} s wall against {twin['cpu_s']:.1f} s and "
            f"{twin['wall_s']:.1f} s for {q} levels in {q} processors, and ran {shared['tasks']:,.0f} Spark tasks "
            f"against {twin['tasks']:,.0f}. The processor's writer (`levels.processors._writer`) persists the "
            "micro-batch, then runs one write job per query, each filtering every partition of the union of all "
            "the level's queries: q jobs over q × (shuffle partitions) partitions per micro-batch, so the tasks "
            "grow with the "
            "square of the queries sharing a level, and one streaming query runs them one after the other. "
            "Writing once, partitioned by `_query`, would make it one job.")
    live, rss, state = fits["live_heap_bytes"], fits["peak_rss_bytes"], fits["state_bytes"]
    rss_runs = [r["peak_rss_bytes"] / 2**20 for p in points for r in p["runs"]]
    notes.append(
        f"Memory per level: the heap left after a collection grew by about {live['b'] / 2**20:.0f} MiB per level "
        f"and the state stores by {state['b'] / 1024:.0f} KiB (a few rows per service and window). The process "
        f"tree's peak RSS ranged {min(rss_runs):,.0f}–{max(rss_runs):,.0f} MiB over the runs (fit: "
        f"{rss['b'] / 2**20:.0f} MiB per level), with no steady relation to k: it follows the JVM growing its heap "
        "and native arenas, which it does not give back, more than what the processors hold.")
    return notes
