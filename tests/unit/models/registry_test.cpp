// The model registry: model.kind picks a family, every family keeps the Model contract the
// trainer, the sharded runtime and the planner rely on, and a wrong kind names the key.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "io/config/config_fields.h"
#include "mixprec/dist/shard_layout.h"
#include "mixprec/models/registry.h"
#include "models_testing.h"

namespace mixprec::models {
namespace {

using testing::tiny_config;

TEST(ModelRegistry, EveryFamilyIsMadeByItsKindAndDeclaresAUnitForEachParameter) {
  ASSERT_FALSE(model_specs().empty());
  for (const ModelSpec* family : model_specs()) {
    SCOPED_TRACE(family->kind);
    const std::unique_ptr<Model> model = make_model(tiny_config(family->kind));
    EXPECT_EQ(model->config().kind, family->kind);
    EXPECT_FALSE(model->parameters().materialized() && !model->parameters().specs().empty())
        << "described on the meta device, not allocated";
    const std::vector<std::string> units = model->shard_units();
    ASSERT_FALSE(units.empty());
    const std::set<std::string> declared(units.begin(), units.end());
    std::set<std::string> used;
    for (const ParamSpec& s : model->parameters().specs()) {
      EXPECT_TRUE(declared.contains(s.unit)) << s.name << " is in undeclared unit " << s.unit;
      used.insert(s.unit);
    }
    EXPECT_EQ(used, declared) << "a declared unit holds no parameter";
    EXPECT_EQ(model->describe().rfind("model: " + std::string(family->kind), 0), 0u)
        << model->describe();
    EXPECT_GT(model->estimate_activations(amp::preset("bf16-mixed"), 2, 8).total(), 0u);
    // The sharded layout takes the declared units, in order, and places every parameter.
    const dist::ShardLayout layout(*model, 2);
    ASSERT_EQ(layout.units().size(), units.size());
    for (std::size_t u = 0; u < units.size(); ++u) EXPECT_EQ(layout.units()[u].name, units[u]);
    EXPECT_EQ(layout.numel(), model->parameters().parameter_count());
  }
}

TEST(ModelRegistry, AnUnknownKindNamesTheKeyAndTheFamilies) {
  try {
    make_model(tiny_config("llama9"));
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("model.kind"), std::string::npos) << what;
    EXPECT_NE(what.find("'llama9'"), std::string::npos) << what;
    for (const ModelSpec* f : model_specs())
      EXPECT_NE(what.find(f->kind), std::string::npos) << what;
  }
}

// The config loader's key table takes model.kind's choices from the registry.
TEST(ModelRegistry, TheConfigAcceptsExactlyTheRegisteredKinds) {
  const config::detail::Field* field = config::detail::find_field("model.kind");
  ASSERT_NE(field, nullptr);
  std::set<std::string> registered;
  for (const ModelSpec* f : model_specs()) registered.insert(f->kind);
  EXPECT_EQ(std::set<std::string>(field->choices.begin(), field->choices.end()), registered);
}

}  // namespace
}  // namespace mixprec::models
