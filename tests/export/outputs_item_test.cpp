// tg::Outputs::item: a loaded function's single result read as a number, as Tensor::item reads it.
#include "support/test_util.h"

namespace tg {
namespace {

TEST(LoadedOutputs, ItemReadsTheSingleElementOfTheOneResult) {
  auto mean = function([](const Tensor& x) { return reduce_mean(x); }, {.name = "mean"});
  auto both = function([](const Tensor& x) { return std::vector<Tensor>{x, x * 2.0f}; }, {.name = "both"});
  mean(constant({1.0f, 2.0f, 6.0f}));
  both(constant(1.0f));
  const std::string dir = ::testing::TempDir();
  save(dir + "/outputs_item_mean.tgx", mean);
  save(dir + "/outputs_item_both.tgx", both);
  LoadedFunction loaded_mean = load(dir + "/outputs_item_mean.tgx");
  LoadedFunction loaded_both = load(dir + "/outputs_item_both.tgx");
  EXPECT_EQ(loaded_mean(constant({1.0f, 2.0f, 6.0f})).item<float>(), 3.0f);
  EXPECT_THROW_MSG(loaded_mean(constant({1.0f, 2.0f, 6.0f})).item<double>(), TypeError, "float32");
  EXPECT_THROW(loaded_both(constant(1.0f)).item<float>(), TypeError);  // two results: index them first
  EXPECT_EQ(loaded_both(constant(1.0f))[1].item<float>(), 2.0f);
}

}  // namespace
}  // namespace tg
