// tokenizer.json `added_tokens`: strings matched in the text before the model sees it (special
// ones like <|begin_of_text|> and plain added ones), leftmost-longest as tokenizers' Aho-Corasick
// matcher finds them; those with normalized = false on the raw text first, the others on the
// normalized stretches between, with tokenizers' lstrip / rstrip / single_word rules.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "json_field.h"

namespace mixprec::data::hf {

struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool special = false;
  bool normalized = true;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// A stretch of text: a matched added token (`id` set) or text for the model.
struct Segment {
  std::string_view text;
  std::optional<int64_t> id;
};

// The strings of one matching pass, in a trie so a scan costs one walk per start position.
class TokenTrie {
 public:
  void add(const std::string& pattern, std::size_t token);
  // The longest pattern starting at text[at]: its token index and length.
  std::optional<std::pair<std::size_t, std::size_t>> longest_at(std::string_view text,
                                                                std::size_t at) const;
  bool empty() const { return nodes_.size() <= 1; }

 private:
  struct Node {
    std::map<unsigned char, int> next;
    std::optional<std::size_t> token;
  };
  std::vector<Node> nodes_{Node{}};
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // `normalize` turns a normalized token's content into what it matches in normalized text.
  template <class Normalize>
  void build(std::vector<AddedToken> tokens, Normalize normalize) {
    tokens_ = std::move(tokens);
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
      by_id_[tokens_[i].id] = i;
      by_content_.emplace(tokens_[i].content, tokens_[i].id);  // the first of equal ones
      if (tokens_[i].content.empty()) continue;
      if (tokens_[i].normalized)
        normalized_.add(normalize(tokens_[i].content), i);
      else
        raw_.add(tokens_[i].content, i);
    }
  }

  // Splits `text` with the raw (normalized = false) tokens.
  std::vector<Segment> split_raw(std::string_view text) const { return split(text, raw_); }
  // Splits already normalized text with the normalized tokens.
  std::vector<Segment> split_normalized(std::string_view text) const {
    return split(text, normalized_);
  }

  const AddedToken* by_id(int64_t id) const;
  std::optional<int64_t> id_of(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  std::vector<Segment> split(std::string_view text, const TokenTrie& trie) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int64_t, std::size_t> by_id_;
  std::unordered_map<std::string, int64_t> by_content_;
  TokenTrie raw_, normalized_;
};

// Reads `added_tokens` (each {id, content, special, normalized, lstrip, rstrip, single_word}).
std::vector<AddedToken> read_added_tokens(const JsonField& list);

}  // namespace mixprec::data::hf
