// tg::einsum: parses an equation and lowers it onto transpose, reshape, mul, matmul, reduce_sum
// and ensure_same_shape (no op of its own: gradients, tracing and export come from those ops).
//
// Two operands: letters only in one operand and not in the output are summed first; letters in
// both operands and the output are batch dims; letters in both and not the output are
// contracted. With contracted letters the product is one batched matmul of [batch..., M, K] x
// [batch..., K, N], where M, K, N each merge their letters into one dim (a reshape, so only when
// the dims are known); otherwise it is a broadcasting mul (then reduce_sum over the contracted).
// A letter repeated within one operand (trace "ii->", diagonal "ii->i") is first reduced to one
// by masking with an identity matrix, which needs that dim known. A letter of both operands
// whose size the trace does not know is checked when the graph runs (ensure_same_shape).
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/broadcast.h"
#include "ops/runtime_shape_checks.h"
#include "tracegraph/ops.h"

namespace tg {
namespace {

constexpr const char* kOp = "einsum";
constexpr const char* kSupported =
    "tracegraph's einsum takes one or two operands with an explicit output (\"ij,jk->ik\"), one "
    "letter (a-z, A-Z) per dim, no ellipsis";

using detail::op_error;

// An operand as the lowering goes: the tensor and the letter of each of its dims.
struct Term {
  Tensor t;
  std::string letters;
};

std::vector<int64_t> static_dims(const Tensor& t) { return detail::static_shape(t).dims(); }

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

[[noreturn]] void bad_equation(const std::string& eq, const std::string& why) {
  op_error<InvalidArgumentError>(kOp, "cannot use the equation \"", eq, "\": ", why, ". ", kSupported);
}

struct Equation {
  std::vector<std::string> inputs;
  std::string output;
};

Equation parse(const std::string& eq, std::size_t operands) {
  const std::size_t arrow = eq.find("->");
  if (eq.find("...") != std::string::npos) bad_equation(eq, "an ellipsis (...) is not supported");
  if (arrow == std::string::npos) bad_equation(eq, "it has no \"->\" (implicit outputs are not supported)");
  Equation e;
  e.output = eq.substr(arrow + 2);
  const std::string lhs = eq.substr(0, arrow);
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = lhs.find(',', start);
    e.inputs.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (e.inputs.size() != operands)
    bad_equation(eq, detail::str_cat("it names ", e.inputs.size(), " operand", e.inputs.size() == 1 ? "" : "s",
                                     " but ", operands, " tensor", operands == 1 ? " was" : "s were", " given"));
  for (const std::string& s : e.inputs)
    for (char c : s)
      if (!is_letter(c)) bad_equation(eq, detail::str_cat("'", c, "' is not a subscript letter"));
  for (std::size_t i = 0; i < e.output.size(); ++i) {
    const char c = e.output[i];
    if (!is_letter(c)) bad_equation(eq, detail::str_cat("'", c, "' in the output is not a subscript letter"));
    if (e.output.find(c, i + 1) != std::string::npos)
      bad_equation(eq, detail::str_cat("the output repeats '", c, "'"));
    bool found = false;
    for (const std::string& s : e.inputs) found |= s.find(c) != std::string::npos;
    if (!found) bad_equation(eq, detail::str_cat("the output letter '", c, "' is in no operand"));
  }
  return e;
}

Term make_term(const std::string& eq, const Tensor& t, const std::string& letters, std::size_t which) {
  if (!t.defined()) op_error<ValueError>(kOp, "operand ", which, " is an empty tg::Tensor; assign it a value first");
  const TensorShape& s = detail::static_shape(t);
  if (!s.has_rank())
    op_error<ValueError>(kOp, "operand ", which, " (", t.to_string(), ") has an unknown rank while tracing; einsum "
                         "needs one letter per dim, so give the input a known rank (\"", eq, "\")");
  if (s.rank() != static_cast<int64_t>(letters.size()))
    op_error<InvalidArgumentError>(kOp, "operand ", which, " has ", s.rank(), " dim", s.rank() == 1 ? "" : "s",
                                   " (shape ", s.to_string(), ") but its subscripts \"", letters, "\" in \"", eq,
                                   "\" name ", letters.size(), "; expected one letter per dim");
  return Term{t, letters};
}

// Sums over the dims at `positions` (ascending) and drops their letters.
void sum_dims(Term& term, const std::vector<int>& positions) {
  if (positions.empty()) return;
  term.t = reduce_sum(term.t, positions);
  for (auto p = positions.rbegin(); p != positions.rend(); ++p) term.letters.erase(static_cast<std::size_t>(*p), 1);
}

// Reduces each letter repeated within the term to one dim holding the diagonal.
void take_diagonals(const std::string& eq, Term& term) {
  for (std::size_t p = 0; p < term.letters.size(); ++p) {
    const std::size_t q = term.letters.find(term.letters[p], p + 1);
    if (q == std::string::npos) continue;
    if (term.letters.find(term.letters[p], q + 1) != std::string::npos)
      bad_equation(eq, detail::str_cat("'", term.letters[p], "' appears more than twice in one operand"));
    const std::vector<int64_t> dims = static_dims(term.t);
    const int64_t n = dims[p];
    if (n == None || dims[q] == None)
      op_error<InvalidArgumentError>(kOp, "the repeated letter '", term.letters[p], "' in \"", eq,
                                     "\" needs its dims known while tracing, got shape ",
                                     detail::static_shape(term.t).to_string(), "; give them a static size");
    if (n != dims[q])
      op_error<InvalidArgumentError>(kOp, "the repeated letter '", term.letters[p], "' in \"", eq, "\" names dims of ",
                                     n, " and ", dims[q], " (shape ", detail::static_shape(term.t).to_string(),
                                     "); a diagonal needs equal sizes");
    // An identity matrix shaped to broadcast against dims p and q keeps the diagonal.
    std::vector<double> eye(static_cast<std::size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i) eye[static_cast<std::size_t>(i * n + i)] = 1.0;
    std::vector<int64_t> mask_dims(dims.size(), 1);
    mask_dims[p] = n;
    mask_dims[q] = n;
    const Tensor mask = cast(constant(eye, TensorShape(mask_dims), float64), term.t.dtype());
    term.t = mul(term.t, mask);
    sum_dims(term, {static_cast<int>(q)});
  }
}

// Puts the term's dims in the order of `want` (a permutation of its letters).
void arrange(Term& term, const std::string& want) {
  if (term.letters == want) return;
  std::vector<int> perm;
  for (char c : want) perm.push_back(static_cast<int>(term.letters.find(c)));
  term.t = transpose(term.t, perm);
  term.letters = want;
}

std::string letters_where(const std::string& from, auto&& keep) {
  std::string s;
  for (char c : from)
    if (keep(c)) s += c;
  return s;
}

bool has(const std::string& s, char c) { return s.find(c) != std::string::npos; }

// The size of each letter of `letters` in term (None when unknown).
std::vector<int64_t> sizes_of(const Term& term, const std::string& letters) {
  const std::vector<int64_t> dims = static_dims(term.t);
  std::vector<int64_t> out;
  for (char c : letters) out.push_back(dims[term.letters.find(c)]);
  return out;
}

// The term (dims: batch, then the `groups` in order) with each group as one dim: an empty
// group becomes a dim of 1, and a group of several letters is merged by a reshape (the caller
// makes sure every dim is known then).
Tensor merge_groups(const Term& term, std::size_t batch, const std::vector<std::string>& groups) {
  bool merges = false;
  for (const std::string& g : groups) merges |= g.size() > 1;
  Tensor t = term.t;
  if (!merges) {
    for (std::size_t k = 0; k < groups.size(); ++k)
      if (groups[k].empty()) t = expand_dims(t, static_cast<int>(batch + k));
    return t;
  }
  const std::vector<int64_t> dims = static_dims(term.t);
  std::vector<int64_t> shape(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(batch));
  std::size_t at = batch;
  for (const std::string& g : groups) {
    int64_t size = 1;  // saturated: an empty operand may have dims whose product passes int64
    for (std::size_t i = 0; i < g.size(); ++i, ++at) size = detail::mul_saturating(size, dims[at]);
    shape.push_back(size);
  }
  for (int64_t d : shape) TG_CHECK(d != None, "einsum merges letters only of fully known operands");
  return reshape(t, shape);
}

// A letter of both operands whose size is None on either side is checked when the graph runs
// (the mul and matmul below would broadcast a size of 1 against any other), by a node on
// operand 0's data path. Sizes known on both sides are compared after the reductions below.
void check_shared_letters_at_run_time(const std::string& eq, Term& a, const Term& b) {
  for (std::size_t i = 0; i < a.letters.size(); ++i) {
    const char c = a.letters[i];
    const std::size_t j = b.letters.find(c);
    if (j == std::string::npos || a.letters.find(c) != i) continue;  // not shared, or a repeat
    const int64_t da = static_dims(a.t)[i], db = static_dims(b.t)[j];
    if (da != None && db != None) continue;
    a.t = detail::ensure_same_dims(a.t, b.t, {static_cast<int64_t>(i)}, {static_cast<int64_t>(j)}, kOp, "operand 0",
                                   "operand 1",
                                   detail::str_cat("the letter '", c, "' in \"", eq, "\" names both dims, so "
                                                   "their sizes must be equal"));
  }
}

Tensor contract(const std::string& eq, const Equation& e, Term a, Term b) {
  check_shared_letters_at_run_time(eq, a, b);
  take_diagonals(eq, a);
  take_diagonals(eq, b);
  const std::string& out = e.output;
  // Letters only one operand has and the output lacks are summed first.
  auto sum_private = [&](Term& t, const Term& other) {
    std::vector<int> pos;
    for (std::size_t i = 0; i < t.letters.size(); ++i)
      if (!has(other.letters, t.letters[i]) && !has(out, t.letters[i])) pos.push_back(static_cast<int>(i));
    sum_dims(t, pos);
  };
  sum_private(a, b);
  sum_private(b, a);
  // Sizes of shared letters must agree where known.
  for (std::size_t i = 0; i < a.letters.size(); ++i) {
    const std::size_t j = b.letters.find(a.letters[i]);
    if (j == std::string::npos) continue;
    const int64_t da = static_dims(a.t)[i], db = static_dims(b.t)[j];
    if (da != None && db != None && da != db)
      op_error<InvalidArgumentError>(kOp, "the letter '", a.letters[i], "' in \"", eq, "\" names a dim of ", da,
                                     " in operand 0 (shape ", detail::static_shape(a.t).to_string(), ") and of ", db,
                                     " in operand 1 (shape ", detail::static_shape(b.t).to_string(),
                                     "); the sizes must be equal");
  }
  const std::string batch = letters_where(out, [&](char c) { return has(a.letters, c) && has(b.letters, c); });
  const std::string contracted = letters_where(a.letters, [&](char c) { return has(b.letters, c) && !has(out, c); });
  const std::string a_free = letters_where(out, [&](char c) { return has(a.letters, c) && !has(b.letters, c); });
  const std::string b_free = letters_where(out, [&](char c) { return has(b.letters, c) && !has(a.letters, c); });

  // A matmul needs M, K and N as one dim each: merging several letters is a reshape, which
  // needs static dims. Without contracted letters, or when a merge meets a None dim, the product
  // is a broadcasting mul over [batch, a_free, b_free, contracted] summed over the contracted.
  const bool merges = a_free.size() > 1 || b_free.size() > 1 || contracted.size() > 1;
  const bool all_known = detail::static_shape(a.t).is_fully_defined() && detail::static_shape(b.t).is_fully_defined();
  Term result;
  if (contracted.empty() || (merges && !all_known)) {
    arrange(a, batch + a_free + contracted);
    arrange(b, batch + b_free + contracted);
    Tensor at = a.t;
    for (std::size_t i = 0; i < b_free.size(); ++i) at = expand_dims(at, static_cast<int>(batch.size() + a_free.size()));
    Tensor bt = b.t;
    for (std::size_t i = 0; i < a_free.size(); ++i) bt = expand_dims(bt, static_cast<int>(batch.size()));
    Tensor product = mul(at, bt);
    if (!contracted.empty()) {
      std::vector<int> axes;
      const int first = static_cast<int>(batch.size() + a_free.size() + b_free.size());
      for (std::size_t i = 0; i < contracted.size(); ++i) axes.push_back(first + static_cast<int>(i));
      product = reduce_sum(product, axes);
    }
    result = Term{product, batch + a_free + b_free};
  } else {
    arrange(a, batch + a_free + contracted);
    arrange(b, batch + contracted + b_free);
    const std::vector<int64_t> m_sizes = sizes_of(a, a_free), n_sizes = sizes_of(b, b_free);
    const std::vector<int64_t> batch_sizes = sizes_of(a, batch);
    const Tensor am = merge_groups(a, batch.size(), {a_free, contracted});
    const Tensor bm = merge_groups(b, batch.size(), {contracted, b_free});
    Tensor r = matmul(am, bm);  // [batch..., M, N]
    // Split M and N back into their letters (M or N of no letter: a dim of 1 to drop).
    const bool split = a_free.size() > 1 || b_free.size() > 1;
    if (split) {
      std::vector<int64_t> shape = batch_sizes;
      shape.insert(shape.end(), m_sizes.begin(), m_sizes.end());
      shape.insert(shape.end(), n_sizes.begin(), n_sizes.end());
      for (int64_t d : shape) TG_CHECK(d != None, "einsum splits letters only of fully known operands");
      r = reshape(r, shape);
    } else {
      std::vector<int> drop;
      if (a_free.empty()) drop.push_back(static_cast<int>(batch.size()));
      if (b_free.empty()) drop.push_back(static_cast<int>(batch.size() + 1));
      if (!drop.empty()) r = squeeze(r, drop);
    }
    result = Term{r, batch + a_free + b_free};
  }
  arrange(result, out);
  return result.t;
}

}  // namespace

Tensor einsum(const std::string& equation, const Tensor& a, const Tensor& b) {
  const Equation e = parse(equation, 2);
  return contract(equation, e, make_term(equation, a, e.inputs[0], 0), make_term(equation, b, e.inputs[1], 1));
}

Tensor einsum(const std::string& equation, const Tensor& a) {
  const Equation e = parse(equation, 1);
  Term t = make_term(equation, a, e.inputs[0], 0);
  take_diagonals(equation, t);
  std::vector<int> summed;
  for (std::size_t i = 0; i < t.letters.size(); ++i)
    if (!has(e.output, t.letters[i])) summed.push_back(static_cast<int>(i));
  sum_dims(t, summed);
  if (t.letters.empty() && summed.empty()) return identity(t.t);  // "->" of a scalar: still a new tensor
  arrange(t, e.output);
  return t.t;
}

}  // namespace tg
