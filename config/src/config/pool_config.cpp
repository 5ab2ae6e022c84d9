#include <sandpool/config/config.hpp>

namespace sandpool {

PoolConfig::PoolConfig() {
  name.clear();
  sandbox.namespaces.wanted = sandbox::NamespaceSet::all();
}

PoolOptions to_pool_options(const PoolConfig& pool) {
  PoolOptions o;
  o.identity() = pool;
  o.worker_spec() = pool;
  o.live() = pool;
  return o;
}

std::string_view to_string(LogLevel l) {
  switch (l) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
    case LogLevel::kCritical:
      return "critical";
    case LogLevel::kOff:
      return "off";
  }
  return "info";
}

std::string_view to_string(LogFormat f) { return f == LogFormat::kJson ? "json" : "text"; }

}  // namespace sandpool
