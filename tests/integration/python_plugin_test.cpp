// The python plugin (plugins/python/) on Debian's libpython3.11, through a real Pool under
// the default strict seccomp profile: the handler named in plugin_config, its results, its
// exceptions, sandpool.Retry, the limits, and what the sandbox leaves a Python handler
// (imports, files, processes, threads). The handler modules are written by each test into a
// world-readable directory (the workers may run as another user). Hostile handlers are in
// tests/hostile/python_test.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <sstream>
#include <string>

#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include "public_dir.hpp"
#include "python_init_paths.hpp"
#include "test_support.hpp"

using namespace sandpool;
using namespace std::chrono_literals;
using sandpool::testing::make_pool;
using sandpool::testing::pool_options;
using sandpool::testing::PublicDir;
using sandpool::testing::run;

namespace {

// plugin_config for the handler `handler` ("mod:fn") with `dir` on sys.path; `extra` is
// more JSON members ("\"preload\": [...]").
std::string py_config(const std::string& dir, const std::string& handler = "tasks:handle",
                      const std::string& extra = "") {
  return R"({"handler": ")" + handler + R"(", "path": [")" + dir + "\"]" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

PoolOptions py_pool(const std::string& plugin_config, std::uint32_t workers = 1) {
  PoolOptions o = pool_options("python", workers);
  o.plugin_config_json = plugin_config;
  o.sandbox.init.read_paths = sandpool::testing::python_init_read_paths(plugin_config);
  return o;
}

TaskResult py_run(Pool& pool, std::string payload, std::uint32_t retries = 0) {
  SubmitOptions so;
  so.retries = retries;
  return run(pool, "python", std::move(payload), so);
}

// The examples of plugins/python/examples/.
std::string py_examples() { return std::string(SANDPOOL_SOURCE_DIR) + "/plugins/python/examples"; }

}  // namespace

TEST_CASE("a python handler's return value is the task's result: bytes, str, None, buffers") {
  PublicDir dir;
  dir.write("tasks.py",
            "def handle(payload):\n"
            "    kind, _, data = payload.partition(b'|')\n"
            "    if kind == b'bytes': return data[::-1]\n"
            "    if kind == b'str': return data.decode() + ' \\u00e9'\n"
            "    if kind == b'none': return None\n"
            "    if kind == b'bytearray': return bytearray(data * 2)\n"
            "    if kind == b'memoryview': return memoryview(data)[1:]\n"
            "    if kind == b'len': return str(len(payload))\n"
            "    if kind == b'strided': return memoryview(data)[::2]\n"
            "    return 42\n");
  auto pool = make_pool(py_pool(py_config(dir.path())));
  CHECK(py_run(*pool, "bytes|abc").result == "cba");
  CHECK(py_run(*pool, "str|caf").result == "caf \xc3\xa9");  // str is encoded UTF-8
  const TaskResult none = py_run(*pool, "none|");
  CHECK(none.state == TaskState::kCompleted);
  CHECK(none.result.empty());
  CHECK(py_run(*pool, "bytearray|xy").result == "xyxy");
  CHECK(py_run(*pool, "memoryview|xyz").result == "yz");
  // The payload arrives as bytes, NULs and all.
  CHECK(py_run(*pool, std::string("len|\0\0\n", 7)).result == "7");
  const TaskResult strided = py_run(*pool, "strided|abcd");
  CHECK(strided.state == TaskState::kDeadLettered);
  CHECK(strided.error ==
        "python: the handler returned a memoryview that is not one contiguous buffer: return "
        "bytes(...) of it");
  const TaskResult other = py_run(*pool, "int|");
  CHECK(other.state == TaskState::kDeadLettered);
  CHECK(other.reason == DeadReason::kPermanent);
  CHECK(other.error ==
        "python: the handler returned an object of type int (expected bytes, bytearray, "
        "memoryview, str or None)");
}

TEST_CASE("a python handler's exception is the task's permanent error, with its file and line") {
  PublicDir dir;
  dir.write("tasks.py",
            "import json\n"
            "def parse(payload):\n"
            "    return json.loads(payload)\n"
            "def handle(payload):\n"
            "    if payload == b'value':\n"
            "        raise ValueError('bad input')\n"
            "    if payload == b'bare':\n"
            "        raise KeyError\n"
            "    if payload == b'exit':\n"
            "        raise SystemExit(3)\n"
            "    if payload == b'interrupt':\n"
            "        raise KeyboardInterrupt()\n"
            "    return parse(payload)\n");
  auto pool = make_pool(py_pool(py_config(dir.path())));
  // FILE stands for this run's tasks.py.
  const auto [payload, error_template] = GENERATE(table<std::string, std::string>({
      {"value", "ValueError: bad input (at FILE:6, in handle)"},
      {"bare", "KeyError (at FILE:8, in handle)"},
      // SystemExit and KeyboardInterrupt end the task, not the worker.
      {"exit", "SystemExit: 3 (at FILE:10, in handle)"},
      {"interrupt", "KeyboardInterrupt (at FILE:12, in handle)"},
      // Raised inside the standard library: the innermost frame of a real file is json's.
      {"{",
       "JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 "
       "(char 1) (at /usr/lib/python3.11/json/decoder.py:353, in raw_decode)"},
  }));
  std::string error = error_template;
  if (const std::size_t at = error.find("FILE"); at != std::string::npos) {
    error.replace(at, 4, dir.path() + "/tasks.py");
  }
  const TaskResult r = py_run(*pool, payload);
  CHECK(r.state == TaskState::kDeadLettered);
  CHECK(r.reason == DeadReason::kPermanent);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kFailed);
  CHECK(r.error == error);
  CHECK(pool->stats().restarts == 0);
}

TEST_CASE("sandpool.Retry asks for a retry: the task completes on a later attempt") {
  PublicDir dir;
  dir.write("tasks.py",
            "import sandpool\n"
            "def handle(payload):\n"
            "    if sandpool.attempt() < int(payload):\n"
            "        raise sandpool.Retry(f'not yet ({sandpool.attempt()})')\n"
            "    return f'done on attempt {sandpool.attempt()} of task {sandpool.task_id()}'\n");
  auto pool = make_pool(py_pool(py_config(dir.path())));
  const TaskResult r = py_run(*pool, "3", 5);
  CHECK(r.state == TaskState::kCompleted);
  CHECK(r.result == "done on attempt 3 of task " + std::to_string(r.id));
  REQUIRE(r.attempts() == 3);
  CHECK(r.history[0].outcome == Outcome::kError);
  CHECK(r.history[0].error == "Retry: not yet (1) (at " + dir.path() + "/tasks.py:4, in handle)");
  CHECK(r.history[1].outcome == Outcome::kError);
  // Retries exhausted: dead-lettered with every attempt's error.
  const TaskResult out = py_run(*pool, "9", 1);
  CHECK(out.state == TaskState::kDeadLettered);
  CHECK(out.reason == DeadReason::kRetriesExhausted);
  REQUIRE(out.attempts() == 2);
  CHECK(out.history[1].error.rfind("Retry: not yet (2)", 0) == 0);
}

TEST_CASE("a python handler out of memory is resource_limit, and its worker serves on") {
  PublicDir dir;
  dir.write("tasks.py",
            "def handle(payload):\n"
            "    if payload == b'huge':\n"
            "        return b'x' * (1 << 40)\n"
            "    if payload == b'grow':\n"
            "        chunks = []\n"
            "        while True:\n"
            "            chunks.append(bytearray(1 << 20))\n"
            "    return b'ok'\n");
  PoolOptions o = py_pool(py_config(dir.path()));
  o.sandbox.limits.address_space = 512ull << 20;
  auto pool = make_pool(o);
  const std::string payload = GENERATE(as<std::string>{}, "huge", "grow");
  const TaskResult r = py_run(*pool, payload);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kResourceLimit);
  CHECK(
      r.error.rfind("python: out of memory, the worker's limits.memory reached: MemoryError (at " +
                        dir.path() + "/tasks.py:",
                    0) == 0);
  CHECK(py_run(*pool, "small").result == "ok");
}

TEST_CASE("a python handler that never returns is stopped by the task's timeout") {
  PublicDir dir;
  dir.write("tasks.py",
            "def handle(payload):\n"
            "    while True:\n"
            "        pass\n");
  auto pool = make_pool(py_pool(py_config(dir.path())));
  SubmitOptions so;
  so.retries = 0;
  so.timeout = 1s;
  const TaskResult r = run(*pool, "python", "x", so);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kTimedOut);
  CHECK(r.state == TaskState::kDeadLettered);
}

TEST_CASE("under strict, a module not imported at init is refused with a clear error") {
  PublicDir dir;
  dir.write("tasks.py",
            "def handle(payload):\n"
            "    return __import__(payload.decode()).__name__\n");
  dir.write("helper.py", "X = 1\n");
  auto pool = make_pool(py_pool(py_config(dir.path(), "tasks:handle", R"("preload": ["csv"])")));
  // Imported at init (a preload, the handler's own module), or built into libpython.
  for (const std::string loaded : {"csv", "tasks", "xxsubtype"}) {
    const TaskResult ok = py_run(*pool, loaded);
    INFO(ok.error);
    CHECK(ok.result == loaded);
  }
  // Anything else would need a file: refused before any syscall, the worker unharmed.
  const std::string name = GENERATE(as<std::string>{}, "helper", "decimal", "sqlite3");
  const TaskResult r = py_run(*pool, name);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kFailed);
  CHECK(r.error.rfind("ModuleNotFoundError: python: import of '" + name +
                          "' refused: modules are imported at init only (list it in "
                          "plugin_config.preload; the worker reads no file after init under the "
                          "strict profile) (at " +
                          dir.path() + "/tasks.py:2, in handle)",
                      0) == 0);
  CHECK(pool->stats().restarts == 0);
}

TEST_CASE("a python handler's files, processes, threads and sockets are sandbox violations") {
  PublicDir dir;
  dir.write(
      "tasks.py",
      "import os, socket, subprocess, threading\n"
      "def handle(payload):\n"
      "    what = payload.decode()\n"
      "    if what == 'open': return open('/etc/hostname', 'rb').read()\n"
      "    if what == 'fork': return str(os.fork())\n"
      "    if what == 'subprocess': return subprocess.run(['id'], capture_output=True).stdout\n"
      "    if what == 'thread':\n"
      "        t = threading.Thread(target=print)\n"
      "        t.start()\n"
      "        t.join()\n"
      "        return b'joined'\n"
      "    if what == 'socket': return str(socket.socket())\n"
      "    if what == 'listdir': return str(os.listdir('/'))\n");
  auto pool = make_pool(py_pool(py_config(dir.path())));
  const auto [what, syscall] = GENERATE(table<std::string, std::string>({
      {"open", "openat"},
      {"fork", "clone"},
      {"subprocess", "pipe2"},
      // glibc's first thread installs its signal handlers before it clones.
      {"thread", "rt_sigaction"},
      {"socket", "socket"},
      {"listdir", "openat"},
  }));
  INFO(what);
  const TaskResult r = py_run(*pool, what);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kSandboxViolation);
  CHECK(r.history[0].error == "sandbox_violation: " + syscall);
}

TEST_CASE("a python handler's module state lives as long as its worker") {
  PublicDir dir;
  dir.write("tasks.py",
            "seen = []\n"
            "def handle(payload):\n"
            "    seen.append(payload)\n"
            "    return b','.join(seen)\n");
  auto pool = make_pool(py_pool(py_config(dir.path())));
  CHECK(py_run(*pool, "a").result == "a");
  CHECK(py_run(*pool, "b").result == "a,b");
}

TEST_CASE("sandpool.log and sandpool.progress reach the manager's log and the submitter") {
  PublicDir dir;
  dir.write("tasks.py",
            "import sandpool\n"
            "sandpool.log('imported at init')\n"
            "def handle(payload):\n"
            "    sandpool.log('handling ' + payload.decode(), 2)\n"
            "    print('printed', payload.decode())\n"
            "    sandpool.heartbeat()\n"
            "    for i in range(3):\n"
            "        sandpool.progress(f'step {i}')\n"
            "    return str(sandpool.cancelled())\n");
  std::ostringstream log;
  PoolOptions o = py_pool(py_config(dir.path()));
  o.logger = std::make_shared<spdlog::logger>(
      "python", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  auto pool = make_pool(o);
  std::string last_progress;
  SubmitOptions so;
  so.retries = 0;
  so.on_progress = [&](std::uint64_t, std::string_view p) { last_progress = std::string(p); };
  const TaskResult r = run(*pool, "python", "t1", so);
  CHECK(r.result == "False");
  CHECK(last_progress == "step 2");
  pool->close();
  INFO(log.str());
  CHECK(log.str().find("imported at init") != std::string::npos);
  CHECK(log.str().find("handling t1") != std::string::npos);
  CHECK(log.str().find("printed t1") != std::string::npos);
}

TEST_CASE("the python examples run under strict: a JSON task body, and OpenSSL and zlib") {
  SECTION("orders.py: JSON in, JSON out, errors and retries") {
    auto pool = make_pool(py_pool(py_config(py_examples(), "orders:handle")));
    CHECK(py_run(*pool, R"({"id": "A17", "items": [{"sku": "x", "price": 2.5, "qty": 2},)"
                        R"( {"sku": "y", "price": 0.1, "qty": 3}]})")
              .result == R"({"id": "A17", "items": 2, "total": 5.3})");
    const TaskResult empty = py_run(*pool, R"({"id": "B2", "items": []})");
    CHECK(empty.error ==
          "ValueError: order B2 has no items (at " + py_examples() + "/orders.py:22, in handle)");
    const TaskResult flaky =
        py_run(*pool, R"({"id": "C3", "flaky": 1, "items": [{"price": 1, "qty": 1}]})", 2);
    CHECK(flaky.result == R"({"id": "C3", "items": 1, "total": 1})");
    CHECK(flaky.attempts() == 2);
  }
  SECTION("digest.py: hashlib (OpenSSL) and zlib") {
    auto pool = make_pool(py_pool(py_config(py_examples(), "digest:handle")));
    CHECK(py_run(*pool, "abc").result ==
          "sha256 ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n"
          "blake2b cf4ab791c62b8d2b2109c90275287816\n"
          "crc32 352441c2\n"
          "deflated 11");
  }
}

TEST_CASE("a python pool whose plugin_config or module is wrong does not start, and says why") {
  PublicDir dir;
  dir.write("broken.py", "def handle(payload):\n    return (\n");
  dir.write("raises.py", "raise RuntimeError('no database')\n");
  dir.write("notfn.py", "handle = 3\n");
  const auto [handler, extra, says] = GENERATE(table<std::string, std::string, std::string>({
      {"tasks", "", "python: plugin_config: handler: expected \"module:function\""},
      {"tasks:handle", R"("paht": [])", "python: plugin_config: paht: unknown key"},
      {"tasks:handle", R"("preload": ["no such"])",
       "python: plugin_config: preload: \"no such\" is not a module name"},
      {"missing:handle", "",
       "python: plugin_config.handler: cannot import 'missing': ModuleNotFoundError: No module "
       "named 'missing'"},
      {"broken:handle", "",
       "python: plugin_config.handler: cannot import 'broken': SyntaxError: '(' was never closed"},
      {"raises:handle", "",
       "python: plugin_config.handler: cannot import 'raises': RuntimeError: no database (at "},
      {"notfn:handle", "",
       "python: plugin_config.handler: notfn.handle is an object of type int, not callable"},
      {"notfn:other", "", "python: plugin_config.handler: module 'notfn' has no 'other'"},
  }));
  std::ostringstream log;
  PoolOptions o = py_pool(py_config(dir.path(), handler, extra));
  o.max_init_failures = 1;
  o.logger = std::make_shared<spdlog::logger>(
      "python", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  auto pool = Pool::create(o);
  REQUIRE_FALSE(pool);
  CHECK(pool.status().message().find("init failed") != std::string::npos);
  INFO(log.str());
  CHECK(log.str().find(says) != std::string::npos);
}

// The table of docs/plugin-guide.md ("python", "The standard library under strict"): each
// module imported at init (preload), then used in handle under the default strict profile.
TEST_CASE("the standard library under strict: computing works, the outside world does not") {
  PublicDir dir;
  dir.write("stdlib_probe.py",
            "import sys, zoneinfo\n"
            "zoneinfo.ZoneInfo('Europe/Paris')  # read at init, cached\n"
            "def handle(payload):\n"
            "    m = sys.modules\n"
            "    return str(eval(payload.decode(), {'m': m}))\n");
  PoolOptions o = py_pool(py_config(
      dir.path(), "stdlib_probe:handle",
      R"("preload": ["json", "re", "hashlib", "hmac", "zlib", "bz2", "lzma", "gzip", "base64",
                     "struct", "datetime", "_strptime", "random", "secrets", "uuid", "decimal",
                     "fractions", "statistics", "csv", "pickle", "xml.etree.ElementTree",
                     "unicodedata", "sqlite3", "encodings.idna", "encodings.punycode", "threading",
                     "socket", "subprocess", "asyncio", "ssl", "tempfile", "ctypes",
                     "urllib.parse", "email.message", "email.parser", "multiprocessing",
                     "concurrent.futures", "mmap"])"));
  o.sandbox.init.read_paths.emplace_back("/usr/share/zoneinfo");  // ZoneInfo reads it at init
  auto pool = make_pool(o);
  const auto [code, result] = GENERATE(table<std::string, std::string>({
      {"m['json'].dumps(m['json'].loads('[1, 2.5]'))", "[1, 2.5]"},
      {"m['re'].sub(r'(\\w+)@', r'\\1 at ', 'bob@x')", "bob at x"},
      {"m['hashlib'].sha256(b'abc').hexdigest()[:16]", "ba7816bf8f01cfea"},
      {"m['hashlib'].md5(b'abc').hexdigest()[:8] + m['hashlib'].sha3_256(b'').hexdigest()[:8]",
       "90015098a7ffc6f8"},
      {"m['hmac'].new(b'k', b'm', 'sha256').hexdigest()[:8]", "b60090e3"},
      {"len(m['zlib'].decompress(m['zlib'].compress(b'x' * 999)))", "999"},
      {"len(m['bz2'].decompress(m['bz2'].compress(b'x' * 999)))", "999"},
      {"len(m['lzma'].decompress(m['lzma'].compress(b'x' * 999)))", "999"},
      {"len(m['gzip'].decompress(m['gzip'].compress(b'x' * 999)))", "999"},
      {"m['base64'].b64encode(b'abc')", "b'YWJj'"},
      {"m['struct'].unpack('<I', b'\\x07\\0\\0\\0')[0]", "7"},
      {"m['datetime'].datetime(2020, 1, 1).strftime('%A %B')", "Wednesday January"},
      {"m['datetime'].datetime.strptime('2020-01-02', '%Y-%m-%d').day", "2"},
      {"0 <= m['random'].random() < 1", "True"},
      {"len(m['secrets'].token_hex(8)) + len(str(m['uuid'].uuid4()))", "52"},
      {"m['decimal'].Decimal('1.1') + m['decimal'].Decimal('2.2')", "3.3"},
      {"m['fractions'].Fraction(1, 3) * 3 + m['statistics'].mean([1, 2, 3])", "3"},
      {"list(m['csv'].reader(['a,b']))", "[['a', 'b']]"},
      {"m['pickle'].loads(m['pickle'].dumps({'a': 1}))", "{'a': 1}"},
      {"m['xml.etree.ElementTree'].fromstring('<a><b>x</b></a>').find('b').text", "x"},
      {"m['unicodedata'].name('\\u00e9')", "LATIN SMALL LETTER E WITH ACUTE"},
      {"m['sqlite3'].connect(':memory:').execute('select 1 + 1').fetchone()", "(2,)"},
      {"'b\\u00fccher.de'.encode('idna')", "b'xn--bcher-kva.de'"},
      {"m['urllib.parse'].urlparse('http://x/y?z=1').query", "z=1"},
      {"m['email.parser'].Parser().parsestr('Subject: hi\\n\\nbody')['Subject']", "hi"},
      {"m['ctypes'].c_int(5).value", "5"},
      {"len(m['mmap'].mmap(-1, 4096))", "4096"},
      {"m['zoneinfo'].ZoneInfo('Europe/Paris').utcoffset(m['datetime'].datetime(2020, 7, 1))",
       "2:00:00"},
  }));
  INFO(code);
  const TaskResult r = py_run(*pool, code);
  INFO(r.error);
  CHECK(r.state == TaskState::kCompleted);
  CHECK(r.result == result);
}

TEST_CASE("the standard library under strict: files, threads, processes and sockets stop") {
  PublicDir dir;
  dir.write("stdlib_probe.py",
            "import sys\n"
            "def handle(payload):\n"
            "    m = sys.modules\n"
            "    return str(eval(payload.decode(), {'m': m}))\n");
  auto pool = make_pool(py_pool(py_config(
      dir.path(), "stdlib_probe:handle",
      R"("preload": ["zoneinfo", "threading", "concurrent.futures", "concurrent.futures.thread",
                     "socket", "subprocess",
                     "asyncio", "ssl", "tempfile", "multiprocessing"])")));
  const auto [code, syscall] = GENERATE(table<std::string, std::string>({
      {"m['zoneinfo'].ZoneInfo('Europe/Paris')", "openat"},  // tzdata files
      {"m['threading'].Thread(target=print).start()", "rt_sigaction"},
      {"m['concurrent.futures'].ThreadPoolExecutor(1).submit(int).result()", "rt_sigaction"},
      {"m['socket'].socket()", "socket"},
      {"m['subprocess'].run(['true'])", "pipe2"},
      {"m['asyncio'].run(m['asyncio'].sleep(0))", "epoll_create1"},
      {"m['ssl'].create_default_context()", "openat"},  // the CA certificates
      {"m['tempfile'].TemporaryFile()", "getcwd"},
      {"open('/etc/hostname').read()", "openat"},
  }));
  INFO(code);
  const TaskResult r = py_run(*pool, code);
  REQUIRE(r.attempts() == 1);
  CHECK(r.history[0].outcome == Outcome::kSandboxViolation);
  CHECK(r.history[0].error == "sandbox_violation: " + syscall);
}

TEST_CASE(
    "under relaxed with ioctl, threads run, and files in readonly_paths are read and imported") {
  PublicDir dir;
  dir.write("relaxed_probe.py",
            "import sys, threading, zoneinfo\n"
            "def handle(payload):\n"
            "    m = sys.modules\n"
            "    return str(eval(payload.decode(), {'m': m, 'threading': threading, "
            "'zoneinfo': zoneinfo}))\n");
  PoolOptions o = py_pool(py_config(dir.path(), "relaxed_probe:handle", R"("late_imports": true)"));
  o.sandbox.profile = sandbox::SeccompProfile::kRelaxed;
  o.sandbox.readonly_paths = {"/usr/lib/python3.11", "/usr/share/zoneinfo"};
  // Python's open() asks isatty() of every file it opens (to choose its buffering).
  o.sandbox.allow_syscalls = {"ioctl"};
  auto pool = make_pool(o);
  const auto [code, result] = GENERATE(table<std::string, std::string>({
      {"(lambda t: (t.start(), t.join(), 'joined')[2])(threading.Thread(target=int))", "joined"},
      {"zoneinfo.ZoneInfo('Europe/Paris').key", "Europe/Paris"},
      // late_imports: the path finder reads /usr/lib/python3.11 after init.
      {"__import__('decimal').Decimal('0.1') * 3", "0.3"},
      {"__import__('fractions').Fraction(6, 4)", "3/2"},
  }));
  INFO(code);
  const TaskResult r = py_run(*pool, code);
  INFO(r.error);
  CHECK(r.state == TaskState::kCompleted);
  CHECK(r.result == result);
}

TEST_CASE("python modules given in plugin_config import each other, and name their lines") {
  const std::string config =
      R"({"handler": "a_tasks:handle", "modules": {)"
      R"("a_tasks": "import b_helpers\ndef handle(payload):\n    return b_helpers.shout(payload)\n",)"
      R"("b_helpers": "def shout(p):\n    if not p:\n        raise ValueError('nothing to shout')\n)"
      R"(    return p.upper() + b'!'\n"}})";
  auto pool = make_pool(py_pool(config));
  CHECK(py_run(*pool, "hey").result == "HEY!");
  const TaskResult r = py_run(*pool, "");
  CHECK(r.error == "ValueError: nothing to shout (at plugin_config.modules.b_helpers:3, in shout)");
  // Not imported at init, yet importable after it: no file is read.
  PublicDir dir;
  dir.write("late_tasks.py",
            "def handle(payload):\n"
            "    return __import__(payload.decode()).VALUE\n");
  auto late = make_pool(py_pool(R"({"handler": "late_tasks:handle", "path": [")" + dir.path() +
                                R"("], "modules": {"c_late": "VALUE = 'made after init'\n"}})"));
  CHECK(py_run(*late, "c_late").result == "made after init");
}
