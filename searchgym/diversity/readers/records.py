"""The record types (``Episode``, ``ReadStats``, ``Run``) and the names readers look for: field keys, tags, tool names.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

FORMATS = ("auto", "searchgym", "verl", "search-r1", "chat", "react", "react-log", "train-log", "jsonl", "tree")


RECORD_FORMATS = ("searchgym", "verl", "search-r1", "chat", "react", "jsonl", "tree")


# text fields that hold a whole decoded sequence (prompt + response) vs. only the model's response
SEQUENCE_KEYS = ("sequences_str", "sequence", "full_text", "text", "full_output", "trajectory_text")


RESPONSE_KEYS = ("output", "response", "completion", "generation", "gen_text_store", "generated_text",
                 "model_output", "pred_text", "responses", "outputs")


REACT_KEYS = ("traj", "trajectory", "scratchpad", "react", "react_trace", "log")


QUESTION_KEYS = ("question", "problem", "question_text", "original_question", "query", "user_question")


ANSWER_KEYS = ("prediction", "pred", "pred_answer", "predicted_answer", "final_answer", "model_answer",
               "pred_ans")


REWARD_KEYS = ("reward", "score", "acc", "em", "correct", "is_correct")


STEP_KEYS = ("step", "global_step", "policy_step", "iteration", "epoch")


EPISODE_ID_KEYS = ("episode_id", "id", "uid", "request_id", "traj_id", "sample_id")


QUESTION_ID_KEYS = ("question_id", "qid", "question_idx")


_PROMPT_KEYS = frozenset({"prompt", "input", "instruction", "system", "system_prompt", "question", "problem",
                          "query", "context", "template", "prompt_text"})


MESSAGE_KEYS = ("messages", "conversations", "conversation", "dialog", "chat")


DEFAULT_QUERY_TAGS: tuple[tuple[str, str], ...] = (
    ("<search>", "</search>"), ("<|begin_of_query|>", "<|end_of_query|>"),
    ("<|begin_search_query|>", "<|end_search_query|>"))


OBS_TAGS: tuple[tuple[str, str], ...] = (
    ("<information>", "</information>"), ("<tool_response>", "</tool_response>"),
    ("<|begin_of_documents|>", "<|end_of_documents|>"), ("<|begin_search_result|>", "<|end_search_result|>"),
    ("<result>", "</result>"))


TOOL_CALL = ("<tool_call>", "</tool_call>")


ANSWER = ("<answer>", "</answer>")


EOS_TOKENS = ("<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|im_end|>", "</s>")


TURN_STARTS = ("<|im_start|>", "<|start_header_id|>")


_SEARCH_ARG_KEYS = ("query", "queries", "query_list", "q", "search_query", "search_queries", "keywords",
                    "keyword", "entity", "question")


_ANSWER_TOOLS = ("finish", "answer", "submit_answer", "final_answer", "submit")


# ReAct action / function names that are searches (lower case, "_" and "-" ignored); ``--search-tools`` adds more.
DEFAULT_SEARCH_TOOLS = frozenset({
    "search", "bingsearch", "websearch", "googlesearch", "searchengine", "wikisearch", "wikipediasearch",
    "retrieve", "retrieval", "retriever", "wikipedia", "wiki", "searchwikipedia", "searchweb", "duckduckgo",
    "serpapi", "googleserper", "tavilysearch", "querysearch", "search_query", "localsearch", "docsearch"})


def tool_key(name: str) -> str:
    """A tool name as compared against the search-tool set: lower case, without "_", "-" and spaces."""
    return name.lower().replace("_", "").replace("-", "").replace(" ", "")


MAX_TITLE = 400


_DECODER = json.JSONDecoder()


_STEP_FILE = re.compile(r"^(\d+)\.jsonl$")


# ReAct keywords count only at a line start (a retrieved text may say "action:")
_REACT_RE = (r"(?<![^\n])[ \t]*(?:(?P<act>[Aa]ction)|(?P<obs>[Oo]bservation)|(?P<th>[Tt]hought))"
             r"(?:[ \t]*\d+)?[ \t]*:")


_WORD = re.compile(r"[A-Za-z_]\w*")


_DOC_TITLE = re.compile(r"Doc \d+[ \t]*\([ \t]*Title:[ \t]*")


_JSON_TITLE = re.compile(r'"title"[ \t]*:[ \t]*"')


_ASSISTANT = re.compile(r"<\|im_start\|>assistant|<\|start_header_id\|>assistant<\|end_header_id\|>|\[/INST\]")


_QUESTION_LINE = re.compile(r"[ \t]*Question(?:[ \t]*\d+)?[ \t]*:[ \t]*")


_TRIAL = re.compile(r"\b(trial|attempt|round|iteration)\b[ \t#:=\-]*(\d+)", re.IGNORECASE)


_QWORD = re.compile(r"question[ \t]*:", re.IGNORECASE)


_REACT_ACTION_LINE = re.compile(r"(?<![^\n])[ \t]*[Aa]ction(?:[ \t]*\d+)?[ \t]*:[ \t]*[A-Za-z_]+\[")


@dataclass(slots=True)
class Episode:
    """One rollout as the metrics see it (slotted: a run may hold millions)."""

    queries: list[str]
    step: int | None = None
    question: str | None = None
    question_id: str | None = None
    reward: float | None = None
    success: bool | None = None
    evidence: list[list[str]] = field(default_factory=list)  # per query: texts retrieved by it
    titles: list[list[str]] = field(default_factory=list)    # per query: retrieved titles
    doc_ids: list[list[str]] = field(default_factory=list)   # per query: retrieved ids
    token_entropy: float | None = None
    # Where each query was issued: turn index within the episode (parallel queries of one turn share it).
    # Empty means one query per turn (turn i = query i).
    turns: list[int] = field(default_factory=list)
    malformed: int = 0                 # search calls that could not be parsed (never counted as queries)
    series: str | None = None          # a grouping key besides ``step``, e.g. a ReAct log's trial/attempt
    episode_id: str | None = None
    answer: str | None = None          # the agent's final answer, where the file has it
    source_line: int | None = None     # line (or record index) in the file, for messages


@dataclass
class ReadStats:
    """What a reader read: shown in the report so that a wrong reading can be seen."""

    format: str
    episodes: int = 0
    queries: int = 0
    malformed: int = 0                 # unparseable search calls
    skipped_lines: int = 0             # records skipped with ``lenient``
    skipped_reasons: Counter[str] = field(default_factory=Counter)
    unexecuted: int = 0                # well-formed calls never answered by an observation (not queries)
    reemitted: int = 0                 # turns a response re-emitted verbatim (each call counted once)
    sidecar: int = 0                   # episodes whose evidence came from a field beside the transcript
    other_calls: int = 0               # tool calls / actions that are not searches (Lookup, browse, …)
    rejected: int = 0                  # calls the tool refused ("Invalid action!", "Error: Tool … not found")
    observations: int = 0
    container: str = ""                # jsonl | json-array | json-object | text | mixed
    files: int = 0
    grammars: Counter[str] = field(default_factory=Counter)  # call grammar -> queries read with it
    notes: list[str] = field(default_factory=list)
    first_problem: str = ""            # where and why the first bad record was skipped
    cut_lines: list[str] = field(default_factory=list)  # "file, line N": a cut last line, skipped

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.format, "container": self.container, "files": self.files,
                "episodes": self.episodes, "queries": self.queries, "malformed": self.malformed,
                "unexecuted": self.unexecuted, "other_calls": self.other_calls,
                "observations": self.observations, "skipped_lines": self.skipped_lines,
                "reemitted_turns": self.reemitted, "sidecar_evidence": self.sidecar,
                "skipped_reasons": dict(self.skipped_reasons), "grammars": dict(self.grammars),
                "notes": list(self.notes), **({"cut_lines": list(self.cut_lines)} if self.cut_lines else {}),
                **({"rejected": self.rejected} if self.rejected else {})}


@dataclass
class Run:
    name: str
    path: str
    fmt: str
    episodes: list[Episode]
    label: str = ""
    read_stats: ReadStats | None = None

    def __post_init__(self) -> None:
        if not self.label:
            self.label = self.name
        if self.read_stats is None:
            self.read_stats = ReadStats(format=self.fmt, episodes=len(self.episodes),
                                        queries=sum(len(e.queries) for e in self.episodes),
                                        malformed=sum(e.malformed for e in self.episodes))

    @property
    def has_steps(self) -> bool:
        return any(e.step is not None for e in self.episodes)


def _get(d: Any, dotted: str) -> Any:
    cur = d
    for part in dotted.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
    return cur


_LOWER: list[Any] = [None, None]


def _lookup(obj: dict[str, Any], keys: tuple[str, ...]) -> tuple[str | None, Any]:
    """The first present key (case-insensitive) and its value."""
    for k in keys:
        if k in obj:
            return k, obj[k]
    if _LOWER[0] is obj:  # one record is looked up many times: keep its lower-case key map
        lower = _LOWER[1]
    else:
        lower = {str(k).lower(): k for k in obj}
        _LOWER[0], _LOWER[1] = obj, lower
    for k in keys:
        if k in lower:
            return lower[k], obj[lower[k]]
    return None, None
