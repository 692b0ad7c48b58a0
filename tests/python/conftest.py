"""Shared helpers of the specdec Python tests."""

import numpy as np
import pytest

import specdec


@pytest.fixture(params=specdec.BACKENDS)
def backend(request):
    """Each backend this build has (seq always, simd when xsimd was found)."""
    return request.param


def random_rows(rng, shape, dtype=np.float32, zeros=0.0):
    """Probability rows of the given shape (last axis V), some entries zeroed with probability `zeros`."""
    x = rng.random(shape)
    if zeros:
        x[rng.random(shape) < zeros] = 0.0
        x[..., 0] += 1e-3  # keep some mass in every row
    return (x / x.sum(axis=-1, keepdims=True)).astype(dtype)


def sample_from(rng, q):
    """One token per row of q [..., V], drawn with numpy (independent of specdec's streams)."""
    flat = q.reshape(-1, q.shape[-1]).astype(np.float64)
    cdf = np.cumsum(flat, axis=1)
    u = rng.random(flat.shape[0]) * cdf[:, -1]
    tokens = np.minimum((cdf <= u[:, None]).sum(axis=1), flat.shape[1] - 1)
    return tokens.reshape(q.shape[:-1])


def chi2_critical(dof, z=3.719):
    """The chi-squared quantile for a false-failure rate of about 1e-4 (z = 3.719), by the
    Wilson-Hilferty approximation (no scipy)."""
    a = 2.0 / (9.0 * dof)
    return dof * (1.0 - a + z * np.sqrt(a)) ** 3


def chi2_statistic(counts, probs):
    """Pearson's statistic of observed counts against the law probs; cells with expected count
    below 5 are pooled into one."""
    counts = np.asarray(counts, dtype=np.float64)
    expected = np.asarray(probs, dtype=np.float64) * counts.sum()
    small = expected < 5
    if small.any():
        counts = np.append(counts[~small], counts[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
    keep = expected > 0
    assert np.all(counts[~keep] == 0), "a token outside the law's support was emitted"
    stat = float(np.sum((counts[keep] - expected[keep]) ** 2 / expected[keep]))
    return stat, int(keep.sum()) - 1
