// Algebraic rewrites of graphs, explored to a fixed point and admitted only
// when a finite-field fingerprint (core/fingerprint.h) proves them equivalent
// to the original graph. The candidate generator turns every admitted graph
// into plans (core/candidate_generator.h).
//
// Rules (each application rewrites one match site; names are what plans list
// in Plan.rewrites):
//  * expand_rms_norm: rms_norm(X[, w]) -> X * rsqrt(reduce_mean(X^2) + eps) [* w]
//  * expand_layer_norm: layer_norm(X[, w[, b]]) -> d = X - mean(X);
//    d * rsqrt(mean(d^2) + eps) [* w] [+ b]
//  * expand_softmax: softmax(S) -> e = exp(S - reduce_max(S)); e / reduce_sum(e)
//  * reorder_mul_chain: (a op1 b) op2 c -> (a op2 c) op1 b for op1, op2 in
//    {mul, div} (operands tensors or scalars), when a op1 b has no other use.
//  * scale_through_matmul: (A * r) @ B -> (A @ B) * r and (A / r) @ B ->
//    (A @ B) / r for a scalar or a per-row r ([..., M, 1]); A @ (B * c) ->
//    (A @ B) * c for a per-column c ([N] or [1, N]). With expand_rms_norm and
//    reorder_mul_chain this is deferred normalization:
//    (rms_norm(X) * G) @ W == ((X * G) @ W) * rsqrt(mean(X^2) + eps), the norm's
//    reduction running in the matmul's pass; with expand_softmax it is
//    deferred softmax division: softmax(S) @ V == (e @ V) / rowsum(e).
//  * shared_operand_matmul: X @ W1 and X @ W2 -> Z = X @ concat(W1, W2, -1),
//    slices of Z (gated MLP; LoRA's X @ W and X @ A).
//  * associate_matmul: (X @ A) @ B <-> X @ (A @ B) (2-d A and B), only in the
//    direction that lowers the flop count.
//  * factor_matmul_add: X @ W1 + X @ W2 -> X @ (W1 + W2) (and sub).
//  * one_pass_variance: mean((X - mean(X))^2) -> mean(X^2) - mean(X)^2, so the
//    two reductions of a layer_norm read X in one pass.
//  * split_key_axis: softmax(S) @ V with S = [scale *] (Q @ K) over n keys
//    (n even, >= 64) -> for blocks b of n/P keys (P = 2, and 4 when blocks
//    keep >= 32 keys): S_b = [scale *] (Q @ K_b) with K_b, V_b slices of K
//    and V along the key axis; m = maximum over b of reduce_max(S_b);
//    O = (sum_b exp(S_b - m) @ V_b) / (sum_b rowsum(exp(S_b - m))) -- the
//    block form of attention (flash attention's merge). The fingerprint
//    proves it for ANY row constant m: exp(x - m) evaluates to
//    omega^(x_q) * omega^(-m_q), so the factor omega^(-m_q) (max being
//    uninterpreted, m_q is an arbitrary per-row value) multiplies numerator
//    and denominator alike and cancels exactly, leaving the field value of
//    softmax(S) @ V. Using different m per block, or dropping a block's
//    denominator, leaves a factor that does not cancel and is rejected
//    (core/mutation_suite_test.cc).
//  * defer_layer_norm: layer_norm(X, g, b) @ W (norm over the last axis, g
//    and b vectors [K] or [1, K], W 2-d; without g, W not transposed) ->
//    ((X * g) @ W - mean(X) * (g @ W))
//    * rsqrt(mean((X - mean(X))^2) + eps) + b @ W. The identity is exact:
//    ((X - mu) * g) @ W = (X * g) @ W - mu * (g @ W) for a per-row mu, and a
//    per-row scale commutes with the matmul (a [K] vector v enters g @ W as
//    the [1, K] row v + 0 * W[0:1, 0:1], graphs having no reshape). The
//    statistics and the matmul
//    then read X in one pass, the subtraction and the scale run in the
//    epilogue, and g @ W, b @ W depend on weights only. Not reachable by
//    composing the rules above (no rule distributes a matmul over the mean
//    subtraction or the bias add). Numerically the subtraction can cancel
//    when |mean| >> std (like one_pass_variance); the device check decides.
//  * slice_through_concat: slice(concat(A_1..A_n, a), a, s, e) -> the
//    pieces of the A_i that [s, e) covers (one: a slice of it; several:
//    their concat); slice(concat(A_1..A_n, a), b != a, s, e) ->
//    concat(slice(A_1, b, s, e), ..., a). The slice then reads only what it
//    keeps (a split of a fused projection, a window of a joined sequence);
//    an input of the graph left unread is listed in unread_inputs.
//  * slice_through_elementwise: slice(f(X_1..X_n), a, s, e) for a unary or
//    binary elementwise f read only by the slice -> f(slice(X_1), ...),
//    each operand sliced along its own axis for a, except those that
//    broadcast along a (size 1 there, or of too few dims), which stay whole:
//    f runs on the window, and the slice reaches what it can narrow further
//    (a concat, an input read in part).
//  * squeeze_unit_dims: a graph without matmuls whose every tensor ends in
//    t size-1 dims -> the same graph without them (every layout the same;
//    CheckSameSignature compares layouts), so that an axis followed only by
//    size-1 dims is the last and row kernels take its norm, softmax or
//    reduction with the ops around it.
//  * merge_trailing_axes: a graph of concat and slice over one axis `a`
//    (and elementwise ops) whose every tensor has the same dims after `a`
//    -> the same graph with them merged into `a` (slice bounds scaled;
//    every layout the same), so that the copies are over the last axis,
//    which row kernels take (a concat of two [n, k] tensors over rows and
//    a window of it in one kernel).
//  * factor_out_of_reduction: reduce_sum / reduce_mean of x * w or x / w,
//    reduce_mean of x + w or x - w, where w is a scalar or
//    broadcasts to x without reaching the reduced axis -> reduce(x) op w:
//    the reduction reads x itself, and w applies to its smaller result (a
//    bias or scale before a pooling or a column sum costs no pass over x).
// Several reductions over the same rows (norm_transformer's two rms_norms)
// end up in one KERNEL_ROW kernel once expanded: the partitioner fuses them
// (asserted by core/rewrite_test.cc MultiReduction tests), so there is no
// separate multi-reduction rule.
#ifndef YIRAGE_CORE_REWRITE_H_
#define YIRAGE_CORE_REWRITE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/fingerprint.h"
#include "core/graph.h"
#include "core/graph_hash.h"
#include "yirage/v1/graph.pb.h"

namespace yirage::core {

struct RewriteRule {
  std::string name;
  // Every graph one application of the rule yields (one per match site). The
  // protos need not validate; those that fail Graph::FromProto are dropped.
  std::function<std::vector<yirage::v1::Graph>(const Graph&)> apply;
};

// The rules listed in the file comment.
const std::vector<RewriteRule>& DefaultRewriteRules();

struct RewriteOptions {
  int max_graphs = 64;               // distinct rewritten graphs fingerprinted, at most
  double time_budget_seconds = 5.0;  // 0 = no limit
  int threads = 0;                   // 0 = std::thread::hardware_concurrency()
  FingerprintOptions fingerprint;
  std::vector<RewriteRule> rules;  // empty = DefaultRewriteRules()
  // Fingerprinting costs FingerprintWork(graph) modular operations per
  // trial and graph; graphs above this are not rewritten (stats say so), and
  // rewritten graphs above twice this are not checked.
  double max_fingerprint_work = 1e8;
  // Graphs whose fingerprint costs more than this are fingerprinted on a
  // shape-reduced instance (ReduceShapes) with the least power-of-two factor
  // that brings the cost to this or below; 0 = never reduce. A graph that
  // cannot be reduced is fingerprinted at full size up to
  // max_fingerprint_work, and skipped above it. Equal to max_fingerprint_work
  // by default: every graph that can be fingerprinted at full size within the
  // budget is (a proof on the real shapes); only larger ones are reduced.
  double reduce_shapes_above_work = 1e8;
};

struct RewrittenGraph {
  std::shared_ptr<const Graph> graph;
  std::vector<std::string> rewrites;  // rule names, in application order
  Hash128 hash;
  FingerprintResult fingerprint;
  // What was fingerprinted when shapes were reduced (RewriteStats
  // shape_reduction > 1): `graph` with its dimensions divided; else null.
  std::shared_ptr<const Graph> checked_graph;
};

struct RewriteStats {
  int graphs_explored = 0;     // distinct graphs fingerprinted (original excluded)
  int rewrites_generated = 0;  // valid rewritten graphs produced by rules
  int duplicates = 0;          // of those, already seen (equal canonical hash)
  int rewrites_verified = 0;
  int rewrites_rejected = 0;  // failed the fingerprint: never explored or dispatched
  int64_t fingerprint_checks = 0;
  double seconds = 0;
  bool budget_exhausted = false;        // stopped by max_graphs or the time budget
  std::vector<std::string> rejections;  // "rule chain: reason", first few
  std::string skipped;                  // why no rewrite was tried, when none was
  int64_t shape_reduction = 1;  // fingerprints ran with dimensions divided by this (ReduceShapes)
};

// Modular multiplications (and steps of like cost) one fingerprint trial of
// `graph` costs: matmuls M*N*K, ring ops one an element, the others as
// core/fingerprint.cc evaluates them (exp about 10 an element, a square root
// or an inverse about 100, hashed ops 3, norms and softmax their
// expansions).
double FingerprintWork(const Graph& graph);

// Breadth-first search from `graph`: applies every rule at every site of
// every verified graph, deduplicates by canonical hash, fingerprints new
// graphs against `graph` (in parallel), and continues from the verified ones
// until no new graph appears or the budget is spent. Returns the verified
// graphs (not the original), in discovery order.
absl::StatusOr<std::vector<RewrittenGraph>> ExploreRewrites(const Graph& graph,
                                                            const RewriteOptions& options,
                                                            RewriteStats* stats);

// `graph` with every dimension d that `factor` divides with a quotient >= 2
// replaced by d / factor (input shapes, and the bounds of slices of such
// axes, which must then be multiples of factor); every other dimension kept.
// Fails (FailedPrecondition, saying why) unless every tensor's shape is that
// map applied to its original shape: no dimension becomes 1, equal
// dimensions stay equal, and slices and concats line up.
//
// When fingerprinting reduced instances is sound. Let G and G' be graphs
// built from the ops of core/graph.h, and call them shape-uniform when their
// only attributes that depend on dimension sizes are slice bounds (no scalar
// encodes a size, e.g. 1/n written out instead of reduce_mean). Every op is
// then defined by one formula for all sizes (elementwise maps, sums and
// maxima over a whole axis, matmuls, concatenation, slicing at bounds that
// scale with their axis), so G and G' denote expressions over symbolic
// dimensions, and the map above instantiates both at smaller values of the
// same symbols. Each rule in this file rewrites by an identity that holds for
// all values of the symbols meeting its structural preconditions (equal
// dims, broadcast 1s, slice bounds matching concat layouts), which the
// map preserves, and introduces no size-dependent constants; so a correctly
// implemented rule yields a pair equivalent at every size, reduced or not.
// What the reduced fingerprint checks is the rule's implementation: a
// shape-uniform wrong rewrite (wrong operand, op, axis, swapped or shifted
// slice) stays wrong at the reduced size, because the map keeps every axis's
// block structure (slice bounds scale with their axis) and only shortens
// blocks of length >= 2 * factor to length >= 2. That last step is an
// argument, not a theorem: a bug visible only at sizes the reduced instance
// does not have would pass. The reported false-pass bound is the reduced
// instance's. It is NOT sound for arbitrary graphs: a hand-written G' using
// reduce_sum * (1/4096) for a mean over 4096 is wrong at full size and
// right at the reduced one (or vice versa). ExploreRewrites only applies it to graphs its rules
// produced; ValidatePlan and CheckFingerprintEquivalent always check full size.
absl::StatusOr<Graph> ReduceShapes(const Graph& graph, int64_t factor);

// Helpers shared by the rules and by tests that build wrong rewrites.
namespace rewrite_util {

yirage::v1::OpNode MakeOp(const std::string& name, const std::string& op,
                          const std::vector<std::string>& inputs);
void SetInt(yirage::v1::OpNode* op, const std::string& key, int64_t v);
void SetFloat(yirage::v1::OpNode* op, const std::string& key, double v);
void SetBool(yirage::v1::OpNode* op, const std::string& key, bool v);

// A name not used by the graph nor in `taken`, derived from `base`; added to `taken`.
std::string FreshName(const Graph& graph, const std::string& base, std::vector<std::string>* taken);

// graph.proto() with op `op_index` replaced by `replacement` (inserted where
// it was; the replacement's last op should carry the replaced op's name) and
// ops whose results became unused removed; graph inputs that no op reads any
// more are added to unread_inputs.
yirage::v1::Graph ReplaceOps(const Graph& graph, const std::vector<int>& op_indices,
                             const std::vector<yirage::v1::OpNode>& replacement);

}  // namespace rewrite_util

}  // namespace yirage::core

#endif  // YIRAGE_CORE_REWRITE_H_
