"""Prompt templates, corrective messages, and the formatting of retrieved passages into observations.

The default strings are Search-R1's, verbatim (``scripts/data_process/nq_search.py`` for the prompt,
``search_r1/llm_agent/generation.py`` for the invalid-action message and ``_passages2string`` for the
passages), so a policy trained on Search-R1 data sees what it was trained on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from searchgym.data.export import SEARCH_R1_PROMPT, fix_question
from searchgym.errors import ConfigError
from searchgym.retrieval.base import Hit

# One definition of Search-R1's prompt, shared with the exported parquet files.
SEARCH_R1_TEMPLATE = SEARCH_R1_PROMPT

_TOOLS = [
    {"type": "function", "function": {
        "name": "search",
        "description": "Search the document collection. Returns the top passages between <information> and "
                       "</information>.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "One search query."},
            "query_list": {"type": "array", "items": {"type": "string"},
                           "description": "Several queries searched in parallel."}}}}},
    {"type": "function", "function": {
        "name": "answer",
        "description": "Give the final answer and end the episode.",
        "parameters": {"type": "object", "properties": {"answer": {"type": "string"}},
                       "required": ["answer"]}}},
]

TOOL_CALL_TEMPLATE = (
    "Answer the given question. Think inside <think> and </think> every time you get new information. "
    "You can call the functions below, one per turn.\n\n# Tools\n\n<tools>\n"
    + "\n".join(json.dumps(t) for t in _TOOLS)
    + "\n</tools>\n\nTo call a function, write a JSON object with the function name and its arguments "
    "between <tool_call> and </tool_call>:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call>\nSearch results come back between <information> and </information>. "
    "Give the final answer with the answer function, without detailed illustrations, e.g. "
    "<tool_call>{\"name\": \"answer\", \"arguments\": {\"answer\": \"Beijing\"}}</tool_call>. "
    "Question: {question}\n"
)

TEMPLATES = {"search_r1": SEARCH_R1_TEMPLATE, "tool_call": TOOL_CALL_TEMPLATE}

INVALID_MESSAGES = {
    "search_r1": (
        "\nMy previous action is invalid. If I want to search, I should put the query between <search> and "
        "</search>. If I want to give the final answer, I should put the answer between <answer> and "
        "</answer>. Let me try again.\n"),
    "tool_call": (
        "\nMy previous action is invalid. If I want to search, I should call the search function: "
        "<tool_call>{\"name\": \"search\", \"arguments\": {\"query\": \"...\"}}</tool_call>. If I want to give "
        "the final answer, I should call the answer function: <tool_call>{\"name\": \"answer\", "
        "\"arguments\": {\"answer\": \"...\"}}</tool_call>. Let me try again.\n"),
}

BUDGET_MESSAGES = {
    "search_r1": "\nI have used all {searches}. I should now give the final answer between <answer> "
                 "and </answer>.\n",
    "tool_call": "\nI have used all {searches}. I should now give the final answer with the answer "
                 "function.\n",
}


class PromptBuilder:
    """Renders the reset prompt: a template name, a custom string with ``{question}``, or a callable."""

    def __init__(self, template: str | Callable[[Any], str] = "search_r1"):
        self.style = "search_r1"
        if callable(template):
            self._fn: Callable[[Any], str] | None = template
            self._text = ""
        elif isinstance(template, str):
            self._fn = None
            if template in TEMPLATES:
                self.style = template
                self._text = TEMPLATES[template]
            elif "{question}" in template:
                self._text = template
                if "<tool_call>" in template and "<search>" not in template:
                    self.style = "tool_call"
            else:
                raise ConfigError(
                    f"prompt_template must be one of {sorted(TEMPLATES)}, a string containing '{{question}}', "
                    f"or a callable(example) -> str; got {template[:80]!r}")
        else:
            raise ConfigError(f"prompt_template must be a string or callable, got {type(template).__name__}")

    def __call__(self, example: Any) -> str:
        if self._fn is not None:
            return str(self._fn(example))
        # str.replace, not str.format: templates may contain JSON braces.
        return self._text.replace("{question}", fix_question(example.question))

    @property
    def invalid_message(self) -> str:
        return INVALID_MESSAGES[self.style]

    def budget_message(self, max_turns: int) -> str:
        searches = f"{max_turns} search" if max_turns == 1 else f"{max_turns} searches"
        return BUDGET_MESSAGES[self.style].format(searches=searches)


class PassageFormatter:
    """Formats hits as Search-R1 does: ``Doc {i}(Title: {title}) {text}\\n`` per hit.

    ``title`` is the first line of the passage's ``contents`` (so it keeps Search-R1's quotes) and the text is
    the rest. Each passage's formatted string is computed once and cached by id; ``passage_chars`` or
    ``passage_tokens`` truncate the text (tokens are whitespace words unless a ``tokenizer`` with
    ``encode``/``decode`` is given).
    """

    MAX_CACHE = 500_000

    def __init__(self, passage_chars: int | None = None, passage_tokens: int | None = None,
                 tokenizer: Any = None):
        for name, v in (("passage_chars", passage_chars), ("passage_tokens", passage_tokens)):
            if v is not None and (not isinstance(v, int) or v <= 0):
                raise ConfigError(f"{name} must be a positive integer or None, got {v!r}")
        self.passage_chars = passage_chars
        self.passage_tokens = passage_tokens
        self.tokenizer = tokenizer
        self._cache: dict[str, str] = {}
        self._prefix = [f"Doc {i}" for i in range(1, 65)]

    def _truncate(self, text: str) -> str:
        if self.passage_tokens is not None:
            if self.tokenizer is not None:
                ids = self.tokenizer.encode(text, add_special_tokens=False) if _takes_special(self.tokenizer) \
                    else self.tokenizer.encode(text)
                if len(ids) > self.passage_tokens:
                    text = self.tokenizer.decode(ids[: self.passage_tokens])
            else:
                words = text.split(" ")
                if len(words) > self.passage_tokens:
                    text = " ".join(words[: self.passage_tokens])
        if self.passage_chars is not None and len(text) > self.passage_chars:
            text = text[: self.passage_chars]
        return text

    def doc(self, hit: Hit) -> str:
        s = self._cache.get(hit.id)
        if s is None:
            p = hit.passage
            text = self._truncate(p.text)
            s = f'(Title: "{p.title}") {text}'
            if len(self._cache) >= self.MAX_CACHE:
                self._cache.clear()
            self._cache[hit.id] = s
        return s

    def _parts(self, hits: Sequence[Hit], out: list[str]) -> None:
        if not hits:
            out.append("No results.")
            out.append("\n")
            return
        cache, prefix = self._cache, self._prefix
        for i, h in enumerate(hits):
            out.append(prefix[i] if i < 64 else f"Doc {i + 1}")
            s = cache.get(h.id)
            out.append(s if s is not None else self.doc(h))
            out.append("\n")

    def docs(self, hits: Sequence[Hit]) -> str:
        out: list[str] = []
        self._parts(hits, out)
        return "".join(out)

    def information(self, hit_lists: Sequence[Sequence[Hit]]) -> str:
        """The body of one ``<information>`` block: one query's docs, or several joined by ``---``."""
        out: list[str] = []
        for j, hits in enumerate(hit_lists):
            if j:
                out.append("---\n")
            self._parts(hits, out)
        return "".join(out)

    def observation(self, hit_lists: Sequence[Sequence[Hit]]) -> str:
        """The whole Search-R1 observation, built in one join: ``\n\n<information>...</information>\n\n``."""
        out = ["\n\n<information>"]
        for j, hits in enumerate(hit_lists):
            if j:
                out.append("---\n")
            self._parts(hits, out)
        # Search-R1 strips the block's content: drop the final newline; strip for real in the rare case
        # where a passage itself starts or ends with whitespace.
        out[-1] = "</information>\n\n"
        if out[-2][-1:].isspace() or out[1][:1].isspace():
            return wrap_information("".join(out[1:-1]))
        return "".join(out)


def _takes_special(tok: Any) -> bool:
    try:
        import inspect

        return "add_special_tokens" in inspect.signature(tok.encode).parameters
    except (TypeError, ValueError):
        return False


def wrap_information(body: str) -> str:
    """Search-R1's observation: ``\\n\\n<information>{docs}</information>\\n\\n``."""
    return "\n\n<information>" + body.strip() + "</information>\n\n"
