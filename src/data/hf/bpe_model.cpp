#include "bpe_model.h"

#include <queue>

#include "mixprec/core/error.h"
#include "mixprec/core/utf8.h"
#include "unicode_text.h"

namespace mixprec::data::hf {
namespace {

uint64_t pair_key(uint32_t left, uint32_t right) {
  return (uint64_t{left} << 32) | right;
}

std::string byte_piece(unsigned b) {  // Rust's format!("<{b:#04X}>")
  static constexpr char kHex[] = "0123456789ABCDEF";
  return std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
}

}  // namespace

BpeModel::BpeModel(const JsonField& spec) {
  if (const auto dropout = spec.find("dropout"); dropout && dropout->number() != 0.0)
    dropout->fail(
        "BPE dropout (a training-time regularizer) makes encoding random; mixprec "
        "encodes deterministically: set it to null");
  const JsonField vocab = spec["vocab"];
  if (!vocab.is_object()) vocab.fail("is not an object of token: id");
  vocab_.reserve(vocab.json().size());
  for (const auto& [token, id_json] : vocab.json().items()) {
    const JsonField id_field(id_json, vocab.file(),
                             vocab.key() + "['" + quote_prefix(token, 40) + "']");
    const auto id = static_cast<uint32_t>(id_field.integer(0, kMaxTokenId));
    if (!is_valid_utf8(token)) id_field.fail("the token is not valid UTF-8");
    vocab_[token] = id;
    if (id >= tokens_.size()) {
      tokens_.resize(id + 1);
      known_.resize(id + 1, false);
    }
    tokens_[id] = token;
    known_[id] = true;
  }
  if (const auto unk = spec.find("unk_token")) {
    unk_token_ = unk->string();
  }
  continuing_prefix_ = spec.string_or("continuing_subword_prefix", "");
  end_suffix_ = spec.string_or("end_of_word_suffix", "");
  fuse_unk_ = spec.boolean_or("fuse_unk", false);
  byte_fallback_ = spec.boolean_or("byte_fallback", false);
  ignore_merges_ = spec.boolean_or("ignore_merges", false);
  if (byte_fallback_)
    for (unsigned b = 0; b < 256; ++b)
      if (const auto it = vocab_.find(byte_piece(b)); it != vocab_.end()) byte_ids_[b] = it->second;

  const JsonField merges = spec["merges"];
  const std::size_t n = merges.size();
  merges_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const JsonField m = merges.at(i);
    std::string left, right;
    if (m.is_string()) {  // "a b", split at the first space
      const std::string s = m.string();
      const auto space = s.find(' ');
      if (space == std::string::npos)
        m.fail("'" + quote_prefix(s, 40) + "' is not two tokens separated by a space");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else {
      if (m.size() != 2) m.fail("is not a pair of tokens");
      left = m.at(0).string();
      right = m.at(1).string();
    }
    auto id_of = [&](const std::string& token) {
      const auto it = vocab_.find(token);
      if (it == vocab_.end()) m.fail("'" + quote_prefix(token, 40) + "' is not in model.vocab");
      return it->second;
    };
    const uint32_t a = id_of(left), b = id_of(right);
    if (right.size() < continuing_prefix_.size() ||
        right.compare(0, continuing_prefix_.size(), continuing_prefix_) != 0)
      m.fail("'" + quote_prefix(right, 40) + "' does not start with continuing_subword_prefix");
    const uint32_t merged = id_of(left + right.substr(continuing_prefix_.size()));
    merges_[pair_key(a, b)] = {static_cast<uint32_t>(i), merged};  // a repeat takes the later rank
  }
  if (unk_token_ && !vocab_.count(*unk_token_))
    spec["unk_token"].fail("'" + quote_prefix(*unk_token_, 40) + "' is not in model.vocab");
}

std::optional<int64_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int64_t id) const {
  if (id < 0 || id >= static_cast<int64_t>(tokens_.size()) || !known_[static_cast<std::size_t>(id)])
    return nullptr;
  return &tokens_[static_cast<std::size_t>(id)];
}

const BpeModel::MergeTarget* BpeModel::merge_of(uint32_t left, uint32_t right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

std::vector<BpeModel::Symbol> BpeModel::initial_symbols(std::string_view piece) const {
  std::vector<Symbol> symbols;
  bool unk = false;  // a pending unknown piece: its id and bytes
  uint32_t unk_id = 0;
  std::size_t unk_bytes = 0;
  auto add = [&](uint32_t id, std::size_t bytes) {
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, bytes});
  };
  std::string s;
  for (std::size_t i = 0; i < piece.size();) {
    const std::size_t length = code_point_at(piece, i).length;
    const bool first = i == 0, last = i + length == piece.size();
    s.assign(first ? "" : continuing_prefix_);
    s.append(piece.substr(i, length));
    if (last) s.append(end_suffix_);
    i += length;
    if (const auto it = vocab_.find(s); it != vocab_.end()) {
      if (unk) add(unk_id, unk_bytes);
      unk = false;
      add(it->second, length);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (const char c : s) all = all && byte_ids_[static_cast<unsigned char>(c)].has_value();
      if (all) {
        for (const char c : s) add(*byte_ids_[static_cast<unsigned char>(c)], 1);
        continue;
      }
    }
    if (unk_token_) {
      if (unk && fuse_unk_) {
        unk_bytes += length;
      } else {
        if (unk) add(unk_id, unk_bytes);
        unk = true;
        unk_id = vocab_.at(*unk_token_);
        unk_bytes = length;
      }
    }
  }
  if (unk) add(unk_id, unk_bytes);
  if (!symbols.empty()) symbols.back().next = -1;
  return symbols;
}

void BpeModel::merge_all(std::vector<Symbol>& symbols) const {
  struct Candidate {
    uint32_t rank;
    int pos;
    uint32_t id;
  };
  // Lowest rank first, then leftmost: tokenizers' Merge ordering.
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> queue(later);
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i)
    if (const MergeTarget* m = merge_of(symbols[i].id, symbols[i + 1].id))
      queue.push({m->rank, static_cast<int>(i), m->id});
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& current = symbols[static_cast<std::size_t>(top.pos)];
    if (current.bytes == 0 || current.next < 0) continue;
    const Symbol right = symbols[static_cast<std::size_t>(current.next)];
    const MergeTarget* still = merge_of(current.id, right.id);
    if (!still || still->id != top.id) continue;  // an expired entry
    symbols[static_cast<std::size_t>(current.next)].bytes = 0;
    current.id = top.id;
    current.bytes += right.bytes;
    current.next = right.next;
    if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = top.pos;
    if (current.prev >= 0)
      if (const MergeTarget* m =
              merge_of(symbols[static_cast<std::size_t>(current.prev)].id, current.id))
        queue.push({m->rank, current.prev, m->id});
    if (current.next >= 0)
      if (const MergeTarget* m =
              merge_of(current.id, symbols[static_cast<std::size_t>(current.next)].id))
        queue.push({m->rank, top.pos, m->id});
  }
}

void BpeModel::encode(std::string_view piece, std::vector<int64_t>& ids) const {
  if (piece.empty()) return;
  if (ignore_merges_)
    if (const auto it = vocab_.find(std::string(piece)); it != vocab_.end()) {
      ids.push_back(it->second);
      return;
    }
  std::vector<Symbol> symbols = initial_symbols(piece);
  merge_all(symbols);
  for (const Symbol& s : symbols)
    if (s.bytes != 0) ids.push_back(s.id);
}

}  // namespace mixprec::data::hf
