#include "pre_tokenizers.h"

#include <functional>

#include "byte_level.h"
#include "pattern.h"
#include "split_behavior.h"
#include "unicode_text.h"

namespace mixprec::data::hf {
namespace {

// Each character for which `is_delimiter` holds is one match (tokenizers' char patterns).
std::vector<Match> char_matches(std::string_view text,
                                const std::function<bool(char32_t)>& is_delimiter) {
  std::vector<Match> out;
  for (std::size_t i = 0; i < text.size();) {
    const CodePoint cp = code_point_at(text, i);
    if (is_delimiter(cp.value)) out.push_back({i, i + cp.length});
    i += cp.length;
  }
  return out;
}

void emit(const Piece& piece, const std::vector<Match>& spans, std::vector<Piece>& out) {
  for (const Match& s : spans)
    out.push_back({piece.text.substr(s.begin, s.end - s.begin), piece.at_start && s.begin == 0});
}

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void split(Piece piece, std::vector<Piece>& out) const override {
    std::vector<Piece> pieces{std::move(piece)};
    for (const auto& s : steps_) pieces = s->split_all(std::move(pieces));
    for (auto& p : pieces) out.push_back(std::move(p));
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(const JsonField& spec)
      : pattern_(spec["pattern"]),
        behavior_(
            parse_split_behavior(spec["behavior"].string(), spec.file(), spec.key() + ".behavior")),
        invert_(spec.boolean_or("invert", false)) {}
  void split(Piece piece, std::vector<Piece>& out) const override {
    emit(piece,
         split_by_matches(piece.text.size(), pattern_.find_all(piece.text), behavior_, invert_),
         out);
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class CharSplitPreTokenizer final : public PreTokenizer {
 public:
  CharSplitPreTokenizer(std::function<bool(char32_t)> is_delimiter, SplitBehavior behavior)
      : is_delimiter_(std::move(is_delimiter)), behavior_(behavior) {}
  void split(Piece piece, std::vector<Piece>& out) const override {
    emit(piece,
         split_by_matches(piece.text.size(), char_matches(piece.text, is_delimiter_), behavior_),
         out);
  }

 private:
  std::function<bool(char32_t)> is_delimiter_;
  SplitBehavior behavior_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(const JsonField& spec)
      : add_prefix_space_(spec.boolean_or("add_prefix_space", true)) {
    if (spec.boolean_or("use_regex", true))
      regex_ = std::make_unique<OnigRegex>(std::string(kGpt2SplitRegex), "tokenizer GPT-2 regex");
  }
  void split(Piece piece, std::vector<Piece>& out) const override {
    if (add_prefix_space_ && (piece.text.empty() || piece.text[0] != ' '))
      piece.text = " " + piece.text;
    std::vector<Piece> parts;
    if (regex_)
      emit(piece,
           split_by_matches(piece.text.size(), regex_->find_all(piece.text),
                            SplitBehavior::isolated),
           parts);
    else if (!piece.text.empty())
      parts.push_back(std::move(piece));
    for (Piece& p : parts) out.push_back({to_byte_level(p.text), p.at_start});
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<OnigRegex> regex_;
};

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  enum class Prepend { always, first, never };
  MetaspacePreTokenizer(const JsonField& spec) {
    const std::string replacement = spec["replacement"].string();
    if (replacement.empty() || code_point_at(replacement, 0).length != replacement.size())
      spec["replacement"].fail("must be one character");
    replacement_ = replacement;
    if (const auto scheme = spec.find("prepend_scheme")) {
      const std::string s = scheme->string();
      if (s == "always")
        prepend_ = Prepend::always;
      else if (s == "first")
        prepend_ = Prepend::first;
      else if (s == "never")
        prepend_ = Prepend::never;
      else
        scheme->fail("'" + s + "' is not one of always, first, never");
    } else {  // files from before prepend_scheme
      prepend_ = spec.boolean_or("add_prefix_space", true) ? Prepend::always : Prepend::never;
    }
    split_ = spec.boolean_or("split", true);
  }
  void split(Piece piece, std::vector<Piece>& out) const override {
    std::string text;
    for (const char c : piece.text) {
      if (c == ' ')
        text += replacement_;
      else
        text += c;
    }
    const bool starts = text.compare(0, replacement_.size(), replacement_) == 0;
    if (!starts && (prepend_ == Prepend::always || (prepend_ == Prepend::first && piece.at_start)))
      text = replacement_ + text;
    Piece replaced{std::move(text), piece.at_start};
    if (!split_) {
      if (!replaced.text.empty()) out.push_back(std::move(replaced));
      return;
    }
    std::vector<Match> matches;
    for (std::size_t at = replaced.text.find(replacement_); at != std::string::npos;
         at = replaced.text.find(replacement_, at + replacement_.size()))
      matches.push_back({at, at + replacement_.size()});
    emit(replaced, split_by_matches(replaced.text.size(), matches, SplitBehavior::merged_with_next),
         out);
  }

 private:
  std::string replacement_;
  Prepend prepend_ = Prepend::always;
  bool split_ = true;
};

bool is_ascii_digit(char32_t c) {
  return c >= '0' && c <= '9';
}

}  // namespace

std::vector<Piece> PreTokenizer::split_all(std::vector<Piece> pieces) const {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (Piece& p : pieces) split(std::move(p), out);
  return out;
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JsonField& spec) {
  const std::string type = spec["type"].string();
  if (type == "Sequence") {
    const JsonField list = spec["pretokenizers"];
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (std::size_t i = 0; i < list.size(); ++i) steps.push_back(make_pre_tokenizer(list.at(i)));
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  if (type == "Split") return std::make_unique<SplitPreTokenizer>(spec);
  if (type == "ByteLevel") return std::make_unique<ByteLevelPreTokenizer>(spec);
  if (type == "Metaspace") return std::make_unique<MetaspacePreTokenizer>(spec);
  if (type == "Digits")
    return std::make_unique<CharSplitPreTokenizer>(
        is_ascii_digit, spec.boolean_or("individual_digits", false) ? SplitBehavior::isolated
                                                                    : SplitBehavior::contiguous);
  if (type == "WhitespaceSplit")
    return std::make_unique<CharSplitPreTokenizer>(is_whitespace, SplitBehavior::removed);
  if (type == "Punctuation") {
    const auto behavior = spec.find("behavior");
    return std::make_unique<CharSplitPreTokenizer>(
        is_punctuation, behavior
                            ? parse_split_behavior(behavior->string(), spec.file(), behavior->key())
                            : SplitBehavior::isolated);
  }
  if (type == "CharDelimiterSplit") {
    const std::string d = spec["delimiter"].string();
    if (d.empty() || code_point_at(d, 0).length != d.size())
      spec["delimiter"].fail("must be one character");
    const char32_t delimiter = code_point_at(d, 0).value;
    return std::make_unique<CharSplitPreTokenizer>(
        [delimiter](char32_t c) { return c == delimiter; }, SplitBehavior::removed);
  }
  if (type == "Whitespace" || type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    if (type == "Whitespace") {
      // tokenizers: the text outside \w+|[^\w\s]+ removed.
      const nlohmann::json split = {{"type", "Split"},
                                    {"pattern", {{"Regex", R"(\w+|[^\w\s]+)"}}},
                                    {"behavior", "Removed"},
                                    {"invert", true}};
      steps.push_back(
          std::make_unique<SplitPreTokenizer>(JsonField(split, spec.file(), spec.key())));
    } else {
      steps.push_back(
          std::make_unique<CharSplitPreTokenizer>(is_whitespace, SplitBehavior::removed));
      steps.push_back(
          std::make_unique<CharSplitPreTokenizer>(is_punctuation, SplitBehavior::isolated));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  spec["type"].fail("pre_tokenizer type '" + type +
                    "' is not supported (supported: Sequence, Split, ByteLevel, Metaspace, Digits, "
                    "Whitespace, WhitespaceSplit, Punctuation, BertPreTokenizer, "
                    "CharDelimiterSplit)");
}

}  // namespace mixprec::data::hf
