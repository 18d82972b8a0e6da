// grouped_linear: the products of many linears spread over the threads, whole (the backend
// gemm's WholeProductScope), in one parallel region per direction. Each group reads a 2-d
// weight or its slice of a 3-d one; a 3-d weight's gradient is one tensor whose slices the
// groups' weight-gradient products write in place.
#include "mixprec/ops/grouped_linear.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "linear_product.h"
#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/function.h"
#include "mixprec/autograd/grad_mode.h"
#include "work_spread.h"

namespace mixprec {
namespace {

using detail::LinearProduct;
using detail::product_work;
using detail::run_spread;
using Task = detail::WorkTask;

constexpr const char* kOp = "grouped_linear";

// A source's weight and bias as autocast hands them to some of its groups: one set per 2-d
// source; per 3-d source one set per cast met (one outside autocast, two when some experts sit
// in fp32 modules). Each set is one gradient edge for the weight and one for the bias.
struct OperandSet {
  Tensor weight, bias;
  std::size_t source = 0;
  bool stacked = false;  // a 3-d source: the gradient is [G, Out, In], its groups' slices
};

struct Group {
  std::size_t set = 0;
  int64_t slice = 0;  // the group's index in its 3-d source
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

std::string shape_of(const Tensor& t) {
  return t.defined() ? shape_to_string(t.shape()) : "undefined";
}

// The groups each source gives, its shapes checked against its bias and its groups' xs.
std::vector<int64_t> check_sources(const std::vector<Tensor>& xs,
                                   const std::vector<GroupedWeight>& sources,
                                   const std::vector<std::string>& scopes) {
  std::vector<int64_t> groups;
  int64_t total = 0;
  for (std::size_t s = 0; s < sources.size(); ++s) {
    const Tensor& w = sources[s].weight;
    const Tensor& b = sources[s].bias;
    const std::string name = sources.size() == 1 ? "weight" : "sources[" + std::to_string(s) + "]";
    MIXPREC_CHECK(w.defined() && (w.ndim() == 2 || w.ndim() == 3), kOp,
                  name + " must be 2-d [Out, In] or 3-d [G, Out, In], got " + shape_of(w));
    const bool stacked = w.ndim() == 3;
    const int64_t g = stacked ? w.size(0) : 1, out = w.size(-2), in = w.size(-1);
    const Shape bias_shape = stacked ? Shape{g, out} : Shape{out};
    MIXPREC_CHECK(!b.defined() || b.shape() == bias_shape, kOp,
                  "bias must be " + shape_to_string(bias_shape) + " for " + name + " " +
                      shape_of(w) + ", got " + shape_of(b));
    for (int64_t i = 0; i < g && total + i < static_cast<int64_t>(xs.size()); ++i) {
      const auto at = static_cast<std::size_t>(total + i);
      MIXPREC_CHECK(xs[at].defined() && xs[at].ndim() >= 1 && xs[at].size(-1) == in, kOp,
                    "xs[" + std::to_string(at) + "] " + shape_of(xs[at]) + " does not match " +
                        name + " " + shape_of(w) + ": expected xs[g] [..., " + std::to_string(in) +
                        "]");
    }
    groups.push_back(g);
    total += g;
  }
  MIXPREC_CHECK(total == static_cast<int64_t>(xs.size()), kOp,
                (sources.size() == 1 ? "weight " + shape_of(sources[0].weight) + " stacks "
                                     : "the sources stack ") +
                    std::to_string(total) + " groups but xs holds " + std::to_string(xs.size()));
  MIXPREC_CHECK(scopes.empty() || scopes.size() == xs.size(), kOp,
                std::to_string(xs.size()) + " inputs need as many scopes (got " +
                    std::to_string(scopes.size()) + ", or none)");
  return groups;
}

// Inputs in edge order: every group's x, then each operand set's weight, then each one's bias.
class GroupedLinearBackward final : public Node {
 public:
  GroupedLinearBackward(std::vector<LinearProduct> products, std::vector<Group> groups,
                        std::vector<OperandSet> sets)
      : products_(std::move(products)), groups_(std::move(groups)), sets_(sets.size()) {
    num_outputs_ = static_cast<int>(products_.size());
    for (std::size_t k = 0; k < sets.size(); ++k) {
      sets_[k].source = sets[k].source;
      sets_[k].stacked = sets[k].stacked;
      if (sets[k].stacked) sets_[k].shape = sets[k].weight.shape();
    }
    // The dtypes linear gives each group's gradients (start_backward's), the same for every
    // group of a set: its operands share dtype and precision.
    for (std::size_t g = 0; g < products_.size(); ++g) {
      SetGrads& s = sets_[groups_[g].set];
      s.dw_dtype = accumulate_dtype(products_[g].w_dtype);
      s.db_dtype = accumulate_dtype(products_[g].x_dtype);
    }
  }
  const char* name() const override { return "GroupedLinearBackward"; }
  void release_saved() override {
    for (LinearProduct& p : products_) p.release();
  }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const std::size_t n = products_.size(), sets = sets_.size();
    const auto& edges = next_edges();
    std::vector<Tensor> dw(sets), db(sets);
    for (std::size_t k = 0; k < sets; ++k) {
      const SetGrads& s = sets_[k];
      if (!s.stacked) continue;  // a 2-d source's gradients are its one group's
      if (edges[n + k].node) dw[k] = Tensor::empty(s.shape, s.dw_dtype);
      if (edges[n + sets + k].node) db[k] = Tensor::empty({s.shape[0], s.shape[1]}, s.db_dtype);
    }
    std::vector<LinearProduct::Grads> out(n);
    std::vector<Task> tasks;
    // Everything that allocates or converts happens here, on this thread; the tasks only run
    // products into tensors made for them. A stacked group with 0 rows queues no weight product
    // (a 2-d one queues its 0-work product, which writes zeros): 0 work is never shared, and a
    // queued product runs whole on whichever thread, so the other products keep their bits.
    for (std::size_t g = 0; g < n; ++g) {
      const Group& at = groups_[g];
      const SetGrads& s = sets_[at.set];
      const LinearProduct& p = products_[g];
      if (grads[g].defined()) {
        const bool want_w = edges[n + at.set].node != nullptr;
        const bool want_b = edges[n + sets + at.set].node != nullptr;
        out[g] = p.start_backward(grads[g], edges[g].node != nullptr, want_w && !s.stacked, want_b);
        if (s.stacked) {
          if (dw[at.set].defined() && p.rows > 0) out[g].dw = dw[at.set].select(0, at.slice);
          if (out[g].db.defined()) db[at.set].select(0, at.slice).copy_from(out[g].db);  // small
        } else {
          dw[at.set] = out[g].dw;
          db[at.set] = out[g].db;
        }
        if (out[g].dx.defined())
          tasks.push_back(
              {product_work(p.rows, p.in, p.out), [&, g] { products_[g].grad_x(out[g]); }});
        if (out[g].dw.defined())
          tasks.push_back(
              {product_work(p.out, p.in, p.rows), [&, g] { products_[g].grad_w(out[g]); }});
      }
      if (!s.stacked) continue;
      // The slices no product writes: this group's in its source's other sets' gradients, and
      // in its own set's when it has no rows or no gradient.
      for (std::size_t j = 0; j < sets; ++j) {
        if (sets_[j].source != s.source) continue;
        const bool own = j == at.set;
        if (dw[j].defined() && !(own && out[g].dw.defined())) zero(dw[j].select(0, at.slice));
        if (db[j].defined() && !(own && out[g].db.defined())) zero(db[j].select(0, at.slice));
      }
    }
    run_spread(tasks);
    std::vector<Tensor> result(n + 2 * sets);
    for (std::size_t g = 0; g < n; ++g) result[g] = out[g].dx;
    for (std::size_t k = 0; k < sets; ++k) {
      result[n + k] = dw[k];
      result[n + sets + k] = db[k];
    }
    return result;
  }

 private:
  struct SetGrads {
    std::size_t source = 0;
    bool stacked = false;
    Shape shape;  // a stacked set's [G, Out, In]
    DType dw_dtype = DType::f32, db_dtype = DType::f32;
  };
  std::vector<LinearProduct> products_;
  std::vector<Group> groups_;
  std::vector<SetGrads> sets_;
};

}  // namespace

std::vector<Tensor> grouped_linear(const std::vector<Tensor>& xs,
                                   const std::vector<GroupedWeight>& sources,
                                   const std::vector<std::string>& scopes) {
  const std::vector<int64_t> counts = check_sources(xs, sources, scopes);
  const std::size_t n = xs.size();
  std::vector<OperandSet> sets;
  std::vector<Group> groups;
  std::vector<LinearProduct> products;
  std::vector<Tensor> inputs(n);  // after autocast: the xs, then each set's weight and bias
  std::size_t g = 0;
  for (std::size_t s = 0; s < sources.size(); ++s) {
    const GroupedWeight& src = sources[s];
    const bool stacked = src.weight.ndim() == 3;
    // A stacked weight is cast once per autocast category met, never per group (linear is no
    // promote op: the cast depends on the category alone).
    std::vector<std::pair<amp::CastCategory, std::size_t>> set_of_category;
    for (int64_t i = 0; i < counts[s]; ++i, ++g) {
      std::optional<amp::ModuleScope> scope;
      if (!scopes.empty()) scope.emplace(scopes[g]);
      Group group{0, i};
      if (!stacked) {
        const auto [x, w, b] = amp::autocast_args("linear", xs[g], src.weight, src.bias);
        inputs[g] = x;
        group.set = sets.size();
        sets.push_back({w, b, s, false});
        // A 2-d weight is nn.Linear's (shared experts, per-expert modules): the linear recipe.
        products.push_back(LinearProduct::prepare(kOp, x, w, b, amp::RecipeSite::linear));
        groups.push_back(group);
        continue;
      }
      const amp::CastCategory category =
          amp::autocast_enabled() ? amp::effective_category("linear") : amp::CastCategory::as_given;
      const auto seen = std::find_if(set_of_category.begin(), set_of_category.end(),
                                     [&](const auto& c) { return c.first == category; });
      if (seen != set_of_category.end()) {
        const auto [x] = amp::autocast_args("linear", xs[g]);
        inputs[g] = x;
        group.set = seen->second;
      } else {
        const auto [x, w, b] = amp::autocast_args("linear", xs[g], src.weight, src.bias);
        inputs[g] = x;
        const auto same = std::find_if(sets.begin(), sets.end(), [&](const OperandSet& o) {
          return o.source == s && same_tensor(o.weight, w) && same_tensor(o.bias, b);
        });
        group.set = static_cast<std::size_t>(same - sets.begin());
        if (same == sets.end()) sets.push_back({w, b, s, true});
        set_of_category.emplace_back(category, group.set);
      }
      // Detached slices: the gradient reaches the stacked tensor through this op's node alone.
      // A stacked weight is a grouped GEMM's: the grouped recipe, each group its own product.
      const OperandSet& o = sets[group.set];
      products.push_back(LinearProduct::prepare(
          kOp, inputs[g], o.weight.detach().select(0, i),
          o.bias.defined() ? o.bias.detach().select(0, i) : Tensor(), amp::RecipeSite::grouped));
      groups.push_back(group);
    }
  }
  for (const OperandSet& o : sets) inputs.push_back(o.weight);
  for (const OperandSet& o : sets) inputs.push_back(o.bias);
  const bool backward = any_requires_grad(inputs);
  // As linear: only a product with a backward saves its input, as its FP8 cast where the policy
  // and the group's recipe allow (save_fp8_activations), cast here, once per input tensor.
  if (GradMode::is_enabled() && backward)
    for (LinearProduct& p : products) p.cast_input_for_saving();
  std::vector<Tensor> ys(n);
  std::vector<Task> tasks;
  for (std::size_t i = 0; i < n; ++i) {
    const LinearProduct& p = products[i];
    ys[i] = p.make_output();
    tasks.push_back({product_work(p.rows, p.out, p.in), [&, i] { products[i].forward(ys[i]); }});
  }
  run_spread(tasks);
  for (LinearProduct& p : products) p.drop_high_precision_input();
  if (backward) {
    auto node = std::make_shared<GroupedLinearBackward>(std::move(products), std::move(groups),
                                                        std::move(sets));
    connect(*node, inputs);
    for (std::size_t i = 0; i < n; ++i) set_history(ys[i], node, static_cast<int>(i));
  }
  return ys;
}

std::vector<Tensor> grouped_linear(const std::vector<Tensor>& xs,
                                   const std::vector<Tensor>& weights,
                                   const std::vector<Tensor>& biases,
                                   const std::vector<std::string>& scopes) {
  const std::size_t n = xs.size();
  MIXPREC_CHECK(weights.size() == n && (biases.empty() || biases.size() == n) &&
                    (scopes.empty() || scopes.size() == n),
                kOp,
                std::to_string(n) + " inputs need as many weights (got " +
                    std::to_string(weights.size()) + "), biases (got " +
                    std::to_string(biases.size()) + ", or none) and scopes (got " +
                    std::to_string(scopes.size()) + ", or none)");
  std::vector<GroupedWeight> sources;
  for (std::size_t g = 0; g < n; ++g) {
    // One group per weight: a 3-d one here is a mistake, not a stack.
    MIXPREC_CHECK(
        weights[g].defined() && weights[g].ndim() == 2, kOp,
        "weights[" + std::to_string(g) + "] must be 2-d [Out, In], got " + shape_of(weights[g]));
    sources.push_back({weights[g], biases.empty() ? Tensor() : biases[g]});
  }
  return grouped_linear(xs, sources, scopes);
}

std::vector<Tensor> grouped_linear(const std::vector<Tensor>& xs, const Tensor& weight,
                                   const Tensor& bias, const std::vector<std::string>& scopes) {
  MIXPREC_CHECK(weight.defined() && weight.ndim() == 3, kOp,
                "weight must be 3-d [G, Out, In], got " + shape_of(weight));
  return grouped_linear(xs, std::vector<GroupedWeight>{{weight, bias}}, scopes);
}

}  // namespace mixprec
