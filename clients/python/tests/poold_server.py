"""A real poold for the client's tests: a config written into a scratch directory (socket and
state dir inside it, the HTTP listener on a free port), the process started from the build, and its log
read by a thread, so a test waits for the "poold ready" line instead of sleeping. The task
journal is on (poold's default), in the state dir: restart() starts poold again on the same
config and state, and the accepted tasks survive it.

Where poold and the plugins are: SANDPOOL_POOLD and SANDPOOL_PLUGIN_DIR (ctest sets both),
else the repository's build/ directory.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import threading

REPO = pathlib.Path(__file__).resolve().parents[3]
PATIENCE = 60.0  # seconds; generous for a loaded 2-core machine

# uids the rights tests connect as (from a child process): one with a `read` grant, one with
# no grant at all. Neither needs to exist in /etc/passwd.
READ_UID = 65534
STRANGER_UID = 65533


def poold_path() -> str:
    return os.environ.get("SANDPOOL_POOLD", str(REPO / "build" / "bin" / "poold"))


def plugin(name: str) -> str:
    plugin_dir = os.environ.get("SANDPOOL_PLUGIN_DIR", str(REPO / "build" / "plugins"))
    return os.path.join(plugin_dir, f"lib{name}.so")


def config_yaml(scratch: pathlib.Path, service_extra: str = "", pools_extra: str = "") -> str:
    """The service section (plus `service_extra`, YAML lines indented by two) and the pools
    every test uses, one per example plugin (plus `pools_extra`, list items indented by
    two)."""
    return f"""\
service:
  socket: {{path: {scratch / "poold.sock"}, mode: "0666"}}
  state_dir: {scratch / "state"}
  http: {{listen: 127.0.0.1:0}}
  log: {{level: info}}
  shutdown_timeout: 0s
  allow:
    - {{user: {READ_UID}, rights: read}}
{service_extra}pools:
  - name: echo
    plugin: {plugin("echo")}
    workers: {{min: 1, max: 4, initial: 2}}
    limits: {{max_payload: 64KiB}}
  - name: fail
    plugin: {plugin("fail")}
    workers: {{initial: 1}}
  - name: flaky
    plugin: {plugin("flaky")}
    workers: {{initial: 1}}
    retry: {{base: 1ms, max: 10ms}}
  - name: sleep
    plugin: {plugin("sleep")}
    workers: {{min: 1, max: 4, initial: 2}}
  - name: progress
    plugin: {plugin("progress")}
    workers: {{initial: 1}}
{pools_extra}"""


class PooldServer:
    """poold on a scratch directory; stop() (or the context manager) ends it with SIGTERM,
    then SIGKILL if it does not exit in PATIENCE seconds, and removes the directory."""

    def __init__(self, service_extra: str = "", pools_extra: str = ""):
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="sandpool-py-"))
        # Searchable by the uids of the rights tests (mkdtemp makes it 0700).
        os.chmod(self.dir, 0o755)
        self.socket = str(self.dir / "poold.sock")
        self._config = self.dir / "poold.yaml"
        self._config.write_text(config_yaml(self.dir, service_extra, pools_extra))
        self._changed = threading.Condition()
        self._start()

    def _start(self) -> None:
        """Starts poold on the config and waits for its "poold ready" line; output() and
        wait_for_output() then read this process's log."""
        with self._changed:
            self._lines: list[str] = []
            self._eof = False
        self.process = subprocess.Popen([poold_path(), "--config", str(self._config)],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
        self._reader = threading.Thread(target=self._drain, args=(self.process,), daemon=True)
        self._reader.start()
        if not self.wait_for_output("poold ready"):
            log = self.output()
            self.stop()
            raise RuntimeError(f"poold did not get ready; its output:\n{log}")

    def _halt(self) -> None:
        """Ends poold (SIGTERM, then SIGKILL after PATIENCE seconds) and reads its log to the
        end."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(PATIENCE)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join()
        self.process.stdout.close()

    def restart(self) -> str:
        """Stops poold as stop() does, keeping its directory, and starts it again on the same
        config, socket and state dir. Returns the stopped process's whole output."""
        self._halt()
        log = self.output()
        self._start()
        return log

    def _drain(self, process: subprocess.Popen) -> None:
        for raw in process.stdout:
            with self._changed:
                self._lines.append(raw.decode(errors="replace"))
                self._changed.notify_all()
        with self._changed:
            self._eof = True
            self._changed.notify_all()

    @property
    def config(self) -> str:
        """The text of poold's config file."""
        return self._config.read_text()

    def write_config(self, text: str) -> None:
        """Replaces poold's config file (what a `reload` reads next)."""
        self._config.write_text(text)

    def output(self) -> str:
        with self._changed:
            return "".join(self._lines)

    def wait_for_output(self, text: str) -> bool:
        """Returns true iff poold's output contains `text` within PATIENCE seconds."""
        with self._changed:
            return self._changed.wait_for(
                lambda: self._eof or any(text in line for line in self._lines),
                PATIENCE) and any(text in line for line in self._lines)

    def stop(self) -> None:
        self._halt()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "PooldServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
