#include "server/job_watch.h"

#include <algorithm>
#include <utility>

#include "common/rpc_util.h"

namespace yirage::server {
namespace {

using yirage::v1::Candidate;
using yirage::v1::Job;
using yirage::v1::JobEvent;

bool FinalState(yirage::v1::JobState s) {
  return s == yirage::v1::SUCCEEDED || s == yirage::v1::FAILED || s == yirage::v1::CANCELLED;
}

bool FinalStatus(yirage::v1::CandidateStatus s) {
  return s != yirage::v1::PENDING && s != yirage::v1::LEASED &&
         s != yirage::v1::CANDIDATE_STATUS_UNSPECIFIED;
}

JobEvent Event(JobEvent::Kind kind, const Job& job) {
  JobEvent e;
  e.set_kind(kind);
  *e.mutable_job() = job;
  return e;
}

// The counts that change when a candidate finishes.
bool CountsDiffer(const Job& a, const Job& b) {
  return a.candidates_evaluated() != b.candidates_evaluated() ||
         a.candidates_failed() != b.candidates_failed() ||
         a.candidates_pending() != b.candidates_pending() ||
         a.candidates_generated() != b.candidates_generated() || a.state() != b.state();
}

}  // namespace

std::deque<JobEvent> JobEvents(const Job* before, const Job& now,
                               const std::vector<Candidate>* candidates, std::set<int64_t>* seen) {
  std::deque<JobEvent> events;
  if (before == nullptr) {
    // The snapshot covers what finished before the watch began.
    if (candidates != nullptr) {
      for (const Candidate& c : *candidates) {
        if (FinalStatus(c.status())) seen->insert(c.candidate_id());
      }
    }
    events.push_back(Event(JobEvent::SNAPSHOT, now));
    return events;
  }
  if (candidates != nullptr) {
    std::vector<const Candidate*> fresh;
    for (const Candidate& c : *candidates) {
      if (FinalStatus(c.status()) && !seen->count(c.candidate_id())) fresh.push_back(&c);
    }
    std::sort(fresh.begin(), fresh.end(), [](const Candidate* a, const Candidate* b) {
      return a->candidate_id() < b->candidate_id();
    });
    for (const Candidate* c : fresh) {
      seen->insert(c->candidate_id());
      JobEvent e = Event(JobEvent::CANDIDATE, now);
      *e.mutable_candidate() = *c;
      events.push_back(std::move(e));
    }
  }
  const bool best_changed =
      before->has_best() != now.has_best() ||
      (now.has_best() && (before->best().candidate_id() != now.best().candidate_id() ||
                          before->best().time_us() != now.best().time_us()));
  if (best_changed) events.push_back(Event(JobEvent::BEST, now));
  // Last, so that a final state follows the candidates that led to it.
  if (before->state() != now.state()) events.push_back(Event(JobEvent::STATE, now));
  return events;
}

JobWatchReactor::JobWatchReactor(grpc::CallbackServerContext* context, JobStore* jobs,
                                 std::string job_id, std::chrono::milliseconds interval)
    : context_(context), jobs_(jobs), job_id_(std::move(job_id)), interval_(interval) {
  Poll();
}

void JobWatchReactor::Poll() {
  absl::StatusOr<Job> job = jobs_->GetJob(job_id_);
  std::optional<absl::StatusOr<std::vector<Candidate>>> candidates;
  if (job.ok()) {
    bool list;
    {
      absl::MutexLock lock(&mu_);
      list = last_ == nullptr || CountsDiffer(*last_, *job);
    }
    if (list) candidates = jobs_->ListCandidates(job_id_);
  }
  Action action;
  {
    absl::MutexLock lock(&mu_);
    if (!job.ok()) {
      end_status_ = ToGrpc(job.status());
      cancelled_ = true;  // ends the stream with end_status_
    } else if (candidates.has_value() && !candidates->ok()) {
      end_status_ = ToGrpc(candidates->status());
      cancelled_ = true;
    } else {
      const std::vector<Candidate>* list = candidates.has_value() ? &candidates->value() : nullptr;
      for (JobEvent& e : JobEvents(last_.get(), *job, list, &seen_)) queue_.push_back(std::move(e));
      last_ = std::make_unique<Job>(*std::move(job));
    }
    polling_ = false;
    action = Next();
  }
  Act(action);
}

JobWatchReactor::Action JobWatchReactor::Next() {
  Action a;
  if (finished_ || writing_ || polling_) return a;  // ended, or OnWriteDone or Poll continues
  if (cancelled_) {
    finished_ = true;
    a.finish = true;
    a.status = end_status_.ok() ? grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled")
                                : end_status_;
    return a;
  }
  if (!queue_.empty()) {
    writing_ = true;
    a.write = &queue_.front();  // stays put until OnWriteDone pops it
    return a;
  }
  if (last_ != nullptr && FinalState(last_->state())) {
    finished_ = true;
    a.finish = true;
    return a;
  }
  if (context_->deadline() < std::chrono::system_clock::now() + interval_) {
    finished_ = true;
    a.finish = true;
    a.status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                            "the watch's deadline passed before the job ended; watch again");
    return a;
  }
  alarm_pending_ = true;
  alarm_ = std::make_unique<grpc::Alarm>();
  a.arm = true;
  return a;
}

void JobWatchReactor::Act(const Action& action) {
  if (action.write != nullptr) StartWrite(action.write);
  if (action.finish) Finish(action.status);
  if (action.arm) {
    grpc::Alarm* alarm;
    {
      absl::MutexLock lock(&mu_);
      alarm = alarm_.get();
    }
    // Only this step armed it, and nothing else touches alarm_ until it fires.
    alarm->Set(std::chrono::system_clock::now() + interval_, [this](bool ok) { AlarmFired(ok); });
  }
}

void JobWatchReactor::AlarmFired(bool ok) {
  bool poll;
  Action action;
  {
    absl::MutexLock lock(&mu_);
    alarm_pending_ = false;
    // A cancelled alarm: the caller hung up (OnCancel) or the server stops.
    if (!ok && !cancelled_) {
      cancelled_ = true;
      end_status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is stopping");
    }
    poll = !cancelled_;
    if (poll) {
      polling_ = true;
    } else {
      action = Next();
    }
  }
  if (poll) {
    Poll();
  } else {
    Act(action);
  }
}

void JobWatchReactor::OnWriteDone(bool ok) {
  Action action;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    queue_.pop_front();
    if (!ok) cancelled_ = true;  // the stream broke: the caller is gone
    action = Next();
  }
  Act(action);
}

void JobWatchReactor::OnCancel() {
  grpc::Alarm* pending = nullptr;
  Action action;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (alarm_pending_) {
      pending = alarm_.get();  // its callback (ok = false) finishes the call
    } else {
      action = Next();  // a write or poll in flight ends the call instead
    }
  }
  if (pending != nullptr) pending->Cancel();
  Act(action);
}

void JobWatchReactor::OnDone() {
  // Finish was called only with no write, poll or alarm in flight.
  delete this;
}

}  // namespace yirage::server
