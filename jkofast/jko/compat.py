"""Drop-in replacement for the published JKO-RAG solver API (``src/jko.py`` of JKO-RAG).

``from jkofast.jko.compat import JKOConfig, run_jko, run_jko_with_duals`` accepts the published
signatures on NumPy arrays (array-likes; ``device`` is accepted and ignored) and returns
the published structures:

* ``run_jko(p0, energy, C, K, cfg, device="cpu") -> (p_T float32, infos)`` where ``infos`` is
  one dict per outer step with ``"losses"`` (the loss before each Adam update, floats);
* ``run_jko_with_duals(...) -> (p_T, f, g)`` float32, with ``f = g = 0`` unless the mode is
  ``wasserstein`` or ``bregman``;
* ``jko_step(p_prev, energy, C, K, cfg) -> (p_next float32, {"losses": [...]})``.

``JKOConfig`` is :class:`jkofast.jko.solver.JKOConfig` (a superset of the published fields with
the same defaults), so ``objective=`` / ``grad=`` also work here. Arithmetic is float64
(the published solver runs float32; see ``tests/test_parity.py`` for the agreement).
"""

from __future__ import annotations

import numpy as np

from jkofast.jko import solver as _jko
from jkofast.jko.solver import JKOConfig

__all__ = ["JKOConfig", "jko_step", "run_jko", "run_jko_with_duals"]


def _cfg(cfg) -> JKOConfig:
    if cfg is None:
        raise TypeError("cfg is required (a JKOConfig), as in the published API")
    return _jko._resolve_config(cfg)


def run_jko(p0, energy, C, K, cfg: JKOConfig, device: str = "cpu") -> tuple[np.ndarray, list[dict]]:
    """Run ``cfg.T`` outer JKO steps from ``p0``; returns ``(p_T float32, infos)``."""
    cfg = _cfg(cfg)
    p, losses = _jko.run_jko(p0, energy, C, K, cfg, return_losses=True)
    n = cfg.inner_steps
    infos = [{"losses": [float(x) for x in losses[t * n : (t + 1) * n]]} for t in range(cfg.T)]
    return p.astype(np.float32), infos


def run_jko_with_duals(p0, energy, C, K, cfg: JKOConfig, device: str = "cpu"):
    """``run_jko`` plus the uniform-target dual potentials; returns ``(p_T, f, g)`` float32."""
    p, f, g = _jko.run_jko_with_duals(p0, energy, C, K, _cfg(cfg))
    return p.astype(np.float32), f.astype(np.float32), g.astype(np.float32)


def jko_step(p_prev, energy, C, K, cfg: JKOConfig, init_logits=None):
    """One outer step; returns ``(p_next float32, {"losses": [...]})``."""
    if init_logits is not None:
        raise NotImplementedError("init_logits is not supported; the logits start at log(p_prev)")
    p, infos = run_jko(p_prev, energy, C, K, _cfg(cfg).replace(T=1))
    return p, infos[0]
