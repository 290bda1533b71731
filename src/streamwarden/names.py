"""One identifier grammar, and paths that cannot leave their root.

Users, query ids, roles, streams, actions, attributes and policy ids are all *names*:
an ASCII letter, then up to 63 letters, digits or ``_``::

    NAME := [A-Za-z][A-Za-z0-9_]{0,63}

The grammar is CQL's identifier (so every stream and attribute can be named in a
query) without a leading ``_``: names starting with ``_`` are the system's own
(``_policies``, ``_graph``, ``_gov``, Spark's ``_spark_metadata``, hidden
``_checkpoint`` folders), so no catalog name can spoof or collide with one. A name
never holds ``/``, ``\\``, ``.``, a NUL or a newline, so a user or query id used as a
folder name stays one path component. Users and query ids that differ only in case
are refused too: on a case-insensitive file system they would share a folder. A name
shaped like an access token (``swt_`` + 16 hex digits + ``_`` + 20 or more characters) is
refused as well: names go to the audit trail and logs, which never hold a token.

The columns the engine adds to rows are named in one place, :data:`RESERVED_COLUMNS` and
:data:`RESERVED_PREFIXES` (every other name with a leading ``_`` is the system's too), so that
the language refuses them as output columns and FROM aliases, and the catalog as stream
attributes: inside a shared group a user's ``AS _graph`` or ``AS __carry_member`` would
collide with the engine's own column (:func:`reserved_problem`).

Every entry point checks its names (the catalog loader, ``QUERIES.yaml``, the CLI's
arguments, :mod:`streamwarden.api`), and every per-user or per-query path is built by
:func:`safe_path`, which checks again that the result stays under its root (following
symlinks): a name that slipped past a check still cannot leave the output folder.

    >>> check_name("user", "ann")
    'ann'
    >>> check_name("user", "../x")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    streamwarden.names.InvalidName: user '../x' is not a valid name: a name is an ASCII letter, then up to 63
        letters, digits or '_'
    >>> safe_path("/srv/out", "ann", "q1.jsonl").as_posix()
    '/srv/out/ann/q1.jsonl'
    >>> safe_path("/srv/out", "..", "etc")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    streamwarden.names.UnsafePath: refusing the path component '..' under /srv/out: a path part must be one plain
        file or folder name
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from streamwarden.errors import StreamwardenError

MAX_NAME_LENGTH = 64
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
GRAMMAR = "an ASCII letter, then up to 63 letters, digits or '_'"

#: Every name starting with this is the system's own (a column the engine adds, ``_spark_metadata``, a
#: hidden folder): no catalog name, output column or FROM alias may start with it (deny by default).
SYSTEM_PREFIX = "_"
#: The columns the engine (streamwarden.engine, streamwarden.runtime) adds beside a query's own
#: in the rows it computes and writes, and what each holds. ``tests/test_reserved_names.py``
#: checks that every such constant of the engine is here or under :data:`RESERVED_PREFIXES`.
RESERVED_COLUMNS: dict[str, str] = {
    "_policies": "the policies that authorized the row",
    "_provenance": "each Security Shield's provider policy that let the row through",
    "_graph": "the authorized graph the row came from",
    "_event": "the row's event time, which grants are timed against",
    "_arrival": "a tuple's arrival order, for [ROWS n] windows",
    "_rank": "a tuple's place among the visible tuples of its stream",
    "_row": "a shared group's row for one member, as JSON",
    "_level": "the row's security level",
    "_earliest": "the earliest result time of an ON RESULT row",
    "_corrupt_record": "a record Spark's JSON reader could not parse",
    "_broken": "why an input record is broken",
    "_place": "where a broken input record was",
    "_gov": "the policy a Security Shield applied to a tuple",
    "_to": "the recipient a delivered row is for",
    "__group_size": "how many tuples an aggregate row is computed over (min_group)",
    "__time_bucket": "a replayed join's time bucket",
}
#: Prefixes of the columns the engine names after a number or a name: a shared template's member
#: and its constants (``__carry_member``, ``__carry_p0``, ...) and live action values
#: (``__action__<action>__<start|end|target>``).
RESERVED_PREFIXES: dict[str, str] = {
    "__carry_": "a shared group's member and its constants",
    "__action__": "live action values",
}

#: Kinds of names that become file or folder names: they must differ in more than case.
PATH_KINDS = frozenset({"user", "query id"})

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


class InvalidName(StreamwardenError):
    """A user, query id, role, stream, action, attribute or policy id outside the grammar."""


class UnsafePath(StreamwardenError):
    """A path built from names would leave its root (``..``, a separator, an escaping symlink)."""


class Taken:
    """The names of one kind accepted so far, in order, indexed: checking one more against them
    takes a lookup, not a pass over them all (a catalog may declare 10,000 users).

        >>> taken = Taken(["ann"])
        >>> name_problem("user", "ANN", taken)
        "user 'ANN' differs from 'ann' only in case: users name folders, so they must differ in more than case"
        >>> name_problem("role", "ANN", taken), name_problem("role", "ann", taken)
        (None, "role 'ann' is declared twice")
    """

    def __init__(self, names: Iterable[str] = ()):
        self.names: list[str] = []
        self._exact: set[str] = set()
        self._folded: dict[str, str] = {}  # lower case -> the first name accepted that folds to it
        for name in names:
            self.append(name)

    def append(self, name: str) -> None:
        self.names.append(name)
        self._exact.add(name)
        self._folded.setdefault(name.lower(), name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def clash(self, kind: str, value: str) -> str | None:
        """The accepted name that makes ``value`` a repeat (for users and query ids, up to case).
        A pass over the names in order finds the same one, as long as each was checked before it
        was accepted: then no two accepted names of a path kind fold to one."""
        if value in self._exact:
            return value
        return self._folded.get(value.lower()) if kind in PATH_KINDS else None


def name_problem(kind: str, value: Any, taken: Iterable[str] = ()) -> str | None:
    """Why ``value`` is not a valid ``kind`` name (None: it is).

    ``taken`` are the names of that kind already accepted: a repeat, or for users and
    query ids a name equal to one of them up to case, is a problem too (pass a :class:`Taken`
    when they are many).
    """
    if not isinstance(value, str):
        shown = "nothing" if value is None else f"the {type(value).__name__} {value!r}"
        return f"{kind} must be a name ({GRAMMAR}), not {shown}"
    if not NAME.fullmatch(value):
        shown = value if len(value) <= 80 else value[:77] + "..."
        why = (f"longer than {MAX_NAME_LENGTH} characters" if NAME.fullmatch(value[:MAX_NAME_LENGTH])
               and len(value) > MAX_NAME_LENGTH else reserved_problem(value) or f"a name is {GRAMMAR}")
        return f"{kind} {shown!r} is not a valid name: {why}"
    if _token_shaped(value):  # not echoed: it may be someone's token
        return (f"{kind} must not look like an access token (swt_, 16 hex digits, '_' and more): names are "
                "written to the audit trail and logs, which never hold a token")
    for other in _candidates(kind, value, taken):
        if other == value:
            return f"{kind} {value!r} is {'registered' if kind == 'query id' else 'declared'} twice"
        if kind in PATH_KINDS and other.lower() == value.lower():
            return (f"{kind} {value!r} differs from {other!r} only in case: {kind}s name folders, so they must "
                    "differ in more than case")
    return None


def reserved_problem(name: str) -> str | None:
    """Why ``name`` may not name a column of a query's rows (an output column, a FROM alias, a
    stream attribute): it is, or is shaped like, a column the engine adds (None: it may).

    >>> reserved_problem("value"), reserved_problem("_graph")
    (None, "'_graph' is the column the engine adds to every row for the authorized graph the row came from")
    >>> reserved_problem("__carry_member")
    "names starting with '__carry_' are the engine's columns for a shared group's member and its constants"
    >>> reserved_problem("_mine")
    "names starting with '_' are the system's own"
    """
    if not name.startswith(SYSTEM_PREFIX):
        return None
    if name in RESERVED_COLUMNS:
        return f"{name!r} is the column the engine adds to every row for {RESERVED_COLUMNS[name]}"
    for prefix, holds in RESERVED_PREFIXES.items():
        if name.startswith(prefix):
            return f"names starting with {prefix!r} are the engine's columns for {holds}"
    return f"names starting with {SYSTEM_PREFIX!r} are the system's own"


def _candidates(kind: str, value: str, taken: Iterable[str]) -> Iterable[str]:
    if isinstance(taken, Taken):
        other = taken.clash(kind, value)
        return () if other is None else (other,)
    return taken


#: Anything shaped like a bearer token (``swt_<16 hex>_<secret>``): never a name, never logged.
_TOKEN_ANYWHERE = re.compile(r"swt_[0-9a-f]{16}_[A-Za-z0-9_-]{20,}")


def looks_like_token(text: str) -> bool:
    """Does ``text`` hold something shaped like a token (to keep tokens out of names, logs and
    the audit trail)?

    >>> looks_like_token("user:ann"), looks_like_token("Bearer swt_" + "ab" * 8 + "_" + "x" * 43)
    (False, True)
    """
    return "swt_" in text and _TOKEN_ANYWHERE.search(text) is not None


def _token_shaped(value: str) -> bool:
    """Does a name hold something shaped like a token (``swt_0123456789abcdef_AAAA...``)?"""
    return looks_like_token(value)


def check_name(kind: str, value: Any, *, taken: Iterable[str] = (),
               fail: Callable[[str], BaseException | None] | None = None) -> str:
    """``value`` if it is a valid ``kind`` name; else raises :class:`InvalidName`.

    ``fail``, when given, builds (or raises) the error instead, so a file's loader can
    report the name's own file:line:col: ``check_name("query id", qid, fail=lambda m: fail(node, m))``.
    """
    problem = name_problem(kind, value, taken)
    if problem is None:
        return value
    if fail is not None:
        error = fail(problem)
        if error is not None:
            raise error
    raise InvalidName(problem)


def check_names(kind: str, values: Iterable[Any]) -> list[str]:
    """Each of ``values`` checked as a ``kind`` name (and, for path kinds, distinct up to case)."""
    accepted = Taken()
    for value in values:
        accepted.append(check_name(kind, value, taken=accepted))
    return accepted.names


# -- the catalog --------------------------------------------------------------------------
Fail = Callable[..., Any]  # the loader's fail(path, message, key=False): raises CatalogError at path


def check_catalog_names(data: Any, fail: Fail) -> None:
    """Check every name a catalog declares or refers to, as the loader reads it (``data`` is
    the YAML as Python values; ``fail(path, message, key=...)`` raises at that path's
    file:line:col). Sections of the wrong shape are left to the loader's own checks."""
    if not isinstance(data, dict):
        return

    def key(kind: str, path: tuple[object, ...], value: Any, taken: Taken) -> None:
        problem = name_problem(kind, value, taken)
        if problem is not None:
            fail(path, problem, key=True)
        taken.append(value)

    def value(kind: str, path: tuple[object, ...], raw: Any) -> None:
        for i, item in enumerate(raw if isinstance(raw, list) else [raw]):
            if isinstance(item, str) and item != "*":  # "*": every attribute; other types: the loader says
                problem = name_problem(kind, item)
                if problem is not None:
                    fail(path + (i,) if isinstance(raw, list) else path, problem)

    streams = data.get("streams")
    if isinstance(streams, dict):
        seen = Taken()
        for name, spec in streams.items():
            key("stream", ("streams", name), name, seen)
            schema = spec.get("schema") if isinstance(spec, dict) else None
            if isinstance(schema, dict):
                attributes = Taken()
                for attr in schema:
                    key("attribute", ("streams", name, "schema", attr), attr, attributes)
    for section, kind in (("roles", "role"), ("users", "user"), ("actions", "action")):
        entries = data.get(section)
        if isinstance(entries, dict):
            seen = Taken()
            for name, spec in entries.items():
                key(kind, (section, name), name, seen)
                if section == "roles" and isinstance(spec, dict) and "inherits" in spec:
                    value("role", ("roles", name, "inherits"), spec["inherits"])
                if section == "users" and isinstance(spec, dict):
                    if "roles" in spec:
                        value("role", ("users", name, "roles"), spec["roles"])
                    profile = spec.get("profile")
                    if isinstance(profile, dict):
                        attributes = Taken()
                        for attr in profile:
                            key("profile attribute", ("users", name, "profile", attr), attr, attributes)
    policies = data.get("policies")
    if isinstance(policies, list):
        for i, policy in enumerate(policies):
            if not isinstance(policy, dict):
                continue
            path: tuple[object, ...] = ("policies", i)
            if "id" in policy:
                pid = policy["id"]
                value("policy id", path + ("id",), pid if isinstance(pid, str) else str(pid))
            if "subject" in policy:
                value("role", path + ("subject",), policy["subject"])
            if "streams" in policy:
                value("stream", path + ("streams",), policy["streams"])
            if "group_by" in policy:
                value("attribute", path + ("group_by",), policy["group_by"])
            attributes_raw = policy.get("attributes")
            for j, attr in enumerate(attributes_raw if isinstance(attributes_raw, list) else []):
                if isinstance(attr, str):  # bare, or Stream.attr: each part a name
                    for part in attr.split(".", 1):
                        problem = name_problem("attribute", part)
                        if problem is not None:
                            fail(path + ("attributes", j), problem)


# -- paths ---------------------------------------------------------------------------------
def safe_path(root: str | os.PathLike[str], *parts: str) -> Path:
    """``root/part/...`` (``root`` resolved), each part one plain file or folder name, none of
    them an existing symlink (one planted in the output tree would lead out of it, or into
    another user's folder), and the result strictly under ``root``: raises
    :class:`UnsafePath` otherwise."""
    base = Path(root)
    for part in parts:
        text = str(part)
        if (not text or text in (".", "..") or "/" in text or "\\" in text or "\0" in text or "\n" in text
                or (os.altsep is not None and os.altsep in text)):
            raise UnsafePath(f"refusing the path component {text!r} under {base}: a path part must be one plain "
                             "file or folder name")
    # Each part is a plain name and none of the steps is a symlink, under a root resolved
    # here: the result resolves to itself, strictly under the root (one lstat per part: a
    # service's every read of rows comes through here).
    step = os.path.realpath(base)
    for part in parts:
        step = os.path.join(step, part)
        if os.path.islink(step):
            raise UnsafePath(f"refusing {step}: it is a symlink, and nothing under an output folder may lead "
                             "elsewhere (remove it)")
    return Path(step)


def private_dir(path: str | os.PathLike[str], *, tighten: bool = False) -> Path:
    """Create ``path`` and its missing parents readable by their owner only (0700); with
    ``tighten``, also make an existing ``path`` itself 0700 (a per-user folder we own).
    Folders that already exist above it are left as they are."""
    path = Path(path)
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, PRIVATE_DIR)
        except FileExistsError:
            pass
        os.chmod(folder, PRIVATE_DIR)  # mkdir's mode is cut by the umask; never widened by it
    if tighten and path.is_dir() and not path.is_symlink():
        os.chmod(path, PRIVATE_DIR)
    return path


def open_private(path: str | os.PathLike[str]) -> Any:
    """A new file at ``path`` for writing text, mode 0600; an existing file or symlink there is
    replaced, never followed."""
    path = Path(path)
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), PRIVATE_FILE)
    return os.fdopen(fd, "w", encoding="utf-8")


def make_private(path: str | os.PathLike[str]) -> None:
    """Folders 0700 and files 0600 from ``path`` down (what Spark wrote, before it is handed over)."""
    path = Path(path)
    if path.is_symlink():
        return
    if path.is_file():
        os.chmod(path, PRIVATE_FILE)
        return
    for folder, _dirs, files in os.walk(path):
        os.chmod(folder, PRIVATE_DIR)
        for name in files:
            file = os.path.join(folder, name)
            if not os.path.islink(file):
                os.chmod(file, PRIVATE_FILE)


def inside(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    """Does ``path`` lie in ``folder`` (or is it ``folder``), both resolved?"""
    return Path(path).resolve().is_relative_to(Path(folder).resolve())


__all__ = ["GRAMMAR", "InvalidName", "MAX_NAME_LENGTH", "NAME", "RESERVED_COLUMNS", "RESERVED_PREFIXES",
           "SYSTEM_PREFIX", "UnsafePath", "check_catalog_names", "check_name", "check_names", "inside", "make_private",
           "name_problem", "open_private", "private_dir", "reserved_problem", "safe_path"]
