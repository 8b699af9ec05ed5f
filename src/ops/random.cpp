// Random numbers: TensorFlow 2's seed rules, the stateful ops (one stream per eager seed pair or
// per graph node) and the stateless ones, and dropout. Every value comes from Philox4x32-10
// keyed by the stream and counted by (element block, draw number), so element i of draw k is
// the same whatever the thread count, and a draw can be repeated from its number alone.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <tuple>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "core/thread_pool.h"
#include "ops/random.h"
#include "ops/shape_value.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {

namespace {

// ---- the generator ----------------------------------------------------------------------------

// splitmix64's finaliser: spreads a seed's bits over the whole key.
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

struct Block {
  uint32_t w[4];
};

// Philox4x32 with 10 rounds (Salmon et al., SC'11), the generator TF's random kernels use: a
// counter-based bijection, so any block can be computed on its own.
Block philox(uint64_t key, uint64_t index, uint64_t draw) {
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  uint32_t c0 = static_cast<uint32_t>(index), c1 = static_cast<uint32_t>(index >> 32);
  uint32_t c2 = static_cast<uint32_t>(draw), c3 = static_cast<uint32_t>(draw >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{0xD2511F53} * c0;
    const uint64_t p1 = uint64_t{0xCD9E8D57} * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9;
    k1 += 0xBB67AE85;
  }
  return {{c0, c1, c2, c3}};
}

constexpr double k2Pow32 = 4294967296.0;
constexpr double k2PowMinus53 = 1.0 / 9007199254740992.0;
uint64_t join(uint32_t hi, uint32_t lo) { return (uint64_t{hi} << 32) | lo; }
// [0, 1) with 53 random bits; (0, 1] for a logarithm's argument.
double unit53(uint32_t hi, uint32_t lo) { return static_cast<double>(join(hi, lo) >> 11) * k2PowMinus53; }
double unit53_open(uint32_t hi, uint32_t lo) { return (static_cast<double>(join(hi, lo) >> 11) + 1.0) * k2PowMinus53; }
double unit32(uint32_t w) { return static_cast<double>(w) / k2Pow32; }
double unit32_open(uint32_t w) { return (static_cast<double>(w) + 1.0) / k2Pow32; }

// Box-Muller: two independent N(0, 1) values from u1 in (0, 1] and u2 in [0, 1).
std::pair<double, double> box_muller(double u1, double u2) {
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 6.283185307179586 * u2;
  return {r * std::cos(theta), r * std::sin(theta)};
}

enum class Dist { kUniform, kNormal, kTruncated };

Dist dist_of(OpId id) {
  switch (id) {
    case OpId::RandomUniform:
    case OpId::StatelessRandomUniform: return Dist::kUniform;
    case OpId::RandomNormal:
    case OpId::StatelessRandomNormal: return Dist::kNormal;
    default: return Dist::kTruncated;
  }
}

// Elements per Philox block: 32 bits per float32 value (a normal pair takes two), 64 per wider one.
int64_t per_block(Dist dist, DType dtype) {
  if (dist == Dist::kTruncated) return 1;  // each element has blocks of its own for its retries
  return dtype == DType::Float32 ? 4 : 2;
}

template <class T>
void fill_block(Dist dist, const RandomAttrs& a, uint64_t key, uint64_t draw, int64_t block, T* out, int64_t count) {
  if (dist == Dist::kTruncated) {
    // TF's rule: a value beyond 2 stddev is dropped and drawn again. Element `block` walks its
    // own blocks (attempt in the top 16 bits), so it is independent of every other element.
    for (uint64_t attempt = 0;; ++attempt) {
      TG_CHECK(attempt < 65536, "truncated_normal found no value within 2 stddev in 131072 draws");
      const Block b = philox(key, static_cast<uint64_t>(block) | (attempt << 48), draw);
      const auto [z0, z1] = std::is_same_v<T, float> ? box_muller(unit32_open(b.w[0]), unit32(b.w[1]))
                                                     : box_muller(unit53_open(b.w[0], b.w[1]), unit53(b.w[2], b.w[3]));
      const double z = std::fabs(z0) < 2.0 ? z0 : z1;
      if (std::fabs(z) < 2.0) {
        out[0] = static_cast<T>(a.mean + a.stddev * z);
        return;
      }
    }
  }
  const Block b = philox(key, static_cast<uint64_t>(block), draw);
  if constexpr (std::is_floating_point_v<T>) {
    double v[4] = {};
    if (dist == Dist::kUniform) {
      if (std::is_same_v<T, float>) {
        for (int k = 0; k < 4; ++k) v[k] = static_cast<double>(b.w[k] >> 8) / 16777216.0;  // 24 bits
      } else {
        v[0] = unit53(b.w[0], b.w[1]);
        v[1] = unit53(b.w[2], b.w[3]);
      }
      const T hi = static_cast<T>(a.maxval), lo = static_cast<T>(a.minval);
      for (int64_t k = 0; k < count; ++k) {
        const T x = static_cast<T>(a.minval + (a.maxval - a.minval) * v[k]);
        out[k] = x < hi ? x : std::nextafter(hi, lo);  // rounding must not reach the open end
      }
      return;
    }
    if (std::is_same_v<T, float>) {
      std::tie(v[0], v[1]) = box_muller(unit32_open(b.w[0]), unit32(b.w[1]));
      std::tie(v[2], v[3]) = box_muller(unit32_open(b.w[2]), unit32(b.w[3]));
    } else {
      std::tie(v[0], v[1]) = box_muller(unit53_open(b.w[0], b.w[1]), unit53(b.w[2], b.w[3]));
    }
    for (int64_t k = 0; k < count; ++k) out[k] = static_cast<T>(a.mean + a.stddev * v[k]);
  } else {
    // Integers in [minval, maxval): 64 bits modulo the range (a bias below range / 2^64).
    const auto lo = static_cast<int64_t>(a.minval);
    const uint64_t range = static_cast<uint64_t>(static_cast<int64_t>(a.maxval)) - static_cast<uint64_t>(lo);
    for (int64_t k = 0; k < count; ++k) {
      const uint64_t r = join(b.w[2 * k], b.w[2 * k + 1]);
      out[k] = static_cast<T>(static_cast<int64_t>(static_cast<uint64_t>(lo) + r % range));
    }
  }
}

// The values of draw `draw` of the stream `stream` (a Philox key before mixing).
Tensor generate(Dist dist, const RandomAttrs& a, const std::vector<int64_t>& dims, uint64_t stream, uint64_t draw) {
  Tensor result = allocate_tensor(a.dtype, TensorShape(dims));
  const int64_t n = result.impl()->shape.num_elements();
  const int64_t per = per_block(dist, a.dtype);
  const int64_t blocks = (n + per - 1) / per;
  const uint64_t key = mix(stream);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T* out = data_of<T>(result);
    parallel_for(blocks, 1024, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b)
        fill_block<T>(dist, a, key, draw, b, out + b * per, std::min(per, n - b * per));
    });
  };
  switch (a.dtype) {  // the shape rule admits these four
    case DType::Float32: run(float{}); break;
    case DType::Float64: run(double{}); break;
    case DType::Int32: run(int32_t{}); break;
    case DType::Int64: run(int64_t{}); break;
    default: TG_CHECK(false, "a random op of dtype ", to_string(a.dtype));
  }
  return result;
}

// ---- shape rules ----------------------------------------------------------------------------

const char* name_of(OpId id) { return op_def(id).name; }

void check_distribution(OpId id, const RandomAttrs& a) {
  const char* op = name_of(id);
  const bool floating = a.dtype == DType::Float32 || a.dtype == DType::Float64;
  if (dist_of(id) != Dist::kUniform) {
    if (!floating)
      op_error<TypeError>(op, "expected dtype float32 or float64, got ", to_string(a.dtype));
    if (!std::isfinite(a.mean) || !std::isfinite(a.stddev) || a.stddev < 0)
      op_error<InvalidArgumentError>(op, "expected a finite mean and a finite stddev >= 0, got mean=", a.mean,
                                     " stddev=", a.stddev);
    return;
  }
  if (floating) {
    if (!(a.minval < a.maxval) || !std::isfinite(a.minval) || !std::isfinite(a.maxval))
      op_error<InvalidArgumentError>(op, "expected finite minval < maxval, got minval=", a.minval,
                                     " maxval=", a.maxval);
    return;
  }
  if (a.dtype != DType::Int32 && a.dtype != DType::Int64)
    op_error<TypeError>(op, "expected dtype float32, float64, int32 or int64, got ", to_string(a.dtype));
  // Bounds arrive as doubles: beyond 2^53 (int64) they may already have been rounded.
  const double limit = a.dtype == DType::Int32 ? 2147483648.0 : 9007199254740992.0;
  for (double v : {a.minval, a.maxval})
    if (v != std::floor(v) || v < -limit || v > limit)
      op_error<InvalidArgumentError>(op, "integer bounds must be whole numbers within +-", limit, " for ",
                                     to_string(a.dtype), ", got ", v);
  if (!(a.minval < a.maxval))
    op_error<InvalidArgumentError>(op, "expected minval < maxval (the range [minval, maxval) must not be "
                                   "empty), got minval=", a.minval, " maxval=", a.maxval);
}

template <int kOp>
std::vector<ValueType> infer_random(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const auto id = static_cast<OpId>(kOp);
  const RandomAttrs& a = attrs.get<RandomAttrs>();
  check_distribution(id, a);
  if (in.size() == 2) {
    const ValueType& seed = in[1];
    if (seed.dtype != DType::Int32 && seed.dtype != DType::Int64)
      op_error<TypeError>(name_of(id), "the seed must be an int32 or int64 tensor of shape (2,), got ",
                          describe(seed));
    if (seed.shape.has_rank() &&
        (seed.shape.rank() != 1 || (seed.shape.dims()[0] != None && seed.shape.dims()[0] != 2)))
      op_error<InvalidArgumentError>(name_of(id), "the seed must have shape (2,), got ", describe(seed),
                                     "; pass e.g. tg::constant({1, 2})");
  }
  return {ValueType{a.dtype, described_shape(name_of(id), in[0], a.shape)}};
}

// ---- seeds and streams ----------------------------------------------------------------------

// TF's DEFAULT_GRAPH_SEED: the global seed of an op that has only an op seed.
constexpr uint64_t kDefaultGlobalSeed = 87654321;

struct Seeds {
  std::mutex mu;
  std::optional<uint64_t> global;
  uint64_t eager_op_seeds = 0;         // op seeds handed out eagerly since set_random_seed
  std::mt19937_64 unseeded{std::random_device{}()};  // seeds nobody chose
  // The eager stream of each (op, dtype, seed pair) an op seed named: TF's kernel cache, whose
  // kernels keep counting. Only explicit op seeds can meet again, so only they are kept.
  std::map<std::tuple<int, int, uint64_t, uint64_t>, std::shared_ptr<RandomState>> eager_streams;
};
Seeds& seeds() {
  static Seeds s;
  return s;
}
std::atomic<uint64_t> g_generation{1};
// Op seeds handed out by the traces running on this thread (restart_trace_op_seeds).
thread_local uint64_t t_trace_op_seeds = 0;
// The innermost RandomDrawLog alive on this thread, which installs itself.
thread_local RandomDrawLog* t_draw_log = nullptr;

// A derived op seed, spread so that it rarely meets a small seed a user chose.
uint64_t derived_op_seed(uint64_t n) { return mix(n ^ 0x6f70207365656400ULL); }

// What a stateful op adds to its stream key: a number frozen per op. It was OpId's ordinal, which
// moves whenever ops.def gains an op before the random ops, and with it every seeded draw (the
// tenth session's three new ops changed the CNN demo's initial weights). These are the ordinals
// of e93285c, so seeded draws keep the values they had there (`Random.SeededDrawsKeepTheirValues`).
uint64_t stream_tag(OpId id) {
  switch (id) {
    case OpId::RandomUniform: return 123;
    case OpId::RandomNormal: return 124;
    case OpId::TruncatedNormal: return 125;
    default: TG_CHECK(false, "a stream key for ", name_of(id), ", which is not a stateful random op"); return 0;
  }
}

// The stream key of a stateful op: its seed pair, and the op, so that random_uniform and
// random_normal with one seed pair are not built from the same bits.
uint64_t stream_key(OpId id, const RandomAttrs& a) {
  return mix(mix(static_cast<uint64_t>(a.seed) + stream_tag(id)) ^ static_cast<uint64_t>(a.seed2));
}

Tensor stateful_random(OpId id, const Tensor& shape, RandomAttrs a, std::optional<uint64_t> op_seed) {
  const char* op = name_of(id);
  a.shape = shape_value_of(op, shape);
  const bool tracing = current_recorder() != nullptr;
  Seeds& s = seeds();
  {
    std::lock_guard lock(s.mu);
    if (s.global) {
      a.seed = static_cast<int64_t>(*s.global);
      a.seed2 = static_cast<int64_t>(op_seed ? *op_seed : derived_op_seed(tracing ? t_trace_op_seeds++ : s.eager_op_seeds++));
    } else if (op_seed) {
      a.seed = static_cast<int64_t>(kDefaultGlobalSeed);
      a.seed2 = static_cast<int64_t>(*op_seed);
    } else {
      a.seed = static_cast<int64_t>(s.unseeded());
      a.seed2 = static_cast<int64_t>(s.unseeded());
    }
    // Inside a trace the node keeps the state it was made with (one stream per node).
    if (!tracing && op_seed) {
      auto& stream = s.eager_streams[{static_cast<int>(id), static_cast<int>(a.dtype), static_cast<uint64_t>(a.seed),
                                      static_cast<uint64_t>(a.seed2)}];
      if (!stream) stream = std::make_shared<RandomState>();
      a.state = stream;
    }
  }
  return apply_op1(id, {shape}, a);
}

template <int kOp>
void kernel_stateful(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const auto id = static_cast<OpId>(kOp);
  const RandomAttrs& a = attrs.get<RandomAttrs>();
  TG_CHECK(a.state != nullptr, name_of(id), " without its state");
  const std::vector<int64_t> dims = shape_values(name_of(id), in[0], a.shape);
  const uint64_t draw = a.state->next_draw(g_generation.load());
  note_random_draw(a.state.get(), draw);
  out[0] = generate(dist_of(id), a, dims, stream_key(id, a), draw);
}

template <int kOp>
void kernel_stateless(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const auto id = static_cast<OpId>(kOp);
  const RandomAttrs& a = attrs.get<RandomAttrs>();
  const std::vector<int64_t> dims = shape_values(name_of(id), in[0], a.shape);
  const TensorImpl& seed = *in[1].impl();
  if (seed.shape.rank() != 1 || seed.shape.dims()[0] != 2)
    op_error<InvalidArgumentError>(name_of(id), "the seed must have shape (2,), got ", seed.shape.to_string());
  uint64_t s[2];
  for (int k = 0; k < 2; ++k)
    s[k] = seed.dtype == DType::Int64 ? static_cast<uint64_t>(seed.data<int64_t>()[k])
                                      : static_cast<uint64_t>(static_cast<int64_t>(seed.data<int32_t>()[k]));
  out[0] = generate(dist_of(id), a, dims, s[0], s[1]);
}

OpId stateless_of(OpId id) {
  switch (id) {
    case OpId::RandomUniform: return OpId::StatelessRandomUniform;
    case OpId::RandomNormal: return OpId::StatelessRandomNormal;
    default: return OpId::StatelessTruncatedNormal;
  }
}

}  // namespace

// ---- what other layers use ----------------------------------------------------------------

bool is_stateful_random(OpId id) { return (op_def(id).traits & kRandom) != 0; }

Tensor repeat_random_draw(OpId op, const RandomAttrs& attrs, const Tensor& shape, const Tensor& draw) {
  TG_CHECK(is_stateful_random(op), "repeat_random_draw of ", name_of(op));
  // The stateless kernel reads (stream, draw) from its seed: the stateful kernel's own inputs.
  const Tensor stream = scalar_like(draw, static_cast<int64_t>(stream_key(op, attrs)));
  return apply_op1(stateless_of(op), {shape, stack({stream, draw})}, attrs);
}

RandomDrawLog::RandomDrawLog() : installed_(t_draw_log, this) {}

void note_random_draw(const RandomState* state, uint64_t draw) {
  if (t_draw_log) t_draw_log->draws_.emplace_back(state, draw);
}

void restart_trace_op_seeds() { t_trace_op_seeds = 0; }

namespace {
// In a replay (ReplayContext): the draw the forward call made, not a new one.
std::vector<Tensor> replay_draw(ReplayContext& r, const std::vector<Tensor>& in, const OpAttrs&) {
  return {r.repeat_draw(in[0])};
}
}  // namespace

void register_random_ops(OpDef* t) {
  set_op(t, OpId::RandomUniform, &infer_random<static_cast<int>(OpId::RandomUniform)>,
         &kernel_stateful<static_cast<int>(OpId::RandomUniform)>);
  set_op(t, OpId::RandomNormal, &infer_random<static_cast<int>(OpId::RandomNormal)>,
         &kernel_stateful<static_cast<int>(OpId::RandomNormal)>);
  set_op(t, OpId::TruncatedNormal, &infer_random<static_cast<int>(OpId::TruncatedNormal)>,
         &kernel_stateful<static_cast<int>(OpId::TruncatedNormal)>);
  set_op(t, OpId::StatelessRandomUniform, &infer_random<static_cast<int>(OpId::StatelessRandomUniform)>,
         &kernel_stateless<static_cast<int>(OpId::StatelessRandomUniform)>);
  set_op(t, OpId::StatelessRandomNormal, &infer_random<static_cast<int>(OpId::StatelessRandomNormal)>,
         &kernel_stateless<static_cast<int>(OpId::StatelessRandomNormal)>);
  set_op(t, OpId::StatelessTruncatedNormal, &infer_random<static_cast<int>(OpId::StatelessTruncatedNormal)>,
         &kernel_stateless<static_cast<int>(OpId::StatelessTruncatedNormal)>);
  for (OpId id : {OpId::RandomUniform, OpId::RandomNormal, OpId::TruncatedNormal}) set_replay(t, id, &replay_draw);
}

// ---- the public functions -----------------------------------------------------------------

namespace {
RandomAttrs uniform_attrs(double minval, double maxval, DType dtype) {
  RandomAttrs a;
  a.dtype = dtype;
  a.minval = minval;
  a.maxval = maxval;
  return a;
}
RandomAttrs normal_attrs(double mean, double stddev, DType dtype) {
  RandomAttrs a;
  a.dtype = dtype;
  a.mean = mean;
  a.stddev = stddev;
  return a;
}
}  // namespace

Tensor random_uniform_from_shape_tensor(const Tensor& shape, double minval, double maxval, DType dtype,
                                        std::optional<uint64_t> seed) {
  return stateful_random(OpId::RandomUniform, shape, uniform_attrs(minval, maxval, dtype), seed);
}
Tensor random_normal_from_shape_tensor(const Tensor& shape, double mean, double stddev, DType dtype,
                                       std::optional<uint64_t> seed) {
  return stateful_random(OpId::RandomNormal, shape, normal_attrs(mean, stddev, dtype), seed);
}
Tensor truncated_normal_from_shape_tensor(const Tensor& shape, double mean, double stddev, DType dtype,
                                          std::optional<uint64_t> seed) {
  return stateful_random(OpId::TruncatedNormal, shape, normal_attrs(mean, stddev, dtype), seed);
}

Tensor stateless_from_shape_tensor(const char* op, const Tensor& shape, const Tensor& seed, double a, double b,
                                   DType dtype) {
  const OpDef* def = find_op(op);
  TG_CHECK(def != nullptr, "no op ", op);
  if (!seed.defined()) op_error<ValueError>(op, "the seed is an empty tg::Tensor; pass e.g. tg::constant({1, 2})");
  RandomAttrs attrs = dist_of(def->id) == Dist::kUniform ? uniform_attrs(a, b, dtype) : normal_attrs(a, b, dtype);
  attrs.shape = shape_value_of(op, shape);
  return apply_op1(def->id, {shape, seed}, attrs);
}

Tensor dropout_with_flag(const Tensor& x, double rate, const Tensor& training, std::optional<uint64_t> seed) {
  if (!training.defined() || training.dtype() != DType::Bool || !static_shape(training).has_rank() ||
      static_shape(training).rank() != 0)
    op_error<TypeError>("dropout", "training must be a bool scalar tensor (or a C++ bool), got ",
                        training.defined() ? training.to_string() : std::string("an empty tg::Tensor"));
  if (!training.is_symbolic()) return dropout(x, rate, training.item<bool>(), seed);
  // Both results are built and the flag picks one at run time, so one trace serves both modes.
  return where(training, dropout(x, rate, true, seed), dropout(x, rate, false, seed));
}

}  // namespace detail

void set_random_seed(uint64_t seed) {
  detail::Seeds& s = detail::seeds();
  std::lock_guard lock(s.mu);
  s.global = seed;
  s.eager_op_seeds = 0;
  s.eager_streams.clear();
  detail::g_generation.fetch_add(1);
}

Tensor random_uniform(const TensorShape& shape, double minval, double maxval, DType dtype,
                      std::optional<uint64_t> seed) {
  return detail::random_uniform_from_shape_tensor(detail::static_shape_tensor("random_uniform", shape), minval,
                                                  maxval, dtype, seed);
}
Tensor random_uniform(const TensorShape& shape, float lo, float hi) {
  return random_uniform(shape, static_cast<double>(lo), static_cast<double>(hi), float32, std::nullopt);
}
Tensor random_uniform(const TensorShape& shape, float lo, float hi, uint64_t seed) {
  return random_uniform(shape, static_cast<double>(lo), static_cast<double>(hi), float32, seed);
}
Tensor random_normal(const TensorShape& shape, double mean, double stddev, DType dtype, std::optional<uint64_t> seed) {
  return detail::random_normal_from_shape_tensor(detail::static_shape_tensor("random_normal", shape), mean, stddev,
                                                 dtype, seed);
}
Tensor truncated_normal(const TensorShape& shape, double mean, double stddev, DType dtype,
                        std::optional<uint64_t> seed) {
  return detail::truncated_normal_from_shape_tensor(detail::static_shape_tensor("truncated_normal", shape), mean,
                                                    stddev, dtype, seed);
}
Tensor stateless_random_uniform(const TensorShape& shape, const Tensor& seed, double minval, double maxval,
                                DType dtype) {
  const char* op = "stateless_random_uniform";
  return detail::stateless_from_shape_tensor(op, detail::static_shape_tensor(op, shape), seed, minval, maxval, dtype);
}
Tensor stateless_random_normal(const TensorShape& shape, const Tensor& seed, double mean, double stddev, DType dtype) {
  const char* op = "stateless_random_normal";
  return detail::stateless_from_shape_tensor(op, detail::static_shape_tensor(op, shape), seed, mean, stddev, dtype);
}
Tensor stateless_truncated_normal(const TensorShape& shape, const Tensor& seed, double mean, double stddev,
                                  DType dtype) {
  const char* op = "stateless_truncated_normal";
  return detail::stateless_from_shape_tensor(op, detail::static_shape_tensor(op, shape), seed, mean, stddev, dtype);
}

Tensor dropout(const Tensor& x, double rate, bool training, std::optional<uint64_t> seed) {
  if (!x.defined()) detail::op_error<ValueError>("dropout", "x is an empty tg::Tensor");
  if (!is_floating(x.dtype()))
    detail::op_error<TypeError>("dropout", "x must be float32 or float64, got ", to_string(x.dtype()));
  if (!(rate >= 0.0 && rate < 1.0))
    detail::op_error<InvalidArgumentError>("dropout", "rate must be in [0, 1) (the fraction of elements "
                                           "dropped), got ", rate);
  if (!training || rate == 0.0) return x;
  const TensorShape s = detail::static_shape(x);
  // bfloat16 (a mixed_bfloat16 model's activations) draws its noise in float32: the random ops
  // make no bfloat16, and only the mask, exact in any float dtype, meets x.
  const DType draw = x.dtype() == bfloat16 ? float32 : x.dtype();
  const Tensor noise = s.is_fully_defined() ? random_uniform(s, 0.0, 1.0, draw, seed)
                                            : random_uniform(shape(x), 0.0, 1.0, draw, seed);
  // TF's order: scale first, then zero the dropped elements.
  return x * (1.0 / (1.0 - rate)) * cast(noise >= rate, x.dtype());
}

}  // namespace tg
