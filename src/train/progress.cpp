// The progress bar / progress lines.
#include "mixprec/train/progress.h"

#include <unistd.h>

#include <fmt/format.h>
#include <cmath>

#include "mixprec/core/error.h"

namespace mixprec::train {
namespace {

constexpr int kBarWidth = 20;

std::string rate(double tokens_per_s) {
  if (tokens_per_s >= 1e6) return fmt::format("{:.2f}M", tokens_per_s / 1e6);
  if (tokens_per_s >= 1e3) return fmt::format("{:.2f}k", tokens_per_s / 1e3);
  return fmt::format("{:.0f}", tokens_per_s);
}

std::string bar(int64_t done, int64_t total) {
  const int filled =
      total > 0 ? static_cast<int>(std::min<int64_t>(done, total) * kBarWidth / total) : 0;
  std::string b(static_cast<std::size_t>(kBarWidth), ' ');
  for (int i = 0; i < filled; ++i) b[static_cast<std::size_t>(i)] = '=';
  if (filled < kBarWidth) b[static_cast<std::size_t>(filled)] = '>';
  return "[" + b + "]";
}

}  // namespace

ProgressStyle parse_progress_style(const std::string& name) {
  if (name == "auto") return ProgressStyle::automatic;
  if (name == "bar") return ProgressStyle::bar;
  if (name == "lines") return ProgressStyle::lines;
  if (name == "quiet") return ProgressStyle::quiet;
  throw Error("progress", "'" + name + "' is not one of auto, bar, lines, quiet");
}

std::string format_bytes(std::size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

Progress::Progress(ProgressStyle style, int64_t total_steps, int64_t log_every, std::FILE* out)
    : style_(style),
      total_steps_(total_steps),
      log_every_(log_every > 0 ? log_every : 1),
      out_(out) {
  if (style_ == ProgressStyle::automatic)
    style_ = isatty(fileno(out_)) ? ProgressStyle::bar : ProgressStyle::lines;
}

void Progress::write_line(const std::string& text, bool in_place, bool even_quiet) {
  if (style_ == ProgressStyle::quiet && !even_quiet) return;
  if (bar_drawn_) std::fputs("\r\033[K", out_);  // clear the bar's line
  std::fputs(text.c_str(), out_);
  if (!in_place) std::fputc('\n', out_);
  bar_drawn_ = in_place;
  std::fflush(out_);
}

void Progress::step(const StepMetrics& m) {
  const double step_s = m.step_ms / 1e3;
  step_s_ema_ = step_s_ema_ == 0 ? step_s : 0.9 * step_s_ema_ + 0.1 * step_s;
  const bool last = m.step >= total_steps_;
  if (style_ == ProgressStyle::lines && !(m.step == 1 || last || m.step % log_every_ == 0)) return;
  const double eta = static_cast<double>(total_steps_ - m.step) * step_s_ema_;
  const int width = static_cast<int>(std::to_string(total_steps_).size());
  std::string text = fmt::format("step {:>{}}/{}", m.step, width, total_steps_);
  if (style_ == ProgressStyle::bar)
    text += fmt::format(" {} {:3}%", bar(m.step, total_steps_),
                        total_steps_ > 0 ? m.step * 100 / total_steps_ : 100);
  text += fmt::format(" | loss {:.4f} | {} tok/s | lr {:.2e} | scale {:g} | skipped {} | mem {}",
                      m.loss, rate(m.tokens_per_s), m.lr, m.loss_scale, m.skipped_total,
                      format_bytes(m.peak_bytes));
  if (!last) text += " | ETA " + format_duration(eta);
  write_line(text, style_ == ProgressStyle::bar && !last);
}

void Progress::eval(const EvalMetrics& m) {
  std::string line = fmt::format("eval at step {}: val_loss {:.4f} | val_ppl {:.3f} | {} tokens",
                                 m.step, m.val_loss, m.val_ppl, m.val_tokens);
  if (m.val_loss_per_byte > 0) line += fmt::format(" | {:.4f} nats/byte", m.val_loss_per_byte);
  write_line(line, false);
}

void Progress::message(const std::string& line) {
  write_line(line, false);
}

void Progress::warning(const std::string& line) {
  write_line("warning: " + line, false, /*even_quiet=*/true);
}

void Progress::finish() {
  if (bar_drawn_ && style_ != ProgressStyle::quiet) std::fputc('\n', out_);
  bar_drawn_ = false;
  std::fflush(out_);
}

}  // namespace mixprec::train
