// Serves WatchJob: the job as it is, then an event for each change (its
// state, each candidate reaching a final status, a new best) until the job
// ends, the caller hangs up or its deadline passes.
#ifndef YIRAGE_SERVER_JOB_WATCH_H_
#define YIRAGE_SERVER_JOB_WATCH_H_

#include <chrono>
#include <deque>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/alarm.h"
#include "grpcpp/grpcpp.h"
#include "server/job_store.h"
#include "yirage/v1/job.grpc.pb.h"

namespace yirage::server {

// The events that lead from `before` (nullptr: nothing seen yet, which
// gives a SNAPSHOT) to `now`, given the job's candidates when its count of
// finished candidates changed (`candidates`, else nullptr) and the ids of
// the candidates already reported (`seen`, updated). In order: STATE (when
// the state changed), CANDIDATE for each newly finished candidate by id,
// BEST (when the best candidate or its time changed).
std::deque<yirage::v1::JobEvent> JobEvents(const yirage::v1::Job* before,
                                           const yirage::v1::Job& now,
                                           const std::vector<yirage::v1::Candidate>* candidates,
                                           std::set<int64_t>* seen);

// One WatchJob call. It reads the store every `interval` on gRPC's callback
// threads (a grpc::Alarm), never on a thread of its own, and writes only
// when something changed. Deletes itself when the call is done.
// REQUIRES: `jobs` outlives every watch (the server stops before it).
class JobWatchReactor : public grpc::ServerWriteReactor<yirage::v1::JobEvent> {
 public:
  JobWatchReactor(grpc::CallbackServerContext* context, JobStore* jobs, std::string job_id,
                  std::chrono::milliseconds interval);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // What a step decided, done after the lock is released (gRPC may run a
  // reaction inline).
  struct Action {
    const yirage::v1::JobEvent* write = nullptr;
    bool finish = false;
    grpc::Status status;
    bool arm = false;
  };
  void Poll();
  // Under mu_: the next write, the end, or a wait for the next poll.
  Action Next() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Act(const Action& action);
  void AlarmFired(bool ok);

  grpc::CallbackServerContext* const context_;
  JobStore* const jobs_;
  const std::string job_id_;
  const std::chrono::milliseconds interval_;
  absl::Mutex mu_;
  std::deque<yirage::v1::JobEvent> queue_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<yirage::v1::Job> last_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> seen_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  // A Poll is reading the store (the constructor's first): only it may end
  // the call then, so that nothing deletes the reactor under it.
  bool polling_ ABSL_GUARDED_BY(mu_) = true;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool alarm_pending_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status end_status_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<grpc::Alarm> alarm_ ABSL_GUARDED_BY(mu_);
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_JOB_WATCH_H_
