// PoolKeys (pool_keys.hpp): a Redis pool's key names, made once.
#include <sandpool/redis/pool_keys.hpp>

#include <utility>

namespace sandpool::redis {

PoolKeys::PoolKeys(std::string prefix_in, std::string pool_in)
    : prefix(std::move(prefix_in)),
      pool(std::move(pool_in)),
      ids(prefix + "ids"),
      later(prefix + pool + ":later"),
      done(prefix + pool + ":done"),
      done_bytes(done + ":bytes"),
      letters(prefix + pool + ":dlq"),
      node_prefix(prefix + "node:") {
  for (const Band b : kBands) streams[index_of(b)] = prefix + pool + ":q:" + std::to_string(b);
}

std::string PoolKeys::schedule_claim_key(const std::string& schedule) const {
  return prefix + "schedule:" + schedule;
}

std::string PoolKeys::rate_key(const std::string& kind, const std::string& name) const {
  return prefix + pool + ":rate:" + kind + (name.empty() ? "" : ":" + name);
}

std::string PoolKeys::cap_key(const std::string& type) const {
  return prefix + pool + ":running:" + type;
}

}  // namespace sandpool::redis
