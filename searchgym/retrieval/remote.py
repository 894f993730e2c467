"""``RemoteRetriever``: the Retriever protocol over HTTP, against any Search-R1-style /retrieve server.

It speaks the contract of DESIGN.md §2 (``{"queries", "topk", "return_scores"}`` ->
``{"result": [[{"document", "score"}, ...], ...]}``) and always asks for scores, since the reference
server crashes without them. Documents may carry only ``id`` + ``contents`` (Search-R1's dense
server): the title is then the first line of ``contents`` without its quotes, the text the rest.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import httpx

from searchgym.errors import ConfigError, QueryError, RetrieverUnavailableError
from searchgym.retrieval.base import Hit, Passage
from searchgym.retrieval.corpus import parse_contents

__all__ = ["RemoteRetriever", "document_to_passage"]


def document_to_passage(doc: Any) -> Passage:
    """A server's document (any of the Search-R1 shapes) as a :class:`Passage`."""
    if isinstance(doc, str):  # a bare contents string
        doc = {"contents": doc}
    if not isinstance(doc, dict):
        raise TypeError(f"a document must be a JSON object, got {type(doc).__name__}")
    doc_id = doc.get("id", doc.get("docid", doc.get("doc_id", "")))
    title, text = doc.get("title"), doc.get("text")
    if title is None or text is None:
        contents = doc.get("contents")
        if isinstance(contents, str):
            parsed_title, parsed_text = parse_contents(contents)
            title = parsed_title if title is None else title
            text = parsed_text if text is None else text
    return Passage(id="" if doc_id is None else str(doc_id), title=str(title or ""), text=str(text or ""))


class RemoteRetriever:
    """A :class:`~searchgym.retrieval.base.Retriever` backed by a /retrieve server.

    - one pooled ``httpx.Client`` (thread-safe; connections are reused, and re-made after a restart);
    - ``timeout`` seconds per request; up to ``max_retries`` retries on connection errors, timeouts and
      5xx answers, sleeping ``backoff * 2**i`` (capped at ``max_backoff``) between tries; 4xx answers
      are not retried (they raise ``QueryError``, or ``ConfigError`` for 401/403/404/405);
    - query lists longer than ``batch_size`` are sent in several requests; blank queries are answered
      ``[]`` without asking the server (the Retriever contract);
    - ``RetrieverUnavailableError`` once the retries are spent.
    """

    def __init__(self, url: str, *, timeout: float = 10.0, max_retries: int = 3, backoff: float = 0.25,
                 batch_size: int = 64, api_key: str | None = None, k_default: int = 3,
                 max_backoff: float = 5.0, max_connections: int = 64):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"retriever url must start with http:// or https://, got {url!r}")
        if timeout <= 0 or max_retries < 0 or backoff < 0 or batch_size < 1 or k_default < 1:
            raise ConfigError("RemoteRetriever needs timeout > 0, max_retries >= 0, backoff >= 0, "
                              f"batch_size >= 1 and k_default >= 1 (got timeout={timeout}, "
                              f"max_retries={max_retries}, backoff={backoff}, batch_size={batch_size}, "
                              f"k_default={k_default})")
        self.url = url.rstrip("/").removesuffix("/retrieve")
        self.timeout, self.max_retries, self.backoff, self.max_backoff = timeout, max_retries, backoff, max_backoff
        self.batch_size, self.k_default = batch_size, k_default
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            headers=headers,
        )
        self._closed = False

    # --- Retriever protocol -------------------------------------------------------------------
    def search(self, query: str, k: int | None = None) -> list[Hit]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int | None = None) -> list[list[Hit]]:
        if isinstance(queries, str):
            raise QueryError("batch_search takes a list of queries, got one string; use search(query)")
        queries = list(queries)
        for i, q in enumerate(queries):
            if not isinstance(q, str):
                raise QueryError(f"queries[{i}] must be a string, got {type(q).__name__}")
        k = self.k_default if k is None else k
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise QueryError(f"k must be a positive integer, got {k!r}")
        # Empty / blank queries get [] here (the Retriever contract), whatever a foreign server would do.
        asked = [i for i, q in enumerate(queries) if q.strip()]
        out: list[list[Hit]] = [[] for _ in queries]
        for start in range(0, len(asked), self.batch_size):
            rows = asked[start:start + self.batch_size]
            chunk = [queries[i] for i in rows]
            data = self._post_retrieve({"queries": chunk, "topk": k, "return_scores": True})
            for i, hits in zip(rows, self._parse(data, len(chunk))):
                out[i] = hits
        return out

    # --- extras -------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """GET /health once (no retries); raises RetrieverUnavailableError when it does not answer ok."""
        try:
            r = self._client.get(self.url + "/health")
        except httpx.HTTPError as e:
            raise RetrieverUnavailableError(f"{self.url}/health: {type(e).__name__}: {e}") from e
        if r.status_code != 200:
            raise RetrieverUnavailableError(f"{self.url}/health answered HTTP {r.status_code}: {r.text[:200]}")
        try:
            return r.json()
        except ValueError:
            return {"status": "ok", "body": r.text[:200]}

    def info(self) -> dict[str, Any]:
        """GET /info (searchgym servers): corpus size, backend, parameters, limits."""
        return self._request("GET", "/info", None)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._client.close()

    def __enter__(self) -> RemoteRetriever:  # noqa: PYI034 - Self needs Python 3.11
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RemoteRetriever({self.url!r}, k_default={self.k_default}, batch_size={self.batch_size})"

    # --- internals ----------------------------------------------------------------------------
    def _post_retrieve(self, payload: dict[str, Any]) -> Any:
        # ensure_ascii: lone surrogates travel as \\ud800 escapes instead of failing to encode
        return self._request("POST", "/retrieve", json.dumps(payload, separators=(",", ":")).encode("ascii"))

    def _request(self, method: str, path: str, body: bytes | None) -> Any:
        if self._closed:
            raise RetrieverUnavailableError(f"RemoteRetriever({self.url!r}) is closed")
        url = self.url + path
        started = time.monotonic()
        last = "no attempt"
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            if attempt:
                time.sleep(min(self.backoff * 2 ** (attempt - 1), self.max_backoff))
            try:
                r = self._client.request(method, url, content=body)
            except httpx.TransportError as e:  # connect/read/write errors, timeouts, dropped connections
                last = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                continue
            if r.status_code >= 500:
                last = f"HTTP {r.status_code}: {_detail(r)}"
                continue
            if r.status_code >= 400:
                msg = f"{method} {url} answered HTTP {r.status_code}: {_detail(r)}"
                if r.status_code in (401, 403):
                    raise ConfigError(msg + " (check api_key / SEARCHGYM_API_KEY)")
                if r.status_code in (404, 405):
                    raise ConfigError(msg + " (is this a /retrieve server? check the url)")
                raise QueryError(msg)
            try:
                return r.json()
            except ValueError as e:
                raise RetrieverUnavailableError(f"{url} answered HTTP {r.status_code} with a body that is "
                                                f"not JSON: {r.text[:200]!r}") from e
        raise RetrieverUnavailableError(
            f"retrieval server {url} unavailable after {attempts} attempt(s) over "
            f"{time.monotonic() - started:.1f}s; last error: {last}. Is the server running "
            "(searchgym serve INDEX_DIR --port ...) and the url right?")

    def _parse(self, data: Any, n: int) -> list[list[Hit]]:
        result = data.get("result") if isinstance(data, dict) else None
        if not isinstance(result, list) or len(result) != n:
            got = f"{len(result)} lists" if isinstance(result, list) else _short(data)
            raise RetrieverUnavailableError(f"{self.url}/retrieve broke the contract: expected "
                                            f'{{"result": [...]}} with {n} lists, got {got}')
        out: list[list[Hit]] = []
        try:
            for items in result:
                hits = []
                for item in items:
                    if isinstance(item, dict) and "document" in item:
                        doc, score = item["document"], item.get("score")
                    else:  # return_scores=false shape: the documents themselves
                        doc, score = item, None
                    p = document_to_passage(doc)
                    hits.append(Hit(p.id, float(score) if score is not None else 0.0, p))
                out.append(hits)
        except (TypeError, ValueError) as e:
            raise RetrieverUnavailableError(f"{self.url}/retrieve broke the contract: {e}") from e
        return out


def _detail(r: httpx.Response) -> str:
    try:
        d = r.json()
        if isinstance(d, dict) and "detail" in d:
            return str(d["detail"])[:500]
    except ValueError:
        pass
    return r.text[:200]


def _short(x: Any) -> str:
    s = repr(x)
    return s if len(s) <= 120 else s[:117] + "..."
