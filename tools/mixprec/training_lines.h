// What sentencepiece's trainer will make of the corpus lines `tokenizer train` hands it. The
// trainer silently drops empty lines, lines longer than its max_sentence_length and lines
// holding U+2585 (its unknown-character marker), and with none left fails with a bare
// "trainer_interface.cc(428) [!sentences_.empty()]". Counting them first gives an error that
// names the data and what is wrong with it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/data/documents.h"

namespace mixprec::cli {

class TrainingLines {
 public:
  explicit TrainingLines(int64_t max_line_bytes) : max_line_bytes_(max_line_bytes) {}
  void add_document(std::string_view doc, const data::DocumentPlace& place);
  void add_skipped_file(const std::string& warning) { skipped_files_.push_back(warning); }
  int64_t usable() const { return usable_; }
  // Throws mixprec::Error naming `data` and why no line is usable, when none is.
  void require_usable(const std::string& data) const;
  // A warning about the lines left out of training, if any.
  std::optional<std::string> left_out() const;

 private:
  std::string too_long_summary() const;
  int64_t max_line_bytes_;
  int64_t usable_ = 0, empty_ = 0, too_long_ = 0, marker_ = 0;
  std::string first_too_long_, first_marker_;  // "PATH line N (M bytes)"
  std::vector<std::string> skipped_files_;
};

}  // namespace mixprec::cli
