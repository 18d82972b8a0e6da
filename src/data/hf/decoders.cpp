#include "decoders.h"

#include <optional>

#include "byte_level.h"
#include "mixprec/core/utf8.h"
#include "pattern.h"
#include "unicode_text.h"

namespace mixprec::data::hf {
namespace {

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps)
      : steps_(std::move(steps)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (const auto& s : steps_) tokens = s->decode_chain(std::move(tokens));
    return tokens;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

// All tokens' characters back to bytes, one text (a token with a character outside the
// alphabet contributes its own UTF-8), invalid UTF-8 replaced.
class ByteLevelDecoder final : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      std::string mapped;
      bool all = true;
      for (std::size_t i = 0; i < t.size() && all;) {
        const CodePoint cp = code_point_at(t, i);
        const auto b = byte_level_byte(cp.value);
        if (b) mapped += static_cast<char>(*b);
        all = b.has_value();
        i += cp.length;
      }
      bytes += all ? mapped : t;
    }
    return {utf8_lossy(bytes)};
  }
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(const JsonField& pattern, std::string content)
      : pattern_(pattern), content_(std::move(content)) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (std::string& t : tokens) t = pattern_.replace_all(t, content_);
    return tokens;
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// <0xNN> tokens to their bytes, a run of them at a time; a run that is not UTF-8 becomes one
// U+FFFD per byte.
class ByteFallbackDecoder final : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    std::string run;
    std::size_t run_tokens = 0;
    auto flush = [&] {
      if (run_tokens == 0) return;
      if (is_valid_utf8(run)) {
        out.push_back(run);
      } else {
        for (std::size_t i = 0; i < run_tokens; ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      run.clear();
      run_tokens = 0;
    };
    for (std::string& t : tokens) {
      if (const auto byte = byte_token(t)) {
        run += static_cast<char>(*byte);
        ++run_tokens;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    return out;
  }

 private:
  // Rust's u8::from_str_radix(&token[3..5], 16) on "<0x??>" (a '+' sign is accepted too).
  static std::optional<unsigned char> byte_token(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return std::nullopt;
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (t[3] == '+') {
      const int lo = hex(t[4]);
      return lo < 0 ? std::nullopt : std::optional<unsigned char>(static_cast<unsigned char>(lo));
    }
    const int hi = hex(t[3]), lo = hex(t[4]);
    if (hi < 0 || lo < 0) return std::nullopt;
    return static_cast<unsigned char>(hi * 16 + lo);
  }
};

class FuseDecoder final : public Decoder {
 public:
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    return {all};
  }
};

// Up to `start` leading and `stop` trailing copies of one character off each token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, std::size_t start, std::size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (std::string& t : tokens) {
      std::vector<CodePoint> chars;
      std::vector<std::size_t> offsets;
      for (std::size_t i = 0; i < t.size();) {
        chars.push_back(code_point_at(t, i));
        offsets.push_back(i);
        i += chars.back().length;
      }
      std::size_t begin = 0, end = chars.size();
      while (begin < start_ && begin < chars.size() && chars[begin].value == content_) ++begin;
      for (std::size_t k = 0; k < stop_ && end > begin && chars[end - 1].value == content_; ++k)
        --end;
      const std::size_t from = begin < chars.size() ? offsets[begin] : t.size();
      const std::size_t to = end < chars.size() ? offsets[end] : t.size();
      t = t.substr(from, to - from);
    }
    return tokens;
  }

 private:
  char32_t content_;
  std::size_t start_, stop_;
};

// The replacement character back to spaces, except in the first token, where tokenizers drops
// every one of them (the first is the one the pre-tokenizer put in front) unless nothing was
// prepended.
class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  std::vector<std::string> decode_chain(std::vector<std::string> tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (std::size_t k = 0; k < t.size();) {
        if (t.compare(k, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && strip_first_)) out += ' ';
          k += replacement_.size();
        } else {
          out += t[k++];
        }
      }
      tokens[i] = std::move(out);
    }
    return tokens;
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

char32_t one_character(const JsonField& field) {
  const std::string s = field.string();
  if (s.empty() || code_point_at(s, 0).length != s.size()) field.fail("must be one character");
  return code_point_at(s, 0).value;
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const JsonField& spec) {
  const std::string type = spec["type"].string();
  if (type == "Sequence") {
    const JsonField list = spec["decoders"];
    std::vector<std::unique_ptr<Decoder>> steps;
    for (std::size_t i = 0; i < list.size(); ++i) steps.push_back(make_decoder(list.at(i)));
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Replace")
    return std::make_unique<ReplaceDecoder>(spec["pattern"], spec["content"].string());
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip")
    return std::make_unique<StripDecoder>(
        one_character(spec["content"]), static_cast<std::size_t>(spec["start"].integer(0, 1 << 20)),
        static_cast<std::size_t>(spec["stop"].integer(0, 1 << 20)));
  if (type == "Metaspace") {
    one_character(spec["replacement"]);
    bool strip_first = true;
    if (const auto scheme = spec.find("prepend_scheme"))
      strip_first = scheme->string() != "never";
    else
      strip_first = spec.boolean_or("add_prefix_space", true);
    return std::make_unique<MetaspaceDecoder>(spec["replacement"].string(), strip_first);
  }
  spec["type"].fail("decoder type '" + type +
                    "' is not supported (supported: ByteLevel, Metaspace, Replace, ByteFallback, "
                    "Fuse, Strip, Sequence)");
}

}  // namespace mixprec::data::hf
