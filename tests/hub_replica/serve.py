"""Serve the Hub replica on loopback: olah (a maintained, self-hosted Hugging Face mirror server) in offline mode
over the git repositories that `hub_replica.build` wrote, plus two things olah does not do, as one ASGI middleware:

* gated repositories: a file request without the replica's token gets 401 (with a wrong token 403) and the Hub's
  `X-Error-Code: GatedRepo` header, so huggingface_hub raises GatedRepoError as it does against the real Hub;
* revisions with slashes (`refs/convert/parquet`, sent URL-encoded by huggingface_hub): olah's routes split the
  decoded path at `/`, so the middleware swaps such a revision for the commit it points to;
* repository info without a revision (`/api/models/<org>/<name>`, what `HfApi.model_info` asks): olah answers it
  only from its proxy cache, never from a mirror, so the middleware asks for `.../revision/main`, as the Hub means;
and a static mount `/external/` for files a loading script read from outside the Hub (allenai/nllb's TSV files).

    python tests/hub_replica/serve.py --root DIR --port N [--lifetime SECONDS]

`DIR` holds `mirrors/` (olah's mirror layout), `external/`, and `replica.json` (gated repositories, token, refs).
The server exits by itself after --lifetime seconds (default 900), whatever the caller does.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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

    import uvicorn
    from fastapi.staticfiles import StaticFiles
    from olah.configs import OlahConfig
    from olah.server import AppSettings, app
    from olah.utils.logging import build_logger

    app.state.logger = build_logger("olah", "olah.log", logger_dir=str(root / "logs"))
    app.state.app_settings = AppSettings(config=OlahConfig(str(toml)))
    app.mount("/external", StaticFiles(directory=root / "external"), name="external")
    uvicorn.run(Shim(app, meta), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
