// The `chips` commands of yirage-client (the chip registry). Each returns the
// process exit code: 0 only on success; errors go to stderr.
#ifndef YIRAGE_CLIENT_CHIP_COMMANDS_H_
#define YIRAGE_CLIENT_CHIP_COMMANDS_H_

#include <chrono>
#include <iosfwd>
#include <memory>
#include <string>

#include "yirage/v1/registry.grpc.pb.h"

namespace yirage::client {

struct ChipListOptions {
  std::string vendor;
  std::string backend;
  std::string category;
};

class ChipCommands {
 public:
  // Calls the server at `server` (for messages) through `channel`.
  ChipCommands(const std::string& server, std::shared_ptr<grpc::Channel> channel,
               std::chrono::milliseconds rpc_timeout, bool json, std::ostream& out,
               std::ostream& err);

  int List(const ChipListOptions& options);
  int Get(const std::string& chip_id);
  int Register(const std::string& path, bool overwrite);
  int Delete(const std::string& chip_id);
  int Import(const std::string& path, bool overwrite);
  int Export(const std::string& path, const ChipListOptions& filter);
  // Prints each event as it happens, one line each (JSON lines with --json),
  // after a first "watching" line. Stops after `count` events (0 = never) or
  // `for_seconds` (0 = never); exit 0 then.
  int Watch(int count, double for_seconds);
  int SearchConfig(const std::string& chip_id);

 private:
  int Fail(const std::string& what, const grpc::Status& status);
  bool ReadFile(const std::string& path, std::string* text);

  std::unique_ptr<yirage::v1::RegistryService::Stub> stub_;
  std::string server_;
  std::chrono::milliseconds rpc_timeout_;
  bool json_;
  std::ostream& out_;
  std::ostream& err_;
};

}  // namespace yirage::client

#endif  // YIRAGE_CLIENT_CHIP_COMMANDS_H_
