// The chips written into every new database (migration version 2 of
// server/job_store.cc). Numbers are from the vendor datasheets named in each
// chip's metadata "source"; TFLOPS are dense (not sparse); 0 means the
// datasheet does not say. Generated from a catalog, in the JSON format of
// docs/chip-registry.md, so it goes through the same parser and validation
// as an import.
#include "core/builtin_chips.h"

#include "core/chip.h"

namespace yirage::core {
namespace {

constexpr char kBuiltinChipsJson[] = R"json([
 {
  "chip_id": "v100_sxm2_32gb",
  "chip_name": "NVIDIA Tesla V100 SXM2 32GB",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Volta",
  "arch_code": "sm_70",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 32,
   "bandwidth_gbps": 900,
   "memory_type": "HBM2",
   "ecc": true,
   "bus_width_bits": 4096
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 80,
   "clock_mhz": 1530,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 2048,
   "max_blocks_per_cu": 32,
   "shared_mem_per_block_kb": 96,
   "shared_mem_per_cu_kb": 96,
   "l2_cache_mb": 6,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 15.7,
   "peak_tflops_fp16": 125
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 1,
   "fp16": true,
   "int8": true,
   "nvlink": true
  },
  "metadata": {
   "source": "NVIDIA Tesla V100 datasheet; CUDA C++ Programming Guide (per-SM limits of compute capability 7.0)",
   "match": "v100 sxm2 32gb|v100 sxm2|v100",
   "builtin": "true"
  }
 },
 {
  "chip_id": "t4",
  "chip_name": "NVIDIA T4",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Turing",
  "arch_code": "sm_75",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 16,
   "bandwidth_gbps": 320,
   "memory_type": "GDDR6",
   "ecc": true,
   "bus_width_bits": 256
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 40,
   "clock_mhz": 1590,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 1024,
   "max_blocks_per_cu": 16,
   "shared_mem_per_block_kb": 64,
   "shared_mem_per_cu_kb": 64,
   "l2_cache_mb": 4,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 8.1,
   "peak_tflops_fp16": 65,
   "peak_tflops_int8": 130
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 2,
   "fp16": true,
   "int8": true
  },
  "metadata": {
   "source": "NVIDIA T4 datasheet; CUDA C++ Programming Guide (per-SM limits of compute capability 7.5)",
   "match": "t4",
   "builtin": "true"
  }
 },
 {
  "chip_id": "a100_sxm4_40gb",
  "chip_name": "NVIDIA A100 SXM4 40GB",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Ampere",
  "arch_code": "sm_80",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 40,
   "bandwidth_gbps": 1555,
   "memory_type": "HBM2",
   "ecc": true,
   "bus_width_bits": 5120
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 108,
   "clock_mhz": 1410,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 2048,
   "max_blocks_per_cu": 32,
   "shared_mem_per_block_kb": 163,
   "shared_mem_per_cu_kb": 164,
   "l2_cache_mb": 40,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 19.5,
   "peak_tflops_fp16": 312,
   "peak_tflops_bf16": 312,
   "peak_tflops_int8": 624
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 3,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true,
   "nvlink": true,
   "multi_instance": true
  },
  "metadata": {
   "source": "NVIDIA A100 Tensor Core GPU datasheet; CUDA C++ Programming Guide (per-SM limits of compute capability 8.0)",
   "match": "a100 sxm4 40gb|a100",
   "builtin": "true"
  }
 },
 {
  "chip_id": "a100_sxm4_80gb",
  "chip_name": "NVIDIA A100 SXM4 80GB",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Ampere",
  "arch_code": "sm_80",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 80,
   "bandwidth_gbps": 2039,
   "memory_type": "HBM2e",
   "ecc": true,
   "bus_width_bits": 5120
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 108,
   "clock_mhz": 1410,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 2048,
   "max_blocks_per_cu": 32,
   "shared_mem_per_block_kb": 163,
   "shared_mem_per_cu_kb": 164,
   "l2_cache_mb": 40,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 19.5,
   "peak_tflops_fp16": 312,
   "peak_tflops_bf16": 312,
   "peak_tflops_int8": 624
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 3,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true,
   "nvlink": true,
   "multi_instance": true
  },
  "metadata": {
   "source": "NVIDIA A100 Tensor Core GPU datasheet; CUDA C++ Programming Guide (per-SM limits of compute capability 8.0)",
   "match": "a100 sxm4 80gb|a100",
   "builtin": "true"
  }
 },
 {
  "chip_id": "a100_pcie_40gb",
  "chip_name": "NVIDIA A100 PCIe 40GB",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Ampere",
  "arch_code": "sm_80",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 40,
   "bandwidth_gbps": 1555,
   "memory_type": "HBM2",
   "ecc": true,
   "bus_width_bits": 5120
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 108,
   "clock_mhz": 1410,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 2048,
   "max_blocks_per_cu": 32,
   "shared_mem_per_block_kb": 163,
   "shared_mem_per_cu_kb": 164,
   "l2_cache_mb": 40,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 19.5,
   "peak_tflops_fp16": 312,
   "peak_tflops_bf16": 312,
   "peak_tflops_int8": 624
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 3,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true,
   "nvlink": true,
   "multi_instance": true
  },
  "metadata": {
   "source": "NVIDIA A100 Tensor Core GPU datasheet; CUDA C++ Programming Guide (per-SM limits of compute capability 8.0)",
   "match": "a100 pcie 40gb|a100 pcie",
   "builtin": "true"
  }
 },
 {
  "chip_id": "a100_pcie_80gb",
  "chip_name": "NVIDIA A100 PCIe 80GB",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Ampere",
  "arch_code": "sm_80",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 80,
   "bandwidth_gbps": 1935,
   "memory_type": "HBM2e",
   "ecc": true,
   "bus_width_bits": 5120
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 108,
   "clock_mhz": 1410,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 2048,
   "max_blocks_per_cu": 32,
   "shared_mem_per_block_kb": 163,
   "shared_mem_per_cu_kb": 164,
   "l2_cache_mb": 40,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 19.5,
   "peak_tflops_fp16": 312,
   "peak_tflops_bf16": 312,
   "peak_tflops_int8": 624
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 3,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true,
   "nvlink": true,
   "multi_instance": true
  },
  "metadata": {
   "source": "NVIDIA A100 Tensor Core GPU datasheet; CUDA C++ Programming Guide (per-SM limits of compute capability 8.0)",
   "match": "a100 80gb pcie|a100 pcie 80gb|a100 pcie",
   "builtin": "true"
  }
 },
 {
  "chip_id": "a30",
  "chip_name": "NVIDIA A30",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Ampere",
  "arch_code": "sm_80",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 24,
   "bandwidth_gbps": 933,
   "memory_type": "HBM2",
   "ecc": true,
   "bus_width_bits": 3072
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 56,
   "clock_mhz": 1440,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 2048,
   "max_blocks_per_cu": 32,
   "shared_mem_per_block_kb": 163,
   "shared_mem_per_cu_kb": 164,
   "l2_cache_mb": 24,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 10.3,
   "peak_tflops_fp16": 165,
   "peak_tflops_bf16": 165,
   "peak_tflops_int8": 330
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 3,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true,
   "nvlink": true,
   "multi_instance": true
  },
  "metadata": {
   "source": "NVIDIA A30 Tensor Core GPU datasheet; CUDA C++ Programming Guide (per-SM limits of compute capability 8.0)",
   "match": "a30",
   "builtin": "true"
  }
 },
 {
  "chip_id": "a10",
  "chip_name": "NVIDIA A10",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Ampere",
  "arch_code": "sm_86",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 24,
   "bandwidth_gbps": 600,
   "memory_type": "GDDR6",
   "ecc": true,
   "bus_width_bits": 384
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 72,
   "clock_mhz": 1695,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 1536,
   "max_blocks_per_cu": 16,
   "shared_mem_per_block_kb": 99,
   "shared_mem_per_cu_kb": 100,
   "l2_cache_mb": 6,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 31.2,
   "peak_tflops_fp16": 125,
   "peak_tflops_bf16": 125,
   "peak_tflops_int8": 250
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 3,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true
  },
  "metadata": {
   "source": "NVIDIA A10 Tensor Core GPU datasheet; CUDA C++ Programming Guide (per-SM limits of compute capability 8.6)",
   "match": "a10",
   "builtin": "true"
  }
 },
 {
  "chip_id": "l4",
  "chip_name": "NVIDIA L4",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Ada Lovelace",
  "arch_code": "sm_89",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 24,
   "bandwidth_gbps": 300,
   "memory_type": "GDDR6",
   "ecc": true,
   "bus_width_bits": 192
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 58,
   "clock_mhz": 2040,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 1536,
   "max_blocks_per_cu": 24,
   "shared_mem_per_block_kb": 99,
   "shared_mem_per_cu_kb": 100,
   "l2_cache_mb": 48,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 30.3,
   "peak_tflops_fp16": 121,
   "peak_tflops_bf16": 121,
   "peak_tflops_fp8": 242,
   "peak_tflops_int8": 242
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 4,
   "fp8": true,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true
  },
  "metadata": {
   "source": "NVIDIA L4 Tensor Core GPU datasheet (dense = half the sparse figures); CUDA C++ Programming Guide (per-SM limits of compute capability 8.9)",
   "match": "l4",
   "builtin": "true"
  }
 },
 {
  "chip_id": "l40s",
  "chip_name": "NVIDIA L40S",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Ada Lovelace",
  "arch_code": "sm_89",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 48,
   "bandwidth_gbps": 864,
   "memory_type": "GDDR6",
   "ecc": true,
   "bus_width_bits": 384
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 142,
   "clock_mhz": 2520,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 1536,
   "max_blocks_per_cu": 24,
   "shared_mem_per_block_kb": 99,
   "shared_mem_per_cu_kb": 100,
   "l2_cache_mb": 96,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 91.6,
   "peak_tflops_fp16": 362,
   "peak_tflops_bf16": 362,
   "peak_tflops_fp8": 733,
   "peak_tflops_int8": 733
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 4,
   "fp8": true,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true
  },
  "metadata": {
   "source": "NVIDIA L40S datasheet (dense = half the sparse figures); CUDA C++ Programming Guide (per-SM limits of compute capability 8.9)",
   "match": "l40s",
   "builtin": "true"
  }
 },
 {
  "chip_id": "rtx_3090",
  "chip_name": "NVIDIA GeForce RTX 3090",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Ampere",
  "arch_code": "sm_86",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 24,
   "bandwidth_gbps": 936,
   "memory_type": "GDDR6X",
   "ecc": false,
   "bus_width_bits": 384
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 82,
   "clock_mhz": 1695,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 1536,
   "max_blocks_per_cu": 16,
   "shared_mem_per_block_kb": 99,
   "shared_mem_per_cu_kb": 100,
   "l2_cache_mb": 6,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 35.6,
   "peak_tflops_fp16": 71,
   "peak_tflops_bf16": 71,
   "peak_tflops_int8": 284
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 3,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true,
   "nvlink": true
  },
  "metadata": {
   "source": "NVIDIA Ampere GA102 GPU architecture whitepaper (tensor FP16/BF16 with FP32 accumulate, dense); CUDA C++ Programming Guide (per-SM limits of compute capability 8.6)",
   "match": "rtx 3090",
   "builtin": "true"
  }
 },
 {
  "chip_id": "rtx_4090",
  "chip_name": "NVIDIA GeForce RTX 4090",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Ada Lovelace",
  "arch_code": "sm_89",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 24,
   "bandwidth_gbps": 1008,
   "memory_type": "GDDR6X",
   "ecc": false,
   "bus_width_bits": 384
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 128,
   "clock_mhz": 2520,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 1536,
   "max_blocks_per_cu": 24,
   "shared_mem_per_block_kb": 99,
   "shared_mem_per_cu_kb": 100,
   "l2_cache_mb": 72,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 82.6,
   "peak_tflops_fp16": 165.2,
   "peak_tflops_bf16": 165.2,
   "peak_tflops_fp8": 330.3,
   "peak_tflops_int8": 660.6
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 4,
   "fp8": true,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true
  },
  "metadata": {
   "source": "NVIDIA Ada Lovelace GPU architecture whitepaper (FP32 accumulate, dense); CUDA C++ Programming Guide (per-SM limits of compute capability 8.9)",
   "match": "rtx 4090",
   "builtin": "true"
  }
 },
 {
  "chip_id": "h100_sxm",
  "chip_name": "NVIDIA H100 SXM5 80GB",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Hopper",
  "arch_code": "sm_90",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 80,
   "bandwidth_gbps": 3350,
   "memory_type": "HBM3",
   "ecc": true,
   "bus_width_bits": 5120
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 132,
   "clock_mhz": 1980,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 2048,
   "max_blocks_per_cu": 32,
   "shared_mem_per_block_kb": 227,
   "shared_mem_per_cu_kb": 228,
   "l2_cache_mb": 50,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 67,
   "peak_tflops_fp16": 989.5,
   "peak_tflops_bf16": 989.5,
   "peak_tflops_fp8": 1979,
   "peak_tflops_int8": 1979
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 4,
   "tma": true,
   "fp8": true,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true,
   "nvlink": true,
   "multi_instance": true
  },
  "metadata": {
   "source": "NVIDIA H100 Tensor Core GPU datasheet (dense = half the sparse figures); CUDA C++ Programming Guide (per-SM limits of compute capability 9.0)",
   "match": "h100 sxm|h100 80gb hbm3|h100",
   "builtin": "true"
  }
 },
 {
  "chip_id": "h100_pcie",
  "chip_name": "NVIDIA H100 PCIe 80GB",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Hopper",
  "arch_code": "sm_90",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 80,
   "bandwidth_gbps": 2000,
   "memory_type": "HBM2e",
   "ecc": true,
   "bus_width_bits": 5120
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 114,
   "clock_mhz": 1755,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 2048,
   "max_blocks_per_cu": 32,
   "shared_mem_per_block_kb": 227,
   "shared_mem_per_cu_kb": 228,
   "l2_cache_mb": 50,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 51,
   "peak_tflops_fp16": 756,
   "peak_tflops_bf16": 756,
   "peak_tflops_fp8": 1513,
   "peak_tflops_int8": 1513
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 4,
   "tma": true,
   "fp8": true,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true,
   "nvlink": true,
   "multi_instance": true
  },
  "metadata": {
   "source": "NVIDIA H100 Tensor Core GPU datasheet (dense = half the sparse figures); CUDA C++ Programming Guide (per-SM limits of compute capability 9.0)",
   "match": "h100 pcie",
   "builtin": "true"
  }
 },
 {
  "chip_id": "h100_nvl",
  "chip_name": "NVIDIA H100 NVL 94GB",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Hopper",
  "arch_code": "sm_90",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 94,
   "bandwidth_gbps": 3900,
   "memory_type": "HBM3",
   "ecc": true,
   "bus_width_bits": 6144
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 132,
   "clock_mhz": 1785,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 2048,
   "max_blocks_per_cu": 32,
   "shared_mem_per_block_kb": 227,
   "shared_mem_per_cu_kb": 228,
   "l2_cache_mb": 50,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 60,
   "peak_tflops_fp16": 835.5,
   "peak_tflops_bf16": 835.5,
   "peak_tflops_fp8": 1670.5,
   "peak_tflops_int8": 1670.5
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 4,
   "tma": true,
   "fp8": true,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true,
   "nvlink": true,
   "multi_instance": true
  },
  "metadata": {
   "source": "NVIDIA H100 Tensor Core GPU datasheet, H100 NVL column (dense = half the sparse figures); CUDA C++ Programming Guide (per-SM limits of compute capability 9.0)",
   "match": "h100 nvl",
   "builtin": "true"
  }
 },
 {
  "chip_id": "h200",
  "chip_name": "NVIDIA H200 SXM 141GB",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Hopper",
  "arch_code": "sm_90",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 141,
   "bandwidth_gbps": 4800,
   "memory_type": "HBM3e",
   "ecc": true,
   "bus_width_bits": 6016
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 132,
   "clock_mhz": 1980,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 2048,
   "max_blocks_per_cu": 32,
   "shared_mem_per_block_kb": 227,
   "shared_mem_per_cu_kb": 228,
   "l2_cache_mb": 60,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 67,
   "peak_tflops_fp16": 989.5,
   "peak_tflops_bf16": 989.5,
   "peak_tflops_fp8": 1979,
   "peak_tflops_int8": 1979
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 4,
   "tma": true,
   "fp8": true,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true,
   "nvlink": true,
   "multi_instance": true
  },
  "metadata": {
   "source": "NVIDIA H200 Tensor Core GPU datasheet (dense = half the sparse figures); CUDA C++ Programming Guide (per-SM limits of compute capability 9.0); L2 size and bus width as the CUDA driver reports them on an H200 (core/testdata/cuda_probe_h200.json)",
   "match": "h200",
   "builtin": "true"
  }
 },
 {
  "chip_id": "gh200",
  "chip_name": "NVIDIA GH200 Grace Hopper Superchip (96GB HBM3)",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Hopper",
  "arch_code": "sm_90",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 96,
   "bandwidth_gbps": 4000,
   "memory_type": "HBM3",
   "ecc": true,
   "bus_width_bits": 5120
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 132,
   "clock_mhz": 1980,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 2048,
   "max_blocks_per_cu": 32,
   "shared_mem_per_block_kb": 227,
   "shared_mem_per_cu_kb": 228,
   "l2_cache_mb": 50,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 67,
   "peak_tflops_fp16": 989.5,
   "peak_tflops_bf16": 989.5,
   "peak_tflops_fp8": 1979,
   "peak_tflops_int8": 1979
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 4,
   "tma": true,
   "fp8": true,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true,
   "nvlink": true,
   "multi_instance": true,
   "unified_memory": true
  },
  "metadata": {
   "source": "NVIDIA GH200 Grace Hopper Superchip datasheet (dense = half the sparse figures); CUDA C++ Programming Guide (per-SM limits of compute capability 9.0)",
   "match": "gh200",
   "builtin": "true"
  }
 },
 {
  "chip_id": "b200",
  "chip_name": "NVIDIA B200 180GB",
  "vendor": "nvidia",
  "category": "gpu",
  "arch_name": "Blackwell",
  "arch_code": "sm_100",
  "backend": "cuda",
  "memory": {
   "capacity_gb": 180,
   "bandwidth_gbps": 7700,
   "memory_type": "HBM3e",
   "ecc": true,
   "bus_width_bits": 8192
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 148,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 2048,
   "max_blocks_per_cu": 32,
   "shared_mem_per_block_kb": 227,
   "shared_mem_per_cu_kb": 228,
   "registers_per_block": 65536,
   "peak_tflops_fp32": 75,
   "peak_tflops_fp16": 2250,
   "peak_tflops_bf16": 2250,
   "peak_tflops_fp8": 4500,
   "peak_tflops_int8": 4500
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 5,
   "tma": true,
   "fp8": true,
   "fp4": true,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true,
   "nvlink": true,
   "multi_instance": true
  },
  "metadata": {
   "source": "NVIDIA HGX B200 datasheet, per GPU = 1/8 of the 8-GPU figures, dense = half the sparse figures; CUDA C++ Programming Guide (per-SM limits of compute capability 10.0)",
   "match": "b200",
   "builtin": "true"
  }
 },
 {
  "chip_id": "mi210",
  "chip_name": "AMD Instinct MI210",
  "vendor": "amd",
  "category": "gpu",
  "arch_name": "CDNA 2",
  "arch_code": "gfx90a",
  "backend": "hip",
  "memory": {
   "capacity_gb": 64,
   "bandwidth_gbps": 1638.4,
   "memory_type": "HBM2e",
   "ecc": true,
   "bus_width_bits": 4096
  },
  "compute": {
   "warp_size": 64,
   "num_compute_units": 104,
   "clock_mhz": 1700,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 2048,
   "max_blocks_per_cu": 32,
   "shared_mem_per_block_kb": 64,
   "shared_mem_per_cu_kb": 64,
   "l2_cache_mb": 8,
   "peak_tflops_fp32": 22.6,
   "peak_tflops_fp16": 181,
   "peak_tflops_bf16": 181,
   "peak_tflops_int8": 181
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 2,
   "bf16": true,
   "fp16": true,
   "int8": true
  },
  "metadata": {
   "source": "AMD Instinct MI210 datasheet (FP32 vector); AMD ROCm HIP programming guide (LDS 64 KiB per CU, wavefront 64)",
   "match": "mi210",
   "builtin": "true"
  }
 },
 {
  "chip_id": "mi250x",
  "chip_name": "AMD Instinct MI250X",
  "vendor": "amd",
  "category": "gpu",
  "arch_name": "CDNA 2",
  "arch_code": "gfx90a",
  "backend": "hip",
  "memory": {
   "capacity_gb": 128,
   "bandwidth_gbps": 3276.8,
   "memory_type": "HBM2e",
   "ecc": true,
   "bus_width_bits": 8192
  },
  "compute": {
   "warp_size": 64,
   "num_compute_units": 220,
   "clock_mhz": 1700,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 2048,
   "max_blocks_per_cu": 32,
   "shared_mem_per_block_kb": 64,
   "shared_mem_per_cu_kb": 64,
   "l2_cache_mb": 16,
   "peak_tflops_fp32": 47.9,
   "peak_tflops_fp16": 383,
   "peak_tflops_bf16": 383,
   "peak_tflops_int8": 383
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 2,
   "bf16": true,
   "fp16": true,
   "int8": true
  },
  "metadata": {
   "source": "AMD Instinct MI250X datasheet (FP32 vector; one package = 2 GCDs, each a HIP device); AMD ROCm HIP programming guide (LDS 64 KiB per CU, wavefront 64)",
   "match": "mi250x|mi250",
   "logical_devices": "2",
   "builtin": "true"
  }
 },
 {
  "chip_id": "mi300x",
  "chip_name": "AMD Instinct MI300X",
  "vendor": "amd",
  "category": "gpu",
  "arch_name": "CDNA 3",
  "arch_code": "gfx942",
  "backend": "hip",
  "memory": {
   "capacity_gb": 192,
   "bandwidth_gbps": 5300,
   "memory_type": "HBM3",
   "ecc": true,
   "bus_width_bits": 8192
  },
  "compute": {
   "warp_size": 64,
   "num_compute_units": 304,
   "clock_mhz": 2100,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 2048,
   "max_blocks_per_cu": 32,
   "shared_mem_per_block_kb": 64,
   "shared_mem_per_cu_kb": 64,
   "l2_cache_mb": 32,
   "l3_cache_mb": 256,
   "peak_tflops_fp32": 163.4,
   "peak_tflops_fp16": 1307.4,
   "peak_tflops_bf16": 1307.4,
   "peak_tflops_fp8": 2614.9,
   "peak_tflops_int8": 2614.9
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 3,
   "fp8": true,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true
  },
  "metadata": {
   "source": "AMD Instinct MI300X datasheet (dense); AMD ROCm HIP programming guide (LDS 64 KiB per CU, wavefront 64)",
   "match": "mi300x",
   "builtin": "true"
  }
 },
 {
  "chip_id": "mi325x",
  "chip_name": "AMD Instinct MI325X",
  "vendor": "amd",
  "category": "gpu",
  "arch_name": "CDNA 3",
  "arch_code": "gfx942",
  "backend": "hip",
  "memory": {
   "capacity_gb": 256,
   "bandwidth_gbps": 6000,
   "memory_type": "HBM3E",
   "ecc": true,
   "bus_width_bits": 8192
  },
  "compute": {
   "warp_size": 64,
   "num_compute_units": 304,
   "clock_mhz": 2100,
   "max_threads_per_block": 1024,
   "max_threads_per_cu": 2048,
   "max_blocks_per_cu": 32,
   "shared_mem_per_block_kb": 64,
   "shared_mem_per_cu_kb": 64,
   "l2_cache_mb": 32,
   "l3_cache_mb": 256,
   "peak_tflops_fp32": 163.4,
   "peak_tflops_fp16": 1307.4,
   "peak_tflops_bf16": 1307.4,
   "peak_tflops_fp8": 2614.9,
   "peak_tflops_int8": 2614.9
  },
  "features": {
   "tensor_cores": true,
   "tensor_core_gen": 3,
   "fp8": true,
   "bf16": true,
   "fp16": true,
   "int8": true,
   "sparsity": true
  },
  "metadata": {
   "source": "AMD Instinct MI325X datasheet (dense); AMD ROCm HIP programming guide (LDS 64 KiB per CU, wavefront 64)",
   "match": "mi325x",
   "builtin": "true"
  }
 },
 {
  "chip_id": "max_1550",
  "chip_name": "Intel Data Center GPU Max 1550",
  "vendor": "intel",
  "category": "gpu",
  "arch_name": "Xe-HPC (Ponte Vecchio)",
  "arch_code": "pvc",
  "backend": "level_zero",
  "memory": {
   "capacity_gb": 128,
   "bandwidth_gbps": 3276.8,
   "memory_type": "HBM2e",
   "ecc": true,
   "bus_width_bits": 8192
  },
  "compute": {
   "warp_size": 16,
   "num_compute_units": 128,
   "clock_mhz": 1600,
   "max_threads_per_block": 1024,
   "shared_mem_per_block_kb": 128,
   "shared_mem_per_cu_kb": 128,
   "l2_cache_mb": 408,
   "peak_tflops_fp32": 52.4,
   "peak_tflops_fp16": 838.9,
   "peak_tflops_bf16": 838.9,
   "peak_tflops_int8": 1677.7
  },
  "features": {
   "tensor_cores": true,
   "bf16": true,
   "fp16": true,
   "int8": true
  },
  "metadata": {
   "source": "Intel Data Center GPU Max 1550 product brief / ark.intel.com",
   "match": "gpu max 1550",
   "builtin": "true"
  }
 },
 {
  "chip_id": "arc_b580",
  "chip_name": "Intel Arc B580",
  "vendor": "intel",
  "category": "gpu",
  "arch_name": "Xe2-HPG (Battlemage)",
  "arch_code": "bmg_g21",
  "backend": "level_zero",
  "memory": {
   "capacity_gb": 12,
   "bandwidth_gbps": 456,
   "memory_type": "GDDR6",
   "ecc": false,
   "bus_width_bits": 192
  },
  "compute": {
   "warp_size": 16,
   "num_compute_units": 20,
   "clock_mhz": 2670,
   "max_threads_per_block": 1024,
   "l2_cache_mb": 18,
   "peak_tflops_int8": 233
  },
  "features": {
   "tensor_cores": true,
   "bf16": true,
   "fp16": true,
   "int8": true
  },
  "metadata": {
   "source": "Intel Arc B580 specifications, intel.com (peak INT8 233 TOPS)",
   "match": "arc b580|b580",
   "builtin": "true"
  }
 },
 {
  "chip_id": "ascend_910",
  "chip_name": "Huawei Ascend 910",
  "vendor": "huawei",
  "category": "npu",
  "arch_name": "Da Vinci",
  "arch_code": "ascend910",
  "backend": "ascend",
  "memory": {
   "capacity_gb": 32,
   "bandwidth_gbps": 1200,
   "memory_type": "HBM2",
   "ecc": true,
   "bus_width_bits": 4096
  },
  "compute": {
   "num_compute_units": 32,
   "peak_tflops_fp16": 256,
   "peak_tflops_int8": 512
  },
  "features": {
   "tensor_cores": true,
   "fp16": true,
   "int8": true
  },
  "metadata": {
   "source": "Huawei Ascend 910 announcement specifications (32 Da Vinci AI cores)",
   "match": "ascend 910|ascend910",
   "builtin": "true"
  }
 },
 {
  "chip_id": "ascend_910b",
  "chip_name": "Huawei Ascend 910B",
  "vendor": "huawei",
  "category": "npu",
  "arch_name": "Da Vinci",
  "arch_code": "ascend910b",
  "backend": "ascend",
  "memory": {
   "capacity_gb": 64,
   "bandwidth_gbps": 1600,
   "memory_type": "HBM2e",
   "ecc": true
  },
  "compute": {
   "peak_tflops_fp16": 313,
   "peak_tflops_bf16": 313,
   "peak_tflops_int8": 626
  },
  "features": {
   "tensor_cores": true,
   "fp16": true,
   "bf16": true,
   "int8": true
  },
  "metadata": {
   "source": "Huawei Atlas 800T A2 training server specifications (per NPU); AI core count varies by 910B SKU",
   "match": "ascend 910b|ascend910b",
   "builtin": "true"
  }
 },
 {
  "chip_id": "ascend_310p",
  "chip_name": "Huawei Ascend 310P",
  "vendor": "huawei",
  "category": "npu",
  "arch_name": "Da Vinci",
  "arch_code": "ascend310p",
  "backend": "ascend",
  "memory": {
   "capacity_gb": 24,
   "bandwidth_gbps": 204.8,
   "memory_type": "LPDDR4X",
   "ecc": true
  },
  "compute": {
   "num_compute_units": 8,
   "peak_tflops_fp16": 70,
   "peak_tflops_int8": 140
  },
  "features": {
   "tensor_cores": true,
   "fp16": true,
   "int8": true
  },
  "metadata": {
   "source": "Huawei Atlas 300I Pro inference card datasheet (8 Da Vinci AI cores)",
   "match": "ascend 310p|ascend310p",
   "builtin": "true"
  }
 },
 {
  "chip_id": "metax_c500",
  "chip_name": "MetaX C500",
  "vendor": "metax",
  "category": "gpu",
  "arch_name": "MXC",
  "arch_code": "mxc500",
  "backend": "maca",
  "memory": {
   "capacity_gb": 64,
   "bandwidth_gbps": 1800,
   "memory_type": "HBM2e",
   "ecc": true
  },
  "compute": {
   "peak_tflops_fp16": 280,
   "peak_tflops_bf16": 280,
   "peak_tflops_int8": 560
  },
  "features": {
   "tensor_cores": true,
   "fp16": true,
   "bf16": true,
   "int8": true
  },
  "metadata": {
   "source": "MetaX C500 product page (metax-tech.com)",
   "match": "c500",
   "builtin": "true"
  }
 },
 {
  "chip_id": "m2_ultra",
  "chip_name": "Apple M2 Ultra (76-core GPU)",
  "vendor": "apple",
  "category": "gpu",
  "arch_name": "Apple GPU family 8",
  "arch_code": "apple8",
  "backend": "mps",
  "memory": {
   "capacity_gb": 192,
   "bandwidth_gbps": 800,
   "memory_type": "LPDDR5",
   "ecc": false,
   "bus_width_bits": 1024
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 76,
   "clock_mhz": 1398,
   "max_threads_per_block": 1024,
   "shared_mem_per_block_kb": 32,
   "peak_tflops_fp32": 27.2
  },
  "features": {
   "fp16": true,
   "bf16": true,
   "int8": true,
   "unified_memory": true
  },
  "metadata": {
   "source": "Apple M2 Ultra technical specifications (apple.com); FP32 = GPU cores x 128 ALUs x 2 x clock; Metal feature set tables (32 KiB threadgroup memory)",
   "match": "m2 ultra",
   "builtin": "true"
  }
 },
 {
  "chip_id": "m3_max",
  "chip_name": "Apple M3 Max (40-core GPU)",
  "vendor": "apple",
  "category": "gpu",
  "arch_name": "Apple GPU family 9",
  "arch_code": "apple9",
  "backend": "mps",
  "memory": {
   "capacity_gb": 128,
   "bandwidth_gbps": 400,
   "memory_type": "LPDDR5",
   "ecc": false,
   "bus_width_bits": 512
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 40,
   "clock_mhz": 1398,
   "max_threads_per_block": 1024,
   "shared_mem_per_block_kb": 32,
   "peak_tflops_fp32": 14.3
  },
  "features": {
   "fp16": true,
   "bf16": true,
   "int8": true,
   "unified_memory": true
  },
  "metadata": {
   "source": "Apple M3 Max technical specifications (apple.com); FP32 = GPU cores x 128 ALUs x 2 x clock; Metal feature set tables",
   "match": "m3 max",
   "builtin": "true"
  }
 },
 {
  "chip_id": "m4_max",
  "chip_name": "Apple M4 Max (40-core GPU)",
  "vendor": "apple",
  "category": "gpu",
  "arch_name": "Apple GPU family 9",
  "arch_code": "apple9",
  "backend": "mps",
  "memory": {
   "capacity_gb": 128,
   "bandwidth_gbps": 546,
   "memory_type": "LPDDR5X",
   "ecc": false,
   "bus_width_bits": 512
  },
  "compute": {
   "warp_size": 32,
   "num_compute_units": 40,
   "clock_mhz": 1578,
   "max_threads_per_block": 1024,
   "shared_mem_per_block_kb": 32,
   "peak_tflops_fp32": 16.2
  },
  "features": {
   "fp16": true,
   "bf16": true,
   "int8": true,
   "unified_memory": true
  },
  "metadata": {
   "source": "Apple M4 Max technical specifications (apple.com); FP32 = GPU cores x 128 ALUs x 2 x clock; Metal feature set tables",
   "match": "m4 max",
   "builtin": "true"
  }
 },
 {
  "chip_id": "tpu_v4",
  "chip_name": "Google Cloud TPU v4",
  "vendor": "google",
  "category": "tpu",
  "arch_name": "TPU v4",
  "arch_code": "v4",
  "backend": "tpu",
  "memory": {
   "capacity_gb": 32,
   "bandwidth_gbps": 1200,
   "memory_type": "HBM2",
   "ecc": true
  },
  "compute": {
   "num_compute_units": 2,
   "clock_mhz": 1050,
   "peak_tflops_bf16": 275,
   "peak_tflops_int8": 275
  },
  "features": {
   "tensor_cores": true,
   "bf16": true,
   "int8": true
  },
  "metadata": {
   "source": "Google Cloud TPU v4 documentation (per chip: 2 TensorCores)",
   "match": "tpu v4",
   "builtin": "true"
  }
 },
 {
  "chip_id": "tpu_v5e",
  "chip_name": "Google Cloud TPU v5e",
  "vendor": "google",
  "category": "tpu",
  "arch_name": "TPU v5e",
  "arch_code": "v5e",
  "backend": "tpu",
  "memory": {
   "capacity_gb": 16,
   "bandwidth_gbps": 819,
   "memory_type": "HBM2",
   "ecc": true
  },
  "compute": {
   "num_compute_units": 1,
   "peak_tflops_bf16": 197,
   "peak_tflops_int8": 394
  },
  "features": {
   "tensor_cores": true,
   "bf16": true,
   "int8": true
  },
  "metadata": {
   "source": "Google Cloud TPU v5e documentation (per chip: 1 TensorCore)",
   "match": "tpu v5e|tpu v5 lite|tpu v5litepod",
   "builtin": "true"
  }
 },
 {
  "chip_id": "tpu_v5p",
  "chip_name": "Google Cloud TPU v5p",
  "vendor": "google",
  "category": "tpu",
  "arch_name": "TPU v5p",
  "arch_code": "v5p",
  "backend": "tpu",
  "memory": {
   "capacity_gb": 95,
   "bandwidth_gbps": 2765,
   "memory_type": "HBM2e",
   "ecc": true
  },
  "compute": {
   "num_compute_units": 2,
   "peak_tflops_bf16": 459,
   "peak_tflops_int8": 918
  },
  "features": {
   "tensor_cores": true,
   "bf16": true,
   "int8": true
  },
  "metadata": {
   "source": "Google Cloud TPU v5p documentation (per chip: 2 TensorCores)",
   "match": "tpu v5p|tpu v5",
   "builtin": "true"
  }
 },
 {
  "chip_id": "alveo_u250",
  "chip_name": "AMD Xilinx Alveo U250",
  "vendor": "xilinx",
  "category": "fpga",
  "arch_name": "UltraScale+",
  "arch_code": "xcu250",
  "backend": "fpga",
  "memory": {
   "capacity_gb": 64,
   "bandwidth_gbps": 77,
   "memory_type": "DDR4",
   "ecc": true,
   "bus_width_bits": 288
  },
  "compute": {
   "peak_tflops_int8": 33.3
  },
  "features": {
   "int8": true
  },
  "metadata": {
   "source": "Xilinx Alveo U250 data center accelerator card data sheet (DS962)",
   "match": "alveo u250|u250",
   "builtin": "true"
  }
 },
 {
  "chip_id": "trainium2",
  "chip_name": "AWS Trainium2",
  "vendor": "aws",
  "category": "dsa",
  "arch_name": "NeuronCore-v3",
  "arch_code": "trn2",
  "backend": "nki",
  "memory": {
   "capacity_gb": 96,
   "bandwidth_gbps": 2900,
   "memory_type": "HBM",
   "ecc": true
  },
  "compute": {
   "num_compute_units": 8,
   "peak_tflops_fp32": 181,
   "peak_tflops_fp16": 667,
   "peak_tflops_bf16": 667,
   "peak_tflops_fp8": 1299
  },
  "features": {
   "tensor_cores": true,
   "fp8": true,
   "bf16": true,
   "fp16": true,
   "sparsity": true
  },
  "metadata": {
   "source": "AWS Trainium2 architecture, AWS Neuron documentation (dense)",
   "match": "trainium2|trn2",
   "builtin": "true"
  }
 },
 {
  "chip_id": "trainium",
  "chip_name": "AWS Trainium",
  "vendor": "aws",
  "category": "dsa",
  "arch_name": "NeuronCore-v2",
  "arch_code": "trn1",
  "backend": "nki",
  "memory": {
   "capacity_gb": 32,
   "bandwidth_gbps": 820,
   "memory_type": "HBM",
   "ecc": true
  },
  "compute": {
   "num_compute_units": 2,
   "peak_tflops_fp32": 47.5,
   "peak_tflops_fp16": 190,
   "peak_tflops_bf16": 190,
   "peak_tflops_fp8": 190
  },
  "features": {
   "tensor_cores": true,
   "fp8": true,
   "bf16": true,
   "fp16": true
  },
  "metadata": {
   "source": "AWS Trainium architecture, AWS Neuron documentation",
   "match": "trainium|trn1",
   "builtin": "true"
  }
 },
 {
  "chip_id": "inferentia2",
  "chip_name": "AWS Inferentia2",
  "vendor": "aws",
  "category": "dsa",
  "arch_name": "NeuronCore-v2",
  "arch_code": "inf2",
  "backend": "nki",
  "memory": {
   "capacity_gb": 32,
   "bandwidth_gbps": 820,
   "memory_type": "HBM",
   "ecc": true
  },
  "compute": {
   "num_compute_units": 2,
   "peak_tflops_fp32": 47.5,
   "peak_tflops_fp16": 190,
   "peak_tflops_bf16": 190,
   "peak_tflops_fp8": 190,
   "peak_tflops_int8": 190
  },
  "features": {
   "tensor_cores": true,
   "fp8": true,
   "bf16": true,
   "fp16": true,
   "int8": true
  },
  "metadata": {
   "source": "AWS Inferentia2 architecture, AWS Neuron documentation",
   "match": "inferentia2|inf2",
   "builtin": "true"
  }
 },
 {
  "chip_id": "epyc_9654",
  "chip_name": "AMD EPYC 9654",
  "vendor": "amd",
  "category": "cpu",
  "arch_name": "Zen 4 (Genoa)",
  "arch_code": "znver4",
  "backend": "cpu",
  "memory": {
   "capacity_gb": 6144,
   "bandwidth_gbps": 460.8,
   "memory_type": "DDR5-4800",
   "ecc": true,
   "bus_width_bits": 768
  },
  "compute": {
   "warp_size": 1,
   "num_compute_units": 96,
   "clock_mhz": 3700,
   "l1_cache_kb": 32,
   "l2_cache_mb": 96,
   "l3_cache_mb": 384,
   "simd_width_bits": 512
  },
  "features": {
   "avx2": true,
   "avx512": true,
   "bf16": true,
   "int8": true
  },
  "metadata": {
   "source": "AMD EPYC 9654 product specifications (amd.com): 96 cores, 1 MB L2 per core, 384 MB L3, 12 channels DDR5-4800",
   "match": "epyc 9654",
   "builtin": "true"
  }
 },
 {
  "chip_id": "epyc_9754",
  "chip_name": "AMD EPYC 9754",
  "vendor": "amd",
  "category": "cpu",
  "arch_name": "Zen 4c (Bergamo)",
  "arch_code": "znver4",
  "backend": "cpu",
  "memory": {
   "capacity_gb": 6144,
   "bandwidth_gbps": 460.8,
   "memory_type": "DDR5-4800",
   "ecc": true,
   "bus_width_bits": 768
  },
  "compute": {
   "warp_size": 1,
   "num_compute_units": 128,
   "clock_mhz": 3100,
   "l1_cache_kb": 32,
   "l2_cache_mb": 128,
   "l3_cache_mb": 256,
   "simd_width_bits": 512
  },
  "features": {
   "avx2": true,
   "avx512": true,
   "bf16": true,
   "int8": true
  },
  "metadata": {
   "source": "AMD EPYC 9754 product specifications (amd.com): 128 cores, 1 MB L2 per core, 256 MB L3, 12 channels DDR5-4800",
   "match": "epyc 9754",
   "builtin": "true"
  }
 },
 {
  "chip_id": "epyc_9965",
  "chip_name": "AMD EPYC 9965",
  "vendor": "amd",
  "category": "cpu",
  "arch_name": "Zen 5c (Turin)",
  "arch_code": "znver5",
  "backend": "cpu",
  "memory": {
   "capacity_gb": 6144,
   "bandwidth_gbps": 614.4,
   "memory_type": "DDR5-6400",
   "ecc": true,
   "bus_width_bits": 768
  },
  "compute": {
   "warp_size": 1,
   "num_compute_units": 192,
   "clock_mhz": 3700,
   "l1_cache_kb": 48,
   "l2_cache_mb": 192,
   "l3_cache_mb": 384,
   "simd_width_bits": 512
  },
  "features": {
   "avx2": true,
   "avx512": true,
   "bf16": true,
   "int8": true
  },
  "metadata": {
   "source": "AMD EPYC 9965 product specifications (amd.com): 192 cores, 1 MB L2 per core, 384 MB L3, 12 channels DDR5-6400",
   "match": "epyc 9965",
   "builtin": "true"
  }
 },
 {
  "chip_id": "xeon_8480",
  "chip_name": "Intel Xeon Platinum 8480+",
  "vendor": "intel",
  "category": "cpu",
  "arch_name": "Sapphire Rapids",
  "arch_code": "sapphirerapids",
  "backend": "cpu",
  "memory": {
   "capacity_gb": 4096,
   "bandwidth_gbps": 307.2,
   "memory_type": "DDR5-4800",
   "ecc": true,
   "bus_width_bits": 512
  },
  "compute": {
   "warp_size": 1,
   "num_compute_units": 56,
   "clock_mhz": 3800,
   "l1_cache_kb": 48,
   "l2_cache_mb": 112,
   "l3_cache_mb": 105,
   "simd_width_bits": 512
  },
  "features": {
   "avx2": true,
   "avx512": true,
   "bf16": true,
   "int8": true,
   "amx": true,
   "tensor_cores": true,
   "fp16": true
  },
  "metadata": {
   "source": "Intel Xeon Platinum 8480+ (ark.intel.com): 56 cores, 2 MB L2 per core, 105 MB L3, 8 channels DDR5-4800, AMX",
   "match": "xeon platinum 8480",
   "builtin": "true"
  }
 },
 {
  "chip_id": "xeon_6980p",
  "chip_name": "Intel Xeon 6980P",
  "vendor": "intel",
  "category": "cpu",
  "arch_name": "Granite Rapids",
  "arch_code": "graniterapids",
  "backend": "cpu",
  "memory": {
   "capacity_gb": 3072,
   "bandwidth_gbps": 614.4,
   "memory_type": "DDR5-6400",
   "ecc": true,
   "bus_width_bits": 768
  },
  "compute": {
   "warp_size": 1,
   "num_compute_units": 128,
   "clock_mhz": 3900,
   "l1_cache_kb": 48,
   "l2_cache_mb": 256,
   "l3_cache_mb": 504,
   "simd_width_bits": 512
  },
  "features": {
   "avx2": true,
   "avx512": true,
   "bf16": true,
   "int8": true,
   "amx": true,
   "tensor_cores": true,
   "fp16": true
  },
  "metadata": {
   "source": "Intel Xeon 6980P (ark.intel.com): 128 cores, 2 MB L2 per core, 504 MB L3, 12 channels DDR5-6400, AMX",
   "match": "xeon 6980p",
   "builtin": "true"
  }
 },
 {
  "chip_id": "graviton3",
  "chip_name": "AWS Graviton3",
  "vendor": "aws",
  "category": "cpu",
  "arch_name": "Neoverse V1",
  "arch_code": "neoverse-v1",
  "backend": "cpu",
  "memory": {
   "capacity_gb": 512,
   "bandwidth_gbps": 307.2,
   "memory_type": "DDR5-4800",
   "ecc": true,
   "bus_width_bits": 512
  },
  "compute": {
   "warp_size": 1,
   "num_compute_units": 64,
   "clock_mhz": 2600,
   "l1_cache_kb": 64,
   "l2_cache_mb": 64,
   "l3_cache_mb": 32,
   "simd_width_bits": 256
  },
  "features": {
   "neon": true,
   "sve": true,
   "bf16": true,
   "fp16": true,
   "int8": true
  },
  "metadata": {
   "source": "AWS Graviton3 (aws.amazon.com/ec2/graviton): 64 Neoverse V1 cores, 256-bit SVE, 8 channels DDR5-4800",
   "match": "graviton3",
   "builtin": "true"
  }
 },
 {
  "chip_id": "graviton4",
  "chip_name": "AWS Graviton4",
  "vendor": "aws",
  "category": "cpu",
  "arch_name": "Neoverse V2",
  "arch_code": "neoverse-v2",
  "backend": "cpu",
  "memory": {
   "capacity_gb": 768,
   "bandwidth_gbps": 537.6,
   "memory_type": "DDR5-5600",
   "ecc": true,
   "bus_width_bits": 768
  },
  "compute": {
   "warp_size": 1,
   "num_compute_units": 96,
   "clock_mhz": 2800,
   "l1_cache_kb": 64,
   "l2_cache_mb": 192,
   "l3_cache_mb": 36,
   "simd_width_bits": 128
  },
  "features": {
   "neon": true,
   "sve": true,
   "bf16": true,
   "fp16": true,
   "int8": true
  },
  "metadata": {
   "source": "AWS Graviton4 (aws.amazon.com/ec2/graviton): 96 Neoverse V2 cores, 2 MB L2 per core, 12 channels DDR5-5600",
   "match": "graviton4",
   "builtin": "true"
  }
 }
])json";

}  // namespace

std::string_view BuiltinChipsJson() { return kBuiltinChipsJson; }

absl::StatusOr<std::vector<yirage::v1::Chip>> BuiltinChips() {
  return ParseChipListJson(BuiltinChipsJson());
}

}  // namespace yirage::core
