"""Shared helpers of the specdec Python tests."""

import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import specdec


@pytest.fixture(params=specdec.BACKENDS)
def backend(request):
    """Each backend this build has (seq always, simd when xsimd was found)."""
    return request.param


HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent


@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    """tests/python/cpp_reference.cpp compiled against include/ (the C++ side of the parity tests)."""
    cxx = shutil.which(os.environ.get("CXX", "c++"))
    if cxx is None:
        pytest.skip("no C++ compiler (set CXX) to build tests/python/cpp_reference.cpp")
    exe = tmp_path_factory.mktemp("cpp") / "cpp_reference"
    cmd = [cxx, "-std=c++20", "-O1", f"-I{ROOT / 'include'}", str(HERE / "cpp_reference.cpp"), "-o", str(exe)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"compiling the C++ reference failed:\n{' '.join(cmd)}\n{done.stderr[-4000:]}")
    return exe


def write(d, meta, **arrays):
    d.mkdir()
    (d / "meta.txt").write_text(meta + "\n")
    for name, a in arrays.items():
        np.ascontiguousarray(a).tofile(d / f"{name}.bin")


def run_reference(reference, cases):
    """Writes each case (a directory, its meta line, its input arrays) and runs the C++ reference on all."""
    for d, meta, arrays in cases:
        write(d, meta, **arrays)
    done = subprocess.run([str(reference)] + [str(d) for d, _, _ in cases], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def read(d, name, dtype):
    return np.fromfile(d / f"{name}.bin", dtype=dtype)


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
