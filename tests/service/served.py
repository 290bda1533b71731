"""``streamwarden serve`` for real: a subprocess on Spark, its URL, tokens and folders.

    with Served.start(tmp_path) as served:
        served.post("/v1/queries", "ann", json={...})

The service listens on a free port (``--port 0``; the port comes from its ``listening on``
line). :meth:`Served.kill` sends SIGKILL (no cleanup at all) and :meth:`Served.restart`
starts it again on the same store, checkpoint and output, as an operator would.
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

from streamwarden.catalog.identity import create_token
from streamwarden.catalog.loader import load_catalog_text
from streamwarden.catalog.store import CatalogStore

from .conftest import CATALOG

START_TIMEOUT = 180.0  # seconds for Spark and the first pipelines on a loaded 2-core machine


@dataclass
class Served:
    root: Path
    store_url: str
    tokens: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[str] | None = None
    url: str = ""
    log: Path | None = None
    verify: ssl.SSLContext | bool = True  # with TLS: trusting the service's own certificate

    @classmethod
    def start(cls, root: Path, *, catalog: str = CATALOG, extra: tuple[str, ...] = (), tls: bool = False) -> "Served":
        (root / "home").mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{root / 'home' / 'store.db'}"
        CatalogStore(url).save(load_catalog_text(catalog, "catalog.yaml"))
        served = cls(root, url)
        for user in ("ann", "bob", "eve"):
            served.tokens[user] = create_token(url, user, expires=timedelta(hours=2))
        served.tokens["root"] = create_token(url, "root", admin=True, expires=timedelta(hours=2))
        served.tokens["readings"] = create_token(url, provider_stream="Readings", expires=timedelta(hours=2))
        served.tokens["vitals7"] = create_token(url, provider_stream="Vitals", provider_key="7",
                                                expires=timedelta(hours=2))
        if tls:
            cert, key = self_signed(root)
            extra = (*extra, "--tls-cert", str(cert), "--tls-key", str(key))
            served.verify = ssl.create_default_context(cafile=str(cert))
        served.extra = extra  # type: ignore[attr-defined]
        return served.launch()

    def launch(self) -> "Served":
        self.log = self.root / f"serve-{int(time.time() * 1000)}.log"
        command = [sys.executable, "-m", "streamwarden.cli.main", "serve", "--store", self.store_url,
                   "--input", f"Readings={self.root / 'in' / 'Readings'}",
                   "--input", f"Vitals={self.root / 'in' / 'Vitals'}",
                   "--output-dir", str(self.root / "out"), "--checkpoint", str(self.root / "checkpoint"),
                   "--port", "0", "--trigger", "0.5 seconds", *getattr(self, "extra", ())]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=open(self.log, "w"), text=True,
                                        env=env, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError(f"serve ended before listening: {self.log.read_text()[-3000:]}")
            if line.startswith("listening on "):
                self.url = line.split(" ", 2)[2].strip()
                return self
        raise AssertionError("serve did not listen in time")

    # -- requests --------------------------------------------------------------------------------
    def headers(self, holder: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[holder]}"}

    def request(self, method: str, path: str, holder: str | None = None, **kwargs: Any) -> httpx.Response:
        headers = dict(kwargs.pop("headers", {}))
        if holder is not None:
            headers.update(self.headers(holder))
        return httpx.request(method, self.url + path, headers=headers, timeout=30, verify=self.verify, **kwargs)

    def get(self, path: str, holder: str | None = None, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, holder, **kwargs)

    def post(self, path: str, holder: str | None = None, **kwargs: Any) -> httpx.Response:
        return self.request("POST", path, holder, **kwargs)

    def rows(self, query: str, holder: str, after: str = "0") -> tuple[list[dict], str]:
        answer = self.get(f"/v1/queries/{query}/rows?after={after}&limit=10000", holder)
        answer.raise_for_status()
        body = answer.json()
        return body["rows"], body["next"]

    def wait_rows(self, query: str, holder: str, count: int, timeout: float = 120.0) -> list[dict]:
        """Poll until ``holder`` has ``count`` rows of ``query`` (the network runs micro-batches)."""
        deadline = time.monotonic() + timeout
        rows: list[dict] = []
        while time.monotonic() < deadline:
            rows, _ = self.rows(query, holder)
            if len(rows) >= count:
                return rows
            time.sleep(0.25)  # polling a service from outside: there is no processAllAvailable here
        raise AssertionError(f"{holder} has {len(rows)} rows of {query}, not {count}: {self.log_tail()}")

    def wait_metrics(self, *lines: str, timeout: float = 60.0) -> str:
        """Poll ``/metrics`` (as root) until it holds every one of ``lines``: a batch's rows are
        readable a moment before its counters move (they are counted once they are delivered)."""
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.get("/metrics", "root").text
            if all(line in text for line in lines):
                return text
            time.sleep(0.25)  # polling a service from outside: there is no processAllAvailable here
        raise AssertionError(f"/metrics lacks {[line for line in lines if line not in text]}: {self.log_tail()}")

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:] if self.log else ""

    # -- lifecycle ---------------------------------------------------------------------------------
    def terminate(self, timeout: float = 120.0) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL the service and everything it started (Spark's JVM, Python workers)."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def restart(self) -> "Served":
        return self.launch()

    def __enter__(self) -> "Served":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(30)


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, PEM files in ``folder`` (for the TLS test)."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path
