#include "backends/cuda/cuda_attention.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "backends/codegen_util.h"

namespace yirage::backends::cuda {
namespace {

using core::Graph;
using core::OpInfo;
using core::OpType;
using core::TensorInfo;

constexpr int kTileM = 64;  // query rows per block (16 per warp, 4 warps)
constexpr int kTileN = 64;  // keys per tile

std::vector<int64_t> Lead(const std::vector<int64_t>& shape) {
  return std::vector<int64_t>(shape.begin(), shape.end() - 2);
}

// The kernel template; @NAME@-style placeholders are replaced below.
constexpr char kAttentionKernel[] = R"(
// attention: B=@B@ M=@M@ N=@N@ D=@D@ DV=@DV@, @SPLITS@ key split(s) of @NS@ keys.
// Warp w owns query rows [16w, 16w+16) of the block's 64; S, P and O live in
// registers in the m16n8k16 mma layouts (lane: rows lane/4 and lane/4 + 8,
// columns 2 (lane % 4) + {0, 1} of each 8-column block); K and V tiles of 64
// keys stream through a two-stage cp.async pipeline in shared memory.
extern "C" __global__ void __launch_bounds__(128) @NAME@(const @T@* __restrict__ q,
    const @T@* __restrict__ k, const @T@* __restrict__ v, @OT@* __restrict__ o,
    float* __restrict__ ws) {
  typedef @T@ T;
  constexpr int M = @M@, N = @N@, D = @D@, DV = @DV@, NS = @NS@, BM = 64, BN = 64;
  constexpr int LQ = D + 8, LV = DV + 8;
  constexpr int LK = @KT@ ? D + 8 : BN + 8;
  constexpr int KSIZE = @KT@ ? BN * (D + 8) : D * (BN + 8);
  constexpr int VSIZE = BN * LV;
  constexpr int TILES = NS / BN;
  extern __shared__ __align__(128) unsigned char yr_smb[];
  T* const sq = reinterpret_cast<T*>(yr_smb);
  T* const skv = sq + BM * LQ;  // two stages of [K tile | V tile]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int m0 = blockIdx.x * BM, b = blockIdx.y, split = blockIdx.z;
  (void)ws; (void)split; (void)o;
  const T* const qb = q + ((i64)b * M + m0) * D;
  const T* const kb = k + (i64)b * D * N;
  const T* const vb = v + (i64)b * N * DV;
  const int key0 = @SPLIT_BEGIN@;
  for (int x = tid; x < BM * D / 8; x += 128) {
    const int r = x / (D / 8), c = (x % (D / 8)) * 8;
    if (m0 + r < M) {
      yr_cp_async16(sq + r * LQ + c, qb + (i64)r * D + c);
    } else {
      *reinterpret_cast<uint4*>(sq + r * LQ + c) = make_uint4(0, 0, 0, 0);
    }
  }
  auto load_tile = [&](int t, int stage) {
    T* const sk = skv + stage * (KSIZE + VSIZE);
    T* const sv = sk + KSIZE;
    const int n0 = key0 + t * BN;
#if @KT@
    for (int x = tid; x < BN * D / 8; x += 128) {
      const int n = x / (D / 8), c = (x % (D / 8)) * 8;
      yr_cp_async16(sk + n * LK + c, kb + (i64)(n0 + n) * D + c);
    }
#else
    for (int x = tid; x < D * BN / 8; x += 128) {
      const int dd = x / (BN / 8), c = (x % (BN / 8)) * 8;
      yr_cp_async16(sk + dd * LK + c, kb + (i64)dd * N + n0 + c);
    }
#endif
    for (int x = tid; x < BN * DV / 8; x += 128) {
      const int n = x / (DV / 8), c = (x % (DV / 8)) * 8;
      yr_cp_async16(sv + n * LV + c, vb + (i64)(n0 + n) * DV + c);
    }
    yr_cp_async_commit();
  };
  load_tile(0, 0);  // with Q
  const int li = lane & 7, lm = lane >> 3;  // ldmatrix: row within matrix, matrix
  unsigned qa[D / 16][4];
  float oacc[DV / 8][4];
#pragma unroll
  for (int j = 0; j < DV / 8; ++j) oacc[j][0] = oacc[j][1] = oacc[j][2] = oacc[j][3] = 0.0f;
  float m_run[2] = {-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)};
  float l_run[2] = {0.0f, 0.0f};
  for (int t = 0; t < TILES; ++t) {
    if (t + 1 < TILES) {
      load_tile(t + 1, (t + 1) & 1);
      yr_cp_async_wait<1>();
    } else {
      yr_cp_async_wait<0>();
    }
    __syncthreads();
    if (t == 0) {
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        yr_ldsm_x4(qa[ks], sq + (warp * 16 + li + (lm & 1) * 8) * LQ + ks * 16 + (lm >> 1) * 8);
      }
    }
    const T* const sk = skv + (t & 1) * (KSIZE + VSIZE);
    const T* const sv = sk + KSIZE;
    // S = Q K: 16 x 64 per warp.
    float s[BN / 8][4];
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
      for (int nb = 0; nb < BN / 8; nb += 2) {
        unsigned bf[4];
#if @KT@
        yr_ldsm_x4(bf, sk + ((nb + (lm >> 1)) * 8 + li) * LK + ks * 16 + (lm & 1) * 8);
#else
        yr_ldsm_x4_t(bf, sk + (ks * 16 + li + (lm & 1) * 8) * LK + (nb + (lm >> 1)) * 8);
#endif
        yr_mma16816<T>(s[nb], qa[ks], bf);
        yr_mma16816<T>(s[nb + 1], qa[ks], bf + 2);
      }
    }
    // Online softmax; rows h = 0 (lane/4) and h = 1 (lane/4 + 8).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -__int_as_float(0x7f800000);
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        s[j][2 * h] *= @SCALE@;
        s[j][2 * h + 1] *= @SCALE@;
        mx = yr_max(mx, yr_max(s[j][2 * h], s[j][2 * h + 1]));
      }
      mx = yr_max(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = yr_max(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = yr_max(m_run[h], mx);
      const float alpha = __expf(m_run[h] - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        s[j][2 * h] = __expf(s[j][2 * h] - m_new);
        s[j][2 * h + 1] = __expf(s[j][2 * h + 1] - m_new);
        sum += s[j][2 * h] + s[j][2 * h + 1];
      }
      l_run[h] = l_run[h] * alpha + sum;  // this lane's columns; summed at the end
      m_run[h] = m_new;
#pragma unroll
      for (int j = 0; j < DV / 8; ++j) {
        oacc[j][2 * h] *= alpha;
        oacc[j][2 * h + 1] *= alpha;
      }
    }
    // O += P V, P straight from the S registers.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      unsigned pa[4];
      pa[0] = yr_pack2<T>(s[2 * kk][0], s[2 * kk][1]);
      pa[1] = yr_pack2<T>(s[2 * kk][2], s[2 * kk][3]);
      pa[2] = yr_pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[3] = yr_pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int nb = 0; nb < DV / 8; nb += 2) {
        unsigned bf[4];
        yr_ldsm_x4_t(bf, sv + (kk * 16 + li + (lm & 1) * 8) * LV + (nb + (lm >> 1)) * 8);
        yr_mma16816<T>(oacc[nb], pa, bf);
        yr_mma16816<T>(oacc[nb + 1], pa, bf + 2);
      }
    }
    __syncthreads();  // this stage is consumed before it is refilled
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 1);
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 2);
  }
  const int qd = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int gm = m0 + warp * 16 + (lane >> 2) + 8 * h;
    if (gm >= M) continue;
#if @SPLITS@ == 1
    const float inv = 1.0f / l_run[h];
    @OT@* const out = o + ((i64)b * M + gm) * DV;
#pragma unroll
    for (int j = 0; j < DV / 8; ++j) {
      yr_st(out, j * 8 + 2 * qd, oacc[j][2 * h] * inv);
      yr_st(out, j * 8 + 2 * qd + 1, oacc[j][2 * h + 1] * inv);
    }
#else
    float* const w = ws + (((i64)split * @B@ + b) * M + gm) * (DV + 2);
#pragma unroll
    for (int j = 0; j < DV / 8; ++j) {
      *reinterpret_cast<float2*>(w + j * 8 + 2 * qd) = make_float2(oacc[j][2 * h], oacc[j][2 * h + 1]);
    }
    if (qd == 0) {
      w[DV] = m_run[h];
      w[DV + 1] = l_run[h];
    }
#endif
  }
}
)";

constexpr char kMergeKernel[] = R"(
// merges the @SPLITS@ key splits of @NAME@: one thread per output element
extern "C" __global__ void __launch_bounds__(256) @NAME@_merge(const float* __restrict__ ws,
    @OT@* __restrict__ o) {
  constexpr int M = @M@, DV = @DV@, S = @SPLITS@;
  const i64 x = (i64)blockIdx.x * 256 + threadIdx.x;
  if (x >= (i64)@B@ * M * DV) return;
  const i64 rowi = x / DV;
  const int c = (int)(x % DV);
  constexpr i64 stride = (i64)@B@ * M * (DV + 2);
  const float* w = ws + rowi * (DV + 2);
  float mx = -__int_as_float(0x7f800000);
#pragma unroll 4
  for (int s = 0; s < S; ++s) mx = yr_max(mx, w[s * stride + DV]);
  float num = 0.0f, den = 0.0f;
#pragma unroll 4
  for (int s = 0; s < S; ++s) {
    const float e = expf(w[s * stride + DV] - mx);
    num += e * w[s * stride + c];
    den += e * w[s * stride + DV + 1];
  }
  yr_st(o, x, num / den);
}
)";

std::string CTypeOf(yirage::v1::DType t) {
  return t == yirage::v1::BFLOAT16 ? "__nv_bfloat16" : "__half";
}

}  // namespace

std::optional<AttentionPattern> MatchAttention(const Graph& g, const std::vector<int>& ops,
                                               const std::vector<int>& outputs) {
  if (ops.size() != 3 && ops.size() != 4) return std::nullopt;
  const OpInfo& s = g.op(ops[0]);
  if (s.type != OpType::kMatmul) return std::nullopt;
  size_t next = 1;
  double scale = 1.0;
  int s_out = s.output;
  if (ops.size() == 4) {
    const OpInfo& mul = g.op(ops[1]);
    if (mul.type != OpType::kMul || !mul.has_scalar || mul.inputs[0] != s_out) return std::nullopt;
    scale = mul.scalar;
    s_out = mul.output;
    next = 2;
  }
  const OpInfo& p = g.op(ops[next]);
  const OpInfo& o = g.op(ops[next + 1]);
  if (p.type != OpType::kSoftmax || p.inputs[0] != s_out) return std::nullopt;
  if (o.type != OpType::kMatmul || o.transpose_b || o.inputs[0] != p.output) return std::nullopt;
  // S and P stay inside the kernel.
  if (outputs.size() != 1 || outputs[0] != o.output) return std::nullopt;
  if (g.tensor(s.output).consumers.size() != 1 || g.tensor(s_out).consumers.size() != 1 ||
      g.tensor(p.output).consumers.size() != 1) {
    return std::nullopt;
  }
  AttentionPattern a;
  a.q = s.inputs[0];
  a.k = s.inputs[1];
  a.v = o.inputs[1];
  a.out = o.output;
  a.transpose_k = s.transpose_b;
  a.scale = scale;
  const TensorInfo& q = g.tensor(a.q);
  const TensorInfo& k = g.tensor(a.k);
  const TensorInfo& v = g.tensor(a.v);
  for (const TensorInfo* t : {&q, &k, &v}) {
    if (t->producer >= 0 || !::yirage::backends::Is16BitFloat(t->dtype) || t->dtype != q.dtype ||
        t->shape.size() < 2) {
      return std::nullopt;
    }
  }
  if (p.axis != static_cast<int>(g.tensor(s_out).shape.size()) - 1) return std::nullopt;
  if (Lead(q.shape) != Lead(k.shape) || Lead(q.shape) != Lead(v.shape)) return std::nullopt;
  a.dtype = q.dtype;
  a.m = q.shape[q.shape.size() - 2];
  a.d = q.shape.back();
  a.n = a.transpose_k ? k.shape[k.shape.size() - 2] : k.shape.back();
  a.dv = v.shape.back();
  for (int64_t l : Lead(q.shape)) a.batch *= l;
  if (a.d % 16 != 0 || a.d > 128 || a.dv % 16 != 0 || a.dv > 128 || a.n % kTileN != 0) {
    return std::nullopt;
  }
  return a;
}

int AttentionSplits(const AttentionPattern& a, const CudaTarget& target, int requested) {
  const int64_t tiles = a.n / kTileN;
  if (requested > 0) {
    return tiles % requested == 0 ? requested : 1;
  }
  const int64_t blocks = (a.m + kTileM - 1) / kTileM * a.batch;
  int splits = 1;
  // Two blocks per SM (a block uses 128 threads and ~46 KB of shared memory
  // at D = 64, so several fit), keeping at least two tiles per split for the
  // copy pipeline.
  while (blocks * splits < 2 * target.sm_count && tiles % (2 * splits) == 0 &&
         tiles / (2 * splits) >= 2) {
    splits *= 2;
  }
  return splits;
}

int64_t AttentionWorkspaceBytes(const AttentionPattern& a, int splits) {
  return splits > 1 ? int64_t{splits} * a.batch * a.m * (a.dv + 2) * 4 : 0;
}

void EmitAttention(const AttentionPattern& a, int splits, const std::string& name, int q_arg,
                   int k_arg, int v_arg, int out_arg, const std::string& out_type,
                   int workspace_arg, std::string* source, std::vector<KernelLaunch>* launches) {
  const int64_t ns = a.n / splits;
  const std::vector<std::pair<std::string, std::string>> subst = {
      {"@NAME@", name},
      {"@T@", CTypeOf(a.dtype)},
      {"@OT@", splits > 1 ? std::string("float") : out_type},
      {"@B@", absl::StrCat(a.batch)},
      {"@M@", absl::StrCat(a.m)},
      {"@N@", absl::StrCat(a.n)},
      {"@D@", absl::StrCat(a.d)},
      {"@DV@", absl::StrCat(a.dv)},
      {"@NS@", absl::StrCat(ns)},
      {"@SPLITS@", absl::StrCat(splits)},
      {"@SPLIT_BEGIN@", splits > 1 ? "split * NS" : "0"},
      {"@KT@", a.transpose_k ? "1" : "0"},
      {"@SCALE@", CudaFloatLiteral(a.scale)},
  };
  *source += absl::StrReplaceAll(kAttentionKernel, subst);
  const int64_t ksize = a.transpose_k ? kTileN * (a.d + 8) : a.d * (kTileN + 8);
  const int64_t smem = (kTileM * (a.d + 8) + 2 * (ksize + kTileN * (a.dv + 8))) * 2;
  KernelLaunch main;
  main.name = name;
  main.grid[0] = (a.m + kTileM - 1) / kTileM;
  main.grid[1] = a.batch;
  main.grid[2] = splits;
  main.block = 128;
  main.smem_bytes = static_cast<int>(smem);
  main.args = {q_arg, k_arg, v_arg, splits > 1 ? workspace_arg : out_arg,
               splits > 1 ? workspace_arg : out_arg};
  launches->push_back(main);
  if (splits > 1) {
    std::vector<std::pair<std::string, std::string>> merge_subst = subst;
    merge_subst[2] = {"@OT@", out_type};
    *source += absl::StrReplaceAll(kMergeKernel, merge_subst);
    KernelLaunch merge;
    merge.name = name + "_merge";
    merge.grid[0] = (a.batch * a.m * a.dv + 255) / 256;
    merge.block = 256;
    merge.args = {workspace_arg, out_arg};
    launches->push_back(merge);
  }
}

}  // namespace yirage::backends::cuda
