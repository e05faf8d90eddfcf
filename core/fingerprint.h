// Finite-field fingerprints: a probabilistic proof that two graphs compute the
// same function, used to admit algebraically rewritten graphs (core/rewrite.h)
// before any of their plans is dispatched.
//
// Design. Every tensor element is a pair (x_p, x_q) with
//   q = 2305843009213688669 (a 61-bit prime) and p = 2q + 1 =
//   4611686018427377339 (a 62-bit prime), so q divides p - 1.
// Graph inputs are uniform random pairs; a real number r stands for the pair
// (r mod p, r mod q), which is a ring homomorphism from the rationals with
// denominators prime to pq. Attribute constants (eps, scalars, 1/n of a mean)
// are doubles, i.e. exact dyadic rationals, mapped exactly.
//  * add, sub, mul, neg, square, matmul, reduce_sum, reduce_mean, concat,
//    slice and pow by an integer scalar are exact in both components; div
//    multiplies by the modular inverse.
//  * exp(x) = omega^(x_q) mod p, with omega a random element of order q (a
//    random quadratic residue != 1 of Z_p*). Because x -> omega^(x mod q) is a
//    homomorphism from (Z, +) into Z_p*, exp(a + b) = exp(a) * exp(b) holds
//    exactly: softmax(S) == exp(S - m) / rowsum(exp(S - m)) for ANY row
//    constant m, which is what deferred softmax division relies on.
//  * sqrt(x) is the canonical square root (the smaller of +-x^((p+1)/4)) when
//    x_p is a quadratic residue, otherwise an uninterpreted function of x_p;
//    rsqrt(x) = 1 / sqrt(x).
//  * silu, gelu, sigmoid, tanh, log, abs, relu, maximum, minimum, reduce_max
//    and pow by a non-integer or tensor exponent have no exact field meaning
//    and are uninterpreted: a keyed 64-bit hash (fresh key per trial) of the
//    op, its attributes and its arguments' p-components (reduce_max: of the
//    whole row in order; maximum/minimum: of the unordered pair).
//  * rms_norm, layer_norm and softmax are evaluated as their primitive
//    expansions (core/rewrite.h), so an expanded graph fingerprints equal to
//    the compact one.
// The q-components only feed exponents of exp; outputs are compared on their
// p-components, element by element, in every trial.
//
// What a pass proves. Two graphs that compute the same real function agree in
// every trial whenever their rewrites are field identities (true of every
// rewrite in core/rewrite.h). Uninterpreted functions make the check
// conservative: two graphs match only if they apply each such function to
// fingerprint-equal arguments, so an identity of silu or max (max(a, b) ==
// max(b, a) aside) is never proved, while a graph that applies silu to the
// wrong tensor, or gelu instead of silu, is rejected. A pass does not prove
// numerical agreement: an exact identity can still lose precision in floating
// point (e.g. one-pass variance); the numeric check on the device catches that.
//
// False-pass probability. In the model where every exp, sqrt and
// uninterpreted application yields a fresh uniformly random value unless its
// argument is fingerprint-equal to another application's (random-oracle
// model), each output element of a graph is a rational function N/D of the
// inputs and these fresh values, and we track bounds n(t), d(t) on the total
// degrees of N and D per tensor (inputs (1, 0); mul adds; add/sub/div cross
// multiply; a sum of K terms (matmul, reduce) gives (n + (K-1)d, Kd); each
// exp/sqrt/uninterpreted result is a fresh variable (1, 0)). If the graphs
// compute different functions, then in one trial they agree on every output
// with probability at most
//     eps = (D_out + D_den + A^2 * D_arg / 2) / q
// where D_out = max over outputs of n_f + d_g + n_g + d_f (Schwartz-Zippel on
// the numerator of f - g, over a sample space of size >= q), D_den = the sum
// of d(t) * elements(t) over both graphs (some denominator vanishing), A = the
// number of exp/sqrt/uninterpreted element applications in both graphs and
// D_arg the largest degree of their arguments (two applications receiving
// equal arguments by accident). Trials use independent inputs, omega and hash
// keys, so a wrong graph passes all T trials with probability at most eps^T.
// FingerprintResult::false_pass_bound reports exactly this number (clamped to
// [0, 1]); hash collisions of the 64-bit uninterpreted functions add at most
// A^2 / 2^64 per trial and are included in A^2 * D_arg / (2q) since q < 2^61.
// For the example graphs at full size with T = 3 the bound ranges from
// 1.1e-19 (attention: ~2M exp and max applications) to 1.8e-53
// (low_rank_projection); the rewrite search fingerprints graphs above 1e8
// modular operations per trial on shape-reduced instances (core/rewrite.h
// ReduceShapes) and reports their (smaller) bound.
//
// Cost. Each trial evaluates the reference once (Create); a candidate
// reuses every subexpression it shares with graphs evaluated before (equal
// structural hashes), and evaluates op(slice(x)) as slice(op(x)) when op(x)
// is cached, for elementwise ops and a matmul's row and column axes (exact:
// slicing commutes with them), so attention split over key blocks reuses the
// original scores. Trials run in parallel, and so do the rows of large
// matmuls (contiguous dot products, one Montgomery reduction per four
// products).
#ifndef YIRAGE_CORE_FINGERPRINT_H_
#define YIRAGE_CORE_FINGERPRINT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/graph.h"

namespace yirage::core {

inline constexpr uint64_t kFingerprintQ = 2305843009213688669ull;
inline constexpr uint64_t kFingerprintP = 4611686018427377339ull;  // 2q + 1

struct FingerprintOptions {
  int trials = 3;
  uint64_t seed = 0x5eed5eedull;
};

struct FingerprintResult {
  bool equivalent = false;
  int trials = 0;
  double false_pass_bound = 1.0;  // eps^T from the file comment
  double per_trial_bound = 1.0;   // eps
  std::string message;            // why not equivalent
};

// Runs the reference graph once per trial and checks candidates against it.
// Subexpressions shared between graphs (equal structural hashes, see
// core/graph_hash.h) are evaluated once per trial and cached.
class Fingerprinter {
 public:
  static absl::StatusOr<std::unique_ptr<Fingerprinter>> Create(const Graph& reference,
                                                               const FingerprintOptions& options);
  ~Fingerprinter();

  // Thread-safe. The candidate must have the reference's signature
  // (CheckSameSignature); otherwise the result says why it is not equivalent.
  FingerprintResult Check(const Graph& candidate) const;

  // Number of Check calls so far.
  int64_t checks() const { return checks_.load(); }

  struct Trial;
  struct GraphAnalysisHolder;

 private:
  Fingerprinter() = default;
  std::shared_ptr<const Graph> reference_;
  std::shared_ptr<const GraphAnalysisHolder> analysis_;
  FingerprintOptions options_;
  std::vector<std::unique_ptr<Trial>> trials_;
  mutable std::atomic<int64_t> checks_{0};
};

// One-shot convenience: Create(a) then Check(b).
FingerprintResult CheckFingerprintEquivalent(const Graph& a, const Graph& b,
                                             const FingerprintOptions& options = {});

}  // namespace yirage::core

#endif  // YIRAGE_CORE_FINGERPRINT_H_
