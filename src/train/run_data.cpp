// The run's dataset from its config.
#include "mixprec/train/run_data.h"

#include "mixprec/data/corpus.h"
#include "mixprec/error.h"

namespace mixprec::train {

data::TokenDataset open_run_data(const config::TrainConfig& c,
                                 const std::filesystem::path& cache_dir, data::WarningSink warn) {
  data::DatasetOptions o;
  if (c.training.data.empty()) {
    o.corpus = data::default_corpus();
  } else {
    MIXPREC_CHECK(std::filesystem::exists(c.training.data), "training.data",
                  "'" + c.training.data + "' does not exist");
    o.corpus.paths = {c.training.data};
  }
  o.cache_dir = cache_dir;
  o.validation_fraction = c.training.val_fraction;
  o.warn = std::move(warn);
  return data::TokenDataset::open(o);
}

}  // namespace mixprec::train
