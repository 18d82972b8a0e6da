// A trainable parameter under a precision policy: the master copy the optimizer updates (f32,
// or the policy's param dtype in the pure low-precision modes) and the working copy the model
// computes with (a leaf tensor in the policy's param dtype whose gradient accumulates in the
// reduce dtype). When the two dtypes agree they are one tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/amp/policy.h"
#include "mixprec/tensor/tensor.h"
#include "mixprec/tensor/tensor_map.h"

namespace mixprec::optim {

// What an optimizer may need to know about a parameter's layout.
struct ParamRole {
  // > 0: an attention query or key projection weight [heads * head_dim, d_model]; Adam-mini
  // keeps one second-moment value per head. 0: one per output row for 2-D (and higher: per
  // row of the last dimension) weights, one for the whole tensor for 1-D ones (adam_mini.h
  // has the partition).
  int64_t heads = 0;
  bool no_weight_decay = false;  // norms' gains, biases (decided by the model)
};

class Parameter {
 public:
  // `init` gives the initial values (any floating dtype), rounded once into the master; the
  // working copy is the master rounded, as after every step.
  Parameter(std::string name, const Tensor& init, const amp::MixedPrecisionPolicy& policy,
            ParamRole role = {});

  // A piece of a sharded parameter (dist/sharded_model.h): `master` is a 1-D view into this
  // rank's shard holding elements [element_offset, element_offset + numel) (row-major) of the
  // parameter `name` of shape `full_shape`. It is its own working copy: the forward pass uses
  // the unit's gathered weights instead.
  static std::shared_ptr<Parameter> shard_piece(std::string name, Tensor master,
                                                const amp::MixedPrecisionPolicy& policy,
                                                ParamRole role, Shape full_shape,
                                                int64_t element_offset);

  const std::string& name() const { return name_; }
  // The whole parameter's shape, and where this tensor starts in it (0 unless a shard piece).
  const Shape& full_shape() const { return full_shape_; }
  int64_t element_offset() const { return element_offset_; }
  bool is_shard_piece() const { return piece_; }
  const ParamRole& role() const { return role_; }
  const amp::MixedPrecisionPolicy& policy() const { return policy_; }

  Tensor& master() { return master_; }  // updated in place by optimizers
  const Tensor& master() const { return master_; }
  // The leaf the model uses (requires grad, gradient in reduce_dtype).
  const Tensor& value() const { return working_; }
  Tensor grad() const { return working_.grad(); }  // undefined when none accumulated
  void set_grad(const Tensor& g) { working_.set_grad(g); }
  void zero_grad() { working_.set_grad(Tensor()); }

  // Working copy <- master rounded to nearest even (a no-op when they are one tensor).
  // The optimizers here refresh inside their fused pass (same bits); call this after
  // changing the master any other way (loading a checkpoint, ...).
  void refresh();
  bool has_working_copy() const { return !master_.shares_storage_with(working_); }

 private:
  Parameter() = default;

  std::string name_;
  ParamRole role_;
  Shape full_shape_;
  int64_t element_offset_ = 0;
  bool piece_ = false;
  amp::MixedPrecisionPolicy policy_;
  Tensor master_, working_;
};

using ParamList = std::vector<std::shared_ptr<Parameter>>;

// Each parameter's working copy (value()) under its name: the parameter set as named tensors,
// for amp::cast_to_compute and the like.
TensorMap parameter_values(const ParamList& params);

}  // namespace mixprec::optim
