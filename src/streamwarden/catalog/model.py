"""The catalog: streams, roles, users, actions and access control policies.

These are plain immutable values; :mod:`streamwarden.catalog.loader` builds them from
YAML (with file/line/column errors) and :mod:`streamwarden.catalog.store` persists them.
A policy is Definition 4.2 of Carminati et al.: (subject role, protection object =
streams + attributes + expression, privilege, general time constraint, window constraint).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping, cast

from streamwarden.errors import SourceText, StreamwardenError
from streamwarden.plan.expr import Expr

if TYPE_CHECKING:  # for annotations only: the SPs' module imports this one (through the language)
    from streamwarden.catalog.lattice import Lattice, Level, LevelSource
    from streamwarden.catalog.punctuations import SecurityPunctuation
    from streamwarden.catalog.sources import KafkaSource

TYPES = ("timestamp", "int", "long", "double", "string", "boolean")
PRIVILEGES = ("read", "min", "max", "count", "avg", "sum")


@dataclass(frozen=True)
class StreamDef:
    """A stream and its schema. Every stream has the event-time attribute ``ts``."""

    name: str
    schema: tuple[tuple[str, str], ...]
    key: str | None = None
    # Options later mechanisms read (punctuated_by, level, server_policies, ...), as given.
    options: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}), compare=False)

    @property
    def attributes(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.schema)

    def type_of(self, attribute: str) -> str | None:
        return dict(self.schema).get(attribute)

    @property
    def source(self) -> "KafkaSource | None":
        """Where its records come from: a Kafka topic the catalog declares, or None (files given
        on the command line)."""
        return cast("KafkaSource | None", self.options.get("source"))

    @property
    def punctuated(self) -> bool:
        """A stream with a ``key`` carries security punctuations: SPs decide access to it."""
        return self.key is not None

    @property
    def punctuated_by(self) -> str | None:
        """The attribute naming each record's provider (one shield per provider), if any."""
        value = self.options.get("punctuated_by")
        return None if value is None else str(value)

    @property
    def server_policies(self) -> tuple[SecurityPunctuation, ...]:
        """The server's SPs for this stream (parsed by the loader)."""
        return tuple(cast("tuple[SecurityPunctuation, ...]", self.options.get("server_policies", ())))

    @property
    def combine(self) -> str:
        return str(self.options.get("combine", "intersect"))

    @property
    def level_source(self) -> LevelSource | None:
        """Where its tuples' security levels come from (a parsed
        :class:`streamwarden.catalog.lattice.LevelSource`), None when undeclared."""
        return cast("LevelSource | None", self.options.get("level"))


@dataclass(frozen=True)
class Role:
    name: str
    inherits: tuple[str, ...] = ()


@dataclass(frozen=True)
class User:
    name: str
    roles: tuple[str, ...]
    profile: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}), compare=False)
    clearance: Level | None = None  # None: public (the lattice's bottom)


@dataclass(frozen=True)
class Action:
    """A real-world action; ``start`` None means it is not taking place."""

    name: str
    start: datetime | None = None
    end: datetime | None = None
    target: float | None = None


@dataclass(frozen=True)
class TimeBound:
    """One end of a general time constraint: a timestamp or ``start(x)``/``end(x)``."""

    value: datetime | None = None
    action_kind: str | None = None  # start | end
    action: str | None = None

    def __str__(self) -> str:
        if self.action:
            return f"{self.action_kind}({self.action})"
        assert self.value is not None
        return self.value.isoformat()


@dataclass(frozen=True)
class Policy:
    """An access control policy (Definition 4.2).

    ``attributes`` None means ``*``. ``where`` is bound over columns named
    ``<Stream>.<attr>`` and may contain ``self.`` references and action functions.
    """

    id: str
    subject: str
    streams: tuple[str, ...]
    attributes: tuple[str, ...] | None
    privilege: str
    where: Expr | None = None
    where_text: str | None = None
    time: tuple[TimeBound, TimeBound] | None = None
    window: tuple[float, float] | None = None  # minimum (size, offset) in seconds
    source: SourceText | None = field(default=None, compare=False, repr=False)
    line: int | None = field(default=None, compare=False)
    # Inference control of aggregate privileges (docs/semantics.md, "Inference control"):
    group_by: tuple[str, ...] = ()  # attributes a query may group by (shown in clear, one value per group)
    aggregate_args: str = "attributes"  # or "expressions": may the aggregate read SUM(x * x), not only SUM(x)?
    min_group: int | None = None  # an aggregate row over fewer tuples is withheld

    def describe(self) -> str:
        atts = "*" if self.attributes is None else ", ".join(self.attributes)
        text = f"{self.id}: {self.subject} may {self.privilege} {atts} of {' x '.join(self.streams)}"
        if self.where_text:
            text += f" where {self.where_text}"
        if self.time:
            text += f" during [{self.time[0]}, {self.time[1]}]"
        if self.window:
            text += f" with windows of at least {self.window[0]:g}s / {self.window[1]:g}s"
        if self.group_by:
            text += f" grouped by at most {', '.join(self.group_by)}"
        if self.min_group:
            text += f" over at least {self.min_group} tuples"
        return text


@dataclass(frozen=True)
class Catalog:
    """Everything the security administrator declared. Build it with :func:`load_catalog`."""

    streams: Mapping[str, StreamDef]
    roles: Mapping[str, Role]
    users: Mapping[str, User]
    actions: Mapping[str, Action]
    policies: tuple[Policy, ...]
    name: str = "<catalog>"
    text: str = field(default="", compare=False, repr=False)
    lattice: Lattice | None = None  # security levels are in force

    def clearance(self, user: str) -> Level:
        """The user's clearance (the lattice's bottom, public, when the catalog gives none)."""
        declared = self.users[user].clearance
        if declared is not None:
            return declared
        if self.lattice is None:
            raise StreamwardenError("a clearance needs security levels: the catalog declares no lattice")
        return self.lattice.bottom

    def effective_roles(self, user: str) -> frozenset[str]:
        """The user's roles plus every role they inherit, transitively (RBAC seniority)."""
        pending = list(self.users[user].roles)
        seen: set[str] = set()
        while pending:
            role = pending.pop()
            if role in seen:
                continue
            seen.add(role)
            pending.extend(self.roles[role].inherits if role in self.roles else ())
        return frozenset(seen)

    def policies_for(self, user: str) -> tuple[Policy, ...]:
        roles = self.effective_roles(user)
        return tuple(p for p in self.policies if p.subject in roles)
