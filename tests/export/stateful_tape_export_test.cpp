// A function that takes a gradient inside its own trace, through a tg::cond whose branch writes
// a Variable, keeps the read-variable snapshots its stateful cond node gets (extra inputs the
// kernel ignores, for the gradient's replay): saved and loaded, it computes what it computed.
#include "support/test_util.h"

namespace tg {
namespace {

TEST(StatefulTapeExport, AStatefulCondWithSnapshotsRoundTrips) {
  Variable v(constant(1.5, float64), "v");
  auto step = function([&](const Tensor& x) {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = cond(x > 0.0,
                          [&] {
                            v.assign_add(constant(1.0, float64));
                            return x * x * v.read_value();
                          },
                          [&] { return x * v.read_value(); });
    return std::vector<Tensor>{y, tape.gradient(y, x)};
  }, {.name = "step"});
  const Tensor x = constant(2.0, float64);
  const std::vector<Tensor> first = step(x);  // v: 1.5 -> 2.5; y = 4 * 2.5, dy/dx = 2 * 2 * 2.5
  EXPECT_DOUBLE_EQ(first[0].item<double>(), 10.0);
  EXPECT_DOUBLE_EQ(first[1].item<double>(), 10.0);
  const std::string path = ::testing::TempDir() + "/stateful_tape_export.tgx";
  save(path, step);
  v.assign(constant(1.5, float64));
  LoadedFunction loaded = load(path);
  ASSERT_EQ(loaded.variables().size(), 1u);
  loaded.variables()[0].assign(constant(1.5, float64));
  const Outputs got = loaded(x);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_DOUBLE_EQ(got[0].item<double>(), 10.0);
  EXPECT_DOUBLE_EQ(got[1].item<double>(), 10.0);
  EXPECT_DOUBLE_EQ(loaded.variables()[0].read_value().item<double>(), 2.5);
  const Outputs negative = loaded(constant(-1.0, float64));  // the other branch: y = x * v
  EXPECT_DOUBLE_EQ(negative[0].item<double>(), -2.5);
  EXPECT_DOUBLE_EQ(negative[1].item<double>(), 2.5);
}

}  // namespace
}  // namespace tg
