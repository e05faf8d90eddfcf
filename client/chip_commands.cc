#include "client/chip_commands.h"

#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "client/call_failure.h"
#include "client/text_table.h"
#include "common/rpc_util.h"
#include "core/chip.h"
#include "nlohmann/json.hpp"

namespace yirage::client {
namespace {

using nlohmann::json;
using yirage::v1::Chip;
using yirage::v1::ChipEvent;

std::string Num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string Join(const google::protobuf::RepeatedField<int32_t>& values) {
  std::string out;
  for (int v : values) out += (out.empty() ? "" : " ") + std::to_string(v);
  return out.empty() ? "-" : out;
}

}  // namespace

ChipCommands::ChipCommands(const std::string& server, std::shared_ptr<grpc::Channel> channel,
                           std::chrono::milliseconds rpc_timeout, bool json, std::ostream& out,
                           std::ostream& err)
    : stub_(yirage::v1::RegistryService::NewStub(std::move(channel))),
      server_(server),
      rpc_timeout_(rpc_timeout),
      json_(json),
      out_(out),
      err_(err) {}

int ChipCommands::Fail(const std::string& what, const grpc::Status& status) {
  return ReportCallFailure(err_, server_, what, status);
}

bool ChipCommands::ReadFile(const std::string& path, std::string* text) {
  std::ifstream in(path);
  if (!in) {
    err_ << "yirage-client: cannot read '" << path << "'\n";
    return false;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  *text = buffer.str();
  return true;
}

int ChipCommands::List(const ChipListOptions& options) {
  yirage::v1::ListChipsRequest request;
  request.set_vendor(options.vendor);
  request.set_backend(options.backend);
  request.set_category(options.category);
  yirage::v1::ListChipsResponse response;
  auto context = ContextWithDeadline(rpc_timeout_);
  grpc::Status status = stub_->ListChips(context.get(), request, &response);
  if (!status.ok()) return Fail("chips list", status);
  if (json_) {
    json list = json::array();
    for (const Chip& c : response.chips()) list.push_back(core::ChipToJson(c, true));
    out_ << json{{"chips", list}}.dump(2) << "\n";
    return 0;
  }
  TextTable table({"CHIP", "VENDOR", "KIND", "BACKEND", "ARCH", "CUS", "MEM GB", "GB/S", "NAME"});
  for (const Chip& c : response.chips()) {
    std::string name = c.chip_name();
    auto it = c.metadata().find("detected");
    if (it != c.metadata().end()) name += " [detected]";
    table.Add({c.chip_id(), c.vendor(), c.category(), c.backend(), c.arch_code(),
               std::to_string(c.compute().num_compute_units()), Num(c.memory().capacity_gb()),
               Num(c.memory().bandwidth_gbps()), name});
  }
  table.Print(out_);
  out_ << response.chips_size() << " chip(s)\n";
  return 0;
}

int ChipCommands::Get(const std::string& chip_id) {
  yirage::v1::GetChipRequest request;
  request.set_chip_id(chip_id);
  Chip chip;
  auto context = ContextWithDeadline(rpc_timeout_);
  grpc::Status status = stub_->GetChip(context.get(), request, &chip);
  if (!status.ok()) return Fail("chips get", status);
  // The JSON format is the readable form too.
  out_ << core::ChipToJson(chip, json_).dump(2) << "\n";
  return 0;
}

int ChipCommands::Register(const std::string& path, bool overwrite) {
  std::string text;
  if (!ReadFile(path, &text)) return 1;
  yirage::v1::RegisterChipRequest request;
  request.set_json(text);
  request.set_overwrite(overwrite);
  yirage::v1::RegisterChipResponse response;
  auto context = ContextWithDeadline(rpc_timeout_);
  grpc::Status status = stub_->RegisterChip(context.get(), request, &response);
  if (!status.ok()) return Fail("chips register " + path, status);
  if (json_) {
    out_ << json{{"chip_id", response.chip().chip_id()}, {"created", response.created()}}.dump(2)
         << "\n";
  } else {
    out_ << (response.created() ? "registered " : "updated ") << response.chip().chip_id() << "\n";
  }
  return 0;
}

int ChipCommands::Delete(const std::string& chip_id) {
  yirage::v1::DeleteChipRequest request;
  request.set_chip_id(chip_id);
  yirage::v1::DeleteChipResponse response;
  auto context = ContextWithDeadline(rpc_timeout_);
  grpc::Status status = stub_->DeleteChip(context.get(), request, &response);
  if (!status.ok()) return Fail("chips delete", status);
  if (json_) {
    out_ << json{{"deleted", chip_id}}.dump(2) << "\n";
  } else {
    out_ << "deleted " << chip_id << "\n";
  }
  return 0;
}

int ChipCommands::Import(const std::string& path, bool overwrite) {
  std::string text;
  if (!ReadFile(path, &text)) return 1;
  yirage::v1::ImportChipsRequest request;
  request.set_json(text);
  request.set_overwrite(overwrite);
  yirage::v1::ImportChipsResponse response;
  auto context = ContextWithDeadline(rpc_timeout_);
  grpc::Status status = stub_->ImportChips(context.get(), request, &response);
  if (!status.ok()) return Fail("chips import " + path, status);
  if (json_) {
    out_ << json{{"added", response.added()},
                 {"updated", response.updated()},
                 {"unchanged", response.unchanged()}}
                .dump(2)
         << "\n";
  } else {
    out_ << "imported " << path << ": " << response.added() << " added, " << response.updated()
         << " updated, " << response.unchanged() << " unchanged\n";
  }
  return 0;
}

int ChipCommands::Export(const std::string& path, const ChipListOptions& filter) {
  yirage::v1::ExportChipsRequest request;
  request.set_vendor(filter.vendor);
  request.set_backend(filter.backend);
  request.set_category(filter.category);
  yirage::v1::ExportChipsResponse response;
  auto context = ContextWithDeadline(rpc_timeout_);
  grpc::Status status = stub_->ExportChips(context.get(), request, &response);
  if (!status.ok()) return Fail("chips export", status);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << response.json();
    if (!out.flush()) {
      err_ << "yirage-client: cannot write '" << tmp << "'\n";
      return 1;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err_ << "yirage-client: cannot write '" << path << "'\n";
    return 1;
  }
  if (json_) {
    out_ << json{{"path", path}, {"count", response.count()}}.dump(2) << "\n";
  } else {
    out_ << "exported " << response.count() << " chip(s) to " << path << "\n";
  }
  return 0;
}

int ChipCommands::Watch(int count, double for_seconds) {
  grpc::ClientContext context;
  if (for_seconds > 0) {
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(static_cast<int64_t>(for_seconds * 1000)));
  }
  yirage::v1::WatchChipsRequest request;
  auto reader = stub_->WatchChips(&context, request);
  ChipEvent event;
  int seen = 0;
  while (reader->Read(&event)) {
    const std::string kind = ChipEvent::Kind_Name(event.kind());
    if (json_) {
      json line = {{"event", kind}, {"chip_id", event.chip_id()}, {"unix", event.event_unix()}};
      if (event.has_chip()) line["chip"] = core::ChipToJson(event.chip(), true);
      out_ << line.dump() << std::endl;
    } else if (event.kind() == ChipEvent::WATCHING) {
      out_ << "watching chips on " << server_ << std::endl;
    } else {
      out_ << kind << " " << event.chip_id();
      if (event.has_chip()) out_ << " (" << event.chip().chip_name() << ")";
      out_ << std::endl;
    }
    if (event.kind() != ChipEvent::WATCHING && count > 0 && ++seen >= count) {
      context.TryCancel();
      (void)reader->Finish();
      return 0;
    }
  }
  grpc::Status status = reader->Finish();
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && for_seconds > 0) return 0;
  if (!status.ok()) return Fail("chips watch", status);
  return 0;
}

int ChipCommands::SearchConfig(const std::string& chip_id) {
  yirage::v1::GetChipRequest request;
  request.set_chip_id(chip_id);
  yirage::v1::SearchSpace space;
  auto context = ContextWithDeadline(rpc_timeout_);
  grpc::Status status = stub_->GetSearchSpace(context.get(), request, &space);
  if (!status.ok()) return Fail("chips search-config", status);
  if (json_) {
    json j = {{"chip_id", space.chip_id()},
              {"backend", space.backend()},
              {"tile_sizes",
               json(std::vector<int>(space.tile_sizes().begin(), space.tile_sizes().end()))},
              {"block_threads",
               json(std::vector<int>(space.block_threads().begin(), space.block_threads().end()))},
              {"grid_blocks",
               json(std::vector<int>(space.grid_blocks().begin(), space.grid_blocks().end()))},
              {"max_tile_bytes", space.max_tile_bytes()},
              {"num_threads", space.num_threads()},
              {"cache_bytes", space.cache_bytes()},
              {"simd_width_floats", space.simd_width_floats()},
              {"warp_size", space.warp_size()},
              {"num_compute_units", space.num_compute_units()},
              {"max_threads_per_block", space.max_threads_per_block()},
              {"max_candidates", space.max_candidates()}};
    out_ << j.dump(2) << "\n";
    return 0;
  }
  out_ << "chip                  " << space.chip_id() << " (" << space.backend() << ")\n"
       << "tile sizes            " << Join(space.tile_sizes()) << "\n"
       << "max tile bytes        " << space.max_tile_bytes() << "\n"
       << "threads per block     " << Join(space.block_threads()) << "\n"
       << "grid blocks           " << Join(space.grid_blocks()) << "\n"
       << "warp size             " << space.warp_size() << "\n"
       << "compute units         " << space.num_compute_units() << "\n"
       << "max threads per block " << space.max_threads_per_block() << "\n"
       << "cpu threads           " << space.num_threads() << "\n"
       << "cache bytes per unit  " << space.cache_bytes() << "\n"
       << "vector width (floats) " << space.simd_width_floats() << "\n"
       << "max candidates        " << space.max_candidates() << "\n";
  return 0;
}

}  // namespace yirage::client
