// The op registry: one list of op cases that every op-level test enumerates.
//   reference/fixture_test.cpp      each case against PyTorch (its fixture files);
//   unit/ops/backend_ops_test.cpp   each case and dtype on the cpu and reference backends;
//   unit/ops/registry_gradcheck_test.cpp  each case by finite differences in f64;
//   unit/amp/autocast_ops_test.cpp  each case under autocast against its table row's casts.
// A case runs one op (its row in amp's autocast table names it) on named inputs. The inputs
// are those of its PyTorch fixture (tests/reference/fixtures/<case>_f32.safetensors, written
// by make_fixtures.py), or, for the few ops PyTorch cannot reproduce, made here (the case
// says why). Adding an op means adding its case here; the tests then cover it everywhere.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/ops.h"
#include "mixprec/tensor/generator.h"

namespace mixprec::testing {

using Tensors = std::map<std::string, Tensor>;
using Runner = std::function<Tensors(Tensors&)>;  // inputs -> named outputs

// One rounding to bf16 is at most 2^-9 relative; 2^-8 allows for the 1% floor on tiny values
// and for f32 accumulation-order differences between kernels.
constexpr double kOneBf16Rounding = 0x1p-8;

struct OpCase {
  Runner run;
  std::string op;  // its row in amp::kAutocastTable; "" for views (no kernel, no row)
  // Against PyTorch (fixture_test.cpp): f32 vs PyTorch's f32 (both f32 evaluations in
  // different orders with different erf/tanh/exp implementations, ~1-3 ulp of a large
  // intermediate seen relative to an element near the 1% floor), and our bf16 vs our f32 on
  // the same rounded inputs.
  double f32_tol = 2e-5;
  double bf16_tol = kOneBf16Rounding;
  // Cases without a PyTorch fixture: why, their f32 inputs, and which of them get gradients.
  std::string no_fixture_because = {};
  std::function<Tensors()> make_inputs = {};
  std::set<std::string> grad_inputs = {};
  // Runs other table ops too (the autocast test takes single-op cases only).
  bool composite = false;
  // With native bf16 products (AMX, AVX512-BF16) the kernel rounds operands it makes itself
  // to bf16 (attention's P and dS): the one-rounding checks against the f32 kernel run with
  // the products widened, and the native path is held to its own error bound in its test.
  bool rounds_own_operands = false;
};

inline Tensors one(Tensor t) {
  return {{"out", std::move(t)}};
}

inline Tensor random_f32(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return Tensor::normal(shape, 0.0, 1.0, gen, DType::f32);
}

inline const std::map<std::string, OpCase>& op_registry() {
  static const std::map<std::string, OpCase> table = [] {
    std::map<std::string, OpCase> m;
    auto unary = [&](const char* name, Tensor (*f)(const Tensor&)) {
      m[name] = {[f](Tensors& t) { return one(f(t["x"])); }, name};
    };
    m["linear"] = {[](Tensors& t) { return one(linear(t["x"], t["weight"], t["bias"])); },
                   "linear"};
    m["matmul"] = {[](Tensors& t) { return one(matmul(t["a"], t["b"])); }, "matmul"};
    m["bmm"] = {[](Tensors& t) { return one(bmm(t["a"], t["b"])); }, "bmm"};
    m["add"] = {[](Tensors& t) { return one(add(t["a"], t["b"])); }, "add"};
    m["sub"] = {[](Tensors& t) { return one(sub(t["a"], t["b"])); }, "sub"};
    m["mul"] = {[](Tensors& t) { return one(mul(t["a"], t["b"])); }, "mul"};
    m["div"] = {[](Tensors& t) { return one(div(t["a"], t["b"])); }, "div"};
    m["scale"] = {[](Tensors& t) { return one(scale(t["x"], 0.37)); }, "scale"};
    unary("gelu", gelu);
    unary("gelu_tanh", gelu_tanh);
    unary("silu", silu);
    unary("exp", mixprec::exp);
    unary("log", mixprec::log);
    unary("log1p", mixprec::log1p);
    unary("expm1", mixprec::expm1);
    unary("sqrt", mixprec::sqrt);
    unary("rsqrt", mixprec::rsqrt);
    unary("reciprocal", mixprec::reciprocal);
    unary("tanh", mixprec::tanh);
    m["softplus"] = {[](Tensors& t) { return one(softplus(t["x"])); }, "softplus"};
    m["softplus_beta2"] = {[](Tensors& t) { return one(softplus(t["x"], 2.0, 5.0)); }, "softplus"};
    m["pow_scalar"] = {[](Tensors& t) { return one(mixprec::pow(t["x"], 2.5)); }, "pow"};
    m["pow_int"] = {[](Tensors& t) { return one(mixprec::pow(t["x"], 3.0)); }, "pow"};
    // A composite: two linears rounded to bf16, then silu*up, then dX = dG·W1 + dU·W3 sums
    // two bf16-rounded products, whose cancellation magnifies relative error near the floor
    // (PyTorch's own bf16 distance here is 0.07-0.16).
    m["swiglu"] = {
        [](Tensors& t) { return one(swiglu(linear(t["x"], t["w1"]), linear(t["x"], t["w3"]))); },
        "swiglu", 2e-5, 0.125};
    m["swiglu"].composite = true;
    m["rmsnorm"] = {[](Tensors& t) { return one(rmsnorm(t["x"], t["weight"], 1e-5)); }, "rmsnorm"};
    m["layernorm"] = {
        [](Tensors& t) { return one(layernorm(t["x"], t["weight"], t["bias"], 1e-5)); },
        "layernorm"};
    m["softmax"] = {[](Tensors& t) { return one(softmax(t["x"], -1)); }, "softmax"};
    m["log_softmax"] = {[](Tensors& t) { return one(log_softmax(t["x"], -1)); }, "log_softmax"};
    m["attention"] = {
        [](Tensors& t) { return one(scaled_dot_product_attention(t["q"], t["k"], t["v"], true)); },
        "scaled_dot_product_attention"};
    m["attention"].rounds_own_operands = true;
    m["rope"] = {[](Tensors& t) { return one(rope(t["x"], 10000.0)); }, "rope"};
    m["embedding"] = {[](Tensors& t) { return one(embedding(t["ids"], t["weight"])); },
                      "embedding"};
    m["cross_entropy"] = {
        [](Tensors& t) { return one(cross_entropy(t["logits"], t["targets"], -100)); },
        "cross_entropy"};
    m["cross_entropy_one_valid"] = m["cross_entropy"];
    m["sum_all"] = {[](Tensors& t) { return one(sum(t["x"])); }, "sum"};
    m["mean_all"] = {[](Tensors& t) { return one(mean(t["x"])); }, "mean"};
    m["max_all"] = {[](Tensors& t) { return one(max(t["x"])); }, "max"};
    m["norm_all"] = {[](Tensors& t) { return one(norm(t["x"])); }, "norm"};
    m["sum_dim1"] = {[](Tensors& t) { return one(sum(t["x"], 1)); }, "sum"};
    m["mean_dim1"] = {[](Tensors& t) { return one(mean(t["x"], 1)); }, "mean"};
    m["norm_dim1"] = {[](Tensors& t) { return one(norm(t["x"], 1)); }, "norm"};
    m["max_dim1"] = {[](Tensors& t) {
                       auto [v, i] = max(t["x"], 1);
                       return Tensors{{"out_values", v}, {"out_indices", i}};
                     },
                     "max"};
    m["topk"] = {[](Tensors& t) {
                   auto [v, i] = topk(t["x"], 2, -1, true);
                   return Tensors{{"out_values", v}, {"out_indices", i}};
                 },
                 "topk"};
    m["gather"] = {[](Tensors& t) { return one(gather(t["x"], 1, t["index"])); }, "gather"};
    m["scatter_add"] = {
        [](Tensors& t) { return one(scatter_add(t["x"], 0, t["index"], t["src"])); },
        "scatter_add"};
    m["index_add"] = {
        [](Tensors& t) { return one(index_add(t["x"], 0, t["index"], t["source"], 1.0)); },
        "index_add"};
    m["concat"] = {[](Tensors& t) { return one(concat({t["a"], t["b"], t["c"]}, 1)); }, "concat"};
    m["slice"] = {[](Tensors& t) { return one(t["x"].slice(1, 1, 6, 2)); }, ""};
    m["reshape"] = {[](Tensors& t) { return one(t["x"].reshape({15, 7})); }, ""};
    m["transpose"] = {[](Tensors& t) { return one(t["x"].transpose(1, 2)); }, ""};

    // ---- issue 18: the matmul family, fp32 reductions and losses, promote ops ----
    auto pair = [&](const char* name, const char* op, Tensor (*f)(const Tensor&, const Tensor&),
                    const char* a, const char* b) {
      m[name] = {[=](Tensors& t) { return one(f(t[a], t[b])); }, op};
    };
    pair("mm", "mm", mixprec::mm, "a", "b");
    pair("mv", "mv", mixprec::mv, "a", "v");
    pair("dot", "dot", mixprec::dot, "a", "b");
    for (const char* name :
         {"matmul_batch_broadcast", "matmul_vec_mat", "matmul_mat_vec", "matmul_vec_vec"})
      pair(name, "matmul", mixprec::matmul, "a", "b");
    m["addmm"] = {[](Tensors& t) { return one(addmm(t["input"], t["m1"], t["m2"], 0.5, 1.5)); },
                  "addmm"};
    m["baddbmm"] = {[](Tensors& t) { return one(baddbmm(t["input"], t["b1"], t["b2"], 0.5, 2.0)); },
                    "baddbmm"};
    for (const auto& [name, eq] : std::vector<std::pair<std::string, std::string>>{
             {"einsum_bmm", "bij,bjk->bik"},
             {"einsum_implicit", "ij,kj"},
             {"einsum_diagonal_sum", "iij,jk->ik"},
             {"einsum_ellipsis", "...ij,...jk->...ik"}})
      m[name] = {[eq](Tensors& t) { return one(einsum(eq, {t["a"], t["b"]})); }, "einsum"};
    m["einsum_single"] = {[](Tensors& t) { return one(einsum("ijk->kj", {t["a"]})); }, "einsum"};
    m["prod_all"] = {[](Tensors& t) { return one(prod(t["x"])); }, "prod"};
    m["prod_dim1_zeros"] = {[](Tensors& t) { return one(prod(t["x"], 1)); }, "prod"};
    m["cumsum_dim1"] = {[](Tensors& t) { return one(cumsum(t["x"], 1)); }, "cumsum"};
    m["logsumexp_dim1"] = {[](Tensors& t) { return one(logsumexp(t["x"], 1)); }, "logsumexp"};
    m["vector_norm_l1_all"] = {[](Tensors& t) { return one(vector_norm(t["x"], 1.0)); }, "norm"};
    m["vector_norm_l1_dim1"] = {[](Tensors& t) { return one(vector_norm(t["x"], 1.0, 1)); },
                                "norm"};
    m["vector_norm_p3_dim1"] = {[](Tensors& t) { return one(vector_norm(t["x"], 3.0, 1)); },
                                "norm"};
    m["vector_norm_inf_all"] = {[](Tensors& t) { return one(vector_norm(t["x"], INFINITY)); },
                                "norm"};
    m["vector_norm_inf_dim1"] = {[](Tensors& t) { return one(vector_norm(t["x"], INFINITY, 1)); },
                                 "norm"};
    m["mse_loss"] = {[](Tensors& t) { return one(mse_loss(t["input"], t["target"])); }, "mse_loss"};
    m["l1_loss_sum"] = {
        [](Tensors& t) { return one(l1_loss(t["input"], t["target"], Reduction::sum)); },
        "l1_loss"};
    m["smooth_l1_loss"] = {
        [](Tensors& t) {
          return one(smooth_l1_loss(t["input"], t["target"], Reduction::mean, 0.5));
        },
        "smooth_l1_loss"};
    m["kl_div_batchmean"] = {
        [](Tensors& t) { return one(kl_div(t["input"], t["target"], Reduction::batchmean)); },
        "kl_div"};
    m["kl_div_log_target"] = {
        [](Tensors& t) { return one(kl_div(t["input"], t["target"], Reduction::sum, true)); },
        "kl_div"};
    m["bce_with_logits"] = {[](Tensors& t) {
                              return one(binary_cross_entropy_with_logits(
                                  t["input"], t["target"], t["weight"], t["pos_weight"]));
                            },
                            "binary_cross_entropy_with_logits"};
    // Refused under autocast, so it has no row: the autocast tests skip it as a composite.
    m["binary_cross_entropy"] = {
        [](Tensors& t) { return one(binary_cross_entropy(t["input"], t["target"])); }, ""};
    m["binary_cross_entropy"].composite = true;
    m["nll_loss"] = {[](Tensors& t) { return one(nll_loss(t["input"], t["target"], t["weight"])); },
                     "nll_loss"};
    m["nll_loss_spatial"] = {
        [](Tensors& t) {
          return one(nll_loss(t["input"], t["target"], {}, -100, Reduction::none));
        },
        "nll_loss"};
    m["cosine_similarity"] = {
        [](Tensors& t) { return one(cosine_similarity(t["x1"], t["x2"], 1)); },
        "cosine_similarity"};
    m["stack"] = {[](Tensors& t) { return one(stack({t["a"], t["b"], t["c"]}, 1)); }, "stack"};
    m["addcmul"] = {[](Tensors& t) { return one(addcmul(t["input"], t["t1"], t["t2"], 0.5)); },
                    "addcmul"};
    m["addcdiv"] = {[](Tensors& t) { return one(addcdiv(t["input"], t["t1"], t["t2"], -0.7)); },
                    "addcdiv"};
    m["where"] = {[](Tensors& t) { return one(where(t["cond"], t["x"], t["y"])); }, "where"};
    m["index_put"] = {[](Tensors& t) { return one(index_put(t["x"], {t["index"]}, t["values"])); },
                      "index_put"};
    m["index_put_accumulate"] = {
        [](Tensors& t) { return one(index_put(t["x"], {t["index"]}, t["values"], true)); },
        "index_put"};
    m["pow_tensor"] = {[](Tensors& t) { return one(mixprec::pow(t["x"], t["exponent"])); }, "pow"};
    // Where PyTorch computes the same way (selection, negation, a max, sums in index order of
    // a few terms) the f32 results are PyTorch's bits exactly.
    for (const char* exact :
         {"stack", "where", "index_put", "index_put_accumulate", "vector_norm_inf_all",
          "vector_norm_inf_dim1", "nll_loss_spatial", "einsum_single"})
      m[exact].f32_tol = 0;

    // ---- cases without a PyTorch fixture ----
    OpCase drop{[](Tensors& t) { return one(dropout(t["x"], 0.25, 7, 3)); }, "dropout"};
    drop.no_fixture_because = "PyTorch draws dropout masks from its own generator";
    drop.make_inputs = [] { return Tensors{{"x", random_f32({3, 7, 5}, 11)}}; };
    drop.grad_inputs = {"x"};
    m["dropout"] = drop;

    // As the MoE layer calls it: the "moe_router" hook casts, the op reads x itself when the
    // hook only widened it.
    OpCase router{[](Tensors& t) {
                    const auto [xr, wr] = amp::autocast_args("moe_router", t["x"], t["w"]);
                    return one(router_logits(t["x"], xr, wr));
                  },
                  "moe_router"};
    router.no_fixture_because = "mixprec's MoE router hook (PyTorch: a bias-free linear)";
    router.make_inputs = [] {
      return Tensors{{"x", random_f32({6, 13}, 12)}, {"w", random_f32({4, 13}, 13)}};
    };
    router.grad_inputs = {"x", "w"};
    m["moe_router"] = router;

    OpCase glu{[](Tensors& t) { return one(swiglu(t["gate"], t["up"])); }, "swiglu"};
    glu.no_fixture_because = "the swiglu fixture runs it between two linears (as models do)";
    glu.make_inputs = [] {
      return Tensors{{"gate", random_f32({4, 9}, 16)}, {"up", random_f32({4, 9}, 17)}};
    };
    glu.grad_inputs = {"gate", "up"};
    m["swiglu_alone"] = glu;

    // The MoE combine's layout: a row id per token broadcast over the hidden dim (never
    // materialised by the kernels), and its backward, the dispatch's gather of rows.
    OpCase rows{[](Tensors& t) {
                  const Tensor index = t["rows"].as_strided({6, 5}, {1, 0}, 0);  // expanded
                  return one(scatter_add(t["x"], 0, index, t["src"]));
                },
                "scatter_add"};
    rows.no_fixture_because =
        "a layout of scatter_add (broadcast row index), whose math the "
        "scatter_add fixture covers";
    rows.make_inputs = [] {
      return Tensors{{"x", random_f32({4, 5}, 14)},
                     {"rows", Tensor::from_vector<int64_t>({3, 0, 3, 1, 0, 3}, {6})},
                     {"src", random_f32({6, 5}, 15)}};
    };
    rows.grad_inputs = {"x", "src"};
    m["scatter_add_rows"] = rows;
    return m;
  }();
  return table;
}

// Every case's name, for parameterised tests.
inline std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& [name, c] : op_registry()) names.push_back(name);
  return names;
}

inline std::string fixture_path(const std::string& name, const char* dtype) {
  return std::string(MIXPREC_SOURCE_DIR) + "/tests/reference/fixtures/" + name + "_" + dtype +
         ".safetensors";
}

// Whether `name` in a fixture file is an input of the op (not an output, gradient or table).
inline bool is_fixture_input(const std::string& name, const io::SafetensorsFile& f) {
  return name != "cos" && name != "sin" && name.rfind("out", 0) != 0 &&
         name.rfind("grad_", 0) != 0 && f.tensors.count(name);
}

// The case's inputs with floating ones converted to `dtype` (integers kept) as fresh
// contiguous tensors; those that get gradients require grad.
inline Tensors case_inputs(const std::string& name, DType dtype) {
  const OpCase& c = op_registry().at(name);
  Tensors raw;
  std::set<std::string> grads = c.grad_inputs;
  if (c.make_inputs) {
    raw = c.make_inputs();
  } else {
    const io::SafetensorsFile f = io::load_safetensors(fixture_path(name, "f32"));
    for (const auto& [n, t] : f.tensors) {
      if (!is_fixture_input(n, f)) continue;
      raw[n] = t;
      if (f.tensors.count("grad_" + n)) grads.insert(n);
    }
  }
  Tensors in;
  for (auto& [n, t] : raw) {
    Tensor x = is_floating(t.dtype()) ? t.to(dtype).contiguous().clone() : t;
    if (grads.count(n)) x.set_requires_grad(true, dtype);
    in[n] = x;
  }
  return in;
}

// The output a case's gradient flows from: "out", or "out_values" for (values, indices) ops.
inline std::string primary_output(const Tensors& outs) {
  return outs.count("out_values") ? "out_values" : "out";
}

// max |a - b| / max(|ref|, 1% of max |ref|); ref defaults to b.
inline double rel_distance(const Tensor& a, const Tensor& b, const Tensor& ref = {}) {
  const std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  const std::vector<double> r = ref.defined() ? ref.to_doubles() : y;
  double scale = 0;
  for (double v : r) scale = std::max(scale, std::fabs(v));
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = std::fabs(x[i] - y[i]);
    if (std::isnan(d) && !(std::isnan(x[i]) && std::isnan(y[i]))) return INFINITY;
    if (!std::isnan(d)) worst = std::max(worst, d / std::max(std::fabs(r[i]), 0.01 * scale));
  }
  return worst;
}

}  // namespace mixprec::testing
