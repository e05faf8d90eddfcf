#include "backends/cuda/cuda_attention.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace yirage::backends::cuda {
namespace {

using core::Graph;
using core::OpInfo;
using core::OpType;
using core::TensorInfo;

constexpr int kTileM = 64;  // query rows per block (16 per warp, 4 warps)
constexpr int kTileN = 64;  // keys per tile

bool Is16(yirage::v1::DType t) { return t == yirage::v1::FLOAT16 || t == yirage::v1::BFLOAT16; }

std::vector<int64_t> Lead(const std::vector<int64_t>& shape) {
  return std::vector<int64_t>(shape.begin(), shape.end() - 2);
}

// The kernel template; @NAME@-style placeholders are replaced below.
constexpr char kAttentionKernel[] = R"(
// attention: B=@B@ M=@M@ N=@N@ D=@D@ DV=@DV@, @SPLITS@ key split(s) of @NS@ keys
extern "C" __global__ void __launch_bounds__(128) @NAME@(const @T@* __restrict__ q,
    const @T@* __restrict__ k, const @T@* __restrict__ v, @OT@* __restrict__ o,
    float* __restrict__ ws) {
  using namespace nvcuda;
  typedef @T@ T;
  constexpr int M = @M@, N = @N@, D = @D@, DV = @DV@, NS = @NS@, BM = 64, BN = 64;
  constexpr int LQ = D + 8, LV = DV + 8, LS = BN + 4, LP = BN + 8, LO = DV + 4;
  constexpr int LK = @KT@ ? D + 8 : BN + 8;
  constexpr int KSIZE = @KT@ ? BN * (D + 8) : D * (BN + 8);
  extern __shared__ __align__(128) unsigned char yr_smb[];
  T* const sq = reinterpret_cast<T*>(yr_smb);
  T* const sk = sq + BM * LQ;
  T* const sv = sk + KSIZE;
  float* const ss = reinterpret_cast<float*>(sv + BN * LV);
  T* const sp = reinterpret_cast<T*>(ss + 4 * 16 * LS);
  float* const so = reinterpret_cast<float*>(sp + 4 * 16 * LP);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int m0 = blockIdx.x * BM, b = blockIdx.y, split = blockIdx.z;
  (void)ws; (void)split;
  const T* const qb = q + ((i64)b * M + m0) * D;
  const T* const kb = k + (i64)b * D * N;
  const T* const vb = v + (i64)b * N * DV;
  for (int x = tid; x < BM * D / 8; x += 128) {
    const int r = x / (D / 8), c = (x % (D / 8)) * 8;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (m0 + r < M) val = *reinterpret_cast<const uint4*>(qb + (i64)r * D + c);
    *reinterpret_cast<uint4*>(sq + r * LQ + c) = val;
  }
  float* const ss_w = ss + warp * 16 * LS;
  T* const sp_w = sp + warp * 16 * LP;
  float* const so_w = so + warp * 16 * LO;
  for (int x = lane; x < 16 * DV; x += 32) so_w[(x / DV) * LO + x % DV] = 0.0f;
  const int row = lane >> 1, half = lane & 1;  // two lanes per query row
  float m_run = -__int_as_float(0x7f800000), l_run = 0.0f;
  const int key0 = @SPLIT_BEGIN@;
  for (int n0 = key0; n0 < key0 + NS; n0 += BN) {
    __syncthreads();  // the previous tile is consumed
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
    yr_cp_async_wait<0>();
    __syncthreads();
    // S = Q K for this warp's 16 rows.
#pragma unroll
    for (int j = 0; j < BN / 16; ++j) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::load_matrix_sync(fa, sq + warp * 16 * LQ + kk * 16, LQ);
#if @KT@
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
        wmma::load_matrix_sync(fb, sk + j * 16 * LK + kk * 16, LK);
#else
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
        wmma::load_matrix_sync(fb, sk + kk * 16 * LK + j * 16, LK);
#endif
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(ss_w + j * 16, acc, LS, wmma::mem_row_major);
    }
    __syncwarp();
    // Online softmax over this tile: new row max, rescale factor, P.
    const float* srow = ss_w + row * LS + half * (BN / 2);
    float tmax = -__int_as_float(0x7f800000);
#pragma unroll 8
    for (int c = 0; c < BN / 2; ++c) tmax = yr_max(tmax, srow[c] * @SCALE@);
    tmax = yr_max(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
    const float m_new = yr_max(m_run, tmax);
    const float alpha = expf(m_run - m_new);
    float psum = 0.0f;
    T* const prow = sp_w + row * LP + half * (BN / 2);
#pragma unroll 8
    for (int c = 0; c < BN / 2; ++c) {
      const float p = expf(srow[c] * @SCALE@ - m_new);
      psum += p;
      yr_sth(prow + c, p);
    }
    psum += __shfl_xor_sync(0xffffffffu, psum, 1);
    l_run = l_run * alpha + psum;
    m_run = m_new;
    float* const orow = so_w + row * LO + half * (DV / 2);
#pragma unroll 8
    for (int c = 0; c < DV / 2; ++c) orow[c] *= alpha;
    __syncwarp();
    // O += P V.
#pragma unroll
    for (int j = 0; j < DV / 16; ++j) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, so_w + j * 16, LO, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::load_matrix_sync(fa, sp_w + kk * 16, LP);
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
        wmma::load_matrix_sync(fb, sv + kk * 16 * LV + j * 16, LV);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(so_w + j * 16, acc, LO, wmma::mem_row_major);
    }
    __syncwarp();
  }
  const int gm = m0 + warp * 16 + row;
  if (gm >= M) return;
  const float* const orow = so_w + row * LO + half * (DV / 2);
#if @SPLITS@ == 1
  const float inv = 1.0f / l_run;
  @OT@* const out = o + ((i64)b * M + gm) * DV + half * (DV / 2);
  for (int c = 0; c < DV / 2; ++c) yr_st(out, c, orow[c] * inv);
#else
  float* const w = ws + (((i64)split * @B@ + b) * M + gm) * (DV + 2);
  for (int c = 0; c < DV / 2; ++c) w[half * (DV / 2) + c] = orow[c];
  if (half == 0) {
    w[DV] = m_run;
    w[DV + 1] = l_run;
  }
#endif
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
    if (t->producer >= 0 || !Is16(t->dtype) || t->dtype != q.dtype || t->shape.size() < 2) {
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
  while (blocks * splits < target.sm_count && tiles % (2 * splits) == 0) splits *= 2;
  return splits;
}

int64_t AttentionWorkspaceBytes(const AttentionPattern& a, int splits) {
  return splits > 1 ? int64_t{splits} * a.batch * a.m * (a.dv + 2) * 4 : 0;
}

void EmitAttention(const AttentionPattern& a, int splits, const std::string& name, int q_arg,
                   int k_arg, int v_arg, int out_arg, const std::string& out_type,
                   int workspace_arg, std::string* source, std::vector<KernelLaunch>* launches) {
  const int64_t ns = a.n / splits;
  std::string scale = absl::StrFormat("%.9g", a.scale);
  if (scale.find_first_of(".eE") == std::string::npos) scale += ".0";
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
      {"@SCALE@", absl::StrCat("(", scale, "f)")},
  };
  *source += absl::StrReplaceAll(kAttentionKernel, subst);
  const int64_t ksize = a.transpose_k ? kTileN * (a.d + 8) : a.d * (kTileN + 8);
  const int64_t smem = (kTileM * (a.d + 8) + ksize + kTileN * (a.dv + 8)) * 2 +
                       4 * 16 * (kTileN + 4) * 4 + 4 * 16 * (kTileN + 8) * 2 +
                       4 * 16 * (a.dv + 4) * 4;
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
