// The optimizer table's facts against the optimizers themselves: the state each row says it
// keeps (buffers per element, a per-block buffer) is what its optimizer's state_dict holds
// after a step, and a wrong name is an error naming optimizer.name.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "mixprec/optim/optimizer_table.h"
#include "optim_testing.h"

namespace mixprec::optim {
namespace {

using testing::make_param;
using testing::make_policy;

TEST(OptimizerTable, EachRowsStateIsWhatItsOptimizerKeeps) {
  for (const double momentum : {0.0, 0.9}) {
    for (const OptimizerKind& kind : optimizer_kinds()) {
      SCOPED_TRACE(std::string(kind.name) + " momentum " + std::to_string(momentum));
      // [4, 6] with 2 heads: Adam-mini keeps one value per head block.
      const auto p = make_param("w", {4, 6}, 1, make_policy(DType::f32), ParamRole{.heads = 2});
      p->set_grad(Tensor::full({4, 6}, 0.5, DType::f32));
      const OptimizerSettings settings{.lr = 0.1, .momentum = momentum};
      const std::unique_ptr<Optimizer> opt = kind.make({p}, settings);
      opt->step();
      int elementwise = 0;
      std::map<std::string, int64_t> per_block;
      for (const auto& [key, t] : opt->state_dict()) {
        if (!key.starts_with("w.") || key == "w.step") continue;
        const std::string buffer = key.substr(2);
        if (t.numel() == p->master().numel())
          ++elementwise;
        else
          per_block[buffer] = t.numel();
      }
      EXPECT_EQ(elementwise, kind.buffers_per_element(settings));
      if (kind.per_block_buffer) {
        ASSERT_EQ(per_block.size(), 1u);
        EXPECT_EQ(per_block.begin()->first, kind.per_block_buffer);
        EXPECT_EQ(per_block.begin()->second, kind.blocks({4, 6}, ParamRole{.heads = 2}).blocks);
        EXPECT_EQ(per_block_owner(kind.per_block_buffer), &kind);
      } else {
        EXPECT_TRUE(per_block.empty());
      }
    }
  }
}

TEST(OptimizerTable, AnUnknownNameNamesTheKeyAndTheRows) {
  try {
    optimizer_kind("adam");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("optimizer.name"), std::string::npos) << what;
    for (const OptimizerKind& k : optimizer_kinds())
      EXPECT_NE(what.find(k.name), std::string::npos) << what;
  }
  EXPECT_EQ(per_block_owner("exp_avg"), nullptr);
}

}  // namespace
}  // namespace mixprec::optim
