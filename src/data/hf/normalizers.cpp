#include "normalizers.h"

#include <vector>

#include "pattern.h"
#include "unicode_text.h"

namespace mixprec::data::hf {
namespace {

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  std::string normalize(std::string text) const override {
    for (const auto& s : steps_) text = s->normalize(std::move(text));
    return text;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

class FormNormalizer final : public Normalizer {
 public:
  explicit FormNormalizer(NormalForm form) : form_(form) {}
  std::string normalize(std::string text) const override { return normalize_form(text, form_); }

 private:
  NormalForm form_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  std::string normalize(std::string text) const override { return to_lowercase(text); }
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string text) const override {
    std::size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        const CodePoint cp = code_point_at(text, begin);
        if (!is_whitespace(cp.value)) break;
        begin += cp.length;
      }
    }
    if (right_) {
      while (end > begin) {
        std::size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        if (!is_whitespace(code_point_at(text, start).value)) break;
        end = start;
      }
    }
    return text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class StripAccentsNormalizer final : public Normalizer {
 public:
  std::string normalize(std::string text) const override {
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
      const CodePoint cp = code_point_at(text, i);
      if (!is_nonspacing_mark(cp.value)) out.append(text, i, cp.length);
      i += cp.length;
    }
    return out;
  }
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string text) const override {
    return text.empty() ? text : prefix_ + text;  // tokenizers leaves an empty text empty
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(const JsonField& pattern, std::string content)
      : pattern_(pattern), content_(std::move(content)) {}
  std::string normalize(std::string text) const override {
    return pattern_.replace_all(text, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const JsonField& spec) {
  const std::string type = spec["type"].string();
  if (type == "Sequence") {
    const JsonField list = spec["normalizers"];
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (std::size_t i = 0; i < list.size(); ++i) steps.push_back(make_normalizer(list.at(i)));
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  if (type == "NFC") return std::make_unique<FormNormalizer>(NormalForm::nfc);
  if (type == "NFD") return std::make_unique<FormNormalizer>(NormalForm::nfd);
  if (type == "NFKC") return std::make_unique<FormNormalizer>(NormalForm::nfkc);
  if (type == "NFKD") return std::make_unique<FormNormalizer>(NormalForm::nfkd);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Strip")
    return std::make_unique<StripNormalizer>(spec.boolean_or("strip_left", true),
                                             spec.boolean_or("strip_right", true));
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(spec["prepend"].string());
  if (type == "Replace")
    return std::make_unique<ReplaceNormalizer>(spec["pattern"], spec["content"].string());
  spec["type"].fail("normalizer type '" + type +
                    "' is not supported (supported: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, "
                    "Strip, StripAccents, Prepend, Replace)");
}

}  // namespace mixprec::data::hf
