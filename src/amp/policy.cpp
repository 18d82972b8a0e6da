// Precision policies: the preset table, parse_policy for the spellings users bring (presets,
// Keras names, jmp key=value strings, a bare dtype), to_string, and the process-wide f32
// matmul precision.
#include "mixprec/amp/policy.h"

#include "mixprec/core/spelling.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <optional>
#include <vector>

#include "mixprec/amp/linear_recipe.h"
#include "mixprec/core/error.h"
#include "mixprec/numerics/accumulator_model.h"

namespace mixprec::amp {
namespace {

constexpr const char* kPolicy = "policy";

struct Preset {
  const char* name;
  MixedPrecisionPolicy policy;
};

MixedPrecisionPolicy make(DType param, DType compute, DType reduce, DType output) {
  MixedPrecisionPolicy p;
  p.param_dtype = param;
  p.compute_dtype = compute;
  p.reduce_dtype = reduce;
  p.output_dtype = output;
  return p;
}

// One row per preset; everything (preset, preset_names, parse_policy) reads this table.
const std::array<Preset, 6>& presets() {
  static const std::array<Preset, 6> table = [] {
    MixedPrecisionPolicy tf32;
    tf32.matmul_precision = MatmulPrecision::high;
    MixedPrecisionPolicy fp16 = make(DType::f16, DType::f16, DType::f32, DType::f32);
    fp16.loss_scaling = true;
    MixedPrecisionPolicy pure = make(DType::bf16, DType::bf16, DType::bf16, DType::bf16);
    pure.f32_master = false;
    pure.master_update = MasterUpdate::stochastic;
    MixedPrecisionPolicy kahan = pure;
    kahan.master_update = MasterUpdate::kahan;
    return std::array<Preset, 6>{{
        {"fp32", MixedPrecisionPolicy{}},
        {"tf32", tf32},
        {"bf16-mixed", make(DType::bf16, DType::bf16, DType::f32, DType::f32)},
        {"fp16-mixed", fp16},
        {"bf16-pure", pure},
        {"bf16-pure-kahan", kahan},
    }};
  }();
  return table;
}

// Other frameworks' names for presets (Keras mixed-precision policies).
struct Alias {
  const char* name;
  const char* preset;
};
constexpr std::array<Alias, 2> kAliases{{
    {"mixed_bfloat16", "bf16-mixed"},
    {"mixed_float16", "fp16-mixed"},
}};

constexpr std::array<const char*, 3> kMatmulNames{"highest", "high", "medium"};
constexpr std::array<const char*, 3> kUpdateNames{"nearest", "stochastic", "kahan"};

constexpr const char* kValidKeys =
    "params (param, p), compute (c), reduce (r), output (o), master, update, matmul, "
    "loss_scaling, linear, linear_skip, grouped, grouped_fqns, accumulator, save_fp8_activations, "
    "save_fp8_grouped_activations, autocast_ops";

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// What a recipe leaves in the compute dtype unless told otherwise: the output head, as
// torchtitan's shipped configs (filter_fqns = ["output"]) and DeepSeek-V3 keep it.
const std::vector<std::string> kDefaultLinearSkip = {"lm_head"};

// What grouped GEMMs run by a recipe unless told otherwise: torchtitan's MoE configs' fqns.
const std::vector<std::string> kDefaultGroupedFqns = {"experts"};

const LinearRecipe* policy_recipe(std::string_view value, std::string_view key) {
  const LinearRecipe* r = find_any_linear_recipe(trim(value));
  MIXPREC_CHECK(r != nullptr, kPolicy,
                "unknown linear recipe '" + std::string(trim(value)) + "' for key '" +
                    std::string(key) + "'; valid: " + linear_recipe_names());
  return r;
}

// grouped=: torchtitan's grouped names first ([quantize.grouped_mm.float8|mx] recipe_name: "mxfp8"
// is the grouped table's RCEIL recipe, where the linear alias "mxfp8" is FLOOR), then any
// linear recipe.
const LinearRecipe* policy_grouped_recipe(std::string_view value, std::string_view key) {
  for (const char* section : {"float8", "mx"})
    if (const LinearRecipe* r = find_grouped_recipe(section, trim(value))) return r;
  return policy_recipe(value, key);
}

std::vector<std::string> split_bars(std::string_view value, std::string_view key) {
  std::vector<std::string> out;
  if (trim(value).empty()) return out;
  while (true) {
    const auto bar = value.find('|');
    out.emplace_back(trim(value.substr(0, bar)));
    MIXPREC_CHECK(!out.back().empty(), kPolicy, "an empty module name in " + std::string(key));
    if (bar == std::string_view::npos) return out;
    value.remove_prefix(bar + 1);
  }
}

// The dtypes a policy may name: those the kernels compute in (not f8, not integers).
std::vector<std::string> policy_dtype_names() {
  std::vector<std::string> names;
  for (const DTypeInfo& row : kDTypeTable)
    if (row.computable) names.emplace_back(row.name);
  names.insert(names.end(), {"full", "half"});  // jmp's names for f32 and f16
  return names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string valid_spellings() {
  std::string aliases;
  for (const Alias& a : kAliases) aliases += (aliases.empty() ? "" : ", ") + std::string(a.name);
  return "valid: a preset (" + preset_names() + "), " + aliases + ", a dtype (" +
         joined(policy_dtype_names()) + "), a linear recipe (" + linear_recipe_names() +
         ") or key=value pairs with keys " + kValidKeys;
}

// Every bare spelling parse_policy takes, for "did you mean".
std::vector<std::string> bare_spellings() {
  std::vector<std::string> names = policy_dtype_names();
  for (const Preset& p : presets()) names.emplace_back(p.name);
  for (const Alias& a : kAliases) names.emplace_back(a.name);
  for (const LinearRecipe& r : linear_recipes()) names.emplace_back(r.name);
  return names;
}

const Preset* find_preset(std::string_view name) {
  const std::string key = lower(trim(name));
  for (const Preset& p : presets())
    if (key == p.name) return &p;
  for (const Alias& a : kAliases)
    if (key == a.name) return find_preset(a.preset);
  return nullptr;
}

// parse_dtype, plus jmp's "full" (f32). jmp's "half" is f16 off TPUs (bf16 on them), which is
// parse_dtype's "half" (torch.half) too.
DType jmp_or_parse_dtype(std::string_view token) {
  return lower(trim(token)) == "full" ? DType::f32 : parse_dtype(trim(token));
}

// A policy dtype: any parse_dtype spelling of f64, f32, bf16 or f16 (the dtypes ops compute
// in; fp8 is a storage format for scaled GEMMs, not a policy dtype), or jmp's full / half.
DType policy_dtype(std::string_view token, std::string_view key) {
  DType d;
  try {
    d = jmp_or_parse_dtype(token);
  } catch (const Error&) {
    throw Error(kPolicy, "unknown dtype '" + quote_prefix(trim(token)) + "' for key '" +
                             std::string(key) + "'; valid: " + joined(policy_dtype_names()));
  }
  MIXPREC_CHECK(is_computable(d), kPolicy,
                "dtype '" + std::string(trim(token)) + "' for key '" + std::string(key) +
                    "' is not a policy dtype; use f64, f32, bf16 or f16");
  return d;
}

template <std::size_t N>
int find_name(const std::array<const char*, N>& names, std::string_view value, const char* what) {
  const std::string v = lower(trim(value));
  for (std::size_t i = 0; i < N; ++i)
    if (v == names[i]) return static_cast<int>(i);
  std::string valid;
  for (const char* n : names) valid += (valid.empty() ? "" : ", ") + std::string(n);
  throw Error(kPolicy, "unknown " + std::string(what) + " '" + std::string(trim(value)) +
                           "'; valid: " + valid);
}

bool parse_bool(std::string_view value, std::string_view key) {
  const std::string v = lower(trim(value));
  if (v == "true" || v == "on" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "off" || v == "0" || v == "no") return false;
  throw Error(kPolicy, "'" + std::string(trim(value)) + "' for key '" + std::string(key) +
                           "' is not a boolean; valid: true, false, on, off, 1, 0");
}

DType wider_than_f32(DType d) {
  return accumulate_dtype(d);
}

// "key=value,key=value", with jmp's defaults (jmp.get_policy): params f32, compute follows
// params, output follows compute. mixprec's own keys: reduce and the master default to the
// wider of f32 and params (so params=f64 trains in f64 throughout).
MixedPrecisionPolicy parse_pairs(std::string_view text) {
  std::optional<DType> param, compute, reduce, output, master;
  std::optional<MasterUpdate> update;
  std::optional<MatmulPrecision> matmul;
  std::optional<bool> loss_scaling;
  std::optional<const LinearRecipe*> recipe;
  std::optional<std::vector<std::string>> skip;
  std::optional<const LinearRecipe*> grouped;
  std::optional<std::vector<std::string>> grouped_fqns;
  std::optional<const AccumulatorModel*> accumulator;
  std::optional<bool> save_fp8, save_fp8_grouped;
  std::optional<AutocastOpTable> autocast_ops;
  const auto set = [&](auto& slot, auto value, const std::string& key) {
    MIXPREC_CHECK(!slot.has_value(), kPolicy,
                  "key '" + key + "' is given twice in '" + std::string(text) + "'");
    slot = value;
  };
  std::string_view rest = text;
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    const auto eq = item.find('=');
    MIXPREC_CHECK(eq != std::string_view::npos, kPolicy,
                  "'" + std::string(item) + "' in '" + std::string(text) +
                      "' is not key=value; keys: " + kValidKeys);
    const std::string key = lower(trim(item.substr(0, eq)));
    const std::string_view value = trim(item.substr(eq + 1));
    MIXPREC_CHECK(!value.empty() || key == "linear_skip", kPolicy,
                  "key '" + key + "' has no value");
    if (key == "params" || key == "param" || key == "p")
      set(param, policy_dtype(value, key), "params");
    else if (key == "compute" || key == "c")
      set(compute, policy_dtype(value, key), "compute");
    else if (key == "reduce" || key == "r")
      set(reduce, policy_dtype(value, key), "reduce");
    else if (key == "output" || key == "o")
      set(output, policy_dtype(value, key), "output");
    else if (key == "master")
      set(master, policy_dtype(value, key), "master");
    else if (key == "update")
      set(update, static_cast<MasterUpdate>(find_name(kUpdateNames, value, "master update")),
          "update");
    else if (key == "matmul")
      set(matmul, parse_matmul_precision(value), "matmul");
    else if (key == "loss_scaling")
      set(loss_scaling, parse_bool(value, key), "loss_scaling");
    else if (key == "linear")
      set(recipe, policy_recipe(value, key), "linear");
    else if (key == "linear_skip")
      set(skip, split_bars(value, key), "linear_skip");
    else if (key == "grouped")
      set(grouped, policy_grouped_recipe(value, key), "grouped");
    else if (key == "grouped_fqns")
      set(grouped_fqns, split_bars(value, key), "grouped_fqns");
    else if (key == "accumulator")
      set(accumulator, find_accumulator(lower(value), kPolicy), "accumulator");
    else if (key == "save_fp8_activations")
      set(save_fp8, parse_bool(value, key), "save_fp8_activations");
    else if (key == "save_fp8_grouped_activations")
      set(save_fp8_grouped, parse_bool(value, key), "save_fp8_grouped_activations");
    else if (key == "autocast_ops")
      set(autocast_ops,
          static_cast<AutocastOpTable>(
              find_name(kAutocastOpTableNames, value, "autocast op table")),
          "autocast_ops");
    else
      throw Error(kPolicy, "unknown key '" + key + "' in '" + std::string(text) +
                               "'; valid keys: " + kValidKeys);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  MixedPrecisionPolicy p;
  p.param_dtype = param.value_or(DType::f32);
  p.compute_dtype = compute.value_or(p.param_dtype);
  p.reduce_dtype = reduce.value_or(wider_than_f32(p.param_dtype));
  p.output_dtype = output.value_or(p.compute_dtype);
  const DType m = master.value_or(wider_than_f32(p.param_dtype));
  MIXPREC_CHECK(m == DType::f32 || m == p.param_dtype, kPolicy,
                std::string("master ") + dtype_name(m) + " must be f32 or the params dtype (" +
                    dtype_name(p.param_dtype) + ")");
  p.f32_master = m == DType::f32;
  p.master_update = update.value_or(MasterUpdate::nearest);
  p.matmul_precision = matmul.value_or(MatmulPrecision::highest);
  // f16 compute needs loss scaling unless the spelling says otherwise (as the fp16 presets).
  p.loss_scaling = loss_scaling.value_or(p.compute_dtype == DType::f16);
  MIXPREC_CHECK(recipe || !skip, kPolicy, "linear_skip is given without a linear recipe");
  if (recipe) {
    MIXPREC_CHECK(is_narrow_compute(p.compute_dtype), kPolicy,
                  std::string("linear=") + (*recipe)->name +
                      " needs compute bf16 or f16 (its FP8 products replace that dtype's GEMMs), "
                      "got compute " +
                      dtype_name(p.compute_dtype));
    p.linear_recipe = *recipe;
    p.linear_skip = skip.value_or(kDefaultLinearSkip);
  }
  MIXPREC_CHECK(grouped || !grouped_fqns, kPolicy,
                "grouped_fqns is given without a grouped recipe");
  if (grouped) {
    MIXPREC_CHECK(is_narrow_compute(p.compute_dtype), kPolicy,
                  std::string("grouped=") + (*grouped)->name +
                      " needs compute bf16 or f16, got compute " + dtype_name(p.compute_dtype));
    p.grouped_recipe = *grouped;
    p.grouped_fqns = grouped_fqns.value_or(kDefaultGroupedFqns);
    MIXPREC_CHECK(!p.grouped_fqns.empty(), kPolicy,
                  "grouped_fqns is empty: no grouped GEMM would run by grouped=" +
                      std::string((*grouped)->name));
  }
  p.save_fp8_activations = save_fp8.value_or(false);
  MIXPREC_CHECK(!p.save_fp8_activations || (recipe && saves_fp8_input(**recipe)), kPolicy,
                "save_fp8_activations=true needs a linear recipe whose grad_weight casts the "
                "input from its FP8 copy; " +
                    (recipe ? std::string((*recipe)->name) + " " + fp8_save_refusal(**recipe)
                            : std::string("no linear recipe is given")));
  p.save_fp8_grouped_activations = save_fp8_grouped.value_or(false);
  p.autocast_ops = autocast_ops.value_or(AutocastOpTable::mixprec);
  MIXPREC_CHECK(!p.save_fp8_grouped_activations || (grouped && saves_fp8_input(**grouped)), kPolicy,
                "save_fp8_grouped_activations=true needs a grouped recipe (grouped=rowwise or "
                "mxfp8)");
  p.accumulator = accumulator.value_or(nullptr);
  MIXPREC_CHECK(!p.accumulator || recipe || grouped, kPolicy,
                "accumulator is given without a linear or grouped recipe (it sums their FP8 "
                "products)");
  MIXPREC_CHECK(!p.accumulator || (recipe && sums_in_fast_accum(**recipe)) ||
                    (grouped && sums_in_fast_accum(**grouped)),
                kPolicy,
                "accumulator models the FP8 tensor cores' accumulator, and no product of the "
                "recipes given sums in it (block-scaled MX and NVFP4 products are taken as exact "
                "f32 sums)");
  return p;
}

// Atomic: trainers may read it from worker threads while a test's guard changes it.
std::atomic<MatmulPrecision> g_matmul_precision{MatmulPrecision::highest};

}  // namespace

MixedPrecisionPolicy preset(std::string_view name) {
  const Preset* p = find_preset(name);
  MIXPREC_CHECK(p != nullptr, kPolicy,
                "unknown preset '" + std::string(name) + "'; valid: " + preset_names());
  return p->policy;
}

std::string display_name(const MixedPrecisionPolicy& policy) {
  for (const Preset& p : presets())
    if (p.policy == policy) return p.name;
  if (policy.linear_recipe && policy == parse_policy(policy.linear_recipe->name))
    return policy.linear_recipe->name;
  return to_string(policy);
}

std::string preset_names() {
  std::string out;
  for (const Preset& p : presets()) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

MixedPrecisionPolicy parse_policy(std::string_view text) {
  const std::string_view t = trim(text);
  MIXPREC_CHECK(!t.empty(), kPolicy, "empty policy; " + valid_spellings());
  if (t.find('=') != std::string_view::npos) return parse_pairs(t);
  if (const Preset* p = find_preset(t)) return p->policy;
  if (const LinearRecipe* r = find_any_linear_recipe(lower(t))) {
    MixedPrecisionPolicy p = preset("bf16-mixed");
    p.linear_recipe = r;
    p.linear_skip = kDefaultLinearSkip;
    return p;
  }
  // A bare dtype applies to params, compute, reduce and output (as in jmp); the master stays
  // f32 (f64 for f64): dropping the f32 master is a choice the bf16-pure presets make
  // explicitly, together with their update rule.
  DType d;
  try {
    d = jmp_or_parse_dtype(t);
  } catch (const Error&) {
    const std::string guess = closest_name(t, bare_spellings());
    throw Error(kPolicy, "unknown policy '" + quote_prefix(t) + "'" +
                             (guess.empty() ? "" : " (did you mean '" + guess + "'?)") + "; " +
                             valid_spellings());
  }
  return parse_pairs("params=" + std::string(dtype_name(d)) + ",compute=" + dtype_name(d) +
                     ",reduce=" + dtype_name(d) + ",output=" + dtype_name(d));
}

namespace {

std::string bars(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& s : parts) out += (out.empty() ? "" : "|") + s;
  return out;
}

std::string recipe_part(const MixedPrecisionPolicy& p) {
  std::string out;
  if (p.linear_recipe)
    out += std::string(",linear=") + p.linear_recipe->name + ",linear_skip=" + bars(p.linear_skip);
  if (p.grouped_recipe)
    out +=
        std::string(",grouped=") + p.grouped_recipe->name + ",grouped_fqns=" + bars(p.grouped_fqns);
  if (p.accumulator) out += std::string(",accumulator=") + named_accumulator_of(p.accumulator).name;
  if (p.save_fp8_activations) out += ",save_fp8_activations=true";
  if (p.save_fp8_grouped_activations) out += ",save_fp8_grouped_activations=true";
  return out;
}

}  // namespace

std::string to_string(const MixedPrecisionPolicy& p) {
  return std::string("param=") + dtype_name(p.param_dtype) +
         ",compute=" + dtype_name(p.compute_dtype) + ",reduce=" + dtype_name(p.reduce_dtype) +
         ",output=" + dtype_name(p.output_dtype) + ",master=" + dtype_name(p.master_dtype()) +
         ",update=" + kUpdateNames[static_cast<int>(p.master_update)] +
         ",matmul=" + matmul_precision_name(p.matmul_precision) +
         ",loss_scaling=" + (p.loss_scaling ? "true" : "false") + recipe_part(p) +
         (p.autocast_ops == AutocastOpTable::mixprec
              ? std::string()
              : std::string(",autocast_ops=") +
                    kAutocastOpTableNames[static_cast<std::size_t>(p.autocast_ops)]);
}

MatmulPrecision parse_matmul_precision(std::string_view name) {
  return static_cast<MatmulPrecision>(find_name(kMatmulNames, name, "matmul precision"));
}

const char* matmul_precision_name(MatmulPrecision p) {
  return kMatmulNames[static_cast<int>(p)];
}

MatmulPrecision matmul_precision() {
  return g_matmul_precision.load(std::memory_order_relaxed);
}

void set_matmul_precision(MatmulPrecision p) {
  g_matmul_precision.store(p, std::memory_order_relaxed);
}

MatmulPrecisionGuard::MatmulPrecisionGuard(MatmulPrecision p) : saved_(matmul_precision()) {
  set_matmul_precision(p);
}

MatmulPrecisionGuard::~MatmulPrecisionGuard() {
  set_matmul_precision(saved_);
}

}  // namespace mixprec::amp
