// tokenizer.json `model` of type BPE: the vocabulary, the merges by rank, and tokenizers'
// merge order (lowest rank first, leftmost among equals, by a priority queue), with
// ignore_merges, byte_fallback (<0xNN> pieces), unk_token / fuse_unk,
// continuing_subword_prefix and end_of_word_suffix.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "json_field.h"

namespace mixprec::data::hf {

// Ids above this are refused: real vocabularies are below a million, and the id table is sized
// by the largest id.
inline constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

class BpeModel {
 public:
  explicit BpeModel(const JsonField& spec);

  // Appends the ids of one pre-tokenized piece.
  void encode(std::string_view piece, std::vector<int64_t>& ids) const;
  std::optional<int64_t> token_to_id(std::string_view token) const;
  // nullptr for ids the vocabulary does not hold.
  const std::string* id_to_token(int64_t id) const;
  int64_t size_with_holes() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  struct MergeTarget {
    uint32_t rank;
    uint32_t id;
  };
  struct Symbol {
    uint32_t id;
    int prev;
    int next;
    std::size_t bytes;
  };
  std::vector<Symbol> initial_symbols(std::string_view piece) const;
  void merge_all(std::vector<Symbol>& symbols) const;
  const MergeTarget* merge_of(uint32_t left, uint32_t right) const;

  std::unordered_map<std::string, uint32_t> vocab_;
  std::vector<std::string> tokens_;  // by id; "" with known_[id] false for a hole
  std::vector<bool> known_;
  std::unordered_map<uint64_t, MergeTarget> merges_;
  std::optional<std::string> unk_token_;
  std::string continuing_prefix_;
  std::string end_suffix_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::optional<uint32_t> byte_ids_[256];  // <0xNN> when byte_fallback
};

}  // namespace mixprec::data::hf
