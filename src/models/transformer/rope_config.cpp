// model.rope_scaling for the rope op and config.json (rope_config.h).
#include "mixprec/models/transformer/rope_config.h"

namespace mixprec::models {

using nlohmann::json;

RopeScaling rope_scaling_of(const config::ModelConfig& m) {
  const config::RopeScalingConfig& c = m.rope_scaling;
  RopeScaling s;
  s.type = c.type == "llama3" ? RopeScaling::Type::llama3
           : c.type == "yarn" ? RopeScaling::Type::yarn
                              : RopeScaling::Type::none;
  s.factor = c.factor;
  s.low_freq_factor = c.low_freq_factor;
  s.high_freq_factor = c.high_freq_factor;
  s.original_max_position_embeddings = c.original_max_position_embeddings;
  if (s.type == RopeScaling::Type::yarn && s.original_max_position_embeddings == 0)
    s.original_max_position_embeddings = m.max_seq_len;
  s.beta_fast = c.beta_fast;
  s.beta_slow = c.beta_slow;
  s.mscale = c.mscale;
  s.mscale_all_dim = c.mscale_all_dim;
  if (c.attention_factor != 0) s.attention_factor = c.attention_factor;
  s.truncate = c.truncate;
  return s;
}

json hf_rope_scaling(const config::ModelConfig& m) {
  const RopeScaling s = rope_scaling_of(m);
  if (s.type == RopeScaling::Type::none) return nullptr;
  json j{{"rope_type", m.rope_scaling.type},
         {"factor", s.factor},
         {"original_max_position_embeddings", s.original_max_position_embeddings}};
  if (s.type == RopeScaling::Type::llama3) {
    j["low_freq_factor"] = s.low_freq_factor;
    j["high_freq_factor"] = s.high_freq_factor;
    return j;
  }
  j["beta_fast"] = s.beta_fast;
  j["beta_slow"] = s.beta_slow;
  j["truncate"] = s.truncate;
  if (s.mscale != 0) j["mscale"] = s.mscale;
  if (s.mscale_all_dim != 0) j["mscale_all_dim"] = s.mscale_all_dim;
  if (s.attention_factor) j["attention_factor"] = *s.attention_factor;
  return j;
}

json normalize_hf_rope_scaling(const json& value, const json& file) {
  if (!value.is_object()) return value;
  // A wrong-typed max_position_embeddings is left for its own key's check to name.
  const auto max = file.find("max_position_embeddings");
  const int64_t max_position_embeddings =
      max != file.end() && max->is_number_integer() ? max->get<int64_t>() : 0;
  json j;
  for (const auto& [key, v] : value.items())
    if (!v.is_null()) j[key == "type" ? "rope_type" : key] = v;
  if (j.value("rope_type", json()) == "default") return nullptr;
  if (j.value("rope_type", json()) != "yarn") return j;
  for (const char* key : {"beta_fast", "beta_slow"})
    if (j.contains(key) && j[key].is_number() && j[key].get<double>() == 0) j.erase(key);
  if (!j.contains("beta_fast")) j["beta_fast"] = 32.0;
  if (!j.contains("beta_slow")) j["beta_slow"] = 1.0;
  if (!j.contains("truncate")) j["truncate"] = true;
  if (!j.contains("original_max_position_embeddings"))
    j["original_max_position_embeddings"] = max_position_embeddings;
  // 0 means absent for the mscales (HF uses them only when both are nonzero).
  for (const char* key : {"mscale", "mscale_all_dim"})
    if (j.contains(key) && j[key].is_number() && j[key].get<double>() == 0) j.erase(key);
  return j;
}

}  // namespace mixprec::models
