#include "mixprec/models/transformer/ffn_sizing.h"

#include <string>

#include "mixprec/core/error.h"

namespace mixprec::models {

int64_t llama_ffn_hidden_dim(int64_t d_model, int64_t multiple_of, double ffn_dim_multiplier) {
  MIXPREC_CHECK(d_model > 0 && multiple_of > 0, "llama_ffn_hidden_dim",
                "needs d_model > 0 and multiple_of > 0, got " + std::to_string(d_model) + ", " +
                    std::to_string(multiple_of));
  int64_t hidden = 2 * (4 * d_model) / 3;  // Python's int(2 * hidden / 3) for positive values
  if (ffn_dim_multiplier > 0)
    hidden = static_cast<int64_t>(ffn_dim_multiplier * static_cast<double>(hidden));
  return (hidden + multiple_of - 1) / multiple_of * multiple_of;
}

}  // namespace mixprec::models
