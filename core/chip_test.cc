#include "core/chip.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "core/builtin_chips.h"
#include "core/chip_search.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace yirage::core {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using yirage::v1::Chip;

std::vector<Chip> Registry() {
  auto chips = BuiltinChips();
  EXPECT_TRUE(chips.ok()) << chips.status();
  return chips.ok() ? *chips : std::vector<Chip>();
}

std::string Match(const json& device, const std::string& backend) {
  auto m = MatchDevice(device, backend, Registry());
  return m.has_value() ? m->chip_id : "(none)";
}

json CustomChip() {
  return json::parse(R"({
    "chip_id": "acme_x1", "chip_name": "ACME X1", "vendor": "other", "category": "gpu",
    "arch_name": "Roadrunner", "arch_code": "rr1", "backend": "triton",
    "memory": {"capacity_gb": 48, "bandwidth_gbps": 1200, "memory_type": "HBM3",
               "bus_width_bits": 4096, "ecc": true},
    "compute": {"warp_size": 32, "num_compute_units": 100, "clock_mhz": 1800,
                "max_threads_per_block": 1024, "shared_mem_per_block_kb": 96,
                "l2_cache_mb": 40, "peak_tflops_fp32": 40.5, "peak_tflops_bf16": 400},
    "features": {"tensor_cores": true, "tensor_core_gen": 2, "bf16": true, "warp_specialization": true},
    "metadata": {"source": "ACME X1 datasheet rev 3"},
    "search_config": {"tile_sizes": [32, 64], "max_candidates": 12}
  })");
}

TEST(BuiltinChipsTest, CatalogIsValidAndCoversTheRequiredChips) {
  std::vector<Chip> chips = Registry();
  EXPECT_GE(chips.size(), 40u);
  std::set<std::string> ids;
  for (const Chip& c : chips) {
    SCOPED_TRACE(c.chip_id());
    EXPECT_TRUE(ValidateChip(c).ok());
    EXPECT_TRUE(ids.insert(c.chip_id()).second);
    ASSERT_TRUE(c.metadata().contains("source"));
    EXPECT_FALSE(c.metadata().at("source").empty());
    EXPECT_GT(c.memory().bandwidth_gbps(), 0);
  }
  for (const char* id : {"v100_sxm2_32gb", "t4",          "a100_sxm4_40gb",
                         "a100_sxm4_80gb", "a10",         "l4",
                         "l40s",           "rtx_3090",    "rtx_4090",
                         "h100_sxm",       "h100_pcie",   "h200",
                         "gh200",          "b200",        "mi210",
                         "mi250x",         "mi300x",      "mi325x",
                         "max_1550",       "arc_b580",    "ascend_910",
                         "ascend_910b",    "ascend_310p", "metax_c500",
                         "m2_ultra",       "m3_max",      "m4_max",
                         "tpu_v4",         "tpu_v5e",     "alveo_u250",
                         "trainium2",      "inferentia2", "epyc_9654",
                         "xeon_8480"}) {
    EXPECT_TRUE(ids.count(id)) << id;
  }
  // Dense, not sparse: the H100 SXM's dense BF16 is 989.5 TFLOPS (1979 sparse).
  for (const Chip& c : chips) {
    if (c.chip_id() == "h100_sxm") {
      EXPECT_DOUBLE_EQ(c.compute().peak_tflops_bf16(), 989.5);
    }
  }
}

// Every seed alias names a catalog chip and is not itself a catalog id.
TEST(BuiltinChipsTest, SeedAliasesNameCatalogChips) {
  auto chips = BuiltinChips();
  ASSERT_TRUE(chips.ok()) << chips.status();
  std::set<std::string> ids;
  for (const auto& c : *chips) ids.insert(c.chip_id());
  ASSERT_FALSE(SeedChipAliases().empty());
  for (const auto& [seed, id] : SeedChipAliases()) {
    EXPECT_TRUE(ids.count(std::string(id))) << seed << " -> " << id;
    EXPECT_FALSE(ids.count(std::string(seed))) << seed << " is a catalog id";
    EXPECT_EQ(SeedChipAlias(seed), id);
  }
  for (const char* seed : {"nvidia_v100", "nvidia_b200", "amd_mi250x", "amd_mi300x", "intel_pvc"}) {
    EXPECT_TRUE(SeedChipAlias(seed).has_value()) << seed;
  }
  EXPECT_FALSE(SeedChipAlias("h100_sxm").has_value());
}

TEST(BuiltinChipsTest, EveryFileOfDataChipsIsEmbeddedAndMarkedBuiltin) {
  std::set<std::string> files;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(YIRAGE_SOURCE_DIR) + "/data/chips")) {
    if (entry.path().extension() == ".json") files.insert(entry.path().stem().string());
  }
  std::set<std::string> embedded;
  for (const CatalogFile& file : BuiltinCatalogFiles()) embedded.insert(std::string(file.vendor));
  EXPECT_EQ(files, embedded);
  for (const Chip& c : Registry()) EXPECT_EQ(c.metadata().at("builtin"), "true") << c.chip_id();
}

TEST(BuiltinChipsTest, CatalogRulesNameTheFileAndTheChip) {
  const std::string acme = CustomChip().dump();
  auto parse = [](std::string_view vendor, const std::string& text) {
    CatalogFile file{vendor, text};
    return ParseCatalog(absl::MakeConstSpan(&file, 1));
  };
  auto ok = parse("other", "[" + acme + "]");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->at(0).metadata().at("builtin"), "true");

  auto wrong_vendor = parse("acme", "[" + acme + "]");
  EXPECT_EQ(wrong_vendor.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong_vendor.status().message()),
              HasSubstr("data/chips/acme.json: chip 'acme_x1': vendor: is 'other'"));

  json no_source = CustomChip();
  no_source["metadata"].erase("source");
  auto unsourced = parse("other", "[" + no_source.dump() + "]");
  EXPECT_THAT(std::string(unsourced.status().message()), HasSubstr("metadata.source"));

  const std::string twice_text = "[" + acme + "]";
  const CatalogFile twice[] = {{"other", twice_text}, {"other", twice_text}};
  auto duplicate = ParseCatalog(twice);
  EXPECT_THAT(std::string(duplicate.status().message()),
              HasSubstr("chip 'acme_x1': chip_id: appears more than once"));

  auto broken = parse("other", "[" + acme);
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(broken.status().message()), HasSubstr("data/chips/other.json: "));

  json invalid = CustomChip();
  invalid["memory"]["bandwidth_gbps"] = -1;
  auto refused = parse("other", "[" + invalid.dump() + "]");
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("bandwidth_gbps"));
}

TEST(ChipJsonTest, RoundTripsThroughJson) {
  auto chip = ChipFromJson(CustomChip());
  ASSERT_TRUE(chip.ok()) << chip.status();
  EXPECT_EQ(chip->chip_id(), "acme_x1");
  EXPECT_DOUBLE_EQ(chip->memory().capacity_gb(), 48);
  EXPECT_EQ(chip->compute().num_compute_units(), 100);
  EXPECT_TRUE(chip->features().other().at("warp_specialization"));
  EXPECT_EQ(chip->search_config().tile_sizes_size(), 2);
  auto again = ChipFromJson(ChipToJson(*chip));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(SameChip(*chip, *again));
  // The whole catalog round-trips as a list.
  std::vector<Chip> all = Registry();
  auto parsed = ParseChipListJson(ChipListToJsonText(all));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_TRUE(SameChip(all[i], (*parsed)[i]));
}

struct BadCase {
  std::string name;
  std::function<void(json&)> edit;
  std::string expected;  // substring of the message
};

TEST(ChipJsonTest, EveryValidationErrorNamesTheChipAndField) {
  std::vector<BadCase> cases = {
      {"missing id", [](json& j) { j.erase("chip_id"); }, "chip: chip_id: missing"},
      {"empty id", [](json& j) { j["chip_id"] = ""; }, "chip_id: missing"},
      {"bad id", [](json& j) { j["chip_id"] = "ACME-X1"; },
       "chip 'ACME-X1': chip_id: may hold only"},
      {"unknown vendor", [](json& j) { j["vendor"] = "acme"; },
       "chip 'acme_x1': vendor: unknown value 'acme'"},
      {"unknown category", [](json& j) { j["category"] = "qpu"; },
       "chip 'acme_x1': category: unknown value 'qpu'"},
      {"unknown backend", [](json& j) { j["backend"] = "opencl"; },
       "chip 'acme_x1': backend: unknown value 'opencl'"},
      {"missing backend", [](json& j) { j.erase("backend"); }, "chip 'acme_x1': backend: missing"},
      {"missing name", [](json& j) { j.erase("chip_name"); }, "chip 'acme_x1': chip_name: missing"},
      {"zero capacity", [](json& j) { j["memory"]["capacity_gb"] = 0; },
       "chip 'acme_x1': memory.capacity_gb: must be > 0"},
      {"missing capacity", [](json& j) { j["memory"].erase("capacity_gb"); },
       "memory.capacity_gb: must be > 0"},
      {"negative bandwidth", [](json& j) { j["memory"]["bandwidth_gbps"] = -5; },
       "chip 'acme_x1': memory.bandwidth_gbps: must be > 0"},
      {"negative size", [](json& j) { j["compute"]["shared_mem_per_block_kb"] = -1; },
       "chip 'acme_x1': compute.shared_mem_per_block_kb: must be >= 0"},
      {"negative units", [](json& j) { j["compute"]["num_compute_units"] = -4; },
       "compute.num_compute_units: must be >= 0"},
      {"fractional int", [](json& j) { j["compute"]["warp_size"] = 32.5; },
       "compute.warp_size: must be an integer"},
      {"string number", [](json& j) { j["memory"]["bandwidth_gbps"] = "1200"; },
       "memory.bandwidth_gbps: must be a number"},
      {"unknown field", [](json& j) { j["memory"]["capacity_gib"] = 48; },
       "chip 'acme_x1': memory.capacity_gib: unknown field"},
      {"non-bool feature", [](json& j) { j["features"]["fp8"] = "yes"; },
       "chip 'acme_x1': features.fp8: must be true or false"},
      // Found by chip_json_fuzz: accepted here, it did not come back from
      // ChipToJson (features.other refuses an empty key).
      {"unnamed feature", [](json& j) { j["features"][""] = true; },
       "chip 'acme_x1': features: a feature with an empty name"},
      {"zero tile",
       [](json& j) {
         j["search_config"]["tile_sizes"] = {32, 0};
       },
       "search_config.tile_sizes[1]: must be > 0"},
      {"metadata not string", [](json& j) { j["metadata"]["source"] = 3; },
       "metadata.source: must be a string"},
      {"memory not object", [](json& j) { j["memory"] = 48; }, "memory: must be an object"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    json j = CustomChip();
    c.edit(j);
    auto chip = ChipFromJson(j);
    ASSERT_FALSE(chip.ok());
    EXPECT_EQ(chip.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(chip.status().message()), HasSubstr(c.expected));
  }
  EXPECT_THAT(std::string(ParseChipJson("{\"chip_id\": ").status().message()),
              HasSubstr("malformed JSON"));
  EXPECT_THAT(std::string(ParseChipListJson("[{]").status().message()),
              HasSubstr("malformed JSON"));
  EXPECT_THAT(std::string(ParseChipListJson("{\"chip_id\": \"x\"}").status().message()),
              HasSubstr("expected a JSON list"));
  // In a list, a chip without an id is named by position; duplicates refused.
  json list = json::array({CustomChip(), CustomChip()});
  list[1].erase("chip_id");
  EXPECT_THAT(std::string(ParseChipListJson(list.dump()).status().message()),
              HasSubstr("chip #2: chip_id: missing"));
  list[1]["chip_id"] = "acme_x1";
  EXPECT_THAT(std::string(ParseChipListJson(list.dump()).status().message()),
              HasSubstr("chip 'acme_x1': chip_id: appears more than once"));
}

TEST(ChipMatchTest, NvidiaDevicesMatchByNameCountsAndMemory) {
  const double gib = 1024.0 * 1024 * 1024;
  auto cuda = [&](const char* name, const char* cc, int sms, double mem_gib) {
    return json{{"name", name},
                {"compute_capability", cc},
                {"sm_count", sms},
                {"memory_bytes", static_cast<int64_t>(mem_gib * gib)},
                {"l2_bytes", 50 * 1024 * 1024}};
  };
  EXPECT_EQ(Match(cuda("NVIDIA H100 80GB HBM3", "9.0", 132, 79.1), "cuda"), "h100_sxm");
  EXPECT_EQ(Match(cuda("NVIDIA H100 PCIe", "9.0", 114, 79.1), "cuda"), "h100_pcie");
  EXPECT_EQ(Match(cuda("NVIDIA H100 NVL", "9.0", 132, 93.1), "cuda"), "h100_nvl");
  EXPECT_EQ(Match(cuda("NVIDIA H200", "9.0", 132, 139.8), "cuda"), "h200");
  EXPECT_EQ(Match(cuda("NVIDIA GH200 480GB", "9.0", 132, 94.5), "cuda"), "gh200");
  EXPECT_EQ(Match(cuda("NVIDIA A100-SXM4-40GB", "8.0", 108, 39.4), "cuda"), "a100_sxm4_40gb");
  EXPECT_EQ(Match(cuda("NVIDIA A100-SXM4-80GB", "8.0", 108, 79.2), "cuda"), "a100_sxm4_80gb");
  EXPECT_EQ(Match(cuda("NVIDIA A100 80GB PCIe", "8.0", 108, 79.2), "cuda"), "a100_pcie_80gb");
  EXPECT_EQ(Match(cuda("NVIDIA A100-PCIE-40GB", "8.0", 108, 39.4), "cuda"), "a100_pcie_40gb");
  // A bare "A100" is told apart by its memory.
  EXPECT_EQ(Match(cuda("NVIDIA A100", "8.0", 108, 79.2), "cuda"), "a100_sxm4_80gb");
  EXPECT_EQ(Match(cuda("NVIDIA A10", "8.6", 72, 22.0), "cuda"), "a10");
  EXPECT_EQ(Match(cuda("NVIDIA L40S", "8.9", 142, 44.4), "cuda"), "l40s");
  EXPECT_EQ(Match(cuda("NVIDIA GeForce RTX 4090", "8.9", 128, 23.6), "cuda"), "rtx_4090");
  EXPECT_EQ(Match(cuda("Tesla T4", "7.5", 40, 14.6), "cuda"), "t4");
  // An H100-named device whose properties contradict the H100 entries (and
  // every other) is not forced onto one.
  EXPECT_EQ(Match(cuda("NVIDIA H100 80GB HBM3", "9.0", 132, 139.8), "cuda"), "(none)");
  EXPECT_EQ(Match(cuda("NVIDIA H100 PCIe", "9.0", 132, 79.1), "cuda"), "h100_sxm");
  EXPECT_EQ(Match(cuda("NVIDIA Graphics Device", "12.0", 170, 31.4), "cuda"), "(none)");
  // Only chips of the worker's backend are considered.
  EXPECT_EQ(Match(cuda("NVIDIA H200", "9.0", 132, 139.8), "hip"), "(none)");
}

TEST(ChipMatchTest, OtherVendorsAndCpus) {
  EXPECT_EQ(Match({{"name", "AMD Instinct MI300X"},
                   {"gcn_arch_name", "gfx942:sramecc+:xnack-"},
                   {"compute_units", 304},
                   {"memory_bytes", int64_t{205822885888}}},
                  "hip"),
            "mi300x");
  // An MI250X shows up as two devices of half the package each.
  EXPECT_EQ(Match({{"name", "AMD Instinct MI250X"},
                   {"gcn_arch_name", "gfx90a"},
                   {"compute_units", 110},
                   {"memory_bytes", int64_t{68702699520}}},
                  "hip"),
            "mi250x");
  EXPECT_EQ(Match({{"name", "Intel(R) Data Center GPU Max 1550"}}, "level_zero"), "max_1550");
  EXPECT_EQ(Match({{"vendor", "AuthenticAMD"},
                   {"model", "AMD EPYC 9654 96-Core Processor"},
                   {"cores_physical", 8}},
                  "cpu"),
            "epyc_9654");
  EXPECT_EQ(Match({{"vendor", "GenuineIntel"},
                   {"model", "Intel(R) Xeon(R) Platinum 8480+"},
                   {"cores_physical", 56}},
                  "cpu"),
            "xeon_8480");
  EXPECT_EQ(
      Match({{"vendor", "AuthenticAMD"}, {"model", "AMD EPYC"}, {"cores_physical", 2}}, "cpu"),
      "(none)");
  EXPECT_EQ(NormalizeDeviceName("Intel(R) Xeon(R) Platinum 8480+"), "intel xeon platinum 8480");
}

TEST(ChipMatchTest, UnknownDeviceIsDescribedFromItsPropertiesAndThenMatchesItself) {
  json cpu = {{"backend", "cpu"},
              {"vendor", "AuthenticAMD"},
              {"model", "AMD EPYC"},
              {"cores_physical", 2},
              {"cores_logical", 2},
              {"simd", {"avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni"}},
              {"cache_bytes", {{"l1d", 32768}, {"l2", 1048576}, {"l3", 33554432}}},
              {"memory_bytes", int64_t{8} << 30}};
  auto chip = ChipFromDevice(cpu, "cpu");
  ASSERT_TRUE(chip.ok()) << chip.status();
  EXPECT_EQ(chip->metadata().at("detected"), kDetectedUnknownDevice);
  EXPECT_THAT(chip->chip_id(), ::testing::StartsWith("detected_cpu_amd_epyc_"));
  EXPECT_EQ(chip->vendor(), "amd");
  EXPECT_EQ(chip->category(), "cpu");
  EXPECT_EQ(chip->compute().num_compute_units(), 2);
  EXPECT_EQ(chip->compute().simd_width_bits(), 512);
  EXPECT_TRUE(chip->features().avx512());
  EXPECT_TRUE(chip->features().avx2());
  EXPECT_FALSE(chip->features().amx());
  EXPECT_DOUBLE_EQ(chip->compute().l3_cache_mb(), 32);
  EXPECT_DOUBLE_EQ(chip->compute().l2_cache_mb(), 2);
  EXPECT_DOUBLE_EQ(chip->memory().capacity_gb(), 8);
  std::vector<Chip> registry = Registry();
  registry.push_back(*chip);
  auto m = MatchDevice(cpu, "cpu", registry);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->chip_id, chip->chip_id());
  // The same name with other properties is another device.
  cpu["cores_physical"] = 4;
  EXPECT_FALSE(MatchDevice(cpu, "cpu", registry).has_value());
  auto other = ChipFromDevice(cpu, "cpu");
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->chip_id(), chip->chip_id());
  // A GPU: bandwidth from the memory clock and bus width.
  json gpu = {{"name", "NVIDIA Future GPU"},
              {"compute_capability", "12.0"},
              {"sm_count", 170},
              {"memory_bytes", int64_t{32} << 30},
              {"memory_clock_khz", 14000000},
              {"memory_bus_width_bits", 512},
              {"shared_memory_per_block_optin_bytes", 101376},
              {"l2_bytes", 96 << 20},
              {"warp_size", 32},
              {"max_threads_per_block", 1024}};
  auto g = ChipFromDevice(gpu, "cuda");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->vendor(), "nvidia");
  EXPECT_EQ(g->arch_code(), "sm_120");
  EXPECT_DOUBLE_EQ(g->memory().bandwidth_gbps(), 1792);
  EXPECT_DOUBLE_EQ(g->compute().shared_mem_per_block_kb(), 99);
  EXPECT_FALSE(ChipFromDevice(json{{"sm_count", 3}}, "cuda").ok());
}

TEST(ChipSearchTest, SearchSpaceFollowsTheChip) {
  std::map<std::string, Chip> by_id;
  for (const Chip& c : Registry()) by_id[c.chip_id()] = c;
  SearchOptions base;
  base.backend = "cuda";
  SearchOptions h100 = SearchOptionsForChip(by_id["h100_sxm"], base);
  EXPECT_EQ(h100.chip_id, "h100_sxm");
  EXPECT_EQ(h100.max_tile_bytes, 227 * 1024);
  EXPECT_EQ(h100.tile_sizes, (std::vector<int>{16, 32, 64, 128}));
  EXPECT_EQ(h100.block_threads, (std::vector<int>{32, 64, 128, 256, 512, 1024}));
  EXPECT_EQ(h100.grid_blocks, (std::vector<int>{132, 264, 528}));
  EXPECT_EQ(h100.warp_size, 32);
  // The T4: 64 KiB of shared memory and 1024 threads per SM.
  SearchOptions t4 = SearchOptionsForChip(by_id["t4"], base);
  EXPECT_EQ(t4.tile_sizes, (std::vector<int>{16, 32, 64}));
  EXPECT_EQ(t4.grid_blocks, (std::vector<int>{40, 80, 160}));
  // AMD: 64-wide wavefronts.
  SearchOptions mi300 = SearchOptionsForChip(by_id["mi300x"], base);
  EXPECT_EQ(mi300.block_threads, (std::vector<int>{64, 128, 256, 512, 1024}));
  // CPUs: tiles in the per-core L2, threads = cores, vectors = SIMD width.
  base.backend = "cpu";
  SearchOptions epyc = SearchOptionsForChip(by_id["epyc_9654"], base);
  EXPECT_EQ(epyc.num_threads, 96);
  EXPECT_EQ(epyc.simd_width_floats, 16);
  EXPECT_EQ(epyc.max_tile_bytes, 1 << 20);
  EXPECT_EQ(epyc.tile_sizes, (std::vector<int>{16, 32, 64, 128, 256}));
  EXPECT_EQ(epyc.cache_bytes, 4 << 20);
  EXPECT_TRUE(epyc.block_threads.empty());
  SearchOptions graviton = SearchOptionsForChip(by_id["graviton4"], base);
  EXPECT_EQ(graviton.simd_width_floats, 4);
  // The roofline's figures (core/cost_model.h): the registry's.
  EXPECT_DOUBLE_EQ(h100.memory_bandwidth_gbps, 3350);
  EXPECT_DOUBLE_EQ(h100.peak_tflops_fp32, 67);
  EXPECT_DOUBLE_EQ(h100.peak_tflops_fp16, 989.5);
  EXPECT_DOUBLE_EQ(h100.peak_tflops_bf16, 989.5);
  EXPECT_DOUBLE_EQ(epyc.memory_bandwidth_gbps, 460.8);
  // A CPU without a fp32 peak: two FMA pipes of its widest vector a core,
  // at its clock (2.5 GHz where it has none, as a detected CPU).
  Chip detected;
  detected.set_category("cpu");
  detected.mutable_compute()->set_num_compute_units(2);
  detected.mutable_compute()->set_simd_width_bits(512);
  EXPECT_DOUBLE_EQ(SearchOptionsForChip(detected, base).peak_tflops_fp32,
                   4.0 * 16 * 2 * 2.5e9 / 1e12);
  detected.mutable_compute()->set_clock_mhz(3000);
  EXPECT_DOUBLE_EQ(SearchOptionsForChip(detected, base).peak_tflops_fp32,
                   4.0 * 16 * 2 * 3e9 / 1e12);
  // search_config overrides the derived values.
  auto custom = ChipFromJson(CustomChip());
  ASSERT_TRUE(custom.ok());
  SearchOptions acme = SearchOptionsForChip(*custom, SearchOptions{});
  EXPECT_EQ(acme.tile_sizes, (std::vector<int>{32, 64}));
  EXPECT_EQ(acme.max_candidates, 12);
  SearchOptions budgeted;
  budgeted.max_candidates = 5;
  EXPECT_EQ(SearchOptionsForChip(*custom, budgeted).max_candidates, 5);
}

}  // namespace
}  // namespace yirage::core

namespace yirage::core {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Recorded from the driver of a real H200 (tests/integration/
// capture_cuda_probe.py, the keys backends/cuda's probe reports).
TEST(ChipMatchTest, RecordedH200IsTheH200AndAgreesWithItsEntry) {
  json device =
      json::parse(ReadText(std::string(YIRAGE_SOURCE_DIR) + "/core/testdata/cuda_probe_h200.json"),
                  nullptr, false);
  ASSERT_TRUE(device.is_object());
  std::vector<Chip> registry = Registry();
  auto m = MatchDevice(device, "cuda", registry);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->chip_id, "h200");
  Chip entry;
  for (const Chip& c : registry) {
    if (c.chip_id() == "h200") entry = c;
  }
  auto measured = ChipFromDevice(device, "cuda");
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_EQ(measured->compute().num_compute_units(), entry.compute().num_compute_units());
  EXPECT_EQ(measured->compute().clock_mhz(), entry.compute().clock_mhz());
  EXPECT_DOUBLE_EQ(measured->compute().shared_mem_per_block_kb(),
                   entry.compute().shared_mem_per_block_kb());
  EXPECT_DOUBLE_EQ(measured->compute().shared_mem_per_cu_kb(),
                   entry.compute().shared_mem_per_cu_kb());
  EXPECT_DOUBLE_EQ(measured->compute().l2_cache_mb(), entry.compute().l2_cache_mb());
  EXPECT_NEAR(measured->memory().bandwidth_gbps(), entry.memory().bandwidth_gbps(),
              0.02 * entry.memory().bandwidth_gbps());
  EXPECT_EQ(measured->arch_code(), entry.arch_code());
}

// On a host with CUDA GPUs: every device is described by the driver and
// either matches a registry chip consistent with it or is described as an
// unknown device. Skipped where there is no driver or device.
TEST(ChipMatchTest, LiveCudaDevicesResolve) {
  const std::string cmd = std::string("python3 ") + YIRAGE_SOURCE_DIR +
                          "/tests/integration/capture_cuda_probe.py 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  const int status = pclose(pipe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) GTEST_SKIP() << "no CUDA device: " << out;
  json devices = json::parse(out, nullptr, false);
  ASSERT_TRUE(devices.is_array()) << out;
  std::vector<Chip> registry = Registry();
  for (const json& d : devices) {
    SCOPED_TRACE(d.dump());
    auto m = MatchDevice(d, "cuda", registry);
    if (m.has_value()) {
      for (const Chip& c : registry) {
        if (c.chip_id() == m->chip_id) {
          EXPECT_EQ(c.compute().num_compute_units(), d["sm_count"].get<int>());
        }
      }
    } else {
      EXPECT_TRUE(ChipFromDevice(d, "cuda").ok());
    }
  }
}

}  // namespace
}  // namespace yirage::core
