#include "training_lines.h"

#include "mixprec/core/error.h"

namespace mixprec::cli {
namespace {

constexpr std::string_view kUnknownMarker = "\xE2\x96\x85";  // U+2585, sentencepiece's kUNKStr

// Where line `index` (0-based) of a document is: a text file's own line, or a line of the
// "text" of a JSONL line.
std::string line_place(const data::DocumentPlace& place, std::size_t index) {
  if (place.line == 0) return place.file.string() + " line " + std::to_string(index + 1);
  return place.describe() + " (line " + std::to_string(index + 1) + " of its \"text\")";
}

}  // namespace

void TrainingLines::add_document(std::string_view doc, const data::DocumentPlace& place) {
  std::size_t index = 0, begin = 0;
  while (begin < doc.size()) {
    std::size_t end = doc.find('\n', begin);
    if (end == std::string_view::npos) end = doc.size();
    const std::string_view line = doc.substr(begin, end - begin);
    begin = end + 1;
    if (line.empty()) {
      ++empty_;
    } else if (static_cast<int64_t>(line.size()) > max_line_bytes_) {
      if (too_long_++ == 0)
        first_too_long_ = line_place(place, index) + ", " + std::to_string(line.size()) + " bytes";
    } else if (line.find(kUnknownMarker) != std::string_view::npos) {
      if (marker_++ == 0) first_marker_ = line_place(place, index);
    } else {
      ++usable_;
    }
    ++index;
  }
}

std::string TrainingLines::too_long_summary() const {
  return std::to_string(too_long_) + " line(s) longer than sentencepiece's " +
         std::to_string(max_line_bytes_) + "-byte max_sentence_length (first: " + first_too_long_ +
         ")";
}

void TrainingLines::require_usable(const std::string& data) const {
  if (usable_ > 0) return;
  std::string why;
  const auto add = [&](const std::string& part) { why += (why.empty() ? "" : "; ") + part; };
  for (const std::string& w : skipped_files_) add(w);
  if (too_long_ > 0) add(too_long_summary());
  if (marker_ > 0)
    add(std::to_string(marker_) +
        " line(s) holding U+2585, which sentencepiece reserves (first: " + first_marker_ + ")");
  if (empty_ > 0) add(std::to_string(empty_) + " empty line(s)");
  if (why.empty()) add("it holds no text");
  throw Error("tokenizer train", "no line of " + data + " can train a tokenizer: " + why);
}

std::optional<std::string> TrainingLines::left_out() const {
  if (too_long_ == 0 && marker_ == 0) return std::nullopt;
  std::string w = "tokenizer train: left out of training: ";
  if (too_long_ > 0) w += too_long_summary();
  if (too_long_ > 0 && marker_ > 0) w += "; ";
  if (marker_ > 0)
    w += std::to_string(marker_) + " line(s) holding U+2585 (first: " + first_marker_ + ")";
  return w;
}

}  // namespace mixprec::cli
