"""Typed errors. Each says what went wrong, with which input, and how to fix it."""

from __future__ import annotations


class SearchGymError(Exception):
    """Base class of every error searchgym raises on purpose."""


class ConfigError(SearchGymError, ValueError):
    """An argument or configuration that cannot work (e.g. a GRPO group size of 1)."""


class CorpusFormatError(SearchGymError, ValueError):
    """A corpus or QA file that cannot be read: names the file, the line (or byte offset) and the fix."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 offset: int | None = None):
        where = []
        if path is not None:
            where.append(str(path))
        if line is not None:
            where.append(f"line {line}")
        if offset is not None:
            where.append(f"byte offset {offset}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.path, self.line, self.offset = path, line, offset


class DuplicateIdError(CorpusFormatError):
    """Two passages (or examples) share one id."""


class IndexError_(SearchGymError):
    """Base for index-directory problems (named with a trailing underscore to avoid the builtin)."""


class IndexNotFoundError(IndexError_, FileNotFoundError):
    """The index directory or one of its files is missing."""


class IndexCorruptError(IndexError_):
    """An index file exists but cannot be read (truncated, bad JSON, wrong shape)."""


class IndexVersionError(IndexError_):
    """The index was written by another format version."""


class IndexMismatchError(IndexError_):
    """The index was built from another corpus or with other parameters than the ones given."""


class QueryError(SearchGymError, ValueError):
    """A query that cannot be answered (e.g. over the length limit)."""


class RetrieverUnavailableError(SearchGymError, ConnectionError):
    """A remote retriever stayed unreachable after the configured retries."""


class RetrieverProtocolError(RetrieverUnavailableError):
    """A retrieval server answered outside the /retrieve contract (not JSON, wrong shape or types, too deep,
    over the response-size cap). A subclass of RetrieverUnavailableError: such a server is unusable too."""


class ModelLoadError(SearchGymError, OSError):
    """A model path that does not exist, or a hub name while offline."""


class AgentUnavailableError(SearchGymError, ConnectionError):
    """A remote policy server (OpenAI-compatible) stayed unreachable after retries."""


class TrajectoryFormatError(SearchGymError, ValueError):
    """A trajectory or rollout-log line that does not fit its schema."""


class CheckpointError(SearchGymError):
    """A checkpoint that is missing, half-written, or from an incompatible run."""


class CompetenceGateError(SearchGymError):
    """The squeeze experiment's SFT start failed its competence gate, and the run was asked to stop there
    (``--stop-on-failed-gate``) rather than spend the arms' hours on findings it would mark unusable."""


class DatasetUnavailableError(SearchGymError, ConnectionError):
    """A Hugging Face dataset that cannot be loaded: offline, an unknown name, or ``datasets`` missing."""


class FrameworkVersionError(SearchGymError, ImportError):
    """An outside trainer (TRL, verl, OpenEnv, SkyRL, GEM) missing, or at a version searchgym does not support."""


class InputLimitError(SearchGymError, ValueError):
    """An input past one of searchgym's stated bounds (size, nesting depth, time): names the input, the
    bound and what was found. docs/reliability.md lists the bounds."""


class ChatTemplateError(InputLimitError):
    """A model directory's chat template that cannot be rendered safely: it raised, touched something the
    sandbox forbids, or went past the output-size or time bound."""
