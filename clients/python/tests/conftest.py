"""Fixtures: one real poold for the whole session (poold_server.py), and a client on it.

`sandpool` is imported from wherever the interpreter finds it: ctest puts the source tree on
PYTHONPATH; the offline-install test runs these files from a venv with the package installed.
"""

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
