// The CUDA backend's kernel families and the points of their schedule spaces
// on one target (what `describe` reports: yirage.v1.BackendKernels). The
// search plans only these (core/candidate_generator.h); the code generator
// emits a family's kernel for a kernel whose schedule carries the family's
// knobs, and refuses knobs it cannot run.
//
// A new family: its pattern (core/fused_pattern.h), limits and points here,
// its planner and emitter beside the others, its dispatch in cuda_codegen.cc.
#ifndef YIRAGE_BACKENDS_CUDA_CUDA_FAMILIES_H_
#define YIRAGE_BACKENDS_CUDA_CUDA_FAMILIES_H_

#include "backends/cuda/cuda_codegen.h"
#include "yirage/v1/backend.pb.h"

namespace yirage::backends::cuda {

// Everything the backend runs on `target`: row kernels, cuBLASLt library
// kernels, and (sm_80 and later) the streamed-matmul and attention families.
yirage::v1::BackendKernels DescribeKernels(const CudaTarget& target);

// The chains the streamed-matmul kernel takes (cuda_streamed_matmul.h) and
// those of its weights-to-registers and wgmma forms.
yirage::v1::MatchLimits StreamedMatmulLimits();
yirage::v1::MatchLimits StreamedRegistersLimits();
yirage::v1::MatchLimits StreamedWgmmaLimits();

// The chains the fused attention kernel takes (cuda_attention.h), and those
// of its warpgroup (wgmma) form.
yirage::v1::MatchLimits AttentionLimits();
yirage::v1::MatchLimits AttentionWgmmaLimits();
// The prefill form's chains (PlanAttention's prefill): D and DV multiples of
// 64 up to 128 (up to 256 in 64-key tiles of at most 128 rows), K given as
// [.., N, D], at least 64 query rows; the warp-specialized form's keys in
// whole tiles of `key_tile`, D = DV up to 128.
yirage::v1::MatchLimits AttentionPrefillLimits(int key_tile, int rows, bool warp_specialized);

}  // namespace yirage::backends::cuda

#endif  // YIRAGE_BACKENDS_CUDA_CUDA_FAMILIES_H_
