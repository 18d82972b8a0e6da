#include "mixprec/train/tensorboard_log.h"

#include <unistd.h>

#include <chrono>
#include <limits>
#include <nlohmann/json.hpp>

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

std::vector<std::pair<std::string, double>> tensorboard_scalars(const std::string& json_line) {
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(json_line);  // the line's order
  const std::string prefix = j.at("type").get<std::string>() + "/";
  std::vector<std::pair<std::string, double>> s;
  auto value = [](const nlohmann::ordered_json& v) {  // null: a non-finite number
    return v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>();
  };
  for (const auto& [key, v] : j.items()) {
    if (key == "type" || key == "step" || v.is_object() || v.is_string()) continue;
    if (v.is_array()) {  // expert_load: per block, per expert
      for (std::size_t b = 0; b < v.size(); ++b)
        for (std::size_t e = 0; e < v[b].size(); ++e)
          s.emplace_back(prefix + key + "/" + std::to_string(b) + "/" + std::to_string(e),
                         value(v[b][e]));
    } else {
      s.emplace_back(prefix + key, v.is_boolean() ? (v.get<bool>() ? 1.0 : 0.0) : value(v));
    }
  }
  return s;
}

}  // namespace mixprec::train
