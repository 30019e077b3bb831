"""A small, real HTTP server that speaks the few Hugging Face Hub endpoints the app and ``crs-arena space publish``
call through ``huggingface_hub`` (2.x), and records what it received. Standard library only; 127.0.0.1 only.

Point the client at it with ``HF_ENDPOINT`` (read when huggingface_hub is imported: start a subprocess) and set
``HF_HUB_DISABLE_XET=1``: with ``hf_xet`` installed the client uploads large files through Xet storage, chosen on the
client side (``huggingface_hub.utils.is_xet_available``) with no answer of the server's to fall back on, and Xet's
storage protocol is not faked here; without it the client takes the classic LFS path, which is.

Endpoints: repo creation (``POST /api/repos/create``), README metadata check (``POST /api/validate-yaml``),
pre-upload (``POST /api/<type>s/<id>/preupload/<rev>``: a file over 10 MB or with a NUL byte in its sample goes as
LFS, as the Hub decides), LFS batch, upload and verify, the commit (NDJSON; a binary or oversized file committed as a
regular file is refused as the Hub refuses it), Space variables and secrets, and file downloads
(``HEAD``/``GET /<prefix><id>/resolve/<rev>/<path>``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LARGE = 10 * 1000 * 1000
PREFIXES = {"spaces/": "space", "datasets/": "dataset"}


@dataclass
class Repo:
    repo_type: str
    created: dict = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    lfs: set[str] = field(default_factory=set)  # paths committed as LFS pointers
    commits: list[dict] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)

    @property
    def head(self) -> str:
        return hashlib.sha1(json.dumps(len(self.commits)).encode()).hexdigest()


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.lfs_objects: dict[str, bytes] = {}
        self.requests: list[dict] = []  # method, path, body (bytes), authorization (bool)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- set-up and reading ---------------------------------------------------------------------------------------

    def add_repo(self, repo_id: str, repo_type: str, files: dict[str, bytes] | None = None) -> Repo:
        repo = self.repos.setdefault(repo_id, Repo(repo_type))
        repo.files.update(files or {})
        return repo

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def bodies(self) -> bytes:
        """Every request body received, joined (to look for a value that must not have been sent)."""
        return b"\n".join(r["body"] for r in self.requests)

    # -- server ---------------------------------------------------------------------------------------------------

    def __enter__(self) -> FakeHub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _body(self) -> bytes:
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _send(self, status: int, payload=None, headers: dict | None = None, raw: bytes | None = None) -> None:
                body = raw if raw is not None else (b"" if payload is None else json.dumps(payload).encode())
                headers = {"Content-Type": "application/json", **(headers or {})}
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _handle(self) -> None:
                body = self._body() if self.command in ("POST", "PUT") else b""
                path = self.path.split("?", 1)[0]
                with hub._lock:
                    hub.requests.append(
                        {
                            "method": self.command,
                            "path": path,
                            "body": body,
                            "authorization": bool(self.headers.get("Authorization")),
                        }
                    )
                    status, payload, headers, raw = hub.route(self.command, path, body)
                self._send(status, payload, headers, raw)

            do_GET = do_POST = do_PUT = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- routes ---------------------------------------------------------------------------------------------------

    def route(self, method: str, path: str, body: bytes):
        """(status, json payload, headers, raw body) for one request."""
        if method == "POST" and path == "/api/repos/create":
            data = json.loads(body)
            repo_id = f"{data['organization']}/{data['name']}" if data.get("organization") else data["name"]
            if repo_id in self.repos:
                return 409, {"error": "You already created this repo", "url": f"{self.url}/{repo_id}"}, None, None
            self.add_repo(repo_id, data.get("type") or "model").created = data
            return 200, {"url": f"{self.url}/spaces/{repo_id}", "name": repo_id}, None, None
        if method == "POST" and path == "/api/validate-yaml":
            content = json.loads(body)["content"]
            front = content.split("---", 2)[1] if content.startswith("---") else ""
            if json.loads(body).get("repoType") == "space" and not re.search(r"^sdk:\s*\S", front, re.M):
                return 400, {"errors": [{"message": "a Space's README needs 'sdk'"}], "warnings": []}, None, None
            return 200, {"errors": [], "warnings": []}, None, None
        m = re.fullmatch(r"/api/(space|dataset|model)s/([^/]+/[^/]+)/(preupload|commit)/([^/]+)", path)
        if m and method == "POST":
            repo = self.repos.get(m[2])
            if repo is None:
                return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}, None
            return self._preupload(body) if m[3] == "preupload" else self._commit(repo, m[2], body)
        m = re.fullmatch(r"/(spaces/|datasets/)?([^/]+/[^/]+)\.git/info/lfs/objects/batch", path)
        if m and method == "POST":
            return self._lfs_batch(json.loads(body))
        m = re.fullmatch(r"/lfs-upload/([0-9a-f]{64})", path)
        if m and method == "PUT":
            if hashlib.sha256(body).hexdigest() != m[1]:
                return 400, {"error": "sha256 mismatch"}, None, None
            self.lfs_objects[m[1]] = body
            return 200, None, None, b""
        if path == "/lfs-verify" and method == "POST":
            data = json.loads(body)
            ok = len(self.lfs_objects.get(data["oid"], b"")) == data["size"]
            return (200 if ok else 404), {}, None, None
        m = re.fullmatch(r"/api/spaces/([^/]+/[^/]+)/(variables|secrets)", path)
        if m and method == "POST":
            repo = self.repos.get(m[1])
            if repo is None:
                return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}, None
            data = json.loads(body)
            getattr(repo, m[2])[data["key"]] = data["value"]
            return 200, {}, None, None
        m = re.fullmatch(r"/(spaces/|datasets/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if m and method in ("GET", "HEAD"):
            return self._resolve(m[2], m[4])
        return 404, {"error": f"fake hub: no route for {method} {path}"}, None, None

    def _preupload(self, body: bytes):
        files = []
        for f in json.loads(body)["files"]:
            sample = base64.b64decode(f["sample"])
            lfs = f["size"] > LARGE or b"\0" in sample
            files.append({"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False})
        return 200, {"files": files}, None, None

    def _lfs_batch(self, data: dict):
        objects = []
        for o in data["objects"]:
            entry = {"oid": o["oid"], "size": o["size"], "authenticated": True}
            if o["oid"] not in self.lfs_objects:
                entry["actions"] = {
                    "upload": {"href": f"{self.url}/lfs-upload/{o['oid']}"},
                    "verify": {"href": f"{self.url}/lfs-verify"},
                }
            objects.append(entry)
        return 200, {"transfer": "basic", "objects": objects}, {"Content-Type": "application/vnd.git-lfs+json"}, None

    def _commit(self, repo: Repo, repo_id: str, body: bytes):
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        changes: dict[str, tuple[bytes, bool]] = {}
        for line in lines:
            value = line["value"]
            if line["key"] == "file":
                content = base64.b64decode(value["content"])
                if len(content) > LARGE or b"\0" in content[:8000]:
                    return 400, {"error": "Your push was rejected because it contains binary files"}, None, None
                changes[value["path"]] = (content, False)
            elif line["key"] == "lfsFile":
                if value["oid"] not in self.lfs_objects:
                    return 400, {"error": f"LFS object {value['oid']} was never uploaded"}, None, None
                changes[value["path"]] = (self.lfs_objects[value["oid"]], True)
        for path, (content, lfs) in changes.items():
            repo.files[path] = content
            (repo.lfs.add if lfs else repo.lfs.discard)(path)
        repo.commits.append({"header": lines[0]["value"] if lines else {}, "paths": sorted(changes)})
        return 200, {"commitUrl": f"{self.url}/{repo_id}/commit/{repo.head}", "commitOid": repo.head}, None, None

    def _resolve(self, repo_id: str, filename: str):
        repo = self.repos.get(repo_id)
        if repo is None:
            return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}, None
        if filename not in repo.files:
            return 404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"}, None
        content = repo.files[filename]
        etag = hashlib.sha256(content).hexdigest()
        headers = {"X-Repo-Commit": repo.head, "ETag": f'"{etag}"', "Content-Type": "application/octet-stream"}
        return 200, None, headers, content
