// RunSummary rows -> an aligned text table or a Markdown table (same columns, same cells).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "mixprec/report/run_summary.h"

namespace mixprec::report {
namespace {

struct Column {
  const char* header;
  bool numeric;  // right-aligned
};

constexpr Column kColumns[] = {{"run", false},       {"precision", false}, {"steps", true},
                               {"train loss", true}, {"val loss", true},   {"best val", true},
                               {"tokens/s", true},   {"peak MiB", true},   {"skipped", true},
                               {"underflow", true},  {"loss scale", true}};
constexpr std::size_t kColumnCount = std::size(kColumns);

std::string printf_cell(const char* format, double v) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::vector<std::string> cells(const RunSummary& s) {
  std::string best = printf_cell("%.4f", s.best_val_loss);
  if (s.best_val_step >= 0) best.append(" (").append(std::to_string(s.best_val_step)).append(")");
  return {s.name.empty() ? "-" : s.name,
          s.precision.empty() ? "-" : s.precision,
          std::to_string(s.steps),
          printf_cell("%.4f", s.final_train_loss),
          printf_cell("%.4f", s.final_val_loss),
          best,
          printf_cell("%.0f", s.median_tokens_per_s),
          s.peak_bytes > 0 ? printf_cell("%.1f", static_cast<double>(s.peak_bytes) / 0x1p20) : "-",
          std::to_string(s.skipped_steps),
          printf_cell("%.2e", s.mean_underflow_fraction),
          printf_cell("%g", s.final_loss_scale)};
}

std::string pad(const std::string& text, std::size_t width, bool right) {
  const std::string fill(width > text.size() ? width - text.size() : 0, ' ');
  return right ? fill + text : text + fill;
}

}  // namespace

std::string format_summary_table(const std::vector<RunSummary>& runs) {
  std::vector<std::vector<std::string>> rows;
  for (const RunSummary& s : runs) rows.push_back(cells(s));
  std::size_t width[kColumnCount];
  for (std::size_t c = 0; c < kColumnCount; ++c) {
    width[c] = std::string(kColumns[c].header).size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](auto&& cell_text) {
    std::string out;
    for (std::size_t c = 0; c < kColumnCount; ++c) {
      if (c > 0) out += "  ";
      out += pad(cell_text(c), width[c], kColumns[c].numeric);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line([](std::size_t c) { return std::string(kColumns[c].header); });
  out += line([&](std::size_t c) { return std::string(width[c], '-'); });
  for (const auto& row : rows) out += line([&](std::size_t c) { return row[c]; });
  return out;
}

std::string format_summary_markdown(const std::vector<RunSummary>& runs) {
  auto escape = [](const std::string& text) {  // a '|' in a run name would split the cell
    std::string out;
    for (char ch : text) {
      if (ch == '|') out += '\\';
      out += ch;
    }
    return out;
  };
  std::string out = "|", rule = "|";
  for (const Column& c : kColumns) {
    out.append(" ").append(c.header).append(" |");
    rule += c.numeric ? " ---: |" : " --- |";
  }
  out.append("\n").append(rule).append("\n");
  for (const RunSummary& s : runs) {
    out += "|";
    for (const std::string& cell : cells(s)) out.append(" ").append(escape(cell)).append(" |");
    out += "\n";
  }
  return out;
}

}  // namespace mixprec::report
