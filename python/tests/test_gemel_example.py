"""examples/gemel_digits.py at its reduced size (--small), as `make test` runs it: three CNNs
trained alone on scikit-learn's digits, merged and jointly retrained by headroom; the saving
measured from the storages equals pack's prediction and every task keeps its target."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")

SOURCE = os.environ.get("HEADROOM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def test_digits_example_small(tmp_path):
    log_path = tmp_path / "rounds.json"
    p = subprocess.run([sys.executable, os.path.join(SOURCE, "examples", "gemel_digits.py"), "--small",
                        "--log", str(log_path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "GEMEL reports up to 60.7%" in p.stdout
    log = json.loads(log_path.read_text())
    assert log["kept"] and log["rounds"][-1]["kept"]
    last = log["rounds"][-1]
    assert last["saved_bytes"] == last["predicted_saved_bytes"] == log["saved_bytes"] > 0
    assert all(a >= t for a, t in zip(last["accuracy"], log["targets"]))
    # One progress line per round on stderr.
    assert p.stderr.count("gemel round") == len(log["rounds"])
