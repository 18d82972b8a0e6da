// grouped_linear over one stacked weight [G, Out, In]: the vector overload's products (one
// LinearProduct per group, spread by run_spread), each group reading its slice of the stacked
// weight and bias and writing its weight gradient into its slice of one [G, Out, In] tensor.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "linear_product.h"
#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/function.h"
#include "mixprec/ops/grouped_linear.h"
#include "work_spread.h"

namespace mixprec {
namespace {

using detail::LinearProduct;
using detail::product_work;
using detail::WorkTask;

constexpr const char* kOp = "grouped_linear";

// The stacked weight and bias as autocast hands them to some of the groups. Groups whose
// scopes give linear the same cast share one set, and so one gradient edge each: one set
// outside autocast, two when some experts sit in fp32 modules.
struct Operands {
  Tensor weight, bias;
};

// One tensor, not just equal values (autocast returns the input itself, or a cast).
bool same_tensor(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  return a.shares_storage_with(b) && a.autograd_meta() == b.autograd_meta() &&
         a.dtype() == b.dtype() && a.offset() == b.offset() && a.shape() == b.shape();
}

void zero(const Tensor& slice) {
  std::memset(slice.raw_data(), 0, slice.nbytes());  // +0 in every float dtype
}

void check_stacked(const std::vector<Tensor>& xs, const Tensor& weight, const Tensor& bias,
                   const std::vector<std::string>& scopes) {
  MIXPREC_CHECK(weight.defined() && weight.ndim() == 3, kOp,
                "weight must be 3-d [G, Out, In], got " +
                    (weight.defined() ? shape_to_string(weight.shape()) : "undefined"));
  const std::string w = shape_to_string(weight.shape());
  const int64_t groups = weight.size(0), out = weight.size(1), in = weight.size(2);
  MIXPREC_CHECK(static_cast<int64_t>(xs.size()) == groups, kOp,
                "weight " + w + " stacks " + std::to_string(groups) + " groups but xs holds " +
                    std::to_string(xs.size()));
  MIXPREC_CHECK(!bias.defined() || bias.shape() == Shape({groups, out}), kOp,
                "bias must be [G, Out] = " + shape_to_string({groups, out}) + " for weight " + w +
                    ", got " + (bias.defined() ? shape_to_string(bias.shape()) : ""));
  MIXPREC_CHECK(scopes.empty() || scopes.size() == xs.size(), kOp,
                std::to_string(xs.size()) + " inputs need as many scopes (got " +
                    std::to_string(scopes.size()) + ", or none)");
  for (std::size_t g = 0; g < xs.size(); ++g)
    MIXPREC_CHECK(xs[g].defined() && xs[g].ndim() >= 1 && xs[g].size(-1) == in, kOp,
                  "xs[" + std::to_string(g) + "] " +
                      (xs[g].defined() ? shape_to_string(xs[g].shape()) : "undefined") +
                      " does not match weight " + w + ": expected xs[g] [..., " +
                      std::to_string(in) + "]");
}

// Inputs in edge order: every group's x, then each Operands set's weight, then each one's bias.
class StackedLinearBackward final : public Node {
 public:
  StackedLinearBackward(std::vector<LinearProduct> groups, std::vector<std::size_t> set_of,
                        std::size_t sets, int64_t out, int64_t in)
      : groups_(std::move(groups)),
        set_of_(std::move(set_of)),
        dw_dtype_(sets),
        db_dtype_(sets),
        out_(out),
        in_(in) {
    num_outputs_ = static_cast<int>(groups_.size());
    // The dtypes the vector overload gives each group's gradients (start_backward's), the
    // same for every group of a set: its operands share dtype and precision.
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      dw_dtype_[set_of_[g]] = accumulate_dtype(groups_[g].w.dtype());
      db_dtype_[set_of_[g]] = accumulate_dtype(groups_[g].x_dtype);
    }
  }
  const char* name() const override { return "StackedLinearBackward"; }
  void release_saved() override {
    for (LinearProduct& p : groups_) p.release();
  }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const std::size_t n = groups_.size(), sets = dw_dtype_.size();
    const auto groups = static_cast<int64_t>(n);
    const auto& edges = next_edges();
    std::vector<Tensor> dw(sets), db(sets);
    for (std::size_t k = 0; k < sets; ++k) {
      if (edges[n + k].node) dw[k] = Tensor::empty({groups, out_, in_}, dw_dtype_[k]);
      if (edges[n + sets + k].node) db[k] = Tensor::empty({groups, out_}, db_dtype_[k]);
    }
    std::vector<LinearProduct::Grads> out(n);
    std::vector<WorkTask> tasks;
    // As the vector overload: everything that allocates happens here, the tasks only run
    // products into tensors made for them, in its order with its work figures. It also
    // queues the 0-row weight products; without them (0 work: never shared) the same
    // products are shared, and a queued one runs whole on whichever thread: the same bits.
    for (std::size_t g = 0; g < n; ++g) {
      const std::size_t k = set_of_[g];
      const auto at = static_cast<int64_t>(g);
      const LinearProduct& p = groups_[g];
      if (grads[g].defined()) {
        out[g] = p.start_backward(grads[g], edges[g].node != nullptr, false, db[k].defined());
        if (dw[k].defined() && p.rows > 0) out[g].dw = dw[k].select(0, at);
        if (out[g].db.defined()) db[k].select(0, at).copy_from(out[g].db);  // [Out]: small
        if (out[g].dx.defined())
          tasks.push_back(
              {product_work(p.rows, p.in, p.out), [&, g] { groups_[g].grad_x(out[g]); }});
        if (out[g].dw.defined())
          tasks.push_back(
              {product_work(p.out, p.in, p.rows), [&, g] { groups_[g].grad_w(out[g]); }});
      }
      // The slices no product writes: this group's in the other sets' gradients, and in its
      // own when it has no rows or no gradient.
      for (std::size_t j = 0; j < sets; ++j) {
        if (dw[j].defined() && !(j == k && out[g].dw.defined())) zero(dw[j].select(0, at));
        if (db[j].defined() && !(j == k && out[g].db.defined())) zero(db[j].select(0, at));
      }
    }
    detail::run_spread(tasks);
    std::vector<Tensor> result(n + 2 * sets);
    for (std::size_t g = 0; g < n; ++g) result[g] = out[g].dx;
    for (std::size_t k = 0; k < sets; ++k) {
      result[n + k] = dw[k];
      result[n + sets + k] = db[k];
    }
    return result;
  }

 private:
  std::vector<LinearProduct> groups_;
  std::vector<std::size_t> set_of_;  // group -> its Operands set
  std::vector<DType> dw_dtype_, db_dtype_;
  int64_t out_, in_;
};

}  // namespace

std::vector<Tensor> grouped_linear(const std::vector<Tensor>& xs, const Tensor& weight,
                                   const Tensor& bias, const std::vector<std::string>& scopes) {
  check_stacked(xs, weight, bias, scopes);
  const std::size_t n = xs.size();
  std::vector<Operands> sets;
  std::vector<std::pair<amp::CastCategory, std::size_t>> set_of_category;
  std::vector<std::size_t> set_of(n);
  std::vector<LinearProduct> groups;
  std::vector<Tensor> inputs(n);  // after autocast: the xs, then each set's weight and bias
  for (std::size_t g = 0; g < n; ++g) {
    std::optional<amp::ModuleScope> scope;
    if (!scopes.empty()) scope.emplace(scopes[g]);
    // Casts depend on the category alone (linear is no promote op): the stacked weight is
    // cast once per category met, never per group.
    const amp::CastCategory category =
        amp::autocast_enabled() ? amp::effective_category("linear") : amp::CastCategory::as_given;
    const auto seen = std::find_if(set_of_category.begin(), set_of_category.end(),
                                   [&](const auto& s) { return s.first == category; });
    if (seen != set_of_category.end()) {
      const auto [x] = amp::autocast_args("linear", xs[g]);
      inputs[g] = x;
      set_of[g] = seen->second;
    } else {
      const auto [x, w, b] = amp::autocast_args("linear", xs[g], weight, bias);
      inputs[g] = x;
      const auto same = std::find_if(sets.begin(), sets.end(), [&](const Operands& o) {
        return same_tensor(o.weight, w) && same_tensor(o.bias, b);
      });
      set_of[g] = static_cast<std::size_t>(same - sets.begin());
      if (same == sets.end()) sets.push_back({w, b});
      set_of_category.emplace_back(category, set_of[g]);
    }
    // Detached slices: the gradient reaches the stacked tensor through this op's node alone.
    const Operands& o = sets[set_of[g]];
    const auto at = static_cast<int64_t>(g);
    groups.push_back(
        LinearProduct::prepare(kOp, inputs[g], o.weight.detach().select(0, at),
                               o.bias.defined() ? o.bias.detach().select(0, at) : Tensor()));
  }
  std::vector<Tensor> ys(n);
  std::vector<WorkTask> tasks;
  for (std::size_t g = 0; g < n; ++g) {
    const LinearProduct& p = groups[g];
    ys[g] = p.make_output();
    tasks.push_back({product_work(p.rows, p.out, p.in), [&, g] { groups[g].forward(ys[g]); }});
  }
  detail::run_spread(tasks);
  for (const Operands& o : sets) inputs.push_back(o.weight);
  for (const Operands& o : sets) inputs.push_back(o.bias);
  if (any_requires_grad(inputs)) {
    auto node = std::make_shared<StackedLinearBackward>(
        std::move(groups), std::move(set_of), sets.size(), weight.size(1), weight.size(2));
    connect(*node, inputs);
    for (std::size_t g = 0; g < n; ++g) set_history(ys[g], node, static_cast<int>(g));
  }
  return ys;
}

}  // namespace mixprec
