#include "core/tensor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/op_table.h"
#include "core/parallel_for.h"

namespace yirage::core {
namespace {

static_assert(std::endian::native == std::endian::little,
              "EncodeTensor/DecodeTensor assume a little-endian host");

using yirage::v1::DType;

// IEEE binary16: 10 fraction bits, smallest normal exponent -14.
constexpr int kHalfFractionBits = 10;
constexpr int kHalfMinExp = -14;
constexpr double kHalfMax = 65504.0;
// bfloat16: 7 fraction bits, float32's exponent range.
constexpr int kBf16FractionBits = 7;
constexpr int kBf16MinExp = -126;
const double kBf16Max = std::ldexp(255.0 / 128.0, 127);  // (2 - 2^-7) * 2^127

// Rounds finite `x` to the nearest value (ties to even) of a binary format
// with `fraction_bits` stored fraction bits, smallest normal exponent
// `min_exp` (gradual underflow below it) and largest finite value
// `max_value`; results beyond max_value become +-inf. NaN, inf and zeros pass
// through. Exact in double for every format narrower than double, so there is
// no double rounding.
double RoundToFormat(double x, int fraction_bits, int min_exp, double max_value) {
  if (!std::isfinite(x) || x == 0) return x;
  int e = 0;
  std::frexp(x, &e);  // |x| = m * 2^e with m in [0.5, 1): leading bit is 2^(e-1)
  const int exp = std::max(e - 1, min_exp);
  const double quantum = std::ldexp(1.0, exp - fraction_bits);
  const double r = std::nearbyint(x / quantum) * quantum;  // scaling by 2^k is exact
  if (std::fabs(r) > max_value) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r;
}

double RoundHalf(double x) { return RoundToFormat(x, kHalfFractionBits, kHalfMinExp, kHalfMax); }
double RoundBf16(double x) { return RoundToFormat(x, kBf16FractionBits, kBf16MinExp, kBf16Max); }

double RoundValue(DType dtype, double x) {
  switch (dtype) {
    case yirage::v1::FLOAT16:
      return RoundHalf(x);
    case yirage::v1::BFLOAT16:
      return RoundBf16(x);
    default:
      return static_cast<double>(static_cast<float>(x));
  }
}

// Calls f(begin, end) over [0, n) in chunks of about 2^16 element
// operations (`work_per_item` a item), on every core for large n (the
// tensors of a large job are hundreds of millions of values). Each item is
// computed by one call, so results do not depend on the thread count.
template <typename F>
void ForChunks(int64_t n, F f, int64_t work_per_item = 1) {
  constexpr int64_t kChunkWork = 1 << 16;
  const int64_t chunk = std::max<int64_t>(1, kChunkWork / std::max<int64_t>(1, work_per_item));
  const int64_t chunks = (n + chunk - 1) / chunk;
  ParallelFor(chunks,
              ThreadsForWork(chunks, static_cast<double>(chunk * work_per_item), 4 * kChunkWork),
              [&](int64_t c) { f(c * chunk, std::min(n, (c + 1) * chunk)); });
}

// Calls f(o, i) for every row (o, i) of a tensor viewed as [outer, len,
// inner] and walked along len, `work_per_row` operations each, in chunks of
// rows on every core.
template <typename F>
void ForEachRow(int64_t outer, int64_t inner, int64_t work_per_row, F f) {
  ForChunks(
      outer * inner,
      [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) f(r / inner, r % inner);
      },
      work_per_row);
}

// ---- reference interpreter helpers ----

int64_t Product(const std::vector<int64_t>& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= shape[i];
  return n;
}

// Element strides of a row-major `in_shape` tensor viewed as `out_shape` under
// NumPy broadcasting (stride 0 along broadcast dims).
std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& in_shape,
                                      const std::vector<int64_t>& out_shape) {
  std::vector<int64_t> strides(out_shape.size(), 0);
  int64_t stride = 1;
  for (size_t i = 0; i < in_shape.size(); ++i) {  // i counts dims from the right
    const size_t in_dim = in_shape.size() - 1 - i;
    const size_t out_dim = out_shape.size() - 1 - i;
    if (in_shape[in_dim] != 1) strides[out_dim] = stride;
    stride *= in_shape[in_dim];
  }
  return strides;
}

// Offset of the element at row-major flat index `flat` of `shape`, given per-dim strides.
int64_t StridedOffset(int64_t flat, const std::vector<int64_t>& shape,
                      const std::vector<int64_t>& strides) {
  int64_t offset = 0;
  for (size_t i = shape.size(); i-- > 0;) {
    offset += (flat % shape[i]) * strides[i];
    flat /= shape[i];
  }
  return offset;
}

// `in` materialized at `out_shape` (which it must broadcast to).
std::vector<double> BroadcastTo(const HostTensor& in, const std::vector<int64_t>& out_shape) {
  if (in.shape == out_shape) return in.data;
  const std::vector<int64_t> strides = BroadcastStrides(in.shape, out_shape);
  std::vector<double> out(NumElements(out_shape));
  ForChunks(static_cast<int64_t>(out.size()), [&](int64_t begin, int64_t end) {
    for (int64_t f = begin; f < end; ++f) out[f] = in.data[StridedOffset(f, out_shape, strides)];
  });
  return out;
}

// One output block of the reference matmul: rows [i0, i1) by columns
// [j0, j0 + kPanel) of C = A @ B (B [k, n], or [n, k] with transpose_b). B's
// panel is packed k-block by k-block into `packed` (zeros past n), and C is
// accumulated in register tiles of kTileRows x kTileCols. Each output is
// summed over p in ascending order, carried across k-blocks in C itself, so
// the result depends on neither the thread count nor the tiling.
constexpr int64_t kTileRows = 4;
constexpr int64_t kTileCols = 16;
constexpr int64_t kPanel = 64;
constexpr int64_t kDepth = 256;

// Compiled for AVX-512, AVX2 + FMA and the base ISA, picked at load time: the
// reference of a large GEMM (tens of GFLOP) is a worker's longest step.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void MatmulBlock(
    const double* pa, const double* pb, double* po, int64_t k, int64_t n, int64_t i0, int64_t i1,
    int64_t j0, bool transpose_b, double* packed) {
  const int64_t cols = std::min(kPanel, n - j0);
  for (int64_t p0 = 0; p0 < k; p0 += kDepth) {
    const int64_t kc = std::min(kDepth, k - p0);
    if (transpose_b) {
      for (int64_t j = 0; j < kPanel; ++j) {
        if (j >= cols) {
          for (int64_t p = 0; p < kc; ++p) packed[p * kPanel + j] = 0.0;
          continue;
        }
        const double* col = pb + (j0 + j) * k + p0;
        for (int64_t p = 0; p < kc; ++p) packed[p * kPanel + j] = col[p];
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        const double* row = pb + (p0 + p) * n + j0;
        for (int64_t j = 0; j < kPanel; ++j) packed[p * kPanel + j] = j < cols ? row[j] : 0.0;
      }
    }
    for (int64_t r0 = i0; r0 < i1; r0 += kTileRows) {
      // Rows past i1 repeat the last row and are not stored.
      const double* arow[kTileRows];
      for (int64_t r = 0; r < kTileRows; ++r) arow[r] = pa + std::min(r0 + r, i1 - 1) * k + p0;
      for (int64_t jt = 0; jt < kPanel; jt += kTileCols) {
        if (jt >= cols) break;
        double c[kTileRows][kTileCols];
        for (int64_t r = 0; r < kTileRows; ++r) {
          for (int64_t j = 0; j < kTileCols; ++j) {
            c[r][j] =
                (p0 > 0 && r0 + r < i1 && jt + j < cols) ? po[(r0 + r) * n + j0 + jt + j] : 0.0;
          }
        }
        for (int64_t p = 0; p < kc; ++p) {
          const double* bp = packed + p * kPanel + jt;
#pragma GCC unroll 4
          for (int64_t r = 0; r < kTileRows; ++r) {
            const double av = arow[r][p];
#pragma GCC unroll 16
            for (int64_t j = 0; j < kTileCols; ++j) c[r][j] += av * bp[j];
          }
        }
        for (int64_t r = 0; r < kTileRows && r0 + r < i1; ++r) {
          for (int64_t j = 0; j < kTileCols && jt + j < cols; ++j) {
            po[(r0 + r) * n + j0 + jt + j] = c[r][j];
          }
        }
      }
    }
  }
}

HostTensor EvalMatmul(const OpInfo& op, const HostTensor& a, const HostTensor& b,
                      const std::vector<int64_t>& out_shape) {
  const size_t ra = a.shape.size();
  const int64_t m = a.shape[ra - 2];
  const int64_t k = a.shape[ra - 1];
  const int64_t n = out_shape.back();
  const std::vector<int64_t> batch(out_shape.begin(), out_shape.end() - 2);
  const std::vector<int64_t> a_batch(a.shape.begin(), a.shape.end() - 2);
  const std::vector<int64_t> b_batch(b.shape.begin(), b.shape.end() - 2);
  // Batch strides in units of whole matrices.
  const std::vector<int64_t> a_strides = BroadcastStrides(a_batch, batch);
  const std::vector<int64_t> b_strides = BroadcastStrides(b_batch, batch);
  HostTensor out{out_shape, std::vector<double>(NumElements(out_shape), 0.0)};
  const int64_t num_batches = NumElements(batch);
  // Work items: kRows output rows by one kPanel-column panel; a block of rows
  // shares the panel of B it packs, so B streams from memory once per kRows
  // rows.
  constexpr int64_t kRows = 64;
  const int64_t panels = (n + kPanel - 1) / kPanel;
  const int64_t row_blocks = (m + kRows - 1) / kRows;
  const int64_t items = num_batches * row_blocks * panels;
  if (m == 0 || n == 0) return out;
  auto run_item = [&](int64_t item) {
    thread_local std::vector<double> packed;
    packed.resize(kDepth * kPanel);
    const int64_t panel = item % panels;
    const int64_t i0 = (item / panels) % row_blocks * kRows;
    const int64_t bi = item / (panels * row_blocks);
    const double* pa = a.data.data() + StridedOffset(bi, batch, a_strides) * m * k;
    const double* pb = b.data.data() + StridedOffset(bi, batch, b_strides) * k * n;
    double* po = out.data.data() + bi * m * n;
    MatmulBlock(pa, pb, po, k, n, i0, std::min(m, i0 + kRows), panel * kPanel, op.transpose_b,
                packed.data());
  };
  // Large products (verification of decode-sized GEMMs: billions of
  // multiply-adds) use every core; small ones stay on this thread.
  constexpr double kMinWorkPerThread = 1e7;
  ParallelFor(
      items,
      ThreadsForWork(items, static_cast<double>(k * std::min(n, kPanel) * std::min(m, kRows)),
                     kMinWorkPerThread),
      run_item);
  return out;
}

HostTensor EvalReduction(const OpInfo& op, const HostTensor& x,
                         const std::vector<int64_t>& out_shape) {
  const int64_t outer = Product(x.shape, 0, op.axis);
  const int64_t len = x.shape[op.axis];
  const int64_t inner = Product(x.shape, op.axis + 1, x.shape.size());
  HostTensor out{out_shape, std::vector<double>(outer * inner)};
  // Output (o, i) sums its len values in order, whichever chunk of outputs
  // it falls in.
  ForEachRow(outer, inner, len, [&](int64_t o, int64_t i) {
    double acc = op.type == OpType::kReduceMax ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t a = 0; a < len; ++a) {
      const double v = x.data[(o * len + a) * inner + i];
      if (op.type == OpType::kReduceMax) {
        if (v > acc || std::isnan(v)) acc = v;  // NaN sticks: nothing compares > NaN
      } else {
        acc += v;
      }
    }
    if (op.type == OpType::kReduceMean) acc /= static_cast<double>(len);
    out.data[o * inner + i] = acc;
  });
  return out;
}

// rms_norm, layer_norm and softmax: all walk rows along op.axis.
HostTensor EvalRowwise(const OpInfo& op, const std::vector<const HostTensor*>& in) {
  const HostTensor& x = *in[0];
  const int64_t outer = Product(x.shape, 0, op.axis);
  const int64_t len = x.shape[op.axis];
  const int64_t inner = Product(x.shape, op.axis + 1, x.shape.size());
  HostTensor out{x.shape, std::vector<double>(x.data.size())};
  std::vector<double> weight;
  std::vector<double> bias;
  if (in.size() > 1) weight = BroadcastTo(*in[1], x.shape);
  if (in.size() > 2) bias = BroadcastTo(*in[2], x.shape);
  // Each row (o, i) on its own, whichever chunk of rows it falls in.
  ForEachRow(outer, inner, 4 * len, [&](int64_t o, int64_t i) {
    auto at = [&](int64_t a) { return (o * len + a) * inner + i; };
    if (op.type == OpType::kSoftmax) {
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t a = 0; a < len; ++a) {
        const double v = x.data[at(a)];
        if (v > max || std::isnan(v)) max = v;
      }
      double sum = 0;
      for (int64_t a = 0; a < len; ++a) {
        out.data[at(a)] = std::exp(x.data[at(a)] - max);
        sum += out.data[at(a)];
      }
      for (int64_t a = 0; a < len; ++a) out.data[at(a)] /= sum;
      return;
    }
    double mean = 0;
    if (op.type == OpType::kLayerNorm) {
      for (int64_t a = 0; a < len; ++a) mean += x.data[at(a)];
      mean /= static_cast<double>(len);
    }
    double sq = 0;
    for (int64_t a = 0; a < len; ++a) {
      const double d = x.data[at(a)] - mean;
      sq += d * d;
    }
    const double inv = 1.0 / std::sqrt(sq / static_cast<double>(len) + op.eps);
    for (int64_t a = 0; a < len; ++a) {
      const int64_t idx = at(a);
      double y = (x.data[idx] - mean) * inv;
      if (!weight.empty()) y *= weight[idx];
      if (!bias.empty()) y += bias[idx];
      out.data[idx] = y;
    }
  });
  return out;
}

HostTensor EvalConcat(const OpInfo& op, const std::vector<const HostTensor*>& in,
                      const std::vector<int64_t>& out_shape) {
  const int64_t outer = Product(out_shape, 0, op.axis);
  const int64_t inner = Product(out_shape, op.axis + 1, out_shape.size());
  HostTensor out{out_shape, {}};
  out.data.reserve(NumElements(out_shape));
  for (int64_t o = 0; o < outer; ++o) {
    for (const HostTensor* t : in) {
      const int64_t chunk = t->shape[op.axis] * inner;
      out.data.insert(out.data.end(), t->data.begin() + o * chunk,
                      t->data.begin() + (o + 1) * chunk);
    }
  }
  return out;
}

HostTensor EvalSlice(const OpInfo& op, const HostTensor& x, const std::vector<int64_t>& out_shape) {
  const int64_t outer = Product(x.shape, 0, op.axis);
  const int64_t len = x.shape[op.axis];
  const int64_t inner = Product(x.shape, op.axis + 1, x.shape.size());
  const int64_t width = op.slice_end - op.slice_start;
  HostTensor out{out_shape, {}};
  out.data.reserve(NumElements(out_shape));
  for (int64_t o = 0; o < outer; ++o) {
    const auto begin = x.data.begin() + (o * len + op.slice_start) * inner;
    out.data.insert(out.data.end(), begin, begin + width * inner);
  }
  return out;
}

HostTensor EvalOp(const OpInfo& op, const std::vector<const HostTensor*>& in,
                  const std::vector<int64_t>& out_shape) {
  if (op.type == OpType::kMatmul) return EvalMatmul(op, *in[0], *in[1], out_shape);
  if (IsUnaryElementwise(op.type)) {
    HostTensor out{out_shape, std::vector<double>(in[0]->data.size())};
    const ElementFn f = SpecOf(op.type).element;
    const double* x = in[0]->data.data();
    ForChunks(static_cast<int64_t>(out.data.size()), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out.data[i] = f(x[i], 0.0, op.gelu_tanh);
    });
    return out;
  }
  if (IsBinaryElementwise(op.type)) {
    HostTensor out{out_shape, BroadcastTo(*in[0], out_shape)};
    const ElementFn f = SpecOf(op.type).element;
    std::vector<double> broadcast_b;
    const double* b = nullptr;
    if (!op.has_scalar) {
      if (in[1]->shape == out_shape) {
        b = in[1]->data.data();
      } else {
        broadcast_b = BroadcastTo(*in[1], out_shape);
        b = broadcast_b.data();
      }
    }
    ForChunks(static_cast<int64_t>(out.data.size()), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        out.data[i] = f(out.data[i], b == nullptr ? op.scalar : b[i], false);
      }
    });
    return out;
  }
  if (IsReduction(op.type)) return EvalReduction(op, *in[0], out_shape);
  if (op.type == OpType::kConcat) return EvalConcat(op, in, out_shape);
  if (op.type == OpType::kSlice) return EvalSlice(op, *in[0], out_shape);
  return EvalRowwise(op, in);
}

std::string FormatValue(double v) { return absl::StrFormat("%.9g", v); }

std::string IndexToString(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    index[i] = flat % shape[i];
    flat /= shape[i];
  }
  return ShapeToString(index);
}

bool IsSixteenBit(DType dtype) {
  return dtype == yirage::v1::FLOAT16 || dtype == yirage::v1::BFLOAT16;
}

}  // namespace

uint16_t FloatToHalf(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) {  // NaN: quiet, keep the top payload bits
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs_bits >> 13) & 0x3ffu));
  }
  const double r = RoundHalf(std::fabs(static_cast<double>(value)));
  if (std::isinf(r)) return static_cast<uint16_t>(sign | 0x7c00u);
  if (r < std::ldexp(1.0, kHalfMinExp)) {
    // Subnormal (or zero): an integer multiple of 2^-24.
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::ldexp(r, 24)));
  }
  int e = 0;
  const double m = std::frexp(r, &e);  // r = m * 2^e, m in [0.5, 1)
  const uint32_t exponent = static_cast<uint32_t>(e - 1 + 15);
  const uint32_t fraction = static_cast<uint32_t>(std::ldexp(m, 11)) - 1024u;
  return static_cast<uint16_t>(sign | (exponent << 10) | fraction);
}

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t fraction = bits & 0x3ffu;
  if (exponent == 0x1f) {  // inf or NaN (payload kept)
    return std::bit_cast<float>(sign | 0x7f800000u | (fraction << 13));
  }
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(fraction), -24);
  } else {
    magnitude = std::ldexp(static_cast<float>(fraction | 0x400u), static_cast<int>(exponent) - 25);
  }
  return sign ? -magnitude : magnitude;
}

uint16_t FloatToBFloat16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: quiet, keep the top payload bits
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  const float r = static_cast<float>(RoundBf16(static_cast<double>(value)));  // exact in float
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(r) >> 16);
}

float BFloat16ToFloat(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

void RoundToDType(yirage::v1::DType dtype, HostTensor* tensor) {
  ForChunks(static_cast<int64_t>(tensor->data.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) tensor->data[i] = RoundValue(dtype, tensor->data[i]);
  });
}

std::vector<uint8_t> EncodeTensor(const HostTensor& tensor, yirage::v1::DType dtype) {
  const int size = DTypeSize(dtype);
  std::vector<uint8_t> bytes(tensor.data.size() * size);
  ForChunks(static_cast<int64_t>(tensor.data.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const double v = tensor.data[i];
      if (dtype == yirage::v1::FLOAT16 || dtype == yirage::v1::BFLOAT16) {
        // Round once in double (exact in float afterwards), then take the bits.
        const float f = static_cast<float>(RoundValue(dtype, v));
        const uint16_t h = dtype == yirage::v1::FLOAT16 ? FloatToHalf(f) : FloatToBFloat16(f);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      } else {
        const float f = static_cast<float>(v);
        std::memcpy(bytes.data() + 4 * i, &f, 4);
      }
    }
  });
  return bytes;
}

namespace {

// Every half's float value, so that decoding is a load (outputs of a
// candidate are decoded whole, hundreds of millions of values).
const float* HalfTable() {
  static const std::vector<float>* const table = [] {
    auto* t = new std::vector<float>(1 << 16);
    for (uint32_t h = 0; h < (1u << 16); ++h) (*t)[h] = HalfToFloat(static_cast<uint16_t>(h));
    return t;
  }();
  return table->data();
}

// Elements [begin, end) of raw little-endian `bytes` stored as `dtype`
// (float32 for every dtype but the 16-bit ones, as EncodeTensor writes
// them) into out[0, end - begin).
void DecodeValues(const void* bytes, int64_t begin, int64_t end, yirage::v1::DType dtype,
                  double* out) {
  const uint8_t* p = static_cast<const uint8_t*>(bytes);
  if (dtype == yirage::v1::FLOAT16) {
    const float* table = HalfTable();
    for (int64_t i = begin; i < end; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i - begin] = table[h];
    }
  } else if (dtype == yirage::v1::BFLOAT16) {
    for (int64_t i = begin; i < end; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i - begin] = BFloat16ToFloat(h);
    }
  } else {
    for (int64_t i = begin; i < end; ++i) {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      out[i - begin] = f;
    }
  }
}

}  // namespace

HostTensor DecodeTensor(const void* bytes, const std::vector<int64_t>& shape,
                        yirage::v1::DType dtype) {
  HostTensor tensor{shape, std::vector<double>(NumElements(shape))};
  ForChunks(static_cast<int64_t>(tensor.data.size()), [&](int64_t begin, int64_t end) {
    DecodeValues(bytes, begin, end, dtype, tensor.data.data() + begin);
  });
  return tensor;
}

std::vector<HostTensor> MakeRandomInputs(const Graph& graph, uint64_t seed) {
  const int n = graph.num_inputs();
  std::vector<bool> positive(n, false);
  std::vector<int64_t> matmul_k(n, 0);  // largest K over matmuls reading it as B
  for (const OpInfo& op : graph.ops()) {
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      const int id = op.inputs[k];
      if (id >= n) continue;
      const bool feeds_domain = op.type == OpType::kLog || op.type == OpType::kSqrt ||
                                op.type == OpType::kRsqrt || (op.type == OpType::kDiv && k == 1) ||
                                (op.type == OpType::kPow && k == 0);
      if (feeds_domain) positive[id] = true;
      if (op.type == OpType::kMatmul && k == 1) {
        const std::vector<int64_t>& a = graph.tensor(op.inputs[0]).shape;
        matmul_k[id] = std::max(matmul_k[id], a.back());
      }
    }
  }
  // Attention-shaped chains, whose checks the ranges above would leave
  // vacuous: scores of O(1 / sqrt(K)) make the softmax near uniform (any S
  // gives the same P), and V of O(1 / sqrt(N)) under a near-uniform P makes
  // O a mean near 0, under the 16-bit atol. So a softmax over the last axis
  // of s * (A @ B) with A and B graph inputs gets A and B uniform in
  // [-a, a] with scores of standard deviation kScoreStd (s^2 K a^4 / 9 =
  // kScoreStd^2), and the B operand of a matmul whose A is a softmax's
  // output (rows summing to 1) gets [-1, 1].
  constexpr double kScoreStd = 1.0;
  std::vector<double> amplitude(n, 0.0);  // > 0: uniform in [-a, a]
  for (const OpInfo& op : graph.ops()) {
    if (op.type == OpType::kSoftmax &&
        op.axis == static_cast<int>(graph.tensor(op.inputs[0]).shape.size()) - 1) {
      int t = op.inputs[0];
      double s = 1.0;
      const int mul = graph.tensor(t).producer;
      if (mul >= 0 && graph.op(mul).has_scalar &&
          (graph.op(mul).type == OpType::kMul || graph.op(mul).type == OpType::kDiv)) {
        const double v = graph.op(mul).scalar;
        s = graph.op(mul).type == OpType::kMul ? std::fabs(v) : (v != 0 ? 1.0 / std::fabs(v) : 0);
        t = graph.op(mul).inputs[0];
      }
      const int mm = graph.tensor(t).producer;
      if (mm < 0 || graph.op(mm).type != OpType::kMatmul || !(s > 0) || !std::isfinite(s)) continue;
      const int a = graph.op(mm).inputs[0], b = graph.op(mm).inputs[1];
      if (a >= n || b >= n || positive[a] || positive[b]) continue;
      const double k = static_cast<double>(graph.tensor(a).shape.back());
      const double amp = std::sqrt(3.0 * kScoreStd / (s * std::sqrt(k)));
      amplitude[a] = amplitude[b] = amp;
    }
    if (op.type == OpType::kMatmul && op.inputs[1] < n && !positive[op.inputs[1]]) {
      const int pa = graph.tensor(op.inputs[0]).producer;
      if (pa >= 0 && graph.op(pa).type == OpType::kSoftmax && amplitude[op.inputs[1]] == 0.0) {
        amplitude[op.inputs[1]] = 1.0;
      }
    }
  }
  std::vector<HostTensor> inputs;
  inputs.reserve(n);
  for (int i = 0; i < n; ++i) {
    const TensorInfo& info = graph.tensor(i);
    double lo = -1.0;
    double hi = 1.0;
    if (positive[i]) {
      lo = 0.5;
      hi = 1.5;
    } else if (amplitude[i] > 0) {
      hi = amplitude[i];
      lo = -hi;
    } else if (matmul_k[i] > 0) {
      hi = 1.0 / std::sqrt(static_cast<double>(matmul_k[i]));
      lo = -hi;
    }
    // splitmix64, one independent stream per (seed, input index). Its state
    // after e + 1 steps is start + (e + 1) * gamma, so element e is computed
    // from its index and chunks of the tensor fill in parallel.
    const uint64_t start = seed ^ (0xd1b54a32d192ed03ull * static_cast<uint64_t>(i + 1));
    HostTensor tensor{info.shape, std::vector<double>(info.num_elements())};
    const DType dtype = info.dtype;
    ForChunks(info.num_elements(), [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        uint64_t z = start + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(e + 1);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        const double u = static_cast<double>(z >> 11) * 0x1.0p-53;  // [0, 1)
        tensor.data[e] = RoundValue(dtype, lo + (hi - lo) * u);
      }
    });
    inputs.push_back(std::move(tensor));
  }
  return inputs;
}

absl::StatusOr<std::vector<HostTensor>> EvaluateReference(const Graph& graph,
                                                          const std::vector<HostTensor>& inputs) {
  if (static_cast<int>(inputs.size()) != graph.num_inputs()) {
    return absl::InvalidArgumentError(absl::StrCat("EvaluateReference: the graph has ",
                                                   graph.num_inputs(), " inputs but ",
                                                   inputs.size(), " tensors were given"));
  }
  // The inputs are read where they are (not copied: they may be gigabytes);
  // each op's result is owned here.
  std::vector<HostTensor> owned(graph.num_tensors());
  std::vector<const HostTensor*> values(graph.num_tensors(), nullptr);
  for (int i = 0; i < graph.num_inputs(); ++i) {
    const TensorInfo& info = graph.tensor(i);
    if (inputs[i].shape != info.shape ||
        static_cast<int64_t>(inputs[i].data.size()) != info.num_elements()) {
      return absl::InvalidArgumentError(
          absl::StrCat("EvaluateReference: input '", info.name, "' (inputs[", i,
                       "]) must have shape ", ShapeToString(info.shape), " but has shape ",
                       ShapeToString(inputs[i].shape), " and ", inputs[i].data.size(), " values"));
    }
    values[i] = &inputs[i];
  }
  for (const OpInfo& op : graph.ops()) {
    std::vector<const HostTensor*> in;
    for (int id : op.inputs) in.push_back(values[id]);
    owned[op.output] = EvalOp(op, in, graph.tensor(op.output).shape);
    values[op.output] = &owned[op.output];
  }
  std::vector<HostTensor> outputs;
  for (size_t k = 0; k < graph.outputs().size(); ++k) {
    const int id = graph.outputs()[k];
    // An op's result named once among the outputs moves there; an input or
    // a result named twice is copied.
    const bool once = std::count(graph.outputs().begin(), graph.outputs().end(), id) == 1;
    outputs.push_back(id >= graph.num_inputs() && once ? std::move(owned[id]) : *values[id]);
  }
  return outputs;
}

Tolerance DefaultTolerance(const Graph& graph) {
  for (int id : graph.outputs()) {
    if (IsSixteenBit(graph.tensor(id).dtype)) return {1e-2, 1e-2};
  }
  return {1e-4, 1e-5};
}

Tolerance ResolveTolerance(const Graph& graph, const yirage::v1::Tolerance& job) {
  if (job.rtol() != 0 || job.atol() != 0) return {job.rtol(), job.atol()};
  const yirage::v1::Tolerance& file = graph.proto().tolerance();
  if (file.rtol() != 0 || file.atol() != 0) return {file.rtol(), file.atol()};
  return DefaultTolerance(graph);
}

namespace {

// One output's comparison over elements [begin, end): the sums are over
// finite pairs (the norms), `first_failure` is the lowest failing index
// (-1: none).
struct ComparePart {
  double max_abs_error = 0, max_rel_error = 0, err_sq = 0, ref_sq = 0;
  int64_t failures = 0, first_failure = -1;
};

// |got - ref| and the relative error, and whether the pair is within its
// bound (see CompareOutputs in tensor.h for the rules on non-finite values).
struct PairError {
  bool ok;
  double abs_error, rel_error;
};
inline PairError ComparePair(double r, double g, const Tolerance& tolerance) {
  const double inf = std::numeric_limits<double>::infinity();
  if (std::isnan(r) || std::isinf(r)) {
    // Non-finite references must be matched exactly (NaN by NaN).
    const bool ok = std::isnan(r) ? std::isnan(g) : g == r;
    return {ok, ok ? 0.0 : inf, ok ? 0.0 : inf};
  }
  if (!std::isfinite(g)) return {false, inf, inf};
  const double abs_error = std::fabs(g - r);
  return {abs_error <= tolerance.atol + tolerance.rtol * std::fabs(r), abs_error,
          abs_error / std::max(std::fabs(r), kCompareTinyRef)};
}

// The shared body of CompareOutputs and CompareEncodedOutputs: output o
// came as got_shapes[o] holding got_counts[o] values, and
// got(o, begin, end, scratch) returns elements [begin, end) of output o as
// doubles (in `scratch` where they must be decoded first). Large outputs are compared in fixed
// chunks on every core, and the chunks' sums combined in chunk order, so the
// result does not depend on the number of threads.
template <typename Got>
CompareResult CompareWith(const Graph& graph, const std::vector<HostTensor>& reference,
                          const std::vector<std::vector<int64_t>>& got_shapes,
                          const std::vector<int64_t>& got_counts, Got got,
                          const Tolerance& tolerance) {
  CompareResult result;
  const size_t num_outputs = graph.outputs().size();
  if (reference.size() != num_outputs || got_shapes.size() != num_outputs) {
    result.message =
        absl::StrCat("the graph has ", num_outputs, " outputs but got ", got_shapes.size(),
                     " tensors and ", reference.size(), " reference tensors");
    return result;
  }
  const double inf = std::numeric_limits<double>::infinity();
  int64_t failures = 0;
  int64_t total = 0;
  int norm_failures = 0;
  std::string element_message;  // the first element out of its bound
  std::string norm_message;     // every output whose norm-wise error is over rtol
  for (size_t o = 0; o < num_outputs; ++o) {
    const HostTensor& ref = reference[o];
    const std::string name =
        absl::StrCat("output '", graph.tensor(graph.outputs()[o]).name, "' (outputs[", o, "])");
    if (got_shapes[o] != ref.shape || got_counts[o] != static_cast<int64_t>(ref.data.size())) {
      result.message = absl::StrCat(name, ": got shape ", ShapeToString(got_shapes[o]), " with ",
                                    got_counts[o], " values, expected shape ",
                                    ShapeToString(ref.shape), " with ", ref.data.size());
      result.max_abs_error = inf;
      result.max_rel_error = inf;
      return result;
    }
    const int64_t n = static_cast<int64_t>(ref.data.size());
    total += n;
    // Fixed chunks (not ForChunks's, which may change with the work per
    // item): part c covers [c * kChunk, (c + 1) * kChunk).
    constexpr int64_t kChunk = 1 << 16;
    std::vector<ComparePart> parts((n + kChunk - 1) / kChunk);
    const int64_t num_parts = static_cast<int64_t>(parts.size());
    ParallelFor(num_parts, ThreadsForWork(num_parts, kChunk, 4 * kChunk), [&](int64_t c) {
      const int64_t begin = c * kChunk;
      const int64_t end = std::min(n, begin + kChunk);
      ComparePart& part = parts[c];
      thread_local std::vector<double> scratch;
      const double* values = got(o, begin, end, scratch) - begin;
      for (int64_t i = begin; i < end; ++i) {
        const double r = ref.data[i];
        const double g = values[i];
        if (std::isfinite(r) && std::isfinite(g)) {
          part.err_sq += (g - r) * (g - r);
          part.ref_sq += r * r;
        }
        const PairError e = ComparePair(r, g, tolerance);
        part.max_abs_error = std::max(part.max_abs_error, e.abs_error);
        part.max_rel_error = std::max(part.max_rel_error, e.rel_error);
        if (!e.ok && part.failures++ == 0) part.first_failure = i;
      }
    });
    double err_sq = 0, ref_sq = 0;  // over finite pairs: the output's norms
    for (const ComparePart& part : parts) {
      err_sq += part.err_sq;
      ref_sq += part.ref_sq;
      result.max_abs_error = std::max(result.max_abs_error, part.max_abs_error);
      result.max_rel_error = std::max(result.max_rel_error, part.max_rel_error);
      if (part.failures == 0) continue;
      if (failures == 0) {
        const int64_t i = part.first_failure;
        const double r = ref.data[i];
        std::vector<double> one;
        const double g = *got(o, i, i + 1, one);
        element_message = absl::StrCat(name, " element ", i, " ", IndexToString(i, ref.shape),
                                       ": got ", FormatValue(g), ", expected ", FormatValue(r));
        if (std::isfinite(r) && std::isfinite(g)) {
          absl::StrAppend(
              &element_message, " (|diff| ", FormatValue(std::fabs(g - r)), " > atol ",
              FormatValue(tolerance.atol), " + rtol ", FormatValue(tolerance.rtol),
              " * |expected| = ", FormatValue(tolerance.atol + tolerance.rtol * std::fabs(r)), ")");
        } else {
          absl::StrAppend(&element_message, " (non-finite values must match exactly)");
        }
      }
      failures += part.failures;
    }
    // The output as a whole: an output whose values all sit under the atol
    // (softmax rows of thousands, means near 0) passes the element bounds
    // whatever it holds, zeros included; its norm-wise error must still be
    // within rtol.
    const double norm_error = ref_sq > 0 ? std::sqrt(err_sq / ref_sq) : 0.0;
    if (tolerance.rtol > 0 && norm_error > tolerance.rtol) {
      absl::StrAppend(&norm_message, norm_message.empty() ? "" : "; ", name,
                      ": relative error norm ||got - expected|| / ||expected|| = ",
                      FormatValue(norm_error), " > rtol ", FormatValue(tolerance.rtol));
      ++norm_failures;
    }
  }
  result.ok = failures == 0 && norm_failures == 0;
  if (failures > 0) {
    result.message =
        absl::StrCat(element_message, "; ", failures, " of ", total, " elements out of tolerance");
    if (norm_failures > 0) absl::StrAppend(&result.message, "; ", norm_message);
  } else if (norm_failures > 0) {
    result.message = absl::StrCat(
        norm_message, " (every element within its bound: the output is small against the atol)");
  }
  return result;
}

}  // namespace

CompareResult CompareOutputs(const Graph& graph, const std::vector<HostTensor>& reference,
                             const std::vector<HostTensor>& got, const Tolerance& tolerance) {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> counts;
  for (const HostTensor& t : got) {
    shapes.push_back(t.shape);
    counts.push_back(static_cast<int64_t>(t.data.size()));
  }
  return CompareWith(
      graph, reference, shapes, counts,
      [&](size_t o, int64_t begin, int64_t, std::vector<double>&) {
        return got[o].data.data() + begin;
      },
      tolerance);
}

CompareResult CompareEncodedOutputs(const Graph& graph, const std::vector<HostTensor>& reference,
                                    const std::vector<const void*>& got,
                                    const Tolerance& tolerance) {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> counts;
  std::vector<yirage::v1::DType> dtypes;
  if (got.size() == graph.outputs().size()) {
    for (int id : graph.outputs()) {
      shapes.push_back(graph.tensor(id).shape);
      counts.push_back(graph.tensor(id).num_elements());
      dtypes.push_back(graph.tensor(id).dtype);
    }
  } else {
    shapes.resize(got.size());  // reported as a count mismatch
  }
  return CompareWith(
      graph, reference, shapes, counts,
      [&](size_t o, int64_t begin, int64_t end, std::vector<double>& scratch) {
        scratch.resize(end - begin);
        DecodeValues(got[o], begin, end, dtypes[o], scratch.data());
        return scratch.data();
      },
      tolerance);
}

}  // namespace yirage::core
