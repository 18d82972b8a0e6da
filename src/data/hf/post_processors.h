// tokenizer.json `post_processor`, for encode with add_special_tokens: TemplateProcessing
// (its `single` template), BertProcessing and RobertaProcessing ([cls] ids [sep]), ByteLevel
// (offsets only: the ids pass unchanged), Sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "json_field.h"

namespace mixprec::data::hf {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual std::vector<int64_t> add_special_tokens(std::vector<int64_t> ids) const = 0;
};

std::unique_ptr<PostProcessor> make_post_processor(const JsonField& spec);

}  // namespace mixprec::data::hf
