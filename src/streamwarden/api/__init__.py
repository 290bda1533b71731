"""The public Python API: the one facade the command line, the service and programs use.

    >>> import streamwarden.api as api
    >>> catalog = api.load_catalog("examples/drill.yaml")
    >>> rewriting = api.authorize(catalog, "paul", "SELECT SID, Pos FROM Position")
    >>> [g.id for g in rewriting.deployed]
    ['ag1']
    >>> rows = api.replay(catalog, "paul", "SELECT SID, Pos FROM Position",
    ...                   {"Position": "data/Position"})            # doctest: +SKIP

What it offers, by module (every name is re-exported here; import them from
``streamwarden.api``, not from the modules, which may move):

* :mod:`~streamwarden.api.store` — the store (:data:`STORE_HELP`) and where it may lie.
* :mod:`~streamwarden.api.catalog` — catalogs, registered queries and the access log
  (:class:`AuthorizationServer`): the data the network runs on.
* :mod:`~streamwarden.api.identity` — bearer tokens and the hash-chained audit trail.
* :mod:`~streamwarden.api.values` — timestamps, durations, typed values and SP records as
  streamwarden reads and writes them.
* :mod:`~streamwarden.api.queries` — one user's query: authorize, explain, replay, run, and
  many users' queries one processor per security level (:func:`run_levels`).
* :mod:`~streamwarden.api.network` — the shared network of registered queries: run, replay,
  explain, its pipelines' status, and each user's outputs (read, summarize, forget) without
  knowing how they are laid out on disk.
* :mod:`~streamwarden.api.spark` — Spark's settings and log, one line for a failure, and
  :func:`keep_running`, the loop that applies live changes until a run ends or is stopped.

Besides this package, three leaf modules are public and may be imported directly:
:mod:`streamwarden.errors` (every error streamwarden raises, and how it names a place),
:mod:`streamwarden.names` (what a user, stream, query or action may be called, and the
private, contained paths built from names) and :mod:`streamwarden.records` (JSON-lines
records split as the engine splits them). The command line and the service import nothing
else of streamwarden (``tests/test_layers.py`` checks it), so what lies below — the
language, the security passes, the engine, the runtime — can change behind this surface.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers see; at run time each module loads on first use (below)
    from streamwarden.api.catalog import (STREAM, AccessChange, AuthorizationServer, Catalog, CatalogDiff,
                                          RegisteredQuery, StreamDef, access_periods, access_time, capped_names,
                                          diff_catalogs,
                                          load_access, load_catalog, load_catalog_text, load_queries, Opening,
                                          openings, own_id, parse_own_id, register, replacing, unregister,
                                          update_catalog)
    from streamwarden.api.identity import (OPERATOR, OPERATOR_ENV, Actor, AuditError, AuditRecord, Authenticated,
                                           Principal, ProviderKey, VerifyResult, append_all, append_audit,
                                           audit_records, authenticate, check_key_text, check_token, clean_text,
                                           create_token, parse_audit_anchor, parse_expiry, revoke_provider_tokens,
                                           operator_principal, revoke_token, revoke_tokens, subject_label, token_id,
                                           verify_audit, writable)
    from streamwarden.api.network import (MAX_CURSOR, DeliverySummary, NetworkExplanation, NetworkInfo, NetworkRuntime,
                                          Page, PipelineStatus, delivered_rows, delivery_summary, deployed_policies,
                                          explain_network, forget_query, network_info, on_delivery, pipeline_statuses,
                                          read_rows, read_rows_quickly, read_status, replay_network, run_network,
                                          runnable_problem, start_network)
    from streamwarden.api.queries import (LevelProcessor, LevelQuery, ReplayReport, Rewriting, authorize,
                                          authorize_registered, explain_json, explain_text, replay, replay_to_file, run,
                                          run_levels)
    from streamwarden.api.store import (STORE_HELP, CatalogStore, GenerationCache, NoStore, UnknownName,
                                        check_store_outside, default_store, store_log_dir)
    from streamwarden.api.spark import (Progress, ProgressWatch, Runner, SparkSettings, describe_failure,
                                        keep_running, lower_priority, progress_watch, silence_spark_log,
                                        spark_log_path, start_logged_spark, stop_quietly, using_spark)
    from streamwarden.api.values import (MAX_SN, MAX_WINDOWS_PER_TUPLE, InsertSp, check_cql, checked_sp_record,
                                         format_timestamp, names_no_zone, parse_duration, parse_sp_statements,
                                         parse_timestamp, shown, sp_records, typed_value)

#: The modules, lightest first: a name of the store's (the command line's help) loads no Spark.
_MODULES = ("store", "catalog", "identity", "values", "queries", "network", "spark")


def __getattr__(name: str) -> Any:
    """A public name, from the first module that exports it (loaded then, kept here after)."""
    for part in _MODULES:
        module = importlib.import_module(f"{__name__}.{part}")
        if name in module.__all__:
            value = getattr(module, name)
            globals()[name] = value
            return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    # store
    "STORE_HELP", "CatalogStore", "GenerationCache", "NoStore", "UnknownName", "check_store_outside", "default_store",
    "store_log_dir",
    # catalog
    "STREAM", "AccessChange", "AuthorizationServer", "Catalog", "CatalogDiff", "RegisteredQuery", "StreamDef",
    "access_periods", "access_time", "capped_names", "diff_catalogs", "load_access", "load_catalog",
    "load_catalog_text", "load_queries", "Opening", "openings", "own_id", "parse_own_id", "register", "replacing",
    "unregister", "update_catalog",
    # identity
    "OPERATOR", "OPERATOR_ENV", "Actor", "operator_principal", "AuditError", "AuditRecord", "Authenticated",
    "Principal", "ProviderKey", "VerifyResult", "append_all",
    "append_audit", "audit_records", "authenticate", "check_key_text", "check_token", "clean_text", "create_token",
    "parse_audit_anchor", "parse_expiry", "revoke_provider_tokens", "revoke_token", "revoke_tokens", "subject_label",
    "token_id",
    "verify_audit", "writable",
    # network
    "MAX_CURSOR", "DeliverySummary", "NetworkExplanation", "NetworkInfo", "NetworkRuntime", "Page", "PipelineStatus",
    "delivered_rows", "delivery_summary", "deployed_policies", "explain_network", "forget_query", "network_info",
    "on_delivery", "pipeline_statuses", "read_rows", "read_rows_quickly", "read_status", "replay_network",
    "run_network", "runnable_problem", "start_network",
    # queries
    "LevelProcessor", "LevelQuery", "ReplayReport", "Rewriting", "authorize", "authorize_registered", "explain_json",
    "explain_text", "replay", "replay_to_file", "run", "run_levels",
    # spark
    "Progress", "ProgressWatch", "Runner", "SparkSettings", "describe_failure", "keep_running", "lower_priority",
    "progress_watch", "silence_spark_log", "spark_log_path", "start_logged_spark", "stop_quietly", "using_spark",
    # values
    "MAX_SN", "MAX_WINDOWS_PER_TUPLE", "InsertSp", "check_cql", "checked_sp_record", "format_timestamp",
    "names_no_zone", "parse_duration", "parse_sp_statements", "parse_timestamp", "shown", "sp_records", "typed_value",
]
