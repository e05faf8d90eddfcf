#include "workers/batch_evaluator.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/graph.h"
#include "core/graph_hash.h"
#include "core/tensor.h"
#include "spdlog/spdlog.h"

namespace yirage::worker {
namespace {

using yirage::v1::CandidateResult;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The q-quantile of `v` (linear between order statistics); 0 when empty.
double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (at - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

// Output buffers for one run, in graph output order.
struct OutputBuffers {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<void*> pointers;
};

OutputBuffers MakeOutputs(const core::Graph& graph) {
  OutputBuffers out;
  for (int id : graph.outputs()) {
    const auto& t = graph.tensor(id);
    // Filled with a NaN-ish pattern so an output the kernel never writes
    // cannot pass by accident.
    out.bytes.emplace_back(t.num_elements() * core::DTypeSize(t.dtype), 0xFF);
  }
  for (auto& b : out.bytes) out.pointers.push_back(b.data());
  return out;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const BatchEvaluator::PreparedInputs>> BatchEvaluator::Prepare(
    const yirage::v1::Batch& batch, const core::Graph& graph) {
  // The inputs and the reference depend on the graph's structure (not its
  // names) and the seed: the canonical hash says when they are the same.
  const PreparedKey key{core::CanonicalGraphHash(graph), batch.seed()};
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < kept_.size(); ++i) {
      if (kept_[i]->key != key) continue;
      std::shared_ptr<const PreparedInputs> hit = kept_[i];
      kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(i));
      kept_.insert(kept_.begin(), hit);
      return hit;
    }
  }
  auto prepared = std::make_shared<PreparedInputs>();
  prepared->key = key;
  const auto start = std::chrono::steady_clock::now();
  std::vector<core::HostTensor> inputs = core::MakeRandomInputs(graph, batch.seed());
  const double input_seconds = SecondsSince(start);
  absl::StatusOr<std::vector<core::HostTensor>> reference = core::EvaluateReference(graph, inputs);
  spdlog::info("batch {}: inputs {:.2f} s, float64 reference {:.2f} s", batch.batch_id(),
               input_seconds, SecondsSince(start) - input_seconds);
  if (!reference.ok()) {
    return absl::Status(reference.status().code(),
                        absl::StrCat("reference: ", reference.status().message()));
  }
  prepared->reference = *std::move(reference);
  for (int i = 0; i < graph.num_inputs(); ++i) {
    prepared->input_bytes.push_back(core::EncodeTensor(inputs[i], graph.tensor(i).dtype));
  }
  for (auto& b : prepared->input_bytes) prepared->input_pointers.push_back(b.data());
  absl::MutexLock lock(&mu_);
  kept_.insert(kept_.begin(), prepared);
  if (kept_.size() > kKeptReferences) kept_.resize(kKeptReferences);
  ++references_computed_;
  return prepared;
}

int64_t BatchEvaluator::references_computed() const {
  absl::MutexLock lock(&mu_);
  return references_computed_;
}

int64_t BatchEvaluator::results_reused() const {
  absl::MutexLock lock(&mu_);
  return results_reused_;
}

std::optional<CandidateResult> BatchEvaluator::FindResult(const std::string& job_id,
                                                          const std::string& kernel_key) const {
  if (kernel_key.empty()) return std::nullopt;
  absl::MutexLock lock(&mu_);
  for (auto it = results_.rbegin(); it != results_.rend(); ++it) {
    if (it->job_id == job_id && it->kernel_key == kernel_key) return it->result;
  }
  return std::nullopt;
}

void BatchEvaluator::KeepResult(const std::string& job_id, const std::string& kernel_key,
                                const CandidateResult& result) {
  if (kernel_key.empty()) return;
  if (result.status() != yirage::v1::VERIFIED && result.status() != yirage::v1::MISMATCH) return;
  absl::MutexLock lock(&mu_);
  std::erase_if(results_, [&](const KeptResult& k) {
    return k.job_id == job_id && k.kernel_key == kernel_key;
  });
  results_.push_back({job_id, kernel_key, result});
  results_.back().result.clear_source();
  while (results_.size() > kKeptResults) results_.pop_front();
}

absl::Status BatchEvaluator::Evaluate(const yirage::v1::Batch& batch, const Callbacks& callbacks) {
  auto fail_all = [&](const std::string& error) {
    for (const auto& c : batch.candidates()) {
      CandidateResult r;
      r.set_candidate_id(c.candidate_id());
      r.set_status(yirage::v1::ERROR);
      r.set_error(error);
      callbacks.on_result(r);
    }
    return absl::OkStatus();
  };
  auto graph = core::Graph::FromProto(batch.graph());
  if (!graph.ok()) return fail_all(absl::StrCat("graph: ", std::string(graph.status().message())));
  core::Tolerance tolerance{batch.tolerance().rtol(), batch.tolerance().atol()};

  absl::StatusOr<std::shared_ptr<const PreparedInputs>> prepared = Prepare(batch, *graph);
  if (!prepared.ok()) return fail_all(std::string(prepared.status().message()));
  const std::vector<core::HostTensor>* reference = &(*prepared)->reference;
  const std::vector<const void*>& input_pointers = (*prepared)->input_pointers;

  // Plan 0 is the baseline; plan i+1 is candidate i.
  yirage::v1::CompileRequest request;
  *request.mutable_graph() = batch.graph();
  // The job's tolerance (its override, else the graph file's, else the
  // default), which backends read to choose reduced-precision forms (TF32).
  *request.mutable_graph()->mutable_tolerance() = batch.tolerance();
  *request.add_plans() = batch.baseline();
  for (const auto& c : batch.candidates()) *request.add_plans() = c.plan();
  auto compile_start = std::chrono::steady_clock::now();
  yirage::v1::CompileResponse compiled;
  auto module = backend_->Compile(request, &compiled);
  if (!module.ok()) return fail_all(std::string(module.status().message()));
  const double compile_seconds = SecondsSince(compile_start);
  spdlog::info("batch {}: compiled {} plans in {:.2f} s", batch.batch_id(), request.plans_size(),
               compile_seconds);
  double compile_share = compile_seconds / request.plans_size();

  // Machines are shared and noisy, so a candidate is never timed alone: its
  // runs are interleaved with the baseline's in kTimingRounds rounds, and the
  // speedup compares the medians of the two measured side by side.
  constexpr int kTimingRounds = 3;
  YirageTimingOptions round_options = timing_;
  round_options.target_seconds = timing_.target_seconds / kTimingRounds;
  round_options.max_runs = std::max(1, timing_.max_runs / kTimingRounds);
  round_options.min_runs = std::max(1, timing_.min_runs / kTimingRounds);
  // Every plan is timed after a run that verified it on these same inputs,
  // and the outputs of the timed runs are not read: a GPU backend need not
  // copy either again for each round.
  round_options.reuse_io = 1;
  struct Times {
    double median_us = 0, iqr_us = 0, baseline_us = 0;
  };
  // Times plan `index` (and, unless it is the baseline, the baseline beside
  // it).
  auto time_plan = [&](int index, bool with_baseline, OutputBuffers* out) -> absl::StatusOr<Times> {
    std::vector<double> mine, base;
    for (int round = 0; round < kTimingRounds; ++round) {
      if (with_baseline) {
        // The baseline may write into `out`: it is not read after timing.
        auto t = (*module)->Time(0, input_pointers, out->pointers, round_options);
        if (!t.ok()) return t.status();
        base.push_back(t->median_us);
      }
      auto t = (*module)->Time(index, input_pointers, out->pointers, round_options);
      if (!t.ok()) return t.status();
      mine.push_back(t->median_us);
    }
    Times times{Quantile(mine, 0.5), Quantile(mine, 0.75) - Quantile(mine, 0.25), 0};
    times.baseline_us = with_baseline ? Quantile(base, 0.5) : times.median_us;
    return times;
  };

  absl::Status device_lost = absl::OkStatus();
  // Runs, verifies and (if it matches) times plan `index`.
  // `timed` false: verified, not timed (the final round times afterwards).
  auto evaluate = [&](int index, int64_t candidate_id, bool with_baseline, bool timed = true) {
    auto start = std::chrono::steady_clock::now();
    CandidateResult r;
    r.set_candidate_id(candidate_id);
    const auto& plan = compiled.plans(index);
    r.set_source(plan.source());
    if (plan.has_launch()) *r.mutable_launch() = plan.launch();
    if (!plan.ok()) {
      r.set_status(yirage::v1::ERROR);
      r.set_error(absl::StrCat("compile failed: ", plan.error()));
    } else {
      OutputBuffers out = MakeOutputs(*graph);
      const auto verify_start = std::chrono::steady_clock::now();
      if (auto s = (*module)->Run(index, input_pointers, out.pointers); !s.ok()) {
        r.set_status(yirage::v1::ERROR);
        r.set_error(absl::StrCat("run failed: ", std::string(s.message())));
        if (IsDeviceLost(s)) device_lost = s;
      } else {
        const std::vector<const void*> got(out.pointers.begin(), out.pointers.end());
        core::CompareResult cmp = core::CompareEncodedOutputs(*graph, *reference, got, tolerance);
        r.set_max_abs_error(cmp.max_abs_error);
        r.set_max_rel_error(cmp.max_rel_error);
        r.set_verify_seconds(SecondsSince(verify_start));
        if (!cmp.ok) {
          r.set_status(yirage::v1::MISMATCH);
          r.set_error(cmp.message);
        } else if (!timed) {
          r.set_status(yirage::v1::VERIFIED);
        } else {
          const auto time_start = std::chrono::steady_clock::now();
          auto times = time_plan(index, with_baseline, &out);
          r.set_time_seconds(SecondsSince(time_start));
          if (!times.ok()) {
            if (IsDeviceLost(times.status())) device_lost = times.status();
            r.set_status(yirage::v1::ERROR);
            r.set_error(absl::StrCat("timing failed: ", std::string(times.status().message())));
          } else {
            r.set_status(yirage::v1::VERIFIED);
            r.set_time_us(times->median_us);
            r.set_time_iqr_us(times->iqr_us);
            r.set_baseline_time_us(times->baseline_us);
          }
        }
      }
    }
    r.set_compile_seconds(compile_share);
    r.set_evaluation_seconds(compile_share + SecondsSince(start));
    return r;
  };

  if (batch.final_round()) {
    // Verify every plan, then time the verified ones with the baseline in
    // kFinalRounds rounds, each round every plan once (its order rotating
    // from round to round), so that load on the machine falls on all alike.
    constexpr int kFinalRounds = 7;
    callbacks.on_start(batch.baseline_candidate_id());
    CandidateResult base = evaluate(0, batch.baseline_candidate_id(), false, /*timed=*/false);
    if (!device_lost.ok()) return device_lost;
    if (base.status() != yirage::v1::VERIFIED) {
      return fail_all(absl::StrCat("final round: the baseline did not verify: ", base.error()));
    }
    std::vector<CandidateResult> results;
    std::vector<int> plans = {0};  // plan indexes timed: the baseline, then each verified
    std::vector<int> result_of = {-1};
    for (int i = 0; i < batch.candidates_size(); ++i) {
      if (callbacks.should_stop()) return absl::OkStatus();
      const int64_t id = batch.candidates(i).candidate_id();
      callbacks.on_start(id);
      results.push_back(evaluate(i + 1, id, false, /*timed=*/false));
      if (!device_lost.ok()) {
        callbacks.on_result(results.back());
        return device_lost;
      }
      if (results.back().status() == yirage::v1::VERIFIED) {
        plans.push_back(i + 1);
        result_of.push_back(i);
      }
    }
    std::vector<std::vector<double>> medians(plans.size());
    // One set of output buffers for every timed plan: timed runs' outputs
    // are not read (each plan was verified above).
    OutputBuffers timed_out = MakeOutputs(*graph);
    absl::Status timing = absl::OkStatus();
    const auto time_start = std::chrono::steady_clock::now();
    for (int round = 0; round < kFinalRounds && timing.ok(); ++round) {
      if (callbacks.should_stop()) return absl::OkStatus();
      for (size_t k = 0; k < plans.size() && timing.ok(); ++k) {
        const size_t p = (k + round) % plans.size();
        callbacks.on_start(p == 0 ? batch.baseline_candidate_id()
                                  : batch.candidates(result_of[p]).candidate_id());
        auto t = (*module)->Time(plans[p], input_pointers, timed_out.pointers, round_options);
        if (!t.ok()) {
          timing = t.status();
          if (IsDeviceLost(timing)) device_lost = timing;
          break;
        }
        medians[p].push_back(t->median_us);
      }
    }
    const double share = plans.size() > 1 ? SecondsSince(time_start) / (plans.size() - 1) : 0;
    const double baseline_us = Quantile(medians[0], 0.5);
    for (size_t p = 1; p < plans.size(); ++p) {
      CandidateResult& r = results[result_of[p]];
      r.set_time_seconds(share);
      r.set_evaluation_seconds(r.evaluation_seconds() + share);
      if (!timing.ok()) {
        r.set_status(yirage::v1::ERROR);
        r.set_error(absl::StrCat("final round: timing failed: ", std::string(timing.message())));
        continue;
      }
      r.set_time_us(Quantile(medians[p], 0.5));
      r.set_time_iqr_us(Quantile(medians[p], 0.75) - Quantile(medians[p], 0.25));
      r.set_baseline_time_us(baseline_us);
    }
    for (const CandidateResult& r : results) {
      spdlog::info("final round, candidate {}: {} {:.2f} us (IQR {:.2f}), baseline {:.2f} us{}{}",
                   r.candidate_id(), yirage::v1::CandidateStatus_Name(r.status()), r.time_us(),
                   r.time_iqr_us(), r.baseline_time_us(), r.error().empty() ? "" : " - ",
                   r.error().substr(0, 200));
      callbacks.on_result(r);
    }
    return device_lost;
  }
  callbacks.on_start(batch.baseline_candidate_id());
  CandidateResult baseline = evaluate(0, batch.baseline_candidate_id(), /*with_baseline=*/false);
  if (!device_lost.ok()) {
    // The baseline itself broke the device: nothing in this batch can run.
    if (batch.candidates_size() > 0 &&
        batch.candidates(0).candidate_id() == batch.baseline_candidate_id()) {
      callbacks.on_result(baseline);
    }
    return device_lost;
  }
  KeepResult(batch.job_id(), compiled.plans(0).kernel_key(), baseline);
  bool baseline_ok = baseline.status() == yirage::v1::VERIFIED;
  if (!baseline_ok) {
    spdlog::warn("batch {}: baseline did not verify ({}); speedups of this batch are unknown",
                 batch.batch_id(), baseline.error());
  }
  for (int i = 0; i < batch.candidates_size(); ++i) {
    if (callbacks.should_stop()) return absl::OkStatus();
    int64_t id = batch.candidates(i).candidate_id();
    CandidateResult r;
    const yirage::v1::CompiledPlan& plan = compiled.plans(i + 1);
    std::optional<CandidateResult> same;
    if (plan.ok()) same = FindResult(batch.job_id(), plan.kernel_key());
    if (id == batch.baseline_candidate_id()) {
      r = baseline;
    } else if (same.has_value()) {
      // The same code as an earlier candidate of the job: its result.
      r = *std::move(same);
      if (r.same_kernel_as() == 0) r.set_same_kernel_as(r.candidate_id());
      r.set_candidate_id(id);
      r.set_source(plan.source());
      if (plan.has_launch()) {
        *r.mutable_launch() = plan.launch();
      } else {
        r.clear_launch();
      }
      // Compiled, not run again: only the compile share is this candidate's.
      r.set_evaluation_seconds(compile_share);
      r.set_compile_seconds(compile_share);
      r.set_verify_seconds(0);
      r.set_time_seconds(0);
      absl::MutexLock lock(&mu_);
      ++results_reused_;
    } else {
      callbacks.on_start(id);
      r = evaluate(i + 1, id, baseline_ok);
      KeepResult(batch.job_id(), plan.kernel_key(), r);
    }
    if (!baseline_ok) r.set_baseline_time_us(0);
    spdlog::info("candidate {}: {} {:.1f} us (baseline beside it {:.1f} us){}{}{}", id,
                 yirage::v1::CandidateStatus_Name(r.status()), r.time_us(), r.baseline_time_us(),
                 r.same_kernel_as() != 0 ? absl::StrCat(", the result of candidate ",
                                                        r.same_kernel_as(), " (same kernel)")
                                         : "",
                 r.error().empty() ? "" : " - ", r.error().substr(0, 200));
    callbacks.on_result(r);
    if (!device_lost.ok()) return device_lost;
  }
  return absl::OkStatus();
}

}  // namespace yirage::worker
