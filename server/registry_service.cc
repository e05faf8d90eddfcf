#include "server/registry_service.h"

#include <chrono>
#include <deque>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/rpc_util.h"
#include "core/chip.h"
#include "core/chip_search.h"
#include "server/serve_unary.h"
#include "spdlog/spdlog.h"

namespace yirage::server {

using yirage::v1::Chip;
using yirage::v1::ChipEvent;

// One WatchChips stream: a queue of events written one at a time. Deletes
// itself when gRPC is done with it. Finish is deferred while a write is in
// flight.
class ChipWatchReactor : public grpc::ServerWriteReactor<ChipEvent> {
 public:
  // A subscriber that falls this far behind is dropped rather than let the
  // queue grow without bound.
  static constexpr size_t kMaxQueued = 10000;

  explicit ChipWatchReactor(ChipBroadcaster* broadcaster) : broadcaster_(broadcaster) {
    ChipEvent hello;
    hello.set_kind(ChipEvent::WATCHING);
    hello.set_event_unix(UnixNow());
    // Subscribe first: every event published after the WATCHING message is
    // seen by this stream.
    if (!broadcaster_->Subscribe(this)) {
      subscribed_ = false;
      Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
      return;
    }
    Push(hello);
  }

  void Push(const ChipEvent& event) {
    absl::MutexLock lock(&mu_);
    if (finish_requested_) return;
    if (queue_.size() >= kMaxQueued) {
      FinishLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                "watcher fell too far behind; watch again"));
      return;
    }
    queue_.push_back(event);
    WriteNextLocked();
  }

  void Close(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    FinishLocked(status);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!queue_.empty()) queue_.pop_front();
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    if (pending_finish_.has_value()) {
      FinishLocked(*pending_finish_);
      return;
    }
    WriteNextLocked();
  }

  // The caller cancelled or its deadline passed.
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }

  void OnDone() override {
    if (subscribed_) broadcaster_->Unsubscribe(this);
    delete this;
  }

 private:
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || queue_.empty() || finish_requested_) return;
    writing_ = true;
    StartWrite(&queue_.front());
  }

  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finish_requested_ = true;
    if (writing_) {
      if (!pending_finish_.has_value()) pending_finish_ = status;
      return;
    }
    finished_ = true;
    Finish(status);
  }

  ChipBroadcaster* const broadcaster_;
  bool subscribed_ = true;
  absl::Mutex mu_;
  std::deque<ChipEvent> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> pending_finish_ ABSL_GUARDED_BY(mu_);
};

namespace {

// A WatchChips call refused before it starts: finishes with `status`.
class RefusedWatch : public grpc::ServerWriteReactor<ChipEvent> {
 public:
  explicit RefusedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

bool ChipBroadcaster::Subscribe(ChipWatchReactor* reactor) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  subscribers_.insert(reactor);
  return true;
}

void ChipBroadcaster::Unsubscribe(ChipWatchReactor* reactor) {
  absl::MutexLock lock(&mu_);
  subscribers_.erase(reactor);
}

// Reactors call back on gRPC's threads, never inline from StartWrite or
// Finish, so holding mu_ here cannot deadlock with OnDone's Unsubscribe; and
// since OnDone unsubscribes before deleting, no reactor dies while listed.
void ChipBroadcaster::Publish(const ChipEvent& event) {
  absl::MutexLock lock(&mu_);
  for (ChipWatchReactor* r : subscribers_) r->Push(event);
}

void ChipBroadcaster::CloseAll() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  for (ChipWatchReactor* r : subscribers_) r->Close(grpc::Status::OK);
}

int ChipBroadcaster::subscribers() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(subscribers_.size());
}

grpc::ServerUnaryReactor* RegistryServiceImpl::RegisterChip(
    grpc::CallbackServerContext* context, const yirage::v1::RegisterChipRequest* request,
    yirage::v1::RegisterChipResponse* response) {
  return ServeUnary(context, *auth_, kAdminAccess, [&](const Caller&) -> absl::Status {
    Chip chip = request->chip();
    if (!request->json().empty()) {
      if (request->has_chip()) {
        return absl::InvalidArgumentError("set either chip or json, not both");
      }
      auto parsed = core::ParseChipJson(request->json());
      if (!parsed.ok()) return parsed.status();
      chip = std::move(*parsed);
    }
    bool created = false;
    auto stored = store_->Register(chip, request->overwrite(), UnixNow(), &created);
    if (!stored.ok()) return stored.status();
    spdlog::info("chip {} {}", stored->chip_id(), created ? "registered" : "updated");
    *response->mutable_chip() = std::move(*stored);
    response->set_created(created);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* RegistryServiceImpl::GetChip(grpc::CallbackServerContext* context,
                                                       const yirage::v1::GetChipRequest* request,
                                                       Chip* response) {
  return ServeUnary(context, *auth_, kClientAccess, [&](const Caller&) -> absl::Status {
    auto chip = store_->Get(request->chip_id());
    if (!chip.ok()) return chip.status();
    *response = std::move(*chip);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* RegistryServiceImpl::ListChips(
    grpc::CallbackServerContext* context, const yirage::v1::ListChipsRequest* request,
    yirage::v1::ListChipsResponse* response) {
  return ServeUnary(context, *auth_, kClientAccess, [&](const Caller&) -> absl::Status {
    auto chips = store_->List({request->vendor(), request->backend(), request->category()});
    if (!chips.ok()) return chips.status();
    for (auto& c : *chips) *response->add_chips() = std::move(c);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* RegistryServiceImpl::DeleteChip(
    grpc::CallbackServerContext* context, const yirage::v1::DeleteChipRequest* request,
    yirage::v1::DeleteChipResponse* /*response*/) {
  return ServeUnary(context, *auth_, kAdminAccess, [&](const Caller&) -> absl::Status {
    absl::Status s = store_->Delete(request->chip_id(), UnixNow());
    if (s.ok()) spdlog::info("chip {} deleted", request->chip_id());
    return s;
  });
}

grpc::ServerUnaryReactor* RegistryServiceImpl::ImportChips(
    grpc::CallbackServerContext* context, const yirage::v1::ImportChipsRequest* request,
    yirage::v1::ImportChipsResponse* response) {
  return ServeUnary(context, *auth_, kAdminAccess, [&](const Caller&) -> absl::Status {
    auto chips = core::ParseChipListJson(request->json());
    if (!chips.ok()) return chips.status();
    auto report = store_->Import(*chips, request->overwrite(), UnixNow());
    if (!report.ok()) return report.status();
    spdlog::info("imported chips: {} added, {} updated, {} unchanged", report->added,
                 report->updated, report->unchanged);
    response->set_added(report->added);
    response->set_updated(report->updated);
    response->set_unchanged(report->unchanged);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* RegistryServiceImpl::ExportChips(
    grpc::CallbackServerContext* context, const yirage::v1::ExportChipsRequest* request,
    yirage::v1::ExportChipsResponse* response) {
  return ServeUnary(context, *auth_, kClientAccess, [&](const Caller&) -> absl::Status {
    auto chips = store_->List({request->vendor(), request->backend(), request->category()});
    if (!chips.ok()) return chips.status();
    response->set_json(core::ChipListToJsonText(*chips));
    response->set_count(static_cast<int32_t>(chips->size()));
    return absl::OkStatus();
  });
}

grpc::ServerWriteReactor<ChipEvent>* RegistryServiceImpl::WatchChips(
    grpc::CallbackServerContext* context, const yirage::v1::WatchChipsRequest* /*request*/) {
  if (absl::StatusOr<Caller> caller = auth_->Authorize(*context, kClientAccess); !caller.ok()) {
    return new RefusedWatch(ToGrpc(caller.status()));
  }
  // A passed deadline or a cancelled call reaches the reactor as OnCancel.
  return new ChipWatchReactor(broadcaster_);
}

grpc::ServerUnaryReactor* RegistryServiceImpl::GetSearchSpace(
    grpc::CallbackServerContext* context, const yirage::v1::GetChipRequest* request,
    yirage::v1::SearchSpace* response) {
  return ServeUnary(context, *auth_, kClientAccess, [&](const Caller&) -> absl::Status {
    auto chip = store_->Get(request->chip_id());
    if (!chip.ok()) return chip.status();
    core::SearchOptions base;
    base.backend = chip->backend();
    base.max_candidates = 0;
    core::SearchOptions options = core::SearchOptionsForChip(*chip, base);
    if (options.max_candidates == 0) options.max_candidates = max_candidates_default_;
    *response = core::SearchSpaceOf(options);
    return absl::OkStatus();
  });
}

}  // namespace yirage::server
