"""``RemoteRetriever``: the Retriever protocol over HTTP, against any Search-R1-style /retrieve server.

It speaks the contract of DESIGN.md §2 (``{"queries", "topk", "return_scores"}`` ->
``{"result": [[{"document", "score"}, ...], ...]}``) and always asks for scores, since the reference
server crashes without them. Documents may carry only ``id`` + ``contents`` (Search-R1's dense
server): the title is then the first line of ``contents`` without its quotes, the text the rest.

Every call is bounded: each attempt by ``timeout`` seconds in all (not per socket read: a server that drips
a byte at a time cannot stretch it), the whole call with its retries by ``deadline``, and the response by
``max_response_bytes``. Answers are checked against the contract; anything else is a
``RetrieverProtocolError``.
"""

from __future__ import annotations

import email.utils
import json
import math
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx

from searchgym.errors import ConfigError, QueryError, RetrieverProtocolError, RetrieverUnavailableError
from searchgym.retrieval.base import Hit, Passage
from searchgym.retrieval.corpus import parse_contents

__all__ = ["RemoteRetriever", "document_to_passage"]

ENV_API_KEY = "SEARCHGYM_API_KEY"
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
_RETRY_STATUSES = (429, 503)  # answered with a Retry-After we honour; other 5xx are retried with backoff
_DETAIL_BYTES = 64 * 1024     # read at most this much of an error answer

try:  # optional: a faster JSON decoder, which also refuses nesting deeper than 1024 (json raises RecursionError)
    import orjson as _orjson  # type: ignore[import-not-found]

    _loads = _orjson.loads
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads


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


# --- an overall deadline under httpx ------------------------------------------------------------------------
# httpx's timeouts apply to each socket operation; a server sending one byte per read timeout holds a call
# forever. The pool's network streams are wrapped so every connect/read/write waits at most until the
# deadline of the call running in this thread.
_deadline = threading.local()


def _bounded(timeout: float | None, exc: type[Exception]) -> float | None:
    until = getattr(_deadline, "at", None)
    if until is None:
        return timeout
    left = until - time.monotonic()
    if left <= 0:
        raise exc("the call's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream:
    def __init__(self, stream: Any):
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        import httpcore

        return self._stream.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        import httpcore

        self._stream.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        import httpcore

        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname,
                                                      _bounded(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend:
    def __init__(self, backend: Any):
        self._backend = backend

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> _DeadlineStream:
        import httpcore

        return _DeadlineStream(self._backend.connect_tcp(host, port, _bounded(timeout, httpcore.ConnectTimeout),
                                                         local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        import httpcore

        return _DeadlineStream(self._backend.connect_unix_socket(path, _bounded(timeout, httpcore.ConnectTimeout),
                                                                 socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def _deadline_transport(limits: httpx.Limits) -> httpx.HTTPTransport:
    transport = httpx.HTTPTransport(limits=limits)
    pool = getattr(transport, "_pool", None)  # httpcore.ConnectionPool (no proxy configured here)
    if pool is not None and hasattr(pool, "_network_backend"):
        pool._network_backend = _DeadlineBackend(pool._network_backend)
    return transport


class _Timeout(Exception):
    """An attempt ran past its share of the deadline while its answer was arriving."""


class RemoteRetriever:
    """A :class:`~searchgym.retrieval.base.Retriever` backed by a /retrieve server.

    - one pooled ``httpx.Client`` (thread-safe; connections are reused, and re-made after a restart);
    - each attempt gets ``timeout`` seconds in all; the call, retries and waits included, ``deadline``
      seconds (default: every attempt's timeout plus the backoff between them);
    - up to ``max_retries`` retries on connection errors, timeouts, 5xx and 429 answers, sleeping
      ``backoff * 2**i`` (capped at ``max_backoff``), or the server's ``Retry-After`` when it fits in the
      deadline; other 4xx answers are not retried (``QueryError``, or ``ConfigError`` for 401/403/404/405);
    - answers over ``max_response_bytes`` (read as a stream, stopped at the cap), not JSON, or off the
      contract raise ``RetrieverProtocolError``; ``RetrieverUnavailableError`` once the retries are spent;
    - ``api_key``: sent as ``Authorization: Bearer``; by default read from ``SEARCHGYM_API_KEY``
      (``api_key=""`` sends none);
    - query lists longer than ``batch_size`` are sent in several requests (each with its own deadline);
      blank queries are answered ``[]`` without asking the server (the Retriever contract).
    """

    def __init__(self, url: str, *, timeout: float = 10.0, max_retries: int = 3, backoff: float = 0.25,
                 batch_size: int = 64, api_key: str | None = None, k_default: int = 3,
                 max_backoff: float = 5.0, max_connections: int = 64, deadline: float | None = None,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"retriever url must start with http:// or https://, got {url!r}")
        if (not timeout > 0 or max_retries < 0 or backoff < 0 or batch_size < 1 or k_default < 1
                or (deadline is not None and not deadline > 0) or max_response_bytes < 1):
            raise ConfigError("RemoteRetriever needs timeout > 0, max_retries >= 0, backoff >= 0, "
                              f"batch_size >= 1, k_default >= 1, deadline > 0 and max_response_bytes >= 1 "
                              f"(got timeout={timeout}, max_retries={max_retries}, backoff={backoff}, "
                              f"batch_size={batch_size}, k_default={k_default}, deadline={deadline}, "
                              f"max_response_bytes={max_response_bytes})")
        self.url = url.rstrip("/").removesuffix("/retrieve")
        self.timeout, self.max_retries, self.backoff, self.max_backoff = timeout, max_retries, backoff, max_backoff
        self.batch_size, self.k_default = batch_size, k_default
        self.max_response_bytes = max_response_bytes
        if deadline is None:
            deadline = timeout * (max_retries + 1) + sum(self._backoff(i) for i in range(1, max_retries + 1))
        self.deadline = deadline
        if api_key is None:
            api_key = os.environ.get(ENV_API_KEY) or None
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._client = httpx.Client(timeout=httpx.Timeout(timeout), limits=limits, headers=headers,
                                    transport=_deadline_transport(limits))
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
            for i, hits in zip(rows, self._parse(data, len(chunk), k)):
                out[i] = hits
        return out

    # --- extras -------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """GET /health once (no retries); raises RetrieverUnavailableError when it does not answer ok."""
        try:
            status, body, _ = self._attempt("GET", self.url + "/health", None, time.monotonic() + self.timeout)
        except (httpx.TransportError, _Timeout) as e:
            raise RetrieverUnavailableError(f"{self.url}/health: {_describe_error(e)}") from e
        if status != 200:
            raise RetrieverUnavailableError(f"{self.url}/health answered HTTP {status}: {_detail(body)}")
        try:
            data = self._decode(body, "/health")
        except RetrieverProtocolError:
            return {"status": "ok", "body": body[:200].decode("utf-8", "replace")}
        return data if isinstance(data, dict) else {"status": "ok", "body": data}

    def info(self) -> dict[str, Any]:
        """GET /info (searchgym servers): corpus size, backend, parameters, limits."""
        data = self._request("GET", "/info", None)
        if not isinstance(data, dict):
            raise RetrieverProtocolError(f"{self.url}/info answered {_short(data)}, not a JSON object")
        return data

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
    def _backoff(self, attempt: int) -> float:
        return min(self.backoff * 2 ** (attempt - 1), self.max_backoff)

    def _post_retrieve(self, payload: dict[str, Any]) -> Any:
        # ensure_ascii: lone surrogates travel as \\ud800 escapes instead of failing to encode
        return self._request("POST", "/retrieve", json.dumps(payload, separators=(",", ":")).encode("ascii"))

    def _attempt(self, method: str, url: str, body: bytes | None,
                 until: float) -> tuple[int, bytes, float | None]:
        """One request, answered by ``until`` (monotonic): ``(status, body, Retry-After seconds or None)``;
        error bodies are cut short.
        Raises httpx.TransportError, _Timeout, or RetrieverProtocolError for an answer over the cap."""
        cap = self.max_response_bytes
        _deadline.at = until
        try:
            with self._client.stream(method, url, content=body) as r:
                status = r.status_code
                limit = cap if status < 400 else _DETAIL_BYTES
                length = r.headers.get("content-length")
                if status < 400 and length is not None and length.isdigit() and int(length) > cap:
                    raise RetrieverProtocolError(f"{url} announced a {int(length):,}-byte answer; the cap is "
                                                 f"{cap:,} bytes (max_response_bytes)")
                parts: list[bytes] = []
                size = 0
                for chunk in r.iter_bytes():  # decoded: a compressed answer is capped at its real size
                    size += len(chunk)
                    if size > limit:
                        if status >= 400:
                            break
                        raise RetrieverProtocolError(f"{url} answered more than {cap:,} bytes "
                                                     "(max_response_bytes); stopped reading")
                    parts.append(chunk)
                    if time.monotonic() > until:
                        raise _Timeout(f"answer still arriving after {self.timeout:g} s")
                return status, b"".join(parts), _retry_after(r.headers.get("retry-after"))
        finally:
            _deadline.at = None

    def _request(self, method: str, path: str, body: bytes | None) -> Any:
        if self._closed:
            raise RetrieverUnavailableError(f"RemoteRetriever({self.url!r}) is closed")
        url = self.url + path
        started = time.monotonic()
        deadline = started + self.deadline
        last = "no attempt"
        attempts = 0
        wait = 0.0
        while True:
            if wait:
                time.sleep(wait)
            attempts += 1
            retry_after = None
            try:
                status, answer, retry_after = self._attempt(method, url, body,
                                                            min(time.monotonic() + self.timeout, deadline))
            except (httpx.TransportError, _Timeout) as e:  # connect/read/write errors, timeouts, drops
                last = _describe_error(e)
            else:
                if status < 400:
                    return self._decode(answer, path)
                msg = f"{method} {url} answered HTTP {status}: {_detail(answer)}"
                if status < 500 and status != 429:
                    if status in (401, 403):
                        raise ConfigError(msg + " (check api_key / SEARCHGYM_API_KEY)")
                    if status in (404, 405):
                        raise ConfigError(msg + " (is this a /retrieve server? check the url)")
                    raise QueryError(msg)
                last = f"HTTP {status}: {_detail(answer)}"
            if attempts > self.max_retries:
                break
            wait = max(self._backoff(attempts), retry_after or 0.0)
            if time.monotonic() + wait >= deadline:
                last += (f"; the server asked to retry after {retry_after:g}s" if retry_after else "")
                last += f"; no time left for another try within the {self.deadline:g}s deadline"
                break
        raise RetrieverUnavailableError(
            f"retrieval server {url} unavailable after {attempts} attempt(s) over "
            f"{time.monotonic() - started:.1f}s; last error: {last}. Is the server running "
            "(searchgym serve INDEX_DIR --port ...) and the url right?")

    def _decode(self, body: bytes, path: str) -> Any:
        try:
            return _loads(body)
        except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError; json's deep nesting
            raise RetrieverProtocolError(f"{self.url}{path} answered a body that is not JSON ({type(e).__name__}: "
                                         f"{str(e)[:120]}): {body[:200]!r}") from None

    def _parse(self, data: Any, n: int, k: int) -> list[list[Hit]]:
        """Checks an answer against the /retrieve contract: ``{"result": [list per query]}``, each list at most
        ``k`` items, each item ``{"document": doc, "score": number|null}`` or a bare ``doc`` (the
        return_scores=false shape), each doc an object with ``contents`` or ``title``/``text`` strings."""
        def broke(why: str) -> RetrieverProtocolError:
            return RetrieverProtocolError(f"{self.url}/retrieve broke the contract: {why}")

        result = data.get("result") if isinstance(data, dict) else None
        if not isinstance(result, list) or len(result) != n:
            got = f"{len(result)} lists" if isinstance(result, list) else _short(data)
            raise broke(f'expected {{"result": [...]}} with {n} lists, got {got}')
        out: list[list[Hit]] = []
        for qi, items in enumerate(result):
            if not isinstance(items, list):
                raise broke(f"result[{qi}] must be a list of hits, got {type(items).__name__} {_short(items)}")
            if len(items) > k:
                raise broke(f"result[{qi}] has {len(items)} hits for topk {k}")
            hits = []
            for hi, item in enumerate(items):
                where = f"result[{qi}][{hi}]"
                if isinstance(item, dict) and "document" in item:
                    doc, score = item["document"], item.get("score")
                    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))
                                              or not math.isfinite(score)):
                        raise broke(f"{where}.score must be a finite number or null, got {_short(score)}")
                else:  # return_scores=false shape: the documents themselves
                    doc, score = item, None
                hits.append(self._hit(doc, score, where, broke))
            out.append(hits)
        return out

    @staticmethod
    def _hit(doc: Any, score: Any, where: str, broke: Any) -> Hit:
        if not isinstance(doc, dict):
            raise broke(f"{where}: a document must be a JSON object, got {type(doc).__name__} {_short(doc)}")
        for name in ("contents", "title", "text"):
            if name in doc and doc[name] is not None and not isinstance(doc[name], str):
                raise broke(f"{where}.{name} must be a string, got {_short(doc[name])}")
        if not isinstance(doc.get("contents"), str) and not (isinstance(doc.get("title"), str)
                                                            or isinstance(doc.get("text"), str)):
            raise broke(f'{where}: a document needs "contents" or "title"/"text", got keys {sorted(doc)[:8]}')
        for name in ("id", "docid", "doc_id"):
            value = doc.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (str, int))):
                raise broke(f"{where}.{name} must be a string or an integer, got {_short(value)}")
        p = document_to_passage(doc)
        return Hit(p.id, 0.0 if score is None else float(score), p)


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _describe_error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def _detail(body: bytes) -> str:
    try:
        d = json.loads(body)
        if isinstance(d, dict) and "detail" in d:
            return str(d["detail"])[:500]
    except (ValueError, RecursionError):
        pass
    return body[:200].decode("utf-8", "replace")


def _short(x: Any) -> str:
    try:
        s = repr(x)
    except RecursionError:
        s = f"<deeply nested {type(x).__name__}>"
    return s if len(s) <= 120 else s[:117] + "..."
