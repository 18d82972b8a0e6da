// The FP8 collection: one process-wide table of named tensor statistics behind a mutex, and
// the count of linears prepared, which orders the casts (fp8_monitor.h).
#include "mixprec/amp/fp8_monitor.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <limits>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "mixprec/amp/autocast.h"
#include "mixprec/core/error.h"

namespace mixprec::amp {
namespace {

// (linears prepared when the cast ran, 0 forward / 1 backward, the linear's place (backward:
// negated, as the engine runs the newest first), product, operand): ascending = execution
// order, the same whatever thread ran the cast.
using OrderKey = std::array<int64_t, 5>;
constexpr OrderKey kNever = {std::numeric_limits<int64_t>::max(), 0, 0, 0, 0};

struct Entry {
  Fp8TensorRecord record;
  OrderKey first = kNever, first_nonfinite = kNever, first_saturated = kNever;
};

std::atomic<bool> g_collecting{false};
std::atomic<int64_t> g_prepared{0};
std::atomic<uint64_t> g_collection{0};
std::mutex g_mutex;
std::map<std::string, Entry> g_entries;  // guarded by g_mutex

constexpr const char* kProductNames[] = {"fwd", "dgrad", "wgrad"};
constexpr const char* kOperandNames[3][2] = {
    {"input", "weight"}, {"grad_output", "weight"}, {"grad_output", "input"}};

}  // namespace

Fp8Site fp8_site_here() {
  if (!g_collecting.load(std::memory_order_relaxed)) return {};
  return {std::string(module_path()), g_prepared.fetch_add(1) + 1, g_collection.load()};
}

bool fp8_collecting() {
  return g_collecting.load(std::memory_order_relaxed);
}

void record_fp8_operand(const Fp8Site& site, Fp8Product product, int operand, const Tensor& source,
                        const backend::Quantized& q) {
  if (!g_collecting.load(std::memory_order_relaxed) || site.prepared == 0 ||
      site.collection != g_collection.load())
    return;
  const auto p = static_cast<std::size_t>(product);
  MIXPREC_CHECK(p < 3 && (operand == 0 || operand == 1), "record_fp8_operand",
                "product " + std::to_string(p) + ", operand " + std::to_string(operand) +
                    ": expected products 0-2 and operands 0-1");
  const Fp8TensorStats stats = fp8_tensor_stats(source, q);  // outside the lock
  const bool backward = product != Fp8Product::fwd;
  const OrderKey key = {g_prepared.load(), backward ? 1 : 0,
                        backward ? -site.prepared : site.prepared, static_cast<int64_t>(p),
                        operand};
  std::string name = (site.module.empty() ? std::string("(top level)") : site.module) + " " +
                     kProductNames[p] + "." + kOperandNames[p][operand];
  const std::lock_guard<std::mutex> lock(g_mutex);
  Entry& e = g_entries[name];
  if (e.record.name.empty()) {
    e.record.name = std::move(name);
    e.record.spec = backend::describe(q.spec);
  }
  e.record.stats.merge(stats);
  e.first = std::min(e.first, key);
  if (stats.nonfinite > 0) e.first_nonfinite = std::min(e.first_nonfinite, key);
  if (stats.saturated > 0) e.first_saturated = std::min(e.first_saturated, key);
}

Fp8TensorStats Fp8StepStats::total() const {
  Fp8TensorStats t;
  for (const Fp8TensorRecord& r : tensors) t.merge(r.stats);
  return t;
}

Fp8Collection::Fp8Collection() {
  const std::lock_guard<std::mutex> lock(g_mutex);
  MIXPREC_CHECK(!g_collecting.load(), "Fp8Collection",
                "an FP8 collection is already running: at most one at a time");
  g_entries.clear();
  g_prepared = 0;
  ++g_collection;
  g_collecting = true;
}

Fp8Collection::~Fp8Collection() {
  const std::lock_guard<std::mutex> lock(g_mutex);
  g_collecting = false;
  g_entries.clear();
}

Fp8StepStats Fp8Collection::stats() const {
  const std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<const Entry*> order;
  for (const auto& [name, e] : g_entries) order.push_back(&e);
  std::sort(order.begin(), order.end(),
            [](const Entry* a, const Entry* b) { return a->first < b->first; });
  Fp8StepStats out;
  OrderKey nonfinite = kNever, saturated = kNever;
  for (const Entry* e : order) {
    const auto i = static_cast<int64_t>(out.tensors.size());
    if (e->first_nonfinite < nonfinite) nonfinite = e->first_nonfinite, out.first_nonfinite = i;
    if (e->first_saturated < saturated) saturated = e->first_saturated, out.first_saturated = i;
    out.tensors.push_back(e->record);
  }
  return out;
}

std::string describe_fp8_tensor(const Fp8TensorRecord& r) {
  const Fp8TensorStats& s = r.stats;
  const std::string scales = s.scales == 0 ? "no scales"
                             : s.scale_min == s.scale_max
                                 ? fmt::format("scale {:.6g}", s.scale_min)
                                 : fmt::format("scales {:.6g} to {:.6g}", s.scale_min, s.scale_max);
  return fmt::format(
      "{} of {} elements inf or NaN, {} saturated, {} flushed to zero (amax of the finite ones "
      "{:.6g}; {}; {})",
      s.nonfinite, s.numel, s.saturated, s.flushed, s.amax, scales, r.spec);
}

}  // namespace mixprec::amp
