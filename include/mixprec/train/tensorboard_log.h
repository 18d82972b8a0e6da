// TensorBoard event files ([metrics] enable_tensorboard, torchtitan's key): the scalars of
// metrics.jsonl, step by step, in <run_dir>/<save_tb_folder>/events.out.tfevents.<time>.<host>.
// Events are protobuf messages (TensorFlow's field numbers; train/tensorboard/event_encoding.h)
// in TFRecord framing; each record is flushed as written, so a killed run's file holds its finished
// steps and TensorBoard shows a live run.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace mixprec::train {

class TensorboardLog {
 public:
  // Creates `folder` and a new event file in it (a resumed run adds a file; TensorBoard reads
  // every file of the folder). Errors name the path.
  explicit TensorboardLog(const std::filesystem::path& folder);
  ~TensorboardLog();
  TensorboardLog(const TensorboardLog&) = delete;
  TensorboardLog& operator=(const TensorboardLog&) = delete;

  // One event of tagged scalars at `step` (values stored as f32, as TensorBoard's simple_value).
  void write(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);
  const std::filesystem::path& path() const { return path_; }

 private:
  void append(const std::string& event);
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

// The scalars of a metrics.jsonl line (a step's or an evaluation's), under its keys prefixed
// by its type ("train/loss", "eval/val_loss"; expert loads as train/expert_load/<block>/<expert>;
// booleans as 0/1, nulls as NaN): TensorBoard shows what the JSONL holds, from one list of keys.
std::vector<std::pair<std::string, double>> tensorboard_scalars(const std::string& json_line);

}  // namespace mixprec::train
