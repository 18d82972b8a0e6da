// grouped_linear: the products of many linears spread over the threads, whole (cpu::gemm's
// WholeProductScope), in one parallel region per direction.
#include "mixprec/ops/grouped_linear.h"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <optional>
#include <utility>

#include "linear_product.h"
#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/function.h"
#include "mixprec/cpu/gemm.h"
#include "mixprec/cpu/reduce_to_shape.h"
#include "mixprec/parallel.h"

namespace mixprec {
namespace {

using detail::LinearProduct;

struct Task {
  double work;  // multiply-adds
  std::function<void()> run;
};

// Runs every task once, each whole on one thread: the heaviest first, each onto the thread
// with the least work so far (which thread runs a task never changes its result).
void run_spread(const std::vector<Task>& tasks) {
  if (tasks.empty()) return;
  const int threads =
      static_cast<int>(std::min<int64_t>(num_threads(), static_cast<int64_t>(tasks.size())));
  std::vector<std::size_t> order(tasks.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return tasks[a].work > tasks[b].work; });
  std::vector<std::vector<std::size_t>> plan(static_cast<std::size_t>(std::max(threads, 1)));
  std::vector<double> load(plan.size(), 0.0);
  for (std::size_t i : order) {
    const auto t =
        static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    plan[t].push_back(i);
    load[t] += tasks[i].work;
  }
  // An exception must not leave the region: the first is kept and rethrown after it.
  std::exception_ptr error;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const cpu::WholeProductScope whole;
    // The team may be smaller than asked (a nested region): its threads share the plan.
    for (auto t = static_cast<std::size_t>(omp_get_thread_num()); t < plan.size();
         t += static_cast<std::size_t>(omp_get_num_threads()))
      for (std::size_t i : plan[t]) {
        try {
          tasks[i].run();
        } catch (...) {
#pragma omp critical(mixprec_grouped_linear_error)
          if (!error) error = std::current_exception();
        }
      }
  }
  if (error) std::rethrow_exception(error);
}

double product_work(int64_t m, int64_t n, int64_t k) {
  return static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
}

// Inputs in edge order: every group's x, then every weight, then every bias.
class GroupedLinearBackward final : public Node {
 public:
  explicit GroupedLinearBackward(std::vector<LinearProduct> groups) : groups_(std::move(groups)) {
    for (LinearProduct& p : groups_) p.b = Tensor();
    num_outputs_ = static_cast<int>(groups_.size());
  }
  const char* name() const override { return "GroupedLinearBackward"; }
  void release_saved() override {
    for (LinearProduct& p : groups_) p.x2 = p.w = Tensor();
  }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const std::size_t n = groups_.size();
    const auto& edges = next_edges();
    std::vector<Tensor> out(3 * n), operands(n);
    std::vector<Task> tasks;
    // Everything that allocates or converts happens here, on this thread; the tasks only
    // run products into tensors made for them.
    for (std::size_t g = 0; g < n; ++g) {
      if (!grads[g].defined()) continue;
      const LinearProduct& p = groups_[g];
      const Tensor rows = p.grad_rows(grads[g]);
      operands[g] = p.grad_operand(rows);
      if (edges[g].node) {  // dX = dY · W
        out[g] = Tensor::empty({p.rows, p.in}, p.x_dtype);
        tasks.push_back({product_work(p.rows, p.in, p.out),
                         [&, g] { groups_[g].grad_x(operands[g], out[g]); }});
      }
      if (edges[n + g].node) {  // dW = dYᵀ · X, in f32
        out[n + g] = Tensor::empty({p.out, p.in}, p.grad_w_dtype());
        tasks.push_back({product_work(p.out, p.in, p.rows),
                         [&, g] { groups_[g].grad_w(operands[g], out[n + g]); }});
      }
      // db = column sums of dY (f32), a pass of its own over the threads.
      if (edges[2 * n + g].node)
        out[2 * n + g] = cpu::reduce_to_shape(rows, {p.out},
                                              rows.dtype() == DType::f64 ? DType::f64 : DType::f32);
    }
    run_spread(tasks);
    for (std::size_t g = 0; g < n; ++g)
      if (out[g].defined()) out[g] = out[g].view(groups_[g].x_shape);
    return out;
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
    ys[g] = Tensor::empty({p.rows, p.out}, p.x_dtype);
    tasks.push_back({product_work(p.rows, p.out, p.in), [&, g] { groups[g].forward(ys[g]); }});
  }
  run_spread(tasks);
  for (std::size_t g = 0; g < n; ++g) ys[g] = ys[g].view(groups[g].y_shape());
  if (any_requires_grad(inputs)) {
    auto node = std::make_shared<GroupedLinearBackward>(std::move(groups));
    connect(*node, inputs);
    for (std::size_t g = 0; g < n; ++g) set_history(ys[g], node, static_cast<int>(g));
  }
  return ys;
}

}  // namespace mixprec
