// Activation checkpointing (checkpoint.h): the node that recomputes its function in backward.
#include "mixprec/autograd/checkpoint.h"

#include <memory>
#include <unordered_set>
#include <utility>

#include "checkpoint_region.h"
#include "mixprec/autograd/checkpoint_state.h"
#include "mixprec/autograd/engine.h"
#include "mixprec/autograd/function.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/core/error.h"

namespace mixprec {
namespace {

constexpr const char* kCheckpoint = "checkpoint";

class GradModeScope {
 public:
  explicit GradModeScope(bool enabled) : previous_(GradMode::is_enabled()) {
    GradMode::set_enabled(enabled);
  }
  ~GradModeScope() { GradMode::set_enabled(previous_); }
  GradModeScope(const GradModeScope&) = delete;
  GradModeScope& operator=(const GradModeScope&) = delete;

 private:
  bool previous_;
};

// Where the recomputed graph ends: the recompute's inputs are this node's outputs, so the
// gradient each input gathers is summed by the engine exactly as it would be at the input's
// own node in a graph never checkpointed, then kept here.
class RecomputeInputs final : public Node {
 public:
  explicit RecomputeInputs(int n) { num_outputs_ = n; }
  const char* name() const override { return "CheckpointInputs"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    grads_ = std::move(grads);
    return {};
  }
  std::vector<Tensor>& grads() { return grads_; }

 private:
  std::vector<Tensor> grads_;
};

// The recomputed outputs as one root: its backward hands each output the gradient the outer
// graph sent the checkpoint for it.
class RecomputeRoot final : public Node {
 public:
  explicit RecomputeRoot(std::vector<Tensor> grads) : grads_(std::move(grads)) {}
  const char* name() const override { return "CheckpointOutputs"; }
  std::vector<Tensor> apply(std::vector<Tensor>&) override { return std::move(grads_); }

 private:
  std::vector<Tensor> grads_;
};

// The leaves' gradient accumulators a graph reaches: an unrecomputed graph would hold them as
// long as it lives (a sharded runtime asks a leaf's accumulator whether the step read it).
std::vector<std::shared_ptr<Node>> accumulators_of(const std::vector<Tensor>& outputs) {
  std::vector<std::shared_ptr<Node>> found;
  std::unordered_set<Node*> seen;
  std::vector<std::shared_ptr<Node>> stack;
  for (const Tensor& t : outputs)
    if (t.defined() && t.grad_fn() && seen.insert(t.grad_fn().get()).second)
      stack.push_back(t.grad_fn());
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    if (n->reusable()) found.push_back(n);
    for (const Edge& e : n->next_edges())
      if (e.node && seen.insert(e.node.get()).second) stack.push_back(e.node);
  }
  return found;
}

class CheckpointBackward final : public Node {
 public:
  CheckpointBackward(CheckpointFn fn, std::vector<Tensor> inputs, SavePolicy policy,
                     std::vector<StateEntry> state, std::vector<detail::KeptOp> kept,
                     int num_outputs)
      : fn_(std::move(fn)),
        inputs_(std::move(inputs)),
        policy_(policy),
        state_(std::move(state)),
        kept_(std::move(kept)) {
    num_outputs_ = num_outputs;
  }
  const char* name() const override { return "CheckpointBackward"; }
  void release_saved() override {
    fn_ = nullptr;
    inputs_.clear();
    kept_.clear();
    state_.clear();
  }

  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const std::size_t n = inputs_.size();
    // The inputs as fresh tensors ending in `ends` (the saved ones carry no history).
    auto ends = std::make_shared<RecomputeInputs>(static_cast<int>(n));
    std::vector<Tensor> inputs(n);
    for (std::size_t i = 0; i < n; ++i) {
      inputs[i] = inputs_[i];
      if (!next_edges()[i].node) continue;
      inputs[i] = inputs_[i].detach();
      set_history(inputs[i], ends, static_cast<int>(i));
    }
    std::vector<Tensor> outputs = recompute(inputs);
    MIXPREC_CHECK(outputs.size() == grads.size(), kCheckpoint,
                  "the recompute returned " + std::to_string(outputs.size()) +
                      " outputs, its forward " + std::to_string(grads.size()));
    // Its backward runs as the outer one does (outside the forward's scopes): one pass from
    // every output that has a gradient.
    auto root_node = std::make_shared<RecomputeRoot>(std::move(grads));
    connect(*root_node, outputs);
    accumulators_ = accumulators_of(outputs);
    Tensor root = Tensor::zeros({});
    set_history(root, root_node);
    outputs.clear();
    run_backward(root);
    std::vector<Tensor> input_grads = std::move(ends->grads());
    input_grads.resize(n);
    return input_grads;
  }

 private:
  std::vector<Tensor> recompute(const std::vector<Tensor>& inputs) {
    detail::CheckpointRegion region(/*recompute=*/true, policy_, &kept_);
    const detail::RegionScope in_region(region);
    const CheckpointStateScope forward_state(state_);
    const GradModeScope grad(true);
    std::vector<Tensor> outputs = fn_(inputs);
    MIXPREC_CHECK(region.next == kept_.size(), kCheckpoint,
                  "the recompute used " + std::to_string(region.next) + " of the " +
                      std::to_string(kept_.size()) +
                      " op outputs its forward kept: the checkpointed function must run the "
                      "same ops on every call");
    return outputs;
  }

  CheckpointFn fn_;
  std::vector<Tensor> inputs_;  // detached: the data only
  SavePolicy policy_;
  std::vector<StateEntry> state_;
  std::vector<detail::KeptOp> kept_;
  std::vector<std::shared_ptr<Node>> accumulators_;  // alive as long as this node
};

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options) {
  if (!GradMode::is_enabled() || detail::current_region()) return fn(inputs);
  std::vector<StateEntry> state = capture_checkpoint_state();
  std::vector<detail::KeptOp> kept;
  std::vector<Tensor> outputs;
  {
    detail::CheckpointRegion region(/*recompute=*/false, options.save, &kept);
    const detail::RegionScope in_region(region);
    const NoGradGuard no_grad;
    outputs = fn(inputs);
  }
  std::vector<Tensor> saved(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined()) saved[i] = inputs[i].detach();
  // Made after fn ran: later than anything fn made, as the last node of fn's own graph.
  auto node =
      std::make_shared<CheckpointBackward>(fn, std::move(saved), options.save, std::move(state),
                                           std::move(kept), static_cast<int>(outputs.size()));
  connect(*node, inputs);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined() || !is_floating(outputs[i].dtype())) continue;
    outputs[i] = outputs[i].detach();
    set_history(outputs[i], node, static_cast<int>(i));
  }
  return outputs;
}

bool checkpoint_recomputing() {
  const detail::CheckpointRegion* r = detail::current_region();
  return r && r->recompute;
}

}  // namespace mixprec
