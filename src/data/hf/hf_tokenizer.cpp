// HfTokenizer: reads tokenizer.json (and tokenizer_config.json) and runs `tokenizers`' encode
// pipeline: added tokens on the raw text, the normalizer, added tokens on the normalized text,
// the pre-tokenizer, the BPE model, and for add_special_tokens the post-processor.
#include "mixprec/data/hf_tokenizer.h"

#include <filesystem>

#include "added_vocabulary.h"
#include "bpe_model.h"
#include "decoders.h"
#include "json_field.h"
#include "mixprec/core/error.h"
#include "mixprec/core/hash.h"
#include "mixprec/core/utf8.h"
#include "mixprec/io/gzip_file.h"
#include "mixprec/io/regular_file.h"
#include "normalizers.h"
#include "post_processors.h"
#include "pre_tokenizers.h"

namespace mixprec::data {

namespace fs = std::filesystem;
using namespace hf;

constexpr uint64_t kMaxTokenizerBytes = 256ull << 20;  // real ones are 2-20 MB
// BPE holds ~40 bytes per byte of a piece (symbols and merge queue). Byte-level tokenizers cut
// text into words, but one without a pre-tokenizer (Mistral's) merges a whole document as one
// piece: past this its memory, not the text, would be the limit, so it is refused by size.
constexpr std::size_t kMaxPieceBytes = std::size_t{32} << 20;

struct HfTokenizer::Impl {
  std::string path;
  std::string id;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  AddedVocabulary added;
  int64_t vocab_size = 0;
  std::optional<int64_t> bos, eos;
  std::string special_source;  // where bos/eos came from, for describe()

  void encode_normalized(std::string_view text, bool at_start, std::vector<int64_t>& ids) const {
    const std::string normalized =
        normalizer ? normalizer->normalize(std::string(text)) : std::string(text);
    for (const Segment& s : added.split_normalized(normalized)) {
      if (s.id) {
        ids.push_back(*s.id);
        continue;
      }
      std::vector<Piece> pieces{
          {std::string(s.text), at_start && s.text.data() == normalized.data()}};
      if (pre_tokenizer) pieces = pre_tokenizer->split_all(std::move(pieces));
      for (const Piece& p : pieces) {
        MIXPREC_CHECK(p.text.size() <= kMaxPieceBytes, "tokenizer " + path,
                      "will not encode a " + std::to_string(p.text.size() >> 20) +
                          " MiB stretch of text as one piece (its pre-tokenizer leaves it whole; "
                          "BPE needs about 40 bytes per byte of it): split it into documents "
                          "of at most " +
                          std::to_string(kMaxPieceBytes >> 20) + " MiB");
        model->encode(p.text, ids);
      }
    }
  }
};

namespace {

std::string read_file(const fs::path& path) {
  const std::string where = "tokenizer " + path.string();
  return path.extension() == ".gz" ? io::read_gzip_file(path, kMaxTokenizerBytes, where)
                                   : io::read_regular_file(path, kMaxTokenizerBytes, where);
}

// `name` in `dir`, or its gzip'd form name.gz when only that is there.
fs::path plain_or_gzip(const fs::path& dir, const std::string& name) {
  std::error_code ec;
  const fs::path plain = dir / name, packed = dir / (name + ".gz");
  return !fs::exists(plain, ec) && fs::exists(packed, ec) ? packed : plain;
}

// tokenizer_config.json's `key`: a string, or an object with `content` (AddedToken form).
std::optional<std::string> config_token(const JsonField& config, std::string_view key) {
  const auto field = config.find(key);
  if (!field) return std::nullopt;
  if (field->is_object()) return (*field)["content"].string();
  return field->string();
}

}  // namespace

HfTokenizer::HfTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HfTokenizer::~HfTokenizer() = default;

bool is_hf_tokenizer_path(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return fs::exists(plain_or_gzip(path, "tokenizer.json"), ec);
  return path.ends_with(".json") || path.ends_with(".json.gz");
}

std::unique_ptr<HfTokenizer> HfTokenizer::open(const std::string& path) {
  std::error_code ec;
  fs::path file = path;
  if (fs::is_directory(file, ec)) file = plain_or_gzip(file, "tokenizer.json");
  const std::string name = file.string();
  auto impl = std::make_unique<Impl>();
  impl->path = name;
  const std::string text = read_file(file);
  const nlohmann::json json = parse_json_file(text, name);
  const JsonField root(json, name, "");

  const JsonField model = root["model"];
  const std::string type = model.string_or("type", "BPE");
  if (type != "BPE")
    model["type"].fail("model type '" + type +
                       "' is not supported: mixprec reads BPE tokenizer.json files (WordPiece, "
                       "Unigram and WordLevel are not implemented)");
  impl->model = std::make_unique<BpeModel>(model);
  if (const auto n = root.find("normalizer")) impl->normalizer = make_normalizer(*n);
  if (const auto p = root.find("pre_tokenizer")) impl->pre_tokenizer = make_pre_tokenizer(*p);
  if (const auto p = root.find("post_processor")) impl->post_processor = make_post_processor(*p);
  if (const auto d = root.find("decoder")) impl->decoder = make_decoder(*d);
  if (const auto t = root.find("truncation"))
    t->fail("truncation is not supported: set it to null");
  if (const auto p = root.find("padding")) p->fail("padding is not supported: set it to null");

  std::vector<AddedToken> added;
  if (const auto list = root.find("added_tokens")) added = read_added_tokens(*list);
  for (AddedToken& t : added)  // tokenizers gives a token the model knows the model's id
    if (const auto id = impl->model->token_to_id(t.content)) t.id = *id;
  impl->vocab_size = impl->model->size_with_holes();
  for (const AddedToken& t : added) impl->vocab_size = std::max(impl->vocab_size, t.id + 1);
  const Normalizer* normalizer = impl->normalizer.get();
  impl->added.build(std::move(added), [normalizer](const std::string& content) {
    return normalizer ? normalizer->normalize(content) : content;
  });

  uint64_t hash = fnv1a(text);
  const fs::path config_path = plain_or_gzip(file.parent_path(), "tokenizer_config.json");
  if (fs::exists(config_path, ec)) {
    const std::string config_text = read_file(config_path);
    hash = fnv1a(config_text, hash);
    const nlohmann::json config_json = parse_json_file(config_text, config_path.string());
    const JsonField config(config_json, config_path.string(), "");
    auto id_of = [&](std::string_view key) -> std::optional<int64_t> {
      const auto token = config_token(config, key);
      if (!token) return std::nullopt;
      const auto id =
          impl->added.id_of(*token) ? impl->added.id_of(*token) : impl->model->token_to_id(*token);
      if (!id) config[key].fail("'" + quote_prefix(*token, 60) + "' is not a token of " + name);
      return id;
    };
    impl->bos = id_of("bos_token");
    impl->eos = id_of("eos_token");
    impl->special_source = "BOS/EOS from tokenizer_config.json";
  } else if (impl->post_processor) {
    // A marker id shows what the template puts around the text.
    const std::vector<int64_t> around = impl->post_processor->add_special_tokens({-1});
    const auto marker = std::find(around.begin(), around.end(), -1);
    if (marker - around.begin() == 1) impl->bos = around.front();
    if (around.end() - marker == 2) impl->eos = around.back();
    impl->special_source = "BOS/EOS from the post-processor (no tokenizer_config.json)";
  } else {
    impl->special_source = "no BOS/EOS (no tokenizer_config.json)";
  }
  impl->id = "hf-" + std::to_string(hash);
  return std::unique_ptr<HfTokenizer>(new HfTokenizer(std::move(impl)));
}

std::string HfTokenizer::id() const {
  return impl_->id;
}

std::string HfTokenizer::describe() const {
  return "tokenizer.json BPE, " + std::to_string(impl_->vocab_size) + " ids, " +
         impl_->special_source + " (" + impl_->path + ")";
}

int64_t HfTokenizer::vocab_size() const {
  return impl_->vocab_size;
}

std::vector<int64_t> HfTokenizer::encode(std::string_view text) const {
  if (const auto bad = first_invalid_utf8(text))
    throw Error("tokenizer " + impl_->path, "the text is not UTF-8 at byte " +
                                                std::to_string(*bad) + " (of " +
                                                std::to_string(text.size()) + ")");
  std::vector<int64_t> ids;
  for (const Segment& s : impl_->added.split_raw(text)) {
    if (s.id)
      ids.push_back(*s.id);
    else
      impl_->encode_normalized(s.text, s.text.data() == text.data(), ids);
  }
  return ids;
}

std::vector<int64_t> HfTokenizer::encode_with_special_tokens(std::string_view text) const {
  std::vector<int64_t> ids = encode(text);
  return impl_->post_processor ? impl_->post_processor->add_special_tokens(std::move(ids)) : ids;
}

std::string HfTokenizer::decode(std::span<const int64_t> ids) const {
  return decode(ids, false);
}

std::string HfTokenizer::decode(std::span<const int64_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (const AddedToken* t = impl_->added.by_id(ids[i])) {
      if (!(skip_special_tokens && t->special)) tokens.push_back(t->content);
    } else if (const std::string* token = impl_->model->id_to_token(ids[i])) {
      tokens.push_back(*token);
    } else {
      throw Error("tokenizer " + impl_->path,
                  "token " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                      " is not in the vocabulary (" + std::to_string(impl_->vocab_size) + " ids)");
    }
  }
  if (!impl_->decoder) {
    std::string out;
    for (std::size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  std::string out;
  for (const std::string& t : impl_->decoder->decode_chain(std::move(tokens))) out += t;
  return out;
}

std::optional<int64_t> HfTokenizer::bos() const {
  return impl_->bos;
}
std::optional<int64_t> HfTokenizer::eos() const {
  return impl_->eos;
}

std::optional<int64_t> HfTokenizer::token_to_id(std::string_view token) const {
  if (const auto id = impl_->added.id_of(token)) return id;
  return impl_->model->token_to_id(token);
}

}  // namespace mixprec::data
