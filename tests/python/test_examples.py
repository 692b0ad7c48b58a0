"""python/examples/sprinter_figure.py and tokens_per_step.py. sprinter_figure.py: its computation (no matplotlib needed) agrees with SPRINTER's
closed form, with a negative control that must fail, and the script runs to exit status 0 whether or
not matplotlib is installed (a figure with it, a message saying so without it).

Tolerance as test_simulate.py: |z| < 5 per point (a false-failure rate of about 6e-7 each)."""

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

from specdec import theory
from conftest import ROOT

EXAMPLES = ROOT / "python" / "examples"
SCRIPT = EXAMPLES / "sprinter_figure.py"
TOKENS_SCRIPT = EXAMPLES / "tokens_per_step.py"
sys.path.insert(0, str(EXAMPLES))  # the scripts import their shared _figure.py, as when run from there


def load_example(script=SCRIPT):
    spec = importlib.util.spec_from_file_location(script.stem, script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script(script, args, out, cwd):
    """Runs an example script; it must exit 0 and draw `out` exactly when matplotlib is installed."""
    done = subprocess.run([sys.executable, str(script), *args, "--output", str(out)], capture_output=True, text=True,
                          cwd=cwd)
    assert done.returncode == 0, done.stderr
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib is not installed" in done.stdout and not out.exists()
    else:
        assert out.stat().st_size > 0 and f"wrote {out}" in done.stdout
    return done.stdout


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
    assert "largest |z|" in run_script(SCRIPT, ["--draws", "2000"], tmp_path / "figure.png", tmp_path)


def test_tokens_per_step_counts_every_token_once_and_drafters_agree_on_the_tokens():
    example = load_example(TOKENS_SCRIPT)
    texts = example.load_texts()
    if not texts:
        pytest.skip(f"no licence texts in {example.LICENCES}")
    for temperature in (0.0, 0.8):
        data = example.compute(texts, requests=12, tokens=48, temperature=temperature, seed=4)
        for drafter, d in data.items():
            assert d["per_step"].sum() == 12 * 48, drafter  # every emitted token in exactly one step's event
            assert d["steps"].sum() == len(d["per_step"]) and (d["per_step"] >= 1).all()
            for a, b in zip(d["outputs"], data["model"]["outputs"]):
                np.testing.assert_array_equal(a, b)  # position-keyed samples: the drafter changes no token
        assert data["model"]["per_step"].mean() > 1.0  # the draft model's drafts are accepted at times


def test_tokens_per_step_script_exits_0_with_or_without_matplotlib(tmp_path):
    if not load_example(TOKENS_SCRIPT).load_texts():
        pytest.skip("no licence texts to train on")
    stdout = run_script(TOKENS_SCRIPT, ["--requests", "8"], tmp_path / "tokens.png", tmp_path)
    assert "the same tokens with every drafter: True" in stdout
