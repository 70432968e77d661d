"""Unbiased pass@k from n graded samples per problem (Chen et al. 2021, the estimator HumanEval introduced).

pass@k = 1 - C(n - c, k) / C(n, k) for a problem with c correct of n samples: the chance that k of the n samples
drawn without replacement hold at least one correct one. It is unbiased for the pass@k of k fresh samples, unlike
1 - (1 - c/n)^k. pass@1 reduces to c / n, the paper's pass@1.
"""

from __future__ import annotations

from math import comb

PASS_K = (1, 2, 4, 8)
"""The k reported wherever n allows (k <= n)."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with ``c`` correct of ``n`` samples; needs 1 <= k <= n and 0 <= c <= n."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n, got c={c}, n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def mean_pass_at_k(correct: list[list[int]], ks: tuple[int, ...] = PASS_K) -> dict[str, float]:
    """{"k": mean over problems of pass@k} for every k in ``ks`` that every problem's sample count allows;
    ``correct`` holds one list of 0/1 grades per problem."""
    if not correct:
        return {}
    n = min(len(row) for row in correct)
    return {str(k): sum(pass_at_k(len(row), sum(row), k) for row in correct) / len(correct) for k in ks if k <= n}
