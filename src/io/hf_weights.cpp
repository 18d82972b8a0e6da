// Hugging Face folders in and out (hf_weights.h), by the family's layout tables
// (models/hf_layout.h), read by both directions.
#include "mixprec/io/hf_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "mixprec/autograd/grad_mode.h"
#include "mixprec/core/error.h"
#include "mixprec/io/checkpoint_state.h"
#include "mixprec/io/hf_folder.h"
#include "mixprec/models/registry.h"
#include "mixprec/ops/indexing.h"

namespace mixprec::io {
namespace {

using models::HfLayout;
using models::HfLink;
using models::HfPart;
using nlohmann::json;

bool same_value(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

// transformers 5 writes RoPE as "rope_parameters" ({rope_type, rope_theta, factor, ...}; per
// layer type for models that mix attention kinds) instead of the top-level "rope_theta" and
// "rope_scaling" older files have: the same facts under the older keys, so the layouts'
// checks see them (without this a file's RoPE would be checked against the defaults).
json with_legacy_rope_keys(json file, const std::string& path) {
  if (!file.contains("rope_parameters") || file["rope_parameters"].is_null()) return file;
  json rope = file["rope_parameters"];
  MIXPREC_CHECK(rope.is_object(), "hf " + path, "rope_parameters is not an object");
  if (!rope.contains("rope_type") && !rope.contains("type") && !rope.contains("rope_theta")) {
    // {layer type: parameters}: one RoPE for every kind of layer is what the models here run.
    json first;
    for (const auto& [kind, params] : rope.items()) {
      if (first.is_null()) first = params;
      MIXPREC_CHECK(params == first, "hf " + path,
                    "rope_parameters differ between layer types (" + kind +
                        "): one RoPE for every layer is supported");
    }
    rope = first;
    MIXPREC_CHECK(rope.is_object(), "hf " + path, "rope_parameters holds no parameters");
  }
  if (rope.contains("rope_theta")) {
    MIXPREC_CHECK(!file.contains("rope_theta") || file["rope_theta"].is_null() ||
                      file["rope_theta"] == rope["rope_theta"],
                  "hf " + path,
                  "rope_theta = " + file["rope_theta"].dump() +
                      " disagrees with rope_parameters.rope_theta = " + rope["rope_theta"].dump());
    file["rope_theta"] = rope["rope_theta"];
  }
  const json type =
      rope.contains("rope_type") ? rope["rope_type"] : rope.value("type", json("default"));
  if (type != "default" && (!file.contains("rope_scaling") || file["rope_scaling"].is_null())) {
    json scaling = rope;
    scaling.erase("rope_theta");
    file["rope_scaling"] = scaling;
  }
  return file;
}

void check_config(const json& file_in, const HfLayout& layout, const std::string& path) {
  const json file = with_legacy_rope_keys(file_in, path);
  MIXPREC_CHECK(file.contains("model_type") && file["model_type"].is_string(), "hf " + path,
                "has no string \"model_type\" (\"" + layout.model_type + "\" for this model)");
  const std::string type = file["model_type"].get<std::string>();
  MIXPREC_CHECK(
      type == layout.model_type, "hf " + path,
      "model_type = \"" + type + "\", but this model exports as \"" + layout.model_type + "\"");
  for (const models::HfKey& k : layout.keys) {
    if (!k.checked) continue;
    const bool given = file.contains(k.hf) && !file[k.hf].is_null();
    MIXPREC_CHECK(
        given || !k.absent.is_null() || k.ours.is_null(), "hf " + path,
        std::string("lacks \"") + k.hf + "\" (" + k.model_key + " = " + k.ours.dump() + " here)");
    const json value = k.normalize ? k.normalize(given ? file[k.hf] : k.absent, file)
                       : given     ? file[k.hf]
                                   : k.absent;
    MIXPREC_CHECK(same_value(value, k.ours), "hf " + path,
                  std::string(k.hf) + " = " + value.dump() + ", but " + k.model_key + " = " +
                      k.ours.dump() + " in the config: they describe different models");
  }
}

// Buffers older exports carry beside the weights: not parameters, skipped.
bool is_known_buffer(const std::string& name) {
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias") ||
         name.ends_with("rotary_emb.inv_freq");
}

// A tensor of a layer past the model's (layout.extra_layers), which the layout skips.
bool is_extra_layer(const std::string& name, const HfLayout& layout, int64_t n_layers) {
  const std::string& prefix = layout.extra_layers;
  if (prefix.empty() || !name.starts_with(prefix)) return false;
  const std::size_t dot = name.find('.', prefix.size());
  const std::string index = name.substr(prefix.size(), dot - prefix.size());
  if (index.empty() || index.size() > 9 ||
      index.find_first_not_of("0123456789") != std::string::npos)
    return false;
  return std::stoll(index) >= n_layers;
}

// GPT-2 files name tensors with or without "transformer."; ours always have it.
std::string canonical_name(const std::string& name, const HfLayout& layout) {
  const std::string& prefix = layout.optional_prefix;
  if (!prefix.empty() && !name.starts_with(prefix) && name != "lm_head.weight")
    return prefix + name;
  return name;
}

// `what` names the tensor ("tensor 'x'"), `where` the folder.
Tensor as_f32(const Tensor& t, const std::string& where, const std::string& what) {
  MIXPREC_CHECK(
      t.dtype() == DType::f32 || t.dtype() == DType::bf16 || t.dtype() == DType::f16 ||
          t.dtype() == DType::f64,
      where,
      what + " has dtype " + dtype_name(t.dtype()) + "; weights must be F32, BF16, F16 or F64");
  const Tensor f = t.to(DType::f32).contiguous();
  const float* p = f.data<float>();
  for (int64_t i = 0; i < f.numel(); ++i)
    MIXPREC_CHECK(std::isfinite(p[i]), where,
                  what + " holds a non-finite value (" + std::to_string(p[i]) + ") at element " +
                      std::to_string(i) + " (after rounding to f32)");
  return f;
}

// The file's row i is our row order[i]: to the file's order (export), or back (import).
Tensor reorder_rows(const Tensor& t, const std::vector<int64_t>& order, bool to_file) {
  if (order.empty()) return t;
  const Tensor src = t.to(DType::f32).contiguous();
  Tensor out = Tensor::empty(src.shape(), DType::f32);
  const int64_t cols = src.numel() / src.size(0);
  const float* in = src.data<float>();
  float* o = out.data<float>();
  for (std::size_t i = 0; i < order.size(); ++i) {
    const int64_t file = static_cast<int64_t>(i), ours = order[i];
    const int64_t from = to_file ? ours : file, to = to_file ? file : ours;
    std::copy(in + from * cols, in + (from + 1) * cols, o + to * cols);
  }
  return out;
}

}  // namespace

models::HfLayout hf_layout_of(const config::ModelConfig& m) {
  return models::model_spec(m.kind).hf_layout(m);
}

std::string hf_config_json(const config::ModelConfig& m, DType dtype) {
  const HfLayout layout = hf_layout_of(m);
  json j;
  j["architectures"] = {layout.architecture};
  j["model_type"] = layout.model_type;
  j["torch_dtype"] = dtype == DType::bf16 ? "bfloat16" : "float32";
  for (const models::HfKey& k : layout.keys) j[k.hf] = k.ours;
  return j.dump(2) + "\n";
}

void export_hf(const std::string& dir, const config::ModelConfig& m, const optim::ParamList& params,
               const HfExportOptions& options, const NamedBuffers& buffers) {
  MIXPREC_CHECK(options.dtype == DType::f32 || options.dtype == DType::bf16, "hf export",
                std::string("dtype ") + dtype_name(options.dtype) + " is not f32 or bf16");
  const HfLayout layout = hf_layout_of(m);
  NoGradGuard no_grad;
  std::map<std::string, Tensor> masters, buffer_values;
  for (const auto& p : params) masters.emplace(p->name(), p->master());
  for (const auto& [name, b] : buffers) buffer_values.emplace(name, b);
  TensorList tensors;
  std::set<std::string> used;
  for (const HfLink& link : layout.links) {
    std::vector<Tensor> parts;
    for (const HfPart& part : link.parts) {
      if (part.ours.empty()) {
        parts.push_back(Tensor::zeros({part.rows}));
        continue;
      }
      const auto& source = part.buffer ? buffer_values : masters;
      const auto it = source.find(part.ours);
      MIXPREC_CHECK(it != source.end(), "hf export",
                    std::string("the model has no ") + (part.buffer ? "buffer" : "parameter") +
                        " '" + part.ours + "' for " + link.hf);
      const Tensor whole = it->second.to(DType::f32);
      parts.push_back(part.stacked >= 0 ? whole.select(0, part.stacked) : whole);
      if (!part.buffer) used.insert(part.ours);
    }
    Tensor t = parts.size() == 1 ? parts[0] : concat(parts, 0);
    t = reorder_rows(t, link.row_order, /*to_file=*/true);
    if (link.conv1d) t = t.transpose(0, 1);
    tensors.emplace_back(link.hf, t.to(options.dtype).contiguous());
  }
  for (const auto& [name, master] : masters)
    MIXPREC_CHECK(used.contains(name), "hf export",
                  "parameter '" + name + "' has no place in the " + layout.model_type + " layout");
  write_hf_folder(dir, hf_config_json(m, options.dtype), tensors, options.max_shard_bytes);
}

TensorMap import_hf(const std::string& dir, const config::ModelConfig& m) {
  const HfLayout layout = hf_layout_of(m);
  const HfCheckpoint hf = read_hf_folder(dir);
  const std::string config_path = dir + "/" + kHfConfigFile;
  check_config(json::parse(hf.config_json), layout, config_path);
  TensorMap files;  // by canonical name
  for (const auto& [name, t] : hf.tensors) files.emplace(canonical_name(name, layout), t);
  NoGradGuard no_grad;
  TensorMap out;
  std::map<std::string, std::vector<Tensor>> stacks;  // ours -> its slices, in the file's order
  std::set<std::string> used;
  for (const HfLink& link : layout.links) {
    const std::string where = "hf " + dir, what = "tensor '" + link.hf + "'";
    const auto it = files.find(link.hf);
    MIXPREC_CHECK(it != files.end(), "hf " + dir, "lacks the tensor '" + link.hf + "'");
    used.insert(link.hf);
    MIXPREC_CHECK(it->second.shape() == link.shape(), where,
                  what + " has shape " + shape_to_string(it->second.shape()) +
                      ", the config needs " + shape_to_string(link.shape()));
    Tensor t = as_f32(it->second, where, what);
    if (link.conv1d) t = t.transpose(0, 1).contiguous();
    t = reorder_rows(t, link.row_order, /*to_file=*/false);
    int64_t row = 0;
    for (const HfPart& part : link.parts) {
      const Tensor rows = t.slice(0, row, row + part.rows).contiguous().clone();
      row += part.rows;
      if (part.stacked >= 0) {
        std::vector<Tensor>& slices = stacks[part.ours];
        MIXPREC_CHECK(
            static_cast<int64_t>(slices.size()) == part.stacked, "hf layout",
            "slice " + std::to_string(part.stacked) + " of '" + part.ours + "' out of order");
        slices.push_back(rows);
        continue;
      }
      if (!part.ours.empty()) {
        out.emplace((part.buffer ? kBufferPrefix : kModelPrefix) + part.ours, rows);
        continue;
      }
      for (const double v : rows.to_doubles())
        MIXPREC_CHECK(v == 0.0, where, what + " holds nonzero values, and " + part.absent);
    }
  }
  for (auto& [name, slices] : stacks) out.emplace(kModelPrefix + name, stack(slices, 0));
  // A tied output may be written anyway; it must then be the embedding itself.
  const std::string& embedding = layout.embedding;
  if (m.tie_embeddings && files.contains("lm_head.weight")) {
    MIXPREC_CHECK(files.at("lm_head.weight").to(DType::f32).to_doubles() ==
                      files.at(embedding).to(DType::f32).to_doubles(),
                  "hf " + dir,
                  "lm_head.weight differs from " + embedding +
                      ", but tie_word_embeddings is true: the weights are not tied");
    used.insert("lm_head.weight");
  }
  for (const auto& [name, t] : files)
    MIXPREC_CHECK(
        used.contains(name) || is_known_buffer(name) || is_extra_layer(name, layout, m.n_layers),
        "hf " + dir,
        "holds the tensor '" + name + "', which the " + layout.model_type +
            " layout of this config has no place for");
  return out;
}

}  // namespace mixprec::io
