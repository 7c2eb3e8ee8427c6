"""Serve the Hub replica on loopback: olah (a maintained, self-hosted Hugging Face mirror server) in offline mode
over the git repositories that `hub_replica.build` wrote, plus two things olah does not do, as one ASGI middleware:

* gated repositories: a file request without the replica's token gets 401 (with a wrong token 403) and the Hub's
  `X-Error-Code: GatedRepo` header, so huggingface_hub raises GatedRepoError as it does against the real Hub;
* revisions with slashes (`refs/convert/parquet`, sent URL-encoded by huggingface_hub): olah's routes split the
  decoded path at `/`, so the middleware swaps such a revision for the commit it points to;
* repository info without a revision (`/api/models/<org>/<name>`, what `HfApi.model_info` asks): olah answers it
  only from its proxy cache, never from a mirror, so the middleware asks for `.../revision/main`, as the Hub means;
and a static mount `/external/` for files a loading script read from outside the Hub (allenai/nllb's TSV files).

With network faults (`replica.json`'s `faults`, for the retry tests), a small TCP front (`Front`) listens on the
public port instead and passes each HTTP request on to olah on a private port, except the requests it breaks: per
repository, the first N requests whose path names it (or every one), answered by a TCP reset (SO_LINGER 0: the
client reads "Connection reset by peer"), an HTTP status of our choice (429 with Retry-After, 503), or a delay. A
reset must happen below HTTP (an ASGI app can only answer), hence the front.

    python scripts/hub_replica/serve.py --root DIR --port N [--lifetime SECONDS]

`DIR` holds `mirrors/` (olah's mirror layout), `external/`, and `replica.json` (gated repositories, token, refs,
faults). The server exits by itself after --lifetime seconds (default 900), whatever the caller does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import struct
import threading
from pathlib import Path
from urllib.parse import quote

_RESOLVE = re.compile(r"^/(?:(datasets|models)/)?([^/]+/[^/]+)/resolve/")
_INFO = re.compile(r"^/api/(datasets|models)/[^/]+/[^/]+$")


class Shim:
    """ASGI middleware: the replica's gate and slashed-revision rewrite in front of olah's app."""

    def __init__(self, app, meta: dict):
        self.app = app
        self.gated = set(meta["gated"])
        self.token = meta["token"]
        self.refs = meta["refs"]  # "datasets/org/name" -> {ref: sha}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        for repo, refs in self.refs.items():
            for ref, sha in refs.items():
                if f"/{repo.split('/', 1)[1]}/" in path and f"/{ref}" in path:
                    path = path.replace(f"/{ref}", f"/{sha}", 1)
                    scope = {**scope, "path": path, "raw_path": quote(path).encode()}
        if _INFO.match(path):
            path += "/revision/main"
            scope = {**scope, "path": path, "raw_path": quote(path).encode()}
        match = _RESOLVE.match(path)
        if match:
            repo = f"{match.group(1) or 'models'}/{match.group(2)}"
            if repo in self.gated:
                auth = dict(scope["headers"]).get(b"authorization", b"").decode()
                if auth != f"Bearer {self.token}":
                    kind = "dataset" if repo.startswith("datasets/") else "model"
                    message = (
                        f"Access to {kind} {match.group(2)} is restricted. You must have access to it and be "
                        "authenticated to access it. Please log in."
                        if not auth
                        else f"Access to {kind} {match.group(2)} is restricted and you are not in the authorized "
                        "list. Visit the repository page to ask for access."
                    )
                    await send(
                        {
                            "type": "http.response.start",
                            "status": 401 if not auth else 403,
                            "headers": [
                                (b"x-error-code", b"GatedRepo"),
                                (b"x-error-message", message.encode()),
                                (b"content-type", b"application/json"),
                            ],
                        }
                    )
                    await send({"type": "http.response.body", "body": json.dumps({"error": message}).encode()})
                    return
        return await self.app(scope, receive, send)


class Front:
    """The faults' TCP front: reads each request's head (and its Content-Length body) from the client, decides by
    its path, and either breaks it or passes it to `upstream` (olah), whose answers are copied back as they come.

    `faults`: {repo_id: {"mode": "reset" | "status" | "delay", "first": N or None (every request), "status": 503,
    "retry_after": seconds, "seconds": delay}}. A request belongs to a repository when its path holds
    `/<repo_id>/` (API, resolve and tree paths alike). Counts are per repository, across connections; the log
    (`faults.log` in the root) has one line per request broken."""

    def __init__(self, faults: dict, upstream_port: int, log: Path):
        self.faults, self.upstream_port, self.log = faults, upstream_port, log
        self.seen: dict[str, int] = {}

    def fault(self, path: str) -> dict | None:
        for repo, spec in self.faults.items():
            if f"/{repo}/" in path + "/":
                n = self.seen[repo] = self.seen.get(repo, 0) + 1
                if spec.get("first") is None or n <= spec["first"]:
                    with open(self.log, "a") as log:
                        log.write(f"{spec['mode']} #{n} {path}\n")
                    return spec
        return None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: asyncio.StreamWriter | None = None
        pump: asyncio.Task | None = None
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1].split("?")[0] if len(lines[0].split(" ")) > 1 else "/"
                headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
                body = await reader.readexactly(int(headers.get("content-length") or 0))
                spec = self.fault(path)
                if spec and spec["mode"] == "reset":
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                if spec and spec["mode"] == "status":
                    extra = f"Retry-After: {spec['retry_after']}\r\n" if spec.get("retry_after") is not None else ""
                    writer.write(
                        f"HTTP/1.1 {spec['status']} Replica Fault\r\n{extra}Content-Length: 0\r\n"
                        "Connection: close\r\n\r\n".encode()
                    )
                    await writer.drain()
                    return
                if spec and spec["mode"] == "delay":
                    await asyncio.sleep(spec["seconds"])
                if upstream is None:
                    up_reader, upstream = await asyncio.open_connection("127.0.0.1", self.upstream_port)
                    pump = asyncio.create_task(self.copy(up_reader, writer))
                upstream.write(head + body)
                await upstream.drain()
                if "chunked" in headers.get("transfer-encoding", ""):  # no request of these clients; pass it as is
                    await self.copy(reader, upstream)
                    return
        finally:
            if pump:
                pump.cancel()
            for w in (upstream, writer):
                if w is not None and not w.transport.is_closing():
                    w.close()

    @staticmethod
    async def copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if not writer.transport.is_closing():
                writer.close()


async def serve(app, port: int, faults: dict, log: Path) -> None:
    """uvicorn on `port`, or with faults on a private port behind a `Front` on `port` (started once uvicorn is)."""
    import uvicorn

    if not faults:
        await uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")).serve()
        return
    private = socket.socket()
    private.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=[private]))
    while not server.started:
        if task.done():
            return task.result()
        await asyncio.sleep(0.05)
    front = Front(faults, private.getsockname()[1], log)
    async with await asyncio.start_server(front.handle, "127.0.0.1", port):
        await task


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True, type=Path)
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--lifetime", type=float, default=900)
    args = parser.parse_args()
    root = args.root.resolve()
    meta = json.loads((root / "replica.json").read_text())
    toml = root / "olah.toml"
    toml.write_text(
        f'[basic]\nhost = "127.0.0.1"\nport = {args.port}\nrepos-path = "{root / "olah-cache"}"\n'
        f'mirrors-path = ["{root / "mirrors"}"]\n[accessibility]\noffline = true\n'
    )

    timer = threading.Timer(args.lifetime, lambda: os._exit(0))
    timer.daemon = True
    timer.start()

    from fastapi.staticfiles import StaticFiles
    from olah.configs import OlahConfig
    from olah.server import AppSettings, app
    from olah.utils.logging import build_logger

    app.state.logger = build_logger("olah", "olah.log", logger_dir=str(root / "logs"))
    app.state.app_settings = AppSettings(config=OlahConfig(str(toml)))
    app.mount("/external", StaticFiles(directory=root / "external"), name="external")
    asyncio.run(serve(Shim(app, meta), args.port, meta.get("faults") or {}, root / "faults.log"))


if __name__ == "__main__":
    main()
