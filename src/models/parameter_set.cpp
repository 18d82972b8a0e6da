#include "mixprec/models/parameter_set.h"

#include <algorithm>
#include <cmath>

#include "mixprec/core/hash.h"
#include "mixprec/core/parallel.h"
#include "mixprec/tensor/generator.h"

namespace mixprec::models {

uint64_t name_stream(std::string_view name) {
  return fnv1a(name);
}

Tensor initial_values(const ParamSpec& spec, uint64_t seed) {
  return initial_values_range(spec, seed, 0, spec.numel()).view(spec.shape);
}

Tensor initial_values_range(const ParamSpec& spec, uint64_t seed, int64_t begin, int64_t end) {
  MIXPREC_CHECK(0 <= begin && begin <= end && end <= spec.numel(), "initial_values_range",
                spec.name + ": elements [" + std::to_string(begin) + ", " + std::to_string(end) +
                    ") of " + shape_to_string(spec.shape));
  if (!spec.init_slices.empty() && spec.init.kind == InitKind::normal) {
    // Each slice's part of [begin, end), drawn as the parameter the slice stands for.
    const int64_t per = spec.numel() / spec.shape[0];
    Tensor t = Tensor::empty({end - begin});
    for (int64_t at = begin; at < end;) {
      const int64_t s = at / per, stop = std::min(end, (s + 1) * per);
      ParamSpec slice{spec.init_slices[static_cast<std::size_t>(s)],
                      Shape(spec.shape.begin() + 1, spec.shape.end()), spec.role, spec.init};
      t.slice(0, at - begin, stop - begin)
          .copy_from(initial_values_range(slice, seed, at - s * per, stop - s * per));
      at = stop;
    }
    return t;
  }
  switch (spec.init.kind) {
    case InitKind::zeros:
      return Tensor::zeros({end - begin});
    case InitKind::ones:
      return Tensor::ones({end - begin});
    case InitKind::normal: {
      // Element i is std * z(i), z from Philox at counter i of the name's stream (what
      // Tensor::normal draws for a generator on that stream), in f64, rounded once to f32.
      Tensor t = Tensor::empty({end - begin});
      float* out = t.data<float>();
      const uint64_t stream = name_stream(spec.name);
      const auto numel = static_cast<uint64_t>(spec.numel());
      const double cutoff = spec.init.cutoff;
      parallel_for(end - begin, 4096, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          auto counter = static_cast<uint64_t>(begin + i);
          double z = Generator::standard_normal(seed, stream, counter);
          // Redraws are rare (0.27% at cutoff 3); after 64 of them (never seen) clamp.
          for (int redraw = 0; cutoff > 0 && std::fabs(z) > cutoff && redraw < 64; ++redraw)
            z = Generator::standard_normal(seed, stream, counter += numel);
          if (cutoff > 0) z = std::clamp(z, -cutoff, cutoff);
          out[i] = static_cast<float>(0.0 + spec.init.std * z);
        }
      });
      return t;
    }
  }
  return {};
}

void ParameterSet::add(ParamSpec spec) {
  const std::string where = "ParameterSet::add(" + spec.name + ")";
  MIXPREC_CHECK(entries_.empty(), where, "the set is already materialized");
  MIXPREC_CHECK(!spec.name.empty(), where, "empty parameter name");
  MIXPREC_CHECK(!index_.contains(spec.name), where, "name '" + spec.name + "' added twice");
  for (const int64_t s : spec.shape)
    MIXPREC_CHECK(s > 0, where, "shape " + shape_to_string(spec.shape) + " has a size <= 0");
  MIXPREC_CHECK(spec.init.std >= 0 && std::isfinite(spec.init.std), where,
                "init std " + std::to_string(spec.init.std) + " must be finite and >= 0");
  MIXPREC_CHECK(spec.init.cutoff >= 0 && std::isfinite(spec.init.cutoff), where,
                "init cutoff " + std::to_string(spec.init.cutoff) + " must be finite and >= 0");
  MIXPREC_CHECK(
      spec.init_slices.empty() || (spec.shape.size() >= 2 &&
                                   static_cast<int64_t>(spec.init_slices.size()) == spec.shape[0]),
      where,
      std::to_string(spec.init_slices.size()) + " init slices for shape " +
          shape_to_string(spec.shape));
  index_.emplace(spec.name, specs_.size());
  specs_.push_back(std::move(spec));
}

std::size_t ParameterSet::index_of(std::string_view name, const char* where) const {
  const auto it = index_.find(name);
  MIXPREC_CHECK(it != index_.end(), where, "no parameter named '" + std::string(name) + "'");
  return it->second;
}

bool ParameterSet::contains(std::string_view name) const {
  return index_.find(name) != index_.end();
}

const ParamSpec& ParameterSet::spec(std::string_view name) const {
  return specs_[index_of(name, "ParameterSet::spec")];
}

int64_t ParameterSet::parameter_count() const {
  int64_t n = 0;
  for (const ParamSpec& s : specs_) n += s.numel();
  return n;
}

ParameterBytes ParameterSet::bytes(const amp::MixedPrecisionPolicy& policy) const {
  const auto n = static_cast<std::size_t>(parameter_count());
  ParameterBytes b;
  b.master = n * dtype_size(policy.master_dtype());
  // Parameter keeps one tensor when param and master dtypes agree.
  b.working = policy.param_dtype == policy.master_dtype() ? 0 : n * dtype_size(policy.param_dtype);
  b.grads = n * dtype_size(policy.reduce_dtype);
  return b;
}

void ParameterSet::materialize(uint64_t seed, const amp::MixedPrecisionPolicy& policy) {
  std::vector<Entry> entries;
  entries.reserve(specs_.size());
  for (const ParamSpec& s : specs_) {
    entries.emplace_back(s.name, std::make_shared<optim::Parameter>(s.name, initial_values(s, seed),
                                                                    policy, s.role));
  }
  entries_ = std::move(entries);
}

optim::ParamList ParameterSet::parameters() const {
  optim::ParamList out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) out.push_back(e.second);
  return out;
}

optim::Parameter& ParameterSet::at(std::string_view name) const {
  const std::size_t i = index_of(name, "ParameterSet::at");
  MIXPREC_CHECK(i < entries_.size(), "ParameterSet::at",
                "parameter '" + std::string(name) + "' is not materialized yet");
  return *entries_[i].second;
}

}  // namespace mixprec::models
