#include "mixprec/train/tensorboard_log.h"

#include <unistd.h>

#include <chrono>

#include "event_encoding.h"
#include "mixprec/core/error.h"
#include "tfrecord.h"

namespace mixprec::train {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

TensorboardLog::TensorboardLog(const std::filesystem::path& folder) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  MIXPREC_CHECK(!ec, "tensorboard " + folder.string(), "cannot create the folder: " + ec.message());
  const auto seconds = static_cast<int64_t>(now_seconds());
  path_ = folder / ("events.out.tfevents." + std::to_string(seconds) + "." + host_name() + "." +
                    std::to_string(::getpid()));
  file_ = std::fopen(path_.c_str(), "wb");
  MIXPREC_CHECK(file_ != nullptr, "tensorboard " + path_.string(), "cannot create the event file");
  append(tensorboard::file_version_event(now_seconds(), "brain.Event:2"));  // files start so
}

TensorboardLog::~TensorboardLog() {
  if (file_) std::fclose(file_);
}

void TensorboardLog::append(const std::string& event) {
  const std::string record = tensorboard::tfrecord(event);
  MIXPREC_CHECK(std::fwrite(record.data(), 1, record.size(), file_) == record.size() &&
                    std::fflush(file_) == 0,
                "tensorboard " + path_.string(), "cannot write (disk full?)");
}

void TensorboardLog::write(int64_t step,
                           const std::vector<std::pair<std::string, double>>& scalars) {
  append(tensorboard::scalars_event(now_seconds(), step, scalars));
}

std::vector<std::pair<std::string, double>> tensorboard_scalars(const StepMetrics& m) {
  std::vector<std::pair<std::string, double>> s{{"train/loss", m.loss}, {"train/ce", m.ce}};
  for (const auto& [name, value] : m.terms) s.emplace_back("train/" + name, value);
  const std::pair<const char*, double> rest[] = {
      {"train/lr", m.lr},
      {"train/grad_norm", m.grad_norm},
      {"train/loss_scale", m.loss_scale},
      {"train/skipped", m.skipped ? 1.0 : 0.0},
      {"train/skipped_total", static_cast<double>(m.skipped_total)},
      {"train/tokens", static_cast<double>(m.tokens)},
      {"train/tokens_per_s", m.tokens_per_s},
      {"train/step_ms", m.step_ms},
      {"train/elapsed_s", m.elapsed_s},
      {"train/memory_bytes", static_cast<double>(m.memory_bytes)},
      {"train/peak_bytes", static_cast<double>(m.peak_bytes)},
      {"train/reserved_bytes", static_cast<double>(m.reserved_bytes)},
      {"train/rss_bytes", static_cast<double>(m.rss_bytes)},
      {"train/comm_bytes", static_cast<double>(m.comm_bytes)},
      {"train/underflow_fraction", m.underflow_fraction},
      {"train/overflow_fraction", m.overflow_fraction}};
  for (const auto& [tag, value] : rest) s.emplace_back(tag, value);
  if (!std::isnan(m.fp8_saturated_fraction)) {
    s.emplace_back("train/fp8_saturated_fraction", m.fp8_saturated_fraction);
    s.emplace_back("train/fp8_flushed_fraction", m.fp8_flushed_fraction);
  }
  for (std::size_t b = 0; b < m.expert_load.size(); ++b)
    for (std::size_t e = 0; e < m.expert_load[b].size(); ++e)
      s.emplace_back("train/expert_load/" + std::to_string(b) + "/" + std::to_string(e),
                     m.expert_load[b][e]);
  return s;
}

std::vector<std::pair<std::string, double>> tensorboard_scalars(const EvalMetrics& m) {
  std::vector<std::pair<std::string, double>> s{
      {"eval/val_loss", m.val_loss},
      {"eval/val_ppl", m.val_ppl},
      {"eval/val_tokens", static_cast<double>(m.val_tokens)}};
  if (m.val_loss_per_byte > 0) s.emplace_back("eval/val_loss_per_byte", m.val_loss_per_byte);
  return s;
}

}  // namespace mixprec::train
