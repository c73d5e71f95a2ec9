"""pass@k, the number prover papers report: the unbiased estimator of the chance that at least one
of k samples drawn from n (of which c are correct) is correct (Chen et al., 2021), and the values
of k a run of n samples reports (the report averages it over problems)."""

from __future__ import annotations


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 − C(n−c, k) / C(n, k), computed as a product (no huge binomials); 1 when fewer than k
    samples are wrong."""
    if not 0 <= c <= n:
        raise ValueError(f"c={c} correct samples of n={n}: expected 0 <= c <= n")
    if not 1 <= k <= n:
        raise ValueError(f"k={k}: expected 1 <= k <= n={n}")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def ks_for(n: int) -> list[int]:
    """The k a run of ``n`` samples reports: 1, 2, 4, ... up to n, and n itself."""
    if n < 1:
        raise ValueError(f"n={n}: expected at least one sample")
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    return [*ks, n]
