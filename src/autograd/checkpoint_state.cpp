// The registry of thread state a checkpoint's recompute repeats (checkpoint_state.h).
#include "mixprec/autograd/checkpoint_state.h"

#include <algorithm>
#include <mutex>

namespace mixprec {
namespace {

// Filled at static initialisation and read by every checkpoint: a lock keeps a late
// registration (a library loaded afterwards) from racing a reader.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::vector<StateCapture>& registry() {
  static std::vector<StateCapture> captures;
  return captures;
}

}  // namespace

void register_checkpoint_state(StateCapture capture) {
  const std::lock_guard lock(registry_mutex());
  std::vector<StateCapture>& r = registry();
  if (std::find(r.begin(), r.end(), capture) == r.end()) r.push_back(capture);
}

std::vector<StateEntry> capture_checkpoint_state() {
  const std::lock_guard lock(registry_mutex());
  std::vector<StateEntry> state;
  for (StateCapture capture : registry()) state.push_back(capture());
  return state;
}

CheckpointStateScope::CheckpointStateScope(const std::vector<StateEntry>& state) {
  guards_.reserve(state.size());
  for (const StateEntry& enter : state) guards_.push_back(enter());
}

CheckpointStateScope::~CheckpointStateScope() {
  while (!guards_.empty()) guards_.pop_back();
}

}  // namespace mixprec
