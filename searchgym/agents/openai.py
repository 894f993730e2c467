"""A policy served by any OpenAI-compatible ``/v1/chat/completions`` server (vLLM, SGLang, llama.cpp).

Each env slot keeps its conversation as chat messages: the prompt is the first user message, each
action an assistant message, each observation (``<information>`` block or corrective message) the next
user message. Requests for the slots of one ``act`` call run concurrently (a thread pool of
``concurrency`` workers over one ``httpx.Client``); connection errors, timeouts, 429 and 5xx answers are
retried with exponential backoff, and after ``max_retries`` retries the call raises
:class:`AgentUnavailableError` naming the server and the last failure.

OpenAI servers drop the stop string from the returned text; the agent puts the closing tag back, so the
action always parses (``<search> q`` + stop ``</search>`` -> ``<search> q</search>``).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from searchgym.agents.base import batch_indices, infos_or_empty, is_new_episode
from searchgym.errors import AgentUnavailableError, ConfigError

_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def close_open_tag(text: str, stop: Sequence[str]) -> str:
    """Put back a closing tag the server stripped: ``"<search> q"`` -> ``"<search> q</search>"``."""
    for s in stop:
        if not (s.startswith("</") and s.endswith(">")):
            continue
        opener = "<" + s[2:]
        last_open = text.rfind(opener)
        if last_open >= 0 and text.find(s, last_open) < 0:
            return text + s
    return text


class OpenAIAgent:
    """Agent backed by an OpenAI-compatible chat-completions endpoint.

    ``base_url`` is the server root (``http://host:8000`` or ``http://host:8000/v1``); the key is read
    from the environment variable ``api_key_env`` (no header when unset, as local servers expect).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 30.0,
        max_retries: int = 3,
        concurrency: int = 8,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_tokens: int = 256,
        stop: Sequence[str] = ("</search>", "</answer>"),
        system_prompt: str | None = None,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        seed: int | None = None,
        name: str | None = None,
    ):
        import httpx

        if concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1, got {concurrency}")
        if max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, got {max_retries}")
        root = base_url.rstrip("/")
        root = root.removesuffix("/chat/completions")
        if not root.endswith("/v1"):
            root += "/v1"
        self.url = root + "/chat/completions"
        self.model = model
        self.name = name or f"openai:{model}"
        self.timeout, self.max_retries, self.concurrency = timeout, max_retries, concurrency
        self.temperature, self.top_p, self.max_tokens = temperature, top_p, max_tokens
        self.stop = list(stop)
        self.system_prompt = system_prompt
        self.backoff, self.max_backoff = backoff, max_backoff
        self.seed = seed
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(api_key_env, "")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(timeout=httpx.Timeout(timeout), headers=headers,
                                    limits=httpx.Limits(max_connections=concurrency))
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="openai-agent")
        self._messages: dict[int, list[dict[str, str]]] = {}
        self._rng = random.Random(seed)
        self.requests = 0
        self.retries = 0
        self.last_usage: list[dict[str, Any]] = []

    # -- state ---------------------------------------------------------------------------------------
    def reset(self, indices: Sequence[int] | None = None) -> None:
        if indices is None:
            self._messages.clear()
        else:
            for i in indices:
                self._messages.pop(int(i), None)

    def messages(self, index: int) -> list[dict[str, str]]:
        return list(self._messages.get(index, []))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- HTTP ----------------------------------------------------------------------------------------
    def _payload(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature,
                                "top_p": self.top_p, "max_tokens": self.max_tokens, "n": 1}
        if self.stop:
            body["stop"] = self.stop
        if self.seed is not None:
            body["seed"] = self._rng.randrange(2**31)
        return body

    def complete(self, messages: list[dict[str, str]]) -> str:
        """One chat completion with retries; returns the assistant text (closing tag restored)."""
        import httpx

        body = self._payload(messages)
        last = "no attempt made"
        for attempt in range(self.max_retries + 1):
            if attempt:
                self.retries += 1
                delay = min(self.max_backoff, self.backoff * (2 ** (attempt - 1)))
                time.sleep(delay * (0.5 + random.random() / 2))
            try:
                self.requests += 1
                r = self._client.post(self.url, json=body)
            except httpx.HTTPError as exc:  # connect errors, timeouts, protocol errors
                last = f"{type(exc).__name__}: {exc}"
                continue
            if r.status_code in _RETRY_STATUS:
                last = f"HTTP {r.status_code}: {r.text[:200]}"
                continue
            if r.status_code >= 400:
                raise AgentUnavailableError(
                    f"{self.url} rejected the request (HTTP {r.status_code}): {r.text[:300]}; check the model "
                    f"name {self.model!r}, the API key (env var) and the server's parameters")
            try:
                data = r.json()
                choice = data["choices"][0]
                text = choice["message"]["content"] or ""
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                last = f"malformed response ({type(exc).__name__}): {r.text[:200]}"
                continue
            self.last_usage.append(data.get("usage") or {})
            return close_open_tag(text, self.stop)
        raise AgentUnavailableError(
            f"OpenAI-compatible server {self.url} unavailable after {self.max_retries + 1} attempts "
            f"(last error: {last}); start the server or fix --base-url")

    # -- acting --------------------------------------------------------------------------------------
    def _observe(self, index: int, obs: str, info: dict) -> list[dict[str, str]]:
        msgs = self._messages.get(index)
        if msgs is None or is_new_episode(obs, info):
            msgs = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
            msgs.append({"role": "user", "content": obs})
            self._messages[index] = msgs
        else:
            msgs.append({"role": "user", "content": obs.strip()})
        return msgs

    def act(self, observations: Sequence[str], infos: Sequence[dict] | None = None, *,
            indices: Sequence[int] | None = None) -> list[str]:
        idx = batch_indices(len(observations), indices)
        infs = infos_or_empty(infos, len(observations))
        convs = [self._observe(i, o, inf) for i, o, inf in zip(idx, observations, infs)]
        self.last_usage = []
        futures = [self._pool.submit(self.complete, list(m)) for m in convs]
        texts: list[str] = []
        error: AgentUnavailableError | None = None
        for f in futures:
            try:
                texts.append(f.result())
            except AgentUnavailableError as exc:
                error = error or exc
                texts.append("")
        if error is not None:
            raise error
        for m, t in zip(convs, texts):
            m.append({"role": "assistant", "content": t})
        return texts
