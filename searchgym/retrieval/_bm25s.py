"""Import bm25s without waking JAX.

When its package is imported, bm25s probes JAX (``bm25s.selection`` runs ``jax.lax.top_k`` on a toy array). In a
process with a GPU and JAX installed, that starts JAX's CUDA backend, which by default takes 75% of the GPU's
memory: the RL trainer's policy in the same process then runs out of memory (seen on an H200 with
``scripts/squeeze_cuda.py``). searchgym never uses bm25s's JAX top-k (it selects with numpy or numba), so bm25s is
imported once with JAX hidden, which also keeps bm25s's own top-k backend the same on machines with and without
JAX. A process that has imported JAX itself is left alone.
"""

from __future__ import annotations

import sys
import threading

_LOCK = threading.Lock()


def ensure_bm25s() -> None:
    """Import bm25s (once) with ``import jax`` failing while it loads, unless JAX or bm25s is already imported."""
    if "bm25s" in sys.modules or "jax" in sys.modules:
        return
    with _LOCK:
        if "bm25s" in sys.modules or "jax" in sys.modules:
            return
        sys.modules["jax"] = None  # type: ignore[assignment]  # `import jax` raises ImportError meanwhile
        try:
            import bm25s  # noqa: F401
        finally:
            if "jax" in sys.modules and sys.modules["jax"] is None:
                del sys.modules["jax"]
