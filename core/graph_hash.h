// Canonical structural hashes of graphs and of the tensors in them.
//
// A tensor's hash depends only on what it computes, not on names or on the
// order the ops are listed in: a graph input hashes its position, shape and
// dtype; an op hashes its type, its normalized attributes and its operands'
// hashes (sorted for the commutative ops add, mul, maximum and minimum). The
// graph's hash combines its outputs' hashes in order. Two graphs with equal
// hashes compute the same expression DAG (up to renaming and commutation), so
// the rewrite search explores each distinct graph once. Hashes are 128 bits;
// a collision between two of n distinct graphs has probability about
// n^2 / 2^129.
#ifndef YIRAGE_CORE_GRAPH_HASH_H_
#define YIRAGE_CORE_GRAPH_HASH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/graph.h"

namespace yirage::core {

struct Hash128 {
  uint64_t hi = 0;
  uint64_t lo = 0;
  bool operator==(const Hash128&) const = default;
  auto operator<=>(const Hash128&) const = default;
};

struct Hash128Hasher {
  size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.hi ^ (h.lo * 31)); }
};

// One hash per tensor id (see the file comment).
std::vector<Hash128> TensorHashes(const Graph& graph);

// The hash TensorHashes gives the result of `op` when its operands hash to
// `operands` (in op.inputs order): lets a caller name the result of an op
// applied to other operands than the graph's (core/fingerprint.cc looks up
// op(x) to evaluate op(slice(x)) as slice(op(x))).
Hash128 OpHash(const OpInfo& op, std::vector<Hash128> operands);

// The hash of the whole graph (its outputs, in order).
Hash128 CanonicalGraphHash(const Graph& graph);

// 32 hex digits.
std::string HashToString(const Hash128& hash);

// Mixes 64-bit words into a hash (splitmix64 finalizer in two lanes).
Hash128 MixHash(const Hash128& seed, uint64_t word);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_GRAPH_HASH_H_
