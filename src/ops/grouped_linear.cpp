// grouped_linear: the products of many linears spread over the threads, whole (the backend gemm's
// WholeProductScope), in one parallel region per direction.
#include "mixprec/ops/grouped_linear.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <optional>
#include <utility>

#include "linear_product.h"
#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"
#include "mixprec/core/parallel.h"
#include "work_spread.h"

namespace mixprec {
namespace {

using detail::LinearProduct;
using detail::product_work;
using detail::run_spread;
using Task = detail::WorkTask;

// Inputs in edge order: every group's x, then every weight, then every bias.
class GroupedLinearBackward final : public Node {
 public:
  explicit GroupedLinearBackward(std::vector<LinearProduct> groups) : groups_(std::move(groups)) {
    num_outputs_ = static_cast<int>(groups_.size());
  }
  const char* name() const override { return "GroupedLinearBackward"; }
  void release_saved() override {
    for (LinearProduct& p : groups_) p.release();
  }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const std::size_t n = groups_.size();
    const auto& edges = next_edges();
    std::vector<LinearProduct::Grads> out(n);
    std::vector<Task> tasks;
    // Everything that allocates or converts happens here, on this thread; the tasks only
    // run products into tensors made for them.
    for (std::size_t g = 0; g < n; ++g) {
      if (!grads[g].defined()) continue;
      const LinearProduct& p = groups_[g];
      out[g] = p.start_backward(grads[g], edges[g].node != nullptr, edges[n + g].node != nullptr,
                                edges[2 * n + g].node != nullptr);
      if (out[g].dx.defined())
        tasks.push_back({product_work(p.rows, p.in, p.out), [&, g] { groups_[g].grad_x(out[g]); }});
      if (out[g].dw.defined())
        tasks.push_back({product_work(p.out, p.in, p.rows), [&, g] { groups_[g].grad_w(out[g]); }});
    }
    run_spread(tasks);
    std::vector<Tensor> result(3 * n);
    for (std::size_t g = 0; g < n; ++g) {
      result[g] = out[g].dx;
      result[n + g] = out[g].dw;
      result[2 * n + g] = out[g].db;
    }
    return result;
  }

 private:
  std::vector<LinearProduct> groups_;
};

}  // namespace

std::vector<Tensor> grouped_linear(const std::vector<Tensor>& xs,
                                   const std::vector<Tensor>& weights,
                                   const std::vector<Tensor>& biases,
                                   const std::vector<std::string>& scopes) {
  const std::size_t n = xs.size();
  MIXPREC_CHECK(weights.size() == n && (biases.empty() || biases.size() == n) &&
                    (scopes.empty() || scopes.size() == n),
                "grouped_linear",
                std::to_string(n) + " inputs need as many weights (got " +
                    std::to_string(weights.size()) + "), biases (got " +
                    std::to_string(biases.size()) + ", or none) and scopes (got " +
                    std::to_string(scopes.size()) + ", or none)");
  std::vector<LinearProduct> groups;
  std::vector<Tensor> inputs(3 * n);  // after autocast: the tensors gradients flow to
  for (std::size_t g = 0; g < n; ++g) {
    std::optional<amp::ModuleScope> scope;
    if (!scopes.empty()) scope.emplace(scopes[g]);
    const Tensor no_bias;
    const auto [x, w, b] =
        amp::autocast_args("linear", xs[g], weights[g], biases.empty() ? no_bias : biases[g]);
    groups.push_back(LinearProduct::prepare("grouped_linear", x, w, b));
    inputs[g] = x;
    inputs[n + g] = w;
    inputs[2 * n + g] = b;
  }
  std::vector<Tensor> ys(n);
  std::vector<Task> tasks;
  for (std::size_t g = 0; g < n; ++g) {
    const LinearProduct& p = groups[g];
    ys[g] = p.make_output();
    tasks.push_back({product_work(p.rows, p.out, p.in), [&, g] { groups[g].forward(ys[g]); }});
  }
  run_spread(tasks);
  if (any_requires_grad(inputs)) {
    auto node = std::make_shared<GroupedLinearBackward>(std::move(groups));
    connect(*node, inputs);
    for (std::size_t g = 0; g < n; ++g) set_history(ys[g], node, static_cast<int>(g));
  }
  return ys;
}

namespace detail {

void run_spread(const std::vector<WorkTask>& tasks) {
  std::vector<double> work;
  for (const WorkTask& t : tasks) work.push_back(t.work);
  const WorkSpread plan = spread_work(work, num_threads());
  for (std::size_t i : plan.shared) tasks[i].run();
  if (plan.queue.empty()) return;
  std::atomic<std::size_t> next{0};
  // An exception must not leave the region: the first is kept and rethrown after it.
  std::exception_ptr error;
#pragma omp parallel num_threads(plan.threads) if (plan.threads > 1)
  {
    const backend::WholeProductScope whole;
    for (std::size_t at = next++; at < plan.queue.size(); at = next++) {
      try {
        tasks[plan.queue[at]].run();
      } catch (...) {
#pragma omp critical(mixprec_grouped_linear_error)
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

WorkSpread spread_work(const std::vector<double>& work, int threads) {
  double total = 0;
  for (double w : work) total += w;
  WorkSpread plan;
  std::vector<std::size_t> rest;
  for (std::size_t i = 0; i < work.size(); ++i)
    (2 * work[i] >= total && total > 0 ? plan.shared : rest).push_back(i);
  if (rest.empty()) return plan;
  std::stable_sort(rest.begin(), rest.end(),
                   [&](std::size_t a, std::size_t b) { return work[a] > work[b]; });
  plan.threads =
      static_cast<int>(std::clamp<int64_t>(threads, 1, static_cast<int64_t>(rest.size())));
  plan.queue = std::move(rest);
  return plan;
}

}  // namespace detail
}  // namespace mixprec
