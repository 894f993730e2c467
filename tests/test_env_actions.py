"""The action parser: Search-R1 tags, tool-call JSON, structured actions, and hostile input."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from searchgym.envs.actions import (
    MAX_QUERIES_PER_STEP,
    MAX_QUERY_CHARS,
    AnswerAction,
    SearchAction,
    parse_action,
)


def test_search_tag_with_thinking():
    p = parse_action("<think>I need the capital</think>\n<search> capital of Gobronania </search>")
    assert (p.kind, p.queries, p.fmt) == ("search", ("capital of Gobronania",), "tag")
    assert p.thinking.startswith("<think>I need")


def test_first_complete_tag_wins():
    assert parse_action("<answer> 42 </answer><search>q</search>").kind == "answer"
    assert parse_action("<search>q</search><answer> 42 </answer>").query == "q"
    # an unclosed <search> does not block a later complete answer
    p = parse_action("<search>never closed <answer>b</answer>")
    assert (p.kind, p.answer) == ("answer", "b")
    # nested opening tags: the innermost content is the query
    assert parse_action("<search><search>inner</search></search>").query == "inner"
    # a closing tag before any opening tag is ignored
    assert parse_action("</search> <search>ok</search>").query == "ok"


@pytest.mark.parametrize("text", ["", "just text", "<search>", "<search></search>", "<search>  \n </search>",
                                  "<answer>", "</answer>", "<Search>q</Search>"])
def test_invalid_texts(text):
    p = parse_action(text)
    assert p.kind == "invalid" and p.error


def test_empty_answer_is_an_answer():
    p = parse_action("<answer></answer>")
    assert (p.kind, p.answer) == ("answer", "")


def test_tool_calls():
    call = {"name": "search", "arguments": {"query": "who founded x"}}
    assert parse_action(f"<tool_call>{json.dumps(call)}</tool_call>").queries == ("who founded x",)
    call = {"name": "search", "arguments": {"query_list": ["a", "b"]}}
    p = parse_action(f"<tool_call>\n{json.dumps(call)}\n</tool_call>")
    assert (p.kind, p.queries, p.fmt) == ("search", ("a", "b"), "tool_call")
    call = {"name": "answer", "arguments": json.dumps({"answer": "Paris"})}  # arguments as a JSON string
    assert parse_action(f"<tool_call>{json.dumps(call)}</tool_call>").answer == "Paris"


@pytest.mark.parametrize("body", [
    "not json", "{", "[1,2]", '{"name": "search"}', '{"name": "search", "arguments": {"query": 3}}',
    '{"name": "search", "arguments": {"query_list": []}}', '{"name": "search", "arguments": {"query_list": [1]}}',
    '{"name": "search", "arguments": "{bad"}', '{"name": "answer", "arguments": {}}',
    '{"name": "answer", "arguments": {"answer": [1]}}', '{"name": "rm", "arguments": {}}',
    '{"name": "search", "arguments": [1]}', "[" * 50_000 + "]" * 50_000,
])
def test_bad_tool_calls_are_invalid(body):
    p = parse_action(f"<tool_call>{body}</tool_call>")
    assert p.kind == "invalid" and p.fmt == "tool_call" and p.error


def test_limits():
    assert parse_action(f"<search>{'q' * (MAX_QUERY_CHARS + 1)}</search>").error.startswith("the search query is too")
    qs = [f"q{i}" for i in range(MAX_QUERIES_PER_STEP + 1)]
    call = {"name": "search", "arguments": {"query_list": qs}}
    assert "too many" in parse_action(f"<tool_call>{json.dumps(call)}</tool_call>").error


def test_structured_actions():
    p = parse_action(SearchAction("a query"))
    assert (p.kind, p.queries, p.fmt, p.raw) == ("search", ("a query",), "object", "<search> a query </search>")
    assert parse_action(SearchAction(queries=["x", "y"])).queries == ("x", "y")
    assert parse_action(AnswerAction("Paris")).answer == "Paris"
    assert parse_action({"name": "answer", "arguments": {"answer": "x"}}).kind == "answer"
    assert parse_action(SearchAction(queries=[])).kind == "invalid"
    assert parse_action(b"<search>bytes</search>").query == "bytes"
    for thing in (None, 3, 1.5, ["<search>q</search>"], object(), SearchAction(query=""), AnswerAction(None)):
        assert parse_action(thing).kind == "invalid"
    assert AnswerAction("a").to_text("tool_call").startswith("<tool_call>")
    assert parse_action(SearchAction("q").to_text("tool_call")).query == "q"


def test_megabyte_actions_are_linear():
    # many unclosed opening tags: a backtracking regex would take minutes here
    p = parse_action("<search>" * 120_000 + "x" * 1_000_000)
    assert p.kind == "invalid"
    p = parse_action("<think>" + "y" * 1_000_000 + "</think><answer>z</answer>")
    assert p.answer == "z"


_TAGGY = st.lists(st.sampled_from(["<search>", "</search>", "<answer>", "</answer>", "<tool_call>", "</tool_call>",
                                    "{", "}", '"name"', ":", '"search"', "q", " ", "\x00", "\n"])).map("".join)


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(), _TAGGY))
def test_parser_never_raises(text):
    p = parse_action(text)
    assert p.kind in ("search", "answer", "invalid")
    if p.kind == "search":
        assert p.queries and all(q and q == q.strip() for q in p.queries)
    if p.kind == "invalid":
        assert p.error
