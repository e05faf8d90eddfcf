#include "core/graph_hash.h"

#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"

namespace yirage::core {
namespace {

uint64_t Fmix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t Bits(double v) { return std::bit_cast<uint64_t>(v == 0 ? 0.0 : v); }  // -0 == +0

bool IsCommutative(OpType type) {
  return type == OpType::kAdd || type == OpType::kMul || type == OpType::kMaximum ||
         type == OpType::kMinimum;
}

}  // namespace

Hash128 MixHash(const Hash128& seed, uint64_t word) {
  Hash128 h;
  h.hi = Fmix(seed.hi ^ Fmix(word + 0x9e3779b97f4a7c15ull));
  h.lo = Fmix((seed.lo + 0x632be59bd9b4e019ull) ^ Fmix(word ^ 0xd1b54a32d192ed03ull));
  return h;
}

Hash128 OpHash(const OpInfo& op, std::vector<Hash128> operands) {
  Hash128 h = MixHash({0xabcd, 0xef01}, static_cast<uint64_t>(op.type));
  h = MixHash(h, static_cast<uint64_t>(op.axis));
  h = MixHash(h, op.keepdim ? 1 : 0);
  h = MixHash(h, Bits(op.eps));
  h = MixHash(h, op.has_scalar ? 1 : 0);
  h = MixHash(h, op.has_scalar ? Bits(op.scalar) : 0);
  h = MixHash(h, (op.transpose_b ? 2 : 0) | (op.gelu_tanh ? 1 : 0));
  h = MixHash(h, static_cast<uint64_t>(op.slice_start));
  h = MixHash(h, static_cast<uint64_t>(op.slice_end));
  if (IsCommutative(op.type)) std::sort(operands.begin(), operands.end());
  h = MixHash(h, operands.size());
  for (const Hash128& o : operands) h = MixHash(MixHash(h, o.hi), o.lo);
  return h;
}

std::vector<Hash128> TensorHashes(const Graph& graph) {
  std::vector<Hash128> hashes(graph.num_tensors());
  for (int i = 0; i < graph.num_inputs(); ++i) {
    Hash128 h = MixHash({0x1234, 0x5678}, static_cast<uint64_t>(i));
    const TensorInfo& t = graph.tensor(i);
    h = MixHash(h, static_cast<uint64_t>(t.dtype));
    for (int64_t d : t.shape) h = MixHash(h, static_cast<uint64_t>(d));
    hashes[i] = h;
  }
  for (const OpInfo& op : graph.ops()) {
    std::vector<Hash128> operands;
    for (int t : op.inputs) operands.push_back(hashes[t]);
    hashes[op.output] = OpHash(op, std::move(operands));
  }
  return hashes;
}

Hash128 CanonicalGraphHash(const Graph& graph) {
  const std::vector<Hash128> hashes = TensorHashes(graph);
  Hash128 h = MixHash({0x9876, 0x5432}, graph.outputs().size());
  for (int t : graph.outputs()) h = MixHash(MixHash(h, hashes[t].hi), hashes[t].lo);
  return h;
}

std::string HashToString(const Hash128& hash) {
  return absl::StrFormat("%016x%016x", hash.hi, hash.lo);
}

}  // namespace yirage::core
