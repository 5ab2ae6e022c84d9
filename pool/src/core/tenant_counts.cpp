#include "core/tenant_counts.hpp"

#include <algorithm>

namespace sandpool::core {

namespace {
std::string tenant_name(const std::string& tenant) {
  return tenant.empty() ? std::string("the default tenant") : "tenant '" + tenant + "'";
}
}  // namespace

Status TenantCounts::admit(const std::string& tenant, std::size_t max_per_tenant,
                           std::size_t max_tenants, const std::string& pool) {
  MutexLock lock(mu_);
  auto it = waiting_.find(tenant);
  const std::size_t now = it == waiting_.end() ? 0 : it->second;
  if (max_per_tenant != 0 && now >= max_per_tenant) {
    return Status::error(Code::kQueueFull, "queue_full: " + tenant_name(tenant) + " has " +
                                               std::to_string(now) + " tasks waiting in pool '" +
                                               pool + "' (queue.max_per_tenant)");
  }
  if (now == 0 && !tenant.empty() && max_tenants != 0 && named_ >= max_tenants) {
    return Status::error(Code::kQueueFull, "queue_full: " + tenant_name(tenant) +
                                               " refused: " + std::to_string(named_) +
                                               " tenants have tasks waiting in pool '" + pool +
                                               "' (tenants.max_tenants)");
  }
  if (it == waiting_.end()) {
    waiting_.emplace(tenant, 1);
    if (!tenant.empty()) ++named_;
  } else {
    ++it->second;
  }
  return Status::ok();
}

void TenantCounts::add(const std::string& tenant) {
  MutexLock lock(mu_);
  if (++waiting_[tenant] == 1 && !tenant.empty()) ++named_;
}

void TenantCounts::release(const std::string& tenant) {
  MutexLock lock(mu_);
  auto it = waiting_.find(tenant);
  if (it == waiting_.end()) return;
  if (--it->second == 0) {
    waiting_.erase(it);
    if (!tenant.empty()) --named_;
  }
}

std::size_t TenantCounts::waiting(const std::string& tenant) const {
  MutexLock lock(mu_);
  auto it = waiting_.find(tenant);
  return it == waiting_.end() ? 0 : it->second;
}

std::size_t TenantCounts::tenants() const {
  MutexLock lock(mu_);
  return named_;
}

std::vector<std::pair<std::string, std::uint64_t>> TenantCounts::largest(std::size_t limit) const {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  {
    MutexLock lock(mu_);
    out.assign(waiting_.begin(), waiting_.end());
  }
  const auto most_first = [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  if (out.size() > limit) {
    std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(limit), out.end(),
                      most_first);
    out.resize(limit);
  } else {
    std::sort(out.begin(), out.end(), most_first);
  }
  return out;
}

}  // namespace sandpool::core
