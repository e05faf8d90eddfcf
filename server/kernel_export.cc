#include "server/kernel_export.h"

#include <algorithm>
#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/graph.h"
#include "nlohmann/json.hpp"
#include "server/cpu_python_loader.h"
#include "server/cuda_python_loader.h"

namespace yirage::server {
namespace {

void AddFile(yirage::v1::GetKernelResponse* response, const std::string& path,
             const std::string& content) {
  auto* f = response->add_files();
  f->set_path(path);
  f->set_content(content);
}

nlohmann::json TensorJson(const core::TensorInfo& t) {
  return {{"name", t.name},
          {"shape", t.shape},
          {"dtype", std::string(core::DTypeName(t.dtype))},
          {"bytes", t.num_elements() * core::DTypeSize(t.dtype)}};
}

// The fields every manifest starts with: format, job, candidate, plan, its
// measured time and errors.
nlohmann::json ManifestHeader(const std::string& format, const std::string& job_id,
                              const JobStore::BestKernel& best, const core::Graph& graph) {
  return {
      {"format", format},
      {"job_id", job_id},
      {"candidate_id", best.candidate.candidate_id()},
      {"graph", graph.name()},
      {"backend", best.backend},
      {"plan", best.candidate.plan().description()},
      {"time_us", best.candidate.time_us()},
      {"baseline_time_us", best.candidate.baseline_time_us()},
      {"max_abs_error", best.candidate.max_abs_error()},
      {"max_rel_error", best.candidate.max_rel_error()},
  };
}

nlohmann::json TensorList(const core::Graph& graph, bool outputs) {
  nlohmann::json list = nlohmann::json::array();
  if (outputs) {
    for (int id : graph.outputs()) list.push_back(TensorJson(graph.tensor(id)));
  } else {
    for (int i = 0; i < graph.num_inputs(); ++i) list.push_back(TensorJson(graph.tensor(i)));
  }
  return list;
}

// The manifest's "buffers" and "launches" (numbers as JSON numbers, which
// protobuf's JSON mapping would print as strings for 64-bit fields).
nlohmann::json BuffersJson(const yirage::v1::LaunchManifest& m) {
  nlohmann::json buffers = nlohmann::json::array();
  for (const auto& b : m.buffers()) {
    buffers.push_back({{"bytes", b.bytes()}, {"zero_init", b.zero_init()}, {"what", b.what()}});
  }
  return buffers;
}

nlohmann::json LaunchesJson(const yirage::v1::LaunchManifest& m) {
  nlohmann::json launches = nlohmann::json::array();
  for (const auto& l : m.launches()) {
    std::vector<int> args(l.args().begin(), l.args().end());
    if (l.has_library()) {
      const auto& c = l.library();
      launches.push_back({{"name", l.name()},
                          {"args", args},
                          {"library",
                           {{"call", c.call()},
                            {"args", "A, B, C, bias, D, workspace"},
                            {"data_type", c.data_type()},
                            {"compute_type", c.compute_type()},
                            {"scale_type", c.scale_type()},
                            {"transpose_b", c.transpose_b()},
                            {"batch", c.batch()},
                            {"m", c.m()},
                            {"n", c.n()},
                            {"k", c.k()},
                            {"a_batch_stride", c.a_batch_stride()},
                            {"b_batch_stride", c.b_batch_stride()},
                            {"alpha", c.alpha()},
                            {"beta", c.beta()},
                            {"bias", c.bias()},
                            {"epilogue", c.epilogue()},
                            {"algo_index", c.algo_index()},
                            {"workspace_bytes", c.workspace_bytes()}}}});
      continue;
    }
    std::vector<int64_t> grid(l.grid().begin(), l.grid().end());
    nlohmann::json launch = {{"name", l.name()},   {"grid", grid},
                             {"block", l.block()}, {"smem_bytes", l.smem_bytes()},
                             {"args", args},       {"cooperative", l.cooperative()}};
    if (l.tensor_maps_size() > 0) {
      nlohmann::json maps = nlohmann::json::array();
      for (const auto& t : l.tensor_maps()) {
        maps.push_back({{"buffer", t.buffer()},
                        {"data_type", t.data_type()},
                        {"dims", std::vector<int64_t>(t.dims().begin(), t.dims().end())},
                        {"stride_bytes", t.stride_bytes()},
                        {"batch_stride_bytes", t.batch_stride_bytes()},
                        {"box", std::vector<int>(t.box().begin(), t.box().end())},
                        {"swizzle", t.swizzle()}});
      }
      launch["tensor_maps"] = maps;
    }
    launches.push_back(launch);
  }
  return launches;
}

// CUDA: kernel.cu (the stored source), manifest.json (the launches the
// backend reported with the candidate: LaunchManifest in backend.proto) and
// yirage_kernel.py, which runs it on PyTorch tensors.
absl::StatusOr<yirage::v1::GetKernelResponse> ExportCudaKernel(const std::string& job_id,
                                                               const JobStore::BestKernel& best,
                                                               const core::Graph& graph) {
  if (!best.launch.has_value() || best.launch->launches_size() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", job_id,
        "': the best candidate was stored without its launch manifest (it was evaluated by an "
        "older worker): run the job again"));
  }
  std::vector<std::string> names;
  for (const auto& t : TensorList(graph, false)) names.push_back(t["name"].get<std::string>());
  const std::string usage = absl::StrCat("import torch, yirage_kernel; out = yirage_kernel.run(",
                                         absl::StrJoin(names, ", "), ")");
  nlohmann::json manifest = ManifestHeader("yirage-cuda-kernel/1", job_id, best, graph);
  manifest.update({
      {"source", "kernel.cu"},
      {"compile",
       "NVRTC: --gpu-architecture=sm_<major><minor>[a] --std=c++17 -I$CUDA_HOME/include "
       "(sm_90a on an H200); every kernel is extern \"C\""},
      {"calling",
       "launch every entry of 'launches' in order on one stream: grid, block (x only), "
       "smem_bytes of dynamic shared memory (set CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES "
       "above 48 KiB), with cuLaunchCooperativeKernel where 'cooperative' is true (its blocks "
       "wait for each other); every argument is a device pointer: argument id i < #inputs is input "
       "i, "
       "then the outputs, then scratch buffer (id - #inputs - #outputs); zero_init buffers must "
       "be zero before the first launch (the kernels leave them zero); an entry with a "
       "'library' object is no kernel but one cublasLtMatmul call: its args are the pointers A, "
       "B, C, bias, D, workspace, and 'library' gives the shapes, types, epilogue and the "
       "index of the algorithm among cublasLtMatmulAlgoGetHeuristic's results "
       "(yirage_kernel.py makes that call); a launch with 'tensor_maps' takes them first, "
       "before its pointer arguments: each a CUtensorMap (by value) from "
       "cuTensorMapEncodeTiled over buffer id 'buffer' with the rank of 'dims' ({inner, outer} "
       "or {inner, outer, batch} elements), the outer stride 'stride_bytes' (then "
       "'batch_stride_bytes' for a third dim), 'box' (one extent a dim), element strides 1, "
       "no interleave, "
       "'swizzle', L2 promotion 256B, no out-of-bounds fill"},
      {"inputs", TensorList(graph, false)},
      {"outputs", TensorList(graph, true)},
      {"layout", "row-major, dense; float16/bfloat16 as IEEE 16-bit words"},
      {"buffers", BuffersJson(*best.launch)},
      {"launches", LaunchesJson(*best.launch)},
      {"usage", usage},
  });
  yirage::v1::GetKernelResponse response;
  response.set_candidate_id(best.candidate.candidate_id());
  AddFile(&response, "kernel.cu", best.source);
  AddFile(&response, "manifest.json", manifest.dump(2) + "\n");
  AddFile(&response, "yirage_kernel.py", CudaPythonLoaderSource());
  AddFile(&response, "README.txt",
          absl::StrCat(
              "YiRage CUDA kernel for graph '", graph.name(), "' (job ", job_id,
              ").\nIn Python, from this folder (PyTorch with CUDA needed), with CUDA tensors "
              "of manifest.json's shapes and dtypes:\n  ",
              usage, "\nkernel.cu + manifest.json describe the launches for other callers.\n"));
  return response;
}

// Text safe inside a C or C++ // comment: printable ASCII, one line.
std::string CommentSafe(const std::string& text) {
  std::string out;
  for (char c : text) out += (c >= 0x20 && c < 0x7f) ? c : ' ';
  return out;
}

std::string TensorLine(const nlohmann::json& t) {
  std::vector<std::string> dims;
  for (const auto& d : t["shape"]) dims.push_back(std::to_string(d.get<int64_t>()));
  return absl::StrCat(t["name"].get<std::string>(), ": ", t["dtype"].get<std::string>(), " [",
                      absl::StrJoin(dims, ", "), "]");
}

// The compiler flag for a target name: -mcpu for Arm cores (GCC takes
// their names there), -march otherwise.
std::string TargetFlag(const std::string& march) {
  if (march.empty()) return "-march=native";
  for (const char* arm : {"neoverse", "cortex", "ampere", "apple", "a64fx"}) {
    if (absl::StartsWith(march, arm)) return "-mcpu=" + march;
  }
  return "-march=" + march;
}

// CPU: the stored source with its plan's entry points renamed, a header
// declaring them (visible; the build hides every other symbol), the
// manifest, a build script, a C++ caller and a Python wrapper.
absl::StatusOr<yirage::v1::GetKernelResponse> ExportCpuKernel(const std::string& job_id,
                                                              const JobStore::BestKernel& best,
                                                              const core::Graph& graph,
                                                              const ExportOptions& options) {
  // The CPU backend names each plan's entry point yirage_plan_<i>.
  std::smatch match;
  static const std::regex kEntry(R"(extern\s+"C"\s+int\s+(yirage_plan_[0-9]+)\s*\()");
  if (!std::regex_search(best.source, match, kEntry)) {
    return absl::InternalError("the stored source has no yirage_plan_<i> entry point");
  }
  const std::string plan_entry = match[1].str();
  const std::string base =
      CpuSymbolBase(job_id, best.candidate.candidate_id(), options.name_candidate);
  const std::string run = base + "_run", init = base + "_init", fini = base + "_fini";
  const std::string header = base + ".h", library = "lib" + base + ".so";
  std::string source = best.source;
  source = std::regex_replace(source, std::regex("\\b" + plan_entry + "_init\\b"), init);
  source = std::regex_replace(source, std::regex("\\b" + plan_entry + "_fini\\b"), fini);
  source = std::regex_replace(source, std::regex("\\b" + plan_entry + "\\b"), run);
  source = absl::StrCat("// YiRage CPU kernel, job ", job_id, ", candidate ",
                        best.candidate.candidate_id(),
                        ". The entry points are declared (and kept "
                        "visible) by the header.\n#include \"",
                        header, "\"\n", source);

  const nlohmann::json inputs = TensorList(graph, false), outputs = TensorList(graph, true);
  // The flags the CPU backend compiled and timed it with (CpuCompiler::Flags),
  // for the chosen target, every symbol but the header's hidden.
  const std::string build = absl::StrCat(
      "g++ -std=c++17 -O3 ", TargetFlag(options.march),
      " -fopenmp -fno-math-errno -ffp-contract=fast -fvisibility=hidden -shared -fPIC kernel.cpp "
      "-o ",
      library);
  const std::string calling = absl::StrCat(
      "call int ", init, "(void) once (allocates the scratch buffers; 0 on success), then ", run,
      " as often as needed (0 on success; not reentrant), then void ", fini,
      "(void) to free the scratch");
  nlohmann::json manifest = ManifestHeader("yirage-kernel/2", job_id, best, graph);
  manifest.update({
      {"source", "kernel.cpp"},
      {"header", header},
      {"library", library},
      {"entry_point", run},
      {"init", init},
      {"fini", fini},
      {"signature",
       absl::StrCat("extern \"C\" int ", run, "(const void* const* inputs, void* const* outputs)")},
      {"calling", calling},
      {"returns", "0 on success"},
      {"inputs", inputs},
      {"outputs", outputs},
      {"layout", "row-major, dense; float16/bfloat16 as IEEE 16-bit words"},
      {"march", options.march.empty() ? "native" : options.march},
      {"build", build},
      {"python", "import yirage_kernel; outputs = yirage_kernel.run(*inputs)"},
      {"threads", "OpenMP: set OMP_NUM_THREADS to choose"},
  });

  std::string guard = absl::AsciiStrToUpper(base) + "_H_";
  std::string h =
      absl::StrCat("// YiRage CPU kernel for graph '", CommentSafe(graph.name()), "' (job ", job_id,
                   ", candidate ", best.candidate.candidate_id(),
                   "): ", CommentSafe(best.candidate.plan().description()), "\n// Build: ", build,
                   "\n// Call: ", calling, ".\n// Inputs, in order (the `inputs` array):\n");
  for (const auto& t : inputs) absl::StrAppend(&h, "//   ", TensorLine(t), "\n");
  absl::StrAppend(&h, "// Outputs, in order (the `outputs` array):\n");
  for (const auto& t : outputs) absl::StrAppend(&h, "//   ", TensorLine(t), "\n");
  absl::StrAppend(
      &h, "// Layout: row-major, dense; float16/bfloat16 as IEEE 16-bit words.\n#ifndef ", guard,
      "\n#define ", guard, "\n\n#if defined(__GNUC__)\n#define ", base,
      "_API __attribute__((visibility(\"default\")))\n#else\n#define ", base,
      "_API\n#endif\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\nenum { ", base,
      "_num_inputs = ", inputs.size(), ", ", base, "_num_outputs = ", outputs.size(), " };\n\n",
      base, "_API int ", init, "(void);\n", base, "_API int ", run,
      "(const void* const* inputs, void* const* outputs);\n", base, "_API void ", fini,
      "(void);\n\n#ifdef __cplusplus\n}  // extern \"C\"\n#endif\n\n#endif  // ", guard, "\n");

  // A caller that builds against the kernel with no YiRage code.
  std::string example = absl::StrCat(
      "// Calls the exported kernel once on zero-filled buffers.\n// Build: ", build,
      "\n//        g++ -O2 call_example.cpp -L. -l", base,
      " -Wl,-rpath,. -o call_example\n#include <cstdio>\n#include <vector>\n\n#include \"", header,
      "\"\n\nint main() {\n  if (", init, "() != 0) {\n    std::printf(\"", init,
      " failed\\n\");\n    return 1;\n  }\n");
  std::vector<std::string> in_names, out_names;
  for (size_t i = 0; i < inputs.size(); ++i) {
    // Generated names, not tensor names: nothing of the graph's text reaches
    // the code but in comments.
    const std::string v = absl::StrCat("in", i);
    absl::StrAppend(&example, "  std::vector<unsigned char> ", v, "(",
                    inputs[i]["bytes"].get<int64_t>(), ");  // ",
                    CommentSafe(TensorLine(inputs[i])), "\n");
    in_names.push_back(v + ".data()");
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string v = absl::StrCat("out", i);
    absl::StrAppend(&example, "  std::vector<unsigned char> ", v, "(",
                    outputs[i]["bytes"].get<int64_t>(), ");  // ",
                    CommentSafe(TensorLine(outputs[i])), "\n");
    out_names.push_back(v + ".data()");
  }
  absl::StrAppend(&example, "  const void* inputs[] = {", absl::StrJoin(in_names, ", "), "};\n",
                  "  void* outputs[] = {", absl::StrJoin(out_names, ", "), "};\n",
                  "  int rc = ", run, "(inputs, outputs);\n", "  ", fini, "();\n",
                  "  std::printf(\"", run, " returned %d\\n\", rc);\n", "  return rc;\n}\n");

  yirage::v1::GetKernelResponse response;
  response.set_candidate_id(best.candidate.candidate_id());
  AddFile(&response, "kernel.cpp", source);
  AddFile(&response, header, h);
  AddFile(&response, "manifest.json", manifest.dump(2) + "\n");
  AddFile(&response, "call_example.cpp", example);
  AddFile(&response, "yirage_kernel.py", CpuPythonLoaderSource());
  AddFile(&response, "build.sh",
          absl::StrCat("#!/bin/sh\nset -e\ncd \"$(dirname \"$0\")\"\n", build,
                       "\ng++ -O2 call_example.cpp -L. -l", base,
                       " -Wl,-rpath,'$ORIGIN' -o call_example\n"));
  return response;
}

}  // namespace

std::string CpuSymbolBase(const std::string& job_id, int64_t candidate_id, bool name_candidate) {
  std::string base = "yirage_";
  for (char c : job_id) base += absl::ascii_isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (name_candidate) absl::StrAppend(&base, "_c", candidate_id);
  return base;
}

absl::Status ValidateMarch(const std::string& march) {
  const bool ok = march.size() <= 64 && std::all_of(march.begin(), march.end(), [](char c) {
                    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
                           c == '_' || c == '.';
                  });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("march: '", march.substr(0, 80),
                   "' is not a compiler target name (letters, digits, '-', '_' and '.', at most "
                   "64; e.g. x86-64-v3, znver4, sapphirerapids, neoverse-v2)"));
}

absl::StatusOr<yirage::v1::GetKernelResponse> ExportKernel(const std::string& job_id,
                                                           const JobStore::BestKernel& best,
                                                           const ExportOptions& options) {
  if (auto s = ValidateMarch(options.march); !s.ok()) return s;
  if (best.source.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", job_id, "': the candidate was stored without its source"));
  }
  auto graph = core::Graph::FromProto(best.graph);
  if (!graph.ok()) return graph.status();
  if (best.backend == "cuda") return ExportCudaKernel(job_id, best, *graph);
  if (best.backend == "cpu") return ExportCpuKernel(job_id, best, *graph, options);
  return absl::UnimplementedError(
      absl::StrCat("kernel export for backend '", best.backend, "' is not available yet"));
}

}  // namespace yirage::server
