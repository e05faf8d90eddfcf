// yirage-schedule-sweep: a tuning aid for a backend's kernel families, run on
// the device. Takes a graph's first candidate with a family kernel (the
// search's own, from the backend's describe()), sets that kernel's knobs to
// each SPEC, and verifies and times every resulting plan, so that schedule
// points outside the backend's list can be compared in one run.
//
//   yirage-schedule-sweep --backend-library PATH [--backend cuda] [--plan N]
//       GRAPH.json SPEC...
//   SPEC: form,stages,warps,split_k[,warp_rows[,block_rows[,tma]]] (0 = the
//   backend's choice): StreamedMatmulSchedule.form or AttentionSchedule.merge
//   by number, then the family's knobs (tma 1: attention's TMA copies).
//
// Exit codes: 0 done (every plan verified), 1 a plan did not verify, 2 bad
// arguments or a failed call, 3 no device.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "core/candidate_generator.h"
#include "core/graph.h"
#include "core/graph_json.h"
#include "core/kernel_family.h"
#include "core/tensor.h"
#include "workers/backend_library.h"

namespace {

using yirage::worker::BackendLibrary;
using yirage::worker::CompiledModule;

int Fail(const std::string& what) {
  std::fprintf(stderr, "yirage-schedule-sweep: %s\n", what.c_str());
  return 2;
}

// Sets the family knobs of `schedule` from a SPEC; false when malformed.
bool ApplySpec(const std::string& spec, yirage::v1::Schedule* schedule) {
  int form = 0, stages = 0, warps = 0, split_k = 0, warp_rows = -1, block_rows = -1, tma = 0;
  if (std::sscanf(spec.c_str(), "%d,%d,%d,%d,%d,%d,%d", &form, &stages, &warps, &split_k,
                  &warp_rows, &block_rows, &tma) < 4) {
    return false;
  }
  if (schedule->has_streamed_matmul()) {
    yirage::v1::StreamedMatmulSchedule* s = schedule->mutable_streamed_matmul();
    s->Clear();
    s->set_form(static_cast<yirage::v1::StreamedMatmulSchedule::Form>(form));
    s->set_stages(stages);
    s->set_warps(warps);
    s->set_split_k(split_k);
    return true;
  }
  yirage::v1::AttentionSchedule* a = schedule->mutable_attention();
  a->Clear();
  a->set_merge(static_cast<yirage::v1::AttentionSchedule::Merge>(form));
  a->set_stages(stages);
  a->set_warps(warps);
  a->set_split_k(split_k);
  if (warp_rows >= 0) a->set_warp_rows(warp_rows);
  if (block_rows >= 0) a->set_block_rows(block_rows);
  a->set_tma(tma != 0);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Verify and time a family kernel's schedule points on the device"};
  std::string library, backend = "cuda", graph_path;
  int plan_index = -1;
  std::vector<std::string> specs;
  app.add_option("--backend-library", library, "the backend's shared library")->required();
  app.add_option("--backend", backend, "its name");
  app.add_option("--plan", plan_index, "the candidate to sweep (default: the first with a family)");
  app.add_option("graph", graph_path, "graph JSON")->required();
  app.add_option("specs", specs, "form,stages,warps,split_k[,warp_rows[,block_rows[,tma]]]");
  CLI11_PARSE(app, argc, argv);

  auto lib = BackendLibrary::LoadFile(backend, library);
  if (!lib.ok()) return Fail(std::string(lib.status().message()));
  bool has_device = false;
  auto probe = (*lib)->Probe(&has_device);
  if (!probe.ok()) return Fail(std::string(probe.status().message()));
  if (!has_device) {
    std::fprintf(stderr, "yirage-schedule-sweep: no device: %s\n", probe->c_str());
    return 3;
  }
  auto kernels = (*lib)->Describe();
  if (!kernels.ok()) return Fail(std::string(kernels.status().message()));
  std::ifstream in(graph_path);
  std::stringstream text;
  text << in.rdbuf();
  auto proto = yirage::core::ParseGraphJson(text.str());
  if (!proto.ok()) return Fail(absl::StrCat(graph_path, ": ", proto.status().message()));
  auto graph = yirage::core::Graph::FromProto(*proto);
  if (!graph.ok()) return Fail(absl::StrCat(graph_path, ": ", graph.status().message()));

  yirage::core::SearchOptions options;  // as the scheduler searches for this worker
  options.backend = backend;
  options.kernels = *kernels;
  auto plans = yirage::core::GenerateCandidates(*graph, options);
  if (!plans.ok()) return Fail(std::string(plans.status().message()));
  int family_kernel = -1;
  for (int i = 0; i < static_cast<int>(plans->size()) && family_kernel < 0; ++i) {
    if (plan_index >= 0 && i != plan_index) continue;
    for (int k = 0; k < (*plans)[i].kernels_size(); ++k) {
      if (yirage::core::ScheduleFamily((*plans)[i].kernels(k).schedule()) !=
          yirage::v1::FAMILY_PATTERN_UNSPECIFIED) {
        plan_index = i;
        family_kernel = k;
        break;
      }
    }
  }
  if (family_kernel < 0) return Fail("no candidate has a kernel of the backend's families");
  const yirage::v1::Plan& base = (*plans)[plan_index];
  if (specs.empty()) specs.push_back("0,0,0,0");

  yirage::v1::CompileRequest request;
  *request.mutable_graph() = *proto;
  std::vector<std::string> labels;
  for (const std::string& spec : specs) {
    yirage::v1::Plan p = base;
    if (!ApplySpec(spec, p.mutable_kernels(family_kernel)->mutable_schedule())) {
      return Fail(absl::StrCat("bad SPEC '", spec, "'"));
    }
    *request.add_plans() = p;
    labels.push_back(spec);
  }
  yirage::v1::CompileResponse response;
  auto module = (*lib)->Compile(request, &response);
  if (!module.ok()) return Fail(std::string(module.status().message()));

  const std::vector<yirage::core::HostTensor> inputs = yirage::core::MakeRandomInputs(*graph, 42);
  auto reference = yirage::core::EvaluateReference(*graph, inputs);
  if (!reference.ok()) return Fail(std::string(reference.status().message()));
  std::vector<std::vector<uint8_t>> in_bytes, out_bytes;
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
  for (int i = 0; i < graph->num_inputs(); ++i) {
    in_bytes.push_back(yirage::core::EncodeTensor(inputs[i], graph->tensor(i).dtype));
    in_ptrs.push_back(in_bytes.back().data());
  }
  for (int t : graph->outputs()) {
    const auto& info = graph->tensor(t);
    out_bytes.emplace_back(info.num_elements() * yirage::core::DTypeSize(info.dtype));
  }
  for (auto& b : out_bytes) out_ptrs.push_back(b.data());
  const yirage::core::Tolerance tolerance =
      yirage::core::ResolveTolerance(*graph, proto->tolerance());

  std::printf("SWEEP %s: plan #%d (%s), kernel %d\n", proto->name().c_str(), plan_index,
              base.description().c_str(), family_kernel);
  bool all_ok = true;
  for (int i = 0; i < response.plans_size(); ++i) {
    const yirage::v1::CompiledPlan& cp = response.plans(i);
    if (!cp.ok()) {
      std::printf("SWEEP %-16s refused or failed: %s\n", labels[i].c_str(),
                  cp.error().substr(0, 300).c_str());
      continue;
    }
    if (absl::Status s = (*module)->Run(i, in_ptrs, out_ptrs); !s.ok()) {
      std::printf("SWEEP %-16s run failed: %s\n", labels[i].c_str(),
                  std::string(s.message()).c_str());
      all_ok = false;
      continue;
    }
    std::vector<yirage::core::HostTensor> got;
    for (size_t k = 0; k < graph->outputs().size(); ++k) {
      const auto& info = graph->tensor(graph->outputs()[k]);
      got.push_back(yirage::core::DecodeTensor(out_bytes[k].data(), info.shape, info.dtype));
    }
    const yirage::core::CompareResult r =
        yirage::core::CompareOutputs(*graph, *reference, got, tolerance);
    all_ok = all_ok && r.ok;
    auto timing = (*module)->Time(i, in_ptrs, out_ptrs, YirageTimingOptions{3, 100, 0.05, 5, 0, 0});
    const std::string& src = cp.source();
    size_t at = src.find("// kernel ");
    std::string what = at != std::string::npos ? src.substr(at, src.find('\n', at) - at) : "";
    std::printf("SWEEP %-16s %s %8.2f us  %s\n", labels[i].c_str(), r.ok ? "ok  " : "BAD ",
                timing.ok() ? timing->median_us : -1.0, what.c_str());
    std::fflush(stdout);
  }
  return all_ok ? 0 : 1;
}
