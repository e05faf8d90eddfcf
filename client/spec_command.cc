// yirage-client submit-spec: one job a variant of a spec file, then (with
// --wait) a summary table of them.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/client_commands.h"
#include "client/spec_file.h"
#include "client/text_table.h"
#include "common/rpc_util.h"
#include "nlohmann/json.hpp"

namespace yirage::client {
namespace {

std::string DimsText(const SpecVariant& v) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : v.dims) parts.push_back(absl::StrCat(name, "=", value));
  return absl::StrJoin(parts, " ");
}

}  // namespace

int ClientCommands::SubmitSpec(const SpecSubmitOptions& options) {
  absl::StatusOr<std::string> text = ReadTextFile(options.spec_path, "spec file");
  if (!text.ok()) {
    err_ << "yirage-client: " << text.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<SpecFile> spec = ParseSpec(*text);
  if (!spec.ok()) {
    err_ << "yirage-client: " << options.spec_path << ": " << spec.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::vector<SpecVariant>> variants = SelectVariants(*spec, options.variants);
  if (!variants.ok()) {
    err_ << "yirage-client: " << options.spec_path << ": " << variants.status().message() << "\n";
    return 2;
  }
  // Every variant's graph and formulas first: a bad variant submits nothing.
  struct Item {
    SpecVariant variant;
    yirage::v1::Graph graph;
    std::optional<double> flops, bytes;
    std::string job_id;
    yirage::v1::Job job;
    // Of the ended job's best time, where it has one.
    std::optional<double> tflops() const {
      return flops && job.best().time_us() > 0
                 ? std::optional<double>(*flops / job.best().time_us() * 1e-6)
                 : std::nullopt;
    }
    std::optional<double> gbps() const {
      return bytes && job.best().time_us() > 0
                 ? std::optional<double>(*bytes / job.best().time_us() * 1e-3)
                 : std::nullopt;
    }
  };
  std::vector<Item> items;
  nlohmann::json graphs = nlohmann::json::array();
  for (const SpecVariant& v : *variants) {
    Item item;
    item.variant = v;
    nlohmann::json graph_json;
    absl::StatusOr<yirage::v1::Graph> graph =
        SpecGraph(*spec, v, options.print_graphs ? &graph_json : nullptr);
    absl::StatusOr<std::optional<double>> flops = SpecFormula(spec->flops, v);
    absl::StatusOr<std::optional<double>> bytes = SpecFormula(spec->bytes, v);
    for (const absl::Status& s : {graph.status(), flops.status(), bytes.status()}) {
      if (!s.ok()) {
        err_ << "yirage-client: " << options.spec_path << ": variant '" << v.name
             << "': " << s.message() << "\n";
        return 1;
      }
    }
    item.graph = *std::move(graph);
    item.flops = *flops;
    item.bytes = *bytes;
    if (options.print_graphs) graphs.push_back(std::move(graph_json));
    items.push_back(std::move(item));
  }
  if (options.print_graphs) {
    out_ << (graphs.size() == 1 ? graphs[0] : graphs).dump(1) << "\n";
    return 0;
  }

  for (Item& item : items) {
    SubmitOptions submit = options.submit;
    submit.request_id.clear();
    yirage::v1::SubmitJobRequest request = SubmitRequest(item.graph, submit);
    yirage::v1::SubmitJobResponse response;
    const std::string what = absl::StrCat(options.spec_path, " variant ", item.variant.name);
    grpc::Status status = SendSubmit(what, request, &response);
    if (!status.ok()) return Fail("submit " + what, status);
    item.job_id = response.job_id();
    if (!json_ && options.submit.wait) {
      err_ << item.variant.name << ": ";
      SaySubmitted(response);
    }
  }
  if (!options.submit.wait) {
    if (json_) {
      nlohmann::json jobs = nlohmann::json::array();
      for (const Item& item : items) {
        jobs.push_back({{"variant", item.variant.name}, {"job_id", item.job_id}});
      }
      out_ << nlohmann::json{{"spec", spec->name}, {"jobs", jobs}}.dump(2) << "\n";
    } else {
      for (const Item& item : items) out_ << item.variant.name << "  " << item.job_id << "\n";
    }
    return 0;
  }
  // The jobs run side by side on the server; they end in any order.
  int rc = 0;
  for (Item& item : items) {
    if (!json_) err_ << "variant " << item.variant.name << " (" << item.job_id << ")\n";
    const int one = WaitForJob(item.job_id, !json_, &item.job);
    if (one != 0) rc = 1;
  }
  if (json_) {
    nlohmann::json rows = nlohmann::json::array();
    for (const Item& item : items) {
      nlohmann::json row = {{"variant", item.variant.name},
                            {"dims", item.variant.dims},
                            {"job_id", item.job_id},
                            {"state", yirage::v1::JobState_Name(item.job.state())}};
      if (item.flops.has_value()) row["flops"] = *item.flops;
      if (item.bytes.has_value()) row["bytes"] = *item.bytes;
      if (item.job.has_best()) {
        row["best_time_us"] = item.job.best().time_us();
        row["speedup"] = item.job.best().speedup();
        if (item.tflops()) row["tflops"] = *item.tflops();
        if (item.gbps()) row["gbps"] = *item.gbps();
      }
      if (!item.job.message().empty()) row["message"] = item.job.message();
      rows.push_back(std::move(row));
    }
    out_ << nlohmann::json{{"spec", spec->name}, {"variants", rows}}.dump(2) << "\n";
    return rc;
  }
  TextTable table({"VARIANT", "DIMS", "JOB", "STATE", "BEST_US", "SPEEDUP", "TFLOP/S", "GB/S"});
  for (const Item& item : items) {
    std::string best = "-", speedup = "-", tflops = "-", gbps = "-";
    if (item.job.has_best() && item.job.best().time_us() > 0) {
      best = absl::StrFormat("%.2f", item.job.best().time_us());
      speedup = absl::StrFormat("%.2fx", item.job.best().speedup());
      if (item.tflops()) tflops = absl::StrFormat("%.3f", *item.tflops());
      if (item.gbps()) gbps = absl::StrFormat("%.1f", *item.gbps());
    }
    table.Add({item.variant.name, DimsText(item.variant), item.job_id,
               yirage::v1::JobState_Name(item.job.state()), best, speedup, tflops, gbps});
  }
  out_ << "spec " << spec->name << ": " << items.size() << " variant"
       << (items.size() == 1 ? "" : "s") << "\n";
  table.Print(out_);
  return rc;
}

}  // namespace yirage::client
