"""Shared helpers: the CLI built beside the package (HEADROOM_CLI, set by ctest)."""
import json
import os
import subprocess

import pytest


def cli_path():
    path = os.environ.get("HEADROOM_CLI")
    if not path:
        pytest.skip("HEADROOM_CLI is not set (run through ctest)")
    return path


def run_cli(*args):
    """(exit code, stdout, stderr) of the CLI."""
    p = subprocess.run([cli_path(), *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def cli_json(*args):
    code, out, err = run_cli(*args)
    assert code == 0, err
    return json.loads(out)
