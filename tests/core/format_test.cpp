// Printing: tg.Tensor(<NumPy str() of the value, on one line>, shape=..., dtype=...).
// Every expected string below was checked against NumPy 1.24 (str(array), with newlines and
// the indentation after them folded into one space).
#include <cmath>
#include <limits>
#include <sstream>

#include "core/json.h"
#include "core/tensor_impl.h"
#include "support/test_util.h"

namespace tg {
namespace {

constexpr float kNanF = std::numeric_limits<float>::quiet_NaN();
constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The value part of to_string(): between "tg.Tensor(" and ", shape=".
std::string values(const Tensor& t) {
  const std::string s = t.to_string();
  const std::string head = "tg.Tensor(";
  EXPECT_EQ(s.rfind(head, 0), 0u) << s;
  const auto end = s.rfind(", shape=");
  return s.substr(head.size(), end - head.size());
}

TEST(Format, WholeStringNamesShapeAndDtype) {
  EXPECT_EQ(constant(2.2f).to_string(), "tg.Tensor(2.2, shape=(), dtype=float32)");
  EXPECT_EQ(fill({2, 2}, 2.0f).to_string(),
            "tg.Tensor([[2. 2.] [2. 2.]], shape=(2, 2), dtype=float32)");
  EXPECT_EQ(constant({1, 2, 3}).to_string(), "tg.Tensor([1 2 3], shape=(3,), dtype=int32)");
  EXPECT_EQ(constant({int64_t{4}}).to_string(), "tg.Tensor([4], shape=(1,), dtype=int64)");
  EXPECT_EQ(constant(1.5, float64).to_string(), "tg.Tensor(1.5, shape=(), dtype=float64)");
  EXPECT_EQ(constant(true).to_string(), "tg.Tensor(True, shape=(), dtype=bool)");
  EXPECT_EQ(constant("aa").to_string(), "tg.Tensor(b'aa', shape=(), dtype=string)");
  EXPECT_EQ(zeros({0, 3}).to_string(), "tg.Tensor([], shape=(0, 3), dtype=float32)");
}

TEST(Format, StreamOperatorPrintsToString) {
  std::ostringstream os;
  os << constant({1, 10});
  EXPECT_EQ(os.str(), "tg.Tensor([ 1 10], shape=(2,), dtype=int32)");
  EXPECT_EQ(Tensor().to_string(), "tg.Tensor(<empty>)");
}

TEST(Format, FloatScalarsAsNumPyStr) {
  EXPECT_EQ(values(constant(2.2f)), "2.2");
  EXPECT_EQ(values(constant(20.0f)), "20.0");
  EXPECT_EQ(values(constant(0.0f)), "0.0");
  EXPECT_EQ(values(constant(-0.0f)), "-0.0");
  EXPECT_EQ(values(constant(1e-5f)), "1e-05");
  EXPECT_EQ(values(constant(1.5e-7f)), "1.5e-07");
  // float32 1e-4 is just below 1e-4, and NumPy compares in double.
  EXPECT_EQ(values(constant(1e-4f)), "1e-04");
  EXPECT_EQ(values(constant(1e-4, float64)), "0.0001");
  EXPECT_EQ(values(constant(1e16f)), "1e+16");
  // Large floats print their shortest digits, not their exact value (999999986991104).
  EXPECT_EQ(values(constant(1e15f)), "1000000000000000.0");
  EXPECT_EQ(values(constant(9.999e15, float64)), "9999000000000000.0");
  EXPECT_EQ(values(constant(1.0f / 3.0f)), "0.33333334");
  EXPECT_EQ(values(constant(kNanF)), "nan");
  EXPECT_EQ(values(constant(kInfF)), "inf");
  EXPECT_EQ(values(constant(-kInfF)), "-inf");
}

TEST(Format, Float64ScalarsUseTheShortestRoundTripRepr) {
  EXPECT_EQ(values(constant(0.1, float64)), "0.1");
  EXPECT_EQ(values(constant(0.1 + 0.2, float64)), "0.30000000000000004");
  EXPECT_EQ(values(constant(1.0 / 3.0, float64)), "0.3333333333333333");
  EXPECT_EQ(values(constant(123456789.123456789, float64)), "123456789.12345679");
  EXPECT_EQ(values(constant(1e100, float64)), "1e+100");
  EXPECT_EQ(values(constant(-2.5e-300, float64)), "-2.5e-300");
  EXPECT_EQ(values(constant(kNan, float64)), "nan");
  EXPECT_EQ(values(constant(-kInf, float64)), "-inf");
}

TEST(Format, OtherScalars) {
  EXPECT_EQ(values(constant(7)), "7");
  EXPECT_EQ(values(constant(-7)), "-7");
  EXPECT_EQ(values(constant(std::numeric_limits<int64_t>::min())), "-9223372036854775808");
  EXPECT_EQ(values(constant(true)), "True");
  EXPECT_EQ(values(constant(false)), "False");
  EXPECT_EQ(values(constant("")), "b''");
}

TEST(Format, StringsAsPythonBytesRepr) {
  EXPECT_EQ(values(constant({"a", "bb"})), "[b'a' b'bb']");  // no padding
  EXPECT_EQ(values(constant("it's")), "b\"it's\"");          // ' alone: double quotes
  EXPECT_EQ(values(constant("it's \"x\"")), "b'it\\'s \"x\"'");
  EXPECT_EQ(values(constant(std::string("a\\b\n\x01\xff\t\r\x7f", 9))),
            "b'a\\\\b\\n\\x01\\xff\\t\\r\\x7f'");
  EXPECT_EQ(values(constant(std::string("\0z", 2))), "b'\\x00z'");
}

TEST(Format, IntegersArePaddedToOneWidth) {
  EXPECT_EQ(values(constant({1, 10})), "[ 1 10]");
  EXPECT_EQ(values(constant({-1, 10})), "[-1 10]");
  EXPECT_EQ(values(constant({{1, -20}, {300, 4}})), "[[  1 -20] [300   4]]");
  EXPECT_EQ(values(constant({std::numeric_limits<int64_t>::min(), int64_t{0}})),
            "[-9223372036854775808                    0]");
  std::vector<int32_t> v(24);
  for (int i = 0; i < 24; ++i) v[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(values(constant(v, {2, 3, 4})),
            "[[[ 0  1  2  3] [ 4  5  6  7] [ 8  9 10 11]] [[12 13 14 15] [16 17 18 19] [20 21 22 "
            "23]]]");
}

TEST(Format, BoolsPadTrueEvenWithoutFalse) {
  EXPECT_EQ(values(constant({true, false})), "[ True False]");
  EXPECT_EQ(values(constant({true, true})), "[ True  True]");
  EXPECT_EQ(values(constant({false})), "[False]");
  EXPECT_EQ(values(constant({{true}})), "[[ True]]");
}

TEST(Format, PositionalFloatArrays) {
  EXPECT_EQ(values(constant({1.f, 2.5f})), "[1.  2.5]");
  EXPECT_EQ(values(constant({-1.5f, 10.f})), "[-1.5 10. ]");
  EXPECT_EQ(values(constant({0.f, 0.f})), "[0. 0.]");
  EXPECT_EQ(values(constant({-0.f, 1.f})), "[-0.  1.]");
  EXPECT_EQ(values(constant({{2.5f}})), "[[2.5]]");
  // At most 8 fractional digits, rounded; then trailing zeros become spaces.
  EXPECT_EQ(values(constant({0.123456789f, 1.f})), "[0.12345679 1.        ]");
  EXPECT_EQ(values(constant({0.001953125, 1.0}, float64)), "[0.00195312 1.        ]");
  EXPECT_EQ(values(constant({0.1 + 0.2, 1.0}, float64)), "[0.3 1. ]");
  EXPECT_EQ(values(constant({0.46211716f, -0.7615942f})), "[ 0.46211717 -0.7615942 ]");
  EXPECT_EQ(values(constant({1e7f, 12345678.9f})), "[10000000. 12345679.]");
  EXPECT_EQ(values(constant({99999999.0}, float64)), "[99999999.]");
  EXPECT_EQ(values(constant({1.f, 1000.f})), "[   1. 1000.]");  // ratio 1000 is not > 1000
  EXPECT_EQ(values(constant({1e-4, 0.1}, float64)), "[0.0001 0.1   ]");
  std::vector<float> q(12);
  for (int i = 0; i < 12; ++i) q[static_cast<std::size_t>(i)] = static_cast<float>(i) / 4;
  EXPECT_EQ(values(constant(q, {3, 2, 2})),
            "[[[0.   0.25] [0.5  0.75]] [[1.   1.25] [1.5  1.75]] [[2.   2.25] [2.5  2.75]]]");
}

TEST(Format, ScientificFloatArrays) {
  EXPECT_EQ(values(constant({0.1f, 0.25f, 1000.f})), "[1.0e-01 2.5e-01 1.0e+03]");
  EXPECT_EQ(values(constant({1.f, 1000.5f})), "[1.0000e+00 1.0005e+03]");
  EXPECT_EQ(values(constant({1e-5f, 1.f})), "[1.e-05 1.e+00]");
  EXPECT_EQ(values(constant({1e8f, 1.f})), "[1.e+08 1.e+00]");
  EXPECT_EQ(values(constant({1e-4f, 0.1f})), "[1.e-04 1.e-01]");  // float32 1e-4 < 1e-4
  EXPECT_EQ(values(constant({-1e-9, 5e3}, float64)), "[-1.e-09  5.e+03]");
  EXPECT_EQ(values(constant({-1.5e-5f, 2e-5f, 3.25e-6f})), "[-1.50e-05  2.00e-05  3.25e-06]");
  EXPECT_EQ(values(constant({1.23456789012e-5, 1.0}, float64)), "[1.23456789e-05 1.00000000e+00]");
  EXPECT_EQ(values(constant({9.999999999e-5, 1.0}, float64)), "[1.e-04 1.e+00]");
  // Exponents share one width.
  EXPECT_EQ(values(constant({1e-100, 1.0}, float64)), "[1.e-100 1.e+000]");
  EXPECT_EQ(values(constant({1e-5, 1e100, 1.5e200}, float64)), "[1.0e-005 1.0e+100 1.5e+200]");
}

TEST(Format, NanAndInfWidenTheColumns) {
  EXPECT_EQ(values(constant({1.f, kNanF})), "[ 1. nan]");
  EXPECT_EQ(values(constant({kNanF, -kInfF})), "[ nan -inf]");
  EXPECT_EQ(values(constant({kNanF, kInfF})), "[nan inf]");
  EXPECT_EQ(values(constant({kInfF, kInfF})), "[inf inf]");
  EXPECT_EQ(values(constant({kNanF})), "[nan]");
  EXPECT_EQ(values(constant({1.5f, kInfF, -2.25f})), "[ 1.5    inf -2.25]");
  EXPECT_EQ(values(constant({-1e-5f, kNanF})), "[-1.e-05     nan]");
  EXPECT_EQ(values(constant({kNan, 2.0}, float64)), "[nan  2.]");
}

TEST(Format, EmptyTensorsPrintAsEmptyBrackets) {
  EXPECT_EQ(values(zeros({0})), "[]");
  EXPECT_EQ(values(zeros({0, 3})), "[]");
  EXPECT_EQ(values(zeros({2, 0})), "[]");
  EXPECT_EQ(values(zeros({2, 0, 3}, int32)), "[]");
  EXPECT_EQ(values(zeros({0}, string_)), "[]");
  EXPECT_EQ(zeros({2, 0}).to_string(), "tg.Tensor([], shape=(2, 0), dtype=float32)");
}

TEST(Format, MoreThan1000ElementsAreSummarisedWithThreeEdgeItems) {
  // Widths come from the shown elements only, as in NumPy.
  EXPECT_EQ(values(range(2000)), "[   0    1    2 ... 1997 1998 1999]");
  EXPECT_EQ(values(range(1001)), "[   0    1    2 ...  998  999 1000]");
  EXPECT_EQ(values(range(0.0f, 2000.0f)),
            "[0.000e+00 1.000e+00 2.000e+00 ... 1.997e+03 1.998e+03 1.999e+03]");
  EXPECT_EQ(values(zeros({2000}, bool_)), "[False False False ... False False False]");
  EXPECT_EQ(values(zeros({1001}, string_)), "[b'' b'' b'' ... b'' b'' b'']");
  EXPECT_EQ(values(zeros({100, 100})),
            "[[0. 0. 0. ... 0. 0. 0.] [0. 0. 0. ... 0. 0. 0.] [0. 0. 0. ... 0. 0. 0.] ... "
            "[0. 0. 0. ... 0. 0. 0.] [0. 0. 0. ... 0. 0. 0.] [0. 0. 0. ... 0. 0. 0.]]");
  std::vector<int32_t> v(2002);
  for (int i = 0; i < 2002; ++i) v[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(values(constant(v, {2, 1001})),
            "[[   0    1    2 ...  998  999 1000] [1001 1002 1003 ... 1999 2000 2001]]");
}

TEST(Format, SummarisesEveryLongDimOfARank3Tensor) {
  std::vector<int64_t> v(1100);
  for (int i = 0; i < 1100; ++i) v[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(
      values(constant(v, {10, 10, 11})),
      "[[[   0    1    2 ...    8    9   10] [  11   12   13 ...   19   20   21] [  22   23   24 "
      "...   30   31   32] ... [  77   78   79 ...   85   86   87] [  88   89   90 ...   96   97 "
      "  98] [  99  100  101 ...  107  108  109]] [[ 110  111  112 ...  118  119  120] [ 121  122 "
      " 123 ...  129  130  131] [ 132  133  134 ...  140  141  142] ... [ 187  188  189 ...  195  "
      "196  197] [ 198  199  200 ...  206  207  208] [ 209  210  211 ...  217  218  219]] [[ 220  "
      "221  222 ...  228  229  230] [ 231  232  233 ...  239  240  241] [ 242  243  244 ...  250  "
      "251  252] ... [ 297  298  299 ...  305  306  307] [ 308  309  310 ...  316  317  318] [ 319 "
      " 320  321 ...  327  328  329]] ... [[ 770  771  772 ...  778  779  780] [ 781  782  783 ... "
      " 789  790  791] [ 792  793  794 ...  800  801  802] ... [ 847  848  849 ...  855  856  857] "
      "[ 858  859  860 ...  866  867  868] [ 869  870  871 ...  877  878  879]] [[ 880  881  882 "
      "...  888  889  890] [ 891  892  893 ...  899  900  901] [ 902  903  904 ...  910  911  912] "
      "... [ 957  958  959 ...  965  966  967] [ 968  969  970 ...  976  977  978] [ 979  980  981 "
      "...  987  988  989]] [[ 990  991  992 ...  998  999 1000] [1001 1002 1003 ... 1009 1010 "
      "1011] [1012 1013 1014 ... 1020 1021 1022] ... [1067 1068 1069 ... 1075 1076 1077] [1078 "
      "1079 1080 ... 1086 1087 1088] [1089 1090 1091 ... 1097 1098 1099]]]");
}

TEST(Format, ExactlyTheThresholdIsNotSummarised) {
  const std::string s = values(range(1000));
  EXPECT_EQ(s.find("..."), std::string::npos);
  EXPECT_EQ(s.substr(0, 16), "[  0   1   2   3");
  EXPECT_EQ(s.substr(s.size() - 8), "998 999]");
}

// A stand-in for the tracing layer's graph value.
struct FakeSymbol : detail::SymbolicValue {
  std::string name() const override { return "x:0"; }
  std::string origin() const override { return "'x:0' of function 'f' (trace 0)"; }
};

TEST(Format, SymbolicTensorsPrintTheirGraphName) {
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->dtype = int32;
  impl->shape = TensorShape{None};
  impl->symbolic = std::make_shared<FakeSymbol>();
  EXPECT_EQ(Tensor(impl).to_string(), "Tensor(\"x:0\", shape=(None,), dtype=int32)");
}

// The retracing report and `tgx inspect --json` write strings through json_string: what JSON
// requires escaped is, and nothing else is.
TEST(JsonString, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(detail::json_string("plain (3,) float32"), "\"plain (3,) float32\"");
  EXPECT_EQ(detail::json_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(detail::json_string("1\n2\r3\t4"), "\"1\\n2\\r3\\t4\"");
  EXPECT_EQ(detail::json_string(std::string("x\x01y\x1f", 4)), "\"x\\u0001y\\u001f\"");
  EXPECT_EQ(detail::json_string("caf\xc3\xa9"), "\"caf\xc3\xa9\"") << "UTF-8 passes through";
}

}  // namespace
}  // namespace tg
