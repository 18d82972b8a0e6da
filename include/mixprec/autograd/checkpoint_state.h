// Thread state a checkpoint's recompute must see as its forward saw it. Grad mode is the
// checkpoint's own business; the rest belongs to layers above autograd (amp: autocast, the
// matmul precision, the module path), which register a capture for it here, so every
// checkpoint repeats it without its caller having to know:
//   capture()  runs when a checkpoint's forward runs and returns how to re-enter that state;
//   enter()    runs before the recompute (in backward, where that state is long gone) and
//              returns a guard whose destruction puts back what it replaced.
#pragma once

#include <functional>
#include <memory>
#include <vector>

namespace mixprec {

using StateGuard = std::shared_ptr<void>;  // restores on destruction (null: nothing to undo)
using StateEntry = std::function<StateGuard()>;
using StateCapture = StateEntry (*)();

// Adds `capture` to every later checkpoint (once: registering it again changes nothing).
void register_checkpoint_state(StateCapture capture);

// Every registered capture, run now (a checkpoint's forward).
std::vector<StateEntry> capture_checkpoint_state();

// Scoped: enters each captured state in order, and restores them in reverse order on exit.
class CheckpointStateScope {
 public:
  explicit CheckpointStateScope(const std::vector<StateEntry>& state);
  ~CheckpointStateScope();
  CheckpointStateScope(const CheckpointStateScope&) = delete;
  CheckpointStateScope& operator=(const CheckpointStateScope&) = delete;

 private:
  std::vector<StateGuard> guards_;
};

}  // namespace mixprec
