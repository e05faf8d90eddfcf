// Evaluates one leased batch on a backend: seeded inputs and the float64
// reference, one compile for the batch's plans, then per candidate: run,
// compare every output, and time the ones that match. The baseline plan is
// timed in the same batch so speedups compare like with like.
#ifndef YIRAGE_WORKERS_BATCH_EVALUATOR_H_
#define YIRAGE_WORKERS_BATCH_EVALUATOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "backends/backend_api.h"
#include "core/graph.h"
#include "core/graph_hash.h"
#include "core/tensor.h"
#include "workers/backend_library.h"
#include "yirage/v1/worker.pb.h"

namespace yirage::worker {

class BatchEvaluator {
 public:
  struct Callbacks {
    // Called before a candidate (or the baseline) starts running; the
    // scheduler blames that candidate if the worker dies before the next call.
    std::function<void(int64_t candidate_id)> on_start;
    // Called once per batch candidate with its final result.
    std::function<void(const yirage::v1::CandidateResult&)> on_result;
    // Polled between candidates; true stops the batch early.
    std::function<bool()> should_stop;
  };

  // REQUIRES: backend outlives the evaluator.
  BatchEvaluator(BackendLibrary* backend, const YirageTimingOptions& timing)
      : backend_(backend), timing_(timing) {}

  // Every candidate of the batch gets exactly one on_result unless
  // should_stop cut the batch short. Errors of single candidates are results,
  // not a failed status. Returns Aborted (after reporting the candidate that
  // caused it) when the device was lost: the process must restart.
  // Thread-safe, but meant for one batch at a time.
  absl::Status Evaluate(const yirage::v1::Batch& batch, const Callbacks& callbacks);

  // How many times inputs and the reference were computed (not reused).
  int64_t references_computed() const ABSL_LOCKS_EXCLUDED(mu_);
  // How many candidate results were taken from an earlier candidate of the
  // same job whose plan runs the same code (CompiledPlan.kernel_key).
  int64_t results_reused() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A batch's seeded inputs (encoded for the device) and float64 reference
  // outputs. The scheduler leases a job's candidates in several batches with
  // one graph and seed, and batches of several jobs interleave, so the last
  // kKeptReferences are kept: the reference of a large GEMM costs seconds,
  // and no job computes its reference twice on one worker.
  struct PreparedKey {
    core::Hash128 graph;  // core::CanonicalGraphHash
    uint64_t seed = 0;
    bool operator==(const PreparedKey&) const = default;
  };
  struct PreparedInputs {
    PreparedKey key;
    std::vector<core::HostTensor> reference;
    std::vector<std::vector<uint8_t>> input_bytes;
    std::vector<const void*> input_pointers;
  };
  absl::StatusOr<std::shared_ptr<const PreparedInputs>> Prepare(const yirage::v1::Batch& batch,
                                                                const core::Graph& graph);

  // A result of one job's plan, by the backend's kernel key: a later plan of
  // the job with the same key (the same code, another schedule the backend
  // runs alike) takes it instead of being run and timed again. Only
  // VERIFIED and MISMATCH results are kept; the last kKeptResults.
  struct KeptResult {
    std::string job_id;
    std::string kernel_key;
    yirage::v1::CandidateResult result;
  };
  std::optional<yirage::v1::CandidateResult> FindResult(const std::string& job_id,
                                                        const std::string& kernel_key) const
      ABSL_LOCKS_EXCLUDED(mu_);
  void KeepResult(const std::string& job_id, const std::string& kernel_key,
                  const yirage::v1::CandidateResult& result) ABSL_LOCKS_EXCLUDED(mu_);

  BackendLibrary* const backend_;
  const YirageTimingOptions timing_;
  mutable absl::Mutex mu_;
  static constexpr size_t kKeptReferences = 4;
  // Most recently used first.
  std::vector<std::shared_ptr<const PreparedInputs>> kept_ ABSL_GUARDED_BY(mu_);
  int64_t references_computed_ ABSL_GUARDED_BY(mu_) = 0;
  static constexpr size_t kKeptResults = 64;
  std::deque<KeptResult> results_ ABSL_GUARDED_BY(mu_);  // newest last
  int64_t results_reused_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace yirage::worker

#endif  // YIRAGE_WORKERS_BATCH_EVALUATOR_H_
