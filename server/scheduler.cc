#include "server/scheduler.h"

#include <chrono>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rpc_util.h"
#include "core/candidate_generator.h"
#include "core/chip.h"
#include "core/chip_search.h"
#include "core/graph.h"
#include "core/status_macros.h"
#include "core/tensor.h"
#include "spdlog/spdlog.h"

namespace yirage::server {
namespace {

// Backends a worker can serve. A job for a backend with no worker connected
// waits in the queue (a worker may join later); the job's message says so
// while it waits (JobStore::GetJob) and the server logs it.
const char* const kKnownBackends[] = {"cpu", "cuda", "hip", "level_zero"};

}  // namespace

Scheduler::Scheduler(const ServerOptions& options, JobStore* store, LeaseStore* leases,
                     WorkerStore* workers, Metrics* metrics, ChipStore* chips)
    : options_(options),
      store_(store),
      leases_(leases),
      workers_(workers),
      metrics_(metrics),
      chips_(chips) {}

Scheduler::~Scheduler() { StopMaintenance(); }

absl::StatusOr<yirage::v1::SubmitJobResponse> Scheduler::Submit(
    const yirage::v1::SubmitJobRequest& input, const std::string& owner) {
  yirage::v1::SubmitJobRequest request = input;
  auto reject = [&](absl::Status status) {
    if (metrics_) metrics_->JobRejected();
    spdlog::info("rejected job for graph '{}': {}",
                 absl::CHexEscape(request.graph().name().substr(0, 128)),
                 std::string(status.message()));
    return status;
  };
  // The answer to a submit repeating an earlier one's request_id.
  auto repeated = [&](const std::string& job_id) {
    spdlog::info("submit with request_id '{}' repeats job {}", request.request_id(), job_id);
    yirage::v1::SubmitJobResponse response;
    response.set_job_id(job_id);
    response.set_existing(true);
    return response;
  };
  if (request.request_id().size() > 128) {
    return reject(absl::InvalidArgumentError(absl::StrCat(
        "request_id: ", request.request_id().size(), " characters long; the limit is 128")));
  }
  for (unsigned char c : request.request_id()) {
    if (c < 0x20 || c > 0x7e) {
      return reject(absl::InvalidArgumentError(
          "request_id: holds a control or non-ASCII character; printable ASCII only"));
    }
  }
  if (!request.request_id().empty()) {
    // A retry of a submission stored already: its job, no second search.
    YIRAGE_ASSIGN_OR_RETURN(std::optional<std::string> earlier,
                            store_->FindSubmission(owner, request.request_id()));
    if (earlier.has_value()) {
      return repeated(*earlier);
    }
  }
  std::optional<yirage::v1::Chip> target;
  if (request.chip_id().size() > 128) {
    return reject(absl::InvalidArgumentError(
        absl::StrCat("chip_id: ", request.chip_id().size(), " characters long; the limit is 128")));
  }
  if (!request.chip_id().empty()) {
    if (chips_ == nullptr) {
      return reject(absl::FailedPreconditionError("chip_id: this server has no chip registry"));
    }
    auto chip = chips_->Get(request.chip_id());
    if (absl::IsNotFound(chip.status())) {
      return reject(absl::InvalidArgumentError(
          absl::StrCat("chip_id: no chip '", request.chip_id(),
                       "' in the registry (see `yirage-client chips list`)")));
    }
    if (!chip.ok()) return chip.status();
    request.set_chip_id(chip->chip_id());  // the registry's id, where an alias named it
    if (request.backend().empty()) request.set_backend(chip->backend());
    const bool portable = request.backend() == "triton" || request.backend() == "mlir";
    if (request.backend() != chip->backend() && !portable) {
      return reject(absl::InvalidArgumentError(
          absl::StrCat("chip_id: chip '", chip->chip_id(), "' is a ", chip->backend(),
                       " chip; backend '", request.backend(), "' cannot target it")));
    }
    target = std::move(*chip);
  }
  if (request.backend().empty()) request.set_backend("cpu");
  bool known = false;
  for (const char* b : kKnownBackends) known |= request.backend() == b;
  if (!known) {
    return reject(absl::InvalidArgumentError(
        absl::StrCat("backend: unknown backend '", request.backend(),
                     "'; expected one of: ", absl::StrJoin(kKnownBackends, ", "))));
  }
  if (request.budget_candidates() < 0) {
    return reject(absl::InvalidArgumentError(
        absl::StrCat("budget_candidates: ", request.budget_candidates(), "; must be >= 0")));
  }
  // Numbers must be finite and not negative (NaN fails every comparison).
  const std::pair<const char*, double> numbers[] = {{"budget_seconds", request.budget_seconds()},
                                                    {"tolerance.rtol", request.tolerance().rtol()},
                                                    {"tolerance.atol", request.tolerance().atol()}};
  for (const auto& [field, value] : numbers) {
    if (!(value >= 0) || !std::isfinite(value)) {
      return reject(absl::InvalidArgumentError(
          absl::StrCat(field, ": ", value, "; must be a finite number >= 0")));
    }
  }
  if (!target.has_value() && chips_ != nullptr) {
    YIRAGE_ASSIGN_OR_RETURN(target, ConnectedWorkersChip(request.backend()));
    if (target.has_value()) {
      request.set_chip_id(target->chip_id());
      request.set_any_chip(true);  // the server's choice binds nothing
    }
  }
  // The graph's tensors must fit the target's memory as well as the cap.
  core::GraphLimits limits = options_.graph_limits;
  if (target.has_value() && target->memory().capacity_gb() > 0) {
    const double chip_bytes = target->memory().capacity_gb() * 1e9;
    if (chip_bytes < static_cast<double>(limits.max_total_bytes)) {
      limits.max_total_bytes = static_cast<int64_t>(chip_bytes);
    }
  }
  auto graph = request.graph().unread_inputs_size() > 0
                   ? absl::StatusOr<core::Graph>(absl::InvalidArgumentError(
                         "unread_inputs is set: only the graphs of plans list inputs a rewrite "
                         "left unread; a submitted graph reads every input"))
                   : core::Graph::FromProto(request.graph(), limits);
  if (!graph.ok()) {
    const std::string name =
        request.graph().name().size() <= 128
            ? absl::StrCat("graph '", absl::CHexEscape(request.graph().name()), "'")
            : std::string("graph");
    return reject(absl::InvalidArgumentError(
        absl::StrCat(name, ": ", std::string(graph.status().message()))));
  }
  if (!request.no_cache()) {
    // The result cache: a finished job with this graph, backend, chip and
    // tolerance whose winner's toolkit and driver a connected worker has
    // answers at once; its winner is verified and timed again here.
    const core::Tolerance tolerance = core::ResolveTolerance(*graph, request.tolerance());
    YIRAGE_ASSIGN_OR_RETURN(std::optional<JobStore::CacheSource> source,
                            store_->FindCacheSource(GraphCacheKey(*graph), request.backend(),
                                                    request.chip_id(), tolerance));
    if (source.has_value()) {
      YIRAGE_ASSIGN_OR_RETURN(
          int workers, workers_->CountWithSoftware(UnixNow(), request.backend(), request.chip_id(),
                                                   source->software));
      if (workers > 0) {
        yirage::v1::SearchSummary summary;
        summary.set_note(absl::StrCat("answered from the cache: the winner of job ", source->job_id,
                                      " (same graph, backend, chip, tolerance, toolkit and "
                                      "driver), verified and timed again here"));
        bool existing = false;
        YIRAGE_ASSIGN_OR_RETURN(std::string job_id,
                                store_->CreateJob(request, tolerance, source->plans, summary,
                                                  UnixNow(), owner, &existing, source->job_id));
        if (existing) return repeated(job_id);
        if (metrics_) metrics_->JobSubmitted();
        spdlog::info("job {} answered from the cache: job {}", job_id, source->job_id);
        yirage::v1::SubmitJobResponse response;
        response.set_job_id(job_id);
        response.set_candidates_generated(static_cast<int32_t>(source->plans.size()));
        response.set_cached_from(source->job_id);
        return response;
      }
    }
  }
  if (options_.search_threads > 0) {
    // Stored now, searched by a search thread: the call returns at once.
    const core::Tolerance tolerance = core::ResolveTolerance(*graph, request.tolerance());
    bool existing = false;
    YIRAGE_ASSIGN_OR_RETURN(
        std::string job_id,
        store_->CreateSearchingJob(request, tolerance, UnixNow(), owner, &existing));
    if (existing) return repeated(job_id);  // a racing retry stored it first
    if (metrics_) metrics_->JobSubmitted();
    spdlog::info("job {} searching: graph '{}', backend {}, chip {}", job_id,
                 request.graph().name(), request.backend(),
                 request.chip_id().empty() ? std::string("(none)") : request.chip_id());
    {
      absl::MutexLock lock(&search_mu_);
      search_queue_.push_back(job_id);
      searching_.insert(job_id);
    }
    yirage::v1::SubmitJobResponse response;
    response.set_job_id(job_id);
    return response;
  }
  yirage::v1::SearchSummary summary;
  absl::StatusOr<std::vector<yirage::v1::Plan>> plans = Search(request, *graph, target, &summary);
  if (!plans.ok()) return reject(plans.status());
  core::Tolerance tolerance = core::ResolveTolerance(*graph, request.tolerance());
  bool existing = false;
  YIRAGE_ASSIGN_OR_RETURN(std::string job_id, store_->CreateJob(request, tolerance, *plans, summary,
                                                                UnixNow(), owner, &existing));
  if (existing) return repeated(job_id);
  if (metrics_) metrics_->JobSubmitted();
  LogQueued(job_id, request, *plans, summary);
  yirage::v1::SubmitJobResponse response;
  response.set_job_id(job_id);
  response.set_candidates_generated(static_cast<int32_t>(plans->size()));
  return response;
}

absl::StatusOr<std::vector<yirage::v1::Plan>> Scheduler::Search(
    const yirage::v1::SubmitJobRequest& request, core::Graph& graph,
    const std::optional<yirage::v1::Chip>& target, yirage::v1::SearchSummary* summary) {
  const core::Tolerance tolerance = core::ResolveTolerance(graph, request.tolerance());
  graph.SetTolerance(tolerance.rtol, tolerance.atol);
  core::SearchOptions search;
  search.backend = request.backend();
  search.max_candidates = request.budget_candidates() > 0 ? request.budget_candidates() : 0;
  if (target.has_value()) search = core::SearchOptionsForChip(*target, search);
  if (search.max_candidates == 0) search.max_candidates = options_.max_candidates_default;
  // What the backend's workers run (their describe call): library kernels
  // (then the baseline is what a user already runs, every matmul through the
  // vendor library), row kernels and kernel families with their schedule
  // points. Until a worker of the backend has reported, generic row kernels.
  YIRAGE_ASSIGN_OR_RETURN(std::optional<yirage::v1::BackendKernels> kernels,
                          workers_->KernelsFor(request.backend(), request.chip_id(), UnixNow()));
  if (kernels.has_value()) search.kernels = *std::move(kernels);
  // The rewrite search (the part whose work grows with the graph) stops at
  // --search-seconds, and at a quarter of a job's own time budget.
  search.rewrite_time_budget_seconds = options_.search_seconds;
  if (request.budget_seconds() > 0) {
    const double quarter = request.budget_seconds() / 4;
    if (search.rewrite_time_budget_seconds <= 0 || quarter < search.rewrite_time_budget_seconds) {
      search.rewrite_time_budget_seconds = quarter;
    }
  }
  auto start = std::chrono::steady_clock::now();
  core::SearchStats stats;
  auto plans = core::GenerateCandidatesWithStats(graph, search, &stats);
  if (!plans.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", request.graph().name(),
                                                   "': ", std::string(plans.status().message())));
  }
  double search_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (metrics_) metrics_->ObserveSearchSeconds(search_seconds);
  summary->set_graphs_explored(stats.graphs_explored);
  summary->set_rewrites_verified(stats.rewrites_verified);
  summary->set_rewrites_rejected(stats.rewrites_rejected);
  summary->set_fingerprint_checks(stats.fingerprint_checks);
  summary->set_plans_generated(static_cast<int32_t>(plans->size()));
  int rewritten = 0;
  for (const auto& plan : *plans) rewritten += plan.has_graph() ? 1 : 0;
  summary->set_rewritten_plans(rewritten);
  summary->set_search_seconds(search_seconds);
  const yirage::v1::Plan& baseline = plans->front();
  bool library = false;
  for (const auto& kernel : baseline.kernels()) {
    library = library || kernel.kind() == yirage::v1::KERNEL_LIBRARY;
  }
  summary->set_baseline_kind(library ? "library" : "generated");
  summary->set_baseline_description(baseline.description());
  summary->set_rewrite_seconds(stats.rewrite_seconds);
  summary->set_hedged_plan(stats.hedged_plan);
  summary->set_note(!stats.rewrites_skipped.empty() ? stats.rewrites_skipped
                    : stats.budget_exhausted        ? "rewrite search stopped at its budget"
                                                    : "");
  if (!kernels.has_value()) {
    const std::string note =
        absl::StrCat("no worker of backend '", request.backend(),
                     "' has said what it runs yet, so the search planned generic row kernels only");
    summary->set_note(summary->note().empty() ? note : absl::StrCat(summary->note(), "; ", note));
  }
  return plans;
}

void Scheduler::LogQueued(const std::string& job_id, const yirage::v1::SubmitJobRequest& request,
                          const std::vector<yirage::v1::Plan>& plans,
                          const yirage::v1::SearchSummary& summary) {
  spdlog::info(
      "job {} queued: graph '{}', backend {}, chip {}, {} candidates ({} on rewritten graphs); "
      "search {:.1f} ms: {} graphs explored, {} rewrites verified, {} rejected, {} fingerprint "
      "checks",
      job_id, request.graph().name(), request.backend(),
      request.chip_id().empty() ? std::string("(none)") : request.chip_id(), plans.size(),
      summary.rewritten_plans(), summary.search_seconds() * 1e3, summary.graphs_explored(),
      summary.rewrites_verified(), summary.rewrites_rejected(), summary.fingerprint_checks());
  // Accepted either way (a worker may connect later), but say it waits.
  const bool bound = !request.chip_id().empty() && !request.any_chip();
  if (auto workers =
          workers_->CountConnected(UnixNow(), request.backend(), bound ? request.chip_id() : "");
      workers.ok() && *workers == 0) {
    spdlog::warn("job {} waiting: no connected worker for backend '{}'{}", job_id,
                 request.backend(), bound ? " and chip '" + request.chip_id() + "'" : "");
  }
}

void Scheduler::RunSearch(const std::string& job_id) {
  absl::StatusOr<yirage::v1::SubmitJobRequest> request = store_->SearchRequest(job_id);
  if (!request.ok()) {
    // Cancelled before its turn, or gone: nothing to search.
    if (!absl::IsFailedPrecondition(request.status())) {
      spdlog::error("search of job {}: {}", job_id, std::string(request.status().message()));
    }
    return;
  }
  auto fail = [&](const absl::Status& why) {
    spdlog::info("job {} failed in its search: {}", job_id, std::string(why.message()));
    if (absl::Status s =
            store_->FailSearch(job_id, absl::StrCat("search: ", why.message()), UnixNow());
        !s.ok()) {
      spdlog::error("job {}: {}", job_id, std::string(s.message()));
    } else {
      ObserveJobEnd(job_id);
    }
  };
  absl::StatusOr<core::Graph> graph =
      core::Graph::FromProto(request->graph(), options_.graph_limits);
  if (!graph.ok()) return fail(graph.status());
  // The chip Submit resolved (a chip deleted since: the generator's defaults).
  std::optional<yirage::v1::Chip> target;
  if (!request->chip_id().empty() && chips_ != nullptr) {
    if (auto chip = chips_->Get(request->chip_id()); chip.ok()) target = *std::move(chip);
  }
  yirage::v1::SearchSummary summary;
  absl::StatusOr<std::vector<yirage::v1::Plan>> plans = Search(*request, *graph, target, &summary);
  if (!plans.ok()) return fail(plans.status());
  if (absl::Status s = store_->AddCandidates(job_id, *plans, summary); !s.ok()) {
    if (absl::IsFailedPrecondition(s)) {
      spdlog::info("job {}: {}; its candidates are dropped", job_id, std::string(s.message()));
    } else {
      spdlog::error("job {}: storing its candidates: {}", job_id, std::string(s.message()));
    }
    return;
  }
  LogQueued(job_id, *request, *plans, summary);
}

absl::StatusOr<yirage::v1::SynchronizeResponse> Scheduler::Synchronize(
    const yirage::v1::SynchronizeRequest& request, const std::string& identity) {
  if (request.worker_id().empty()) {
    return absl::InvalidArgumentError("worker_id: must be set");
  }
  if (request.backend().empty()) {
    return absl::InvalidArgumentError("backend: must be set");
  }
  if (request.has_kernels() && request.kernels().backend() != request.backend()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernels.backend: '", request.kernels().backend(),
                     "' is not the worker's backend '", request.backend(), "'"));
  }
  double now = UnixNow();
  YIRAGE_ASSIGN_OR_RETURN(const bool has_kernels, workers_->Upsert(request, now, identity));
  if (chips_ != nullptr) {
    // A worker whose device cannot be resolved still works; it just has no chip.
    if (auto chip = ResolveWorkerChip(request); !chip.ok()) {
      spdlog::warn("worker {}: cannot resolve its chip: {}", request.worker_id(),
                   std::string(chip.status().message()));
    }
  }
  yirage::v1::SynchronizeResponse response;
  response.set_next_call_after_seconds(options_.worker_poll_seconds);
  response.set_send_kernels(!has_kernels);

  if (request.status().has_executing()) {
    const auto& executing = request.status().executing();
    // Results first: they are acknowledged only once durable. Storing them
    // renews the lease of a batch with candidates left (one transaction).
    YIRAGE_ASSIGN_OR_RETURN(
        RecordReport report,
        leases_->RecordResults(request.worker_id(), executing.batch_id(), executing.lease_token(),
                               executing.current_candidate_id(), executing.completed(), now));
    for (int64_t id : report.acknowledged) response.add_acknowledged(id);
    if (metrics_) {
      for (const auto& [status, n] : report.newly_stored) {
        metrics_->CandidateFinished(status, request.backend(), n);
      }
      for (const auto& r : executing.completed()) {
        if (r.evaluation_seconds() > 0) metrics_->ObserveEvaluationSeconds(r.evaluation_seconds());
        metrics_->ObserveCandidatePhases(request.backend(), r.compile_seconds(), r.verify_seconds(),
                                         r.time_seconds());
      }
      if (report.batch_completed) {
        metrics_->WorkerBusy(request.backend(), request.worker_id(), report.batch_held_seconds);
      }
    }
    // A batch still leased holds candidates of its job, which is not done.
    if (!report.job_id.empty() && !report.still_leased) {
      YIRAGE_ASSIGN_OR_RETURN(bool finished, store_->FinishIfDone(report.job_id, now));
      if (finished) {
        spdlog::info("job {} finished", report.job_id);
        ObserveJobEnd(report.job_id);
      }
    }
    bool still_ours = report.still_leased;
    if (executing.completed().empty()) {
      YIRAGE_ASSIGN_OR_RETURN(
          still_ours,
          leases_->RenewLease(request.worker_id(), executing.batch_id(), executing.lease_token(),
                              executing.current_candidate_id(), now));
    }
    if (still_ours) return response;  // no action: carry on
    // The batch is gone: finished (all results in), expired, or cancelled.
    // Either way the worker should stop it and ask for more.
    bool all_reported = executing.current_candidate_id() == 0;
    if (!all_reported) {
      response.mutable_abandon()->set_batch_id(executing.batch_id());
      response.mutable_abandon()->set_reason(
          "the batch is no longer leased to this worker (lease expired or job cancelled)");
      return response;
    }
  }
  if (request.status().has_idle()) {
    double held_seconds = 0;
    YIRAGE_ASSIGN_OR_RETURN(int released,
                            leases_->ReleaseWorkerBatches(request.worker_id(), now, &held_seconds));
    if (metrics_) metrics_->WorkerBusy(request.backend(), request.worker_id(), held_seconds);
    if (released > 0) {
      spdlog::info("worker {} is idle: {} candidate(s) of its batch back in the queue",
                   request.worker_id(), released);
      if (metrics_) metrics_->CandidatesRequeued(released);
    }
    if (request.status().idle().stopping()) {
      response.mutable_idle();
      return response;
    }
  }
  YIRAGE_ASSIGN_OR_RETURN(auto batch,
                          leases_->LeaseBatch(request.worker_id(), request.backend(), now));
  if (batch.has_value()) {
    if (metrics_) metrics_->BatchLeased(request.backend());
    spdlog::info("leased {} ({} candidates of job {}) to worker {}", batch->batch_id(),
                 batch->candidates_size(), batch->job_id(), request.worker_id());
    *response.mutable_execute()->mutable_batch() = std::move(*batch);
    response.set_next_call_after_seconds(std::min(1.0, options_.leases.lease_seconds / 4));
  } else {
    response.mutable_idle();
  }
  return response;
}

absl::StatusOr<std::string> Scheduler::ResolveWorkerChip(
    const yirage::v1::SynchronizeRequest& request) {
  const uint64_t generation = chips_->generation();
  {
    absl::MutexLock lock(&worker_chips_mu_);
    auto it = worker_chips_.find(request.worker_id());
    if (it != worker_chips_.end() &&
        it->second.device_description == request.device_description() &&
        it->second.generation == generation) {
      return it->second.chip_id;
    }
  }
  YIRAGE_ASSIGN_OR_RETURN(std::string chip_id,
                          MatchOrRegisterDevice(request.backend(), request.device_description()));
  YIRAGE_RETURN_IF_ERROR(workers_->SetChip(request.worker_id(), chip_id));
  absl::MutexLock lock(&worker_chips_mu_);
  auto& entry = worker_chips_[request.worker_id()];
  if (entry.chip_id != chip_id || entry.device_description != request.device_description()) {
    spdlog::info("worker {} runs on chip '{}'", request.worker_id(), chip_id);
  }
  // Registering a detected chip bumped the generation: take the new one.
  entry = {request.device_description(), chips_->generation(), chip_id};
  return chip_id;
}

absl::StatusOr<std::string> Scheduler::MatchOrRegisterDevice(
    const std::string& backend, const std::string& device_description) {
  nlohmann::json device = nlohmann::json::parse(device_description, nullptr, false);
  if (device.is_discarded() || !device.is_object()) {
    return absl::InvalidArgumentError("device_description: not a JSON object");
  }
  YIRAGE_ASSIGN_OR_RETURN(std::vector<yirage::v1::Chip> registry, chips_->List({}));
  if (auto match = core::MatchDevice(device, backend, registry); match.has_value()) {
    spdlog::debug("device matched chip '{}': {}", match->chip_id, match->reason);
    return match->chip_id;
  }
  YIRAGE_ASSIGN_OR_RETURN(yirage::v1::Chip chip, core::ChipFromDevice(device, backend));
  bool created = false;
  auto stored = chips_->Register(chip, /*overwrite=*/false, UnixNow(), &created);
  if (absl::IsAlreadyExists(stored.status())) return chip.chip_id();  // a racing worker's
  if (!stored.ok()) return stored.status();
  spdlog::info("registered unknown {} device '{}' as chip '{}'", backend, chip.chip_name(),
               chip.chip_id());
  return chip.chip_id();
}

absl::StatusOr<std::optional<yirage::v1::Chip>> Scheduler::ConnectedWorkersChip(
    const std::string& backend) {
  YIRAGE_ASSIGN_OR_RETURN(auto workers, workers_->List(UnixNow()));
  std::map<std::string, int> counts;
  for (const auto& w : workers) {
    if (w.connected() && w.backend() == backend && !w.chip_id().empty()) ++counts[w.chip_id()];
  }
  std::string best;
  int best_count = 0;
  for (const auto& [id, n] : counts) {
    if (n > best_count) {
      best = id;
      best_count = n;
    }
  }
  if (best.empty()) return std::optional<yirage::v1::Chip>();
  auto chip = chips_->Get(best);
  if (absl::IsNotFound(chip.status())) return std::optional<yirage::v1::Chip>();  // deleted since
  if (!chip.ok()) return chip.status();
  return std::optional<yirage::v1::Chip>(std::move(*chip));
}

absl::Status Scheduler::MaintainOnce() {
  double now = UnixNow();
  YIRAGE_ASSIGN_OR_RETURN(ExpiryReport expiry, leases_->ExpireLeases(now));
  if (expiry.leases_expired > 0) {
    spdlog::warn("{} lease(s) expired: {} candidate(s) requeued, {} failed for killing workers",
                 expiry.leases_expired, expiry.candidates_requeued, expiry.candidates_failed);
  }
  YIRAGE_ASSIGN_OR_RETURN(MaintenanceReport report, store_->Maintain(now, expiry.jobs));
  // SEARCHING jobs no search has: those whose cached winner failed here.
  YIRAGE_ASSIGN_OR_RETURN(std::vector<std::string> searching, store_->SearchingJobs());
  if (options_.search_threads > 0) {
    absl::MutexLock lock(&search_mu_);
    for (const std::string& job_id : searching) {
      if (searching_.insert(job_id).second) search_queue_.push_back(job_id);
    }
  } else {
    for (const std::string& job_id : searching) RunSearch(job_id);
  }
  YIRAGE_RETURN_IF_ERROR(leases_->Checkpoint());
  for (const auto& job_id : report.jobs_finished) {
    spdlog::info("job {} finished", job_id);
    ObserveJobEnd(job_id);
  }
  if (metrics_) {
    metrics_->CandidatesRequeued(expiry.candidates_requeued);
    for (const ExpiryReport::Lease& lease : expiry.leases) {
      metrics_->LeasesExpired(lease.backend, 1);
      metrics_->WorkerBusy(lease.backend, lease.worker_id, lease.held_seconds);
      metrics_->CandidateFinished(yirage::v1::ERROR, lease.backend, lease.candidates_failed);
    }
    for (const auto& [backend, n] : report.candidates_skipped_by_backend) {
      metrics_->CandidateFinished(yirage::v1::SKIPPED, backend, n);
    }
    YIRAGE_ASSIGN_OR_RETURN(auto counts, store_->CountJobsByState());
    metrics_->SetJobsByState(counts);
    YIRAGE_ASSIGN_OR_RETURN(auto queued, store_->CountQueuedCandidatesByBackend());
    metrics_->SetCandidatesQueued(queued);
    YIRAGE_ASSIGN_OR_RETURN(auto workers, workers_->CountConnectedByBackend(now));
    metrics_->SetConnectedWorkers(workers);
  }
  return absl::OkStatus();
}

void Scheduler::ObserveJobEnd(const std::string& job_id) {
  if (metrics_ == nullptr) return;
  absl::StatusOr<yirage::v1::Job> job = store_->GetJob(job_id);
  if (!job.ok()) {
    spdlog::warn("job {}: not observed in the metrics: {}", job_id,
                 std::string(job.status().message()));
    return;
  }
  JobEnded(*job);
}

void Scheduler::JobEnded(const yirage::v1::Job& job) {
  if (metrics_ == nullptr || job.finished_unix() <= 0) return;
  const yirage::v1::JobState state = job.state();
  if (state != yirage::v1::SUCCEEDED && state != yirage::v1::FAILED &&
      state != yirage::v1::CANCELLED) {
    return;
  }
  metrics_->JobEnded(state, job.finished_unix() - job.created_unix());
  if (state == yirage::v1::SUCCEEDED && job.has_best()) {
    absl::StatusOr<double> stored = store_->ResultStoredUnix(job.best().candidate_id());
    if (stored.ok() && *stored > 0) metrics_->ObserveTimeToBest(*stored - job.created_unix());
  }
}

void Scheduler::StartMaintenance() {
  stop_ = false;
  if (options_.search_threads > 0) {
    // The jobs a previous run of the server left SEARCHING come first.
    absl::StatusOr<std::vector<std::string>> left = store_->SearchingJobs();
    if (!left.ok()) {
      spdlog::error("searching jobs: {}", std::string(left.status().message()));
    } else if (!left->empty()) {
      spdlog::info("{} job(s) left searching by the last run: searching them again", left->size());
      absl::MutexLock lock(&search_mu_);
      search_queue_.insert(search_queue_.begin(), left->begin(), left->end());
      searching_.insert(left->begin(), left->end());
    }
    for (int i = 0; i < options_.search_threads; ++i) {
      searchers_.emplace_back([this] {
        for (;;) {
          std::string job_id;
          {
            absl::MutexLock lock(&search_mu_);
            auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(search_mu_) {
              return stop_.load() || !search_queue_.empty();
            };
            search_mu_.Await(absl::Condition(&ready));
            if (stop_) return;
            job_id = std::move(search_queue_.front());
            search_queue_.pop_front();
          }
          RunSearch(job_id);
          absl::MutexLock lock(&search_mu_);
          searching_.erase(job_id);
        }
      });
    }
  }
  maintenance_ = std::thread([this] {
    while (!stop_) {
      if (auto s = MaintainOnce(); !s.ok())
        spdlog::error("maintenance: {}", std::string(s.message()));
      for (int i = 0; i < 10 && !stop_; ++i) {
        std::this_thread::sleep_for(
            std::chrono::duration<double>(options_.maintenance_interval_seconds / 10));
      }
    }
  });
}

void Scheduler::StopMaintenance() {
  {
    absl::MutexLock lock(&search_mu_);  // wakes the idle search threads
    stop_ = true;
  }
  if (maintenance_.joinable()) maintenance_.join();
  // Waits for the searches under way (a server killed meanwhile leaves
  // their jobs SEARCHING, and its next start searches them again).
  for (std::thread& t : searchers_) t.join();
  searchers_.clear();
}

}  // namespace yirage::server
