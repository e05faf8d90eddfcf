// Helpers the C++-emitting code generators (CPU, CUDA) share: shape and
// index arithmetic and the text of expressions common to both targets.
// Header-only; each backend library compiles its own copy.
#ifndef YIRAGE_BACKENDS_CODEGEN_UTIL_H_
#define YIRAGE_BACKENDS_CODEGEN_UTIL_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/graph.h"

namespace yirage::backends {

// Text safe inside a // comment.
inline std::string CommentText(std::string_view text) {
  std::string out;
  for (char c : text) out.push_back((c >= 32 && c < 127) ? c : '?');
  return out;
}

inline int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

inline std::vector<int64_t> Slice(const std::vector<int64_t>& v, size_t begin, size_t end) {
  return std::vector<int64_t>(v.begin() + begin, v.begin() + end);
}

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline bool Is16BitFloat(yirage::v1::DType dtype) {
  return dtype == yirage::v1::FLOAT16 || dtype == yirage::v1::BFLOAT16;
}

// A float literal: "(1.5f)"; NaN and the infinities in the target's
// spelling.
inline std::string FloatLiteral(double value, std::string_view nan, std::string_view inf,
                                std::string_view neg_inf) {
  if (std::isnan(value)) return std::string(nan);
  if (std::isinf(value)) return std::string(value > 0 ? inf : neg_inf);
  std::string s = absl::StrFormat("%.9g", value);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return absl::StrCat("(", s, "f)");
}

// Element strides of `shape` (row-major) broadcast against `space`
// (right-aligned, NumPy rules): one per dim of `space`, 0 where broadcast.
inline std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& shape,
                                             const std::vector<int64_t>& space) {
  std::vector<int64_t> contiguous(shape.size());
  int64_t s = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    contiguous[d] = s;
    s *= shape[d];
  }
  std::vector<int64_t> strides(space.size(), 0);
  const int shift = static_cast<int>(space.size()) - static_cast<int>(shape.size());
  for (int d = 0; d < static_cast<int>(space.size()); ++d) {
    const int sd = d - shift;
    if (sd >= 0 && shape[sd] != 1) strides[d] = contiguous[sd];
  }
  return strides;
}

// The offset of the element whose multi-index in `space` decomposes the
// flat index `var`, given per-dim strides: a 64-bit expression of a 64-bit
// `var`. With `narrow`, the arithmetic is 32-bit unsigned (division and
// modulo by a constant take a few instructions rather than a 64-bit
// sequence), for index spaces and offsets below 2^31, which the caller
// checks; the result is still an i64.
inline std::string OffsetExpr(const std::vector<int64_t>& space,
                              const std::vector<int64_t>& strides, const std::string& var,
                              bool narrow = false) {
  const int rank = static_cast<int>(space.size());
  const std::string x = narrow ? absl::StrCat("(unsigned)(", var, ")") : var;
  const char* k = narrow ? "u" : "LL";
  const std::string cast = narrow ? "(i64)" : "";
  std::vector<int64_t> inner(rank, 1);
  for (int d = rank - 2; d >= 0; --d) inner[d] = inner[d + 1] * space[d + 1];
  // Contiguous over the whole space (times a constant): a single product.
  bool contiguous = rank > 0 && strides[rank - 1] != 0;
  for (int d = 0; d < rank && contiguous; ++d) {
    if (space[d] != 1 && strides[d] != inner[d] * strides[rank - 1]) contiguous = false;
  }
  if (contiguous) {
    return strides[rank - 1] == 1 ? absl::StrCat("(", var, ")")
                                  : absl::StrCat("(", var, ") * ", strides[rank - 1], "LL");
  }
  // Runs of dims that a tensor walks as one (each stride the next one's
  // times its size) or skips as one (broadcast) merge into one dim, so that
  // a tensor broadcast along the leading dims is a single modulo.
  std::vector<int64_t> dims, steps, below;
  for (int d = 0; d < rank; ++d) {
    if (space[d] == 1) continue;
    const int64_t stride = strides[d];
    if (!dims.empty() &&
        ((stride == 0 && steps.back() == 0) ||
         (steps.back() != 0 && stride != 0 && steps.back() == stride * space[d]))) {
      dims.back() *= space[d];
      steps.back() = stride;
      below.back() = inner[d];
      continue;
    }
    dims.push_back(space[d]);
    steps.push_back(stride);
    below.push_back(inner[d]);
  }
  std::vector<std::string> terms;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (steps[d] == 0) continue;
    std::string t =
        below[d] == 1 ? absl::StrCat("(", x, ")") : absl::StrCat("((", x, ") / ", below[d], k, ")");
    if (d > 0) t = absl::StrCat("(", t, " % ", dims[d], k, ")");
    if (steps[d] != 1) t = absl::StrCat(t, " * ", steps[d], k);
    terms.push_back(t);
  }
  if (terms.empty()) return "0LL";
  return absl::StrCat(cast, "(", absl::StrJoin(terms, " + "), ")");
}

// Binary elementwise ops on float expressions; maximum/minimum call the
// target's NaN-propagating yr_max/yr_min. "" for other ops.
inline std::string BinaryExpr(core::OpType type, const std::string& a, const std::string& b) {
  switch (type) {
    case core::OpType::kAdd:
      return absl::StrCat("(", a, " + ", b, ")");
    case core::OpType::kSub:
      return absl::StrCat("(", a, " - ", b, ")");
    case core::OpType::kMul:
      return absl::StrCat("(", a, " * ", b, ")");
    case core::OpType::kDiv:
      return absl::StrCat("(", a, " / ", b, ")");
    case core::OpType::kMaximum:
      return absl::StrCat("yr_max(", a, ", ", b, ")");
    case core::OpType::kMinimum:
      return absl::StrCat("yr_min(", a, ", ", b, ")");
    case core::OpType::kPow:
      return absl::StrCat("powf(", a, ", ", b, ")");
    default:
      return "";
  }
}

}  // namespace yirage::backends

#endif  // YIRAGE_BACKENDS_CODEGEN_UTIL_H_
