// The fully sharded runtime (see sharded_model.h).
#include "mixprec/dist/sharded_model.h"

#include <cmath>
#include <functional>

#include "fp8_gather.h"
#include "mixprec/amp/fp8_weights.h"
#include "mixprec/autograd/function.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/backend/backend.h"
#include "mixprec/core/error.h"
#include "mixprec/dist/sharded_state.h"
#include "mixprec/optim/adam_mini.h"

namespace mixprec::dist {
namespace {

constexpr const char* kShardedModel = "ShardedModel";

// An identity in the graph whose backward first runs `hook`: at a block's output it runs
// before any of the block's backward (gather the weights again), at its input after all of it
// (every gradient of the block is complete: reduce-scatter them).
class UnitBoundary final : public Node {
 public:
  UnitBoundary(std::function<void()> hook, const char* name)
      : hook_(std::move(hook)), name_(name) {}
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    hook_();
    return {grads.at(0)};
  }
  const char* name() const override { return name_; }

 private:
  std::function<void()> hook_;
  const char* name_;
};

Tensor through_boundary(const Tensor& x, std::function<void()> hook, const char* name) {
  if (!any_requires_grad({x})) return x;
  auto node = std::make_shared<UnitBoundary>(std::move(hook), name);
  connect(*node, {x});
  Tensor out = x.detach();
  set_history(out, node);
  return out;
}

}  // namespace

ShardedModel::ShardedModel(models::Model& model, Communicator& comm,
                           const amp::MixedPrecisionPolicy& policy, ShardingOptions options)
    : model_(model),
      comm_(comm),
      policy_(policy),
      options_(options),
      layout_(model, comm.size()),
      units_(layout_.units().size()) {
  for (std::size_t u = 0; u < layout_.units().size(); ++u)
    for (const ParamSlot& p : layout_.units()[u].params) param_unit_.emplace(p.name, u);
  if (options_.fp8_all_gather) {
    MIXPREC_CHECK(policy_.param_dtype == policy_.compute_dtype, kShardedModel,
                  std::string("FP8 all-gather needs the param dtype to be the compute dtype (") +
                      dtype_name(policy_.param_dtype) + " params, " +
                      dtype_name(policy_.compute_dtype) +
                      " compute): a linear's weight would otherwise be cast from bytes that "
                      "never arrive");
    fp8_ = std::make_unique<detail::Fp8GatherPlan>(
        detail::plan_fp8_gather(layout_, model_, *options_.fp8_all_gather, options_.fp8_skip));
  }
  model_.set_unit_hooks(this);
}

ShardedModel::~ShardedModel() {
  for (std::size_t u = 0; u < units_.size(); ++u) forget_fp8_leaves(u);
  if (model_.unit_hooks() == this) model_.set_unit_hooks(nullptr);
}

bool ShardedModel::has_fp8(std::size_t u) const {
  return fp8_ && fp8_->units[u].any();
}

void ShardedModel::refresh_fp8_scales(std::size_t first, std::size_t last) {
  std::size_t a = first;
  while (a < last && !has_fp8(a)) ++a;
  if (a == last) return;
  // The units' grids are consecutive in the plan's amax vector: send only [lo, hi).
  const int64_t lo = fp8_->units[a].weights.front().grid_offset;
  int64_t hi = lo;
  for (std::size_t u = a; u < last; ++u)
    for (const auto* casts : {&fp8_->units[u].weights, &fp8_->units[u].weights_t})
      for (const detail::Fp8Weight& w : *casts)
        hi = std::max(hi, w.grid_offset + w.grid_rows * w.grid_cols);
  NoGradGuard no_grad;
  Tensor amax = Tensor::zeros({hi - lo}, DType::i64);  // these units' grids only
  const std::span<int64_t> bits(amax.data<int64_t>(), static_cast<std::size_t>(hi - lo));
  for (std::size_t u = a; u < last; ++u)
    if (has_fp8(u))
      detail::partial_amaxes(layout_.units()[u], fp8_->units[u], comm_.rank(), units_[u].master,
                             bits, lo);
  comm_.all_reduce(amax, ReduceOp::max);  // integer max of f32 bits: NaN wins, exact
  for (std::size_t u = a; u < last; ++u)
    if (has_fp8(u)) {
      units_[u].fp8[0].scales = detail::fp8_scales(fp8_->units[u].weights, bits, lo);
      units_[u].fp8[1].scales = detail::fp8_scales(fp8_->units[u].weights_t, bits, lo);
    }
}

void ShardedModel::materialize(uint64_t seed) {
  NoGradGuard no_grad;
  const DType mdt = policy_.master_dtype();
  pieces_.clear();
  piece_unit_.clear();
  piece_offset_.clear();
  piece_slot_.clear();
  used_.assign(units_.size(), {});
  for (std::size_t u = 0; u < units_.size(); ++u)
    used_[u].assign(layout_.units()[u].params.size(), 0);
  for (std::size_t u = 0; u < units_.size(); ++u) {
    const UnitLayout& lay = layout_.units()[u];
    Unit& unit = units_[u];
    unit = Unit{};
    unit.master = Tensor::zeros({lay.shard}, mdt);
    for (const ShardPiece& piece : lay.pieces(comm_.rank())) {
      const ParamSlot& slot = lay.params[piece.slot];
      const models::ParamSpec& spec = model_.parameters().spec(slot.name);
      Tensor view = unit.master.slice(0, piece.shard_offset, piece.shard_offset + piece.numel());
      // f64 -> f32 -> master dtype, as Parameter rounds its initial values.
      view.copy_from(models::initial_values_range(spec, seed, piece.begin, piece.end));
      pieces_.push_back(optim::Parameter::shard_piece(slot.name, view, policy_, slot.role,
                                                      slot.shape, piece.begin));
      piece_unit_.push_back(u);
      piece_offset_.push_back(piece.shard_offset);
      piece_slot_.push_back(piece.slot);
    }
  }
}

std::size_t ShardedModel::unit_of(const std::string& unit_name) const {
  for (std::size_t u = 0; u < units_.size(); ++u)
    if (layout_.units()[u].name == unit_name) return u;
  throw Error(kShardedModel, "no unit named '" + unit_name + "'");
}

ShardedModel::Casts ShardedModel::backward_casts(std::size_t u) const {
  // A block unit ("blocks.<l>") recomputes its forward in backward when layer l is checkpointed.
  const std::string& name = layout_.units()[u].name;
  bool recomputes = false;
  if (name.starts_with("blocks.")) {
    const std::string layer = name.substr(7);
    recomputes =
        !layer.empty() && layer.find_first_not_of("0123456789") == std::string::npos &&
        model_.activation_checkpoint().block(std::stoll(layer)) != models::BlockCheckpoint::none;
  }
  return {.output = recomputes, .grad_input = true};
}

bool ShardedModel::two_casts(std::size_t u) const {
  return has_fp8(u) && fp8_->units[u].two_casts();
}

ShardedModel::Unit::Fp8Cast& ShardedModel::fp8_cast(std::size_t u, amp::WeightCast cast) {
  const bool own = cast == amp::WeightCast::grad_input && two_casts(u);
  return units_[u].fp8[own ? 1 : 0];
}

const ShardedModel::Unit::Fp8Cast& ShardedModel::fp8_cast(std::size_t u,
                                                          amp::WeightCast cast) const {
  return const_cast<ShardedModel&>(*this).fp8_cast(u, cast);
}

namespace {

bool bytes_present(const Tensor& t) {
  return t.defined() && t.storage()->resident();
}

// The casts `casts` names, as a list.
std::vector<amp::WeightCast> cast_list(bool output, bool grad_input) {
  std::vector<amp::WeightCast> out;
  if (output) out.push_back(amp::WeightCast::output);
  if (grad_input) out.push_back(amp::WeightCast::grad_input);
  return out;
}

}  // namespace

bool ShardedModel::resident(std::size_t u, Casts casts) const {
  const Unit& unit = units_[u];
  if (unit.leaves.empty() || unit.gather || unit.fp8[0].gather || unit.fp8[1].gather ||
      !bytes_present(unit.gathered))
    return false;
  if (!has_fp8(u)) return true;
  for (const amp::WeightCast c : cast_list(casts.output, casts.grad_input))
    if (!bytes_present(fp8_cast(u, c).gathered)) return false;
  return true;
}

void ShardedModel::start_fp8_gather(std::size_t u, amp::WeightCast cast) {
  Unit& unit = units_[u];
  const detail::Fp8UnitPlan& plan = fp8_->units[u];
  if (unit.fp8[0].scales.empty()) refresh_fp8_scales(u, u + 1);  // once per step
  const DType element = plan.weights.front().spec.element;
  for (std::size_t i = 0; i < (plan.two_casts() ? 2 : 1); ++i)
    if (!unit.fp8[i].gathered.defined()) {  // the casts' buffers, bytes only while gathered
      unit.fp8[i].gathered = Tensor::empty({plan.fp8_total}, element);
      unit.fp8[i].gathered.storage()->release();
    }
  Unit::Fp8Cast& part = fp8_cast(u, cast);
  part.send = Tensor::empty({plan.fp8_count[static_cast<std::size_t>(comm_.rank())]}, element);
  detail::pack_fp8_sends(layout_.units()[u], plan, cast, comm_.rank(), unit.master, part.scales,
                         part.send);
  part.gathered.storage()->reacquire();
  part.gather = comm_.start_all_gather_v(part.send, part.gathered, plan.fp8_count);
}

void ShardedModel::start_rest_gather(std::size_t u) {
  Unit& unit = units_[u];
  const detail::Fp8UnitPlan& plan = fp8_->units[u];
  unit.send =
      Tensor::empty({plan.rest_count[static_cast<std::size_t>(comm_.rank())]}, policy_.param_dtype);
  detail::pack_rest_sends(layout_.units()[u], plan, comm_.rank(), unit.master, unit.send);
  if (!unit.gathered.defined())
    unit.gathered = Tensor::empty({plan.rest_total}, policy_.param_dtype);
  unit.gathered.storage()->reacquire();
  if (plan.rest_total > 0)
    unit.gather = comm_.start_all_gather_v(unit.send, unit.gathered, plan.rest_count);
}

void ShardedModel::start_gather(std::size_t u, Casts casts) {
  Unit& unit = units_[u];
  MIXPREC_CHECK(unit.master.defined(), kShardedModel, "materialize() was not called");
  NoGradGuard no_grad;
  if (has_fp8(u)) {  // each part that is neither there nor on its way
    if (!unit.gather && !bytes_present(unit.gathered)) start_rest_gather(u);
    for (const amp::WeightCast c : cast_list(casts.output, casts.grad_input))
      if (!fp8_cast(u, c).gather && !bytes_present(fp8_cast(u, c).gathered)) start_fp8_gather(u, c);
    return;
  }
  if (unit.gather || resident(u)) return;  // in flight, or there already
  // The working copy is the master rounded to nearest even, as Parameter::refresh makes it.
  unit.send = policy_.param_dtype == unit.master.dtype() ? unit.master
                                                         : unit.master.to(policy_.param_dtype);
  // Into the same bytes the unit's leaves (and the graph's saved views of them) point at.
  if (!unit.gathered.defined())
    unit.gathered = Tensor::empty({layout_.units()[u].padded}, policy_.param_dtype);
  unit.gathered.storage()->reacquire();
  unit.gather = comm_.start_all_gather(unit.send, unit.gathered);
}

void ShardedModel::wait_gather(std::size_t u, Casts casts) {
  Unit& unit = units_[u];
  if (resident(u, casts)) return;
  start_gather(u, casts);
  for (std::unique_ptr<Request>* r : {&unit.gather, &unit.fp8[0].gather, &unit.fp8[1].gather})
    if (*r) {
      (*r)->wait();
      r->reset();
    }
  unit.send = unit.fp8[0].send = unit.fp8[1].send = Tensor();
  if (!unit.leaves.empty()) return;  // gathered again for the backward: same leaves
  make_leaves(u);
}

void ShardedModel::make_leaves(std::size_t u) {
  // Fresh leaves each step: their gradient accumulators are then created after the unit's
  // boundary nodes, which the backward order relies on (sharded_model.h).
  Unit& unit = units_[u];
  const std::vector<ParamSlot>& params = layout_.units()[u].params;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const ParamSlot& p = params[i];
    const int fp8 = has_fp8(u) ? fp8_->units[u].weight_of_slot[i] : -1;
    Tensor leaf;
    if (fp8 >= 0) {
      leaf = amp::fp8_weight_placeholder(p.shape, policy_.param_dtype);
      const auto w = static_cast<std::size_t>(fp8);
      const detail::Fp8UnitPlan& plan = fp8_->units[u];
      amp::file_fp8_weight(leaf, detail::gathered_weight(plan.weights[w], unit.fp8[0].gathered,
                                                         unit.fp8[0].scales[w]));
      if (plan.two_casts())
        amp::file_fp8_weight(
            leaf,
            detail::gathered_weight(plan.weights_t[w], unit.fp8[1].gathered, unit.fp8[1].scales[w]),
            amp::WeightCast::grad_input);
    } else {
      const int64_t at = has_fp8(u) ? fp8_->units[u].rest_offset[i] : p.offset;
      leaf = unit.gathered.as_strided(p.shape, contiguous_strides(p.shape), at);
    }
    if (training_) leaf.set_requires_grad(true, policy_.reduce_dtype);
    unit.leaves.emplace(p.name, std::move(leaf));
  }
}

void ShardedModel::forget_fp8_leaves(std::size_t u) {
  if (!has_fp8(u)) return;
  for (const detail::Fp8Weight& w : fp8_->units[u].weights) {
    const auto it = units_[u].leaves.find(layout_.units()[u].params[w.slot].name);
    if (it != units_[u].leaves.end()) amp::forget_fp8_weight(it->second);
  }
}

void ShardedModel::release_gathered(std::size_t u, bool drop_leaves) {
  Unit& unit = units_[u];
  for (std::unique_ptr<Request>* r : {&unit.gather, &unit.fp8[0].gather, &unit.fp8[1].gather})
    if (*r) {
      (*r)->wait();
      r->reset();
    }
  unit.send = unit.fp8[0].send = unit.fp8[1].send = Tensor();
  // The graph may still hold views of these bytes; they are gathered again before its use.
  for (Tensor* t : {&unit.gathered, &unit.fp8[0].gathered, &unit.fp8[1].gathered})
    if (t->defined()) t->storage()->release();
  if (!drop_leaves) return;
  forget_fp8_leaves(u);
  // The graph outlives the step (the loss and the router logits hold it) and with it the
  // leaves' autograd state: drop their gradient views, or every unit's full gradient buffer
  // would stay alive until the next forward.
  for (auto& [name, leaf] : unit.leaves)
    if (leaf.requires_grad()) leaf.set_grad(Tensor());
  unit.leaves.clear();
}

void ShardedModel::set_grad_views(std::size_t u) {
  Unit& unit = units_[u];
  const UnitLayout& lay = layout_.units()[u];
  unit.full_grad = Tensor::zeros({lay.padded}, policy_.reduce_dtype);
  for (const ParamSlot& p : lay.params)
    unit.leaves.at(p.name).set_grad(
        unit.full_grad.as_strided(p.shape, contiguous_strides(p.shape), p.offset));
}

void ShardedModel::begin_step(bool training) {
  MIXPREC_CHECK(!in_step_, kShardedModel,
                "begin_step() twice without finish_backward()/end_forward()");
  in_step_ = true;
  training_ = training && GradMode::is_enabled();
  for (Unit& unit : units_) {
    unit.grad_shard = Tensor();
    unit.reduced = false;
    for (Unit::Fp8Cast& c : unit.fp8)
      c.scales.clear();  // the masters changed: this step's come from their amaxes
  }
  if (fp8_ && options_.precompute_fp8_scales) refresh_fp8_scales(0, units_.size());
  wait_gather(0);
  if (training_) set_grad_views(0);  // the root's gradients accumulate over the whole backward
  if (options_.prefetch && units_.size() > 1) start_gather(1);
}

const Tensor& ShardedModel::weight(std::string_view name) {
  const auto it = param_unit_.find(name);
  MIXPREC_CHECK(it != param_unit_.end(), kShardedModel,
                "no parameter named '" + std::string(name) + "'");
  Unit& unit = units_[it->second];
  // The linears read FP8 weights' bytes through their filed forms: a released one is an
  // Error there. Here: the leaves and the other parameters' bytes.
  MIXPREC_CHECK(resident(it->second, {.output = false}), kShardedModel,
                "weight '" + std::string(name) + "' used while its unit '" +
                    layout_.units()[it->second].name +
                    "' is not gathered (call begin_step() before the forward)");
  return unit.leaves.at(std::string(name));
}

Tensor ShardedModel::enter_unit(const std::string& unit_name, const Tensor& x) {
  MIXPREC_CHECK(in_step_, kShardedModel, "forward without begin_step()");
  const std::size_t u = unit_of(unit_name);
  wait_gather(u);
  if (options_.prefetch && u + 1 < units_.size()) start_gather(u + 1);
  if (!training_) return x;
  return through_boundary(
      x, [this, u] { on_backward_done(u); }, "UnitBackwardDone");
}

void ShardedModel::sum_counts_over_ranks(std::vector<int64_t>& counts) {
  Tensor buffer = Tensor::from_vector(counts, {static_cast<int64_t>(counts.size())});
  comm_.all_reduce(buffer);  // integers: exact, the same at every world size
  const int64_t* summed = buffer.data<int64_t>();
  std::copy(summed, summed + counts.size(), counts.begin());
}

Tensor ShardedModel::leave_unit(const std::string& unit_name, const Tensor& y) {
  const std::size_t u = unit_of(unit_name);
  if (u == 0) {  // the root stays gathered for the backward; note which weights it read
    if (training_) {
      note_used(0);
      // Its backward comes next, with no boundary of its own: grad_input's casts now.
      if (two_casts(0)) wait_gather(0, {.output = true, .grad_input = true});
    }
    return y;
  }
  // The last block's backward comes first: keep it rather than free and gather it again.
  if (options_.reshard_after_forward && u + 1 < units_.size()) release_gathered(u, false);
  if (!training_) return y;
  return through_boundary(
      y, [this, u] { on_backward_begin(u); }, "UnitBackwardBegin");
}

void ShardedModel::on_backward_begin(std::size_t u) {
  wait_gather(u, backward_casts(u));
  // The graph's leaves are this unit's leaves: their gradients accumulate straight into the
  // unit's flat gradient buffer.
  set_grad_views(u);
  if (options_.prefetch && u > 1) start_gather(u - 1, backward_casts(u - 1));
}

void ShardedModel::note_used(std::size_t u) {
  // A leaf some op of this step's graph read has a gradient accumulator (alive while the
  // graph is: noted at the end of forward for the root, during backward for a block); one no
  // op read (an MoE expert no token chose) gets no gradient, as an unsharded parameter would
  // not.
  const UnitLayout& lay = layout_.units()[u];
  for (std::size_t i = 0; i < lay.params.size(); ++i) {
    const AutogradMeta* meta = units_[u].leaves.at(lay.params[i].name).autograd_meta();
    used_[u][i] = meta && !meta->grad_accumulator.expired() ? 1 : 0;
  }
}

void ShardedModel::on_backward_done(std::size_t u) {
  note_used(u);
  start_reduce(u);
  release_gathered(u, true);
}

void ShardedModel::finish_reduce(std::size_t u) {
  Unit& unit = units_[u];
  if (!unit.reduce) return;
  unit.reduce->wait();
  unit.reduce.reset();
  unit.full_grad = Tensor();
}

void ShardedModel::start_reduce(std::size_t u) {
  Unit& unit = units_[u];
  MIXPREC_CHECK(!unit.reduced, kShardedModel,
                "unit '" + layout_.units()[u].name + "' reduced twice in one step");
  // At most one reduce-scatter in flight: the previous unit's buffers go before this one's
  // are added (memory_plan.h counts one).
  for (std::size_t other = 0; other < units_.size(); ++other) finish_reduce(other);
  unit.grad_shard = Tensor::empty({layout_.units()[u].shard}, policy_.reduce_dtype);
  unit.reduce = comm_.start_reduce_scatter(unit.full_grad, unit.grad_shard);
  unit.reduced = true;
}

void ShardedModel::finish_backward() {
  MIXPREC_CHECK(in_step_ && training_, kShardedModel, "finish_backward() without begin_step(true)");
  start_reduce(0);
  NoGradGuard no_grad;
  const float inv_world = 1.0f / static_cast<float>(comm_.size());
  for (std::size_t u = 0; u < units_.size(); ++u) {
    Unit& unit = units_[u];
    MIXPREC_CHECK(unit.reduced, kShardedModel,
                  "the backward never reached unit '" + layout_.units()[u].name + "'");
    finish_reduce(u);
    // In place, one pass (the non-finite test it returns is the scaler's job later).
    if (comm_.size() > 1)
      backend::current().unscale_and_check(std::span<const Tensor>(&unit.grad_shard, 1), inv_world);
  }
  for (std::size_t u = 0; u < units_.size(); ++u) release_gathered(u, true);
  // Which parameters any rank's graph used: one small all-reduce for all units.
  std::vector<int64_t> flags;
  for (const std::vector<int64_t>& unit_flags : used_)
    flags.insert(flags.end(), unit_flags.begin(), unit_flags.end());
  Tensor used = Tensor::from_vector(flags);
  if (comm_.size() > 1) comm_.all_reduce(used, ReduceOp::max);
  std::vector<std::size_t> first_flag(units_.size(), 0);
  for (std::size_t u = 1; u < units_.size(); ++u)
    first_flag[u] = first_flag[u - 1] + used_[u - 1].size();
  // A piece that already holds a gradient (an earlier micro-batch of this step: gradient
  // accumulation) adds this one's reduced shard to it; the optimizer's zero_grad clears them.
  for (std::size_t i = 0; i < pieces_.size(); ++i) {
    const std::size_t u = piece_unit_[i];
    const int64_t at = piece_offset_[i], n = pieces_[i]->master().numel();
    const Tensor earlier = pieces_[i]->grad();
    if (used.data<int64_t>()[first_flag[u] + piece_slot_[i]] == 0) {
      if (!earlier.defined()) pieces_[i]->zero_grad();
      continue;
    }
    const Tensor shard = units_[u].grad_shard.slice(0, at, at + n);
    if (earlier.defined())
      backend::current().accumulate_into(earlier, shard);
    else
      pieces_[i]->set_grad(shard);
  }
  for (Unit& unit : units_) unit.grad_shard = Tensor();  // the pieces hold their views
  in_step_ = false;
}

void ShardedModel::end_forward() {
  MIXPREC_CHECK(in_step_ && !training_, kShardedModel, "end_forward() after begin_step(true)");
  for (std::size_t u = 0; u < units_.size(); ++u) release_gathered(u, true);
  in_step_ = false;
}

void ShardedModel::sum_cut_blocks(std::vector<optim::CutBlock>& blocks) const {
  // One slot per (unit, shard boundary): a cut block is filed under the first boundary it
  // crosses, which every rank holding a part of it computes alike.
  const int64_t W = comm_.size();
  Tensor sums = Tensor::zeros({static_cast<int64_t>(units_.size()) * std::max<int64_t>(W - 1, 1)},
                              DType::f64);
  auto slot_of = [&](const optim::CutBlock& c) {
    for (std::size_t i = 0; i < pieces_.size(); ++i) {
      if (pieces_[i].get() != c.param) continue;
      const UnitLayout& lay = layout_.units()[piece_unit_[i]];
      const int64_t flat = lay.params[piece_slot_[i]].offset + c.first_element;
      const int64_t boundary = flat / lay.shard + 1;
      MIXPREC_CHECK(boundary >= 1 && boundary < W, kShardedModel,
                    "block at element " + std::to_string(c.first_element) + " of " +
                        c.param->name() + " is not cut by a shard boundary");
      return static_cast<int64_t>(piece_unit_[i]) * (W - 1) + boundary - 1;
    }
    throw Error(kShardedModel, "cut block of a parameter this rank does not hold");
  };
  for (const optim::CutBlock& c : blocks) sums.data<double>()[slot_of(c)] += c.sum_sq;
  if (W > 1) comm_.all_reduce(sums, ReduceOp::sum);
  for (optim::CutBlock& c : blocks) c.sum_sq = sums.data<double>()[slot_of(c)];
}

void ShardedModel::join(optim::Optimizer& optimizer) {
  if (auto* adam_mini = dynamic_cast<optim::AdamMini*>(&optimizer))
    adam_mini->set_sum_cut_blocks([this](std::vector<optim::CutBlock>& b) { sum_cut_blocks(b); });
}

void ShardedModel::join(amp::GradScaler& scaler) {
  scaler.set_found_inf_reduction([comm = &comm_](bool found) { return any_rank(*comm, found); });
}

double ShardedModel::global_norm(double local_norm) {
  std::vector<double> sq{local_norm * local_norm};
  sum_over_ranks(comm_, sq);
  return std::sqrt(sq[0]);
}

io::TensorMap ShardedModel::full_training_state(optim::Optimizer* optimizer,
                                                amp::GradScaler* scaler) const {
  io::TensorMap full = gather_training_state(*this, optimizer, scaler);
  // Buffers are whole on every rank (updated from all-reduced statistics).
  for (const auto& [name, b] : model_.buffers()) full[io::kBufferPrefix + name] = b.clone();
  return full;
}

io::TensorMap ShardedModel::local_training_state(const io::TensorMap& full) const {
  return shard_training_state(full, *this);
}

optim::ParamList ShardedModel::full_parameters() const {
  const io::TensorMap full = gather_training_state(*this, nullptr, nullptr);
  optim::ParamList whole;
  for (const models::ParamSpec& spec : model_.parameters().specs())
    whole.push_back(std::make_shared<optim::Parameter>(
        spec.name, full.at(io::kModelPrefix + spec.name), amp::preset("fp32")));
  return whole;
}

std::string ShardedModel::describe() const {
  std::string text = "fully sharded over " + std::to_string(comm_.size()) + " ranks (" +
                     comm_.backend() + "): " + std::to_string(layout_.shard_numel()) +
                     " parameters per rank in " + std::to_string(layout_.units().size()) + " units";
  if (!fp8_) return text;
  int64_t weights = 0, elements = 0;
  for (const detail::Fp8UnitPlan& u : fp8_->units)
    for (const detail::Fp8Weight& w : u.weights) {
      ++weights;
      elements += w.rows * w.cols;
    }
  return text + "; FP8 all-gather of " + std::to_string(weights) + " linear weights (" +
         std::to_string(elements) + " of " + std::to_string(layout_.numel()) + " parameters) as " +
         backend::describe(options_.fp8_all_gather->output.b) +
         (amp::weight_cast_serves_both_products(*options_.fp8_all_gather)
              ? ""
              : " (output) and " + backend::describe(options_.fp8_all_gather->grad_input.b) +
                    " (grad_input, gathered for the backward)") +
         (options_.precompute_fp8_scales ? ", scales precomputed in one all-reduce per forward"
                                         : ", one amax all-reduce per unit");
}

Tensor ShardedModel::gather_unit(const Tensor& shard) const {
  Tensor full = Tensor::empty({shard.numel() * comm_.size()}, shard.dtype());
  comm_.all_gather(shard.contiguous(), full);
  return full;
}

}  // namespace mixprec::dist
