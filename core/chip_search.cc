#include "core/chip_search.h"

#include <algorithm>
#include <cstdint>

namespace yirage::core {
namespace {

constexpr int kMinTile = 16;
constexpr int kMaxTile = 512;
constexpr int kDefaultMaxThreadsPerBlock = 1024;
constexpr int kGpuVectorFloats = 4;  // 128-bit vector loads
constexpr double kDefaultCpuClockMhz = 2500;

// Bytes two fp32 operand tiles of t x t take (a matmul's A and B tiles).
int64_t TileBytes(int t) { return int64_t{2} * t * t * 4; }

}  // namespace

SearchOptions SearchOptionsForChip(const yirage::v1::Chip& chip, SearchOptions o) {
  const auto& c = chip.compute();
  const bool cpu = chip.category() == "cpu";
  o.chip_id = chip.chip_id();
  o.num_compute_units = c.num_compute_units();
  o.warp_size = cpu ? 1 : c.warp_size();
  o.max_threads_per_block = cpu ? 0 : c.max_threads_per_block();

  const int units = std::max(1, c.num_compute_units());
  if (cpu) {
    // L2 is private per core: a kernel's tiles should stay there.
    const int64_t l2_per_core =
        c.l2_cache_mb() > 0 ? static_cast<int64_t>(c.l2_cache_mb() * 1024 * 1024 / units) : 0;
    o.max_tile_bytes = l2_per_core > 0 ? l2_per_core : static_cast<int64_t>(c.l1_cache_kb() * 1024);
    const double llc_mb = c.l3_cache_mb() > 0 ? c.l3_cache_mb() : c.l2_cache_mb();
    o.cache_bytes = static_cast<int64_t>(llc_mb * 1024 * 1024 / units);
    if (c.num_compute_units() > 0) o.num_threads = c.num_compute_units();
    int simd_bits = c.simd_width_bits();
    if (simd_bits <= 0) {
      simd_bits = chip.features().avx512() ? 512
                  : chip.features().avx2() ? 256
                  : chip.features().neon() ? 128
                                           : 0;
    }
    if (simd_bits >= 32) o.simd_width_floats = simd_bits / 32;
  } else {
    const double smem_kb =
        c.shared_mem_per_block_kb() > 0 ? c.shared_mem_per_block_kb() : c.shared_mem_per_cu_kb();
    o.max_tile_bytes = static_cast<int64_t>(smem_kb * 1024);
    o.cache_bytes = static_cast<int64_t>(c.l2_cache_mb() * 1024 * 1024 / units);
    o.simd_width_floats = kGpuVectorFloats;
  }

  o.tile_sizes.clear();
  if (o.max_tile_bytes > 0) {
    for (int t = kMinTile; t <= kMaxTile; t *= 2) {
      if (TileBytes(t) <= o.max_tile_bytes) o.tile_sizes.push_back(t);
    }
  }
  o.block_threads.clear();
  if (!cpu && o.warp_size > 0) {
    int limit = o.max_threads_per_block > 0 ? o.max_threads_per_block : kDefaultMaxThreadsPerBlock;
    if (c.max_threads_per_cu() > 0) limit = std::min(limit, c.max_threads_per_cu());
    for (int t = o.warp_size; t <= limit; t *= 2) o.block_threads.push_back(t);
  }
  o.grid_blocks.clear();
  if (c.num_compute_units() > 0) {
    if (cpu) {
      o.grid_blocks.push_back(c.num_compute_units());
    } else {
      // Whole waves: 1, 2 and 4 blocks per compute unit, within the
      // resident-block limit.
      for (int waves : {1, 2, 4}) {
        if (c.max_blocks_per_cu() > 0 && waves > c.max_blocks_per_cu()) break;
        o.grid_blocks.push_back(waves * c.num_compute_units());
      }
    }
  }

  o.memory_bandwidth_gbps = chip.memory().bandwidth_gbps();
  o.peak_tflops_fp32 = c.peak_tflops_fp32();
  o.peak_tflops_fp16 = c.peak_tflops_fp16();
  o.peak_tflops_bf16 = c.peak_tflops_bf16();
  if (cpu && o.peak_tflops_fp32 <= 0 && c.num_compute_units() > 0 && o.simd_width_floats > 0) {
    // A detected CPU has no datasheet figure: two FMA pipes of the widest
    // vector a core, at its clock (or kDefaultCpuClockMhz).
    const double mhz = c.clock_mhz() > 0 ? c.clock_mhz() : kDefaultCpuClockMhz;
    o.peak_tflops_fp32 = 4.0 * o.simd_width_floats * c.num_compute_units() * mhz * 1e6 / 1e12;
  }
  const auto& sc = chip.search_config();
  if (!sc.tile_sizes().empty()) o.tile_sizes.assign(sc.tile_sizes().begin(), sc.tile_sizes().end());
  if (!sc.block_threads().empty()) {
    o.block_threads.assign(sc.block_threads().begin(), sc.block_threads().end());
  }
  if (!sc.grid_blocks().empty()) {
    o.grid_blocks.assign(sc.grid_blocks().begin(), sc.grid_blocks().end());
  }
  if (sc.max_tile_bytes() > 0) o.max_tile_bytes = sc.max_tile_bytes();
  if (sc.num_threads() > 0) o.num_threads = sc.num_threads();
  if (sc.simd_width_floats() > 0) o.simd_width_floats = sc.simd_width_floats();
  if (sc.max_candidates() > 0 && o.max_candidates == 0) o.max_candidates = sc.max_candidates();
  std::sort(o.tile_sizes.begin(), o.tile_sizes.end());
  return o;
}

yirage::v1::SearchSpace SearchSpaceOf(const SearchOptions& o) {
  yirage::v1::SearchSpace s;
  s.set_chip_id(o.chip_id);
  s.set_backend(o.backend);
  for (int t : o.tile_sizes) s.add_tile_sizes(t);
  for (int t : o.block_threads) s.add_block_threads(t);
  for (int g : o.grid_blocks) s.add_grid_blocks(g);
  s.set_max_tile_bytes(o.max_tile_bytes);
  s.set_num_threads(o.num_threads);
  s.set_cache_bytes(o.cache_bytes);
  s.set_simd_width_floats(o.simd_width_floats);
  s.set_warp_size(o.warp_size);
  s.set_num_compute_units(o.num_compute_units);
  s.set_max_threads_per_block(o.max_threads_per_block);
  s.set_max_candidates(o.max_candidates);
  return s;
}

}  // namespace yirage::core
