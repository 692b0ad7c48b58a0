"""python/examples/sprinter_figure.py: its computation (no matplotlib needed) agrees with SPRINTER's
closed form, with a negative control that must fail, and the script runs to exit status 0 whether or
not matplotlib is installed (a figure with it, a message saying so without it).

Tolerance as test_simulate.py: |z| < 5 per point (a false-failure rate of about 6e-7 each)."""

import importlib.util
import subprocess
import sys

import numpy as np

from specdec import theory
from conftest import ROOT

SCRIPT = ROOT / "python" / "examples" / "sprinter_figure.py"


def load_example():
    spec = importlib.util.spec_from_file_location("sprinter_figure", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_figure_data_agree_with_theorem_3_3():
    data = load_example().compute(draws=20_000, seed=3)
    assert data["theory"].shape == data["mean"].shape == data["std_error"].shape == (4, 21)
    np.testing.assert_array_equal(data["theory"], theory.sprinter.expected_tokens(0.9, data["eta_fp"][:, None],
                                                                                  data["r"]))
    assert np.abs(data["z"]).max() < 5, data["z"]
    # negative control: the closed form of eta_tp = 0.85 is rejected wherever r >= 3
    wrong = theory.sprinter.expected_tokens(0.85, data["eta_fp"][:, None], data["r"])
    z = (data["mean"][:, 3:] - wrong[:, 3:]) / data["std_error"][:, 3:]
    assert (np.abs(z) > 5).all(), z


def test_the_script_exits_0_with_or_without_matplotlib(tmp_path):
    out = tmp_path / "figure.png"
    done = subprocess.run([sys.executable, str(SCRIPT), "--draws", "2000", "--output", str(out)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "largest |z|" in done.stdout
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib is not installed" in done.stdout and not out.exists()
    else:
        assert out.stat().st_size > 0 and f"wrote {out}" in done.stdout
