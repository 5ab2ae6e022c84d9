// How many tasks each tenant has waiting in a pool (queued, scheduled or in a backlog: the
// tasks its admission counts), for queue.max_per_tenant and tenants.max_tenants. Submitting
// threads check and count (admit); the loop thread counts a task again when it goes back to
// waiting and releases it when it is dispatched or ends. A task is counted iff its
// TaskRecord::tenant_counted is set (a named tenant, or any task when max_per_tenant is
// set), so a pool without tenants or per-tenant bounds never takes the lock.
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <sandpool/base/status.hpp>
#include <sandpool/base/thread_annotations.hpp>

namespace sandpool::core {

class TenantCounts {
 public:
  // Counts one more waiting task of `tenant`. Returns kQueueFull, naming the tenant, iff it
  // has max_per_tenant waiting already (0: no bound), or it is a named tenant with none
  // waiting while max_tenants named tenants have some (0: no bound); nothing is counted then.
  Status admit(const std::string& tenant, std::size_t max_per_tenant, std::size_t max_tenants,
               const std::string& pool);
  // Counts one more, unconditionally (a task accepted earlier waits again).
  void add(const std::string& tenant);
  void release(const std::string& tenant);
  // Tasks `tenant` has waiting.
  std::size_t waiting(const std::string& tenant) const;
  // Named tenants with tasks waiting.
  std::size_t tenants() const;
  // The `limit` tenants with the most tasks waiting, most first (ties: by name); "" is the
  // default tenant, counted only when max_per_tenant is set. O(tenants) under the lock.
  std::vector<std::pair<std::string, std::uint64_t>> largest(std::size_t limit) const;

 private:
  mutable Mutex mu_;
  std::unordered_map<std::string, std::size_t> waiting_ GUARDED_BY(mu_);  // no zero entries
  std::size_t named_ GUARDED_BY(mu_) = 0;
};

}  // namespace sandpool::core
