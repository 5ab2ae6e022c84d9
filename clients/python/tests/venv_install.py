"""The offline install of README.md, as a test: a venv that sees the system's site packages,
`pip install --no-build-isolation --no-index` of a copy of clients/python (so the build's
artefacts stay out of the source tree), then the installed package, not the source tree,
submits a real task to a real poold. Exits non-zero on any failure. Run by ctest."""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE.parent

CHECK = """
import sys
import sandpool, sandpool.aio
assert sandpool.__file__.startswith(sys.prefix), sandpool.__file__
sys.path.insert(0, sys.argv[1])
from poold_server import PooldServer
with PooldServer() as server, sandpool.Client(server.socket) as client:
    task = client.submit("echo", b"installed")
    assert task.result == b"installed", task
print("submitted through", sandpool.__file__)
"""


def run(args, **kwargs):
    print("+", " ".join(map(str, args)), flush=True)
    subprocess.run(args, check=True, **kwargs)


def main() -> int:
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="sandpool-venv-"))
    try:
        src = scratch / "python"
        shutil.copytree(SOURCE, src, ignore=shutil.ignore_patterns(
            "tests", "build", "*.egg-info", "__pycache__", ".pytest_cache", "CMakeLists.txt"))
        venv = scratch / "v"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        run([sys.executable, "-m", "venv", "--system-site-packages", venv], env=env)
        run([venv / "bin" / "pip", "install", "--quiet", "--no-build-isolation", "--no-index",
             src], env=env)
        run([venv / "bin" / "python", "-c", CHECK, HERE], env=env, cwd=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
