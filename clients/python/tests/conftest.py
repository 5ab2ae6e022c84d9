"""Fixtures: one real poold for the whole session (poold_server.py), and a client on it.

`sandpool` is imported from wherever the interpreter finds it: ctest puts the source tree on
PYTHONPATH (venv_install.py checks the installed package instead).
"""

import os

import pytest

import sandpool
from poold_server import PooldServer


@pytest.fixture(scope="session")
def poold():
    with PooldServer() as server:
        yield server


@pytest.fixture
def client(poold):
    with sandpool.Client(poold.socket) as c:
        yield c


def pytest_sessionfinish(session, exitstatus):
    """Under ctest (SANDPOOL_SKIP_EXIT set), a run that passed but skipped a test (the rights
    tests need root) exits with that code, which ctest reports as skipped, not passed: a
    skipped test proves nothing (docs/development.md, "Skipped tests fail CI unless
    expected")."""
    code = os.environ.get("SANDPOOL_SKIP_EXIT")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if code and exitstatus == 0 and reporter is not None and reporter.stats.get("skipped"):
        session.exitstatus = int(code)
