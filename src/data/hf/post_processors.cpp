#include "post_processors.h"

#include "bpe_model.h"

namespace mixprec::data::hf {
namespace {

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps)
      : steps_(std::move(steps)) {}
  std::vector<int64_t> add_special_tokens(std::vector<int64_t> ids) const override {
    for (const auto& s : steps_) ids = s->add_special_tokens(std::move(ids));
    return ids;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

class PassThrough final : public PostProcessor {
 public:
  std::vector<int64_t> add_special_tokens(std::vector<int64_t> ids) const override { return ids; }
};

// The template as a list: a run of fixed ids, or (empty `ids`) the text's ids.
class TemplateProcessor final : public PostProcessor {
 public:
  explicit TemplateProcessor(std::vector<std::vector<int64_t>> parts) : parts_(std::move(parts)) {}
  std::vector<int64_t> add_special_tokens(std::vector<int64_t> ids) const override {
    std::vector<int64_t> out;
    for (const auto& part : parts_) {
      const auto& from = part.empty() ? ids : part;
      out.insert(out.end(), from.begin(), from.end());
    }
    return out;
  }

 private:
  std::vector<std::vector<int64_t>> parts_;
};

std::unique_ptr<PostProcessor> make_template(const JsonField& spec) {
  const JsonField single = spec["single"];
  const JsonField specials = spec["special_tokens"];
  std::vector<std::vector<int64_t>> parts;
  bool has_text = false;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const JsonField item = single.at(i);
    if (const auto special = item.find("SpecialToken")) {
      const std::string name = (*special)["id"].string();
      const auto entry = specials.find(name);
      if (!entry) (*special)["id"].fail("'" + name + "' is not in special_tokens");
      const JsonField list = (*entry)["ids"];
      std::vector<int64_t> ids;
      for (std::size_t k = 0; k < list.size(); ++k)
        ids.push_back(list.at(k).integer(0, kMaxTokenId));
      if (ids.empty()) continue;
      parts.push_back(std::move(ids));
    } else if (const auto sequence = item.find("Sequence")) {
      if ((*sequence)["id"].string() != "A")
        (*sequence)["id"].fail("a single text's template can only hold sequence A");
      parts.push_back({});
      has_text = true;
    } else {
      item.fail("is neither a SpecialToken nor a Sequence");
    }
  }
  if (!has_text) single.fail("has no Sequence: the text's own ids would be dropped");
  return std::make_unique<TemplateProcessor>(std::move(parts));
}

std::unique_ptr<PostProcessor> make_cls_sep(const JsonField& spec) {
  auto id_of = [](const JsonField& pair) { return pair.at(1).integer(0, kMaxTokenId); };
  return std::make_unique<TemplateProcessor>(
      std::vector<std::vector<int64_t>>{{id_of(spec["cls"])}, {}, {id_of(spec["sep"])}});
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const JsonField& spec) {
  const std::string type = spec["type"].string();
  if (type == "Sequence") {
    const JsonField list = spec["processors"];
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (std::size_t i = 0; i < list.size(); ++i) steps.push_back(make_post_processor(list.at(i)));
    return std::make_unique<SequenceProcessor>(std::move(steps));
  }
  if (type == "ByteLevel") return std::make_unique<PassThrough>();
  if (type == "TemplateProcessing") return make_template(spec);
  if (type == "BertProcessing" || type == "RobertaProcessing") return make_cls_sep(spec);
  spec["type"].fail("post_processor type '" + type +
                    "' is not supported (supported: TemplateProcessing, ByteLevel, "
                    "BertProcessing, RobertaProcessing, Sequence)");
}

}  // namespace mixprec::data::hf
