"""Transcripts: record -> turns, question, evidence -> a parsed episode. One parser per record format; the
transcript is found by structure (any list of role/content or from/value turns; a text field where a grammar
parses) and the question from a field, the first user turn, or a ``Question:`` / ``### Instruction:`` line.
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from searchgym.diversity.readers import fields as F
from searchgym.diversity.readers.assembly import (
    _adopt_pending,
    _Assembler,
    _attach_sidecar,
    _Call,
    _sidecar,
)
from searchgym.diversity.readers.fields import parse_question, record_fields
from searchgym.diversity.readers.grammars import (
    _answer_of,
    _function_call,
    _tool_call_queries,
    scan_text,
)
from searchgym.diversity.readers.outcomes import outcome
from searchgym.diversity.readers.records import (
    _ANSWER_TOOLS,
    _ASSISTANT,
    _PROMPT_KEYS,
    _REACT_ACTION_LINE,
    DEFAULT_SEARCH_TOOLS,
    MESSAGE_KEYS,
    REACT_KEYS,
    RESPONSE_KEYS,
    SEQUENCE_KEYS,
    TOOL_CALL,
    Episode,
    ReadStats,
    _get,
    _lookup,
    tool_key,
)
from searchgym.errors import TrajectoryFormatError


def split_response(sequence: str) -> tuple[str, str]:
    """(prompt, response) of a full decoded sequence, split at the first assistant header if any."""
    m = _ASSISTANT.search(sequence)
    if not m:
        return "", sequence
    return sequence[:m.start()], sequence[m.end():]


def _number(v: Any, what: str, *, strict: bool = False) -> float | None:
    """A reward-like number; ``strict`` refuses numeric strings (searchgym's own schema)."""
    if v is None:
        return None
    if isinstance(v, dict):  # e.g. verl {"score": .., "acc": ..}
        return F.as_number(v)
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    if isinstance(v, str) and not strict:
        try:
            f = float(v)
        except ValueError:
            f = math.nan
        if math.isfinite(f):
            return f
    raise TrajectoryFormatError(f"{what} must be a number, got {v!r:.40}")


def _step(v: Any, what: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().isdigit():  # "300": a step written as text
        return int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise TrajectoryFormatError(f"{what} must be an integer, got {v!r:.40}")
    return v


def _str_or_none(v: Any) -> str | None:
    if isinstance(v, str):
        return v.strip() or None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    return None


def record_question(obj: dict[str, Any], fs: dict[str, tuple[str, Any]]) -> tuple[str | None, str | None]:
    """(path, question) of a record: its question field or a prompt's question line (``record_fields``), else the
    first user turn of a chat transcript under any key. A format adds its own last source on top (a decoded
    prompt, a ReAct header line, the transcript's head)."""
    if "question" in fs:
        return fs["question"]
    k, msgs = find_turns(obj)
    if isinstance(msgs, list):
        q = _chat_question(msgs)
        if q:
            return f"{F.key_expr(k or '')}[?role==`\"user\"`] | [0].content", q
    return None, None


def _question(obj: dict, fs: dict[str, tuple[str, Any]], fallback: str | None) -> str | None:
    return record_question(obj, fs)[1] or fallback


def _chat_question(msgs: list) -> str | None:
    """The first user turn before the first assistant turn (a user turn after it is an observation)."""
    for m in msgs:
        role = _role(m) if isinstance(m, dict) else ""
        if role == "assistant":
            return None
        if role == "user":
            c = _content(m)
            return parse_question(c) or (c.strip() or None)
    return None


def _named(name: str, v: Any, dotted: str) -> Any:
    """A field the user named by its path (``--question-field`` …): checked for its type."""
    if name == "step":
        return _step(v, f"step field {dotted!r}")
    if name == "reward":
        return _number(v, f"reward field {dotted!r}")
    return _str_or_none(v) if not isinstance(v, (int, float)) else str(v)


def fields_of(obj: dict[str, Any], opts: _Opts, *, strict: bool = True) -> dict[str, tuple[str, Any]]:
    """The record's fields (``record_fields``, ``strict``: a wrong type is a bad record), those the user named by a
    dotted path (``question_field``, ``step_field``, ``reward_field``) taken from there instead (absent where the
    record lacks them: a named field is never guessed)."""
    fs = record_fields(obj, strict=strict)
    named = [(d, n) for d, n in ((opts.question_field, "question"), (opts.step_field, "step"),
                                 (opts.reward_field, "reward")) if d]
    if not named:
        return fs
    fs = dict(fs)
    for dotted, name in named:
        fs.pop(name, None)
        v = _named(name, _get(obj, dotted), dotted)
        if v is not None:
            fs[name] = (dotted, v)
    return fs


def _record_meta(fs: dict[str, tuple[str, Any]], path: Path, lineno: int,
                 default_step: int | None) -> dict[str, Any]:
    outcome = fs.get("reward") or fs.get("success")
    qid = fs.get("question_id")
    return {"step": fs["step"][1] if "step" in fs else default_step, "reward": outcome[1] if outcome else None,
            "episode_id": fs["episode_id"][1] if "episode_id" in fs else f"{path.name}:{lineno}",
            "question_id": qid[1] if qid else None, "source_line": lineno}


def _prediction(fs: dict[str, tuple[str, Any]]) -> str | None:
    return fs["prediction"][1] if "prediction" in fs else None


ParsedRecord = tuple[Episode, list[tuple[str, int, str]], int]


class _Opts:
    def __init__(self, *, query_tags: tuple[tuple[str, str], ...], text_field: str | None,
                 step_field: str | None, question_field: str | None, reward_field: str | None,
                 success_threshold: float, search_tools: tuple[str, ...] = ()):
        self.query_tags = query_tags
        self.search_tools = DEFAULT_SEARCH_TOOLS | {tool_key(t) for t in search_tools if t}
        self.text_field = text_field
        self.step_field = step_field
        self.question_field = question_field
        self.reward_field = reward_field
        self.success_threshold = success_threshold
        self.field: str | None = None  # the text field a detected record format reads
        self.explain: list[Any] | None = None  # --explain: what the generic reader found, per record
        self.explain_limit = 3
        self.fieldmap: dict[str, Any] | None = None  # --map: FIELD -> compiled JMESPath
        self.labels: Counter[str] = Counter()  # the generic reader: the kind of reading that won, per record
        self.file_reading: tuple[str, str | None] | None = None  # the first transcript reading of the file
        names = {o: _grammar_name(o) for o, _ in query_tags}
        self.names = names


def _grammar_name(open_tag: str) -> str:
    return {"<search>": "search_tag", "<|begin_of_query|>": "r1_searcher",
            "<|begin_search_query|>": "search_o1"}.get(open_tag, f"tags {open_tag}")


def _finish(asm: _Assembler, stats: ReadStats, meta: dict[str, Any], question: str | None,
            opts: _Opts, answer_field: str | None = None, success: bool | None = None, *,
            fs: dict[str, tuple[str, Any]] | None = None, obj: dict | None = None,
            text: str | None = None) -> ParsedRecord:
    """The parsed episode. ``text``: the transcript, searched for a question (``### Instruction:``,
    ``Question:``) before its first call when no field gave one; ``obj``: the record, for evidence kept
    beside the transcript (``search_information``, ``retrieved_docs``…)."""
    if not question and text:
        question = _question_in_text(text, opts.query_tags)
    if question is not None:
        question = sys.intern(question)  # many episodes share a question (k samples, GRPO groups)
    ep, pending = asm.build(stats, question=question, **meta)
    n_obs = asm.n_obs
    side = _sidecar(obj) if obj is not None else None
    if side:
        if pending and not n_obs:  # evidence beside the text shows that the calls were executed
            _adopt_pending(ep, pending)
            for _, _, g in pending:
                stats.grammars[g] += 1
            pending = []
        _attach_sidecar(ep, side)
        stats.sidecar += 1
        n_obs += len(side)
    if ep.question_id is None:
        ep.question_id = question
    if ep.answer is None and answer_field:
        ep.answer = answer_field
    if ep.reward is None and success is None:
        ep.reward, success, _ = outcome(fs or {}, [("", text)] if text else [], ep.answer, opts.success_threshold)
    if success is None and ep.reward is not None:
        success = ep.reward >= opts.success_threshold
    ep.success = success
    return ep, pending, n_obs


_CALL_HEADS = ("<search>", "<tool_call>", "<|begin_of_query|>", "<|begin_search_query|>", "\nAction")


def _question_in_text(text: str, query_tags: tuple[tuple[str, str], ...]) -> str | None:
    """The question in a transcript's head (before its first call): ``### Instruction:`` / ``Question:``."""
    head = text[:20000]
    cut = len(head)
    for m in _CALL_HEADS + tuple(o for o, _ in query_tags):
        j = head.find(m)
        if 0 <= j < cut:
            cut = j
    return parse_question(head[:cut])


def _parse_verl(obj: dict, path: Path, lineno: int, stats: ReadStats, opts: _Opts,
                default_step: int | None) -> ParsedRecord:
    inp, out = obj.get("input"), obj.get("output")
    if not isinstance(out, str):
        raise TrajectoryFormatError(f"verl rollout line needs a string 'output' (keys: {sorted(obj)[:12]})")
    if inp is not None and not isinstance(inp, str):
        raise TrajectoryFormatError(f"verl 'input' must be a string, got {type(inp).__name__}")
    fs = fields_of(obj, opts)
    meta = _record_meta(fs, path, lineno, default_step)
    question = _question(obj, fs, None)  # (a prompt's question line: ``input`` is a prompt field)
    asm = _Assembler(opts.search_tools)
    response = split_response(out)[1] if _ASSISTANT.search(out) and not inp else out
    scan_text(response, asm, query_tags=opts.query_tags, grammar_names=opts.names)
    return _finish(asm, stats, meta, question, opts, _prediction(fs), fs=fs, obj=obj, text=out)


def _parse_sequence(obj: dict, path: Path, lineno: int, stats: ReadStats, opts: _Opts,
                    default_step: int | None) -> ParsedRecord:
    key = opts.field
    val = obj.get(key) if key else None
    if key and val is None:
        _, val = _lookup(obj, (key,))
    if not isinstance(val, str):
        raise TrajectoryFormatError(f"text field {key!r} is missing or not a string (keys: {sorted(obj)[:12]})")
    fs = fields_of(obj, opts)
    meta = _record_meta(fs, path, lineno, default_step)
    _, p = _lookup(obj, ("prompt", "input"))
    prompt, response = "", val
    if _ASSISTANT.search(val):
        prompt, response = split_response(val)
    elif str(key).lower() not in RESPONSE_KEYS and not isinstance(p, str):
        # a full sequence without a chat template: the prompt ends with the question line
        k = val.rfind("Question:")
        if k >= 0:
            j = val.find("\n", k)
            prompt, response = val[:j if j >= 0 else len(val)], val[j + 1:] if j >= 0 else ""
    question = _question(obj, fs, parse_question(prompt))
    asm = _Assembler(opts.search_tools)
    scan_text(response, asm, query_tags=opts.query_tags, grammar_names=opts.names)
    return _finish(asm, stats, meta, question, opts, _prediction(fs), fs=fs, obj=obj, text=val)


def _parse_react(obj: dict, path: Path, lineno: int, stats: ReadStats, opts: _Opts,
                 default_step: int | None) -> ParsedRecord:
    key = opts.field or "traj"
    _, val = _lookup(obj, (key,))
    if not isinstance(val, str):
        raise TrajectoryFormatError(f"ReAct field {key!r} is missing or not a string (keys: {sorted(obj)[:12]})")
    fs = fields_of(obj, opts)
    meta = _record_meta(fs, path, lineno, default_step)
    text, q_in_text = react_episode_text(val)
    question = _question(obj, fs, q_in_text)
    asm = _Assembler(opts.search_tools)
    scan_text(text, asm, query_tags=opts.query_tags, grammar_names=opts.names)
    answer = _prediction(fs) or (fs["answer"][1] if "answer" in fs else None)  # a ReAct record's own answer
    return _finish(asm, stats, meta, question, opts, answer, fs=fs, obj=obj, text=val)


# An episode header of a ReAct text: "Question:", "Claim:", "Instruction:", "Task:", numbered or not.
HEADER_LINE = re.compile(r"(?<![^\n])[ \t]*(Question|Claim|Instruction|Task)(?:[ \t]*\d+)?[ \t]*:[ \t]*")


def react_episode_text(text: str) -> tuple[str, str | None]:
    """A ReAct text after its last episode header line (few-shot examples come before), and the header's text."""
    last = None
    for last in HEADER_LINE.finditer(text):
        pass
    if last is None:
        return text, None
    e = text.find("\n", last.end())
    e = len(text) if e < 0 else e
    return text[e:], text[last.end():e].strip() or None


def _is_turn(m: Any) -> bool:
    return isinstance(m, dict) and (("role" in m and ("content" in m or "tool_calls" in m))
                                    or ("from" in m and "value" in m))


def find_turns(obj: dict[str, Any]) -> tuple[str | None, Any]:
    """(key, list) of a record's chat transcript: a known key (``messages``, ``conversations``…), else any
    field holding a list of role/content (or ShareGPT from/value) turns, whatever its name."""
    k, msgs = _lookup(obj, MESSAGE_KEYS)
    if isinstance(msgs, list):
        return k, msgs
    for kk, v in obj.items():
        if isinstance(v, list) and v and all(_is_turn(m) for m in v[:3]):
            return str(kk), v
    return None, None


def _role(m: dict) -> str:
    r = m.get("role", m.get("from", ""))
    r = r.lower() if isinstance(r, str) else ""
    return {"human": "user", "gpt": "assistant", "function": "tool", "observation": "tool",
            "ipython": "tool", "model": "assistant"}.get(r, r)


def _content(m: dict) -> str:
    c = m.get("content", m.get("value", ""))
    if isinstance(c, str):
        return c
    if isinstance(c, list):  # [{"type": "text", "text": ...}]
        return "\n".join(p.get("text", "") if isinstance(p, dict) and isinstance(p.get("text"), str)
                         else (p if isinstance(p, str) else "") for p in c)
    if c is None:
        return ""
    raise TrajectoryFormatError(f"message content must be a string or a list of parts, got {type(c).__name__}")


def _parse_chat(obj: dict, path: Path, lineno: int, stats: ReadStats, opts: _Opts,
                default_step: int | None) -> ParsedRecord:
    _, msgs = find_turns(obj)
    if not isinstance(msgs, list):
        raise TrajectoryFormatError(f"chat record needs a list of role/content turns (keys: {sorted(obj)[:12]})")
    fs = fields_of(obj, opts)
    meta = _record_meta(fs, path, lineno, default_step)
    asm = _Assembler(opts.search_tools)
    seen_assistant = False
    for m in msgs:
        if not isinstance(m, dict):
            raise TrajectoryFormatError(f"a message must be an object, got {type(m).__name__}")
        role = _role(m)
        if role == "assistant":
            seen_assistant = True
            _assistant_turn(m, asm, opts)
            if asm.done:
                break
        elif role == "function_call":  # ShareGPT/glaive: the call as JSON in its own turn
            seen_assistant = True
            c = _tool_call_queries(_content(m), asm.search_tools)
            c.grammar = "function_call"
            asm.call(c)
        elif role in ("tool", "user") and seen_assistant:
            cid = m.get("tool_call_id")
            asm.obs(_content(m), cid if isinstance(cid, str) else None)
    question = _question(obj, fs, None)  # (its first user turn, where no field holds one)
    if asm.answer is None and not asm.done:
        asm.answer = _last_answer(msgs)
    first_user = next((_content(m) for m in msgs if isinstance(m, dict) and _role(m) in ("user", "system")), None)
    return _finish(asm, stats, meta, question, opts, _prediction(fs), fs=fs, obj=obj, text=first_user)


def _assistant_turn(m: dict, asm: _Assembler, opts: _Opts) -> None:
    """The calls of an assistant turn: in its text (any grammar) and its OpenAI ``tool_calls``."""
    scan_text(_content(m), asm, query_tags=opts.query_tags, grammar_names=opts.names)
    tcs = m.get("tool_calls") or []
    if not isinstance(tcs, list):
        raise TrajectoryFormatError("'tool_calls' must be a list")
    for tc in tcs:
        fn = tc.get("function", tc) if isinstance(tc, dict) else None
        if not isinstance(fn, dict):
            asm.call(_Call("openai_tools", None))
            continue
        name, args = fn.get("name"), fn.get("arguments", fn.get("parameters"))
        lname = name.lower() if isinstance(name, str) else ""
        if lname in _ANSWER_TOOLS:
            asm.finish(_answer_of(lname, args))
            break
        cid = tc.get("id") if isinstance(tc.get("id"), str) else None
        asm.call(_function_call(name, args, "openai_tools", cid, asm.search_tools))


def _last_answer(msgs: list) -> str | None:
    """The last assistant message, when it makes no calls: the final answer (its last 500 characters)."""
    for m in reversed(msgs):
        if isinstance(m, dict) and _role(m) == "assistant":
            if not m.get("tool_calls"):
                c = _content(m).strip()
                return c[-500:] if c else None
            return None
    return None


def _parse_generic(obj: dict, path: Path, lineno: int, stats: ReadStats, opts: _Opts,
                   default_step: int | None) -> ParsedRecord:
    tf = opts.text_field or ""
    val = _get(obj, tf)
    if val is None:
        raise TrajectoryFormatError(f"text field {tf!r} is missing (keys: {sorted(obj)[:12]})")
    fs = fields_of(obj, opts)
    meta = _record_meta(fs, path, lineno, default_step)
    question = _question(obj, fs, None)
    asm = _Assembler(opts.search_tools)
    if isinstance(val, list):
        if not all(isinstance(q, str) for q in val):
            raise TrajectoryFormatError(f"text field {tf!r} must be a list of strings")
        for q in val:
            asm.call(_Call("list", [q.strip()] if q.strip() else None, issued=True))
    elif isinstance(val, str):
        scan_text(val, asm, query_tags=opts.query_tags, grammar_names=opts.names)
        if not any(t.calls for t in asm.turns) and not asm.n_obs:
            s = val.strip()
            if s and "\n" not in s:
                asm.call(_Call("field", [s], issued=True))
            elif s:
                stats.skipped_reasons["text field without any search call"] += 1
    else:
        raise TrajectoryFormatError(f"text field {tf!r} must be a string or a list, got {type(val).__name__}")
    return _finish(asm, stats, meta, question, opts, _prediction(fs), fs=fs)


def _parse_searchgym(obj: dict, path: Path, lineno: int, stats: ReadStats, opts: _Opts,
                     default_step: int | None) -> ParsedRecord:
    from searchgym.trajectory import Trajectory

    # checked here as well as by Trajectory.from_dict, so that older schema code cannot let them through
    _step(obj.get("policy_step"), "'policy_step'")
    for k in ("reward", "em", "f1"):
        _number(obj.get(k), f"{k!r}", strict=True)
    tr = Trajectory.from_dict(obj)
    ep = Episode(queries=[], step=tr.policy_step, question=tr.question, question_id=tr.question_id,
                 reward=float(tr.reward), success=bool(tr.em), episode_id=str(tr.episode_id),
                 answer=tr.prediction, source_line=lineno)
    te = tr.extra.get("token_entropy")
    ep.token_entropy = float(te) if isinstance(te, (int, float)) and not isinstance(te, bool) else None
    turn = 0
    for s in tr.steps:
        if s.kind == "invalid":
            ep.malformed += 1
            continue
        if s.kind != "search":
            continue
        qs = getattr(s, "queries", None) or s.extra.get("queries") or ([s.query] if s.query is not None else [])
        if not isinstance(qs, list) or not all(isinstance(q, str) for q in qs):
            raise TrajectoryFormatError("a search step's queries must be strings")
        titles = getattr(s, "titles", None) or s.extra.get("titles") or s.extra.get("retrieved_titles") or []
        if not isinstance(titles, list):
            raise TrajectoryFormatError("a step's titles must be a list")
        evid: list[str] = [str(t) for t in titles if not isinstance(t, list)]
        for k in ("observation", "information", "evidence"):
            v = s.extra.get(k)
            if isinstance(v, str) and v:
                evid.append(v)
            elif isinstance(v, list):
                evid.extend(str(x) for x in v)
        per_query_titles = len(titles) == len(qs) and len(qs) > 1 and all(isinstance(t, list) for t in titles)
        step_titles = [str(t) for t in titles if not isinstance(t, list)]
        step_ids = list(s.doc_ids)  # (the step's lists, shared by its queries: never copied per query)
        for qi, q in enumerate(qs):
            ep.queries.append(q)
            ep.turns.append(turn)
            ep.titles.append([str(t) for t in titles[qi]] if per_query_titles else step_titles)
            ep.evidence.append(evid)
            ep.doc_ids.append(step_ids)
            stats.grammars["searchgym"] += 1
        turn += 1
    return ep, [], 1


def _has_call_marker(s: str, query_tags: tuple[tuple[str, str], ...]) -> bool:
    if any(o in s for o, _ in query_tags) or TOOL_CALL[0] in s:
        return True
    return "ction" in s and _REACT_ACTION_LINE.search(s) is not None


def _text_kind(v: str, opts: _Opts) -> str:
    """``react`` for a text whose calls are ReAct actions only, else ``search-r1`` (tags, ``<tool_call>``)."""
    if TOOL_CALL[0] in v or any(o in v for o, _ in opts.query_tags) or "ction" not in v:
        return "search-r1"
    return "react"


def _is_chat(msgs: Any) -> bool:
    return isinstance(msgs, list) and bool(msgs) and all(isinstance(m, dict) for m in msgs[:3]) and \
        any(("role" in m or "from" in m) for m in msgs[:3])


def _text_transcript(obj: dict[str, Any], opts: _Opts, skip: tuple[str, ...]) -> tuple[str, str] | None:
    """(reader, key) of the record's first text field holding calls: a ReAct trace under a ReAct key, or under
    any key with an observation too (even "prompt": its examples come before its last "Question:" line and are
    not read); else a sequence / response key, else any key but a prompt's (whose examples are no calls)."""
    strs = {k: v for k, v in obj.items() if isinstance(v, str) and k not in skip}
    if not strs:
        return None
    low = {str(k).lower(): k for k in strs}

    def at(k: str) -> tuple[Any, str | None]:
        kk = k if k in strs else low.get(k)
        return kk, (strs[kk] if kk is not None else None)

    for k in REACT_KEYS:
        kk, v = at(k)
        if v is not None and "ction" in v and _REACT_ACTION_LINE.search(v):
            return "react", kk
    for kk, v in strs.items():
        if "ction" in v and "bservation" in v and _REACT_ACTION_LINE.search(v):
            return "react", kk
    for k in SEQUENCE_KEYS + RESPONSE_KEYS:
        kk, v = at(k)
        if v is not None and _has_call_marker(v, opts.query_tags):
            return _text_kind(v, opts), kk
    for kk, v in strs.items():
        if str(kk).lower() not in _PROMPT_KEYS and len(v) > 20 and _has_call_marker(v, opts.query_tags):
            return _text_kind(v, opts), kk
    return None


def transcripts_of(obj: dict[str, Any], opts: _Opts, *, fallback: bool = False) -> list[tuple[str, str | None]]:
    """The transcripts of a record found by structure, as (reader, key), in order of preference: a list of chat
    turns; a prompt / response pair (string ``input`` and ``output``); a text field holding calls. Each is one
    reading of the record for the generic reader (``tree``), which keeps the one with the most queries.
    ``fallback``: where there is none, a sequence / response text without calls (an answer only) is one."""
    out: list[tuple[str, str | None]] = []
    for v in obj.values():
        if isinstance(v, list):  # (a chat transcript is a list)
            k, msgs = find_turns(obj)
            if _is_chat(msgs):
                out.append(("chat", k))
            break
    pair = isinstance(obj.get("input"), str) and isinstance(obj.get("output"), str)
    if pair:
        out.append(("verl", "output"))
    text = _text_transcript(obj, opts, ("input", "output") if pair else ())
    if text is not None:
        out.append(text)
    elif fallback and not out:
        for k in SEQUENCE_KEYS + RESPONSE_KEYS:
            kk, v = _lookup(obj, (k,))
            if isinstance(v, str):
                return [("search-r1", kk)]
    return out


_PARSERS = {"verl": _parse_verl, "search-r1": _parse_sequence, "react": _parse_react, "chat": _parse_chat,
            "jsonl": _parse_generic, "searchgym": _parse_searchgym}
