#include "mixprec/dist/machine_fit.h"

#include <fmt/core.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/dist/memory_plan.h"
#include "mixprec/models/registry.h"

namespace mixprec::dist {
namespace {

struct Corner {
  double parameters, state, resident, activations, peak;
};

Corner plan_at(config::TrainConfig c, int world_size, int64_t layers, int64_t sequences) {
  c.model.n_layers = layers;
  // Every block alike (as the bilinear fit assumes): an MoE's first dense blocks count as MoE
  // blocks, about their size.
  c.model.moe.n_dense_layers = 0;
  c.training.batch_size = sequences * world_size;
  c.training.local_batch_size = 0;  // `sequences` is already one micro-batch
  const MemoryPlan p = plan_memory(c, world_size);
  const double state = static_cast<double>(p.master + p.working + p.grads + p.optimizer + p.comm);
  const double resident = static_cast<double>(p.master + p.optimizer);
  return {static_cast<double>(p.parameters), state, resident, static_cast<double>(p.activations),
          static_cast<double>(p.peak)};
}

// f at (layers, sequences) from its values at the corners (1,1), (2,1), (1,2), (2,2).
double bilinear(double f11, double f21, double f12, double f22, double layers, double sequences) {
  const double dl = layers - 1, ds = sequences - 1;
  return f11 + dl * (f21 - f11) + ds * (f12 - f11) + dl * ds * (f22 - f21 - f12 + f11);
}

std::string gigabytes(double bytes) {
  const double gb = bytes / 1e9;
  return gb < 10 ? fmt::format("{:.2f} GB", gb) : fmt::format("{:.0f} GB", gb);
}

std::string count(double n) {
  if (n >= 1e9) return fmt::format("{:.1f}B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.1f}M", n / 1e6);
  return fmt::format("{:.0f}", n);
}

}  // namespace

StepEstimate estimate_step(const config::TrainConfig& config, int world_size) {
  const Corner a = plan_at(config, world_size, 1, 1), b = plan_at(config, world_size, 2, 1),
               c = plan_at(config, world_size, 1, 2), d = plan_at(config, world_size, 2, 2);
  const double layers = static_cast<double>(config.model.n_layers);
  // One micro-batch's activations are live at a time (gradient accumulation).
  const double sequences =
      config.training.local_batch_size > 0
          ? static_cast<double>(config.training.local_batch_size)
          : static_cast<double>((config.training.batch_size + world_size - 1) / world_size);
  const auto at = [&](double Corner::*f) {
    return bilinear(a.*f, b.*f, c.*f, d.*f, layers, sequences);
  };
  // The walked peak is a maximum of affine terms (state-bound at small batches), so its
  // extrapolation can fall short; but at the end of the forward pass every activation is live
  // beside the masters and optimizer state, which bounds the peak from below.
  const double activations = at(&Corner::activations);
  const double walked = std::max(at(&Corner::peak), at(&Corner::resident) + activations);
  // The trainer draws the global batch on every rank (data/batches.h), then copies the rank's
  // rows (W > 1: a slice of the global batch otherwise); the walk counts one micro-batch's.
  const double seq = static_cast<double>(config.training.seq_len), id = 8;
  const double global = static_cast<double>(config.training.batch_size);
  const double rows = global / world_size;
  const double rows_bytes = 2 * rows * seq * id;
  const double drawn = 2 * global * seq * id + global * id + (world_size > 1 ? rows_bytes : 0);
  const double held_extra = rows_bytes - 2 * sequences * seq * id;  // 0 without accumulation
  const double peak = std::max(walked + held_extra, at(&Corner::state) + drawn);
  return {at(&Corner::parameters), at(&Corner::state), activations, drawn, peak};
}

std::size_t machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  std::size_t bytes = pages > 0 && page > 0
                          ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                          : SIZE_MAX;
  // cgroup v2 ("max" when unlimited), then v1.
  for (const char* limit_file :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(limit_file);
    unsigned long long limit = 0;
    if (in >> limit && limit > 0) bytes = std::min<std::size_t>(bytes, limit);
  }
  // An address-space limit (ulimit -v) caps what this process can allocate, whatever the RAM.
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    bytes = std::min<std::size_t>(bytes, static_cast<std::size_t>(as.rlim_cur));
  return bytes;
}

void check_fits_machine(const config::TrainConfig& config, int world_size, int ranks_here,
                        const std::string& where) {
  const StepEstimate e = estimate_step(config, world_size);
  const double need = e.peak_bytes * ranks_here;
  const double have = static_cast<double>(machine_memory_bytes());
  if (need <= have) return;
  const config::ModelConfig& m = config.model;
  const std::string model_keys = fmt::format(
      "{} parameters from model.n_layers = {}, model.d_model = {}, model.d_ff = {}, "
      "model.vocab_size = {}{}",
      count(e.parameters), m.n_layers, m.d_model, m.d_ff, m.vocab_size,
      models::model_spec(m.kind).size_keys(m));
  const std::string batch_keys = fmt::format(
      "training.batch_size = {} x training.seq_len = {}{}", config.training.batch_size,
      config.training.seq_len, world_size > 1 ? fmt::format(" over {} ranks", world_size) : "");
  // The larger part first: that is the key to lower.
  const std::string ids = fmt::format(
      "the global batch's token ids {} for training.batch_size = {} x training.seq_len = {} "
      "(inputs and targets, 8 bytes each, drawn whole on every rank)",
      gigabytes(e.batch_id_bytes), config.training.batch_size, config.training.seq_len);
  const std::string parts =
      e.batch_id_bytes > std::max(e.activation_bytes, e.state_bytes)
          ? fmt::format("{}; activations {}; weights, gradients and optimizer state {}", ids,
                        gigabytes(e.activation_bytes), gigabytes(e.state_bytes))
      : e.activation_bytes > e.state_bytes
          ? fmt::format("activations {} for {}; weights, gradients and optimizer state {} for {}",
                        gigabytes(e.activation_bytes), batch_keys, gigabytes(e.state_bytes),
                        model_keys)
          : fmt::format("weights, gradients and optimizer state {} for {}; activations {} for {}",
                        gigabytes(e.state_bytes), model_keys, gigabytes(e.activation_bytes),
                        batch_keys);
  throw Error(where, fmt::format("a training step needs about {} per rank{} ({}), more than this "
                                 "machine's {} of memory (see mixprec memory --config)",
                                 gigabytes(e.peak_bytes),
                                 ranks_here > 1 ? fmt::format(" x {} ranks here", ranks_here) : "",
                                 parts, gigabytes(have)));
}

}  // namespace mixprec::dist
