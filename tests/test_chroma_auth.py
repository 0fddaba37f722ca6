"""A Chroma server as a team deploys it (issue 21, item 1): a real `chroma run` behind a reverse proxy on
127.0.0.1 that forwards a request only when it carries the right credential, as Chroma's docs have Envoy do.
The CLI is driven through it: the right token (or basic auth) works, a wrong or missing one is one clear line
with the exit code of an unreachable server and writes nothing, and a planted token appears in no output,
error or file."""

from __future__ import annotations

import base64
import http.client
import http.server
import json
import shutil
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

TOKEN = "tok-PLANTED-7c1e93ab5d"  # noqa: S105 - a test credential, grepped for everywhere
WRONG = "tok-WRONG-4410be02"  # noqa: S105
PASSWORD = "pw-PLANTED-e8d2"  # noqa: S105
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}
PAPERS = [
    ("t1", "Sparse attention for long contexts", "We make attention over long contexts sparse and fast."),
    ("t2", "Bandits with delayed feedback", "We study multi-armed bandits whose rewards arrive late."),
    ("t3", "Diffusion models for audio", "A diffusion model generates speech and music from noise."),
]


@contextmanager
def _proxy(
    upstream: int, allowed: Callable[[http.client.HTTPMessage], bool], tls: tuple[Path, Path] | None = None
) -> Iterator[dict]:
    """A reverse proxy to 127.0.0.1:`upstream` that answers 401 unless `allowed(headers)`, over https with
    `tls` (certificate, key); yields its url and counts of forwarded and refused requests."""
    seen = {"forwarded": 0, "refused": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _relay(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not allowed(self.headers):
                seen["refused"] += 1
                self._send(401, [("Content-Type", "text/plain")], b"Unauthorized")
                return
            seen["forwarded"] += 1
            conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            conn.request(self.command, self.path, body=body, headers=headers)
            answer = conn.getresponse()
            data = answer.read()
            self._send(answer.status, [(k, v) for k, v in answer.getheaders() if k.lower() not in _HOP], data)
            conn.close()

        def _send(self, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _relay

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield {"url": f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}", "seen": seen}
    finally:
        server.shutdown()
        server.server_close()


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "team.jsonl"
    path.write_text("".join(json.dumps({"id": i, "title": t, "abstract": a}) + "\n" for i, t, a in PAPERS))
    return path


def _collections(port: int, database: str = "default_database") -> list[str]:
    import chromadb

    return sorted(
        c.name for c in chromadb.HttpClient(host="127.0.0.1", port=port, database=database).list_collections()
    )


def _files_holding(root: Path, secrets: tuple[str, ...]) -> list[str]:
    """Every file under `root` whose bytes hold one of `secrets`."""
    found = []
    for path in root.rglob("*"):
        if path.is_file() and any(s.encode() in path.read_bytes() for s in secrets):
            found.append(str(path))
    return found


@pytest.mark.slow
def test_a_token_checking_proxy_lets_the_right_token_through_and_nothing_else(cli, tmp_path: Path) -> None:
    from chroma_server import ChromaServer

    corpus = _corpus(tmp_path)
    runs = []
    with (
        ChromaServer(tmp_path / "server") as server,
        _proxy(server.port, lambda h: h.get("Authorization") == f"Bearer {TOKEN}") as proxy,
    ):
        url = proxy["url"]
        right = {"RAG_ASSISTANT_CHROMA_URL": url, "RAG_ASSISTANT_CHROMA_TOKEN": TOKEN}
        runs.append(ingest := cli("ingest", str(corpus), env=right))
        assert ingest.returncode == 0, ingest.stderr
        runs.append(search := cli("search", "bandits whose rewards arrive late", "--json", env=right))
        assert search.returncode == 0, search.stderr
        assert json.loads(search.stdout)[0]["paper_id"] == "t2"
        runs.append(ask := cli("ask", "How do bandits cope with late rewards?", env=right))  # logs the answer
        assert ask.returncode == 0 and "[t2]" in ask.stdout, ask.stdout + ask.stderr
        runs.append(stats := cli("stats", "--json", env=right))
        assert json.loads(stats.stdout)["papers"] == 3 and json.loads(stats.stdout)["store"] == url

        refused_before = proxy["seen"]["refused"]
        wrong = {**right, "RAG_ASSISTANT_CHROMA_TOKEN": WRONG, "RAG_ASSISTANT_COLLECTION": "wrong"}
        missing = {"RAG_ASSISTANT_CHROMA_URL": url, "RAG_ASSISTANT_COLLECTION": "missing"}
        for env, said in ((wrong, "rejected the credentials sent"), (missing, "requires credentials and none are set")):
            for args in (("ingest", str(corpus)), ("search", "bandits")):
                runs.append(res := cli(*args, env=env))
                lines = [line for line in res.stderr.splitlines() if line.strip()]  # ingest ends its progress line
                assert res.returncode == 1, res.stderr  # as for an unreachable server
                assert lines[0] == f"error: the Chroma server at {url} {said} (HTTP 401)", lines
                assert len(lines) == 2 and "RAG_ASSISTANT_CHROMA_TOKEN" in lines[1] and "Traceback" not in res.stderr
        assert proxy["seen"]["refused"] > refused_before
        assert _collections(server.port) == [
            "abstracts",
            "abstracts.runs",
            "abstracts.sentences",
        ]  # the refused ingests created nothing

    for res in runs:
        assert TOKEN not in res.stdout + res.stderr and WRONG not in res.stdout + res.stderr
    data_dir = tmp_path / "data"
    assert data_dir.exists() and _files_holding(data_dir, (TOKEN, WRONG)) == []


@pytest.mark.slow
def test_chroma_cloud_style_x_chroma_token_tenant_database_and_basic_auth(cli, tmp_path: Path) -> None:
    """The token as Chroma Cloud takes it (X-Chroma-Token) into a named database; basic auth (settings, or user
    info in the URL, which is never shown); an unknown database is one clear line."""
    import chromadb
    from chroma_server import ChromaServer

    corpus = _corpus(tmp_path)
    basic = "Basic " + base64.b64encode(f"team:{PASSWORD}".encode()).decode()

    def allowed(h: http.client.HTTPMessage) -> bool:
        return h.get("X-Chroma-Token") == TOKEN or h.get("Authorization") == basic

    with ChromaServer(tmp_path / "server") as server, _proxy(server.port, allowed) as proxy:
        admin = chromadb.AdminClient(
            chromadb.Settings(
                chroma_api_impl="chromadb.api.fastapi.FastAPI",
                chroma_server_host="127.0.0.1",
                chroma_server_http_port=server.port,
            )
        )
        admin.create_database("team")
        url = proxy["url"]
        cloud = {
            "RAG_ASSISTANT_CHROMA_URL": url,
            "RAG_ASSISTANT_CHROMA_TOKEN": TOKEN,
            "RAG_ASSISTANT_CHROMA_TOKEN_HEADER": "X-Chroma-Token",
            "RAG_ASSISTANT_CHROMA_DATABASE": "team",
        }
        ingest = cli(
            "--chroma-database", "team", "ingest", str(corpus), env={**cloud, "RAG_ASSISTANT_CHROMA_DATABASE": ""}
        )
        assert ingest.returncode == 0, ingest.stderr
        assert (
            _collections(server.port, "team") == ["abstracts", "abstracts.runs", "abstracts.sentences"]
            and _collections(server.port) == []
        )

        in_url = url.replace("http://", f"http://team:{PASSWORD}@")
        runs = [
            cli(
                "search",
                "diffusion audio",
                "--json",
                env={
                    **cloud,
                    "RAG_ASSISTANT_CHROMA_TOKEN": "",
                    "RAG_ASSISTANT_CHROMA_USER": "team",
                    "RAG_ASSISTANT_CHROMA_PASSWORD": PASSWORD,
                },
            ),  # noqa: E501
            cli(
                "search",
                "diffusion audio",
                "--json",
                env={**cloud, "RAG_ASSISTANT_CHROMA_TOKEN": "", "RAG_ASSISTANT_CHROMA_URL": in_url},
            ),  # noqa: E501
        ]
        for res in runs:
            assert res.returncode == 0 and json.loads(res.stdout)[0]["paper_id"] == "t3", res.stderr
        runs.append(stats := cli("stats", "--json", env={**cloud, "RAG_ASSISTANT_CHROMA_URL": in_url}))
        assert json.loads(stats.stdout)["store"] == url, stats.stdout

        runs.append(nowhere := cli("search", "audio", env={**cloud, "RAG_ASSISTANT_CHROMA_DATABASE": "nowhere"}))
        lines = nowhere.stderr.splitlines()
        assert nowhere.returncode == 1 and lines[0].startswith(f"error: cannot open Chroma at {url}: "), lines
        assert "nowhere" in lines[0] and "chroma_database" in lines[1] and "Traceback" not in nowhere.stderr

    for res in runs:
        assert PASSWORD not in res.stdout + res.stderr and TOKEN not in res.stdout + res.stderr
    assert _files_holding(tmp_path / "data", (TOKEN, PASSWORD)) == []


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_https_is_verified_against_the_configured_ca_file(cli, tmp_path: Path) -> None:
    """A self-signed certificate is refused (one line pointing at chroma_ca_file) until its CA file is set or
    verification is turned off; a CA file that does not exist is a settings error."""
    from chroma_server import ChromaServer

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    with (
        ChromaServer(tmp_path / "server") as server,
        _proxy(server.port, lambda h: h.get("Authorization") == f"Bearer {TOKEN}", (cert, key)) as proxy,
    ):
        url = proxy["url"]
        env = {"RAG_ASSISTANT_CHROMA_URL": url, "RAG_ASSISTANT_CHROMA_TOKEN": TOKEN}
        refused = cli("stats", "--json", env=env)
        trusted = cli("stats", "--json", env={**env, "RAG_ASSISTANT_CHROMA_CA_FILE": str(cert)})
        unverified = cli("stats", "--json", env={**env, "RAG_ASSISTANT_CHROMA_TLS_VERIFY": "false"})
        no_file = cli("stats", env={**env, "RAG_ASSISTANT_CHROMA_CA_FILE": str(tmp_path / "nope.pem")})
    lines = refused.stderr.splitlines()
    assert refused.returncode == 1 and lines[0].startswith(f"error: cannot open Chroma at {url}: "), lines
    assert "CERTIFICATE_VERIFY_FAILED" in lines[0] and "chroma_ca_file" in lines[1] and len(lines) == 2, lines
    for res in (trusted, unverified):
        assert res.returncode == 0 and json.loads(res.stdout)["store"] == url, res.stderr
    assert no_file.returncode == 2 and no_file.stderr.startswith("error: chroma_ca_file not found"), no_file.stderr
    for res in (refused, trusted, unverified, no_file):
        assert TOKEN not in res.stdout + res.stderr and "Traceback" not in res.stderr
