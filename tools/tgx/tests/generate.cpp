// Writes the files the tgx tests run on (the CTest fixture tgx_files), into the directory given:
//   mlp.tgx          a 2-layer MLP with four Variables, input_signature x: float32 (None, 4)
//   x.npy            its input (5, 4); x_float64.npy the same values as float64 (for --cast)
//   expected.npy     mlp(x), computed by the original traced function
//   wrong.npy        expected.npy with element [2, 1] off by 0.5 (an --expect mismatch)
//   pair.tgx         (a: float32 (3,), b: int32 (3,)) -> (a * b, sum(b)): named inputs, two
//                    outputs, an int32 output compared exactly; a.npy, b.npy, pair_out0.npy,
//                    pair_out1.npy
//   scaled.tgx       (x, n) with a literal int n, traced for n = 2 and n = 3: two signatures,
//                    not callable with tensors only
//   truncated.tgx    the first 60% of mlp.tgx; corrupted.tgx mlp.tgx with one byte flipped
//   not_a_model.tgx  x.npy under another name
#include <tracegraph/tracegraph.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: tgx_generate_files OUTPUT_DIR\n";
    return 1;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  auto at = [&](const std::string& name) { return (dir / name).string(); };
  try {
    // The MLP: Variables closed over, one input_signature with a None batch dim.
    tg::Variable w1(tg::random_uniform({4, 8}, -1, 1, 11), "dense1/kernel");
    tg::Variable b1(tg::random_uniform({8}, -0.1f, 0.1f, 12), "dense1/bias");
    tg::Variable w2(tg::random_uniform({8, 3}, -1, 1, 13), "dense2/kernel");
    tg::Variable b2(tg::random_uniform({3}, -0.1f, 0.1f, 14), "dense2/bias");
    tg::FunctionOptions mlp_options;
    mlp_options.name = "mlp";
    mlp_options.input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 4}, tg::float32, "x")};
    auto mlp = tg::function(
        [&](const tg::Tensor& x) { return tg::matmul(tg::relu(tg::matmul(x, w1) + b1), w2) + b2; }, mlp_options);
    const tg::Tensor x = tg::random_uniform({5, 4}, -2, 2, 21);
    const tg::Tensor y = mlp(x);
    tg::save(at("mlp.tgx"), mlp);
    tg::save_npy(at("x.npy"), x);
    tg::save_npy(at("x_float64.npy"), tg::cast(x, tg::float64));
    tg::save_npy(at("expected.npy"), y);
    std::vector<float> wrong = y.to_vector<float>();
    wrong[2 * 3 + 1] += 0.5f;
    tg::save_npy(at("wrong.npy"), tg::constant(wrong, y.shape()));

    // Two tensor parameters by name, two outputs of different dtypes.
    tg::FunctionOptions pair_options;
    pair_options.name = "pair";
    pair_options.arg_names = {"a", "b"};
    auto pair = tg::function(
        [](const tg::Tensor& a, const tg::Tensor& b) {
          return std::make_tuple(a * tg::cast(b, tg::float32), tg::reduce_sum(b));
        },
        pair_options);
    const tg::Tensor a = tg::constant({0.5f, -1.5f, 2.0f});
    const tg::Tensor b = tg::constant({3, 4, -5});
    const auto [p0, p1] = pair(a, b);
    tg::save(at("pair.tgx"), pair);
    tg::save_npy(at("a.npy"), a);
    tg::save_npy(at("b.npy"), b);
    tg::save_npy(at("pair_out0.npy"), p0);
    tg::save_npy(at("pair_out1.npy"), p1);

    // A literal parameter: one concrete function per value.
    tg::FunctionOptions scaled_options;
    scaled_options.name = "scaled";
    scaled_options.arg_names = {"x", "n"};
    auto scaled = tg::function([](const tg::Tensor& v, int n) { return v * static_cast<float>(n); }, scaled_options);
    scaled(tg::constant({1.0f, 2.0f}), 2);
    scaled(tg::constant({1.0f, 2.0f}), 3);
    tg::save(at("scaled.tgx"), scaled);

    // Damaged copies.
    const std::string bytes = read_bytes(at("mlp.tgx"));
    write_bytes(at("truncated.tgx"), bytes.substr(0, bytes.size() * 6 / 10));
    std::string flipped = bytes;
    flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x5a);
    write_bytes(at("corrupted.tgx"), flipped);
    write_bytes(at("not_a_model.tgx"), read_bytes(at("x.npy")));
  } catch (const std::exception& e) {
    std::cerr << "tgx_generate_files: " << e.what() << "\n";
    return 1;
  }
  std::cout << "wrote the tgx test files to " << dir.string() << "\n";
  return 0;
}
