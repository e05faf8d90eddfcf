// RegistryService (the chip registry API, on the client port) on the gRPC
// callback API, and the broadcaster that streams chip changes to WatchChips
// subscribers.
#ifndef YIRAGE_SERVER_REGISTRY_SERVICE_H_
#define YIRAGE_SERVER_REGISTRY_SERVICE_H_

#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/auth.h"
#include "server/chip_store.h"
#include "yirage/v1/registry.grpc.pb.h"

namespace yirage::server {

class ChipWatchReactor;

// Fans chip events out to every live WatchChips stream. Thread-safe.
class ChipBroadcaster {
 public:
  ~ChipBroadcaster() { CloseAll(); }
  // Queues `event` on every subscriber (in one order for all of them).
  void Publish(const yirage::v1::ChipEvent& event);
  // Ends every stream (OK) and refuses new ones: for shutdown.
  void CloseAll();
  int subscribers();

 private:
  friend class ChipWatchReactor;
  // False once closed.
  bool Subscribe(ChipWatchReactor* reactor);
  void Unsubscribe(ChipWatchReactor* reactor);

  absl::Mutex mu_;
  std::set<ChipWatchReactor*> subscribers_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// Thread-safe. Unary calls check cancellation and their deadline before
// doing work; a WatchChips stream ends when its caller cancels or its
// deadline passes, and at server shutdown.
class RegistryServiceImpl final : public yirage::v1::RegistryService::CallbackService {
 public:
  // REQUIRES: store and broadcaster outlive the service.
  RegistryServiceImpl(ChipStore* store, ChipBroadcaster* broadcaster, int max_candidates_default,
                      const Authenticator* auth)
      : store_(store),
        broadcaster_(broadcaster),
        max_candidates_default_(max_candidates_default),
        auth_(auth) {}

  grpc::ServerUnaryReactor* RegisterChip(grpc::CallbackServerContext* context,
                                         const yirage::v1::RegisterChipRequest* request,
                                         yirage::v1::RegisterChipResponse* response) override;
  grpc::ServerUnaryReactor* GetChip(grpc::CallbackServerContext* context,
                                    const yirage::v1::GetChipRequest* request,
                                    yirage::v1::Chip* response) override;
  grpc::ServerUnaryReactor* ListChips(grpc::CallbackServerContext* context,
                                      const yirage::v1::ListChipsRequest* request,
                                      yirage::v1::ListChipsResponse* response) override;
  grpc::ServerUnaryReactor* DeleteChip(grpc::CallbackServerContext* context,
                                       const yirage::v1::DeleteChipRequest* request,
                                       yirage::v1::DeleteChipResponse* response) override;
  grpc::ServerUnaryReactor* ImportChips(grpc::CallbackServerContext* context,
                                        const yirage::v1::ImportChipsRequest* request,
                                        yirage::v1::ImportChipsResponse* response) override;
  grpc::ServerUnaryReactor* ExportChips(grpc::CallbackServerContext* context,
                                        const yirage::v1::ExportChipsRequest* request,
                                        yirage::v1::ExportChipsResponse* response) override;
  grpc::ServerWriteReactor<yirage::v1::ChipEvent>* WatchChips(
      grpc::CallbackServerContext* context, const yirage::v1::WatchChipsRequest* request) override;
  grpc::ServerUnaryReactor* GetSearchSpace(grpc::CallbackServerContext* context,
                                           const yirage::v1::GetChipRequest* request,
                                           yirage::v1::SearchSpace* response) override;

 private:
  ChipStore* const store_;
  ChipBroadcaster* const broadcaster_;
  const int max_candidates_default_;
  const Authenticator* const auth_;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_REGISTRY_SERVICE_H_
