// einsum over one or two operands: diagonals are strided views, letters found in one operand
// only are summed there, and a two-operand contraction becomes one batched product
// [batch, kept-in-a, contracted] @ [batch, contracted, kept-in-b].
#include <algorithm>
#include <array>
#include <string>

#include "linear_parts.h"
#include "mixprec/amp/autocast.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/linalg.h"
#include "mixprec/ops/reduction.h"
#include "op_checks.h"

namespace mixprec {
namespace {

// Dim labels: 'A'-'Z' are 0-25 and 'a'-'z' 26-51 (so label order is ASCII order); the
// broadcast dims "..." stands for are 52, 53, ... aligned at the right across operands.
using Labels = std::vector<int>;
constexpr int kEllipsis = 52;

[[noreturn]] void fail(std::string_view equation, const std::string& why) {
  throw Error("einsum", "equation \"" + std::string(equation) + "\": " + why);
}

int letter_label(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -1;
}

// One term's letters, with -1 standing for "..." (at most once).
std::vector<int> parse_term(std::string_view eq, std::string_view term) {
  std::vector<int> out;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term[i] == '.') {
      if (ellipsis || term.substr(i, 3) != "...") fail(eq, "'.' outside one \"...\" per term");
      ellipsis = true;
      out.push_back(-1);
      i += 2;
      continue;
    }
    const int l = letter_label(term[i]);
    if (l < 0) fail(eq, std::string("'") + term[i] + "' is not a letter a-z or A-Z");
    out.push_back(l);
  }
  return out;
}

// A term's labels for an operand of `rank` dims, "..." taking the rank the letters leave.
Labels expand_term(std::string_view eq, const std::vector<int>& term, int64_t rank, int ell_dims) {
  const auto letters =
      static_cast<int64_t>(std::count_if(term.begin(), term.end(), [](int l) { return l >= 0; }));
  const bool has_ell = letters < static_cast<int64_t>(term.size());
  if (has_ell ? rank < letters : rank != letters)
    fail(eq, "a term names " + std::to_string(letters) + " dims for an operand of rank " +
                 std::to_string(rank));
  Labels out;
  for (int l : term) {
    if (l >= 0) {
      out.push_back(l);
      continue;
    }
    const auto own = static_cast<int>(rank - letters);
    for (int i = 0; i < own; ++i) out.push_back(kEllipsis + ell_dims - own + i);
  }
  return out;
}

// Takes the diagonal of each repeated label (a strided view) so every label occurs once.
Tensor take_diagonals(std::string_view eq, Tensor t, Labels& labels) {
  for (size_t i = 0; i < labels.size(); ++i)
    for (size_t j = i + 1; j < labels.size();) {
      if (labels[j] != labels[i]) {
        ++j;
        continue;
      }
      if (t.size(static_cast<int64_t>(i)) != t.size(static_cast<int64_t>(j)))
        fail(eq, "a repeated letter spans dims of sizes " +
                     std::to_string(t.size(static_cast<int64_t>(i))) + " and " +
                     std::to_string(t.size(static_cast<int64_t>(j))));
      Shape shape = t.shape(), strides = t.strides();
      strides[i] += strides[j];
      shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(j));
      strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(j));
      t = t.as_strided(shape, strides, 0);
      labels.erase(labels.begin() + static_cast<std::ptrdiff_t>(j));
    }
  return t;
}

bool has(const Labels& ls, int l) {
  return std::find(ls.begin(), ls.end(), l) != ls.end();
}

int64_t position(const Labels& ls, int l) {
  return std::find(ls.begin(), ls.end(), l) - ls.begin();
}

// Sums the labels no one else needs (absent from `keep_a` and `keep_b`), last dim first.
Tensor sum_private(Tensor t, Labels& labels, const Labels& keep_a, const Labels& keep_b) {
  for (size_t i = labels.size(); i-- > 0;)
    if (!has(keep_a, labels[i]) && !has(keep_b, labels[i])) {
      t = sum(t, static_cast<int64_t>(i));
      labels.erase(labels.begin() + static_cast<std::ptrdiff_t>(i));
    }
  return t;
}

// t's dims reordered to `order` (every label of t, once).
Tensor arrange(const Tensor& t, const Labels& labels, const Labels& order) {
  std::vector<int64_t> perm;
  for (int l : order) perm.push_back(position(labels, l));
  return t.permute(perm);
}

}  // namespace

Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands_in) {
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq.push_back(c);
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::vector<int>> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(parse_term(equation, std::string_view(lhs).substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != operands_in.size())
    fail(equation, std::to_string(terms.size()) + " terms for " +
                       std::to_string(operands_in.size()) + " operands");
  if (terms.empty() || terms.size() > 2)
    fail(equation, "takes one or two operands (chain two-operand calls for more)");

  const amp::AutocastList cast("einsum", operands_in);
  const std::vector<Tensor>& ops = cast.get();
  for (const Tensor& t : ops) check_compute_input("einsum", t);
  if (ops.size() == 2) detail::check_float_pair("einsum", ops[0], ops[1]);

  int ell_dims = 0;
  for (size_t k = 0; k < ops.size(); ++k) {
    const auto letters =
        std::count_if(terms[k].begin(), terms[k].end(), [](int l) { return l >= 0; });
    if (letters < static_cast<std::ptrdiff_t>(terms[k].size()))
      ell_dims = std::max(ell_dims, static_cast<int>(ops[k].ndim() - letters));
  }
  std::vector<Labels> labels;
  std::array<int, kEllipsis> uses{};
  for (size_t k = 0; k < ops.size(); ++k) {
    labels.push_back(expand_term(equation, terms[k], ops[k].ndim(), ell_dims));
    for (int l : terms[k])
      if (l >= 0) ++uses[static_cast<size_t>(l)];
  }
  Labels out;
  if (arrow == std::string::npos) {
    for (int i = 0; i < ell_dims; ++i) out.push_back(kEllipsis + i);
    for (int l = 0; l < kEllipsis; ++l)
      if (uses[static_cast<size_t>(l)] == 1) out.push_back(l);
  } else {
    for (int l : parse_term(equation, std::string_view(eq).substr(arrow + 2))) {
      if (l < 0) {
        for (int i = 0; i < ell_dims; ++i) out.push_back(kEllipsis + i);
        continue;
      }
      if (has(out, l)) fail(equation, "the output names a letter twice");
      if (uses[static_cast<size_t>(l)] == 0)
        fail(equation, "the output names a letter no operand has");
      out.push_back(l);
    }
  }

  // The parts below are ops of their own: they run as einsum's inputs were cast, not again.
  const amp::AutocastGuard inner(DType::bf16, /*enabled=*/false);
  std::vector<Tensor> t;
  for (size_t k = 0; k < ops.size(); ++k) t.push_back(take_diagonals(equation, ops[k], labels[k]));
  if (t.size() == 1) {
    t[0] = sum_private(t[0], labels[0], out, out);
    return arrange(t[0], labels[0], out);
  }
  t[0] = sum_private(t[0], labels[0], out, labels[1]);
  t[1] = sum_private(t[1], labels[1], out, labels[0]);

  Labels batch, keep_a, keep_b, contracted;
  for (int l : labels[0]) {
    if (has(labels[1], l))
      (has(out, l) ? batch : contracted).push_back(l);
    else
      keep_a.push_back(l);
  }
  for (int l : labels[1])
    if (!has(labels[0], l)) keep_b.push_back(l);
  // Shared dims broadcast where one side has size 1 (that operand's gradient then comes back
  // from the product unrounded, to be summed and rounded once).
  bool broadcast[2] = {false, false};
  for (size_t k = 0; k < 2; ++k) {
    Shape target = t[k].shape();
    for (size_t i = 0; i < labels[k].size(); ++i) {
      const int l = labels[k][i];
      if (!has(labels[1 - k], l)) continue;
      const int64_t mine = target[i], theirs = t[1 - k].size(position(labels[1 - k], l));
      if (mine != theirs && mine != 1 && theirs != 1)
        fail(equation, "a letter spans dims of sizes " + std::to_string(mine) + " and " +
                           std::to_string(theirs));
      target[i] = mine == 1 ? theirs : mine;  // size 1 broadcasts (to 0 too)
    }
    broadcast[k] = target != t[k].shape();
    t[k] = broadcast_to(t[k], target);
  }
  auto size_of = [&](int l) {
    return has(labels[0], l) ? t[0].size(position(labels[0], l))
                             : t[1].size(position(labels[1], l));
  };
  auto numel_of = [&](const Labels& ls) {
    int64_t n = 1;
    for (int l : ls) n *= size_of(l);
    return n;
  };
  Labels order_a = batch, order_b = batch;
  order_a.insert(order_a.end(), keep_a.begin(), keep_a.end());
  order_a.insert(order_a.end(), contracted.begin(), contracted.end());
  order_b.insert(order_b.end(), contracted.begin(), contracted.end());
  order_b.insert(order_b.end(), keep_b.begin(), keep_b.end());
  const int64_t nb = numel_of(batch), m = numel_of(keep_a), k = numel_of(contracted),
                n = numel_of(keep_b);
  const Tensor a3 = arrange(t[0], labels[0], order_a).reshape({nb, m, k});
  const Tensor b3 = arrange(t[1], labels[1], order_b).reshape({nb, k, n});
  Labels result = batch;
  result.insert(result.end(), keep_a.begin(), keep_a.end());
  result.insert(result.end(), keep_b.begin(), keep_b.end());
  Shape result_shape;
  for (int l : result) result_shape.push_back(size_of(l));
  const Tensor product =
      detail::matmul_product(a3, b3, broadcast[0], broadcast[1]).view(result_shape);
  return arrange(product, result, out);
}

}  // namespace mixprec
