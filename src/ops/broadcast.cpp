#include "ops/broadcast.h"

#include <algorithm>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "core/thread_pool.h"

namespace tg::detail {

bool broadcast_dim(int64_t x, int64_t y, int64_t& out) {
  if (x == y) out = x;
  else if (x == 1) out = y;
  else if (y == 1) out = x;
  else if (x == None) out = y;
  else if (y == None) out = x;
  else return false;
  return true;
}

std::optional<BroadcastMismatch> broadcast_dims(const std::vector<int64_t>& da, const std::vector<int64_t>& db,
                                                std::vector<int64_t>& out) {
  const std::size_t r = std::max(da.size(), db.size());
  out.assign(r, 0);
  for (std::size_t i = 0; i < r; ++i) {
    const int64_t x = i < da.size() ? da[da.size() - 1 - i] : 1;
    const int64_t y = i < db.size() ? db[db.size() - 1 - i] : 1;
    if (!broadcast_dim(x, y, out[r - 1 - i])) return BroadcastMismatch{static_cast<int64_t>(r - 1 - i), x, y};
  }
  return std::nullopt;
}

TensorShape broadcast_shapes(const char* op, const TensorShape& a, const TensorShape& b) {
  if (!a.has_rank() || !b.has_rank()) return TensorShape::unknown_rank();
  std::vector<int64_t> out;
  if (const auto bad = broadcast_dims(a.dims(), b.dims(), out))
    op_error<InvalidArgumentError>(op, "shapes ", a.to_string(), " and ", b.to_string(),
                                   " cannot be broadcast together: dimension ", bad->dim,
                                   " of the result would need ", bad->x, " == ", bad->y,
                                   " (or one of them 1); reshape or expand_dims one operand");
  return TensorShape(std::move(out));
}

void require_same_dtype(const char* op, const std::vector<ValueType>& in) {
  for (std::size_t i = 1; i < in.size(); ++i)
    if (in[i].dtype != in[0].dtype)
      op_error<InvalidArgumentError>(
          op, "expected inputs of one dtype, got ", to_string(in[0].dtype), " and ",
          to_string(in[i].dtype),
          " (tracegraph never promotes silently, like TensorFlow); tg::cast one input first");
}

void require_dtype(const char* op, const ValueType& in, std::initializer_list<DType> allowed,
                   const char* what) {
  for (DType d : allowed)
    if (in.dtype == d) return;
  std::string list;
  for (DType d : allowed) list += (list.empty() ? "" : ", ") + to_string(d);
  op_error<InvalidArgumentError>(op, "expected ", what, " of dtype ", list, ", got ",
                                 to_string(in.dtype), "; tg::cast it first");
}

void require_min_rank(const char* op, const ValueType& in, int64_t min_rank, const char* what) {
  if (in.shape.has_rank() && in.shape.rank() < min_rank)
    op_error<InvalidArgumentError>(op, "expected ", what, " of rank >= ", min_rank, ", got rank ",
                                   in.shape.rank(), " shape ", in.shape.to_string());
}

std::string format_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

int64_t product(const std::vector<int64_t>& dims, std::size_t begin, std::size_t end) {
  for (std::size_t i = begin; i < end; ++i)
    if (dims[i] == 0) return 0;
  int64_t p = 1;
  for (std::size_t i = begin; i < end; ++i) p = mul_saturating(p, dims[i]);
  return p;
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size());
  int64_t acc = 1;
  for (std::size_t i = dims.size(); i-- > 0;) {
    s[i] = acc;
    acc = mul_saturating(acc, dims[i]);
  }
  return s;
}

namespace {

void broadcast_copy_serial(const Tensor& src, const std::vector<int64_t>& src_dims, Tensor& out) {
  visit_dtype(out.impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = data_of<T>(src);
    T* y = data_of<T>(out);
    int64_t pos = 0;
    for_each_broadcast_run<1>(out.impl()->shape.dims(), {&src_dims},
                              [&](const std::array<int64_t, 1>& off,
                                  const std::array<int64_t, 1>& st, int64_t n) {
                                // A fill and a copy for the two strides nearly every run has
                                // (the loop with a run-time stride stays scalar: a gradient's
                                // broadcast of a scalar over 800k floats took 250 us).
                                if (st[0] == 0) std::fill_n(y + pos, n, x[off[0]]);
                                else if (st[0] == 1) std::copy_n(x + off[0], n, y + pos);
                                else for (int64_t i = 0; i < n; ++i) y[pos + i] = x[off[0] + i * st[0]];
                                pos += n;
                              });
  });
}

}  // namespace

void broadcast_copy(const Tensor& src, const std::vector<int64_t>& src_dims, Tensor& out) {
  const std::vector<int64_t>& od = out.impl()->shape.dims();
  const int64_t total = out.impl()->shape.num_elements();
  if (od.empty() || od[0] < 2 || src_dims.size() > od.size() || total < 2 * kParallelMinElements ||
      out.impl()->dtype == DType::String) {
    broadcast_copy_serial(src, src_dims, out);
    return;
  }
  std::vector<int64_t> sd(od.size() - src_dims.size(), 1);  // the source's dims, as many as out's
  sd.insert(sd.end(), src_dims.begin(), src_dims.end());
  // Large copies split over the pool by ranges of the outermost dim (an embedding's mean
  // gradient broadcast to 64 x 50 x 64, 800 KB, ran alone while the other core waited): the
  // same bytes on any thread count.
  const int64_t out_inner = total / od[0];
  const int64_t src_inner = sd[0] == 1 ? 0 : product(sd, 1, sd.size());
  parallel_for(od[0], std::max<int64_t>(1, kParallelMinElements / out_inner), [&](int64_t b, int64_t e) {
    std::vector<int64_t> part = od, src_part = sd;
    part[0] = e - b;
    if (sd[0] != 1) src_part[0] = e - b;
    Tensor o = make_view(out, TensorShape(part), b * out_inner);
    const Tensor s = sd[0] == 1 ? src : make_view(src, TensorShape(src_part), b * src_inner);
    broadcast_copy_serial(s, src_part, o);
  });
}

}  // namespace tg::detail
