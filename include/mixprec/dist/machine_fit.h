// Whether a training config fits this machine's memory, asked before anything is built: a
// hostile or mistyped config (n_layers = 1e6, batch_size = 1e9) is refused in milliseconds,
// naming its keys, instead of running out of memory minutes later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "mixprec/config/train_config.h"

namespace mixprec::dist {

// plan_memory's figures for the config, in bytes per rank, at any size: plan_memory itself
// describes every layer, so these are extrapolated (in double: no overflow) from 1- and
// 2-layer models at 1 and 2 sequences per rank, all of whose terms are affine in each.
struct StepEstimate {
  double parameters = 0;
  double state_bytes = 0;  // masters, working copy, gradients, optimizer state, buffers
  double activation_bytes = 0;
  // The token ids the trainer reads for a step: the global batch's inputs and targets (i64
  // [batch_size, seq_len] each) and their row starts while the batch is drawn, plus this rank's
  // copy of its rows (W > 1), which stay live through every micro-batch of the step.
  double batch_id_bytes = 0;
  double peak_bytes = 0;  // the walked peak, the rows' extra, or state + batch_id_bytes
};
StepEstimate estimate_step(const config::TrainConfig& config, int world_size);

// Physical memory, or the cgroup's limit or the process's address-space limit (ulimit -v)
// when lower.
std::size_t machine_memory_bytes();

// Throws mixprec::Error (where = `where`) when `ranks_here` ranks of estimate_step's peak
// exceed machine_memory_bytes(), naming the model and batch keys and their values.
void check_fits_machine(const config::TrainConfig& config, int world_size, int ranks_here,
                        const std::string& where);

}  // namespace mixprec::dist
