"""Render an authorized graph as the Spark SQL it compiles to (for ``explain``).

This text is for people: the engine builds Column expressions directly and never runs
it. It mirrors :mod:`streamwarden.engine.compiler` operator by operator, with the same
physical column names (``relation__attr``) and the same secure-view masking.

    >>> from streamwarden.plan.nodes import Source
    >>> print(to_sql(Source("Position", "Position", (("ts", "timestamp"), ("Pos", "double")))))
    SELECT ts AS Position__ts, Pos AS Position__Pos FROM Position
"""

from __future__ import annotations

import textwrap

from streamwarden.engine.columns import physical_name
from streamwarden.plan import expr as E
from streamwarden.plan.nodes import (Aggregate, Filter, Join, LevelGuard, Node, Project, SecureView, Shield, Source,
                                     sources, walk)


def sql_expr(expr: E.Expr) -> str:
    text = E.render(expr)
    for column in sorted(E.columns(expr), key=lambda c: -len(c.relation + c.name)):
        text = text.replace(f"{column.relation}.{column.name}", physical_name(column.relation, column.name))
    for action in E.action_refs(expr):
        text = text.replace(f"{action.kind}({action.action})", f"__action__{action.action}__{action.kind}")
    return text


def _sub(node: Node) -> str:
    return "(\n" + textwrap.indent(to_sql(node), "  ") + "\n)"


def _has_policies(node: Node) -> bool:
    return any(isinstance(n, SecureView) for n in walk(node))


def _shield_sql(node: Shield) -> str:
    """The shield's masks: ``_gov`` holds the SP codes the per-provider shield attached."""
    source = next(s for s in sources(node) if s.relation == node.relation)
    gov, key = physical_name(node.relation, "_gov"), physical_name(node.relation, node.key)
    grant = " AND s.g" if node.grant_only else ""
    mask = (f"aggregate({gov}, 0L, (m, s) -> m | IF(s.p{grant} AND sp_match(s, {key}), s.m, 0L)) & "
            f"~aggregate({gov}, 0L, (m, s) -> m | IF(NOT s.p AND sp_match(s, {key}), s.m, 0L))")
    if node.server:
        op = "&" if node.combine == "intersect" else "|"
        mask = f"IF(exists({gov}, s -> s.i), {mask}, ({mask}) {op} server_mask({key}))"
    cols = [physical_name(node.relation, n) if n == "ts" else
            f"CASE WHEN __mask & {1 << j} != 0 THEN {physical_name(node.relation, n)} END AS "
            f"{physical_name(node.relation, n)}" for j, (n, t) in enumerate(source.schema) if t != "level"]
    others = sum(1 << j for j, (n, _) in enumerate(source.schema) if n != "ts")
    where = [f"__mask & {others} != 0"] + [sql_expr(p) for p in node.rechecked]
    return (f"SELECT {', '.join(cols)}\nFROM (SELECT *, {mask} AS __mask\n      FROM {_sub(node.child)})\n"
            f"WHERE {' AND '.join(where)}")


def to_sql(node: Node) -> str:
    """Spark SQL text equivalent to ``node``."""
    if isinstance(node, Source):
        cols = ", ".join(f"{n} AS {physical_name(node.relation, n)}" for n, t in node.schema if t != "level")
        return f"SELECT {cols} FROM {node.stream}"
    if isinstance(node, LevelGuard):
        level = physical_name(node.relation, "level")
        origin = (f"shepherd_level({physical_name(node.relation, str(node.source.attribute))})"  # type: ignore[attr-defined]
                  if node.source is not None and node.source.attribute else  # type: ignore[attr-defined]
                  f"level '{node.source.fixed if node.source is not None else 'top'}'")  # type: ignore[attr-defined]
        return (f"SELECT *, {origin} AS {level}\nFROM {_sub(node.child)}\n"
                f"WHERE dominated_by({level}, '{node.level}')")
    if isinstance(node, Filter):
        return f"SELECT * FROM {_sub(node.child)} WHERE {sql_expr(node.predicate)}"
    if isinstance(node, SecureView):
        conds = [f"coalesce({sql_expr(v.condition)}, false)" for v in node.views]
        cols = []
        for f in node.fields:
            name = physical_name(f.relation, f.name)
            grantors = [c for v, c in zip(node.views, conds) if v.grants(f)]
            if f.name == "ts" or len(grantors) == len(conds):
                cols.append(name)
            elif not grantors:
                cols.append(f"NULL AS {name}")
            else:
                cols.append(f"CASE WHEN {' OR '.join(grantors)} THEN {name} END AS {name}")
        policies = ", ".join(f"CASE WHEN {c} THEN array('{v.policy_id}') ELSE array() END"
                             for v, c in sorted(zip(node.views, conds), key=lambda vc: vc[0].policy_id))
        cols.append(f"concat({policies}) AS _policies" if len(conds) > 1 else f"array('{node.views[0].policy_id}') AS _policies")
        return f"SELECT {', '.join(cols)}\nFROM {_sub(node.child)}\nWHERE {' OR '.join(conds)}"
    if isinstance(node, Shield):
        return _shield_sql(node)
    if isinstance(node, Project):
        items = ", ".join(f"{sql_expr(e)} AS `{n}`" for n, e in node.items)
        return f"SELECT {items}, _policies FROM {_sub(node.child)}"
    if isinstance(node, Join):
        bounds = []
        for a in sources(node.left):
            for b in sources(node.right):
                ta, tb = physical_name(a.relation, "ts"), physical_name(b.relation, "ts")
                if b.window is not None and b.window.size_seconds is not None:
                    bounds.append(f"{tb} >= {ta} - INTERVAL {b.window.size_seconds:g} SECONDS")
                if a.window is not None and a.window.size_seconds is not None:
                    bounds.append(f"{tb} <= {ta} + INTERVAL {a.window.size_seconds:g} SECONDS")
        on = " AND ".join([sql_expr(node.predicate)] + bounds)
        secured = [_has_policies(node.left), _has_policies(node.right)]
        if all(secured):
            cols = "l.*, r.* EXCEPT (_policies), sort_array(array_distinct(concat(l._policies, r._policies))) AS _policies"
        else:  # a join policy's view comes after this join: only one side (or none) carries _policies
            cols = "l.*, r.*"
        return f"SELECT {cols}\nFROM {_sub(node.left)} l\nJOIN {_sub(node.right)} r\nON {on}"
    if isinstance(node, Aggregate) and node.window is not None and node.window.kind == "rows":
        n = node.window.rows or 1
        frame = f"OVER (ORDER BY {sql_expr(node.event_time)}, arrival ROWS BETWEEN {n - 1} PRECEDING AND CURRENT ROW)"
        aggs = [f"{a.func}(IF(qualifies, {sql_expr(a.arg) if a.arg is not None else '1'}, NULL)) {frame} AS `{a.name}`"
                for a in node.aggregates]
        return (f"-- [ROWS {n}]: the window holds the last {n} tuples; WHERE decides which of them count"
                f"\nSELECT {sql_expr(node.event_time)} AS ts, {', '.join(aggs)}\nFROM {_sub(node.child)}")
    if isinstance(node, Aggregate):
        w = node.window
        size = f"{w.size_seconds:g} seconds" if w and w.size_seconds else "?"
        slide = f"{(w.slide_seconds or w.size_seconds):g} seconds" if w and w.size_seconds else "?"
        time = sql_expr(node.event_time)
        aggs = [f"{a.func}({sql_expr(a.arg) if a.arg is not None else '*'}) AS `{a.name}`" if a.granted
                else f"NULL AS `{a.name}`" for a in node.aggregates]
        groups = [f"{sql_expr(g)} AS `{n}`" for n, g in node.group_by]
        by = ", ".join([f"window({time}, '{size}', '{slide}')"] + [sql_expr(g) for _, g in node.group_by])
        cols = ["window.start AS window_start", "window.end AS window_end", *groups, *aggs,
                "sort_array(array_distinct(flatten(collect_set(_policies)))) AS _policies"]
        return f"SELECT {', '.join(cols)}\nFROM {_sub(node.child)}\nGROUP BY {by}"
    raise TypeError(type(node).__name__)
