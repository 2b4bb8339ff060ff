"""A small Hugging Face Hub stand-in for offline tests: enough of its HTTP API for uploads and downloads.

huggingface_hub talks to it as to the real Hub when `HF_ENDPOINT` points here. It answers what
`whoami`, `create_repo`, `list_repo_files`, `create_commit` (README validation, pre-upload, commit)
and `hf_hub_download` (HEAD then GET of `resolve/`) send. Every file is a regular (non-LFS) file,
so commits carry their content inline, base64-encoded.
"""

import base64
import hashlib
import json
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

import yaml


@dataclass
class Commit:
    message: str
    added: dict[str, bytes]
    deleted: list[str]
    oid: str


@dataclass
class FakeHub:
    """The server's state: repos and their files, what was asked, and errors to answer first."""

    user: str = "tester"
    token: str = "hf_test_token"
    repos: dict[str, dict[str, bytes]] = field(default_factory=dict)
    commits: dict[str, list[Commit]] = field(default_factory=lambda: defaultdict(list))
    requests: list[tuple[str, str]] = field(default_factory=list)
    # endpoint name ("whoami", "create", "validate", "preupload", "commit", "tree", "resolve") -> statuses
    # to answer, one per request, before answering normally
    failures: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    url: str = ""
    _server: ThreadingHTTPServer | None = None

    def start(self) -> "FakeHub":
        hub = self

        class Handler(_Handler):
            state = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    def head_oid(self, repo_id: str) -> str:
        commits = self.commits.get(repo_id)
        return commits[-1].oid if commits else "0" * 40


class _Handler(BaseHTTPRequestHandler):
    state: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # quiet: pytest shows the assertions instead
        pass

    # --- plumbing
    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def _send(self, status: int, payload=None, headers: dict[str, str] | None = None, body: bytes | None = None):
        if body is None:
            body = json.dumps(payload if payload is not None else {}).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, message: str, code: str | None = None):
        self._send(status, {"error": message}, headers={"X-Error-Code": code} if code else None)

    def _authorized(self) -> bool:
        return self.headers.get("Authorization") == f"Bearer {self.state.token}"

    def _injected_failure(self, endpoint: str) -> bool:
        pending = self.state.failures.get(endpoint)
        if pending:
            self._error(pending.pop(0), f"injected failure of {endpoint}")
            return True
        return False

    def _route(self, method: str):
        path = unquote(urlsplit(self.path).path)
        self.state.requests.append((method, path))
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "whoami-v2"]:
            return "whoami", {}
        if parts[:3] == ["api", "repos", "create"]:
            return "create", {}
        if parts[:2] == ["api", "validate-yaml"]:
            return "validate", {}
        if parts[:2] == ["api", "models"] and len(parts) >= 6:
            repo_id, action, revision = "/".join(parts[2:4]), parts[4], parts[5]
            return action, {"repo_id": repo_id, "revision": revision}
        if len(parts) >= 5 and parts[2] == "resolve":
            return "resolve", {"repo_id": "/".join(parts[:2]), "revision": parts[3], "file": "/".join(parts[4:])}
        return None, {}

    # --- endpoints
    def do_GET(self):
        self._dispatch("GET")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_POST(self):
        self._dispatch("POST")

    def _dispatch(self, method: str):
        endpoint, params = self._route(method)
        body = self._body() if method == "POST" else b""
        if endpoint is None:
            return self._error(404, f"no such endpoint {self.path}")
        if self._injected_failure(endpoint):
            return None
        if endpoint != "resolve" and not self._authorized():
            return self._error(401, "Invalid credentials in Authorization header")
        return getattr(self, f"_{endpoint}")(body=body, **params)

    def _whoami(self, body):
        self._send(200, {"type": "user", "name": self.state.user, "orgs": []})

    def _create(self, body):
        payload = json.loads(body)
        repo_id = f"{payload.get('organization') or self.state.user}/{payload['name']}"
        if repo_id in self.state.repos:  # the Hub names the existing repo in its answer
            return self._send(409, {"error": "You already created this model repo", "url": f"{self.state.url}/{repo_id}"})
        self.state.repos[repo_id] = {}
        return self._send(200, {"url": f"{self.state.url}/{repo_id}", "name": repo_id})

    def _validate(self, body):
        content = json.loads(body)["content"]
        if not content.startswith("---\n"):
            return self._send(200, {"errors": [], "warnings": [{"message": "empty or missing yaml metadata"}]})
        yaml.safe_load(content.split("---\n")[1])  # a broken card fails the test here
        return self._send(200, {"errors": [], "warnings": []})

    def _repo(self, repo_id: str) -> dict[str, bytes] | None:
        if repo_id not in self.state.repos:
            self._error(404, "Repository not found", code="RepoNotFound")
            return None
        return self.state.repos[repo_id]

    def _preupload(self, body, repo_id, revision):
        if self._repo(repo_id) is None:
            return None
        files = json.loads(body)["files"]
        return self._send(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]})

    def _commit(self, body, repo_id, revision):
        files = self._repo(repo_id)
        if files is None:
            return None
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        header = next(line["value"] for line in lines if line["key"] == "header")
        added = {line["value"]["path"]: base64.b64decode(line["value"]["content"]) for line in lines if line["key"] == "file"}
        deleted = [line["value"]["path"] for line in lines if line["key"] == "deletedFile"]
        if any(line["key"] == "lfsFile" for line in lines):
            return self._error(400, "this fake Hub takes regular files only")
        for path in deleted:
            files.pop(path, None)
        files.update(added)
        oid = hashlib.sha1(body).hexdigest()
        self.state.commits[repo_id].append(Commit(header["summary"], added, deleted, oid))
        return self._send(200, {"commitUrl": f"{self.state.url}/{repo_id}/commit/{oid}", "commitOid": oid})

    def _tree(self, body, repo_id, revision):
        files = self._repo(repo_id)
        if files is None:
            return None
        listing = [
            {"type": "file", "path": path, "size": len(content), "oid": hashlib.sha1(content).hexdigest()}
            for path, content in sorted(files.items())
        ]
        return self._send(200, listing)

    def _resolve(self, body, repo_id, revision, file):
        files = self._repo(repo_id)
        if files is None:
            return None
        if file not in files:
            return self._error(404, "Entry not found", code="EntryNotFound")
        content = files[file]
        headers = {
            "X-Repo-Commit": self.state.head_oid(repo_id),
            "ETag": f'"{hashlib.sha1(content).hexdigest()}"',
            "Content-Type": "application/octet-stream",
        }
        return self._send(200, headers=headers, body=content)
