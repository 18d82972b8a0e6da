#include "added_vocabulary.h"

#include "bpe_model.h"
#include "mixprec/core/utf8.h"
#include "unicode_text.h"

namespace mixprec::data::hf {
namespace {

// The last code point before `end` (valid UTF-8 assumed).
CodePoint code_point_before(std::string_view text, std::size_t end) {
  std::size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return code_point_at(text, start);
}

}  // namespace

void TokenTrie::add(const std::string& pattern, std::size_t token) {
  int node = 0;
  for (const char c : pattern) {
    const auto b = static_cast<unsigned char>(c);
    auto it = nodes_[static_cast<std::size_t>(node)].next.find(b);
    if (it == nodes_[static_cast<std::size_t>(node)].next.end()) {
      nodes_.push_back(Node{});
      it = nodes_[static_cast<std::size_t>(node)]
               .next.emplace(b, static_cast<int>(nodes_.size() - 1))
               .first;
    }
    node = it->second;
  }
  auto& slot = nodes_[static_cast<std::size_t>(node)].token;
  if (!slot) slot = token;  // the first of two equal strings wins
}

std::optional<std::pair<std::size_t, std::size_t>> TokenTrie::longest_at(std::string_view text,
                                                                         std::size_t at) const {
  std::optional<std::pair<std::size_t, std::size_t>> best;
  int node = 0;
  for (std::size_t i = at; i < text.size(); ++i) {
    const auto& next = nodes_[static_cast<std::size_t>(node)].next;
    const auto it = next.find(static_cast<unsigned char>(text[i]));
    if (it == next.end()) break;
    node = it->second;
    if (const auto t = nodes_[static_cast<std::size_t>(node)].token)
      best = std::make_pair(*t, i + 1 - at);
  }
  return best;
}

std::vector<Segment> AddedVocabulary::split(std::string_view text, const TokenTrie& trie) const {
  std::vector<Segment> out;
  if (trie.empty()) {
    if (!text.empty()) out.push_back({text, std::nullopt});
    return out;
  }
  std::size_t done = 0;  // text before this is in `out`
  std::size_t at = 0;
  while (at < text.size()) {
    const auto found = trie.longest_at(text, at);
    if (!found) {
      ++at;
      continue;
    }
    const AddedToken& token = tokens_[found->first];
    std::size_t start = at, stop = at + found->second;
    at = stop;  // the scan goes on after the match, whatever the strip rules take
    if (token.single_word) {
      const bool word_before = start > 0 && is_alphanumeric(code_point_before(text, start).value);
      const bool word_after =
          stop < text.size() && is_alphanumeric(code_point_at(text, stop).value);
      if (word_before || word_after) continue;
    }
    if (start < done) continue;  // inside what an rstrip already took
    if (token.lstrip) {
      std::size_t s = start;
      while (s > done) {
        const CodePoint cp = code_point_before(text, s);
        if (!is_whitespace(cp.value)) break;
        s -= cp.length;
      }
      start = s;
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        const CodePoint cp = code_point_at(text, stop);
        if (!is_whitespace(cp.value)) break;
        stop += cp.length;
      }
    }
    if (done < start) out.push_back({text.substr(done, start - done), std::nullopt});
    out.push_back({text.substr(start, stop - start), token.id});
    done = stop;
  }
  if (done < text.size()) out.push_back({text.substr(done), std::nullopt});
  return out;
}

const AddedToken* AddedVocabulary::by_id(int64_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int64_t> AddedVocabulary::id_of(std::string_view content) const {
  const auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

std::vector<AddedToken> read_added_tokens(const JsonField& list) {
  std::vector<AddedToken> tokens;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const JsonField t = list.at(i);
    AddedToken token;
    token.id = t["id"].integer(0, kMaxTokenId);
    token.content = t["content"].string();
    if (!is_valid_utf8(token.content)) t["content"].fail("is not valid UTF-8");
    token.special = t.boolean_or("special", false);
    token.normalized = t.boolean_or("normalized", !token.special);
    token.lstrip = t.boolean_or("lstrip", false);
    token.rstrip = t.boolean_or("rstrip", false);
    token.single_word = t.boolean_or("single_word", false);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

}  // namespace mixprec::data::hf
