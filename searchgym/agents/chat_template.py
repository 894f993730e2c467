"""Rendering a model directory's chat template with bounds on its output, time and memory.

A chat template is Jinja code shipped with the model (``tokenizer_config.json`` / ``chat_template.jinja``).
transformers renders it in Jinja's sandbox, which stops attribute tricks but not cost: two nested
``range(100000)`` loops run for hours, ``"x" * 10**10`` allocates 10 GB, a loop of ``~`` concatenations doubles
a string until memory runs out. :func:`render_chat_template` renders with transformers' own sandboxed
environment and globals (so the text is identical) plus:

- arithmetic on strings and lists (``*``, ``+``, ``~``), ``**``, and calls and filters with huge integer
  arguments (``ljust``, ``center``, ``indent``, ...) or huge results (``replace``, ``join``) checked before
  they run;
- at most :data:`MAX_RENDER_CHARS` characters of output;
- at most :data:`MAX_RENDER_S` seconds, and at most :data:`MAX_RENDER_GROWTH_MB` of peak-memory growth, checked
  every few hundred template lines (a trace function on the template's own frames only).

Past any of them, and for any error the template raises, it raises :class:`~searchgym.errors.ChatTemplateError`.
"""

from __future__ import annotations

import resource
import sys
import time
import types
from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.errors import ChatTemplateError

MAX_RENDER_CHARS = 1 << 20        # characters of rendered prompt
MAX_RENDER_S = 3.0                # seconds per render
MAX_RENDER_GROWTH_MB = 512        # growth of the process's peak RSS during one render
MAX_OPERAND_CHARS = 1 << 22       # a string or list built by * or + inside the template
_CHECK_EVERY = 16                 # template lines between time / memory checks

_compiled: dict[str, Any] = {}


def _bounded_binop(self: Any, context: Any, operator: str, left: Any, right: Any) -> Any:
    """The sandbox's ``call_binop``, refusing operations whose result would be huge before running them."""
    sized = (str, list, tuple)
    if operator == "*":
        seq, n = (left, right) if isinstance(left, sized) else (right, left)
        if isinstance(seq, sized) and isinstance(n, int) and len(seq) * max(n, 0) > MAX_OPERAND_CHARS:
            raise ChatTemplateError(f"the chat template multiplies a {type(seq).__name__} of {len(seq):,} by {n:,}: "
                                    f"over the {MAX_OPERAND_CHARS:,}-item limit")
    elif operator == "+":
        if isinstance(left, sized) and isinstance(right, sized) and len(left) + len(right) > MAX_OPERAND_CHARS:
            raise ChatTemplateError(f"the chat template builds a {type(left).__name__} over the "
                                    f"{MAX_OPERAND_CHARS:,}-item limit")
    elif operator == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and \
            right * max(1, abs(left).bit_length()) > 4096:
        raise ChatTemplateError(f"the chat template computes {left} ** {right}: over the 4,096-bit limit")
    return self.binop_table[operator](left, right)


def _check_args(what: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Refuse a call whose integer arguments ask for a huge result (``"x".ljust(10**10)``, ``center``,
    ``indent``, ``range``...)."""
    for a in (*args, *kwargs.values()):
        if isinstance(a, int) and not isinstance(a, bool) and abs(a) > MAX_OPERAND_CHARS:
            raise ChatTemplateError(f"the chat template calls {what} with {a:,}: over the "
                                    f"{MAX_OPERAND_CHARS:,} limit")


def _bounded_call(self: Any, context: Any, obj: Any, *args: Any, **kwargs: Any) -> Any:
    _check_args(getattr(obj, "__name__", "a function"), args, kwargs)
    name = getattr(obj, "__name__", "")
    if name == "replace" and isinstance(getattr(obj, "__self__", None), str) and len(args) >= 2:
        text, old, new = obj.__self__, args[0], args[1]
        if isinstance(old, str) and isinstance(new, str) and len(new) > len(old):
            grows = (len(new) - len(old)) * (text.count(old) if old else len(text) + 1)
            if len(text) + grows > MAX_OPERAND_CHARS:
                raise ChatTemplateError("the chat template's replace() would build a string over the "
                                        f"{MAX_OPERAND_CHARS:,}-character limit")
    return type(self).call(self, context, obj, *args, **kwargs)


def _bounded_filter(name: str, func: Any) -> Any:
    def checked(*args: Any, **kwargs: Any) -> Any:
        _check_args(f"the {name} filter", args[1:], kwargs)
        if name in ("replace", "join"):
            size = sum(len(str(a)) for a in args[:3] if isinstance(a, (str, int)))
            seq = args[1] if name == "join" and len(args) > 1 else None
            if name == "join" and isinstance(args[0], (list, tuple)):
                size = sum(len(x) if isinstance(x, str) else 20 for x in args[0])
                size += len(seq) * len(args[0]) if isinstance(seq, str) else 0
            if size > MAX_OPERAND_CHARS:
                raise ChatTemplateError(f"the chat template's {name} filter would build over "
                                        f"{MAX_OPERAND_CHARS:,} characters")
        return func(*args, **kwargs)

    for attr in ("jinja_pass_arg",):  # keep the context / environment passing markers
        if hasattr(func, attr):
            setattr(checked, attr, getattr(func, attr))
    return checked


def _bounded_join(seq: Any) -> str:
    """``~`` concatenation (Jinja's ``str_join``), refusing results over the limit: a loop of ``s ~ s`` doubles."""
    parts = [x if isinstance(x, str) else str(x) for x in seq]
    if sum(map(len, parts)) > MAX_OPERAND_CHARS:
        raise ChatTemplateError(f"the chat template concatenates a string over the {MAX_OPERAND_CHARS:,}-character "
                                "limit")
    return "".join(parts)


def _compile(template: str) -> Any:
    compiled = _compiled.get(template)
    if compiled is None:
        from transformers.utils.chat_template_utils import _compile_jinja_template

        # transformers' sandbox, globals and filters, from an empty template: compiling the model's template in
        # it directly would constant-fold "x" * 10**10 at compile time, before any check
        env = _compile_jinja_template("").environment.overlay()
        env.intercepted_binops = frozenset({"*", "+", "**"})  # also stops constant folding of these
        env.call_binop = types.MethodType(_bounded_binop, env)
        env.call = types.MethodType(_bounded_call, env)
        env.filters = {k: _bounded_filter(k, f) for k, f in env.filters.items()}
        compiled = env.from_string(template)
        compiled.root_render_func.__globals__["str_join"] = _bounded_join  # what `~` compiles to
        if len(_compiled) > 16:
            _compiled.clear()
        _compiled[template] = compiled
    return compiled


def _template_text(tokenizer: Any) -> str:
    getter = getattr(tokenizer, "get_chat_template", None)
    template = getter() if callable(getter) else getattr(tokenizer, "chat_template", None)
    if isinstance(template, Mapping):
        template = template.get("default")
    if not isinstance(template, str):
        raise ChatTemplateError("the tokenizer has no chat template (a string) to render")
    return template


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class _Budget:
    """A trace function that only follows the template's frames and raises once time or memory is spent."""

    def __init__(self, seconds: float, growth_mb: float):
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds
        self.rss_limit = _peak_rss_mb() + growth_mb
        self.growth_mb = growth_mb
        self.lines = 0

    def calls(self, frame: Any, event: str, arg: Any) -> Any:
        return self.lines_in if frame.f_code.co_filename == "<template>" else None

    def lines_in(self, frame: Any, event: str, arg: Any) -> Any:
        self.lines += 1
        if self.lines % _CHECK_EVERY == 0:
            self.check()
        return self.lines_in

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            raise ChatTemplateError(f"the chat template did not finish within {self.seconds:g} s (a runaway loop?)")
        if _peak_rss_mb() > self.rss_limit:
            raise ChatTemplateError(f"the chat template grew memory by over {self.growth_mb:g} MB")


def render_chat_template(tokenizer: Any, messages: Sequence[Mapping[str, Any]], *,
                         add_generation_prompt: bool = True, max_chars: int = MAX_RENDER_CHARS,
                         max_seconds: float = MAX_RENDER_S, max_growth_mb: float = MAX_RENDER_GROWTH_MB) -> str:
    """The prompt text ``tokenizer.apply_chat_template(messages, tokenize=False, ...)`` would give, rendered
    within the bounds in the module docstring; :class:`~searchgym.errors.ChatTemplateError` otherwise."""
    template = _template_text(tokenizer)
    try:
        compiled = _compile(template)
    except ChatTemplateError:
        raise
    except Exception as e:  # noqa: BLE001 - a template that does not even compile
        raise ChatTemplateError(f"the chat template does not compile: {type(e).__name__}: {str(e)[:200]}") from None
    special = getattr(tokenizer, "special_tokens_map", None)
    context: dict[str, Any] = {k: v for k, v in (special or {}).items() if isinstance(v, str)}
    context.update(messages=[dict(m) for m in messages], tools=None, documents=None,
                   add_generation_prompt=add_generation_prompt)
    budget = _Budget(max_seconds, max_growth_mb)
    parts: list[str] = []
    size = 0
    previous = sys.gettrace()
    sys.settrace(budget.calls)
    try:
        for piece in compiled.generate(**context):
            size += len(piece)
            if size > max_chars:
                raise ChatTemplateError(f"the chat template rendered over {max_chars:,} characters for one prompt")
            parts.append(piece)
            budget.check()
    except ChatTemplateError:
        raise
    except (RecursionError, MemoryError) as e:
        raise ChatTemplateError(f"the chat template ran out of {'stack' if isinstance(e, RecursionError) else 'memory'}"
                                ) from None
    except Exception as e:  # noqa: BLE001 - raise_exception(), undefined names, sandbox refusals: all typed
        raise ChatTemplateError(f"the chat template failed: {type(e).__name__}: {str(e)[:200]}") from None
    finally:
        sys.settrace(previous)
    return "".join(parts)


__all__ = ["MAX_RENDER_CHARS", "MAX_RENDER_GROWTH_MB", "MAX_RENDER_S", "render_chat_template"]
