#!/usr/bin/env python3
"""Prints the CUDA device description of every GPU, read from the CUDA driver
API (libcuda) with the same keys backends/cuda's probe() reports, so the chip
matcher can be checked against real devices (core/testdata/cuda_probe_*.json).
Exit 3 when the driver or a device is absent."""
import ctypes
import json
import sys

ATTR = {  # CUdevice_attribute values (cuda.h)
    "max_threads_per_block": 1,
    "shared_mem_per_block": 8,
    "warp_size": 10,
    "clock_khz": 13,
    "sm_count": 16,
    "memory_clock_khz": 36,
    "bus_width_bits": 37,
    "l2_bytes": 38,
    "max_threads_per_sm": 39,
    "cc_major": 75,
    "cc_minor": 76,
    "shared_mem_per_sm": 81,
    "shared_mem_per_block_optin": 97,
    "max_blocks_per_sm": 106,
}


def main():
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        print(json.dumps({"backend": "cuda", "reason": f"no CUDA driver: {e}"}))
        return 3
    if cuda.cuInit(0) != 0:
        print(json.dumps({"backend": "cuda", "reason": "cuInit failed"}))
        return 3
    count = ctypes.c_int(0)
    cuda.cuDeviceGetCount(ctypes.byref(count))
    if count.value == 0:
        print(json.dumps({"backend": "cuda", "reason": "no CUDA device"}))
        return 3
    devices = []
    for ordinal in range(count.value):
        dev = ctypes.c_int(0)
        cuda.cuDeviceGet(ctypes.byref(dev), ordinal)
        name = ctypes.create_string_buffer(256)
        cuda.cuDeviceGetName(name, 256, dev)
        mem = ctypes.c_size_t(0)
        cuda.cuDeviceTotalMem_v2(ctypes.byref(mem), dev)
        attrs = {}
        for key, attr in ATTR.items():
            v = ctypes.c_int(0)
            cuda.cuDeviceGetAttribute(ctypes.byref(v), attr, dev)
            attrs[key] = v.value
        d = {"backend": "cuda", "name": name.value.decode(),
             "compute_capability": f"{attrs.pop('cc_major')}.{attrs.pop('cc_minor')}",
             "memory_bytes": mem.value}
        d.update(attrs)
        devices.append(d)
    print(json.dumps(devices, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
