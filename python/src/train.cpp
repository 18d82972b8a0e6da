// train(): the trainer `mixprec train` runs, in this process, with the GIL released while it
// works. A Python callback receives every step's (and evaluation's) metrics as the dict of
// its metrics.jsonl line; an exception it raises, or Ctrl-C, ends the run.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "mixprec/config/train_config.h"
#include "mixprec/io/config_file.h"
#include "mixprec/train/trainer.h"

namespace mixprec::python {
namespace {

// Thrown through the trainer when a Python exception is pending on this thread (the
// callback's, or KeyboardInterrupt); train() raises it once the GIL is back.
struct PythonErrorPending {};

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::optional<std::string> run_dir;
  std::optional<int64_t> steps;
  std::string precision, data, progress, init_from;
  bool resume = false, detect_anomaly = false;
  int64_t stop_at_step = -1;
};

// The overrides `mixprec train`'s flags add, in its order, before the user's own.
std::vector<std::string> all_overrides(const TrainArgs& a) {
  return config::run_overrides({a.precision, a.data, a.run_dir.value_or(""), a.steps}, a.overrides);
}

// Borrowed handles: the hook is copied and destroyed with the GIL released, and train_run's
// own references outlive the trainer.
template <class Metrics>
std::function<void(const Metrics&)> python_hook(py::handle callback, py::handle loads) {
  return [callback, loads](const Metrics& m) {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw PythonErrorPending{};
    if (callback.is_none()) return;
    try {
      callback(loads(train::to_json_line(m)));
    } catch (py::error_already_set& e) {
      e.restore();
      throw PythonErrorPending{};
    }
  };
}

py::dict train_run(TrainArgs a, const py::object& callback) {
  const py::object loads = py::module_::import("json").attr("loads");
  train::TrainerOptions options;
  options.resume = a.resume;
  options.init_from = a.init_from;
  options.progress = train::parse_progress_style(a.progress);
  options.stop_at_step = a.stop_at_step;
  options.detect_anomaly = a.detect_anomaly;
  options.on_step = python_hook<train::StepMetrics>(callback, loads);
  options.on_eval = python_hook<train::EvalMetrics>(callback, loads);
  train::TrainSummary s;
  std::string run_dir;
  try {
    py::gil_scoped_release unlocked;
    train::Trainer trainer(config::load_config(a.config, all_overrides(a)), std::move(options));
    run_dir = trainer.config().run_dir;
    s = trainer.run();
  } catch (const PythonErrorPending&) {
    throw py::error_already_set();
  }
  py::list steps, evals;
  for (const train::StepMetrics& m : s.steps) steps.append(loads(train::to_json_line(m)));
  for (const train::EvalMetrics& m : s.evals) evals.append(loads(train::to_json_line(m)));
  py::dict out;
  out["run_dir"] = run_dir;
  out["start_step"] = s.start_step;
  out["end_step"] = s.end_step;
  out["tokens_per_s"] = s.tokens_per_s;
  out["unigram_entropy"] = s.unigram_entropy;
  out["bf16_kernel"] = s.bf16_kernel;
  out["last_checkpoint"] = s.last_checkpoint;
  out["final"] = steps.empty() ? py::object(py::none()) : py::object(steps[steps.size() - 1]);
  out["final_eval"] = evals.empty() ? py::object(py::none()) : py::object(evals[evals.size() - 1]);
  out["steps"] = steps;
  out["evals"] = evals;
  return out;
}

}  // namespace

void bind_train(py::module_& m) {
  m.def(
      "train",
      [](const std::string& config, const std::vector<std::string>& overrides,
         std::optional<std::string> run_dir, std::optional<int64_t> steps,
         const std::string& precision, const std::string& data, bool resume,
         const std::string& progress, const py::object& callback, int64_t stop_at_step,
         const std::string& init_from, bool detect_anomaly) {
        TrainArgs a{.config = config,
                    .overrides = overrides,
                    .run_dir = std::move(run_dir),
                    .steps = steps,
                    .precision = precision,
                    .data = data,
                    .progress = progress,
                    .init_from = init_from,
                    .resume = resume,
                    .detect_anomaly = detect_anomaly,
                    .stop_at_step = stop_at_step};
        return train_run(std::move(a), callback);
      },
      py::arg("config"), py::arg("overrides") = std::vector<std::string>{}, py::kw_only(),
      py::arg("run_dir") = py::none(), py::arg("steps") = py::none(), py::arg("precision") = "",
      py::arg("data") = "", py::arg("resume") = false, py::arg("progress") = "auto",
      py::arg("callback") = py::none(), py::arg("stop_at_step") = -1, py::arg("init_from") = "",
      py::arg("detect_anomaly") = false,
      "Trains as `mixprec train CONFIG --set OVERRIDE...` does and returns the run's metrics.");
  m.def(
      "config_toml",
      [](const std::string& path, const std::vector<std::string>& overrides) {
        return config::to_toml(config::load_config(path, overrides));
      },
      py::arg("config"), py::arg("overrides") = std::vector<std::string>{},
      "The config with overrides applied and every key resolved, as TOML.");
}

}  // namespace mixprec::python
