// ParameterSet: a model's named parameters, built in two phases.
//   1. describe: add() records each parameter's qualified name, shape, role and init rule;
//      nothing is allocated, so a model can be sized (parameter_count, bytes) on the meta
//      device before committing memory.
//   2. materialize(seed, policy): every parameter gets its initial values and becomes an
//      optim::Parameter (f32 master + working copy under the policy).
// Initial values are keyed by (seed, hash of the parameter's NAME, element index) through
// Philox (Box-Muller for normals), so they never depend on the order parameters were added,
// the thread count, or (later) how a sharded run splits them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mixprec/amp/policy.h"
#include "mixprec/optim/parameter.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::models {

enum class InitKind { normal, zeros, ones };

struct InitRule {
  InitKind kind = InitKind::normal;
  double std = 0.02;  // normal only; mean is 0
  // normal only: > 0 truncates to [-cutoff·std, cutoff·std] (torch's trunc_normal_ with
  // a = -cutoff·std, b = cutoff·std); an element's draws outside it are redrawn.
  double cutoff = 0.0;
};

struct ParamSpec {
  std::string name;  // qualified: "blocks.3.attn.wq"
  Shape shape;
  optim::ParamRole role{};
  InitRule init{};
  std::string unit = "root";  // the shard unit it belongs to (Model::shard_units)
  // Non-empty for a stack of shape[0] equal slices (an MoE layer's stacked experts): slice s
  // gets the values a parameter named init_slices[s] of the slice's shape would get, so the
  // stack starts from the very weights the parameters it replaces would have had.
  std::vector<std::string> init_slices = {};
  // A linear layer's weight [out, in]: the module path its linear runs under (the recipe
  // filters' subject: "blocks.0.attn.wq", "lm_head"); empty for every other parameter.
  std::string linear_module = {};
  int64_t numel() const { return shape_numel(shape); }
  Tensor meta() const { return Tensor::empty(shape, DType::f32, Device::meta); }
};

// Bytes the parameters take under a policy: master copy, working copy (0 when it is the
// master itself) and gradients (accumulated in the policy's reduce dtype). Optimizer state
// depends on the optimizer and is not included.
struct ParameterBytes {
  std::size_t master = 0;
  std::size_t working = 0;
  std::size_t grads = 0;
  std::size_t total() const { return master + working + grads; }
};

// The Philox stream a parameter's values come from: FNV-1a (64-bit) of its name.
uint64_t name_stream(std::string_view name);
// A parameter's initial values in f32 (normals drawn in f64, rounded once):
// element i of a normal = std * Generator::standard_normal(seed, name_stream(name), i);
// truncated, the first of counters i, i + numel, i + 2·numel, ... whose draw is inside. With
// init_slices, each slice is drawn so under its own name (numel: the slice's).
Tensor initial_values(const ParamSpec& spec, uint64_t seed);
// Elements [begin, end) (row-major) of initial_values(spec, seed) as a 1-D f32 tensor, without
// computing the rest: what a rank of a sharded run materialises (initial_values is this over
// the whole range).
Tensor initial_values_range(const ParamSpec& spec, uint64_t seed, int64_t begin, int64_t end);

class ParameterSet {
 public:
  using Entry = std::pair<std::string, std::shared_ptr<optim::Parameter>>;

  // Describe phase only; a repeated name, a bad shape or std is an Error.
  void add(ParamSpec spec);
  const std::vector<ParamSpec>& specs() const { return specs_; }
  const ParamSpec& spec(std::string_view name) const;
  bool contains(std::string_view name) const;

  int64_t parameter_count() const;
  ParameterBytes bytes(const amp::MixedPrecisionPolicy& policy) const;

  // Creates every parameter (in add() order). Calling it again re-initialises from scratch.
  void materialize(uint64_t seed, const amp::MixedPrecisionPolicy& policy);
  bool materialized() const { return !entries_.empty() || specs_.empty(); }

  // (qualified name, parameter) in add() order; empty before materialize.
  const std::vector<Entry>& entries() const { return entries_; }
  optim::ParamList parameters() const;
  optim::Parameter& at(std::string_view name) const;
  // The working copy the forward pass uses.
  const Tensor& value(std::string_view name) const { return at(name).value(); }

 private:
  std::size_t index_of(std::string_view name, const char* where) const;
  std::vector<ParamSpec> specs_;
  std::map<std::string, std::size_t, std::less<>> index_;
  std::vector<Entry> entries_;
};

}  // namespace mixprec::models
