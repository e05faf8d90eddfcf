#include "workers/worker.h"

#include <unistd.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/rpc_util.h"
#include "spdlog/spdlog.h"
#include "workers/batch_evaluator.h"

namespace yirage::worker {

Worker::Worker(const WorkerOptions& options, std::unique_ptr<BackendLibrary> backend,
               std::string device_description, yirage::v1::BackendKernels kernels)
    : options_(options),
      backend_(std::move(backend)),
      device_description_(std::move(device_description)),
      kernels_(std::move(kernels)),
      evaluator_(backend_.get(), options.timing) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  hostname_ = host;
  // host-cpu-PID-RANDOM, host-cuda0-PID-RANDOM, host-cuda1-...: a machine's
  // workers differ by device as well as by process.
  const std::string device = options.backend == "cpu" ? "" : std::to_string(options.device);
  worker_id_ = options.worker_id.empty() ? absl::StrCat(hostname_, "-", options.backend, device,
                                                        "-", getpid(), "-", RandomHex(4))
                                         : options.worker_id;
  stub_ = yirage::v1::WorkerService::NewStub(
      options.channel != nullptr ? options.channel : MakeChannel(options.scheduler));
}

Worker::~Worker() {
  {
    absl::MutexLock lock(&mu_);
    abandon_ = true;
  }
  if (evaluation_.joinable()) evaluation_.join();
}

yirage::v1::SynchronizeRequest Worker::BuildRequest() {
  yirage::v1::SynchronizeRequest request;
  request.set_worker_id(worker_id_);
  request.set_backend(options_.backend);
  request.set_hostname(hostname_);
  request.set_pid(getpid());
  request.set_device_description(device_description_);
  absl::MutexLock lock(&mu_);
  if (send_kernels_) *request.mutable_kernels() = kernels_;
  if (batch_id_.has_value()) {
    auto* executing = request.mutable_status()->mutable_executing();
    executing->set_batch_id(*batch_id_);
    executing->set_lease_token(lease_token_);
    executing->set_current_candidate_id(evaluation_done_ ? 0 : current_candidate_);
    for (const auto& r : unacknowledged_) *executing->add_completed() = r;
  } else {
    request.mutable_status()->mutable_idle();
  }
  return request;
}

void Worker::JoinFinishedEvaluation() {
  bool done;
  {
    absl::MutexLock lock(&mu_);
    done = evaluation_done_;
  }
  if (done && evaluation_.joinable()) evaluation_.join();
}

void Worker::HandleResponse(const yirage::v1::SynchronizeRequest& request,
                            const yirage::v1::SynchronizeResponse& response) {
  JoinFinishedEvaluation();
  absl::MutexLock lock(&mu_);
  send_kernels_ = response.send_kernels();
  if (request.status().has_executing()) {
    reported_candidate_ = request.status().executing().current_candidate_id();
  }
  for (int64_t id : response.acknowledged()) {
    for (auto it = unacknowledged_.begin(); it != unacknowledged_.end(); ++it) {
      if (it->candidate_id() == id) {
        unacknowledged_.erase(it);
        break;
      }
    }
  }
  if (response.has_abandon() && batch_id_ == response.abandon().batch_id()) {
    // After the last result of a batch is stored the scheduler closes it; only
    // an early close means work is being dropped.
    if (results_left_ > 0) {
      spdlog::warn("abandoning {}: {}", response.abandon().batch_id(), response.abandon().reason());
    }
    abandon_ = true;
  }
  // A batch is over once its evaluation ended and every result is stored (or
  // the scheduler took it back).
  if (batch_id_.has_value() && evaluation_done_ && (unacknowledged_.empty() || abandon_)) {
    batch_id_.reset();
    unacknowledged_.clear();
  }
  if (response.has_execute() && !batch_id_.has_value() && !stopping_) {
    StartBatch(response.execute().batch());
  }
}

void Worker::StartBatch(const yirage::v1::Batch& batch) {
  if (evaluation_.joinable()) {
    // Only reachable after an abandoned batch whose thread is still winding
    // down; wait for it outside the lock.
    mu_.Unlock();
    evaluation_.join();
    mu_.Lock();
  }
  batch_id_ = batch.batch_id();
  lease_token_ = batch.lease_token();
  results_left_ = batch.candidates_size();
  current_candidate_ = 0;
  evaluation_done_ = false;
  abandon_ = false;
  spdlog::info("executing {} ({} candidates of job {})", batch.batch_id(), batch.candidates_size(),
               batch.job_id());
  evaluation_ = std::thread([this, batch] {
    BatchEvaluator::Callbacks callbacks;
    callbacks.on_start = [this](int64_t id) {
      // The scheduler must know which candidate runs before it runs: if it
      // kills us, that is the one to blame. Wait (bounded) for the next
      // Synchronize to carry it.
      absl::MutexLock lock(&mu_);
      current_candidate_ = id;
      wake_ = true;
      auto told = [this, id]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return reported_candidate_ == id || abandon_;
      };
      mu_.AwaitWithTimeout(absl::Condition(&told), absl::Seconds(options_.rpc_timeout_seconds));
    };
    callbacks.on_result = [this](const yirage::v1::CandidateResult& r) {
      absl::MutexLock lock(&mu_);
      unacknowledged_.push_back(r);
      --results_left_;
      wake_ = true;  // deliver results promptly
    };
    callbacks.should_stop = [this] {
      absl::MutexLock lock(&mu_);
      return abandon_;
    };
    absl::Status status = evaluator_.Evaluate(batch, callbacks);
    if (!status.ok())
      spdlog::error("batch {}: {}", batch.batch_id(), std::string(status.message()));
    absl::MutexLock lock(&mu_);
    if (IsDeviceLost(status)) {
      device_lost_status_ = status;
      device_lost_ = true;
    }
    evaluation_done_ = true;
    wake_ = true;
  });
}

absl::Status Worker::Run(const std::atomic<bool>* stop) {
  spdlog::info("worker {} ({} backend) serving scheduler {}", worker_id_, options_.backend,
               options_.scheduler);
  double backoff = 0.5;
  bool was_connected = false;
  auto timeout = std::chrono::milliseconds(static_cast<int>(options_.rpc_timeout_seconds * 1000));
  auto sync_once = [&](double* next_call, bool stopping = false) {
    yirage::v1::SynchronizeRequest request = BuildRequest();
    if (stopping) request.mutable_status()->mutable_idle()->set_stopping(true);
    yirage::v1::SynchronizeResponse response;
    auto context = ContextWithDeadline(timeout);
    grpc::Status status = stub_->Synchronize(context.get(), request, &response);
    if (!status.ok()) {
      if (was_connected || backoff >= 4) {
        spdlog::warn("synchronize with {} failed: {} (retrying in {:.1f} s)", options_.scheduler,
                     status.error_message(), backoff);
      }
      was_connected = false;
      *next_call = backoff;
      backoff = std::min(backoff * 2, 5.0);
      return false;
    }
    if (!was_connected) spdlog::info("connected to scheduler {}", options_.scheduler);
    was_connected = true;
    backoff = 0.5;
    HandleResponse(request, response);
    *next_call = response.next_call_after_seconds() > 0 ? response.next_call_after_seconds() : 1.0;
    return true;
  };

  while (!*stop && !device_lost_) {
    double next_call = 1.0;
    sync_once(&next_call);
    // Sleep until the next call is due, a result is ready, or we must stop.
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(next_call);
    while (!*stop && !device_lost_ && !wake_.exchange(false) &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // Stop: start nothing new. The evaluation ends after its current step
  // (a compile or a candidate); until then the calls go on, so the lease
  // holds and what finishes is delivered, for at most drain_seconds.
  stopping_ = true;
  {
    absl::MutexLock lock(&mu_);
    abandon_ = true;
  }
  const auto drain_until =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.drain_seconds);
  auto evaluation_running = [this] {
    absl::MutexLock lock(&mu_);
    return evaluation_.joinable() && !evaluation_done_;
  };
  while (evaluation_running() && std::chrono::steady_clock::now() < drain_until) {
    double next_call = 1.0;
    sync_once(&next_call);
    const auto until =
        std::min(drain_until, std::chrono::steady_clock::now() +
                                  std::chrono::duration<double>(std::min(next_call, 1.0)));
    while (evaluation_running() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  if (evaluation_running()) {
    // The rest of the batch goes back below; the thread is left to the
    // process's exit (the caller must exit without destroying this worker).
    spdlog::warn("still evaluating after {:.0f} s of draining; giving the batch back",
                 options_.drain_seconds);
    evaluation_.detach();
    drained_ = false;
  } else if (evaluation_.joinable()) {
    evaluation_.join();
  }
  double ignored;
  bool pending;
  {
    absl::MutexLock lock(&mu_);
    pending = batch_id_.has_value() && !unacknowledged_.empty();
  }
  // Deliver what is finished (a few tries), then give the rest of the batch
  // back so it need not wait for the lease to expire.
  for (int attempt = 0; pending && attempt < 3; ++attempt) {
    if (!sync_once(&ignored)) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    absl::MutexLock lock(&mu_);
    pending = !unacknowledged_.empty();
  }
  {
    absl::MutexLock lock(&mu_);
    batch_id_.reset();
    unacknowledged_.clear();
  }
  sync_once(&ignored, /*stopping=*/true);
  spdlog::info("worker {} stopped", worker_id_);
  if (device_lost_) {
    absl::MutexLock lock(&mu_);
    return device_lost_status_;
  }
  return absl::OkStatus();
}

}  // namespace yirage::worker
